/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pull.bpf.c - what does a CPU with an empty queue run? (ops.dispatch)
 *
 * Idea: before going idle, a CPU steals a queued task from the nearest
 * overloaded CPU (one running a task with others waiting in its DSQ),
 * level by level (each named by its counter):
 *
 *   steal_smt      its SMT siblings          (shares L1/L2: nearly free to move)
 *   steal_llc      the other CPUs of its LLC (shares the LLC)
 *   steal_node     the other CPUs of its node
 *   steal_offline  DSQs of offline CPUs, at any distance (never strand a task)
 *   steal_remote   CPUs of other nodes, only if numa_may_steal_across()
 *      (numa.bpf.c) allows it: with --numa-balance=off on every dispatch (as
 *      --steal-cross-node did), else within the budget a cross-node
 *      balance pass opened for this node, from the node it named, from
 *      a node that is overloaded now while this one is not (node_overloaded), or,
 *      when this CPU is about to go idle, from a node holding enough more
 *      tasks now (idle_pull_across, numa_idle_pull_ok(): a task queued past the
 *      migration cost)
 *
 * The victim's lowest-vtime task that may run here (p->cpus_ptr) and is not
 * running is moved to this CPU's local DSQ. A CPU whose previous task is
 * still runnable (so it is not about to go idle) only steals from victims
 * with at least two tasks waiting, see pull_steal(). Within a level the scan starts
 * at a per-CPU rotating offset so that stealers do not all converge on the
 * first CPU of the list. Loops are bounded by the list lengths (at most
 * MAX_CPUS) and by STEAL_SCAN_MAX tasks per victim DSQ.
 *
 * The other half of pulling is at enqueue: an idle CPU runs ops.dispatch
 * only when something wakes it. When ops.enqueue is about to queue a task
 * behind a running one, pull_claim_near() claims an idle CPU allowed for
 * the task in the victim's LLC (else node) and the task goes straight to
 * it: one wake-up, where queuing it and kicking a stealer would cost a
 * wake-up, a steal scan and a move between DSQs. Only when none is idle is
 * the task queued, and pull_kick_stealer() may still wake a CPU of another
 * node under node_overloaded. --enqueue-handoff says for which tasks: by
 * default (requeued) only one whose enqueue is not a wake-up (its slice
 * ended, its affinity changed; also a new task, although its fork
 * searched); all: every one; off: none. A waking task was just through the
 * idle search of ops.select_cpu, so by default it waits on its CPU, as in
 * Sistare's series, until that CPU frees or a CPU going idle steals it:
 * handing it over cost a rescheduling IPI each and more migrations, for
 * no measured gain (docs/decisions.md, "The hand-off at enqueue"). With
 * cache-aware scheduling on, pull_kick_stealer() still wakes a CPU of its
 * LLC or node to steal it.
 *
 * Origin: the stealing half of Steve Sistare's 2018 CFS rework (steal a task
 * from an overloaded CPU of the same LLC when going idle, found through a
 * sparse overload mask). Here the overload mask is a per-CPU array
 * (overloaded[]) with a count of its set entries per LLC and per node, so
 * a level without an overloaded CPU is skipped unread; the hierarchy is
 * extended to SMT and node levels, and the queues are sched_ext DSQs.
 *
 * Cache-aware (cache.bpf.c): between steal_llc and steal_node an
 * aggregation level (cache_aggr_pull) steals tasks of the node's other LLCs
 * whose process prefers this CPU's LLC (gate "into"); steal_node and
 * steal_remote skip tasks whose preferred LLC is the
 * victim's while the gate "out" forbids leaving it; ops.enqueue hands a
 * task over (pull_claim_near()) as without it, except that a task whose
 * process prefers another LLC is left to pull_kick_stealer(), which wakes a
 * stealer of that LLC, and one in its preferred LLC leaves it only as
 * cache_keep_busy() allows (the gate "out", --cache-busy-wake).
 *
 * Knobs: no_steal disables every level but steal_offline (it is about
 * correctness, not balance), the hand-over at enqueue and the stealer kick;
 * handoff_wake / handoff_requeue (--enqueue-handoff) the hand-over of a
 * waking / a requeued task;
 * steal_cross_node (off mode) and the NUMA budget feed
 * numa_may_steal_across().
 * Stats: STAT_STEAL_{SMT, LLC, NODE, REMOTE, OFFLINE}, STAT_ENQ_HANDOFF
 * (STAT_ENQ_HANDOFF_WAKE: of those, waking tasks), STAT_KICK_STEALER.
 */

