// SPDX-License-Identifier: GPL-2.0

//! blk-mq as an NVMe transport sees it: requests (with nvme-core's command and the transport's
//! per-request data), hardware queue tags, completion batches, request lists and queue maps.
//!
//! C headers: [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h) and
//! [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

use core::{
    marker::PhantomData,
    mem::MaybeUninit,
    ptr::{
        addr_of,
        addr_of_mut,
        NonNull, //
    },
};
use kernel::{
    bindings,
    dma::Coherent,
    io::io_write,
    prelude::*,
    str::CStr,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        barrier::{
            dma_mb,
            smp_mb,
            Read,
            Write, //
        }, //
    },
    warn_on, //
};

use super::{
    coherent::Ring,
    ffi, //
};
use crate::cmd::{
    Command,
    Completion,
    SglDescriptor, //
};

/// What a transport's tag sets carry: the queue each hardware queue's `hctx->driver_data`
/// points to, and the transport's part of each request's PDU. [`Transport`](super::Transport)
/// extends it; the tag set types below and nvme-core's tag set allocation need only this part.
pub(crate) trait TagSetTypes {
    /// What `hctx->driver_data` points to: one queue pair.
    type Queue: Sync;
    /// The transport's part of each request's driver data.
    type Iod: Default + 'static;
}

/// A block status (`blk_status_t`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Status(u8);

impl Status {
    pub(crate) const OK: Self = Self(0);

    pub(crate) fn ioerr() -> Self {
        // SAFETY: An initialised static of glue.c.
        Self(unsafe { ffi::nva_sts_ioerr })
    }

    /// Out of a resource the request needs now; blk-mq retries it later.
    pub(crate) fn resource() -> Self {
        // SAFETY: An initialised static of glue.c.
        Self(unsafe { ffi::nva_sts_resource })
    }

    /// The fast path does not apply; take the general one.
    pub(crate) fn again() -> Self {
        // SAFETY: An initialised static of glue.c.
        Self(unsafe { ffi::nva_sts_again })
    }

    pub(crate) fn to_raw(self) -> u8 {
        self.0
    }

    pub(super) fn from_raw_err(raw: u8) -> Self {
        Self(raw)
    }

    pub(super) fn from_raw(raw: u8) -> Result<(), Self> {
        if raw == 0 {
            Ok(())
        } else {
            Err(Self(raw))
        }
    }
}

/// A request `queue_rq` gives back to blk-mq with a status (retry it later, or end it with
/// that error). Made only from the request itself, so that a request handed back cannot also
/// have been ended or issued.
pub(crate) struct Rejected(Status);

impl Rejected {
    pub(super) fn status(&self) -> Status {
        self.0
    }
}

/// Asserts at build time that a transport PDU fits the 8-byte alignment glue.c gives it.
pub(super) const fn check_pdu<P>() {
    assert!(core::mem::align_of::<P>() <= 8);
}

/// What [`dma`](super::dma) mapped of one part of a request, its data or its metadata.
/// Unmapping reads it here, in this layer's part of the PDU, never an address the transport
/// gives back.
#[derive(Default)]
pub(super) enum Mapped {
    #[default]
    Nothing,
    /// One range, mapped on its own for `dev`.
    Single {
        dev: *mut bindings::device,
        addr: u64,
        len: u32,
    },
    /// `bytes` the block layer's iterator mapped for `dev` (`p2p`, how), and the ranges when
    /// each must be unmapped on its own.
    Iter {
        dev: *mut bindings::device,
        bytes: usize,
        p2p: u8,
        ranges: Option<SavedRanges>,
    },
}

/// An array of mapped ranges from a segment pool: its address, the pool's mark and capacity
/// (`dma::Origin`), and how many it holds.
pub(super) struct SavedRanges {
    pub(super) array: NonNull<core::ffi::c_void>,
    pub(super) origin: u64,
    pub(super) len: usize,
}

/// This layer's part of each request's PDU, between glue.c's and the transport's.
#[derive(Default)]
pub(super) struct Mappings {
    data: Mapped,
    meta: Mapped,
}

impl Mappings {
    /// The metadata's record if `meta`, else the data's.
    pub(super) fn part(&mut self, meta: bool) -> &mut Mapped {
        if meta {
            &mut self.meta
        } else {
            &mut self.data
        }
    }
}

const _: () =
    assert!(core::mem::size_of::<Mappings>() % 8 == 0 && core::mem::align_of::<Mappings>() <= 8);
// A record overwritten is forgotten, never undone (`Request::from_blk_mq`).
const _: () = assert!(!core::mem::needs_drop::<Mappings>());

/// Nanoseconds on the clock blk-mq stamps requests with (`ktime_get_ns`, monotonic).
pub(crate) fn clock_ns() -> u64 {
    // SAFETY: `ktime_get` may be called in any context but NMI, where the driver never runs.
    let now = unsafe { bindings::ktime_get() };
    // ktime_t is never negative.
    now as u64
}

/// A request the driver holds: between `queue_rq` and its completion, or inside a blk-mq
/// callback that hands it over. Carries the transport's per-request data `P`.
///
/// # Invariants
///
/// Points to a live request of a tag set whose PDU is glue.c's `struct nva_iod` followed by
/// this layer's [`Mappings`] and a `P` (the tag set was made by
/// [`nvme::Ctrl::alloc_io_tag_set`], or the admin variant, for a transport whose `Iod` is `P`,
/// and its `init_request` set up nvme-core's part). The holder has exclusive use of the last two
/// parts of its PDU.
///
/// [`nvme::Ctrl::alloc_io_tag_set`]: super::nvme::Ctrl::alloc_io_tag_set
pub(crate) struct Request<P> {
    rq: NonNull<bindings::request>,
    _pdu: PhantomData<P>,
}

// SAFETY: A request is handed between CPUs by blk-mq; the holder is its only user.
unsafe impl<P: Send> Send for Request<P> {}

