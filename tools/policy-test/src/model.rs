//! A queue model: a device completing requests after its service latency, an MSI-X vector that
//! can be masked (its pending bit replayed on unmask), a poll timer that fires late, one CPU that
//! pays for every interrupt, timer expiry and completion, and a workload. It drives the real
//! `policy.rs` exactly as the driver does (`irq.rs`, `hrtimer.rs`) and measures what comes out.

use crate::policy::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub(crate) const US: u64 = 1_000;
pub(crate) const MS: u64 = 1_000_000;

/// What the host pays, and how late its timers are. `hardware()` and `emulator()` give the two
/// profiles the evaluation uses; Documentation/nvme-adaptive/design.rst cites their sources.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Costs {
    pub(crate) name: &'static str,
    /// From the CQE write to the interrupt handler's first instruction.
    pub(crate) irq_delivery_ns: u64,
    /// CPU time of one interrupt (entry, handler, exit) without its completions.
    pub(crate) irq_ns: u64,
    /// CPU time of one poll timer expiry without its completions.
    pub(crate) timer_ns: u64,
    /// CPU time per completion: reaping the CQE, ending the request, the application's
    /// resubmission.
    pub(crate) completion_ns: u64,
    /// CPU time of masking and, later, unmasking the vector (one poll episode).
    pub(crate) mask_ns: u64,
    /// How late the poll timer fires on average; each expiry varies by +-50 %.
    pub(crate) slack_ns: u64,
}

impl Costs {
    /// A bare-metal x86 server with a PCIe 4 NVMe SSD: about 1.5 us for an interrupt or a
    /// timer expiry in hard-IRQ context, a PCIe read round trip (~1 us) to mask, ~0.5 us per
    /// I/O for the block layer and io_uring (2M IOPS per core on interrupts), and a busy CPU's
    /// hrtimer firing a few microseconds late.
    pub(crate) const fn hardware() -> Self {
        Self {
            name: "hardware",
            irq_delivery_ns: US,
            irq_ns: 1_500,
            timer_ns: 1_500,
            completion_ns: 500,
            mask_ns: 1_500,
            slack_ns: 3 * US,
        }
    }

    /// QEMU TCG on this project's 2-core CI machine, measured on the emulated controller with
    /// fio: ~60 us of guest CPU per I/O at QD 1 (one interrupt each) and ~25 us at QD 128 (one
    /// interrupt per 4.6 I/Os) give ~45 us per interrupt and ~15 us per completion; the
    /// driver's `slack_ns` shows the poll timer firing about a millisecond late under load (the
    /// vCPU threads share two host cores with QEMU's I/O thread).
    pub(crate) const fn emulator() -> Self {
        Self {
            name: "emulator",
            irq_delivery_ns: 20 * US,
            irq_ns: 45 * US,
            timer_ns: 45 * US,
            completion_ns: 15 * US,
            mask_ns: 10 * US,
            slack_ns: MS,
        }
    }
}

/// What drives submissions during one phase of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drive {
    /// Nothing is submitted.
    Idle,
    /// A closed loop: every completion is resubmitted, `qd` stay in flight.
    Closed { qd: u32 },
    /// `qd` requests at once; `think` after the last completes, the next burst.
    Bursts { qd: u32, think: u64 },
    /// Independent arrivals about `gap` apart (+-50 %), at most `cap` in flight.
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
    /// An open-loop arrival, or the next burst.
    Arrival,
    /// The phase with this index begins.
    PhaseStart(usize),
}

#[derive(Default, Debug, Clone)]
pub(crate) struct Outcome {
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
    /// CPU time spent on interrupts, timer expiries and completions.
    pub(crate) cpu_ns: u64,
    /// When the last completion was reaped.
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

    /// Mean time a completion waited in the CQ before it was reaped.
    pub(crate) fn mean_wait_ns(&self) -> f64 {
        self.wait_sum_ns as f64 / self.completions.max(1) as f64
    }

    /// The latency polling added: the mean wait in the CQ beyond interrupts alone's (`plain`).
    pub(crate) fn added_wait_ns(&self, plain: &Outcome) -> f64 {
        self.mean_wait_ns() - plain.mean_wait_ns()
    }

