// SPDX-License-Identifier: GPL-2.0

//! The PCI driver registration: `kernel::pci::Adapter`'s probe and remove, plus the `shutdown`
//! callback that adapter lacks (on reboot and power-off the controller must be told to shut
//! down, or it may lose its volatile write cache).
//!
//! The ID table has one "override only" entry for the NVMe class: the driver core matches it
//! only for a device whose `driver_override` names this driver, and no modalias is emitted, so
//! the module never takes a controller from the stock driver behind the user's back.

use kernel::{
    bindings,
    device::{self, CoreInternal},
    device_id::{IdArray, IdTable},
    driver, pci,
    prelude::*,
    types::Opaque,
    ThisModule,
};

use crate::ctrl::Controller;

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

static PCI_TABLE: IdArray<pci::DeviceId, (), 1> = IdArray::new([(NVME_CLASS_OVERRIDE_ONLY, &())]);

pub(crate) struct NvmeAdapter;

// SAFETY: `struct pci_driver` is a C struct embedding `struct device_driver` at `driver`; the
// driver data is a `Controller`.
unsafe impl driver::DriverLayout for NvmeAdapter {
    type DriverType = bindings::pci_driver;
    type DriverData<'bound> = Controller<'bound>;
    const DEVICE_DRIVER_OFFSET: usize = core::mem::offset_of!(bindings::pci_driver, driver);
}

// SAFETY: `unregister` only follows a successful `register` of the same driver.
unsafe impl driver::RegistrationOps for NvmeAdapter {
    unsafe fn register(
        pdrv: &Opaque<bindings::pci_driver>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        // SAFETY: the driver struct is ours to fill before it is registered.
        unsafe {
            let d = pdrv.get();
            (*d).name = name.as_char_ptr();
            (*d).probe = Some(probe_callback);
            (*d).remove = Some(remove_callback);
            (*d).shutdown = Some(shutdown_callback);
            (*d).id_table = PCI_TABLE.as_ptr();
        }
        // SAFETY: `pdrv` is a valid, pinned `pci_driver`.
        kernel::error::to_result(unsafe {
            bindings::__pci_register_driver(pdrv.get(), module.as_ptr(), name.as_char_ptr())
        })
    }

    unsafe fn unregister(pdrv: &Opaque<bindings::pci_driver>) {
        // SAFETY: registered before (the caller's promise).
        unsafe { bindings::pci_unregister_driver(pdrv.get()) }
    }
}

/// # Safety
///
/// Called by the PCI core with a valid device being probed.
unsafe extern "C" fn probe_callback(
    pdev: *mut bindings::pci_dev,
    _id: *const bindings::pci_device_id,
) -> core::ffi::c_int {
    // SAFETY: valid for the duration of the callback; `pci::Device` is a transparent wrapper.
    let pdev = unsafe { &*pdev.cast::<pci::Device<CoreInternal<'_>>>() };
    kernel::error::from_result(|| {
        let ctrl = Controller::probe(pdev)?;
        pdev.as_ref().set_drvdata(Ok::<_, Error>(ctrl))?;
        Ok(0)
    })
}

/// The controller of a bound device.
///
/// # Safety
///
/// `pdev` must be bound to this driver (its probe succeeded and remove has not finished).
unsafe fn controller<'a>(pdev: &'a pci::Device<CoreInternal<'a>>) -> Pin<&'a Controller<'a>> {
    let dev: &device::Device<CoreInternal<'a>> = pdev.as_ref();
    // SAFETY: probe stored a `Controller` as the driver data (the caller's promise).
    unsafe { dev.drvdata_borrow::<Controller<'a>>() }
}

/// # Safety
///
/// Called by the PCI core for a device this driver probed successfully.
unsafe extern "C" fn remove_callback(pdev: *mut bindings::pci_dev) {
    // SAFETY: valid for the duration of the callback; `pci::Device` is a transparent wrapper.
    let pdev = unsafe { &*pdev.cast::<pci::Device<CoreInternal<'_>>>() };
    // SAFETY: the device is bound to us; the data is dropped by the driver core afterwards.
    unsafe { controller(pdev) }.unbind();
}

/// # Safety
///
/// Called by the PCI core at reboot or power-off for a device bound to this driver.
unsafe extern "C" fn shutdown_callback(pdev: *mut bindings::pci_dev) {
    // SAFETY: valid for the duration of the callback; `pci::Device` is a transparent wrapper.
    let pdev = unsafe { &*pdev.cast::<pci::Device<CoreInternal<'_>>>() };
    // SAFETY: shutdown is only called for bound devices.
    unsafe { controller(pdev) }.shutdown();
}