macro_rules! getters {
    ($($(#[$m:meta])* $name:ident -> $ty:ty = $ffi:ident;)*) => {
        $(
            $(#[$m])*
            pub(crate) fn $name(&self) -> $ty {
                // SAFETY: The request is live (type invariant).
                unsafe { ffi::$ffi(self.raw()) as $ty }
            }
        )*
    };
}

impl<P> Request<P> {
    pub(super) fn raw(&self) -> *mut bindings::request {
        self.rq.as_ptr()
    }

    /// glue.c's part of the PDU (`struct nva_iod`), which blk-mq allocates right after the
    /// request (`blk_mq_rq_to_pdu`).
    pub(super) fn iod(&self) -> *mut ffi::nva_iod {
        // SAFETY: The request is live (type invariant): its allocation holds the PDU after it.
        unsafe { self.raw().add(1).cast() }
    }

    /// nvme-core's part of the PDU (`nvme_req`), the first member of glue.c's.
    fn nvme(&self) -> *mut ffi::nvme_request {
        // SAFETY: The PDU is in bounds (see `iod`).
        unsafe { addr_of_mut!((*self.iod()).req) }
    }

    /// The request's NVMe command (`nvme_req(rq)->cmd`, which `init_request` points there).
    fn command_ptr(&self) -> *mut Command {
        // SAFETY: The PDU is in bounds (see `iod`); the command is a 64-byte
        // `struct nvme_command` (checked in glue.c), whose layout `Command` has.
        unsafe { addr_of_mut!((*self.iod()).cmd).cast() }
    }
}

impl<P: Default> Request<P> {
    /// # Safety
    ///
    /// `rq` satisfies the type invariants, and the caller hands over its use of the request.
    pub(super) unsafe fn from_raw(rq: *mut bindings::request) -> Self {
        Self {
            // SAFETY: blk-mq never hands out a null request (the caller's promise).
            rq: unsafe { NonNull::new_unchecked(rq) },
            _pdu: PhantomData,
        }
    }

    /// The queue (`hctx->driver_data`) the request was issued on, for the duration `'a` of
    /// a blk-mq callback on the request's tag set.
    ///
    /// # Safety
    ///
    /// The request belongs to a tag set of transport `T`, and `'a` ends before the callback
    /// returns.
    pub(super) unsafe fn queue<'a, T: TagSetTypes<Iod = P>>(&self) -> &'a T::Queue {
        // SAFETY: The request is mapped to a hardware queue of a tag set of `T`, whose driver
        // data `init_hctx` set to a queue `T` owns until `free_ctrl`, which cannot come while
        // blk-mq runs a callback of the tag set (the caller's promise).
        unsafe { &*(*(*self.raw()).mq_hctx).driver_data.cast::<T::Queue>() }
    }

    /// The transport's per-request data.
    pub(crate) fn pdu(&mut self) -> &mut P {
        // SAFETY: glue.c places a `P` after its part of the PDU, aligned for it (`check_pdu`);
        // the holder has exclusive use of it (type invariant). blk-mq allocates the PDU with
        // the request, and `init_request` gives it a valid value (`init_pdu`) before any use.
        unsafe { &mut *self.transport_data() }
    }

    /// This layer's part: the flexible array that ends glue.c's part starts with it.
    fn mappings_ptr(&self) -> *mut Mappings {
        // SAFETY: The PDU is in bounds (see `iod`), and the tag set was made with room for
        // `Mappings` and a `P` after glue.c's part (type invariant).
        unsafe { addr_of_mut!((*self.iod()).rust).cast() }
    }

    /// What this layer mapped of the request.
    pub(super) fn mappings(&mut self) -> &mut Mappings {
        // SAFETY: As in `pdu`: the holder has exclusive use of this part too, which `init`
        // and `from_blk_mq` give a valid value.
        unsafe { &mut *self.mappings_ptr() }
    }

    /// Where the transport's data sits: after this layer's part, 8-byte aligned (a multiple
    /// of 8 bytes long).
    fn transport_data(&self) -> *mut P {
        // SAFETY: As in `mappings_ptr`.
        unsafe { self.mappings_ptr().add(1).cast() }
    }

    /// Sets up a new request of controller `ctrl`: nvme-core's part of the PDU, which points
    /// at the PDU's command, then the transport's.
    ///
    /// # Safety
    ///
    /// `ctrl` is the live controller whose tag set the request belongs to.
    pub(super) unsafe fn init(&mut self, ctrl: *mut ffi::nvme_ctrl) {
        let nvme = self.nvme();
        // SAFETY: nvme-core's part is valid (see `nvme`) and the driver's alone while blk-mq
        // initialises the request.
        unsafe {
            (*nvme).ctrl = ctrl;
            (*nvme).cmd = self.command_ptr().cast();
            self.mappings_ptr().write(Mappings::default());
        }
        self.init_pdu();
    }

    /// A request blk-mq hands to the driver to issue.
    ///
    /// # Safety
    ///
    /// As for [`Request::from_raw`], for a request blk-mq hands over: a new use of it, whose
    /// earlier use ended.
    pub(super) unsafe fn from_blk_mq(rq: *mut bindings::request) -> Self {
        // SAFETY: The caller's promise.
        let mut rq = unsafe { Self::from_raw(rq) };
        let m = rq.mappings();
        // Should an earlier use have left something mapped (its holder ended it without
        // unmapping), its memory went back to its owner, so unmapping it now could write there
        // (a bounce buffer copied back): it stays mapped, forgotten (a record has no drop).
        // Two stores, cheaper than testing first.
        m.data = Mapped::Nothing;
        m.meta = Mapped::Nothing;
        rq
    }

    /// Resets the transport's data for a new command.
    pub(crate) fn init_pdu(&mut self) {
        // SAFETY: As in `pdu`; the old contents (plain data) are overwritten without reading.
        unsafe { self.transport_data().write(P::default()) };
    }

    /// The NVMe command nvme-core built for the request, to point at the request's data.
    pub(crate) fn command(&mut self) -> CommandPointers<'_> {
        // SAFETY: The command has no other user while the driver holds the request (see
        // `command_ptr`).
        CommandPointers(unsafe { &mut *self.command_ptr() })
    }

    /// When the block layer started accounting the request, on [`clock_ns`]'s clock, if that
    /// is when it was submitted: blk-mq stamps it once the request is built from its bio
    /// (`blk_account_io_start`, with I/O statistics on, the default), which is its submission
    /// unless an I/O scheduler held it since.
    pub(crate) fn accounted_since_ns(&self) -> Option<u64> {
        const IO_STAT: bindings::req_flags_t = 1 << bindings::rqf_flags___RQF_IO_STAT;
        const USE_SCHED: bindings::req_flags_t = 1 << bindings::rqf_flags___RQF_USE_SCHED;
        // SAFETY: The request is live (type invariant); blk-mq set both fields before handing
        // it to the driver and leaves them alone while the driver holds it.
        let (flags, start) = unsafe { ((*self.raw()).rq_flags, (*self.raw()).start_time_ns) };
        (flags & (IO_STAT | USE_SCHED) == IO_STAT).then_some(start)
    }

    /// The blk-mq tag.
    pub(crate) fn tag(&self) -> u16 {
        // SAFETY: The request is live (type invariant); a started request's tag is set.
        unsafe { (*self.raw()).tag as u16 }
    }

    getters! {
        /// The NVMe command identifier (tag plus generation).
        command_id -> u16 = nva_rq_cid;
        /// The bytes of data to transfer (differs from `bytes` for discards).
        payload_bytes -> u32 = nva_rq_payload_bytes;
        nr_phys_segments -> u16 = nva_rq_nr_phys_segments;
        has_integrity -> bool = nva_rq_has_integrity;
        /// Whether the data has gaps a PRP list cannot describe.
        has_gaps_within_page -> bool = nva_rq_gaps_within_page;
    }

    /// Whether the request has data segments to map (a bio).
    pub(crate) fn has_data_segments(&self) -> bool {
        self.nr_phys_segments() != 0
    }

    pub(crate) fn opcode(&self) -> u8 {
        // SAFETY: The command is valid (see `command_ptr`); nvme-core wrote it before issuing
        // the request and nothing changes its opcode while the driver holds it.
        unsafe { (*self.command_ptr()).opcode }
    }

    pub(crate) fn bytes(&self) -> u32 {
        // SAFETY: The request is live (type invariant); the block layer changes its length
        // only while it owns the request (`blk_rq_bytes`).
        unsafe { (*self.raw()).__data_len }
    }

    pub(crate) fn nr_integrity_segments(&self) -> u16 {
        // SAFETY: As in `bytes`.
        unsafe { (*self.raw()).nr_integrity_segments }
    }

    /// nvme-core's flags of the request (`NVME_REQ_*`).
    fn nvme_flags(&self) -> u32 {
        // SAFETY: nvme-core's part is valid (see `nvme`); it clears the flags when it sets up
        // the command, and the timeout handler sets them, not concurrently with this holder.
        u32::from(unsafe { (*self.nvme()).flags })
    }

    /// A passthrough command from user space.
    pub(crate) fn is_user_command(&self) -> bool {
        self.nvme_flags() & ffi::NVME_REQ_USERCMD != 0
    }

    /// How many times nvme-core retried the command (after an error or a reset).
    pub(crate) fn retries(&self) -> u8 {
        // SAFETY: nvme-core's part is valid (see `nvme`); nvme-core counts retries only
        // while it owns the request.
        unsafe { (*self.nvme()).retries }
    }

    /// Still on the device, as far as blk-mq knows (`blk_mq_rq_state`).
    pub(crate) fn is_in_flight(&self) -> bool {
        // SAFETY: The request is live (type invariant); blk-mq changes the state with
        // WRITE_ONCE and readers read it once.
        let state = unsafe { addr_of!((*self.raw()).state).read_volatile() };
        state == bindings::mq_rq_state_MQ_RQ_IN_FLIGHT
    }

    /// glue.c's mark that an Abort was sent for this submission of the command, set by the
    /// timeout handler while the command may complete.
    fn aborted(&self) -> *mut bool {
        // SAFETY: The PDU is in bounds (see `iod`).
        unsafe { addr_of_mut!((*self.iod()).aborted) }
    }

    /// An Abort was sent for this submission of the command ([`Self::mark_aborted`]).
    pub(crate) fn is_aborted(&self) -> bool {
        // SAFETY: The mark is valid (see `aborted`), read and written whole and volatile.
        unsafe { self.aborted().read_volatile() }
    }

    /// The block operation's name, for messages.
    pub(crate) fn op_name(&self) -> &CStr {
        // SAFETY: The request is live; blk_op_str returns a static string.
        unsafe { CStr::from_char_ptr(ffi::nva_rq_op_name(self.raw())) }
    }

    /// Whether the controller state allows the request now.
    pub(crate) fn check_ready(&self) -> bool {
        // SAFETY: The request is live and belongs to an nvme-core controller.
        unsafe { ffi::nva_rq_check_ready(self.raw()) }
    }

    /// Gives the request back to blk-mq with `status` (from `queue_rq`); an I/O error, with a
    /// warning, for `OK`, which would tell blk-mq that the request was issued.
    pub(crate) fn reject(self, status: Status) -> Rejected {
        if warn_on!(status == Status::OK) {
            return Rejected(Status::ioerr());
        }
        Rejected(status)
    }

    /// Deals with a request the controller cannot take in its state: gives it back to be
    /// retried, or nvme-core ends it with a host path error (`Ok`).
    pub(crate) fn fail_nonready(self) -> Result<(), Rejected> {
        // SAFETY: The request is live and not started; `init_request` set its controller.
        let status = unsafe { ffi::nvme_fail_nonready_command((*self.nvme()).ctrl, self.raw()) };
        Status::from_raw(status).map_err(Rejected)
    }

    /// Ends a started request that never reached the controller with a host path error:
    /// nvme-core requeues it, fails it over or fails it, as for a lost path.
    pub(crate) fn fail_host_path(self) {
        // SAFETY: The request is live, started and not on the controller; its data is unmapped
        // and its command cleaned up. It goes back to nvme-core here.
        unsafe { ffi::nvme_host_path_error(self.raw()) };
    }

    /// Has nvme-core build the request's command; clears the abort mark of its last submission.
    pub(crate) fn setup_command(&mut self) -> Result<(), Status> {
        // SAFETY: The request is live and not started, so no timeout handler looks at the
        // mark; its request queue's data is its namespace (or null for the admin queue), as
        // nvme-core's queues have it.
        let status = unsafe {
            self.aborted().write(false);
            ffi::nvme_setup_cmd((*(*self.raw()).q).queuedata.cast(), self.raw())
        };
        Status::from_raw(status)
    }

    /// Undoes `setup_command` for a request that will not be issued.
    pub(crate) fn cleanup_command(&mut self) {
        // SAFETY: The request is live and its command was set up.
        unsafe { ffi::nvme_cleanup_cmd(self.raw()) }
    }

    /// Marks the request started (the timeout clock runs from here).
    pub(crate) fn start(&mut self) {
        // Not the device's yet, before blk-mq shows it started: a cancel leaves it alone.
        // SAFETY: The request is live (type invariant).
        unsafe { on_device(self.raw()) }.store(0, Relaxed);
        smp_mb(Write);
        // SAFETY: The request is live and about to be issued.
        unsafe { ffi::nva_rq_start(self.raw()) }
    }

    /// Hands the request, its command copied to the submission ring, to the device: from here
    /// only its completion gives it back, or a cancel of its tag set.
    #[inline(always)]
    pub(crate) fn give_to_device(self) {
        // SAFETY: The request is live (type invariant).
        unsafe { on_device(self.raw()) }.store(1, Release);
    }

    /// Marks a request the timeout handler gives up on, so that it is not retried.
    pub(crate) fn mark_cancelled(&self) {
        let flags = self.nvme_flags() | ffi::NVME_REQ_CANCELLED;
        // SAFETY: nvme-core's part is valid (see `nvme`); as `nvme_flags` says, the timeout
        // handler is the only writer meanwhile.
        unsafe { (*self.nvme()).flags = flags as u8 };
    }

    /// Marks a request whose command the timeout handler sent an Abort for.
    pub(crate) fn mark_aborted(&self) {
        // SAFETY: The mark is valid (see `aborted`), read and written whole and volatile.
        unsafe { self.aborted().write_volatile(true) };
    }

    /// Traces the submission queue head the device reported with the request's completion,
    /// and the queue's tail, read only if the trace is on.
    pub(crate) fn trace_sq(&self, sq_head: u16, sq_tail: &Atomic<i16>) {
        // SAFETY: The request is live; the tail is valid for the call and read with
        // `READ_ONCE`, as the atomic's own loads are.
        unsafe { ffi::nva_trace_sq(self.raw(), sq_head, sq_tail.as_ptr()) }
    }

    /// Records the device's completion. `None` when the request is finished elsewhere (on the
    /// CPU that issued it, or dropped by fault injection); otherwise the caller completes it.
    #[inline(always)]
    fn try_complete(self, status: u16, result: u64) -> Option<Self> {
        // SAFETY: The request is live and on the device, which just completed it.
        if unsafe { ffi::nva_try_complete_req(self.raw(), status, result) } {
            None
        } else {
            Some(self)
        }
    }

    /// Adds a completed request, its data unmapped, to `batch`, which ends it as
    /// [`Request::complete`] would; gives it back when it must complete on its own.
    pub(crate) fn add_to_batch(self, batch: &mut Batch<'_>) -> Option<Self> {
        let Some(iob) = batch.raw() else {
            return Some(self);
        };
        // SAFETY: The request is completed and live; the batch is valid. A mapping left behind
        // stays mapped, and is forgotten at the request's next use (`from_blk_mq`), never
        // unmapped into memory that went back to its owner.
        if unsafe { ffi::nva_add_to_batch(self.raw(), iob) } {
            None
        } else {
            Some(self)
        }
    }

    /// Ends the request through nvme-core (retry, failover or end, as its status says).
    pub(crate) fn complete(self) {
        // SAFETY: The request is live and held here alone; it goes back to nvme-core and blk-mq
        // here. Its data, if still mapped, stays so (see `add_to_batch`).
        unsafe { ffi::nvme_complete_rq(self.raw()) }
    }
}

/// Whether the command was handed to the device ([`Request::give_to_device`]) since the request
/// started.
///
/// # Safety
///
/// `rq` is a live request of a tag set this module made (its PDU is glue.c's `struct nva_iod`).
unsafe fn on_device<'a>(rq: *mut bindings::request) -> &'a Atomic<i32> {
    // SAFETY: The PDU follows the request (see `Request::iod`); the field is only accessed
    // atomically.
    unsafe { Atomic::from_ptr(addr_of_mut!((*rq.add(1).cast::<ffi::nva_iod>()).on_device)) }
}

/// Takes a started request back from the device for a cancel: true once per handing.
///
/// # Safety
///
/// `rq` is a live request of a tag set this module made, found started after a fully ordered
/// access (blk-mq's reference on it).
pub(super) unsafe fn take_from_device(rq: *mut bindings::request) -> bool {
    // SAFETY: The caller's promise. Fully ordered: after the started state was read, so not the
    // value an earlier start of the request left.
    unsafe { on_device(rq) }.xchg(0, Full) == 1
}

/// A request's NVMe command as the transport may change it: where its data and metadata are.
/// The rest is nvme-core's, the command identifier above all, by which the completion finds
/// the request. That the addresses are the request's mappings is the transport's part, not
/// typed (design.rst).
pub(crate) struct CommandPointers<'a>(&'a mut Command);

impl CommandPointers<'_> {
    pub(crate) fn set_prps(&mut self, prp1: u64, prp2: u64) {
        self.0.set_prps(prp1, prp2);
    }

    pub(crate) fn set_sgl(&mut self, desc: SglDescriptor) {
        self.0.set_sgl(desc);
    }

    pub(crate) fn set_metadata(&mut self, addr: u64, segment: bool) {
        self.0.set_metadata(addr, segment);
    }
}

