// SPDX-License-Identifier: GPL-2.0

//! From the C callbacks of `glue.c` to [`Transport`] methods.
//!
//! `glue.c` calls functions named `nva_rust_*`; [`transport!`](crate::transport) defines them
//! for the transport type, each forwarding to the generic function of the same name here, which
//! turns the raw pointers into the safe types of this layer.
//!
//! C headers: [`include/linux/pci.h`](srctree/include/linux/pci.h),
//! [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h),
//! [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h) and
//! [`include/linux/cpuhotplug.h`](srctree/include/linux/cpuhotplug.h)

use core::ptr::NonNull;
use kernel::{
    bindings,
    device::Core,
    error::from_result,
    ffi::{
        c_int,
        c_uint,
        c_ulong,
        c_void, //
    },
    pci::Device as PciDevice,
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Release, //
    }, //
};

use super::{
    blk,
    ffi,
    numa,
    nvme,
    pci,
    Transport, //
};

/// Keeps the PCI driver and its CPU hotplug states registered; unregisters them (unbinding
/// every controller first) when dropped.
pub(crate) struct DriverRegistration(());

/// Whether a [`DriverRegistration`] exists: glue.c has one driver and one pair of hotplug
/// states, which a second registration would overwrite.
static REGISTERED: Atomic<bool> = Atomic::new(false);

impl Drop for DriverRegistration {
    fn drop(&mut self) {
        // SAFETY: Both registered in `register`, the only way to make a `DriverRegistration`;
        // unbinding every controller removed their hotplug instances.
        unsafe {
            ffi::nva_unregister_driver();
            ffi::nva_cpuhp_unregister();
        }
        REGISTERED.store(false, Release);
    }
}

/// Registers glue.c's PCI driver (from the module's init; its callbacks reach the transport
/// [`transport!`](crate::transport) names); the driver goes away with the returned value.
/// `EBUSY` while it is registered.
pub(crate) fn register() -> Result<DriverRegistration> {
    if REGISTERED.cmpxchg(false, true, Acquire).is_err() {
        return Err(EBUSY);
    }
    let registration = register_once();
    if registration.is_err() {
        REGISTERED.store(false, Release);
    }
    registration
}

fn register_once() -> Result<DriverRegistration> {
    // SAFETY: Sets up glue.c's two multi-instance hotplug states, with no instance yet (no
    // other registration exists: `REGISTERED`).
    kernel::error::to_result(unsafe { ffi::nva_cpuhp_register() })?;
    // SAFETY: Registers the static driver of glue.c; its callbacks are the `nva_rust_*`
    // functions, which `transport!` defines for the module's transport.
    if let Err(e) = kernel::error::to_result(unsafe { ffi::nva_register_driver() }) {
        // SAFETY: Registered above; no controller is bound, so no instance exists.
        unsafe { ffi::nva_cpuhp_unregister() };
        return Err(e);
    }
    Ok(DriverRegistration(()))
}

/// The transport of a controller, from the pointer glue.c keeps.
///
/// # Safety
///
/// `t` is the pointer `probe` stored, and `free_ctrl` has not run for it.
unsafe fn transport<'a, T: Transport>(t: *mut c_void) -> &'a T {
    // SAFETY: The pointer came from `KBox::into_raw` in `probe` and stays valid until
    // `free_ctrl` (the caller's promise).
    unsafe { &*t.cast::<T>() }
}

/// The queue blk-mq handed back, from `hctx->driver_data`.
///
/// # Safety
///
/// `q` was returned by [`init_hctx`] for a controller that is still alive.
unsafe fn queue<'a, T: Transport>(q: *mut c_void) -> &'a T::Queue {
    // SAFETY: `init_hctx` stored a pointer to a queue the transport owns until `free_ctrl`,
    // which runs after blk-mq stopped calling the tag set's ops.
    unsafe { &*q.cast::<T::Queue>() }
}

