// SPDX-License-Identifier: GPL-2.0

//! The Host Memory Buffer (NVM Express Base Specification 2.1, 8.2.4): host memory that a
//! controller without DRAM of its own borrows for its mapping tables. How much (what Identify
//! asks for against `max_host_mem_size_mb`), in which chunks, and the descriptor list that tells
//! the controller where they are, as `pci.c` decides them (`nvme_setup_host_mem`,
//! `nvme_alloc_host_mem`, `nvme_alloc_host_mem_multi`).

use kernel::prelude::*;

use crate::cmd::{
    HostMemoryDescriptor,
    HOST_MEMORY_UNIT as UNIT, //
};

/// Set Features (Host Memory Buffer), dword 11: the controller may use the buffer.
pub(crate) const ENABLE: u32 = 1 << 0;
/// Dword 11: the buffer is the one the controller used before (its contents are still valid).
pub(crate) const RETURN: u32 = 1 << 1;

/// What Identify Controller asks for (in units of 4 KiB; HMMAXD in descriptors, 0: no limit).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Wanted {
    pub(crate) hmpre: u32,
    pub(crate) hmmin: u32,
    pub(crate) hmminds: u32,
    pub(crate) hmmaxd: u16,
}

/// The buffer to allocate, in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Size {
    /// The controller wants none (HMPRE 0).
    None,
    /// Its minimum is above `max_host_mem_size_mb`: it gets none.
    MinimumAboveLimit { min: u64 },
    /// At most `preferred` bytes (the controller's preference, cut to the parameter), and at
    /// least `min` (0: any amount helps).
    Range { min: u64, preferred: u64 },
}

impl Wanted {
    /// The size to allocate with a limit of `max_mib` MiB.
    pub(crate) fn size(self, max_mib: u32) -> Size {
        if self.hmpre == 0 {
            return Size::None;
        }
        let max = u64::from(max_mib) << 20;
        let min = u64::from(self.hmmin) * UNIT;
        if min > max {
            return Size::MinimumAboveLimit { min };
        }
        Size::Range {
            min,
            preferred: (u64::from(self.hmpre) * UNIT).min(max),
        }
    }

    /// The chunk sizes to try, largest first: the preferred size, at most `max_chunk` (the
    /// largest block the page allocator gives), halved down to the controller's minimum
    /// descriptor size, at least two pages of `page` bytes.
    pub(crate) fn chunk_sizes(
        self,
        preferred: u64,
        page: u64,
        max_chunk: u64,
    ) -> impl Iterator<Item = u64> {
        let smallest = (u64::from(self.hmminds) * UNIT).max(2 * page).max(1);
        let first = preferred.min(max_chunk);
        core::iter::successors(Some(first), |&c| Some(c / 2)).take_while(move |&c| c >= smallest)
    }
}

/// Whether `size` bytes allocated satisfy a minimum of `min` (0: any amount does).
pub(crate) fn enough(size: u64, min: u64) -> bool {
    min == 0 || size >= min
}

/// One attempt at a descriptor list (`nvme_alloc_host_mem_multi`): chunks of `chunk` bytes,
/// the last one what remains, until `preferred` bytes or the controller's most descriptors.
pub(crate) struct Plan {
    preferred: u64,
    chunk: u64,
    max_entries: u32,
    size: u64,
    entries: u32,
}

impl Plan {
    pub(crate) fn new(preferred: u64, chunk: u64, hmmaxd: u16) -> Self {
        let needed = preferred.div_ceil(chunk.max(1)).min(u32::MAX.into()) as u32;
        let max_entries = match hmmaxd {
            0 => needed,
            d => needed.min(d.into()),
        };
        Self {
            preferred,
            chunk,
            max_entries,
            size: 0,
            entries: 0,
        }
    }

    /// Descriptors the list has room for.
    pub(crate) fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// The length of the next chunk to allocate; `None` once the list is complete.
    pub(crate) fn next_len(&self) -> Option<u64> {
        (self.size < self.preferred && self.entries < self.max_entries)
            .then(|| self.chunk.min(self.preferred - self.size))
    }