#include "locality.bpf.h"
#include "pull.bpf.h"
#include "idle.bpf.h"
#include "cache.bpf.h"
#include "home.bpf.h"
#include "numa.bpf.h"
#include "decide.bpf.h"

/*
 * overloaded[cpu]: the CPU's DSQ had a task that other CPUs may run
 * queued behind a running one. A hint for stealers (Sistare's overload
 * mask), set in ops.enqueue and refreshed whenever someone looks at that
 * DSQ (cleared when it is empty). Pinned tasks have their own DSQ and
 * never set it. Races only make it stale:
 * a stale 1 costs one short DSQ walk; a stale 0 delays stealing until the
 * next insert there. Neither strands a task: the owner drains its own DSQ
 * regardless, and offline CPUs' DSQs are drained without the hint.
 *
 * nr_over_llc[] / nr_over_node[] count the CPUs whose hint is set, kept
 * exact by changing a hint only with a compare-and-swap. They are what
 * makes the search cheap when nothing is overloaded, as Sistare's mask
 * is: a CPU going idle skips every level that has no overloaded CPU
 * instead of reading each CPU's hint (at light load, the common case).
 */
u32 overloaded[MAX_CPUS];
u32 nr_over_llc[MAX_LLCS];
u32 nr_over_node[MAX_NODES];

__hidden void pull_mark_overloaded(s32 cpu)
{
	u32 c = cpu & CPU_MASK;

	if (READ_ONCE(overloaded[c]) || __sync_val_compare_and_swap(&overloaded[c], 0, 1) != 0)
		return;
	__sync_fetch_and_add(&nr_over_llc[cpu_llc[c] & LLC_MASK], 1);
	__sync_fetch_and_add(&nr_over_node[cpu_node[c] & NODE_MASK], 1);
}

__hidden void pull_clear_overloaded(s32 cpu)
{
	u32 c = cpu & CPU_MASK;

	if (!READ_ONCE(overloaded[c]) || __sync_val_compare_and_swap(&overloaded[c], 1, 0) != 1)
		return;
	__sync_fetch_and_sub(&nr_over_llc[cpu_llc[c] & LLC_MASK], 1);
	__sync_fetch_and_sub(&nr_over_node[cpu_node[c] & NODE_MASK], 1);
}

/* overloaded CPUs of other nodes than @n, from the counts (a hint) */
static __always_inline bool over_elsewhere(u32 n)
{
	u32 i, sum = 0;

	bpf_for(i, 0, nr_nodes) {
		if (i != n)
			sum += READ_ONCE(nr_over_node[i & NODE_MASK]);
	}
	return sum > 0;
}

/* steal_from() flags */
#define STEAL_PINNED	8	/* scan the victim's pinned DSQ (offline drain) */
#define STEAL_CROSS	1	/* victim on another node: NUMA policy per task */
#define STEAL_GATE	2	/* victim in another LLC: cache gate "out" */
#define STEAL_AGGR	4	/* only tasks preferring our LLC, gate "into" */
#define STEAL_IDLE	16	/* idle_pull_across: settled tasks too (settled_kept passed over) */

