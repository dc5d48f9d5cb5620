// SPDX-License-Identifier: GPL-2.0

//! The module's debugfs directory, where each controller keeps its statistics.
//!
//! C header: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h)

use kernel::{
    debugfs,
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Release, //
    }, //
};

kernel::sync::global_lock! {
    // SAFETY: `Root::new` initialises it once (see `STATE`); nothing locks it before.
    unsafe(uninit) static ROOT: Mutex<Option<debugfs::Dir>> = None;
}

/// Where `ROOT`'s lock is in its life: `UNINIT`, being initialised, or `READY`.
static STATE: Atomic<i32> = Atomic::new(UNINIT);
const UNINIT: i32 = 0;
const INITIALISING: i32 = 1;
const READY: i32 = 2;

/// Owns the module's debugfs directory (`/sys/kernel/debug/nvme_adaptive`): the directory goes
/// when the `Root` and every controller's subdirectory have gone.
pub(crate) struct Root(());

impl Root {
    /// Makes the directory; `EBUSY` while another `Root` has it.
    pub(crate) fn new() -> Result<Self> {
        match STATE.cmpxchg(UNINIT, INITIALISING, Full) {
            Ok(_) => {
                // SAFETY: Only the caller that moved `STATE` from `UNINIT` gets here, so once;
                // nothing locks `ROOT` before `STATE` is `READY`.
                unsafe { ROOT.init() };
                STATE.store(READY, Release);
            }
            // A failed exchange reads relaxed: read again to see the initialisation.
            Err(_) if STATE.load(Acquire) == READY => {}
            Err(_) => return Err(EBUSY),
        }
        let mut root = ROOT.lock();
        if root.is_some() {
            return Err(EBUSY);
        }
        *root = Some(debugfs::Dir::new(c"nvme_adaptive"));
        Ok(Self(()))
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let dir = ROOT.lock().take();
        drop(dir);
    }
}

/// The module's directory, if it exists; a controller's subdirectory keeps it alive.
pub(crate) fn root() -> Option<debugfs::Dir> {
    if STATE.load(Acquire) != READY {
        return None;
    }
    ROOT.lock().clone()
}
