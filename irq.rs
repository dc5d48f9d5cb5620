// SPDX-License-Identifier: GPL-2.0

//! MSI-X vectors, interrupt handlers and per-vector masking; and the I/O queue's interrupt
//! handler, where a dense queue switches itself to polling.
//!
//! The kernel crate's `alloc_irq_vectors` cannot ask for managed affinity with a pre-vector
//! (`PCI_IRQ_AFFINITY`, `irq_affinity.pre_vectors`), and `irq::Registration` only accepts
//! vectors from it; there is no per-vector disable/enable either. This file wraps the C calls
//! in two small types, [`IrqVectors`] and [`IrqLine`].

use core::{ffi::c_void, ptr::NonNull};
use kernel::{
    bindings, device::Bound, error::to_result, interrupt::LocalInterruptDisabled, pci, prelude::*,
    str::CString,
};

use crate::{
    blk::CompletionBatch,
    params,
    policy::{self, Action},
    queue::IoQueue,
    raw,
};

/// The MSI-X vectors of a device. Vector 0 serves the admin queue; when `spread`, the others
/// are spread over the CPUs by the IRQ core (managed affinity), one per I/O queue.
pub(crate) struct IrqVectors<'b> {
    pdev: &'b pci::Device<Bound>,
    count: u32,
}

