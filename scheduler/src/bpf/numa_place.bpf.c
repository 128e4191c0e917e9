/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_place.bpf.c - where may a new or waking task go across nodes?
 *
 * Idea. A task changes node at placement only where the NUMA allowance
 * (numa.bpf.c) would not send it back: a new program may start on the
 * least loaded node, a waking task whose node is full may leave it only if
 * that node is overloaded, and a task woken by a partner on another node
 * may follow it there while the pair fits the allowance.
 *
 * Origins: Bligh & Hohnbaum 2003 (exec balancing: a new program starts on
 * the least loaded node); the kernel's find_idlest_group() for the
 * allowance form; Gorman 2019 for the pair that must stay together, and
 * the kernel's wake_affine() for following the waker.
 *
 * place_new: Exec (and, with --place-at-fork, a new process: fork of a
 *    thread-group leader, p->pid == p->tgid). Default
 *    (--exec-placement=least-loaded, Bligh and Hohnbaum's exec balancing):
 *    stays where it is while its own CPU runs at most one other task
 *    (numa_cpu_nr_now(), numa_rule_new_cpu_quiet()); else starts on the
 *    node with the fewest tasks now whenever it has fewer than the parent's
 *    node without the program (numa_nr_now(), numa_rule_new_least_loaded();
 *    counted at the decision, not averaged).
 *    --exec-placement=least-loaded-always skips the first test.
 *    --exec-placement=allowance: stays near its parent (normal push) while
 *    the parent's node is not overloaded and numa_rule_adjust(idle CPUs of
 *    the least loaded node - idle CPUs of the parent's node, busiest =
 *    parent node, local_running = its busy CPUs + 1) is 0, i.e. the
 *    parent's node is within the allowance, as in the kernel's
 *    find_idlest_group(); otherwise it starts on an idle CPU of the least
 *    loaded node that has one allowed ("room"; a fuller node's idle CPU is
 *    taken only while the parent's node is still beyond the allowance
 *    against it), like the kernel's find_idlest_group(). Bligh and Hohnbaum
 *    balanced at exec only: code that forks and never execs stays on its
 *    node, with the memory it shares with its parent; the balance pass
 *    spreads it if it must. New threads and forked children start near
 *    their parent (its LLC, then node) through the normal push. Exec:
 *    sched_ext never calls ops.select_cpu for exec (the kernel returns
 *    prev_cpu for WF_EXEC before asking the BPF scheduler, and the headers
 *    have no SCX_WAKE_EXEC), so a tp_btf/sched_process_exec program takes
 *    the first test at the exec and marks a program that fails it; the
 *    placement is done at its next ops.select_cpu or ops.enqueue, and a
 *    program that stayed is checked again at its slice ends for one
 *    balance interval (numa_place_exec()).
 * push_across: Push across nodes (push.bpf.c's idle search, reached only
 *    when prev's node has no idle allowed CPU): a new task by default
 *    (push_cross_fork), a waking one only with --push-cross-node=always
 *    (push_cross_wake; also the default with NUMA_OFF) or, with
 *    --push-cross-node=unpaired (push_cross_unpaired), one that is not
 *    woken synchronously by a partner of few partners (numa_wake_paired():
 *    the two ends of a pipe or socket stay). Only out of a node that is
 *    overloaded with the waking task counted (one more runnable task,
 *    adding its own utilisation: numa_account() keeps it), into the least
 *    loaded node if that one is not (node_overloaded); the CPU is taken
 *    from that node (else anywhere allowed). By default every node keeps
 *    its waking tasks, as the kernel's wake-up does (it searches only the
 *    LLC of prev or of the waker): a CPU there frees up soon, and spreading
 *    a lightly loaded communicating workload over two nodes is Gorman's
 *    failure case; on a node of 2 CPUs any third runnable task made the
 *    node "overloaded" and split a communicating pair. The balance pass and
 *    its steals even out what must be evened out.
 * wake_follow: Wake-up following the waker (push_follow_waker()): a task
 *    woken synchronously (SCX_WAKE_SYNC: pipes, sockets) by a task on
 *    another node takes an idle CPU of the waker's LLC, else of its node,
 *    if numa_moves(waker node + the task, the task's node) == 0: the result
 *    is within the allowance, so a communicating pair ends up on one node
 *    (numa_wake_follow()). The kernel gets the same from wake_affine().
 *    Only for tasks with few partners (numa_few_partners(), below) and not
 *    into a node the task would overload (node_overloaded);
 *    --no-wake-follow turns it off.
 *
 * Knobs: place_at_fork, place_least_loaded, place_quiet_stays
 * (--exec-placement, --place-at-fork), push_cross_wake, push_cross_fork,
 * push_cross_unpaired (--push-cross-node), wake_follow (--no-wake-follow).
 * Stats: STAT_XNODE_EXEC, STAT_XNODE_PUSH_*, STAT_XNODE_WAKE_FOLLOW,
 * STAT_NUMA_NEW_LOCAL, STAT_NUMA_CLAIM_LOST, STAT_NUMA_PUSH_KEPT,
 * STAT_NUMA_OVERLOAD, STAT_NUMA_FOLLOW_REFUSED*.
 */
#include "locality.bpf.h"
#include "numa.bpf.h"
#include "numa_load.bpf.h"
#include "numa_place.bpf.h"
#include "numa_rules.h"
#include "home.bpf.h"
#include "decide.bpf.h"

/*
 * Tasks on CPU @c now, for place_new's first test (numa_rule_new_cpu_quiet()):
 * the program being placed, the task running there unless that is the
 * program itself (@self_cpu == @c) or the CPU is idle, and the tasks queued
 * on it.
 */
static __always_inline u32 numa_cpu_nr_now(s32 c, s32 self_cpu)
{
	const struct cpumask *idle;
	u32 nr = 1;

	if (!cpu_valid(c))
		return nr;
	if (c != self_cpu) {
		idle = scx_bpf_get_idle_cpumask();
		if (!bpf_cpumask_test_cpu(c, idle))
			nr++;
		scx_bpf_put_idle_cpumask(idle);
	}
	return nr + numa_cpu_queued(c);
}

/* what place_new's choice (numa_rule_least()) reads of each node; per CPU: too big for the stack */
struct numa_least_figs {
	u32 nr[MAX_NODES];	/* tasks now (numa_nr_now()), or 0: by the decayed load alone */
	u32 load[MAX_NODES];	/* decayed load (node_load_now()) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct numa_least_figs);
} numa_least_scratch SEC(".maps");

/*
 * This CPU's figures for place_new's choice, filled for the nodes not in
 * @skip (a mask of node ids): with @by_tasks the tasks on each now
 * (numa_nr_now()), else 0, and each one's decayed load. NULL if the
 * scratch cannot be had (never: a per-CPU array of one entry).
 */
static __always_inline struct numa_least_figs *numa_least_fill(u64 skip, bool by_tasks,
								s32 self_cpu)
{
	struct numa_least_figs *f;
	u32 i, zero = 0;

	f = bpf_map_lookup_elem(&numa_least_scratch, &zero);
	if (!f)
		return NULL;
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		if (skip & (1ULL << i))
			continue;
		f->nr[i & NODE_MASK] = by_tasks ? numa_nr_now(i, self_cpu) : 0;
		f->load[i & NODE_MASK] = node_load_now(i);
	}
	return f;
}

/* the least loaded node not in @skip, by the decayed load, or -1 (numa_rule_least()) */
static s32 numa_least_loaded(u64 skip)
{
	struct numa_least_figs *f = numa_least_fill(skip, false, -1);
	u32 nr;

	return f ? numa_rule_least(f->nr, f->load, nr_nodes, skip, &nr) : -1;
}

/* ---- push_across (push.bpf.c's idle search) ---- */

/*
 * The node a task on node @src might move to: the least loaded other node,
 * or -1 if there is none or the task already changed node within this
 * interval (one cross-node move per task per interval).
 */
static __always_inline s32 numa_cross_candidate(struct task_ctx *tctx, u64 now, u32 src)
{
	if (!numa_task_may_cross(tctx, now)) {
		stat_inc(STAT_NUMA_TASK_RECENT);
		return -1;
	}
	return numa_least_loaded(1ULL << (src & NODE_MASK));
}

/*
 * @tctx's utilisation now; a whole CPU for a task that never ran (a new
 * one: its context is created zeroed) or has no context: nothing known
 * yet, assume it is busy
 */
static __always_inline u32 numa_task_util(struct task_ctx *tctx, u64 now)
{
	if (!tctx || !tctx->util.at)
		return 1 << LOAD_SHIFT;
	return numa_rule_util_now(&tctx->util, now);
}

/*
 * push_across: prev's node has no idle CPU for @p (or prev is unusable).
 * Return a claimed idle CPU elsewhere, or -1 to stay.
 */
__hidden s32 numa_push_across(struct task_struct *p __arg_trusted, s32 prev_cpu, bool is_fork,
			       bool paired)
{
	struct numa_node_fig sf, df;
	struct task_ctx *tctx;
	u32 src;
	s32 d, cpu;
	u64 now;

	if (!(is_fork ? push_cross_fork : (push_cross_wake || (push_cross_unpaired && !paired))))
		return -1;
	if (numa_mode == NUMA_OFF || nr_nodes < 2 || !cpu_online(prev_cpu) ||
	    !bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr)) {
		/* no policy, or no node to stay on: any idle allowed CPU */
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu >= 0 && cpu_valid(prev_cpu) &&
		    cpu_node[cpu & CPU_MASK] != cpu_node[prev_cpu & CPU_MASK])
			stat_inc(is_fork ? STAT_XNODE_PUSH_FORK : STAT_XNODE_PUSH_WAKE);
		return cpu;
	}

	now = scx_bpf_now();
	tctx = task_ctx(p);
	src = cpu_node[prev_cpu & CPU_MASK];
	if (!home_may_leave(p, tctx, src))
		return -1;
	d = numa_cross_candidate(tctx, now, src);
	if (d < 0)
		return -1;
	/* push_across and node_overloaded: a node with spare capacity keeps @p queued near prev */
	sf = numa_fig(src);
	df = numa_fig(d);
	if (!numa_rule_push_across(&sf, &df, numa_task_util(tctx, now))) {
		stat_inc(STAT_NUMA_PUSH_KEPT);
		decide_refused(p, prev_cpu, -1, STAT_NUMA_PUSH_KEPT);
		return -1;
	}
	stat_inc(STAT_NUMA_OVERLOAD);
	cpu = numa_idle_in_node(p, d);
	if (cpu < 0)
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu < 0)
		return -1;
	if (cpu_node[cpu & CPU_MASK] != src) {
		numa_task_crossed(tctx, now);
		decide_why(tctx, STAT_NUMA_OVERLOAD);
		stat_inc(is_fork ? STAT_XNODE_PUSH_FORK : STAT_XNODE_PUSH_WAKE);
	}
	return cpu;
}

