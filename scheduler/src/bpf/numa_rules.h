/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_rules.h - the NUMA policy's pure rules (rules.h says what "pure"
 * means). numa.bpf.c says where each rule applies and calls them with
 * its globals; src/rules.rs tests them.
 *
 * Fixed point: 1 task, or 1 busy CPU, == 1 << LOAD_SHIFT.
 */
#ifndef __LOCALITY_NUMA_RULES_H
#define __LOCALITY_NUMA_RULES_H

#include "rules.h"

/* what the policy sees of one node (numa_load.bpf.h's numa_fig() fills it) */
struct numa_node_fig {
	u32 cpus;	/* its CPUs */
	u32 nr_last;	/* runnable tasks at the last whole sample (node_nr_last) */
	u32 load;	/* decayed runnable average (node_load) */
	u32 util;	/* decayed utilisation (node_util) */
	u32 placed;	/* new tasks the averages have not taken up yet (node_placed) */
	u32 imb_nr;	/* upstream allowance, imb_numa_nr (node_imb_nr) */
};

/*
 * The decayed averages (runnable tasks, utilisation, placed tasks) move
 * 1/2^LOAD_DECAY_SHIFT of the way to their target every LOAD_STEP_NS of
 * time, whatever the heartbeat's period: a sample that comes after a gap
 * of several steps stands for all of them, as if the target had been
 * sampled at every step (numa_rule_load_steps()). So the averages' time
 * constant (8 steps, 32 ms) stays the same when the period changes.
 */
static __always_inline u32 numa_rule_load_steps(u64 gap)
{
	u64 k = (gap + LOAD_STEP_NS / 2) / LOAD_STEP_NS;

	return k < 1 ? 1 : k > LOAD_MAX_STEPS ? LOAD_MAX_STEPS : k;
}

/*
 * @old after @steps steps towards @target: the distance left is
 * (1 - 1/2^LOAD_DECAY_SHIFT)^steps of the distance, rounded down, so the
 * average reaches its target; one step is exactly "move up by
 * ceil(distance / 8)", the single-step rule this generalises.
 */
static __always_inline u32 numa_rule_load_decay(u32 old, u32 target, u32 steps)
{
	u64 keep = 1 << 16, base = (1 << 16) - (1 << (16 - LOAD_DECAY_SHIFT));
	u32 i;

	/* keep = base^steps in 16-bit fixed point, by squaring (steps <= 32) */
	for (i = 0; i < 6; i++) {
		if (steps & (1U << i))
			keep = (keep * base) >> 16;
		base = (base * base) >> 16;
	}
	if (old >= target)
		return target + (u32)(((u64)(old - target) * keep) >> 16);
	return target - (u32)(((u64)(target - old) * keep) >> 16);
}

/* load in tasks: the average plus what it has not caught up with, rounded */
static __always_inline u32 numa_rule_tasks(const struct numa_node_fig *n)
{
	return (n->load + n->placed + (1 << (LOAD_SHIFT - 1))) >> LOAD_SHIFT;
}

/*
 * Busy CPUs: the utilisation plus new tasks the average has not taken up
 * yet, rounded, at most the node's CPUs.
 */
static __always_inline u32 numa_rule_busy(const struct numa_node_fig *n)
{
	u32 b = (n->util + n->placed + (1 << (LOAD_SHIFT - 1))) >> LOAD_SHIFT;

	return b < n->cpus ? b : n->cpus;
}

/* idle CPUs once @extra more tasks run there */
static __always_inline s32 numa_rule_idle(const struct numa_node_fig *n, u32 extra)
{
	s32 i = (s32)n->cpus - (s32)numa_rule_busy(n) - (s32)extra;

	return i > 0 ? i : 0;
}

/*
 * node_overloaded: is the node overloaded, counting @extra tasks about to be added?
 * The kernel's group_is_overloaded(): more runnable tasks than CPUs (at
 * the last sample) and either the utilisation or the runnable average
 * past the capacity with imbalance_pct 117. The kernel applies its NUMA
 * allowance only while the busiest group is not overloaded
 * (calculate_imbalance() returns before adjust_numa_imbalance()). The
 * task count alone is not enough: a lightly loaded communicating workload
 * (wakelat at half load) often has more tasks runnable at one instant than
 * CPUs while its node is far from busy, and treating that as overload
 * spread it over both nodes of numa2 at every wake-up.
 */
