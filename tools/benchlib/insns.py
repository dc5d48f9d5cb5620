"""What the guest costs the host per I/O, counted exactly (tools/bench --insns).

QEMU's instruction counter (tools/insncount) writes one file per measured run, a line per
translation block that ran: "PC INSNS EXECUTIONS" and the block's instructions of each kind TCG
runs through helpers (LOCKED FENCES TSC PAUSES MSR PIO INDIRECT). A block is attributed to the
symbol it starts in: the guest kernel's from its System.map, the NVMe modules' from the
"NVA-BENCH-KSYM" lines bench-run prints whenever they were loaded anew. "The driver" is the module
of the configuration (nvme for stock, nvme_adaptive for ours) plus, for ours, the Rust kernel
crate and C helpers it runs in vmlinux (symbols "_R..." and "rust_helper_..."): no other Rust code
runs in the guest.

QEMU's trace (TRACE_EVENTS, recorded beside the console log) adds what leaves translated code for
QEMU's device models: every MMIO and port access by region, PCI config space accesses, and the
controller's MSI-X messages. The guest's console is a serial port, whose writes are in the same
trace: the run markers bench-run prints split it into runs.
"""

import bisect
import os
import re

# Guest user space lies below this address, the kernel above.
KERNEL_START = 0xFFFF800000000000

# The functions of the driver kept per sample, by instructions per I/O.
TOP_FUNCTIONS = 15

# The instruction kinds of the counter files, in their column order after EXECUTIONS.
KINDS = ("locked", "fences", "tsc", "pauses", "msr", "pio_insns", "indirect")

# The QEMU trace events --insns records.
TRACE_EVENTS = ("memory_region_ops_read", "memory_region_ops_write", "pci_nvme_irq_msix", "pci_cfg_read",
                "pci_cfg_write")

# Device model accesses by where they go: QEMU's memory region names.
REGIONS = (
    ("nvme", ("nvme", "nvme-bar0")),
    ("msix", ("msix-table", "msix-pba")),
    ("apic", ("apic", "apic-msi")),
    ("console", ("serial",)),
)

# What a sample gains.
FIELDS = ("insns_per_io", "kernel_insns_per_io", "driver_insns_per_io", "driver_functions", "blocks_per_io",
          "driver_blocks_per_io", "distinct_blocks", "driver_distinct_blocks") + tuple(
              "%s_per_io" % k for k in KINDS) + ("nvme_reads_per_io", "nvme_writes_per_io", "msix_per_io",
                                                 "apic_per_io", "other_mmio_per_io", "cfg_per_io",
                                                 "msix_messages_per_io")


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
        found = self.locate(pc)
        return (found[0], found[1]) if found else ("?", None)

    def locate(self, pc):
        """(symbol, module, the symbol's address) of the symbol pc lies in, None below the
        first."""
        i = bisect.bisect_right(self.addresses, pc) - 1
        if i < 0:
            return None
        address, name, module = self.table[i]
        return name, module, address


def read_counts(lines):
    """[(pc, instructions, executions, {kind: instructions of that kind})] of a counter file (files
    without the kinds count none)."""
    out = []
    for n, line in enumerate(lines, 1):
        parts = line.split()
        if len(parts) not in (3, 3 + len(KINDS)):
            raise Error("line %d: expected 'PC INSNS EXECUTIONS %s', got %r"
                        % (n, " ".join(k.upper() for k in KINDS), line.strip()))
        try:
            kinds = dict(zip(KINDS, (int(p) for p in parts[3:])))
            out.append((int(parts[0], 16), int(parts[1]), int(parts[2]), kinds))
        except ValueError as e:
            raise Error("line %d: %s" % (n, e)) from e
    return out


# A vCPU's access ("cpu -1" is a device's own write, e.g. an MSI message to the APIC: counted as
# the message).
TRACE_ACCESS = re.compile(r"memory_region_ops_(read|write) cpu (-?\d+) mr \S+ addr (0x[0-9a-f]+)"
                          r" value (0x[0-9a-f]+) size \d+ name '([^']*)'")
TRACE_OTHER = re.compile(r"\b(pci_nvme_irq_msix|pci_cfg_read|pci_cfg_write)\b")
MARKER = re.compile(r"NVA-INSN-(BEGIN|END) (\S+)")