/* ---- place_new: exec, and a new process with --place-at-fork ---- */

/*
 * A new process (fork of a group leader, or exec) whose parent / current
 * CPU is @prev_cpu: a claimed idle CPU on the least loaded node with one
 * if place_new sends it there, else -1 (normal push near the parent). Nodes
 * are tried from the least loaded up; a node with no idle CPU for @p is
 * passed over, not given up on. The new program is counted where it starts
 * (node_placed): on the returned CPU's node, or @prev_cpu's for -1. The
 * count is the claim of the choice (numa_rule_claim()): when another new
 * program was counted on the chosen node since its figures were read, the
 * choice is made again, so that programs started together cannot all pick
 * the same least loaded node. A claim only fails on a concurrent placement
 * or sample, so a few tries suffice; past them it stays, counted anyway.
 * Least loaded: by the decayed figures (node_load + node_placed) for
 * --exec-placement=allowance, by tasks now (numa_nr_now()) for
 * least-loaded; there the claim's winner shows in the loser's second
 * choice through the idle CPU it took. @again: a program checked before
 * and counted then: staying is neither counted nor a decision (STAT_NUMA_NEW_LOCAL).
 */
__hidden s32 numa_place_new(struct task_struct *p __arg_trusted, s32 prev_cpu, u32 cause,
			    bool again)
{
	struct numa_least_figs *f;
	struct numa_node_fig sf, df;
	struct task_struct *cur;
	struct task_ctx *tctx;
	u32 src, k, try, parent_nr = 0;
	s32 d, cpu, self_cpu = -1;
	u64 now, tried;

	if (numa_mode == NUMA_OFF || !cpu_valid(prev_cpu))
		return -1;
	src = cpu_node[prev_cpu & CPU_MASK] & NODE_MASK;
	if (nr_nodes < 2)
		goto count_src;
	now = scx_bpf_now();
	tctx = task_ctx(p);
	/*
	 * Placed by ops.enqueue as its slice ends, @p still runs on prev_cpu:
	 * that CPU is busy with @p itself, not with another task.
	 */
	cur = bpf_get_current_task_btf();
	if (cur && cur->pid == p->pid)
		self_cpu = prev_cpu;
	/*
	 * No once-per-interval gate (task_may_cross) here: a new program has no memory
	 * to leave behind, even if a fork push just moved its process.
	 */
	/* least-loaded's first test: on a quiet CPU the program stays, no node compared */
	if (place_quiet_stays && numa_rule_new_cpu_quiet(numa_cpu_nr_now(prev_cpu, self_cpu))) {
		if (again)
			return -1;
		stat_inc(STAT_NUMA_NEW_LOCAL);
		goto count_src;
	}
	bpf_for(try, 0, NUMA_CLAIM_TRIES) {
		bool lost = false, stays;

		sf = numa_fig(src);
		if (place_least_loaded)
			parent_nr = numa_nr_now(src, self_cpu);
		tried = 1ULL << src;
		bpf_for(k, 1, nr_nodes) {
			if (place_least_loaded) {
				/* the least loaded other node, or src when it stays there */
				f = numa_least_fill(tried, true, self_cpu);
				d = f ? numa_rule_new_least_loaded(f->nr, f->load, nr_nodes, tried,
								   src, parent_nr) : -1;
			} else {
				d = numa_least_loaded(tried);
			}
			if (d < 0)
				break;
			df = numa_fig(d);
			if (place_least_loaded)
				stays = d == (s32)src;
			else
				stays = numa_rule_new_stays(numa_mode, &sf, &df);
			if (stays) {
				/* place_new keeps it by its parent */
				if (again)
					return -1;
				if (!numa_rule_claim(&node_placed[src], sf.placed)) {
					lost = true;
					break;
				}
				stat_inc(STAT_NUMA_NEW_LOCAL);
				return -1;
			}
			if (!numa_rule_claim(&node_placed[d & NODE_MASK], df.placed)) {
				lost = true;
				break;
			}
			cpu = numa_idle_in_node(p, d);
			if (cpu >= 0) {
				numa_task_crossed(tctx, now);
				decide_why(tctx, cause);
				stat_inc(cause);
				return cpu;
			}
			/* no room there after all: give the claim back, try the next */
			numa_uncount_placed(d);
			tried |= 1ULL << (d & NODE_MASK);
		}
		if (!lost)
			break;
		stat_inc(STAT_NUMA_CLAIM_LOST);
	}
count_src:
	if (!again)
		numa_count_placed(src);
	return -1;
}

