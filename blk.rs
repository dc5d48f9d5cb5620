// SPDX-License-Identifier: GPL-2.0

//! A small safe layer over the blk-mq C API, for a hardware driver.
//!
//! The 7.3 `kernel::block::mq` abstraction serves software devices (rnull): it has no per-hctx
//! data, per-request driver data, request fields, error completion, queue maps, poll callback or
//! queue limits. This file provides what a PCI driver needs, and is the only place that touches
//! `struct request`, `struct blk_mq_tag_set` and `struct gendisk` directly:
//!
//! - [`Operations`]: the driver's callbacks, built into one static `blk_mq_ops` per driver;
//! - [`TagSet`]: hardware queues, depth, per-request data ([`Operations::Pdu`]), queue maps;
//! - [`Request`]: a token for a request the driver owns, with its fields and ways to end it;
//! - [`Disk`]: a gendisk with its queue limits, added under the PCI device.
//!
//! No `timeout` callback is installed: on kernels built with kCFI a Rust function cannot stand
//! in for one returning `enum blk_eh_timer_return`. The driver runs its own watchdog instead
//! ([`TagSet::for_each_busy`] walks the requests in flight).

use core::{ffi::c_void, marker::PhantomData, ptr::NonNull};
use kernel::{bindings, device, error::to_result, fmt, prelude::*, types::Opaque};

/// `blk_status_t` (see `cmd::blk_status` for the values the driver uses).
pub(crate) type Status = u8;

/// The kind of I/O a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
    Other(u32),
}

/// `REQ_OP_MASK`: the low 8 bits of `cmd_flags` hold the operation.
const REQ_OP_MASK: u32 = (1 << bindings::REQ_OP_BITS) - 1;
const REQ_FUA: u32 = 1 << bindings::req_flag_bits___REQ_FUA;
const REQ_NOUNMAP: u32 = 1 << bindings::req_flag_bits___REQ_NOUNMAP;
const REQ_FAILFAST: u32 = (1 << bindings::req_flag_bits___REQ_FAILFAST_DEV)
    | (1 << bindings::req_flag_bits___REQ_FAILFAST_TRANSPORT)
    | (1 << bindings::req_flag_bits___REQ_FAILFAST_DRIVER);
const BLK_FEAT_WRITE_CACHE: u32 = 1 << 0;
const BLK_FEAT_FUA: u32 = 1 << 1;
const BLK_FEAT_POLL: u32 = 1 << 9;

/// The driver's side of blk-mq. All callbacks may run concurrently on different CPUs.
pub(crate) trait Operations: Sized {
    /// Per-request driver data, initialised once per request with [`Default`].
    type Pdu: Default;
    /// What each hardware context serves (an I/O queue), found through [`Operations::hw_queue`].
    type HwQueue: Sync;
    /// What each disk serves (a namespace): the `queuedata` of its request queue.
    type Disk: Sync;
    /// The owner of the tag set (the controller), passed to the set-wide callbacks.
    type Owner: Sync;

    /// The hardware queue for hardware context `index`.
    fn hw_queue(owner: &Self::Owner, index: u32) -> &Self::HwQueue;

    /// Where the hardware queue keeps its tags (see [`QueueTags`]).
    fn tags(hwq: &Self::HwQueue) -> &QueueTags;

    /// Fill the CPU-to-queue maps.
    fn map_queues(owner: &Self::Owner, maps: &mut QueueMaps<'_>);

    /// Issue `rq` (already owned by the driver). `last` is false when more requests follow
    /// at once, so the doorbell may wait for [`Operations::commit_rqs`] or the last one.
    fn queue_rq(
        hwq: &Self::HwQueue,
        disk: &Self::Disk,
        rq: Request<Self>,
        last: bool,
    ) -> Result<(), Rejected>;

    /// Ring the doorbell for requests issued with `last == false`.
    fn commit_rqs(hwq: &Self::HwQueue);

    /// A completion raised on another CPU arrives here (`blk_mq_complete_request_remote`).
    fn complete(hwq: &Self::HwQueue, rq: Request<Self>);

    /// Undo what issuing the request set up (data mappings); it ends in a [`CompletionBatch`].
    fn release(hwq: &Self::HwQueue, pdu: &mut Self::Pdu);

    /// Reap completions of a polled queue; returns how many were found.
    fn poll(hwq: &Self::HwQueue) -> u32;
}

/// A request `queue_rq` gives back to blk-mq with an error status (blk-mq then requeues it for
/// `BLK_STS_RESOURCE`, and ends it with the status otherwise).
pub(crate) struct Rejected(Status);

impl Rejected {
    /// Gives `rq` up: blk-mq owns it again once `queue_rq` returns.
    pub(crate) fn new<T: Operations>(_rq: Request<T>, status: Status) -> Self {
        Self(status)
    }
}

/// A request the driver owns: from `queue_rq` until it is ended, handed back, or given to the
/// device. It is a token; it has no destructor, and the driver must pass it on exactly once.
///
/// # Invariants
///
/// `raw` points to a live request of a tag set driven by `T`, whose PDU is a `T::Pdu`, and no
/// other token for it exists while this one does.
pub(crate) struct Request<T: Operations> {
    raw: NonNull<bindings::request>,
    _ops: PhantomData<T>,
}

// SAFETY: A request may be completed on any CPU; the token only carries the pointer.
unsafe impl<T: Operations> Send for Request<T> {}

impl<T: Operations> Request<T> {
    /// # Safety
    ///
    /// `raw` must be a live request of a tag set driven by `T`, owned by the caller (no other
    /// token exists for it).
    unsafe fn from_raw(raw: *mut bindings::request) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self {
            // SAFETY: blk-mq never passes a null request.
            raw: unsafe { NonNull::new_unchecked(raw) },
            _ops: PhantomData,
        }
    }