impl core::ops::Deref for CommandPointers<'_> {
    type Target = Command;

    fn deref(&self) -> &Command {
        self.0
    }
}

/// A request on the controller, seen from the timeout handler: its command may complete at
/// any moment, so the transport's data is out of reach. It derefs to a shared `Request`, which
/// reads the request and marks it; its PDU and its data mapping need a `&mut Request`.
pub(crate) struct InFlight<P>(Request<P>);

impl<P: Default> InFlight<P> {
    /// # Safety
    ///
    /// As for [`Request::from_raw`], except that the holder does not own the request.
    pub(super) unsafe fn from_raw(rq: *mut bindings::request) -> Self {
        // SAFETY: The caller's promise; `InFlight` never touches the transport's data.
        Self(unsafe { Request::from_raw(rq) })
    }

    /// The NVMe status nvme-core recorded for an ended request.
    pub(super) fn nvme_status(&self) -> u16 {
        // SAFETY: nvme-core's part is valid (see `Request::nvme`); the status was recorded
        // when the command completed, before the request ended.
        unsafe { (*self.0.nvme()).status }
    }

    /// What the sender stored with an ended request for its end (`end_io_data`).
    pub(super) fn end_io_data(&self) -> usize {
        // SAFETY: The request is live; the sender set the field before issuing it.
        unsafe { (*self.0.raw()).end_io_data as usize }
    }

