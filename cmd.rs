// SPDX-License-Identifier: GPL-2.0

//! The NVMe submission and completion queue entries, and the commands a PCI transport builds
//! itself (NVM Express Base Specification 2.1). nvme-core builds every other command.

use kernel::prelude::*;

/// Admin command opcodes the transport sends.
pub(crate) mod opcode {
    pub(crate) const DELETE_SQ: u8 = 0x00;
    pub(crate) const CREATE_SQ: u8 = 0x01;
    pub(crate) const DELETE_CQ: u8 = 0x04;
    pub(crate) const ABORT: u8 = 0x08;
    pub(crate) const CREATE_CQ: u8 = 0x05;
    pub(crate) const SET_FEATURES: u8 = 0x09;
    pub(crate) const ASYNC_EVENT: u8 = 0x0c;
    pub(crate) const DOORBELL_BUFFER_CONFIG: u8 = 0x7c;
}

/// Create I/O CQ/SQ: the queue is physically contiguous.
const QUEUE_PHYS_CONTIG: u16 = 1 << 0;
/// Create I/O CQ: interrupts enabled.
const CQ_IRQ_ENABLED: u16 = 1 << 1;
/// Create I/O SQ: medium priority (for controllers that enable weighted round robin wrongly).
const SQ_PRIO_MEDIUM: u16 = 2 << 1;

/// Command flags (CDW0 bits 15:8): how the data and metadata pointers are described (PSDT).
pub(crate) mod psdt {
    /// Data described by an SGL; metadata pointer is a contiguous buffer.
    pub(crate) const SGL_METABUF: u8 = 1 << 6;
    /// Data described by an SGL; metadata pointer points to an SGL segment.
    pub(crate) const SGL_METASEG: u8 = 2 << 6;
}

/// A 64-byte submission queue entry (`struct nvme_command`). Integers are little endian as
/// stored; the data pointer is two PRP entries or one SGL descriptor.
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
    pub(crate) dptr: [u64; 2],
    pub(crate) cdw10: u32,
    pub(crate) cdw11: u32,
    pub(crate) cdw12: u32,
    pub(crate) cdw13: u32,
    pub(crate) cdw14: u32,
    pub(crate) cdw15: u32,
}

const _: () = assert!(core::mem::size_of::<Command>() == 64);

/// An SGL descriptor (16 bytes): data block, or (last) segment pointing to more descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SglDescriptor {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    /// Descriptor type in the high nibble of the last byte.
    pub(crate) kind: u8,
}

impl SglDescriptor {
    const DATA_BLOCK: u8 = 0x0 << 4;
    const LAST_SEGMENT: u8 = 0x3 << 4;

    pub(crate) fn data(addr: u64, length: u32) -> Self {
        Self {
            addr,
            length,
            kind: Self::DATA_BLOCK,
        }
    }

    /// Points to `entries` descriptors at `addr`, the last segment.
    pub(crate) fn last_segment(addr: u64, entries: u32) -> Self {
        Self {
            addr,
            length: entries * 16,
            kind: Self::LAST_SEGMENT,
        }
    }

    /// The descriptor as two little-endian words (address; length and type).
    pub(crate) fn words(self) -> [u64; 2] {
        [
            self.addr.to_le(),
            (u64::from(self.length) | u64::from(self.kind) << 56).to_le(),
        ]
    }

    /// Reads a descriptor back from its two little-endian words.
    pub(crate) fn from_words(w: [u64; 2]) -> Self {
        let (addr, second) = (u64::from_le(w[0]), u64::from_le(w[1]));
        Self {
            addr,
            length: second as u32,
            kind: (second >> 56) as u8,
        }
    }

    pub(crate) fn is_data_block(self) -> bool {
        self.kind == Self::DATA_BLOCK
    }
}

impl Command {
    fn admin(opcode: u8) -> Self {
        Self {
            opcode,
            ..Self::default()
        }
    }

    /// Create I/O Completion Queue `qid` of `depth` entries at `dma`, interrupting on MSI-X
    /// vector `vector`, or polled (no interrupts) when `vector` is `None`.
    pub(crate) fn create_cq(qid: u16, depth: u16, dma: u64, vector: Option<u16>) -> Self {
        let mut c = Self::admin(opcode::CREATE_CQ);
        c.dptr[0] = dma.to_le();
        c.cdw10 = queue_id_and_size(qid, depth);
        let flags = QUEUE_PHYS_CONTIG | if vector.is_some() { CQ_IRQ_ENABLED } else { 0 };
        c.cdw11 = (u32::from(flags) | u32::from(vector.unwrap_or(0)) << 16).to_le();
        c
    }

