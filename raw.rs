// SPDX-License-Identifier: GPL-2.0

//! The C pointers behind the kernel crate's device wrappers, for the calls the crate does not
//! wrap (its own `as_raw` is private to it). Both wrappers are transparent over the C struct.

use kernel::{bindings, device, pci};

/// The `struct device` of `dev`.
pub(crate) fn dev<Ctx: device::DeviceContext>(dev: &device::Device<Ctx>) -> *mut bindings::device {
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

/// The `struct pci_dev` of `pdev`.
pub(crate) fn pdev<Ctx: device::DeviceContext>(pdev: &pci::Device<Ctx>) -> *mut bindings::pci_dev {
    core::ptr::from_ref(pdev)
        .cast::<bindings::pci_dev>()
        .cast_mut()
}
