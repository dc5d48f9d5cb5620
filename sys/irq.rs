// SPDX-License-Identifier: GPL-2.0

//! Interrupt lines and per-vector masking.
//!
//! The kernel crate's `irq::Registration` only accepts vectors from its own allocation (which
//! cannot ask for managed affinity with a pre-vector) and has no per-vector disable/enable, so
//! this file wraps `request_irq`/`free_irq` and the masking calls itself. A line lives in a
//! [`LineSlot`] inside its handler, so that it cannot outlive it.
//!
//! C headers: [`include/linux/interrupt.h`](srctree/include/linux/interrupt.h) and
//! [`include/linux/irq.h`](srctree/include/linux/irq.h)

use core::{
    ffi::c_void,
    marker::PhantomData,
    ops::DerefMut,
    ptr::NonNull, //
};
use kernel::{
    bindings,
    error::to_result,
    new_mutex,
    prelude::*,
    str::CString,
    sync::{
        Mutex,
        SpinLockIrq, //
    }, //
};

use super::hrtimer::{
    HasPollTimer,
    PollTimer, //
};

/// Something that handles an interrupt: in hard-IRQ context, or on a threaded line in the
/// line's thread after [`Handler::check`] said there is work.
pub(crate) trait Handler: Sync {
    /// Runs in the context `ctx` describes. Returns whether the device had anything for us
    /// (`IRQ_NONE` feeds the kernel's stuck-interrupt detector).
    fn handle(&self, ctx: &HandlerContext<'_>) -> bool;

    /// The hard half of a threaded line: whether the device has work for [`Handler::handle`],
    /// which then runs in the line's thread. Must not do that work itself.
    fn check(&self, ctx: &HandlerContext<'_>) -> bool;
}

/// Where a handler runs: with local interrupts off (hard-IRQ context, a thread `threadirqs`
/// forced it into, or a threaded line's thread, which disables them around the handler), or on
/// PREEMPT_RT in the thread every handler is forced into, with them on.
pub(crate) struct HandlerContext<'a> {
    #[cfg(not(CONFIG_PREEMPT_RT))]
    irqs_off: &'a kernel::interrupt::LocalInterruptDisabled,
    _context: PhantomData<&'a ()>,
}

impl<'a> HandlerContext<'a> {
    /// Takes `lock` the way that is right here: without touching the interrupt state where
    /// interrupts are off already.
    pub(crate) fn lock<T: Unpin + 'a>(
        &self,
        lock: &'a SpinLockIrq<T>,
    ) -> impl DerefMut<Target = T> + 'a {
        #[cfg(not(CONFIG_PREEMPT_RT))]
        return lock.lock_with(self.irqs_off);
        #[cfg(CONFIG_PREEMPT_RT)]
        return lock.lock();
    }
}

/// A Linux interrupt number of one of our vectors.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Irq(u32);

impl Irq {
    pub(crate) const fn new(irq: u32) -> Self {
        Self(irq)
    }

    pub(crate) const fn number(self) -> u32 {
        self.0
    }

    /// Masks the vector without waiting for its handler: callable from that very handler, in
    /// hard-IRQ context or in the line's thread.
    pub(crate) fn mask_nosync(self) {
        // SAFETY: `disable_irq_nosync` accepts any interrupt number and may be called from
        // interrupt context; callers balance it with `unmask`.
        unsafe { bindings::disable_irq_nosync(self.0) };
    }

    /// Masks the vector and waits for a running handler to return. Process context.
    pub(crate) fn mask(self) {
        // SAFETY: As above; the caller is not the handler (it would wait for itself).
        unsafe { bindings::disable_irq(self.0) };
    }

    /// Undoes one `mask`/`mask_nosync`; a message that arrived while masked is delivered now.
    pub(crate) fn unmask(self) {
        // SAFETY: The caller balances it with an earlier mask; `enable_irq` is allowed in
        // interrupt context for MSI-X.
        unsafe { bindings::enable_irq(self.0) };
    }

    /// Waits until a running handler of the vector has returned.
    pub(crate) fn synchronize(self) {
        // SAFETY: Any interrupt number is accepted.
        unsafe { bindings::synchronize_irq(self.0) };
    }
}

/// A requested interrupt line; freed (after waiting for a running handler) when dropped.
struct IrqLine {
    irq: Irq,
    cookie: NonNull<c_void>,
    /// Shown in /proc/interrupts; must live as long as the line.
    _name: CString,
}

// SAFETY: The line is only freed through the IRQ core, from any CPU.
unsafe impl Send for IrqLine {}

impl Drop for IrqLine {
    fn drop(&mut self) {
        // SAFETY: Requested in `LineSlot::request` with this cookie; waits for a running
        // handler.
        unsafe { bindings::free_irq(self.irq.0, self.cookie.as_ptr()) };
    }
}

