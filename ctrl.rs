// SPDX-License-Identifier: GPL-2.0

//! The controller: bring-up in probe, namespaces as disks, the watchdog that finds lost
//! commands and failed controllers, reset, and orderly teardown and shutdown.

use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    bindings, debugfs,
    device::{Bound, Core as CoreCtx},
    dma::{Device as _, DmaMask},
    fmt,
    io::Io,
    new_mutex, pci,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, Mutex,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
    workqueue::{self, DelayedWork, WorkItem},
};

use crate::{
    admin::{AdminError, AdminQueue, ADMIN_DEPTH},
    blk::{
        self, CompletionBatch, Disk, Limits, MapType, QueueMaps, Rejected, Request, TagSet,
        TagSetConfig,
    },
    cmd::{
        self, Command, IdController, IdNamespace, CNS_ACTIVE_NS_LIST, CNS_CONTROLLER,
        CNS_NAMESPACE, FEAT_NUM_QUEUES,
    },
    dma::{set_min_align_mask, DmaPool},
    irq::{IrqLine, IrqVectors},
    params::{self, driver},
    prp,
    queue::{jiffies, IoQueue, Iod},
    regs,
    stats::QueueStats,
};

pub(crate) type Bar0<'a> = pci::Bar<'a, { regs::BAR0_MIN_SIZE }>;

/// How often the watchdog looks for lost commands and a failed controller.
const HEALTH_PERIOD_MS: u32 = 1000;

/// Bounds of the wait for a shutdown notification to complete (RTD3E within these).
const SHUTDOWN_TIMEOUT_MIN_MS: u32 = 5_000;
const SHUTDOWN_TIMEOUT_MAX_MS: u32 = 60_000;

/// Largest transfer: what the controller allows (MDTS) and one PRP list page can describe.
const MAX_TRANSFER_BYTES: u32 = prp::MAX_TRANSFER as u32;

/// Segments per request (the block layer splits larger ones).
const MAX_SEGMENTS: u16 = 256;

/// Controller instances, for names ("nvma0", "nvma1", ...): a bitmap of the ones in use.
static INSTANCES: Atomic<u64> = Atomic::new(0);

fn alloc_instance() -> Result<u32> {
    loop {
        let used = INSTANCES.load(Relaxed);
        let free = (!used).trailing_zeros();
        if free >= 64 {
            return Err(EBUSY);
        }
        if INSTANCES.cmpxchg(used, used | 1 << free, Relaxed).is_ok() {
            return Ok(free);
        }
    }
}

/// The name of controller `instance`, "nvma<instance>": the prefix of its disks, interrupts
/// and debugfs directory, distinct from the stock driver's "nvme<N>".
#[derive(Clone, Copy)]
struct CtrlName(u32);

impl kernel::fmt::Display for CtrlName {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        write!(f, "nvma{}", self.0)
    }
}

fn free_instance(instance: u32) {
    let mut used = INSTANCES.load(Relaxed);
    while let Err(now) = INSTANCES.cmpxchg(used, used & !(1 << instance), Relaxed) {
        used = now;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Live = 0,
    Resetting = 1,
    Deleting = 2,
    Dead = 3,
}

/// What every queue of the controller needs: the device, its registers and doorbells, the
/// PRP page pool and the controller state.
pub(crate) struct Shared<'b> {
    pub(crate) pdev: &'b pci::Device<Bound>,
    pub(crate) bar: Bar0<'b>,
    /// Bytes between doorbells (4 << CAP.DSTRD).
    pub(crate) doorbell_stride: usize,
    pub(crate) pool: DmaPool,
    pub(crate) instance: u32,
    state: Atomic<u32>,
    /// CAP.TO: the longest CSTS.RDY transition.
    ready_timeout_ms: u32,
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        free_instance(self.instance);
    }
}

impl<'b> Shared<'b> {
    fn state(&self) -> State {
        match self.state.load(Acquire) {
            0 => State::Live,
            1 => State::Resetting,
            2 => State::Deleting,
            _ => State::Dead,
        }
    }

    fn set_state(&self, s: State) {
        self.state.store(s as u32, Release);
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.state() == State::Dead
    }

    fn dev(&self) -> &kernel::device::Device<Bound> {
        self.pdev.as_ref()
    }

    fn csts(&self) -> u32 {
        self.bar.read(regs::CSTS).into_raw()
    }

    /// Fails if the controller is gone (registers read all ones) or reports a fatal error.
    pub(crate) fn check_alive(&self) -> Result {
        let csts = self.csts();
        if csts == regs::DEVICE_GONE {
            return Err(ENODEV);
        }
        if regs::CSTS::from(csts).cfs() {
            return Err(EIO);
        }
        Ok(())
    }

