/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * idle.bpf.c - which CPUs are idle, and claiming one (used by push.bpf.c)
 *
 * push.bpf.c asks four questions, each answered by claiming a CPU (taking
 * it out of the idle set so that no other waker picks it too):
 *
 *   idle_claim_core(cpu)          cpu, if its whole SMT core is idle
 *   idle_claim_cpu(cpu)           cpu, if it is idle
 *   idle_pick_llc(p, llc, core)   an idle core (or CPU) of an LLC
 *   idle_pick_node(p, node, llc)  an idle CPU of a node outside one LLC
 *
 * Two implementations behind one switch (rodata sparse_idle, set by
 * --sparse-idle / --no-sparse-idle):
 *
 * Built-in (default): the kernel's sched_ext idle bitmaps, per CPU and per
 * whole core, kept by the kernel on every idle transition;
 * scx_bpf_pick_idle_cpu() on "LLC (or node) AND p->cpus_ptr" finds and
 * claims (atomic test-and-clear) a CPU, one of a whole idle core first
 * when SMT is on; with --no-idle-core (no_idle_core) any idle CPU.
 *
 * Sparse (Sistare's 2018 sparse mask): our own idle flags, packed the way
 * his sparsemask packs them: the flags of up to IDLE_LINE_CPUS (8) CPUs of
 * ONE LLC share the first word of a 64-byte line (idle_lines[]); the rest
 * of the line is unused. Why: a search of an LLC reads one line per 8
 * CPUs (a zero word skips 8 CPUs at once), and a CPU going idle or busy
 * writes a line shared with at most 7 CPUs of its own LLC, never with
 * another LLC's. The layout (idle_rules.h) comes from the agent
 * (topology.rs): each LLC owns the lines llc_line_off[l] ..
 * llc_line_off[l + 1], bit b of its line k is the CPU at position
 * 8k + b of its llc_cpus list, cpu_idle_slot[cpu] = line * 8 + bit, and
 * node_lines lists the lines of each node's LLCs. At most one line per
 * CPU, so MAX_CPUS lines (1024; nothing assumes 64 CPUs).
 *
 * Flags are written by ops.update_idle, which the kernel calls on every
 * transition between a task and the idle task (atomic OR / AND of the
 * CPU's bit, only when it changes: 8 CPUs write the word). The agent
 * attaches ops.update_idle only with --sparse-idle: the built-in
 * implementation needs no callback.
 * SCX_OPS_KEEP_BUILTIN_IDLE keeps the kernel's bitmaps up to date as well:
 * numa.bpf.c, cache.bpf.c, pull.bpf.c and the heartbeat timer still use
 * them. A core is idle when the flags of the CPU and of all its siblings
 * (cpu_sibs) are set. A search walks the LLC's (node's) lines from a
 * per-waker rotating line and bit, so that concurrent wakers spread out,
 * reads each line's word once, and for each set bit skips CPUs outside
 * p->cpus_ptr. Like the built-in pick it takes a CPU of a whole idle core
 * before any other idle CPU, unless --no-idle-core. Loops are bounded by
 * the line count and by 8.
 *
 * Claiming a CPU: a plain read of its word first (no line ownership taken
 * when the bit is clear), then an atomic fetch-and-clear of its bit; only
 * the claimer whose fetch returned the bit set wins, so two sparse
 * claimers never win the same CPU. Then the CPU's built-in idle bit is
 * cleared as well (scx_bpf_test_and_clear_cpu_idle), so the built-in users
 * above do not pick it again. If that bit was already clear the claim
 * fails: another path (pull kick, NUMA placement, cache aggregation) took
 * the CPU through the built-in mask, and two tasks would otherwise land on
 * it.
 *
 * Races accepted (none strands a task: a task inserted into an idle CPU's
 * local DSQ always wakes it; at worst two tasks share one CPU for a while
 * or an idle CPU is not found by push, where pull still reaches it):
 * - a claimed CPU that never runs the claimer's task (its built-in claim
 *   lost, or the task was moved away) returns to idle without a
 *   transition the kernel reports (idle to idle: no ops.update_idle), so
 *   its bit stays 0 while it is idle. The heartbeat timer (heartbeat.bpf.c)
 *   calls idle_resync() for each CPU every iwq period: built-in bit set,
 *   flag 0 and local DSQ empty -> flag = 1 (stat idle_resync). Also fills
 *   the flags right after load, before any transition.
 * - idle_resync() racing a claimer between its clear and its built-in
 *   clear may set a just-claimed flag back to 1: the next claimer's clear
 *   wins it but its built-in clear fails (stat idle_claim_lost), and the
 *   flag stays 0. Cost: one wasted atomic.
 * - a CPU that just went idle may have its flag set before the kernel
 *   sets its built-in bit: a claimer in that window loses (claim_lost) and
 *   the CPU stays unseen by push until the next resync (one iwq period).
 * - a claim from the built-in side (pull, NUMA) leaves the flag at 1 until
 *   the CPU runs: a sparse claimer then fails its built-in clear (flag
 *   goes to 0, which is right: the CPU is about to run).
 * Search results are snapshots, as with the built-in mask: a CPU seen idle
 * may be claimed or go busy before the claim, which then simply fails.
 *
 * Default: built-in. With SCX_OPS_KEEP_BUILTIN_IDLE, which the other users
 * of the built-in masks need, the kernel's shared bitmap lines are written
 * on every transition anyway, so the sparse flags add writes rather than
 * replace them; the switch stays off unless it measures cheaper
 * (docs/decisions.md, "Idle tracking" and "Sparse idle lines").
 * Stats: STAT_IDLE_RESYNC, STAT_IDLE_CLAIM_LOST.
 */

