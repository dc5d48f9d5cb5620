"""Guest instructions per I/O from QEMU's instruction counter (tools/insncount, tools/bench --insns).

For each measured run the plugin writes one file, a line "PC INSNS EXECUTIONS" per translation
block that ran (PC in hex). A block is attributed to the symbol it starts in: the guest kernel's
from its System.map, the NVMe modules' from the "NVA-BENCH-KSYM" lines bench-run prints whenever
they were loaded anew. "The driver" is the module of the configuration (nvme for stock,
nvme_adaptive for ours) plus, for ours, the Rust kernel crate and C helpers it runs in vmlinux
(symbols "_R..." and "rust_helper_..."): no other Rust code runs in the guest.
"""

import bisect
import os

# Guest user space lies below this address, the kernel above.
KERNEL_START = 0xFFFF800000000000

# The functions of the driver kept per sample, by instructions per I/O.
TOP_FUNCTIONS = 15

# What a sample gains.
FIELDS = ("insns_per_io", "kernel_insns_per_io", "driver_insns_per_io", "driver_functions")


class Error(Exception):
    pass


def kernel_symbols(lines):
    """[(address, name)] of the text symbols in System.map lines."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "tTwW":
            try:
                out.append((int(parts[0], 16), parts[2]))
            except ValueError:
                continue
    return out


def module_symbols(lines):
    """[(address, name, module)] of the text symbols in /proc/kallsyms lines of modules
    ("ADDRESS TYPE NAME [MODULE]")."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 4 and parts[1] in "tTwW" and parts[3].startswith("[") and parts[3].endswith("]"):
            try:
                out.append((int(parts[0], 16), parts[2], parts[3][1:-1]))
            except ValueError:
                continue
    return out


class Symbols:
    """Address to (symbol, module) for the kernel and the modules listed with it (module None for
    vmlinux)."""

    def __init__(self, kernel, modules):
        table = sorted([(a, n, None) for a, n in kernel] + list(modules))
        self.addresses = [t[0] for t in table]
        self.table = table

    def lookup(self, pc):
        i = bisect.bisect_right(self.addresses, pc) - 1
        if i < 0:
            return "?", None
        return self.table[i][1], self.table[i][2]


def read_counts(lines):
    """[(pc, instructions executed)] of a counter file."""
    out = []
    for n, line in enumerate(lines, 1):
        parts = line.split()
        if len(parts) != 3:
            raise Error("line %d: expected 'PC INSNS EXECUTIONS', got %r" % (n, line.strip()))
        try:
            out.append((int(parts[0], 16), int(parts[1]) * int(parts[2])))
        except ValueError as e:
            raise Error("line %d: %s" % (n, e)) from e
    return out


def short_name(symbol):
    """A Rust symbol (v0 mangling, "_R...") as its path without the crate, e.g.
    "queue::Queue::reap"; other symbols as they are. Only the identifiers are kept: impl and
    generic details are dropped."""
    if not symbol.startswith("_R"):
        return symbol
    idents, i = [], 2
    while i < len(symbol):
        c = symbol[i]
        if c in "sB":
            # A disambiguator or a back reference: base-62 digits up to "_".
            end = symbol.find("_", i)
            i = len(symbol) if end < 0 else end + 1
        elif c.isdigit():
            j = i
            while j < len(symbol) and symbol[j].isdigit():
                j += 1
            n = int(symbol[i:j])
            if j < len(symbol) and symbol[j] == "_":
                j += 1
            idents.append(symbol[j:j + n])
            i = j + n
        else:
            i += 1
    return "::".join(idents[1:]) or symbol


def driver_module(driver):
    """The transport module of a configuration: the stock ones run nvme, the others ours."""
    return "nvme" if driver.startswith("stock") else "nvme_adaptive"


def is_driver(name, module, transport):
    if module is not None:
        return module == transport
    return transport == "nvme_adaptive" and (name.startswith("_R") or name.startswith("rust_helper_"))


def figures(counts, symbols, driver, ios):
    """Per I/O: all guest instructions, the kernel's, the driver's, and the driver's functions
    that ran the most."""
    if ios <= 0:
        raise Error("no I/O to divide by")
    transport = driver_module(driver)
    total = kernel = in_driver = 0
    functions = {}
    for pc, n in counts:
        total += n
        if pc < KERNEL_START:
            continue
        kernel += n
        name, module = symbols.lookup(pc)
        if is_driver(name, module, transport):
            in_driver += n
            functions[short_name(name)] = functions.get(short_name(name), 0) + n
    top = sorted(functions.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    return {
        "insns_per_io": total / ios,
        "kernel_insns_per_io": kernel / ios,
        "driver_insns_per_io": in_driver / ios,
        "driver_functions": {name: n / ios for name, n in top},
    }


def add_to_samples(samples, counts_dir, system_map):
    """Adds the instruction figures to every sample whose run has a counter file, in log order
    (the module symbols of a sample hold until a later one lists them again). Returns the number
    of samples without one."""
    with open(system_map) as f:
        kernel = kernel_symbols(f)
    symbols, missing = None, 0
    for s in samples:
        if s.get("_ksyms"):
            symbols = Symbols(kernel, module_symbols(s["_ksyms"]))
        path = os.path.join(counts_dir, "cell%s" % s.get("cell"))
        if s.get("cell") is None or not os.path.exists(path):
            missing += 1
            continue
        if symbols is None:
            raise Error("cell %s: no module symbols listed before it" % s["cell"])
        with open(path) as f:
            s.update(figures(read_counts(f), symbols, s["driver"], s["ios"]))
    return missing