/*
 * @p, on @cpu, exec'd since it last ran (tctx->exec_pending): place it by
 * place_new, counted where it starts, moved or not (numa_place_new()).
 * Returns the claimed CPU it moves to, or -1 to stay. Least-loaded: a
 * program that stays is checked again at each slice end for one balance
 * interval after its first check, until it moves once. The moment of an
 * exec is when the machine is most stirred: seen on numaq4, the shell, the
 * programs it starts after this one and kernel workers kept every other
 * node busy for a moment, so two programs stayed on one node while a node
 * stayed empty, and the balance pass rightly leaves two CPU-bound tasks on
 * a node of two CPUs (balance_pass's allowance).
 */
__hidden s32 numa_place_exec(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 cpu)
{
	u64 now = scx_bpf_now();
	bool again;
	s32 t;

	if (!tctx)
		return -1;
	again = tctx->exec_at != 0;
	if (!again)
		tctx->exec_at = now ?: 1;
	t = numa_place_new(p, cpu, STAT_XNODE_EXEC, again);
	if (numa_rule_exec_done(t >= 0, place_least_loaded, time_delta(now, tctx->exec_at),
				numa_interval_ns))
		tctx->exec_pending = 0;
	return t;
}

/* ---- wake_follow ---- */

/*
 * wake_follow's partner test (numa_rule_few_partners()) for the wakee @t and
 * the waker @w (either may be NULL), which runs on @waker_cpu; both
 * counts are kept by push_record_wakee() in push.bpf.c. Without it a
 * task feeding many wakees piled them all on its node (docs/mechanisms.md,
 * "Bounded NUMA imbalance").
 */