#include "locality.bpf.h"
#include "idle.bpf.h"
#include "idle_rules.h"

const volatile bool sparse_idle;

/* the layout of the lines, from the agent (topology.rs, idle_lines()) */
const volatile u32 nr_idle_lines;
const volatile u32 llc_line_off[MAX_LLCS + 1];
const volatile u16 line_llc[MAX_CPUS];
const volatile u32 cpu_idle_slot[MAX_CPUS];	/* ~0: not a possible CPU */
const volatile u32 node_line_off[MAX_NODES + 1];
const volatile u16 node_lines[MAX_CPUS];

/*
 * One line: bit b of @bits is 1 while the CPU of slot line * 8 + b is idle
 * and unclaimed. The rest of the 64 bytes is padding, so no other line's
 * flags share it.
 */
struct idle_line {
	u64 bits;
} __attribute__((aligned(64)));

struct idle_line idle_lines[MAX_CPUS];

/* per-waker start offset of the walks (per-CPU: no shared line) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} idle_rotor SEC(".maps");

/* ---- sparse implementation ---- */

/* @cpu's slot, or false for an id no line holds */
static __always_inline bool cpu_slot(u32 cpu, u32 *line, u64 *bit)
{
	u32 slot = cpu_idle_slot[cpu & CPU_MASK];

	if (idle_rule_slot_line(slot) >= nr_idle_lines)
		return false;
	*line = idle_rule_slot_line(slot) & CPU_MASK;
	*bit = idle_rule_slot_bit(slot);
	return true;
}

static __always_inline u64 line_bits(u32 line)
{
	return READ_ONCE(idle_lines[line & CPU_MASK].bits);
}

static __always_inline bool slot_idle(u32 cpu)
{
	u32 line;
	u64 bit;

	return cpu_slot(cpu, &line, &bit) && (line_bits(line) & bit);
}

static __always_inline bool sparse_claim(s32 cpu)
{
	u32 c = cpu & CPU_MASK, line;
	u64 bit;

	if (!cpu_slot(c, &line, &bit) || !(line_bits(line) & bit) || !cpu_is_online[c])
		return false;
	if (!(__sync_fetch_and_and(&idle_lines[line].bits, ~bit) & bit))
		return false;
	if (!scx_bpf_test_and_clear_cpu_idle(cpu)) {
		stat_inc(STAT_IDLE_CLAIM_LOST);
		return false;
	}
	return true;
}