/* the steal counter that names a move from @victim to @cpu (decide_why()) */
static __always_inline u32 steal_rule(s32 cpu, s32 victim, u32 flags)
{
	u32 c = cpu & CPU_MASK, v = victim & CPU_MASK;

	if (flags & STEAL_AGGR)
		return STAT_CACHE_AGGR_PULL;
	if (!cpu_is_online[v])
		return STAT_STEAL_OFFLINE;
	if (cpu_node[c] != cpu_node[v])
		return STAT_STEAL_REMOTE;
	if (cpu_core[c] == cpu_core[v])
		return STAT_STEAL_SMT;
	return cpu_llc[c] == cpu_llc[v] ? STAT_STEAL_LLC : STAT_STEAL_NODE;
}

/*
 * STEAL_SCAN_MAX, read from a writable variable: the verifier does not
 * know its value, so the scan below does not decide its exit on a known
 * count, and the verifier walks the loop once instead of once per task.
 */
u32 steal_scan_max = STEAL_SCAN_MAX;

/*
 * Move one task from @victim's DSQ to @cpu's local DSQ. A global function:
 * every level calls it, and the verifier checks a global function once
 * instead of at each call site and each state of the scan loops.
 */
__noinline bool steal_from(s32 cpu, s32 victim, u32 flags)
{
	struct task_struct *p;
	struct task_ctx *tctx = NULL;
	bool cross = flags & STEAL_CROSS;
	u64 now = cross ? scx_bpf_now() : 0;
	u32 seen = 0, src = cpu_llc[victim & CPU_MASK], dst = cpu_llc[cpu & CPU_MASK];

	u64 dsq = flags & STEAL_PINNED ? pinned_dsq(victim) : (u64)victim;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		if (++seen > steal_scan_max)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		if (scx_bpf_task_running(p))
			continue;
		if (flags & (STEAL_GATE | STEAL_AGGR)) {
			u64 util;
			s32 pref = cache_pref(p, &util);

			if (flags & STEAL_AGGR) {
				if (pref < 0 || (u32)pref != dst)
					continue;
				if (!cache_may_enter(src, dst, util)) {
					stat_inc(STAT_CACHE_REFUSE_OVERAGGR);
					decide_refused(p, victim, cpu, STAT_CACHE_REFUSE_OVERAGGR);
					continue;
				}
			} else if (pref >= 0 && (u32)pref == src &&
				   !cache_may_leave(src, dst, util)) {
				stat_inc(STAT_CACHE_REFUSE_OUT);
				decide_refused(p, victim, cpu, STAT_CACHE_REFUSE_OUT);
				continue;
			}
		}
		if (cross) {
			/* NUMA policy: at most one node change per interval */
			tctx = task_ctx(p);
			if (!numa_task_may_cross(tctx, now)) {
				stat_inc(STAT_NUMA_TASK_RECENT);
				decide_refused(p, victim, cpu, STAT_NUMA_TASK_RECENT);
				continue;
			}
			/*
			 * idle_pull_across takes a task that has waited past the kernel's
			 * migration cost: one queued just now (the other end of a
			 * pair) is cache hot and its CPU frees up soon
			 */
			if ((flags & STEAL_IDLE) && tctx && tctx->queued_at &&
			    time_delta(now, tctx->queued_at) < NUMA_PULL_WAIT_US * 1000ULL) {
				stat_inc(STAT_NUMA_PULL_HOT);
				continue;
			}
			if (!(flags & STEAL_IDLE) &&
			    !numa_steal_settled_ok(tctx, cpu_node[cpu & CPU_MASK])) {
				decide_refused(p, victim, cpu, STAT_NUMA_SETTLED_KEPT);
				continue;
			}
			if (!home_steal_ok(p, tctx, cpu_node[victim & CPU_MASK],
					   cpu_node[cpu & CPU_MASK])) {
				decide_refused(p, victim, cpu, STAT_HOME_KEPT);
				continue;
			}
		}
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			if (cross && numa_mode != NUMA_OFF)
				numa_task_crossed(tctx, now);
			if (flags & STEAL_AGGR)
				stat_inc(STAT_CACHE_AGGR_PULL);
			decide_why(tctx ?: task_ctx(p), steal_rule(cpu, victim, flags));
			return true;
		}
	}
	return false;
}

