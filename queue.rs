// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the submission ring, and the completion ring with the drain shared by every
//! path that reaps completions (the interrupt handler, the poll timer, blk-mq polling, the
//! watchdog and teardown); and the I/O queue that turns block requests into NVMe commands and
//! completions back into ended requests.

use kernel::{
    bindings,
    dma::Coherent,
    interrupt::LocalInterruptDisabled,
    io::{io_project, io_read, Io},
    new_spinlock, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        barrier::{dma_mb, Read},
        lock::{
            spinlock::{SpinLockGuard, SpinLockIrqBackend},
            Guard,
        },
        Arc, SetOnce, SpinLock, SpinLockIrq,
    },
    time::{Instant, Monotonic},
};

use crate::{
    blk::{CompletionBatch, Op, QueueTags, Rejected, Request, RequestView},
    cmd::{blk_status, command_id, Command, Completion, DsmRange, Status},
    ctrl::{NsInfo, NvmeOps, Shared},
    dma::{DataMapping, DmaPage},
    hrtimer::PollTimer,
    irq::IrqLine,
    policy::Policy,
    prp,
    regs::DOORBELL_BASE,
    stats::QueueStats,
};

/// Retries of a failed command the device did not mark "do not retry", and of commands
/// cancelled by a controller reset (the C driver's `max_retries` default).
const MAX_RETRIES: u8 = 5;

/// Head and phase of a completion ring, plus what the queue keeps under the same lock.
pub(crate) struct CqState<X> {
    head: u16,
    phase: u16,
    pub(crate) extra: X,
}

struct SqState {
    tail: u16,
    /// Tail last written to the doorbell.
    rung: u16,
}

/// The rings of one queue pair and their doorbells.
///
/// At most `depth - 1` commands are ever outstanding (blk-mq tags are one fewer than the ring
/// entries; admin commands are issued one at a time), so neither ring can overflow.
#[pin_data]
pub(crate) struct Queue<'b, X> {
    pub(crate) shared: Arc<Shared<'b>>,
    pub(crate) qid: u16,
    depth: u16,
    sq_ring: Coherent<[Command]>,
    cq_ring: Coherent<[Completion]>,
    sq_doorbell: usize,
    cq_doorbell: usize,
    #[pin]
    sq: SpinLock<SqState>,
    #[pin]
    cq: SpinLockIrq<CqState<X>>,
}

