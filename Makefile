# SPDX-License-Identifier: GPL-2.0-only
#
# In a kernel tree: obj-$(CONFIG_NVME_ADAPTIVE) through Kconfig.
# Out of tree:      make KDIR=/path/to/built/kernel [LLVM=1|LLVM=-19]
#                   make KDIR=... clean

ifneq ($(KERNELRELEASE),)

# An external build has no Kconfig entry for us: build the module.
ifneq ($(KBUILD_EXTMOD),)
CONFIG_NVME_ADAPTIVE ?= m
endif

obj-$(CONFIG_NVME_ADAPTIVE) += nvme_adaptive.o

else

KDIR ?= /lib/modules/$(shell uname -r)/build

modules clean modules_install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $@

.DEFAULT_GOAL := modules
.PHONY: modules clean modules_install

endif