def trace_runs(lines):
    """{run name: {counter: events}} of a QEMU trace, split by the run markers the guest wrote to
    its serial console. Counters: "<region> read", "<region> write", "pci_cfg_read",
    "pci_cfg_write", "pci_nvme_irq_msix"."""
    runs, current, console = {}, None, []
    for line in lines:
        m = TRACE_ACCESS.search(line)
        if m:
            kind, cpu, addr, value, name = m.groups()
            if cpu == "-1":
                continue
            if name == "serial" and kind == "write" and int(addr, 16) & 7 == 0:  # THR, at 0x3f8
                c = chr(int(value, 16) & 0xFF)
                if c != "\n":
                    console.append(c)
                    continue
                marker = MARKER.search("".join(console))
                console = []
                if marker:
                    current = {} if marker.group(1) == "BEGIN" else None
                    if current is not None:
                        runs[marker.group(2)] = current
                continue
            if current is not None:
                key = "%s %s" % (name, kind)
                current[key] = current.get(key, 0) + 1
            continue
        m = TRACE_OTHER.search(line)
        if m and current is not None:
            current[m.group(1)] = current.get(m.group(1), 0) + 1
    return runs


def device_figures(events, ios):
    """Per I/O: the controller's BAR reads and writes, MSI-X table and APIC accesses, any other
    MMIO or port access (the console's left out), config space accesses and MSI-X messages."""
    def region(name):
        for label, names in REGIONS:
            if name in names:
                return label
        return "other"

    out = {"nvme_reads_per_io": 0.0, "nvme_writes_per_io": 0.0, "msix_per_io": 0.0, "apic_per_io": 0.0,
           "other_mmio_per_io": 0.0, "cfg_per_io": 0.0, "msix_messages_per_io": 0.0}
    for key, n in events.items():
        if key == "pci_nvme_irq_msix":
            out["msix_messages_per_io"] += n / ios
        elif key.startswith("pci_cfg_"):
            out["cfg_per_io"] += n / ios
        else:
            name, kind = key.rsplit(" ", 1)
            label = region(name)
            if label == "nvme":
                out["nvme_%ss_per_io" % kind] += n / ios
            elif label != "console":
                out["%s_per_io" % ("other_mmio" if label == "other" else label)] += n / ios
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
    that ran the most; blocks executed (all, the driver's) and distinct blocks that ran; the
    instructions of each helper kind."""
    if ios <= 0:
        raise Error("no I/O to divide by")
    transport = driver_module(driver)
    total = kernel = in_driver = blocks = driver_blocks = distinct = driver_distinct = 0
    kinds = dict.fromkeys(KINDS, 0)
    functions = {}
    for pc, insns, executions, block_kinds in counts:
        n = insns * executions
        total += n
        blocks += executions
        distinct += 1
        for k, v in block_kinds.items():
            kinds[k] += v * executions
        if pc < KERNEL_START:
            continue
        kernel += n
        name, module = symbols.lookup(pc)
        if is_driver(name, module, transport):
            in_driver += n
            driver_blocks += executions
            driver_distinct += 1
            functions[short_name(name)] = functions.get(short_name(name), 0) + n
    top = sorted(functions.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    out = {
        "insns_per_io": total / ios,
        "kernel_insns_per_io": kernel / ios,
        "driver_insns_per_io": in_driver / ios,
        "driver_functions": {name: n / ios for name, n in top},
        "blocks_per_io": blocks / ios,
        "driver_blocks_per_io": driver_blocks / ios,
        "distinct_blocks": distinct,
        "driver_distinct_blocks": driver_distinct,
    }
    out.update(("%s_per_io" % k, v / ios) for k, v in kinds.items())
    return out


def add_to_samples(samples, counts_dir, system_map, trace=None):
    """Adds the instruction figures to every sample whose run has a counter file, in log order
    (the module symbols of a sample hold until a later one lists them again), and the device
    model's figures from the QEMU trace at `trace`, if there is one. Returns the number of
    samples without a counter file."""
    with open(system_map) as f:
        kernel = kernel_symbols(f)
    runs = {}
    if trace and os.path.exists(trace):
        with open(trace, errors="replace") as f:
            runs = trace_runs(f)
    symbols, missing = None, 0
    for s in samples:
        if s.get("_ksyms"):
            symbols = Symbols(kernel, module_symbols(s["_ksyms"]))
        name = "cell%s" % s.get("cell")
        path = os.path.join(counts_dir, name)
        if s.get("cell") is None or not os.path.exists(path):
            missing += 1
            continue
        if symbols is None:
            raise Error("cell %s: no module symbols listed before it" % s["cell"])
        with open(path) as f:
            s.update(figures(read_counts(f), symbols, s["driver"], s["ios"]))
        if name in runs:
            s.update(device_figures(runs[name], s["ios"]))
    return missing