impl<'b, X: Unpin + 'b> Queue<'b, X> {
    pub(crate) fn new(
        shared: Arc<Shared<'b>>,
        qid: u16,
        depth: u16,
        extra: X,
    ) -> impl PinInit<Self, Error> + 'b {
        pin_init::pin_init_scope(move || {
            let dev = shared.pdev.as_ref();
            let sq_ring = Coherent::<Command>::zeroed_slice(dev, depth.into(), GFP_KERNEL)?;
            let cq_ring = Coherent::<Completion>::zeroed_slice(dev, depth.into(), GFP_KERNEL)?;
            let stride = shared.doorbell_stride;
            let sq_doorbell = DOORBELL_BASE + 2 * usize::from(qid) * stride;
            let cq_doorbell = sq_doorbell + stride;
            if cq_doorbell + 4 > shared.bar.size() {
                dev_err!(dev, "BAR0 too small for the doorbells of queue {}\n", qid);
                return Err(ENODEV);
            }
            Ok(try_pin_init!(Self {
                shared,
                qid,
                depth,
                sq_ring,
                cq_ring,
                sq_doorbell,
                cq_doorbell,
                sq <- new_spinlock!(SqState { tail: 0, rung: 0 }),
                cq <- new_spinlock_irq!(CqState { head: 0, phase: 1, extra }),
            }? Error))
        })
    }

    pub(crate) fn depth(&self) -> u16 {
        self.depth
    }

    pub(crate) fn sq_dma(&self) -> u64 {
        self.sq_ring.dma_address()
    }

    pub(crate) fn cq_dma(&self) -> u64 {
        self.cq_ring.dma_address()
    }

    /// Returns the rings to the state of a newly created queue (the controller was reset, so
    /// it forgot them). Only while nothing else uses the queue.
    pub(crate) fn reset(&self) {
        let mut sq = self.sq.lock();
        sq.tail = 0;
        sq.rung = 0;
        let mut cq = self.cq.lock();
        cq.head = 0;
        cq.phase = 1;
        for i in 0..usize::from(self.depth) {
            // An old entry with the current phase would look freshly posted.
            let _ = self.write_cqe_status(i, 0);
        }
    }

    fn write_cqe_status(&self, index: usize, status: u16) -> Result {
        kernel::io::io_write!(self.cq_ring, [try: index].status, status);
        Ok(())
    }

    fn write_sqe(&self, index: u16, cmd: &Command) -> Result {
        io_project!(self.sq_ring, [try: usize::from(index)]).copy_write(*cmd);
        Ok(())
    }

    /// Puts `cmd` on the submission ring; rings the doorbell now if `ring`, or later through
    /// [`Queue::commit`] (one doorbell write for a batch). `count` runs under the SQ lock,
    /// before the device can see the command.
    pub(crate) fn submit(&self, cmd: &Command, ring: bool, count: impl FnOnce()) {
        let mut sq = self.sq.lock();
        count();
        // The index is below `depth` by construction.
        let _ = self.write_sqe(sq.tail, cmd);
        sq.tail = self.next_slot(sq.tail);
        // A whole ring of entries not yet announced would look empty to the device.
        if ring || self.next_slot(sq.tail) == sq.rung {
            self.ring_sq(&mut sq);
        }
    }

    /// The ring slot after `index`, wrapping at the queue depth.
    fn next_slot(&self, index: u16) -> u16 {
        if index + 1 == self.depth {
            0
        } else {
            index + 1
        }
    }

    fn ring_sq(&self, sq: &mut SqState) {
        // The doorbell offset was checked against the BAR size in `new`; `write32` orders the
        // entry written above before the doorbell.
        let _ = self
            .shared
            .bar
            .try_write32(sq.tail.into(), self.sq_doorbell);
        sq.rung = sq.tail;
    }

    /// Rings the doorbell for commands submitted without it.
    pub(crate) fn commit(&self) {
        let mut sq = self.sq.lock();
        if sq.tail != sq.rung {
            self.ring_sq(&mut sq);
        }
    }

    /// Takes the CQ lock from process context (local interrupts off while held).
    pub(crate) fn lock_cq(&self) -> Guard<'_, CqState<X>, SpinLockIrqBackend> {
        self.cq.lock()
    }

    /// Takes the CQ lock where interrupts are already off (hard IRQ, hard hrtimer).
    pub(crate) fn lock_cq_in_irq<'a>(
        &'a self,
        irqs_off: &'a LocalInterruptDisabled,
    ) -> SpinLockGuard<'a, CqState<X>> {
        self.cq.lock_with(irqs_off)
    }

    fn cqe_status(&self, head: u16) -> Result<u16> {
        Ok(io_read!(self.cq_ring, [try: usize::from(head)].status))
    }

    fn cqe(&self, head: u16) -> Result<Completion> {
        Ok(io_project!(self.cq_ring, [try: usize::from(head)]).copy_read())
    }

    /// Whether the device has posted a completion not yet reaped.
    pub(crate) fn pending(&self, cq: &CqState<X>) -> bool {
        self.cqe_status(cq.head)
            .is_ok_and(|s| u16::from_le(s) & 1 == cq.phase)
    }

    /// Reaps every completion the device has posted, in order, calling `f` for each, then
    /// writes the CQ head doorbell once. Returns the number reaped.
    pub(crate) fn drain(&self, cq: &mut CqState<X>, mut f: impl FnMut(&mut X, &Completion)) -> u32 {
        let mut n = 0;
        while self.pending(cq) {
            // The phase tag is read before the rest of the entry.
            dma_mb(Read);
            if let Ok(cqe) = self.cqe(cq.head) {
                f(&mut cq.extra, &cqe);
            }
            cq.head = self.next_slot(cq.head);
            if cq.head == 0 {
                cq.phase ^= 1;
            }
            n += 1;
        }
        if n > 0 {
            // The doorbell offset was checked against the BAR size in `new`.
            let _ = self
                .shared
                .bar
                .try_write32(cq.head.into(), self.cq_doorbell);
        }
        n
    }
}

