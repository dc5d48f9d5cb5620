// SPDX-License-Identifier: GPL-2.0

//! Module parameters, validated when the module loads and when written at runtime through
//! `/sys/module/nvme_adaptive/parameters/`.
//!
//! The `module!` macro's parameters are load-time only and unchecked, so each parameter here is
//! a hand-made `kernel_param` (what `module_param_cb()` emits in C) whose `set` rejects a value
//! outside its range with a message naming the parameter and the range. Values live in atomics
//! and are read afresh at each use, so runtime writes take effect at each queue's next
//! decision.

use kernel::ffi::{c_char, c_int};
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

use crate::policy::{self, ParamSpec, Params, PARAM_SPECS};

/// Driver parameters beyond the polling policy's, in [`ALL`] after the policy's.
pub(crate) mod driver {
    use crate::policy::{param, ParamSpec};

    pub(crate) const IO_QUEUE_DEPTH: usize = param::COUNT;
    pub(crate) const POLL_QUEUES: usize = param::COUNT + 1;
    pub(crate) const IO_TIMEOUT: usize = param::COUNT + 2;
    pub(crate) const COUNT: usize = 3;

    pub(crate) const SPECS: [ParamSpec; COUNT] = [
        ParamSpec {
            name: "io_queue_depth",
            unit: "entries",
            default: 1024,
            min: 2,
            // Tags must fit the 12 bits of a command identifier.
            max: crate::cmd::command_id::MAX_DEPTH - 1,
            description: "I/O queue depth, at most what the controller supports (load time)",
        },
        ParamSpec {
            name: "poll_queues",
            unit: "queues",
            default: 0,
            min: 0,
            max: 64,
            description: "queues without interrupts for io_uring polled I/O (load time)",
        },
        ParamSpec {
            name: "io_timeout",
            unit: "s",
            default: 30,
            min: 1,
            max: 3600,
            description: "time before a command is declared lost and the controller reset",
        },
    ];
}

const COUNT: usize = policy::param::COUNT + driver::COUNT;

const fn spec(index: usize) -> &'static ParamSpec {
    if index < policy::param::COUNT {
        &PARAM_SPECS[index]
    } else {
        &driver::SPECS[index - policy::param::COUNT]
    }
}

/// Parameters that shape what probe allocates are read-only at runtime.
const fn writable(index: usize) -> bool {
    index != driver::IO_QUEUE_DEPTH && index != driver::POLL_QUEUES
}

/// The current values, each the `arg` of its `kernel_param` (read by `param_get_uint`).
static VALUES: [Atomic<u32>; COUNT] = {
    let mut v = [const { Atomic::new(0) }; COUNT];
    let mut i = 0;
    while i < COUNT {
        v[i] = Atomic::new(spec(i).default);
        i += 1;
    }
    v
};

/// The current value of parameter `index` (0 for an index that names no parameter).
pub(crate) fn get(index: usize) -> u32 {
    VALUES.get(index).map_or(0, |v| v.load(Relaxed))
}

/// The polling policy's parameters, as they are now.
pub(crate) fn policy() -> Params {
    let mut raw = [0; policy::param::COUNT];
    for (i, r) in raw.iter_mut().enumerate() {
        *r = get(i);
    }
    Params::from_raw(raw)
}

/// `kernel_param_ops.set`: parse, check the range, store.
///
/// # Safety
///
/// Called by the module loader or sysfs with a NUL-terminated `val` and one of our `PARAMS`.
unsafe extern "C" fn set(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: `kp` is one of `PARAMS`, whose `arg` points into `VALUES`.
    let arg = unsafe { (*kp).__bindgen_anon_1.arg }
        .cast::<Atomic<u32>>()
        .cast_const();
    let Some(index) = VALUES.iter().position(|v| core::ptr::eq(v, arg)) else {
        return EINVAL.to_errno();
    };
    let spec = spec(index);
    let mut value = 0u32;
    // SAFETY: `val` is a NUL-terminated string (caller's promise).
    let parsed = !val.is_null() && unsafe { bindings::kstrtouint(val, 0, &mut value) } == 0;
    if !parsed || !spec.accepts(value) {
        let text = if val.is_null() {
            c""
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_char_ptr(val) }
        };
        pr_err!(
            "invalid {}={:?}: must be {} to {} ({})\n",
            spec.name,
            text,
            spec.min,
            spec.max,
            spec.unit
        );
        return EINVAL.to_errno();
    }
    VALUES[index].store(value, Relaxed);
    0
}

struct ParamTable {
    _entries: [bindings::kernel_param; COUNT],
}

