//! A queue model: a device completing requests after its service latency, an MSI-X vector that
//! can be masked (its pending bit replayed on unmask), a poll timer that fires late, one CPU
//! shared by the interrupt handler, the poll timer and the application, and a workload. It
//! drives the real `policy.rs` exactly as the driver does (`irq.rs`, `hrtimer.rs`) and measures
//! what comes out.
//!
//! The CPU runs as a host's does: an interrupt or a timer expiry preempts the application, runs
//! to its end (reaping the CQ) and is never preempted itself; the application handles what was
//! reaped afterwards, in batches (io_uring hands it every completion posted so far), and only
//! then resubmits. So a closed loop whose CPU is saturated does not batch its interrupts by
//! itself: each one preempts the application as soon as a completion is posted.

use crate::policy::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub(crate) const US: u64 = 1_000;
pub(crate) const MS: u64 = 1_000_000;

/// What the host pays, and how late its timers are. `hardware()`, `fast()` and `emulator()`
/// give the profiles the evaluation uses; Documentation/nvme-adaptive/design.rst cites their
/// sources.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Costs {
    pub(crate) name: &'static str,
    /// From the CQE write to the interrupt handler's first instruction.
    pub(crate) irq_delivery_ns: u64,
    /// CPU time of one interrupt (entry, handler, exit) without its completions.
    pub(crate) irq_ns: u64,
    /// CPU time of one poll timer expiry without its completions.
    pub(crate) timer_ns: u64,
    /// CPU time per completion in the handler or timer: reaping the CQE, ending the request.
    pub(crate) reap_ns: u64,
    /// CPU time per completion in the application: taking the completion, submitting the next
    /// request. Interrupts and timer expiries preempt it.
    pub(crate) app_ns: u64,
    /// CPU time of masking and, later, unmasking the vector (one poll episode).
    pub(crate) mask_ns: u64,
    /// How late the poll timer fires on average; each expiry varies by +-50 %.
    pub(crate) slack_ns: u64,
}

impl Costs {
    /// A bare-metal x86 server with a PCIe 4 NVMe SSD: about 1.5 us for an interrupt or a
    /// timer expiry in hard-IRQ context, a PCIe read round trip (~1 us) to mask, ~0.5 us per
    /// I/O for the block layer and io_uring (0.2 in the handler, 0.3 in the application), and a
    /// busy CPU's hrtimer firing a few microseconds late.
    pub(crate) const fn hardware() -> Self {
        Self {
            name: "hardware",
            irq_delivery_ns: US,
            irq_ns: 1_500,
            timer_ns: 1_500,
            reap_ns: 200,
            app_ns: 300,
            mask_ns: 1_500,
            slack_ns: 3 * US,
        }
    }

    /// The prior art's device (adaptive-polling-prior-art.md, 1.2): a PCIe 5 SSD of which one
    /// polled core reaches about 3.2 M 4 KiB IOPS (0.31 us of CPU per I/O), where interrupts
    /// reach 44 % of that. Its interrupts cost about 3 us each in all (the RFC's 569 K IOPS at
    /// 0.52 interrupts per I/O): here they reach 1.48 M IOPS (46 %) at QD 128, each reaping
    /// about eight completions.
    pub(crate) const fn fast() -> Self {
        Self {
            name: "fast",
            irq_delivery_ns: 500,
            irq_ns: 3_000,
            timer_ns: 3_000,
            reap_ns: 100,
            app_ns: 210,
            mask_ns: 1_000,
            slack_ns: US,
        }
    }

    /// QEMU TCG on this project's 2-core CI machine, measured on the emulated controller with
    /// fio: ~60 us of guest CPU per I/O at QD 1 (one interrupt each) and ~25 us at QD 128 (one
    /// interrupt per 4.6 I/Os) give ~45 us per interrupt and ~15 us per completion (a third of
    /// it in the handler); the driver's `slack_ns` (the timer's mean lateness) measured from
    /// under 1 us to 135 us across the cells of a `tools/bench` grid, so 50 us.
    pub(crate) const fn emulator() -> Self {
        Self {
            name: "emulator",
            irq_delivery_ns: 20 * US,
            irq_ns: 45 * US,
            timer_ns: 45 * US,
            reap_ns: 5 * US,
            app_ns: 10 * US,
            mask_ns: 10 * US,
            slack_ns: 50 * US,
        }
    }