/// # Safety
///
/// Called by the PCI core, from `probe` of glue.c's driver, with the device lock held.
pub(crate) unsafe fn probe<T: Transport>(pdev: *mut bindings::pci_dev, quirks: c_ulong) -> c_int {
    // SAFETY: The PCI core calls probe with a valid device, locked for the duration of the
    // call: the `Core` context. `Device` is a transparent wrapper of `struct pci_dev`.
    let pdev = unsafe { &*pdev.cast::<PciDevice<Core<'_>>>() };
    from_result(|| {
        let core = nvme::Ctrl::alloc(pdev)?;
        let t = match T::new(pdev, core, nvme::Quirks::from_raw(quirks as u64)) {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: nvme-core never saw the controller.
                unsafe { core.free_unused() };
                return Err(e);
            }
        };
        // SAFETY: The transport is pinned in its box; `free_ctrl` turns the pointer back into
        // the box.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(t) });
        core.set_transport(raw.cast());
        if let Err(e) = core.init(quirks as u64) {
            core.set_transport(core::ptr::null_mut());
            // SAFETY: `raw` came from `KBox::into_raw` above and was not handed to nvme-core.
            drop(unsafe { KBox::from_raw(raw) });
            // SAFETY: nvme-core failed to take the controller.
            unsafe { core.free_unused() };
            return Err(e);
        }
        // From here on nvme-core owns the controller: its last reference frees it (and the
        // transport) through `free_ctrl`.
        if let Err(e) = core.add() {
            // SAFETY: The reference `init` took is ours; nothing uses `core` after it.
            unsafe { core.put() };
            return Err(e);
        }
        // SAFETY: The transport lives until `free_ctrl`, which cannot run before the two
        // references taken by `init` and `add` are dropped below.
        let t = unsafe { &*raw };
        match t.probe(pdev) {
            Ok(()) => {
                // The PCI callbacks (remove, PM, error recovery) find the transport from now on.
                core.publish();
                // SAFETY: The reference `init` took is ours; `add`'s keeps the controller for
                // the scan until the transport's `remove`.
                unsafe { core.put() };
                core.flush_scan();
                Ok(0)
            }
            Err(e) => {
                // SAFETY: `add` succeeded; these are the references of `add` and `init`,
                // dropped once each; nothing uses `core` or `t` after them.
                unsafe {
                    core.uninit();
                    core.put();
                }
                Err(e)
            }
        }
    })
}

/// # Safety
///
/// Called by the PCI core from glue.c's `remove`, with the pointer `probe` stored.
pub(crate) unsafe fn remove<T: Transport>(t: *mut c_void) {
    // SAFETY: The controller is alive: the reference `nvme_add_ctrl` took is only dropped by
    // `uninit` below.
    let tr = unsafe { transport::<T>(t) };
    let core = tr.core();
    core.unpublish();
    tr.remove();
    // SAFETY: Probe succeeded, so `add` did; remove runs once. It may free the transport:
    // nothing touches it afterwards.
    unsafe { core.uninit() };
}

macro_rules! forward {
    ($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => |$t:ident| $body:expr) => {
        $(#[$m])*
        /// # Safety
        ///
        /// Called from glue.c with the transport pointer `probe` stored, while the
        /// controller is alive.
        pub(crate) unsafe fn $name<T: Transport>(t: *mut c_void $(, $arg: $ty)*) -> $ret {
            // SAFETY: The caller's promise.
            let $t = unsafe { transport::<T>(t) };
            $body
        }
    };
}

forward!(shutdown() -> () => |t| t.shutdown());
forward!(error_detected(state: c_uint) -> c_uint => |t| {
    t.error_detected(pci::ChannelState::from_raw(state)).to_raw()
});
forward!(slot_reset() -> c_uint => |t| t.slot_reset().to_raw());
forward!(error_resume() -> () => |t| t.error_resume());
forward!(reset_prepare() -> () => |t| t.reset_prepare());
forward!(reset_done() -> () => |t| t.reset_done());
forward!(suspend() -> c_int => |t| from_result(|| t.suspend().map(|()| 0)));
forward!(resume() -> c_int => |t| {
    // SAFETY: The PM core calls a driver's callbacks only while it is bound.
    let dev = unsafe { t.function().as_bound() };
    from_result(|| t.resume(dev).map(|()| 0))
});
forward!(simple_suspend() -> c_int => |t| from_result(|| t.simple_suspend().map(|()| 0)));
forward!(simple_resume() -> c_int => |t| from_result(|| t.simple_resume().map(|()| 0)));
forward!(submit_async_event() -> () => |t| t.submit_async_event());
forward!(subsystem_reset() -> c_int => |t| from_result(|| t.subsystem_reset().map(|()| 0)));
forward!(virt_boundary(is_admin: bool) -> c_ulong => |t| t.virt_boundary(is_admin) as c_ulong);
forward!(reset_work() -> () => |t| {
    // SAFETY: nvme-core runs reset work only while the driver is bound: `remove` moves the
    // controller to DELETING, after which no reset is queued, and flushes the work before the
    // driver unbinds.
    t.reset_work(unsafe { t.function().as_bound() })
});
forward!(set_host_memory(on: bool) -> c_int => |t| {
    // SAFETY: sysfs calls the controller's attributes only until nvme-core deletes its device
    // (`nvme_uninit_ctrl`, which waits for the calls running), which `remove` and a failed
    // `probe` do while the driver is still bound.
    let dev = unsafe { t.function().as_bound() };
    from_result(|| t.set_host_memory(dev, on).map(|()| 0))
});
forward!(abort_done(status: u16) -> () => |t| t.abort_done(status));
// The controller may have stopped waiting for the command (a timeout), but the transport
// lives until `free_ctrl`, after nvme-core's last reference, which teardown drops only after
// destroying the admin queue (`nvme_remove_admin_tag_set`), which waits for the command.
forward!(delete_done(qid: u16, error: u8) -> () => |t| t.delete_done(qid, error != 0));
forward!(cpu_going_down(cpu: c_uint) -> () => |t| t.cpu_going_down(cpu));
forward!(cpu_down_ended(cpu: c_uint) -> () => |t| t.cpu_down_ended(cpu));

/// # Safety
///
/// As for the functions made by `forward!`; `val` is valid for writes.
pub(crate) unsafe fn reg_read32<T: Transport>(t: *mut c_void, off: u32, val: *mut u32) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport::<T>(t) };
    from_result(|| {
        let v = t.reg_read32(off)?;
        // SAFETY: `val` is valid for writes (the caller's promise).
        unsafe { val.write(v) };
        Ok(0)
    })
}

