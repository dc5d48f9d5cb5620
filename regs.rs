// SPDX-License-Identifier: GPL-2.0

//! The controller registers a PCI transport touches itself (NVM Express Base Specification
//! 2.1, section 3.1); nvme-core drives CC and waits on CSTS through the transport's register
//! accessors.

use kernel::prelude::*;

/// Controller Capabilities (64 bits).
pub(crate) const CAP: usize = 0x00;
/// Version.
pub(crate) const VS: usize = 0x08;
/// Controller Status.
pub(crate) const CSTS: usize = 0x1c;
/// NVM Subsystem Reset.
pub(crate) const NSSR: usize = 0x20;
/// Admin Queue Attributes.
pub(crate) const AQA: usize = 0x24;
/// Admin Submission Queue Base Address (64 bits).
pub(crate) const ASQ: usize = 0x28;
/// Admin Completion Queue Base Address (64 bits).
pub(crate) const ACQ: usize = 0x30;
/// Controller Memory Buffer Location.
pub(crate) const CMBLOC: usize = 0x38;
/// Controller Memory Buffer Size.
pub(crate) const CMBSZ: usize = 0x3c;
/// Controller Memory Buffer Memory Space Control (64 bits).
pub(crate) const CMBMSC: usize = 0x50;
/// The first doorbell.
pub(crate) const DOORBELLS: usize = 0x1000;

/// The value written to NSSR to reset the NVM subsystem ("NVMe").
pub(crate) const NSSR_RESET: u32 = 0x4e56_4d65;

/// CAP fields.
pub(crate) mod cap {
    /// Maximum queue entries supported, 0's based.
    pub(crate) fn mqes(cap: u64) -> u32 {
        (cap & 0xffff) as u32
    }

    /// Doorbell stride, in 4-byte units: 2^DSTRD.
    pub(crate) fn doorbell_stride(cap: u64) -> u32 {
        1 << ((cap >> 32) & 0xf)
    }

    /// NVM subsystem reset supported.
    pub(crate) fn nssrs(cap: u64) -> bool {
        cap >> 36 & 1 != 0
    }

    /// Controller Memory Buffer Supported: the NVMe 1.4 scheme, where CMBMSC enables CMBLOC,
    /// CMBSZ and the CMB itself.
    pub(crate) fn cmbs(cap: u64) -> bool {
        cap >> 57 & 1 != 0
    }
}

/// CSTS bits.
pub(crate) mod csts {
    /// Ready.
    pub(crate) const RDY: u32 = 1 << 0;
    /// Controller fatal status.
    pub(crate) const CFS: u32 = 1 << 1;
    /// NVM subsystem reset occurred.
    pub(crate) const NSSRO: u32 = 1 << 4;
}

/// VS 1.1.0: the first version with NVM subsystem reset.
pub(crate) const VS_1_1: u32 = 0x0001_0100;

/// The tail doorbell of submission queue `qid`, and the head doorbell of completion queue
/// `qid` (one stride after it), as offsets in BAR0 and as indexes in 4-byte units, which is
/// how the shadow doorbell buffers count.
pub(crate) struct Doorbells {
    pub(crate) sq_index: usize,
    pub(crate) cq_index: usize,
}

impl Doorbells {
    pub(crate) fn of(qid: u16, stride: u32) -> Self {
        let sq_index = 2 * usize::from(qid) * stride as usize;
        Self {
            sq_index,
            cq_index: sq_index + stride as usize,
        }
    }

    pub(crate) fn sq_offset(&self) -> usize {
        DOORBELLS + 4 * self.sq_index
    }

    pub(crate) fn cq_offset(&self) -> usize {
        DOORBELLS + 4 * self.cq_index
    }
}

/// The BAR0 size that holds the doorbells of the admin queue and `io_queues` I/O queues.
pub(crate) fn bar_size_for(io_queues: u32, stride: u32) -> usize {
    DOORBELLS + (io_queues as usize + 1) * 8 * stride as usize
}

#[kunit_tests(nvme_adaptive_regs)]
mod tests {
    use super::*;

    #[test]
    fn capability_fields() {
        // QEMU's controller: MQES 0x7ff, DSTRD 0, NSSRS clear.
        let cap = 0x0000_0040_0f01_07ff_u64;
        assert_eq!(cap::mqes(cap), 0x7ff);
        assert_eq!(cap::doorbell_stride(cap), 1);
        assert!(!cap::nssrs(cap));
        assert!(!cap::cmbs(cap));
        let cap = cap | 3 << 32 | 1 << 36 | 1 << 57;
        assert_eq!(cap::doorbell_stride(cap), 8);
        assert!(cap::nssrs(cap));
        assert!(cap::cmbs(cap));
    }

    #[test]
    fn doorbell_layout() {
        // Stride 1: SQ y at 0x1000 + 8y, CQ y 4 bytes after it.
        let db = Doorbells::of(3, 1);
        assert_eq!((db.sq_offset(), db.cq_offset()), (0x1018, 0x101c));
        assert_eq!((db.sq_index, db.cq_index), (6, 7));
        // Stride 4 (DSTRD 2): 16-byte doorbells.
        let db = Doorbells::of(1, 4);
        assert_eq!((db.sq_offset(), db.cq_offset()), (0x1020, 0x1030));
        assert_eq!(bar_size_for(3, 1), 0x1020);
    }
}