    /// CPU time per I/O on interrupts that each reap one completion: the most a load can ask
    /// of interrupts alone without saturating the CPU.
    pub(crate) const fn per_interrupted_io(&self) -> u64 {
        self.irq_ns + self.reap_ns + self.app_ns
    }
}

/// What drives submissions during one phase of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drive {
    /// Nothing is submitted.
    Idle,
    /// A closed loop: the application resubmits every completion it handled, `qd` stay
    /// outstanding.
    Closed { qd: u32 },
    /// An open loop: `qd` requests at once every `period`, whether or not the last burst
    /// completed (at most `qd` outstanding).
    Bursts { qd: u32, period: u64 },
    /// An open loop: independent arrivals about `gap` apart (+-50 %), at most `cap` outstanding.
    Open { gap: u64, cap: u32 },
}

/// `drive` until `until` (ns), then the next phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    pub(crate) until: u64,
    pub(crate) drive: Drive,
}

/// What happens next, in time order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    /// A request submitted at the time given completes in the device (posts a CQE).
    Complete(u64),
    /// The interrupt handler is due.
    Irq,
    /// The poll timer is due; the id tells a live arming from a cancelled one.
    Timer(u64),
    /// The application finishes the batch it is handling; the id tells the current finish
    /// time from one a preemption pushed back.
    AppDone(u64),
    /// An open-loop arrival, or the next burst.
    Arrival,
    /// The phase with this index begins.
    PhaseStart(usize),
}

#[derive(Default, Debug, Clone)]
pub(crate) struct Outcome {
    /// Requests the application saw complete.
    pub(crate) completions: u64,
    pub(crate) irqs: u64,
    pub(crate) empty_irqs: u64,
    pub(crate) timer_expiries: u64,
    pub(crate) reaped_by_irq: u64,
    pub(crate) reaped_by_poll: u64,
    pub(crate) episodes: u64,
    pub(crate) endings: Vec<Ending>,
    /// Time the vector spent masked.
    pub(crate) masked_ns: u64,
    /// Sum and maximum over completions of the time from the CQE's posting to its reaping.
    pub(crate) wait_sum_ns: u64,
    pub(crate) worst_wait_ns: u64,
    /// Sum over completions of the time from submission until the application handled the
    /// completion: the latency the application sees.
    pub(crate) latency_sum_ns: u64,
    /// CPU time spent on interrupts, timer expiries, reaping and the application.
    pub(crate) cpu_ns: u64,
    /// When the last load phase ended, and when the last completion was handled.
    pub(crate) load_end_ns: u64,
    pub(crate) end_ns: u64,
}

impl Outcome {
    /// Device interrupts and timer expiries per completion: the hard interrupts polling saves.
    pub(crate) fn interrupts_per_io(&self) -> f64 {
        (self.irqs + self.timer_expiries) as f64 / self.completions.max(1) as f64
    }

    pub(crate) fn irqs_per_io(&self) -> f64 {
        self.irqs as f64 / self.completions.max(1) as f64
    }

    pub(crate) fn poll_share(&self) -> f64 {
        self.reaped_by_poll as f64 / self.completions.max(1) as f64
    }

    /// Mean latency the application saw.
    pub(crate) fn mean_latency_ns(&self) -> f64 {
        self.latency_sum_ns as f64 / self.completions.max(1) as f64
    }

    /// The latency polling added: the mean latency the application saw beyond interrupts
    /// alone's (`plain`).
    pub(crate) fn added_latency_ns(&self, plain: &Outcome) -> f64 {
        self.mean_latency_ns() - plain.mean_latency_ns()
    }

