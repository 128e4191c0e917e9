/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * home.bpf.c - keep a process's threads on its home node, so that its
 * memory can stay there (the scheduling half of memory placement)
 *
 * Idea. Memory placement (memory/, van Riel 2014) can only make memory
 * local to where the threads run. If balancing spreads each of two
 * 4-thread processes over both nodes of a 2 x 4 CPU machine, neither has a
 * node to be local to. The kernel solves this from the other end: NUMA
 * balancing gives each task a preferred node (where its memory faults
 * come from) and task_numa_migrate() moves it there, swapping it with a
 * task of the destination when that node is full. sched_ext tasks get no
 * NUMA faults, so here the agent decides the homes and this file keeps
 * the threads there.
 *
 * Homes. The agent (memory/home.rs, assign_homes()) writes proc_home: tgid ->
 * node, for processes with two or more busy threads whose node still fits
 * them beside the other homed processes, within a fair share of the busy
 * threads plus NUMA_IMBALANCE_MIN. So two 4-thread processes on 2 x 4 CPUs
 * get a node each, while one 8-thread process on a 2 x 8 CPU machine gets
 * no home and is spread by the NUMA policy as before. After each update the
 * agent bumps home_gen; a task re-reads its home when its cached
 * generation is older.
 *
 * Thread homes. A process too big for one node (van Riel 2014's case: its
 * threads span nodes) gets no process home; instead the agent
 * (assign_thread_homes()) gives each of its busy threads a home of its own
 * in thread_home: tid -> node, within the few nodes the process runs on
 * most, so that each thread's private memory has one node to follow it to
 * and the process's shared memory a stable set of nodes to spread over.
 * The kernel's counterpart is the per-task preferred node of NUMA
 * balancing. Below, "home" is the thread's own where it has one, else its
 * process's. --no-thread-home turns thread homes off.
 *
 * Where a home applies (home_enabled; on unless --no-home-node or
 * --memory=off or --numa-balance=off), rule by rule:
 *   home_wake: at a wake-up (select_cpu) a task away from home takes an
 *      idle CPU of its home node if one is allowed (home_wake_pick();
 *      STAT_XNODE_HOME);
 *   home_may_leave: the wake-up's push_across and wake_follow
 *      (numa_place.bpf.c) never take a task away from home (STAT_HOME_KEPT);
 *   home_steal_ok: cross-node steals (pull.bpf.c steal_remote) pass over
 *      a task at home unless its node's budget went unspent for NUMA_SETTLED_TRIES passes
 *      (the same escalation as settled tasks, so an idle CPU is never kept
 *      idle forever by a wrong home) (STAT_HOME_KEPT);
 *   home_balance: at the end of the balance pass (every numa_interval_ns)
 *      a CPU running a task away from home is preempted and the task sent
 *      home through active_balance's mark (numa_active_take()) when its
 *      home has an idle CPU, or, when a CPU of the home node runs a task whose home is this
 *      node, both are preempted: a swap (STAT_HOME_ACTIVE, STAT_HOME_SWAP).
 *      At most one per node pair per pass; a task still changes node at
 *      most once per interval. The pass reads each CPU's home as ops.running
 *      or ops.tick recorded it, and only if recorded since the agent's last
 *      update (home_rule_pass_dest()).
 *
 * Stats: STAT_XNODE_HOME, STAT_HOME_KEPT, STAT_HOME_ACTIVE, STAT_HOME_SWAP.
 */
#include "locality.bpf.h"
#include "home.bpf.h"
#include "numa.bpf.h"
#include "decide.bpf.h"
#include "home_rules.h"

const volatile bool home_enabled = true;

u64 home_gen;			/* bumped by the agent after each proc_home change */
s32 cpu_run_home[MAX_CPUS];	/* home node + 1 of the task running on each CPU, 0 none */
u64 cpu_run_gen[MAX_CPUS];	/* ... read in this home_gen */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);	/* tgid */
	__type(value, s32);	/* node */
} proc_home SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);	/* tid */
	__type(value, s32);	/* node */
} thread_home SEC(".maps");

static __always_inline s32 home_lookup(void *map, u32 id)
{
	s32 *n = bpf_map_lookup_elem(map, &id);

	return n ? home_rule_node(*n, nr_nodes) : -1;
}

/* @p's process's home node, or -1 */
__hidden s32 task_proc_home(struct task_struct *p __arg_trusted)
{
	if (!home_enabled || nr_nodes < 2)
		return -1;
	return home_lookup(&proc_home, p->tgid);
}

/* @p's home node (its own, else its process's), or -1 */
__hidden s32 task_home(struct task_struct *p __arg_trusted, struct task_ctx *tctx)
{
	s32 h;

	if (!home_enabled || nr_nodes < 2)
		return -1;
	if (tctx && tctx->home_gen == home_gen)
		return tctx->home;
	h = home_lookup(&proc_home, p->tgid);
	if (h < 0)
		h = home_lookup(&thread_home, p->pid);
	if (tctx) {
		tctx->home = h;
		tctx->home_gen = home_gen;
	}
	return h;
}

