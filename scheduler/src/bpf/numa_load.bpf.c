/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_load.bpf.c - how loaded is each CPU, LLC and node? (the NUMA
 * policy's and the cache gates' figures)
 *
 * Idea. The NUMA policy (numa.bpf.c) and cache-aware scheduling
 * (cache.bpf.c) compare loads, not single samples: a decayed average of
 * runnable tasks and of run time per CPU, summed per LLC and per node,
 * plus counts taken at the moment of a decision (numa_nr_now()).
 *
 * Origin: the kernel's load tracking, which balances on decayed averages
 * of runnable load and utilisation, not on the instantaneous queue
 * lengths; here one sample per heartbeat instead of one update per
 * scheduling event.
 *
 * Load. Every sample of the periodic BPF timer (iwq_period_ns, heartbeat.bpf.c)
 * counts per CPU nr = tasks waiting in its DSQ + tasks in its local DSQ +
 * 1 if the CPU is not idle, and folds it into an exponentially decayed
 * average, cpu_load (fixed point, 1 task == 1 << LOAD_SHIFT):
 *   load += (nr << LOAD_SHIFT - load) / 2^LOAD_DECAY_SHIFT  (rounded away
 *   from zero so it reaches its target), once per 4 ms step (LOAD_STEP_NS)
 *   of the time since the last sample, so a time constant of 8 steps (32
 *   ms) whatever the timer's period (20 ms by default) or lateness.
 *   llc_load and node_load are the sums over their CPUs. A new
 *   program (exec, or a process forked with --place-at-fork) is also
 *   counted at once in node_placed, which shrinks as the average takes it
 *   up (numa_count_placed()), so that programs started together see each
 *   other; the count is part of the choice (numa_place_new()). A node's load in tasks is node_load + node_placed rounded to
 *   the nearest integer. The agent
 *   also gets node_load_sum (sum of the instantaneous nr per node over all
 *   samples) and load_samples, for mean loads over any period.
 *
 * Knobs: none of its own (the heartbeat's period, iwq_period_ns, sets how
 * often it samples). Stats: none; the agent reads node_load / node_load_sum
 * / load_samples (globals) for mean loads.
 */
#include "locality.bpf.h"
#include "numa_load.bpf.h"
#include "numa_rules.h"

u32 cpu_load[MAX_CPUS];		/* EWMA of runnable tasks, 1 << LOAD_SHIFT each */
u32 llc_load[MAX_LLCS];
/*
 * Utilisation: the same decayed average of the share of each sampling gap
 * the CPU spent running tasks (at most 1 << LOAD_SHIFT per CPU), from run
 * time, not from the idle bit at the sample: what cache.bpf.c's gates
 * compare, as upstream compares util, not the number of runnable tasks.
 * Sampling the idle bit read far too high (a communicating group busy on
 * about half of an LLC read as nearly all of it), so the cache gate called
 * the LLC overloaded and dropped the process's preference several times a
 * second (docs/decisions.md, cache-aware measurements). Run time per CPU:
 * cpu_busy_ns (runs charged by ops.stopping and ops.tick) plus the open
 * run since cpu_run_since (ops.running, ops.tick); cpu_busy_seen is what
 * the last sample had taken.
 */
u32 cpu_util[MAX_CPUS];
u64 cpu_busy_ns[MAX_CPUS];
u64 cpu_run_since[MAX_CPUS];	/* start of the run in progress, 0 none */
u64 cpu_busy_seen[MAX_CPUS];
u64 util_last_ns;		/* scx_bpf_now() of the last utilisation sample */
static u64 util_now, util_gap;	/* this sample's time and the gap since the last */
static u32 load_steps;		/* decay steps the gap stands for (numa_rule_load_steps) */
u32 llc_util[MAX_LLCS];
u32 llc_util_acc[MAX_LLCS];
u32 node_load[MAX_NODES];
u32 node_util[MAX_NODES];	/* sum of cpu_util over the node's CPUs */
u32 node_placed[MAX_NODES];	/* new tasks placed, not yet in node_load (same fixed point) */
u64 node_load_sum[MAX_NODES];	/* sum of instantaneous runnable per sample */
u64 load_samples;

/* timer scratch */
u32 llc_load_acc[MAX_LLCS], node_load_acc[MAX_NODES], node_nr_now[MAX_NODES];
u32 node_util_acc[MAX_NODES];
u32 node_nr_last[MAX_NODES];	/* runnable tasks per node at the last whole sample */

/*
 * A new process that numa_place_new() counted on @from_cpu's node went to
 * @to_cpu instead (the fork push near its parent): move the count.
 */
__hidden void numa_placed_moved(s32 from_cpu, s32 to_cpu)
{
	u32 from, to;

	if (numa_mode == NUMA_OFF || !cpu_valid(from_cpu) || !cpu_valid(to_cpu))
		return;
	from = cpu_node[from_cpu & CPU_MASK] & NODE_MASK;
	to = cpu_node[to_cpu & CPU_MASK] & NODE_MASK;
	if (from == to)
		return;
	numa_count_placed(to);
	numa_uncount_placed(from);
}

/*
 * Tasks on node @n now, for place_new's least-loaded form: the CPUs running a
 * task, plus the tasks queued there beyond what its free CPUs (idle, or
 * @self_cpu) take at once. Read at the decision, not at the last sample.
 * @self_cpu: the CPU whose current task is the program being placed, free
 * for this count (-1: none). A CPU claimed for a program placed just before
 * reads busy. Queued tasks that a free CPU takes are left out: seen on
 * numaq4, they were the shell and the programs not placed yet, counted
 * where they waited a moment; counting them sent a program onto a node that
 * already ran one. The count is kept in nr_now_acc[this CPU], and the
 * function is global (no __hidden, see locality.bpf.h): with a local
 * count the verifier followed every CPU of every node and gave up.
 */
