// SPDX-License-Identifier: GPL-2.0

//! DMA for request data: the block layer's mapping iterators, the single-segment fast path,
//! DMA pools for PRP lists and SGL descriptors, and a pool of arrays that remember mapped
//! segments for unmapping.
//!
//! C headers: [`include/linux/blk-mq-dma.h`](srctree/include/linux/blk-mq-dma.h),
//! [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h),
//! [`include/linux/dmapool.h`](srctree/include/linux/dmapool.h),
//! [`include/linux/mempool.h`](srctree/include/linux/mempool.h) and
//! [`include/linux/pci-p2pdma.h`](srctree/include/linux/pci-p2pdma.h)

use core::ptr::{
    addr_of_mut,
    NonNull, //
};
use kernel::{
    bindings,
    device::{
        Bound,
        Device, //
    },
    devres::Devres,
    ffi::c_void,
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    warn_on, //
};

use super::{
    blk::{
        CommandPointers,
        Mapped,
        Request,
        SavedRanges,
        Status, //
    },
    ffi,
    numa::Node,
    pci::Function, //
};

/// How a mapped range reaches the device (peer-to-peer DMA or memory).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct P2p(u8);

impl P2p {
    pub(crate) fn is_bus_address(self) -> bool {
        u32::from(self.0) == bindings::pci_p2pdma_map_type_PCI_P2PDMA_MAP_BUS_ADDR
    }

    pub(crate) fn is_through_host_bridge(self) -> bool {
        u32::from(self.0) == bindings::pci_p2pdma_map_type_PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    }

    /// A kind of mapping the driver knows how to describe (not a failed or unsupported one).
    pub(crate) fn is_known(self) -> bool {
        u32::from(self.0) == bindings::pci_p2pdma_map_type_PCI_P2PDMA_MAP_NONE
            || self.is_bus_address()
            || self.is_through_host_bridge()
    }
}

/// One mapped DMA range.
#[derive(Clone, Copy, Default)]
pub(crate) struct Segment {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) p2p: P2p,
}

/// The result of asking a mapping iterator for a segment.
pub(crate) enum Step {
    Segment(Segment),
    /// Every segment was handed out.
    Done,
    /// Mapping failed with this status.
    Failed(super::blk::Status),
}

impl Step {
    /// What an iterator's call returned (`ok`) and left in `iter`.
    fn from(ok: bool, iter: &ffi::blk_dma_iter) -> Self {
        if ok {
            Self::Segment(Segment {
                addr: iter.addr,
                len: iter.len,
                p2p: P2p(iter.p2pdma.map as u8),
            })
        } else if iter.status != 0 {
            Self::Failed(super::blk::Status::from_raw_err(iter.status))
        } else {
            Self::Done
        }
    }
}

// Without integrity support the header has inline stubs that map nothing; no request carries
// metadata then (`Request::has_integrity`), so the start below never calls them.
#[cfg(CONFIG_BLK_DEV_INTEGRITY)]
use ffi::{
    blk_rq_integrity_dma_map_iter_next,
    blk_rq_integrity_dma_map_iter_start, //
};

#[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
unsafe fn blk_rq_integrity_dma_map_iter_start(
    _: *mut bindings::request,
    _: *mut bindings::device,
    _: *mut bindings::dma_iova_state,
    _: *mut ffi::blk_dma_iter,
) -> bool {
    false
}

#[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
unsafe fn blk_rq_integrity_dma_map_iter_next(
    _: *mut bindings::request,
    _: *mut bindings::device,
    _: *mut ffi::blk_dma_iter,
) -> bool {
    false
}

