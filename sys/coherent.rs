// SPDX-License-Identifier: GPL-2.0

//! Entries of coherent DMA memory shared with the controller (queue rings, shadow doorbells),
//! reached by index through the allocation's address. The kernel crate's projections check the
//! index, the address range and the alignment on every access, and these are accessed on every
//! I/O; here one compare of the index against the length bounds each access.
//!
//! C header: [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h)

use kernel::{
    dma::Coherent,
    prelude::*, //
};

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

/// Writes entry `index` of a ring borrowed exclusively (a command to a submission ring), as one
/// plain copy; `EINVAL` past the end. The controller reads it once a doorbell write, which
/// `writel` orders after this one, tells it to.
#[inline(always)]
pub(crate) fn write_owned<T: IntoBytes>(
    ring: &mut Coherent<[T]>,
    index: usize,
    value: T,
) -> Result {
    let entry = entry(ring, index).ok_or(EINVAL)?;
    // SAFETY: As in `read`; `ring` is borrowed exclusively, so no other CPU writes it meanwhile.
    unsafe { entry.write(value) };
    Ok(())
}