// SAFETY: the table is only read (by the module loader and sysfs); the values it points to are
// atomics.
unsafe impl Sync for ParamTable {}

struct Ops(bindings::kernel_param_ops);

// SAFETY: never written; holds only function pointers.
unsafe impl Sync for Ops {}

static OPS: Ops = Ops(bindings::kernel_param_ops {
    flags: 0,
    set: Some(set),
    get: Some(bindings::param_get_uint),
    free: None,
});

/// A NUL-terminated copy of `s`, padded with NULs.
const fn c_name<const N: usize>(prefix: &str, s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let (p, b) = (prefix.as_bytes(), s.as_bytes());
    let mut i = 0;
    while i < p.len() {
        out[i] = p[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

const NAME_LEN: usize = 48;

/// Parameter names: bare for a loadable module, "nvme_adaptive.<name>" when built in.
static NAMES: [[u8; NAME_LEN]; COUNT] = {
    let prefix = if cfg!(MODULE) { "" } else { "nvme_adaptive." };
    let mut n = [[0u8; NAME_LEN]; COUNT];
    let mut i = 0;
    while i < COUNT {
        n[i] = c_name(prefix, spec(i).name);
        i += 1;
    }
    n
};

/// The parameters, in the section the module loader reads (as `module_param_cb()` does).
#[link_section = "__param"]
#[used(compiler)]
static PARAMS: ParamTable = {
    let mut t = [bindings::kernel_param {
        name: core::ptr::null(),
        mod_: core::ptr::null_mut(),
        ops: &OPS.0,
        perm: 0,
        level: -1,
        flags: 0,
        __bindgen_anon_1: bindings::kernel_param__bindgen_ty_1 {
            arg: core::ptr::null_mut(),
        },
    }; COUNT];
    let mut i = 0;
    while i < COUNT {
        t[i].name = NAMES[i].as_ptr();
        #[cfg(MODULE)]
        {
            t[i].mod_ = (&raw const bindings::__this_module).cast_mut();
        }
        t[i].perm = if writable(i) { 0o644 } else { 0o444 };
        t[i].__bindgen_anon_1.arg = (&raw const VALUES[i]).cast_mut().cast();
        i += 1;
    }
    ParamTable { _entries: t }
};

/// `modinfo` lines ("parm=name:description" and "parmtype=name:uint") for each parameter.
const MODINFO_LEN: usize = 200;

const fn push(out: &mut [u8; MODINFO_LEN], mut at: usize, s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    // Leave the last byte NUL whatever happens.
    while i < b.len() && at < MODINFO_LEN - 1 {
        out[at] = b[i];
        at += 1;
        i += 1;
    }
    at
}

const fn push_u32(out: &mut [u8; MODINFO_LEN], at: usize, v: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = v;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut at = at;
    while n > 0 && at < MODINFO_LEN - 1 {
        n -= 1;
        out[at] = digits[n];
        at += 1;
    }
    at
}

const fn modinfo_parm(index: usize) -> [u8; MODINFO_LEN] {
    let s = spec(index);
    let mut out = [0u8; MODINFO_LEN];
    let mut at = push(
        &mut out,
        0,
        if cfg!(MODULE) {
            "parm="
        } else {
            "nvme_adaptive.parm="
        },
    );
    at = push(&mut out, at, s.name);
    at = push(&mut out, at, ":");
    at = push(&mut out, at, s.description);
    at = push(&mut out, at, " (");
    at = push(&mut out, at, s.unit);
    at = push(&mut out, at, ", default ");
    at = push_u32(&mut out, at, s.default);
    at = push(&mut out, at, ", ");
    at = push_u32(&mut out, at, s.min);
    at = push(&mut out, at, " to ");
    at = push_u32(&mut out, at, s.max);
    push(&mut out, at, ")");
    out
}

const fn modinfo_type(index: usize) -> [u8; MODINFO_LEN] {
    let mut out = [0u8; MODINFO_LEN];
    let at = push(
        &mut out,
        0,
        if cfg!(MODULE) {
            "parmtype="
        } else {
            "nvme_adaptive.parmtype="
        },
    );
    let at = push(&mut out, at, spec(index).name);
    push(&mut out, at, ":uint");
    out
}

#[link_section = ".modinfo"]
#[used(compiler)]
static MODINFO: [[u8; MODINFO_LEN]; 2 * COUNT] = {
    let mut m = [[0u8; MODINFO_LEN]; 2 * COUNT];
    let mut i = 0;
    while i < COUNT {
        m[2 * i] = modinfo_type(i);
        m[2 * i + 1] = modinfo_parm(i);
        i += 1;
    }
    m
};