/// A handler that keeps its interrupt line in a [`LineSlot`] of its own.
///
/// # Safety
///
/// `line_slot` returns a slot inside `Self` that is dropped before every field the handler
/// uses, so that dropping `Self` frees the line (waiting for a running handler) before any of
/// them goes. Implemented by [`irq_and_timer_owner!`](crate::irq_and_timer_owner).
pub(crate) unsafe trait HasIrqLine: Handler + Sized {
    fn line_slot(&self) -> &LineSlot;
}

/// An interrupt line and the poll timer that stands in for it while the vector is masked,
/// kept together as the first field of their owner by [`irq_and_timer_owner!`]: dropping it
/// frees the line (waiting for a running handler, which may arm the timer) and then cancels
/// the timer (waiting for a running expiry), so that neither runs once the owner's other fields
/// go, and both are left in a valid state for their own drops.
#[pin_data(PinnedDrop)]
pub(crate) struct IrqAndTimer<T: HasPollTimer> {
    #[pin]
    line: LineSlot,
    #[pin]
    timer: PollTimer<T>,
}

impl<T: HasPollTimer> IrqAndTimer<T> {
    /// Where the timer lies in the pair, for [`HasPollTimer::OFFSET`].
    pub(crate) const TIMER_OFFSET: usize = core::mem::offset_of!(Self, timer);

    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            line <- LineSlot::new(),
            timer <- PollTimer::new(),
        })
    }

    pub(crate) fn line(&self) -> &LineSlot {
        &self.line
    }

    pub(crate) fn timer(&self) -> &PollTimer<T> {
        &self.timer
    }
}

#[pinned_drop]
impl<T: HasPollTimer> PinnedDrop for IrqAndTimer<T> {
    fn drop(self: Pin<&mut Self>) {
        self.line.free();
        self.timer.cancel();
    }
}

