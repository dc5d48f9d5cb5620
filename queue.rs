// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the submission ring and its doorbell (or shadow doorbell), the completion ring
//! and the drain every completion path shares (the interrupt handler, the poll timer, blk-mq
//! polling, the timeout handler and teardown), and the I/O path between blk-mq requests and
//! NVMe commands.
//!
//! The interrupt handler and the poll timer of an I/O queue live in `irq.rs` and `hrtimer.rs`.

use core::ops::DerefMut;
use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    new_spinlock,
    new_spinlock_irq,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            mb,
            Full,
            Write, //
        },
        lock::{
            spinlock::SpinLockIrqBackend,
            Guard, //
        },
        Arc,
        SpinLock,
        SpinLockIrq, //
    }, //
};

use crate::{
    cmd::{
        opcode,
        Command,
        Completion, //
    },
    mapping::{
        self,
        Iod,
        NodePools, //
    },
    params::{
        self,
        PolicyParams, //
    },
    policy::{
        Policy,
        Reaped, //
    },
    regs::Doorbells,
    stats::{
        CqTallies,
        QueueStats,
        Tally, //
    },
    sys::{
        blk::{
            self,
            Batch,
            CompletionRing,
            LocalRqList,
            Posted,
            Rejected,
            Request,
            Status,
            Tags, //
        },
        coherent::{
            self,
            Ring, //
        },
        dma::{
            P2pArray,
            Unbindable, //
        },
        irq::{
            HandlerContext,
            Irq,
            IrqAndTimer,
            LineSlot, //
        },
        numa::Node,
        nvme::{
            self,
            Ctrl, //
        },
        pci::{
            Function,
            MappedDoorbell,
            Regs, //
        },
        sync::Waiter, //
    }, //
};

/// What the controller's queues share: nvme-core's controller, the PCI function, its
/// registers and DMA pools (both gone once the driver unbinds), and what Identify told about
/// SGL support.
pub(crate) struct Hw {
    pub(crate) core: Ctrl,
    pub(crate) pci: Function,
    pub(crate) regs: Regs,
    pub(crate) pools: Unbindable<NodePools>,
    sgl: Atomic<bool>,
    meta_sgl: Atomic<bool>,
}

impl Hw {
    pub(crate) fn new(core: Ctrl, pci: Function, regs: Regs, pools: Unbindable<NodePools>) -> Self {
        Self {
            core,
            pci,
            regs,
            pools,
            sgl: Atomic::new(false),
            meta_sgl: Atomic::new(false),
        }
    }

    /// Takes SGL support from nvme-core's Identify data (after each identify).
    pub(crate) fn update_sgl_support(&self) {
        self.sgl.store(self.core.supports_sgl(), Relaxed);
        self.meta_sgl.store(self.core.supports_meta_sgl(), Relaxed);
    }

    pub(crate) fn sgl_supported(&self) -> bool {
        self.sgl.load(Relaxed)
    }

    pub(crate) fn meta_sgl_supported(&self) -> bool {
        self.meta_sgl.load(Relaxed)
    }
}

/// Shadow doorbells (Doorbell Buffer Config): the driver writes doorbell values to memory and
/// writes the register only when the controller's event index asks for it.
pub(crate) struct ShadowDoorbells {
    values: Coherent<[u32]>,
    events: Coherent<[u32]>,
}

impl ShadowDoorbells {
    /// Buffers for the doorbells of `queues` queue pairs at doorbell stride `stride`.
    pub(crate) fn new(dev: &Device<Bound>, queues: u32, stride: u32) -> Result<Self> {
        let entries = queues as usize * 2 * stride as usize;
        Ok(Self {
            values: Coherent::zeroed_slice(dev, entries, GFP_KERNEL)?,
            events: Coherent::zeroed_slice(dev, entries, GFP_KERNEL)?,
        })
    }

    /// Forgets what a previous controller instance left (before Doorbell Buffer Config again).
    pub(crate) fn clear(&self) {
        for i in 0..self.values.len() {
            let _ = coherent::write(&self.values, i, 0);
            let _ = coherent::write(&self.events, i, 0);
        }
    }

    /// The buffers' bus addresses, for Doorbell Buffer Config.
    pub(crate) fn dma(&self) -> (u64, u64) {
        (self.values.dma_address(), self.events.dma_address())
    }