struct nr_now_acc {
	u32 busy, queued, free;
} nr_now_acc[MAX_CPUS];

__noinline u32 numa_nr_now(u32 n, s32 self_cpu)
{
	const struct cpumask *idle;
	u32 i, me = bpf_get_smp_processor_id() & CPU_MASK;
	struct nr_now_acc *a = &nr_now_acc[me];

	if (n >= MAX_NODES)
		return 0;
	a->busy = a->queued = a->free = 0;
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, node_off[n], node_off[n + 1]) {
		u32 c = node_cpus[i & CPU_MASK] & CPU_MASK;

		if (!cpu_online(c))
			continue;
		a->queued += numa_cpu_queued(c);
		if ((s32)c == self_cpu || bpf_cpumask_test_cpu(c, idle))
			a->free++;
		else
			a->busy++;
	}
	scx_bpf_put_idle_cpumask(idle);
	return a->busy + (a->queued > a->free ? a->queued - a->free : 0);
}

/* ops.running: a run starts on @cpu at @now (for utilisation) */
__hidden void numa_run_start(s32 cpu, u64 now)
{
	if (cpu_valid(cpu))
		cpu_run_since[cpu & CPU_MASK] = now;
}

/*
 * ops.stopping or ops.tick at @now: @used ns run on @cpu; restart the
 * count on a new node; the task's utilisation (node_overloaded at a wake-up)
 */
__hidden void numa_account(struct task_ctx *tctx, s32 cpu, u64 used, u64 now)
{
	s32 n;

	if (!tctx || !cpu_valid(cpu))
		return;
	numa_rule_util_add(&tctx->util, now, used);
	cpu_run_since[cpu & CPU_MASK] = 0;
	cpu_busy_ns[cpu & CPU_MASK] += used;
	n = cpu_node[cpu & CPU_MASK];
	if (tctx->rt_node != n) {
		tctx->rt_node = n;
		tctx->node_rt = 0;
	}
	tctx->node_rt += used;
}

/* ---- sampling (called from the heartbeat timer) ---- */

/*
 * Start a sample at @now (scx_bpf_now(): ops.running/stopping stamp runs
 * with it, and the NUMA policy keeps its times on it).
 */
__hidden void numa_load_begin(u64 now)
{
	u32 i;

	util_gap = util_last_ns && time_after(now, util_last_ns) ? now - util_last_ns : 0;
	util_last_ns = now;
	load_steps = numa_rule_load_steps(util_gap);
	util_now = now;

	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		llc_load_acc[i] = 0;
		llc_util_acc[i] = 0;
	}
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		node_load_acc[i] = 0;
		node_util_acc[i] = 0;
		node_nr_now[i] = 0;
	}
}

/*
 * Busy share of CPU @c since the last sample, @gap ns ago, in 1 <<
 * LOAD_SHIFT units; @busy (not idle now) stands in when there is no gap
 * yet. The run counters are written by @c itself; a sample racing a
 * run's end may count a little twice, and the share is capped at 1.
 */
static __always_inline u32 numa_busy_share(u32 c, u64 now, u64 gap, bool busy)
{
	u64 total = cpu_busy_ns[c & CPU_MASK], since = cpu_run_since[c & CPU_MASK];
	u64 seen = cpu_busy_seen[c & CPU_MASK], d;

	if (since && time_after(now, since))
		total += now - since;
	if (total <= seen)
		return 0;
	cpu_busy_seen[c & CPU_MASK] = total;
	if (!gap)
		return busy ? 1 << LOAD_SHIFT : 0;
	d = total - seen;
	if (d >= gap)
		return 1 << LOAD_SHIFT;
	return (d << LOAD_SHIFT) / gap;
}

/*
 * One sample of CPU @c: @nr runnable tasks, @busy not idle now. Global
 * (checked once by the verifier): the heartbeat calls it in its loop over
 * the CPUs, whose iterations the verifier would otherwise walk through it.
 */
void numa_load_cpu(u32 c, u32 nr, bool busy)
{
	u32 l = cpu_llc[c & CPU_MASK], n = cpu_node[c & CPU_MASK], v, u;

	if (nr > 4096)
		nr = 4096;
	v = numa_rule_load_decay(cpu_load[c & CPU_MASK], nr << LOAD_SHIFT, load_steps);
	cpu_load[c & CPU_MASK] = v;
	u = numa_rule_load_decay(cpu_util[c & CPU_MASK],
				 numa_busy_share(c, util_now, util_gap, busy), load_steps);
	cpu_util[c & CPU_MASK] = u;
	llc_util_acc[l & LLC_MASK] += u;
	llc_load_acc[l & LLC_MASK] += v;
	node_load_acc[n & NODE_MASK] += v;
	node_util_acc[n & NODE_MASK] += u;
	node_nr_now[n & NODE_MASK] += nr;
}

__hidden void numa_load_end(void)
{
	u32 i;

	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		llc_load[i] = llc_load_acc[i];
		llc_util[i] = llc_util_acc[i];
	}
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		node_load[i] = node_load_acc[i];
		node_util[i] = node_util_acc[i];
		/* the average took up as much of what it lagged as it moved */
		if (node_placed[i]) {
			u32 placed = node_placed[i];

			__sync_fetch_and_sub(&node_placed[i],
					     placed - numa_rule_load_decay(placed, 0, load_steps));
		}
		node_load_sum[i] += node_nr_now[i];
		node_nr_last[i] = node_nr_now[i];
	}
	load_samples++;
}