/// # Safety
///
/// As for [`reg_read32`].
pub(crate) unsafe fn reg_read64<T: Transport>(t: *mut c_void, off: u32, val: *mut u64) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport::<T>(t) };
    from_result(|| {
        let v = t.reg_read64(off)?;
        // SAFETY: `val` is valid for writes (the caller's promise).
        unsafe { val.write(v) };
        Ok(0)
    })
}

forward!(reg_write32(off: u32, val: u32) -> c_int => |t| {
    from_result(|| t.reg_write32(off, val).map(|()| 0))
});

/// # Safety
///
/// Called from glue.c's `free_ctrl` with the pointer `probe` stored, once.
pub(crate) unsafe fn free_ctrl<T: Transport>(t: *mut c_void) {
    // SAFETY: The pointer came from `KBox::into_raw` in `probe`; nvme-core calls free_ctrl
    // once, after its last reference is gone, so nothing else uses the transport.
    drop(unsafe { KBox::from_raw(t.cast::<T>()) });
}

/// # Safety
///
/// Called by blk-mq (`init_hctx`) with a live controller's transport, the hctx's tags and its
/// NUMA node.
pub(crate) unsafe fn init_hctx<T: Transport>(
    t: *mut c_void,
    qid: c_uint,
    tags: *mut bindings::blk_mq_tags,
    node: c_int,
) -> *mut c_void {
    // SAFETY: The caller's promise.
    let t = unsafe { transport::<T>(t) };
    let Some(tags) = NonNull::new(tags) else {
        return core::ptr::null_mut();
    };
    // SAFETY: blk-mq's tags of this hardware queue stay valid while the hctx is mapped to it,
    // and `init_hctx` runs again whenever that changes; the tag sets of a controller of `T`
    // carry `T::Iod` PDUs (`alloc_*_tag_set::<T>`).
    let tags = unsafe { blk::Tags::<T::Iod>::from_raw(tags) };
    t.queue(qid, tags, numa::Node::from_raw(node))
        .map_or(core::ptr::null_mut(), |q| {
            core::ptr::from_ref(q).cast_mut().cast()
        })
}

/// # Safety
///
/// Called by blk-mq (`map_queues`) for the I/O tag set of a live controller.
pub(crate) unsafe fn map_queues<T: Transport>(t: *mut c_void, set: *mut bindings::blk_mq_tag_set) {
    // SAFETY: The caller's promise.
    let t = unsafe { transport::<T>(t) };
    // SAFETY: blk-mq holds the tag set for the duration of the call.
    let mut maps = unsafe { blk::QueueMaps::from_raw(set, t.core().raw()) };
    t.map_queues(&mut maps);
}