    /// Records doorbell `index`'s new `value`; true when the register must be written too
    /// (the controller's event index lies between the old and the new value). The buffers
    /// hold little-endian words.
    #[inline]
    fn update(&self, index: usize, value: u16) -> bool {
        // The queue entries are visible before the doorbell value.
        mb(Write);
        let Some(old) = coherent::read(&self.values, index) else {
            return true;
        };
        let old = u32::from_le(old) as u16;
        let _ = coherent::write(&self.values, index, u32::from(value).to_le());
        // The doorbell value is visible before the event index is read; the controller orders
        // its side the same way.
        mb(Full);
        let event = coherent::read(&self.events, index).map_or(0, u32::from_le) as u16;
        value.wrapping_sub(event).wrapping_sub(1) < value.wrapping_sub(old)
    }
}

/// A queue's slot in the shadow doorbell buffers.
struct Shadow {
    buffers: Arc<ShadowDoorbells>,
    index: usize,
}

/// How a ring's new tail or head reaches the controller: its register, held from
/// [`Queue::init`] to [`Queue::free_rings`], and its shadow doorbell slot if it has one.
#[derive(Default)]
struct Doorbell {
    register: Option<MappedDoorbell>,
    shadow: Option<Shadow>,
}

impl Doorbell {
    /// Announces `value`: in the shadow slot, and in the register unless the controller's
    /// event index says it does not need the write.
    #[inline(always)]
    fn announce(&self, value: u16) {
        if let Some(s) = &self.shadow {
            if !s.buffers.update(s.index, value) {
                return;
            }
        }
        if let Some(register) = &self.register {
            register.write(value.into());
        }
    }
}

struct Sq {
    /// The ring in host memory, or none: then in `cmb_ring`, or no ring at all. Two fields, not
    /// one of two kinds: a command's copy tries the host ring first and reaches the CMB only
    /// without one, so a queue in host memory pays nothing for the CMB.
    ring: Ring<Command>,
    /// The ring in the controller's memory buffer (peer-to-peer memory), with `use_cmb_sqes`.
    cmb_ring: Option<P2pArray<Command>>,
    /// Ring entries per command: 2 for controllers with 128-byte entries.
    slots_per_entry: usize,
    depth: u16,
    tail: u16,
    /// Tail last announced to the controller.
    last_tail: u16,
    doorbell: Doorbell,
    /// Commands placed on the ring (the statistics' `submitted`).
    submitted: Tally,
    /// The queue owns its vector, so it may poll and times its submissions: `own_irq`, kept
    /// here too so that a submission reads it without an atomic access.
    owns_vector: bool,
}

/// Adaptive polling's state, kept under the CQ lock.
pub(crate) struct Adaptive {
    pub(crate) policy: Policy,
    pub(crate) params: PolicyParams,
    /// Completions reaped (with the submissions counted in the statistics, the commands in
    /// flight), counted from the queue's creation.
    completed: u64,
    /// Teardown or reset has begun: no new poll episode may start.
    pub(crate) stopping: bool,
    /// A CPU is going down: its interrupts are about to be shut down under the queue, so no
    /// episode may mask one.
    pub(crate) paused: bool,
    /// When the armed poll timer should fire, on the policy's clock (to measure its lateness).
    pub(crate) deadline_ns: u64,
    /// The timed commands the last reap completed and the sum of their submission times.
    timed: u32,
    submitted_sum_ns: u64,
}

impl Adaptive {
    /// What the last reap found, `count` completions, timed at `now`.
    pub(crate) fn reaped(&self, count: u32, now: u64) -> Reaped {
        Reaped {
            count,
            timed: self.timed,
            latency_sum_ns: u64::from(self.timed)
                .wrapping_mul(now)
                .wrapping_sub(self.submitted_sum_ns),
        }
    }

    /// Whether a poll episode may run now.
    pub(crate) fn allowed(&self) -> bool {
        !self.stopping && !self.paused
    }
}

pub(crate) struct Cq {
    /// The ring and where its completions' command identifiers lead: under this lock, which
    /// every reap holds, so that finding a request costs no atomic access.
    ring: CompletionRing<Iod>,
    doorbell: Doorbell,
    pub(crate) tallies: CqTallies,
    pub(crate) adaptive: Adaptive,
}