static __always_inline bool numa_few_partners(struct task_ctx *t, struct task_ctx *w,
					      s32 waker_cpu)
{
	return numa_rule_few_partners(w ? (s64)w->wakee_flips : -1,
				      t ? (s64)t->wakee_flips : -1,
				      llc_nr_cpus(cpu_llc[waker_cpu & CPU_MASK]));
}

/*
 * --push-cross-node=unpaired: is @t, woken synchronously by @w (either
 * context may be NULL) on @waker_cpu, one end of a pair (a pipe, a
 * socket)? Such a wake-up keeps to the task's node (push_across).
 */
__hidden bool numa_wake_paired(struct task_ctx *t, struct task_ctx *w, s32 waker_cpu)
{
	return numa_few_partners(t, w, waker_cpu);
}

/*
 * Wake-up across nodes, the pair of Gorman's thread: may @p, woken
 * synchronously by the task running on @waker_cpu, follow its waker from
 * @prev_cpu's node to the waker's? Only if the balancer would tolerate the
 * result: numa_moves(waker's node + @p, @p's node) == 0, i.e. the imbalance
 * left is within the allowance and no balance pass would send a task back;
 * and only once per task per interval. Without this the two ends of a pair
 * that new-process placement started on different nodes (netserver forks
 * its data child onto the least loaded node, away from netperf) stayed
 * apart: the push never looks beyond prev's node while it has an idle CPU,
 * and in the lab's numa-pair netperf and its netserver were almost never
 * on one node (under EEVDF almost always, through its wake_affine()).
 */
