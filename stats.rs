// SPDX-License-Identifier: GPL-2.0

//! Per-queue statistics, shown in debugfs as stable `key: value` lines
//! (`/sys/kernel/debug/nvme_adaptive/<controller>/q<N>`).
//!
//! Counters are only written by the holder of the queue's CQ lock (submission counters by the
//! SQ lock holder), so each is a plain load and store, no atomic read-modify-write: cheap
//! enough to leave on. The one exception says so. The counters bumped for every command,
//! interrupt or timer expiry keep their count in a [`Tally`] under that lock and only store
//! it. Readers may see a slightly stale mix of values.

use kernel::{
    fmt,
    sync::atomic::{
        Atomic,
        Relaxed, //
    }, //
};

use crate::policy::{
    self,
    Ending,
    Estimates,
    Stage, //
};

/// One counter; see the module documentation for why `add` is not atomic.
pub(crate) struct Counter(Atomic<u64>);

impl Default for Counter {
    fn default() -> Self {
        Self(Atomic::new(0))
    }
}

impl Counter {
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// The writer's side of a counter bumped on the hot path: the count itself, kept in state the
/// writer's lock protects, so that counting stores the counter without loading it. The
/// counter has no other writer.
#[derive(Default)]
pub(crate) struct Tally(u64);

impl Tally {
    #[inline]
    pub(crate) fn add(&mut self, n: u64, counter: &Counter) {
        self.0 = self.0.wrapping_add(n);
        counter.0.store(self.0, Relaxed);
    }
}

/// The tallies of the counters the CQ lock holder bumps on every interrupt or timer expiry.
#[derive(Default)]
pub(crate) struct CqTallies {
    irqs: Tally,
    reaped_irq: Tally,
    timer_expiries: Tally,
    reaped_timer: Tally,
}

/// A value the CQ lock holder publishes.
pub(crate) struct Gauge(Atomic<u64>);

impl Default for Gauge {
    fn default() -> Self {
        Self(Atomic::new(0))
    }
}

impl Gauge {
    #[inline]
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[derive(Default)]
pub(crate) struct QueueStats {
    /// Completions still to be handled twice (`inject_duplicates` in debugfs).
    #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
    pub(crate) duplicates_to_inject: Gauge,
    /// Whether the queue has an interrupt vector (1) or is a poll queue (0).
    pub(crate) has_vector: Gauge,
    /// Written through the SQ's [`Tally`] only.
    pub(crate) submitted: Counter,
    /// Completions reaped by the interrupt handler, the poll timer (including the reap right
    /// after unmasking), and blk-mq polling (io_uring `hipri` on poll queues).
    reaped_irq: Counter,
    reaped_timer: Counter,
    pub(crate) reaped_blk_poll: Counter,
    irqs: Counter,
    pub(crate) irqs_empty: Counter,
    timer_expiries: Counter,
    pub(crate) timer_empty: Counter,
    pub(crate) episodes: Counter,
    pub(crate) ended_stalled: Counter,
    pub(crate) ended_idle: Counter,
    pub(crate) ended_capped: Counter,
    pub(crate) ended_resample: Counter,
    pub(crate) ended_spent: Counter,
    pub(crate) ended_disabled: Counter,
    /// Commands nvme-core issued again (after an error status, or cancelled by a reset).
    pub(crate) retries: Counter,
    /// Completions that named a command not in flight (stale or duplicate), dropped.
    pub(crate) bad_completions: Counter,
    pub(crate) stage: Gauge,
    pub(crate) masked: Gauge,
    /// What the policy measured (see [`Estimates`]): the gap is shown as a rate, the depth and
    /// per-interrupt counts in whole commands, the fit in percent (the divisions are left to
    /// the reader).
    gap_ns: Gauge,
    depth_x16: Gauge,
    latency_ns: Gauge,
    poll_latency_ns: Gauge,
    fit_x256: Gauge,
    per_irq_x16: Gauge,
    slack_ns: Gauge,
    ref_gap_ns: Gauge,
    busy_percent: Gauge,
    rate_x256: Gauge,
    loss_credit: Gauge,
    pub(crate) paced_by_cpu: Gauge,
    pub(crate) wait_ns: Gauge,
    /// Completions the current or last poll aims to collect.
    pub(crate) batch: Gauge,
    pub(crate) backoff_ns: Gauge,
    pub(crate) failures: Gauge,
}

impl QueueStats {
    pub(crate) fn set_stage(&self, stage: Stage) {
        self.stage.set(match stage {
            Stage::Sample => 0,
            Stage::Poll => 1,
            Stage::Backoff => 2,
        });
    }

    pub(crate) fn set_estimates(&self, est: &Estimates) {
        self.gap_ns.set(est.gap_ns);
        self.depth_x16.set(est.depth_x16);
        self.latency_ns.set(est.latency_ns);
        self.poll_latency_ns.set(est.poll_latency_ns);
        self.fit_x256.set(est.fit_x256);
        self.per_irq_x16.set(est.per_irq_x16);
        self.slack_ns.set(est.slack_ns);
        self.ref_gap_ns.set(est.ref_gap_ns);
        self.busy_percent.set(est.busy_percent);
        self.rate_x256.set(est.rate_x256);
        // Shown in whole completions; negative credit ends an episode at once, so never shown.
        self.loss_credit
            .set(est.loss_credit.max(0).unsigned_abs() / 1000);
    }