crate::irq_and_timer_owner! {
    /// A queue pair. The admin queue is queue 0; I/O queues have an interrupt vector of their own
    /// (or share vector 0), or none as poll queues.
    pub(crate) struct Queue {
        /// Dropped first: frees the interrupt and stops the poll timer before anything either
        /// uses goes.
        #[pin]
        pub(crate) wakeups: IrqAndTimer<Self>,
        pub(crate) qid: u16,
        pub(crate) hw: Arc<Hw>,
        #[pin]
        sq: SpinLock<Sq>,
        #[pin]
        cq: SpinLockIrq<Cq>,
        enabled: Atomic<bool>,
        polled: Atomic<bool>,
        /// The vector's interrupt when the queue owns it alone (it may then mask it and poll);
        /// 0 otherwise.
        own_irq: Atomic<u32>,
        /// The CQ's MSI-X vector index.
        vector: Atomic<u32>,
        #[pin]
        deleted: Waiter,
        delete_failed: Atomic<bool>,
        /// Mirror of the SQ tail, for the trace of completions (read without the SQ lock, and only
        /// while the trace is on). 16 bits wide: the kernel crate reaches those atomics without its
        /// out-of-line `AtomicRepr::as_ptr` (only the C helper is called).
        tail_seen: Atomic<i16>,
        /// The NUMA node (its [`Node::index`]) of the CPUs blk-mq maps to the queue, whose pools
        /// hold its requests' descriptors.
        node: Atomic<usize>,
        pub(crate) stats: Arc<QueueStats>,
    }
}

impl Queue {
    /// A queue without rings; they come with [`Queue::alloc_rings`].
    pub(crate) fn new(qid: u16, hw: Arc<Hw>) -> impl PinInit<Self, Error> {
        pin_init::pin_init_scope(move || {
            let stats = Arc::new(QueueStats::default(), GFP_KERNEL)?;
            Ok(try_pin_init!(Self {
                wakeups <- IrqAndTimer::new(),
                qid,
                hw,
                sq <- new_spinlock!(Sq {
                    ring: Ring::none(),
                    cmb_ring: None,
                    slots_per_entry: 1,
                    depth: 0,
                    tail: 0,
                    last_tail: 0,
                    doorbell: Doorbell::default(),
                    submitted: Tally::default(),
                    owns_vector: false,
                }),
                cq <- new_spinlock_irq!(Cq {
                    ring: CompletionRing::new(),
                    doorbell: Doorbell::default(),
                    tallies: CqTallies::default(),
                    adaptive: Adaptive {
                        policy: Policy::new(),
                        params: PolicyParams::new(),
                        completed: 0,
                        stopping: false,
                        paused: false,
                        deadline_ns: 0,
                        timed: 0,
                        submitted_sum_ns: 0,
                    },
                }),
                enabled: Atomic::new(false),
                polled: Atomic::new(false),
                own_irq: Atomic::new(0),
                vector: Atomic::new(0),
                deleted <- Waiter::new(),
                delete_failed: Atomic::new(false),
                tail_seen: Atomic::new(0),
                node: Atomic::new(0),
                stats,
            }? Error))
        })
    }

    /// Allocates the rings for `depth` entries (of 128 bytes with `wide_entries`), the SQ's in
    /// the controller's CMB if `sq_in_cmb` and it has room, else in host memory
    /// (`nvme_alloc_sq_cmds`); a queue keeps its rings until [`Queue::free_rings`], whatever
    /// depth is asked later.
    pub(crate) fn alloc_rings(
        &self,
        dev: &Device<Bound>,
        depth: u16,
        wide_entries: bool,
        sq_in_cmb: bool,
    ) -> Result {
        if self.has_rings() {
            return Ok(());
        }
        let slots = if wide_entries { 2 } else { 1 };
        let entries = usize::from(depth) * slots;
        let in_cmb = sq_in_cmb
            .then(|| P2pArray::alloc(&self.hw.pci, entries))
            .flatten();
        let host_ring = match in_cmb {
            Some(_) => Ring::none(),
            None => Ring::new(Coherent::<Command>::zeroed_slice(dev, entries, GFP_KERNEL)?),
        };
        let cq_ring = Coherent::<Completion>::zeroed_slice(dev, depth.into(), GFP_KERNEL)?;
        {
            let mut sq = self.sq.lock();
            sq.ring = host_ring;
            sq.cmb_ring = in_cmb;
            sq.slots_per_entry = slots;
            sq.depth = depth;
        }
        self.cq.lock().ring.install(cq_ring);
        Ok(())
    }

    pub(crate) fn has_rings(&self) -> bool {
        let sq = self.sq.lock();
        sq.ring.buf().is_some() || sq.cmb_ring.is_some()
    }

    /// Frees the rings (and the shadow doorbell slots) and lets go of the doorbells: the
    /// controller no longer uses them, and the driver may unbind.
    pub(crate) fn free_rings(&self) {
        // Taken out under the locks, freed after them: freeing DMA memory needs interrupts on.
        let sq = {
            let mut sq = self.sq.lock();
            let doorbell = core::mem::take(&mut sq.doorbell);
            (doorbell, sq.ring.take(), sq.cmb_ring.take())
        };
        let cq = {
            let mut cq = self.cq.lock();
            (core::mem::take(&mut cq.doorbell), cq.ring.take())
        };
        drop((sq, cq));
    }

