// SPDX-License-Identifier: GPL-2.0

//! The poll timer of an I/O queue: an hrtimer pinned to the CPU that armed it (the CPU of the
//! queue's interrupt). While the queue's vector is masked, each expiry drains the CQ and asks
//! the policy how long to wait for the next batch, or whether to give up and unmask.
//!
//! The mode is `HRTIMER_MODE_REL_PINNED`: the expiry runs in hard-IRQ context, like the
//! interrupt handler it stands in for (never in a softirq or a thread, where deferred reaping
//! is known to cost throughput). On PREEMPT_RT the kernel moves such timers to softirq context,
//! which is where completing block requests must happen there; `_HARD` would keep it in hard
//! IRQ, where RT forbids the sleeping spinlocks the completion path takes (lockdep reports it
//! as an invalid wait context).
//!
//! [`PollTimer`] is a small wrapper of our own over the C hrtimer: the kernel crate's `HrTimer`
//! wants a callback on `Pin<&'a T>` for every `'a`, which a queue that borrows its device for
//! the `'bound` lifetime of the driver data cannot offer.

use core::{marker::PhantomData, ptr::NonNull};
use kernel::{bindings, prelude::*, types::Opaque};

use crate::{blk::CompletionBatch, params, policy::Action, queue::IoQueue};

/// What a [`PollTimer`] calls when it expires (in hard-IRQ context, softirq on PREEMPT_RT).
pub(crate) trait Expiry: Sync {
    fn expired(&self);
}

/// A relative, CPU-pinned hrtimer that calls its owner's [`Expiry::expired`].
///
/// # Invariants
///
/// `timer` was set up by `hrtimer_setup` with [`PollTimer::expiry`]; `owner` points at the
/// pinned struct that contains this timer.
#[pin_data]
#[repr(C)]
pub(crate) struct PollTimer<T: Expiry> {
    /// First, so that the C timer pointer is a pointer to the whole `PollTimer`.
    #[pin]
    timer: Opaque<bindings::hrtimer>,
    owner: NonNull<T>,
    _owner: PhantomData<T>,
}

// SAFETY: the C timer is locked by the hrtimer core; the owner is `Sync`.
unsafe impl<T: Expiry> Send for PollTimer<T> {}
// SAFETY: as above.
unsafe impl<T: Expiry> Sync for PollTimer<T> {}

const MODE: bindings::hrtimer_mode = bindings::hrtimer_mode_HRTIMER_MODE_REL_PINNED;

impl<T: Expiry> PollTimer<T> {
    /// A timer for `owner`, which must contain it, be pinned, and cancel it before it is
    /// dropped.
    pub(crate) fn new(owner: NonNull<T>) -> impl PinInit<Self> {
        pin_init!(Self {
            timer <- Opaque::ffi_init(|t: *mut bindings::hrtimer| {
                // SAFETY: `t` is valid for writes; `hrtimer_setup` initialises it fully.
                unsafe { bindings::hrtimer_setup(t, Some(Self::expiry), bindings::CLOCK_MONOTONIC as i32, MODE) }
            }),
            owner,
            _owner: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the hrtimer core for a timer set up in `new`.
    unsafe extern "C" fn expiry(t: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
        // SAFETY: `timer` is the first field of the `repr(C)` `PollTimer`; the owner contains
        // the timer and cancels it before going away (type invariant).
        let owner = unsafe { (*t.cast::<Self>()).owner.as_ref() };
        owner.expired();
        // Re-arming, when wanted, was done with a fresh expiry from now.
        bindings::hrtimer_restart::HRTIMER_NORESTART
    }

    /// Arms the timer to fire `ns` from now on this CPU (also from its own expiry).
    pub(crate) fn start(&self, ns: u64) {
        // SAFETY: the timer is initialised (type invariant); starting it is allowed from any
        // context, including its callback.
        unsafe {
            bindings::hrtimer_start_range_ns(
                self.timer.get(),
                ns.min(i64::MAX as u64) as i64,
                0,
                MODE,
            )
        };
    }

    /// Cancels the timer, waiting for a running expiry to return. Process context.
    pub(crate) fn cancel(&self) {
        // SAFETY: the timer is initialised (type invariant).
        unsafe { bindings::hrtimer_cancel(self.timer.get()) };
    }
}

impl Expiry for IoQueue<'_> {
    fn expired(&self) {
        self.poll_timer_expired();
    }
}

impl IoQueue<'_> {
    fn poll_timer_expired(&self) {
        // Declared first, so it ends its requests after the CQ lock is dropped.
        let mut batch = CompletionBatch::new();
        // Interrupts are off in hard-IRQ context, but not in the softirq PREEMPT_RT runs this
        // in: take the lock the way that is right in both.
        let mut cq = self.q.lock_cq();
        let reaped = self.reap(&mut cq, &mut batch);
        let stats = &self.stats;
        stats.count_expiry(reaped);
        let mut params = params::policy();
        // Teardown ends the episode the way switching adaptive polling off does.
        params.enabled &= !cq.extra.stopping;
        let now = self.now_ns();
        let inflight = self.inflight(&cq);
        let action = cq.extra.policy.on_timer(now, reaped, inflight, &params);
        self.publish(&cq.extra.policy);
        match action {
            Action::Rearm { wait_ns } => self.timer.start(wait_ns),
            Action::StopPolling { ending } => {
                stats.count_ending(ending);
                stats.masked.set(0);
                drop(cq);
                if let Some(line) = self.irq.as_ref() {
                    line.unmask();
                }
                // A completion that landed between the drain above and the unmask would
                // otherwise wait for the interrupt the device replays on unmask.
                let mut cq = self.q.lock_cq();
                let late = self.reap(&mut cq, &mut batch);
                stats.reaped_timer.add(late.into());
            }
            Action::Stay | Action::StartPolling { .. } => {}
        }
    }

    /// Ends polling for good (teardown, controller reset): no new episode starts, the timer is
    /// cancelled and the vector left unmasked. Process context.
    pub(crate) fn stop_polling(&self) {
        self.q.lock_cq().extra.stopping = true;
        // Waits for a running expiry; a pending one is removed and never runs.
        self.timer.cancel();
        let mut cq = self.q.lock_cq();
        let was_polling = cq.extra.policy.abort_polling();
        self.publish(&cq.extra.policy);
        drop(cq);
        if was_polling {
            self.stats.masked.set(0);
            self.stats.ended_disabled.add(1);
            if let Some(line) = self.irq.as_ref() {
                line.unmask();
            }
        }
        if let Some(line) = self.irq.as_ref() {
            line.synchronize();
        }
    }

    /// Lets the queue poll again after [`IoQueue::stop_polling`] (the controller is back).
    pub(crate) fn resume_polling(&self) {
        self.q.lock_cq().extra.stopping = false;
    }
}
