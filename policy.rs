// SPDX-License-Identifier: GPL-2.0

//! The adaptive interrupt polling policy of one I/O queue, as a pure state machine.
//!
//! This file uses nothing but `core`: the module compiles it in, and the host compiles the very
//! same file for `cargo test` (tools/policy-test). It decides; the driver acts: `irq.rs` masks
//! and unmasks the vector, `hrtimer.rs` arms the poll timer, `queue.rs` drains the CQ.
//!
//! ```text
//!             a wait that pays fits the budget
//!             (or, on a busy CPU, a probe beyond it)
//!   +--------+ ------------------------------------> +------+  each window of completions:
//!   | Sample |         mask vector, arm timer        | Poll |  judge the rate, move the
//!   +--------+ <------------------------------------ +------+  wait, charge the credit
//!       ^      idle, capped, load changed, credit       |  ^        |
//!       |      spent: unmask, reap once more            |  +--------+
//!       |                                               |
//!       |         backoff expired                       | stalled, a probe without gain,
//!       +----------------------------- +---------+ <----+ gain lost: unmask, reap once more
//!                                      | Backoff |  base * behind * growth^failures,
//!                                      +---------+  at most backoff_max
//! ```
//!
//! The objective, in this order: polling costs a closed loop (a fixed number of I/Os in
//! flight) at most 3 % of the IOPS of interrupts alone, and where the CPU sets the pace it turns
//! the interrupts it saves into IOPS; then the fewest interrupts; and an open loop (arrivals
//! that do not wait) gets at most `latency_budget_percent` of the device's latency added to its
//! mean.
//!
//! Nothing here is sized for one device: every decision scales with what the queue measures.
//! On interrupts it samples the mean time between completions (`gap`), the commands in flight
//! (`depth`), the completions each interrupt reaps, the device's service latency (submission to
//! reaping; by Little's law, `depth * gap`, where commands were not timed), how busy the CPU is,
//! and the completion rate interrupts sustain, the reference every episode is judged against.
//! While polling it measures how late the timer fires (`slack`: about a microsecond on
//! hardware, hundreds under emulation), the latency again (what polls add), and the completion
//! rate, in windows of completions:
//!
//! - within the latency budget, the wait climbs from the shortest that pays toward the budget's
//!   while the rate holds; a rate that falls says the queue is a closed loop paced by the
//!   device, where the latency polls add comes off the IOPS, and the wait comes down. Each
//!   completion on interrupts earns loss credit, each window spends what it lost: the mean loss
//!   stays within the bound, however a queue alternates;
//! - on a CPU that interrupts keep busy, a probe polls beyond the budget; if it beats the rate
//!   interrupts sustain, measured afresh after it, the CPU sets the pace, and the wait climbs
//!   by the rate alone (perturb and observe).
//!
//! The module parameters only cap what it derives. Documentation/nvme-adaptive/design.rst
//! explains each rule. Times are nanoseconds of a monotonic clock; no floating point is used.

/// Shortest poll wait: below about a microsecond programming the timer costs more than it saves.
pub(crate) const MIN_WAIT_NS: u64 = 1_000;

/// The fewest completions a rate sample ends after: the least `sample_size`.
pub(crate) const MIN_SAMPLE: u32 = PARAM_SPECS[param::SAMPLE_SIZE].min;

/// A poll must collect at least this many completions to replace interrupts.
pub(crate) const MIN_BATCH: u64 = 2;

/// A poll must collect at least this many times (in eighths) what an interrupt reaps: one mask,
/// one unmask, the interrupt replayed on unmask and the timer interrupts must be paid back.
pub(crate) const MIN_GAIN_EIGHTHS: u64 = 12;

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
const AIM_PERCENT: u64 = 80;

/// A window may lose this share (in thousandths) of the completion rate interrupts sustained
/// before its wait shrinks, and each completion on interrupts earns this much loss credit: in a
/// closed loop (a fixed depth) the latency polls add comes off the rate. The product promises
/// 3 %; the margin covers the error of two measured rates.
pub(crate) const LOSS_PERMILLE: u64 = 20;

/// The most loss credit a queue banks: what [`BASELINE_MAX`] completions on interrupts earn.
const MAX_LOSS_CREDIT: i64 = (LOSS_PERMILLE * BASELINE_MAX) as i64;

/// A wait found to cost more than [`LOSS_PERMILLE`] shrinks toward the wait that would cost this
/// much (in thousandths of the rate), by at least a quarter and at most three quarters.
const LOSS_AIM_PERMILLE: u64 = 12;

/// A probe whose completion rate beats what interrupts sustain, measured afresh after it, by
/// this share finds the CPU setting the pace: the interrupts it saves buy IOPS, and the wait is
/// no longer held to the latency budget.
pub(crate) const GAIN_PERCENT: u64 = 8;

/// Where polls reap only part of a queue's completions, those they reap may add up to this
/// many times the latency budget (in 256ths), so that the mean over all completions meets it.
const SPREAD_MAX_X256: u64 = 512;

/// Interrupts alone keep the CPU at least this busy (in percent of the time, from its idle
/// time): the CPU, not the device, may set the pace, so the interrupts polling saves could buy
/// IOPS. Only then does a queue poll beyond the latency budget to find out.
pub(crate) const CPU_BUSY_PERCENT: u64 = 95;

/// Below this CPU load (in percent), saving interrupts cannot speed a queue up noticeably: an
/// episode within the latency budget that beats interrupts' rate finds its reference stale.
const STALE_BUSY_PERCENT: u64 = 50;

/// Completions an episode's rate is judged over: at least this many, and at least what the
/// device holds (a closed loop takes a round of its depth to show what a new wait costs) ...
pub(crate) const JUDGE_MIN: u64 = 64;

/// ... or this many polls, whichever comes first: an episode that slows the queue down is
/// judged soon.
pub(crate) const JUDGE_POLLS: u32 = 8;

/// Windows in a row no faster than interrupts after which an episode paced by the CPU has lost
/// its gain: it ends as a failed probe.
const GAIN_LOST_WINDOWS: u32 = 3;

/// A gain is judged against interrupts' rate measured when it was confirmed, which the host's
/// or the load's drift makes stale: after reaping this many completions, the gain is confirmed
/// again against a fresh measurement. That takes a warm-up and a reference of
/// [`BASELINE_MIN`] completions each on interrupts, a thirty-third of the whole.
pub(crate) const RECONFIRM_COMPLETIONS: u64 = 32 * 2 * BASELINE_MIN;

