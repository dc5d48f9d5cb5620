// SPDX-License-Identifier: GPL-2.0

//! The adaptive interrupt polling policy of one I/O queue, as a pure state machine.
//!
//! This file uses nothing but `core`: the module compiles it in, and the host compiles the very
//! same file for `cargo test` (tools/policy-test). It decides; the driver acts: `irq.rs` masks
//! and unmasks the vector, `hrtimer.rs` arms the poll timer, `queue.rs` drains the CQ.
//!
//! ```text
//!              a poll would reap well more than an IRQ
//!              does, within the latency budget
//!   +--------+ ------------------------------------> +------+  kept up: re-arm with the
//!   | Sample |         mask vector, arm timer        | Poll |  wait the budget allows
//!   +--------+ <------------------------------------ +------+ ---+
//!       ^        capped / idle after a good episode   |   ^      |
//!       |        (unmask, reap once more)             |   +------+
//!       |                                             | stalled, budget gone, or idle too
//!       |         backoff expired                     | early: unmask, reap once more
//!       +----------------------------- +---------+ <--+
//!                                      | Backoff |  base * behind * growth^failures,
//!                                      +---------+  at most backoff_max
//! ```
//!
//! Nothing here is sized for one device: every decision scales with what the queue measures.
//! While on interrupts it measures the mean time between completions (`gap`), the mean number
//! of commands in flight (`depth`), the completions each interrupt reaps, and the device's
//! service latency (each command's time from submission to reaping; by Little's law,
//! `depth * gap`, where commands were not timed). While polling it measures how late the timer
//! fires (`slack`: about a microsecond on hardware, hundreds under emulation) and the latency
//! again: the difference to the latency on interrupts is what polling adds.
//!
//! A poll interval of `W + slack` delays a completion by half of it on average when
//! completions arrive evenly, so the policy starts from `W = 2 * budget - slack`, with the
//! budget `latency_budget_percent` of the device's latency, and then corrects `W` by what it
//! measures the polls to add: completions that arrive in clumps wait less or more than half an
//! interval. It polls only if a poll then collects clearly more completions than an interrupt
//! already does. The module parameters only cap what it derives.
//!
//! Times are nanoseconds of a monotonic clock; no floating point is used.

/// Shortest poll wait: below about a microsecond programming the timer costs more than it saves.
pub(crate) const MIN_WAIT_NS: u64 = 1_000;

/// The fewest completions a rate sample ends after: the least `sample_size`.
pub(crate) const MIN_SAMPLE: u32 = PARAM_SPECS[param::SAMPLE_SIZE].min;

/// A poll must collect at least this many completions to replace interrupts.
pub(crate) const MIN_BATCH: u64 = 2;

/// A poll must collect at least this many times (in eighths) what an interrupt reaps: one mask,
/// one unmask, the interrupt replayed on unmask and the timer interrupts must be paid back.
pub(crate) const MIN_GAIN_EIGHTHS: u64 = 12;

/// A poll that reaps at least this share of what the rate estimate predicted is "productive".
pub(crate) const KEEP_UP_PERCENT: u64 = 50;

/// Polls that must keep up before an episode counts as worth its cost, unless it saved
/// interrupts outright (`Policy::episode_saved`).
pub(crate) const MIN_PRODUCTIVE_POLLS: u32 = 4;

/// "How far behind" saturates here, so one long silence cannot ask for an absurd backoff.
pub(crate) const MAX_BEHIND: u64 = 16;

/// A sample restarts when the queue was silent for this many service latencies (it went idle:
/// the silence would make a starting burst look slow); a poll episode tolerates silence of at
/// most this many.
pub(crate) const IDLE_LATENCIES: u64 = 8;

/// Before any latency is known, silence longer than this restarts a sample.
pub(crate) const IDLE_FLOOR_NS: u64 = 1_000_000;

/// The backoff after a failed episode is at least this many service latencies.
pub(crate) const BACKOFF_LATENCIES: u64 = 16;

/// Timed completions the latency on interrupts must be measured over before a first episode, and
/// the most its running mean weighs (later samples refine it).
pub(crate) const BASELINE_MIN: u64 = 256;
const BASELINE_MAX: u64 = 1024;

