// SPDX-License-Identifier: GPL-2.0

//! nvme-core's controller (`struct nvme_ctrl`, inside glue.c's `struct nva_ctrl`): its state
//! machine, the calls a PCI transport makes, and the fields it reads and sets.
//!
//! C header: [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

use core::{
    mem::size_of,
    ptr::{
        addr_of,
        addr_of_mut,
        NonNull, //
    },
};
use kernel::{
    bindings,
    device::{
        Core,
        Device, //
    },
    error::to_result,
    ffi::{
        c_int,
        c_void, //
    },
    pci::Device as PciDevice,
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Release, //
    },
    warn_on, //
};

use super::{
    blk::{
        self,
        TagSetTypes, //
    },
    cpu,
    ffi, //
};
use crate::cmd::{
    Command,
    Completion,
    HostMemoryDescriptor, //
};

// The queue entries are the ABI with the controller and with glue.c (`struct nvme_command`
// and `struct nvme_completion`, whose sizes glue.c checks): DMA rings hold them, as a DMA
// buffer holds host memory buffer descriptors.
// SAFETY: `Command` is `repr(C)` plain integers without padding: any bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Command {}
// SAFETY: `Command` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for Command {}
// SAFETY: `Completion` is `repr(C)` plain integers without padding: any bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Completion {}
// SAFETY: `Completion` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for Completion {}
// SAFETY: `HostMemoryDescriptor` is `repr(C)` plain integers without padding: any bit pattern
// is valid.
unsafe impl kernel::transmute::FromBytes for HostMemoryDescriptor {}
// SAFETY: `HostMemoryDescriptor` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for HostMemoryDescriptor {}

/// nvme-core's controller states (`enum nvme_ctrl_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    New,
    Live,
    Resetting,
    Connecting,
    Deleting,
    DeletingNoIo,
    Dead,
}

impl State {
    fn to_raw(self) -> ffi::nvme_ctrl_state {
        match self {
            Self::New => ffi::nvme_ctrl_state_NVME_CTRL_NEW,
            Self::Live => ffi::nvme_ctrl_state_NVME_CTRL_LIVE,
            Self::Resetting => ffi::nvme_ctrl_state_NVME_CTRL_RESETTING,
            Self::Connecting => ffi::nvme_ctrl_state_NVME_CTRL_CONNECTING,
            Self::Deleting => ffi::nvme_ctrl_state_NVME_CTRL_DELETING,
            Self::DeletingNoIo => ffi::nvme_ctrl_state_NVME_CTRL_DELETING_NOIO,
            Self::Dead => ffi::nvme_ctrl_state_NVME_CTRL_DEAD,
        }
    }

    fn from_raw(raw: ffi::nvme_ctrl_state) -> Self {
        [
            Self::New,
            Self::Live,
            Self::Resetting,
            Self::Connecting,
            Self::Deleting,
            Self::DeletingNoIo,
        ]
        .into_iter()
        .find(|s| s.to_raw() == raw)
        .unwrap_or(Self::Dead)
    }
}

/// A feature that Get and Set Features carry without a data buffer (value and result in the
/// command and its completion): the only kind [`Ctrl::get_features`] and
/// [`Ctrl::set_features`] may name, as they give the device no buffer to write or read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    PowerManagement,
}

impl Feature {
    fn id(self) -> u32 {
        match self {
            Self::PowerManagement => 0x02,
        }
    }
}

/// The quirks the transport itself acts on (nvme-core handles the others).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quirk {
    QueueDepthOne,
    SharedTags,
    Sqes128Bytes,
    SingleVector,
    BrokenMsi,
    MediumPrioritySq,
    DmaAddressBits48,
    DmaPoolAlign512,
    SimpleSuspend,
    /// Command identifiers carry no generation: a duplicate completion is not caught.
    #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
    SkipCidGen,
}

impl Quirk {
    fn bit(self) -> u64 {
        let bit = match self {
            Self::QueueDepthOne => ffi::nvme_quirks_NVME_QUIRK_QDEPTH_ONE,
            Self::SharedTags => ffi::nvme_quirks_NVME_QUIRK_SHARED_TAGS,
            Self::Sqes128Bytes => ffi::nvme_quirks_NVME_QUIRK_128_BYTES_SQES,
            Self::SingleVector => ffi::nvme_quirks_NVME_QUIRK_SINGLE_VECTOR,
            Self::BrokenMsi => ffi::nvme_quirks_NVME_QUIRK_BROKEN_MSI,
            Self::MediumPrioritySq => ffi::nvme_quirks_NVME_QUIRK_MEDIUM_PRIO_SQ,
            Self::DmaAddressBits48 => ffi::nvme_quirks_NVME_QUIRK_DMA_ADDRESS_BITS_48,
            Self::DmaPoolAlign512 => ffi::nvme_quirks_NVME_QUIRK_DMAPOOL_ALIGN_512,
            Self::SimpleSuspend => ffi::nvme_quirks_NVME_QUIRK_SIMPLE_SUSPEND,
            #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
            Self::SkipCidGen => ffi::nvme_quirks_NVME_QUIRK_SKIP_CID_GEN,
        };
        u64::from(bit)
    }
}

/// A set of quirks.
#[derive(Clone, Copy)]
pub(crate) struct Quirks(u64);

impl Quirks {
    pub(super) fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    pub(crate) fn has(self, quirk: Quirk) -> bool {
        self.0 & quirk.bit() != 0
    }
}