static __always_inline bool numa_rule_overloaded_by(const struct numa_node_fig *n, u32 extra,
						    u64 extra_util)
{
	u64 cap = (u64)n->cpus << LOAD_SHIFT;
	u64 placed = n->placed + extra_util;

	if (n->nr_last + extra <= n->cpus)
		return false;
	return ((u64)n->util + placed) * NUMA_IMB_PCT > cap * 100 ||
	       ((u64)n->load + placed) * 100 > cap * NUMA_IMB_PCT;
}

/* ... with @extra tasks each counted as a whole busy CPU */
static __always_inline bool numa_rule_overloaded(const struct numa_node_fig *n, u32 extra)
{
	return numa_rule_overloaded_by(n, extra, (u64)extra << LOAD_SHIFT);
}

/*
 * A task's utilisation: the share of time it ran (1 << LOAD_SHIFT: all
 * the time), an average that halves every NUMA_UTIL_WINDOW_NS, the time
 * scale of the nodes' averages. sched_ext tasks have no util_avg (PELT
 * runs for the fair class only), so ops.stopping and ops.tick keep this one:
 * numa_rule_util_add() adds a run of @used ns ending at @now, and once a
 * window or more has passed since @u->at folds the share run over that
 * span into the average, one halving per window passed. A task that slept
 * for several windows ran a small share of them: its average drops as the
 * kernel's util_avg decays while a task sleeps.
 */
struct numa_task_util {
	u64 at;		/* start of the span not folded yet, 0: none yet */
	u64 run;	/* ns run since @at */
	u32 util;	/* the average, fixed point */
};

static __always_inline void numa_rule_util_add(struct numa_task_util *u, u64 now, u64 used)
{
	u64 span, frac, n;

	if (!u->at)
		u->at = now > used ? now - used : 1;
	u->run += used;
	span = now > u->at ? now - u->at : 0;
	if (span < NUMA_UTIL_WINDOW_NS)
		return;
	n = span / NUMA_UTIL_WINDOW_NS;
	frac = ((u->run < span ? u->run : span) << LOAD_SHIFT) / span;
	if (n >= 32)
		u->util = frac;
	else
		u->util = (u->util >> n) + frac - (frac >> n);
	u->at = now;
	u->run = 0;
}

/* @u's average at @now: halved once for every whole window since it was folded */
static __always_inline u32 numa_rule_util_now(const struct numa_task_util *u, u64 now)
{
	u64 n = u->at && now > u->at ? (now - u->at) / NUMA_UTIL_WINDOW_NS : 0;

	return n >= 32 ? 0 : u->util >> n;
}

/*
 * The allowance of @mode (enum numa_mode): the part of an idle-CPU
 * imbalance to correct. @imb: idle CPUs of the local (destination) node
 * minus those of the busiest; @busiest_idle, @busiest_cpus: the busiest
 * node's idle CPUs and CPUs; @local_running: tasks running on the local
 * node with the one to be moved; @local_imb_nr: the local node's allowance.
 *
 * NUMA_UPSTREAM (Linux's fair.c since 5.19, adjust_numa_imbalance()): 0 if
 *   local_running <= imb_numa_nr and imb <= NUMA_IMBALANCE_MIN (2), else
 *   imb unchanged. local_running counts the task being placed, like the
 *   kernel's local->sum_nr_running + 1. imb_numa_nr is computed by the
 *   agent (numa.rs).
 * NUMA_IDLE_CPUS (Mel Gorman's v2 patch, Dec 2019, as posted):
 *   imbalance_adj = max(2, (busiest_cpus * (imbalance_pct - 100) / 100) >> 1),
 *   imbalance_max = busiest_cpus / 2 + imbalance_adj, with the imbalance_pct
 *   of NUMA domains at the time, 125; 0 when imb <= imbalance_adj and the
 *   busiest node has at least imbalance_max idle CPUs, else imb.
 * NUMA_NO_ALLOWANCE (the kernel before Gorman's patch), NUMA_OFF: no
 *   allowance, imb unchanged.
 */