/* @cpu and all its SMT siblings have their idle flag set */
static __always_inline bool sparse_core_idle(u32 cpu)
{
	u32 c = cpu & CPU_MASK, i, n = cpu_nr_sibs[c];

	if (!slot_idle(c))
		return false;
	for (i = 0; i < MAX_SMT; i++) {
		if (i >= n)
			break;
		if (!slot_idle(cpu_sibs[(c * MAX_SMT + i) & (MAX_CPUS * MAX_SMT - 1)]))
			return false;
	}
	return true;
}

/*
 * Walk lines list[start..end) (the LLC's own lines llc_line_off[start..end)
 * if @is_llc, else node_lines[start..end) of node @node) from a rotating
 * line and bit; claim the first CPU that is idle, allowed for @p, of node
 * @node (node walks) and not in LLC @skip_llc (-1: none), of a whole idle
 * core if @core. Without @core a CPU of a whole idle core still comes
 * first, the first other idle CPU seen being claimed only when the walk
 * found no idle core, as scx_bpf_pick_idle_cpu() does without
 * SCX_PICK_IDLE_CORE; --no-idle-core drops that preference.
 */
static __always_inline s32 sparse_walk(struct task_struct *p, u32 start,
				       u32 end, bool is_llc, u32 node,
				       bool core, s32 skip_llc)
{
	u32 zero = 0, n, first, first_bit, i, *rot;
	bool all = p->nr_cpus_allowed >= (int)nr_cpus;
	bool core_first = core || !no_idle_core;
	s32 spare = -1;

	if (end <= start || end > MAX_CPUS)
		return -1;
	n = end - start;
	rot = bpf_map_lookup_elem(&idle_rotor, &zero);
	first = rot ? *rot : 0;
	if (rot)
		(*rot)++;
	first_bit = first % IDLE_LINE_CPUS;
	first %= n;

	bpf_for(i, 0, n) {
		u32 k = first + i, line, llc, lfirst, lcpu, b;
		u64 bits;

		if (k >= n)
			k -= n;
		k = (start + k) & CPU_MASK;
		line = (is_llc ? k : node_lines[k]) & CPU_MASK;
		bits = line_bits(line);
		if (!bits)
			continue;
		llc = line_llc[line] & LLC_MASK;
		if (skip_llc >= 0 && llc == (u32)skip_llc)
			continue;
		lfirst = llc_line_off[llc];
		lcpu = llc_off[llc];
		for (b = 0; b < IDLE_LINE_CPUS; b++) {
			u32 bit = (first_bit + b) % IDLE_LINE_CPUS, cpu;

			if (!(bits & (1ULL << bit)))
				continue;
			cpu = llc_cpus[idle_rule_line_cpu(lcpu, lfirst, line, bit) & CPU_MASK] & CPU_MASK;
			if (!is_llc && cpu_node[cpu] != node)
				continue;
			if (!all && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
				continue;
			if (core_first && !sparse_core_idle(cpu)) {
				if (!core && spare < 0)
					spare = cpu;
				continue;
			}
			if (sparse_claim(cpu))
				return cpu;
		}
	}
	if (spare >= 0 && sparse_claim(spare))
		return spare;
	return -1;
}

/* ---- built-in implementation ---- */

/*
 * --no-idle-core: claim any idle CPU of @tmp, of a whole idle core or not.
 * scx_bpf_pick_idle_cpu() takes a CPU of a whole idle core first whenever
 * SMT is on, whatever its flags, so without this the switch would leave
 * the preference on; here the idle mask is read and a CPU of it claimed.
 * A CPU claimed by someone else meanwhile is dropped and another tried.
 */
static __always_inline s32 builtin_pick_any(struct bpf_cpumask *tmp)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 tries;
	s32 cpu;

	bpf_cpumask_and(tmp, cast_mask(tmp), idle);
	scx_bpf_put_idle_cpumask(idle);
	bpf_for(tries, 0, 4) {
		cpu = bpf_cpumask_any_distribute(cast_mask(tmp));
		if (!cpu_valid(cpu))
			return -1;
		if (scx_bpf_test_and_clear_cpu_idle(cpu))
			return cpu;
		bpf_cpumask_clear_cpu(cpu, tmp);
	}
	return -1;
}