/// Blk-mq hardware queues: one per possible CPU.
pub(crate) fn possible_queues() -> u32 {
    // SAFETY: Reads the CPU masks only.
    unsafe { bindings::blk_mq_num_possible_queues(0) }
}

/// The admin queue's depth, and the command identifier of the asynchronous event request.
pub(crate) fn admin_queue_depth() -> u16 {
    ffi::NVME_AQ_DEPTH as u16
}

/// The command identifier nvme-core reserves for the Asynchronous Event Request.
pub(crate) fn aen_command_id() -> u16 {
    ffi::NVME_AQ_BLK_MQ_DEPTH as u16
}

/// Whether completion `cid` on queue `qid` is an asynchronous event (it has no request).
pub(crate) fn is_aen(qid: u16, cid: u16) -> bool {
    // Only the admin queue carries them: asking here first spares each I/O completion a call.
    // SAFETY: A pure function of its arguments.
    qid == 0 && unsafe { ffi::nva_is_aen_cid(qid, cid) }
}

/// The PDU of a tag set's requests: glue.c's part, this layer's, then the transport's.
fn pdu_size<T: TagSetTypes>() -> u32 {
    blk::check_pdu::<T::Iod>();
    (size_of::<ffi::nva_iod>() + size_of::<blk::Mappings>() + size_of::<T::Iod>()) as u32
}

/// A handle to a controller nvme-core knows (or is about to know).
///
/// # Invariants
///
/// Points to a `struct nva_ctrl` made by `nva_ctrl_alloc` that outlives every holder of the
/// handle: handles live inside the transport, which glue.c frees right before the controller.
#[derive(Clone, Copy)]
pub(crate) struct Ctrl(NonNull<ffi::NvaCtrl>);

// SAFETY: nvme-core's controller is used from any context and CPU; it serialises what needs it.
unsafe impl Send for Ctrl {}
// SAFETY: As above.
unsafe impl Sync for Ctrl {}

