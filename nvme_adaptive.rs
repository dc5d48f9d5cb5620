// SPDX-License-Identifier: GPL-2.0

//! nvme-adaptive: an NVMe PCI driver with per-queue adaptive interrupt polling.
//!
//! Each interrupt-driven I/O queue measures its completion rate; when completions are dense
//! enough to fill a small batch within a bounded latency window, the queue masks its own MSI-X
//! vector and drains its completion queue from a hard-mode hrtimer, each wait sized to collect
//! about one batch, until the rate drops (see `policy.rs`).
//!
//! Layout: `ctrl.rs` brings the controller up and down; `admin.rs` runs admin commands;
//! `queue.rs` holds the rings and the I/O path; `irq.rs` and `hrtimer.rs` the two completion
//! contexts; `policy.rs` the decisions; `blk.rs`, `dma.rs` and `adapter.rs` the glue to blk-mq,
//! streaming DMA and the PCI core; `cmd.rs`, `prp.rs` and `regs.rs` the NVMe definitions.

use core::ptr;
use kernel::{
    debugfs,
    driver::Registration,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Release},
    InPlaceModule,
};

mod adapter;
mod admin;
mod blk;
mod cmd;
mod ctrl;
mod dma;
mod hrtimer;
mod irq;
mod params;
mod policy;
mod prp;
mod queue;
mod raw;
mod regs;
mod stats;

/// The module's debugfs directory, for the controllers' statistics.
static DEBUGFS_ROOT: Atomic<*mut debugfs::Dir> = Atomic::new(ptr::null_mut());

/// The debugfs directory controllers put their statistics in.
pub(crate) fn debugfs_root() -> Option<&'static debugfs::Dir> {
    let root = DEBUGFS_ROOT.load(Acquire);
    // SAFETY: set in `init` to a boxed directory that `DebugfsRoot` frees only after the driver
    // is unregistered, i.e. after every controller (the only callers) is gone.
    unsafe { root.as_ref() }
}

/// Owns the debugfs directory published in `DEBUGFS_ROOT`.
struct DebugfsRoot {
    _dir: KBox<debugfs::Dir>,
}

impl Drop for DebugfsRoot {
    fn drop(&mut self) {
        DEBUGFS_ROOT.store(ptr::null_mut(), Release);
    }
}

#[pin_data]
struct NvmeAdaptiveModule {
    /// Unregistered first: every controller is unbound before the debugfs root goes.
    #[pin]
    _driver: Registration<adapter::NvmeAdapter>,
    _debugfs: DebugfsRoot,
}

impl InPlaceModule for NvmeAdaptiveModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pin_init::pin_init_scope(move || {
            let mut root = KBox::new(debugfs::Dir::new(c"nvme_adaptive"), GFP_KERNEL)?;
            DEBUGFS_ROOT.store(&raw mut *root, Release);
            Ok(try_pin_init!(Self {
                _debugfs: DebugfsRoot { _dir: root },
                _driver <- Registration::new(c"nvme_adaptive", module),
            }))
        })
    }
}

module! {
    type: NvmeAdaptiveModule,
    name: "nvme_adaptive",
    authors: ["nvme-adaptive developers"],
    description: "NVMe PCI driver with per-queue adaptive interrupt polling",
    license: "GPL v2",
}