/*
 * Try @victim if it advertises queued work and has at least @min_queued
 * tasks waiting; refresh its hint.
 */
static __always_inline bool try_victim(s32 cpu, s32 victim, u32 min_queued,
				       u32 flags)
{
	u32 v = victim & CPU_MASK;

	if (victim == cpu || !overloaded[v])
		return false;
	if (min_queued > 1 && scx_bpf_dsq_nr_queued(victim) < min_queued)
		return false;
	if (steal_from(cpu, victim, flags)) {
		if (!scx_bpf_dsq_nr_queued(victim))
			pull_clear_overloaded(victim);
		return true;
	}
	if (!scx_bpf_dsq_nr_queued(victim))
		pull_clear_overloaded(victim);
	return false;
}

static __always_inline u32 rotor_next(s32 cpu)
{
	return rotor[cpu & CPU_MASK]++;
}

static bool steal_smt(s32 cpu, u32 min_queued)
{
	u32 c = cpu & CPU_MASK, i, n = cpu_nr_sibs[c];

	bpf_for(i, 0, n) {
		u32 v;

		if (i >= MAX_SMT)
			break;
		v = cpu_sibs[(c * MAX_SMT + i) & (MAX_CPUS * MAX_SMT - 1)];
		if (try_victim(cpu, v, min_queued, 0)) {
			stat_inc(STAT_STEAL_SMT);
			return true;
		}
	}
	return false;
}

/* steal_list() modes */
#define LIST_LLC	0	/* own LLC */
#define LIST_NODE	1	/* own node, other LLCs (cache gate "out") */
#define LIST_AGGR	2	/* own node, other LLCs, tasks preferring our LLC */

/*
 * Scan an LLC (LIST_LLC) or node CPU list, entries [start, end), from a
 * rotating offset. Skip CPUs sharing @cpu's core and, for the node list,
 * @cpu's LLC: earlier levels covered them.
 */
static bool steal_list(s32 cpu, u32 start, u32 end, u32 mode,
		       u32 min_queued)
{
	u32 c = cpu & CPU_MASK, n, i, rot, my_llc = cpu_llc[c], flags = 0;
	bool is_llc = mode == LIST_LLC;

	if (end <= start || end > MAX_CPUS)
		return false;
	if (cache_aware && mode == LIST_NODE)
		flags = STEAL_GATE;
	else if (mode == LIST_AGGR)
		flags = STEAL_AGGR;
	n = end - start;
	rot = rotor_next(cpu);
	/*
	 * The position is derived from the loop index each time rather than
	 * carried in a counter: a counter stays a known constant for the
	 * verifier, which then walks every iteration separately.
	 */
	bpf_for(i, 0, n) {
		u32 idx = (start + (rot + i) % n) & CPU_MASK;
		u32 v = (is_llc ? llc_cpus[idx] : node_cpus[idx]) & CPU_MASK;

		if (cpu_core[v] == cpu_core[c])
			continue;	/* self and SMT siblings: done already */
		if (!is_llc && cpu_llc[v] == my_llc)
			continue;	/* same LLC: done already */
		if (try_victim(cpu, v, min_queued, flags)) {
			if (mode != LIST_AGGR)
				stat_inc(is_llc ? STAT_STEAL_LLC : STAT_STEAL_NODE);
			return true;
		}
	}
	return false;
}

/*
 * The policy is asked only once a CPU of another node advertises queued
 * work: most dispatches find none, and the policy's node figures cost more
 * to read than the overloaded[] bytes.
 */
