// SPDX-License-Identifier: GPL-2.0

//! Streaming DMA for request data, and a DMA pool for PRP list pages.
//!
//! The 7.3 kernel crate has no streaming mapping for block requests and no DMA pool, so this
//! file wraps the C calls: `__blk_rq_map_sg` + `dma_map_sg_attrs` for request data, and
//! `dma_pool_*` for the 4 KiB pages that hold PRP lists and discard ranges.

use core::ptr::NonNull;
use kernel::{alloc::flags::GFP_ATOMIC, bindings, device, prelude::*};

use crate::blk::{Operations, RequestView};

/// Scatterlist entries kept inside the request itself; larger requests allocate their table.
const INLINE_SEGMENTS: usize = 2;

/// A pool of page-sized, page-aligned DMA buffers.
///
/// # Invariants
///
/// `pool` was made by `dma_pool_create_node` for `dev`, with `PAGE_SIZE` blocks.
pub(crate) struct DmaPool {
    pool: NonNull<bindings::dma_pool>,
}

// SAFETY: `dma_pool_alloc` and `dma_pool_free` may be called from any context and CPU.
unsafe impl Send for DmaPool {}
// SAFETY: as above.
unsafe impl Sync for DmaPool {}

/// One block from a [`DmaPool`]; it must be returned with [`DmaPool::free`].
pub(crate) struct DmaPage {
    cpu: NonNull<u8>,
    dma: u64,
}

// SAFETY: the page is plain memory owned by whoever holds the token.
unsafe impl Send for DmaPage {}

impl DmaPage {
    pub(crate) fn dma(&self) -> u64 {
        self.dma
    }

    /// Sets entry `index` of the page seen as a PRP list (little endian, as the device reads
    /// it); indexes beyond the page are ignored.
    pub(crate) fn set_u64(&mut self, index: usize, value: u64) {
        if index < crate::prp::LIST_ENTRIES {
            // SAFETY: the page holds `LIST_ENTRIES` u64s and is 4 KiB aligned; the device does
            // not read it until the command that points at it is submitted.
            unsafe {
                self.cpu
                    .as_ptr()
                    .cast::<u64>()
                    .add(index)
                    .write(value.to_le())
            };
        }
    }

    /// Writes `value` at the start of the page.
    pub(crate) fn write<V: kernel::transmute::AsBytes>(&mut self, value: V) {
        const { assert!(core::mem::size_of::<V>() <= crate::cmd::PAGE_SIZE) };
        // SAFETY: as in `write_u64s`; `V` fits and the page is aligned for any `V`.
        unsafe { self.cpu.as_ptr().cast::<V>().write(value) };
    }
}

impl DmaPool {
    pub(crate) fn new(dev: &device::Device<device::Bound>, name: &'static CStr) -> Result<Self> {
        let size = crate::cmd::PAGE_SIZE;
        // SAFETY: `dev` is a bound device; `name` is a static string.
        let pool = unsafe {
            bindings::dma_pool_create_node(
                name.as_char_ptr(),
                crate::raw::dev(dev),
                size,
                size,
                0,
                bindings::NUMA_NO_NODE,
            )
        };
        // INVARIANT: created above for `dev` with page-sized blocks.
        Ok(Self {
            pool: NonNull::new(pool).ok_or(ENOMEM)?,
        })
    }

    /// A page, without sleeping (the submission path may not sleep).
    pub(crate) fn alloc(&self) -> Option<DmaPage> {
        let mut dma = 0;
        let pool = self.pool.as_ptr();
        // SAFETY: `pool` is valid (type invariant).
        let cpu = unsafe { bindings::dma_pool_alloc(pool, bindings::GFP_ATOMIC, &mut dma) };
        Some(DmaPage {
            cpu: NonNull::new(cpu.cast())?,
            dma,
        })
    }

    pub(crate) fn free(&self, page: DmaPage) {
        // SAFETY: `page` came from this pool and is no longer used by the device.
        unsafe { bindings::dma_pool_free(self.pool.as_ptr(), page.cpu.as_ptr().cast(), page.dma) };
    }
}

impl Drop for DmaPool {
    fn drop(&mut self) {
        // SAFETY: `pool` is valid; every page went back with `free` (the requests that held
        // them have ended before the queues are freed).
        unsafe { bindings::dma_pool_destroy(self.pool.as_ptr()) };
    }
}

/// Where a request's scatterlist lives.
enum SgStorage {
    Inline([bindings::scatterlist; INLINE_SEGMENTS]),
    Heap(KVec<bindings::scatterlist>),
}

/// What is mapped for the device right now.
#[derive(Clone, Copy)]
enum Mapped {
    Nothing,
    /// One physically contiguous segment, mapped directly (the common small-I/O case: no
    /// scatterlist at all).
    Single {
        addr: u64,
        len: u32,
    },
    /// A scatterlist: `entries` filled by `__blk_rq_map_sg`, `segments` DMA segments after
    /// mapping.
    List {
        entries: u32,
        segments: u32,
    },
}

/// The DMA mapping of one request's data.
pub(crate) struct DataMapping {
    sg: SgStorage,
    mapped: Mapped,
    dir: bindings::dma_data_direction,
}

impl Default for DataMapping {
    fn default() -> Self {
        Self {
            sg: SgStorage::Inline(pin_init::zeroed()),
            mapped: Mapped::Nothing,
            dir: bindings::dma_data_direction::DMA_NONE,
        }
    }
}

