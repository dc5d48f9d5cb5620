// SPDX-License-Identifier: GPL-2.0

//! Data and metadata mapping: a request's memory as the controller reads it, through PRP
//! entries or SGL descriptors, and back.
//!
//! As in the stock driver: a single segment is mapped directly; otherwise the block layer's
//! iterator maps the request (coalescing it into one range behind an IOMMU), and the segments
//! become a PRP list, or an SGL when the controller supports SGLs and the average segment is at
//! least `sgl_threshold` bytes (or when only an SGL can describe the request). Metadata goes in
//! one contiguous buffer (MPTR) unless it has several segments, which needs a metadata SGL.

use kernel::{
    prelude::*,
    sync::SetOnce, //
};

use crate::{
    cmd::SglDescriptor,
    params::{
        self,
        MAX_BYTES, //
    },
    sys::{
        blk::{
            Request,
            Status, //
        },
        dma::{
            DataIter,
            DmaPool,
            MetaIter,
            PoolBlock,
            Segment,
            SegmentPool,
            Step, //
        },
        numa::Node,
        pci::Function, //
    }, //
};

/// The controller memory page: PRP entries describe 4 KiB pages whatever the CPU's page size.
pub(crate) const PAGE: u32 = 4096;
/// Segments per request: one descriptor page of 16-byte SGL entries.
pub(crate) const MAX_SEGMENTS: u32 = PAGE / 16;
/// Metadata SGL entries: the small pool's block less its segment descriptor.
pub(crate) const MAX_META_SEGMENTS: u32 = SMALL_BLOCK as u32 / 16 - 1;
/// Small descriptor blocks, for short PRP lists and SGLs (4 KiB to 128 KiB I/O).
const SMALL_BLOCK: usize = 256;
/// PRP list pages per request: enough for `MAX_BYTES` not aligned at either end.
const MAX_DESCRIPTORS: usize = 5;
/// Entries in a PRP list page.
const PRPS_PER_PAGE: usize = PAGE as usize / 8;

const _: () = assert!(
    (MAX_BYTES as usize + 2 * (PAGE as usize - 1)) / PAGE as usize
        <= 1 + MAX_DESCRIPTORS * (PRPS_PER_PAGE - 1)
);

/// The DMA pools of one NUMA node: descriptor pages and small blocks, and the arrays that
/// remember PRP data segments for unmapping.
pub(crate) struct Pools {
    large: DmaPool,
    small: DmaPool,
    segments: SegmentPool,
}

impl Pools {
    /// The pools of `node`, small blocks aligned to 512 bytes when the controller needs it.
    pub(crate) fn new(f: &Function, small_align_512: bool, node: Node) -> Result<Self> {
        let small_align = if small_align_512 { 512 } else { SMALL_BLOCK };
        Ok(Self {
            large: DmaPool::new(
                f,
                c"nvme_adaptive descriptor page",
                PAGE as usize,
                PAGE as usize,
                node,
            )?,
            small: DmaPool::new(
                f,
                c"nvme_adaptive descriptor small",
                SMALL_BLOCK,
                small_align,
                node,
            )?,
            segments: SegmentPool::new(MAX_SEGMENTS as usize, node)?,
        })
    }
}

/// The controller's DMA pools, a set per NUMA node that has a queue, made when blk-mq sets up
/// the first queue on the node (as `nvme_setup_descriptor_pools`): a request's descriptors are
/// in memory of the node of the CPUs that submit it.
pub(crate) struct NodePools {
    nodes: KVec<SetOnce<Pools>>,
}

impl NodePools {
    /// No set yet.
    pub(crate) fn new() -> Result<Self> {
        let count = Node::count() as usize;
        let mut nodes = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            nodes.push(SetOnce::new(), GFP_KERNEL)?;
        }
        Ok(Self { nodes })
    }

    /// Keeps `pools` as `node`'s set; gives them back when the node has one. Callers take
    /// turns: the set is kept under the pools' access (an RCU read lock), where a set another
    /// caller made at the same time could not be destroyed.
    pub(crate) fn set(&self, node: Node, pools: Pools) -> Result<(), Pools> {
        match self.nodes.get(node.index()) {
            Some(slot) if slot.as_ref().is_none() => {
                slot.populate(pools);
                Ok(())
            }
            _ => Err(pools),
        }
    }

    /// The set of node `index` (a [`Node::index`]), once made.
    #[inline]
    pub(crate) fn on(&self, index: usize) -> Option<&Pools> {
        self.nodes.get(index)?.as_ref()
    }
}

