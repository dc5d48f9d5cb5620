// SPDX-License-Identifier: GPL-2.0

//! The transport's attributes of the controller device, as `pci.c` shows them: the controller
//! memory buffer's registers (`cmb`, `cmbloc`, `cmbsz`, hidden without one) and whether the
//! host memory buffer is in use (`hmb`, writable, hidden when the controller asks for none).
//! nvme-core adds them with its own groups ([`GROUPS`], the controller ops' `dev_attr_groups`).
//!
//! C header: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h)

use core::ptr::{
    addr_of,
    addr_of_mut,
    null, //
};
use kernel::{
    bindings,
    ffi::{
        c_char,
        c_int,
        c_uint, //
    },
    prelude::*,
};

use super::{
    ffi,
    nvme::{
        Ctrl,
        Operations, //
    },
};

/// A table C only reads: attributes, groups, and arrays of pointers to them.
#[repr(transparent)]
pub(super) struct ReadOnly<T>(T);

// SAFETY: Nothing writes the tables after their static initialisation: sysfs and nvme-core
// only read them.
unsafe impl<T> Sync for ReadOnly<T> {}

type Show = unsafe extern "C" fn(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize;

type Store = unsafe extern "C" fn(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize;

/// An attribute of the controller device (`__ATTR`). The callbacks are fields of a union, or,
/// with `CONFIG_CFI`, of a struct beside their `const` variants: assigned, not initialised.
const fn attr(
    name: &'static CStr,
    mode: u16,
    show: Show,
    store: Option<Store>,
) -> ReadOnly<bindings::device_attribute> {
    let mut a: bindings::device_attribute = pin_init::zeroed();
    a.attr.name = kernel::str::as_char_ptr_in_const_context(name);
    a.attr.mode = mode;
    a.__bindgen_anon_1.show = Some(show);
    a.__bindgen_anon_2.store = store;
    ReadOnly(a)
}

static CMB: ReadOnly<bindings::device_attribute> = attr(c"cmb", 0o444, cmb_show, None);
static CMBLOC: ReadOnly<bindings::device_attribute> = attr(c"cmbloc", 0o444, cmbloc_show, None);
static CMBSZ: ReadOnly<bindings::device_attribute> = attr(c"cmbsz", 0o444, cmbsz_show, None);
static HMB: ReadOnly<bindings::device_attribute> = attr(c"hmb", 0o644, hmb_show, Some(hmb_store));

static ATTRS: ReadOnly<[*const bindings::attribute; 5]> = ReadOnly([
    addr_of!(CMB.0.attr),
    addr_of!(CMBLOC.0.attr),
    addr_of!(CMBSZ.0.attr),
    addr_of!(HMB.0.attr),
    null(),
]);

static GROUP: ReadOnly<bindings::attribute_group> = {
    let mut g: bindings::attribute_group = pin_init::zeroed();
    g.__bindgen_anon_1.is_visible = Some(is_visible);
    g.__bindgen_anon_2.attrs = addr_of!(ATTRS.0)
        .cast::<*mut bindings::attribute>()
        .cast_mut();
    ReadOnly(g)
};

/// The controller device's attribute groups: nvme-core's, then the transport's, null-ended.
pub(super) static GROUPS: ReadOnly<[*const bindings::attribute_group; 4]> = ReadOnly([
    addr_of!(ffi::nvme_dev_attrs_group),
    addr_of!(GROUP.0),
    addr_of!(ffi::nvme_dev_diag_attrs_group),
    null(),
]);

/// The controller of its device, which nvme-core gives the controller as its driver data.
///
/// # Safety
///
/// `dev` is the device of one of our controllers, which sysfs shows attributes of only while
/// the controller lives.
unsafe fn ctrl_of(dev: *mut bindings::device) -> *mut ffi::NvaCtrl {
    // SAFETY: The caller's promise; the controller is the first member of `struct nva_ctrl`.
    unsafe { (*dev).driver_data.cast() }
}

/// Reads a field of the controller that the transport writes while sysfs may read it.
macro_rules! read_once {
    ($dev:expr, $field:ident) => {
        // SAFETY: `$dev` is one of our controllers' devices, which is live (the callback's
        // promise); the transport writes the field with volatile writes
        // (`Ctrl::set_cmb_registers`, `Ctrl::set_hmb_enabled`).
        unsafe { addr_of!((*ctrl_of($dev)).$field).read_volatile() }
    };
}

/// # Safety
///
/// Called by sysfs for the device of one of our controllers, with its page.
unsafe extern "C" fn cmb_show(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    let (cmbloc, cmbsz): (c_uint, c_uint) = (read_once!(dev, cmbloc), read_once!(dev, cmbsz));
    // SAFETY: The caller's promise for `buf`; the format takes two `unsigned int`.
    unsafe {
        bindings::sysfs_emit(
            buf,
            c"cmbloc : 0x%08x\ncmbsz  : 0x%08x\n".as_char_ptr(),
            cmbloc,
            cmbsz,
        ) as isize
    }
}

/// Defines `show` callbacks that print one field of the controller with a C format taking one
/// `unsigned int`.
macro_rules! show_fields {
    ($($name:ident: $field:ident as $fmt:literal;)*) => {
        $(
            /// # Safety
            ///
            /// As for [`cmb_show`].
            unsafe extern "C" fn $name(
                dev: *mut bindings::device,
                _attr: *mut bindings::device_attribute,
                buf: *mut c_char,
            ) -> isize {
                let value = c_uint::from(read_once!(dev, $field));
                // SAFETY: The caller's promise for `buf`; the format takes one `unsigned int`.
                unsafe { bindings::sysfs_emit(buf, $fmt.as_char_ptr(), value) as isize }
            }
        )*
    };
}

show_fields! {
    cmbloc_show: cmbloc as c"%u\n";
    cmbsz_show: cmbsz as c"%u\n";
    hmb_show: hmb as c"%d\n";
}

/// Turns the host memory buffer on or off (a boolean as `kstrtobool` reads it).
///
/// # Safety
///
/// Called by sysfs for the device of one of our controllers, with the string written.
unsafe extern "C" fn hmb_store(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    let mut on = false;
    // SAFETY: sysfs passes a null-terminated string; `on` is valid for writes.
    if unsafe { bindings::kstrtobool(buf, &mut on) } < 0 {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: The caller's promise: the controller is ours and alive; its operations are the
    // ones `Ctrl::alloc` stored, built for its transport.
    let set = unsafe {
        let c = ctrl_of(dev);
        ((*(*c).ops.cast::<Operations>()).set_host_memory)(c, on)
    };
    match set {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// Hides the CMB attributes without a CMB, and `hmb` when the controller asks for no host
/// memory.
///
/// # Safety
///
/// Called by sysfs for an attribute of [`GROUP`] on the device of one of our controllers.
unsafe extern "C" fn is_visible(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::attribute,
    _index: c_int,
) -> u16 {
    // SAFETY: The kobject is the device's (`kobj_to_dev`).
    let dev = unsafe { kobj.byte_sub(core::mem::offset_of!(bindings::device, kobj)) }
        .cast::<bindings::device>();
    let attr = attr.cast_const();
    let cmb = [&CMB, &CMBLOC, &CMBSZ]
        .iter()
        .any(|a| core::ptr::eq(attr, addr_of!(a.0.attr)));
    let cmbsz: u32 = read_once!(dev, cmbsz);
    // SAFETY: As for `read_once!`; nvme-core sets HMPRE before it adds the device.
    let hmpre = unsafe { (*ctrl_of(dev)).ctrl.hmpre };
    if (cmb && cmbsz == 0) || (core::ptr::eq(attr, addr_of!(HMB.0.attr)) && hmpre == 0) {
        0
    } else {
        // SAFETY: sysfs passes one of the group's attributes.
        unsafe { (*attr).mode }
    }
}

impl Ctrl {
    /// Shows or hides the transport's sysfs attributes after what they show changed
    /// (`nvme_update_attrs`).
    pub(crate) fn update_attrs(self) {
        let c = self.raw();
        // SAFETY: The controller is valid; nvme-core's device, once made, lives as long as the
        // controller, and sysfs does nothing before it was added.
        unsafe {
            let dev = (*c).ctrl.device;
            if !dev.is_null() {
                bindings::sysfs_update_group(addr_of_mut!((*dev).kobj), addr_of!(GROUP.0));
            }
        }
    }
}