/// A request whose data (`DataIter`) or metadata (`MetaIter`) the block layer's iterator is
/// mapping, made by the start: the segments after the first come only from here, and each is
/// recorded for unmapping as it is handed out. It holds the request's exclusive borrow, so the
/// other iterator, which keeps its state in the same place in the PDU, cannot start meanwhile;
/// the request's data (`pdu`, `command`) and its `&self` methods stay in reach.
macro_rules! map_iter {
    ($(#[$m:meta])* $name:ident, $next:path, $state:ident, $meta:literal) => {
        $(#[$m])*
        ///
        /// # Invariants
        ///
        /// The request's iterator of this kind was started, and the other kind not since (that
        /// needs the request's exclusive borrow, which this holds).
        pub(crate) struct $name<'a, P>(&'a mut Request<P>);

        impl<P: Default> $name<'_, P> {
            /// The next segment, or why there is none.
            pub(crate) fn next(&mut self, f: &Function) -> Step {
                let iod = self.0.iod();
                // SAFETY: The request is live and the driver's; its iterator, whose state is in
                // the request's PDU, was started (type invariant).
                let ok = unsafe { $next(self.0.raw(), f.dma_dev(), addr_of_mut!((*iod).iter)) };
                // SAFETY: The iterator is in the PDU, which only this request's holder uses.
                let step = Step::from(ok, unsafe { &(*iod).iter });
                match step {
                    // SAFETY: The iterator of this part just mapped `seg` on `f`'s device.
                    Step::Segment(seg) if !unsafe { self.0.record(f, seg, $meta) } => {
                        Step::Failed(Status::ioerr())
                    }
                    step => step,
                }
            }

            /// Whether the iterator merged every segment into one range (an IOMMU mapping).
            pub(crate) fn coalesced(&self) -> bool {
                // SAFETY: The request is live and its iterator was started.
                unsafe { ffi::nva_blk_rq_dma_map_coalesce(addr_of_mut!((*self.0.iod()).$state)) }
            }

            pub(crate) fn pdu(&mut self) -> &mut P {
                self.0.pdu()
            }

            pub(crate) fn command(&mut self) -> CommandPointers<'_> {
                self.0.command()
            }
        }

        impl<P> core::ops::Deref for $name<'_, P> {
            type Target = Request<P>;

            fn deref(&self) -> &Request<P> {
                self.0
            }
        }
    };
}

map_iter!(
    /// The data mapping iterator of a request.
    DataIter,
    ffi::blk_rq_dma_map_iter_next,
    dma_state,
    false
);
map_iter!(
    /// The metadata mapping iterator of a request.
    MetaIter,
    blk_rq_integrity_dma_map_iter_next,
    meta_dma_state,
    true
);