/// `DMA_MAPPING_ERROR` (a C macro with a cast).
const DMA_MAPPING_ERROR: u64 = !0;

impl DataMapping {
    fn table(&mut self) -> *mut bindings::scatterlist {
        match &mut self.sg {
            SgStorage::Inline(a) => a.as_mut_ptr(),
            SgStorage::Heap(v) => v.as_mut_ptr(),
        }
    }

    /// Maps the data of `rq` for the device, in the direction of the request.
    ///
    /// Fails with `ENOMEM` when a scatterlist or the mapping cannot be had right now (the
    /// request is then retried), and `EIO` when the request has no data to map.
    pub(crate) fn map<T: Operations>(
        &mut self,
        dev: &device::Device,
        rq: &RequestView<'_, T>,
        to_device: bool,
    ) -> Result {
        self.dir = if to_device {
            bindings::dma_data_direction::DMA_TO_DEVICE
        } else {
            bindings::dma_data_direction::DMA_FROM_DEVICE
        };
        if let Some((page, offset, len)) = rq.single_segment() {
            // SAFETY: `page` holds the request's data from `offset` for `len` bytes, and stays
            // pinned by the block layer until the request ends.
            let addr = unsafe {
                bindings::dma_map_page_attrs(
                    crate::raw::dev(dev),
                    page,
                    offset as usize,
                    len as usize,
                    self.dir,
                    0,
                )
            };
            if addr == DMA_MAPPING_ERROR {
                return Err(ENOMEM);
            }
            self.mapped = Mapped::Single { addr, len };
            return Ok(());
        }
        let segments = usize::from(rq.nr_phys_segments());
        if segments == 0 {
            return Err(EIO);
        }
        if segments > INLINE_SEGMENTS {
            self.sg = SgStorage::Heap(KVec::from_elem(pin_init::zeroed(), segments, GFP_ATOMIC)?);
        }
        let table = self.table();
        // SAFETY: `table` has room for `segments` entries.
        unsafe { bindings::sg_init_table(table, segments as u32) };
        let entries = rq.map_sg(table);
        let dev = crate::raw::dev(dev);
        // SAFETY: `table` holds `entries` initialised entries; `dev` is the bound device.
        let mapped = unsafe { bindings::dma_map_sg_attrs(dev, table, entries as i32, self.dir, 0) };
        if mapped == 0 {
            self.sg = SgStorage::Inline(pin_init::zeroed());
            return Err(ENOMEM);
        }
        self.mapped = Mapped::List {
            entries,
            segments: mapped,
        };
        Ok(())
    }

    /// The mapped DMA segments (address, length).
    pub(crate) fn segments(&mut self) -> Segments<'_> {
        let (single, left) = match self.mapped {
            Mapped::Nothing => (None, 0),
            Mapped::Single { addr, len } => (Some((addr, len)), 0),
            Mapped::List { segments, .. } => (None, segments),
        };
        Segments {
            single,
            sg: self.table(),
            left,
            _mapping: core::marker::PhantomData,
        }
    }

    /// Undoes [`DataMapping::map`]; nothing happens if no data is mapped.
    pub(crate) fn unmap(&mut self, dev: &device::Device) {
        match self.mapped {
            Mapped::Nothing => return,
            Mapped::Single { addr, len } => {
                // SAFETY: mapped with these arguments in `map`.
                unsafe {
                    bindings::dma_unmap_page_attrs(
                        crate::raw::dev(dev),
                        addr,
                        len as usize,
                        self.dir,
                        0,
                    )
                };
            }
            Mapped::List { entries, .. } => {
                let table = self.table();
                // SAFETY: `table` was mapped with these arguments in `map`.
                unsafe {
                    bindings::dma_unmap_sg_attrs(
                        crate::raw::dev(dev),
                        table,
                        entries as i32,
                        self.dir,
                        0,
                    )
                };
                if matches!(self.sg, SgStorage::Heap(_)) {
                    self.sg = SgStorage::Inline(pin_init::zeroed());
                }
            }
        }
        self.mapped = Mapped::Nothing;
    }
}

/// The DMA segments of a mapped request.
pub(crate) struct Segments<'a> {
    single: Option<(u64, u32)>,
    sg: *mut bindings::scatterlist,
    left: u32,
    _mapping: core::marker::PhantomData<&'a mut DataMapping>,
}

impl Iterator for Segments<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        if let Some(seg) = self.single.take() {
            return Some(seg);
        }
        if self.left == 0 || self.sg.is_null() {
            return None;
        }
        self.left -= 1;
        // SAFETY: the first `segments` entries of the mapped chain hold DMA segments, and the
        // mapping is borrowed for as long as this iterator lives.
        let seg = unsafe {
            (
                bindings::sg_dma_address(self.sg),
                bindings::sg_dma_len(self.sg),
            )
        };
        // SAFETY: as above; `sg_next` returns null after the last entry.
        self.sg = unsafe { bindings::sg_next(self.sg) };
        Some(seg)
    }
}

/// Lets swiotlb bounce buffers keep each buffer's offset within its 4 KiB page, as PRPs need
/// (`dma_set_min_align_mask`, a static inline in C).
pub(crate) fn set_min_align_mask(dev: &device::Device<device::Bound>, mask: u32) {
    let raw = crate::raw::dev(dev);
    // SAFETY: `raw` is a live, bound device; PCI devices always have `dma_parms`.
    unsafe {
        let parms = (*raw).dma_parms;
        if !parms.is_null() {
            (*parms).min_align_mask = mask;
        }
    }
}
