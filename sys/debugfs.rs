// SPDX-License-Identifier: GPL-2.0

//! The module's debugfs directory, where each controller keeps its statistics.

use core::ptr;
use kernel::{
    debugfs,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Release},
};

/// The module's directory while [`Root`] lives.
static ROOT: Atomic<*mut debugfs::Dir> = Atomic::new(ptr::null_mut());

/// Owns the module's debugfs directory (`/sys/kernel/debug/nvme_adaptive`).
pub(crate) struct Root {
    _dir: KBox<debugfs::Dir>,
}

impl Root {
    pub(crate) fn new() -> Result<Self> {
        let mut dir = KBox::new(debugfs::Dir::new(c"nvme_adaptive"), GFP_KERNEL)?;
        ROOT.store(&raw mut *dir, Release);
        Ok(Self { _dir: dir })
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        ROOT.store(ptr::null_mut(), Release);
    }
}

/// The module's directory, if it exists.
pub(crate) fn root() -> Option<&'static debugfs::Dir> {
    let root = ROOT.load(Acquire);
    // SAFETY: `root` is null or points to the boxed directory of the live `Root`, which the
    // module drops only after its PCI driver is unregistered, that is after every controller
    // (the only callers) is gone.
    unsafe { root.as_ref() }
}
