// SPDX-License-Identifier: GPL-2.0

//! nvme_adaptive: a PCI transport for nvme-core, written in Rust, whose distinguishing feature
//! is per-queue adaptive interrupt polling.
//!
//! Each interrupt-driven I/O queue measures its completion rate; when completions are dense
//! enough to fill a small batch within a bounded latency window, the queue masks its own MSI-X
//! vector and drains its completion queue from a CPU-pinned hrtimer, each wait sized to
//! collect about one batch, until the rate drops (`policy.rs`).
//!
//! The module mixes C and Rust objects, so kbuild names it after neither: this is the crate
//! root (as `rust_binder_main.rs` is binder's). Layout, top down: `nvme_adaptive.rs` is the
//! transport (what `pci.c` does); `queue.rs` the queue pairs and the I/O path, with the
//! interrupt handler in `irq.rs` and the poll timer in `hrtimer.rs`; `mapping.rs` PRP and SGL
//! data mapping; `policy.rs` the decisions; `params.rs` and `stats.rs` the parameters and
//! debugfs statistics; `cmd.rs` and `regs.rs` NVMe definitions; `sys/` the one layer that
//! touches C (nvme-core, blk-mq, PCI, DMA, interrupts, timers).

use kernel::prelude::*;

mod cmb;
mod cmd;
mod hmb;
mod hrtimer;
mod irq;
mod mapping;
mod nvme_adaptive;
mod params;
mod policy;
mod queue;
mod regs;
mod stats;
mod sys;

struct NvmeAdaptiveModule {
    /// Dropped first: every controller is unbound, its statistics files gone, before the
    /// debugfs directory is.
    _driver: sys::entry::DriverRegistration,
    _debugfs: sys::debugfs::Root,
}

impl kernel::Module for NvmeAdaptiveModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let debugfs = sys::debugfs::Root::new()?;
        Ok(Self {
            _driver: sys::entry::register::<nvme_adaptive::Controller>()?,
            _debugfs: debugfs,
        })
    }
}

module! {
    type: NvmeAdaptiveModule,
    name: "nvme_adaptive",
    authors: ["nvme-adaptive developers"],
    description: "NVMe PCI transport with per-queue adaptive interrupt polling",
    license: "GPL v2",
}
