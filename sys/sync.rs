// SPDX-License-Identifier: GPL-2.0

//! A completion that can be waited for with a timeout and used again (the kernel crate's
//! `Completion` has neither).
//!
//! C header: [`include/linux/completion.h`](srctree/include/linux/completion.h)

use kernel::{
    bindings,
    prelude::*,
    types::Opaque, //
};

use super::ffi;

/// `struct completion`.
#[pin_data]
pub(crate) struct Waiter {
    #[pin]
    done: Opaque<bindings::completion>,
}

// SAFETY: A completion is made to be signalled and waited for from any CPU and context.
unsafe impl Send for Waiter {}
// SAFETY: As above.
unsafe impl Sync for Waiter {}

impl Waiter {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `init_completion` initialises the completion fully.
            done <- Opaque::ffi_init(|c| unsafe { bindings::init_completion(c) }),
        })
    }

    /// Forgets earlier signals, before the event it waits for is set in motion.
    pub(crate) fn reinit(&self) {
        // `reinit_completion`, not `init_completion`: a signal still in flight then at worst
        // counts for the next wait instead of finding the wait queue's lock re-initialised
        // under it.
        // SAFETY: The completion is initialised.
        unsafe { ffi::nva_reinit_completion(self.done.get()) };
    }

    pub(crate) fn complete(&self) {
        // SAFETY: The completion is initialised.
        unsafe { bindings::complete(self.done.get()) };
    }

    /// Waits for the signal as I/O wait, at most `timeout` jiffies; returns the jiffies left
    /// (0: timed out).
    pub(crate) fn wait_io_timeout(&self, timeout: usize) -> usize {
        // SAFETY: The completion is initialised; sleeping is allowed here (process context).
        unsafe { bindings::wait_for_completion_io_timeout(self.done.get(), timeout) as usize }
    }
}
