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

# The rest of its quirks: the quirks= and noacpi parameters and the DMI quirks
# (sys/nvme_pci_quirks.awk), so that a controller gets exactly the stock driver's.
quiet_cmd_nvme_pci_quirks = GEN     $@
      cmd_nvme_pci_quirks = awk -f $(src)/sys/nvme_pci_quirks.awk $< > $@

$(obj)/nvme_pci_quirks.h: $(nvme_host)/pci.c $(src)/sys/nvme_pci_quirks.awk FORCE
	$(call if_changed,nvme_pci_quirks)

targets += nvme_pci_ids.h nvme_pci_quirks.h
# make clean reads this file without the kernel's configuration, so the bitcode is listed here.
clean-files += nvme_pci_ids.h nvme_pci_quirks.h nvme_adaptive_main.bc nvme_adaptive_main.m.bc sys/glue.bc \
	       rust_helpers.bc

# Where rustc's LLVM is Clang's and the kernel is not LTO-built, the C that the Rust code calls on
# every I/O is linked into it as LLVM bitcode before code generation, so that those calls are
# inlined as stock's are into its own functions: sys/glue.c (the block layer's and nvme-core's
# inline accessors) and the kernel's Rust helpers. The recipe is scripts/Makefile.build's for
# CONFIG_RUST_INLINE_HELPERS. Elsewhere glue.c is an object of its own and the calls stay.
ifeq ($(CONFIG_RUSTC_CLANG_LLVM_COMPATIBLE)$(CONFIG_LTO_CLANG),y)

nvme_adaptive-y := nvme_adaptive_main.o

# The kernel crate calls a C helper (rust/helpers/) for every lock, atomic, barrier and MMIO
# access. A kernel with CONFIG_RUST_INLINE_HELPERS provides them as bitcode for modules; for any
# other, they are compiled here from the kernel's source as it would compile them
# (rust/Makefile, helpers_module.bc), and linked in the same way.
bitcode := sys/glue.bc
ifdef CONFIG_RUST_INLINE_HELPERS
rust_helpers_bc := $(objtree)/rust/helpers/helpers_module.bc
else ifneq ($(wildcard $(srctree)/rust/helpers/helpers.c),)
rust_helpers_bc := $(obj)/rust_helpers.bc
bitcode += rust_helpers.bc
CFLAGS_rust_helpers.o := -g0
CFLAGS_REMOVE_rust_helpers.o := -Wmissing-prototypes -Wmissing-declarations

$(obj)/rust_helpers.bc: $(srctree)/rust/helpers/helpers.c FORCE
	$(call if_changed_dep,cc_bc_c)
endif

CFLAGS_sys/glue.o := -DNVA_GLUE_BITCODE

quiet_cmd_cc_bc_c = CC [M]  $@
      cmd_cc_bc_c = $(CC) $(c_flags) -c -emit-llvm $< -o $@

# Compiled as the module's part they are (MODULE, KBUILD_MODNAME), which Kbuild infers for
# objects only.
$(addprefix $(obj)/,$(bitcode)): private part-of-module := y
$(addprefix $(obj)/,$(bitcode)): private modname := nvme_adaptive

$(obj)/sys/glue.bc: $(src)/sys/glue.c $(obj)/nvme_pci_ids.h $(obj)/nvme_pci_quirks.h FORCE
	$(call if_changed_dep,cc_bc_c)

targets += $(bitcode)

# As rustc_o_rs with CONFIG_RUST_INLINE_HELPERS, plus glue.bc.
quiet_cmd_rustc_glue_o_rs = $(RUSTC_OR_CLIPPY_QUIET) $(quiet_modtag) $@
      cmd_rustc_glue_o_rs = $(rust_common_cmd) --emit=llvm-bc=$(@:.o=.bc) $< ; \
	$(LLVM_LINK) --internalize --suppress-warnings $(@:.o=.bc) $(obj)/sys/glue.bc \
		$(rust_helpers_bc) -o $(@:.o=.m.bc); \
	$(CC) $(CLANG_FLAGS) $(KBUILD_CFLAGS) -mllvm -trap-unreachable \
		-mllvm -no-trap-after-noreturn -Wno-override-module -c $(@:.o=.m.bc) -o $@ \
		$(cmd_ld_single) \
	$(cmd_objtool)

define rule_rustc_glue_o_rs
	$(call cmd_and_fixdep,rustc_glue_o_rs)
	$(call cmd,gen_objtooldep)
endef

$(obj)/nvme_adaptive_main.o: $(src)/nvme_adaptive_main.rs $(obj)/sys/glue.bc $(rust_helpers_bc) FORCE
	+$(call if_changed_rule,rustc_glue_o_rs)

else

nvme_adaptive-y := nvme_adaptive_main.o sys/glue.o

$(obj)/sys/glue.o: $(obj)/nvme_pci_ids.h $(obj)/nvme_pci_quirks.h

endif

else

KDIR ?= /lib/modules/$(shell uname -r)/build

modules clean modules_install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $@

.DEFAULT_GOAL := modules
.PHONY: modules clean modules_install

endif