/// New measurements weigh a quarter in the moving averages.
const EWMA_SHIFT: u32 = 2;

/// Consecutive failed episodes beyond this do not grow the backoff further (it is capped anyway).
const MAX_FAILURES: u32 = 32;

/// The correction of the poll wait (in 256ths) stays within 1/16 and 4 of the even-arrival
/// estimate, and moves at most by this factor range per poll, a quarter of the way.
const FIT_ONE: u64 = 256;
const FIT_MIN: u64 = FIT_ONE / 16;
const FIT_MAX: u64 = FIT_ONE * 4;

/// The latency polls add is steered to this share of the budget: the latency on interrupts it
/// is measured against is itself a sample mean, a few percent off either way.
const AIM_PERCENT: u64 = 85;

/// Tunables, read afresh at every decision so runtime changes apply at the next one. Apart from
/// the switch and the budget, each only bounds what the policy derives from its measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    /// Master switch; when off the queue never leaves interrupts.
    pub(crate) enabled: bool,
    /// Cap on the completions per rate sample while on interrupts.
    pub(crate) sample_size: u32,
    /// Cap on the completions a poll aims to collect.
    pub(crate) target_batch: u32,
    /// Cap on any wait between two polls.
    pub(crate) max_delay_ns: u64,
    /// The latency a poll may add on average, in percent of the device's service latency.
    pub(crate) budget_percent: u32,
    /// Least backoff after an episode that fell behind, before growth and the "behind" factor.
    pub(crate) backoff_ns: u64,
    /// Cap on any backoff.
    pub(crate) backoff_max_ns: u64,
    /// Factor applied per consecutive failed episode.
    pub(crate) backoff_growth: u32,
    /// Polls after which an episode returns to interrupts to re-sample.
    pub(crate) episode_polls: u32,
}

/// One tunable: its module parameter name, unit, default and valid range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamSpec {
    pub(crate) name: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) default: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
    pub(crate) description: &'static str,
}

impl ParamSpec {
    /// Whether `value` is in the valid range.
    pub(crate) const fn accepts(&self, value: u32) -> bool {
        value >= self.min && value <= self.max
    }
}

/// Index of each tunable in [`PARAM_SPECS`].
pub(crate) mod param {
    pub(crate) const ADAPTIVE: usize = 0;
    pub(crate) const SAMPLE_SIZE: usize = 1;
    pub(crate) const TARGET_BATCH: usize = 2;
    pub(crate) const MAX_DELAY_US: usize = 3;
    pub(crate) const LATENCY_BUDGET_PERCENT: usize = 4;
    pub(crate) const BACKOFF_US: usize = 5;
    pub(crate) const BACKOFF_MAX_US: usize = 6;
    pub(crate) const BACKOFF_GROWTH: usize = 7;
    pub(crate) const EPISODE_POLLS: usize = 8;
    pub(crate) const COUNT: usize = 9;
}

/// Every tunable of the policy, in [`param`] order. Documentation/nvme-adaptive/params.rst
/// explains the defaults.
pub(crate) const PARAM_SPECS: [ParamSpec; param::COUNT] = [
    ParamSpec {
        name: "adaptive",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        description: "per-queue adaptive interrupt polling: 1 on, 0 plain interrupts",
    },
    ParamSpec {
        name: "sample_size",
        unit: "completions",
        default: 16,
        min: 8,
        max: 65536,
        description:
            "most completions per rate sample on interrupts (half those in flight if fewer)",
    },
    ParamSpec {
        name: "target_batch",
        unit: "completions",
        default: 256,
        min: 2,
        max: 1024,
        description: "cap on the completions a poll aims to collect",
    },
    ParamSpec {
        name: "max_delay_us",
        unit: "us",
        default: 10000,
        min: 5,
        max: 100_000,
        description: "cap on any wait between two polls",
    },
    ParamSpec {
        name: "latency_budget_percent",
        unit: "% of device latency",
        default: 25,
        min: 1,
        max: 100,
        description: "latency a poll may add on average, in percent of the measured device latency",
    },
    ParamSpec {
        name: "backoff_us",
        unit: "us",
        default: 1000,
        min: 10,
        max: 1_000_000,
        description: "least wait on interrupts after a poll episode fell behind",
    },
    ParamSpec {
        name: "backoff_max_us",
        unit: "us",
        default: 1_000_000,
        min: 10,
        max: 60_000_000,
        description: "cap on any backoff",
    },
    ParamSpec {
        name: "backoff_growth",
        unit: "factor",
        default: 2,
        min: 1,
        max: 16,
        description: "backoff multiplier per consecutive failed episode",
    },
    ParamSpec {
        name: "episode_polls",
        unit: "polls",
        default: 10000,
        min: 2,
        max: 10_000_000,
        description: "polls after which an episode re-samples on interrupts",
    },
];