    /// Polls CSTS every millisecond until `done` accepts it (`Ok(true)`), the device is gone
    /// (`ENODEV`) or `timeout_ms` have passed (`Ok(false)`).
    fn poll_csts(&self, timeout_ms: u32, done: impl Fn(regs::CSTS) -> bool) -> Result<bool> {
        let start = Instant::<Monotonic>::now();
        loop {
            let csts = self.csts();
            if csts == regs::DEVICE_GONE {
                return Err(ENODEV);
            }
            if done(regs::CSTS::from(csts)) {
                return Ok(true);
            }
            if start.elapsed() > Delta::from_millis(timeout_ms.into()) {
                return Ok(false);
            }
            fsleep(Delta::from_millis(1));
        }
    }

    /// Waits for CSTS.RDY to become `ready`, up to CAP.TO.
    fn wait_ready(&self, ready: bool) -> Result {
        if self.poll_csts(self.ready_timeout_ms, |c| c.rdy() == ready)? {
            return Ok(());
        }
        dev_err!(
            self.dev(),
            "controller not {} after {} ms (CSTS {:#x})\n",
            if ready { "ready" } else { "disabled" },
            self.ready_timeout_ms,
            self.csts()
        );
        Err(ENODEV)
    }

    /// CC.EN = 0 and wait for CSTS.RDY = 0: the controller drops every queue and command.
    fn disable(&self) -> Result {
        self.bar
            .update(regs::CC, |cc| cc.with_en(false).with_const_shn::<0>());
        self.wait_ready(false)
    }

    /// Normal shutdown notification, waiting up to `timeout_ms` for it to complete.
    fn shutdown(&self, timeout_ms: u32) -> Result {
        self.bar
            .update(regs::CC, |cc| cc.with_const_shn::<{ regs::SHN_NORMAL }>());
        if self.poll_csts(timeout_ms, |c| c.shst() == regs::SHST_COMPLETE)? {
            return Ok(());
        }
        dev_warn!(
            self.dev(),
            "shutdown did not complete within {} ms\n",
            timeout_ms
        );
        Err(ETIMEDOUT)
    }

    /// Disables the controller, points it at the admin queue and enables it again.
    fn enable(&self, admin: &AdminQueue<'_>) -> Result {
        self.disable()?;
        admin.q.reset();
        const AQ_SIZE: u32 = ADMIN_DEPTH as u32 - 1;
        self.bar.write_reg(
            regs::AQA::zeroed()
                .with_const_acqs::<AQ_SIZE>()
                .with_const_asqs::<AQ_SIZE>(),
        );
        let (sq, cq) = (admin.q.sq_dma(), admin.q.cq_dma());
        self.bar
            .write_reg(regs::ASQ_LO::zeroed().with_value(sq as u32));
        self.bar
            .write_reg(regs::ASQ_HI::zeroed().with_value((sq >> 32) as u32));
        self.bar
            .write_reg(regs::ACQ_LO::zeroed().with_value(cq as u32));
        self.bar
            .write_reg(regs::ACQ_HI::zeroed().with_value((cq >> 32) as u32));
        // 4 KiB pages, round robin, 64-byte SQEs and 16-byte CQEs; written disabled first.
        let cc = regs::CC::zeroed()
            .with_const_mps::<0>()
            .with_const_ams::<0>()
            .with_const_iosqes::<6>()
            .with_const_iocqes::<4>();
        let cc = if self.bar.read(regs::CAP_HI).css().get() & regs::CAP_CSS_CSI != 0 {
            cc.with_const_css::<{ regs::CC_CSS_CSI }>()
        } else {
            cc.with_const_css::<{ regs::CC_CSS_NVM }>()
        };
        self.bar.write_reg(cc);
        self.bar.write_reg(cc.with_en(true));
        self.wait_ready(true)
    }
}

/// A namespace's disk and what its requests need to know.
pub(crate) struct NsInfo {
    pub(crate) nsid: u32,
    /// log2 of the logical block size.
    pub(crate) lba_shift: u8,
}

struct Namespace<'b> {
    /// Removed before `info`, which its queue's `queuedata` points to.
    disk: Disk<NvmeOps<'b>>,
    _info: KBox<NsInfo>,
}

/// The I/O queues: interrupt-driven ones first, then poll queues; queue `qid` serves
/// hardware context `qid - 1`.
pub(crate) struct IoSet<'b> {
    queues: KVec<Pin<KBox<IoQueue<'b>>>>,
    irq_queues: u32,
    poll_queues: u32,
    pdev: &'b pci::Device<Bound>,
}

/// The driver's blk-mq operations (see `blk.rs`).
pub(crate) struct NvmeOps<'b>(PhantomData<&'b ()>);

impl<'b> blk::Operations for NvmeOps<'b> {
    type Pdu = Iod;
    type HwQueue = IoQueue<'b>;
    type Disk = NsInfo;
    type Owner = IoSet<'b>;