/// A failed episode backs off until the queue took at least this many times the interrupts the
/// episode cost (its polls and the replayed one), counted: failures cost at most a third of a
/// percent of the interrupts.
const FAILURE_COST_SHARE: u64 = 300;

/// A probe starts with a poll that collects this many times what an interrupt reaps.
const PROBE_BATCH_FACTOR: u64 = 2;

/// Paced by the CPU, a longer wait saves more interrupts, whose time the application gets, until
/// it runs out of work: the CPU then idles. So the wait of a probe, and of an episode paced by
/// the CPU, climbs while the CPU stays at least this busy (in percent) over a window ...
const CLIMB_BUSY_PERCENT: u64 = 97;

/// ... and comes down when it idles more than this share.
const DESCEND_BUSY_PERCENT: u64 = 90;

/// How many steps a probe's wait takes before its rate is judged, at most: a quarter up, or
/// down in proportion to the CPU's idle time.
const MAX_PROBE_CLIMBS: u32 = 12;

/// A probe that found no gain backs off for at least this many times its own length, so that
/// probing costs a queue the CPU does not pace at most a small share of its time.
pub(crate) const PROBE_BACKOFF_FACTOR: u64 = 64;

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
        default: 10,
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
    /// The completion rate moved far from the one interrupts sustained (the load changed), or
    /// beat it (the CPU may set the pace): back to interrupts to measure their rate afresh.
    Resample,
    /// The episode cost the completion rate all that polling may cost it (the loss credit):
    /// back to interrupts, which earn it back.
    Spent,
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
    /// The mean gap between completions on interrupts over the samples of the current load
    /// (the last [`BASELINE_MAX`] or so completions, at least [`BASELINE_MIN`] before an
    /// episode): the rate an episode must sustain.
    pub(crate) ref_gap_ns: u64,
    /// The completions `ref_gap_ns` stands for, and those still to be left out before it is
    /// measured afresh (the load settles at a new depth meanwhile).
    pub(crate) ref_weight: u64,
    pub(crate) ref_warmup: u64,
    /// The mean commands in flight while the reference was measured, in sixteenths: a sample
    /// at a clearly different depth (half again, or two thirds) is another load.
    pub(crate) ref_depth_x16: u64,
    /// The depth of the last samples, a moving average (an eighth per sample: a closed loop
    /// paced by the CPU swings widely from one sample to the next).
    pub(crate) recent_depth_x16: u64,
    /// The latency while polling, and the correction of the poll wait it led to (in 256ths).
    pub(crate) poll_latency_ns: u64,
    pub(crate) fit_x256: u64,
    /// Where between the shortest wait that pays (0) and the latency budget's (256) the poll
    /// waits: an episode starts at the shortest, and the wait climbs while the completion rate
    /// holds. It stays low where the queue is a closed loop paced by the device.
    pub(crate) rate_x256: u64,
    /// Completions one interrupt reaped on average in the last sample, in sixteenths.
    pub(crate) per_irq_x16: u64,
    /// How busy the CPU was while the queue sampled on interrupts, in percent (a moving
    /// average over samples).
    pub(crate) busy_percent: u64,
    /// Recent completions, how many of them polls reaped, and the interrupts that reaped the
    /// others (all halved now and then).
    pub(crate) recent_total: u64,
    pub(crate) recent_polled: u64,
    pub(crate) recent_irqs: u64,
    /// What polling may still cost the completion rate, in thousandths of a completion: each
    /// completion on interrupts earns [`LOSS_PERMILLE`], each window of an episode spends what
    /// it measured to lose against interrupts' rate. The mean loss stays within the bound.
    pub(crate) loss_credit: i64,
    /// Completions on interrupts still to come that earn no credit: for a round of the depth
    /// after an episode, the requests it delayed keep the loop slow.
    pub(crate) credit_holdoff: u64,
    /// How late the poll timer fires, on average.
    pub(crate) slack_ns: u64,
}

impl Estimates {
    /// The latency polling may add to what it polls: the budget is a mean over all the queue's
    /// completions, so where interrupts reap part of them polls may add more (at most
    /// [`SPREAD_MAX_X256`] times the budget).
    fn budget_ns(&self, p: &Params) -> u64 {
        let spread = (self.recent_total.saturating_mul(256) / self.recent_polled.max(1))
            .clamp(256, SPREAD_MAX_X256);
        self.latency_ns
            .saturating_mul(u64::from(p.budget_percent))
            .saturating_mul(spread)
            / (100 * 256)
    }

    /// Whether the queue holds clearly more or fewer commands (`depth_x16`) than while the
    /// reference was measured: half again as many or two thirds, and two commands either way
    /// (a shallow queue's depth varies by a command or two).
    fn depth_changed(&self, depth_x16: u64) -> bool {
        let known = self.ref_depth_x16;
        let margin = 2 * 16;
        depth_x16 > known + known / 2 + margin || depth_x16 + margin < known - known / 3
    }

    /// Measures interrupts' rate afresh, after a round of the depth the queue held.
    fn forget_rate(&mut self) {
        self.ref_weight = 0;
        self.ref_warmup = self.ref_warmup.max(JUDGE_MIN.max(self.depth_x16 / 16));
    }

    /// Counts `count` completions, `polled` or not, toward the polled share; on interrupts
    /// they earn loss credit.
    fn count_completions(&mut self, count: u64, polled: bool) {
        self.recent_total = self.recent_total.saturating_add(count);
        if polled {
            self.recent_polled = self.recent_polled.saturating_add(count);
        } else {
            self.recent_irqs = self.recent_irqs.saturating_add(1);
            let held = count.min(self.credit_holdoff);
            self.credit_holdoff -= held;
            self.loss_credit = self
                .loss_credit
                .saturating_add(((count - held) * LOSS_PERMILLE) as i64)
                .min(MAX_LOSS_CREDIT);
        }
        if self.recent_total > 4 * BASELINE_MAX {
            self.recent_total /= 2;
            self.recent_polled /= 2;
            self.recent_irqs /= 2;
        }
    }

    /// What an interrupt reaps, in sixteenths: the last sample's figure, or the mean over the
    /// recent interrupts where that is more (a sample that ends early in a clump of completions
    /// reads too few).
    fn irq_batch_x16(&self) -> u64 {
        let on_irqs = self.recent_total.saturating_sub(self.recent_polled);
        let mean = on_irqs.saturating_mul(16) / self.recent_irqs.max(1);
        self.per_irq_x16.max(mean)
    }