static bool steal_remote(s32 cpu, u32 min_queued)
{
	u32 c = cpu & CPU_MASK, i, rot;
	bool asked = false, going_idle = min_queued <= 1;

	/* idle_pull_across's answers are kept per node for this scan */
	if (going_idle && idle_pull_across)
		numa_idle_pull_begin(cpu);
	rot = rotor_next(cpu);
	bpf_for(i, 0, nr_cpus) {
		u32 v = ((rot + i) % nr_cpus) & CPU_MASK, why;
		bool stole;

		if (cpu_node[v] == cpu_node[c] || !overloaded[v])
			continue;
		if (!asked) {
			if (!numa_steal_open(cpu, going_idle))
				return false;
			asked = true;
		}
		why = numa_may_steal_across(cpu, v);
		if (why == NUMA_STEAL_NO && going_idle && idle_pull_across &&
		    numa_idle_pull_ok(cpu, cpu_node[v]))
			why = NUMA_STEAL_IDLE;
		if (why == NUMA_STEAL_NO)
			continue;
		stole = try_victim(cpu, v, min_queued,
				   STEAL_CROSS | (cache_aware ? STEAL_GATE : 0) |
				   (why == NUMA_STEAL_IDLE ? STEAL_IDLE : 0));
		numa_steal_end(cpu, why, stole);
		if (stole) {
			stat_inc(STAT_STEAL_REMOTE);
			return true;
		}
	}
	return false;
}

/* Drain DSQs of offline CPUs; they have no owner to do it. */
static bool steal_offline(s32 cpu)
{
	u32 i;

	bpf_for(i, 0, nr_cpus) {
		if (i >= MAX_CPUS)
			break;
		if (cpu_is_online[i] || !nr_queued_cpu(i))
			continue;
		/* pinned ones too: the kernel may widen their affinity */
		if (steal_from(cpu, i, 0) || steal_from(cpu, i, STEAL_PINNED)) {
			stat_inc(STAT_STEAL_OFFLINE);
			if (cpu_node[i] != cpu_node[cpu & CPU_MASK])
				stat_inc(STAT_XNODE_STEAL_OFFLINE);
			return true;
		}
	}
	return false;
}

/*
 * Called by ops.dispatch when @cpu's own DSQ is empty. @prev_runnable: the
 * task that just ran here still wants the CPU, so we are not about to go
 * idle. Then only a victim with two or more tasks waiting is worth it
 * (after the steal: 2 runnable here, 2+ there). Without that threshold two
 * CPUs running 2 and 1 tasks trade a task back and forth on every slice,
 * migrating across LLCs for no gain; with it a lasting imbalance (5 vs 1)
 * still evens out, which matters because nothing else rebalances tasks
 * that never sleep.
 */
__hidden bool pull_steal(s32 cpu, bool prev_runnable)
{
	u32 c = cpu & CPU_MASK, l = cpu_llc[c], n = cpu_node[c];
	u32 min_q = prev_runnable ? 2 : 1;

	/* each level is searched only if its counts show an overloaded CPU */
	bool in_llc = l < MAX_LLCS && READ_ONCE(nr_over_llc[l & LLC_MASK]);
	bool in_node = n < MAX_NODES &&
		       READ_ONCE(nr_over_node[n & NODE_MASK]) > READ_ONCE(nr_over_llc[l & LLC_MASK]);

	if (!no_steal) {
		if (in_llc && steal_smt(cpu, min_q))
			return true;
		if (in_llc &&
		    steal_list(cpu, llc_off[l], llc_off[l + 1], LIST_LLC, min_q))
			return true;
		/* cache-aware: first tasks of the node that prefer our LLC */
		if (cache_aware && in_node &&
		    steal_list(cpu, node_off[n], node_off[n + 1], LIST_AGGR, min_q))
			return true;
		if (in_node &&
		    steal_list(cpu, node_off[n], node_off[n + 1], LIST_NODE, min_q))
			return true;
	}
	if (nr_offline && steal_offline(cpu))
		return true;
	if (!no_steal && over_elsewhere(n) && steal_remote(cpu, min_q))
		return true;
	return false;
}