    fn hw_queue<'a>(owner: &'a IoSet<'b>, index: u32) -> &'a IoQueue<'b> {
        &owner.queues[index as usize]
    }

    fn tags<'a>(hwq: &'a IoQueue<'b>) -> &'a blk::QueueTags {
        &hwq.tags
    }

    fn map_queues(owner: &IoSet<'b>, maps: &mut QueueMaps<'_>) {
        let dev = owner.pdev.as_ref();
        // Vector 0 is the admin queue's: I/O queue N uses vector N.
        maps.map(MapType::Default, 0, owner.irq_queues, dev, Some(1));
        maps.map(
            MapType::Poll,
            owner.irq_queues,
            owner.poll_queues,
            dev,
            None,
        );
    }

    fn queue_rq(
        hwq: &IoQueue<'b>,
        ns: &NsInfo,
        rq: Request<Self>,
        last: bool,
    ) -> Result<(), Rejected> {
        hwq.queue_rq(ns, rq, last)
    }

    fn commit_rqs(hwq: &IoQueue<'b>) {
        hwq.q.commit();
    }

    fn complete(hwq: &IoQueue<'b>, rq: Request<Self>) {
        hwq.finish(rq);
    }

    fn release(hwq: &IoQueue<'b>, iod: &mut Iod) {
        hwq.release(iod);
    }

    fn poll(hwq: &IoQueue<'b>) -> u32 {
        hwq.poll()
    }
}

/// The debugfs directory of a controller, one file per I/O queue.
struct StatsFiles {
    _files: KVec<Pin<KBox<debugfs::File<Arc<QueueStats>>>>>,
    _dir: debugfs::Dir,
}

fn show_stats(stats: &Arc<QueueStats>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    stats.show(f)
}

impl StatsFiles {
    fn new(root: &debugfs::Dir, name: &CStr, io: &IoSet<'_>) -> Result<Self> {
        let dir = root.subdir(name);
        let mut files = KVec::new();
        for q in io.queues.iter() {
            let file_name = CString::try_from_fmt(fmt!("q{}", q.q.qid))?;
            let file = KBox::pin_init(
                dir.read_callback_file(&file_name, q.stats.clone(), &show_stats),
                GFP_KERNEL,
            )?;
            files.push(file, GFP_KERNEL)?;
        }
        Ok(Self {
            _files: files,
            _dir: dir,
        })
    }
}

/// Everything the controller owns once probe is done. Fields drop in order: disks, then the
/// tag set they use, the queues (and their interrupt lines), the admin queue, the vectors,
/// and last the registers.
#[pin_data]
pub(crate) struct Core<'b> {
    #[pin]
    namespaces: Mutex<KVec<Namespace<'b>>>,
    _stats: Option<StatsFiles>,
    tagset: Pin<KBox<TagSet<NvmeOps<'b>>>>,
    io: KBox<IoSet<'b>>,
    admin: Pin<KBox<AdminQueue<'b>>>,
    _vectors: IrqVectors<'b>,
    shared: Arc<Shared<'b>>,
    /// From RTD3E, bounded.
    shutdown_timeout_ms: u32,
}

/// Name of controller `instance`'s interrupt for queue `qid`, as /proc/interrupts shows it.
fn irq_name(instance: u32, qid: u16) -> Result<CString> {
    CString::try_from_fmt(fmt!("{}q{}", CtrlName(instance), qid))
}

/// The MSI-X vector of I/O queue `qid`: queue N has vector N; poll queues (after the
/// `irq_queues` interrupt-driven ones) have none.
fn queue_vector(qid: u16, irq_queues: u32) -> Option<u16> {
    (u32::from(qid) <= irq_queues).then_some(qid)
}

/// Turns an admin command's NVMe error status into an errno, logging what failed.
fn admin_ok<T>(
    dev: &kernel::device::Device<Bound>,
    what: &str,
    r: Result<T, AdminError>,
) -> Result<T> {
    r.map_err(|e| {
        if let AdminError::Status(s) = &e {
            dev_err!(dev, "{} failed with status {:#x}\n", what, s.0);
        }
        e.into()
    })
}