    /// The wait that keeps the latency polls add within the budget: half an interval on average
    /// for completions that arrive evenly, corrected by what polls measured to add. `None`
    /// when the timer alone is later than that.
    fn latency_wait(&self, p: &Params) -> Option<u64> {
        let even = self
            .budget_ns(p)
            .saturating_mul(2)
            .checked_sub(self.slack_ns)?;
        Some(even.saturating_mul(self.fit_x256) / FIT_ONE)
    }

    /// The fewest completions a poll must collect to pay for itself: a batch, and clearly more
    /// than an interrupt reaps.
    fn paying_batch(&self) -> u64 {
        self.per_irq_x16
            .saturating_mul(MIN_GAIN_EIGHTHS)
            .div_ceil(16 * 8)
            .max(MIN_BATCH)
    }

    /// The poll that waits `wanted`: the batch it collects (at most `target_batch`, and at
    /// most what the device holds where the device sets the pace; paced by the CPU, the
    /// application keeps submitting while a poll waits), the wait rounded to the batch where
    /// a cap bounds it. `None` when that batch does not pay (paced by the CPU, the completion
    /// rate judges that instead).
    fn plan(&self, p: &Params, wanted: u64, paced_by_cpu: bool) -> Option<Plan> {
        if self.gap_ns == 0 {
            return None;
        }
        let wait = wanted.min(p.max_delay_ns);
        let depth = if paced_by_cpu {
            u64::MAX
        } else {
            self.depth_x16 / 16
        };
        let uncapped = self.batch_in(wait);
        let batch = uncapped.min(u64::from(p.target_batch)).min(depth);
        if batch < MIN_BATCH || !paced_by_cpu && !self.pays(batch) {
            return None;
        }
        Some(Plan {
            wait_ns: if batch < uncapped {
                self.wait_for(batch, p)
            } else {
                wait.max(MIN_WAIT_NS)
            },
            batch,
            capped: false,
        })
    }

    /// The completions a poll collects when it waits `wait`.
    fn batch_in(&self, wait: u64) -> u64 {
        (wait.saturating_add(self.slack_ns) + self.gap_ns / 2) / self.gap_ns.max(1)
    }

    /// The wait after which a poll has collected `batch`.
    fn wait_for(&self, batch: u64, p: &Params) -> u64 {
        batch
            .saturating_mul(self.gap_ns)
            .saturating_sub(self.slack_ns)
            .min(p.max_delay_ns)
            .max(MIN_WAIT_NS)
    }

    /// A probe beyond the latency budget: the poll that collects [`PROBE_BATCH_FACTOR`] times
    /// what an interrupt reaps.
    fn probe_plan(&self, p: &Params) -> Option<Plan> {
        let batch = self
            .per_irq_x16
            .saturating_mul(PROBE_BATCH_FACTOR)
            .div_ceil(16)
            .max(MIN_BATCH);
        self.plan(p, self.wait_for(batch, p), true)
    }

    /// Whether polling with `batch` per poll takes clearly fewer interrupts than interrupts do.
    fn pays(&self, batch: u64) -> bool {
        batch.saturating_mul(16 * 8) >= self.per_irq_x16.saturating_mul(MIN_GAIN_EIGHTHS)
    }
}

/// What an episode that may have found the CPU setting the pace measured, kept until
/// interrupts' rate is measured again after it: its mean gap between completions, its wait and
/// how long it lasted.
#[derive(Clone, Copy, Debug)]
struct GainCandidate {
    gap_ns: u64,
    wait_ns: u64,
    duration_ns: u64,
    /// It polled beyond the latency budget (failing, it backs off).
    probe: bool,
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
    /// When the CPU's busy share began to be measured in the current sample, and the CPU's
    /// idle time then.
    sample_idle: Option<(u64, Option<u64>)>,
    /// Time of the last interrupt event, or of the start of the current backoff if later (to
    /// notice an idle queue: until the backoff, polls saw it busy).
    last_irq: u64,
    est: Estimates,
    /// Wait requested from the timer for the current or last poll, the batch it aims at, and
    /// whether a cap set them.
    wait_ns: u64,
    batch: u64,
    capped: bool,
    /// Time of the last poll that reaped anything (or of the start of the episode).
    last_reap: u64,
    /// Mean span between the polls that reaped anything and mean completions they reaped (in
    /// 256ths), this episode: the rate while polling.
    reap_span_ns: u64,
    reap_count_x256: u64,
    /// Polls in the current episode, and the completions they reaped.
    episode_polls: u32,
    episode_reaped: u64,
    /// The episode's current judgment window of its completion rate: when it began, and the
    /// completions reaped since.
    window_start: u64,
    window_count: u64,
    window_polls: u32,
    /// The CPU's idle time when the window's first poll came, and that poll's time: how busy
    /// the CPU was over the window (episodes on a busy CPU only).
    window_idle: Option<(u64, u64)>,
    /// A probe's wait still climbs (its rate is judged once it settles), and how often it did.
    probe_climbing: bool,
    probe_climbs: u32,
    /// When the episode began.
    episode_start: u64,
    /// Paced by the CPU: the mean gap of the last window, whether the wait grows, and how many
    /// windows in a row were no faster than interrupts.
    last_window_gap_ns: u64,
    climbing: bool,
    slow_windows: u32,
    /// When the current run of such windows began.
    slow_since: u64,
    /// How long the gain held before the slow windows that lost it (0 unless it was lost).
    gain_held_ns: u64,
    /// The mean gap over the episode's windows (a moving average): the rate the loss is
    /// judged by, steadier than one window's.
    smooth_gap_ns: u64,
    /// The wait of a probe, or of an episode paced by the CPU (the latency budget does not
    /// set it).
    climb_wait_ns: u64,
    /// The episode beats the rate interrupts sustained: the CPU sets the pace.
    gain: bool,
    /// The episode started beyond the latency budget, to find out whether it would beat the
    /// rate on interrupts (until its first judgment).
    probe: bool,
    /// The CPU was busy when the episode started: its first judgment may find it paced by the
    /// CPU.
    may_gain: bool,
    /// The episode probed beyond the latency budget (a failure then backs off for longer).
    probed: bool,
    /// The first window of an episode that may find the CPU setting the pace (a probe, or an
    /// episode on a busy CPU that beat interrupts' rate), to be judged against interrupts'
    /// rate measured afresh after it: the load may have grown since the reference was
    /// measured.
    gain_to_confirm: Option<GainCandidate>,
    /// The episode's rate was judged at least once.
    judged: bool,
    /// Consecutive episodes that did not pay off.
    failures: u32,
    /// Current backoff and when it ends, and the interrupts it must still take before (a
    /// failed episode's cost in interrupts, [`FAILURE_COST_SHARE`] times over), unless
    /// `backoff_max_us` passes first: a slow device's interrupts are few.
    backoff_ns: u64,
    backoff_until: u64,
    backoff_irqs: u64,
    backoff_irqs_until: u64,
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
            sample_idle: None,
            last_irq: 0,
            est: Estimates {
                gap_ns: 0,
                depth_x16: 0,
                latency_ns: 0,
                latency_weight: 0,
                ref_gap_ns: 0,
                ref_weight: 0,
                ref_warmup: 0,
                ref_depth_x16: 0,
                recent_depth_x16: 0,
                poll_latency_ns: 0,
                fit_x256: FIT_ONE,
                rate_x256: 0,
                per_irq_x16: 0,
                busy_percent: 0,
                recent_total: 0,
                recent_polled: 0,
                recent_irqs: 0,
                loss_credit: 0,
                credit_holdoff: 0,
                slack_ns: 0,
            },
            wait_ns: 0,
            batch: 0,
            capped: false,
            last_reap: 0,
            reap_span_ns: 0,
            reap_count_x256: 0,
            episode_polls: 0,
            episode_reaped: 0,
            window_start: 0,
            window_count: 0,
            window_polls: 0,
            window_idle: None,
            probe_climbing: false,
            probe_climbs: 0,
            episode_start: 0,
            last_window_gap_ns: 0,
            climbing: true,
            slow_windows: 0,
            slow_since: 0,
            gain_held_ns: 0,
            smooth_gap_ns: 0,
            climb_wait_ns: u64::MAX,
            gain: false,
            probe: false,
            may_gain: false,
            probed: false,
            gain_to_confirm: None,
            judged: false,
            failures: 0,
            backoff_ns: 0,
            backoff_until: 0,
            backoff_irqs: 0,
            backoff_irqs_until: 0,
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

