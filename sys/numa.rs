// SPDX-License-Identifier: GPL-2.0

//! NUMA nodes: where a controller's and a queue's memory is allocated, as `pci.c` places its
//! structures on the controller's node and its descriptor pools on each queue's.
//!
//! C header: [`include/linux/nodemask.h`](srctree/include/linux/nodemask.h)

use core::{
    alloc::Layout,
    mem::MaybeUninit,
    ptr::NonNull, //
};
use kernel::{
    alloc::{
        allocator::Kmalloc,
        Allocator,
        NumaNode, //
    },
    prelude::*, //
};

use super::ffi;

/// A NUMA node the kernel knows (below `nr_node_ids`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Node(u16);

impl Node {
    /// The node of a device or hardware queue, as the kernel reports it; one without a node
    /// (`NUMA_NO_NODE`) counts as node 0, as `pci.c`'s descriptor pools do.
    pub(crate) fn from_raw(node: i32) -> Self {
        match u16::try_from(node) {
            Ok(n) if u32::from(n) < Self::count() => Self(n),
            _ => Self(0),
        }
    }

    /// How many nodes there can be (`nr_node_ids`): every [`Node`] is below it.
    pub(crate) fn count() -> u32 {
        // SAFETY: Reads a value set once at boot.
        unsafe { ffi::nva_nr_node_ids() }
    }

    pub(crate) fn index(self) -> usize {
        self.0.into()
    }
}

/// Allocates and initialises `init` in memory of `node` (as `kzalloc_node`), pinned.
pub(crate) fn pin_init_on<T>(init: impl PinInit<T, Error>, node: Node) -> Result<Pin<KBox<T>>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return KBox::pin_init(init, GFP_KERNEL);
    }
    let nid = NumaNode::new(node.0.into())?;
    let memory: NonNull<[u8]> = Kmalloc::alloc(layout, GFP_KERNEL, nid)?;
    // SAFETY: `memory` was allocated by `Kmalloc`, the allocator of `KBox`, with the layout of
    // `T` (so of `MaybeUninit<T>`), and nothing else owns it.
    let uninit = unsafe { KBox::<MaybeUninit<T>>::from_raw(memory.as_ptr().cast()) };
    uninit.write_pin_init(init)
}
