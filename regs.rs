// SPDX-License-Identifier: GPL-2.0

//! NVMe controller registers in BAR0 (NVM Express Base Specification 2.0, section 3.1).
//!
//! 64-bit registers are declared as two 32-bit halves and accessed low half first, as the C
//! driver's `lo_hi_readq()` does: some controllers do not accept 64-bit MMIO.

use kernel::io::register;

/// Offset of the first doorbell register.
pub(crate) const DOORBELL_BASE: usize = 0x1000;

/// Size of the fixed register block plus the admin queue doorbells, which every controller has.
pub(crate) const BAR0_MIN_SIZE: usize = DOORBELL_BASE + 8;

register! {
    /// Controller Capabilities, low half.
    pub(crate) CAP_LO(u32) @ 0x00 {
        /// Timeout for CSTS.RDY transitions, in 500 ms units.
        31:24 to;
        /// Arbitration mechanisms supported.
        18:17 ams;
        /// Contiguous queues required.
        16:16 cqr => bool;
        /// Maximum queue entries supported, 0's based.
        15:0 mqes;
    }

    /// Controller Capabilities, high half.
    pub(crate) CAP_HI(u32) @ 0x04 {
        /// Controller ready with media support (CRMS), 2 bits.
        28:27 crms;
        /// Memory page size maximum: 2^(12 + MPSMAX).
        23:20 mpsmax;
        /// Memory page size minimum: 2^(12 + MPSMIN).
        19:16 mpsmin;
        /// Boot partition support.
        13:13 bps => bool;
        /// Command sets supported; bit 0 is the NVM command set, bit 6 "I/O command sets".
        12:5 css;
        /// NVM subsystem reset supported.
        4:4 nssrs => bool;
        /// Doorbell stride: 2^(2 + DSTRD) bytes.
        3:0 dstrd;
    }

    /// Version.
    pub(crate) VS(u32) @ 0x08 {
        31:16 major;
        15:8 minor;
        7:0 tertiary;
    }

    /// Controller Configuration.
    pub(crate) CC(u32) @ 0x14 {
        /// I/O completion queue entry size: 2^IOCQES bytes.
        23:20 iocqes;
        /// I/O submission queue entry size: 2^IOSQES bytes.
        19:16 iosqes;
        /// Shutdown notification: 1 normal, 2 abrupt.
        15:14 shn;
        /// Arbitration mechanism selected.
        13:11 ams;
        /// Memory page size: 2^(12 + MPS).
        10:7 mps;
        /// I/O command set selected: 0 NVM only, 6 all supported sets.
        6:4 css;
        /// Enable.
        0:0 en => bool;
    }

    /// Controller Status.
    pub(crate) CSTS(u32) @ 0x1c {
        /// Shutdown status: 0 normal operation, 1 in progress, 2 complete.
        3:2 shst;
        /// Controller fatal status.
        1:1 cfs => bool;
        /// Ready.
        0:0 rdy => bool;
    }

    /// Admin Queue Attributes.
    pub(crate) AQA(u32) @ 0x24 {
        /// Admin completion queue size, 0's based.
        27:16 acqs;
        /// Admin submission queue size, 0's based.
        11:0 asqs;
    }

    /// Admin Submission Queue base address, low half.
    pub(crate) ASQ_LO(u32) @ 0x28 {
        31:0 value;
    }

    /// Admin Submission Queue base address, high half.
    pub(crate) ASQ_HI(u32) @ 0x2c {
        31:0 value;
    }

    /// Admin Completion Queue base address, low half.
    pub(crate) ACQ_LO(u32) @ 0x30 {
        31:0 value;
    }

    /// Admin Completion Queue base address, high half.
    pub(crate) ACQ_HI(u32) @ 0x34 {
        31:0 value;
    }
}

/// CSTS read back as all ones: the device no longer answers (surprise removal, link down).
pub(crate) const DEVICE_GONE: u32 = !0;

/// CC.SHN value for a normal shutdown notification.
pub(crate) const SHN_NORMAL: u32 = 1;
/// CSTS.SHST value once shutdown processing is complete.
pub(crate) const SHST_COMPLETE: u32 = 2;
/// CAP.CSS bit: the controller supports the "I/O command sets" selection (CC.CSS = 6).
pub(crate) const CAP_CSS_CSI: u32 = 1 << 6;
/// CC.CSS values: the NVM command set only, or every supported set.
pub(crate) const CC_CSS_NVM: u32 = 0;
pub(crate) const CC_CSS_CSI: u32 = 6;
