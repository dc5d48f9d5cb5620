import os
import tempfile
import unittest

from benchlib import insns, parse, report
from tests import fixtures

SYSTEM_MAP = [
    "ffffffff81000000 T _stext",
    "ffffffff81001000 T blk_mq_end_request",
    "ffffffff81002000 T rust_helper_writel",
    "ffffffff81003000 t _RNvMs8_NtNtNtCsb5MLIFMWygY_6kernel4sync6atomic8internalINtB5_10AtomicReprlE6as_ptrBb_",
    "ffffffff81004000 D some_data",
]
KALLSYMS = [
    "ffffffffc0001000 t nvme_irq\t[nvme]",
    "ffffffffc0002000 t nvme_queue_rq\t[nvme]",
    "ffffffffc0010000 t _RNvMs1_NtCsSxfcwJOAdp_18nvme_adaptive_main5queueNtB5_5Queue4reap\t[nvme_adaptive]",
    "ffffffffc0020000 t nvme_setup_cmd\t[nvme_core]",
    "ffffffffc0030000 d some_table\t[nvme_adaptive]",
]
# One run: user space, the block layer, a Rust helper, and each module (PC INSNS EXECUTIONS).
COUNTS = [
    "401000 10 100",              # user: 1000
    "ffffffff81001010 20 10",     # blk_mq_end_request: 200
    "ffffffff81002000 3 10",      # rust_helper_writel: 30
    "ffffffff81003004 5 10",      # AtomicRepr::as_ptr: 50
    "ffffffffc0001000 7 10",      # nvme_irq: 70
    "ffffffffc0010020 40 10",     # Queue::reap: 400
    "ffffffffc0020000 9 10",      # nvme_setup_cmd: 90
]


def symbols():
    return insns.Symbols(insns.kernel_symbols(SYSTEM_MAP), insns.module_symbols(KALLSYMS))


class Parsing(unittest.TestCase):
    def test_only_text_symbols(self):
        self.assertNotIn("some_data", [n for _, n in insns.kernel_symbols(SYSTEM_MAP)])
        self.assertNotIn("some_table", [n for _, n, _ in insns.module_symbols(KALLSYMS)])
        self.assertIn((0xFFFFFFFFC0001000, "nvme_irq", "nvme"), insns.module_symbols(KALLSYMS))

    def test_lookup_finds_the_enclosing_symbol(self):
        s = symbols()
        self.assertEqual(s.lookup(0xFFFFFFFF81001FFF), ("blk_mq_end_request", None))
        self.assertEqual(s.lookup(0xFFFFFFFFC0002004), ("nvme_queue_rq", "nvme"))
        self.assertEqual(s.lookup(0x1000), ("?", None))

    def test_count_lines_with_and_without_kinds(self):
        self.assertEqual(insns.read_counts(["ffffffffc0001000 7 10"]), [(0xFFFFFFFFC0001000, 7, 10, {})])
        (_, _, _, kinds), = insns.read_counts(["ffffffffc0001000 7 10 1 0 2 0 0 0 3"])
        self.assertEqual(kinds, {"locked": 1, "fences": 0, "tsc": 2, "pauses": 0, "msr": 0, "pio_insns": 0,
                                 "indirect": 3})
        with self.assertRaises(insns.Error):
            insns.read_counts(["ffffffffc0001000 7 10 1 2"])

    def test_malformed_count_line_is_an_error(self):
        with self.assertRaises(insns.Error):
            insns.read_counts(["ffffffffc0001000 7"])
        with self.assertRaises(insns.Error):
            insns.read_counts(["zz 7 10"])

    def test_rust_names_lose_crate_and_mangling(self):
        self.assertEqual(insns.short_name("_RNvMs1_NtCsSxfcwJOAdp_18nvme_adaptive_main5queueNtB5_5Queue4reap"),
                         "queue::Queue::reap")
        self.assertEqual(insns.short_name(SYSTEM_MAP[3].split()[2]), "sync::atomic::internal::AtomicRepr::as_ptr")
        self.assertEqual(insns.short_name("nvme_irq"), "nvme_irq")


class Figures(unittest.TestCase):
    def test_stock_driver_is_the_nvme_module(self):
        f = insns.figures(insns.read_counts(COUNTS), symbols(), "stock", 10)
        self.assertEqual(f["insns_per_io"], 184.0)
        self.assertEqual(f["kernel_insns_per_io"], 84.0)
        self.assertEqual(f["driver_insns_per_io"], 7.0)
        self.assertEqual(f["driver_functions"], {"nvme_irq": 7.0})

    def test_our_driver_includes_its_rust_code_in_vmlinux(self):
        f = insns.figures(insns.read_counts(COUNTS), symbols(), "adaptive-off", 10)
        self.assertEqual(f["driver_insns_per_io"], 48.0)
        self.assertEqual(f["driver_functions"]["queue::Queue::reap"], 40.0)
        self.assertEqual(f["driver_functions"]["rust_helper_writel"], 3.0)
        self.assertNotIn("nvme_setup_cmd", f["driver_functions"], "nvme-core is not the transport")

    def test_blocks_and_kinds_count_each_execution(self):
        counts = insns.read_counts(COUNTS[:4] + ["ffffffffc0010020 40 10 1 0 0 0 0 0 2"])
        f = insns.figures(counts, symbols(), "adaptive-off", 10)
        self.assertEqual(f["blocks_per_io"], 14.0)
        self.assertEqual(f["driver_blocks_per_io"], 3.0, "Queue::reap and the two Rust helpers")
        self.assertEqual((f["distinct_blocks"], f["driver_distinct_blocks"]), (5, 3))
        self.assertEqual((f["locked_per_io"], f["indirect_per_io"], f["tsc_per_io"]), (1.0, 2.0, 0.0))

    def test_no_io_is_an_error(self):
        with self.assertRaises(insns.Error):
            insns.figures([], symbols(), "stock", 0)