/// Whether a request may, or must, describe its data with an SGL.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SglUse {
    Unsupported,
    Supported,
    Forced,
}

/// The descriptor blocks of one request (PRP list pages or an SGL segment).
#[derive(Default)]
struct Descriptors {
    blocks: [Option<PoolBlock>; MAX_DESCRIPTORS],
    count: usize,
    /// The first block came from the small pool.
    small: bool,
}

impl Descriptors {
    fn alloc(&mut self, pools: &Pools, small: bool) -> Result<&mut PoolBlock, Status> {
        if self.count == MAX_DESCRIPTORS {
            return Err(Status::ioerr());
        }
        let pool = if small { &pools.small } else { &pools.large };
        let block = pool.alloc().ok_or_else(Status::resource)?;
        if self.count == 0 {
            self.small = small;
        }
        let slot = &mut self.blocks[self.count];
        self.count += 1;
        Ok(slot.insert(block))
    }

    fn block(&mut self, index: usize) -> Result<&mut PoolBlock, Status> {
        self.blocks
            .get_mut(index)
            .and_then(Option::as_mut)
            .ok_or_else(Status::ioerr)
    }

    fn free(&mut self, pools: &Pools) {
        for (i, block) in self.blocks.iter_mut().enumerate() {
            if let Some(b) = block.take() {
                let pool = if i == 0 && self.small {
                    &pools.small
                } else {
                    &pools.large
                };
                pool.free(b);
            }
        }
        self.count = 0;
    }
}

/// How a request's data is mapped (what to unmap, `sys/` records).
#[derive(Default)]
enum Data {
    #[default]
    None,
    /// One segment mapped directly.
    Single,
    /// Mapped by the block layer's iterator, described by these PRP list pages or SGL.
    Iter(Descriptors),
}

/// How a request's metadata is mapped.
#[derive(Default)]
enum Meta {
    #[default]
    None,
    Single,
    /// Mapped by the iterator, with a metadata SGL when there is one.
    Iter(Option<PoolBlock>),
}

/// The transport's part of each request: how its memory was mapped.
#[derive(Default)]
pub(crate) struct Iod {
    data: Data,
    meta: Meta,
    /// When the command was submitted, on the adaptive policy's clock (blk-mq's stamp where it
    /// has one); 0 when the queue does not measure its latency.
    pub(crate) submitted_ns: u64,
}

/// Maps the common request, one data segment and no metadata (the caller checked), without
/// the pools. `again` when it needs [`map`] (its descriptors come from the pools, whose access
/// costs more).
#[inline(always)]
pub(crate) fn map_direct(
    f: &Function,
    sgl_supported: bool,
    io_queue: bool,
    rq: &mut Request<Iod>,
) -> Result<(), Status> {
    let sgl = sgl_use(sgl_supported && io_queue, false, rq);
    map_single(f, sgl, rq)
}

impl Iod {
    /// Whether undoing the mapping needs no pool: nothing came from one.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self.data, Data::None | Data::Single)
            && matches!(self.meta, Meta::None | Meta::Single)
    }
}

/// Undoes [`map_direct`] (or a [`map`] that took nothing from the pools, see
/// [`Iod::is_direct`]). The request's own records (`None` or `Single`) hold nothing to free
/// and stay as they are until its next preparation: unmapping again finds nothing mapped.
#[inline(always)]
pub(crate) fn unmap_direct(f: &Function, rq: &mut Request<Iod>) {
    rq.unmap_meta(f, None);
    rq.unmap_data(f, None);
}

/// Maps a request's data and metadata and points its command at them. On error, nothing stays
/// mapped.
pub(crate) fn map(
    f: &Function,
    pools: &Pools,
    sgl_supported: bool,
    meta_sgl_supported: bool,
    io_queue: bool,
    rq: &mut Request<Iod>,
) -> Result<(), Status> {
    let integrity = rq.has_integrity();
    if rq.nr_phys_segments() > 0 {
        let sgl = sgl_use(sgl_supported && io_queue, integrity, rq);
        map_data(f, pools, sgl, rq)?;
    }
    if integrity {
        if let Err(e) = map_meta(f, pools, meta_sgl_supported, rq) {
            unmap(f, pools, rq);
            return Err(e);
        }
    }
    Ok(())
}

