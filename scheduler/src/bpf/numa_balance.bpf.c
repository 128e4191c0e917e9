/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_balance.bpf.c - the cross-node balance pass, and active balance
 *
 * Idea. Balance across nodes rarely, on a pass of its own, and only by
 * what the NUMA allowance (numa.bpf.c) says must be corrected: the pass
 * grants a budget of steals, which idle CPUs of the destination spend in
 * ops.dispatch; when the source's tasks all run and nothing can be stolen,
 * a running task is preempted and sent over.
 *
 * Origin: Bligh & Hohnbaum 2003 (NUMA scheduler for 2.5): balance within a
 * node on every rebalance, across nodes on a separate, much rarer pass;
 * the kernel's active_load_balance (its stopper thread moves a running
 * task after repeated failed balance attempts).
 *
 * balance_pass: Cross-node balance pass (timer, every numa_interval_ns):
 *    for each node d, src = the most loaded other node, node_budget[d] =
 *    numa_moves(src, d); a budget > 0 lets CPUs of d steal that many tasks
 *    from src's DSQs until the next pass (pull.bpf.c steal_remote), and the
 *    pass kicks up to 4 idle CPUs of d to do it. Steals inside a node are
 *    unchanged (they run on every dispatch).
 * active_balance: Active balance: steals only take queued tasks, so a node
 *    whose tasks all run (8 threads of a parallel job on the 8 CPUs of one
 *    node, the other node idle) never gives one up. When a node's budget
 *    has gone unspent for NUMA_ACTIVE_TRIES passes in a row and it still
 *    has an idle CPU, the pass marks the busiest CPU of the source node
 *    whose running task may use the destination (active_to[cpu] = the
 *    node) and preempts it; ops.enqueue then sends
 *    the task it puts back to an idle CPU of the marked node
 *    (numa_active_take(); STAT_XNODE_ACTIVE). One CPU per node per pass.
 *    Not a thread kept in its process's preferred LLC (cache_keep(): the
 *    cache-aware series keeps generic balancing from moving a task out of
 *    its preferred LLC, at every level).
 * settled_kept's escalation (numa.bpf.c) counts here: node_unused, passes
 * in a row whose budget went unspent. At the end of each pass
 * home_balance (home.bpf.c) sends tasks away from home back.
 *
 * Knobs: numa_mode, numa_interval_ns (--numa-interval-ms). Stats:
 * STAT_NUMA_PASSES, STAT_NUMA_BUDGET, STAT_NUMA_ACTIVE_KICK,
 * STAT_XNODE_ACTIVE.
 */
#include "locality.bpf.h"
#include "numa.bpf.h"
#include "numa_load.bpf.h"
#include "numa_balance.bpf.h"
#include "numa_rules.h"
#include "home.bpf.h"
#include "cache.bpf.h"
#include "decide.bpf.h"

u64 numa_last_pass_ns;

/*
 * ops.enqueue of @p on @cpu: active_balance, if the pass marked @cpu, send the task
 * that was just preempted there to the marked node: an idle CPU of it
 * (*@claimed = true) or, if the pass's kick has just woken the only idle
 * one, any CPU of it that @p may use (ops.enqueue queues it there and kicks
 * it). Returns the CPU or -1.
 */
__hidden s32 numa_active_take(struct task_struct *p __arg_trusted, s32 cpu, bool *claimed)
{
	const struct cpumask *nmask;
	struct task_ctx *tctx;
	u64 now;
	s32 to, dst;

	if (!cpu_valid(cpu) || !active_to[cpu & CPU_MASK])
		return -1;
	tctx = task_ctx(p);
	now = scx_bpf_now();
	switch (numa_rule_mark_for(p->pid, active_pid[cpu & CPU_MASK],
				   time_delta(now, active_at[cpu & CPU_MASK]), numa_interval_ns)) {
	case NUMA_MARK_EXPIRED:
		active_to[cpu & CPU_MASK] = 0;
		return -1;
	case NUMA_MARK_OTHER:
		return -1;
	}
	/* the marked task, once (the exchange below) */
	if (!tctx || p->nr_cpus_allowed < 2 ||
	    (p->flags & PF_KTHREAD) || !numa_task_may_cross(tctx, now))
		return -1;
	to = __sync_lock_test_and_set(&active_to[cpu & CPU_MASK], 0) - 1;
	if (to < 0 || to >= MAX_NODES || to == (s32)cpu_node[cpu & CPU_MASK])
		return -1;
	/* nor a thread that its process's preferred LLC keeps (gate "out") */
	if (node_off[to] < MAX_CPUS &&
	    cache_keep(p, cpu_llc[cpu & CPU_MASK], cpu_llc[node_cpus[node_off[to] & CPU_MASK] & CPU_MASK]))
		return -1;
	dst = numa_idle_in_node(p, to);
	if (claimed)
		*claimed = dst >= 0;
	if (dst < 0) {
		nmask = node_cpumask(to);
		if (!nmask)
			return -1;
		dst = bpf_cpumask_any_and_distribute(nmask, p->cpus_ptr);
		if (!cpu_valid(dst) || !cpu_online(dst))
			return -1;
	}
	numa_budget_take(to);	/* spends the unit the pass gave; never below zero */
	numa_task_crossed(tctx, now);
	decide_why(tctx, STAT_XNODE_ACTIVE);
	stat_inc(STAT_XNODE_ACTIVE);
	return dst;
}