def console_line(text, cpu=0):
    """A guest's console line as QEMU traces it: one serial write per character."""
    return ["1@1.0:memory_region_ops_write cpu %d mr 0x1 addr 0x3f8 value 0x%x size 1 name 'serial'"
            % (cpu, ord(c)) for c in text + "\n"]


def access(kind, name, addr=0x1000, cpu=1):
    return "1@1.0:memory_region_ops_%s cpu %d mr 0x1 addr 0x%x value 0x1 size 4 name '%s'" % (kind, cpu, addr, name)


class Trace(unittest.TestCase):
    def test_runs_split_by_console_markers(self):
        lines = ([access("write", "nvme")] + console_line("NVA-INSN-BEGIN cell1")
                 + [access("write", "nvme"), access("read", "nvme"), access("write", "apic-msi"),
                    access("write", "apic-msi", 0xFEE00000, cpu=-1), access("read", "serial", 0x3FD),
                    "1@1.0:pci_nvme_irq_msix raising MSI-X IRQ vector 1", "1@1.0:pci_cfg_read virtio 0:0 @0x0"]
                 + console_line("NVA-INSN-END cell1") + [access("write", "nvme")])
        runs = insns.trace_runs(lines)
        self.assertEqual(list(runs), ["cell1"])
        self.assertEqual(runs["cell1"], {"nvme write": 1, "nvme read": 1, "apic-msi write": 1, "serial read": 1,
                                         "pci_nvme_irq_msix": 1, "pci_cfg_read": 1})
        f = insns.device_figures(runs["cell1"], 2)
        self.assertEqual((f["nvme_writes_per_io"], f["nvme_reads_per_io"], f["apic_per_io"]), (0.5, 0.5, 0.5))
        self.assertEqual((f["msix_messages_per_io"], f["cfg_per_io"], f["other_mmio_per_io"]), (0.5, 0.5, 0.0))


class Samples(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.map = os.path.join(self.dir.name, "System.map")
        with open(self.map, "w") as f:
            f.write("\n".join(SYSTEM_MAP) + "\n")
        self.counts = os.path.join(self.dir.name, "insns")
        os.mkdir(self.counts)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, cell):
        with open(os.path.join(self.counts, "cell%d" % cell), "w") as f:
            f.write("\n".join(COUNTS) + "\n")

    def test_module_symbols_carry_over_to_later_runs(self):
        self.write(1)
        self.write(2)
        samples = [{"cell": 1, "driver": "stock", "ios": 10, "_ksyms": KALLSYMS},
                   {"cell": 2, "driver": "adaptive-off", "ios": 10, "_ksyms": []},
                   {"cell": 3, "driver": "stock", "ios": 10, "_ksyms": []}]
        missing = insns.add_to_samples(samples, self.counts, self.map)
        self.assertEqual(missing, 1, "cell 3 has no counter file")
        self.assertEqual(samples[0]["driver_insns_per_io"], 7.0)
        self.assertEqual(samples[1]["driver_insns_per_io"], 48.0)
        self.assertNotIn("insns_per_io", samples[2])

    def test_counts_without_symbols_are_an_error(self):
        self.write(1)
        with self.assertRaises(insns.Error):
            insns.add_to_samples([{"cell": 1, "driver": "stock", "ios": 10, "_ksyms": []}], self.counts, self.map)


class Log(unittest.TestCase):
    def test_cell_index_and_symbols_reach_the_sample(self):
        text = fixtures.bench_output([("stock", 32, 1000, 500, 100, 0, 0, 50)])
        text = text.replace("NVA-BENCH-BEGIN ", "NVA-BENCH-BEGIN cell=7 ")
        text = text.replace("NVA-BENCH-END", "NVA-BENCH-KSYM %s\nNVA-BENCH-END" % KALLSYMS[0])
        samples, _, errors = parse.parse_log(text)
        self.assertEqual(errors, [])
        self.assertEqual(samples[0]["cell"], 7)
        self.assertEqual(samples[0]["_ksyms"], [KALLSYMS[0]])

    def test_report_shows_instructions_and_functions(self):
        samples = []
        for driver, driver_insns in (("stock", 400.0), ("adaptive-off", 900.0)):
            for rep, total in ((1, 9000.0), (2, 9090.0)):
                samples.append({"driver": driver, "workload": "randread", "qd": 32, "cpus": "1", "ctrls": 1, "rep": rep,
                                "rate": 0, "iops": 1000.0, "insns_per_io": total, "kernel_insns_per_io": 5000.0,
                                "driver_insns_per_io": driver_insns, "driver_functions": {"reap": driver_insns / 2}})
        md = report.markdown(report.summarize(samples), samples)
        self.assertIn("| randread QD 32, 1 job on CPU 1, 1 ctrl | nvme_adaptive, adaptive off | 9045 (9000–9090) | 1.0% | 1.00 "
                      "| 5000 | 1.00 | 900 (900–900) | 0.0% | 2.25 |", md)
        self.assertIn("| nvme_adaptive, adaptive off | `reap` | 450.0 |", md)


if __name__ == "__main__":
    unittest.main()