    fn raw(&self) -> *mut bindings::request {
        self.raw.as_ptr()
    }

    /// The request's fields.
    pub(crate) fn view(&self) -> RequestView<'_, T> {
        RequestView {
            raw: self.raw,
            _token: PhantomData,
        }
    }

    /// The per-request driver data together with the request's fields.
    pub(crate) fn split(&mut self) -> (&mut T::Pdu, RequestView<'_, T>) {
        let view = RequestView {
            raw: self.raw,
            _token: PhantomData,
        };
        // SAFETY: every request of the tag set carries a `T::Pdu` initialised in
        // `init_request`; the token is the only way to reach it while the driver owns the
        // request, and `&mut self` makes this access exclusive. The view only reads fields of
        // the request outside the PDU.
        let pdu = unsafe { &mut *pdu_ptr::<T>(self.raw()) };
        (pdu, view)
    }

    pub(crate) fn pdu_mut(&mut self) -> &mut T::Pdu {
        self.split().0
    }

    /// Mark the request started (arms blk-mq's accounting); done right before issuing it.
    pub(crate) fn start(&self) {
        // SAFETY: `raw` is a live request owned by the driver.
        unsafe { bindings::blk_mq_start_request(self.raw()) };
    }

    /// Whether the fault injector (`io-timeout-fail`) wants this completion lost, to simulate
    /// a timeout (`blk_should_fake_timeout`).
    pub(crate) fn should_fake_timeout(&self) -> bool {
        // SAFETY: `raw` is a live request and its queue outlives it.
        unsafe {
            let q = (*self.raw()).q;
            (*q).queue_flags & (1 << bindings::QUEUE_FLAG_FAIL_IO) != 0
                && bindings::__blk_should_fake_timeout(q)
        }
    }

    /// Drops the completion of the request on the floor: it stays in flight for blk-mq and the
    /// driver's watchdog, exactly as if the device had never completed it.
    pub(crate) fn lose(self) {}

    /// Ends the request with `status`.
    pub(crate) fn end(self, status: Status) {
        // SAFETY: the driver owns the request (type invariant) and gives it up here.
        unsafe { bindings::blk_mq_end_request(self.raw(), status) };
    }

    /// Completes the request from the completion path: blk-mq may run the completion on the
    /// submitting CPU ([`Operations::complete`]); otherwise the token comes back and the caller
    /// completes it right here.
    pub(crate) fn complete_remote(self) -> Option<Self> {
        // SAFETY: the driver owns the request and gives it up unless it is handed back.
        if unsafe { bindings::blk_mq_complete_request_remote(self.raw()) } {
            None
        } else {
            Some(self)
        }
    }

    /// Puts the request back on the queue's requeue list, to be issued again after `delay_ms`.
    pub(crate) fn requeue(self, delay_ms: u32) {
        // SAFETY: the driver owns the request; requeueing gives it back to blk-mq.
        unsafe {
            let q = (*self.raw()).q;
            bindings::blk_mq_requeue_request(self.raw(), false);
            bindings::blk_mq_delay_kick_requeue_list(q, delay_ms as usize);
        }
    }
}

/// Read access to the fields of a request the driver owns (borrowed from its [`Request`]).
pub(crate) struct RequestView<'a, T: Operations> {
    raw: NonNull<bindings::request>,
    _token: PhantomData<&'a Request<T>>,
}