/// What an I/O queue keeps under its CQ lock.
pub(crate) struct IoCq {
    pub(crate) policy: Policy,
    /// Completions reaped so far (with `stats.submitted`, the number in flight).
    completed: u64,
    /// Teardown or reset has begun: no new poll episode may start.
    pub(crate) stopping: bool,
}

/// Per-request driver data (the blk-mq PDU).
pub(crate) struct Iod {
    /// Generation of the command identifier the request's tag uses next.
    generation: u8,
    retries: u8,
    status: Status,
    /// `jiffies` when the command went to the device (read by the watchdog).
    pub(crate) submitted: Atomic<u64>,
    mapping: DataMapping,
    /// PRP list or discard range page.
    page: Option<DmaPage>,
}

impl Default for Iod {
    fn default() -> Self {
        Self {
            generation: 0,
            retries: 0,
            status: Status(0),
            submitted: Atomic::new(0),
            mapping: DataMapping::default(),
            page: None,
        }
    }
}

/// The current `jiffies`.
pub(crate) fn jiffies() -> u64 {
    // SAFETY: `jiffies` is a kernel global updated by the timer tick; a volatile read of an
    // aligned word is what the C `jiffies` macro does.
    unsafe { core::ptr::read_volatile(&raw const bindings::jiffies) as u64 }
}

/// An I/O queue: a queue pair serving one blk-mq hardware queue, with its interrupt vector
/// (none for a poll queue) and its adaptive polling state.
#[pin_data(PinnedDrop)]
pub(crate) struct IoQueue<'b> {
    /// Freed first when the queue goes: `free_irq` waits for a running handler.
    pub(crate) irq: SetOnce<IrqLine>,
    #[pin]
    pub(crate) q: Queue<'b, IoCq>,
    #[pin]
    pub(crate) timer: PollTimer<IoQueue<'b>>,
    pub(crate) tags: QueueTags,
    pub(crate) stats: Arc<QueueStats>,
    /// Start of the clock the policy sees.
    pub(crate) epoch: Instant<Monotonic>,
}

