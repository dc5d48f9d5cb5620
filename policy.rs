// SPDX-License-Identifier: GPL-2.0

//! The adaptive interrupt polling policy of one I/O queue, as a pure state machine.
//!
//! This file uses nothing but `core`: the module compiles it in, and the host compiles the very
//! same file for `cargo test` (tools/policy-test). It decides; the driver acts: `irq.rs` masks
//! and unmasks the vector, `hrtimer.rs` arms the poll timer, `queue.rs` drains the CQ.
//!
//! ```text
//!              rate fills a batch within max_delay, a batch
//!              is in flight, IRQs reap less than a batch each
//!   +--------+ ------------------------------------> +------+  kept up: re-arm with
//!   | Sample |         mask vector, arm timer        | Poll |  wait = batch / rate
//!   +--------+ <------------------------------------ +------+ ---+
//!       ^        capped / idle after a good episode   |   ^      |
//!       |        (unmask, reap once more)             |   +------+
//!       |                                             | stalled, or idle too early:
//!       |         backoff expired                     | unmask, reap once more
//!       +----------------------------- +---------+ <--+
//!                                      | Backoff |  wait = base * behind * growth^failures,
//!                                      +---------+  at most backoff_max
//! ```
//!
//! Times are nanoseconds of a monotonic clock. Rates are kept as the mean gap between two
//! completions (`gap_ns`), so no division by a rate is ever needed and no floating point is used.

/// Shortest poll wait: below about a microsecond programming the timer costs more than it saves.
pub(crate) const MIN_WAIT_NS: u64 = 1_000;

/// A poll that reaps at least this share of what the rate estimate predicted is "productive".
pub(crate) const KEEP_UP_PERCENT: u64 = 50;

/// Polls that must keep up before an episode counts as worth its cost (one mask, one unmask and
/// the interrupt the device replays on unmask: about three interrupts' worth of work).
pub(crate) const MIN_PRODUCTIVE_POLLS: u32 = 4;

/// "How far behind" saturates here, so one empty poll cannot ask for an absurd backoff.
pub(crate) const MAX_BEHIND: u64 = 16;

/// A sample is restarted when no interrupt came for this many latency windows (the queue went
/// idle, and the gap would make a starting burst look slow); a poll episode tolerates silence
/// of at most this many windows.
pub(crate) const SAMPLE_IDLE_WINDOWS: u64 = 8;

/// Consecutive failed episodes beyond this do not grow the backoff further (it is capped anyway).
const MAX_FAILURES: u32 = 32;

/// Tunables, read afresh at every decision so runtime changes apply at the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    /// Master switch; when off the queue never leaves interrupts.
    pub(crate) enabled: bool,
    /// Completions per rate sample while on interrupts.
    pub(crate) sample_size: u32,
    /// Completions each poll aims to collect.
    pub(crate) target_batch: u32,
    /// Latency window: the longest wait between two polls.
    pub(crate) max_delay_ns: u64,
    /// Backoff after an episode that fell behind, before growth and the "behind" factor.
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
    pub(crate) const BACKOFF_US: usize = 4;
    pub(crate) const BACKOFF_MAX_US: usize = 5;
    pub(crate) const BACKOFF_GROWTH: usize = 6;
    pub(crate) const EPISODE_POLLS: usize = 7;
    pub(crate) const COUNT: usize = 8;
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
        default: 64,
        min: 8,
        max: 65536,
        description: "completions per rate sample while on interrupts",
    },
    ParamSpec {
        name: "target_batch",
        unit: "completions",
        default: 8,
        min: 2,
        max: 1024,
        description: "completions each poll aims to collect",
    },
    ParamSpec {
        name: "max_delay_us",
        unit: "us",
        default: 100,
        min: 5,
        max: 10000,
        description: "latency window: longest wait between two polls",
    },
    ParamSpec {
        name: "backoff_us",
        unit: "us",
        default: 1000,
        min: 10,
        max: 1_000_000,
        description: "base wait on interrupts after a poll episode fell behind",
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
    /// On interrupts, measuring the completion rate.
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
    /// The poll reaped far fewer completions than the rate predicted, or the rate no longer
    /// fills a batch within the latency window.
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

/// Per-queue policy state. Owned by the queue and only touched under its CQ lock.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    stage: Stage,
    /// Start of the current rate sample; `None` until the first interrupt opens one.
    sample_start: Option<u64>,
    /// Completions counted in the current sample, and the interrupts that reaped them.
    sample_count: u64,
    sample_irqs: u64,
    /// Time of the last interrupt event (to notice an idle queue).
    last_irq: u64,
    /// Estimated mean time between two completions.
    gap_ns: u64,
    /// Wait requested from the timer for the current or last poll.
    wait_ns: u64,
    /// Time of the last poll decision (the start of the interval the next poll measures).
    last_poll: u64,
    /// Time of the last poll that reaped anything (or of the start of the episode).
    last_reap: u64,
    /// Polls in the current episode, and how many of them kept up.
    episode_polls: u32,
    productive_polls: u32,
    /// Consecutive episodes that did not pay off.
    failures: u32,
    /// Current backoff and when it ends.
    backoff_ns: u64,
    backoff_until: u64,
}