impl<T: Operations> RequestView<'_, T> {
    fn raw(&self) -> *mut bindings::request {
        self.raw.as_ptr()
    }

    fn cmd_flags(&self) -> u32 {
        // SAFETY: the request lives while its token does, which this view borrows.
        unsafe { (*self.raw()).cmd_flags }
    }

    pub(crate) fn op(&self) -> Op {
        match self.cmd_flags() & REQ_OP_MASK {
            bindings::req_op_REQ_OP_READ => Op::Read,
            bindings::req_op_REQ_OP_WRITE => Op::Write,
            bindings::req_op_REQ_OP_FLUSH => Op::Flush,
            bindings::req_op_REQ_OP_DISCARD => Op::Discard,
            bindings::req_op_REQ_OP_WRITE_ZEROES => Op::WriteZeroes,
            other => Op::Other(other),
        }
    }

    pub(crate) fn is_fua(&self) -> bool {
        self.cmd_flags() & REQ_FUA != 0
    }

    /// Write Zeroes may deallocate the blocks.
    pub(crate) fn may_unmap(&self) -> bool {
        self.cmd_flags() & REQ_NOUNMAP == 0
    }

    /// The submitter asked not to be retried (`blk_noretry_request`).
    pub(crate) fn is_failfast(&self) -> bool {
        self.cmd_flags() & REQ_FAILFAST != 0
    }

    /// Start, in 512-byte sectors.
    pub(crate) fn sector(&self) -> u64 {
        // SAFETY: see `cmd_flags`.
        unsafe { (*self.raw()).__sector }
    }

    /// Length in bytes.
    pub(crate) fn bytes(&self) -> u32 {
        // SAFETY: see `cmd_flags`.
        unsafe { (*self.raw()).__data_len }
    }

    pub(crate) fn tag(&self) -> u16 {
        // SAFETY: see `cmd_flags`.
        let tag = unsafe { (*self.raw()).tag };
        // Tags are below the queue depth, which the driver keeps below 4096.
        tag as u16
    }

    pub(crate) fn nr_phys_segments(&self) -> u16 {
        // SAFETY: see `cmd_flags`.
        unsafe { (*self.raw()).nr_phys_segments }
    }

    /// The single physical segment of the request's data, as (page, offset, length), when the
    /// request has one and its first bio vector covers all of it.
    pub(crate) fn single_segment(&self) -> Option<(*mut bindings::page, u32, u32)> {
        if self.nr_phys_segments() != 1 {
            return None;
        }
        // SAFETY: a request with data has a bio whose vector array holds the current entry
        // (`req_bvec` in C); the request lives while its token does.
        let (page, offset, len) = unsafe {
            let bio = (*self.raw()).bio;
            if bio.is_null() {
                return None;
            }
            let iter = (*bio).bi_iter;
            let bv = &*(*bio).bi_io_vec.add(iter.bi_idx as usize);
            (
                bv.bv_page,
                bv.bv_offset + iter.bi_offset,
                (bv.bv_len - iter.bi_offset).min(iter.bi_size),
            )
        };
        (len == self.bytes()).then_some((page, offset, len))
    }

    /// Maps the request's data into `sgl` (at least `nr_phys_segments` entries, initialised
    /// with `sg_init_table`); returns the number of entries used.
    pub(crate) fn map_sg(&self, sgl: *mut bindings::scatterlist) -> u32 {
        let mut last = core::ptr::null_mut();
        // SAFETY: the request is live; the caller provides a large enough table.
        let n = unsafe { bindings::__blk_rq_map_sg(self.raw(), sgl, &mut last) };
        n as u32
    }
}

/// Requests that completed successfully, ended together when the batch is dropped (as the C
/// driver does with `struct io_comp_batch`): ending them as a batch costs less per request.
pub(crate) struct CompletionBatch<T: Operations> {
    iob: bindings::io_comp_batch,
    _ops: PhantomData<T>,
}

const RQF_SCHED_TAGS: u32 = 1 << bindings::rqf_flags___RQF_SCHED_TAGS;
const RQF_NEED_TIME_STAMP: u32 = (1 << bindings::rqf_flags___RQF_IO_STAT)
    | (1 << bindings::rqf_flags___RQF_STATS)
    | (1 << bindings::rqf_flags___RQF_USE_SCHED);

impl<T: Operations> CompletionBatch<T> {
    pub(crate) fn new() -> Self {
        Self {
            iob: pin_init::zeroed(),
            _ops: PhantomData,
        }
    }

    /// Takes a request that completed successfully (`blk_mq_add_to_batch`); hands it back if it
    /// cannot be ended in a batch.
    pub(crate) fn add(&mut self, rq: Request<T>) -> Option<Request<T>> {
        let raw = rq.raw();
        // SAFETY: the driver owns the request (token); batching it passes it to the batch,
        // which ends it in `drop`.
        unsafe {
            let flags = (*raw).rq_flags;
            if flags & RQF_SCHED_TAGS != 0 || (*raw).end_io.is_some() {
                return Some(rq);
            }
            self.iob.need_ts |= flags & RQF_NEED_TIME_STAMP != 0;
            (*raw).__bindgen_anon_1.rq_next = core::ptr::null_mut();
            let list = &mut self.iob.req_list;
            if list.tail.is_null() {
                list.head = raw;
            } else {
                (*list.tail).__bindgen_anon_1.rq_next = raw;
            }
            list.tail = raw;
        }
        None
    }
}

