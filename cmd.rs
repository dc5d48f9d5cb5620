// SPDX-License-Identifier: GPL-2.0

//! NVMe submission and completion queue entries, opcodes, status codes and the parts of the
//! Identify data the driver uses (NVM Express Base Specification 2.0, NVM Command Set 1.0).
//!
//! Everything here is plain data and arithmetic, so the KUnit suite at the bottom checks it.

use kernel::prelude::*;

/// Admin command opcodes.
pub(crate) mod admin_opcode {
    pub(crate) const DELETE_SQ: u8 = 0x00;
    pub(crate) const CREATE_SQ: u8 = 0x01;
    pub(crate) const DELETE_CQ: u8 = 0x04;
    pub(crate) const CREATE_CQ: u8 = 0x05;
    pub(crate) const IDENTIFY: u8 = 0x06;
    pub(crate) const SET_FEATURES: u8 = 0x09;
}

/// NVM command set opcodes.
pub(crate) mod io_opcode {
    pub(crate) const FLUSH: u8 = 0x00;
    pub(crate) const WRITE: u8 = 0x01;
    pub(crate) const READ: u8 = 0x02;
    pub(crate) const WRITE_ZEROES: u8 = 0x08;
    pub(crate) const DSM: u8 = 0x09;
}

/// Identify CNS values.
pub(crate) const CNS_NAMESPACE: u32 = 0x00;
pub(crate) const CNS_CONTROLLER: u32 = 0x01;
pub(crate) const CNS_ACTIVE_NS_LIST: u32 = 0x02;

/// Feature identifier of "Number of Queues".
pub(crate) const FEAT_NUM_QUEUES: u32 = 0x07;

/// Size of an Identify data structure and of a controller memory page (CC.MPS = 0).
pub(crate) const PAGE_SIZE: usize = 4096;

/// Read/write `control` (CDW12 bits 31:16): force unit access.
const RW_FUA: u32 = 1 << 30;
/// Write Zeroes CDW12: deallocate the blocks if the controller can.
const WZ_DEAC: u32 = 1 << 25;
/// Dataset Management CDW11: attribute "deallocate".
const DSM_AD: u32 = 1 << 2;
/// Create I/O CQ/SQ CDW11: physically contiguous.
const QUEUE_PHYS_CONTIG: u32 = 1 << 0;
/// Create I/O CQ CDW11: interrupts enabled.
const CQ_IRQ_ENABLED: u32 = 1 << 1;

/// A 64-byte submission queue entry.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, FromBytes, IntoBytes)]
pub(crate) struct Command {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) command_id: u16,
    pub(crate) nsid: u32,
    pub(crate) cdw2: u32,
    pub(crate) cdw3: u32,
    pub(crate) metadata: u64,
    pub(crate) prp1: u64,
    pub(crate) prp2: u64,
    pub(crate) cdw10: u32,
    pub(crate) cdw11: u32,
    pub(crate) cdw12: u32,
    pub(crate) cdw13: u32,
    pub(crate) cdw14: u32,
    pub(crate) cdw15: u32,
}

// SAFETY: `Command` is `repr(C)` plain integers without padding: any bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Command {}
// SAFETY: `Command` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for Command {}

const _: () = assert!(core::mem::size_of::<Command>() == 64);

impl Command {
    fn new(opcode: u8, nsid: u32) -> Self {
        Self {
            opcode,
            nsid: nsid.to_le(),
            ..Self::default()
        }
    }

    /// Read or Write of `blocks` logical blocks from `slba`; data pointers are set later.
    pub(crate) fn read_write(write: bool, nsid: u32, slba: u64, blocks: u32, fua: bool) -> Self {
        let mut c = Self::new(
            if write {
                io_opcode::WRITE
            } else {
                io_opcode::READ
            },
            nsid,
        );
        // FUA is bit 30 of the range's CDW12.
        c.set_range(slba, blocks, if fua { RW_FUA } else { 0 });
        c
    }

    pub(crate) fn flush(nsid: u32) -> Self {
        Self::new(io_opcode::FLUSH, nsid)
    }