    /// An interrupt found `reaped` completions.
    #[inline]
    pub(crate) fn count_irq(&self, tallies: &mut CqTallies, reaped: u32) {
        tallies.irqs.add(1, &self.irqs);
        tallies.reaped_irq.add(reaped.into(), &self.reaped_irq);
        if reaped == 0 {
            self.irqs_empty.add(1);
        }
    }

    /// A poll timer expiry found `reaped` completions.
    pub(crate) fn count_expiry(&self, tallies: &mut CqTallies, reaped: u32) {
        tallies.timer_expiries.add(1, &self.timer_expiries);
        self.count_timer_reap(tallies, reaped);
        if reaped == 0 {
            self.timer_empty.add(1);
        }
    }

    /// The poll timer reaped `reaped` completions (in an expiry, or right after unmasking).
    pub(crate) fn count_timer_reap(&self, tallies: &mut CqTallies, reaped: u32) {
        tallies.reaped_timer.add(reaped.into(), &self.reaped_timer);
    }

    /// Whether the next completion is to be handled twice (fault injection: a controller that
    /// posts a duplicate, which must be counted in `bad_completions` and dropped).
    #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
    #[inline]
    pub(crate) fn take_duplicate(&self) -> bool {
        let left = &self.duplicates_to_inject.0;
        let n = left.load(Relaxed);
        n > 0 && left.cmpxchg(n, n - 1, Relaxed).is_ok()
    }

    pub(crate) fn count_ending(&self, ending: Ending) {
        match ending {
            Ending::Stalled => self.ended_stalled.add(1),
            Ending::Idle => self.ended_idle.add(1),
            Ending::Capped => self.ended_capped.add(1),
            Ending::Resample => self.ended_resample.add(1),
            Ending::Spent => self.ended_spent.add(1),
            Ending::Disabled => self.ended_disabled.add(1),
        }
    }

    fn stage_name(&self) -> &'static str {
        match self.stage.get() {
            1 => Stage::Poll.name(),
            2 => Stage::Backoff.name(),
            _ => Stage::Sample.name(),
        }
    }

    /// The debugfs file: one `key: value` per line, names and order stable for tools.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let completed =
            self.reaped_irq.get() + self.reaped_timer.get() + self.reaped_blk_poll.get();
        writeln!(f, "vector: {}", self.has_vector.get())?;
        writeln!(f, "stage: {}", self.stage_name())?;
        writeln!(f, "masked: {}", self.masked.get())?;
        writeln!(f, "submitted: {}", self.submitted.get())?;
        writeln!(f, "completed: {completed}")?;
        writeln!(f, "reaped_irq: {}", self.reaped_irq.get())?;
        writeln!(f, "reaped_poll: {}", self.reaped_timer.get())?;
        writeln!(f, "reaped_blk_poll: {}", self.reaped_blk_poll.get())?;
        writeln!(f, "irqs: {}", self.irqs.get())?;
        writeln!(f, "irqs_empty: {}", self.irqs_empty.get())?;
        writeln!(f, "timer_expiries: {}", self.timer_expiries.get())?;
        writeln!(f, "timer_empty: {}", self.timer_empty.get())?;
        writeln!(f, "episodes: {}", self.episodes.get())?;
        writeln!(f, "ended_stalled: {}", self.ended_stalled.get())?;
        writeln!(f, "ended_idle: {}", self.ended_idle.get())?;
        writeln!(f, "ended_capped: {}", self.ended_capped.get())?;
        writeln!(f, "ended_resample: {}", self.ended_resample.get())?;
        writeln!(f, "ended_spent: {}", self.ended_spent.get())?;
        writeln!(f, "ended_disabled: {}", self.ended_disabled.get())?;
        writeln!(
            f,
            "rate_per_sec: {}",
            policy::rate_per_sec(self.gap_ns.get())
        )?;
        writeln!(
            f,
            "irq_rate_per_sec: {}",
            policy::rate_per_sec(self.ref_gap_ns.get())
        )?;
        writeln!(f, "depth: {}", self.depth_x16.get() / 16)?;
        writeln!(f, "per_irq: {}", self.per_irq_x16.get() / 16)?;
        writeln!(f, "latency_ns: {}", self.latency_ns.get())?;
        writeln!(f, "poll_latency_ns: {}", self.poll_latency_ns.get())?;
        writeln!(f, "slack_ns: {}", self.slack_ns.get())?;
        writeln!(f, "cpu_busy_percent: {}", self.busy_percent.get())?;
        writeln!(f, "paced_by_cpu: {}", self.paced_by_cpu.get())?;
        writeln!(
            f,
            "wait_range_percent: {}",
            self.rate_x256.get() * 100 / 256
        )?;
        writeln!(f, "loss_credit: {}", self.loss_credit.get())?;
        writeln!(f, "wait_fit_percent: {}", self.fit_x256.get() * 100 / 256)?;
        writeln!(f, "wait_ns: {}", self.wait_ns.get())?;
        writeln!(f, "batch: {}", self.batch.get())?;
        writeln!(f, "backoff_ns: {}", self.backoff_ns.get())?;
        writeln!(f, "failed_episodes: {}", self.failures.get())?;
        writeln!(f, "bad_completions: {}", self.bad_completions.get())?;
        writeln!(f, "retries: {}", self.retries.get())
    }
}