    /// The transport of the request's controller.
    pub(super) fn transport_ptr(&self) -> *mut core::ffi::c_void {
        // SAFETY: The request is live and belongs to one of our controllers, whose
        // `struct nvme_ctrl` is the first member of a `struct nva_ctrl` (glue.c asserts it).
        unsafe { (*(*self.0.nvme()).ctrl.cast::<ffi::NvaCtrl>()).transport }
    }
}

impl<P> core::ops::Deref for InFlight<P> {
    type Target = Request<P>;

    fn deref(&self) -> &Request<P> {
        &self.0
    }
}

/// The tags of one hardware queue: from a command identifier to the request it names, whose
/// transport data is a `P`. Only a [`CompletionRing`] looks them up.
///
/// # Invariants
///
/// At most one of `tags` (open: requests may be found) and `parked` (closed) is some: blk-mq's
/// tags of the hardware queue the holder serves, of a tag set whose PDUs carry a `P`, counted
/// in `counts` (`held`, and `open` while open); `generations` unless the controller has
/// `NVME_QUIRK_SKIP_CID_GEN`.
pub(crate) struct Tags<P> {
    tags: Option<NonNull<bindings::blk_mq_tags>>,
    parked: Option<NonNull<bindings::blk_mq_tags>>,
    /// nvme-core advances the generation in the command identifier at each completion, so
    /// an identifier seen again finds nothing.
    generations: bool,
    counts: Option<TagCounts>,
    _pdu: PhantomData<P>,
}