    /// The I/Os completed against interrupts alone's (`plain`) over the same load: the IOPS
    /// ratio, where the load is a closed loop that runs for a fixed time.
    pub(crate) fn iops_ratio(&self, plain: &Outcome) -> f64 {
        self.completions as f64 / plain.completions.max(1) as f64
    }

    /// The share of the load's time the CPU was busy.
    pub(crate) fn cpu_busy(&self) -> f64 {
        self.cpu_ns as f64 / self.end_ns.max(1) as f64
    }

    /// CPU time per completion.
    pub(crate) fn cpu_per_io_ns(&self) -> f64 {
        self.cpu_ns as f64 / self.completions.max(1) as f64
    }
}

/// The completion the application is handling.
struct AppRun {
    id: u64,
    done_at: u64,
    /// When its request was submitted.
    submitted: u64,
}

pub(crate) struct Model {
    p: Params,
    costs: Costs,
    latency: u64,
    /// Each request's service latency varies by this much either way.
    latency_spread_percent: u64,
    phases: Vec<Phase>,
    phase: usize,
    pol: Policy,
    events: BinaryHeap<Reverse<(u64, Kind)>>,
    /// Posting and submission time of each CQE not yet reaped.
    posted: Vec<(u64, u64)>,
    /// Commands on the device: submitted, not reaped (what the driver counts).
    inflight: u32,
    /// Submission times of reaped completions the application has not taken yet.
    app_queue: std::collections::VecDeque<u64>,
    app: Option<AppRun>,
    app_id: u64,
    masked: bool,
    masked_since: u64,
    pending: bool,
    irq_due: bool,
    /// The armed timer: its id and the time it was asked to fire.
    timer: Option<(u64, u64)>,
    timer_id: u64,
    /// When the running interrupt handler or timer expiry ends.
    handler_free: u64,
    /// Requests submitted and open-loop arrivals so far: each draws its jitter by its count.
    submitted: u64,
    arrivals: u64,
    started: bool,
    /// Instead of the policy: poll every `wait` from the first interrupt for as long as
    /// anything is in flight (what continuous polling at a fixed wait can buy).
    fixed_wait: Option<u64>,
    /// Print every decision (`trace` below).
    trace: bool,
    out: Outcome,
}

impl Model {
    pub(crate) fn new(p: Params, costs: Costs, latency: u64, phases: Vec<Phase>) -> Self {
        Self {
            p,
            costs,
            latency,
            latency_spread_percent: 25,
            phases,
            phase: 0,
            pol: Policy::new(),
            events: BinaryHeap::new(),
            posted: Vec::new(),
            inflight: 0,
            app_queue: std::collections::VecDeque::new(),
            app: None,
            app_id: 0,
            masked: false,
            masked_since: 0,
            pending: false,
            irq_due: false,
            timer: None,
            timer_id: 0,
            handler_free: 0,
            submitted: 0,
            arrivals: 0,
            started: false,
            fixed_wait: None,
            trace: false,
            out: Outcome::default(),
        }
    }

    /// Each request takes the service latency +-`percent` (25 unless set).
    pub(crate) fn with_latency_spread(mut self, percent: u64) -> Self {
        self.latency_spread_percent = percent;
        self
    }

    /// Polls at a fixed `wait` instead of asking the policy.
    pub(crate) fn with_fixed_wait(mut self, wait: u64) -> Self {
        self.fixed_wait = Some(wait);
        self
    }

    /// Prints the policy's decisions as they happen.
    pub(crate) fn traced(mut self) -> Self {
        self.trace = true;
        self
    }