/// How the data of a request, with metadata if `integrity`, may or must use an SGL.
#[inline]
fn sgl_use(supported: bool, integrity: bool, rq: &Request<Iod>) -> SglUse {
    if !supported {
        return SglUse::Unsupported;
    }
    // Gaps a PRP list cannot describe, user commands (an SGL lets the controller check the
    // transfer length) and several integrity segments all need an SGL.
    if rq.has_gaps_within_page()
        || rq.is_user_command()
        || (integrity && rq.nr_integrity_segments() > 1)
    {
        SglUse::Forced
    } else {
        SglUse::Supported
    }
}

fn map_data(f: &Function, pools: &Pools, sgl: SglUse, rq: &mut Request<Iod>) -> Result<(), Status> {
    if rq.nr_phys_segments() == 1 {
        match map_single(f, sgl, rq) {
            Err(e) if e == Status::again() => {}
            done => return done,
        }
    }
    let (first, mut iter) = rq.map_data_start(f, &pools.segments)?;
    if !first.p2p.is_known() {
        unmap_data(f, pools, rq);
        return Err(Status::resource());
    }
    let threshold = params::sgl_threshold();
    let use_sgl = match sgl {
        SglUse::Forced => true,
        SglUse::Supported => threshold != 0 && average_segment(&iter) >= threshold,
        SglUse::Unsupported => false,
    };
    let result = if use_sgl {
        build_sgl(f, pools, &mut iter, first)
    } else {
        build_prps(f, pools, &mut iter, first)
    };
    if result.is_err() {
        unmap_data(f, pools, rq);
    }
    result
}

/// The average segment size, in bytes: a coalesced mapping is one segment.
fn average_segment(rq: &DataIter<'_, Iod>) -> u32 {
    let segments = if rq.coalesced() {
        1
    } else {
        u32::from(rq.nr_phys_segments()).max(1)
    };
    rq.payload_bytes().div_ceil(segments)
}

/// Maps a one-segment request directly (no iterator); `again` when only the iterator can.
#[inline(always)]
fn map_single(f: &Function, sgl: SglUse, rq: &mut Request<Iod>) -> Result<(), Status> {
    // Without SGLs, two PRP entries must describe it: it may end at most two pages after the
    // start of its first.
    let max_end = if sgl == SglUse::Unsupported {
        2 * PAGE
    } else {
        u32::MAX
    };
    let (addr, len) = rq.map_first_segment(f, max_end)?;
    // The mapping keeps the segment's offset in its page (the DMA alignment mask).
    let offset = addr as u32 & (PAGE - 1);
    // Compared without an addition, which would need an overflow check.
    let prp_possible = len <= 2 * PAGE - offset;
    rq.pdu().data = Data::Single;
    let mut cmd = rq.command();
    if sgl == SglUse::Forced || !prp_possible {
        cmd.set_sgl(SglDescriptor::data(addr, len));
    } else {
        let first_len = PAGE - offset;
        let prp2 = if len > first_len {
            addr + u64::from(first_len)
        } else {
            0
        };
        cmd.set_prps(addr, prp2);
    }
    Ok(())
}

/// Hands out the iterator's segments, in the pieces the PRP entries take.
struct Walk<'a> {
    f: &'a Function,
    seg: Segment,
}

impl Walk<'_> {
    /// Moves to the next segment once the current one is used up; false when there is none.
    fn advance(&mut self, rq: &mut DataIter<'_, Iod>) -> Result<bool, Status> {
        if self.seg.len > 0 {
            return Ok(true);
        }
        match rq.next(self.f) {
            Step::Segment(s) => {
                self.seg = s;
                Ok(true)
            }
            Step::Done => Ok(false),
            Step::Failed(e) => Err(e),
        }
    }

    /// Uses `len` bytes of the current segment; an error if it is shorter (the block layer
    /// broke the queue's limits: the request fails rather than the kernel).
    fn take(&mut self, len: u32) -> Result<(), Status> {
        self.seg.len = self.seg.len.checked_sub(len).ok_or_else(Status::ioerr)?;
        self.seg.addr += u64::from(len);
        Ok(())
    }
}