impl<T: Operations> Drop for CompletionBatch<T> {
    fn drop(&mut self) {
        let mut rq = self.iob.req_list.head;
        if rq.is_null() {
            return;
        }
        while !rq.is_null() {
            // SAFETY: the batch owns the requests on its list; each reached the driver, so it
            // has a hardware queue, and carries a `T::Pdu`.
            unsafe {
                let next = (*rq).__bindgen_anon_1.rq_next;
                T::release(hw_queue_of::<T>(rq), &mut *pdu_ptr::<T>(rq));
                rq = next;
            }
        }
        // SAFETY: every request on the list completed and was released above.
        unsafe { bindings::blk_mq_end_request_batch(&mut self.iob) };
    }
}

/// The CPU-to-hardware-queue maps, for [`Operations::map_queues`].
pub(crate) struct QueueMaps<'a> {
    set: &'a mut bindings::blk_mq_tag_set,
}

/// Which map: default (interrupt-driven) or poll queues.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapType {
    Default,
    Poll,
}

impl MapType {
    fn index(self) -> usize {
        match self {
            MapType::Default => bindings::hctx_type_HCTX_TYPE_DEFAULT as usize,
            MapType::Poll => bindings::hctx_type_HCTX_TYPE_POLL as usize,
        }
    }
}

impl QueueMaps<'_> {
    /// Maps `count` queues starting at hardware queue `first` by the IRQ affinity of the
    /// device's vectors `vector_offset..` (managed affinity, as `pci_alloc_irq_vectors` spread
    /// them), or by CPU topology when `vector_offset` is `None` (poll queues have no vector).
    pub(crate) fn map(
        &mut self,
        ty: MapType,
        first: u32,
        count: u32,
        dev: &device::Device,
        vector_offset: Option<u32>,
    ) {
        let map = &mut self.set.map[ty.index()];
        map.nr_queues = count;
        map.queue_offset = first;
        if count == 0 {
            return;
        }
        // SAFETY: `map` belongs to a tag set being (re)mapped by blk-mq, `dev` is a live device.
        unsafe {
            match vector_offset {
                Some(offset) => bindings::blk_mq_map_hw_queues(map, crate::raw::dev(dev), offset),
                None => bindings::blk_mq_map_queues(map),
            }
        }
    }
}

/// How a tag set is shaped.
#[derive(Clone, Copy)]
pub(crate) struct TagSetConfig {
    /// Interrupt-driven hardware queues (the default map).
    pub(crate) irq_queues: u32,
    /// Polled hardware queues (the poll map), numbered after the interrupt-driven ones.
    pub(crate) poll_queues: u32,
    /// Requests per hardware queue.
    pub(crate) depth: u32,
}

/// A blk-mq tag set: hardware queues with their tags and per-request data.
///
/// # Invariants
///
/// `raw` was set up by `blk_mq_alloc_tag_set` with `Ops::<T>::VTABLE`, `cmd_size` of `T::Pdu`
/// and `driver_data` pointing at a `T::Owner` that outlives the tag set.
#[pin_data(PinnedDrop)]
pub(crate) struct TagSet<T: Operations> {
    #[pin]
    raw: Opaque<bindings::blk_mq_tag_set>,
    _ops: PhantomData<T>,
}

// SAFETY: blk-mq serialises its own use of the tag set; the driver only calls thread-safe
// functions on it.
unsafe impl<T: Operations> Send for TagSet<T> {}
// SAFETY: as above.
unsafe impl<T: Operations> Sync for TagSet<T> {}

