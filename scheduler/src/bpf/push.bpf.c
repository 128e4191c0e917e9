/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * push.bpf.c - where does a waking task go? (ops.select_cpu)
 *
 * Idea: look for an idle CPU nearest to the task's previous CPU, trying the
 * levels in order of how much cache they share with it:
 *
 *   1. prev CPU, if its whole core is idle   (warm L1/L2, no SMT sharing)
 *   2. an idle core in prev's LLC            (warm LLC, no SMT sharing)
 *   3. an idle CPU in prev's LLC, prev first (warm LLC)
 *   4. an idle CPU in prev's NUMA node       (local memory)
 *   5. an idle CPU in another node, if numa_push_across() (numa.bpf.c)
 *      allows it: always with --numa-balance=off (unless
 *      --no-push-cross-node), else only beyond the node imbalance allowance
 *   (cache-aware, cache.bpf.c: steps 4 and 5 are skipped while prev's LLC
 *    is the process's preferred LLC and not overloaded)
 *   6. none: stay on prev; ops.enqueue queues the task there and, if prev
 *      is busy, wakes an idle CPU nearby to pull it (pull.bpf.c)
 *
 * Every step is restricted to p->cpus_ptr. A CPU found idle is claimed
 * (its idle bit cleared) by the kfunc that finds it, so two wakers cannot
 * pick the same one, and the task is inserted straight into its local DSQ.
 *
 * Seed: Steve Sistare's select_idle_sibling rework (2018) kept a sparse
 * per-LLC idle-CPU mask to make steps 2 and 3 cheap on big LLCs. Here the
 * kernel's built-in sched_ext idle tracking is used instead
 * (scx_bpf_pick_idle_cpu() with SCX_PICK_IDLE_CORE, the idle SMT mask,
 * scx_bpf_test_and_clear_cpu_idle()), because the kernel already keeps
 * per-CPU and whole-core idle bitmaps up to date on every idle transition;
 * a second copy would only add cost to the idle path. The cost of the
 * search as measured in the lab is reported with the lab's results.
 *
 * Knobs: no_idle_core skips steps 1 and 2 (A/B switch for the idle-core
 * preference); push_cross_node = 0 vetoes step 5 in every NUMA mode.
 * Stats: STAT_PICK_{PREV_CORE, LLC_CORE, LLC_CPU, NODE_CPU, OTHER, NONE},
 * STAT_DIRECT.
 */

/* Return a claimed idle CPU for @p, or -1 to stay on @prev_cpu. */
static s32 push_pick_cpu(struct task_struct *p, s32 prev_cpu, bool is_fork)
{
	const struct cpumask *idle_smt, *lmask, *nmask;
	struct bpf_cpumask *tmp;
	bool core_idle;
	s32 cpu;

	/*
	 * prev must be a CPU we know and may use, else the hierarchy has no
	 * anchor: fall back to any idle allowed CPU.
	 */
	if (!cpu_online(prev_cpu) || !bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr))
		goto anywhere;

	/* 1. prev, if all of its SMT siblings are idle too */
	if (!no_idle_core) {
		idle_smt = scx_bpf_get_idle_smtmask();
		core_idle = bpf_cpumask_test_cpu(prev_cpu, idle_smt);
		scx_bpf_put_idle_cpumask(idle_smt);
		if (core_idle && scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
			stat_inc(STAT_PICK_PREV_CORE);
			return prev_cpu;
		}
	}

	tmp = scratch_mask();
	lmask = llc_cpumask(cpu_llc[prev_cpu & CPU_MASK]);
	if (!tmp || !lmask)
		goto anywhere;
	bpf_cpumask_and(tmp, lmask, p->cpus_ptr);

	/* 2. an idle core in prev's LLC */
	if (!no_idle_core) {
		cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), SCX_PICK_IDLE_CORE);
		if (cpu >= 0) {
			stat_inc(STAT_PICK_LLC_CORE);
			return cpu;
		}
	}

	/* 3. an idle CPU in prev's LLC, prev itself preferred */
	if (scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		stat_inc(STAT_PICK_LLC_CPU);
		return prev_cpu;
	}
	cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
	if (cpu >= 0) {
		stat_inc(STAT_PICK_LLC_CPU);
		return cpu;
	}

	/*
	 * cache-aware gate "out": prev's LLC is the process's preferred one
	 * and not overloaded: stay, a CPU of this LLC will pull the task
	 */
	if (cache_keep(p, cpu_llc[prev_cpu & CPU_MASK])) {
		stat_inc(STAT_CACHE_KEEP_WAKE);
		stat_inc(STAT_PICK_NONE);
		return -1;
	}

	/* 4. an idle CPU in prev's node (re-checks the LLC: harmless) */
	nmask = node_cpumask(cpu_node[prev_cpu & CPU_MASK]);
	if (nmask) {
		bpf_cpumask_and(tmp, nmask, p->cpus_ptr);
		cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
		if (cpu >= 0) {
			stat_inc(STAT_PICK_NODE_CPU);
			return cpu;
		}
	}

anywhere:
	/* 5. another node, if the NUMA policy lets the task leave its node */
	cpu = numa_push_across(p, prev_cpu, is_fork);
	if (cpu >= 0) {
		stat_inc(STAT_PICK_OTHER);
		return cpu;
	}

	/* 6. nothing idle: stay */
	stat_inc(STAT_PICK_NONE);
	return -1;
}