/// nvme-core's calls on the controller as a whole, made only once `nvme_init_ctrl` succeeded
/// (before that they warn and do nothing) and, for the admin queue's, once it exists. Called
/// out of order they wait or warn (an unfreeze without a freeze), and touch nothing freed.
macro_rules! calls {
    ($($(#[$m:meta])* $name:ident => $ffi:ident if $ready:ident;)*) => {
        $(
            $(#[$m])*
            pub(crate) fn $name(self) {
                if warn_on!(!self.$ready()) {
                    return;
                }
                // SAFETY: The controller is valid (type invariant), and initialised, with the
                // locks, lists and works the call uses, and its admin queue if it needs one
                // (checked above); nvme-core serialises the calls itself.
                unsafe { ffi::$ffi(self.nvme()) }
            }
        )*
    };
}

/// The operations C calls a transport through: nvme-core's for the controller, blk-mq's for
/// its admin and I/O tag sets, the ends of the admin commands sent without waiting, the reset
/// work and a sysfs attribute ([`entry`](super::entry) builds them for the transport).
pub(super) struct Operations {
    pub(super) ctrl: ffi::nvme_ctrl_ops,
    pub(super) admin: bindings::blk_mq_ops,
    pub(super) io: bindings::blk_mq_ops,
    /// Ends an Abort ([`Ctrl::submit_abort`]).
    pub(super) abort_end: bindings::rq_end_io_fn,
    /// Ends a Delete SQ or CQ ([`Ctrl::submit_delete_queue`]), the queue in `end_io_data`.
    pub(super) delete_end: bindings::rq_end_io_fn,
    /// nvme-core's reset work (`reset_work` of the controller).
    pub(super) reset_work: bindings::work_func_t,
    /// sysfs `hmb` written: turns the host memory buffer on or off.
    ///
    /// # Safety
    ///
    /// Called for a live controller made with these operations, while the driver is bound.
    pub(super) set_host_memory: unsafe fn(*mut ffi::NvaCtrl, bool) -> Result,
}

/// The states of a controller's CPU hotplug instances (`struct nva_ctrl`'s `cpu_watch`, zeroed
/// at allocation).
const NOT_WATCHING: i32 = 0;
const CHANGING: i32 = 1;
const WATCHING: i32 = 2;

impl Ctrl {
    /// A controller whose tag sets will use `ops`, which were built for the transport whose
    /// `TagSetTypes` the tag sets are allocated with.
    pub(super) fn alloc(pdev: &PciDevice<Core<'_>>, ops: &'static Operations) -> Result<Self> {
        let raw = core::ptr::from_ref(pdev)
            .cast::<kernel::bindings::pci_dev>()
            .cast_mut();
        // SAFETY: `pdev` is a live PCI device (it is being probed).
        let c = NonNull::new(unsafe { ffi::nva_ctrl_alloc(raw, ops.reset_work) }).ok_or(ENOMEM)?;
        // SAFETY: The controller was just allocated; nothing else uses it yet.
        unsafe { (*c.as_ptr()).ops = core::ptr::from_ref(ops).cast() };
        Ok(Self(c))
    }

    /// The handle of the controller whose nvme-core part `ctrl` is.
    ///
    /// # Safety
    ///
    /// `ctrl` is the `struct nvme_ctrl` of a `struct nva_ctrl` made by `nva_ctrl_alloc`, which
    /// outlives every holder of the handle.
    pub(super) unsafe fn from_core(ctrl: *mut ffi::nvme_ctrl) -> Self {
        // SAFETY: nvme-core's controller is the first member of `struct nva_ctrl` (glue.c
        // asserts it), so the pointers are the same; blk-mq never passes a null one.
        Self(unsafe { NonNull::new_unchecked(ctrl.cast()) })
    }

    pub(super) fn raw(self) -> *mut ffi::NvaCtrl {
        self.0.as_ptr()
    }

    /// nvme-core's controller, for its exported functions: the first member of
    /// `struct nva_ctrl` (glue.c asserts it).
    fn nvme(self) -> *mut ffi::nvme_ctrl {
        self.raw().cast()
    }

    /// # Safety
    ///
    /// nvme-core never took the controller (`init` was not called, or failed).
    pub(super) unsafe fn free_unused(self) {
        // SAFETY: The caller's promise; nothing else holds the controller.
        unsafe { ffi::nva_ctrl_free_unused(self.raw()) };
    }

    /// Sets the transport glue.c's callbacks reach (probe, before anything calls back).
    pub(super) fn set_transport(self, t: *mut c_void) {
        // SAFETY: The controller is valid; no callback reads the field before probe published
        // the controller or added its CPU hotplug instances, which come after this.
        unsafe { (*self.raw()).transport = t };
    }

    /// Hands the controller to nvme-core, with the operations it was allocated with.
    pub(super) fn init(self, quirks: u64, ops: &'static Operations) -> Result {
        // SAFETY: The controller is valid and not yet initialised; it holds its PCI device.
        to_result(unsafe {
            let dev = addr_of_mut!((*(*self.raw()).pdev).dev);
            ffi::nvme_init_ctrl(self.nvme(), dev, &ops.ctrl, quirks as usize)
        })
    }

    pub(super) fn add(self) -> Result {
        // SAFETY: The controller is initialised.
        to_result(unsafe { ffi::nvme_add_ctrl(self.nvme()) })
    }

    /// Drops the reference the controller was created with.
    ///
    /// # Safety
    ///
    /// The caller holds that reference and gives it up: the controller, and with it the
    /// transport, may be freed when this returns if no other reference is left.
    pub(super) unsafe fn put(self) {
        // SAFETY: The controller is valid and holds its device reference (`nvme_put_ctrl`);
        // the caller's promise.
        unsafe { bindings::put_device((*self.nvme()).device) }
    }

    /// Removes the controller's character device; drops the reference `add` took.
    ///
    /// # Safety
    ///
    /// `add` succeeded and this is the only call; as for [`Ctrl::put`], the controller may be
    /// freed when this returns.
    pub(super) unsafe fn uninit(self) {
        // SAFETY: The controller is valid; the caller's promise.
        unsafe { ffi::nvme_uninit_ctrl(self.nvme()) }
    }

    /// Makes the controller the PCI device's driver data, for the PCI callbacks (once probe
    /// succeeded).
    pub(super) fn publish(self) {
        self.set_driver_data(self.raw().cast());
    }

    /// Undoes `publish` (at the start of remove).
    pub(super) fn unpublish(self) {
        self.set_driver_data(core::ptr::null_mut());
    }

    /// `pci_set_drvdata` on the controller's PCI device.
    fn set_driver_data(self, data: *mut c_void) {
        // SAFETY: The controller is valid and holds its PCI device; the PCI core reads the
        // driver data only in the driver's callbacks, which probe and remove order with this.
        unsafe { (*(*self.raw()).pdev).dev.driver_data = data };
    }

    /// Waits for the namespace scan `start` queued.
    pub(crate) fn flush_scan(self) {
        // SAFETY: The controller is valid; nvme-core initialised its work items in `init`.
        unsafe { bindings::flush_work(addr_of_mut!((*self.nvme()).scan_work)) };
    }

    /// Waits for the reset work queued last, if it runs.
    pub(crate) fn flush_reset(self) {
        // SAFETY: The controller is valid; glue.c initialised the work item at allocation.
        unsafe { bindings::flush_work(addr_of_mut!((*self.nvme()).reset_work)) };
    }

    /// nvme-core's count of Abort slots left (Identify ACL), an `atomic_t`.
    fn abort_limit(self) -> *mut bindings::atomic_t {
        // SAFETY: The controller is valid (type invariant): the field is in bounds.
        unsafe { addr_of_mut!((*self.nvme()).abort_limit) }
    }

    /// Gives back an Abort slot [`Ctrl::abort_limit_take`] took.
    pub(crate) fn abort_limit_put(self) {
        // SAFETY: The counter is valid and atomic (see `abort_limit`).
        unsafe { bindings::atomic_inc(self.abort_limit()) };
    }

    calls! {
        /// Announces a live controller: namespace scan, asynchronous events.
        start => nvme_start_ctrl if has_admin_queue;
        stop => nvme_stop_ctrl if initialized;
        start_freeze => nvme_start_freeze if initialized;
        wait_freeze => nvme_wait_freeze if initialized;
        unfreeze => nvme_unfreeze if initialized;
        quiesce_io => nvme_quiesce_io_queues if initialized;
        unquiesce_io => nvme_unquiesce_io_queues if initialized;
        quiesce_admin => nvme_quiesce_admin_queue if has_admin_queue;
        unquiesce_admin => nvme_unquiesce_admin_queue if has_admin_queue;
        sync_queues => nvme_sync_queues if initialized;
        mark_namespaces_dead => nvme_mark_namespaces_dead if initialized;
        remove_namespaces => nvme_remove_namespaces if initialized;
    }

    /// Whether `nvme_init_ctrl` succeeded: it sets the character device last.
    fn initialized(self) -> bool {
        // SAFETY: The controller is valid (type invariant); nvme-core sets the field once.
        !unsafe { (*self.nvme()).device }.is_null()
    }

    /// Ends every request of the I/O tag set the device holds as cancelled
    /// (`nvme_cancel_tagset`), once no completion ring with its tags is open
    /// ([`blk::CompletionRing::close`]); otherwise it warns and cancels nothing. A request
    /// being submitted (started, its command not yet handed to the device) is left alone.
    pub(crate) fn cancel_tagset(self) {
        self.cancel(false);
    }

    /// As [`Ctrl::cancel_tagset`], for the admin tag set (`nvme_cancel_admin_tagset`).
    pub(crate) fn cancel_admin_tagset(self) {
        self.cancel(true);
    }

    fn cancel(self, admin: bool) {
        // SAFETY: The controller is valid (type invariant); nvme-core sets the pointers when
        // a tag set is allocated and `remove_*_tag_set` clears them.
        let set = unsafe {
            if admin {
                (*self.nvme()).admin_tagset
            } else {
                (*self.nvme()).tagset
            }
        };
        if set.is_null() {
            return;
        }
        let counts = self.tag_counts(admin);
        let open = counts.open();
        if warn_on!(open.cmpxchg(0, blk::CANCELLING, Acquire).is_err()) {
            return;
        }
        // SAFETY: The tag set is the controller's and allocated (the pointer is set), and
        // cannot be freed meanwhile (its removal runs where its cancel does). No completion
        // ring can find a request of it (none open, and none can open before the flag is
        // cleared), and requests not handed to the device are left alone: no `Request` of one
        // the callback ends can be held elsewhere.
        unsafe {
            bindings::blk_mq_tagset_busy_iter(set, Some(cancel_request), self.nvme().cast());
            bindings::blk_mq_tagset_wait_completed_request(set);
        }
        open.fetch_sub(blk::CANCELLING, Release);
    }

    /// Whether nvme-core puts a generation into each command identifier, which it advances
    /// at each completion (no `NVME_QUIRK_SKIP_CID_GEN`).
    pub(super) fn advances_generations(self) -> bool {
        // SAFETY: The controller is valid; `init` set the quirks before any tag set exists.
        let quirks = unsafe { (*self.nvme()).quirks } as u64;
        quirks & u64::from(ffi::nvme_quirks_NVME_QUIRK_SKIP_CID_GEN) == 0
    }

    /// The counts the admin tag set's tags, or the I/O tag set's, keep ([`blk::Tags`]).
    pub(super) fn tag_counts(self, admin: bool) -> blk::TagCounts {
        let (c, set) = (self.raw(), usize::from(!admin));
        // SAFETY: The controller is valid; only the fields' addresses are taken.
        let (held, open) = unsafe {
            (
                addr_of_mut!((*c).tags_held[set]),
                addr_of_mut!((*c).tags_open[set]),
            )
        };
        // SAFETY: Fields of the controller, valid while it is (type invariant), which this
        // module accesses atomically only. A field's address is never null.
        unsafe { blk::TagCounts::new(NonNull::new_unchecked(held), NonNull::new_unchecked(open)) }
    }

    /// Whether queues still hold tags of the tag set, which must then not be freed: it
    /// warns, and the tag set is left as it is.
    fn tags_still_held(self, admin: bool) -> bool {
        warn_on!(self.tag_counts(admin).held().load(Acquire) != 0)
    }

    /// Frees the admin tag set and the admin request queue, which waits for the admin
    /// requests to end; nothing without them, or while a queue holds its tags.
    pub(crate) fn remove_admin_tag_set(self) {
        if self.tags_still_held(true) {
            return;
        }
        let c = self.raw();
        // SAFETY: The controller is valid (type invariant); a tag set's tags exist from its
        // allocation until `blk_mq_free_tag_set` clears them, and a cancel afterwards finds no
        // tag set (the pointer is cleared). No queue reaches the tag set (none holds its
        // tags), and destroying the admin request queue first waits for its requests.
        unsafe {
            if !(*c).admin_tagset.tags.is_null() {
                ffi::nvme_remove_admin_tag_set(self.nvme());
            }
            (*self.nvme()).admin_tagset = core::ptr::null_mut();
            // Destroyed and put: nothing may reach it any more.
            (*self.nvme()).admin_q = core::ptr::null_mut();
        }
    }

    /// Frees the I/O tag set, after the namespaces went or were marked dead (the transport's
    /// part, not typed: design.rst); nothing without one, or while a queue holds its tags.
    pub(crate) fn remove_io_tag_set(self) {
        if self.tags_still_held(false) {
            return;
        }
        // SAFETY: As for `remove_admin_tag_set`, but for the namespaces' request queues, which
        // the transport removed or marked dead (see above).
        unsafe {
            if !(*self.io_tag_set()).tags.is_null() {
                ffi::nvme_remove_io_tag_set(self.nvme());
            }
            (*self.nvme()).tagset = core::ptr::null_mut();
        }
    }

    /// The controller's character device (`nvmeN`), for messages; before `init`, the PCI
    /// device.
    pub(crate) fn device(&self) -> &Device {
        // SAFETY: The controller is valid (type invariant). Its character device, once
        // `init` set it up, lives as long as the controller; before that the PCI device, which
        // the controller holds a reference to, stands in. `Device` is a transparent wrapper of
        // `struct device`.
        unsafe {
            let chardev = (*self.nvme()).device;
            let dev = if chardev.is_null() {
                addr_of_mut!((*(*self.raw()).pdev).dev)
            } else {
                chardev
            };
            &*dev.cast::<Device>()
        }
    }

    /// The `N` of `nvmeN`.
    pub(crate) fn instance(self) -> u32 {
        // SAFETY: The controller is valid; `init` set the field for good.
        unsafe { (*self.nvme()).instance as u32 }
    }

    pub(crate) fn state(self) -> State {
        // SAFETY: The controller is valid; nvme-core changes the state under its lock and
        // readers read it once without it (`nvme_ctrl_state`).
        State::from_raw(unsafe { addr_of!((*self.nvme()).state).read_volatile() })
    }

    /// Moves to `state` if nvme-core's state machine allows it from the current one.
    pub(crate) fn change_state(self, state: State) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nvme_change_ctrl_state(self.nvme(), state.to_raw()) }
    }

    /// In a state the controller never leaves for live again (`nvme_state_terminal`).
    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self.state(),
            State::Deleting | State::DeletingNoIo | State::Dead
        )
    }

    pub(crate) fn has_quirk(self, quirk: Quirk) -> bool {
        // SAFETY: The controller is valid; `init` set the field for good.
        Quirks(unsafe { (*self.nvme()).quirks } as u64).has(quirk)
    }

    pub(crate) fn set_cap(self, cap: u64) {
        // SAFETY: The controller is valid; the transport owns this field.
        unsafe { (*self.nvme()).cap = cap };
    }

    /// Tells nvme-core how many queues have memory (admin included); it sizes the I/O tag set
    /// from that (`ctrl.queue_count`).
    pub(crate) fn set_allocated_queues(self, n: u32) {
        // SAFETY: The controller is valid; the transport owns this field.
        unsafe { (*self.nvme()).queue_count = n };
    }

    /// The I/O queue size nvme-core gives its tag sets, 0's based; at most 4095, as a tag
    /// must fit the 12 low bits of a command identifier (`nvme_cid`), the rest being the
    /// generation that tells a stale completion from a current one.
    pub(crate) fn set_sqsize(self, sqsize: u16) {
        const MAX_SQSIZE: u16 = (1 << 12) - 1;
        // SAFETY: The controller is valid; the transport owns this field.
        unsafe { (*self.nvme()).sqsize = sqsize.min(MAX_SQSIZE) };
    }

    pub(crate) fn set_limits(self, max_hw_sectors: u32, max_segments: u32, max_integrity: u32) {
        let c = self.nvme();
        // SAFETY: The controller is valid; the transport owns these fields.
        unsafe {
            (*c).max_hw_sectors = max_hw_sectors;
            (*c).max_segments = max_segments;
            (*c).max_integrity_segments = max_integrity;
        }
    }

    pub(crate) fn set_max_integrity_segments(self, n: u32) {
        // SAFETY: The controller is valid; the transport owns this field.
        unsafe { (*self.nvme()).max_integrity_segments = n };
    }

    pub(crate) fn set_numa_node(self, node: i32) {
        // SAFETY: The controller is valid; the transport owns this field.
        unsafe { (*self.nvme()).numa_node = node };
    }

    /// What Identify asks for as host memory buffer: HMPRE, HMMIN, HMMINDS (in 4 KiB units)
    /// and HMMAXD (descriptors, 0: any number).
    pub(crate) fn host_memory_wanted(self) -> (u32, u32, u32, u16) {
        let c = self.nvme();
        // SAFETY: The controller is valid; nvme-core sets the fields in `init_finish`, which
        // the same reset work runs before asking.
        unsafe { ((*c).hmpre, (*c).hmmin, (*c).hmminds, (*c).hmmaxd) }
    }

    /// Tells sysfs (`hmb`) whether the controller uses its host memory buffer.
    pub(crate) fn set_hmb_enabled(self, enabled: bool) {
        // SAFETY: The controller is valid; sysfs reads the field with a volatile read
        // (sys/sysfs.rs), and only the transport writes it.
        unsafe { addr_of_mut!((*self.raw()).hmb).write_volatile(enabled) };
    }

    /// Gives sysfs the controller's CMBLOC and CMBSZ (`cmb`, `cmbloc`, `cmbsz`; hidden while
    /// CMBSZ is 0); [`Ctrl::update_attrs`] shows them.
    pub(crate) fn set_cmb_registers(self, cmbloc: u32, cmbsz: u32) {
        let c = self.raw();
        // SAFETY: The controller is valid; sysfs reads each field with a volatile read
        // (sys/sysfs.rs), and only the transport writes them.
        unsafe {
            addr_of_mut!((*c).cmbloc).write_volatile(cmbloc);
            addr_of_mut!((*c).cmbsz).write_volatile(cmbsz);
        }
    }

    /// CC as nvme-core last wrote it.
    fn config(self) -> u32 {
        // SAFETY: The controller is valid; nvme-core writes CC from the transport's own reset
        // and shutdown paths, which also ask this.
        unsafe { (*self.nvme()).ctrl_config }
    }

    /// Whether nvme-core last wrote CC with EN set.
    pub(crate) fn is_enabled(self) -> bool {
        self.config() & ffi::NVME_CC_ENABLE != 0
    }

    /// Whether nvme-core last shut the controller down with a normal shutdown notification.
    pub(crate) fn was_shut_down(self) -> bool {
        self.config() & ffi::NVME_CC_SHN_NORMAL != 0
    }

    /// Whether the controller offers shadow doorbells (Doorbell Buffer Config).
    pub(crate) fn supports_dbbuf(self) -> bool {
        // SAFETY: The controller is valid; Identify set the field in `init_finish`.
        u32::from(unsafe { (*self.nvme()).oacs }) & ffi::NVME_CTRL_OACS_DBBUF_SUPP != 0
    }

    pub(crate) fn supports_sgl(self) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nva_ctrl_sgl_supported(self.raw()) }
    }

    pub(crate) fn supports_meta_sgl(self) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nva_ctrl_meta_sgl_supported(self.raw()) }
    }

    /// The highest power state (Identify Controller NPSS).
    pub(crate) fn npss(self) -> u8 {
        // SAFETY: The controller is valid; Identify set the field in `init_finish`.
        unsafe { (*self.nvme()).npss }
    }

    /// Forgets the highest power state until Identify reads it again (a suspend the
    /// controller refused, as `pci.c`'s `nvme_suspend`).
    pub(crate) fn clear_npss(self) {
        // SAFETY: The controller is valid; nvme-core writes the field only in `init_finish`,
        // which the frozen controller does not run meanwhile.
        unsafe { (*self.nvme()).npss = 0 };
    }

    /// nvme-core's admin command timeout, in jiffies.
    pub(crate) fn admin_timeout(self) -> usize {
        // SAFETY: The controller is valid; `init` set the field for good.
        unsafe { (*self.nvme()).admin_timeout as usize }
    }

    /// How many queue maps the I/O tag set was made with (0 without one).
    pub(crate) fn io_tag_set_maps(self) -> u32 {
        // SAFETY: The controller is valid; nvme-core's pointer to the I/O tag set is set and
        // cleared by the transport's own calls, and points to the tag set inside
        // `struct nva_ctrl` while set.
        unsafe {
            let set = (*self.nvme()).tagset;
            if set.is_null() {
                0
            } else {
                (*set).nr_maps
            }
        }
    }

    pub(crate) fn has_io_tag_set(self) -> bool {
        self.io_tag_set_maps() != 0
    }

    /// Whether the admin request queue exists: from its tag set's allocation to its removal,
    /// which clears the pointer.
    pub(crate) fn has_admin_queue(self) -> bool {
        // SAFETY: The controller is valid; nvme-core sets the pointer when it allocates the
        // admin tag set, `remove_admin_tag_set` clears it.
        self.initialized() && !unsafe { (*self.nvme()).admin_q }.is_null()
    }

    /// Whether the admin request queue exists and is not being torn down.
    pub(crate) fn admin_queue_usable(self) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nva_ctrl_admin_queue_usable(self.raw()) }
    }

    /// The controller's CPU hotplug instances: `NOT_WATCHING`, `WATCHING`, or `CHANGING` while
    /// one of the two functions below adds or removes them.
    fn cpu_watch(self) -> &'static Atomic<i32> {
        // SAFETY: The controller is valid for as long as anyone holds it; only the functions
        // below touch the field, atomically.
        unsafe { Atomic::from_ptr(addr_of_mut!((*self.raw()).cpu_watch)) }
    }

    /// The nodes of the controller's instances of the two hotplug states.
    fn cpu_nodes(self) -> [*mut bindings::hlist_node; 2] {
        let c = self.raw();
        // SAFETY: The controller is valid; only the fields' addresses are taken.
        unsafe {
            [
                addr_of_mut!((*c).cpu_down_node),
                addr_of_mut!((*c).cpu_dead_node),
            ]
        }
    }

    /// Calls the transport's `cpu_going_down` and `cpu_down_ended` for every CPU hotplug event
    /// from now on, until [`Ctrl::unwatch_cpus`]; `EINVAL` before the controller has its
    /// transport or without the module's hotplug states, `EBUSY` if it watches already.
    pub(crate) fn watch_cpus(self) -> Result {
        // SAFETY: The controller is valid.
        if unsafe { (*self.raw()).transport }.is_null() {
            return Err(EINVAL);
        }
        let state = self.cpu_watch();
        if state.cmpxchg(NOT_WATCHING, CHANGING, Acquire).is_err() {
            return Err(EBUSY);
        }
        let [down, dead] = self.cpu_nodes();
        // SAFETY: The nodes are the controller's, which lives until `free_ctrl` removes them
        // (`unwatch_cpus`) at the latest, and no instances (the state was `NOT_WATCHING`); the
        // callbacks reach the transport, which is set (above) and freed after that removal.
        let watched = unsafe { cpu::watch(down, dead) };
        state.store(
            if watched.is_ok() {
                WATCHING
            } else {
                NOT_WATCHING
            },
            Release,
        );
        watched
    }

    /// Stops the hotplug callbacks; none runs any more when this returns. Nothing if they are
    /// stopped; the controller's free stops them at the latest.
    pub(crate) fn unwatch_cpus(self) {
        let state = self.cpu_watch();
        if state.cmpxchg(WATCHING, CHANGING, Acquire).is_ok() {
            let [down, dead] = self.cpu_nodes();
            // SAFETY: In `WATCHING`, `watch_cpus` added the nodes, and only this removes them.
            unsafe { cpu::unwatch(down, dead) };
            state.store(NOT_WATCHING, Release);
        }
    }

    /// Sets CC (EN included) and waits for CSTS.RDY, as nvme-core does it.
    pub(crate) fn enable(self) -> Result {
        // SAFETY: The controller is valid; nvme-core serialises register access itself.
        to_result(unsafe { ffi::nvme_enable_ctrl(self.nvme()) })
    }

    /// Clears CC.EN, or with `shutdown` sends a normal shutdown notification, and waits.
    pub(crate) fn disable(self, shutdown: bool) -> Result {
        // SAFETY: The controller is valid.
        to_result(unsafe { ffi::nvme_disable_ctrl(self.nvme(), shutdown) })
    }

    /// Identifies the controller and sets up what nvme-core derives from it.
    pub(crate) fn init_finish(self, was_suspended: bool) -> Result {
        // SAFETY: The controller is valid and its admin queue is live.
        to_result(unsafe { ffi::nvme_init_ctrl_finish(self.nvme(), was_suspended) })
    }

    /// Waits while a reset is in progress; false if the controller left for a terminal state.
    pub(crate) fn wait_reset(self) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nvme_wait_reset(self.nvme()) }
    }

    /// Queues the reset work of a controller in the resetting state.
    pub(crate) fn try_sched_reset(self) -> Result {
        // SAFETY: The controller is valid.
        to_result(unsafe { ffi::nvme_try_sched_reset(self.nvme()) })
    }

    /// Waits up to the I/O timeout for entered requests to finish; false if time ran out.
    pub(crate) fn wait_freeze_timeout(self) -> bool {
        // SAFETY: The controller is valid.
        unsafe { ffi::nvme_wait_freeze_timeout(self.nvme()) > 0 }
    }

    /// Asks for `count` I/O queues (Set Features, Number of Queues); returns how many the
    /// controller grants (0 when it refuses, leaving an admin-only controller).
    pub(crate) fn set_queue_count(self, count: u32) -> Result<u32> {
        let mut n = count as c_int;
        // SAFETY: The controller is valid and `n` is valid for writes.
        to_result(unsafe { ffi::nvme_set_queue_count(self.nvme(), &mut n) })?;
        Ok(n.max(0) as u32)
    }

    /// Get Features: the NVMe status (0 is success) and the result dword.
    pub(crate) fn get_features(self, feature: Feature) -> Result<(u32, u32)> {
        let mut result = 0;
        // SAFETY: The controller is valid and `result` is valid for writes; the feature has
        // no data buffer, and none is given.
        let ret = unsafe {
            ffi::nvme_get_features(
                self.nvme(),
                feature.id(),
                0,
                core::ptr::null_mut(),
                0,
                core::ptr::from_mut(&mut result).cast(),
            )
        };
        to_result(ret.min(0))?;
        Ok((ret as u32, result))
    }

    /// Set Features to `value`: the NVMe status (0 is success).
    pub(crate) fn set_features(self, feature: Feature, value: u32) -> Result<u32> {
        // SAFETY: The controller is valid; the feature has no data buffer, and none is given,
        // nor a place for the result.
        let ret = unsafe {
            ffi::nvme_set_features(
                self.nvme(),
                feature.id(),
                value,
                core::ptr::null_mut(),
                0,
                core::ptr::null_mut(),
            )
        };
        to_result(ret.min(0))?;
        Ok(ret as u32)
    }

    /// Runs an admin command and waits for it: the NVMe status (0 is success). The DMA
    /// addresses it carries are the transport's part, not typed (design.rst).
    pub(crate) fn submit_sync(self, cmd: &Command) -> Result<u32> {
        if !self.has_admin_queue() {
            return Err(ENODEV);
        }
        // nvme-core takes the command as its own to change.
        let mut copy = *cmd;
        // SAFETY: The controller is valid and its admin queue exists (above); `copy` is a 64-byte
        // NVMe command (glue.c checks the size of
        // `struct nvme_command` at build time, `Command` has the alignment of its u64s).
        let ret = unsafe {
            let cmd = core::ptr::from_mut(&mut copy).cast();
            ffi::nvme_submit_sync_cmd((*self.nvme()).admin_q, cmd, core::ptr::null_mut(), 0)
        };
        to_result(ret.min(0))?;
        Ok(ret as u32)
    }

    /// Hands the completion of an Asynchronous Event Request to nvme-core, its status and
    /// result as the device wrote them (little-endian), as nvme-core takes them.
    pub(crate) fn complete_aen(self, status: u16, result: u64) {
        // SAFETY: The controller is valid; nvme-core allows this from interrupt context. The
        // result is 8 bytes like `union nvme_result`, read by nvme-core during the call.
        unsafe {
            let res = core::ptr::from_ref(&result).cast_mut().cast();
            ffi::nvme_complete_async_event(self.nvme(), status, res)
        }
    }

    /// Takes one of the controller's Abort slots (Identify ACL); false when none is left.
    pub(crate) fn abort_limit_take(self) -> bool {
        let limit = self.abort_limit();
        // SAFETY: The counter is valid and atomic (see `abort_limit`).
        if unsafe { bindings::atomic_dec_return(limit) } >= 0 {
            return true;
        }
        // SAFETY: As above.
        unsafe { bindings::atomic_inc(limit) };
        false
    }

    /// Makes the admin tag set, whose requests carry the transport's `T::Iod`; `EBUSY` while
    /// the controller has one.
    pub(crate) fn alloc_admin_tag_set<T: TagSetTypes>(self) -> Result {
        let c = self.raw();
        // SAFETY: The controller is valid; a tag set in use (its tags exist) is not set up
        // again; the operations were built for the transport (`alloc`), and the PDU has room
        // for its `T::Iod`.
        to_result(unsafe {
            if !(*c).admin_tagset.tags.is_null() {
                return Err(EBUSY);
            }
            let (set, ops) = (addr_of_mut!((*c).admin_tagset), &self.operations().admin);
            ffi::nvme_alloc_admin_tag_set(self.nvme(), set, ops, pdu_size::<T>())
        })
    }

    /// Makes the I/O tag set with `nr_maps` queue maps, whose requests carry the transport's
    /// `T::Iod`; `EBUSY` while the controller has one.
    pub(crate) fn alloc_io_tag_set<T: TagSetTypes>(self, nr_maps: u32) -> Result {
        let (set, ops) = (self.io_tag_set(), &self.operations().io);
        // SAFETY: As for `alloc_admin_tag_set`.
        to_result(unsafe {
            if !(*set).tags.is_null() {
                return Err(EBUSY);
            }
            ffi::nvme_alloc_io_tag_set(self.nvme(), set, ops, nr_maps, pdu_size::<T>())
        })
    }

    /// Changes the number of hardware queues of the I/O tag set (frozen queues only); nothing
    /// without one.
    pub(crate) fn update_nr_hw_queues(self, nr: u32) {
        let set = self.io_tag_set();
        // SAFETY: The controller is valid; the tag set is set up while its tags exist (until
        // `blk_mq_free_tag_set` clears them).
        unsafe {
            if !(*set).tags.is_null() {
                bindings::blk_mq_update_nr_hw_queues(set, nr as c_int);
            }
        }
    }

    /// The I/O tag set inside `struct nva_ctrl`, set up or not.
    fn io_tag_set(self) -> *mut bindings::blk_mq_tag_set {
        // SAFETY: The controller is valid (type invariant): the field is in bounds.
        unsafe { addr_of_mut!((*self.raw()).tagset) }
    }

    /// Sends an Abort for `rq`'s command on queue `sqid`, without waiting; the transport's
    /// `abort_done` runs when it completes.
    pub(crate) fn submit_abort<P: Default>(self, rq: &blk::Request<P>, sqid: u16) -> Result {
        let cmd = Command::abort(sqid, rq.command_id());
        self.submit_nowait(cmd, self.operations().abort_end, 0)
    }

    /// Sends Delete I/O SQ (`opcode` 0) or CQ (4) for `qid` without waiting; the transport's
    /// `delete_done` runs with `qid` when it ends.
    pub(crate) fn submit_delete_queue(self, opcode: u8, qid: u16) -> Result {
        let cmd = Command::delete_queue(opcode, qid);
        self.submit_nowait(cmd, self.operations().delete_end, qid.into())
    }

    /// Sends admin command `cmd` without waiting; blk-mq calls `end` when it ends, with
    /// `data` as the request's `end_io_data`, and `end` frees the request.
    fn submit_nowait(self, mut cmd: Command, end: bindings::rq_end_io_fn, data: usize) -> Result {
        // Neither command of `submit_*` transfers data: the request reads from the device.
        const OP: bindings::blk_opf_t = bindings::req_op_REQ_OP_DRV_IN;
        const NOWAIT: bindings::blk_mq_req_flags_t = bindings::BLK_MQ_REQ_NOWAIT;
        if !self.has_admin_queue() {
            return Err(ENODEV);
        }
        // SAFETY: The controller is valid and its admin queue exists (above); the request, once allocated, is ours until blk-mq ends it, and
        // `nvme_init_request` copies the command into it.
        unsafe {
            let q = (*self.nvme()).admin_q;
            let rq = kernel::error::from_err_ptr(bindings::blk_mq_alloc_request(q, OP, NOWAIT))?;
            ffi::nvme_init_request(rq, core::ptr::from_mut(&mut cmd).cast());
            (*rq).end_io = end;
            (*rq).end_io_data = data as *mut c_void;
            bindings::blk_execute_rq_nowait(rq, false);
        }
        Ok(())
    }

    /// The operations the controller was allocated with.
    fn operations(self) -> &'static Operations {
        // SAFETY: The controller is valid; `alloc` set the pointer to a `&'static Operations`.
        unsafe { &*(*self.raw()).ops.cast::<Operations>() }
    }
}

/// Cancels one request of a tag set ([`Ctrl::cancel_tagset`]) if the device holds it.
///
/// # Safety
///
/// Called by `blk_mq_tagset_busy_iter` on a started request of one of this module's tag sets,
/// with `ctrl` its controller's `struct nvme_ctrl`.
unsafe extern "C" fn cancel_request(rq: *mut bindings::request, ctrl: *mut c_void) -> bool {
    // SAFETY: The caller's promise; blk-mq took a reference on the request (a fully ordered
    // access) before it found the request started.
    if unsafe { blk::take_from_device(rq) } {
        // SAFETY: As above; nvme-core ends the request only if it is still in flight.
        unsafe { ffi::nvme_cancel_request(rq.cast(), ctrl) };
    }
    true
}