/* 1. wake-up away from home: an idle CPU of the home node, else -1 */
__hidden s32 home_wake_pick(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 prev_cpu)
{
	s32 h = task_home(p, tctx), cpu;

	if (h < 0 || (cpu_valid(prev_cpu) && cpu_node[prev_cpu & CPU_MASK] == (u32)h))
		return -1;
	cpu = numa_idle_in_node(p, h);
	if (cpu < 0)
		return -1;
	numa_task_crossed(tctx, scx_bpf_now());
	decide_why(tctx, STAT_XNODE_HOME);
	stat_inc(STAT_XNODE_HOME);
	return cpu;
}

/* 2.: may @p leave node @n? false if @n is its home */
__hidden bool home_may_leave(struct task_struct *p __arg_trusted, struct task_ctx *tctx, u32 n)
{
	if (task_home(p, tctx) != (s32)n)
		return true;
	stat_inc(STAT_HOME_KEPT);
	return false;
}

/* 3.: may a CPU of node @dst steal @p from node @src? */
__hidden bool home_steal_ok(struct task_struct *p __arg_trusted, struct task_ctx *tctx,
			    u32 src, u32 dst)
{
	if (task_home(p, tctx) != (s32)src ||
	    node_unused[dst & NODE_MASK] >= NUMA_SETTLED_TRIES)
		return true;
	stat_inc(STAT_HOME_KEPT);
	return false;
}

/* ops.running: remember the home of the task now on @cpu for the pass */
__hidden void home_running(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 cpu)
{
	u64 gen = home_gen;

	if (!home_enabled || !cpu_valid(cpu))
		return;
	cpu_run_home[cpu & CPU_MASK] = task_home(p, tctx) + 1;
	cpu_run_gen[cpu & CPU_MASK] = gen;
}

/*
 * ops.tick: a task that keeps its CPU for long is not seen by ops.running
 * again; re-read its home once the agent has changed the homes, so that
 * the pass acts on the home it has now.
 */
__hidden void home_tick(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 cpu)
{
	if (home_enabled && cpu_valid(cpu) && cpu_run_gen[cpu & CPU_MASK] != home_gen)
		home_running(p, tctx, cpu);
}

/* mark @cpu's running task to go to node @to (numa_active_take() sends it) */
static __always_inline void home_mark(s32 cpu, u32 to, u64 now)
{
	numa_active_mark(cpu, to, now);
	stat_inc(STAT_HOME_ACTIVE);
}

/* pass number in which each (from * MAX_NODES + to) node pair was served */
u32 home_pair_pass[MAX_NODES * MAX_NODES];
u32 home_pass;

static __always_inline u32 *home_pair(u32 from, u32 to)
{
	return &home_pair_pass[(from * MAX_NODES + to) & (MAX_NODES * MAX_NODES - 1)];
}

/*
 * 4. From the balance pass: send running tasks that are away from home
 * back, to an idle CPU there or in a swap. One move per (from, to) node
 * pair per pass, any number of nodes.
 */
__hidden void home_balance(u64 now)
{
	const struct cpumask *idle;
	u32 i, j, pass;
	u64 gen = home_gen;

	if (!home_enabled || nr_nodes < 2)
		return;
	pass = ++home_pass;
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, 0, nr_cpus) {
		u32 c = i & CPU_MASK, from, to;
		s32 h, partner = -1;
		bool room;

		if (i >= MAX_CPUS)
			break;
		from = cpu_node[c];
		h = home_rule_pass_dest(cpu_run_home[c], cpu_run_gen[c], gen, from);
		if (h < 0 || !cpu_online(c) || bpf_cpumask_test_cpu(c, idle))
			continue;
		to = h;
		if (from >= MAX_NODES || to >= MAX_NODES || *home_pair(from, to) == pass)
			continue;
		/* an idle CPU at home? (the task's own affinity is checked at the move) */
		room = false;
		bpf_for(j, node_off[to & NODE_MASK], node_off[(to & NODE_MASK) + 1]) {
			u32 d = node_cpus[j & CPU_MASK] & CPU_MASK;

			if (cpu_online(d) && bpf_cpumask_test_cpu(d, idle)) {
				room = true;
				break;
			}
			/* else a swap partner: a CPU at home running a task homed here */
			if (partner < 0 && !active_to[d] &&
			    home_rule_pass_dest(cpu_run_home[d], cpu_run_gen[d], gen, to) == (s32)from)
				partner = d;
		}
		if (!room && partner < 0)
			continue;
		*home_pair(from, to) = pass;
		home_mark(c, to, now);
		if (!room) {
			*home_pair(to, from) = pass;
			home_mark(partner, from, now);
			stat_inc(STAT_HOME_SWAP);
		}
	}
	scx_bpf_put_idle_cpumask(idle);
}