impl Params {
    /// Builds the parameters from raw values in [`param`] order (as the module stores them).
    pub(crate) const fn from_raw(raw: [u32; param::COUNT]) -> Self {
        Self {
            enabled: raw[param::ADAPTIVE] != 0,
            sample_size: raw[param::SAMPLE_SIZE],
            target_batch: raw[param::TARGET_BATCH],
            max_delay_ns: raw[param::MAX_DELAY_US] as u64 * 1000,
            budget_percent: raw[param::LATENCY_BUDGET_PERCENT],
            backoff_ns: raw[param::BACKOFF_US] as u64 * 1000,
            backoff_max_ns: raw[param::BACKOFF_MAX_US] as u64 * 1000,
            backoff_growth: raw[param::BACKOFF_GROWTH],
            episode_polls: raw[param::EPISODE_POLLS],
        }
    }
}

/// Where the queue is in its loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// On interrupts, measuring.
    Sample,
    /// Vector masked; the poll timer drains the CQ.
    Poll,
    /// On interrupts, not measuring until the backoff ends.
    Backoff,
}

impl Stage {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Stage::Sample => "sample",
            Stage::Poll => "poll",
            Stage::Backoff => "backoff",
        }
    }
}

/// Why a poll episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Nothing left in flight.
    Idle,
    /// The poll reaped far fewer completions than the rate predicted, or a poll could no longer
    /// collect enough within the latency budget.
    Stalled,
    /// The episode reached `episode_polls`: back to interrupts to re-sample.
    Capped,
    /// Adaptive polling was switched off.
    Disabled,
}

/// What the driver must do after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Stay on interrupts (after an IRQ event).
    Stay,
    /// Mask the queue's vector and arm the poll timer to expire after `wait_ns`.
    StartPolling { wait_ns: u64 },
    /// Keep polling: re-arm the timer to expire after `wait_ns`.
    Rearm { wait_ns: u64 },
    /// Unmask the vector, reap once more, and stay on interrupts.
    StopPolling { ending: Ending },
}

/// Completions one interrupt or poll reaped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reaped {
    pub(crate) count: u32,
    /// How many of them carried their submission time, and the sum of their latencies
    /// (submission to this reap).
    pub(crate) timed: u32,
    pub(crate) latency_sum_ns: u64,
}

impl Reaped {
    fn mean_latency_ns(&self) -> Option<u64> {
        self.latency_sum_ns.checked_div(self.timed.into())
    }
}

/// What the queue measured: the inputs of every decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Estimates {
    /// Mean time between two completions.
    pub(crate) gap_ns: u64,
    /// Mean commands in flight, in sixteenths.
    pub(crate) depth_x16: u64,
    /// The device's service latency (submission to reaping) on interrupts: the running mean
    /// over the last [`BASELINE_MAX`] or so timed completions that samples measured, or Little's
    /// law (`depth * gap`) where none were timed. Polling leaves it alone: it is the reference
    /// for what polling adds.
    pub(crate) latency_ns: u64,
    /// The completions `latency_ns` stands for.
    pub(crate) latency_weight: u64,
    /// The latency while polling, and the correction of the poll wait it led to (in 256ths).
    pub(crate) poll_latency_ns: u64,
    pub(crate) fit_x256: u64,
    /// Completions one interrupt reaped on average in the last sample, in sixteenths.
    pub(crate) per_irq_x16: u64,
    /// How late the poll timer fires, on average.
    pub(crate) slack_ns: u64,
}