    /// `around` +-`spread_percent`, the `n`-th draw of `stream`: each stream (request
    /// latencies, arrivals, timer lateness) draws by its own count, so two runs of the same load
    /// give the n-th request the same latency and the n-th arrival the same gap, whatever the
    /// policy did in between (a shared generator would make any intervention reshuffle the
    /// load, and the comparison with interrupts alone noisy).
    fn jitter(stream: u64, n: u64, around: u64, spread_percent: u64) -> u64 {
        // SplitMix64 of the stream and the count: deterministic, well mixed.
        let mut z = (stream << 56 ^ n).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let spread = around * spread_percent / 100;
        around - spread + z % (2 * spread + 1)
    }

    fn drive(&self) -> Drive {
        self.phases
            .get(self.phase)
            .map_or(Drive::Idle, |ph| ph.drive)
    }

    /// Requests the application has outstanding: on the device, in the CQ, or reaped and not
    /// yet handled.
    fn outstanding(&self) -> u32 {
        let handling = u32::from(self.app.is_some());
        self.inflight + self.app_queue.len() as u32 + handling
    }

    fn submit(&mut self, now: u64) {
        self.submitted += 1;
        let done = now + Self::jitter(1, self.submitted, self.latency, self.latency_spread_percent);
        self.inflight += 1;
        self.events.push(Reverse((done, Kind::Complete(now))));
    }

    /// Submits up to `limit` outstanding.
    fn fill(&mut self, now: u64, limit: u32) {
        while self.outstanding() < limit {
            self.submit(now);
        }
    }

    fn arrival(&mut self, now: u64) {
        match self.drive() {
            Drive::Bursts { qd, period } => {
                self.fill(now, qd);
                self.events.push(Reverse((now + period, Kind::Arrival)));
            }
            Drive::Open { gap, cap } => {
                if self.outstanding() < cap {
                    self.submit(now);
                }
                self.arrivals += 1;
                let next = now + Self::jitter(2, self.arrivals, gap, 50).max(1);
                self.events.push(Reverse((next, Kind::Arrival)));
            }
            _ => {}
        }
    }

    fn start_phase(&mut self, now: u64, index: usize) {
        self.phase = index;
        match self.drive() {
            Drive::Closed { qd } => self.fill(now, qd),
            Drive::Bursts { .. } | Drive::Open { .. } => self.arrival(now),
            Drive::Idle => {}
        }
        if index >= self.phases.len() {
            self.out.load_end_ns = now;
        }
    }

    /// Reaps every posted CQE, each timed from its submission as the driver does, and queues
    /// them for the application.
    fn reap(&mut self, now: u64) -> Reaped {
        let n = self.posted.len() as u32;
        let mut latency_sum_ns = 0;
        for (posted, submitted) in std::mem::take(&mut self.posted) {
            self.out.wait_sum_ns += now - posted;
            self.out.worst_wait_ns = self.out.worst_wait_ns.max(now - posted);
            latency_sum_ns += now - submitted;
            self.app_queue.push_back(submitted);
        }
        self.inflight -= n;
        Reaped {
            count: n,
            timed: n,
            latency_sum_ns,
        }
    }

    fn raise_irq(&mut self, now: u64) {
        if !self.irq_due {
            self.irq_due = true;
            self.events
                .push(Reverse((now + self.costs.irq_delivery_ns, Kind::Irq)));
        }
    }

    fn arm(&mut self, now: u64, wait: u64) {
        self.timer_id += 1;
        self.timer = Some((self.timer_id, now + wait));
        let fires = now + wait + Self::jitter(3, self.timer_id, self.costs.slack_ns, 50);
        self.events
            .push(Reverse((fires, Kind::Timer(self.timer_id))));
    }

    /// Runs a handler from `start` for `fixed_ns` plus the reaping of `n`: it preempts the
    /// application, which then takes what was reaped once it is free.
    fn spend(&mut self, start: u64, fixed_ns: u64, n: u32) {
        let cost = fixed_ns + u64::from(n) * self.costs.reap_ns;
        self.out.cpu_ns += cost;
        self.handler_free = start + cost;
        if let Some(app) = self.app.as_mut() {
            if app.done_at > start {
                app.done_at += cost;
                self.app_id += 1;
                app.id = self.app_id;
                self.events
                    .push(Reverse((app.done_at, Kind::AppDone(app.id))));
            }
        }
        self.start_app(self.handler_free);
    }