impl<'b> IrqVectors<'b> {
    /// Allocates between `min` and `max` MSI-X vectors.
    pub(crate) fn alloc(
        pdev: &'b pci::Device<Bound>,
        min: u32,
        max: u32,
        spread: bool,
    ) -> Result<Self> {
        let mut affinity = bindings::irq_affinity {
            pre_vectors: 1,
            ..Default::default()
        };
        let (flags, affd) = if spread {
            (
                bindings::PCI_IRQ_MSIX | bindings::PCI_IRQ_AFFINITY,
                &raw mut affinity,
            )
        } else {
            (bindings::PCI_IRQ_MSIX, core::ptr::null_mut())
        };
        // SAFETY: `pdev` is bound; `affd` is null or points to a valid `irq_affinity`.
        let n = unsafe {
            bindings::pci_alloc_irq_vectors_affinity(raw::pdev(pdev), min, max, flags, affd)
        };
        to_result(n.min(0))?;
        Ok(Self {
            pdev,
            count: n as u32,
        })
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The Linux IRQ number of vector `index`.
    pub(crate) fn irq(&self, index: u32) -> Result<u32> {
        if index >= self.count {
            return Err(EINVAL);
        }
        // SAFETY: the vectors are allocated and `index` is in range.
        let irq = unsafe { bindings::pci_irq_vector(raw::pdev(self.pdev), index) };
        to_result(irq.min(0))?;
        Ok(irq as u32)
    }
}

impl Drop for IrqVectors<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc`; every `IrqLine` on them was freed first (they are owned
        // by queues that the controller drops before its vectors).
        unsafe { bindings::pci_free_irq_vectors(raw::pdev(self.pdev)) };
    }
}

/// Something that handles a hard interrupt.
pub(crate) trait Handler: Sync {
    /// Runs in hard-IRQ context with local interrupts off. Returns whether the device had
    /// anything for us (`IRQ_NONE` feeds the kernel's stuck-interrupt detector).
    fn handle(&self, irqs_off: &LocalInterruptDisabled) -> bool;
}

/// A requested interrupt line; freed (after waiting for a running handler) when dropped.
pub(crate) struct IrqLine {
    irq: u32,
    cookie: NonNull<c_void>,
    /// Shown in /proc/interrupts; must live as long as the line.
    _name: CString,
}

// SAFETY: the line is only freed, masked and unmasked through the IRQ core, from any CPU.
unsafe impl Send for IrqLine {}
// SAFETY: as above.
unsafe impl Sync for IrqLine {}

/// # Safety
///
/// Called by the IRQ core with the cookie given to `request_irq` in [`IrqLine::request`].
unsafe extern "C" fn trampoline<H: Handler>(
    _irq: core::ffi::c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: `cookie` is the handler given to `IrqLine::request`, valid until `free_irq`.
    let handler = unsafe { &*cookie.cast::<H>() };
    // SAFETY: hard-IRQ handlers run with local interrupts disabled.
    let irqs_off = unsafe { LocalInterruptDisabled::assume_disabled() };
    if handler.handle(irqs_off) {
        bindings::irqreturn::IRQ_HANDLED
    } else {
        bindings::irqreturn::IRQ_NONE
    }
}

impl IrqLine {
    /// Requests `irq` for `handler`. With `eager_mask`, masking writes the MSI-X table at
    /// once (`IRQ_DISABLE_UNLAZY`) instead of on the next message: a polling queue then takes
    /// no interrupt at all while masked.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid, and at the same address, until the line is dropped.
    pub(crate) unsafe fn request<H: Handler>(
        irq: u32,
        name: CString,
        handler: &H,
        eager_mask: bool,
    ) -> Result<Self> {
        let cookie = NonNull::from(handler).cast::<c_void>();
        if eager_mask {
            // SAFETY: `irq` is a valid IRQ number of our device.
            unsafe { bindings::irq_modify_status(irq, 0, bindings::IRQ_DISABLE_UNLAZY as usize) };
        }
        // SAFETY: `trampoline::<H>` matches `irq_handler_t`; `cookie` stays valid until
        // `free_irq` (the caller's promise); `name` lives as long as the line.
        to_result(unsafe {
            bindings::request_irq(
                irq,
                Some(trampoline::<H>),
                0,
                name.as_char_ptr(),
                cookie.as_ptr(),
            )
        })?;
        Ok(Self {
            irq,
            cookie,
            _name: name,
        })
    }

    /// Masks the vector without waiting for its handler: callable from that very handler.
    pub(crate) fn mask(&self) {
        // SAFETY: the line is requested; `disable_irq_nosync` is allowed in IRQ context.
        unsafe { bindings::disable_irq_nosync(self.irq) };
    }

    /// Unmasks the vector; a message that arrived while masked is delivered now.
    pub(crate) fn unmask(&self) {
        // SAFETY: the line is requested and was masked with `mask` (the caller keeps the two
        // balanced); `enable_irq` is allowed in IRQ context for MSI-X.
        unsafe { bindings::enable_irq(self.irq) };
    }

    /// Waits until a running handler of the line has returned.
    pub(crate) fn synchronize(&self) {
        // SAFETY: the line is requested.
        unsafe { bindings::synchronize_irq(self.irq) };
    }
}

impl Drop for IrqLine {
    fn drop(&mut self) {
        // SAFETY: requested in `request` with this cookie; waits for a running handler.
        unsafe { bindings::free_irq(self.irq, self.cookie.as_ptr()) };
    }
}

impl Handler for IoQueue<'_> {
    /// Reaps completions; then lets the policy decide whether this queue is dense enough to
    /// mask its vector and poll instead.
    fn handle(&self, irqs_off: &LocalInterruptDisabled) -> bool {
        // Declared first, so it ends its requests after the CQ lock is dropped.
        let mut batch = CompletionBatch::new();
        let mut cq = self.q.lock_cq_in_irq(irqs_off);
        let reaped = self.reap(&mut cq, &mut batch);
        let stats = &self.stats;
        stats.count_irq(reaped);
        // With adaptive polling off this is the plain interrupt path: one parameter load, no
        // clock, no policy.
        if cq.extra.stopping || params::get(policy::param::ADAPTIVE) == 0 {
            return reaped > 0;
        }
        let params = params::policy();
        let now = self.now_ns();
        let inflight = self.inflight(&cq);
        let action = cq.extra.policy.on_irq(now, reaped, inflight, &params);
        if let Action::StartPolling { wait_ns } = action {
            if let Some(line) = self.irq.as_ref() {
                stats.episodes.add(1);
                stats.masked.set(1);
                line.mask();
                self.timer.start(wait_ns);
            } else {
                // A queue without a vector never polls: give the decision back.
                cq.extra.policy.abort_polling();
            }
        }
        self.publish(&cq.extra.policy);
        reaped > 0
    }
}
