// SPDX-License-Identifier: GPL-2.0

//! Range-checked module parameters, settable at load and (if writable) at runtime through
//! `/sys/module/nvme_adaptive/parameters/`.
//!
//! The `module!` macro's parameters are load-time only and unchecked, so each parameter here is
//! a hand-made `kernel_param` (what `module_param_cb()` emits in C) whose `set` rejects a value
//! outside its range with a message naming the parameter and the range. Values live in atomics
//! and are read afresh at each use.
//!
//! `params.rs` declares the statics, built by the const functions here: [`Param`]s, their
//! [`Names`], the [`Table`] the module loader reads and the [`ModInfo`] lines `modinfo` shows.
//!
//! A parameter whose largest value depends on the machine (`poll_queues`: the CPU count) has a
//! [`Bound`], evaluated at each write in place of its spec's `max`.
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h)

use kernel::ffi::{
    c_char,
    c_int, //
};
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed,
        Release, //
    }, //
};

use crate::policy::ParamSpec;

/// A largest value known only at runtime: `max()` at each write, named `name` in `modinfo`.
#[derive(Clone, Copy)]
pub(crate) struct Bound {
    pub(crate) max: fn() -> u32,
    pub(crate) name: &'static str,
}

/// One parameter: its value (first, where `param_get_uint` reads it), its spec and the bound
/// that replaces the spec's `max`, if any.
#[repr(C)]
pub(crate) struct Param {
    value: Atomic<u32>,
    spec: ParamSpec,
    bound: Option<Bound>,
}

impl Param {
    pub(crate) const fn new(spec: ParamSpec, bound: Option<Bound>) -> Self {
        Self {
            value: Atomic::new(spec.default),
            spec,
            bound,
        }
    }

    /// Parameters with the defaults of `specs` and the `bounds`.
    pub(crate) const fn all<const N: usize>(
        specs: &[ParamSpec; N],
        bounds: &[Option<Bound>; N],
    ) -> [Param; N] {
        const UNSET: ParamSpec = ParamSpec {
            name: "",
            unit: "",
            default: 0,
            min: 0,
            max: 0,
            description: "",
        };
        let mut out = [const { Param::new(UNSET, None) }; N];
        let mut i = 0;
        while i < N {
            out[i] = Param::new(specs[i], bounds[i]);
            i += 1;
        }
        out
    }

    pub(crate) fn get(&self) -> u32 {
        self.value.load(Relaxed)
    }

    /// The largest value accepted now.
    fn max(&self) -> u32 {
        match self.bound {
            Some(b) => (b.max)(),
            None => self.spec.max,
        }
    }
}

/// Counts accepted writes to any parameter, so that readers can keep a copy and reread the
/// values only after a write.
static WRITES: Atomic<u32> = Atomic::new(0);

/// How many writes were accepted so far (wrapping).
pub(crate) fn writes() -> u32 {
    WRITES.load(Relaxed)
}