    /// The application takes the oldest completion waiting for it, if it is not busy: it
    /// handles completions one at a time and resubmits each as it goes (as fio does).
    fn start_app(&mut self, now: u64) {
        if self.app.is_some() || self.app_queue.is_empty() {
            return;
        }
        let submitted = self.app_queue.pop_front().unwrap();
        self.out.cpu_ns += self.costs.app_ns;
        self.app_id += 1;
        let run = AppRun {
            id: self.app_id,
            done_at: now + self.costs.app_ns,
            submitted,
        };
        self.events
            .push(Reverse((run.done_at, Kind::AppDone(run.id))));
        self.app = Some(run);
    }

    fn app_done(&mut self, now: u64, id: u64) {
        if self.app.as_ref().is_none_or(|a| a.id != id) {
            return;
        }
        let run = self.app.take().unwrap();
        self.out.latency_sum_ns += now - run.submitted;
        self.out.completions += 1;
        self.out.end_ns = now;
        if let Drive::Closed { qd } = self.drive() {
            self.fill(now, qd);
        }
        self.start_app(now);
    }

    /// Runs the model until `end` (it can be resumed with a later `end`).
    pub(crate) fn run(mut self, end: u64) -> Self {
        if !self.started {
            self.started = true;
            for i in 0..self.phases.len() {
                let at = if i == 0 { 0 } else { self.phases[i - 1].until };
                self.events.push(Reverse((at, Kind::PhaseStart(i))));
            }
            let last = self.phases.last().map_or(0, |ph| ph.until);
            self.events
                .push(Reverse((last, Kind::PhaseStart(self.phases.len()))));
        }
        while let Some(&Reverse((now, _))) = self.events.peek() {
            if now > end {
                break;
            }
            let Reverse((now, kind)) = self.events.pop().unwrap();
            // A handler waits for the one running; completions posted meanwhile are its to
            // reap.
            if matches!(kind, Kind::Irq | Kind::Timer(_)) && now < self.handler_free {
                self.events.push(Reverse((self.handler_free, kind)));
                continue;
            }
            match kind {
                Kind::PhaseStart(i) => self.start_phase(now, i),
                Kind::Arrival => self.arrival(now),
                Kind::Complete(submitted) => {
                    self.posted.push((now, submitted));
                    if self.masked {
                        self.pending = true;
                    } else {
                        self.raise_irq(now);
                    }
                }
                Kind::Irq => self.irq(now),
                Kind::Timer(id) => {
                    if let Some((armed, deadline)) = self.timer {
                        if armed == id {
                            self.expire(now, deadline);
                        }
                    }
                }
                Kind::AppDone(id) => self.app_done(now, id),
            }
        }
        self
    }

