// SPDX-License-Identifier: GPL-2.0

//! From the C callbacks to [`Transport`] methods.
//!
//! The PCI core, nvme-core, blk-mq, the workqueue, CPU hotplug and sysfs call the transport
//! through the driver and operation tables built here for it, whose entries have the C
//! signatures bindgen gives and turn the raw pointers into the safe types of this layer.
//!
//! C headers: [`include/linux/pci.h`](srctree/include/linux/pci.h),
//! [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h),
//! [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h) and
//! [`include/linux/cpuhotplug.h`](srctree/include/linux/cpuhotplug.h)

use core::{
    marker::PhantomData,
    mem::offset_of,
    ptr::{
        addr_of,
        addr_of_mut,
        NonNull, //
    },
};
use kernel::{
    bindings,
    device::Core,
    error::from_result,
    ffi::{
        c_char,
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
    types::Opaque,
};

use super::{
    blk,
    cpu,
    ffi,
    numa,
    nvme,
    pci,
    sysfs,
    Transport, //
};

/// Keeps the PCI driver and its CPU hotplug states registered; unregisters them (unbinding
/// every controller first) when dropped.
pub(crate) struct DriverRegistration {
    // Dropped after the driver: unbinding removed every controller's instances.
    _hotplug: cpu::HotplugRegistration,
}

/// Whether a [`DriverRegistration`] exists: there is one driver and one pair of hotplug
/// states, which a second registration would overwrite.
static REGISTERED: Atomic<bool> = Atomic::new(false);

/// The PCI driver, which the driver core writes to while it is registered.
struct PciDriver(Opaque<bindings::pci_driver>);

// SAFETY: Only `register_once` writes it, before registering it, and `REGISTERED` keeps a
// second registration from writing it while it is registered; the driver core serialises its
// own use.
unsafe impl Sync for PciDriver {}

static PCI_DRIVER: PciDriver = PciDriver(Opaque::zeroed());

impl Drop for DriverRegistration {
    fn drop(&mut self) {
        // SAFETY: Registered in `register`, the only way to make a `DriverRegistration`. The
        // quirks are no longer looked up once no probe can run.
        unsafe {
            bindings::pci_unregister_driver(PCI_DRIVER.0.get());
            ffi::nva_pci_quirks_exit();
        }
        REGISTERED.store(false, Release);
    }
}

/// Registers the PCI driver of transport `T` (from the module's init); the driver goes away
/// with the returned value. `EBUSY` while it is registered.
pub(crate) fn register<T: Transport>() -> Result<DriverRegistration> {
    if REGISTERED.cmpxchg(false, true, Acquire).is_err() {
        return Err(EBUSY);
    }
    let registration = register_once::<T>();
    if registration.is_err() {
        REGISTERED.store(false, Release);
    }
    registration
}

fn register_once<T: Transport>() -> Result<DriverRegistration> {
    let (going_down, up, dead) = (cpu_going_down::<T>, cpu_online::<T>, cpu_dead::<T>);
    // SAFETY: No other registration exists (`REGISTERED`); the hotplug states go with this one.
    let hotplug = unsafe { cpu::register_hotplug(going_down, up, dead) }?;
    let drv = PCI_DRIVER.0.get();
    // SAFETY: No registration exists (`REGISTERED`), so nothing else uses the driver; it is
    // filled in whole (what is not named zero, as in a C static) before the PCI core gets it,
    // and lives as long as the module.
    let registered = kernel::error::to_result(unsafe {
        drv.write(bindings::pci_driver {
            name: DRIVER_NAME,
            probe: Some(pci_probe::<T>),
            remove: Some(pci_remove::<T>),
            shutdown: Some(pci_shutdown::<T>),
            // As the stock driver: sriov_numvfs enables and disables the virtual functions,
            // which the controller's Virtualization Management command then gives queues and
            // interrupts. Removal leaves them as they are, as there (the PCI core warns).
            #[cfg(CONFIG_PCI_IOV)]
            sriov_configure: Some(bindings::pci_sriov_configure_simple),
            err_handler: &Tables::<T>::ERROR_HANDLERS,
            driver: bindings::device_driver {
                // As the stock driver: a controller's probe (enable, admin queue, Identify)
                // runs in an async worker at boot, module load and hotplug, so controllers
                // come up in parallel. Explicit binds (sysfs bind, drivers_probe) still probe
                // synchronously, module load waits for the async probes unless async_probe is
                // set for it, and unregistering the driver waits for them before detaching.
                probe_type: bindings::probe_type_PROBE_PREFER_ASYNCHRONOUS,
                #[cfg(CONFIG_PM_SLEEP)]
                pm: &Tables::<T>::PM_OPS,
                ..pin_init::zeroed()
            },
            ..pin_init::zeroed()
        });
        bindings::__pci_register_driver(drv, THIS_MODULE, DRIVER_NAME)
    });
    registered.map(|()| DriverRegistration { _hotplug: hotplug })
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

/// The PCI driver's `probe`.
///
/// # Safety
///
/// Called by the PCI core, with the device lock held.
unsafe extern "C" fn pci_probe<T: Transport>(
    pdev: *mut bindings::pci_dev,
    _id: *const bindings::pci_device_id,
) -> c_int {
    // SAFETY: The PCI core passes a live device.
    let quirks = unsafe { ffi::nva_pci_quirks(pdev) };
    // SAFETY: The PCI core calls probe with a valid device, locked for the duration of the
    // call: the `Core` context. `Device` is a transparent wrapper of `struct pci_dev`.
    let pdev = unsafe { &*pdev.cast::<PciDevice<Core<'_>>>() };
    from_result(|| {
        let ops = &Tables::<T>::OPS;
        let core = nvme::Ctrl::alloc(pdev, ops)?;
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
        if let Err(e) = core.init(quirks as u64, ops) {
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

/// The transport of the controller bound to `dev`.
///
/// # Safety
///
/// `dev` is the device of a PCI function whose probe succeeded (it published the controller
/// as the driver data), and its `remove` has not begun.
unsafe fn transport_of_device<'a, T: Transport>(dev: *mut bindings::device) -> &'a T {
    // SAFETY: The driver data is the `struct nva_ctrl`, whose first member is nvme-core's
    // controller; the controller and its transport live until `remove` drops nvme-core's
    // reference (the caller's promise).
    unsafe { transport_of::<T>((*dev).driver_data.cast()) }
}

/// The PCI driver's `remove`.
///
/// # Safety
///
/// Called by the PCI core, once, for a function whose probe succeeded.
unsafe extern "C" fn pci_remove<T: Transport>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The controller is alive: the reference `nvme_add_ctrl` took is only dropped by
    // `uninit` below.
    let tr = unsafe { transport_of_device::<T>(pdev.device()) };
    let core = tr.core();
    core.unpublish();
    tr.remove();
    // SAFETY: Probe succeeded, so `add` did; remove runs once. It may free the transport:
    // nothing touches it afterwards.
    unsafe { core.uninit() };
}

/// Defines callbacks of the PCI driver (`pci_dev`) or of its power management (`device`) that
/// reach the transport of the bound controller.
macro_rules! bound_callbacks {
    ($($(#[$m:meta])* $name:ident($dev:ident: $dev_ty:ty $(, $arg:ident: $ty:ty)*) -> $ret:ty
        => |$t:ident| $body:expr;)*) => {
        $(
            $(#[$m])*
            ///
            /// # Safety
            ///
            /// Called by the PCI or PM core for a function the driver is bound to.
            unsafe extern "C" fn $name<T: Transport>($dev: $dev_ty $(, $arg: $ty)*) -> $ret {
                // SAFETY: The core calls a driver's callbacks only while it is bound, that is
                // between a successful probe and the end of remove, which the transport's
                // pointer outlives.
                let $t = unsafe { transport_of_device::<T>($dev.device()) };
                $body
            }
        )*
    };
}

/// The device a PCI or PM callback gets, as the generic device.
trait CallbackDevice {
    /// # Safety
    ///
    /// `self` points to a live device.
    unsafe fn device(self) -> *mut bindings::device;
}

impl CallbackDevice for *mut bindings::pci_dev {
    unsafe fn device(self) -> *mut bindings::device {
        // SAFETY: The caller's promise; only the field's address is taken.
        unsafe { addr_of_mut!((*self).dev) }
    }
}

impl CallbackDevice for *mut bindings::device {
    unsafe fn device(self) -> *mut bindings::device {
        self
    }
}

bound_callbacks! {
    /// The PCI driver's `shutdown`.
    pci_shutdown(pdev: *mut bindings::pci_dev) -> () => |t| t.shutdown();
    /// PCI error recovery: an error was detected on the link.
    error_detected(pdev: *mut bindings::pci_dev, state: bindings::pci_channel_state_t)
        -> bindings::pci_ers_result_t
        => |t| t.error_detected(pci::ChannelState::from_raw(state)).to_raw();
    slot_reset(pdev: *mut bindings::pci_dev) -> bindings::pci_ers_result_t
        => |t| t.slot_reset().to_raw();
    error_resume(pdev: *mut bindings::pci_dev) -> () => |t| t.error_resume();
    reset_prepare(pdev: *mut bindings::pci_dev) -> () => |t| t.reset_prepare();
    reset_done(pdev: *mut bindings::pci_dev) -> () => |t| t.reset_done();
    /// System suspend.
    pm_suspend(dev: *mut bindings::device) -> c_int
        => |t| from_result(|| t.suspend().map(|()| 0));
    /// System resume.
    pm_resume(dev: *mut bindings::device) -> c_int => |t| {
        // SAFETY: The PM core calls a driver's callbacks only while it is bound.
        let dev = unsafe { t.function().as_bound() };
        from_result(|| t.resume(dev).map(|()| 0))
    };
    /// Hibernation's freeze and poweroff.
    pm_simple_suspend(dev: *mut bindings::device) -> c_int
        => |t| from_result(|| t.simple_suspend().map(|()| 0));
    /// Hibernation's thaw and restore.
    pm_simple_resume(dev: *mut bindings::device) -> c_int
        => |t| from_result(|| t.simple_resume().map(|()| 0));
}
/// nvme-core's reset work of a controller.
///
/// # Safety
///
/// Called by the workqueue for the reset work of one of our controllers: nvme-core queues it
/// only while the driver is bound (`remove` moves the controller to DELETING, after which no
/// reset is queued, and flushes the work before the driver unbinds).
unsafe extern "C" fn reset_work<T: Transport>(work: *mut bindings::work_struct) {
    // SAFETY: The work is the controller's `reset_work` (the caller's promise), inside
    // nvme-core's controller.
    let ctrl = unsafe { work.byte_sub(offset_of!(ffi::nvme_ctrl, reset_work)) };
    // SAFETY: The controller is one of ours (the caller's promise), the first member of
    // `struct nva_ctrl`, whose transport probe set before nvme-core could queue the work.
    let t = unsafe { transport_of::<T>(ctrl.cast()) };
    // SAFETY: The driver is bound (the caller's promise).
    t.reset_work(unsafe { t.function().as_bound() })
}

/// sysfs `hmb` written.
///
/// # Safety
///
/// As [`nvme::Operations::set_host_memory`] requires.
unsafe fn set_host_memory<T: Transport>(c: *mut ffi::NvaCtrl, on: bool) -> Result {
    // SAFETY: The controller is live (the caller's promise): its transport is set, since sysfs
    // shows attributes only of a controller nvme-core added after probe set it.
    let t = unsafe { transport_of::<T>(c.cast()) };
    // SAFETY: sysfs calls the controller's attributes only until nvme-core deletes its device
    // (`nvme_uninit_ctrl`, which waits for the calls running), which `remove` and a failed
    // `probe` do while the driver is still bound.
    t.set_host_memory(unsafe { t.function().as_bound() }, on)
}

/// Defines the CPU hotplug callbacks of a controller's instances, each given the node of one
/// instance in `struct nva_ctrl`.
macro_rules! hotplug_callbacks {
    ($($(#[$m:meta])* $name:ident($node:ident) => |$t:ident, $cpu:ident| $body:expr;)*) => {
        $(
            $(#[$m])*
            ///
            /// # Safety
            ///
            /// Called by the hotplug core for an instance `Ctrl::watch_cpus` added.
            unsafe extern "C" fn $name<T: Transport>(
                $cpu: c_uint,
                node: *mut bindings::hlist_node,
            ) -> c_int {
                // SAFETY: The node is the field of a `struct nva_ctrl` whose transport is set
                // and outlives the instance (`watch_cpus`).
                let $t = unsafe {
                    transport_of::<T>(node.byte_sub(offset_of!(ffi::NvaCtrl, $node)).cast())
                };
                $body;
                0
            }
        )*
    };
}

hotplug_callbacks! {
    /// A CPU is about to go down (its managed interrupts are about to be shut down).
    cpu_going_down(cpu_down_node) => |t, cpu| t.cpu_going_down(cpu);
    /// A CPU came up: also the roll-back of an offline that a later step failed.
    cpu_online(cpu_down_node) => |t, cpu| t.cpu_down_ended(cpu);
    /// A CPU went down.
    cpu_dead(cpu_dead_node) => |t, cpu| t.cpu_down_ended(cpu);
}

/// The transport of one of our controllers, from nvme-core's controller.
///
/// # Safety
///
/// `ctrl` is the `struct nvme_ctrl` of a `struct nva_ctrl` whose transport `probe` stored,
/// and `free_ctrl` has not run for it.
unsafe fn transport_of<'a, T: Transport>(ctrl: *mut ffi::nvme_ctrl) -> &'a T {
    // SAFETY: nvme-core's controller is the first member of `struct nva_ctrl` (glue.c asserts
    // it); the rest is the caller's promise.
    unsafe { transport::<T>((*ctrl.cast::<ffi::NvaCtrl>()).transport) }
}

/// The module, as C's `THIS_MODULE`.
const THIS_MODULE: *mut bindings::module =
    <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();

/// The PCI driver's name, as the module's.
const DRIVER_NAME: *const c_char = kernel::str::as_char_ptr_in_const_context(c"nvme_adaptive");

/// The operation tables of transport `T`, as the kernel crate builds `blk_mq_ops`
/// (`OperationsVTable`): each entry below has the C signature, which the compiler checks
/// against bindgen's, and turns its arguments into the safe types of this layer.
struct Tables<T>(PhantomData<T>);

impl<T: Transport> Tables<T> {
    const ADMIN_MQ_OPS: bindings::blk_mq_ops = bindings::blk_mq_ops {
        queue_rq: Some(queue_rq::<T>),
        commit_rqs: Some(commit_rqs::<T>),
        complete: Some(complete::<T>),
        init_hctx: Some(admin_init_hctx::<T>),
        init_request: Some(init_request::<T>),
        timeout: Some(timeout::<T>),
        ..pin_init::zeroed()
    };

    const ERROR_HANDLERS: bindings::pci_error_handlers = bindings::pci_error_handlers {
        error_detected: Some(error_detected::<T>),
        slot_reset: Some(slot_reset::<T>),
        resume: Some(error_resume::<T>),
        reset_prepare: Some(reset_prepare::<T>),
        reset_done: Some(reset_done::<T>),
        ..pin_init::zeroed()
    };

    #[cfg(CONFIG_PM_SLEEP)]
    const PM_OPS: bindings::dev_pm_ops = bindings::dev_pm_ops {
        suspend: Some(pm_suspend::<T>),
        resume: Some(pm_resume::<T>),
        freeze: Some(pm_simple_suspend::<T>),
        thaw: Some(pm_simple_resume::<T>),
        poweroff: Some(pm_simple_suspend::<T>),
        restore: Some(pm_simple_resume::<T>),
        ..pin_init::zeroed()
    };

    const OPS: nvme::Operations = nvme::Operations {
        ctrl: ffi::nvme_ctrl_ops {
            name: kernel::str::as_char_ptr_in_const_context(c"pcie"),
            module: THIS_MODULE,
            flags: ffi::NVME_F_METADATA_SUPPORTED,
            // A null-terminated array; nvme-core only reads it.
            dev_attr_groups: addr_of!(sysfs::GROUPS).cast_mut().cast(),
            reg_read32: Some(reg_read32::<T>),
            reg_write32: Some(reg_write32::<T>),
            reg_read64: Some(reg_read64::<T>),
            free_ctrl: Some(free_ctrl::<T>),
            submit_async_event: Some(submit_async_event::<T>),
            subsystem_reset: Some(subsystem_reset::<T>),
            delete_ctrl: None,
            stop_ctrl: None,
            get_address: Some(get_address),
            print_device_info: Some(ffi::nva_print_device_info),
            supports_pci_p2pdma: Some(ffi::nva_supports_pci_p2pdma),
            get_virt_boundary: Some(get_virt_boundary::<T>),
        },
        admin: Self::ADMIN_MQ_OPS,
        // The admin tag set's, with batches, queue maps and polling.
        io: bindings::blk_mq_ops {
            queue_rqs: Some(queue_rqs::<T>),
            init_hctx: Some(io_init_hctx::<T>),
            map_queues: Some(map_queues::<T>),
            poll: Some(poll::<T>),
            ..Self::ADMIN_MQ_OPS
        },
        abort_end: Some(abort_end::<T>),
        delete_end: Some(delete_end::<T>),
        reset_work: Some(reset_work::<T>),
        set_host_memory: set_host_memory::<T>,
    };
}

/// nvme-core's `reg_read32`.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers, with `val` valid for writes.
unsafe extern "C" fn reg_read32<T: Transport>(
    ctrl: *mut ffi::nvme_ctrl,
    off: u32,
    val: *mut u32,
) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport_of::<T>(ctrl) };
    from_result(|| {
        let v = t.reg_read32(off)?;
        // SAFETY: `val` is valid for writes (the caller's promise).
        unsafe { val.write(v) };
        Ok(0)
    })
}

/// nvme-core's `reg_read64`.
///
/// # Safety
///
/// As for [`reg_read32`].
unsafe extern "C" fn reg_read64<T: Transport>(
    ctrl: *mut ffi::nvme_ctrl,
    off: u32,
    val: *mut u64,
) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport_of::<T>(ctrl) };
    from_result(|| {
        let v = t.reg_read64(off)?;
        // SAFETY: `val` is valid for writes (the caller's promise).
        unsafe { val.write(v) };
        Ok(0)
    })
}

/// nvme-core's `reg_write32`.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers.
unsafe extern "C" fn reg_write32<T: Transport>(
    ctrl: *mut ffi::nvme_ctrl,
    off: u32,
    val: u32,
) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport_of::<T>(ctrl) };
    from_result(|| t.reg_write32(off, val).map(|()| 0))
}

/// nvme-core's `free_ctrl`, after its last reference: the transport, then the controller.
///
/// # Safety
///
/// Called by nvme-core once, for one of our controllers.
unsafe extern "C" fn free_ctrl<T: Transport>(ctrl: *mut ffi::nvme_ctrl) {
    let c = ctrl.cast::<ffi::NvaCtrl>();
    // SAFETY: The controller is ours (the caller's promise). The transport pointer, when set,
    // came from `KBox::into_raw` in `probe`, and nothing uses it after nvme-core's last
    // reference; neither does anything use the controller.
    unsafe {
        let t = (*c).transport;
        if !t.is_null() {
            let t = KBox::from_raw(t.cast::<T>());
            // The hotplug callbacks reach the transport: none may run once it is gone.
            t.core().unwatch_cpus();
            drop(t);
        }
        ffi::nva_ctrl_free_unused(c);
    }
}

/// nvme-core's `submit_async_event`.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers.
unsafe extern "C" fn submit_async_event<T: Transport>(ctrl: *mut ffi::nvme_ctrl) {
    // SAFETY: The caller's promise.
    unsafe { transport_of::<T>(ctrl) }.submit_async_event();
}

/// nvme-core's `subsystem_reset`.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers.
unsafe extern "C" fn subsystem_reset<T: Transport>(ctrl: *mut ffi::nvme_ctrl) -> c_int {
    // SAFETY: The caller's promise.
    let t = unsafe { transport_of::<T>(ctrl) };
    from_result(|| t.subsystem_reset().map(|()| 0))
}

/// nvme-core's `get_address`: the PCI address, as sysfs `address` shows it.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers, with `size` bytes at `buf`.
unsafe extern "C" fn get_address(
    ctrl: *mut ffi::nvme_ctrl,
    buf: *mut c_char,
    size: c_int,
) -> c_int {
    // SAFETY: The controller is ours and holds its PCI device, whose name lives as long; the
    // buffer is the caller's promise.
    unsafe {
        let pdev = (*ctrl.cast::<ffi::NvaCtrl>()).pdev;
        bindings::snprintf(
            buf,
            size as usize,
            c"%s\n".as_char_ptr(),
            ffi::nva_pci_name(pdev),
        )
    }
}

/// nvme-core's `get_virt_boundary`.
///
/// # Safety
///
/// Called by nvme-core for one of our live controllers.
unsafe extern "C" fn get_virt_boundary<T: Transport>(
    ctrl: *mut ffi::nvme_ctrl,
    is_admin: bool,
) -> c_ulong {
    // SAFETY: The caller's promise.
    unsafe { transport_of::<T>(ctrl) }.virt_boundary(is_admin) as c_ulong
}

/// The queue blk-mq's hardware queue serves (`hctx->driver_data`).
///
/// # Safety
///
/// `hctx` is a hardware queue of one of our controllers' tag sets, set up by its
/// `init_hctx`, and the reference ends before the blk-mq callback that asks returns.
unsafe fn queue_of<'a, T: Transport>(hctx: *mut bindings::blk_mq_hw_ctx) -> &'a T::Queue {
    // SAFETY: `init_hctx` stored a pointer to a queue the transport owns until `free_ctrl`,
    // which runs after blk-mq stopped calling the tag set's ops.
    unsafe { &*(*hctx).driver_data.cast::<T::Queue>() }
}

/// blk-mq's `init_hctx` for hardware queue `qid` (0: admin).
///
/// # Safety
///
/// Called by blk-mq for a tag set of one of our live controllers, whose driver data is the
/// controller (nvme-core sets it).
unsafe fn init_hctx<T: Transport>(
    hctx: *mut bindings::blk_mq_hw_ctx,
    ctrl: *mut c_void,
    qid: c_uint,
) -> c_int {
    // SAFETY: The caller's promise.
    let (t, tags, node) = unsafe {
        (
            transport_of::<T>(ctrl.cast()),
            (*hctx).tags,
            (*hctx).numa_node,
        )
    };
    let Some(tags) = NonNull::new(tags) else {
        return EINVAL.to_errno();
    };
    // SAFETY: The caller's promise: a live controller, alive until the transport, whose
    // queues hold what `c` gives them, is freed (`free_ctrl`).
    let c = unsafe { nvme::Ctrl::from_core(ctrl.cast()) };
    // SAFETY: blk-mq's tags of this hardware queue stay valid while the hctx is mapped to it,
    // and `init_hctx` runs again whenever that changes, and while their tag set is not freed,
    // which its removal refuses while the count of its holders is not 0; the tag sets of a
    // controller of `T` carry `T::Iod` PDUs (`alloc_*_tag_set::<T>`). The controller, and so
    // the counts, outlive the transport, which holds the tags (`free_ctrl`).
    let tags = unsafe {
        blk::Tags::<T::Iod>::from_raw(tags, c.advances_generations(), c.tag_counts(qid == 0))
    };
    match t.queue(qid, tags, numa::Node::from_raw(node as c_int)) {
        Some(q) => {
            // SAFETY: blk-mq sets the hctx up alone; the queue outlives its use (`queue_of`).
            unsafe { (*hctx).driver_data = core::ptr::from_ref(q).cast_mut().cast() };
            0
        }
        None => EINVAL.to_errno(),
    }
}

/// blk-mq's `init_hctx` of the admin tag set.
///
/// # Safety
///
/// As for [`init_hctx`].
unsafe extern "C" fn admin_init_hctx<T: Transport>(
    hctx: *mut bindings::blk_mq_hw_ctx,
    ctrl: *mut c_void,
    _hctx_idx: c_uint,
) -> c_int {
    // SAFETY: The caller's promise.
    unsafe { init_hctx::<T>(hctx, ctrl, 0) }
}

/// blk-mq's `init_hctx` of the I/O tag set: hardware queue `hctx_idx` is I/O queue
/// `hctx_idx + 1`.
///
/// # Safety
///
/// As for [`init_hctx`].
unsafe extern "C" fn io_init_hctx<T: Transport>(
    hctx: *mut bindings::blk_mq_hw_ctx,
    ctrl: *mut c_void,
    hctx_idx: c_uint,
) -> c_int {
    // SAFETY: The caller's promise.
    unsafe { init_hctx::<T>(hctx, ctrl, hctx_idx + 1) }
}

/// blk-mq's `map_queues` of the I/O tag set.
///
/// # Safety
///
/// Called by blk-mq for the I/O tag set of one of our live controllers.
unsafe extern "C" fn map_queues<T: Transport>(set: *mut bindings::blk_mq_tag_set) {
    // SAFETY: The caller's promise; nvme-core made the controller the tag set's driver data.
    let t = unsafe { transport_of::<T>((*set).driver_data.cast()) };
    // SAFETY: blk-mq holds the tag set for the duration of the call.
    let mut maps = unsafe { blk::QueueMaps::from_raw(set, t.core().raw()) };
    t.map_queues(&mut maps);
}

/// blk-mq's `init_request`: nvme-core's part of the PDU, then the transport's.
///
/// # Safety
///
/// Called by blk-mq for a new request of a tag set of one of our controllers.
unsafe extern "C" fn init_request<T: Transport>(
    set: *mut bindings::blk_mq_tag_set,
    rq: *mut bindings::request,
    _hctx_idx: c_uint,
    _numa_node: c_int,
) -> c_int {
    // SAFETY: The request is the driver's for the call; its tag set carries `T::Iod` PDUs and
    // has the controller as its driver data (nvme-core sets it).
    unsafe { blk::Request::<T::Iod>::from_raw(rq).init((*set).driver_data.cast()) };
    0
}

/// blk-mq's `queue_rq`.
///
/// # Safety
///
/// Called by blk-mq on a hardware queue [`init_hctx`] set up, with a request to issue.
unsafe extern "C" fn queue_rq<T: Transport>(
    hctx: *mut bindings::blk_mq_hw_ctx,
    bd: *const bindings::blk_mq_queue_data,
) -> bindings::blk_status_t {
    // SAFETY: The caller's promise; blk-mq hands the request to the driver: it is ours until
    // we complete it.
    let (q, rq, last) = unsafe {
        (
            queue_of::<T>(hctx),
            blk::Request::from_blk_mq((*bd).rq),
            (*bd).last,
        )
    };
    match T::queue_rq(q, rq, last) {
        Ok(()) => blk::Status::OK.to_raw(),
        Err(rejected) => rejected.status().to_raw(),
    }
}

/// blk-mq's `queue_rqs`.
///
/// # Safety
///
/// Called by blk-mq with a list of requests of the I/O tag set of one of our controllers.
unsafe extern "C" fn queue_rqs<T: Transport>(list: *mut bindings::rq_list) {
    // SAFETY: blk-mq hands the whole list, of requests of `T`'s I/O tag set, to the driver
    // for the duration of the call, which the list's lifetime does not exceed.
    let mut list = unsafe { blk::RqList::<T>::from_raw(list) };
    T::queue_rqs(&mut list);
}

/// blk-mq's `commit_rqs`.
///
/// # Safety
///
/// Called by blk-mq on a hardware queue [`init_hctx`] set up.
unsafe extern "C" fn commit_rqs<T: Transport>(hctx: *mut bindings::blk_mq_hw_ctx) {
    // SAFETY: The caller's promise.
    T::commit_rqs(unsafe { queue_of::<T>(hctx) });
}

/// blk-mq's `complete`.
///
/// # Safety
///
/// Called by blk-mq with a request of one of our tag sets whose command completed.
unsafe extern "C" fn complete<T: Transport>(rq: *mut bindings::request) {
    // SAFETY: The request is the driver's until it is ended.
    let rq = unsafe { blk::Request::<T::Iod>::from_raw(rq) };
    // SAFETY: The request belongs to a tag set of `T`; the reference ends with the call.
    let q = unsafe { rq.queue::<T>() };
    T::complete_rq(q, rq);
}

/// blk-mq's `timeout`.
///
/// # Safety
///
/// Called by blk-mq with a request of one of our tag sets.
unsafe extern "C" fn timeout<T: Transport>(
    rq: *mut bindings::request,
) -> bindings::blk_eh_timer_return {
    // SAFETY: The timeout handler holds the request for the duration of the call, while
    // the command may still complete; `InFlight` gives no access to the transport's data.
    let rq = unsafe { blk::InFlight::<T::Iod>::from_raw(rq) };
    // SAFETY: The request belongs to a tag set of `T`; the reference ends with the call.
    let q = unsafe { rq.queue::<T>() };
    // SAFETY: The request belongs to a live controller of transport `T`.
    let t = unsafe { transport::<T>(rq.transport_ptr()) };
    if t.timeout(q, rq) {
        bindings::blk_eh_timer_return_BLK_EH_RESET_TIMER
    } else {
        bindings::blk_eh_timer_return_BLK_EH_DONE
    }
}

/// Ends an admin request sent without waiting: `done` with the transport and the request,
/// then the request is freed. Until then it holds the admin queue, so the controller's
/// teardown (`nvme_remove_admin_tag_set`), and with it the transport's free, waits for `done`,
/// though the transport may have stopped waiting for the command (a timeout).
///
/// # Safety
///
/// Called from blk-mq's end of that request, once, on the admin queue of one of our live
/// controllers.
unsafe fn end_sent<T: Transport>(
    rq: *mut bindings::request,
    done: impl FnOnce(&T, &blk::InFlight<T::Iod>),
) -> bindings::rq_end_io_ret {
    // SAFETY: The request is ended and the driver's until it is freed below; its tag set
    // carries `T::Iod` PDUs.
    let ended = unsafe { blk::InFlight::<T::Iod>::from_raw(rq) };
    // SAFETY: The request belongs to a live controller of transport `T`.
    done(unsafe { transport::<T>(ended.transport_ptr()) }, &ended);
    // SAFETY: blk-mq gave the request back; nothing uses it after this.
    unsafe { bindings::blk_mq_free_request(rq) };
    bindings::rq_end_io_ret_RQ_END_IO_NONE
}

/// The end of an Abort [`nvme::Ctrl::submit_abort`] sent: the transport's `abort_done` with
/// its NVMe status.
///
/// # Safety
///
/// As for [`end_sent`].
unsafe extern "C" fn abort_end<T: Transport>(
    rq: *mut bindings::request,
    _error: bindings::blk_status_t,
    _iob: *const bindings::io_comp_batch,
) -> bindings::rq_end_io_ret {
    // SAFETY: The caller's promise.
    unsafe { end_sent::<T>(rq, |t, rq| t.abort_done(rq.nvme_status())) }
}

/// The end of a Delete SQ or CQ [`nvme::Ctrl::submit_delete_queue`] sent: the transport's
/// `delete_done` with the queue.
///
/// # Safety
///
/// As for [`end_sent`].
unsafe extern "C" fn delete_end<T: Transport>(
    rq: *mut bindings::request,
    error: bindings::blk_status_t,
    _iob: *const bindings::io_comp_batch,
) -> bindings::rq_end_io_ret {
    // SAFETY: The caller's promise.
    unsafe {
        end_sent::<T>(rq, |t, rq| {
            t.delete_done(rq.end_io_data() as u16, error != 0)
        })
    }
}

/// blk-mq's `poll`.
///
/// # Safety
///
/// Called by blk-mq on a hardware queue [`init_hctx`] set up, with a batch or a null one.
unsafe extern "C" fn poll<T: Transport>(
    hctx: *mut bindings::blk_mq_hw_ctx,
    iob: *mut bindings::io_comp_batch,
) -> c_int {
    // SAFETY: The caller's promise.
    let q = unsafe { queue_of::<T>(hctx) };
    // SAFETY: The batch, when given, is valid for the duration of the call.
    let mut batch = unsafe { blk::Batch::from_raw(iob) };
    T::poll(q, &mut batch)
}