impl Estimates {
    /// The latency polling may add.
    fn budget_ns(&self, p: &Params) -> u64 {
        self.latency_ns.saturating_mul(u64::from(p.budget_percent)) / 100
    }

    /// The poll wait and the batch it collects, within the latency budget and the caps, and
    /// whether a cap (not the budget) set them; `None` when no wait collects a batch within the
    /// budget.
    fn plan(&self, p: &Params) -> Option<Plan> {
        if self.gap_ns == 0 {
            return None;
        }
        // Evenly arriving completions wait half of the interval `wait + slack` on average.
        let even = self
            .budget_ns(p)
            .saturating_mul(2)
            .checked_sub(self.slack_ns)?;
        let wanted = even.saturating_mul(self.fit_x256) / FIT_ONE;
        let wait = wanted.min(p.max_delay_ns);
        // The nearest whole batch: the wait's correction absorbs the rounding.
        let batch = ((wait + self.gap_ns / 2) / self.gap_ns)
            .min(u64::from(p.target_batch))
            .min(self.depth_x16 / 16);
        if batch < MIN_BATCH {
            return None;
        }
        Some(Plan {
            wait_ns: batch
                .saturating_mul(self.gap_ns)
                .min(p.max_delay_ns)
                .max(MIN_WAIT_NS),
            batch,
            capped: batch < (wanted + self.gap_ns / 2) / self.gap_ns,
        })
    }

    /// Whether polling with `batch` per poll takes clearly fewer interrupts than interrupts do.
    fn pays(&self, batch: u64) -> bool {
        batch.saturating_mul(16 * 8) >= self.per_irq_x16.saturating_mul(MIN_GAIN_EIGHTHS)
    }
}

/// A poll wait and what it should collect.
#[derive(Clone, Copy, Debug)]
struct Plan {
    wait_ns: u64,
    batch: u64,
    /// A parameter cap or the depth, not the budget, limits the wait.
    capped: bool,
}

/// Per-queue policy state. Owned by the queue and only touched under its CQ lock.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    stage: Stage,
    /// Start of the current sample; `None` until the first interrupt opens one.
    sample_start: Option<u64>,
    /// Completions counted in the current sample, the interrupts that reaped them, the
    /// commands in flight when each came (summed), and the latencies of the timed ones.
    sample_count: u64,
    sample_irqs: u64,
    sample_depth: u64,
    sample_timed: u64,
    sample_latency_sum: u64,
    /// Time of the last interrupt event, or of the start of the current backoff if later (to
    /// notice an idle queue: until the backoff, polls saw it busy).
    last_irq: u64,
    est: Estimates,
    /// Wait requested from the timer for the current or last poll, the batch it aims at, and
    /// whether a cap set them.
    wait_ns: u64,
    batch: u64,
    capped: bool,
    /// Time of the last poll decision (the start of the interval the next poll measures).
    last_poll: u64,
    /// Time of the last poll that reaped anything (or of the start of the episode).
    last_reap: u64,
    /// Mean span between the polls that reaped anything and mean completions they reaped (in
    /// 256ths), this episode: the rate while polling.
    reap_span_ns: u64,
    reap_count_x256: u64,
    /// Polls in the current episode, how many of them kept up, and the completions they reaped.
    episode_polls: u32,
    productive_polls: u32,
    episode_reaped: u64,
    /// Consecutive episodes that did not pay off.
    failures: u32,
    /// Current backoff and when it ends.
    backoff_ns: u64,
    backoff_until: u64,
    /// Something the accessors show changed since [`Policy::take_changed`] last asked.
    changed: bool,
}

/// Completions per second for a mean gap of `gap_ns` between them (0 for no estimate).
pub(crate) fn rate_per_sec(gap_ns: u64) -> u64 {
    1_000_000_000u64.checked_div(gap_ns).unwrap_or(0)
}

/// `old` moved a quarter of the way to `new`.
fn ewma(old: u64, new: u64) -> u64 {
    if old == 0 {
        return new;
    }
    old - (old >> EWMA_SHIFT) + (new >> EWMA_SHIFT)
}