// SAFETY: blk-mq's tags may be looked up from any CPU; the requests found are `Send` as `P` is;
// the counts are atomic.
unsafe impl<P: Send> Send for Tags<P> {}

/// Set in a tag set's count of open tags while a cancel of its requests runs.
pub(super) const CANCELLING: i32 = 1 << 30;

/// A controller's counts for one of its tag sets: the holders of its tags, which keep it from
/// being freed ([`nvme::Ctrl::remove_io_tag_set`](super::nvme::Ctrl::remove_io_tag_set)), and
/// those of them open, which keep its requests from being cancelled
/// ([`nvme::Ctrl::cancel_tagset`](super::nvme::Ctrl::cancel_tagset)).
///
/// # Invariants
///
/// Both point to `int`s of a controller that outlives the holders of the value, accessed
/// atomically only.
#[derive(Clone, Copy)]
pub(super) struct TagCounts {
    held: NonNull<i32>,
    open: NonNull<i32>,
}

impl TagCounts {
    /// # Safety
    ///
    /// As the type invariants say.
    pub(super) unsafe fn new(held: NonNull<i32>, open: NonNull<i32>) -> Self {
        Self { held, open }
    }

    pub(super) fn held(&self) -> &Atomic<i32> {
        // SAFETY: Valid and accessed atomically only (type invariants).
        unsafe { Atomic::from_ptr(self.held.as_ptr()) }
    }

    pub(super) fn open(&self) -> &Atomic<i32> {
        // SAFETY: As above.
        unsafe { Atomic::from_ptr(self.open.as_ptr()) }
    }

    /// Counts one more open holder, unless a cancel runs (false then).
    fn try_open(&self) -> bool {
        // A cancel that began before sees this holder as it leaves; one that begins after
        // sees it open and refuses.
        if self.open().fetch_add(1, Acquire) & CANCELLING == 0 {
            return true;
        }
        self.open().fetch_sub(1, Release);
        false
    }
}

impl<P: Default> Tags<P> {
    pub(crate) const fn none() -> Self {
        Self {
            tags: None,
            parked: None,
            generations: true,
            counts: None,
            _pdu: PhantomData,
        }
    }

    /// Open tags, or closed ones while a cancel of their tag set runs.
    ///
    /// # Safety
    ///
    /// `tags` are blk-mq's tags of a hardware queue, valid while it is mapped and its tag set
    /// is not freed, of a tag set of `P` PDUs, of a controller that advances generations if
    /// `generations`, with `counts` that tag set's.
    pub(super) unsafe fn from_raw(
        tags: NonNull<bindings::blk_mq_tags>,
        generations: bool,
        counts: TagCounts,
    ) -> Self {
        counts.held().fetch_add(1, Relaxed);
        // Closed if a cancel runs (blk-mq may set hardware queues up again meanwhile): the queue
        // pair's creation opens them.
        let open = counts.try_open();
        Self {
            tags: open.then_some(tags),
            parked: (!open).then_some(tags),
            generations,
            counts: Some(counts),
            _pdu: PhantomData,
        }
    }

