// SPDX-License-Identifier: GPL-2.0

//! The admin queue: one command at a time, from process context (probe, reset, teardown).
//!
//! The waiter sleeps on a completion that the admin interrupt signals, in slices, and drains
//! the completion queue itself between them: commands work before the admin vector exists and
//! if an interrupt is lost, and a controller that died is noticed within a slice.

use kernel::{
    bindings,
    dma::Coherent,
    interrupt::LocalInterruptDisabled,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    time::{msecs_to_jiffies, Delta, Instant, Monotonic},
    types::Opaque,
};

use crate::{
    cmd::{Command, Completion, Status, PAGE_SIZE},
    ctrl::Shared,
    irq::{Handler, IrqLine},
    queue::Queue,
};

/// Admin queue entries (the C driver's NVME_AQ_DEPTH).
pub(crate) const ADMIN_DEPTH: u16 = 32;

/// How long an admin command may take before the controller is considered broken.
const ADMIN_TIMEOUT: Delta = Delta::from_secs(60);

/// How often a waiter looks at the queue and the controller status on its own.
const WAIT_SLICE_MS: u32 = 100;

/// What the admin queue keeps under its CQ lock.
pub(crate) struct AdminCq {
    /// Identifier of the command being waited for.
    waiting: Option<u16>,
    result: Option<Completion>,
}

#[pin_data]
pub(crate) struct AdminQueue<'b> {
    /// The admin interrupt; replaced while probe reallocates the vectors.
    #[pin]
    line: Mutex<Option<IrqLine>>,
    #[pin]
    pub(crate) q: Queue<'b, AdminCq>,
    /// Serialises commands; holds the next command identifier.
    #[pin]
    serial: Mutex<u16>,
    #[pin]
    done: Opaque<bindings::completion>,
}

// SAFETY: the completion is only used through its thread-safe C functions.
unsafe impl Sync for AdminQueue<'_> {}
// SAFETY: as above; everything else is `Send`.
unsafe impl Send for AdminQueue<'_> {}

/// Why an admin command did not complete.
#[derive(Debug)]
pub(crate) enum AdminError {
    /// The controller completed it with an error status.
    Status(Status),
    /// It did not complete (timeout, controller gone or failed).
    Failed(Error),
}

impl From<AdminError> for Error {
    fn from(e: AdminError) -> Error {
        match e {
            AdminError::Status(_) => EIO,
            AdminError::Failed(e) => e,
        }
    }
}

impl<'b> AdminQueue<'b> {
    pub(crate) fn new(shared: Arc<Shared<'b>>) -> impl PinInit<Self, Error> + 'b {
        try_pin_init!(Self {
            line <- new_mutex!(None),
            q <- Queue::new(shared, 0, ADMIN_DEPTH, AdminCq { waiting: None, result: None }),
            serial <- new_mutex!(0),
            done <- Opaque::ffi_init(|c| {
                // SAFETY: `c` is valid for writes; `init_completion` initialises it fully.
                unsafe { bindings::init_completion(c) }
            }),
        }? Error)
    }

    /// Installs (or with `None` frees) the admin interrupt line.
    pub(crate) fn set_line(&self, line: Option<IrqLine>) {
        *self.line.lock() = line;
    }

    fn record(cq: &mut AdminCq, cqe: &Completion) -> bool {
        if cq.waiting == Some(cqe.cid()) {
            cq.result = Some(*cqe);
            true
        } else {
            false
        }
    }

    /// Runs `cmd` and returns its result (completion dword 0).
    pub(crate) fn execute(&self, mut cmd: Command) -> Result<u32, AdminError> {
        let mut serial = self.serial.lock();
        let id = *serial;
        *serial = id.wrapping_add(1);
        cmd.command_id = id.to_le();
        {
            let mut cq = self.q.lock_cq();
            cq.extra.waiting = Some(id);
            cq.extra.result = None;
        }
        // SAFETY: `done` is initialised; nobody waits on it now (commands are serialised), so
        // resetting the count is `reinit_completion`.
        unsafe { (*self.done.get()).done = 0 };
        self.q.submit(&cmd, true, || {});

        let start = Instant::<Monotonic>::now();
        let outcome = loop {
            // SAFETY: `done` is initialised and outlives the wait.
            unsafe {
                bindings::wait_for_completion_timeout(
                    self.done.get(),
                    msecs_to_jiffies(WAIT_SLICE_MS),
                )
            };
            let mut cq = self.q.lock_cq();
            self.q.drain(&mut cq, |a, cqe| {
                Self::record(a, cqe);
            });
            if let Some(cqe) = cq.extra.result.take() {
                let status = cqe.status();
                break if status.is_success() {
                    Ok(u32::from_le(cqe.result))
                } else {
                    Err(AdminError::Status(status))
                };
            }
            drop(cq);
            if let Err(e) = self.q.shared.check_alive() {
                break Err(AdminError::Failed(e));
            }
            if start.elapsed() > ADMIN_TIMEOUT {
                dev_err!(
                    self.q.shared.pdev.as_ref(),
                    "admin command {:#x} timed out\n",
                    cmd.opcode
                );
                break Err(AdminError::Failed(ETIMEDOUT));
            }
        };
        self.q.lock_cq().extra.waiting = None;
        outcome
    }

    /// Runs an Identify command and parses the 4 KiB it returns.
    pub(crate) fn identify<R>(
        &self,
        cns: u32,
        nsid: u32,
        parse: impl FnOnce(&[u8; PAGE_SIZE]) -> R,
    ) -> Result<R, AdminError> {
        let buf = Coherent::<[u8; PAGE_SIZE]>::zeroed(self.q.shared.pdev.as_ref(), GFP_KERNEL)
            .map_err(AdminError::Failed)?;
        let mut cmd = Command::identify(cns, nsid);
        cmd.set_prps(buf.dma_address(), 0);
        self.execute(cmd)?;
        // SAFETY: the device wrote the buffer before posting the completion we have seen (and
        // read past a DMA read barrier); it no longer touches it.
        Ok(parse(unsafe { buf.as_ref() }))
    }
}

impl Handler for AdminQueue<'_> {
    fn handle(&self, irqs_off: &LocalInterruptDisabled) -> bool {
        let mut cq = self.q.lock_cq_in_irq(irqs_off);
        let mut wake = false;
        let n = self.q.drain(&mut cq, |a, cqe| wake |= Self::record(a, cqe));
        drop(cq);
        if wake {
            // SAFETY: `done` is initialised; `complete` may be called from IRQ context.
            unsafe { bindings::complete(self.done.get()) };
        }
        n > 0
    }
}
