// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts the guest instructions each translation block executes, for
 * `tools/bench --insns`: a per-I/O cost that does not depend on the host's timing.
 *
 * Arguments: log=PATH (the guest's console log, as QEMU's serial port writes it) and dir=DIR.
 * A console line "NVA-INSN-BEGIN NAME" takes a baseline of every block's count; the line
 * "NVA-INSN-END NAME" writes DIR/NAME with one line per block that ran in between:
 *
 *   PC INSNS EXECUTIONS LOCKED FENCES TSC PAUSES MSR PIO INDIRECT
 *
 * PC in hex is the block's first guest virtual address, INSNS its instruction count; the rest
 * count the block's instructions that TCG cannot translate into plain host code, by kind: locked
 * read-modify-writes (a LOCK prefix, or XCHG with memory), fences (MFENCE, LFENCE, SFENCE),
 * RDTSC/RDTSCP, PAUSE, RDMSR/WRMSR (the x2APIC's EOI and timer among them), port I/O, and the
 * indirect jumps, calls and returns after which TCG looks the next block up.
 * The console is followed by a thread of the plugin, so the guest waits a moment after each
 * marker (see tools/guest/bench-run).
 *
 * Built by tools/vm in the toolchain root. The few declarations of QEMU's plugin API it uses are
 * below (API version 4, QEMU 9.0 and later, include/qemu/qemu-plugin.h), so that no QEMU
 * development package is needed.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* QEMU's plugin API, the part used here. */
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_scoreboard;
typedef struct {
	struct qemu_plugin_scoreboard *score;
	size_t offset;
} qemu_plugin_u64;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
							qemu_plugin_u64 entry, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
uint64_t qemu_plugin_u64_sum(qemu_plugin_u64 entry);

__attribute__((visibility("default"))) int qemu_plugin_version = 4;

/* Kinds of instructions TCG runs through helpers or ends a block's fast path on. */
enum kind { LOCKED, FENCE, TSC, PAUSE, MSR, PIO, INDIRECT, KINDS };

/* One translation block, by first address and length (a block may be translated again). */
struct block {
	uint64_t pc;
	uint64_t insns;
	uint32_t kinds[KINDS];
	struct qemu_plugin_scoreboard *executions;
	uint64_t baseline;
};

/* The kind of one x86-64 instruction, KINDS for any other. */
static enum kind classify(const uint8_t *c, size_t n)
{
	bool lock = false, rep = false;
	size_t i = 0;
	uint8_t op;

	for (; i < n; i++) {
		uint8_t p = c[i];

		if (p == 0xf0)
			lock = true;
		else if (p == 0xf3)
			rep = true;
		else if (p != 0xf2 && p != 0x2e && p != 0x36 && p != 0x3e && p != 0x26 && p != 0x64 &&
			 p != 0x65 && p != 0x66 && p != 0x67)
			break;
	}
	if (i < n && (c[i] & 0xf0) == 0x40)
		i++; /* REX */
	if (i >= n)
		return KINDS;
	if (lock)
		return LOCKED;
	op = c[i];
	if (op == 0x0f && i + 1 < n) {
		uint8_t op2 = c[i + 1];
		uint8_t modrm = i + 2 < n ? c[i + 2] : 0;

		if (op2 == 0x31 || (op2 == 0x01 && modrm == 0xf9))
			return TSC;
		if (op2 == 0xae && modrm >= 0xe8)
			return FENCE;
		if (op2 == 0x30 || op2 == 0x32)
			return MSR;
		return KINDS;
	}
	if ((op == 0x86 || op == 0x87) && i + 1 < n && (c[i + 1] & 0xc0) != 0xc0)
		return LOCKED;
	if (op == 0x90 && rep)
		return PAUSE;
	if ((op >= 0xe4 && op <= 0xe7) || (op >= 0xec && op <= 0xef) || (op >= 0x6c && op <= 0x6f))
		return PIO;
	if (op == 0xc3 || op == 0xc2 || op == 0xcf)
		return INDIRECT;
	if (op == 0xff && i + 1 < n) {
		uint8_t reg = (c[i + 1] >> 3) & 7;

		if (reg == 2 || reg == 4)
			return INDIRECT;
	}
	return KINDS;
}

/* Open addressing; a kernel plus a benchmark's user space translate well under a million blocks. */
#define SLOTS (1u << 22)
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_path[4096], out_dir[4096];

static uint64_t executions(const struct block *b)
{
	return qemu_plugin_u64_sum((qemu_plugin_u64){ b->executions, 0 });
}

/* The block's slot, claimed if new; NULL when the table is full. Called with the lock held. */
static struct block *find(uint64_t pc, uint64_t insns)
{
	uint64_t h = (pc * 0x9E3779B97F4A7C15ull) ^ insns;

	for (uint32_t i = 0; i < SLOTS; i++) {
		struct block *b = &blocks[(h + i) & (SLOTS - 1)];

		if (!b->executions) {
			b->pc = pc;
			b->insns = insns;
			b->executions = qemu_plugin_scoreboard_new(sizeof(uint64_t));
			return b;
		}
		if (b->pc == pc && b->insns == insns)
			return b;
	}
	return NULL;
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	uint32_t kinds[KINDS] = { 0 };
	struct block *b;

	for (size_t i = 0; i < n; i++) {
		uint8_t code[16];
		size_t len = qemu_plugin_insn_data(qemu_plugin_tb_get_insn(tb, i), code, sizeof(code));
		enum kind k = classify(code, len);

		if (k != KINDS)
			kinds[k]++;
	}
	pthread_mutex_lock(&lock);
	b = find(qemu_plugin_tb_vaddr(tb), n);
	if (b)
		memcpy(b->kinds, kinds, sizeof(kinds));
	pthread_mutex_unlock(&lock);
	if (b)
		qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
								  (qemu_plugin_u64){ b->executions, 0 }, 1);
	else
		fprintf(stderr, "insncount: block table full, %#" PRIx64 " not counted\n", qemu_plugin_tb_vaddr(tb));
}