    pub(crate) fn depth(&self) -> u16 {
        self.sq.lock().depth
    }

    /// The rings' bus addresses, for Create I/O CQ/SQ or the admin queue registers.
    pub(crate) fn ring_dma(&self) -> Option<(u64, u64)> {
        let sq = {
            let sq = self.sq.lock();
            let host = sq.ring.buf().map(Coherent::dma_address);
            host.or_else(|| sq.cmb_ring.as_ref().map(P2pArray::bus_address))?
        };
        let cq = self.cq.lock().ring.dma_address()?;
        Some((sq, cq))
    }

    /// Resets the rings for a newly created queue pair (`nvme_init_queue`): the controller
    /// starts both at 0, with phase 1, and knows the shadow doorbell slots if `shadow`.
    pub(crate) fn init(&self, stride: u32, shadow: Option<&Arc<ShadowDoorbells>>) {
        let db = Doorbells::of(self.qid, stride);
        let doorbell = |offset, index| Doorbell {
            // Past the BAR (checked against the queue count) or once unbound: no register.
            register: self.hw.regs.map_doorbell(offset).ok(),
            shadow: shadow.filter(|_| self.qid != 0).map(|b| Shadow {
                buffers: b.clone(),
                index,
            }),
        };
        let sq_doorbell = doorbell(db.sq_offset(), db.sq_index);
        let cq_doorbell = doorbell(db.cq_offset(), db.cq_index);
        // Old slots are dropped after the locks: the last one frees DMA memory.
        let old_sq = {
            let mut sq = self.sq.lock();
            sq.tail = 0;
            sq.last_tail = 0;
            core::mem::replace(&mut sq.doorbell, sq_doorbell)
        };
        self.tail_seen.store(0, Relaxed);
        let mut cq = self.cq.lock();
        cq.ring.restart();
        let old_cq = core::mem::replace(&mut cq.doorbell, cq_doorbell);
        // Nothing is in flight on a new queue pair.
        cq.adaptive.completed = self.stats.submitted.get();
        drop(cq);
        drop((old_sq, old_cq));
    }

    /// Stops using shadow doorbells (the controller refused them).
    pub(crate) fn drop_shadow(&self) {
        let sq = self.sq.lock().doorbell.shadow.take();
        let cq = self.cq.lock().doorbell.shadow.take();
        drop((sq, cq));
    }

    /// Creates the queue pair on the controller: Create I/O CQ (on `vector`, or polled
    /// without), then Create I/O SQ. Returns the NVMe status of the one that failed, 0 when
    /// both succeeded.
    pub(crate) fn create_on_controller(&self, vector: Option<u16>) -> Result<u32> {
        let core = self.hw.core;
        let (sq_dma, cq_dma) = self.ring_dma().ok_or(ENOMEM)?;
        let depth = self.depth();
        self.polled.store(vector.is_none(), Relaxed);
        self.stats.has_vector.set(vector.is_some().into());
        let status = core.submit_sync(&Command::create_cq(self.qid, depth, cq_dma, vector))?;
        if status != 0 {
            return Ok(status);
        }
        let medium = core.has_quirk(nvme::Quirk::MediumPrioritySq);
        match core.submit_sync(&Command::create_sq(self.qid, depth, sq_dma, medium)) {
            Ok(0) => {
                self.vector.store(vector.unwrap_or(0).into(), Relaxed);
                Ok(0)
            }
            result => {
                // Best effort: the controller is failing this queue anyway.
                let _ = core.submit_sync(&delete(opcode::DELETE_CQ, self.qid));
                result
            }
        }
    }

    /// Requests the queue's interrupt `irq` as `nvme<N>q<qid>`. `own` says the vector serves
    /// this queue alone (then adaptive polling may mask it). With `use_threaded_interrupts` the
    /// completions are reaped in the line's thread (`irq.rs`).
    pub(crate) fn request_irq(self: Pin<&Self>, irq: Irq, own: bool) -> Result {
        let name = CString::try_from_fmt(fmt!("nvme{}q{}", self.hw.core.instance(), self.qid))?;
        LineSlot::request(self, irq, name, own, params::use_threaded_interrupts())?;
        self.own_irq
            .store(if own { irq.number() } else { 0 }, Relaxed);
        self.sq.lock().owns_vector = own;
        Ok(())
    }