impl<T: Operations> TagSet<T> {
    /// Allocates the tag set.
    ///
    /// # Safety
    ///
    /// `owner` must stay valid (and in place) until the tag set is dropped.
    pub(crate) unsafe fn new(
        owner: *const T::Owner,
        config: TagSetConfig,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            raw <- Opaque::try_ffi_init(move |set: *mut bindings::blk_mq_tag_set| {
                // SAFETY: `try_ffi_init` gives a valid, writable place; zero is a valid start.
                unsafe {
                    set.write(pin_init::zeroed());
                    let s = &mut *set;
                    s.ops = Ops::<T>::build();
                    s.nr_hw_queues = config.irq_queues + config.poll_queues;
                    s.nr_maps = if config.poll_queues > 0 {
                        bindings::hctx_type_HCTX_TYPE_POLL + 1
                    } else {
                        1
                    };
                    s.queue_depth = config.depth;
                    s.cmd_size = core::mem::size_of::<T::Pdu>() as u32;
                    s.numa_node = bindings::NUMA_NO_NODE;
                    // The default (30 s); the driver's watchdog applies its own timeout.
                    s.timeout = 0;
                    s.driver_data = owner.cast_mut().cast();
                }
                // SAFETY: `set` is initialised as blk-mq requires.
                to_result(unsafe { bindings::blk_mq_alloc_tag_set(set) })
            }),
            _ops: PhantomData,
        })
    }

    fn raw(&self) -> *mut bindings::blk_mq_tag_set {
        self.raw.get()
    }

    /// Stops `queue_rq` calls on every queue of the set, waiting for running ones.
    pub(crate) fn quiesce(&self) {
        // SAFETY: the tag set is allocated (type invariant).
        unsafe { bindings::blk_mq_quiesce_tagset(self.raw()) };
    }

    pub(crate) fn unquiesce(&self) {
        // SAFETY: the tag set is allocated (type invariant).
        unsafe { bindings::blk_mq_unquiesce_tagset(self.raw()) };
    }

    /// Calls `f` with each request in flight (started, not yet completed). `f` only looks: the
    /// requests still belong to the device.
    pub(crate) fn for_each_busy<F: FnMut(&T::Pdu)>(&self, mut f: F) {
        /// # Safety
        ///
        /// Called by `blk_mq_tagset_busy_iter` with `data` pointing at the caller's `F`.
        unsafe extern "C" fn visit<T: Operations, F: FnMut(&T::Pdu)>(
            rq: *mut bindings::request,
            data: *mut c_void,
        ) -> bool {
            // SAFETY: `data` is the `&mut F` passed below, alive for the whole iteration.
            let f = unsafe { &mut *data.cast::<F>() };
            // SAFETY: `rq` belongs to this tag set (type invariant), so its PDU is a `T::Pdu`;
            // blk-mq holds a reference on the request during the callback.
            f(unsafe { &*pdu_ptr::<T>(rq) });
            true
        }
        // SAFETY: the tag set is allocated; `visit::<T, F>` matches `busy_tag_iter_fn`.
        unsafe {
            bindings::blk_mq_tagset_busy_iter(
                self.raw(),
                Some(visit::<T, F>),
                core::ptr::from_mut(&mut f).cast(),
            )
        };
    }

    /// Completes every request still in flight through `cancel`, which must end, requeue or
    /// otherwise pass on each token. Only for when the device can no longer complete them
    /// (disabled or gone) and every completion path of the driver is stopped.
    pub(crate) fn cancel_busy<F: FnMut(&T::HwQueue, Request<T>)>(&self, mut cancel: F) {
        /// # Safety
        ///
        /// Called by `blk_mq_tagset_busy_iter` with `data` pointing at the caller's `F`.
        unsafe extern "C" fn visit<T: Operations, F: FnMut(&T::HwQueue, Request<T>)>(
            rq: *mut bindings::request,
            data: *mut c_void,
        ) -> bool {
            // SAFETY: `data` is the `&mut F` passed below, alive for the whole iteration.
            let f = unsafe { &mut *data.cast::<F>() };
            // Only requests the device still holds: completed ones have an owner already.
            // SAFETY: `rq` is a live request of this tag set.
            if unsafe { (*rq).state } == bindings::mq_rq_state_MQ_RQ_IN_FLIGHT {
                // SAFETY: the caller stopped every completion path, so nothing else can take
                // ownership of an in-flight request: this is the only token. The request was
                // issued, so it has a hardware queue.
                let (hwq, rq) = unsafe { (hw_queue_of::<T>(rq), Request::from_raw(rq)) };
                f(hwq, rq);
            }
            true
        }
        // SAFETY: the tag set is allocated; `visit::<T, F>` matches `busy_tag_iter_fn`.
        unsafe {
            bindings::blk_mq_tagset_busy_iter(
                self.raw(),
                Some(visit::<T, F>),
                core::ptr::from_mut(&mut cancel).cast(),
            );
            bindings::blk_mq_tagset_wait_completed_request(self.raw());
        }
    }
}

#[pinned_drop]
impl<T: Operations> PinnedDrop for TagSet<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the tag set was allocated (type invariant) and its disks are gone: every
        // `Disk` borrows the set.
        unsafe { bindings::blk_mq_free_tag_set(self.raw()) };
    }
}

/// The tags of one hardware queue, recorded by `init_hctx` so the completion path can find
/// requests by tag. (Each disk has its own hardware contexts, but they share the set's tags.)
pub(crate) struct QueueTags(core::sync::atomic::AtomicPtr<bindings::blk_mq_tags>);