    /// The chunk [`Plan::next_len`] asked for was allocated at `addr`: its descriptor.
    pub(crate) fn add(&mut self, addr: u64) -> Option<HostMemoryDescriptor> {
        let len = self.next_len()?;
        self.size += len;
        self.entries += 1;
        Some(HostMemoryDescriptor::new(addr, len))
    }

    /// Bytes in the list so far.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn entries(&self) -> u32 {
        self.entries
    }
}

#[kunit_tests(nvme_adaptive_hmb)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn size_against_the_limit() {
        let w = Wanted {
            hmpre: 64 << 8, // 64 MiB
            hmmin: 16 << 8, // 16 MiB
            hmminds: 0,
            hmmaxd: 0,
        };
        assert_eq!(
            w.size(128),
            Size::Range {
                min: 16 * MIB,
                preferred: 64 * MIB
            }
        );
        // The default limit, 128 MiB, cuts a larger preference.
        assert_eq!(
            w.size(32),
            Size::Range {
                min: 16 * MIB,
                preferred: 32 * MIB
            }
        );
        assert_eq!(w.size(8), Size::MinimumAboveLimit { min: 16 * MIB });
        assert_eq!(w.size(0), Size::MinimumAboveLimit { min: 16 * MIB });
        assert_eq!(Wanted { hmpre: 0, ..w }.size(128), Size::None);
        // No minimum: a limit of 0 leaves an empty range, which nothing satisfies.
        let w = Wanted { hmmin: 0, ..w };
        assert_eq!(
            w.size(0),
            Size::Range {
                min: 0,
                preferred: 0
            }
        );
        assert!(enough(4 * MIB, 0));
        assert!(!enough(4 * MIB, 16 * MIB));
        assert!(enough(16 * MIB, 16 * MIB));
    }

    #[test]
    fn chunk_sizes_halve_to_the_minimum() {
        let w = Wanted {
            hmpre: 1,
            hmmin: 0,
            hmminds: 256,
            hmmaxd: 0,
        };
        // 32 MiB preferred, 4 MiB the largest block: 4, 2, 1 MiB (HMMINDS 1 MiB).
        assert!(w
            .chunk_sizes(32 * MIB, 4096, 4 * MIB)
            .eq([4 * MIB, 2 * MIB, MIB]));
        // No HMMINDS: down to two pages.
        let w = Wanted { hmminds: 0, ..w };
        assert_eq!(w.chunk_sizes(32 * MIB, 4096, 4 * MIB).last(), Some(8192));
        // A preference below the largest block starts there.
        assert_eq!(w.chunk_sizes(40960, 4096, 4 * MIB).next(), Some(40960));
        assert_eq!(w.chunk_sizes(0, 4096, 4 * MIB).next(), None);
    }

    #[test]
    fn descriptor_list() {
        // 10 MiB in 4 MiB chunks: 4, 4, 2 MiB.
        let mut plan = Plan::new(10 * MIB, 4 * MIB, 0);
        assert_eq!(plan.max_entries(), 3);
        let mut descs = [HostMemoryDescriptor::default(); 4];
        let mut addr = 0x1_0000_0000;
        for desc in descs.iter_mut() {
            let Some(len) = plan.next_len() else {
                break;
            };
            *desc = plan.add(addr).unwrap();
            addr += len;
        }
        assert_eq!((plan.size(), plan.entries()), (10 * MIB, 3));
        assert!(descs
            .iter()
            .map(HostMemoryDescriptor::bytes)
            .eq([4 * MIB, 4 * MIB, 2 * MIB, 0]));
        assert_eq!(descs[1].addr(), 0x1_0040_0000);
        // HMMAXD 2 stops the list at 8 MiB.
        let mut plan = Plan::new(10 * MIB, 4 * MIB, 2);
        while plan.next_len().is_some() {
            plan.add(0).unwrap();
        }
        assert_eq!((plan.size(), plan.entries()), (8 * MIB, 2));
        assert!(plan.add(0).is_none());
    }
}