static __always_inline void handoff_count(bool wakeup)
{
	stat_inc(STAT_ENQ_HANDOFF);
	if (wakeup)
		stat_inc(STAT_ENQ_HANDOFF_WAKE);
}

/*
 * @p is about to be queued behind the task running on @victim: claim an
 * idle CPU allowed for it in the victim's LLC, else in its node, for
 * ops.enqueue to hand @p to; or -1 (also when --enqueue-handoff leaves
 * out this kind of enqueue, @wakeup or not). Such a CPU went idle after
 * the wake-up's own search, or @p comes back from its slice, which
 * searched nothing. With cache-aware scheduling, -1 for a task whose process
 * prefers another LLC (a stealer there pulls it, pull_kick_stealer()),
 * and no CPU outside its preferred LLC unless cache_keep_busy() allows.
 */
__hidden s32 pull_claim_near(struct task_struct *p __arg_trusted, s32 victim, bool wakeup)
{
	u32 v = victim & CPU_MASK, l = cpu_llc[v], n = cpu_node[v];
	s32 cpu;

	if (no_steal || !(wakeup ? handoff_wake : handoff_requeue))
		return -1;
	if (cache_aware) {
		s32 pref = cache_pref(p, NULL);

		/* preferring another LLC: a stealer there pulls it (pull_kick_stealer()) */
		if (pref >= 0 && (u32)pref != l)
			return -1;
	}
	cpu = idle_pick_llc(p, l, false);
	if (cpu >= 0) {
		handoff_count(wakeup);
		return cpu;
	}
	/* out of its preferred LLC only as the gate "out" and --cache-busy-wake allow */
	if (cache_aware && cache_keep_busy(p, l, -1))
		return -1;
	if (node_nr_cpus(n) > llc_nr_cpus(l)) {
		cpu = idle_pick_node(p, n, l);
		if (cpu >= 0) {
			handoff_count(wakeup);
			/* a move to another LLC: explain names its rule */
			decide_why(task_ctx(p), STAT_ENQ_HANDOFF);
		}
	}
	return cpu;
}

/*
 * @p was just queued on busy @victim: wake one idle CPU that may run it,
 * so that CPU's ops.dispatch pulls it instead of it waiting a slice. With
 * cache-aware scheduling off, pull_claim_near() has just found none in the
 * victim's LLC and node, or was not to look (--enqueue-handoff): only NUMA
 * node_overloaded is left. With it on, a CPU of the LLC or node is woken here for a
 * waking task too, whatever --enqueue-handoff says.
 */
__hidden void pull_kick_stealer(struct task_struct *p __arg_trusted, s32 victim)
{
	u32 v = victim & CPU_MASK;

	if (no_steal)
		return;
	if (cache_aware) {
		/* queued outside its preferred LLC: wake a CPU there */
		if (cache_kick_pref(p, victim))
			return;
		if (kick_idle_in(p, llc_cpumask(cpu_llc[v])))
			return;
		/* kept in its preferred LLC (cache_keep_busy()): only that LLC pulls it */
		if (cache_keep_busy(p, cpu_llc[v], -1))
			return;
		if (kick_idle_in(p, node_cpumask(cpu_node[v])))
			return;
	}
	/* node_overloaded: an overloaded node may be helped from another one */
	if (numa_mode != NUMA_OFF && numa_node_overloaded(cpu_node[v], 0))
		kick_idle_in(p, online_cpumask());
}

/* @victim went offline with tasks queued: wake anyone nearby to drain it. */
__hidden void pull_kick_any_near(s32 victim)
{
	u32 v = victim & CPU_MASK;

	if (kick_idle_in(NULL, llc_cpumask(cpu_llc[v])))
		return;
	if (kick_idle_in(NULL, node_cpumask(cpu_node[v])))
		return;
	{
		const struct cpumask *online = online_cpumask();

		if (online)
			kick_idle_in(NULL, online);
	}
}