/* claim an idle CPU (whole core if @core) of @mask AND p->cpus_ptr */
static __always_inline s32 builtin_pick(struct task_struct *p,
					const struct cpumask *mask, bool core)
{
	struct bpf_cpumask *tmp = scratch_mask();

	if (!tmp || !mask)
		return -1;
	bpf_cpumask_and(tmp, mask, p->cpus_ptr);
	if (no_idle_core && !core)
		return builtin_pick_any(tmp);
	return scx_bpf_pick_idle_cpu(cast_mask(tmp), core ? SCX_PICK_IDLE_CORE : 0);
}

/* ---- what push.bpf.c calls ---- */

/* Claim @cpu if it and all its SMT siblings are idle. */
__hidden bool idle_claim_core(s32 cpu)
{
	const struct cpumask *idle_smt;
	bool core_idle;

	if (sparse_idle)
		return sparse_core_idle(cpu) && sparse_claim(cpu);

	idle_smt = scx_bpf_get_idle_smtmask();
	core_idle = bpf_cpumask_test_cpu(cpu, idle_smt);
	scx_bpf_put_idle_cpumask(idle_smt);
	return core_idle && scx_bpf_test_and_clear_cpu_idle(cpu);
}

/* Claim @cpu if it is idle. */
__hidden bool idle_claim_cpu(s32 cpu)
{
	if (sparse_idle)
		return sparse_claim(cpu);
	return scx_bpf_test_and_clear_cpu_idle(cpu);
}

/* Claim an idle CPU of LLC @llc allowed for @p (of a whole idle core if @core), or -1. */
s32 idle_pick_llc(struct task_struct *p __arg_trusted, u32 llc, bool core)
{
	if (llc >= MAX_LLCS)
		return -1;
	if (sparse_idle)
		return sparse_walk(p, llc_line_off[llc], llc_line_off[llc + 1], true, 0,
				   core, -1);
	return builtin_pick(p, llc_cpumask(llc), core);
}

/*
 * Claim an idle CPU of node @node allowed for @p, or -1. The sparse walk
 * skips LLC @skip_llc (already searched); the built-in pick re-checks it,
 * which is harmless.
 */
s32 idle_pick_node(struct task_struct *p __arg_trusted, u32 node, u32 skip_llc)
{
	u32 n = node & NODE_MASK;	/* the bound, kept where the compiler reloads @node */

	if (node >= MAX_NODES)
		return -1;
	if (sparse_idle)
		return sparse_walk(p, node_line_off[n], node_line_off[n + 1], false, node,
				   false, skip_llc);
	return builtin_pick(p, node_cpumask(node), false);
}

/* ---- upkeep ---- */

/* The heartbeat timer saw @cpu idle in the built-in mask (see races above). */
__hidden void idle_resync(u32 cpu, bool builtin_idle, s32 local_queued)
{
	u32 line;
	u64 bit;

	if (!sparse_idle || !builtin_idle || local_queued > 0 ||
	    !cpu_slot(cpu, &line, &bit) || (line_bits(line) & bit))
		return;
	__sync_fetch_and_or(&idle_lines[line].bits, bit);
	stat_inc(STAT_IDLE_RESYNC);
}

/* ops.update_idle: @cpu went idle or busy */
__hidden void idle_update(s32 cpu, bool idle)
{
	u32 line;
	u64 bit;

	if (!sparse_idle || !cpu_valid(cpu) || !cpu_slot(cpu, &line, &bit))
		return;
	/*
	 * Only on a change, so a stable word stays shared with its readers;
	 * atomic, since up to 7 other CPUs write the same word.
	 */
	if (!!(line_bits(line) & bit) == idle)
		return;
	if (idle)
		__sync_fetch_and_or(&idle_lines[line].bits, bit);
	else
		__sync_fetch_and_and(&idle_lines[line].bits, ~bit);
}