/// Starts an iterator: its first segment, or why there is none (an error: a request mapped
/// through the iterator has data). Each segment it maps is recorded for unmapping, in an array
/// of `ranges` when each must be unmapped on its own; an error leaves nothing mapped.
macro_rules! start_fns {
    ($($(#[$m:meta])* $name:ident -> $iter:ident = $start:path, $state:ident, $meta:literal
        if $has:ident;)*) => {
        $(
            $(#[$m])*
            pub(crate) fn $name(
                &mut self,
                f: &Function,
                ranges: &SegmentPool,
            ) -> Result<(Segment, $iter<'_, P>), Status> {
                // The iterator needs the request's bio, or its integrity payload.
                if !self.$has() {
                    return Err(Status::ioerr());
                }
                let iod = self.iod();
                // SAFETY: The request is live and the driver's, with what the iterator maps
                // (above); its state is in the request's PDU.
                let ok = unsafe {
                    $start(
                        self.raw(),
                        f.dma_dev(),
                        addr_of_mut!((*iod).$state),
                        addr_of_mut!((*iod).iter),
                    )
                };
                // SAFETY: The iterator is in the PDU, which only this request's holder uses.
                let first = match Step::from(ok, unsafe { &(*iod).iter }) {
                    Step::Segment(first) => first,
                    Step::Failed(e) => return Err(e),
                    Step::Done => return Err(Status::ioerr()),
                };
                // SAFETY: The request is live and its mapping was just started.
                let each = unsafe {
                    ffi::nva_dma_need_unmap_each(self.raw(), f.dma_dev(), first.p2p.0)
                };
                let saved = if each {
                    let saved = ranges.alloc();
                    if saved.is_none() {
                        // SAFETY: The iterator just mapped `first` on `f`'s device, the only
                        // range it mapped yet (ranges are unmapped each only without an IOMMU,
                        // where it maps one at a time); nothing recorded it.
                        unsafe { self.unmap_range(f.dma_dev(), first) };
                        return Err(Status::resource());
                    }
                    saved.map(SavedSegments::into_raw)
                } else {
                    None
                };
                *self.mappings().part($meta) = Mapped::Iter {
                    dev: f.dma_dev(),
                    bytes: 0,
                    p2p: first.p2p.0,
                    ranges: saved,
                };
                // SAFETY: The iterator just mapped `first` on `f`'s device.
                if !unsafe { self.record(f, first, $meta) } {
                    return Err(Status::ioerr());
                }
                Ok((first, $iter(self)))
            }
        )*
    };
}

impl<P: Default> Request<P> {
    /// Maps the first (only) data segment, if it is in memory (not p2p) and its offset in its
    /// page plus its length is at most `max_end`; `again` when only the iterator can map it.
    /// Returns its DMA address and length; undone with [`Request::unmap_data`].
    #[inline(always)]
    pub(crate) fn map_first_segment(
        &mut self,
        f: &Function,
        max_end: u32,
    ) -> Result<(u64, u32), Status> {
        let (mut addr, mut len) = (0, 0);
        // SAFETY: The request is live (glue.c refuses one without data), `f` is its
        // controller's function, and the outputs are valid for writes.
        let status = unsafe {
            ffi::nva_map_first_bvec(self.raw(), f.dma_dev(), max_end, &mut addr, &mut len)
        };
        Status::from_raw(status)?;
        *self.mappings().part(false) = Mapped::Single {
            dev: f.dma_dev(),
            addr,
            len,
        };
        Ok((addr, len))
    }

    /// Maps the request's integrity metadata, one segment; undone with
    /// [`Request::unmap_meta`].
    pub(crate) fn map_integrity_segment(&mut self, f: &Function) -> Option<(u64, u32)> {
        let (mut len, mut p2p, mut addr) = (0, false, 0);
        // SAFETY: The request is live (glue.c reports one without integrity data as p2p); the
        // outputs are valid for writes.
        unsafe { ffi::nva_rq_integrity_bvec(self.raw(), &mut len, &mut p2p) };
        if p2p {
            return None;
        }
        // SAFETY: As above; `f` is the request's controller's function.
        if !unsafe { ffi::nva_map_integrity_bvec(self.raw(), f.dma_dev(), &mut addr) } {
            return None;
        }
        *self.mappings().part(true) = Mapped::Single {
            dev: f.dma_dev(),
            addr,
            len,
        };
        Some((addr, len))
    }

    start_fns! {
        /// Starts mapping the request's data.
        map_data_start -> DataIter = ffi::blk_rq_dma_map_iter_start, dma_state, false
            if has_data_segments;
        /// Starts mapping the request's integrity metadata.
        map_meta_start -> MetaIter = blk_rq_integrity_dma_map_iter_start, meta_dma_state, true
            if has_integrity;
    }

    /// Records a segment the iterator of `part` mapped; false (the segment unmapped again)
    /// when its array of ranges is full.
    ///
    /// # Safety
    ///
    /// `seg` was just mapped on `f`'s device for `part` of this request, by its iterator.
    unsafe fn record(&mut self, f: &Function, seg: Segment, meta: bool) -> bool {
        let recorded = match self.mappings().part(meta) {
            Mapped::Iter { bytes, ranges, .. } => {
                *bytes += seg.len as usize;
                match ranges {
                    None => true,
                    Some(raw) => {
                        // SAFETY: The array came from `into_raw` and is only borrowed here.
                        let mut saved = unsafe { SavedSegments::from_raw(raw) };
                        let pushed = saved.push(seg.addr, seg.len);
                        *raw = saved.into_raw();
                        pushed
                    }
                }
            }
            _ => false,
        };
        if !recorded {
            // SAFETY: The caller's promise; it is not recorded, so unmapped only here.
            unsafe { self.unmap_range(f.dma_dev(), seg) };
        }
        recorded
    }

    /// Unmaps one range the iterator mapped for this request.
    ///
    /// # Safety
    ///
    /// `seg` was mapped on `dev` for this request's data or metadata by its iterator, and is
    /// unmapped once.
    unsafe fn unmap_range(&mut self, dev: *mut bindings::device, seg: Segment) {
        // SAFETY: The caller's promise.
        unsafe { ffi::nva_dma_unmap_phys(self.raw(), dev, seg.addr, seg.len, seg.p2p.0) }
    }

    /// Unmaps what was mapped of the request's data, and gives its array of ranges back to
    /// `ranges`, their pool (without one, or if it is another pool, the array is leaked with a
    /// warning). Something mapped for another device than `f`'s stays mapped, with a warning.
    #[inline(always)]
    pub(crate) fn unmap_data(&mut self, f: &Function, ranges: Option<&SegmentPool>) {
        self.unmap(f, ranges, false);
    }

    /// As [`Request::unmap_data`], for the metadata.
    #[inline(always)]
    pub(crate) fn unmap_meta(&mut self, f: &Function, ranges: Option<&SegmentPool>) {
        self.unmap(f, ranges, true);
    }

    #[inline(always)]
    fn unmap(&mut self, f: &Function, pool: Option<&SegmentPool>, meta: bool) {
        let part = self.mappings().part(meta);
        // The device is read before the record is taken out, so that an empty record (most
        // requests' metadata) is not copied.
        let dev = match part {
            Mapped::Nothing => return,
            Mapped::Single { dev, .. } | Mapped::Iter { dev, .. } => *dev,
        };
        let mapped = core::mem::take(part);
        if warn_on!(dev != f.dma_dev()) {
            return;
        }
        match mapped {
            Mapped::Nothing => {}
            Mapped::Single { addr, len, .. } => {
                // SAFETY: The recorded single mapping of this request on `dev`, unmapped once
                // (the record was taken).
                unsafe { ffi::nva_unmap_page(self.raw(), dev, addr, len) }
            }
            Mapped::Iter {
                bytes, p2p, ranges, ..
            } => {
                let iod = self.iod();
                // SAFETY: The request's iterator mapped `bytes` on `dev`, recorded as it
                // mapped them; the record was taken, so this runs once; the state is in the
                // request's PDU, which only its holder uses.
                let whole = unsafe {
                    let state = if meta {
                        addr_of_mut!((*iod).meta_dma_state)
                    } else {
                        addr_of_mut!((*iod).dma_state)
                    };
                    ffi::nva_blk_rq_dma_unmap(self.raw(), dev, state, bytes, p2p)
                };
                let Some(raw) = ranges else {
                    return;
                };
                // SAFETY: The array came from `into_raw` and is taken back once.
                let saved = unsafe { SavedSegments::from_raw(&raw) };
                if !whole {
                    for s in saved.iter() {
                        let seg = Segment {
                            addr: s.addr,
                            len: s.len,
                            p2p: P2p(p2p),
                        };
                        // SAFETY: A range the iterator mapped on `dev` (the record says so), and
                        // the record was taken.
                        unsafe { self.unmap_range(dev, seg) };
                    }
                }
                match pool {
                    Some(pool) => pool.free(saved),
                    None => {
                        warn_on!(true);
                    }
                }
            }
        }
    }
}

/// Which pool an allocation came from, and how many entries it holds, in one word (so that
/// a request's descriptors stay small): every pool the module makes gets a new number, so that
/// a pool can refuse what another one, or one since destroyed, handed out.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Origin(u64);

impl Origin {
    const ENTRY_BITS: u32 = 16;

    /// A new pool's, for allocations of `entries` entries; `EINVAL` if that does not fit.
    fn new_pool(entries: usize) -> Result<Self> {
        static NEXT_POOL: Atomic<u64> = Atomic::new(0);
        if entries >> Self::ENTRY_BITS != 0 {
            return Err(EINVAL);
        }
        // 48 bits of pool number do not wrap in the life of a machine.
        let pool = NEXT_POOL.fetch_add(1, Relaxed);
        Ok(Self(pool << Self::ENTRY_BITS | entries as u64))
    }

    fn entries(self) -> usize {
        (self.0 & ((1 << Self::ENTRY_BITS) - 1)) as usize
    }
}

/// A block from a [`DmaPool`]: CPU and device addresses. Give it back with [`DmaPool::free`].
pub(crate) struct PoolBlock {
    cpu: NonNull<u64>,
    dma: u64,
    /// The pool and the block's size in u64 words.
    origin: Origin,
}

// SAFETY: The block is plain memory owned by whoever holds the token.
unsafe impl Send for PoolBlock {}

impl PoolBlock {
    pub(crate) fn dma(&self) -> u64 {
        self.dma
    }

    /// Writes little-endian word `index` (the device's byte order); beyond the block, nothing.
    pub(crate) fn set(&mut self, index: usize, value: u64) {
        if index < self.origin.entries() {
            // SAFETY: The block holds `origin.entries()` aligned u64s; the device reads it only
            // after the command that points at it is submitted.
            unsafe { self.cpu.as_ptr().add(index).write(value.to_le()) };
        }
    }

    /// Reads back little-endian word `index` (0 beyond the block).
    pub(crate) fn get(&self, index: usize) -> u64 {
        if index < self.origin.entries() {
            // SAFETY: As in `set`.
            u64::from_le(unsafe { self.cpu.as_ptr().add(index).read() })
        } else {
            0
        }
    }
}

/// A pool of equal DMA-coherent blocks (`dma_pool`).
///
/// # Invariants
///
/// `pool` was made by `dma_pool_create_node` with blocks of `origin.entries()` u64 words.
pub(crate) struct DmaPool {
    pool: NonNull<bindings::dma_pool>,
    origin: Origin,
}

// SAFETY: `dma_pool_alloc` and `dma_pool_free` may be called from any context and CPU.
unsafe impl Send for DmaPool {}
// SAFETY: As above.
unsafe impl Sync for DmaPool {}

impl DmaPool {
    /// A pool of `size`-byte blocks aligned to `align`, in memory of `node`.
    pub(crate) fn new(
        f: &Function,
        name: &'static CStr,
        size: usize,
        align: usize,
        node: Node,
    ) -> Result<Self> {
        let origin = Origin::new_pool(size / 8)?;
        let (name, node) = (name.as_char_ptr(), node.index() as i32);
        let dev = f.dma_dev();
        // SAFETY: `f` is a bound device; `name` is a static string; `node` is a node the
        // kernel knows; no boundary.
        let pool = unsafe { bindings::dma_pool_create_node(name, dev, size, align, 0, node) };
        Ok(Self {
            pool: NonNull::new(pool).ok_or(ENOMEM)?,
            origin,
        })
    }

    /// A block, or `None` when memory is short (atomic allocation).
    pub(crate) fn alloc(&self) -> Option<PoolBlock> {
        let (pool, mut dma) = (self.pool.as_ptr(), 0);
        // SAFETY: The pool is valid; `dma` is valid for writes.
        let cpu = unsafe { bindings::dma_pool_alloc(pool, bindings::GFP_ATOMIC, &mut dma) };
        Some(PoolBlock {
            cpu: NonNull::new(cpu.cast::<u64>())?,
            dma,
            origin: self.origin,
        })
    }

    /// Gives back a block of this pool; another pool's block is leaked with a warning.
    pub(crate) fn free(&self, block: PoolBlock) {
        if warn_on!(block.origin != self.origin) {
            return;
        }
        // SAFETY: `block` came from this pool (checked above), which is alive, and is given
        // back once (it is consumed).
        unsafe {
            bindings::dma_pool_free(self.pool.as_ptr(), block.cpu.as_ptr().cast(), block.dma)
        };
    }
}

impl Drop for DmaPool {
    fn drop(&mut self) {
        // SAFETY: Made in `new`; nothing allocates from it any more. A block still out (one
        // `free` refused, or a holder that leaked it) keeps its page: `dma_pool_destroy`
        // reports a busy pool and leaks it.
        unsafe { bindings::dma_pool_destroy(self.pool.as_ptr()) };
    }
}

/// One remembered mapped range.
#[repr(C)]
#[derive(Clone, Copy)]
struct SavedSegment {
    addr: u64,
    len: u32,
}

/// An array of remembered ranges from a [`SegmentPool`].
struct SavedSegments {
    array: NonNull<SavedSegment>,
    /// The pool and the array's capacity.
    origin: Origin,
    len: usize,
}

// SAFETY: The array is plain memory owned by whoever holds the token.
unsafe impl Send for SavedSegments {}

impl SavedSegments {
    /// Remembers `seg`; false when the array is full.
    fn push(&mut self, addr: u64, len: u32) -> bool {
        if self.len == self.origin.entries() {
            return false;
        }
        // SAFETY: The array holds `origin.entries()` entries; `len` is below it.
        unsafe {
            self.array
                .as_ptr()
                .add(self.len)
                .write(SavedSegment { addr, len })
        };
        self.len += 1;
        true
    }

    /// The array as a request's record keeps it ([`Mapped`]).
    fn into_raw(self) -> SavedRanges {
        SavedRanges {
            array: self.array.cast(),
            origin: self.origin.0,
            len: self.len,
        }
    }

    /// # Safety
    ///
    /// `raw` came from [`SavedSegments::into_raw`], and the array is in use by the returned
    /// value alone.
    unsafe fn from_raw(raw: &SavedRanges) -> Self {
        Self {
            array: raw.array.cast(),
            origin: Origin(raw.origin),
            len: raw.len,
        }
    }

    fn iter(&self) -> impl Iterator<Item = SavedSegment> + '_ {
        // SAFETY: The first `len` entries were written by `push`.
        (0..self.len).map(|i| unsafe { self.array.as_ptr().add(i).read() })
    }
}

/// A mempool of [`SavedSegments`] arrays (one always in reserve, so I/O makes progress under
/// memory pressure).
///
/// # Invariants
///
/// `pool` was made by `nva_vec_pool_create` for arrays of `origin.entries()` entries.
pub(crate) struct SegmentPool {
    pool: NonNull<bindings::mempool_t>,
    origin: Origin,
}

// SAFETY: Mempools may be used from any context and CPU.
unsafe impl Send for SegmentPool {}
// SAFETY: As above.
unsafe impl Sync for SegmentPool {}

impl SegmentPool {
    /// A pool of arrays of `capacity` entries, in memory of `node`.
    pub(crate) fn new(capacity: usize, node: Node) -> Result<Self> {
        let origin = Origin::new_pool(capacity)?;
        let size = capacity * core::mem::size_of::<SavedSegment>();
        // SAFETY: Creates a mempool of kmalloc'ed `size`-byte elements on a node the kernel
        // knows.
        let pool = unsafe { ffi::nva_vec_pool_create(size, node.index() as i32) };
        Ok(Self {
            pool: NonNull::new(pool).ok_or(ENOMEM)?,
            origin,
        })
    }

    fn alloc(&self) -> Option<SavedSegments> {
        // SAFETY: The pool is valid; allocation is atomic.
        let p = unsafe { ffi::nva_vec_pool_alloc(self.pool.as_ptr()) };
        Some(SavedSegments {
            array: NonNull::new(p.cast::<SavedSegment>())?,
            origin: self.origin,
            len: 0,
        })
    }

    /// Gives back an array of this pool; another pool's array is leaked with a warning.
    fn free(&self, saved: SavedSegments) {
        if warn_on!(saved.origin != self.origin) {
            return;
        }
        // SAFETY: The array came from this pool (checked above), which is alive, and is given
        // back once (it is consumed).
        unsafe { bindings::mempool_free(saved.array.as_ptr().cast(), self.pool.as_ptr()) };
    }
}

impl Drop for SegmentPool {
    fn drop(&mut self) {
        // SAFETY: Made in `new`; every array was given back.
        unsafe { bindings::mempool_destroy(self.pool.as_ptr()) };
    }
}

/// Device resources that must go when the driver unbinds, shared with the I/O paths: access
/// them with [`Unbindable::with`].
pub(crate) struct Unbindable<T: Send + 'static>(Devres<T>);

impl<T: Send + Sync + 'static> Unbindable<T> {
    pub(crate) fn new(dev: &Device<Bound>, value: T) -> Result<Self> {
        Ok(Self(Devres::new(dev, Ok::<T, Error>(value))?))
    }

    /// Runs `f` on the resources, or returns `None` once the driver unbound.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.0.try_access_with(f)
    }
}