    /// The I/Os completed against interrupts alone's (`plain`) over the same load: the IOPS
    /// ratio, where the load is a closed loop that runs for a fixed time.
    pub(crate) fn iops_ratio(&self, plain: &Outcome) -> f64 {
        self.completions as f64 / plain.completions.max(1) as f64
    }
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
    inflight: u32,
    masked: bool,
    masked_since: u64,
    pending: bool,
    irq_due: bool,
    /// The armed timer: its id and the time it was asked to fire.
    timer: Option<(u64, u64)>,
    timer_id: u64,
    cpu_free: u64,
    rng: u64,
    started: bool,
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
            masked: false,
            masked_since: 0,
            pending: false,
            irq_due: false,
            timer: None,
            timer_id: 0,
            cpu_free: 0,
            rng: 0x2545_f491_4f6c_dd1d,
            started: false,
            out: Outcome::default(),
        }
    }

    /// Each request takes the service latency +-`percent` (25 unless set).
    pub(crate) fn with_latency_spread(mut self, percent: u64) -> Self {
        self.latency_spread_percent = percent;
        self
    }

    /// A fixed-seed generator: the model is deterministic.
    fn jitter(&mut self, around: u64, spread_percent: u64) -> u64 {
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let spread = around * spread_percent / 100;
        around - spread + (self.rng >> 33) % (2 * spread + 1)
    }

    fn drive(&self) -> Drive {
        self.phases
            .get(self.phase)
            .map_or(Drive::Idle, |ph| ph.drive)
    }

    fn submit(&mut self, now: u64) {
        let done = now + self.jitter(self.latency, self.latency_spread_percent);
        self.inflight += 1;
        self.events.push(Reverse((done, Kind::Complete(now))));
    }

    /// The workload reacts to `reaped` completions at `now` (the CPU is free again then).
    fn refill(&mut self, now: u64, reaped: u32) {
        match self.drive() {
            Drive::Closed { qd } => {
                while self.inflight < qd {
                    self.submit(now);
                }
            }
            Drive::Bursts { think, .. } if reaped > 0 && self.inflight == 0 => {
                self.events.push(Reverse((now + think, Kind::Arrival)));
            }
            _ => {}
        }
    }

    fn arrival(&mut self, now: u64) {
        match self.drive() {
            Drive::Bursts { qd, .. } if self.inflight == 0 => {
                for _ in 0..qd {
                    self.submit(now);
                }
            }
            Drive::Open { gap, cap } => {
                if self.inflight < cap {
                    self.submit(now);
                }
                let next = now + self.jitter(gap, 50).max(1);
                self.events.push(Reverse((next, Kind::Arrival)));
            }
            _ => {}
        }
    }

    fn start_phase(&mut self, now: u64, index: usize) {
        self.phase = index;
        match self.drive() {
            Drive::Closed { .. } => self.refill(now, 0),
            Drive::Bursts { .. } | Drive::Open { .. } => self.arrival(now),
            Drive::Idle => {}
        }
    }

    /// Reaps every posted CQE, each timed from its submission as the driver does.
    fn reap(&mut self, now: u64) -> Reaped {
        let n = self.posted.len() as u32;
        let mut latency_sum_ns = 0;
        for (posted, submitted) in self.posted.drain(..) {
            self.out.wait_sum_ns += now - posted;
            self.out.worst_wait_ns = self.out.worst_wait_ns.max(now - posted);
            latency_sum_ns += now - submitted;
        }
        self.inflight -= n;
        self.out.completions += u64::from(n);
        self.out.end_ns = now;
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
        let fires = now + wait + self.jitter(self.costs.slack_ns, 50);
        self.events
            .push(Reverse((fires, Kind::Timer(self.timer_id))));
    }

    /// Occupies the CPU from `start` for a handler of `fixed_ns` that reaped `n`; returns when
    /// it is done (when the application resubmits).
    fn spend(&mut self, start: u64, fixed_ns: u64, n: u32) -> u64 {
        let cost = fixed_ns + u64::from(n) * self.costs.completion_ns;
        self.out.cpu_ns += cost;
        self.cpu_free = start + cost;
        self.cpu_free
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
            // A handler waits for the CPU; completions posted meanwhile are its to reap.
            if matches!(kind, Kind::Irq | Kind::Timer(_)) && now < self.cpu_free {
                self.events.push(Reverse((self.cpu_free, kind)));
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
            }
        }
        self
    }

    fn irq(&mut self, now: u64) {
        self.irq_due = false;
        self.out.irqs += 1;
        let reaped = self.reap(now);
        let n = reaped.count;
        if n == 0 {
            self.out.empty_irqs += 1;
        }
        self.out.reaped_by_irq += u64::from(n);
        let mut fixed = self.costs.irq_ns;
        // As the driver's handler: a lone completion skips the rest of the policy.
        let skipped = self.pol.skip_lone_irq(n, self.inflight);
        if let Action::StartPolling { wait_ns } = (!skipped)
            .then(|| self.pol.on_irq(now, reaped, self.inflight, &self.p))
            .unwrap_or(Action::Stay)
        {
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
        let done = self.spend(now, fixed, n);
        self.refill(done, n);
    }

    fn expire(&mut self, now: u64, deadline: u64) {
        self.out.timer_expiries += 1;
        let reaped = self.reap(now);
        let n = reaped.count;
        self.out.reaped_by_poll += u64::from(n);
        let late = now.saturating_sub(deadline);
        match self.pol.on_timer(now, late, reaped, self.inflight, &self.p) {
            Action::Rearm { wait_ns } => {
                assert!(
                    wait_ns <= self.p.max_delay_ns,
                    "wait {wait_ns} over the cap"
                );
                self.arm(now, wait_ns);
                let done = self.spend(now, self.costs.timer_ns, n);
                self.refill(done, n);
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
                let done = self.spend(now, self.costs.timer_ns, n + m);
                self.refill(done, n + m);
            }
            other => panic!("on_timer returned {other:?}"),
        }
    }

    /// What happened so far, after checking that the run ended settled: once the load stopped,
    /// everything was reaped, the vector is unmasked and the queue is not polling.
    pub(crate) fn settled(self) -> Outcome {
        assert!(
            self.posted.is_empty(),
            "{} completions stranded",
            self.posted.len()
        );
        assert_eq!(self.inflight, 0, "requests never completed");
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

/// The phases of a closed loop of `qd` for `duration`, then idle.
pub(crate) fn steady(qd: u32, duration: u64) -> Vec<Phase> {
    vec![Phase {
        until: duration,
        drive: Drive::Closed { qd },
    }]
}

#[test]
fn dense_stream_is_polled_and_returns_to_interrupts_when_the_load_stops() {
    let o = Model::new(
        crate::defaults(),
        Costs::hardware(),
        100 * US,
        steady(32, 100 * MS),
    )
    .run(200 * MS)
    .settled();
    assert!(o.poll_share() > 0.9, "poll share {:.3}", o.poll_share());
    assert!(o.irqs_per_io() < 0.1, "IRQ/IO {:.3}", o.irqs_per_io());
    assert_eq!(o.endings.last(), Some(&Ending::Idle));
}

#[test]
fn a_fixed_latency_device_keeps_polling_through_its_clumps() {
    // The adaptive suite's 20 ms device (QEMU's `null-co,latency-ns`: every request takes the
    // same time, so requests submitted together complete together) under a timer firing a
    // quarter of a millisecond late. A poll often finds part of a clump and the next poll the
    // rest, which must not read as the rate collapsing (no batch would then fit, and every
    // episode would end "stalled").
    for qd in [16, 32] {
        let costs = Costs {
            slack_ns: 250 * US,
            ..Costs::emulator()
        };
        let o = Model::new(crate::defaults(), costs, 20 * MS, steady(qd, 30_000 * MS))
            .with_latency_spread(1)
            .run(u64::MAX)
            .settled();
        let stalled = o.endings.iter().filter(|e| **e == Ending::Stalled).count();
        assert!(
            o.poll_share() > 0.95,
            "QD{qd}: poll share {:.3}, {stalled} stalled",
            o.poll_share()
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
    // Dense for 300 us, then silent for 2 ms, 200 times.
    let mut phases = Vec::new();
    for i in 0..200u64 {
        let base = i * 2300 * US;
        phases.push(Phase {
            until: base + 300 * US,
            drive: Drive::Closed { qd: 32 },
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
fn a_smaller_budget_costs_a_closed_loop_less_iops() {
    // At a fixed depth the device's latency sets the pace: IOPS are the depth over the latency,
    // so the latency polls add comes off them, and the budget is what the user trades for the
    // interrupts saved. (benchmarking.rst, "The budget's price in IOPS", quotes this table:
    // `cargo test smaller_budget -- --nocapture`.)
    for latency in [100 * US, MS] {
        for qd in [16, 32, 128] {
            let phases = steady(qd, 20_000 * latency);
            let run = |p: Params| run_settled(p, Costs::hardware(), latency, &phases);
            let plain = run(Params {
                enabled: false,
                ..crate::defaults()
            });
            let mut looser: Option<f64> = None;
            for budget_percent in [25, 20, 15, 10] {
                let o = run(Params {
                    budget_percent,
                    ..crate::defaults()
                });
                let iops = o.iops_ratio(&plain);
                println!(
                    "{:5}us QD{qd:<3} budget {budget_percent:2}%: adds {:4.1}%, IOPS x {:.3}, \
                     {:.3} interrupts per I/O (alone {:.3}), {:3.0}% polled",
                    latency / US,
                    100.0 * o.added_wait_ns(&plain) / latency as f64,
                    iops,
                    o.interrupts_per_io(),
                    plain.interrupts_per_io(),
                    100.0 * o.poll_share()
                );
                if let Some(looser) = looser {
                    assert!(
                        iops > looser,
                        "{}us QD{qd}: budget {budget_percent}% runs {iops:.3}x, no more than \
                         the larger budget's {looser:.3}x",
                        latency / US
                    );
                }
                looser = Some(iops);
            }
        }
    }
}
