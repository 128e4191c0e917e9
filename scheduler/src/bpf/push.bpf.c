/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * push.bpf.c - the idle-CPU search of a waking task (ops.select_cpu)
 *
 * Idea: look for an idle CPU nearest to the task's previous CPU, trying the
 * levels in order of how much cache they share with it (push_pick_cpu(),
 * the rule idle_search):
 *
 *   prev_idle      prev CPU, if idle                (warm L1/L2)
 *   llc_idle_core  an idle core in prev's LLC       (warm LLC, no SMT sharing)
 *   llc_idle_cpu   an idle CPU in prev's LLC        (warm LLC)
 *   node_idle_cpu  an idle CPU in prev's NUMA node  (local memory)
 *   push_across    an idle CPU in another node, if numa_push_across()
 *                  (numa.bpf.c) allows it: always with --numa-balance=off
 *                  (unless --no-push-cross-node), else only out of an
 *                  overloaded node
 *   (cache-aware, cache.bpf.c: node_idle_cpu and push_across are skipped
 *    while prev's LLC is the process's preferred LLC and its gate "out"
 *    forbids leaving: cache_keep_busy)
 *   stay_on_prev   none: ops.enqueue queues the task there and, if prev
 *                  is busy, wakes an idle CPU nearby to pull it (pull.bpf.c)
 *
 * and three rules for synchronous wake-ups, which place.bpf.c tries first:
 * wake_follow, following a waker on another node (push_follow_waker(), if
 * the NUMA policy allows it), waker_cpu, the waker's own CPU
 * (push_waker_cpu()), and wake_affine inside the node
 * (push_wake_affine()). place.bpf.c holds the whole order of a wake-up.
 *
 * Every rule is restricted to p->cpus_ptr. A CPU found idle is claimed
 * (taken out of the idle set atomically) by the helper that finds it, so
 * two wakers cannot pick the same one, and the task is inserted straight
 * into its local DSQ. The idle questions go through idle.bpf.c
 * (idle_claim_core, idle_claim_cpu, idle_pick_llc, idle_pick_node), which
 * answers them from one of two idle trackings.
 *
 * Origin: Steve Sistare's select_idle_sibling rework (2018) kept a sparse
 * per-LLC idle mask (few CPUs per cache line) so that CPUs going idle and
 * busy do not fight over one line, and searched it by LLC. idle.bpf.c has
 * both: the kernel's built-in sched_ext idle bitmaps (default) and our own
 * sparse flags, up to 8 CPUs of one LLC per 64-byte line, walked along
 * the LLC's / node's lines (--sparse-idle). Built-in is the default: the sparse search
 * measured no cheaper, and the built-in bitmaps must stay on
 * (SCX_OPS_KEEP_BUILTIN_IDLE) for the other users of the idle masks, so
 * the kernel writes their shared lines on every idle transition anyway
 * (docs/decisions.md, "Idle tracking").
 *
 * prev_idle is the kernel's and Sistare's order (--idle-search=prev-first):
 * prev whenever it is idle. --idle-search=core-first takes prev at prev_idle
 * only if its whole core is idle, so an idle core elsewhere in the LLC
 * comes before a prev whose SMT sibling is busy (no SMT sharing, but a
 * move away from prev's L1/L2); without SMT the two are the same.
 *
 * Knobs: idle_prev_first (--idle-search); no_idle_core skips the idle-core
 * tests of prev_idle and llc_idle_core, and idle.bpf.c's picks then take
 * any idle CPU (A/B switch for the idle-core preference);
 * push_cross_wake / push_cross_fork (--push-cross-node) allow push_across for
 * a wake-up / a new task, in every NUMA mode, push_cross_unpaired for a
 * wake-up that is not between partners (@paired); wake_affine
 * (--no-wake-affine).
 * Stats: STAT_PICK_{PREV, PREV_CORE, LLC_CORE, LLC_CPU, NODE_CPU, OTHER, NONE},
 * STAT_CACHE_KEEP_WAKE; following: STAT_XNODE_WAKE_FOLLOW,
 * STAT_NUMA_FOLLOW_REFUSED; wake affine: STAT_PICK_AFFINE, STAT_AFFINE_WIDE.
 */
#include "locality.bpf.h"
#include "push.bpf.h"
#include "push_rules.h"
#include "idle.bpf.h"
#include "cache.bpf.h"
#include "numa_place.bpf.h"

/*
 * Who wakes whom. The waker (current) counts how often the task it wakes
 * differs from the last one it woke (wakee_flips, halved every second; the
 * kernel keeps the same counter for wake_wide()), at synchronous wake-ups
 * only (place.bpf.c): one from interrupt context is not the interrupted
 * task's doing. A pair wakes one partner
 * over and over and flips rarely; a task feeding many flips at every
 * wake-up. Read by wake_follow (numa_few_partners), wake_affine and
 * waker_cpu (push_wake_wide); kept only while one of them is on.
 */
__hidden bool push_tracks_wakees(void)
{
	return (wake_follow && numa_mode != NUMA_OFF && nr_nodes >= 2) ||
	       (wake_affine && nr_llcs > nr_nodes) || sync_to_waker_pairs;
}

/* the waker, context @w (may be NULL), is waking @p */
__hidden void push_record_wakee(struct task_struct *p __arg_trusted, struct task_ctx *w)
{
	u64 now;

	if (!w)
		return;
	now = scx_bpf_now();
	if (time_delta(now, w->flips_decay_at) > 1000000000ULL) {
		w->wakee_flips >>= 1;
		w->flips_decay_at = now;
	}
	if (w->last_wakee != (u32)p->pid) {
		w->last_wakee = p->pid;
		w->wakee_flips++;
	}
}

/* wake_wide() for the wakee @t and the waker @w (either may be NULL) in @llc */
static __always_inline bool push_wake_wide(struct task_ctx *t, struct task_ctx *w,
					   u32 llc)
{
	return push_rule_wake_wide(w ? w->wakee_flips : 0, t ? t->wakee_flips : 0,
				   llc_nr_cpus(llc));
}

/*
 * The rule wake_affine: a claimed idle CPU of the waker's LLC for @p, woken
 * synchronously by the task on @waker_cpu, when that LLC is not prev's but
 * lies in prev's node; else -1.
 *
 * Why: after a synchronous wake-up the waker is about to sleep or is
 * waiting for the wakee, and the data the wakee needs is in the waker's
 * LLC. The kernel moves the wakee there (wake_affine() makes the waker's
 * CPU the target, select_idle_sibling() searches the target's LLC); a
 * search around prev alone keeps a pipe's two ends in different LLCs of a
 * node as long as both LLCs have an idle CPU (docs/decisions.md, "Wake
 * affine"). The rest of the way is cache.bpf.c's.
 *
 * Not taken: when the waker's CPU has tasks queued (it is not about to be
 * free: the kernel's sync test, nr_running == 1); when the wake-up is wide
 * (push_wake_wide); when cache-aware keeps @p in prev's LLC, its preferred
 * one, rather than move to the waker's (gate "out", cache_keep). Only an idle CPU is taken, never the
 * waker's own, so a full LLC sends the search back to prev (idle_search).
 * Across nodes the NUMA policy decides instead (wake_follow).
 * --no-wake-affine turns this rule off.
 */
__hidden s32 push_wake_affine(struct task_struct *p __arg_trusted, struct task_ctx *tctx,
			      struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu)
{
	u32 wl, pl;
	s32 cpu;

	if (!wake_affine || !cpu_valid(prev_cpu) || !cpu_valid(waker_cpu))
		return -1;
	wl = cpu_llc[waker_cpu & CPU_MASK];
	pl = cpu_llc[prev_cpu & CPU_MASK];
	if (wl == pl || cpu_node[waker_cpu & CPU_MASK] != cpu_node[prev_cpu & CPU_MASK])
		return -1;
	if (scx_bpf_dsq_nr_queued(waker_cpu) > 0)
		return -1;
	if (push_wake_wide(tctx, waker, wl)) {
		stat_inc(STAT_AFFINE_WIDE);
		return -1;
	}
	if (cache_keep(p, pl, wl))
		return -1;
	cpu = -1;
	if (!no_idle_core)
		cpu = idle_pick_llc(p, wl, true);
	if (cpu < 0)
		cpu = idle_pick_llc(p, wl, false);
	if (cpu >= 0)
		stat_inc(STAT_PICK_AFFINE);
	return cpu;
}

/*
 * The rule waker_cpu: @p, woken synchronously by the task on @waker_cpu in
 * prev's LLC, goes into that CPU's local DSQ to run when the waker sleeps;
 * -1 leaves it to the idle search. --sync-wake-target: search (never),
 * waker-if-pair (only when neither serves many partners), waker (always).
 *
 * Why: a synchronous waker is about to wait for its wakee (a pipe, a
 * socket's request and reply), so the wakee finds the data it is sent in
 * the waker's caches and no idle CPU has to be woken for it. The kernel's
 * fair class makes the waker's CPU the target of such a wake-up when the
 * waker runs alone (wake_affine_idle()) but then takes any idle CPU of
 * its LLC; sched_ext's built-in selection keeps the wakee on the waker's
 * CPU while that CPU has nothing queued.
 *
 * Not taken: when something is queued on the waker's CPU (the wakee would
 * wait behind it), when prev is idle (it has the wakee's cache and nothing
 * to wait for), across LLCs (wake affine and the NUMA policy decide there)
 * or when @p may not run on the waker's CPU.
 */
__hidden s32 push_waker_cpu(struct task_struct *p __arg_trusted, struct task_ctx *tctx,
			    struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu)
{
	u32 llc;

	if (!sync_to_waker || !cpu_valid(prev_cpu) || !cpu_valid(waker_cpu))
		return -1;
	llc = cpu_llc[waker_cpu & CPU_MASK];
	if (llc != cpu_llc[prev_cpu & CPU_MASK] ||
	    !bpf_cpumask_test_cpu(waker_cpu, p->cpus_ptr))
		return -1;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) > 0 || scx_bpf_dsq_nr_queued(waker_cpu) > 0)
		return -1;
	if (sync_to_waker_pairs && push_wake_wide(tctx, waker, llc))
		return -1;
	if (prev_cpu != waker_cpu && cpu_idle_now(prev_cpu))
		return -1;
	stat_inc(STAT_PICK_WAKER);
	return waker_cpu;
}