    pub(crate) fn write_zeroes(nsid: u32, slba: u64, blocks: u32, deallocate: bool) -> Self {
        let mut c = Self::new(io_opcode::WRITE_ZEROES, nsid);
        c.set_range(slba, blocks, if deallocate { WZ_DEAC } else { 0 });
        c
    }

    /// The starting LBA (CDW10-11) and the 0's based block count (low 16 bits of CDW12) of a
    /// read, write or write zeroes, with `flags` in the rest of CDW12.
    fn set_range(&mut self, slba: u64, blocks: u32, flags: u32) {
        self.cdw10 = (slba as u32).to_le();
        self.cdw11 = ((slba >> 32) as u32).to_le();
        self.cdw12 = ((blocks - 1) | flags).to_le();
    }

    /// CDW10 of both queue creation commands: queue id and 0's based size.
    fn queue_id_and_size(qid: u16, depth: u16) -> u32 {
        (u32::from(qid) | u32::from(depth - 1) << 16).to_le()
    }

    /// Dataset Management "deallocate" of `ranges` ranges held in the buffer at `prp1`.
    pub(crate) fn deallocate(nsid: u32, ranges: u32) -> Self {
        let mut c = Self::new(io_opcode::DSM, nsid);
        c.cdw10 = (ranges - 1).to_le();
        c.cdw11 = DSM_AD.to_le();
        c
    }

    pub(crate) fn identify(cns: u32, nsid: u32) -> Self {
        let mut c = Self::new(admin_opcode::IDENTIFY, nsid);
        c.cdw10 = cns.to_le();
        c
    }

    pub(crate) fn set_features(fid: u32, value: u32) -> Self {
        let mut c = Self::new(admin_opcode::SET_FEATURES, 0);
        c.cdw10 = fid.to_le();
        c.cdw11 = value.to_le();
        c
    }

    /// Create I/O Completion Queue `qid` of `depth` entries at `dma`; `vector` is the MSI-X
    /// table entry, or `None` for a polled queue without interrupts.
    pub(crate) fn create_cq(qid: u16, depth: u16, dma: u64, vector: Option<u16>) -> Self {
        let mut c = Self::new(admin_opcode::CREATE_CQ, 0);
        c.prp1 = dma.to_le();
        c.cdw10 = Self::queue_id_and_size(qid, depth);
        c.cdw11 = match vector {
            Some(v) => QUEUE_PHYS_CONTIG | CQ_IRQ_ENABLED | u32::from(v) << 16,
            None => QUEUE_PHYS_CONTIG,
        }
        .to_le();
        c
    }

    /// Create I/O Submission Queue `qid` of `depth` entries at `dma`, completing on CQ `qid`.
    pub(crate) fn create_sq(qid: u16, depth: u16, dma: u64) -> Self {
        let mut c = Self::new(admin_opcode::CREATE_SQ, 0);
        c.prp1 = dma.to_le();
        c.cdw10 = Self::queue_id_and_size(qid, depth);
        c.cdw11 = (QUEUE_PHYS_CONTIG | u32::from(qid) << 16).to_le();
        c
    }

    pub(crate) fn delete_queue(sq: bool, qid: u16) -> Self {
        let op = if sq {
            admin_opcode::DELETE_SQ
        } else {
            admin_opcode::DELETE_CQ
        };
        let mut c = Self::new(op, 0);
        c.cdw10 = u32::from(qid).to_le();
        c
    }

    pub(crate) fn set_prps(&mut self, prp1: u64, prp2: u64) {
        self.prp1 = prp1.to_le();
        self.prp2 = prp2.to_le();
    }
}

/// A 16-byte completion queue entry.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, FromBytes, IntoBytes)]
pub(crate) struct Completion {
    pub(crate) result: u32,
    pub(crate) result_hi: u32,
    pub(crate) sq_head: u16,
    pub(crate) sq_id: u16,
    pub(crate) command_id: u16,
    /// Status field; bit 0 is the phase tag.
    pub(crate) status: u16,
}

impl Completion {
    /// The command identifier, in CPU byte order.
    pub(crate) fn cid(&self) -> u16 {
        u16::from_le(self.command_id)
    }