/// `kernel_param_ops.set`: parse, check the range, store.
///
/// # Safety
///
/// Called by the module loader or sysfs with a NUL-terminated `val` and one of the entries
/// of a [`Table`], whose `arg` points to a [`Param`].
unsafe extern "C" fn set(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: `kp` is an entry of a `Table`, whose `arg` points to a static `Param`.
    let param = unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<Param>() };
    let spec = ParamSpec {
        max: param.max(),
        ..param.spec
    };
    let mut value = 0u32;
    // SAFETY: `val` is a NUL-terminated string (the caller's promise).
    let parsed = !val.is_null() && unsafe { bindings::kstrtouint(val, 0, &mut value) } == 0;
    if !parsed || !spec.accepts(value) {
        let text = if val.is_null() {
            c""
        } else {
            // SAFETY: As above.
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
    param.value.store(value, Relaxed);
    WRITES.store(WRITES.load(Relaxed).wrapping_add(1), Release);
    0
}

struct Ops(bindings::kernel_param_ops);

// SAFETY: Never written; holds only function pointers.
unsafe impl Sync for Ops {}

static OPS: Ops = Ops(bindings::kernel_param_ops {
    flags: 0,
    set: Some(set),
    get: Some(bindings::param_get_uint),
    free: None,
});

const NAME_LEN: usize = 48;

/// A NUL-terminated copy of `prefix` then `s`, padded with NULs.
const fn c_name(prefix: &str, s: &str) -> [u8; NAME_LEN] {
    let mut out = [0u8; NAME_LEN];
    let (p, b) = (prefix.as_bytes(), s.as_bytes());
    let mut i = 0;
    while i < p.len() {
        out[i] = p[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() && i + j < NAME_LEN - 1 {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// Prefix of parameter names and modinfo keys: none for a loadable module.
const fn prefix() -> &'static str {
    if cfg!(MODULE) {
        ""
    } else {
        "nvme_adaptive."
    }
}

/// The parameters' C names.
pub(crate) struct Names<const N: usize>([[u8; NAME_LEN]; N]);

impl<const N: usize> Names<N> {
    pub(crate) const fn new(specs: &[ParamSpec; N]) -> Self {
        let mut n = [[0u8; NAME_LEN]; N];
        let mut i = 0;
        while i < N {
            n[i] = c_name(prefix(), specs[i].name);
            i += 1;
        }
        Self(n)
    }
}

/// The `kernel_param` entries, for the `__param` section.
pub(crate) struct Table<const N: usize>([bindings::kernel_param; N]);

// SAFETY: The table is only read (by the module loader and sysfs); the values it points to are
// atomics.
unsafe impl<const N: usize> Sync for Table<N> {}

impl<const N: usize> Table<N> {
    /// Entries for `params`, named by `names`; `writable[i]` makes parameter `i` writable at
    /// runtime (0644), else it is read-only (0444).
    pub(crate) const fn new(
        params: &'static [Param; N],
        names: &'static Names<N>,
        writable: [bool; N],
    ) -> Self {
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
        }; N];
        let mut i = 0;
        while i < N {
            t[i].name = names.0[i].as_ptr();
            #[cfg(MODULE)]
            {
                t[i].mod_ = (&raw const bindings::__this_module).cast_mut();
            }
            t[i].perm = if writable[i] { 0o644 } else { 0o444 };
            t[i].__bindgen_anon_1.arg = (&raw const params[i]).cast_mut().cast();
            i += 1;
        }
        Self(t)
    }
}

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

/// `modinfo` lines for each parameter, for the `.modinfo` section.
pub(crate) struct ModInfo<const N: usize>([[u8; MODINFO_LEN]; N]);

impl<const N: usize> ModInfo<N> {
    /// `parmtype=name:uint` lines.
    pub(crate) const fn types(specs: &[ParamSpec; N]) -> Self {
        let mut m = [[0u8; MODINFO_LEN]; N];
        let mut i = 0;
        while i < N {
            let mut at = push(&mut m[i], 0, prefix());
            at = push(&mut m[i], at, "parmtype=");
            at = push(&mut m[i], at, specs[i].name);
            push(&mut m[i], at, ":uint");
            i += 1;
        }
        Self(m)
    }

    /// `parm=name:description (unit, default D, MIN to MAX)` lines; MAX is the bound's name for
    /// a parameter with a [`Bound`].
    pub(crate) const fn descriptions(specs: &[ParamSpec; N], bounds: &[Option<Bound>; N]) -> Self {
        let mut m = [[0u8; MODINFO_LEN]; N];
        let mut i = 0;
        while i < N {
            let s = &specs[i];
            let out = &mut m[i];
            let mut at = push(out, 0, prefix());
            at = push(out, at, "parm=");
            at = push(out, at, s.name);
            at = push(out, at, ":");
            at = push(out, at, s.description);
            at = push(out, at, " (");
            at = push(out, at, s.unit);
            at = push(out, at, ", default ");
            at = push_u32(out, at, s.default);
            at = push(out, at, ", ");
            at = push_u32(out, at, s.min);
            at = push(out, at, " to ");
            at = match bounds[i] {
                Some(b) => push(out, at, b.name),
                None => push_u32(out, at, s.max),
            };
            push(out, at, ")");
            i += 1;
        }
        Self(m)
    }
}
