/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa.bpf.c - when may a task change NUMA node? (bounded NUMA imbalance)
 *
 * Idea. Balance inside a node often, across nodes rarely, and tolerate a
 * small imbalance between nodes while they are lightly loaded, so that a
 * pair of communicating tasks stays on one node (and its memory) instead
 * of being spread over two nodes of a nearly idle machine.
 *
 * Origins:
 * - Mel Gorman 2019, "Allow a small load imbalance between low utilisation
 *   SD_NUMA domains": the balancer spread two communicating tasks across
 *   nodes on a nearly idle machine; allow a small imbalance between nodes
 *   while the busiest node is lightly used. Today's upstream form is the
 *   imb_numa_nr allowance (numa.rs computes it; numa_rules.h has the rules).
 * - Bligh & Hohnbaum 2003 (NUMA scheduler for 2.5): balance within a node
 *   on every rebalance, across nodes on a separate, much rarer pass; place
 *   a new program at exec on the least loaded node.
 *
 * Policy (numa_mode, --numa-balance). The kernel's load balancer first
 * classifies the busiest group. An overloaded node (numa_node_overloaded():
 * more runnable tasks than CPUs at the last sample, and its utilisation or
 * its runnable average past the capacity with the kernel's imbalance_pct
 * of 117, group_is_overloaded()) is balanced by its load in tasks, with no
 * allowance. A node with spare capacity is balanced by idle CPUs: the
 * imbalance is the destination's idle CPUs minus the source's, idle CPUs
 * being the node's CPUs minus its utilisation in CPUs (plus new tasks the
 * average has not taken up yet), and numa_rule_adjust() maps it to the part
 * that must be corrected:
 *   NUMA_UPSTREAM: 0 if local_running <= imb_numa_nr(local node) and
 *     imbalance <= NUMA_IMBALANCE_MIN (2), else the imbalance unchanged;
 *     local_running counts the task being placed (+1), like the kernel's
 *     local->sum_nr_running + 1 (adjust_numa_imbalance()).
 *   NUMA_IDLE_CPUS (Gorman's v2 patch, Dec 2019): imbalance_adj =
 *     max(2, (busiest CPUs * (imbalance_pct - 100) / 100) >> 1) and
 *     imbalance_max = busiest CPUs / 2 + imbalance_adj, with the
 *     imbalance_pct of NUMA domains at the time, 125; the imbalance is 0
 *     when it is at most imbalance_adj and the busiest node has at least
 *     imbalance_max idle CPUs, else unchanged.
 *   NUMA_NO_ALLOWANCE: the imbalance unchanged: every mechanism of the
 *     policy runs, but nodes are evened out by idle CPUs however few
 *     tasks run, as the kernel balanced NUMA domains before Gorman's
 *     patch (the allowance's own off switch).
 *   NUMA_OFF: no policy, see below.
 * A balance move corrects half of what remains (numa_moves(), the
 * kernel's "imbalance >>= 1"): a node pair 3 vs 1 moves one task.
 *
 * The policy's figures are numa_load.bpf.c's; its pure rules are in
 * numa_rules.h (tested by src/rules.rs). The rules by name, and where each
 * lives (the names are the same in the code, the counters and the docs):
 *   balance_pass, active_balance   numa_balance.bpf.c (the periodic pass)
 *   place_new, push_across,        numa_place.bpf.c (where a new or waking
 *   wake_follow                    task may go across nodes)
 *   node_overloaded, task_may_cross, settled_kept, idle_pull_across, and
 *   the steals across nodes that balance_pass and node_overloaded allow
 *   (pull.bpf.c steal_remote): this file.
 *
 * node_overloaded: Overloaded nodes: the allowance is for nodes with spare
 *    capacity. An overloaded node (see Policy) is balanced without it, as
 *    the kernel balances an overloaded busiest group: a new task (a waking
 *    one with --push-cross-node=always) that finds no idle CPU on its node
 *    may take one on a node that is not overloaded (push_across;
 *    STAT_NUMA_OVERLOAD), and an idle CPU of a node that is not overloaded
 *    may steal from it between passes (steal_remote;
 *    STAT_XNODE_STEAL_OVERLOAD), woken for it by pull_kick_stealer().
 *    task_may_cross, settled_kept and home nodes still apply, and a task
 *    does not follow its waker (wake_follow) into a node it would overload.
 *    The averaged load cannot show this state: hackbench over sockets keeps
 *    about one task per CPU on average while every wake-up finds its node's
 *    CPUs busy (docs/mechanisms.md, "Bounded NUMA imbalance").
 * task_may_cross: Per task: in policy modes a task that changed node (by
 *    any of the above) may not change node again by balance_pass,
 *    idle_pull_across, push_across or wake_follow for numa_interval_ns
 *    (task_ctx.xnode_at). Draining an offline CPU ignores all of this.
 * settled_kept: Settled tasks (policy modes): a task that has run
 *    numa_interval_ns or more on its node since it came there has likely
 *    built its memory there. A cross-node steal (balance_pass) passes over
 *    it for a queued task that has not, and takes it only once its node's
 *    budget went unused for NUMA_SETTLED_TRIES passes in a row
 *    (node_unused), i.e. when nothing else can fix the imbalance. This is
 *    the kernel's migrate_degrades_locality() + nr_balance_failed
 *    escalation, with runtime on the node standing in for NUMA hinting
 *    faults, which sched_ext tasks do not get. Seen on numaq4 (8
 *    memory-bound jobs, 4 nodes): without it a job preempted by a
 *    short-lived task was stolen to another node, away from its memory, and
 *    ran there for a long part of its run.
 * idle_pull_across: Idle pull (--idle-pull-across, off by default): a CPU
 *    about to go idle (pull.bpf.c steal_remote, nothing runnable here) may
 *    take a task queued in another node without a budget, when that node
 *    holds enough more tasks now (numa_nr_now(): busy CPUs and queued tasks
 *    at this instant) for numa_rule_idle_pull(), the kernel's newidle
 *    balance across nodes: the difference in tasks, the allowance, halved.
 *    Only a task queued for at least NUMA_PULL_WAIT_US (the kernel's
 *    migration cost: a task queued just now is cache hot, and its CPU frees
 *    up soon); settled_kept does not apply. balance_pass reads averages of
 *    utilisation, which a bursty load under emulation keeps low on both
 *    nodes, so it never sees a node that queues while the other idles.
 *
 * NUMA_OFF is the behaviour before this file existed, with cross-node
 * steals on: an idle CPU that found nothing in its SMT core, LLC and node
 * steals from any CPU of any node, on every dispatch (the agent sets
 * steal_cross_node); a waking task takes an idle CPU of any node when its
 * node has none (--push-cross-node defaults to always); fork and exec are not
 * special.
 *
 * Clock: scx_bpf_now() (the run queue's clock, else sched_clock), not
 * bpf_ktime_get_ns(): this file runs in every wake-up, and a clocksource
 * read can be dear (an emulated HPET cost whole percents of hackbench;
 * docs/decisions.md, "The BPF clock").
 *
 * Knobs: numa_mode (--numa-balance), numa_interval_ns (--numa-interval-ms),
 * node_imb_nr (the allowance per node, numa.rs), idle_pull_across,
 * steal_cross_node. Stats: STAT_XNODE_STEAL_*, STAT_NUMA_TASK_RECENT,
 * STAT_NUMA_SETTLED_KEPT, STAT_NUMA_PULL_HOT.
 */
#include "locality.bpf.h"
#include "numa.bpf.h"
#include "numa_load.bpf.h"
#include "numa_rules.h"

s32 node_budget[MAX_NODES];	/* cross-node steals allowed until the next pass */
u32 node_src[MAX_NODES];	/* ... from this node */
u32 node_unused[MAX_NODES];	/* passes in a row whose budget was not spent */
s32 active_to[MAX_CPUS];	/* active_balance: node to send this CPU's preempted task to, +1; 0 none */
u64 active_at[MAX_CPUS];	/* ... marked then; a mark older than one interval is void */
s32 active_pid[MAX_CPUS];	/* ... for the task that was running there then */

/* ---- the policy: its rules are in numa_rules.h, tested by src/rules.rs ---- */

/* node_overloaded: is node @n overloaded, counting @extra tasks about to be added? */
__hidden bool numa_node_overloaded(u32 n, u32 extra)
{
	struct numa_node_fig f = numa_fig(n);

	return numa_rule_overloaded(&f, extra);
}

/* task_may_cross for @tctx's task (none: may) */
__hidden bool numa_task_may_cross(struct task_ctx *tctx, u64 now)
{
	if (!tctx)
		return true;
	return numa_rule_may_cross(numa_mode, tctx->xnode_at, now, numa_interval_ns);
}

__hidden void numa_task_crossed(struct task_ctx *tctx, u64 now)
{
	if (tctx)
		tctx->xnode_at = now ?: 1;
}

/* Claim an idle CPU of node @n allowed for @p, or -1. Uses the scratch mask. */
__hidden s32 numa_idle_in_node(struct task_struct *p __arg_trusted, u32 n)
{
	struct bpf_cpumask *tmp = scratch_mask();
	const struct cpumask *nmask = node_cpumask(n);

	if (!tmp || !nmask)
		return -1;
	bpf_cpumask_and(tmp, nmask, p->cpus_ptr);
	return scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
}

/*
 * Cross-node steal by a CPU of node @dst: may it take @tctx's task, or is
 * the task settled on its node (settled_kept) while the budget is young?
 */
__hidden bool numa_steal_settled_ok(struct task_ctx *tctx, u32 dst)
{
	if (numa_mode == NUMA_OFF || !tctx || tctx->node_rt < numa_interval_ns)
		return true;
	if (node_unused[dst & NODE_MASK] >= NUMA_SETTLED_TRIES)
		return true;
	stat_inc(STAT_NUMA_SETTLED_KEPT);
	return false;
}

/*
 * active_balance's mark: preempt @cpu so that numa_active_take() sends the task
 * running there now to node @to. Also used by home.bpf.c's pass.
 */
__hidden void numa_active_mark(s32 cpu, u32 to, u64 now)
{
	if (!cpu_valid(cpu))
		return;
	active_at[cpu & CPU_MASK] = now;
	active_pid[cpu & CPU_MASK] = cpu_diag[cpu & CPU_MASK].run_pid;
	active_to[cpu & CPU_MASK] = to + 1;
	kick_cpu(cpu, SCX_KICK_PREEMPT);
}

/*
 * May one task move from node @src to node @dst to join its process's
 * preferred LLC there (cache.bpf.c, cross-node aggregation)? The test of a
 * wake_follow: @dst not overloaded with it, and the imbalance
 * left within the allowance, so no balance pass sends it back.
 */
__hidden bool numa_may_gather(u32 dst, u32 src)
{
	struct numa_node_fig to, from;

	if (nr_nodes < 2)
		return true;
	if (dst >= MAX_NODES || src >= MAX_NODES || dst == src)
		return false;
	/*
	 * The verifier learns the bound above on a copy only; mask too, behind
	 * barrier_var() so that the compiler cannot drop the mask as redundant.
	 */
	barrier_var(dst);
	barrier_var(src);
	dst &= NODE_MASK;
	src &= NODE_MASK;
	to = numa_fig(dst);
	from = numa_fig(src);
	return numa_rule_may_gather(numa_mode, &to, &from);
}

/* ---- steals across nodes (pull.bpf.c steal_remote) ---- */

/* is some node other than @cpu's overloaded (node_overloaded)? */
static __always_inline bool numa_other_overloaded(s32 cpu)
{
	u32 own = cpu_node[cpu & CPU_MASK], i;

	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		if (i != own && numa_node_overloaded(i, 0))
			return true;
	}
	return false;
}

/*
 * steal_remote (pull.bpf.c): is a cross-node steal possible at all for @cpu now
 * (@going_idle: nothing else to run here)?
 */
__hidden bool numa_steal_open(s32 cpu, bool going_idle)
{
	if (numa_mode == NUMA_OFF)
		return steal_cross_node;
	return (going_idle && idle_pull_across) ||
	       node_budget[cpu_node[cpu & CPU_MASK] & NODE_MASK] > 0 ||
	       numa_other_overloaded(cpu);
}

/*
 * May @cpu steal queued work from @victim in another node? NUMA_STEAL_NO;
 * NUMA_STEAL_BUDGET within the balance pass's budget (balance_pass), one unit of
 * which is now taken; or NUMA_STEAL_OVERLOAD, the victim's node being
 * overloaded while ours is not (node_overloaded). The caller reports the outcome to
 * numa_steal_end(), which gives the unit back if nothing was stolen.
 */
__hidden u32 numa_may_steal_across(s32 cpu, s32 victim)
{
	u32 n, vn;

	if (numa_mode == NUMA_OFF)
		return steal_cross_node ? NUMA_STEAL_BUDGET : NUMA_STEAL_NO;
	n = cpu_node[cpu & CPU_MASK] & NODE_MASK;
	vn = cpu_node[victim & CPU_MASK];
	if (vn == node_src[n] && numa_budget_take(n))
		return NUMA_STEAL_BUDGET;
	if (numa_node_overloaded(vn, 0) && !numa_node_overloaded(n, 0))
		return NUMA_STEAL_OVERLOAD;
	return NUMA_STEAL_NO;
}

/*
 * idle_pull_across's answers during one steal scan of each CPU: a bit per node
 * asked, and per node allowed. Counting a node's tasks now walks its CPUs,
 * so each node is asked once per scan. Kept here, not in the caller's
 * loop: the verifier tracks a loop's stack scalars exactly and walked
 * every combination of bits, which made loading with --idle-pull-across
 * slow (docs/decisions.md, "Verifier load time").
 */
static u64 idle_pull_asked[MAX_CPUS], idle_pull_allowed[MAX_CPUS];

/* @cpu starts a steal scan that may ask numa_idle_pull_ok() */
__hidden void numa_idle_pull_begin(s32 cpu)
{
	idle_pull_asked[cpu & CPU_MASK] = 0;
	idle_pull_allowed[cpu & CPU_MASK] = 0;
}

/*
 * idle_pull_across: may @cpu, about to go idle, pull from node @vn, which holds
 * enough more tasks now (numa_rule_idle_pull())? The caller steals with
 * NUMA_STEAL_IDLE if so.
 */
__hidden bool numa_idle_pull_ok(s32 cpu, u32 vn)
{
	u32 c = cpu & CPU_MASK, n = cpu_node[c] & NODE_MASK;
	u64 bit;

	if (!idle_pull_across || numa_mode == NUMA_OFF)
		return false;
	vn &= NODE_MASK;
	bit = 1ULL << vn;
	if (!(idle_pull_asked[c] & bit)) {
		idle_pull_asked[c] |= bit;
		if (numa_rule_idle_pull(numa_mode, numa_nr_now(vn, -1), node_nr_cpus(vn),
					numa_nr_now(n, cpu), node_nr_cpus(n), node_imb_nr[n]) > 0)
			idle_pull_allowed[c] |= bit;
	}
	return idle_pull_allowed[c] & bit;
}

/* the outcome of a steal numa_may_steal_across() allowed for @why */
__hidden void numa_steal_end(s32 cpu, u32 why, bool stole)
{
	if (!stole) {
		if (why == NUMA_STEAL_BUDGET && numa_mode != NUMA_OFF)
			__sync_fetch_and_add(&node_budget[cpu_node[cpu & CPU_MASK] & NODE_MASK], 1);
		return;
	}
	stat_inc(why == NUMA_STEAL_OVERLOAD ? STAT_XNODE_STEAL_OVERLOAD :
		 why == NUMA_STEAL_IDLE ? STAT_XNODE_STEAL_IDLE : STAT_XNODE_STEAL_BALANCE);
}