static __always_inline s32 numa_rule_adjust(u32 mode, s32 imb, s32 busiest_idle,
					    u32 busiest_cpus, u32 local_running,
					    u32 local_imb_nr)
{
	if (imb <= 0)
		return 0;
	if (mode == NUMA_UPSTREAM) {
		if (local_running <= local_imb_nr && imb <= NUMA_IMBALANCE_MIN)
			return 0;
	} else if (mode == NUMA_IDLE_CPUS) {
		s32 adj = (s32)(busiest_cpus * (NUMA_IMB_PCT_2019 - 100) / 100) >> 1;
		s32 max;

		if (adj < 2)
			adj = 2;
		max = (s32)(busiest_cpus >> 1) + adj;
		if (imb <= adj && busiest_idle >= max)
			return 0;
	}
	return imb;
}

/*
 * Tasks that may move from @src to @dst; @extra: runnable tasks of src not
 * in its figures yet (a waking task). An overloaded @src is balanced by
 * load in tasks, without the allowance; otherwise by idle CPUs, with it.
 * A move corrects half of what remains (the kernel's "imbalance >>= 1"): a
 * node pair 3 vs 1 moves one task.
 */
static __always_inline u32 numa_rule_moves(u32 mode, const struct numa_node_fig *src,
					   const struct numa_node_fig *dst, u32 extra)
{
	s32 imb, si;

	if (numa_rule_overloaded(src, extra)) {
		imb = (s32)(numa_rule_tasks(src) + extra) - (s32)numa_rule_tasks(dst);
	} else {
		si = numa_rule_idle(src, extra);
		imb = numa_rule_adjust(mode, numa_rule_idle(dst, 0) - si, si, src->cpus,
					numa_rule_busy(dst) + 1, dst->imb_nr);
	}
	return imb > 0 ? (u32)imb >> 1 : 0;
}

/*
 * idle_pull_across, a CPU about to go idle in node @dst (@dst_nr tasks there now,
 * its own CPU counted free) looks at node @src (@src_nr tasks now): how
 * many tasks should come? The kernel's newidle balance at a NUMA level
 * whose child domains prefer spreading (calculate_imbalance() for a group
 * with spare capacity, prefer_sibling): the difference in tasks per CPU,
 * in tasks, then the allowance of @mode with the destination's running
 * tasks plus the one to move (adjust_numa_imbalance()), then halved. Tasks
 * counted now, not averaged: the pull happens at the moment one node has a
 * queue and the other an idle CPU, which averages of a bursty load (wakelat
 * at full load under emulation: 20-30% busy CPUs) do not show.
 */
static __always_inline u32 numa_rule_idle_pull(u32 mode, u32 src_nr, u32 src_cpus, u32 dst_nr,
					       u32 dst_cpus, u32 dst_imb_nr)
{
	s64 d = (s64)dst_cpus * src_nr - (s64)src_cpus * dst_nr;
	u32 sum = src_cpus + dst_cpus;
	s32 imb, src_idle;

	if (!src_cpus || !dst_cpus || d <= 0)
		return 0;
	/* per CPU, back in tasks of an average node, rounded */
	imb = (s32)((2 * (u64)d + sum / 2) / sum);
	src_idle = src_nr < src_cpus ? (s32)(src_cpus - src_nr) : 0;
	imb = numa_rule_adjust(mode, imb, src_idle, src_cpus, dst_nr + 1, dst_imb_nr);
	return imb > 0 ? (u32)imb >> 1 : 0;
}

/*
 * place_new: does a new process whose parent runs on node @parent stay near
 * it rather than start on node @least (the least loaded other node)? Yes
 * while the parent's node is not overloaded and is within the allowance
 * against @least (busiest = the parent's node, local_running = its busy
 * CPUs + 1), as in the kernel's find_idlest_group(). NUMA_OFF: always.
 */
static __always_inline bool numa_rule_new_stays(u32 mode, const struct numa_node_fig *parent,
						const struct numa_node_fig *least)
{
	s32 si;

	if (mode == NUMA_OFF)
		return true;
	if (numa_rule_overloaded(parent, 1))
		return false;
	si = numa_rule_idle(parent, 0);
	return numa_rule_adjust(mode, numa_rule_idle(least, 0) - si, si, parent->cpus,
				numa_rule_busy(parent) + 1, parent->imb_nr) <= 0;
}