impl<'b> Core<'b> {
    /// Brings the controller up: registers, admin queue, Identify, I/O queues with their
    /// vectors, tag set, namespaces. On failure everything is undone and the controller left
    /// disabled.
    fn probe(pdev: &'b pci::Device<CoreCtx<'_>>) -> Result<Pin<KBox<Self>>> {
        if pdev.pci_class() != pci::Class::STORAGE_EXPRESS {
            dev_err!(
                pdev,
                "not an NVMe controller (class {})\n",
                pdev.pci_class()
            );
            return Err(ENODEV);
        }
        pdev.enable_device_mem()?;
        pdev.set_master();
        // SAFETY: nothing maps or allocates DMA memory for this device yet.
        unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>())? };
        let pdev: &'b pci::Device<Bound> = pdev;
        set_min_align_mask(pdev.as_ref(), cmd::PAGE_SIZE as u32 - 1);

        let bar = pdev.iomap_region_sized::<{ regs::BAR0_MIN_SIZE }>(0, c"nvme_adaptive")?;
        let csts = bar.read(regs::CSTS).into_raw();
        if csts == regs::DEVICE_GONE {
            dev_err!(pdev, "controller does not respond (CSTS reads all ones)\n");
            return Err(ENODEV);
        }
        let cap_lo = bar.read(regs::CAP_LO);
        let cap_hi = bar.read(regs::CAP_HI);
        let vs = bar.read(regs::VS);
        let cap = u64::from(cap_hi.into_raw()) << 32 | u64::from(cap_lo.into_raw());
        dev_info!(
            pdev,
            "cap {:#x}: mqes {} dstrd {} to {} css {:#x} mpsmin {} mpsmax {}; version {}.{}.{}; csts {:#x}\n",
            cap, cap_lo.mqes().get(), cap_hi.dstrd().get(), cap_lo.to().get(), cap_hi.css().get(),
            cap_hi.mpsmin().get(), cap_hi.mpsmax().get(), vs.major().get(), vs.minor().get(),
            vs.tertiary().get(), csts
        );
        if cap_hi.mpsmin().get() != 0 {
            dev_err!(pdev, "controller does not support 4 KiB memory pages\n");
            return Err(ENODEV);
        }
        let depth = (cap_lo.mqes().get() + 1)
            .min(params::get(driver::IO_QUEUE_DEPTH))
            .max(2) as u16;

        let instance = alloc_instance()?;
        let shared = Arc::new(
            Shared {
                pdev,
                doorbell_stride: 4 << cap_hi.dstrd().get(),
                pool: DmaPool::new(pdev.as_ref(), c"nvme_adaptive_prp")?,
                instance,
                state: Atomic::new(State::Live as u32),
                // CAP.TO is in 500 ms units; 0 would mean "no time at all", take 500 ms.
                ready_timeout_ms: (cap_lo.to().get().max(1)) * 500,
                bar,
            },
            GFP_KERNEL,
        )
        .inspect_err(|_| free_instance(instance))?;
        let dev = shared.dev();

        let admin = KBox::pin_init(AdminQueue::new(shared.clone()), GFP_KERNEL)?;
        // From here on, a failure must leave the controller disabled before memory it may
        // write to is freed: locals drop in reverse order, so this guard runs first.
        let disable_on_error = kernel::types::ScopeGuard::new_with_data(shared.clone(), |s| {
            let _ = s.disable();
        });
        shared.enable(&admin)?;

        // Vector 0 serves the admin queue.
        let request_admin_line = |vectors: &IrqVectors<'_>| -> Result {
            // SAFETY: `admin` is pinned and outlives the line: the line is replaced, or
            // dropped with the admin queue (`set_line` keeps it inside).
            let line = unsafe {
                IrqLine::request(vectors.irq(0)?, irq_name(instance, 0)?, &*admin, false)?
            };
            admin.set_line(Some(line));
            Ok(())
        };
        // One vector for the admin queue until we know how many I/O queues we get.
        let vectors = IrqVectors::alloc(pdev, 1, 1, false)?;
        request_admin_line(&vectors)?;

        let id = admin_ok(
            dev,
            "Identify Controller",
            admin.identify(CNS_CONTROLLER, 0, IdController::parse),
        )?;
        if !id.entry_sizes_supported() {
            dev_err!(
                dev,
                "controller does not take 64-byte SQ and 16-byte CQ entries\n"
            );
            return Err(ENODEV);
        }

        // Queues: one interrupt-driven queue per possible CPU, plus poll queues.
        // SAFETY: plain query of the CPU topology.
        let cpus = unsafe { bindings::blk_mq_num_possible_queues(0) };
        let wanted_poll = params::get(driver::POLL_QUEUES);
        let granted = set_queue_count(&admin, cpus + wanted_poll)?;
        // At least one queue keeps interrupts.
        let poll_queues = wanted_poll.min(granted - 1);
        let irq_wanted = (granted - poll_queues).min(cpus);

        admin.set_line(None);
        drop(vectors);
        let vectors = IrqVectors::alloc(pdev, 2, 1 + irq_wanted, true).inspect_err(|_| {
            dev_err!(
                dev,
                "needs MSI-X with at least two vectors (admin and one I/O queue)\n"
            )
        })?;
        let irq_queues = vectors.count() - 1;
        request_admin_line(&vectors)?;

        let mut queues = KVec::with_capacity((irq_queues + poll_queues) as usize, GFP_KERNEL)?;
        for qid in 1..=(irq_queues + poll_queues) as u16 {
            let q = KBox::pin_init(IoQueue::new(shared.clone(), qid, depth), GFP_KERNEL)?;
            let vector = queue_vector(qid, irq_queues);
            q.stats.has_vector.set(vector.is_some().into());
            create_io_queue(&admin, &q, vector)?;
            if let Some(v) = vector {
                // SAFETY: the queue is pinned in its box, which the controller keeps until
                // after the line is freed (the line lives inside the queue).
                let line = unsafe {
                    IrqLine::request(vectors.irq(v.into())?, irq_name(instance, qid)?, &*q, true)?
                };
                q.irq.populate(line);
            }
            queues.push(q, GFP_KERNEL)?;
        }
        let io = KBox::new(
            IoSet {
                queues,
                irq_queues,
                poll_queues,
                pdev,
            },
            GFP_KERNEL,
        )?;
        let config = TagSetConfig {
            irq_queues,
            poll_queues,
            // One entry of each ring stays free.
            depth: u32::from(depth) - 1,
        };
        // SAFETY: `io` is boxed (stable address) and the core drops the tag set before it.
        let tagset = KBox::pin_init(unsafe { TagSet::new(&*io, config) }, GFP_KERNEL)?;

        let name = CString::try_from_fmt(fmt!("{}", CtrlName(instance)))?;
        dev_info!(
            dev,
            "{}: {} ({:04x}), {} I/O queues + {} poll queues of depth {}, {} namespaces\n",
            &*name,
            id.model(),
            id.vid,
            irq_queues,
            poll_queues,
            depth,
            id.nn
        );
        let limits = disk_limits(&id, poll_queues > 0);
        let namespaces = scan_namespaces(&admin, &tagset, &shared, &id, vs.into_raw(), limits)?;
        let stats = crate::debugfs_root()
            .map(|root| StatsFiles::new(root, &name, &io))
            .transpose()?;

        disable_on_error.dismiss();
        KBox::pin_init(
            try_pin_init!(Self {
                namespaces <- new_mutex!(namespaces),
                _stats: stats,
                tagset,
                io,
                admin,
                _vectors: vectors,
                shared,
                shutdown_timeout_ms: (id.rtd3e / 1000).clamp(SHUTDOWN_TIMEOUT_MIN_MS, SHUTDOWN_TIMEOUT_MAX_MS),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Whether a command has been on the device longer than `io_timeout`.
    fn any_timed_out(&self) -> bool {
        let timeout = msecs_to_jiffies(params::get(driver::IO_TIMEOUT).saturating_mul(1000)) as u64;
        let now = jiffies();
        let mut late = false;
        self.tagset.for_each_busy(|iod| {
            late |= now.wrapping_sub(iod.submitted.load(Relaxed)) > timeout;
        });
        late
    }

    /// Reaps whatever every I/O queue's CQ holds.
    fn reap_all(&self) {
        for q in self.io.queues.iter() {
            let mut batch = CompletionBatch::new();
            let mut cq = q.q.lock_cq();
            q.reap(&mut cq, &mut batch);
        }
    }

    /// The watchdog: a failed or vanished controller, or a command the device did not
    /// complete within `io_timeout`, gets the controller reset (or given up on).
    fn check_health(&self) {
        let dev = self.shared.dev();
        if self.shared.is_dead() {
            return;
        }
        if let Err(e) = self.shared.check_alive() {
            if e == ENODEV {
                dev_err!(dev, "controller is gone (registers read all ones)\n");
                self.kill();
            } else {
                dev_err!(dev, "controller reports a fatal error (CSTS.CFS)\n");
                self.reset_or_kill();
            }
            return;
        }
        if !self.any_timed_out() {
            return;
        }
        // A lost interrupt? The commands may be done already.
        self.reap_all();
        if !self.any_timed_out() {
            dev_warn!(dev, "completions found by polling: an interrupt was lost\n");
            return;
        }
        dev_warn!(
            dev,
            "I/O timeout ({} s): commands did not complete\n",
            params::get(driver::IO_TIMEOUT)
        );
        if self.shared.state() == State::Deleting {
            self.kill();
        } else {
            self.reset_or_kill();
        }
    }

    /// No new `queue_rq`, no polling: every queue on its (unmasked) vector.
    fn stop_io(&self) {
        self.tagset.quiesce();
        for q in self.io.queues.iter() {
            q.stop_polling();
        }
    }

    /// Stops every path into the device: no `queue_rq`, no polling, controller disabled, and
    /// completions it posted before that reaped.
    fn quiesce_and_disable(&self) {
        self.stop_io();
        let _ = self.shared.disable();
        self.reap_all();
    }

    /// Cancels the commands still on the device: retried after a reset, failed if dead.
    fn cancel_inflight(&self) {
        self.tagset.cancel_busy(|q, rq| q.cancel(rq));
    }

    /// Resets the controller: its commands are cancelled (and retried), then the same queues
    /// are created again. If the controller does not come back, it is given up on.
    fn reset_or_kill(&self) {
        let dev = self.shared.dev();
        dev_warn!(dev, "resetting controller\n");
        self.shared.set_state(State::Resetting);
        self.quiesce_and_disable();
        self.cancel_inflight();
        match self.restart() {
            Ok(()) => {
                self.shared.set_state(State::Live);
                self.tagset.unquiesce();
                dev_info!(dev, "controller reset done\n");
            }
            Err(e) => {
                dev_err!(dev, "reset failed ({:?}): giving up on the controller\n", e);
                self.give_up();
            }
        }
    }

    /// Enables the disabled controller again with the same I/O queues.
    fn restart(&self) -> Result {
        self.shared.enable(&self.admin)?;
        let wanted = self.io.queues.len() as u32;
        if set_queue_count(&self.admin, wanted)? < wanted {
            dev_err!(
                self.shared.dev(),
                "controller grants fewer queues after the reset\n"
            );
            return Err(ENODEV);
        }
        for q in self.io.queues.iter() {
            let vector = queue_vector(q.q.qid, self.io.irq_queues);
            create_io_queue(&self.admin, q, vector)?;
            q.resume_polling();
        }
        Ok(())
    }

    /// Gives up on the controller: every command in flight and every new one fails.
    fn kill(&self) {
        self.shared.set_state(State::Dead);
        self.quiesce_and_disable();
        self.give_up();
    }

    /// With the queues quiesced (once) and the controller disabled: fails what is in flight,
    /// marks the disks dead and lets the queues run again, so that new requests fail in
    /// `queue_rq` (and requests a reset had set aside for retry fail there too).
    fn give_up(&self) {
        self.shared.set_state(State::Dead);
        self.cancel_inflight();
        for ns in self.namespaces.lock().iter() {
            ns.disk.mark_dead();
        }
        self.tagset.unquiesce();
    }

    /// Orderly end (unbind, shutdown): I/O queues deleted, shutdown notification, nothing left
    /// on the device.
    /// Returns whether the controller completed the shutdown notification.
    fn disable_io(&self) -> bool {
        self.stop_io();
        let mut shut_down = false;
        if !self.shared.is_dead() && self.shared.check_alive().is_ok() {
            // Submission queues first: a CQ can only be deleted once no SQ uses it.
            for sq in [true, false] {
                for q in self.io.queues.iter() {
                    let _ = self.admin.execute(Command::delete_queue(sq, q.q.qid));
                }
            }
            shut_down = self.shared.shutdown(self.shutdown_timeout_ms).is_ok();
        }
        self.shared.set_state(State::Dead);
        self.reap_all();
        self.cancel_inflight();
        self.tagset.unquiesce();
        shut_down
    }

    /// Removal: the disks first (their removal waits for I/O in flight, while the watchdog
    /// still guards against a stuck command), then the watchdog, then the queues.
    fn remove(&self, health: &HealthWork) {
        let dev = self.shared.dev();
        let pdev = crate::raw::pdev(self.shared.pdev);
        // SAFETY: `pdev` is a bound PCI device.
        let present = unsafe { bindings::pci_device_is_present(pdev) };
        if !present {
            dev_warn!(dev, "controller is gone: failing its I/O\n");
            health.stop();
            self.kill();
        } else if !self.shared.is_dead() {
            self.shared.set_state(State::Deleting);
        }
        let disks = core::mem::take(&mut *self.namespaces.lock());
        drop(disks);
        health.stop();
        self.disable_io();
    }
}

/// Set Features "Number of Queues": asks for `count` I/O queue pairs, returns how many the
/// controller grants.
fn set_queue_count(admin: &AdminQueue<'_>, count: u32) -> Result<u32> {
    let n = count.clamp(1, 65535) - 1;
    let dev = admin.q.shared.dev();
    let result = admin_ok(
        dev,
        "Set Features (number of queues)",
        admin.execute(Command::set_features(FEAT_NUM_QUEUES, n | n << 16)),
    )?;
    let granted = (result & 0xffff).min(result >> 16) + 1;
    Ok(granted.min(count))
}

/// Creates I/O queue `q` on the controller: its CQ (with `vector`, or polled), then its SQ.
fn create_io_queue(admin: &AdminQueue<'_>, q: &IoQueue<'_>, vector: Option<u16>) -> Result {
    let dev = admin.q.shared.dev();
    q.q.reset();
    let (qid, depth) = (q.q.qid, q.q.depth());
    admin_ok(
        dev,
        "Create I/O Completion Queue",
        admin.execute(Command::create_cq(qid, depth, q.q.cq_dma(), vector)),
    )?;
    if let Err(e) = admin.execute(Command::create_sq(qid, depth, q.q.sq_dma())) {
        let _ = admin.execute(Command::delete_queue(false, qid));
        return admin_ok(dev, "Create I/O Submission Queue", Err(e));
    }
    Ok(())
}

/// Queue limits common to every namespace of the controller.
fn disk_limits(id: &IdController, poll: bool) -> Limits {
    let mdts = if id.mdts == 0 || id.mdts > 20 {
        u32::MAX
    } else {
        (cmd::PAGE_SIZE as u32) << id.mdts
    };
    Limits {
        max_hw_sectors: mdts.min(MAX_TRANSFER_BYTES) >> 9,
        max_segments: MAX_SEGMENTS,
        // PRPs: only the first segment may start, and only the last end, inside a page.
        virt_boundary_mask: cmd::PAGE_SIZE as u64 - 1,
        dma_alignment: 3,
        write_cache: id.volatile_write_cache(),
        fua: id.volatile_write_cache(),
        poll,
        ..Limits::default()
    }
}

/// Finds the active namespaces and adds a disk for each one the driver can serve.
fn scan_namespaces<'b>(
    admin: &AdminQueue<'b>,
    tagset: &TagSet<NvmeOps<'b>>,
    shared: &Shared<'b>,
    id: &IdController,
    version: u32,
    limits: Limits,
) -> Result<KVec<Namespace<'b>>> {
    let dev = shared.dev();
    let mut nsids = KVec::new();
    if version >= 0x1_0100 {
        // Identify's list holds up to 1024 namespaces, plenty for a PCIe device.
        let list = admin_ok(
            dev,
            "Identify active namespaces",
            admin.identify(CNS_ACTIVE_NS_LIST, 0, |b| {
                let mut v = KVec::new();
                for nsid in cmd::active_namespaces(b) {
                    v.push(nsid, GFP_KERNEL)?;
                }
                Ok::<_, Error>(v)
            }),
        )?;
        nsids = list?;
    } else {
        for nsid in 1..=id.nn.min(1024) {
            nsids.push(nsid, GFP_KERNEL)?;
        }
    }
    let mut namespaces = KVec::new();
    for nsid in nsids {
        let ns = match admin.identify(CNS_NAMESPACE, nsid, IdNamespace::parse) {
            Ok(ns) => ns,
            Err(AdminError::Status(s)) => {
                dev_warn!(
                    dev,
                    "namespace {}: Identify failed with status {:#x}, skipped\n",
                    nsid,
                    s.0
                );
                continue;
            }
            Err(AdminError::Failed(e)) => return Err(e),
        };
        if ns.ncap == 0 {
            continue;
        }
        if ns.metadata_size != 0 {
            dev_warn!(dev, "namespace {}: skipped: its format has {} bytes of metadata per block, which this driver does not handle\n", nsid, ns.metadata_size);
            continue;
        }
        if !(9..=12).contains(&ns.lba_shift) {
            dev_warn!(
                dev,
                "namespace {}: skipped: {}-byte blocks (512 to 4096 supported)\n",
                nsid,
                1u64 << ns.lba_shift.min(63)
            );
            continue;
        }
        let Some(sectors) = ns.nsze.checked_mul(1 << (ns.lba_shift - 9)) else {
            dev_warn!(dev, "namespace {}: skipped: capacity overflows\n", nsid);
            continue;
        };
        let info = KBox::new(
            NsInfo {
                nsid,
                lba_shift: ns.lba_shift,
            },
            GFP_KERNEL,
        )?;
        let block = 1u32 << ns.lba_shift;
        let mut lim = limits;
        lim.logical_block_size = block;
        lim.physical_block_size = block;
        if id.oncs & IdController::ONCS_DSM != 0 {
            lim.max_discard_sectors = u32::MAX >> 9;
            lim.discard_granularity = block;
        }
        if id.oncs & IdController::ONCS_WRITE_ZEROES != 0 {
            // Write Zeroes counts blocks in 16 bits.
            lim.max_write_zeroes_sectors =
                (0x1_0000u32 << (ns.lba_shift - 9)).min(lim.max_hw_sectors);
        }
        // SAFETY: `info` is boxed and dropped after the disk (field order of `Namespace`).
        let disk = unsafe {
            Disk::new(
                tagset,
                lim,
                &*info,
                fmt!("{}n{}", CtrlName(shared.instance), nsid),
                sectors,
                ns.read_only,
                dev,
            )?
        };
        dev_info!(
            dev,
            "{}: {} sectors of {} bytes{}{}\n",
            disk.name(),
            sectors,
            block,
            if ns.read_only { ", read-only" } else { "" },
            if ns.deallocated_reads_zero {
                ", discarded blocks read as zeroes"
            } else {
                ""
            }
        );
        namespaces.push(Namespace { disk, _info: info }, GFP_KERNEL)?;
    }
    Ok(namespaces)
}

