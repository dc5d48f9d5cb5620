// SPDX-License-Identifier: GPL-2.0

//! Entries of coherent DMA memory shared with the controller (queue rings, shadow doorbells),
//! reached by index through the allocation's address. The kernel crate's projections check the
//! index, the address range and the alignment on every access, and these are accessed on every
//! I/O; here one compare of the index against the length bounds each access.
//!
//! C header: [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h)

use core::ptr::NonNull;
use kernel::{
    dma::Coherent,
    prelude::*, //
};

/// A queue's ring in coherent memory, or none yet. Its entries are reached through the address
/// of the first, kept beside the length (0 without a ring), so that one compare of an index
/// against the length bounds an access: a queue's I/O path does not test for the ring first.
///
/// # Invariants
///
/// With `buf`, `entries` is its first entry and `len` at most its length; without, `len` is 0.
pub(crate) struct Ring<T> {
    buf: Option<Coherent<[T]>>,
    entries: NonNull<T>,
    len: usize,
}

// SAFETY: `entries` addresses only the allocation the ring owns, which `Coherent` lets any CPU
// use.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    pub(crate) const fn none() -> Self {
        Self {
            buf: None,
            entries: NonNull::dangling(),
            len: 0,
        }
    }

    pub(crate) fn new(buf: Coherent<[T]>) -> Self {
        // A successful allocation is never at address 0; were it, the ring would have no entry.
        let (entries, len) = match NonNull::new(buf.as_mut_ptr().cast::<T>()) {
            Some(entries) => (entries, buf.len()),
            None => (NonNull::dangling(), 0),
        };
        Self {
            buf: Some(buf),
            entries,
            len,
        }
    }

    /// Gives the allocation up; the ring has none after.
    pub(crate) fn take(&mut self) -> Option<Coherent<[T]>> {
        core::mem::replace(self, Self::none()).buf
    }

    pub(crate) fn buf(&self) -> Option<&Coherent<[T]>> {
        self.buf.as_ref()
    }

    /// Entries in the ring, 0 without one.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entry `index`, if the ring has it: then the pointer lies in the allocation, aligned for
    /// `T`, and is valid for as long as the ring is.
    #[inline(always)]
    pub(super) fn entry(&self, index: usize) -> Option<*mut T> {
        // Below `len` (type invariant: the allocation's length or less), `wrapping_add` is the
        // in-bounds offset from the first entry.
        (index < self.len).then(|| self.entries.as_ptr().wrapping_add(index))
    }

    /// Writes entry `index` (a command to a submission ring), as one plain copy; `EINVAL` past
    /// the end, or without a ring. The controller reads it once a doorbell write, which
    /// `writel` orders after this one, tells it to.
    #[inline(always)]
    pub(crate) fn write_owned(&mut self, index: usize, value: T) -> Result
    where
        T: IntoBytes,
    {
        let entry = self.entry(index).ok_or(EINVAL)?;
        // SAFETY: An entry of the allocation, aligned (`entry`), which the ring keeps; the ring
        // is borrowed exclusively, so no other CPU writes it meanwhile.
        unsafe { entry.write(value) };
        Ok(())
    }
}

/// Entry `index` of `buf`, if it has one: then the pointer lies in the allocation, aligned for
/// `T`, and is valid for as long as `buf` is.
#[inline(always)]
fn entry<T>(buf: &Coherent<[T]>, index: usize) -> Option<*mut T> {
    // Below the length, `wrapping_add` is the in-bounds offset (and needs no `unsafe`).
    (index < buf.len()).then(|| buf.as_mut_ptr().cast::<T>().wrapping_add(index))
}

/// Reads entry `index`, volatile as `Coherent`'s own accessors read (the controller may write
/// it meanwhile); `None` past the end.
#[inline(always)]
pub(crate) fn read<T: FromBytes>(buf: &Coherent<[T]>, index: usize) -> Option<T> {
    let entry = entry(buf, index)?;
    // SAFETY: An entry of the allocation, aligned (`entry`), which `buf`'s borrow keeps.
    Some(unsafe { entry.read_volatile() })
}

/// Writes entry `index`, volatile as `Coherent`'s own accessors write; `EINVAL` past the end.
#[inline(always)]
pub(crate) fn write<T: IntoBytes>(buf: &Coherent<[T]>, index: usize, value: T) -> Result {
    let entry = entry(buf, index).ok_or(EINVAL)?;
    // SAFETY: As in `read`.
    unsafe { entry.write_volatile(value) };
    Ok(())
}