impl QueueTags {
    pub(crate) const fn new() -> Self {
        Self(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
    }

    /// The request that holds `tag` on this hardware queue, if its driver data satisfies
    /// `owned` (the caller's proof that the request is on the device); the caller then owns it.
    ///
    /// # Safety
    ///
    /// When `owned` accepts, no other token for the request may exist or be made until this
    /// one is passed on (the completion path ensures this by matching the command's
    /// generation under the CQ lock).
    pub(crate) unsafe fn take_if<T: Operations>(
        &self,
        tag: u16,
        owned: impl FnOnce(&T::Pdu) -> bool,
    ) -> Option<Request<T>> {
        let tags = self.0.load(core::sync::atomic::Ordering::Acquire);
        if tags.is_null() {
            return None;
        }
        // SAFETY: the tags belong to the tag set, which outlives the queue's completion path;
        // `rqs` holds `nr_tags` entries.
        let rq = unsafe {
            if u32::from(tag) >= (*tags).nr_tags {
                return None;
            }
            *(*tags).rqs.add(usize::from(tag))
        };
        if rq.is_null() {
            return None;
        }
        // SAFETY: requests of the tag set carry a `T::Pdu`; reading it is fine whoever owns the
        // request, as the owner only writes it while holding the token.
        if !owned(unsafe { &*pdu_ptr::<T>(rq) }) {
            return None;
        }
        // SAFETY: ownership is the caller's to take (see above).
        Some(unsafe { Request::from_raw(rq) })
    }
}

/// The driver's queue behind a hardware context.
///
/// # Safety
///
/// `hctx` must be a live hardware context of a tag set driven by `T`, initialised by
/// `init_hctx`.
unsafe fn hctx_queue<'a, T: Operations>(hctx: *mut bindings::blk_mq_hw_ctx) -> &'a T::HwQueue {
    // SAFETY: `driver_data` was set in `init_hctx` to a queue that outlives the tag set.
    unsafe { &*(*hctx).driver_data.cast::<T::HwQueue>() }
}

/// The hardware queue a request was issued on.
///
/// # Safety
///
/// `rq` must be a live request of a tag set driven by `T` that reached the driver.
unsafe fn hw_queue_of<'a, T: Operations>(rq: *mut bindings::request) -> &'a T::HwQueue {
    // SAFETY: `mq_hctx` is set (and initialised) before the request reaches the driver.
    unsafe { hctx_queue::<T>((*rq).mq_hctx) }
}

/// The driver's data area of a request (`cmd_size` bytes, sized and aligned for `T::Pdu`).
///
/// # Safety
///
/// `rq` must be a request of a tag set driven by `T`.
unsafe fn pdu_ptr<T: Operations>(rq: *mut bindings::request) -> *mut T::Pdu {
    // SAFETY: `rq` is a valid request (the caller's promise).
    unsafe { bindings::blk_mq_rq_to_pdu(rq).cast::<T::Pdu>() }
}

/// The static `blk_mq_ops` of a driver.
struct Ops<T: Operations>(PhantomData<T>);

impl<T: Operations> Ops<T> {
    /// # Safety
    ///
    /// Called by blk-mq with a live hctx and queue data, on a tag set made by [`TagSet::new`].
    unsafe extern "C" fn queue_rq(
        hctx: *mut bindings::blk_mq_hw_ctx,
        bd: *const bindings::blk_mq_queue_data,
    ) -> bindings::blk_status_t {
        // SAFETY: `hctx` was initialised by `init_hctx`; `queuedata` was set by `Disk::new` to
        // a `T::Disk` that outlives the disk.
        let (hwq, disk, rq, last) = unsafe {
            (
                hctx_queue::<T>(hctx),
                &*(*(*hctx).queue).queuedata.cast::<T::Disk>(),
                // blk-mq hands the request to the driver here.
                Request::<T>::from_raw((*bd).rq),
                (*bd).last,
            )
        };
        match T::queue_rq(hwq, disk, rq, last) {
            Ok(()) => 0,
            Err(Rejected(status)) => status,
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq with a live hctx initialised by `init_hctx`.
    unsafe extern "C" fn commit_rqs(hctx: *mut bindings::blk_mq_hw_ctx) {
        // SAFETY: see `queue_rq`.
        T::commit_rqs(unsafe { hctx_queue::<T>(hctx) })
    }

    /// # Safety
    ///
    /// Called by blk-mq for a request completed with `blk_mq_complete_request(_remote)`.
    unsafe extern "C" fn complete(rq: *mut bindings::request) {
        // SAFETY: the driver gave the request up in `complete_remote`; it is the driver's
        // again now, and nothing else holds a token. Its hardware queue outlives it.
        let (hwq, rq) = unsafe { (hw_queue_of::<T>(rq), Request::from_raw(rq)) };
        T::complete(hwq, rq)
    }

    /// # Safety
    ///
    /// Called by blk-mq with a live poll hctx initialised by `init_hctx`.
    unsafe extern "C" fn poll(
        hctx: *mut bindings::blk_mq_hw_ctx,
        _iob: *mut bindings::io_comp_batch,
    ) -> core::ffi::c_int {
        // SAFETY: see `queue_rq`.
        let found = T::poll(unsafe { hctx_queue::<T>(hctx) });
        found.min(i32::MAX as u32) as i32
    }

    /// # Safety
    ///
    /// Called by blk-mq once per hctx, `data` being the tag set's `driver_data`.
    unsafe extern "C" fn init_hctx(
        hctx: *mut bindings::blk_mq_hw_ctx,
        data: *mut c_void,
        index: core::ffi::c_uint,
    ) -> core::ffi::c_int {
        // SAFETY: `data` is the owner given to `TagSet::new`, alive as long as the tag set.
        let owner = unsafe { &*data.cast::<T::Owner>() };
        let hwq = T::hw_queue(owner, index);
        // SAFETY: `hctx` is live; `hwq` outlives the tag set with its owner, and the tags
        // belong to the set.
        unsafe {
            (*hctx).driver_data = core::ptr::from_ref(hwq).cast_mut().cast();
            T::tags(hwq)
                .0
                .store((*hctx).tags, core::sync::atomic::Ordering::Release);
        }
        0
    }

    /// # Safety
    ///
    /// Called by blk-mq for each request of the tag set before first use.
    unsafe extern "C" fn init_request(
        _set: *mut bindings::blk_mq_tag_set,
        rq: *mut bindings::request,
        _hctx_index: core::ffi::c_uint,
        _numa_node: core::ffi::c_int,
    ) -> core::ffi::c_int {
        // SAFETY: the PDU area is `cmd_size` = `size_of::<T::Pdu>()` bytes, suitably aligned,
        // and not yet initialised.
        unsafe { pdu_ptr::<T>(rq).write(T::Pdu::default()) };
        0
    }

    /// # Safety
    ///
    /// Called by blk-mq for each request when the tag set is freed.
    unsafe extern "C" fn exit_request(
        _set: *mut bindings::blk_mq_tag_set,
        rq: *mut bindings::request,
        _hctx_index: core::ffi::c_uint,
    ) {
        // SAFETY: initialised in `init_request`, never used again.
        unsafe { core::ptr::drop_in_place(pdu_ptr::<T>(rq)) };
    }

    /// # Safety
    ///
    /// Called by blk-mq on a tag set made by [`TagSet::new`].
    unsafe extern "C" fn map_queues(set: *mut bindings::blk_mq_tag_set) {
        // SAFETY: blk-mq gives exclusive access to the set while mapping; `driver_data` is the
        // owner that outlives it.
        let (set, owner) = unsafe { (&mut *set, &*(*set).driver_data.cast::<T::Owner>()) };
        T::map_queues(owner, &mut QueueMaps { set });
    }

    const VTABLE: bindings::blk_mq_ops = bindings::blk_mq_ops {
        queue_rq: Some(Self::queue_rq),
        commit_rqs: Some(Self::commit_rqs),
        queue_rqs: None,
        get_budget: None,
        put_budget: None,
        set_rq_budget_token: None,
        get_rq_budget_token: None,
        timeout: None,
        poll: Some(Self::poll),
        complete: Some(Self::complete),
        init_hctx: Some(Self::init_hctx),
        exit_hctx: None,
        init_request: Some(Self::init_request),
        exit_request: Some(Self::exit_request),
        cleanup_rq: None,
        busy: None,
        map_queues: Some(Self::map_queues),
        #[cfg(CONFIG_BLK_DEBUG_FS)]
        show_rq: None,
    };

    const fn build() -> &'static bindings::blk_mq_ops {
        &Self::VTABLE
    }
}

/// Queue limits of a disk (the subset an NVMe namespace needs).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    pub(crate) logical_block_size: u32,
    pub(crate) physical_block_size: u32,
    pub(crate) max_hw_sectors: u32,
    pub(crate) max_segments: u16,
    /// Every segment but the first must start, and every one but the last end, on this
    /// boundary + 1 (PRPs need 4095).
    pub(crate) virt_boundary_mask: u64,
    pub(crate) dma_alignment: u32,
    pub(crate) write_cache: bool,
    pub(crate) fua: bool,
    pub(crate) poll: bool,
    /// 0 disables discard.
    pub(crate) max_discard_sectors: u32,
    pub(crate) discard_granularity: u32,
    /// 0 disables write zeroes.
    pub(crate) max_write_zeroes_sectors: u32,
}

impl Limits {
    fn to_raw(self) -> bindings::queue_limits {
        let mut lim: bindings::queue_limits = pin_init::zeroed();
        lim.logical_block_size = self.logical_block_size;
        lim.physical_block_size = self.physical_block_size;
        lim.max_hw_sectors = self.max_hw_sectors;
        lim.max_segments = self.max_segments;
        lim.max_segment_size = u32::MAX;
        lim.virt_boundary_mask = self.virt_boundary_mask as usize;
        lim.dma_alignment = self.dma_alignment;
        if self.write_cache {
            lim.features |= BLK_FEAT_WRITE_CACHE;
        }
        if self.fua {
            lim.features |= BLK_FEAT_FUA;
        }
        if self.poll {
            lim.features |= BLK_FEAT_POLL;
        }
        lim.max_hw_discard_sectors = self.max_discard_sectors;
        lim.max_discard_segments = 1;
        lim.discard_granularity = self.discard_granularity;
        lim.max_write_zeroes_sectors = self.max_write_zeroes_sectors;
        lim
    }
}

/// A disk added to the system; removed (`del_gendisk`) when dropped.
///
/// # Invariants
///
/// `gendisk` was allocated on a tag set driven by `T` with `queuedata` pointing at a `T::Disk`
/// that outlives this value, and added with `device_add_disk`.
pub(crate) struct Disk<T: Operations> {
    gendisk: NonNull<bindings::gendisk>,
    _ops: PhantomData<T>,
}

// SAFETY: the gendisk functions used here may be called from any thread.
unsafe impl<T: Operations> Send for Disk<T> {}
// SAFETY: as above.
unsafe impl<T: Operations> Sync for Disk<T> {}

/// Block device operations: none but the owner, which pins the module while a disk is open.
struct Fops(bindings::block_device_operations);

// SAFETY: never written; the block layer only reads the table.
unsafe impl Sync for Fops {}

static FOPS: Fops = Fops(bindings::block_device_operations {
    submit_bio: None,
    poll_bio: None,
    open: None,
    release: None,
    ioctl: None,
    compat_ioctl: None,
    check_events: None,
    unlock_native_capacity: None,
    getgeo: None,
    set_read_only: None,
    free_disk: None,
    swap_slot_free_notify: None,
    report_zones: None,
    devnode: None,
    get_unique_id: None,
    owner: core::ptr::addr_of!(bindings::__this_module).cast_mut(),
    pr_ops: core::ptr::null(),
    alternative_gpt_sector: None,
});

impl<T: Operations> Disk<T> {
    /// Allocates a disk on `set` and adds it under `parent`.
    ///
    /// # Safety
    ///
    /// `queuedata` must stay valid until the returned disk is dropped.
    pub(crate) unsafe fn new(
        set: &TagSet<T>,
        limits: Limits,
        queuedata: *const T::Disk,
        name: fmt::Arguments<'_>,
        sectors: u64,
        read_only: bool,
        parent: &device::Device,
    ) -> Result<Self> {
        let mut lim = limits.to_raw();
        // SAFETY: `set` is an allocated tag set; `lim` is a valid limits structure.
        let gendisk = kernel::error::from_err_ptr(unsafe {
            bindings::__blk_mq_alloc_disk(
                set.raw(),
                &mut lim,
                queuedata.cast_mut().cast(),
                kernel::sync::static_lock_class!().as_ptr(),
            )
        })?;
        // SAFETY: `gendisk` is a freshly allocated disk that nothing else sees yet.
        let disk = unsafe { &mut *gendisk };
        disk.fops = &FOPS.0;
        let named = kernel::str::NullTerminatedFormatter::new(&mut disk.disk_name)
            .is_some_and(|mut w| fmt::Write::write_fmt(&mut w, name).is_ok());
        if !named {
            // SAFETY: allocated above and not added.
            unsafe { bindings::put_disk(gendisk) };
            return Err(EINVAL);
        }
        // SAFETY: `gendisk` is valid and not added yet.
        unsafe {
            bindings::set_capacity(gendisk, sectors);
            if read_only {
                bindings::set_disk_ro(gendisk, true);
            }
        }
        // SAFETY: `gendisk` is valid; `parent` is a live device.
        let ret = unsafe {
            bindings::device_add_disk(crate::raw::dev(parent), gendisk, core::ptr::null_mut())
        };
        if ret != 0 {
            // SAFETY: allocated above and not added.
            unsafe { bindings::put_disk(gendisk) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: allocated on `set` with `queuedata`, and added.
        Ok(Self {
            // SAFETY: `from_err_ptr` returned a valid pointer.
            gendisk: unsafe { NonNull::new_unchecked(gendisk) },
            _ops: PhantomData,
        })
    }

    /// Fails all future I/O at once (the controller is gone); pending I/O is left to the
    /// caller.
    pub(crate) fn mark_dead(&self) {
        // SAFETY: the disk is added (type invariant).
        unsafe { bindings::blk_mark_disk_dead(self.gendisk.as_ptr()) };
    }

    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `disk_name` is a NUL-terminated string written in `new`.
        unsafe { CStr::from_char_ptr((*self.gendisk.as_ptr()).disk_name.as_ptr()) }
    }
}

impl<T: Operations> Drop for Disk<T> {
    fn drop(&mut self) {
        // SAFETY: the disk was added (type invariant); `del_gendisk` drains its I/O, then the
        // last driver reference goes.
        unsafe {
            bindings::del_gendisk(self.gendisk.as_ptr());
            bindings::put_disk(self.gendisk.as_ptr());
        }
    }
}