/// How a block of [`DeviceMemory`] is allocated and freed: no kernel mapping, and no warning
/// when a large block cannot be had (the host memory buffer tries smaller ones next).
const DEVICE_ONLY: usize =
    (bindings::DMA_ATTR_NO_KERNEL_MAPPING | bindings::DMA_ATTR_NO_WARN) as usize;

/// How [`DeviceMemory`] was allocated.
enum DeviceMemoryKind {
    /// One block (`dma_alloc_attrs`), by the cookie it returned.
    Block(NonNull<c_void>),
    /// Pages an IOMMU maps as one range (`dma_alloc_noncontiguous`).
    Merged(NonNull<bindings::sg_table>),
}

/// Host memory only the device uses, never mapped for the CPU: a chunk of a host memory
/// buffer. Free it before the driver unbinds.
///
/// # Invariants
///
/// `kind` is what an allocation of `len` bytes for `pci` returned, at bus address `dma`.
pub(crate) struct DeviceMemory {
    pci: Function,
    kind: DeviceMemoryKind,
    dma: u64,
    len: usize,
}

// SAFETY: The memory is owned by whoever holds the value, and never touched by the CPU.
unsafe impl Send for DeviceMemory {}
// SAFETY: As above.
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    /// `len` bytes in one physically contiguous block; `None` when memory is short.
    pub(crate) fn alloc(pci: &Function, len: usize) -> Option<Self> {
        let mut dma = 0;
        // SAFETY: `pdev` is live; `dma` is valid for writes.
        let cookie = unsafe {
            bindings::dma_alloc_attrs(
                pci.dma_dev(),
                len,
                &mut dma,
                bindings::GFP_KERNEL,
                DEVICE_ONLY,
            )
        };
        Some(Self {
            pci: pci.clone(),
            kind: DeviceMemoryKind::Block(NonNull::new(cookie)?),
            dma,
            len,
        })
    }

    /// `len` bytes the device sees as one range: behind an IOMMU that merges pages, pages
    /// anywhere; without one, a contiguous block. `None` when memory is short.
    pub(crate) fn alloc_merged(pci: &Function, len: usize) -> Option<Self> {
        let dir = bindings::dma_data_direction::DMA_BIDIRECTIONAL;
        // SAFETY: `pdev` is live.
        let sgt = unsafe {
            bindings::dma_alloc_noncontiguous(pci.dma_dev(), len, dir, bindings::GFP_KERNEL, 0)
        };
        let sgt = NonNull::new(sgt)?;
        // SAFETY: A table `dma_alloc_noncontiguous` made maps the pages as one range: its first
        // entry's address (`sg_dma_address`).
        let dma = unsafe { (*(*sgt.as_ptr()).sgl).dma_address };
        Some(Self {
            pci: pci.clone(),
            kind: DeviceMemoryKind::Merged(sgt),
            dma,
            len,
        })
    }

    /// The address the device uses.
    pub(crate) fn dma(&self) -> u64 {
        self.dma
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        match self.kind {
            // SAFETY: Allocated for `pci` with this size and address (type invariant), freed
            // once.
            DeviceMemoryKind::Block(cookie) => unsafe {
                let dev = self.pci.dma_dev();
                bindings::dma_free_attrs(dev, self.len, cookie.as_ptr(), self.dma, DEVICE_ONLY)
            },
            // SAFETY: As above.
            DeviceMemoryKind::Merged(sgt) => unsafe {
                let dir = bindings::dma_data_direction::DMA_BIDIRECTIONAL;
                bindings::dma_free_noncontiguous(self.pci.dma_dev(), self.len, sgt.as_ptr(), dir)
            },
        }
    }
}

