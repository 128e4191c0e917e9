/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * place.bpf.c - the order of the rules that place a waking, new or queued task
 *
 * ops.select_cpu (main.bpf.c) asks place_wakeup() for a CPU. Each rule
 * below is one call into the file of its mechanism; the first that returns
 * a claimed idle CPU (or, for push_waker_cpu(), the waker's CPU with
 * nothing queued) wins, and the task is inserted straight into that
 * CPU's local DSQ. -1 from every rule leaves the task on prev: ops.enqueue
 * queues it there and may wake an idle CPU nearby to pull it (pull.bpf.c).
 *
 * Each rule has a name, the same in the code, the counters' descriptions
 * and the docs (ARCHITECTURE.md, "the rules by name").
 *
 * New tasks (SCX_WAKE_FORK):
 *   place_new     a new process with --place-at-fork: the least loaded
 *                 node, if numa_place_new() (--exec-placement) sends it there;
 *   idle_search   else the search near the parent's CPU (push.bpf.c), then
 *                 another node if the parent's is overloaded (push_across,
 *                 --push-cross-node).
 * Wake-ups:
 *   place_exec    just exec'd: the least loaded node, if place_new
 *                 (--exec-placement) sends it there (exec is marked by a
 *                 tracepoint; numa_place_exec());
 *   home_wake     away from its home node: an idle CPU at home
 *                 (home_wake_pick());
 *   wake_follow   synchronous, waker on another node: an idle CPU near the
 *                 waker, if the NUMA policy lets the pair meet
 *                 (push_follow_waker(), numa_wake_follow());
 *   cache_wake    cache-aware: an idle CPU of the process's preferred LLC
 *                 (cache_wake_pick(), asked by an idle CPU or with
 *                 --cache-wake-aggr);
 *   waker_cpu     synchronous, waker in prev's LLC: the waker's own CPU,
 *                 with --sync-wake-target (push_waker_cpu());
 *   wake_affine   synchronous, waker in another LLC of prev's node: an idle
 *                 CPU of the waker's LLC (push_wake_affine());
 *   idle_search   the search near prev: its core, its LLC, its node (then
 *                 another node only with --push-cross-node=always, or
 *                 =unpaired for a wake-up that is not a partner's, and if
 *                 the NUMA policy allows; push_pick_cpu()).
 *
 * ops.enqueue (main.bpf.c) asks place_enqueue() where a task it is about to
 * queue goes, and keeps the queueing:
 *   place_exec      still exec-pending (no wake-up placed it, or it was
 *                   checked again at a slice end): as at a wake-up;
 *   active_balance  preempted by the balance pass (or home_balance) to go
 *                   to another node: an idle CPU there (numa_active_take());
 *   (an allowed online CPU if the task's own is not one)
 *   enq_handoff     about to queue behind a running task: an idle CPU of
 *                   its LLC, else node, claimed for it (pull_claim_near(),
 *                   --enqueue-handoff);
 *   else its CPU, where it queues.
 */
#include "locality.bpf.h"
#include "place.bpf.h"
#include "push.bpf.h"
#include "numa_load.bpf.h"
#include "numa_place.bpf.h"
#include "numa_balance.bpf.h"
#include "home.bpf.h"
#include "cache.bpf.h"
#include "pull.bpf.h"

/* A claimed idle CPU for @p (context @tctx, may be NULL), or -1 to leave it on @prev_cpu. */
__hidden s32 place_wakeup(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 prev_cpu,
			  u64 wake_flags)
{
	struct task_ctx *waker = NULL;
	bool sync = wake_flags & SCX_WAKE_SYNC;
	s32 this_cpu = bpf_get_smp_processor_id(), cpu = -1;

	if (wake_flags & SCX_WAKE_FORK) {
		bool program = place_at_fork && p->pid == p->tgid;

		/*
		 * A new program is counted on its node at once, before the load
		 * average sees it (numa_place_new() counts it by its parent
		 * unless it moves it). Threads and children that have not
		 * exec'd are not: they mostly wait on their parent, and counting
		 * them as busy CPUs made a node of sleeping threads look full.
		 */
		if (program)
			cpu = numa_place_new(p, prev_cpu, STAT_XNODE_PUSH_FORK, false);
		if (cpu < 0) {
			cpu = push_pick_cpu(p, prev_cpu, true, false);
			if (program && cpu >= 0)
				numa_placed_moved(prev_cpu, cpu);
		}
		return cpu;
	}

	/*
	 * who wakes whom, for wake_follow, waker_cpu and wake_affine: only
	 * synchronous wake-ups, the ones a task makes for a partner (a pipe, a socket); a wake-up from
	 * interrupt context (a timer, a softirq) is charged to whatever task
	 * it interrupted and is not that task's partner
	 */
	if (sync && push_tracks_wakees()) {
		waker = task_ctx(bpf_get_current_task_btf());
		push_record_wakee(p, waker);
	}

	if (tctx && tctx->exec_pending) {
		cpu = numa_place_exec(p, tctx, prev_cpu);
		if (cpu >= 0)
			return cpu;
	}
	cpu = home_wake_pick(p, tctx, prev_cpu);
	if (cpu >= 0)
		return cpu;
	if (sync) {
		cpu = push_follow_waker(p, tctx, waker, prev_cpu, this_cpu);
		if (cpu >= 0)
			return cpu;
	}
	cpu = cache_wake_pick(p, prev_cpu);
	if (cpu >= 0)
		return cpu;
	if (sync) {
		cpu = push_waker_cpu(p, tctx, waker, prev_cpu, this_cpu);
		if (cpu >= 0)
			return cpu;
		cpu = push_wake_affine(p, tctx, waker, prev_cpu, this_cpu);
		if (cpu >= 0)
			return cpu;
	}
	return push_pick_cpu(p, prev_cpu, false,
			     sync && push_cross_unpaired && numa_wake_paired(tctx, waker, this_cpu));
}

/*
 * Where ops.enqueue puts @p (context @tctx, may be NULL), last on @cpu:
 * returns the CPU, with *@how saying what it is (PLACE_*: a CPU claimed
 * idle for it, a hand-off, or a CPU to queue on, idle or not), or -1 when
 * no CPU @p may use is online (ops.enqueue uses the global DSQ).
 */
__hidden s32 place_enqueue(struct task_struct *p __arg_trusted, struct task_ctx *tctx, s32 cpu,
			   u64 enq_flags, u32 *how)
{
	bool is_idle, claimed = false;
	s32 t;

	/* place_exec: exec'd and not placed yet */
	if (tctx && tctx->exec_pending) {
		t = numa_place_exec(p, tctx, cpu);

		if (t >= 0) {
			cpu = t;
			claimed = true;
		}
	}

	/* active_balance: preempted by the NUMA pass to move to an idle node */
	if (!claimed) {
		t = numa_active_take(p, cpu, &claimed);

		if (t >= 0)
			cpu = t;
	}

	if (!cpu_online(cpu) || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		const struct cpumask *online = online_cpumask();

		cpu = online ? bpf_cpumask_any_and_distribute(p->cpus_ptr, online) :
			       nr_cpus;
		if (!cpu_valid(cpu))
			return -1;
		stat_inc(STAT_ENQ_FALLBACK);
	}

	is_idle = cpu_idle_now(cpu);

	/*
	 * enq_handoff: about to queue behind a running task, the task may go
	 * straight to an idle CPU nearby instead (pull.bpf.c; by default only
	 * a task that is not waking). Not the only task of its CPU put back
	 * (SCX_ENQ_LAST): that CPU is free.
	 */
	if (!claimed && !is_idle && p->nr_cpus_allowed > 1 &&
	    !(enq_flags & SCX_ENQ_LAST)) {
		t = pull_claim_near(p, cpu, enq_flags & SCX_ENQ_WAKEUP);

		if (t >= 0) {
			if (how)
				*how = PLACE_HANDOFF;
			return t;
		}
	}
	if (how)
		*how = (claimed ? PLACE_CLAIMED : 0) | (is_idle ? PLACE_IDLE : 0);
	return cpu;
}