static void begin(void)
{
	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < SLOTS; i++)
		if (blocks[i].executions)
			blocks[i].baseline = executions(&blocks[i]);
	pthread_mutex_unlock(&lock);
}

static void end(const char *name)
{
	char path[8192], tmp[8300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	snprintf(tmp, sizeof(tmp), "%s.part", path);
	f = fopen(tmp, "w");
	if (!f) {
		perror(tmp);
		return;
	}
	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < SLOTS; i++) {
		const struct block *b = &blocks[i];
		uint64_t n;

		if (!b->executions)
			continue;
		n = executions(b) - b->baseline;
		if (!n)
			continue;
		fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64, b->pc, b->insns, n);
		for (int k = 0; k < KINDS; k++)
			fprintf(f, " %" PRIu32, b->kinds[k]);
		fputc('\n', f);
	}
	pthread_mutex_unlock(&lock);
	/* Complete or absent: tools/bench never reads half a file. */
	if (fclose(f) == 0)
		rename(tmp, path);
}

/* Follows the console log for markers; a marker is a whole line of its own. */
static void *follow(void *unused)
{
	char line[4096], name[256];
	size_t have = 0;
	FILE *f;

	while (!(f = fopen(log_path, "r")))
		usleep(100000);
	for (;;) {
		if (!fgets(line + have, sizeof(line) - have, f)) {
			clearerr(f);
			usleep(2000);
			continue;
		}
		have = strlen(line);
		if (have < sizeof(line) - 1 && line[have - 1] != '\n')
			continue; /* the rest of the line is still to come */
		have = 0;
		if (sscanf(line, "NVA-INSN-BEGIN %255s", name) == 1)
			begin();
		else if (sscanf(line, "NVA-INSN-END %255s", name) == 1 && !strchr(name, '/'))
			end(name);
	}
	return NULL;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
								int argc, char **argv)
{
	pthread_t t;

	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "log=", 4))
			snprintf(log_path, sizeof(log_path), "%s", argv[i] + 4);
		else if (!strncmp(argv[i], "dir=", 4))
			snprintf(out_dir, sizeof(out_dir), "%s", argv[i] + 4);
		else {
			fprintf(stderr, "insncount: unknown argument %s (log=PATH dir=DIR)\n", argv[i]);
			return -1;
		}
	}
	if (!log_path[0] || !out_dir[0]) {
		fprintf(stderr, "insncount: needs log=PATH and dir=DIR\n");
		return -1;
	}
	blocks = calloc(SLOTS, sizeof(*blocks));
	if (!blocks || pthread_create(&t, NULL, follow, NULL))
		return -1;
	pthread_detach(t);
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	return 0;
}