/// The watchdog as a delayed work item, re-armed each period until stopped.
#[pin_data]
pub(crate) struct HealthWork {
    #[pin]
    work: DelayedWork<HealthWork>,
    /// The controller, its lifetime erased: `stop` waits for the work to be done for good
    /// before the controller goes.
    core: NonNull<Core<'static>>,
    stopped: Atomic<bool>,
}

// SAFETY: the work only reaches the controller through `&Core`, which is `Sync`; `stop`
// guarantees it never runs after the controller is gone.
unsafe impl Send for HealthWork {}
// SAFETY: as above.
unsafe impl Sync for HealthWork {}

kernel::impl_has_delayed_work! {
    impl HasDelayedWork<Self> for HealthWork { self.work }
}

impl WorkItem for HealthWork {
    type Pointer = Arc<HealthWork>;

    fn run(this: Arc<HealthWork>) {
        if this.stopped.load(Acquire) {
            return;
        }
        // SAFETY: not stopped, so the controller exists: `stop` sets `stopped` and waits for
        // this function to return before the controller is dropped.
        unsafe { this.core.as_ref() }.check_health();
        if !this.stopped.load(Acquire) {
            let _ = workqueue::system().enqueue_delayed(this, msecs_to_jiffies(HEALTH_PERIOD_MS));
        }
    }
}