/*
 * The rule wake_follow: a claimed idle CPU near the task on @waker_cpu that woke @p
 * synchronously from another node, or -1. The waker's own CPU is not
 * taken even if it is about to sleep: its idle bit is clear while it runs.
 */
__hidden s32 push_follow_waker(struct task_struct *p __arg_trusted, struct task_ctx *tctx,
			       struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu)
{
	s32 cpu;

	if (!numa_wake_follow(p, tctx, waker, prev_cpu, waker_cpu))
		return -1;
	cpu = idle_pick_llc(p, cpu_llc[waker_cpu & CPU_MASK], false);
	if (cpu < 0)
		cpu = idle_pick_node(p, cpu_node[waker_cpu & CPU_MASK],
				     cpu_llc[waker_cpu & CPU_MASK]);
	if (cpu >= 0)
		numa_followed(tctx);
	return cpu;
}

/* The rule idle_search: a claimed idle CPU for @p, or -1 to stay on @prev_cpu. */
__hidden s32 push_pick_cpu(struct task_struct *p __arg_trusted, s32 prev_cpu, bool is_fork,
			   bool paired)
{
	u32 llc;
	s32 cpu;

	/*
	 * prev must be a CPU we know and may use, else the hierarchy has no
	 * anchor: fall back to any idle allowed CPU.
	 */
	if (!cpu_online(prev_cpu) || !bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr))
		goto anywhere;
	llc = cpu_llc[prev_cpu & CPU_MASK];

	/*
	 * prev_idle: prev, if idle. prev-first (the kernel's select_idle_sibling(),
	 * and Sistare's): whether or not its SMT siblings are busy;
	 * core-first: only if they are idle too, else an idle core below
	 * comes before it.
	 */
	if (idle_prev_first) {
		if (idle_claim_cpu(prev_cpu)) {
			stat_inc(STAT_PICK_PREV);
			return prev_cpu;
		}
	} else if (!no_idle_core && idle_claim_core(prev_cpu)) {
		stat_inc(STAT_PICK_PREV_CORE);
		return prev_cpu;
	}

	/* llc_idle_core: an idle core in prev's LLC */
	if (!no_idle_core) {
		cpu = idle_pick_llc(p, llc, true);
		if (cpu >= 0) {
			stat_inc(STAT_PICK_LLC_CORE);
			return cpu;
		}
	}

	/* llc_idle_cpu: an idle CPU in prev's LLC; core-first tries prev itself here */
	if (!idle_prev_first && idle_claim_cpu(prev_cpu)) {
		stat_inc(STAT_PICK_LLC_CPU);
		return prev_cpu;
	}
	cpu = idle_pick_llc(p, llc, false);
	if (cpu >= 0) {
		stat_inc(STAT_PICK_LLC_CPU);
		return cpu;
	}

	/*
	 * cache_keep_busy, the cache-aware gate "out": prev's LLC is the
	 * process's preferred one and the gate forbids leaving it: stay, a CPU of this LLC will pull
	 * the task (unless --cache-busy-wake=leave)
	 */
	if (cache_keep_busy(p, llc, -1)) {
		stat_inc(STAT_CACHE_KEEP_WAKE);
		stat_inc(STAT_PICK_NONE);
		return -1;
	}

	/* node_idle_cpu: an idle CPU in prev's node, outside its LLC */
	cpu = idle_pick_node(p, cpu_node[prev_cpu & CPU_MASK], llc);
	if (cpu >= 0) {
		stat_inc(STAT_PICK_NODE_CPU);
		return cpu;
	}

anywhere:
	/* push_across: another node, if the NUMA policy lets the task leave its node */
	cpu = numa_push_across(p, prev_cpu, is_fork, paired);
	if (cpu >= 0) {
		stat_inc(STAT_PICK_OTHER);
		return cpu;
	}

	/* stay_on_prev: nothing idle */
	stat_inc(STAT_PICK_NONE);
	return -1;
}