__hidden bool numa_wake_follow(struct task_struct *p __arg_trusted, struct task_ctx *tctx,
			       struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu)
{
	u32 wn, pn, why = STAT_NUMA_FOLLOW_REFUSED;	/* the allowance, unless set below */

	if (!wake_follow || numa_mode == NUMA_OFF || nr_nodes < 2 ||
	    !cpu_valid(prev_cpu) || !cpu_valid(waker_cpu))
		return false;
	wn = cpu_node[waker_cpu & CPU_MASK];
	pn = cpu_node[prev_cpu & CPU_MASK];
	if (wn == pn || !numa_task_may_cross(tctx, scx_bpf_now()) ||
	    !home_may_leave(p, tctx, pn))
		return false;
	if (numa_node_overloaded(wn, 1)) {
		why = STAT_NUMA_FOLLOW_REFUSED_OVERLOAD;
		goto refused;
	}
	if (!numa_few_partners(tctx, waker, waker_cpu)) {
		why = STAT_NUMA_FOLLOW_REFUSED_PARTNERS;
		goto refused;
	}
	if (numa_moves(wn, pn, 1))
		goto refused;
	return true;
refused:
	if (why != STAT_NUMA_FOLLOW_REFUSED)
		stat_inc(why);
	stat_inc(STAT_NUMA_FOLLOW_REFUSED);
	decide_refused(p, prev_cpu, waker_cpu, why);
	return false;
}

/* @p followed its waker to another node (the push found it a CPU there) */
__hidden void numa_followed(struct task_ctx *tctx)
{
	numa_task_crossed(tctx, scx_bpf_now());
	decide_why(tctx, STAT_XNODE_WAKE_FOLLOW);
	stat_inc(STAT_XNODE_WAKE_FOLLOW);
}

/* ---- exec: the mark place_exec acts on ---- */

/*
 * At an exec, least-loaded's first test is taken on the spot, as 2.5's
 * sched_balance_exec() took it: a program exec'd on a CPU that runs at most
 * one other task stays there, settled. Any other program is marked, and its
 * next ops.select_cpu / ops.enqueue places it (the kernel does not ask
 * sched_ext schedulers at exec, see above). Taken later, at a slice end,
 * the test read whatever had queued on the CPU meanwhile.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(locality_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	struct task_ctx *tctx;
	s32 cpu;

	if (numa_mode == NUMA_OFF || nr_nodes < 2)
		return 0;
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (!tctx)
		return 0;
	tctx->exec_at = 0;
	cpu = bpf_get_smp_processor_id();
	if (place_quiet_stays && cpu_valid(cpu) &&
	    numa_rule_new_cpu_quiet(numa_cpu_nr_now(cpu, cpu))) {
		tctx->exec_pending = 0;
		stat_inc(STAT_NUMA_NEW_LOCAL);
		numa_count_placed(cpu_node[cpu & CPU_MASK]);
		return 0;
	}
	tctx->exec_pending = 1;
	return 0;
}