    /// The status of the command.
    pub(crate) fn status(&self) -> Status {
        Status::of(u16::from_le(self.status))
    }
}

// SAFETY: `Completion` is `repr(C)` plain integers without padding: any bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Completion {}
// SAFETY: `Completion` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for Completion {}

const _: () = assert!(core::mem::size_of::<Completion>() == 16);

/// A Dataset Management range (16 bytes, little endian).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, FromBytes, IntoBytes)]
pub(crate) struct DsmRange {
    pub(crate) attributes: u32,
    pub(crate) blocks: u32,
    pub(crate) slba: u64,
}

// SAFETY: `DsmRange` is `repr(C)` plain integers without padding: any bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for DsmRange {}
// SAFETY: `DsmRange` is `repr(C)` plain integers without padding.
unsafe impl kernel::transmute::AsBytes for DsmRange {}

impl DsmRange {
    pub(crate) fn new(slba: u64, blocks: u32) -> Self {
        Self {
            attributes: 0,
            blocks: blocks.to_le(),
            slba: slba.to_le(),
        }
    }
}

/// The status of a completion, without the phase bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status(pub(crate) u16);

/// Status codes (type in bits 10:8, code in 7:0) the driver treats specially.
pub(crate) mod sc {
    pub(crate) const SUCCESS: u16 = 0x0;
    pub(crate) const INVALID_OPCODE: u16 = 0x1;
    pub(crate) const INVALID_FIELD: u16 = 0x2;
    pub(crate) const ABORT_REQ: u16 = 0x7;
    pub(crate) const INVALID_NS: u16 = 0xb;
    pub(crate) const CMD_INTERRUPTED: u16 = 0x21;
    pub(crate) const LBA_RANGE: u16 = 0x80;
    pub(crate) const CAP_EXCEEDED: u16 = 0x81;
    pub(crate) const NS_NOT_READY: u16 = 0x82;
    pub(crate) const RESERVATION_CONFLICT: u16 = 0x83;
    pub(crate) const BAD_ATTRIBUTES: u16 = 0x180;
    pub(crate) const INVALID_PI: u16 = 0x181;
    pub(crate) const READ_ONLY: u16 = 0x182;
    pub(crate) const WRITE_FAULT: u16 = 0x280;
    pub(crate) const READ_ERROR: u16 = 0x281;
    pub(crate) const GUARD_CHECK: u16 = 0x282;
    pub(crate) const APPTAG_CHECK: u16 = 0x283;
    pub(crate) const REFTAG_CHECK: u16 = 0x284;
    pub(crate) const COMPARE_FAILED: u16 = 0x285;
    pub(crate) const ACCESS_DENIED: u16 = 0x286;
    pub(crate) const UNWRITTEN_BLOCK: u16 = 0x287;
    /// Host-defined: the driver cancelled the command (controller reset or removal).
    pub(crate) const HOST_ABORTED: u16 = 0x371;
}

/// `blk_status_t` values (include/linux/blk_types.h; the C macros carry casts, so bindgen
/// cannot export them).
pub(crate) mod blk_status {
    pub(crate) const OK: u8 = 0;
    pub(crate) const NOTSUPP: u8 = 1;
    pub(crate) const NOSPC: u8 = 3;
    pub(crate) const TARGET: u8 = 5;
    pub(crate) const RESV_CONFLICT: u8 = 6;
    pub(crate) const MEDIUM: u8 = 7;
    pub(crate) const PROTECTION: u8 = 8;
    pub(crate) const RESOURCE: u8 = 9;
    pub(crate) const IOERR: u8 = 10;
}

impl Status {
    const CODE_MASK: u16 = 0x07ff;
    const DNR: u16 = 1 << 14;

    /// The status of a completion entry (drops the phase tag).
    pub(crate) fn of(cqe_status: u16) -> Self {
        Self(cqe_status >> 1)
    }

    pub(crate) const fn cancelled() -> Self {
        Self(sc::HOST_ABORTED)
    }

    pub(crate) fn is_success(self) -> bool {
        self.code() == sc::SUCCESS
    }