    /// Frees the interrupt (after adaptive polling let go of it).
    pub(crate) fn free_irq(&self) {
        self.sq.lock().owns_vector = false;
        // Under the CQ lock, under which an episode's end unmasks the vector: an ending that
        // raced with this one either unmasked already or finds no vector to unmask.
        let cq = self.lock_cq();
        self.own_irq.store(0, Relaxed);
        drop(cq);
        self.wakeups.line().free();
    }

    /// The interrupt of a queue that owns its vector.
    pub(crate) fn own_irq(&self) -> Option<Irq> {
        match self.own_irq.load(Relaxed) {
            0 => None,
            irq => Some(Irq::new(irq)),
        }
    }

    /// The interrupt of the queue's vector, shared or not.
    pub(crate) fn irq(&self) -> Option<Irq> {
        self.wakeups.line().irq()
    }

    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Relaxed);
        // Whoever checks `is_enabled` next sees the new state (`nvme_suspend_queue`).
        mb(Full);
    }

    #[inline]
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub(crate) fn is_polled(&self) -> bool {
        self.polled.load(Relaxed)
    }

    /// Sends Delete I/O SQ or CQ for this queue without waiting; see [`Queue::wait_deleted`].
    pub(crate) fn send_delete(&self, delete_cq: bool) -> Result {
        self.deleted.reinit();
        let op = if delete_cq {
            opcode::DELETE_CQ
        } else {
            opcode::DELETE_SQ
        };
        self.hw.core.submit_delete_queue(op, self.qid)
    }

    /// Waits at most `timeout` jiffies for the Delete command sent last; returns the jiffies
    /// left (0: it did not complete).
    pub(crate) fn wait_deleted(&self, timeout: usize) -> usize {
        self.deleted.wait_io_timeout(timeout)
    }

    /// The Delete command sent last ended (with an error if `failed`).
    pub(crate) fn delete_done(&self, failed: bool) {
        self.delete_failed.store(failed, Relaxed);
        self.deleted.complete();
    }

    /// blk-mq's `queue_rq`: the request becomes a command on the ring.
    // Inlined into blk-mq's entry point, which does nothing else: a call between them costs a
    // prologue, an epilogue and the status's conversion on every I/O.
    #[inline(always)]
    pub(crate) fn queue_rq(&self, mut rq: Request<Iod>, last: bool) -> Result<(), Rejected> {
        // blk-mq may still call a dying queue while it drains it.
        if !self.is_enabled() {
            return Err(rq.reject(Status::ioerr()));
        }
        if !rq.check_ready() {
            return rq.fail_nonready();
        }
        if let Err(status) = self.prep(&mut rq) {
            return Err(rq.reject(status));
        }
        // A started request the ring cannot take (the queue lost its rings since the check
        // above) goes back through nvme-core, as in `submit_list`: blk-mq ending it would skip
        // nvme-core's completion (multipath's count of active requests).
        if let Err(mut rq) = self.submit_request(rq, last) {
            self.unprep(&mut rq);
            rq.fail_host_path();
        }
        Ok(())
    }

    /// Builds and maps a request's command and starts the request (`nvme_prep_rq`).
    // Inlined, with the mapping and the doorbell below, into `queue_rq` (as stock compiles its
    // submission into two functions): each call boundary costs a prologue, spills and an epilogue
    // on every I/O.
    #[inline(always)]
    pub(crate) fn prep(&self, rq: &mut Request<Iod>) -> Result<(), Status> {
        rq.init_pdu();
        rq.setup_command()?;
        let segments = rq.nr_phys_segments();
        let integrity = rq.has_integrity();
        if segments > 0 || integrity {
            let hw = &*self.hw;
            let io_queue = self.qid != 0;
            let direct = if segments == 1 && !integrity {
                mapping::map_direct(&hw.pci, hw.sgl_supported(), io_queue, rq)
            } else {
                Err(Status::again())
            };
            let mapped = match direct {
                Err(e) if e == Status::again() => hw
                    .pools
                    .with(|pools| {
                        mapping::map(
                            &hw.pci,
                            pools.on(self.node.load(Relaxed)).ok_or(Status::ioerr())?,
                            hw.sgl_supported(),
                            hw.meta_sgl_supported(),
                            io_queue,
                            rq,
                        )
                    })
                    .unwrap_or_else(|| Err(Status::ioerr())),
                done => done,
            };
            if let Err(e) = mapped {
                rq.cleanup_command();
                return Err(e);
            }
        }
        rq.start();
        Ok(())
    }

    /// Whether a request of a `queue_rqs` batch can be submitted now, prepared if so.
    pub(crate) fn prep_for_batch(&self, rq: &mut Request<Iod>) -> bool {
        self.is_enabled() && rq.check_ready() && self.prep(rq).is_ok()
    }

    fn unprep(&self, rq: &mut Request<Iod>) {
        self.unmap(rq);
        rq.cleanup_command();
    }

    /// Releases a request's data mapping.
    #[inline(always)]
    pub(crate) fn unmap(&self, rq: &mut Request<Iod>) {
        let hw = &*self.hw;
        if rq.pdu().is_direct() {
            mapping::unmap_direct(&hw.pci, rq);
        } else {
            hw.pools.with(|pools| {
                if let Some(pools) = pools.on(self.node.load(Relaxed)) {
                    mapping::unmap(&hw.pci, pools, rq);
                }
            });
        }
    }

    /// Ends a request whose command completed (`nvme_pci_complete_rq`).
    pub(crate) fn finish(&self, mut rq: Request<Iod>) {
        self.unmap(&mut rq);
        rq.complete();
    }

    /// Copies a command to the ring and rings the doorbell now if `ring_now`, or when the next
    /// command would fill the ring; otherwise [`Queue::commit`] rings it for the batch.
    pub(crate) fn submit(&self, cmd: &Command, ring_now: bool) -> Result<(), Status> {
        let mut sq = self.sq.lock();
        self.copy_command(&mut sq, cmd)?;
        sq.submitted.add(1, &self.stats.submitted);
        self.write_sq_doorbell(&mut sq, ring_now);
        Ok(())
    }

    /// Submits a prepared request's command (see [`Queue::submit`]); gives the request back
    /// when the ring cannot take it.
    #[inline(always)]
    fn submit_request(&self, mut rq: Request<Iod>, ring_now: bool) -> Result<(), Request<Iod>> {
        let retried = rq.retries() > 0;
        let mut sq = self.sq.lock();
        self.stamp_submission(&sq, &mut rq, retried, &mut None);
        self.copy_request(&mut sq, rq)?;
        sq.submitted.add(1, &self.stats.submitted);
        if retried {
            self.stats.retries.add(1);
        }
        self.write_sq_doorbell(&mut sq, ring_now);
        Ok(())
    }

    /// Submits a list of prepared requests under one lock and one doorbell write. A request
    /// the ring cannot take (the queue lost its rings after `prep_for_batch`, so none of the
    /// rest can go either) is started already: those end with a host path error, which
    /// nvme-core retries or fails over, once the lock is dropped.
    pub(crate) fn submit_list(&self, list: &mut LocalRqList<Iod>) {
        {
            let mut sq = self.sq.lock();
            let mut now = None;
            let mut any = false;
            while let Some(mut rq) = list.pop() {
                let retried = rq.retries() > 0;
                self.stamp_submission(&sq, &mut rq, retried, &mut now);
                if let Err(rq) = self.copy_request(&mut sq, rq) {
                    list.push(rq);
                    break;
                }
                sq.submitted.add(1, &self.stats.submitted);
                if retried {
                    self.stats.retries.add(1);
                }
                any = true;
            }
            if any {
                self.write_sq_doorbell(&mut sq, true);
            }
        }
        while let Some(mut rq) = list.pop() {
            self.unprep(&mut rq);
            rq.fail_host_path();
        }
    }

    /// Records a prepared request's submission time: only a queue that may poll measures its
    /// latency, and only while adaptive polling is on (otherwise the time stays 0 from
    /// [`Queue::prep`], which its completion skips; a request submitted before polling was
    /// turned on is simply not timed). blk-mq's stamp serves where it is the submission's (not
    /// for a retry, whose stamp is the first attempt's): it reads the clock once per plug, not
    /// once per command. Otherwise the clock is read once per call site, kept in `now`.
    #[inline]
    fn stamp_submission(
        &self,
        sq: &Sq,
        rq: &mut Request<Iod>,
        retried: bool,
        now: &mut Option<u64>,
    ) {
        if !sq.owns_vector || !params::adaptive() {
            return;
        }
        rq.pdu().submitted_ns = match rq.accounted_since_ns().filter(|_| !retried) {
            Some(stamp) => stamp,
            None => *now.get_or_insert_with(blk::clock_ns),
        };
    }

    /// Copies a request's command to the ring: the request is the device's from here (its
    /// completion hands it back through the tags), so it is consumed; given back when the ring
    /// cannot take it (the queue lost its ring).
    #[inline]
    fn copy_request(&self, sq: &mut Sq, mut rq: Request<Iod>) -> Result<(), Request<Iod>> {
        match self.copy_command(sq, &rq.command()) {
            Ok(()) => {
                rq.give_to_device();
                Ok(())
            }
            Err(_) => Err(rq),
        }
    }

    #[inline]
    fn copy_command(&self, sq: &mut Sq, cmd: &Command) -> Result<(), Status> {
        // `tail` is below `depth`, so this does not overflow (nor would it matter: the write
        // checks the slot).
        let slot = usize::from(sq.tail).wrapping_mul(sq.slots_per_entry);
        // Without a host ring, whose length is then 0, the slot is the CMB's.
        let written = sq
            .ring
            .write_owned(slot, *cmd)
            .or_else(|_| match sq.cmb_ring.as_mut() {
                Some(cmb) => cmb.write(slot, *cmd),
                None => Err(EIO),
            });
        written.map_err(|_| Status::ioerr())?;
        sq.tail = next(sq.tail, sq.depth);
        self.tail_seen.store(sq.tail as i16, Relaxed);
        Ok(())
    }

    /// Announces the tail if asked, or if the next command would wrap onto the last announced
    /// tail (the controller would see an empty ring).
    #[inline(always)]
    fn write_sq_doorbell(&self, sq: &mut Sq, ring_now: bool) {
        if !ring_now && next(sq.tail, sq.depth) != sq.last_tail {
            return;
        }
        sq.doorbell.announce(sq.tail);
        sq.last_tail = sq.tail;
    }

    /// blk-mq's `commit_rqs`: rings the doorbell for commands submitted without it.
    pub(crate) fn commit(&self) {
        let mut sq = self.sq.lock();
        if sq.tail != sq.last_tail {
            self.write_sq_doorbell(&mut sq, true);
        }
    }

    /// Places the Asynchronous Event Request nvme-core asks for (admin queue only).
    pub(crate) fn submit_async_event(&self) {
        let _ = self.submit(&Command::async_event(nvme::aen_command_id()), true);
    }

    /// Stops handing out completions until the queue pair is created again ([`Queue::init`]), so
    /// that its tag set's requests may be cancelled.
    pub(crate) fn close_completions(&self) {
        self.lock_cq().ring.close();
    }

    /// Takes the tags blk-mq set the queue's hardware context up with (again).
    pub(crate) fn set_tags(&self, tags: Tags<Iod>) {
        self.lock_cq().ring.set_tags(tags);
    }

    /// Takes the node of the CPUs blk-mq maps to the queue (again), whose pools must exist.
    pub(crate) fn set_node(&self, node: Node) {
        self.node.store(node.index(), Relaxed);
    }

    /// Takes the CQ lock from process or softirq context (local interrupts off while held).
    pub(crate) fn lock_cq(&self) -> Guard<'_, Cq, SpinLockIrqBackend> {
        self.cq.lock()
    }

    /// Takes the CQ lock in the queue's interrupt handler.
    pub(crate) fn lock_cq_in_irq<'a>(
        &'a self,
        ctx: &HandlerContext<'a>,
    ) -> impl DerefMut<Target = Cq> + 'a {
        ctx.lock(&self.cq)
    }

    /// Whether the controller posted a completion not reaped yet.
    pub(crate) fn pending(&self, cq: &Cq) -> bool {
        cq.ring.pending()
    }

    /// Reaps every completion the controller posted, under the held CQ lock, then writes the
    /// CQ head doorbell once. Requests that end successfully go to `batch`, ended once the
    /// caller drops the lock. Returns the number reaped.
    // Inlined into each caller like the rest of the per-I/O path: the interrupt handler and
    // the poll timer run it for every completion, and a call boundary here cost about 45
    // instructions per I/O (benchmarking.rst, "Instructions per I/O").
    #[inline(always)]
    pub(crate) fn reap(&self, cq: &mut Cq, batch: &mut Batch<'_>) -> u32 {
        let Cq {
            ring,
            doorbell,
            adaptive,
            tallies: _,
        } = cq;
        adaptive.timed = 0;
        adaptive.submitted_sum_ns = 0;
        let mut n = 0u32;
        while let Some(posted) = ring.next() {
            self.handle(posted, adaptive, batch);
            #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
            if self.stats.take_duplicate() {
                if let Some(again) = ring.repeat_last() {
                    self.handle(again, adaptive, batch);
                }
            }
            n = n.wrapping_add(1);
        }
        if n > 0 {
            doorbell.announce(ring.head());
            adaptive.completed = adaptive.completed.wrapping_add(n.into());
        }
        n
    }

    #[inline(always)]
    fn handle(&self, posted: Posted<'_, Iod>, adaptive: &mut Adaptive, batch: &mut Batch<'_>) {
        let cqe = *posted.entry();
        let cid = cqe.command_id();
        // The Asynchronous Event Request has no request: it never times out and survives
        // resets, so nvme-core keeps it apart.
        if nvme::is_aen(self.qid, cid) {
            self.hw.core.complete_aen(cqe.status, cqe.result);
            return;
        }
        let Some(mut rq) = posted.find() else {
            self.stats.bad_completions.add(1);
            // Logged at the 1st, 2nd, 4th, 8th ... occurrence: visible, but never a flood.
            if self.stats.bad_completions.get().is_power_of_two() {
                dev_warn!(
                    self.hw.core.device(),
                    "invalid id {} completed on queue {} ({} so far)\n",
                    cid,
                    self.qid,
                    self.stats.bad_completions.get()
                );
            }
            return;
        };
        rq.trace_sq(cqe.sq_head(), &self.tail_seen);
        let submitted = rq.pdu().submitted_ns;
        if submitted != 0 {
            adaptive.timed += 1;
            adaptive.submitted_sum_ns = adaptive.submitted_sum_ns.wrapping_add(submitted);
        }
        let Some(mut rq) = rq.complete() else {
            return;
        };
        // Here rather than in the batch's completion, which would call back into Rust once
        // per request.
        self.unmap(&mut rq);
        if let Some(rq) = rq.add_to_batch(batch) {
            rq.complete();
        }
    }

    /// Commands on the controller, as seen by the CQ lock holder.
    pub(crate) fn inflight(&self, cq: &Cq) -> u32 {
        self.stats
            .submitted
            .get()
            .saturating_sub(cq.adaptive.completed)
            .min(u32::MAX.into()) as u32
    }

    /// Nanoseconds on the policy's clock, blk-mq's (submissions may carry its stamps).
    pub(crate) fn now_ns(&self) -> u64 {
        blk::clock_ns()
    }

    /// Shows the policy's state in the statistics, if it changed (after most interrupts it
    /// did not: the check is inlined, the update is not).
    #[inline(always)]
    pub(crate) fn publish(&self, policy: &mut Policy) {
        if policy.take_changed() {
            self.show(policy);
        }
    }

    fn show(&self, policy: &Policy) {
        self.stats.set_stage(policy.stage());
        self.stats.set_estimates(&policy.estimates());
        self.stats.wait_ns.set(policy.wait_ns());
        self.stats.batch.set(policy.batch());
        self.stats.backoff_ns.set(policy.backoff_ns());
        self.stats.failures.set(policy.failures().into());
        self.stats.paced_by_cpu.set(policy.paced_by_cpu().into());
    }

    /// blk-mq polling (`nvme_poll`): reaps a poll queue for io_uring polled I/O.
    pub(crate) fn blk_poll(&self, batch: &mut Batch<'_>) -> i32 {
        if !self.is_polled() {
            return 0;
        }
        let mut cq = self.lock_cq();
        if !self.pending(&cq) {
            return 0;
        }
        let n = self.reap(&mut cq, batch);
        self.stats.reaped_blk_poll.add(n.into());
        i32::from(n > 0)
    }

    /// Reaps with the vector masked and its handler finished (`nvme_poll_irqdisable`); process
    /// context. Poll queues are reaped under their lock only.
    pub(crate) fn reap_irqs_off(&self) {
        let irq = self.irq();
        if let Some(irq) = irq {
            irq.mask();
        }
        {
            let mut cq = self.lock_cq();
            self.reap(&mut cq, &mut Batch::none());
        }
        if let Some(irq) = irq {
            irq.unmask();
        }
    }

    /// The last reap before a disabled controller's requests are cancelled.
    pub(crate) fn reap_remaining(&self) {
        let mut cq = self.lock_cq();
        self.reap(&mut cq, &mut Batch::none());
    }
}

/// The ring slot after `index`.
fn next(index: u16, depth: u16) -> u16 {
    // Indexes are below the depth, so the increment does not wrap.
    let next = index.wrapping_add(1);
    if next >= depth {
        0
    } else {
        next
    }
}

/// Delete I/O SQ or CQ `qid`.
fn delete(op: u8, qid: u16) -> Command {
    let mut c = Command {
        opcode: op,
        ..Command::default()
    };
    c.cdw10 = u32::from(qid).to_le();
    c
}