    fn irq(&mut self, now: u64) {
        self.irq_due = false;
        // A message already on its way when the vector was masked finds the line disabled:
        // the flow handler marks it pending, to be replayed on unmask.
        if self.masked {
            self.pending = true;
            return;
        }
        self.out.irqs += 1;
        let reaped = self.reap(now);
        let n = reaped.count;
        if n == 0 {
            self.out.empty_irqs += 1;
        }
        self.out.reaped_by_irq += u64::from(n);
        let mut fixed = self.costs.irq_ns;
        // As the driver's handler: a lone completion skips the rest of the policy.
        let skipped = self.pol.skip_lone_irq(n, self.inflight) && self.fixed_wait.is_none();
        let decide = |m: &mut Self| match m.fixed_wait {
            Some(wait_ns) if m.inflight > 0 => Action::StartPolling { wait_ns },
            Some(_) => Action::Stay,
            None => {
                // The CPU's idle time: everything it was not busy with so far.
                let busy = m.out.cpu_ns;
                m.pol.on_irq(now, reaped, m.inflight, &m.p, || {
                    Some(now.saturating_sub(busy))
                })
            }
        };
        let action = if skipped { Action::Stay } else { decide(self) };
        if self.trace && action != Action::Stay {
            println!(
                "   completions so far {} at {}us: mean gap {}ns",
                self.out.completions,
                now / US,
                now / self.out.completions.max(1)
            );
        }
        if self.trace && (action != Action::Stay || self.out.irqs % 500 == 0) {
            let e = self.pol.estimates();
            println!(
                "{:>10}us irq reaped {n} inflight {} -> {action:?} (gap {} depth {:.1} lat {} \
                 ref {} busy {}% per_irq {:.1} slack {})",
                now / US,
                self.inflight,
                e.gap_ns,
                e.depth_x16 as f64 / 16.0,
                e.latency_ns,
                e.ref_gap_ns,
                e.busy_percent,
                e.per_irq_x16 as f64 / 16.0,
                e.slack_ns
            );
        }
        if let Action::StartPolling { wait_ns } = action {
            assert!(
                wait_ns <= self.p.max_delay_ns,
                "wait {wait_ns} over the cap"
            );
            self.masked = true;
            self.masked_since = now;
            self.out.episodes += 1;
            fixed += self.costs.mask_ns;
            self.arm(now, wait_ns);
        }
        self.spend(now, fixed, n);
    }

    fn expire(&mut self, now: u64, deadline: u64) {
        self.out.timer_expiries += 1;
        let reaped = self.reap(now);
        let n = reaped.count;
        self.out.reaped_by_poll += u64::from(n);
        let late = now.saturating_sub(deadline);
        let action = match self.fixed_wait {
            Some(wait_ns) if n > 0 || self.inflight > 0 => Action::Rearm { wait_ns },
            Some(_) => Action::StopPolling {
                ending: Ending::Idle,
            },
            None => {
                let busy = self.out.cpu_ns;
                self.pol
                    .on_timer(now, late, reaped, self.inflight, &self.p, || {
                        Some(now.saturating_sub(busy))
                    })
            }
        };
        if self.trace
            && !matches!(action, Action::Rearm { wait_ns } if wait_ns == self.pol.wait_ns() && n > 0)
        {
            println!(
                "{:>10}us poll reaped {n} inflight {} late {late} -> {action:?} (batch {} gap {})",
                now / US,
                self.inflight,
                self.pol.batch(),
                self.pol.estimates().gap_ns
            );
        }
        match action {
            Action::Rearm { wait_ns } => {
                assert!(
                    wait_ns <= self.p.max_delay_ns,
                    "wait {wait_ns} over the cap"
                );
                self.arm(now, wait_ns);
                self.spend(now, self.costs.timer_ns, n);
            }
            Action::StopPolling { ending } => {
                self.timer = None;
                self.masked = false;
                self.out.masked_ns += now - self.masked_since;
                self.out.endings.push(ending);
                // What came while masked replays as an interrupt on unmask; the driver reaps
                // once more right after unmasking.
                if std::mem::take(&mut self.pending) {
                    self.raise_irq(now);
                }
                let m = self.reap(now).count;
                self.out.reaped_by_poll += u64::from(m);
                self.spend(now, self.costs.timer_ns, n + m);
            }
            other => panic!("on_timer returned {other:?}"),
        }
    }

    /// What a fixed-wait run gave (the policy's state means nothing there).
    pub(crate) fn settled_oracle(self) -> Outcome {
        assert!(self.posted.is_empty() && self.inflight == 0 && !self.masked);
        self.out
    }

    /// What happened so far, after checking that the run ended settled: once the load stopped,
    /// everything was reaped and handled, the vector is unmasked and the queue is not polling.
    pub(crate) fn settled(self) -> Outcome {
        assert!(
            self.posted.is_empty(),
            "{} completions stranded",
            self.posted.len()
        );
        assert_eq!(self.inflight, 0, "requests never completed");
        assert!(
            self.app.is_none() && self.app_queue.is_empty(),
            "completions never handled"
        );
        assert!(!self.masked, "vector left masked");
        assert_ne!(self.pol.stage(), Stage::Poll, "still polling an idle queue");
        self.out
    }
}

