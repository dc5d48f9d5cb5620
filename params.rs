// SPDX-License-Identifier: GPL-2.0

//! The module's parameters: the polling policy's (`policy.rs`) and the transport's, all
//! writable at runtime. `io_queue_depth`, `poll_queues` and `write_queues` are read at each
//! controller enable (probe and reset), as `pci.c` reads its own. Each is range-checked at load
//! and at runtime (see `sys/params.rs`).
//!
//! nvme-core's own parameters (`nvme_core.io_timeout`, `admin_timeout`, `max_retries`,
//! `shutdown_timeout`, ...) apply to this transport as to the stock one.

use crate::{
    policy::{
        param,
        ParamSpec,
        Params,
        PARAM_SPECS, //
    },
    sys::nvme,
    sys::params::{
        self,
        Bound,
        ModInfo,
        Names,
        Param,
        Table, //
    }, //
};

/// Bytes per request, an arbitrary bound that keeps PRP lists within five pages (`mapping.rs`),
/// and so the largest `sgl_threshold`.
pub(crate) const MAX_BYTES: u32 = 8 << 20;

/// Indexes of the transport's parameters, after the policy's.
const IO_QUEUE_DEPTH: usize = param::COUNT;
const POLL_QUEUES: usize = param::COUNT + 1;
const SGL_THRESHOLD: usize = param::COUNT + 2;
const USE_THREADED_INTERRUPTS: usize = param::COUNT + 3;
const USE_CMB_SQES: usize = param::COUNT + 4;
const MAX_HOST_MEM_SIZE_MB: usize = param::COUNT + 5;
const WRITE_QUEUES: usize = param::COUNT + 6;
const COUNT: usize = param::COUNT + 7;

const SPECS: [ParamSpec; COUNT] = {
    let mut s = [PARAM_SPECS[0]; COUNT];
    let mut i = 0;
    while i < param::COUNT {
        s[i] = PARAM_SPECS[i];
        i += 1;
    }
    s[IO_QUEUE_DEPTH] = ParamSpec {
        name: "io_queue_depth",
        unit: "entries",
        default: 1024,
        min: 2,
        // Tags must fit the 12 bits of a command identifier.
        max: 4095,
        description: "I/O queue depth, at most what the controller supports (next reset)",
    };
    s[POLL_QUEUES] = ParamSpec {
        name: "poll_queues",
        unit: "queues",
        default: 0,
        min: 0,
        // Replaced by the CPU count (`BOUNDS`).
        max: 0,
        description: "queues without interrupts for io_uring polled I/O (next reset)",
    };
    s[SGL_THRESHOLD] = ParamSpec {
        name: "sgl_threshold",
        unit: "bytes",
        default: 32768,
        min: 0,
        max: MAX_BYTES,
        description: "use SGLs when the average segment is at least this large; 0: never",
    };
    // The stock driver's `int` parameter of this name; any value but 0 or 1 is refused here.
    s[USE_THREADED_INTERRUPTS] = ParamSpec {
        name: "use_threaded_interrupts",
        unit: "0 or 1",
        default: 0,
        min: 0,
        max: 1,
        description: "1: reap completions in the interrupt's thread (load time)",
    };
    // The stock driver's `bool` parameter of this name, as 0 or 1.
    s[USE_CMB_SQES] = ParamSpec {
        name: "use_cmb_sqes",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        description: "use controller's memory buffer for I/O SQes (load time)",
    };
    s[MAX_HOST_MEM_SIZE_MB] = ParamSpec {
        name: "max_host_mem_size_mb",
        unit: "MiB",
        default: 128,
        min: 0,
        max: u32::MAX,
        description: "Maximum Host Memory Buffer (HMB) size per controller (in MiB)",
    };
    s[WRITE_QUEUES] = ParamSpec {
        name: "write_queues",
        unit: "queues",
        default: 0,
        min: 0,
        // Replaced by the CPU count (`BOUNDS`).
        max: 0,
        description: "queues for writes, the others for reads; 0: shared (next reset)",
    };
    s
};