/*
 * place_new as Bligh and Hohnbaum's 2003 exec balancing placed a new program
 * (--exec-placement=least-loaded), on the tasks of each node now
 * (numa_load.bpf.c's numa_nr_now()), as they counted nr_running per node: does
 * the program stay on its parent's node, with @parent_nr other tasks,
 * rather than start on the least loaded node, with @least_nr? It goes only if @least_nr < @parent_nr:
 * afterwards that node runs @least_nr + 1 <= @parent_nr, so the move evens
 * the nodes out, and N programs started together end one per node. Not a
 * decayed average: at a program's first slice end it still holds what ran
 * there just before, and every other node looked as busy as the parent's
 * (docs/decisions.md). No allowance: it spreads even two programs that talk
 * to each other.
 */
static __always_inline bool numa_rule_new_stays_least_loaded(u32 parent_nr, u32 least_nr)
{
	return least_nr >= parent_nr;
}

/*
 * place_new's least loaded node, over per-node figures: of the nodes
 * 0..@nr_nodes-1 not in @skip (a mask of node ids), the one with the
 * fewest tasks @nr[] (all 0: by the decayed load alone, as
 * --exec-placement=allowance and the cross-node candidates choose), on a
 * tie the one with the lower decayed load @load[], then the lower id. Its
 * count of tasks in *@least_nr (~0 if none); -1 if every node is skipped.
 * numa_place.bpf.c's numa_least_fill() fills @nr (numa_nr_now(): tasks on the
 * node now) and @load (node_load + node_placed) for the nodes not skipped.
 */
static __always_inline s32 numa_rule_least(const u32 *nr, const u32 *load, u32 nr_nodes, u64 skip,
					   u32 *least_nr)
{
	u32 i, best_nr = ~0U, best_load = ~0U;
	s32 best = -1;

	rules_for(i, 0, nr_nodes) {
		u32 n = i & (MAX_NODES - 1);

		if (i >= MAX_NODES)
			break;
		if (skip & (1ULL << n))
			continue;
		if (nr[n] < best_nr || (nr[n] == best_nr && load[n] < best_load)) {
			best_nr = nr[n];
			best_load = load[n];
			best = n;
		}
	}
	*least_nr = best_nr;
	return best;
}

/*
 * place_new, least-loaded form (--exec-placement=least-loaded): one choice for
 * a new program on node @src, which runs @parent_nr tasks now. The least
 * loaded node not in @tried (numa_rule_least() over @nr and @load; @tried
 * holds @src), or @src itself when the program stays by its parent
 * (numa_rule_new_stays_least_loaded()); -1 when every node was tried.
 * numa_place_new() calls it once per node it tries: a node whose claim
 * holds but has no idle CPU for the program joins @tried.
 */
static __always_inline s32 numa_rule_new_least_loaded(const u32 *nr, const u32 *load, u32 nr_nodes,
						      u64 tried, u32 src, u32 parent_nr)
{
	u32 least_nr;
	s32 d = numa_rule_least(nr, load, nr_nodes, tried, &least_nr);

	if (d < 0)
		return -1;
	return numa_rule_new_stays_least_loaded(parent_nr, least_nr) ? (s32)src : d;
}

/*
 * place_new's first test in Bligh and Hohnbaum's exec balancing
 * (sched_best_cpu(): `nr_running <= 2`): a new program whose own CPU runs
 * @cpu_nr tasks, itself included, stays there, without a look at the other
 * nodes, while that is at most NUMA_EXEC_QUIET_NR: it shares its CPU with
 * at most one task, most often the parent that started it and waits for
 * it. Only a program started onto a CPU that already queues work looks for
 * the least loaded node.
 */
static __always_inline bool numa_rule_new_cpu_quiet(u32 cpu_nr)
{
	return cpu_nr <= NUMA_EXEC_QUIET_NR;
}

/*
 * place_new at exec (place_exec), least-loaded: a program that stayed on
 * its node at its first check is checked again at each slice end, for one balance interval
 * @interval_ns. Is its placement over after this check, @since_first_ns
 * after its first? Yes once it moved (@moved), at once where the rule
 * decides only once (@recheck false: --exec-placement=allowance), and once
 * the interval has passed.
 */
static __always_inline bool numa_rule_exec_done(bool moved, bool recheck, u64 since_first_ns,
						u64 interval_ns)
{
	return moved || !recheck || since_first_ns >= interval_ns;
}

/*
 * active_balance's mark on a CPU (and home.bpf.c's), set @age_ns ago for the task
 * @marked_pid then running there: what it means for @pid, a task being
 * enqueued from that CPU. NUMA_MARK_EXPIRED past one balance interval
 * @interval_ns (the task stopped on its own before the kick landed; the
 * caller clears it), NUMA_MARK_MINE for the marked task, else
 * NUMA_MARK_OTHER: a task that ran there after it never takes its move.
 */
