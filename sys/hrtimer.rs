// SPDX-License-Identifier: GPL-2.0

//! A relative, CPU-pinned hrtimer that calls back its owner.
//!
//! The kernel crate's `HrTimer` wants a callback on `Pin<&'a T>` for every `'a` and an owner
//! that holds a handle to cancel it; a queue polls from its own timer, which it embeds. The
//! mode is `HRTIMER_MODE_REL_PINNED`: the expiry runs in hard-IRQ context on the CPU that armed
//! it, like the interrupt handler it stands in for; on PREEMPT_RT the kernel moves it to
//! softirq context, which completing block requests needs there.
//!
//! C header: [`include/linux/hrtimer.h`](srctree/include/linux/hrtimer.h)

use kernel::{
    bindings,
    prelude::*,
    types::Opaque, //
};

/// What a [`PollTimer`] calls when it expires (hard-IRQ context, softirq on PREEMPT_RT).
pub(crate) trait Expiry: Sync {
    fn expired(&self);
}

/// An owner that embeds a [`PollTimer`].
///
/// # Safety
///
/// `OFFSET` is the offset of a `PollTimer<Self>` inside `Self`, dropped before every field the
/// expiry uses (dropping the timer cancels it and waits for a running expiry). Implemented by
/// [`irq_and_timer_owner!`](crate::irq_and_timer_owner).
pub(crate) unsafe trait HasPollTimer: Expiry + Sized {
    const OFFSET: usize;

    /// Arms the embedded timer to fire `ns` from now on this CPU (also from its own expiry).
    // A method of the owner, not of the timer: only a timer inside its owner can be armed, so
    // an expiry always finds the owner at `OFFSET` before the timer.
    fn start_poll_timer(&self, ns: u64) {
        // SAFETY: A `PollTimer<Self>` field lives at `OFFSET` in `Self` (the trait's promise),
        // so the address is inside `self` and the timer lives as long as `self`.
        let timer = unsafe {
            &*core::ptr::from_ref(self)
                .cast::<u8>()
                .add(Self::OFFSET)
                .cast::<PollTimer<Self>>()
        };
        timer.start(ns);
    }
}

/// # Invariants
///
/// `timer` was set up by `hrtimer_setup` with [`PollTimer::expiry`], and it is armed only as
/// the field of a pinned `T` at `T::OFFSET` ([`HasPollTimer::start_poll_timer`]).
#[pin_data(PinnedDrop)]
#[repr(C)]
pub(crate) struct PollTimer<T: HasPollTimer> {
    /// First, so that the C timer's address is the `PollTimer`'s.
    #[pin]
    timer: Opaque<bindings::hrtimer>,
    _owner: core::marker::PhantomData<T>,
}

// SAFETY: The C timer is locked by the hrtimer core; the owner is `Sync`.
unsafe impl<T: HasPollTimer> Send for PollTimer<T> {}
// SAFETY: As above.
unsafe impl<T: HasPollTimer> Sync for PollTimer<T> {}

const MODE: bindings::hrtimer_mode = bindings::hrtimer_mode_HRTIMER_MODE_REL_PINNED;

impl<T: HasPollTimer> PollTimer<T> {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            timer <- Opaque::ffi_init(|t: *mut bindings::hrtimer| {
                // SAFETY: `t` is valid for writes; `hrtimer_setup` initialises it fully.
                unsafe {
                    bindings::hrtimer_setup(
                        t,
                        Some(Self::expiry),
                        bindings::CLOCK_MONOTONIC as i32,
                        MODE,
                    )
                }
            }),
            _owner: core::marker::PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the hrtimer core for a timer set up in `new`.
    unsafe extern "C" fn expiry(t: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
        // SAFETY: The timer is the first field of the `repr(C)` `PollTimer`, itself the field
        // of a live `T` at `T::OFFSET`: only its owner arms it (type invariant), and the owner
        // cancels it before it goes, since dropping the `PollTimer` cancels it.
        let owner = unsafe { &*t.cast::<u8>().sub(T::OFFSET).cast::<T>() };
        owner.expired();
        // Re-arming, when wanted, was done with a fresh expiry from now.
        bindings::hrtimer_restart::HRTIMER_NORESTART
    }

    /// Arms the timer to fire `ns` from now on this CPU (see
    /// [`HasPollTimer::start_poll_timer`]).
    fn start(&self, ns: u64) {
        // SAFETY: The timer is initialised (type invariant); starting it is allowed from any
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
        // SAFETY: The timer is initialised (type invariant).
        unsafe { bindings::hrtimer_cancel(self.timer.get()) };
    }
}

#[pinned_drop]
impl<T: HasPollTimer> PinnedDrop for PollTimer<T> {
    fn drop(self: Pin<&mut Self>) {
        self.cancel();
    }
}
