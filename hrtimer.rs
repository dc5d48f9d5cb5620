// SPDX-License-Identifier: GPL-2.0

//! A queue's poll timer: while the queue's vector is masked, each expiry reaps the CQ and asks
//! the policy how long to wait for the next batch, or whether to give up and unmask.

use crate::{
    policy::Action,
    queue::Queue,
    sys::{
        blk::OwnedBatch,
        cpu,
        hrtimer::{
            Expiry,
            HasPollTimer, //
        }, //
    }, //
};

impl Expiry for Queue {
    fn expired(&self) {
        // Declared first, so that it ends its requests after the CQ lock is dropped.
        let mut batch = OwnedBatch::new();
        // Interrupts are off in hard-IRQ context, but not in the softirq PREEMPT_RT runs this
        // in: take the lock the way that is right in both.
        let mut cq = self.lock_cq();
        let reaped = self.reap(&mut cq, &mut batch.batch());
        // After the reap: its latencies end here, and the next wait starts here (the timer's
        // lateness must not include the reap).
        let now = self.now_ns();
        let stats = &self.stats;
        stats.count_expiry(&mut cq.tallies, reaped);
        let mut params = *cq.adaptive.params.current();
        // Teardown and CPU hotplug end the episode the way switching adaptive polling off
        // does.
        params.enabled &= cq.adaptive.allowed();
        let inflight = self.inflight(&cq);
        let late = now.saturating_sub(cq.adaptive.deadline_ns);
        let found = cq.adaptive.reaped(reaped, now);
        let action = cq
            .adaptive
            .policy
            .on_timer(now, late, found, inflight, &params, cpu::idle_ns);
        self.publish(&mut cq.adaptive.policy);
        match action {
            Action::Rearm { wait_ns } => {
                cq.adaptive.deadline_ns = now + wait_ns;
                self.start_poll_timer(wait_ns);
            }
            Action::StopPolling { ending } => {
                stats.count_ending(ending);
                stats.masked.set(0);
                // Under the CQ lock, which `free_irq` takes before it lets the line go: never
                // the unmask of a freed line.
                if let Some(irq) = self.own_irq() {
                    irq.unmask();
                }
                // A completion that landed between the reap above and the unmask would
                // otherwise wait for the interrupt the controller replays on unmask.
                let late = self.reap(&mut cq, &mut batch.batch());
                stats.count_timer_reap(&mut cq.tallies, late);
            }
            Action::Stay | Action::StartPolling { .. } => {}
        }
    }
}

impl Queue {
    /// Ends polling for good (teardown, controller reset): no new episode starts, the timer is
    /// cancelled and the vector left unmasked. Process context.
    pub(crate) fn stop_polling(&self) {
        self.lock_cq().adaptive.stopping = true;
        self.end_episode();
    }

    /// Lets the queue poll again after [`Queue::stop_polling`] (the controller is back).
    pub(crate) fn resume_polling(&self) {
        self.lock_cq().adaptive.stopping = false;
    }

    /// Ends polling while a CPU goes down: its managed interrupts are shut down and started
    /// again behind the back of a queue that keeps one masked.
    pub(crate) fn pause_polling(&self) {
        self.lock_cq().adaptive.paused = true;
        self.end_episode();
    }

    pub(crate) fn unpause_polling(&self) {
        self.lock_cq().adaptive.paused = false;
    }

    /// Ends a poll episode, if one runs: cancels the timer and unmasks the vector.
    fn end_episode(&self) {
        // Waits for a running expiry; a pending one is removed and never runs.
        self.wakeups.timer().cancel();
        let mut cq = self.lock_cq();
        let was_polling = cq.adaptive.policy.abort_polling();
        self.publish(&mut cq.adaptive.policy);
        if was_polling {
            self.stats.masked.set(0);
            self.stats.ended_disabled.add(1);
            // Under the CQ lock, as in the timer's own ending.
            if let Some(irq) = self.own_irq() {
                irq.unmask();
            }
        }
        drop(cq);
        if let Some(irq) = self.irq() {
            irq.synchronize();
        }
    }
}