    /// Whether the current or last episode found the CPU setting the pace (its wait is not
    /// held to the latency budget).
    pub(crate) fn paced_by_cpu(&self) -> bool {
        self.gain
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

    /// The IRQ handler reaped at `now`; `inflight` remain outstanding. `cpu_idle_ns` reads the
    /// CPU's cumulative idle time (`None` where the kernel cannot tell it precisely: the CPU
    /// then never counts as busy); it is called only where a sample begins or ends. Returns
    /// [`Action::Stay`] or [`Action::StartPolling`].
    pub(crate) fn on_irq(
        &mut self,
        now: u64,
        reaped: Reaped,
        inflight: u32,
        p: &Params,
        mut cpu_idle_ns: impl FnMut() -> Option<u64>,
    ) -> Action {
        let since_last = now.saturating_sub(self.last_irq);
        self.last_irq = now;
        match self.stage {
            // The timer owns a polling queue; an interrupt slipping through changes nothing.
            Stage::Poll => return Action::Stay,
            Stage::Backoff => {
                // Interrupts usually come well within the idle floor: no idle time worked out
                // then. A queue that went idle faces another load: its backoff in time ends,
                // but not the interrupts a failure must be paid back with.
                if since_last > IDLE_FLOOR_NS && since_last > self.idle_ns() {
                    self.forget_episodes();
                    self.backoff_until = now;
                }
                let owes_irqs = self.backoff_irqs > 0 && now < self.backoff_irqs_until;
                if now < self.backoff_until || owes_irqs {
                    self.backoff_irqs = self.backoff_irqs.saturating_sub(1);
                    self.est.count_completions(reaped.count.into(), false);
                    return Action::Stay;
                }
                // Nothing measured the rate during the backoff: the reference is measured
                // afresh. What this interrupt reaped arrived before the new sample began.
                self.est.forget_rate();
                self.restart_sample(now);
                return Action::Stay;
            }
            Stage::Sample => {}
        }
        if !p.enabled {
            self.sample_start = None;
            return Action::Stay;
        }
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
        let Some(start) = self.sample_start else {
            self.restart_sample(now);
            return Action::Stay;
        };
        let (busy_since, idle_since) =
            *self.sample_idle.get_or_insert_with(|| (now, cpu_idle_ns()));
        self.est.count_completions(reaped.count.into(), false);
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
        self.measure_rate(now.saturating_sub(start));
        self.measure_latency();
        self.est.per_irq_x16 = self.sample_count.saturating_mul(16) / irqs;
        let idle = cpu_idle_ns();
        if let (Some(idle), Some(since)) = (idle, idle_since) {
            let idle_percent = idle.saturating_sub(since).saturating_mul(100)
                / now.saturating_sub(busy_since).max(1);
            // From 0 too (a queue's first samples, or just idle): a busy CPU must show for a
            // number of samples.
            let busy = &mut self.est.busy_percent;
            *busy = *busy - *busy / 4 + 100u64.saturating_sub(idle_percent) / 4;
        }
        self.restart_sample(now);
        self.sample_idle = Some((now, idle));
        let ready = self.est.latency_weight >= BASELINE_MIN
            && self.est.ref_weight >= BASELINE_MIN.max(self.est.depth_x16 / 16)
            && self.est.loss_credit >= 0;
        if ready {
            if let Some(probe) = self.gain_to_confirm.take() {
                if probe.gap_ns.saturating_mul(100 + GAIN_PERCENT)
                    <= self.est.ref_gap_ns.saturating_mul(100)
                {
                    return self.start_gain(now, probe);
                }
                if probe.probe {
                    return self.back_off(
                        now,
                        probe.duration_ns.saturating_mul(PROBE_BACKOFF_FACTOR),
                        p,
                    );
                }
            }
        }
        // Within the latency budget if a batch fits it; otherwise a probe beyond it, to find
        // out whether the CPU sets the pace.
        // At least two polls' worth in flight: an episode of one poll and a look that finds
        // nothing costs two timer interrupts and the one replayed on unmask.
        let latency_plan = self
            .latency_plan(p)
            .filter(|plan| u64::from(inflight) >= 2 * plan.batch);
        let probe_plan = || self.est.probe_plan(p);
        let may_gain = self.est.busy_percent >= CPU_BUSY_PERCENT;
        let (plan, probe) = match latency_plan {
            Some(plan) => (Some(plan), false),
            None if may_gain && inflight > 0 => (probe_plan(), true),
            None => (None, false),
        };
        let Some(plan) = plan.filter(|_| ready) else {
            self.relax_poll_estimates();
            return Action::Stay;
        };
        self.start_episode(now, plan, probe, may_gain)
    }

    /// Masks the vector and polls: within the latency budget, or as a `probe` beyond it; the
    /// CPU was busy (`may_gain`) or not.
    fn start_episode(&mut self, now: u64, plan: Plan, probe: bool, may_gain: bool) -> Action {
        self.stage = Stage::Poll;
        self.set_plan(plan);
        self.est.poll_latency_ns = 0;
        self.last_reap = now;
        // The sampled rate seeds the episode's: what the first wait should collect.
        self.reap_span_ns = plan.batch.saturating_mul(self.est.gap_ns);
        self.reap_count_x256 = plan.batch.saturating_mul(256);
        self.episode_polls = 0;
        self.episode_reaped = 0;
        self.restart_window(now);
        self.episode_start = now;
        self.last_window_gap_ns = 0;
        self.climbing = true;
        self.slow_windows = 0;
        self.gain_held_ns = 0;
        self.smooth_gap_ns = 0;
        self.climb_wait_ns = if probe { plan.wait_ns } else { u64::MAX };
        self.gain = false;
        self.probe = probe;
        self.probed = probe;
        self.probe_climbing = probe;
        self.probe_climbs = 0;
        self.may_gain = may_gain;
        self.judged = false;
        Action::StartPolling {
            wait_ns: plan.wait_ns,
        }
    }

    /// A probe beat interrupts' rate measured afresh after it: the CPU sets the pace, so the
    /// queue polls again at the probe's wait, no longer held to the latency budget.
    fn start_gain(&mut self, now: u64, probe: GainCandidate) -> Action {
        // The polls go on at the gain's rate, not at the one interrupts just sampled.
        self.est.gap_ns = probe.gap_ns.max(1);
        let plan = Plan {
            wait_ns: probe.wait_ns,
            batch: self.est.batch_in(probe.wait_ns).max(MIN_BATCH),
            capped: true,
        };
        let action = self.start_episode(now, plan, false, true);
        self.gain = true;
        self.judged = true;
        self.climb_wait_ns = probe.wait_ns;
        self.last_window_gap_ns = probe.gap_ns;
        self.smooth_gap_ns = probe.gap_ns;
        action
    }

    /// The queue went idle: the load that comes next is another, so the episodes of the last
    /// one no longer count (their failures and the backoff they grew). Its references stay: a
    /// load that differs shows it at the next episode's first judgment.
    fn forget_episodes(&mut self) {
        self.failures = 0;
        // An idle queue's CPU was not setting its pace: the next load must show that it does
        // over a number of samples before a probe.
        self.est.busy_percent = 0;
    }

    /// Only polls measure the timer's lateness and the wait's correction, so with each sample
    /// that stays on interrupts both relax toward their neutral values (no lateness, no
    /// correction): one stretch of late timers (a loaded host, a firmware interrupt) must not
    /// keep the queue off polling for good. The next episode measures them again; if they are
    /// still bad it ends and backs off as any failed episode does.
    fn relax_poll_estimates(&mut self) {
        self.est.slack_ns -= self.est.slack_ns >> 4;
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
        let weight = w.saturating_add(self.sample_timed);
        self.est.latency_weight = weight.min(BASELINE_MAX);
        // `weight` is at least `sample_timed`, not 0; `max` shows the compiler, which would
        // otherwise keep a call to the division-by-zero panic (one that 7.3's objtool does not
        // know never returns, so it warns when the call ends a function).
        self.est.latency_ns = total / weight.max(1);
    }

    /// Folds a sample's completions over `span` into the reference rate.
    fn measure_rate(&mut self, span: u64) {
        let est = &mut self.est;
        let depth = est.depth_x16;
        // A shallow queue's depth swings from one sample to the next as waves of completions
        // pass; a load changes the depth for good.
        est.recent_depth_x16 = if est.recent_depth_x16 == 0 {
            depth
        } else {
            est.recent_depth_x16 - est.recent_depth_x16 / 8 + depth / 8
        };
        let recent = est.recent_depth_x16;
        if est.ref_weight > 0 && est.depth_changed(recent) {
            est.forget_rate();
        }
        if est.ref_warmup > 0 {
            est.ref_warmup = est.ref_warmup.saturating_sub(self.sample_count);
            return;
        }
        let w = est.ref_weight;
        let n = w + self.sample_count;
        let mean = |old: u64, sample: u64| {
            (old.saturating_mul(w).saturating_add(sample) / n.max(1)).max(1)
        };
        est.ref_gap_ns = mean(est.ref_gap_ns, span);
        est.ref_depth_x16 = mean(est.ref_depth_x16, depth.saturating_mul(self.sample_count));
        est.ref_weight = n.min(BASELINE_MAX);
    }

    /// Ends a judgment window at `now`: what the episode's completion rate says about its wait.
    /// Returns how the episode must end, if it must: a probe that did not beat interrupts
    /// failed (stalled); otherwise to measure interrupts' rate afresh (resample).
    ///
    /// - At an episode's first judgment, on a CPU that interrupts kept busy: beating the rate
    ///   on interrupts by [`GAIN_PERCENT`], the CPU sets the pace. The wait is then no longer
    ///   held to the latency budget but climbs while the rate holds within [`LOSS_PERMILLE`] of
    ///   the episode's best, and shrinks when it does not.
    /// - Otherwise the reference is interrupts' rate: beating it later in an episode, or
    ///   falling a quarter below it, the load changed and the episode ends to sample anew.
    ///   Slower than it by more than [`LOSS_PERMILLE`], the wait costs a closed loop IOPS and
    ///   shrinks in proportion to the loss; else it may grow by an eighth.
    fn judge(&mut self, now: u64, busy: Option<u64>) -> Option<Ending> {
        let count = self.window_count;
        let gap = (now.saturating_sub(self.window_start) / count.max(1)).max(1);
        self.restart_window(now);
        let first = !self.judged;
        let probe = core::mem::replace(&mut self.probe, false);
        self.judged = true;
        let reference = self.est.ref_gap_ns.max(1);
        let beats = gap.saturating_mul(100 + GAIN_PERCENT) <= reference.saturating_mul(100);
        // A gain is only taken for one against interrupts' rate measured again right after
        // the episode: the load may have grown since the reference was measured.
        if first && self.may_gain && (beats || probe) {
            return Some(self.confirm_gain(GainCandidate {
                gap_ns: gap,
                wait_ns: self.wait_ns,
                duration_ns: now.saturating_sub(self.episode_start),
                probe,
            }));
        }
        self.smooth_gap_ns = ewma(self.smooth_gap_ns, gap);
        let smooth = self.smooth_gap_ns;
        if self.gain {
            if self.episode_reaped >= RECONFIRM_COMPLETIONS {
                return Some(self.confirm_gain(self.held_gain(now)));
            }
            let last = core::mem::replace(&mut self.last_window_gap_ns, gap);
            let saturated = busy.is_some_and(|b| b >= CLIMB_BUSY_PERCENT);
            if smooth >= reference {
                // No faster than interrupts. With the CPU saturated, the wait is still too
                // short to save what the polls cost: it climbs. Otherwise the wait overshot
                // (the CPU idles), or the CPU no longer sets the pace: after a few such windows,
                // or one at half the rate, the gain is gone, and the queue backs off as from a
                // failed probe, for a multiple of those windows.
                if saturated && gap < reference.saturating_mul(2) {
                    self.climb_wait_ns = self.wait_ns + self.wait_ns / 8;
                    return None;
                }
                if self.slow_windows == 0 {
                    self.slow_since = now;
                }
                self.slow_windows += 1;
                // (A window of a few short polls may fall between two clumps: half the rate
                // loses the gain only over a round of the depth.)
                let full = count >= self.round();
                if self.slow_windows >= GAIN_LOST_WINDOWS
                    || full && gap >= reference.saturating_mul(2)
                {
                    self.gain = false;
                    self.probed = true;
                    self.gain_held_ns = self.slow_since.saturating_sub(self.episode_start);
                    self.episode_start = self.slow_since;
                    return Some(Ending::Stalled);
                }
                self.climbing = false;
                self.climb_wait_ns = match busy {
                    Some(busy) if busy >= DESCEND_BUSY_PERCENT => self.wait_ns,
                    Some(_) => self.wait_ns - self.wait_ns / 4,
                    None => self.wait_ns / 2,
                }
                .max(MIN_WAIT_NS);
                return None;
            }
            self.slow_windows = 0;
            self.climb_wait_ns = match busy {
                // The CPU's load says where the wait stands: still saturated, a longer one
                // saves more; idling, the application ran out of work.
                _ if saturated => self.wait_ns + self.wait_ns / 8,
                Some(busy) if busy < DESCEND_BUSY_PERCENT => self.wait_ns - self.wait_ns / 8,
                Some(_) => self.wait_ns,
                // Without it, perturb and observe: the wait moves an eighth per window, and
                // turns back when the rate fell since the last one.
                None => {
                    if gap > last {
                        self.climbing = !self.climbing;
                    }
                    if self.climbing {
                        self.wait_ns + self.wait_ns / 8
                    } else {
                        self.wait_ns - self.wait_ns / 8
                    }
                }
            }
            .max(MIN_WAIT_NS);
            return None;
        }
        // On a CPU mostly idle, polls within the latency budget do not make a queue faster
        // than interrupts do: a rate that beats the reference says it is stale. (A busier CPU
        // gets time back from every interrupt saved.)
        let stale = self.est.busy_percent < STALE_BUSY_PERCENT
            && smooth.saturating_mul(100 + GAIN_PERCENT) < reference.saturating_mul(100);
        if gap > reference + reference / 4
            || gap < reference - reference / 4
            || stale
            || self.est.depth_changed(self.est.depth_x16)
        {
            return Some(Ending::Resample);
        }
        self.charge(gap, count);
        if self.est.loss_credit < 0 {
            return Some(Ending::Spent);
        }
        let rate = &mut self.est.rate_x256;
        if smooth.saturating_mul(1000) > reference.saturating_mul(1000 + LOSS_PERMILLE) {
            let loss_permille = (smooth - reference).saturating_mul(1000) / smooth;
            let keep_x256 = (LOSS_AIM_PERMILLE * 256 / loss_permille.max(1)).clamp(64, 192);
            *rate = *rate * keep_x256 / 256;
            // The smoothed rate still remembers the longer wait.
            self.smooth_gap_ns = reference;
        } else if smooth.saturating_mul(2000) <= reference.saturating_mul(2000 + LOSS_PERMILLE) {
            *rate = ((*rate).max(FIT_MIN) * 5 / 4).min(FIT_ONE);
        }
        None
    }

    /// The gain this episode holds at `now`, to be confirmed against interrupts' rate again.
    fn held_gain(&self, now: u64) -> GainCandidate {
        GainCandidate {
            gap_ns: self.smooth_gap_ns,
            wait_ns: self.wait_ns,
            duration_ns: now.saturating_sub(self.episode_start),
            probe: false,
        }
    }

    /// Ends the episode to measure interrupts' rate afresh: the next sample takes `candidate`'s
    /// gain only if its rate beats that one.
    fn confirm_gain(&mut self, candidate: GainCandidate) -> Ending {
        self.gain_to_confirm = Some(candidate);
        // A loop the CPU paces takes a while to fall back to interrupts' pace: its reference
        // waits for a longer warm-up.
        self.est.forget_rate();
        self.est.ref_warmup = self.est.ref_warmup.max(BASELINE_MIN);
        Ending::Resample
    }

    /// The poll within the latency budget: its wait lies between the shortest that pays and the
    /// budget's, where [`Estimates::rate_x256`] puts it. `None` when no paying wait fits the
    /// budget.
    fn latency_plan(&self, p: &Params) -> Option<Plan> {
        let est = &self.est;
        let budget = est.latency_wait(p)?;
        let paying = est.wait_for(est.paying_batch(), p);
        if paying > budget {
            return None;
        }
        let wanted = paying + (budget - paying).saturating_mul(est.rate_x256) / FIT_ONE;
        let mut plan = est.plan(p, wanted, false)?;
        plan.capped = plan.wait_ns < budget;
        Some(plan)
    }

    /// Charges the loss credit for `count` completions that came a mean `gap` apart while
    /// polling, against interrupts' rate (a gain refunds): the sum over windows is unbiased,
    /// however noisy one window is.
    fn charge(&mut self, gap: u64, count: u64) {
        let gap = gap.max(1) as i64;
        let loss_permille = (gap - self.est.ref_gap_ns as i64).saturating_mul(1000) / gap;
        self.est.loss_credit = self
            .est
            .loss_credit
            .saturating_sub(loss_permille.saturating_mul(count as i64))
            .min(MAX_LOSS_CREDIT);
    }

    /// Judges the window if it is complete. A closed loop paced by the CPU takes a round of its
    /// depth to speed up, so the judgment that may find the CPU setting the pace waits for
    /// twice the completions and at least [`JUDGE_POLLS`] polls. A probe that halves the rate
    /// fails once interrupts' rate would have brought a window's completions; one that loses a
    /// quarter, once the time of that judgment is up. Windows end at a poll that `reaped`
    /// something: one ending in silence would miss the clump due next (the stall rule judges
    /// silence).
    fn window_verdict(
        &mut self,
        now: u64,
        reaped: u64,
        cpu_idle_ns: &mut impl FnMut() -> Option<u64>,
    ) -> Option<Ending> {
        let count = self.window_count;
        // Completions interrupts' rate would have brought by now.
        let expected = now.saturating_sub(self.window_start) / self.est.ref_gap_ns.max(1);
        let least = self.round();
        if self.probe_climbing {
            // A probe's wait first seeks where the CPU is just saturated; one that halves the
            // rate meanwhile fails once interrupts would have brought a window's completions.
            let expected = now.saturating_sub(self.episode_start) / self.est.ref_gap_ns.max(1);
            if expected >= least && self.episode_reaped * 2 < expected {
                return Some(Ending::Stalled);
            }
            if self.window_polls >= JUDGE_POLLS && reaped > 0 {
                // Up while the CPU stays saturated, down while it idles; settled where it is
                // just saturated, when the search turns back, or after MAX_PROBE_CLIMBS steps.
                let busy = self.window_busy(now, cpu_idle_ns);
                let up = busy.is_some_and(|b| b >= CLIMB_BUSY_PERCENT);
                let down = busy.is_some_and(|b| b < DESCEND_BUSY_PERCENT);
                let turned = self.probe_climbs > 0 && self.climbing != up;
                if (up || down) && self.probe_climbs < MAX_PROBE_CLIMBS {
                    self.probe_climbs += 1;
                    self.climbing = up;
                    self.climb_wait_ns = match busy {
                        _ if up => self.wait_ns + self.wait_ns / 4,
                        // Down in proportion to the idle time, a fifth at least and half at
                        // most.
                        Some(busy) => self.wait_ns * busy.clamp(50, 80) / 100,
                        None => self.wait_ns,
                    };
                }
                if !(up || down) || turned || self.probe_climbs >= MAX_PROBE_CLIMBS {
                    // The rate is judged from here.
                    self.probe_climbing = false;
                }
                self.restart_window(now);
            }
            return None;
        }
        let full = if !self.judged && self.may_gain {
            if self.probe
                && (expected >= least && count * 2 < expected
                    || expected >= 2 * least && count * 4 < expected * 3)
            {
                return Some(Ending::Stalled);
            }
            count >= 2 * least && self.window_polls >= JUDGE_POLLS
        } else {
            count >= least || self.window_polls >= JUDGE_POLLS
        };
        if !full || reaped == 0 {
            return None;
        }
        let busy = if self.gain {
            self.window_busy(now, cpu_idle_ns)
        } else {
            None
        };
        self.judge(now, busy)
    }

    /// How busy the CPU was since the window's first poll, in percent; `None` where the kernel
    /// cannot tell.
    fn window_busy(&self, now: u64, cpu_idle_ns: &mut impl FnMut() -> Option<u64>) -> Option<u64> {
        let (since, idle_then) = self.window_idle?;
        let elapsed = now.checked_sub(since).filter(|&e| e > 0)?;
        let idle = cpu_idle_ns()?.saturating_sub(idle_then);
        Some(100u64.saturating_sub(idle.saturating_mul(100) / elapsed))
    }

    /// The completions a window is judged over: a round of the depth, at least [`JUDGE_MIN`].
    fn round(&self) -> u64 {
        JUDGE_MIN.max(self.est.depth_x16 / 16)
    }

    /// Starts a new judgment window at `now`.
    fn restart_window(&mut self, now: u64) {
        self.window_start = now;
        self.window_count = 0;
        self.window_polls = 0;
        self.window_idle = None;
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
        // A wait held down by a cap or by the completion rate cannot grow.
        if ratio > FIT_ONE && (self.capped || self.est.rate_x256 < FIT_ONE) {
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
        mut cpu_idle_ns: impl FnMut() -> Option<u64>,
    ) -> Action {
        if self.stage != Stage::Poll {
            // Only reachable if the driver broke the protocol; never leave a vector masked.
            return Action::StopPolling {
                ending: Ending::Disabled,
            };
        }
        self.changed = true;
        self.episode_polls = self.episode_polls.saturating_add(1);
        self.est.slack_ns = ewma(self.est.slack_ns, late_ns.max(1));
        if let Some(latency) = reaped.mean_latency_ns() {
            self.est.poll_latency_ns = ewma(self.est.poll_latency_ns, latency);
            // Beyond the latency budget the wait is not corrected by the latency it adds.
            if !self.gain && !self.probe {
                self.fit(p);
            }
        }
        let reaped = u64::from(reaped.count);
        self.est.count_completions(reaped, true);
        self.episode_reaped = self.episode_reaped.saturating_add(reaped);
        self.window_count = self.window_count.saturating_add(reaped);
        self.window_polls += 1;
        // On a busy CPU, where a window's first poll came: the CPU's load over the window
        // guides a wait beyond the latency budget.
        if self.may_gain && self.window_idle.is_none() && (self.probe_climbing || self.gain) {
            self.window_idle = cpu_idle_ns().map(|idle| (now, idle));
        }
        let verdict = self.window_verdict(now, reaped, &mut cpu_idle_ns);
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
        // Nothing left in flight: nothing can come before the application submits again. On a
        // busy CPU it may be about to (one more look); elsewhere another poll would only find
        // the next round a device latency away.
        if inflight == 0 && (reaped == 0 || !self.may_gain) {
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
        // A window that spans a stall reads as the load changing: the stall decides first.
        if let Some(ending) = verdict {
            return self.end_episode(now, ending, 1, p);
        }
        // The rate, depth or timer lateness changed: no batch fits the budget any more.
        let mut plan = if self.gain || self.probe {
            self.est.plan(p, self.climb_wait_ns, true)
        } else {
            self.latency_plan(p)
        };
        // The timer turned out later than the budget allows: on a busy CPU, the episode goes on
        // as a probe.
        if plan.is_none() && self.may_gain && !self.judged && !self.probe {
            plan = self.est.probe_plan(p);
            if let Some(probe) = plan {
                self.probe = true;
                self.probed = true;
                self.probe_climbing = true;
                self.probe_climbs = 0;
                self.climb_wait_ns = probe.wait_ns;
                self.restart_window(now);
            }
        }
        let Some(plan) = plan else {
            // Whatever the polls saved, they added more latency than the budget allows.
            self.episode_reaped = 0;
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
        self.sample_idle = None;
        self.stage = Stage::Sample;
        self.sample_start = Some(now);
        self.sample_count = 0;
        self.sample_irqs = 0;
        self.sample_depth = 0;
        self.sample_timed = 0;
        self.sample_latency_sum = 0;
    }

    /// Whether the episode paid for its interrupts: its polls reaped clearly more than
    /// interrupts would have for as many interrupts (one timer interrupt per poll and the
    /// unmask's replayed one), at what interrupts reap.
    fn episode_paid_off(&self) -> bool {
        let interrupts = u64::from(self.episode_polls) + 1;
        // Interrupts that reaped next to nothing each (empty ones in the sample) make any reap
        // look like a saving: at least a batch must have been reaped.
        self.episode_reaped >= MIN_BATCH
            && self.episode_reaped.saturating_mul(16 * 8)
                >= interrupts
                    .saturating_mul(self.est.irq_batch_x16())
                    .saturating_mul(MIN_GAIN_EIGHTHS)
    }

    fn end_episode(&mut self, now: u64, ending: Ending, behind: u64, p: &Params) -> Action {
        self.changed = true;
        // The episode's last, unjudged window costs the credit too (unless the load drained:
        // its rate fell because arrivals stopped), and the round after it earns none.
        if self.window_count > 0 && !self.gain && ending != Ending::Idle {
            let span = now.saturating_sub(self.window_start);
            self.charge(span / self.window_count, self.window_count);
        }
        self.est.credit_holdoff = self.est.depth_x16 / 16;
        // A probe that ends before its judgment showed nothing.
        let paid_off = !self.probe && self.episode_paid_off();
        // A gain lost after it held long enough to have earned what the slow stretch that lost
        // it can have cost (it was confirmed GAIN_PERCENT faster than interrupts, the stretch
        // lost at most all of its time) is sampled again at once, as a stall after polls that
        // paid: a busy host or a burst elsewhere must not give up the gain for a backoff's
        // length. Lost again sooner, the gain backs off as a failed probe.
        let gain_covers_loss = self.gain_held_ns > 0
            && self.gain_held_ns.saturating_mul(GAIN_PERCENT)
                >= now.saturating_sub(self.episode_start).saturating_mul(100);
        if ending == Ending::Resample {
            self.est.forget_rate();
        }
        // Paced by the CPU, a closed loop's device runs empty while the application holds
        // every request: the gain holds if the next sample still finds interrupts slower.
        if ending == Ending::Idle && self.gain {
            self.gain_to_confirm = Some(self.held_gain(now));
        }
        let mut irqs = 0;
        let backoff = match ending {
            Ending::Capped | Ending::Disabled | Ending::Resample | Ending::Spent => {
                self.failures = 0;
                0
            }
            // The load drained, or thinned out or paused after polls that paid: a fresh sample
            // on interrupts tells which, at no more than a sample's cost. (A gain lost is a
            // failed probe, however much its polls reaped, unless the gain covers it.)
            Ending::Idle | Ending::Stalled
                if paid_off && (ending == Ending::Idle || !self.probed || gain_covers_loss) =>
            {
                self.failures = 0;
                0
            }
            Ending::Idle | Ending::Stalled => {
                if paid_off {
                    self.failures = 0;
                } else {
                    self.failures = (self.failures + 1).min(MAX_FAILURES);
                }
                // What a failed episode cost in interrupts (its polls and the one replayed on
                // unmask), a small share of those taken until the next try: counted, as
                // interrupts come in clumps.
                if !paid_off {
                    irqs = (u64::from(self.episode_polls) + 1).saturating_mul(FAILURE_COST_SHARE);
                }
                let least = if self.probed && !self.gain {
                    now.saturating_sub(self.episode_start)
                        .saturating_mul(PROBE_BACKOFF_FACTOR)
                } else {
                    0
                };
                self.backoff_for(least, behind, p)
            }
        };
        self.enter_backoff(now, backoff);
        self.backoff_irqs = irqs;
        self.backoff_irqs_until = now.saturating_add(p.backoff_max_ns);
        Action::StopPolling { ending }
    }

    /// The backoff after an episode that stalled or failed: `backoff_us` (at least a few
    /// service latencies) times how far `behind` it fell, grown for each consecutive failure
    /// after the first, and at least `least` (what the episode's own cost asks for, already in
    /// proportion to it: not grown); at most `backoff_max_us`.
    fn backoff_for(&self, least: u64, behind: u64, p: &Params) -> u64 {
        let mut backoff = p
            .backoff_ns
            .max(self.est.latency_ns.saturating_mul(BACKOFF_LATENCIES))
            .saturating_mul(behind);
        for _ in 1..self.failures {
            backoff = backoff.saturating_mul(u64::from(p.backoff_growth));
            if backoff >= p.backoff_max_ns {
                break;
            }
        }
        backoff.max(least).min(p.backoff_max_ns)
    }

    /// Stays on interrupts for `backoff` from `now` without sampling; none: samples at once.
    fn enter_backoff(&mut self, now: u64, backoff: u64) {
        self.backoff_ns = backoff;
        self.backoff_irqs = 0;
        if backoff == 0 {
            // The sample begins at the next interrupt: until then the queue still runs at the
            // episode's pace (a closed loop's application works through what the last poll
            // reaped, with nothing in flight), which is not interrupts' pace.
            self.restart_sample(now);
            self.sample_start = None;
        } else {
            self.stage = Stage::Backoff;
            self.backoff_until = now.saturating_add(backoff);
            self.sample_start = None;
            self.last_irq = now;
        }
    }

    /// A probe failed against interrupts' rate measured afresh after it: backs off for at
    /// least `least`.
    fn back_off(&mut self, now: u64, least: u64, p: &Params) -> Action {
        self.changed = true;
        self.failures = (self.failures + 1).min(MAX_FAILURES);
        let backoff = self.backoff_for(least, 1, p);
        self.enter_backoff(now, backoff);
        Action::Stay
    }
}