    /// Finds no request until reopened; a cancel of the tag set waits for none closed.
    fn close(&mut self) {
        if let (Some(tags), Some(counts)) = (self.tags.take(), self.counts) {
            self.parked = Some(tags);
            counts.open().fetch_sub(1, Release);
        }
    }

    /// Opens closed tags again, unless a cancel of the tag set runs (it warns then).
    fn reopen(&mut self) {
        if let (Some(tags), Some(counts)) = (self.parked, self.counts) {
            if !warn_on!(!counts.try_open()) {
                self.tags = Some(tags);
                self.parked = None;
            }
        }
    }

    /// The request in flight under command identifier `cid`, if its generation matches.
    ///
    /// # Safety
    ///
    /// `cid` comes from a completion the controller posted on the queue of these tags, and no
    /// request found with it since is held without [`Request::try_complete`] having run.
    #[inline(always)]
    unsafe fn find(&self, cid: u16) -> Option<Request<P>> {
        let tags = self.tags?.as_ptr();
        // SAFETY: `tags` are valid (type invariant); glue.c checks the tag's range and the
        // command's generation, which nvme-core advances at each completion, so a stale or
        // duplicate completion yields null. Controllers with `NVME_QUIRK_SKIP_CID_GEN` carry
        // no generation: they are trusted, as by the C driver, to complete a command once.
        let rq = unsafe { ffi::nva_find_rq(tags, cid) };
        // SAFETY: A found request is in flight on this queue, issued by the transport; its tag
        // set has `P` PDUs (type invariant); the device completing it hands it back to the
        // driver, and nothing else holds it (the caller's promise).
        NonNull::new(rq).map(|rq| unsafe { Request::from_raw(rq.as_ptr()) })
    }
}

impl<P> Drop for Tags<P> {
    fn drop(&mut self) {
        if let Some(counts) = self.counts {
            if self.tags.is_some() {
                counts.open().fetch_sub(1, Release);
            }
            counts.held().fetch_sub(1, Release);
        }
    }
}

/// A completion queue's ring, where the controller posts, and the tags its command
/// identifiers lead to. It hands each posted entry out once ([`CompletionRing::next`]), and
/// only the entry turns into a request, through this ring's tags, and only by completing it
/// ([`Found::complete`]) before the next entry: a request reached here is one the device
/// completed, never one a caller named, which could be held elsewhere (`queue_rq` between
/// setting its command up and copying it to the submission ring).
pub(crate) struct CompletionRing<P> {
    ring: Ring<Completion>,
    /// Entries of `ring` in use: its length, up to `u16::MAX`.
    depth: u16,
    head: u16,
    phase: u16,
    tags: Tags<P>,
}

impl<P: Default> CompletionRing<P> {
    pub(crate) const fn new() -> Self {
        Self {
            ring: Ring::none(),
            depth: 0,
            head: 0,
            phase: 1,
            tags: Tags::none(),
        }
    }

    /// Takes `ring` as the queue's, for the controller to post to once it is given its bus
    /// address; [`CompletionRing::restart`] before.
    pub(crate) fn install(&mut self, ring: Coherent<[Completion]>) {
        self.ring = Ring::new(ring);
        self.depth = u16::try_from(self.ring.len()).unwrap_or(u16::MAX);
    }

    /// Gives the ring up (the controller no longer uses it).
    pub(crate) fn take(&mut self) -> Option<Coherent<[Completion]>> {
        self.depth = 0;
        self.ring.take()
    }

    pub(crate) fn dma_address(&self) -> Option<u64> {
        self.ring.buf().map(Coherent::dma_address)
    }

    /// Hands out no entry, until [`CompletionRing::restart`]: the requests of the tag set may
    /// be cancelled once every ring with its tags is closed.
    pub(crate) fn close(&mut self) {
        self.tags.close();
    }

    /// Starts again at entry 0 with phase 1, as the controller does with a newly created
    /// queue (`nvme_init_queue`), open.
    pub(crate) fn restart(&mut self) {
        self.tags.reopen();
        self.head = 0;
        self.phase = 1;
        if let Some(ring) = self.ring.buf() {
            for i in 0..ring.len() {
                // An old entry with the current phase would look freshly posted.
                let _ = Self::clear(ring, i);
            }
        }
    }

    fn clear(ring: &Coherent<[Completion]>, index: usize) -> Result {
        io_write!(ring, [try: index].status, 0);
        Ok(())
    }

    /// Takes the tags blk-mq set the queue's hardware context up with (again).
    pub(crate) fn set_tags(&mut self, tags: Tags<P>) {
        self.tags = tags;
    }

    /// Where the next entry will be posted: the value of the CQ head doorbell.
    pub(crate) fn head(&self) -> u16 {
        self.head
    }

    /// Entry `index`, if the ring has it (see [`Ring::entry`]).
    #[inline(always)]
    fn entry(&self, index: u16) -> Option<*mut Completion> {
        self.ring.entry(usize::from(index))
    }

    /// The entry at `head` if the controller posted it (its phase tag is the current one).
    #[inline(always)]
    fn posted(&self) -> Option<*mut Completion> {
        let entry = self.entry(self.head)?;
        // SAFETY: An entry of the ring, aligned (`Ring::entry`), which lives as long as
        // `self`'s borrow; the controller writes it, hence read volatile.
        let status = unsafe { addr_of!((*entry).status).read_volatile() };
        (Completion::phase(status) == self.phase).then_some(entry)
    }

