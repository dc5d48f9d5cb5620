// SPDX-License-Identifier: GPL-2.0

//! How busy this CPU is: its idle and I/O-wait time, for adaptive polling's judgment of whether
//! the CPU sets a queue's pace.
//!
//! C header: [`include/linux/kernel_stat.h`](srctree/include/linux/kernel_stat.h)

use kernel::{
    bindings,
    cpu::CpuId, //
};

/// The time the current CPU spent idle or waiting for I/O since boot, in nanoseconds (counted in
/// microseconds), where the kernel accounts it as it happens (`CONFIG_NO_HZ_COMMON`: at every
/// idle entry and exit, as precisely as `ktime_get`); `None` where it only counts ticks, too
/// coarse for the spans a queue samples.
pub(crate) fn idle_ns() -> Option<u64> {
    if !cfg!(CONFIG_NO_HZ_COMMON) {
        return None;
    }
    let cpu = i32::from(CpuId::current());
    // SAFETY: Both read the per-CPU idle accounting of `cpu`, a valid CPU id (the current one),
    // under its seqcount; a NULL `last_update_time` asks for no update. They may be called from
    // any context but NMI: the writers run on this CPU with interrupts off, so a reader here
    // never interrupts a write in progress.
    let (idle_us, iowait_us) = unsafe {
        (
            bindings::get_cpu_idle_time_us(cpu, core::ptr::null_mut()),
            bindings::get_cpu_iowait_time_us(cpu, core::ptr::null_mut()),
        )
    };
    // Both answer -1 while NOHZ is inactive (`nohz=off`): no precise accounting then either.
    if idle_us == u64::MAX || iowait_us == u64::MAX {
        return None;
    }
    Some(idle_us.saturating_add(iowait_us).saturating_mul(1000))
}
