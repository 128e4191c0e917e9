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
 * claims (atomic test-and-clear) a CPU.
 *
 * Sparse (Sistare's 2018 layout): our own idle flag per CPU,
 * each in its own 64-byte line (idle_slots[]), so that CPUs going idle or
 * busy never write a line another CPU's flag lives in. Written by
 * ops.update_idle, which the kernel calls on every transition between a
 * task and the idle task (SCX_OPS_KEEP_BUILTIN_IDLE keeps the kernel's
 * bitmaps up to date as well: numa.bpf.c, cache.bpf.c, pull.bpf.c and
 * the heartbeat timer still use them). A core is idle when the flags of the
 * CPU and of all its siblings (cpu_sibs) are set. A search walks the
 * LLC's (node's) CPU list, llc_cpus / node_cpus from the agent, starting
 * at a per-waker rotating offset so that concurrent wakers spread out, and
 * skips CPUs outside p->cpus_ptr. Loops are bounded by the list length
 * (<= MAX_CPUS, 1024; nothing assumes 64).
 *
 * Claiming a sparse slot: a plain read first (no line ownership taken for
 * a busy CPU), then compare-and-swap 1 -> 0, so two sparse claimers never
 * win the same CPU; then the CPU's built-in idle bit is cleared as well
 * (scx_bpf_test_and_clear_cpu_idle), so the built-in users above do not
 * pick it again. If that bit was already clear the claim fails: another
 * path (pull kick, NUMA placement, cache aggregation) took the CPU through
 * the built-in mask, and two tasks would otherwise land on it.
 *
 * Races accepted (none strands a task: a task inserted into an idle CPU's
 * local DSQ always wakes it; at worst two tasks share one CPU for a while
 * or an idle CPU is not found by push, where pull still reaches it):
 * - a claimed CPU that never runs the claimer's task (its built-in claim
 *   lost, or the task was moved away) returns to idle without a
 *   transition the kernel reports (idle to idle: no ops.update_idle), so
 *   its slot stays 0 while it is idle. The heartbeat timer (heartbeat.bpf.c)
 *   calls idle_resync() for each CPU every iwq period: built-in bit set,
 *   slot 0 and local DSQ empty -> slot = 1 (stat idle_resync). Also fills
 *   the slots right after load, before any transition.
 * - idle_resync() racing a claimer between its CAS and its built-in clear
 *   may set a just-claimed slot back to 1: the next claimer's CAS wins it
 *   but its built-in clear fails (stat idle_claim_lost), which sets it to
 *   0 again. Cost: one wasted CAS.
 * - a CPU that just went idle may have its slot set before the kernel
 *   sets its built-in bit: a claimer in that window loses (claim_lost) and
 *   the CPU stays unseen by push until the next resync (one iwq period).
 * - a claim from the built-in side (pull, NUMA) leaves the slot at 1 until
 *   the CPU runs: a sparse claimer then fails its built-in clear (slot
 *   goes to 0, which is right: the CPU is about to run).
 * Search results are snapshots, as with the built-in mask: a CPU seen idle
 * may be claimed or go busy before the CAS, which then simply fails.
 *
 * Default: built-in. The sparse search measured no cheaper per
 * select_cpu and made update_idle dearer; and with
 * SCX_OPS_KEEP_BUILTIN_IDLE, which the other users of the built-in masks
 * need, the kernel's shared bitmap lines are written on every transition
 * anyway, so the contention Sistare removed is still there
 * (docs/decisions.md, "Idle tracking").
 * Stats: STAT_IDLE_RESYNC, STAT_IDLE_CLAIM_LOST.
 */

#include "locality.bpf.h"
#include "idle.bpf.h"

const volatile bool sparse_idle;

/* One CPU's idle flag, alone in its cache line. 1: idle and unclaimed. */
struct idle_slot {
	u32 idle;
} __attribute__((aligned(64)));

struct idle_slot idle_slots[MAX_CPUS];

/* per-waker start offset of the list walks (per-CPU: no shared line) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} idle_rotor SEC(".maps");

/* ---- sparse implementation ---- */