/// # Safety
///
/// Called by blk-mq (`init_request`) for a new request of a tag set of `T`, after glue.c set
/// up nvme-core's part of its PDU.
pub(crate) unsafe fn init_request<T: Transport>(rq: *mut bindings::request) {
    // SAFETY: The request is the driver's for the call; its tag set carries `T::Iod` PDUs.
    let mut rq = unsafe { blk::Request::<T::Iod>::from_raw(rq) };
    rq.init_pdu();
}

/// # Safety
///
/// Called by blk-mq (`queue_rq`) with a queue from [`init_hctx`] and a started-to-be request.
pub(crate) unsafe fn queue_rq<T: Transport>(
    q: *mut c_void,
    rq: *mut bindings::request,
    last: bool,
) -> u8 {
    // SAFETY: The caller's promise.
    let q = unsafe { queue::<T>(q) };
    // SAFETY: blk-mq hands the request to the driver: it is ours until we complete it.
    let rq = unsafe { blk::Request::from_raw(rq) };
    match T::queue_rq(q, rq, last) {
        Ok(()) => blk::Status::OK.to_raw(),
        Err(rejected) => rejected.status().to_raw(),
    }
}

/// # Safety
///
/// Called by blk-mq (`queue_rqs`) with a list of requests of this tag set.
pub(crate) unsafe fn queue_rqs<T: Transport>(list: *mut bindings::rq_list) {
    // SAFETY: blk-mq hands the whole list, of requests of `T`'s I/O tag set, to the driver
    // for the duration of the call, which the list's lifetime does not exceed.
    let mut list = unsafe { blk::RqList::<T>::from_raw(list) };
    T::queue_rqs(&mut list);
}

/// # Safety
///
/// Called by blk-mq (`commit_rqs`) with a queue from [`init_hctx`].
pub(crate) unsafe fn commit_rqs<T: Transport>(q: *mut c_void) {
    // SAFETY: The caller's promise.
    T::commit_rqs(unsafe { queue::<T>(q) });
}

/// # Safety
///
/// Called by blk-mq (`complete`) with a request whose command completed.
pub(crate) unsafe fn complete_rq<T: Transport>(rq: *mut bindings::request) {
    // SAFETY: The request is the driver's until it is ended.
    let rq = unsafe { blk::Request::<T::Iod>::from_raw(rq) };
    // SAFETY: The request belongs to a tag set of `T`; the reference ends with the call.
    let q = unsafe { rq.queue::<T>() };
    T::complete_rq(q, rq);
}

/// # Safety
///
/// Called by blk-mq (`timeout`) with a queue from [`init_hctx`] and one of its requests.
pub(crate) unsafe fn timeout<T: Transport>(q: *mut c_void, rq: *mut bindings::request) -> bool {
    // SAFETY: The caller's promise.
    let q = unsafe { queue::<T>(q) };
    // SAFETY: The timeout handler holds the request for the duration of the call, while
    // the command may still complete; `InFlight` gives no access to the transport's data.
    let rq = unsafe { blk::InFlight::from_raw(rq) };
    // SAFETY: The request belongs to a live controller of transport `T`.
    let t = unsafe { transport::<T>(rq.transport_ptr()) };
    t.timeout(q, rq)
}

/// # Safety
///
/// Called by blk-mq (`poll`) with a queue from [`init_hctx`] and a batch, or a null batch.
pub(crate) unsafe fn poll<T: Transport>(
    q: *mut c_void,
    iob: *mut bindings::io_comp_batch,
) -> c_int {
    // SAFETY: The caller's promise.
    let q = unsafe { queue::<T>(q) };
    // SAFETY: The batch, when given, is valid for the duration of the call.
    let mut batch = unsafe { blk::Batch::from_raw(iob) };
    T::poll(q, &mut batch)
}

/// glue.h's declarations, which [`transport!`](crate::transport) checks its definitions
/// against (calling one is `unsafe`, as every function of C's is).
#[doc(hidden)]
pub(crate) mod declared {
    pub(crate) use super::super::ffi::*;
}

/// Defines one `nva_rust_*` function for [`transport!`](crate::transport).
#[doc(hidden)]
#[macro_export]
macro_rules! __nva_export {
    ($t:ty, $name:ident => $target:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        /// # Safety
        ///
        /// Called by glue.c only, as the function of `sys::entry` it forwards to requires.
        #[no_mangle]
        unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: glue.c calls each entry as the function of `sys::entry` it forwards to
            // documents.
            unsafe { $crate::sys::entry::$target::<$t>($($arg),*) }
        }

        // The definition has glue.h's signature (bindgen's declaration of it), or the two arms'
        // types differ and this does not compile.
        const _: () = {
            let _ = if true {
                $crate::sys::entry::declared::$name
            } else {
                $name
            };
        };
    };
}