impl Policy {
    pub(crate) const fn new() -> Self {
        Self {
            stage: Stage::Sample,
            sample_start: None,
            sample_count: 0,
            sample_irqs: 0,
            sample_depth: 0,
            sample_timed: 0,
            sample_latency_sum: 0,
            last_irq: 0,
            est: Estimates {
                gap_ns: 0,
                depth_x16: 0,
                latency_ns: 0,
                latency_weight: 0,
                poll_latency_ns: 0,
                fit_x256: FIT_ONE,
                per_irq_x16: 0,
                slack_ns: 0,
            },
            wait_ns: 0,
            batch: 0,
            capped: false,
            last_poll: 0,
            last_reap: 0,
            reap_span_ns: 0,
            reap_count_x256: 0,
            episode_polls: 0,
            productive_polls: 0,
            episode_reaped: 0,
            failures: 0,
            backoff_ns: 0,
            backoff_until: 0,
            changed: false,
        }
    }

    /// Whether what the accessors show changed since the last call (statistics need no
    /// update after most interrupts: they only add to a sample).
    pub(crate) fn take_changed(&mut self) -> bool {
        core::mem::replace(&mut self.changed, false)
    }

    pub(crate) fn stage(&self) -> Stage {
        self.stage
    }

    /// What the queue measured so far.
    pub(crate) fn estimates(&self) -> Estimates {
        self.est
    }

    /// The last wait asked of the poll timer.
    pub(crate) fn wait_ns(&self) -> u64 {
        self.wait_ns
    }

    /// The completions the current or last poll aims at.
    pub(crate) fn batch(&self) -> u64 {
        self.batch
    }

    /// The current (or last) backoff.
    pub(crate) fn backoff_ns(&self) -> u64 {
        self.backoff_ns
    }

    /// Consecutive poll episodes that did not pay off.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Silence after which the queue counts as idle: a few service latencies, measured in the
    /// last sample or, before there is one, in the current sample so far.
    fn idle_ns(&self) -> u64 {
        let running = self
            .sample_latency_sum
            .checked_div(self.sample_timed)
            .unwrap_or(0);
        self.est
            .latency_ns
            .max(running)
            .saturating_mul(IDLE_LATENCIES)
            .max(IDLE_FLOOR_NS)
    }

    /// Whether the caller may skip [`Policy::on_irq`], and the clock read for it, for an
    /// interrupt that reaped `reaped` and left `inflight`: while sampling, when the device held
    /// at most one command, there was nothing to batch. The sample leaves such interrupts out
    /// (a run of them longer than the idle gap restarts it), and a queue at QD 1 does no policy
    /// work per I/O.
    pub(crate) fn skip_lone_irq(&self, reaped: u32, inflight: u32) -> bool {
        self.stage == Stage::Sample && reaped <= 1 && inflight == 0
    }