    /// Status code type and status code.
    pub(crate) fn code(self) -> u16 {
        self.0 & Self::CODE_MASK
    }

    /// "Do not retry": the same command would fail again.
    pub(crate) fn do_not_retry(self) -> bool {
        self.0 & Self::DNR != 0
    }

    /// The block layer status for this NVMe status: not every failure is an I/O error.
    pub(crate) fn to_blk(self) -> u8 {
        match self.code() {
            sc::SUCCESS => blk_status::OK,
            sc::CAP_EXCEEDED => blk_status::NOSPC,
            sc::LBA_RANGE | sc::CMD_INTERRUPTED | sc::NS_NOT_READY => blk_status::TARGET,
            sc::BAD_ATTRIBUTES | sc::INVALID_OPCODE | sc::INVALID_FIELD | sc::INVALID_NS => {
                blk_status::NOTSUPP
            }
            sc::WRITE_FAULT
            | sc::READ_ERROR
            | sc::UNWRITTEN_BLOCK
            | sc::ACCESS_DENIED
            | sc::READ_ONLY
            | sc::COMPARE_FAILED => blk_status::MEDIUM,
            sc::GUARD_CHECK | sc::APPTAG_CHECK | sc::REFTAG_CHECK | sc::INVALID_PI => {
                blk_status::PROTECTION
            }
            sc::RESERVATION_CONFLICT => blk_status::RESV_CONFLICT,
            _ => blk_status::IOERR,
        }
    }
}

/// Command identifiers: the blk-mq tag in the low 12 bits and a 4-bit generation above, so a
/// completion for an earlier use of the same tag (stale or duplicate) is recognised.
pub(crate) mod command_id {
    const TAG_BITS: u32 = 12;
    const TAG_MASK: u16 = (1 << TAG_BITS) - 1;

    /// Largest queue depth whose tags fit the identifier.
    pub(crate) const MAX_DEPTH: u32 = 1 << TAG_BITS;

    pub(crate) fn encode(tag: u16, generation: u8) -> u16 {
        (u16::from(generation) & 0xf) << TAG_BITS | (tag & TAG_MASK)
    }

    pub(crate) fn tag(cid: u16) -> u16 {
        cid & TAG_MASK
    }

    pub(crate) fn generation(cid: u16) -> u8 {
        (cid >> TAG_BITS) as u8
    }

    /// The generation after `generation` (4 bits, wrapping).
    pub(crate) fn next_generation(generation: u8) -> u8 {
        (generation + 1) & 0xf
    }
}

fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn le64(b: &[u8], off: usize) -> u64 {
    u64::from(le32(b, off)) | u64::from(le32(b, off + 4)) << 32
}

/// The fields of Identify Controller the driver uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdController {
    pub(crate) vid: u16,
    /// Maximum data transfer size, as a power of two of CAP.MPSMIN pages; 0 means no limit.
    pub(crate) mdts: u8,
    /// RTD3 entry latency in microseconds (bounds the shutdown wait).
    pub(crate) rtd3e: u32,
    /// Required/maximum SQ and CQ entry sizes (powers of two, low nibble required).
    pub(crate) sqes: u8,
    pub(crate) cqes: u8,
    pub(crate) nn: u32,
    pub(crate) oncs: u16,
    pub(crate) vwc: u8,
    /// Model number (ASCII, space padded).
    pub(crate) model: [u8; 40],
}

impl IdController {
    pub(crate) const ONCS_DSM: u16 = 1 << 2;
    pub(crate) const ONCS_WRITE_ZEROES: u16 = 1 << 3;
    const VWC_PRESENT: u8 = 1 << 0;

    pub(crate) fn parse(b: &[u8; PAGE_SIZE]) -> Self {
        let mut model = [0u8; 40];
        model.copy_from_slice(&b[24..64]);
        Self {
            vid: le16(b, 0),
            mdts: b[77],
            rtd3e: le32(b, 88),
            sqes: b[512],
            cqes: b[513],
            nn: le32(b, 516),
            oncs: le16(b, 520),
            vwc: b[525],
            model,
        }
    }

    pub(crate) fn volatile_write_cache(&self) -> bool {
        self.vwc & Self::VWC_PRESENT != 0
    }