/// Runs `phases` on a device of `latency`, then long enough after the load for everything in
/// flight to drain and the queue to settle, and checks that it did.
pub(crate) fn run_settled(p: Params, costs: Costs, latency: u64, phases: &[Phase]) -> Outcome {
    let end = phases.last().map_or(0, |ph| ph.until);
    Model::new(p, costs, latency, phases.to_vec())
        .run(end + 100 * latency + 100 * MS)
        .settled()
}

/// The most IOPS continuous polling at a fixed wait gets over `phases` against interrupts
/// alone (`plain`), over waits from a microsecond to `max_wait` in steps of a quarter.
pub(crate) fn polled_ceiling(costs: Costs, latency: u64, phases: &[Phase], plain: &Outcome) -> f64 {
    let end = phases.last().map_or(0, |ph| ph.until);
    let mut best: f64 = 0.0;
    let mut wait = US;
    while wait <= 4 * latency.max(costs.slack_ns) {
        let o = Model::new(crate::defaults(), costs, latency, phases.to_vec())
            .with_fixed_wait(wait)
            .run(end + 100 * latency + 100 * MS)
            .settled_oracle();
        best = best.max(o.iops_ratio(plain));
        wait += wait / 4;
    }
    best
}

/// The phases of a closed loop of `qd` for `duration`, then idle.
pub(crate) fn steady(qd: u32, duration: u64) -> Vec<Phase> {
    vec![Phase {
        until: duration,
        drive: Drive::Closed { qd },
    }]
}

/// Interrupts alone (adaptive polling off) over the same phases.
fn plain(costs: Costs, latency: u64, phases: &[Phase]) -> Outcome {
    let off = Params {
        enabled: false,
        ..crate::defaults()
    };
    run_settled(off, costs, latency, phases)
}

#[test]
fn a_dense_open_stream_is_polled_and_returns_to_interrupts_when_the_load_stops() {
    // Arrivals about a microsecond apart that do not wait for completions, at a 100 us device.
    let phases = vec![Phase {
        until: 100 * MS,
        drive: Drive::Open { gap: US, cap: 256 },
    }];
    let o = run_settled(crate::defaults(), Costs::hardware(), 100 * US, &phases);
    let alone = plain(Costs::hardware(), 100 * US, &phases);
    assert!(o.poll_share() > 0.9, "poll share {:.3}", o.poll_share());
    assert!(o.irqs_per_io() < 0.1, "IRQ/IO {:.3}", o.irqs_per_io());
    // Within the budget: a tenth of the device's latency.
    let added = o.added_latency_ns(&alone);
    assert!(added < 10_000.0, "added {added:.0} ns");
    assert_eq!(o.endings.last(), Some(&Ending::Idle));
}

#[test]
fn a_closed_loop_paced_by_the_device_loses_at_most_the_bound() {
    // 32 in flight at a 100 us device: every microsecond a poll waits comes off the IOPS, so
    // the queue polls only as long as its loss credit lasts.
    let phases = steady(32, 100 * MS);
    let o = run_settled(crate::defaults(), Costs::hardware(), 100 * US, &phases);
    let alone = plain(Costs::hardware(), 100 * US, &phases);
    assert!(
        o.iops_ratio(&alone) >= 0.97,
        "IOPS x{:.3}",
        o.iops_ratio(&alone)
    );
    assert!(o.poll_share() > 0.1, "poll share {:.3}", o.poll_share());
    assert!(o.interrupts_per_io() < alone.interrupts_per_io());
}