    /// The IRQ handler reaped at `now`; `inflight` remain outstanding. Returns
    /// [`Action::Stay`] or [`Action::StartPolling`].
    pub(crate) fn on_irq(&mut self, now: u64, reaped: Reaped, inflight: u32, p: &Params) -> Action {
        let since_last = now.saturating_sub(self.last_irq);
        self.last_irq = now;
        match self.stage {
            // The timer owns a polling queue; an interrupt slipping through changes nothing.
            Stage::Poll => return Action::Stay,
            // Interrupts usually come well within the idle floor: no idle time worked out then.
            Stage::Backoff
                if now < self.backoff_until
                    && (since_last <= IDLE_FLOOR_NS || since_last <= self.idle_ns()) =>
            {
                return Action::Stay
            }
            Stage::Backoff => {
                if now < self.backoff_until {
                    self.forget_episodes();
                }
                // What this interrupt reaped arrived before the new sample began.
                self.restart_sample(now);
                return Action::Stay;
            }
            Stage::Sample => {}
        }
        if !p.enabled {
            self.sample_start = None;
            return Action::Stay;
        }
        let Some(start) = self.sample_start else {
            self.restart_sample(now);
            return Action::Stay;
        };
        // Before the first sample ends, the completions at hand are the only latency known: a
        // device slower than the idle floor must not look idle between its completions. (Their
        // mean is only worked out for a gap that already looks idle, and the idle time only for
        // one longer than its floor.)
        if since_last > IDLE_FLOOR_NS
            && since_last > self.idle_ns()
            && since_last
                > reaped
                    .mean_latency_ns()
                    .unwrap_or(0)
                    .saturating_mul(IDLE_LATENCIES)
        {
            self.forget_episodes();
            self.restart_sample(now);
            return Action::Stay;
        }
        self.sample_count = self.sample_count.saturating_add(u64::from(reaped.count));
        self.sample_irqs = self.sample_irqs.saturating_add(1);
        // What the device held when the interrupt came.
        self.sample_depth = self
            .sample_depth
            .saturating_add(u64::from(inflight) + u64::from(reaped.count));
        self.sample_timed = self.sample_timed.saturating_add(reaped.timed.into());
        self.sample_latency_sum = self
            .sample_latency_sum
            .saturating_add(reaped.latency_sum_ns);
        // A sample needs no more completions than half what the device holds: a longer one
        // would end only as a burst drains, with nothing left in flight to poll for. (It goes
        // on while fewer than half the mean depth came, `2 * irqs * (count + 1) <= depth`,
        // without dividing on every interrupt.)
        let below_half_depth = self
            .sample_irqs
            .saturating_mul(2)
            .saturating_mul(self.sample_count + 1)
            <= self.sample_depth;
        if self.sample_count < u64::from(p.sample_size)
            && (self.sample_count < u64::from(MIN_SAMPLE) || below_half_depth)
        {
            return Action::Stay;
        }
        let irqs = self.sample_irqs.max(1);
        self.est.gap_ns = (now.saturating_sub(start) / self.sample_count.max(1)).max(1);
        self.est.depth_x16 = self.sample_depth.saturating_mul(16) / irqs;
        self.measure_latency();
        self.est.per_irq_x16 = self.sample_count.saturating_mul(16) / irqs;
        self.restart_sample(now);
        let plan = self.est.plan(p).filter(|plan| {
            self.est.latency_weight >= BASELINE_MIN
                && u64::from(inflight) >= plan.batch
                && self.est.pays(plan.batch)
        });
        let Some(plan) = plan else {
            self.relax_poll_estimates();
            return Action::Stay;
        };
        self.stage = Stage::Poll;
        self.set_plan(plan);
        self.est.poll_latency_ns = 0;
        self.last_poll = now;
        self.last_reap = now;
        // The sampled rate seeds the episode's: what the first wait should collect.
        self.reap_span_ns = plan.batch.saturating_mul(self.est.gap_ns);
        self.reap_count_x256 = plan.batch.saturating_mul(256);
        self.episode_polls = 0;
        self.productive_polls = 0;
        self.episode_reaped = 0;
        Action::StartPolling {
            wait_ns: plan.wait_ns,
        }
    }

    /// The queue went idle: the load that comes next is another, so the episodes of the last
    /// one no longer count (their failures and the backoff they grew).
    fn forget_episodes(&mut self) {
        self.failures = 0;
    }

    /// Only polls measure the timer's lateness and the wait's correction, so with each sample
    /// that stays on interrupts both relax toward their neutral values (no lateness, no
    /// correction): one stretch of late timers (a loaded host, a firmware interrupt) must not
    /// keep the queue off polling for good. The next episode measures them again; if they are
    /// still bad it ends and backs off as any failed episode does.
    fn relax_poll_estimates(&mut self) {
        self.est.slack_ns -= self.est.slack_ns >> 2;
        self.est.fit_x256 = (self.est.fit_x256 * 7 + FIT_ONE) / 8;
    }

    /// Folds the sample's latencies into the running mean.
    fn measure_latency(&mut self) {
        if self.sample_timed == 0 {
            // Nothing timed (adaptive polling was off at submission): Little's law, and a
            // baseline no better than this sample.
            self.est.latency_ns = self.est.depth_x16.saturating_mul(self.est.gap_ns) / 16;
            self.est.latency_weight = BASELINE_MIN;
            return;
        }
        let w = self.est.latency_weight;
        let total = self
            .est
            .latency_ns
            .saturating_mul(w)
            .saturating_add(self.sample_latency_sum);
        self.est.latency_weight = (w + self.sample_timed).min(BASELINE_MAX);
        self.est.latency_ns = total / (w + self.sample_timed);
    }