impl<'b> IoQueue<'b> {
    pub(crate) fn new(
        shared: Arc<Shared<'b>>,
        qid: u16,
        depth: u16,
    ) -> impl PinInit<Self, Error> + 'b {
        pin_init::pin_init_scope(move || {
            let stats = Arc::new(QueueStats::default(), GFP_KERNEL)?;
            Ok(try_pin_init!(&this in Self {
                irq: SetOnce::new(),
                q <- Queue::new(
                    shared,
                    qid,
                    depth,
                    IoCq {
                        policy: Policy::new(),
                        completed: 0,
                        stopping: false,
                    },
                ),
                timer <- PollTimer::new(this),
                tags: QueueTags::new(),
                stats,
                epoch: Instant::now(),
            }? Error))
        })
    }

    pub(crate) fn shared(&self) -> &Shared<'b> {
        &self.q.shared
    }

    /// Nanoseconds on the policy's clock.
    pub(crate) fn now_ns(&self) -> u64 {
        (Instant::<Monotonic>::now() - self.epoch).as_nanos() as u64
    }

    /// Shows the policy's state in the statistics.
    pub(crate) fn publish(&self, policy: &Policy) {
        self.stats.set_stage(policy.stage());
        self.stats.gap_ns.set(policy.gap_ns());
        self.stats.wait_ns.set(policy.wait_ns());
        self.stats.backoff_ns.set(policy.backoff_ns());
        self.stats.failures.set(policy.failures().into());
    }

    /// Commands on the device, as seen by the CQ lock holder.
    pub(crate) fn inflight(&self, cq: &CqState<IoCq>) -> u32 {
        self.stats
            .submitted
            .get()
            .saturating_sub(cq.extra.completed) as u32
    }

    /// Issues a block request.
    pub(crate) fn queue_rq(
        &self,
        ns: &NsInfo,
        mut rq: Request<NvmeOps<'b>>,
        last: bool,
    ) -> Result<(), Rejected> {
        if self.shared().is_dead() {
            return Err(Rejected::new(rq, blk_status::IOERR));
        }
        let cmd = match self.build(ns, &mut rq) {
            Ok(cmd) => cmd,
            Err(status) => {
                self.release_data(rq.pdu_mut());
                return Err(Rejected::new(rq, status));
            }
        };
        rq.start();
        self.q.submit(&cmd, last, || self.stats.submitted.add(1));
        Ok(())
    }

    /// The NVMe command for a request, with its data mapped.
    fn build(&self, ns: &NsInfo, rq: &mut Request<NvmeOps<'b>>) -> Result<Command, u8> {
        let (iod, view) = rq.split();
        let slba = view.sector() >> (ns.lba_shift - 9);
        let blocks = view.bytes() >> ns.lba_shift;
        let mut cmd = match view.op() {
            op @ (Op::Read | Op::Write) => {
                let write = op == Op::Write;
                let mut cmd = Command::read_write(write, ns.nsid, slba, blocks, view.is_fua());
                self.map_data(iod, &view, write, &mut cmd)?;
                cmd
            }
            Op::Flush => Command::flush(ns.nsid),
            Op::WriteZeroes => Command::write_zeroes(ns.nsid, slba, blocks, view.may_unmap()),
            Op::Discard => {
                let mut page = self.shared().pool.alloc().ok_or(blk_status::RESOURCE)?;
                page.write(DsmRange::new(slba, blocks));
                let mut cmd = Command::deallocate(ns.nsid, 1);
                cmd.set_prps(page.dma(), 0);
                iod.page = Some(page);
                cmd
            }
            Op::Other(_) => return Err(blk_status::NOTSUPP),
        };
        cmd.command_id = command_id::encode(view.tag(), iod.generation).to_le();
        iod.submitted.store(jiffies(), Relaxed);
        Ok(cmd)
    }

    /// Maps the request's data and points the command at it with PRPs.
    fn map_data(
        &self,
        iod: &mut Iod,
        view: &RequestView<'_, NvmeOps<'b>>,
        write: bool,
        cmd: &mut Command,
    ) -> Result<(), u8> {
        let shared = self.shared();
        match iod.mapping.map(shared.pdev.as_ref(), view, write) {
            Ok(()) => {}
            Err(e) if e == ENOMEM => return Err(blk_status::RESOURCE),
            Err(_) => return Err(blk_status::IOERR),
        }
        // One pass: the first two entries go to the command; a third means a PRP list, whose
        // page is taken then and gets the second entry too.
        let mut first = [0u64; 2];
        let mut list: Option<DmaPage> = None;
        let mut no_page = false;
        let walked = prp::walk(iod.mapping.segments(), |i, addr| {
            if i < 2 {
                first[i] = addr;
                return;
            }
            if list.is_none() && !no_page {
                list = shared.pool.alloc();
                no_page = list.is_none();
                if let Some(page) = list.as_mut() {
                    page.set_u64(0, first[1]);
                }
            }
            if let Some(page) = list.as_mut() {
                page.set_u64(i - 1, addr);
            }
        });
        let prp2 = list.as_ref().map_or(first[1], DmaPage::dma);
        iod.page = list;
        if no_page {
            return Err(blk_status::RESOURCE);
        }
        walked.map_err(|_| blk_status::IOERR)?;
        cmd.set_prps(first[0], prp2);
        Ok(())
    }

    /// Undoes the data mapping and frees the page of a request that will not reach the device,
    /// or is done with it.
    fn release_data(&self, iod: &mut Iod) {
        let shared = self.shared();
        iod.mapping.unmap(shared.pdev.as_ref());
        if let Some(page) = iod.page.take() {
            shared.pool.free(page);
        }
    }

    /// Reaps completed commands under the held CQ lock and completes their requests; the
    /// successful ones go to `batch`, to be ended once the lock is dropped. Returns how many
    /// were reaped.
    pub(crate) fn reap(
        &self,
        cq: &mut CqState<IoCq>,
        batch: &mut CompletionBatch<NvmeOps<'b>>,
    ) -> u32 {
        let n = self.q.drain(cq, |_, cqe| self.complete_cqe(cqe, batch));
        cq.extra.completed = cq.extra.completed.wrapping_add(n.into());
        n
    }

    fn complete_cqe(&self, cqe: &Completion, batch: &mut CompletionBatch<NvmeOps<'b>>) {
        let cid = cqe.cid();
        let generation = command_id::generation(cid);
        // SAFETY: completions of this queue are only handled under its CQ lock, which we hold;
        // a request whose current generation matches the completion is on the device (the
        // generation moves on when it completes), so this is the only token for it.
        let rq = unsafe {
            self.tags
                .take_if::<NvmeOps<'b>>(command_id::tag(cid), |iod| iod.generation == generation)
        };
        let Some(mut rq) = rq else {
            self.stats.bad_completions.add(1);
            // Logged at the 1st, 2nd, 4th, 8th ... occurrence: visible, but never a flood.
            if self.stats.bad_completions.get().is_power_of_two() {
                pr_warn!(
                    "queue {}: completion for unknown command {:#x} dropped ({} so far)\n",
                    self.q.qid,
                    cid,
                    self.stats.bad_completions.get()
                );
            }
            return;
        };
        let iod = rq.pdu_mut();
        iod.generation = command_id::next_generation(iod.generation);
        iod.status = cqe.status();
        let success = iod.status.is_success();
        if rq.should_fake_timeout() {
            // Fault injection: the completion is lost; the watchdog will find it timed out.
            rq.lose();
            return;
        }
        let Some(rq) = rq.complete_remote() else {
            return;
        };
        let unbatched = if success { batch.add(rq) } else { Some(rq) };
        if let Some(rq) = unbatched {
            self.finish(rq);
        }
    }

    /// What ending a request needs beyond blk-mq: its data unmapped, its page freed.
    pub(crate) fn release(&self, iod: &mut Iod) {
        self.release_data(iod);
        iod.retries = 0;
    }

    /// Ends (or retries) a request whose command is no longer on the device.
    pub(crate) fn finish(&self, mut rq: Request<NvmeOps<'b>>) {
        let failfast = rq.view().is_failfast();
        let iod = rq.pdu_mut();
        self.release_data(iod);
        let status = iod.status;
        if !status.is_success()
            && !status.do_not_retry()
            && !failfast
            && iod.retries < MAX_RETRIES
            && !self.shared().is_dead()
        {
            iod.retries += 1;
            self.stats.retries.add_concurrent(1);
            rq.requeue(0);
            return;
        }
        iod.retries = 0;
        rq.end(status.to_blk());
    }

    /// Fails a request the device will never complete (reset or dead controller); it is
    /// retried if it may be and the controller lives on.
    pub(crate) fn cancel(&self, mut rq: Request<NvmeOps<'b>>) {
        let iod = rq.pdu_mut();
        iod.generation = command_id::next_generation(iod.generation);
        iod.status = Status::cancelled();
        self.finish(rq);
    }

    /// blk-mq polling of a poll queue (io_uring `hipri`).
    pub(crate) fn poll(&self) -> u32 {
        let mut batch = CompletionBatch::new();
        let mut cq = self.q.lock_cq();
        if !self.q.pending(&cq) {
            return 0;
        }
        let n = self.reap(&mut cq, &mut batch);
        self.stats.reaped_blk_poll.add(n.into());
        n
    }
}

#[pinned_drop]
impl PinnedDrop for IoQueue<'_> {
    fn drop(self: Pin<&mut Self>) {
        // Never leave a timer armed or a vector masked behind (the controller normally
        // stopped polling already; this is the backstop).
        self.stop_polling();
    }
}