    /// Whether the controller accepts 64-byte SQEs and 16-byte CQEs (the only sizes we use).
    pub(crate) fn entry_sizes_supported(&self) -> bool {
        let fits = |v: u8, want: u8| v & 0xf <= want && v >> 4 >= want;
        fits(self.sqes, 6) && fits(self.cqes, 4)
    }

    /// The model number without trailing padding.
    pub(crate) fn model(&self) -> &str {
        let end = self
            .model
            .iter()
            .rposition(|&c| c != b' ' && c != 0)
            .map_or(0, |i| i + 1);
        core::str::from_utf8(&self.model[..end]).unwrap_or("?")
    }
}

/// The fields of Identify Namespace the driver uses.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdNamespace {
    /// Size in logical blocks.
    pub(crate) nsze: u64,
    /// Capacity in logical blocks; 0 means the namespace is not allocated.
    pub(crate) ncap: u64,
    /// log2 of the logical block size of the format in use.
    pub(crate) lba_shift: u8,
    /// Metadata bytes per block of the format in use.
    pub(crate) metadata_size: u16,
    /// Namespace is write protected.
    pub(crate) read_only: bool,
    /// Reads of deallocated blocks return zeroes (DLFEAT).
    pub(crate) deallocated_reads_zero: bool,
}

impl IdNamespace {
    pub(crate) fn parse(b: &[u8; PAGE_SIZE]) -> Self {
        let flbas = b[26];
        // Format index: bits 3:0, extended by bits 6:5 as bits 5:4 (NVMe 2.0).
        let index = usize::from(flbas & 0xf | (flbas & 0x60) >> 1);
        let lbaf = 128 + 4 * index.min(63);
        Self {
            nsze: le64(b, 0),
            ncap: le64(b, 8),
            metadata_size: le16(b, lbaf),
            lba_shift: b[lbaf + 2],
            read_only: b[99] & 1 != 0,
            deallocated_reads_zero: b[33] & 0x7 == 1,
        }
    }
}

/// The active namespace IDs in an Identify "active namespace list" page (0 ends the list).
pub(crate) fn active_namespaces(b: &[u8; PAGE_SIZE]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&nsid| nsid != 0)
}

#[kunit_tests(nvme_adaptive_cmd)]
mod tests {
    use super::*;

    #[test]
    fn read_write_encoding() {
        let c = Command::read_write(true, 3, 0x1_2345_6789, 8, true);
        assert_eq!(c.opcode, io_opcode::WRITE);
        assert_eq!(u32::from_le(c.nsid), 3);
        assert_eq!(u32::from_le(c.cdw10), 0x2345_6789);
        assert_eq!(u32::from_le(c.cdw11), 0x1);
        // 0's based block count and FUA.
        assert_eq!(u32::from_le(c.cdw12), 7 | 1 << 30);
        let r = Command::read_write(false, 1, 0, 1, false);
        assert_eq!(r.opcode, io_opcode::READ);
        assert_eq!(u32::from_le(r.cdw12), 0);
    }

    #[test]
    fn queue_creation_encoding() {
        let cq = Command::create_cq(2, 1024, 0xabc000, Some(2));
        assert_eq!(cq.opcode, admin_opcode::CREATE_CQ);
        assert_eq!(u32::from_le(cq.cdw10), 2 | 1023 << 16);
        assert_eq!(u32::from_le(cq.cdw11), 0b11 | 2 << 16);
        let polled = Command::create_cq(3, 64, 0, None);
        // A polled CQ has interrupts disabled.
        assert_eq!(u32::from_le(polled.cdw11), 1);
        let sq = Command::create_sq(2, 1024, 0xdef000);
        assert_eq!(u32::from_le(sq.cdw11), 1 | 2 << 16);
        assert_eq!(u64::from_le(sq.prp1), 0xdef000);
    }

