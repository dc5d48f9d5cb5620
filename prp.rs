// SPDX-License-Identifier: GPL-2.0

//! Physical Region Page (PRP) entries for a DMA-mapped data buffer.
//!
//! A buffer is described page by page: PRP1 points at the first byte (any dword offset), every
//! further entry at the start of a 4 KiB page. Two entries fit in the command; more go to a PRP
//! list page that PRP2 points at. The block layer's `virt_boundary_mask` of 4095 guarantees the
//! shape PRPs need: only the first segment may start inside a page and only the last may end
//! inside one. This module only computes entries; `queue.rs` owns the list pages.

use kernel::prelude::*;

use crate::cmd::PAGE_SIZE;

const PAGE: u64 = PAGE_SIZE as u64;

/// Entries of one PRP list page. Requests are limited (`MAX_TRANSFER`) so that one page always
/// suffices and lists never chain.
pub(crate) const LIST_ENTRIES: usize = PAGE_SIZE / 8;

/// Largest transfer: one page for PRP1 plus a full list page, less one page for an unaligned
/// start.
pub(crate) const MAX_TRANSFER: usize = LIST_ENTRIES * PAGE_SIZE;

/// A buffer PRPs cannot describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrpError {
    /// A segment other than the first starts inside a page, or one other than the last ends
    /// inside one (the queue limits should have prevented it).
    Gap,
    /// More pages than one list page holds.
    TooLong,
    /// No data.
    Empty,
}

/// Walks the pages of `segments` (DMA address, length) and calls `emit(index, address)` for each
/// PRP entry in order. Returns the number of entries.
pub(crate) fn walk(
    segments: impl Iterator<Item = (u64, u32)>,
    mut emit: impl FnMut(usize, u64),
) -> Result<usize, PrpError> {
    let mut count = 0;
    let mut prev_end: Option<u64> = None;
    for (addr, len) in segments {
        if len == 0 {
            continue;
        }
        if let Some(end) = prev_end {
            if end % PAGE != 0 || addr % PAGE != 0 {
                return Err(PrpError::Gap);
            }
        }
        let end = addr + u64::from(len);
        let mut pos = addr;
        while pos < end {
            if count > LIST_ENTRIES {
                return Err(PrpError::TooLong);
            }
            emit(count, pos);
            count += 1;
            pos = (pos & !(PAGE - 1)) + PAGE;
        }
        prev_end = Some(end);
    }
    if count == 0 {
        return Err(PrpError::Empty);
    }
    Ok(count)
}

#[kunit_tests(nvme_adaptive_prp)]
mod tests {
    use super::*;

    /// Collects the entries of `segments` (at most 8 for the tests).
    fn entries(segments: &[(u64, u32)]) -> Result<([u64; 8], usize), PrpError> {
        let mut out = [0u64; 8];
        let n = walk(segments.iter().copied(), |i, a| {
            if i < out.len() {
                out[i] = a;
            }
        })?;
        Ok((out, n))
    }

    #[test]
    fn single_page_aligned() {
        let (e, n) = entries(&[(0x10000, 4096)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 1);
        assert_eq!(e[0], 0x10000);
    }

    #[test]
    fn small_unaligned_within_one_page() {
        let (e, n) = entries(&[(0x10200, 512)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 1);
        assert_eq!(e[0], 0x10200);
    }

    #[test]
    fn unaligned_start_spills_into_second_page() {
        // 4 KiB starting 512 bytes into a page: PRP1 at the offset, PRP2 the next page.
        let (e, n) = entries(&[(0x10200, 4096)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 2);
        assert_eq!(e[..2], [0x10200, 0x11000]);
    }

    #[test]
    fn three_pages_need_a_list() {
        let (e, n) = entries(&[(0x20000, 3 * 4096)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 3);
        assert_eq!(e[..3], [0x20000, 0x21000, 0x22000]);
    }

    #[test]
    fn unaligned_start_and_end_across_segments() {
        // First segment from mid-page to a page end, then a full page, then a partial page.
        let (e, n) =
            entries(&[(0x30e00, 0x200), (0x50000, 4096), (0x70000, 100)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 3);
        assert_eq!(e[..3], [0x30e00, 0x50000, 0x70000]);
    }

    #[test]
    fn multi_page_segments() {
        let (e, n) = entries(&[(0x1000, 2 * 4096), (0x8000, 2 * 4096)]).unwrap_or(([0; 8], 0));
        assert_eq!(n, 4);
        assert_eq!(e[..4], [0x1000, 0x2000, 0x8000, 0x9000]);
    }

    #[test]
    fn gaps_are_rejected() {
        // Second segment starts inside a page.
        assert_eq!(
            entries(&[(0x1000, 4096), (0x8200, 512)]).err(),
            Some(PrpError::Gap)
        );
        // First segment ends inside a page although more follow.
        assert_eq!(
            entries(&[(0x1000, 512), (0x8000, 512)]).err(),
            Some(PrpError::Gap)
        );
    }

    #[test]
    fn limits() {
        assert_eq!(entries(&[]).err(), Some(PrpError::Empty));
        // The largest transfer fits, even starting mid-page: 1 + 512 entries.
        let n = walk([(0x200u64, MAX_TRANSFER as u32)].into_iter(), |_, _| {});
        assert_eq!(n, Ok(LIST_ENTRIES + 1));
        let n = walk(
            [(0x200u64, MAX_TRANSFER as u32 + 4096)].into_iter(),
            |_, _| {},
        );
        assert_eq!(n, Err(PrpError::TooLong));
    }
}
