// SPDX-License-Identifier: GPL-2.0

//! The one layer that touches C: every raw binding, every `unsafe` block and the whole
//! nvme-core interface of the module live here, behind safe types. The transport above it
//! (`nvme_adaptive.rs`, `queue.rs`, ...) implements [`Transport`] and never sees a raw pointer.
//!
//! `glue.c` holds what Rust cannot reach (static inline helpers, macros, the stock driver's
//! quirks); `ffi.rs` has bindgen's declarations of `glue.h` and of nvme-core's header;
//! `entry.rs` builds the PCI driver and nvme-core's and blk-mq's operation tables, and turns the
//! C callbacks into calls of [`Transport`] methods; the other files wrap one kernel facility
//! each.

pub(crate) mod blk;
pub(crate) mod coherent;
pub(crate) mod cpu;
pub(crate) mod debugfs;
pub(crate) mod dma;
pub(crate) mod entry;
mod ffi;
pub(crate) mod hrtimer;
pub(crate) mod irq;
pub(crate) mod numa;
pub(crate) mod nvme;
pub(crate) mod params;
pub(crate) mod pci;
pub(crate) mod sync;
mod sysfs;

use kernel::{
    device::Core,
    pci::Device as PciDevice,
    prelude::*, //
};

/// What a PCI transport for nvme-core implements: the callbacks of the PCI driver, of
/// nvme-core's controller ops and of the two blk-mq tag sets, whose tables [`entry`] builds.
pub(crate) trait Transport: blk::TagSetTypes + Send + Sync + Sized + 'static {
    /// The nvme-core controller this transport serves.
    fn core(&self) -> nvme::Ctrl;
    /// The PCI function it drives.
    fn function(&self) -> &pci::Function;
    /// Makes the transport state of a controller being probed, before nvme-core knows it.
    fn new(
        pdev: &PciDevice<Core<'_>>,
        core: nvme::Ctrl,
        quirks: nvme::Quirks,
    ) -> Result<Pin<KBox<Self>>>;
    /// Brings the controller up, after nvme-core registered it (`nvme_add_ctrl`). On error,
    /// undoes what it did; nvme-core's part is undone by the caller.
    fn probe(&self, pdev: &PciDevice<Core<'_>>) -> Result;
    /// Takes the controller down; nvme-core's part (`nvme_uninit_ctrl`) follows.
    fn remove(&self);
    fn shutdown(&self);
    fn error_detected(&self, state: pci::ChannelState) -> pci::ErsResult;
    fn slot_reset(&self) -> pci::ErsResult;
    fn error_resume(&self);
    fn reset_prepare(&self);
    fn reset_done(&self);
    fn suspend(&self) -> Result;
    /// System resume, on the function the driver is bound to (`dev`).
    fn resume(&self, dev: &kernel::device::Device<kernel::device::Bound>) -> Result;
    fn simple_suspend(&self) -> Result;
    fn simple_resume(&self) -> Result;

    fn reg_read32(&self, offset: u32) -> Result<u32>;
    fn reg_write32(&self, offset: u32, value: u32) -> Result;
    fn reg_read64(&self, offset: u32) -> Result<u64>;
    fn submit_async_event(&self);
    fn subsystem_reset(&self) -> Result;
    fn virt_boundary(&self, is_admin: bool) -> u64;
    /// nvme-core's reset work, on the function the driver is bound to (`dev`).
    fn reset_work(&self, dev: &kernel::device::Device<kernel::device::Bound>);
    /// The queue serving hardware queue `qid` (0: admin), which blk-mq is setting up for the
    /// CPUs of `node`.
    fn queue(&self, qid: u32, tags: blk::Tags<Self::Iod>, node: numa::Node)
        -> Option<&Self::Queue>;
    fn map_queues(&self, maps: &mut blk::QueueMaps<'_>);
    /// An Abort command sent by [`Transport::timeout`] completed with `status`.
    fn abort_done(&self, status: u16);
    /// sysfs `hmb` written: the host memory buffer on or off, on the function the driver is
    /// bound to (`dev`).
    fn set_host_memory(
        &self,
        dev: &kernel::device::Device<kernel::device::Bound>,
        on: bool,
    ) -> Result;
    /// CPU `cpu` is about to go down (it still runs); its managed interrupts go next.
    fn cpu_going_down(&self, cpu: u32);
    /// The offline of CPU `cpu` ended: it went down, or a failed offline brought it back.
    fn cpu_down_ended(&self, cpu: u32);

    /// blk-mq's `queue_rq`: issues the request, or gives it back with a status.
    fn queue_rq(
        q: &Self::Queue,
        rq: blk::Request<Self::Iod>,
        last: bool,
    ) -> Result<(), blk::Rejected>;
    fn queue_rqs(list: &mut blk::RqList<'_, Self>);
    fn commit_rqs(q: &Self::Queue);
    /// blk-mq's `complete`: the request's command is done (on this CPU).
    fn complete_rq(q: &Self::Queue, rq: blk::Request<Self::Iod>);
    /// Returns true to give the request more time, false when it was dealt with.
    fn timeout(&self, q: &Self::Queue, rq: blk::InFlight<Self::Iod>) -> bool;
    fn poll(q: &Self::Queue, batch: &mut blk::Batch<'_>) -> i32;
    /// A Delete SQ or CQ command sent for queue `qid` ended.
    fn delete_done(&self, qid: u16, error: bool);
}