/*
 * Whether the task running on @cpu may run on a CPU of @nmask, the
 * destination node's: preempting one confined to its node (taskset, a
 * cpuset) moves nothing, and the next pass would preempt it again.
 */
static bool numa_curr_may_go(s32 cpu, const struct cpumask *nmask)
{
	struct task_struct *curr;
	bool ok;

	bpf_rcu_read_lock();
	curr = __COMPAT_scx_bpf_cpu_curr(cpu);
	ok = curr && bpf_cpumask_intersects(nmask, curr->cpus_ptr);
	bpf_rcu_read_unlock();
	return ok;
}

/*
 * active_balance: preempt the busiest non-idle CPU of node @src whose
 * task may run on node @d
 */
static void numa_active_kick(u32 src, u32 d)
{
	const struct cpumask *idle, *nmask;
	u32 i, best_load = 0;
	s32 best = -1;

	if (src >= MAX_NODES || !(nmask = node_cpumask(d)))
		return;
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, node_off[src], node_off[src + 1]) {
		u32 c = node_cpus[i & CPU_MASK] & CPU_MASK;

		if (bpf_cpumask_test_cpu(c, idle) || !cpu_online(c))
			continue;
		if (best >= 0 && cpu_load[c] <= best_load)
			continue;
		if (numa_curr_may_go(c, nmask)) {
			best_load = cpu_load[c];
			best = c;
		}
	}
	scx_bpf_put_idle_cpumask(idle);
	if (best < 0)
		return;
	numa_active_mark(best, d, scx_bpf_now());
	stat_inc(STAT_NUMA_ACTIVE_KICK);
}

/*
 * balance_pass at @now, the heartbeat's sample time, once per
 * numa_interval_ns: per node a budget of steals from the most loaded other
 * node, idle CPUs kicked to spend it, active_balance when it goes unspent.
 */
__hidden void numa_balance_pass(u64 now)
{
	u32 d, j, k;

	if (numa_mode == NUMA_OFF || nr_nodes < 2)
		return;
	if (numa_last_pass_ns && now - numa_last_pass_ns < numa_interval_ns)
		return;
	numa_last_pass_ns = now;
	stat_inc(STAT_NUMA_PASSES);

	bpf_for(d, 0, nr_nodes) {
		u32 best = 0, moves = 0;
		s32 src = -1;

		if (d >= MAX_NODES)
			break;
		bpf_for(j, 0, nr_nodes) {
			if (j >= MAX_NODES)
				break;
			if (j != d && (src < 0 || node_load_now(j) > best)) {
				best = node_load_now(j);
				src = j;
			}
		}
		if (src >= 0)
			moves = numa_moves(src, d, 0);
		/* settled_kept's escalation: did the last budget go unspent? */
		if (moves && node_budget[d] > 0 && node_src[d] == (u32)src)
			node_unused[d]++;
		else
			node_unused[d] = 0;
		node_src[d] = src >= 0 ? src : d;
		node_budget[d] = moves;
		if (!moves)
			continue;
		stat_add(STAT_NUMA_BUDGET, moves);
		/* wake idle CPUs of d: they steal in ops.dispatch */
		bpf_for(k, 0, MIN(moves, 4)) {
			const struct cpumask *nmask = node_cpumask(d);
			s32 cpu;

			if (!nmask)
				break;
			cpu = scx_bpf_pick_idle_cpu(nmask, 0);
			if (cpu < 0)
				break;
			kick_cpu(cpu, SCX_KICK_IDLE);
			/* active_balance: steals found nothing for a while: preempt one */
			if (k == 0 && node_unused[d] >= NUMA_ACTIVE_TRIES)
				numa_active_kick((u32)src, d);
		}
	}
	/* home_balance: tasks away from home go back or swap */
	home_balance(now);
}