    /// Whether the controller posted an entry not handed out yet.
    pub(crate) fn pending(&self) -> bool {
        self.posted().is_some()
    }

    /// The next entry the controller posted, if any; the head moves past it.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<Posted<'_, P>> {
        let slot = self.posted()?;
        // The phase tag is read before the rest of the entry.
        dma_mb(Read);
        // SAFETY: An entry of the ring, which `self`'s borrow keeps.
        let entry = unsafe { slot.read_volatile() };
        // `head` is below `depth`, so it does not overflow.
        let next = self.head.wrapping_add(1);
        self.head = if next >= self.depth {
            self.phase ^= 1;
            0
        } else {
            next
        };
        Some(Posted {
            entry,
            tags: &self.tags,
        })
    }

    /// The entry [`CompletionRing::next`] handed out last, once more, as a controller that
    /// posts a completion twice would: fault injection, for controllers whose command
    /// identifiers carry a generation (the entry then finds no request).
    #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
    pub(crate) fn repeat_last(&mut self) -> Option<Posted<'_, P>> {
        if !self.tags.generations {
            return None;
        }
        let last = match self.head {
            0 => self.depth.checked_sub(1)?,
            head => head - 1,
        };
        // SAFETY: An entry of the ring, which `self`'s borrow keeps.
        let entry = unsafe { self.entry(last)?.read_volatile() };
        Some(Posted {
            entry,
            tags: &self.tags,
        })
    }
}

/// An entry the controller posted, handed out once by its [`CompletionRing`].
pub(crate) struct Posted<'a, P> {
    entry: Completion,
    tags: &'a Tags<P>,
}

impl<'a, P: Default> Posted<'a, P> {
    pub(crate) fn entry(&self) -> &Completion {
        &self.entry
    }

    /// The request the entry completes, if its identifier names one in flight.
    #[inline(always)]
    pub(crate) fn find(self) -> Option<Found<'a, P>> {
        // SAFETY: The entry was posted on the queue of these tags and is handed out once
        // (`CompletionRing::next`, `repeat_last` only where generations make it find
        // nothing); a request found from an earlier entry was completed (`Found::complete`)
        // before this entry could be had, as `Found` borrows the ring. A device that posts
        // an identifier it was not given is trusted no less by the C driver.
        let rq = unsafe { self.tags.find(self.entry.command_id()) }?;
        Some(Found {
            rq,
            entry: self.entry,
            _ring: PhantomData,
        })
    }
}

/// A request found by its completion, not yet completed: readable, and its PDU writable, but
/// not to be given away before [`Found::complete`] records the completion.
pub(crate) struct Found<'a, P> {
    rq: Request<P>,
    entry: Completion,
    _ring: PhantomData<&'a ()>,
}

impl<P: Default> Found<'_, P> {
    /// The transport's per-request data.
    pub(crate) fn pdu(&mut self) -> &mut P {
        self.rq.pdu()
    }

    /// Records the device's completion. `None` when the request is finished elsewhere (on
    /// the CPU that issued it, or dropped by fault injection); otherwise the caller completes
    /// it.
    #[inline(always)]
    pub(crate) fn complete(self) -> Option<Request<P>> {
        self.rq.try_complete(self.entry.status, self.entry.result)
    }
}

impl<P> core::ops::Deref for Found<'_, P> {
    type Target = Request<P>;

    fn deref(&self) -> &Request<P> {
        &self.rq
    }
}

/// Requests completed together and ended as a batch after the queue's lock is dropped.
pub(crate) struct Batch<'a> {
    iob: Option<NonNull<bindings::io_comp_batch>>,
    _life: PhantomData<&'a mut bindings::io_comp_batch>,
}

/// A batch owned by the caller (an interrupt or timer reaping completions).
pub(crate) struct OwnedBatch {
    iob: MaybeUninit<bindings::io_comp_batch>,
}

impl OwnedBatch {
    pub(crate) fn new() -> Self {
        // All zeroes is an empty batch (`DEFINE_IO_COMP_BATCH` is `= { }`): made here, every
        // interrupt is spared a call into C.
        Self {
            iob: MaybeUninit::zeroed(),
        }
    }

    pub(crate) fn batch(&mut self) -> Batch<'_> {
        Batch {
            iob: NonNull::new(self.iob.as_mut_ptr()),
            _life: PhantomData,
        }
    }
}

impl Drop for OwnedBatch {
    fn drop(&mut self) {
        // SAFETY: An empty batch from `new`, or one blk-mq added requests to; ends those.
        unsafe { ffi::nva_end_batch(self.iob.as_mut_ptr()) };
    }
}

impl Batch<'_> {
    /// # Safety
    ///
    /// `iob` is null or a batch valid for the lifetime of the result.
    pub(super) unsafe fn from_raw(iob: *mut bindings::io_comp_batch) -> Self {
        Self {
            iob: NonNull::new(iob),
            _life: PhantomData,
        }
    }

    /// A batch that takes nothing: every request completes on its own.
    pub(crate) fn none() -> Batch<'static> {
        Batch {
            iob: None,
            _life: PhantomData,
        }
    }

    fn raw(&self) -> Option<*mut bindings::io_comp_batch> {
        self.iob.map(NonNull::as_ptr)
    }
}

/// The requests blk-mq hands `queue_rqs` (for the duration `'a` of the call); what is left
/// in it when the call returns is requeued by blk-mq.
pub(crate) struct RqList<'a, T: TagSetTypes> {
    list: NonNull<bindings::rq_list>,
    _call: PhantomData<&'a T>,
}

impl<'a, T: TagSetTypes> RqList<'a, T> {
    /// # Safety
    ///
    /// `list` is blk-mq's list for `queue_rqs`, of requests of a tag set of `T`, valid for
    /// `'a`, which ends before the call returns.
    pub(super) unsafe fn from_raw(list: *mut bindings::rq_list) -> Self {
        Self {
            // SAFETY: blk-mq passes a valid list (the caller's promise).
            list: unsafe { NonNull::new_unchecked(list) },
            _call: PhantomData,
        }
    }