/// The largest block the page allocator gives (`PAGE_SIZE * MAX_ORDER_NR_PAGES`).
pub(crate) fn max_block_size() -> u64 {
    // SAFETY: Computes a constant.
    unsafe { ffi::nva_max_block_size() }
}

/// An array of `T` in the controller's own peer-to-peer memory (`pci_alloc_p2pmem`): a part of
/// one of its BARs, written by the CPU and read by the controller as it reads host memory.
/// Free it before the driver unbinds: unbinding waits for it.
///
/// # Invariants
///
/// `cpu` points to `len` (at least 1) aligned `T`s of `pci`'s peer-to-peer memory, allocated
/// by `nva_p2pmem_alloc` with `size_of::<T>() * len` bytes, at bus address `bus` (not 0).
pub(crate) struct P2pArray<T: Copy> {
    pci: Function,
    cpu: NonNull<T>,
    len: usize,
    bus: u64,
}

// SAFETY: The array is memory owned by whoever holds it; it is written only through `&mut`.
unsafe impl<T: Copy + Send> Send for P2pArray<T> {}
// SAFETY: As above: a shared reference gives no access to the memory.
unsafe impl<T: Copy + Sync> Sync for P2pArray<T> {}

impl<T: Copy> P2pArray<T> {
    /// `len` entries, not initialised; `None` when the function has no peer-to-peer memory
    /// left (or none at all: without `CONFIG_PCI_P2PDMA`, never any).
    pub(crate) fn alloc(pci: &Function, len: usize) -> Option<Self> {
        let size = len
            .checked_mul(core::mem::size_of::<T>())
            .filter(|&s| s > 0)?;
        let mut bus = 0;
        // SAFETY: `pdev` is live; `bus` is valid for writes.
        let cpu = unsafe { ffi::nva_p2pmem_alloc(pci.raw(), size, &mut bus) };
        let cpu = NonNull::new(cpu.cast::<T>())?;
        let array = Self {
            pci: pci.clone(),
            cpu,
            len,
            bus,
        };
        // Memory without a bus address is of no use to the device (and is given back by the
        // drop); the pool hands out whole pages, so it is aligned.
        (bus != 0 && cpu.as_ptr().is_aligned()).then_some(array)
    }

    /// The address the device reads the array at.
    pub(crate) fn bus_address(&self) -> u64 {
        self.bus
    }

    /// Writes entry `index` (`EINVAL` beyond the array).
    pub(crate) fn write(&mut self, index: usize, value: T) -> Result {
        if index >= self.len {
            return Err(EINVAL);
        }
        // SAFETY: `index` is within the array, which is aligned memory mapped for the CPU while
        // allocated (type invariant); `&mut self` excludes any other CPU access.
        unsafe { self.cpu.as_ptr().add(index).write_volatile(value) };
        Ok(())
    }
}

impl<T: Copy> Drop for P2pArray<T> {
    fn drop(&mut self) {
        let size = self.len * core::mem::size_of::<T>();
        // SAFETY: Allocated from `pci` with this size (type invariant), given back once.
        unsafe { ffi::nva_p2pmem_free(self.pci.raw(), self.cpu.as_ptr().cast(), size) };
    }
}