    fn set_plan(&mut self, plan: Plan) {
        self.changed = true;
        self.wait_ns = plan.wait_ns;
        self.batch = plan.batch;
        self.capped = plan.capped;
    }

    /// Moves the wait's correction a quarter of the way to where the latency polls add meets
    /// [`AIM_PERCENT`] of the budget. A wait held down by a cap cannot grow, so its correction
    /// does not either.
    fn fit(&mut self, p: &Params) {
        let added = self
            .est
            .poll_latency_ns
            .saturating_sub(self.est.latency_ns)
            .max(1);
        let aim = self.est.budget_ns(p).saturating_mul(AIM_PERCENT) / 100;
        let ratio = (aim.saturating_mul(FIT_ONE) / added).clamp(FIT_ONE / 2, FIT_ONE * 2);
        if ratio > FIT_ONE && self.capped {
            return;
        }
        self.est.fit_x256 =
            (self.est.fit_x256 * (3 * FIT_ONE + ratio) / (4 * FIT_ONE)).clamp(FIT_MIN, FIT_MAX);
    }

    /// The poll timer fired `late_ns` after the wait asked and reaped at `now`; `inflight`
    /// remain outstanding. Returns [`Action::Rearm`] or [`Action::StopPolling`].
    pub(crate) fn on_timer(
        &mut self,
        now: u64,
        late_ns: u64,
        reaped: Reaped,
        inflight: u32,
        p: &Params,
    ) -> Action {
        if self.stage != Stage::Poll {
            // Only reachable if the driver broke the protocol; never leave a vector masked.
            return Action::StopPolling {
                ending: Ending::Disabled,
            };
        }
        self.changed = true;
        let elapsed = now.saturating_sub(self.last_poll).max(1);
        self.last_poll = now;
        self.episode_polls = self.episode_polls.saturating_add(1);
        self.est.slack_ns = ewma(self.est.slack_ns, late_ns.max(1));
        if let Some(latency) = reaped.mean_latency_ns() {
            self.est.poll_latency_ns = ewma(self.est.poll_latency_ns, latency);
            self.fit(p);
        }
        let reaped = u64::from(reaped.count);
        self.episode_reaped = self.episode_reaped.saturating_add(reaped);
        if reaped * 100
            >= (elapsed / self.est.gap_ns.max(1))
                .max(1)
                .saturating_mul(KEEP_UP_PERCENT)
        {
            self.productive_polls = self.productive_polls.saturating_add(1);
        }
        if reaped > 0 {
            // The rate is the mean span between polls that reaped anything (empty polls in
            // between are part of it) over the mean they reaped. Completions come in clumps:
            // a mean of per-poll gaps would read a clump split across two polls as the rate
            // collapsing, and a stall (no reaps) must not move the rate it is judged by.
            let span = now.saturating_sub(self.last_reap).max(1);
            self.last_reap = now;
            self.reap_span_ns = ewma(self.reap_span_ns, span);
            self.reap_count_x256 = ewma(self.reap_count_x256, reaped.saturating_mul(256));
            self.est.gap_ns =
                (self.reap_span_ns.saturating_mul(256) / self.reap_count_x256.max(1)).max(1);
            // What the device held before this poll.
            self.est.depth_x16 = ewma(
                self.est.depth_x16,
                (u64::from(inflight) + reaped).saturating_mul(16),
            );
        }

        if !p.enabled {
            return self.end_episode(now, Ending::Disabled, 1, p);
        }
        if reaped == 0 && inflight == 0 {
            return self.end_episode(now, Ending::Idle, 1, p);
        }
        // Completions come in clumps: a closed loop resubmits what one poll reaped all at once,
        // and those complete together one latency later. Silence is a stall only when it lasts
        // longer than the work in flight should take: at the estimated rate (Little's law), but
        // at least one service latency (a rate sampled within a clump reads faster than the
        // device is), plus one poll interval: that work was resubmitted after the last reap,
        // not at it, and a clump due just after a poll is seen only at the next.
        let silence = now.saturating_sub(self.last_reap);
        let tolerance = (u64::from(inflight) * self.est.gap_ns)
            .max(self.est.latency_ns)
            .min(self.idle_ns())
            .saturating_add(self.wait_ns)
            .saturating_add(self.est.slack_ns)
            .max(self.wait_ns.saturating_mul(2));
        if silence > tolerance {
            let behind = (silence / self.wait_ns.max(1)).clamp(1, MAX_BEHIND);
            return self.end_episode(now, Ending::Stalled, behind, p);
        }
        // The rate, depth or timer lateness changed: no batch fits the budget any more.
        let Some(plan) = self.est.plan(p) else {
            return self.end_episode(now, Ending::Stalled, 1, p);
        };
        if self.episode_polls >= p.episode_polls {
            return self.end_episode(now, Ending::Capped, 1, p);
        }
        self.set_plan(plan);
        Action::Rearm {
            wait_ns: plan.wait_ns,
        }
    }