    /// Takes the first request off the list, with the queue it goes to.
    pub(crate) fn pop(&mut self) -> Option<(&'a T::Queue, Request<T::Iod>)> {
        // SAFETY: The list is valid (the caller's promise in `from_raw`).
        let rq = unsafe { ffi::nva_rq_list_pop(self.list.as_ptr()) };
        // SAFETY: Requests on the list are handed to the driver (type invariants hold: a tag
        // set of `T`).
        let rq: Request<T::Iod> = unsafe { Request::from_blk_mq(NonNull::new(rq)?.as_ptr()) };
        // SAFETY: The request belongs to a tag set of `T`; `'a` ends with the call.
        let q: &'a T::Queue = unsafe { rq.queue::<T>() };
        Some((q, rq))
    }

    /// Puts a request back, to be requeued by blk-mq.
    pub(crate) fn push(&mut self, rq: Request<T::Iod>) {
        // SAFETY: The list is valid; the request goes back to blk-mq through it.
        unsafe { ffi::nva_rq_list_add_tail(self.list.as_ptr(), rq.raw()) }
    }
}

/// A list of requests of the driver's own, to submit together.
pub(crate) struct LocalRqList<P> {
    list: MaybeUninit<bindings::rq_list>,
    _pdu: PhantomData<P>,
}

impl<P: Default> LocalRqList<P> {
    pub(crate) fn new() -> Self {
        let mut list = MaybeUninit::uninit();
        // SAFETY: Initialises the list head (both pointers null).
        unsafe { ffi::nva_rq_list_init(list.as_mut_ptr()) };
        Self {
            list,
            _pdu: PhantomData,
        }
    }

    pub(crate) fn push(&mut self, rq: Request<P>) {
        // SAFETY: The list is initialised; it holds the request until popped.
        unsafe { ffi::nva_rq_list_add_tail(self.list.as_mut_ptr(), rq.raw()) }
    }

    pub(crate) fn pop(&mut self) -> Option<Request<P>> {
        // SAFETY: The list is initialised.
        let rq = unsafe { ffi::nva_rq_list_pop(self.list.as_mut_ptr()) };
        // SAFETY: Only requests the driver held were pushed.
        NonNull::new(rq).map(|rq| unsafe { Request::from_raw(rq.as_ptr()) })
    }
}

/// The kinds of queue map of an NVMe I/O tag set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapKind {
    Default,
    Read,
    Poll,
}

impl MapKind {
    fn raw(self) -> u32 {
        match self {
            Self::Default => bindings::hctx_type_HCTX_TYPE_DEFAULT,
            Self::Read => bindings::hctx_type_HCTX_TYPE_READ,
            Self::Poll => bindings::hctx_type_HCTX_TYPE_POLL,
        }
    }
}

/// The queue maps of the I/O tag set, being set up (`map_queues`).
pub(crate) struct QueueMaps<'a> {
    set: NonNull<bindings::blk_mq_tag_set>,
    ctrl: NonNull<ffi::NvaCtrl>,
    _life: PhantomData<&'a mut bindings::blk_mq_tag_set>,
}

impl QueueMaps<'_> {
    /// # Safety
    ///
    /// `set` is the I/O tag set of the live controller `ctrl`, being mapped by blk-mq for the
    /// result's lifetime.
    pub(super) unsafe fn from_raw(
        set: *mut bindings::blk_mq_tag_set,
        ctrl: *mut ffi::NvaCtrl,
    ) -> Self {
        Self {
            // SAFETY: blk-mq passes a valid tag set (the caller's promise).
            set: unsafe { NonNull::new_unchecked(set) },
            // SAFETY: A live controller (the caller's promise).
            ctrl: unsafe { NonNull::new_unchecked(ctrl) },
            _life: PhantomData,
        }
    }

    /// Whether the tag set has a map of this kind.
    pub(crate) fn has(&self, kind: MapKind) -> bool {
        // SAFETY: The tag set is valid (type invariant).
        kind.raw() < unsafe { (*self.set.as_ptr()).nr_maps }
    }

    /// Gives map `kind` `nr_queues` hardware queues from `queue_offset` on, spread over the
    /// CPUs like the interrupt vectors from `vector_offset` on, or evenly without vectors.
    /// Queues the tag set does not have get a warning, and the default map sends every CPU to
    /// the first queue then (the others get none).
    pub(crate) fn map(
        &mut self,
        kind: MapKind,
        nr_queues: u32,
        queue_offset: u32,
        vector_offset: Option<u32>,
    ) {
        if !self.has(kind) {
            return;
        }
        // SAFETY: The tag set is valid and being mapped, so nothing else uses its maps (type
        // invariant), and it has map `kind`.
        let (set, map) = unsafe {
            let set = &mut *self.set.as_ptr();
            let nr_hw_queues = set.nr_hw_queues;
            (nr_hw_queues, &mut set.map[kind.raw() as usize])
        };
        if warn_on!(queue_offset > set || nr_queues > set - queue_offset) {
            // blk-mq cleared the CPU table before map_queues: every CPU goes to the first
            // queue of the default map, and the other maps get none.
            map.nr_queues = u32::from(kind == MapKind::Default);
            map.queue_offset = 0;
            return;
        }
        map.nr_queues = nr_queues;
        map.queue_offset = queue_offset;
        if nr_queues == 0 {
            return;
        }
        // SAFETY: blk-mq calls map_queues with the maps' CPU tables allocated; the queues were
        // checked to exist, so the CPU tables name only queues of the tag set. The controller
        // is live (type invariant) and holds its PCI device.
        unsafe {
            match vector_offset {
                Some(v) => {
                    let dev = addr_of_mut!((*(*self.ctrl.as_ptr()).pdev).dev);
                    bindings::blk_mq_map_hw_queues(map, dev, v)
                }
                None => bindings::blk_mq_map_queues(map),
            }
        }
    }
}