static __always_inline bool slot_idle(u32 cpu)
{
	return READ_ONCE(idle_slots[cpu & CPU_MASK].idle);
}

static __always_inline bool sparse_claim(s32 cpu)
{
	u32 c = cpu & CPU_MASK;

	if (!slot_idle(c) || !cpu_is_online[c])
		return false;
	if (__sync_val_compare_and_swap(&idle_slots[c].idle, 1, 0) != 1)
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
 * Walk list[start..end) (llc_cpus if @is_llc, else node_cpus) from a
 * rotating offset; claim the first CPU that is idle (whole core idle if
 * @core), allowed for @p and not in LLC @skip_llc (-1: none).
 */
static __always_inline s32 sparse_walk(struct task_struct *p, u32 start,
				       u32 end, bool is_llc, bool core,
				       s32 skip_llc)
{
	u32 zero = 0, n, first, i, *rot;
	bool all = p->nr_cpus_allowed >= (int)nr_cpus;

	if (end <= start || end > MAX_CPUS)
		return -1;
	n = end - start;
	rot = bpf_map_lookup_elem(&idle_rotor, &zero);
	first = rot ? (*rot)++ % n : 0;

	bpf_for(i, 0, n) {
		u32 k = first + i, cpu;

		if (k >= n)
			k -= n;
		k = (start + k) & CPU_MASK;
		cpu = (is_llc ? llc_cpus[k] : node_cpus[k]) & CPU_MASK;
		if (!slot_idle(cpu))
			continue;
		if (skip_llc >= 0 && cpu_llc[cpu] == (u32)skip_llc)
			continue;
		if (core && !sparse_core_idle(cpu))
			continue;
		if (!all && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		if (sparse_claim(cpu))
			return cpu;
	}
	return -1;
}

/* ---- built-in implementation ---- */

/* claim an idle CPU (whole core if @core) of @mask AND p->cpus_ptr */
static __always_inline s32 builtin_pick(struct task_struct *p,
					const struct cpumask *mask, bool core)
{
	struct bpf_cpumask *tmp = scratch_mask();

	if (!tmp || !mask)
		return -1;
	bpf_cpumask_and(tmp, mask, p->cpus_ptr);
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
__hidden s32 idle_pick_llc(struct task_struct *p __arg_trusted, u32 llc, bool core)
{
	if (llc >= MAX_LLCS)
		return -1;
	if (sparse_idle)
		return sparse_walk(p, llc_off[llc], llc_off[llc + 1], true, core, -1);
	return builtin_pick(p, llc_cpumask(llc), core);
}

/*
 * Claim an idle CPU of node @node allowed for @p, or -1. The sparse walk
 * skips LLC @skip_llc (already searched); the built-in pick re-checks it,
 * which is harmless.
 */
__hidden s32 idle_pick_node(struct task_struct *p __arg_trusted, u32 node, u32 skip_llc)
{
	if (node >= MAX_NODES)
		return -1;
	if (sparse_idle)
		return sparse_walk(p, node_off[node], node_off[node + 1], false,
				   false, skip_llc);
	return builtin_pick(p, node_cpumask(node), false);
}

/* ---- upkeep ---- */

/* The heartbeat timer saw @cpu idle in the built-in mask (see races above). */
__hidden void idle_resync(u32 cpu, bool builtin_idle, s32 local_queued)
{
	u32 c = cpu & CPU_MASK;

	if (!sparse_idle || !builtin_idle || local_queued > 0 || slot_idle(c))
		return;
	WRITE_ONCE(idle_slots[c].idle, 1);
	stat_inc(STAT_IDLE_RESYNC);
}

/* ops.update_idle: @cpu went idle or busy */
__hidden void idle_update(s32 cpu, bool idle)
{
	u32 c = cpu & CPU_MASK;

	if (!sparse_idle || !cpu_valid(cpu))
		return;
	/*
	 * Only on a change, so a stable flag's line stays shared with its
	 * readers; claimers only ever CAS it 1 -> 0.
	 */
	if (slot_idle(c) != idle)
		WRITE_ONCE(idle_slots[c].idle, idle);
}