    /// Create I/O Submission Queue `qid` of `depth` entries at `dma`, completing to CQ `qid`.
    pub(crate) fn create_sq(qid: u16, depth: u16, dma: u64, medium_priority: bool) -> Self {
        let mut c = Self::admin(opcode::CREATE_SQ);
        c.dptr[0] = dma.to_le();
        c.cdw10 = queue_id_and_size(qid, depth);
        let flags = QUEUE_PHYS_CONTIG | if medium_priority { SQ_PRIO_MEDIUM } else { 0 };
        c.cdw11 = (u32::from(flags) | u32::from(qid) << 16).to_le();
        c
    }

    /// Doorbell Buffer Config: shadow doorbells at `dbs`, event indexes at `eis`.
    pub(crate) fn doorbell_buffer_config(dbs: u64, eis: u64) -> Self {
        let mut c = Self::admin(opcode::DOORBELL_BUFFER_CONFIG);
        c.dptr = [dbs.to_le(), eis.to_le()];
        c
    }

    /// Set Features, Host Memory Buffer: `bits` (enable, return), the buffer's size in 4 KiB
    /// units, and its descriptor list of `entries` at `descs`.
    pub(crate) fn set_host_memory(bits: u32, units: u32, descs: u64, entries: u32) -> Self {
        const HOST_MEMORY_BUFFER: u32 = 0x0d;
        let mut c = Self::admin(opcode::SET_FEATURES);
        c.cdw10 = HOST_MEMORY_BUFFER.to_le();
        c.cdw11 = bits.to_le();
        c.cdw12 = units.to_le();
        c.cdw13 = (descs as u32).to_le();
        c.cdw14 = ((descs >> 32) as u32).to_le();
        c.cdw15 = entries.to_le();
        c
    }

    /// Delete I/O Submission or Completion Queue `qid` (`opcode` `DELETE_SQ` or `DELETE_CQ`).
    pub(crate) fn delete_queue(opcode: u8, qid: u16) -> Self {
        let mut c = Self::admin(opcode);
        c.cdw10 = u32::from(qid).to_le();
        c
    }

    /// Abort of the command with identifier `command_id` on submission queue `sqid`.
    pub(crate) fn abort(sqid: u16, command_id: u16) -> Self {
        let mut c = Self::admin(opcode::ABORT);
        c.cdw10 = (u32::from(sqid) | u32::from(command_id) << 16).to_le();
        c
    }

    /// Asynchronous Event Request with the identifier nvme-core reserves for it.
    pub(crate) fn async_event(command_id: u16) -> Self {
        let mut c = Self::admin(opcode::ASYNC_EVENT);
        c.command_id = command_id.to_le();
        c
    }

    /// Points the command at its data with two PRP entries.
    pub(crate) fn set_prps(&mut self, prp1: u64, prp2: u64) {
        self.dptr = [prp1.to_le(), prp2.to_le()];
    }

    /// Points the command at its data with one SGL descriptor.
    pub(crate) fn set_sgl(&mut self, desc: SglDescriptor) {
        self.flags = (self.flags & !(psdt::SGL_METABUF | psdt::SGL_METASEG)) | psdt::SGL_METABUF;
        self.dptr = desc.words();
    }

    pub(crate) fn uses_sgl(&self) -> bool {
        self.flags & (psdt::SGL_METABUF | psdt::SGL_METASEG) != 0
    }

    /// The SGL descriptor of a command that [`uses_sgl`](Self::uses_sgl).
    pub(crate) fn sgl(&self) -> SglDescriptor {
        SglDescriptor::from_words(self.dptr)
    }

    pub(crate) fn prp1(&self) -> u64 {
        u64::from_le(self.dptr[0])
    }

    pub(crate) fn prp2(&self) -> u64 {
        u64::from_le(self.dptr[1])
    }

    /// Points the command at its metadata; `segment` makes it an SGL segment pointer.
    pub(crate) fn set_metadata(&mut self, addr: u64, segment: bool) {
        if segment {
            self.flags = (self.flags & !psdt::SGL_METABUF) | psdt::SGL_METASEG;
        }
        self.metadata = addr.to_le();
    }
}

/// CDW10 of both queue creation commands: queue id and 0's based size.
fn queue_id_and_size(qid: u16, depth: u16) -> u32 {
    (u32::from(qid) | u32::from(depth - 1) << 16).to_le()
}

/// A 16-byte completion queue entry (`struct nvme_completion`), as stored (little endian).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, FromBytes, IntoBytes)]
pub(crate) struct Completion {
    pub(crate) result: u64,
    pub(crate) sq_head: u16,
    pub(crate) sq_id: u16,
    pub(crate) command_id: u16,
    pub(crate) status: u16,
}