/// Builds the PRP entries (and lists) of an iterator-mapped request.
fn build_prps(
    f: &Function,
    pools: &Pools,
    rq: &mut DataIter<'_, Iod>,
    first: Segment,
) -> Result<(), Status> {
    let mut walk = Walk { f, seg: first };
    let mut descriptors = Descriptors::default();
    let outcome = prp_entries(pools, rq, &mut walk, &mut descriptors);
    // Recorded even on failure: unmapping frees them.
    rq.pdu().data = Data::Iter(descriptors);
    let (prp1, prp2) = outcome?;
    rq.command().set_prps(prp1, prp2);
    Ok(())
}

fn prp_entries(
    pools: &Pools,
    rq: &mut DataIter<'_, Iod>,
    walk: &mut Walk<'_>,
    descriptors: &mut Descriptors,
) -> Result<(u64, u64), Status> {
    let mut length = rq.payload_bytes();
    // PRP1 points to the start of the data, the only entry that may be unaligned.
    let prp1 = walk.seg.addr;
    let len = length.min(PAGE - (prp1 as u32 & (PAGE - 1)));
    walk.take(len)?;
    length -= len;
    if length == 0 {
        return Ok((prp1, 0));
    }
    if !walk.advance(rq)? {
        return Err(Status::ioerr());
    }
    // PRP2 points to the data if the rest fits in one page, else to a PRP list.
    if length <= PAGE {
        return Ok((prp1, walk.seg.addr));
    }
    let small = (length.div_ceil(PAGE) as usize) <= SMALL_BLOCK / 8;
    let prp2 = descriptors.alloc(pools, small)?.dma();
    let mut page = descriptors.count - 1;
    let mut i = 0;
    loop {
        let addr = walk.seg.addr;
        descriptors.block(page)?.set(i, addr);
        i += 1;
        let len = length.min(PAGE);
        walk.take(len)?;
        length -= len;
        if length == 0 {
            return Ok((prp1, prp2));
        }
        if !walk.advance(rq)? {
            return Err(Status::ioerr());
        }
        // A full page: its last entry moves to a new page, which it then points to.
        if i == PRPS_PER_PAGE {
            let last = descriptors.block(page)?.get(i - 1);
            let next = descriptors.alloc(pools, false)?;
            next.set(0, last);
            let next_dma = next.dma();
            descriptors.block(page)?.set(i - 1, next_dma);
            page = descriptors.count - 1;
            i = 1;
        }
    }
}

/// Builds the SGL of an iterator-mapped request: one data descriptor in the command, or a
/// segment of them.
fn build_sgl(
    f: &Function,
    pools: &Pools,
    rq: &mut DataIter<'_, Iod>,
    first: Segment,
) -> Result<(), Status> {
    let entries = u32::from(rq.nr_phys_segments());
    let mut descriptors = Descriptors::default();
    let outcome = if entries == 1 || rq.coalesced() {
        rq.command()
            .set_sgl(SglDescriptor::data(first.addr, first.len));
        Ok(())
    } else {
        sgl_entries(f, pools, rq, first, entries, &mut descriptors)
    };
    rq.pdu().data = Data::Iter(descriptors);
    outcome
}

fn sgl_entries(
    f: &Function,
    pools: &Pools,
    rq: &mut DataIter<'_, Iod>,
    first: Segment,
    entries: u32,
    descriptors: &mut Descriptors,
) -> Result<(), Status> {
    let small = entries as usize <= SMALL_BLOCK / 16;
    let list = descriptors.alloc(pools, small)?;
    let list_dma = list.dma();
    let mut seg = first;
    let mut mapped = 0u32;
    loop {
        if mapped == entries {
            // More segments than the block layer said (it cannot happen).
            return Err(Status::ioerr());
        }
        set_sgl(
            list,
            mapped as usize,
            SglDescriptor::data(seg.addr, seg.len),
        );
        mapped += 1;
        match rq.next(f) {
            Step::Segment(s) => seg = s,
            Step::Done => break,
            Step::Failed(e) => return Err(e),
        }
    }
    rq.command()
        .set_sgl(SglDescriptor::last_segment(list_dma, mapped));
    Ok(())
}