/// Declares struct `$t` with an [`IrqAndTimer<Self>`] as its first field (so dropped before
/// every other field) and implements [`HasIrqLine`] and [`HasPollTimer`] for it with that
/// field: the promises both traits ask for hold by construction. The macro adds `#[pin_data]`
/// itself, without `PinnedDrop`: a drop of the struct's own would run before the first field's,
/// while the handler and the expiry may still run. That field takes doc comments only.
#[macro_export]
macro_rules! irq_and_timer_owner {
    (
        $(#[$m:meta])*
        $vis:vis struct $t:ident {
            $(#[doc = $doc:expr])*
            #[pin]
            $fvis:vis $field:ident: IrqAndTimer<Self>,
            $($rest:tt)*
        }
    ) => {
        $(#[$m])*
        #[pin_data]
        $vis struct $t {
            $(#[doc = $doc])*
            #[pin]
            $fvis $field: $crate::sys::irq::IrqAndTimer<$t>,
            $($rest)*
        }

        // SAFETY: `$field` is the first field of `$t`, declared above with no drop of its own
        // (`pin_data` without `PinnedDrop` forbids one): dropping it frees the line, waiting for
        // a running handler, before any other field goes.
        unsafe impl $crate::sys::irq::HasIrqLine for $t {
            fn line_slot(&self) -> &$crate::sys::irq::LineSlot {
                self.$field.line()
            }
        }

        // SAFETY: The timer lies `TIMER_OFFSET` into `$field`, the first field of `$t`, which
        // has no drop of its own (as above): dropping it cancels the timer, waiting for a
        // running expiry, before any other field goes (after the line, which it leaves freed).
        unsafe impl $crate::sys::hrtimer::HasPollTimer for $t {
            const OFFSET: usize = core::mem::offset_of!($t, $field)
                + $crate::sys::irq::IrqAndTimer::<$t>::TIMER_OFFSET;
        }
    };
}

/// Where a handler keeps its interrupt line while it has one.
#[pin_data]
pub(crate) struct LineSlot {
    #[pin]
    line: Mutex<Option<IrqLine>>,
}

/// Runs `f` with the context of a primary (hard) handler.
///
/// # Safety
///
/// Called from a primary handler the IRQ core runs.
unsafe fn in_hard_context<R>(f: impl FnOnce(&HandlerContext<'_>) -> R) -> R {
    #[cfg(not(CONFIG_PREEMPT_RT))]
    // SAFETY: Without PREEMPT_RT a primary handler runs with local interrupts disabled (the
    // caller's promise): in hard-IRQ context, or in the thread `threadirqs` forces it into,
    // where `irq_forced_thread_fn` disables them around it. The token lives only for `f`.
    let irqs_off = unsafe { kernel::interrupt::LocalInterruptDisabled::assume_disabled() };
    f(&HandlerContext {
        #[cfg(not(CONFIG_PREEMPT_RT))]
        irqs_off,
        _context: PhantomData,
    })
}

/// # Safety
///
/// Called by the IRQ core with the cookie given to `request_irq` in [`LineSlot::request`].
unsafe extern "C" fn trampoline<H: Handler>(
    _irq: core::ffi::c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: `cookie` is the handler that owns the line (`HasIrqLine`), valid until
    // `free_irq`, which its drop calls first.
    let handler = unsafe { &*cookie.cast::<H>() };
    // SAFETY: The IRQ core runs this as the line's primary handler.
    if unsafe { in_hard_context(|ctx| handler.handle(ctx)) } {
        bindings::irqreturn::IRQ_HANDLED
    } else {
        bindings::irqreturn::IRQ_NONE
    }
}

/// The primary handler of a threaded line (`nvme_irq_check`).
///
/// # Safety
///
/// As for [`trampoline`].
unsafe extern "C" fn check_trampoline<H: Handler>(
    _irq: core::ffi::c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: As in `trampoline`.
    let handler = unsafe { &*cookie.cast::<H>() };
    // SAFETY: The IRQ core runs this as the line's primary handler.
    if unsafe { in_hard_context(|ctx| handler.check(ctx)) } {
        bindings::irqreturn::IRQ_WAKE_THREAD
    } else {
        bindings::irqreturn::IRQ_NONE
    }
}

/// The thread function of a threaded line, woken by [`check_trampoline`].
///
/// # Safety
///
/// As for [`trampoline`]; `free_irq` stops the thread before it returns.
unsafe extern "C" fn thread_trampoline<H: Handler>(
    _irq: core::ffi::c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: As in `trampoline`: `free_irq` waits for a running thread function too.
    let handler = unsafe { &*cookie.cast::<H>() };
    // The thread runs with local interrupts on; the handler takes its locks and ends its
    // requests as in hard-IRQ context, so it runs with them off, as `threadirqs` runs a forced
    // thread. The thread is preemptible between two runs only.
    #[cfg(not(CONFIG_PREEMPT_RT))]
    let irqs_off = kernel::interrupt::local_interrupt_disable();
    let ctx = HandlerContext {
        #[cfg(not(CONFIG_PREEMPT_RT))]
        irqs_off: &irqs_off,
        _context: PhantomData,
    };
    if handler.handle(&ctx) {
        bindings::irqreturn::IRQ_HANDLED
    } else {
        bindings::irqreturn::IRQ_NONE
    }
}

impl LineSlot {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            line <- new_mutex!(None),
        })
    }

    /// Requests `irq` for `owner`, replacing a line it had. With `eager_mask`, masking writes
    /// the MSI-X table at once (`IRQ_DISABLE_UNLAZY`) instead of on the next message: a polling
    /// queue then takes no interrupt at all while masked. With `threaded`, the hard handler only
    /// runs [`Handler::check`] and [`Handler::handle`] runs in the line's thread
    /// (`irq/N-name`), as `pci_request_irq` with a thread function sets it up. Process context.
    pub(crate) fn request<H: HasIrqLine>(
        owner: Pin<&H>,
        irq: Irq,
        name: CString,
        eager_mask: bool,
        threaded: bool,
    ) -> Result {
        let owner = owner.get_ref();
        let mut slot = owner.line_slot().line.lock();
        *slot = None;
        let cookie = NonNull::from(owner).cast::<c_void>();
        if eager_mask {
            // SAFETY: `irq` is a valid interrupt number; only its disable behaviour changes.
            unsafe { bindings::irq_modify_status(irq.0, 0, bindings::IRQ_DISABLE_UNLAZY as usize) };
        }
        // Shared, as `pci_request_irq` asks: with a single vector (one MSI-X entry, MSI or
        // INTx) the admin queue and I/O queue 1 share it, and INTx may be another device's too.
        // The handler says whether its queue had anything.
        let flags = bindings::IRQF_SHARED as usize;
        let r = if threaded {
            // No `IRQF_ONESHOT`, as in `pci_request_irq`: the vector stays unmasked while the
            // thread runs, and a message meanwhile only wakes the thread once more.
            // SAFETY: The trampolines match `irq_handler_t`; `cookie` points to the pinned
            // owner, which frees the line (stopping its thread) before it goes (`HasIrqLine`);
            // `name` lives as long as the line.
            unsafe {
                bindings::request_threaded_irq(
                    irq.0,
                    Some(check_trampoline::<H>),
                    Some(thread_trampoline::<H>),
                    flags,
                    name.as_char_ptr(),
                    cookie.as_ptr(),
                )
            }
        } else {
            // SAFETY: As above, with `trampoline::<H>`.
            unsafe {
                bindings::request_irq(
                    irq.0,
                    Some(trampoline::<H>),
                    flags,
                    name.as_char_ptr(),
                    cookie.as_ptr(),
                )
            }
        };
        to_result(r)?;
        *slot = Some(IrqLine {
            irq,
            cookie,
            _name: name,
        });
        Ok(())
    }

    /// Frees the line, if any, waiting for a running handler. Process context.
    pub(crate) fn free(&self) {
        drop(self.line.lock().take());
    }

    /// The interrupt the line is on, if requested.
    pub(crate) fn irq(&self) -> Option<Irq> {
        self.line.lock().as_ref().map(|l| l.irq)
    }
}