const _: () = assert!(core::mem::size_of::<Completion>() == 16);

/// The unit of a host memory buffer's sizes (Identify's HMPRE, HMMIN, HMMINDS, a descriptor's
/// size, Set Features' buffer size).
pub(crate) const HOST_MEMORY_UNIT: u64 = 4096;

/// A Host Memory Buffer Descriptor Entry as the controller reads it
/// (`struct nvme_host_mem_buf_desc`): little endian, the size in units of 4 KiB.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, FromBytes, IntoBytes)]
pub(crate) struct HostMemoryDescriptor {
    addr: u64,
    size: u32,
    reserved: u32,
}

const _: () = assert!(core::mem::size_of::<HostMemoryDescriptor>() == 16);

impl HostMemoryDescriptor {
    pub(crate) fn new(addr: u64, len: u64) -> Self {
        Self {
            addr: addr.to_le(),
            size: ((len / HOST_MEMORY_UNIT) as u32).to_le(),
            reserved: 0,
        }
    }

    pub(crate) fn addr(&self) -> u64 {
        u64::from_le(self.addr)
    }

    /// The chunk's length in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(u32::from_le(self.size)) * HOST_MEMORY_UNIT
    }
}

impl Completion {
    /// The phase tag (bit 0 of the status field).
    pub(crate) fn phase(status_le: u16) -> u16 {
        u16::from_le(status_le) & 1
    }

    pub(crate) fn command_id(&self) -> u16 {
        u16::from_le(self.command_id)
    }

    pub(crate) fn sq_head(&self) -> u16 {
        u16::from_le(self.sq_head)
    }
}

#[kunit_tests(nvme_adaptive_cmd)]
mod tests {
    use super::*;

    #[test]
    fn queue_creation() {
        let c = Command::create_cq(3, 1024, 0x1000, Some(3));
        assert_eq!(c.opcode, 0x05);
        assert_eq!(u32::from_le(c.cdw10), 3 | 1023 << 16);
        assert_eq!(u32::from_le(c.cdw11), 0b11 | 3 << 16);
        let polled = Command::create_cq(4, 64, 0x1000, None);
        assert_eq!(u32::from_le(polled.cdw11), 0b01);
        let s = Command::create_sq(3, 1024, 0x2000, false);
        assert_eq!((s.opcode, s.prp1()), (0x01, 0x2000));
        assert_eq!(u32::from_le(s.cdw11), 1 | 3 << 16);
        assert_eq!(
            u32::from_le(Command::create_sq(3, 8, 0, true).cdw11),
            0b101 | 3 << 16
        );
    }

    #[test]
    fn sgl_descriptors() {
        let d = SglDescriptor::data(0xdead_0000, 4096);
        assert_eq!(SglDescriptor::from_words(d.words()), d);
        assert!(d.is_data_block());
        let seg = SglDescriptor::last_segment(0x8000, 3);
        assert_eq!(seg.length, 48);
        assert_eq!(u64::from_le(seg.words()[1]) >> 56, 0x30);
        let mut c = Command::default();
        assert!(!c.uses_sgl());
        c.set_sgl(seg);
        assert!(c.uses_sgl());
        assert_eq!(c.sgl(), seg);
        c.set_metadata(0x9000, true);
        assert_eq!(c.flags, psdt::SGL_METASEG);
    }

    #[test]
    fn other_commands() {
        let c = Command::doorbell_buffer_config(0x1000, 0x2000);
        assert_eq!((c.opcode, c.prp1(), c.prp2()), (0x7c, 0x1000, 0x2000));
        let a = Command::async_event(31);
        assert_eq!((a.opcode, u16::from_le(a.command_id)), (0x0c, 31));
        // Host Memory Buffer (FID 0x0d): enable and return, 16 MiB, descriptors above 4 GiB.
        let h = Command::set_host_memory(3, 4096, 0x1_2345_6000, 4);
        assert_eq!((h.opcode, u32::from_le(h.cdw10)), (0x09, 0x0d));
        assert_eq!(
            [h.cdw11, h.cdw12, h.cdw13, h.cdw14, h.cdw15].map(u32::from_le),
            [3, 4096, 0x2345_6000, 1, 4]
        );
        let cqe = Completion {
            status: 0x0003u16.to_le(),
            command_id: 0x1005u16.to_le(),
            ..Default::default()
        };
        assert_eq!(Completion::phase(cqe.status), 1);
        assert_eq!(cqe.command_id(), 0x1005);
    }
}