    /// Leave polling without a timer decision (teardown or controller reset cancelled the
    /// timer). Returns whether the queue was polling, i.e. whether its vector must be unmasked.
    pub(crate) fn abort_polling(&mut self) -> bool {
        let was_polling = self.stage == Stage::Poll;
        if was_polling {
            self.changed = true;
            self.stage = Stage::Sample;
            self.sample_start = None;
        }
        was_polling
    }

    fn restart_sample(&mut self, now: u64) {
        self.changed = true;
        self.stage = Stage::Sample;
        self.sample_start = Some(now);
        self.sample_count = 0;
        self.sample_irqs = 0;
        self.sample_depth = 0;
        self.sample_timed = 0;
        self.sample_latency_sum = 0;
    }

    /// Whether the episode's polls reaped what interrupts would have needed clearly more
    /// interrupts for: one timer interrupt per poll and the unmask's replayed one, against what
    /// each interrupt of the last sample reaped. An episode that drained a burst in two or three
    /// polls pays off too, not only one of [`MIN_PRODUCTIVE_POLLS`] polls.
    fn episode_saved(&self) -> bool {
        let interrupts = u64::from(self.episode_polls) + 1;
        // Interrupts that reaped next to nothing each (empty ones in the sample) make any reap
        // look like a saving: at least a batch must have been reaped.
        self.episode_reaped >= MIN_BATCH
            && self.episode_reaped.saturating_mul(16 * 8)
                >= interrupts
                    .saturating_mul(self.est.per_irq_x16)
                    .saturating_mul(MIN_GAIN_EIGHTHS)
    }

    fn end_episode(&mut self, now: u64, ending: Ending, behind: u64, p: &Params) -> Action {
        self.changed = true;
        let paid_off = self.productive_polls >= MIN_PRODUCTIVE_POLLS || self.episode_saved();
        let backoff = match ending {
            Ending::Capped | Ending::Disabled => {
                self.failures = 0;
                0
            }
            Ending::Idle if paid_off => {
                self.failures = 0;
                0
            }
            Ending::Idle | Ending::Stalled => {
                if paid_off {
                    self.failures = 0;
                } else {
                    self.failures = (self.failures + 1).min(MAX_FAILURES);
                }
                // The first failure waits the base backoff, at least a few service latencies;
                // each further one grows it.
                let base = p
                    .backoff_ns
                    .max(self.est.latency_ns.saturating_mul(BACKOFF_LATENCIES));
                let mut backoff = base.saturating_mul(behind);
                for _ in 1..self.failures {
                    backoff = backoff.saturating_mul(u64::from(p.backoff_growth));
                    if backoff >= p.backoff_max_ns {
                        break;
                    }
                }
                backoff.min(p.backoff_max_ns)
            }
        };
        self.backoff_ns = backoff;
        if backoff == 0 {
            self.restart_sample(now);
        } else {
            self.stage = Stage::Backoff;
            self.backoff_until = now.saturating_add(backoff);
            self.sample_start = None;
            self.last_irq = now;
        }
        Action::StopPolling { ending }
    }
}