#[test]
fn a_fixed_latency_device_is_not_stalled_by_its_clumps() {
    // The adaptive suite's 20 ms device (QEMU's `null-co,latency-ns`: every request takes the
    // same time, so requests submitted together complete together) under a timer firing a
    // quarter of a millisecond late. A poll often finds part of a clump and the next poll the
    // rest, which must not read as a stall or the rate collapsing.
    for qd in [16, 32] {
        let costs = Costs {
            slack_ns: 250 * US,
            ..Costs::emulator()
        };
        let phases = steady(qd, 30_000 * MS);
        let run = |p| {
            Model::new(p, costs, 20 * MS, phases.clone())
                .with_latency_spread(1)
                .run(u64::MAX)
                .settled()
        };
        let o = run(crate::defaults());
        let alone = run(Params {
            enabled: false,
            ..crate::defaults()
        });
        let stalled = o.endings.iter().filter(|e| **e == Ending::Stalled).count();
        assert_eq!(stalled, 0, "QD{qd}");
        assert!(
            o.poll_share() > 0.1,
            "QD{qd}: poll share {:.3}",
            o.poll_share()
        );
        assert!(
            o.iops_ratio(&alone) >= 0.97,
            "QD{qd}: IOPS x{:.3}",
            o.iops_ratio(&alone)
        );
    }
}

#[test]
fn interrupts_that_arrive_batched_are_left_alone() {
    // Interrupt delivery slow enough (50 us) that each interrupt finds about sixteen
    // completions: a poll within the budget could not do clearly better.
    let costs = Costs {
        irq_delivery_ns: 50 * US,
        ..Costs::hardware()
    };
    let o = Model::new(crate::defaults(), costs, 100 * US, steady(32, 100 * MS))
        .run(200 * MS)
        .settled();
    assert!(o.completions > 10_000);
    assert_eq!(o.episodes, 0);
}

#[test]
fn bursts_are_polled_and_the_vector_unmasked_between_them() {
    // Arrivals a microsecond apart for 300 us, then silence for 2 ms, 200 times.
    let mut phases = Vec::new();
    for i in 0..200u64 {
        let base = i * 2300 * US;
        phases.push(Phase {
            until: base + 300 * US,
            drive: Drive::Open { gap: US, cap: 256 },
        });
        phases.push(Phase {
            until: base + 2300 * US,
            drive: Drive::Idle,
        });
    }
    let o = Model::new(crate::defaults(), Costs::hardware(), 40 * US, phases)
        .run(600 * MS)
        .settled();
    assert!(o.episodes > 100, "episodes {}", o.episodes);
    assert!(o.poll_share() > 0.5, "poll share {:.3}", o.poll_share());
    // Masked only while the bursts run: at most their 60 ms and the polls that end them.
    assert!(o.masked_ns < 80 * MS, "masked {} ms", o.masked_ns / MS);
}

#[test]
fn adaptive_off_is_the_plain_interrupt_path() {
    let p = Params {
        enabled: false,
        ..crate::defaults()
    };
    let o = Model::new(p, Costs::hardware(), 100 * US, steady(32, 50 * MS))
        .run(60 * MS)
        .settled();
    assert_eq!(o.episodes, 0);
    assert_eq!(o.timer_expiries, 0);
    assert_eq!(o.reaped_by_irq, o.completions);
}

#[test]
#[ignore]
fn calibration() {
    for costs in [Costs::hardware(), Costs::fast(), Costs::emulator()] {
        for (lat, qd) in [(5 * US, 128), (20 * US, 128), (MS, 128), (MS, 32)] {
            let dur = 20 * MS.max(lat * 100);
            let off = Params {
                enabled: false,
                ..crate::defaults()
            };
            let o = run_settled(off, costs, lat, &steady(qd, dur));
            println!(
                "{} {}us QD{}: {:.0} kIOPS, {:.3} IRQ/IO, CPU {:.0}%, cpu/IO {:.2}us lat {:.1}us",
                costs.name,
                lat / US,
                qd,
                o.completions as f64 / dur as f64 * 1e6,
                o.irqs_per_io(),
                100.0 * o.cpu_busy(),
                o.cpu_per_io_ns() / 1e3,
                o.mean_latency_ns() / 1e3
            );
        }
    }
}