impl HealthWork {
    fn start(core: &Core<'_>) -> Result<Arc<Self>> {
        let work = Arc::pin_init(
            pin_init!(Self {
                work <- kernel::new_delayed_work!("nvme_adaptive_health"),
                core: NonNull::from(core).cast(),
                stopped: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        let _ =
            workqueue::system().enqueue_delayed(work.clone(), msecs_to_jiffies(HEALTH_PERIOD_MS));
        Ok(work)
    }

    /// Stops the watchdog and waits for a running check to finish. Idempotent.
    fn stop(&self) {
        self.stopped.store(true, Release);
        // SAFETY: `work` is an initialised delayed work; `DelayedWork::raw_as_work` gives its
        // embedded `work_struct`, the first field of the C `struct delayed_work`.
        let was_pending = unsafe {
            let work = DelayedWork::raw_as_work(&raw const self.work);
            let dwork =
                kernel::container_of!(workqueue::Work::raw_get(work), bindings::delayed_work, work);
            bindings::cancel_delayed_work_sync(dwork)
        };
        if was_pending {
            // The queue held a reference, taken by `Arc::into_raw` on this very object when the
            // work was enqueued; the work will not run, so the reference is ours to drop. The
            // caller's own reference keeps the object alive.
            // SAFETY: as just said, this is that pointer and the reference it stands for.
            drop(unsafe { Arc::from_raw(core::ptr::from_ref(self)) });
        }
    }
}

/// The driver data of a bound controller. Fields drop in order: the device is disabled last.
pub(crate) struct Controller<'b> {
    core: Pin<KBox<Core<'b>>>,
    health: Arc<HealthWork>,
    _disable: DisableOnDrop<'b>,
}

impl<'b> Controller<'b> {
    pub(crate) fn probe(pdev: &'b pci::Device<CoreCtx<'_>>) -> Result<Self> {
        let core = Core::probe(pdev).inspect_err(|_| disable_device(pdev))?;
        let health = HealthWork::start(&core)?;
        Ok(Self {
            core,
            health,
            _disable: DisableOnDrop(pdev),
        })
    }

    /// Unbind: disks removed (waiting for their I/O), queues deleted, controller shut down.
    pub(crate) fn unbind(&self) {
        self.core.remove(&self.health);
    }

    /// System shutdown or reboot: the controller is told to shut down, I/O stops. One line says
    /// when the controller confirms it (the shutdown suite of the tests waits for it).
    pub(crate) fn shutdown(&self) {
        self.health.stop();
        if self.core.disable_io() {
            let shared = &self.core.shared;
            dev_info!(shared.dev(), "{}: shut down\n", CtrlName(shared.instance));
        }
    }
}

impl Drop for Controller<'_> {
    fn drop(&mut self) {
        // Normally stopped in unbind already.
        self.health.stop();
    }
}

/// Bus mastering off and the device disabled, after everything else is released.
fn disable_device(pdev: &pci::Device<Bound>) {
    // SAFETY: `pdev` is bound; the driver no longer uses the device.
    unsafe {
        bindings::pci_clear_master(crate::raw::pdev(pdev));
        bindings::pci_disable_device(crate::raw::pdev(pdev));
    }
}

/// Disables the device once the controller data is gone.
struct DisableOnDrop<'b>(&'b pci::Device<Bound>);

impl Drop for DisableOnDrop<'_> {
    fn drop(&mut self) {
        disable_device(self.0);
    }
}