/// Writable at runtime but `use_threaded_interrupts`, `use_cmb_sqes` and
/// `max_host_mem_size_mb` (as `pci.c`'s: 0644 for `io_queue_depth`, `poll_queues` and
/// `write_queues`, whose queue layout takes effect at the next controller reset; 0 for
/// `use_threaded_interrupts`, read when a line is requested, and 0444 for `use_cmb_sqes`, read
/// when a controller's CMB is registered, and `max_host_mem_size_mb`, read when its host memory
/// buffer is allocated).
const WRITABLE: [bool; COUNT] = {
    let mut w = [true; COUNT];
    w[USE_THREADED_INTERRUPTS] = false;
    w[USE_CMB_SQES] = false;
    w[MAX_HOST_MEM_SIZE_MB] = false;
    w
};

/// `poll_queues` and `write_queues` go up to the CPU count (`io_queue_count_set`:
/// `blk_mq_num_possible_queues`).
const BOUNDS: [Option<Bound>; COUNT] = {
    let cpus = Some(Bound {
        max: nvme::possible_queues,
        name: "the CPU count",
    });
    let mut b = [None; COUNT];
    b[POLL_QUEUES] = cpus;
    b[WRITE_QUEUES] = cpus;
    b
};

static PARAMS: [Param; COUNT] = Param::all(&SPECS, &BOUNDS);
static NAMES: Names<COUNT> = Names::new(&SPECS);

#[link_section = "__param"]
#[used(compiler)]
static TABLE: Table<COUNT> = Table::new(&PARAMS, &NAMES, WRITABLE);

#[link_section = ".modinfo"]
#[used(compiler)]
static TYPES: ModInfo<COUNT> = ModInfo::types(&SPECS);

#[link_section = ".modinfo"]
#[used(compiler)]
static DESCRIPTIONS: ModInfo<COUNT> = ModInfo::descriptions(&SPECS, &BOUNDS);

/// Whether adaptive polling is on.
pub(crate) fn adaptive() -> bool {
    PARAMS[param::ADAPTIVE].get() != 0
}

/// The polling policy's parameters, as they are now.
fn policy() -> Params {
    let mut raw = [0; param::COUNT];
    for (r, p) in raw.iter_mut().zip(PARAMS.iter()) {
        *r = p.get();
    }
    Params::from_raw(raw)
}

/// A queue's copy of the policy's parameters: read at each decision, it costs one load unless
/// a parameter was written since.
pub(crate) struct PolicyParams {
    writes: u32,
    params: Params,
}

impl PolicyParams {
    /// The defaults, as they are until a first write (the module loader's included).
    pub(crate) const fn new() -> Self {
        let mut raw = [0; param::COUNT];
        let mut i = 0;
        while i < param::COUNT {
            raw[i] = PARAM_SPECS[i].default;
            i += 1;
        }
        Self {
            writes: 0,
            params: Params::from_raw(raw),
        }
    }

    /// The parameters now.
    #[inline]
    pub(crate) fn current(&mut self) -> &Params {
        let writes = params::writes();
        if writes != self.writes {
            self.refresh(writes);
        }
        &self.params
    }

    #[cold]
    fn refresh(&mut self, writes: u32) {
        self.writes = writes;
        self.params = policy();
    }
}

pub(crate) fn io_queue_depth() -> u32 {
    PARAMS[IO_QUEUE_DEPTH].get()
}

pub(crate) fn poll_queues() -> u32 {
    PARAMS[POLL_QUEUES].get()
}

/// Queues (and vectors) for writes; reads get their own set (`HCTX_TYPE_READ`). 0: one set.
pub(crate) fn write_queues() -> u32 {
    PARAMS[WRITE_QUEUES].get()
}

pub(crate) fn sgl_threshold() -> u32 {
    PARAMS[SGL_THRESHOLD].get()
}

/// Whether interrupts are handled in a thread (`use_threaded_interrupts`).
pub(crate) fn use_threaded_interrupts() -> bool {
    PARAMS[USE_THREADED_INTERRUPTS].get() != 0
}

/// Whether I/O submission queues go in a controller's memory buffer where it has one
/// (`use_cmb_sqes`).
pub(crate) fn use_cmb_sqes() -> bool {
    PARAMS[USE_CMB_SQES].get() != 0
}

/// The largest host memory buffer a controller gets, in MiB (`max_host_mem_size_mb`).
pub(crate) fn max_host_mem_size_mb() -> u32 {
    PARAMS[MAX_HOST_MEM_SIZE_MB].get()
}