fn map_meta(
    f: &Function,
    pools: &Pools,
    meta_sgl_supported: bool,
    rq: &mut Request<Iod>,
) -> Result<(), Status> {
    let uses_sgl = rq.command().uses_sgl();
    let several = rq.nr_integrity_segments() > 1 || rq.is_user_command();
    if !(uses_sgl && meta_sgl_supported && several) {
        if let Some((addr, _)) = rq.map_integrity_segment(f) {
            rq.command().set_metadata(addr, false);
            rq.pdu().meta = Meta::Single;
            return Ok(());
        }
    }
    let outcome = map_meta_iter(f, pools, meta_sgl_supported, rq);
    if outcome.is_err() {
        unmap_meta(f, pools, rq);
    }
    outcome
}

fn map_meta_iter(
    f: &Function,
    pools: &Pools,
    meta_sgl_supported: bool,
    rq: &mut Request<Iod>,
) -> Result<(), Status> {
    let (first, mut iter) = rq.map_meta_start(f, &pools.segments)?;
    iter.pdu().meta = Meta::Iter(None);
    let entries = if iter.coalesced() {
        1
    } else {
        u32::from(iter.nr_integrity_segments())
    };
    // MPTR has an implicit length the kernel sized from the format; user commands get an SGL,
    // whose explicit length lets the controller catch a wrong buffer.
    if !meta_sgl_supported || (entries == 1 && !iter.is_user_command()) {
        iter.command().set_metadata(first.addr, false);
        return Ok(());
    }
    let mut block = pools.small.alloc().ok_or_else(Status::resource)?;
    let block_dma = block.dma();
    iter.command().set_metadata(block_dma, true);
    let outcome = meta_sgl(f, &mut iter, &mut block, first, entries);
    // Kept even on failure: unmapping frees it.
    iter.pdu().meta = Meta::Iter(Some(block));
    outcome
}

/// Writes the metadata SGL of `entries` segments starting with `first` into `block`.
fn meta_sgl(
    f: &Function,
    iter: &mut MetaIter<'_, Iod>,
    block: &mut PoolBlock,
    first: Segment,
    entries: u32,
) -> Result<(), Status> {
    if entries == 1 {
        set_sgl(block, 0, SglDescriptor::data(first.addr, first.len));
        return Ok(());
    }
    let mut seg = first;
    let mut i = 0usize;
    loop {
        if i == MAX_META_SEGMENTS as usize {
            // Beyond the limit the queue advertised (it cannot happen).
            return Err(Status::ioerr());
        }
        i += 1;
        set_sgl(block, i, SglDescriptor::data(seg.addr, seg.len));
        match iter.next(f) {
            Step::Segment(s) => seg = s,
            Step::Done => break,
            Step::Failed(e) => return Err(e),
        }
    }
    let head = SglDescriptor::last_segment(block.dma() + 16, i as u32);
    set_sgl(block, 0, head);
    Ok(())
}

fn set_sgl(block: &mut PoolBlock, index: usize, desc: SglDescriptor) {
    let words = desc.words();
    block.set(2 * index, u64::from_le(words[0]));
    block.set(2 * index + 1, u64::from_le(words[1]));
}

/// Undoes [`map`]: unmaps data and metadata and frees their descriptors.
pub(crate) fn unmap(f: &Function, pools: &Pools, rq: &mut Request<Iod>) {
    unmap_meta(f, pools, rq);
    unmap_data(f, pools, rq);
}

fn unmap_data(f: &Function, pools: &Pools, rq: &mut Request<Iod>) {
    rq.unmap_data(f, Some(&pools.segments));
    if let Data::Iter(mut descriptors) = core::mem::take(&mut rq.pdu().data) {
        descriptors.free(pools);
    }
}

fn unmap_meta(f: &Function, pools: &Pools, rq: &mut Request<Iod>) {
    rq.unmap_meta(f, Some(&pools.segments));
    if let Meta::Iter(Some(block)) = core::mem::take(&mut rq.pdu().meta) {
        pools.small.free(block);
    }
}

/// Whether the command's data pointer must follow the controller page boundaries (PRPs): on
/// the admin queue, or when the controller has no SGL support.
pub(crate) fn virt_boundary(sgl_supported: bool, is_admin: bool) -> u64 {
    if !sgl_supported || is_admin {
        u64::from(PAGE - 1)
    } else {
        0
    }
}