/// Defines the `nva_rust_*` functions glue.c calls, for the transport `$t`.
#[macro_export]
macro_rules! transport {
    ($t:ty) => {
        const _: () = {
            use kernel::bindings::{
                blk_mq_tag_set,
                blk_mq_tags,
                io_comp_batch,
                pci_dev,
                request,
                rq_list, //
            };
            use kernel::ffi::{
                c_int,
                c_uint,
                c_ulong,
                c_void, //
            };
            use $crate::__nva_export as export;

            export!($t, nva_rust_probe => probe(pdev: *mut pci_dev, quirks: c_ulong) -> c_int);
            export!($t, nva_rust_remove => remove(t: *mut c_void) -> ());
            export!($t, nva_rust_shutdown => shutdown(t: *mut c_void) -> ());
            export!($t, nva_rust_error_detected => error_detected(t: *mut c_void, s: c_uint) -> c_uint);
            export!($t, nva_rust_slot_reset => slot_reset(t: *mut c_void) -> c_uint);
            export!($t, nva_rust_error_resume => error_resume(t: *mut c_void) -> ());
            export!($t, nva_rust_reset_prepare => reset_prepare(t: *mut c_void) -> ());
            export!($t, nva_rust_reset_done => reset_done(t: *mut c_void) -> ());
            export!($t, nva_rust_suspend => suspend(t: *mut c_void) -> c_int);
            export!($t, nva_rust_resume => resume(t: *mut c_void) -> c_int);
            export!($t, nva_rust_simple_suspend => simple_suspend(t: *mut c_void) -> c_int);
            export!($t, nva_rust_simple_resume => simple_resume(t: *mut c_void) -> c_int);
            export!($t, nva_rust_reg_read32 => reg_read32(t: *mut c_void, o: u32, v: *mut u32) -> c_int);
            export!($t, nva_rust_reg_write32 => reg_write32(t: *mut c_void, o: u32, v: u32) -> c_int);
            export!($t, nva_rust_reg_read64 => reg_read64(t: *mut c_void, o: u32, v: *mut u64) -> c_int);
            export!($t, nva_rust_free_ctrl => free_ctrl(t: *mut c_void) -> ());
            export!($t, nva_rust_submit_async_event => submit_async_event(t: *mut c_void) -> ());
            export!($t, nva_rust_subsystem_reset => subsystem_reset(t: *mut c_void) -> c_int);
            export!($t, nva_rust_virt_boundary => virt_boundary(t: *mut c_void, a: bool) -> c_ulong);
            export!($t, nva_rust_reset_work => reset_work(t: *mut c_void) -> ());
            export!($t, nva_rust_init_hctx => init_hctx(
                t: *mut c_void, qid: c_uint, tags: *mut blk_mq_tags, node: c_int) -> *mut c_void);
            export!($t, nva_rust_init_request => init_request(rq: *mut request) -> ());
            export!($t, nva_rust_queue_rq => queue_rq(
                q: *mut c_void, rq: *mut request, last: bool) -> u8);
            export!($t, nva_rust_queue_rqs => queue_rqs(l: *mut rq_list) -> ());
            export!($t, nva_rust_commit_rqs => commit_rqs(q: *mut c_void) -> ());
            export!($t, nva_rust_complete_rq => complete_rq(rq: *mut request) -> ());
            export!($t, nva_rust_timeout => timeout(q: *mut c_void, rq: *mut request) -> bool);
            export!($t, nva_rust_poll => poll(q: *mut c_void, iob: *mut io_comp_batch) -> c_int);
            export!($t, nva_rust_map_queues => map_queues(
                t: *mut c_void, set: *mut blk_mq_tag_set) -> ());
            export!($t, nva_rust_abort_done => abort_done(t: *mut c_void, status: u16) -> ());
            export!($t, nva_rust_set_host_memory => set_host_memory(t: *mut c_void, on: bool) -> c_int);
            export!($t, nva_rust_delete_done => delete_done(t: *mut c_void, qid: u16, error: u8) -> ());
            export!($t, nva_rust_cpu_going_down => cpu_going_down(t: *mut c_void, cpu: c_uint) -> ());
            export!($t, nva_rust_cpu_down_ended => cpu_down_ended(t: *mut c_void, cpu: c_uint) -> ());
        };
    };
}