enum numa_mark_verdict {
	NUMA_MARK_OTHER,
	NUMA_MARK_MINE,
	NUMA_MARK_EXPIRED,
};

static __always_inline u32 numa_rule_mark_for(s32 pid, s32 marked_pid, u64 age_ns, u64 interval_ns)
{
	if (age_ns > interval_ns)
		return NUMA_MARK_EXPIRED;
	return pid == marked_pid ? NUMA_MARK_MINE : NUMA_MARK_OTHER;
}

/*
 * place_new's claim: count a new program on the node its placement chose, in
 * that node's placed figure *@placed (node_placed), as part of the choice:
 * only if the figure still reads @seen, the value the choice was made with
 * (one compare-and-swap). The choice compares nodes by their figures, and
 * only placements raise them between samples: two new programs deciding at
 * once read the same least loaded node, one claim succeeds and the other
 * fails, so that one decides again with the first counted. Returns whether
 * the claim succeeded.
 */
static __always_inline bool numa_rule_claim(u32 *placed, u32 seen)
{
	return __sync_val_compare_and_swap(placed, seen, seen + (1 << LOAD_SHIFT)) == seen;
}

/*
 * push_across and node_overloaded: may a waking task whose node @src has
 * no idle CPU for it go to node @dst? Only out of a node that is overloaded with the task
 * counted, into one that is not. A node with spare capacity keeps its
 * waking tasks. In its own node the task counts as one more runnable task
 * and adds its own utilisation @task_util to the averages (the kernel's
 * task_util() in find_idlest_group()), not a whole busy CPU: a task with
 * a tenth of a CPU's work that wakes while both CPUs of a 2-CPU node run
 * does not make that node overloaded. The destination is tested with the
 * task as a whole busy CPU.
 */
static __always_inline bool numa_rule_push_across(const struct numa_node_fig *src,
						  const struct numa_node_fig *dst,
						  u32 task_util)
{
	return numa_rule_overloaded_by(src, 1, task_util) && !numa_rule_overloaded(dst, 1);
}

/*
 * Cache-aware aggregation across nodes (cache.bpf.c): may one task of node
 * @from come to node @to, its process's preferred LLC being there? Only
 * while @to is not overloaded with it and the balance would not send a
 * task back (balance_pass from @to to @from with the task counted: 0 moves).
 * The task still counts in @from's figures, as the balance pass would see
 * the two nodes at the moment it moves. NUMA_OFF: no policy to keep, yes.
 */
static __always_inline bool numa_rule_may_gather(u32 mode, const struct numa_node_fig *to,
						 const struct numa_node_fig *from)
{
	if (mode == NUMA_OFF)
		return true;
	return !numa_rule_overloaded(to, 1) && !numa_rule_moves(mode, to, from, 1);
}

/*
 * task_may_cross: may a task that last changed node at @xnode_at (0: never) change
 * node again at @now? Only @interval_ns later in policy modes. A clock
 * that reads earlier on this CPU counts as no time passed (time_delta()).
 */
static __always_inline bool numa_rule_may_cross(u32 mode, u64 xnode_at, u64 now,
						u64 interval_ns)
{
	s64 since = (s64)(now - xnode_at);

	if (mode == NUMA_OFF || !xnode_at)
		return true;
	return (u64)(since > 0 ? since : 0) >= interval_ns;
}

/*
 * wake_follow's partner test. A pair wakes the same partner over and over; a
 * task serving many (a hackbench sender writes to every receiver, a
 * dispatcher feeds a pool) switches wakee all the time, and pulling each
 * wakee to its node piles them there. Each waker counts the changes of its
 * wakee (wakee_flips, halved every second, the counter the kernel keeps
 * for wake_wide()); a wakee follows only while both its waker's count and
 * its own are below @llc_cpus, the CPUs of the waker's LLC, i.e. both have
 * few partners. A task with no context counts as -1 (few).
 */
static __always_inline bool numa_rule_few_partners(s64 waker_flips, s64 wakee_flips,
						   u32 llc_cpus)
{
	return waker_flips < (s64)llc_cpus && wakee_flips < (s64)llc_cpus;
}

#endif /* __LOCALITY_NUMA_RULES_H */