/// Completions per second for a mean gap of `gap_ns` between them (0 for no estimate).
pub(crate) fn rate_per_sec(gap_ns: u64) -> u64 {
    1_000_000_000u64.checked_div(gap_ns).unwrap_or(0)
}

impl Policy {
    pub(crate) const fn new() -> Self {
        Self {
            stage: Stage::Sample,
            sample_start: None,
            sample_count: 0,
            sample_irqs: 0,
            last_irq: 0,
            gap_ns: 0,
            wait_ns: 0,
            last_poll: 0,
            last_reap: 0,
            episode_polls: 0,
            productive_polls: 0,
            failures: 0,
            backoff_ns: 0,
            backoff_until: 0,
        }
    }

    pub(crate) fn stage(&self) -> Stage {
        self.stage
    }

    /// Estimated time between two completions (0 before the first sample).
    pub(crate) fn gap_ns(&self) -> u64 {
        self.gap_ns
    }

    /// The last wait asked of the poll timer.
    pub(crate) fn wait_ns(&self) -> u64 {
        self.wait_ns
    }

    /// The current (or last) backoff.
    pub(crate) fn backoff_ns(&self) -> u64 {
        self.backoff_ns
    }

    /// Consecutive poll episodes that did not pay off.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// The IRQ handler reaped `reaped` completions at `now`; `inflight` remain outstanding.
    /// Returns [`Action::Stay`] or [`Action::StartPolling`].
    pub(crate) fn on_irq(&mut self, now: u64, reaped: u32, inflight: u32, p: &Params) -> Action {
        let since_last = now.saturating_sub(self.last_irq);
        self.last_irq = now;
        match self.stage {
            // The timer owns a polling queue; an interrupt slipping through changes nothing.
            Stage::Poll => return Action::Stay,
            Stage::Backoff if now < self.backoff_until => return Action::Stay,
            Stage::Backoff => {
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
        if since_last > p.max_delay_ns.saturating_mul(SAMPLE_IDLE_WINDOWS) {
            self.restart_sample(now);
            return Action::Stay;
        }
        self.sample_count = self.sample_count.saturating_add(u64::from(reaped));
        self.sample_irqs = self.sample_irqs.saturating_add(1);
        if self.sample_count < u64::from(p.sample_size) {
            return Action::Stay;
        }
        self.gap_ns = (now.saturating_sub(start) / self.sample_count.max(1)).max(1);
        // Interrupts that already reap a batch each (the device posts completions in clumps)
        // leave nothing for polling to save.
        let batched =
            self.sample_count >= self.sample_irqs.saturating_mul(u64::from(p.target_batch));
        self.restart_sample(now);
        let wait = self.batch_wait(p);
        if wait > p.max_delay_ns || inflight < p.target_batch || batched {
            return Action::Stay;
        }
        self.stage = Stage::Poll;
        self.wait_ns = wait.max(MIN_WAIT_NS);
        self.last_poll = now;
        self.last_reap = now;
        self.episode_polls = 0;
        self.productive_polls = 0;
        Action::StartPolling {
            wait_ns: self.wait_ns,
        }
    }

    /// The poll timer reaped `reaped` completions at `now`; `inflight` remain outstanding.
    /// Returns [`Action::Rearm`] or [`Action::StopPolling`].
    pub(crate) fn on_timer(&mut self, now: u64, reaped: u32, inflight: u32, p: &Params) -> Action {
        if self.stage != Stage::Poll {
            // Only reachable if the driver broke the protocol; never leave a vector masked.
            return Action::StopPolling {
                ending: Ending::Disabled,
            };
        }
        let elapsed = now.saturating_sub(self.last_poll).max(1);
        self.last_poll = now;
        self.episode_polls = self.episode_polls.saturating_add(1);
        let reaped = u64::from(reaped);
        if reaped * 100
            >= (elapsed / self.gap_ns.max(1))
                .max(1)
                .saturating_mul(KEEP_UP_PERCENT)
        {
            self.productive_polls = self.productive_polls.saturating_add(1);
        }
        if reaped > 0 {
            // Measured since the last poll that found anything: empty polls in between are part
            // of the interval, so clumped arrivals do not bias the estimate.
            let span = now.saturating_sub(self.last_reap).max(1);
            self.last_reap = now;
            // Moving average, a quarter weight for the newest interval.
            self.gap_ns = (self
                .gap_ns
                .saturating_mul(3)
                .saturating_add(span / reaped.max(1))
                / 4)
            .max(1);
        }

        if !p.enabled {
            return self.end_episode(now, Ending::Disabled, 1, p);
        }
        if reaped == 0 && inflight == 0 {
            return self.end_episode(now, Ending::Idle, 1, p);
        }
        // Completions come in clumps: a closed loop resubmits what one poll reaped all at once,
        // and those complete together one latency later. Silence is a stall only when it lasts
        // longer than the work in flight should take at the estimated rate (Little's law).
        let silence = now.saturating_sub(self.last_reap);
        let tolerance = (u64::from(inflight) * self.gap_ns)
            .min(p.max_delay_ns.saturating_mul(SAMPLE_IDLE_WINDOWS))
            .max(self.wait_ns.saturating_mul(2));
        if silence > tolerance {
            let behind = (silence / self.wait_ns.max(1)).clamp(1, MAX_BEHIND);
            return self.end_episode(now, Ending::Stalled, behind, p);
        }
        let wait = self.batch_wait(p);
        if wait > p.max_delay_ns {
            let behind = wait.div_ceil(p.max_delay_ns.max(1)).clamp(1, MAX_BEHIND);
            return self.end_episode(now, Ending::Stalled, behind, p);
        }
        if self.episode_polls >= p.episode_polls {
            return self.end_episode(now, Ending::Capped, 1, p);
        }
        self.wait_ns = wait.max(MIN_WAIT_NS);
        Action::Rearm {
            wait_ns: self.wait_ns,
        }
    }

    /// Leave polling without a timer decision (teardown or controller reset cancelled the
    /// timer). Returns whether the queue was polling, i.e. whether its vector must be unmasked.
    pub(crate) fn abort_polling(&mut self) -> bool {
        let was_polling = self.stage == Stage::Poll;
        if was_polling {
            self.stage = Stage::Sample;
            self.sample_start = None;
        }
        was_polling
    }

    /// Time to collect one batch at the estimated rate.
    fn batch_wait(&self, p: &Params) -> u64 {
        self.gap_ns.saturating_mul(u64::from(p.target_batch))
    }

    fn restart_sample(&mut self, now: u64) {
        self.stage = Stage::Sample;
        self.sample_start = Some(now);
        self.sample_count = 0;
        self.sample_irqs = 0;
    }

    fn end_episode(&mut self, now: u64, ending: Ending, behind: u64, p: &Params) -> Action {
        let paid_off = self.productive_polls >= MIN_PRODUCTIVE_POLLS;
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
                // The first failure waits the base backoff; each further one grows it.
                let mut backoff = p.backoff_ns.saturating_mul(behind);
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
        }
        Action::StopPolling { ending }
    }
}
