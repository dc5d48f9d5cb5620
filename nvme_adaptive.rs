// SPDX-License-Identifier: GPL-2.0

//! nvme-adaptive: an NVMe PCI driver with per-queue adaptive interrupt polling.
//!
//! The driver never binds a controller by itself: its only ID entry is "override only", so a
//! device is bound only after the user writes `nvme_adaptive` to its `driver_override`.

use kernel::{
    bindings,
    device::Core,
    device_id::IdArray,
    io::Io,
    pci,
    prelude::*, //
};

mod regs;

type Bar0<'a> = pci::Bar<'a, { regs::BAR0_MIN_SIZE }>;

/// Matches NVMe controllers (class 01:08:02), but only through `driver_override`.
const NVME_CLASS_OVERRIDE_ONLY: pci::DeviceId = {
    const ANY: u32 = !0;
    let raw = bindings::pci_device_id {
        vendor: ANY,
        device: ANY,
        subvendor: ANY,
        subdevice: ANY,
        class: bindings::PCI_CLASS_STORAGE_EXPRESS,
        class_mask: 0xff_ffff,
        driver_data: 0,
        override_only: bindings::PCI_ID_F_VFIO_DRIVER_OVERRIDE,
    };
    // SAFETY: `pci::DeviceId` is `#[repr(transparent)]` over `struct pci_device_id` and adds no
    // invariant beyond the C struct's.
    unsafe { core::mem::transmute::<bindings::pci_device_id, pci::DeviceId>(raw) }
};

// No `pci_device_table!`: that would emit a modalias and let udev load us for every NVMe device.
static PCI_TABLE: IdArray<pci::DeviceId, (), 1> = IdArray::new([(NVME_CLASS_OVERRIDE_ONLY, &())]);

struct NvmeAdaptiveDriver;

struct Controller<'bound> {
    pdev: &'bound pci::Device,
    _bar: Bar0<'bound>,
}

impl pci::Driver for NvmeAdaptiveDriver {
    type IdInfo = ();
    type Data<'bound> = Controller<'bound>;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        // `driver_override` matches any device, so check that this one really is NVMe.
        if pdev.pci_class() != pci::Class::STORAGE_EXPRESS {
            dev_err!(pdev, "not an NVMe controller (class {})\n", pdev.pci_class());
            return Err(ENODEV);
        }
        pdev.enable_device_mem()?;
        pdev.set_master();
        let bar = pdev.iomap_region_sized::<{ regs::BAR0_MIN_SIZE }>(0, c"nvme_adaptive")?;

        let csts = bar.read(regs::CSTS).into_raw();
        if csts == regs::DEVICE_GONE {
            dev_err!(pdev, "controller does not respond (CSTS reads all ones)\n");
            return Err(ENODEV);
        }
        let cap_lo = bar.read(regs::CAP_LO);
        let cap_hi = bar.read(regs::CAP_HI);
        let vs = bar.read(regs::VS);
        let cap = u64::from(cap_hi.into_raw()) << 32 | u64::from(cap_lo.into_raw());
        dev_info!(
            pdev,
            "cap {:#x}: mqes {} dstrd {} to {} css {:#x} mpsmin {} mpsmax {}; version {}.{}.{}; csts {:#x}\n",
            cap,
            cap_lo.mqes().get(),
            cap_hi.dstrd().get(),
            cap_lo.to().get(),
            cap_hi.css().get(),
            cap_hi.mpsmin().get(),
            cap_hi.mpsmax().get(),
            vs.major().get(),
            vs.minor().get(),
            vs.tertiary().get(),
            csts
        );
        Ok(Controller {
            pdev,
            _bar: bar,
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, _this: Pin<&Self::Data<'bound>>) {
        dev_info!(pdev, "unbinding\n");
    }
}

impl Drop for Controller<'_> {
    fn drop(&mut self) {
        dev_dbg!(self.pdev, "controller data released\n");
    }
}

kernel::module_pci_driver! {
    type: NvmeAdaptiveDriver,
    name: "nvme_adaptive",
    authors: ["nvme-adaptive developers"],
    description: "NVMe PCI driver with per-queue adaptive interrupt polling",
    license: "GPL v2",
}
