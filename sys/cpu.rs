// SPDX-License-Identifier: GPL-2.0

//! How busy this CPU is: its idle and I/O-wait time, for adaptive polling's judgment of whether
//! the CPU sets a queue's pace; and CPU hotplug, whose events reach each controller.
//!
//! C headers: [`include/linux/kernel_stat.h`](srctree/include/linux/kernel_stat.h) and
//! [`include/linux/cpuhotplug.h`](srctree/include/linux/cpuhotplug.h)

use kernel::{
    bindings,
    cpu::CpuId,
    error::to_result,
    ffi::{
        c_int,
        c_uint, //
    },
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
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

/// A callback of a multi-instance CPU hotplug state: the CPU, and the instance's node.
pub(crate) type HotplugCallback =
    unsafe extern "C" fn(cpu: c_uint, node: *mut bindings::hlist_node) -> c_int;

/// The callback type `__cpuhp_setup_state` is declared with (that of a state without
/// instances).
type PlainCallback = Option<unsafe extern "C" fn(cpu: c_uint) -> c_int>;

/// The module's two dynamic hotplug states, while a [`HotplugRegistration`] exists (-1 before):
/// a CPU going down or coming up (on that CPU), and a CPU that went down (on another one).
static DOWN_STATE: Atomic<i32> = Atomic::new(-1);
static DEAD_STATE: Atomic<i32> = Atomic::new(-1);

/// Keeps the two states registered (`cpuhp_setup_state_multi`); removes them when dropped.
pub(crate) struct HotplugRegistration(());

/// One multi-instance dynamic state from `first`; no instance exists, so nothing is called.
fn setup_state(
    first: bindings::cpuhp_state,
    name: &'static CStr,
    startup: Option<HotplugCallback>,
    teardown: HotplugCallback,
) -> Result<i32> {
    // SAFETY: As `cpuhp_setup_state_multi`'s casts: the hotplug core calls the callbacks of a
    // multi-instance state only through the instance form of its pointers
    // (`cpuhp_step.startup.multi`), with the node as their second argument, so each is called
    // with the type it has.
    let (startup, teardown) = unsafe {
        (
            core::mem::transmute::<Option<HotplugCallback>, PlainCallback>(startup),
            core::mem::transmute::<Option<HotplugCallback>, PlainCallback>(Some(teardown)),
        )
    };
    // SAFETY: The name is a static string; the callbacks are functions of the instance type.
    let state = unsafe {
        bindings::__cpuhp_setup_state(first, name.as_char_ptr(), false, startup, teardown, true)
    };
    to_result(state).map(|()| state)
}

/// Removes a state `setup_state` made.
///
/// # Safety
///
/// `state` came from `setup_state`, was not removed since, and has no instance left.
unsafe fn remove_state(state: i32) {
    // SAFETY: The caller's promise.
    unsafe { bindings::__cpuhp_remove_state(state as bindings::cpuhp_state, false) };
}

/// Registers the module's hotplug states, with the callbacks every controller's instances get:
/// `going_down` and `up` run on a CPU going down (its managed interrupts are shut down next)
/// and on one coming up, which also rolls back a failed offline; `dead` runs once a CPU went.
///
/// # Safety
///
/// No other [`HotplugRegistration`] exists, nor is made until the returned one is dropped.
pub(crate) unsafe fn register_hotplug(
    going_down: HotplugCallback,
    up: HotplugCallback,
    dead: HotplugCallback,
) -> Result<HotplugRegistration> {
    let down = setup_state(
        bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
        c"block/nvme_adaptive:online",
        Some(up),
        going_down,
    )?;
    match setup_state(
        bindings::cpuhp_state_CPUHP_BP_PREPARE_DYN,
        c"block/nvme_adaptive:dead",
        None,
        dead,
    ) {
        Ok(dead) => {
            // The caller's promise: no other registration reads or writes these.
            DOWN_STATE.store(down, Release);
            DEAD_STATE.store(dead, Release);
            Ok(HotplugRegistration(()))
        }
        Err(e) => {
            // SAFETY: Set up above, without instances.
            unsafe { remove_state(down) };
            Err(e)
        }
    }
}

impl Drop for HotplugRegistration {
    fn drop(&mut self) {
        let (down, dead) = (DOWN_STATE.xchg(-1, Relaxed), DEAD_STATE.xchg(-1, Relaxed));
        // SAFETY: This registration set both up (the only one: `register_hotplug`); whoever added
        // instances removed them before the registration could go (`unwatch`).
        unsafe {
            remove_state(dead);
            remove_state(down);
        }
    }
}

/// Adds a controller's instances of the two states: their callbacks run from now on, until
/// [`unwatch`]. `EINVAL` while the states are not registered.
///
/// # Safety
///
/// The nodes are valid, not instances of any state, and stay valid until [`unwatch`]; the
/// callbacks can handle them as soon as this begins. A registration exists until [`unwatch`].
pub(crate) unsafe fn watch(
    down_node: *mut bindings::hlist_node,
    dead_node: *mut bindings::hlist_node,
) -> Result {
    let (down, dead) = (DOWN_STATE.load(Acquire), DEAD_STATE.load(Acquire));
    if down < 0 || dead < 0 {
        return Err(EINVAL);
    }
    let (down, dead) = (down as bindings::cpuhp_state, dead as bindings::cpuhp_state);
    // SAFETY: Both states are registered; the nodes are the caller's promise.
    to_result(unsafe { bindings::__cpuhp_state_add_instance(down, down_node, false) })?;
    // SAFETY: As above.
    let added = to_result(unsafe { bindings::__cpuhp_state_add_instance(dead, dead_node, false) });
    if added.is_err() {
        // SAFETY: Added above.
        unsafe { bindings::__cpuhp_state_remove_instance(down, down_node, false) };
    }
    added
}

/// Removes the instances [`watch`] added; when this returns, none of their callbacks runs.
///
/// # Safety
///
/// [`watch`] succeeded for these nodes, and they were not removed since.
pub(crate) unsafe fn unwatch(
    down_node: *mut bindings::hlist_node,
    dead_node: *mut bindings::hlist_node,
) {
    let (down, dead) = (DOWN_STATE.load(Acquire), DEAD_STATE.load(Acquire));
    // SAFETY: The states are registered while instances exist (the caller's promise), and
    // the nodes are instances of them.
    unsafe {
        bindings::__cpuhp_state_remove_instance(dead as bindings::cpuhp_state, dead_node, false);
        bindings::__cpuhp_state_remove_instance(down as bindings::cpuhp_state, down_node, false);
    }
}