    #[test]
    fn discard_and_write_zeroes_encoding() {
        let d = Command::deallocate(1, 3);
        assert_eq!(d.opcode, io_opcode::DSM);
        assert_eq!(u32::from_le(d.cdw10), 2);
        assert_eq!(u32::from_le(d.cdw11), 1 << 2);
        let r = DsmRange::new(0x10_0000_0001, 16);
        assert_eq!(u32::from_le(r.blocks), 16);
        assert_eq!(u64::from_le(r.slba), 0x10_0000_0001);
        let w = Command::write_zeroes(1, 5, 4, true);
        assert_eq!(u32::from_le(w.cdw12), 3 | 1 << 25);
    }

    #[test]
    fn command_id_generations() {
        let cid = command_id::encode(0xabc, 5);
        assert_eq!(command_id::tag(cid), 0xabc);
        assert_eq!(command_id::generation(cid), 5);
        assert_eq!(command_id::next_generation(15), 0);
        assert_ne!(command_id::encode(7, 1), command_id::encode(7, 2));
        assert_eq!(command_id::encode(4095, 15), 0xffff);
    }

    #[test]
    fn status_mapping() {
        // Phase bit dropped; DNR recognised.
        let s = Status::of((0x4000 | sc::LBA_RANGE) << 1 | 1);
        assert_eq!(s.code(), sc::LBA_RANGE);
        assert!(s.do_not_retry());
        assert_eq!(s.to_blk(), blk_status::TARGET);
        assert_eq!(Status(sc::SUCCESS).to_blk(), blk_status::OK);
        assert_eq!(Status(sc::INVALID_FIELD).to_blk(), blk_status::NOTSUPP);
        assert_eq!(Status(sc::WRITE_FAULT).to_blk(), blk_status::MEDIUM);
        assert_eq!(Status(sc::READ_ERROR).to_blk(), blk_status::MEDIUM);
        assert_eq!(Status(sc::GUARD_CHECK).to_blk(), blk_status::PROTECTION);
        assert_eq!(Status(sc::CAP_EXCEEDED).to_blk(), blk_status::NOSPC);
        assert_eq!(Status(sc::ABORT_REQ).to_blk(), blk_status::IOERR);
        assert_eq!(Status::cancelled().to_blk(), blk_status::IOERR);
        assert!(!Status::cancelled().do_not_retry());
    }

    #[test]
    fn identify_namespace_format() {
        let mut b = [0u8; PAGE_SIZE];
        b[0..8].copy_from_slice(&1000u64.to_le_bytes());
        b[8..16].copy_from_slice(&1000u64.to_le_bytes());
        // Format 17 selected through the extended FLBAS bits: index 1 | (0x20 >> 1 = 16).
        b[26] = 0x21;
        let lbaf = 128 + 4 * 17;
        b[lbaf + 2] = 12;
        let ns = IdNamespace::parse(&b);
        assert_eq!(ns.nsze, 1000);
        assert_eq!(ns.lba_shift, 12);
        assert_eq!(ns.metadata_size, 0);
        b[lbaf] = 8;
        assert_eq!(IdNamespace::parse(&b).metadata_size, 8);
    }

    #[test]
    fn identify_controller_fields() {
        let mut b = [0u8; PAGE_SIZE];
        b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        b[24..24 + 14].copy_from_slice(b"QEMU NVMe Ctrl");
        for c in &mut b[38..64] {
            *c = b' ';
        }
        b[77] = 7;
        b[512] = 0x66;
        b[513] = 0x44;
        b[520] = 0x0c;
        b[525] = 1;
        let id = IdController::parse(&b);
        assert_eq!(id.vid, 0x1b36);
        assert_eq!(id.mdts, 7);
        assert_eq!(id.model(), "QEMU NVMe Ctrl");
        assert!(id.entry_sizes_supported());
        assert!(id.volatile_write_cache());
        assert!(id.oncs & IdController::ONCS_DSM != 0);
        b[512] = 0x77;
        assert!(!IdController::parse(&b).entry_sizes_supported());
        let mut list = [0u8; PAGE_SIZE];
        list[0] = 1;
        list[4] = 2;
        list[12] = 9;
        let mut ids = active_namespaces(&list);
        assert_eq!(ids.next(), Some(1));
        assert_eq!(ids.next(), Some(2));
        // The list ends at the first zero.
        assert_eq!(ids.next(), None);
    }
}
