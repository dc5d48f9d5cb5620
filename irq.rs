// SPDX-License-Identifier: GPL-2.0

//! A queue's interrupt handler: it reaps completions and, on an I/O queue that owns its
//! vector, lets the policy decide whether completions are dense enough to mask the vector and
//! poll from the queue's timer instead (`hrtimer.rs`).
//!
//! With `use_threaded_interrupts` the hard handler is [`Handler::check`], which only looks for
//! a new CQ entry, and [`Handler::handle`] runs in the line's thread: the reap, the policy and
//! an episode's start, masking the vector with `disable_irq_nosync` (never `disable_irq`, which
//! would wait for the thread itself). The timer ends the episode with `enable_irq` as without
//! threads. A thread run that was already woken when the vector got masked finds the queue
//! polling, which the policy leaves as it is: one mask, one unmask. `free_irq` and
//! `synchronize_irq` wait for the thread as they wait for a hard handler.

use crate::{
    params,
    policy::Action,
    queue::Queue,
    sys::{
        blk::OwnedBatch,
        cpu,
        hrtimer::HasPollTimer,
        irq::{
            Handler,
            HandlerContext, //
        }, //
    }, //
};

impl Handler for Queue {
    // Inlined into the interrupt core's entry points (the primary handler, and the thread
    // with `use_threaded_interrupts`): a call between them costs a prologue and an epilogue
    // on every interrupt.
    #[inline(always)]
    fn handle(&self, ctx: &HandlerContext<'_>) -> bool {
        // Declared first, so that it ends its requests after the CQ lock is dropped.
        let mut batch = OwnedBatch::new();
        let mut cq = self.lock_cq_in_irq(ctx);
        let reaped = self.reap(&mut cq, &mut batch.batch());
        self.stats.count_irq(&mut cq.tallies, reaped);
        // With adaptive polling off this is the plain interrupt path: one parameter load, no
        // clock, no policy. The admin queue and queues sharing a vector never poll.
        if !params::adaptive() || !cq.adaptive.allowed() {
            return reaped > 0;
        }
        let inflight = self.inflight(&cq);
        if cq.adaptive.policy.skip_lone_irq(reaped, inflight) {
            return reaped > 0;
        }
        let Some(irq) = self.own_irq() else {
            return reaped > 0;
        };
        let now = self.now_ns();
        let adaptive = &mut cq.adaptive;
        let found = adaptive.reaped(reaped, now);
        let params = adaptive.params.current();
        let action = adaptive
            .policy
            .on_irq(now, found, inflight, params, cpu::idle_ns);
        if let Action::StartPolling { wait_ns } = action {
            self.stats.episodes.add(1);
            self.stats.masked.set(1);
            irq.mask_nosync();
            cq.adaptive.deadline_ns = now + wait_ns;
            self.start_poll_timer(wait_ns);
        }
        self.publish(&mut cq.adaptive.policy);
        reaped > 0
    }

    fn check(&self, ctx: &HandlerContext<'_>) -> bool {
        self.pending(&self.lock_cq_in_irq(ctx))
    }
}
