// SPDX-License-Identifier: GPL-2.0

//! The Controller Memory Buffer (NVM Express Base Specification 2.1, 3.1.4.10 to 3.1.4.12 and
//! 8.2.1): where CMBLOC and CMBSZ place it in a BAR, and how deep I/O submission queues kept in
//! it can be, as `pci.c` computes them (`nvme_map_cmb`, `nvme_cmb_qdepth`).

use kernel::prelude::*;

/// CMBSZ: what the CMB may hold.
pub(crate) mod cmbsz {
    /// Submission queues.
    pub(crate) const SQS: u32 = 1 << 0;
    /// Read data.
    pub(crate) const RDS: u32 = 1 << 3;
    /// Write data.
    pub(crate) const WDS: u32 = 1 << 4;
}

/// CMBMSC: Capabilities Registers Enabled (CMBLOC and CMBSZ read as something).
pub(crate) const CMBMSC_CRE: u64 = 1 << 0;
/// CMBMSC: Controller Memory Space Enabled (the controller decodes the CMB at CBA).
pub(crate) const CMBMSC_CMSE: u64 = 1 << 1;

/// What CMBLOC and CMBSZ say.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Registers {
    pub(crate) cmbloc: u32,
    pub(crate) cmbsz: u32,
}

impl Registers {
    /// The BAR (Base Indicator Register) the CMB is in.
    pub(crate) fn bar(self) -> u32 {
        self.cmbloc & 0x7
    }

    pub(crate) fn supports(self, bits: u32) -> bool {
        self.cmbsz & bits == bits
    }

    /// The size unit: 4 KiB times 16 to the SZU (`None` beyond 64 bits; SZU 7 and up are
    /// reserved).
    fn unit(self) -> Option<u64> {
        1u64.checked_shl(12 + 4 * ((self.cmbsz >> 8) & 0xf))
    }

    /// The CMB's offset and size in its BAR of `bar_len` bytes: cut to the BAR, as controllers
    /// behind a bridge may claim more than their BAR holds; `None` when it starts beyond it.
    pub(crate) fn in_bar(self, bar_len: u64) -> Option<(u64, u64)> {
        let unit = self.unit()?;
        let offset = unit.checked_mul(u64::from(self.cmbloc >> 12))?;
        if offset > bar_len {
            return None;
        }
        let size = unit.saturating_mul(u64::from(self.cmbsz >> 12));
        Some((offset, size.min(bar_len - offset)))
    }
}

/// The depth of `queues` I/O submission queues of `depth` entries of `entry_size` bytes each
/// in a CMB of `cmb_size` bytes, each queue taking whole pages of `page` bytes: `depth` if they
/// fit, else what does; `None` below 64 entries, where queues of the full depth in host memory
/// serve better (`nvme_cmb_qdepth`).
pub(crate) fn sq_depth(
    depth: u16,
    queues: u32,
    entry_size: u32,
    cmb_size: u64,
    page: u32,
) -> Option<u16> {
    let (entry, page) = (u64::from(entry_size), u64::from(page));
    let aligned = (u64::from(depth) * entry).div_ceil(page) * page;
    if aligned * u64::from(queues) <= cmb_size {
        return Some(depth);
    }
    let per_queue = cmb_size / u64::from(queues.max(1)) / page * page;
    let fitting = per_queue / entry;
    (fitting >= 64).then(|| fitting.min(depth.into()) as u16)
}

#[kunit_tests(nvme_adaptive_cmb)]
mod tests {
    use super::*;

    #[test]
    fn qemu_cmb_of_16_mib() {
        // QEMU's controller with cmb_size_mb=16: BAR 2 of 16 MiB, offset 0, size 16 units of
        // 1 MiB, submission and completion queues, lists, read and write data.
        let r = Registers {
            cmbloc: 0x2,
            cmbsz: 16 << 12 | 2 << 8 | 0x1f,
        };
        assert_eq!(r.bar(), 2);
        assert!(r.supports(cmbsz::SQS));
        assert!(r.supports(cmbsz::WDS | cmbsz::RDS));
        assert_eq!(r.in_bar(16 << 20), Some((0, 16 << 20)));
        // A BAR smaller than the CMB cuts it.
        assert_eq!(r.in_bar(8 << 20), Some((0, 8 << 20)));
    }

    #[test]
    fn offset_and_reserved_units() {
        // 4 KiB units, 256 of them, starting 16 units into BAR 4.
        let r = Registers {
            cmbloc: 16 << 12 | 4,
            cmbsz: 256 << 12 | cmbsz::SQS,
        };
        assert_eq!(r.bar(), 4);
        assert!(!r.supports(cmbsz::RDS));
        assert_eq!(r.in_bar(2 << 20), Some((64 << 10, 1 << 20)));
        assert_eq!(r.in_bar(32 << 10), None);
        // SZU 15 (reserved) does not overflow into a small size.
        let r = Registers {
            cmbloc: 0,
            cmbsz: 1 << 12 | 0xf << 8,
        };
        assert_eq!(r.in_bar(1 << 20), None);
    }

    #[test]
    fn submission_queue_depth() {
        // 8 queues of 1024 64-byte entries fit 16 MiB.
        assert_eq!(sq_depth(1024, 8, 64, 16 << 20, 4096), Some(1024));
        // 64 such queues need 4 MiB: in 1 MiB, 16 KiB each, 256 entries.
        assert_eq!(sq_depth(1024, 64, 64, 1 << 20, 4096), Some(256));
        // 3 queues in 100 KiB: 33 KiB rounded down to 32 KiB, 512 entries.
        assert_eq!(sq_depth(1024, 3, 64, 100 << 10, 4096), Some(512));
        // One page each: 64 entries, the least that is kept.
        assert_eq!(sq_depth(1024, 64, 64, 256 << 10, 4096), Some(64));
        // Fewer than 64 entries each (32 of 128 bytes, or none): host memory instead.
        assert_eq!(sq_depth(1024, 64, 128, 256 << 10, 4096), None);
        assert_eq!(sq_depth(1024, 64, 64, 128 << 10, 4096), None);
    }
}
