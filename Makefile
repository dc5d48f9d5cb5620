# SPDX-License-Identifier: GPL-2.0-only
#
# In a kernel tree: obj-$(CONFIG_NVME_ADAPTIVE) through Kconfig.
# Out of tree:      make KDIR=/path/to/kernel/build [LLVM=1|LLVM=-19]
#                   make KDIR=... clean
#
# The module is a transport for nvme-core: its C part includes nvme-core's private header
# (drivers/nvme/host/nvme.h), so the kernel's source tree must be reachable from KDIR (a tree
# built in place, or with O= whose 'source' link points to it), or, with installed headers,
# named: make KDIR=... NVME_HOST_SRC=/path/to/linux-source/drivers/nvme/host (the same version).

ifneq ($(KERNELRELEASE),)

# An external build has no Kconfig entry for us: build the module.
ifneq ($(KBUILD_EXTMOD),)
CONFIG_NVME_ADAPTIVE ?= m
endif

obj-$(CONFIG_NVME_ADAPTIVE) += nvme_adaptive.o
nvme_adaptive-y := nvme_adaptive_main.o sys/glue.o

nvme_host := $(or $(NVME_HOST_SRC),$(srctree)/drivers/nvme/host)
ccflags-y += -I$(nvme_host) -I$(obj)

ifeq ($(wildcard $(nvme_host)/nvme.h),)
$(error $(nvme_host)/nvme.h not found: nvme_adaptive needs the kernel source tree, not headers alone; set NVME_HOST_SRC to the same version's drivers/nvme/host)
endif

# The stock driver's device table (quirks per device, then every NVMe controller by class),
# taken from the pci.c of the kernel being built against.
quiet_cmd_nvme_pci_ids = GEN     $@
      cmd_nvme_pci_ids = awk '/^static const struct pci_device_id nvme_id_table\[\] = \{/ { f = 1; next } f && /^\};/ { exit } f' $< > $@

$(obj)/nvme_pci_ids.h: $(nvme_host)/pci.c FORCE
	$(call if_changed,nvme_pci_ids)

$(obj)/sys/glue.o: $(obj)/nvme_pci_ids.h

targets += nvme_pci_ids.h
clean-files += nvme_pci_ids.h

else

KDIR ?= /lib/modules/$(shell uname -r)/build

modules clean modules_install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $@

.DEFAULT_GOAL := modules
.PHONY: modules clean modules_install

endif
