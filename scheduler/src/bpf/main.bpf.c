/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_locality - locality-aware placement for sched_ext.
 *
 * Idea. A woken task should land where its cache is still warm, and an idle
 * CPU should take queued work from as close as possible. Both halves walk
 * the same hierarchy, nearest first: SMT core, last-level cache (LLC),
 * NUMA node, rest of the machine.
 *
 *   push (push.bpf.c, ops.select_cpu): prev CPU if it is idle, else an
 *        idle core in prev's LLC, else an idle CPU in that LLC, else in
 *        the node, else (policy hook) anywhere; otherwise stay.
 *   pull (pull.bpf.c, ops.dispatch): a CPU whose own queue is empty steals
 *        from its SMT siblings, then its LLC, then its node; beyond the
 *        node only if the NUMA policy hook allows it.
 *
 * Origin: Steve Sistare's "select_idle_sibling rework" for CFS (2018), which
 * searched idle cores/CPUs by LLC from a sparse idle mask and added
 * fine-grained stealing of queued tasks by CPUs about to go idle.
 *
 * This file holds the queues, fairness and the ops callbacks, the top of
 * the units: each callback calls into the mechanism units below, which
 * build.rs compiles separately and links into one object; none of them
 * calls back up (locality.bpf.c gives their order):
 *
 *   locality.bpf.c  the shared state: rodata, per-CPU state, kick_cpu()
 *                (declared in locality.bpf.h)
 *   place.bpf.c  the order of the rules that place a waking, new or queued
 *                task
 *   push.bpf.c   idle-CPU search at wake-up
 *   idle.bpf.c   the idle questions (built-in masks or sparse flags)
 *   pull.bpf.c   dispatch-time stealing, and waking an idle stealer
 *   numa_load.bpf.c  load and utilisation averages per CPU, LLC and node
 *   numa.bpf.c   NUMA policy: bounded node imbalance, when a task may
 *                change node, steals across nodes
 *   numa_balance.bpf.c  the cross-node balance pass, active balance
 *   numa_place.bpf.c  across nodes at placement: fork/exec placement,
 *                the push across, following the waker
 *   home.bpf.c   home nodes chosen by the memory agent
 *   cache.bpf.c  cache-aware scheduling: per-process preferred LLC,
 *                aggregation pulls and migration gates
 *   heartbeat.bpf.c  the periodic timer: load samples, the balance pass,
 *                rescue kicks
 *   memory.bpf.c  user page faults per process, 2 MB chunk, thread and
 *                node, the memory agent's evidence (not an ops callback)
 *   decide.bpf.c  the decision record for explain: moves and refusals,
 *                rate-limited, into a ring buffer
 *
 * Queues. Two vtime-ordered user DSQs per CPU: id == CPU number for tasks
 * that may run elsewhere, PINNED_DSQ_BASE + CPU for tasks allowed on that
 * CPU alone. A task is queued on a DSQ of the CPU it was placed on
 * (task_cpu after select_cpu), or of an allowed online CPU if that one is
 * not usable. The owner runs the lower-vtime head of its two DSQs, so they
 * behave as one queue for it; stealers scan only the first, so a pile of
 * pinned tasks (stress-ng affinity puts 30-100 on one CPU) never hides a
 * movable task from them behind their STEAL_SCAN_MAX look-ahead -- which
 * it did, leaving the watchdog's own kworker queued for 5 s.
 *
 * Fairness. Weighted virtual time: a task's vtime advances by
 * runtime * 100 / weight when it stops running; DSQs are ordered by it.
 * Each CPU keeps its own clock, vtime_now[cpu]: at least the largest vtime
 * it has started running, and advanced in ops.stopping by each run divided
 * among the tasks competing there (so it keeps pace with their vtimes even
 * when only tasks below it run). A task's vtime is kept relative to the
 * clock of the CPU it was last placed on; when it moves to another CPU
 * (queued there, dispatched straight to it, or stolen) it keeps its
 * distance to the clock: vtime - old clock + new clock. Clocks of
 * different CPUs drift apart by minutes (big64: 169 s against 530 s), so
 * without this a migrating task landed at one end of the window below --
 * stress-ng's affinity hoppers always at its bottom, ahead of tasks that
 * had waited there for seconds. Then the vtime is clamped into
 * [clock - slice_lag, clock + slice]: the lower bound stops a long sleep
 * from being banked into unbounded priority, the upper bound stops a task
 * from being pushed far behind. Why per CPU and not one global clock: with per-CPU queues the
 * vtimes on a crowded CPU advance slower than on a quiet one, so a global
 * "max vtime" runs away from them and a task woken onto the crowded CPU
 * with that global value would wait until they catch up -- which they never
 * do (seen in QEMU: a kthread starved for 6 s, watchdog ejection). With
 * the clamp, a queued task waits at most for the tasks queued ahead of it
 * to run about lag + slice each; its CPU always drains its DSQ in vtime
 * order and stealers only add consumers.
 *
 * Never stranding a task:
 * - affinity: ops.enqueue only uses a DSQ of a CPU in p->cpus_ptr; a
 *   stealer only takes tasks allowed on itself.
 * - affinity change while queued: the kernel dequeues the task, calls
 *   ops.set_cpumask and enqueues it again, so ops.enqueue re-places it
 *   with the new mask; nothing to do in ops.set_cpumask.
 * - per-CPU kthreads: task_cpu is their only allowed CPU, so they go to
 *   that CPU's DSQ like everyone else and compete in vtime order.
 * - migration-disabled tasks: SCX_OPS_ENQ_MIGRATION_DISABLED is not set,
 *   so the kernel queues them on their CPU's local DSQ itself and
 *   ops.enqueue never sees them.
 * - CPU hotplug: ops.cpu_online/cpu_offline are implemented (otherwise the
 *   kernel ejects the scheduler on hotplug). The DSQ of an offline CPU is
 *   drained by any CPU the queued tasks are allowed on, at any distance.
 *   A CPU that comes online without a known topology (it was offline when
 *   the agent read sysfs) makes the scheduler exit with
 *   SCX_ECODE_ACT_RESTART so the agent reloads with a fresh topology.
 *   No kick is sent from a CPU that has left cpu_online_mask (kick_cpu(),
 *   locality.bpf.c).
 *
 * Knobs (rodata, set by the agent; defined in locality.bpf.c): slice_ns,
 * slice_lag_ns, wake_gran_ns; the mechanisms' knobs in their units.
 * Stats: the per-CPU "stats" array, one counter per line of stats.h.
 */
#include "locality.bpf.h"
#include "numa_load.bpf.h"
#include "home.bpf.h"
#include "cache.bpf.h"
#include "idle.bpf.h"
#include "place.bpf.h"
#include "pull.bpf.h"
#include "heartbeat.bpf.h"
#include "decide.bpf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* ---- state of the ops callbacks ---- */

u64 vtime_now[MAX_CPUS];		/* per-CPU clock: max vtime started there */

/*
 * The longest a task waited between being queued (ops.enqueue, or a direct
 * dispatch) and starting to run, since load: the starvation figure the
 * stall watchdog only checks against its timeout. Updated without atomics
 * by whichever CPU sees a longer wait: a race can lose a near-simultaneous
 * larger value, never invent one.
 */
u64 max_wait_ns;
/* who waited max_wait_ns: pid, the CPU it then ran on, how many CPUs it
 * may use, and how many tasks were still queued on that CPU */
s32 max_wait_pid, max_wait_cpu, max_wait_allowed, max_wait_queued;

/* ---- small helpers ---- */

/*
 * Re-express @tctx's vtime against @cpu's clock (see "Fairness" above):
 * the same distance to the clock as on the CPU it came from. The other
 * CPU's clock is read without a lock: it may be a run behind, which only
 * shifts the task by a fraction of a slice.
 */
static __always_inline u64 rebase_vtime(struct task_ctx *tctx, s32 cpu)
{
	s32 from = tctx->vtime_cpu;
	u64 v = tctx->vtime;

	if (from != cpu && cpu_valid(from))
		v = v - vtime_now[from & CPU_MASK] + vtime_now[cpu & CPU_MASK];
	tctx->vtime_cpu = cpu;
	tctx->vtime = v;
	return v;
}

/*
 * @p (context @tctx) is being placed on @cpu: rebase its vtime on that
 * CPU's clock, clamp it into [clock - slice_lag, clock + slice], store it
 * back and return it.
 */
static __always_inline u64 place_vtime(struct task_ctx *tctx, s32 cpu)
{
	u64 clock, lo, hi, v;

	if (!cpu_valid(cpu))
		return tctx ? tctx->vtime : 0;
	clock = vtime_now[cpu & CPU_MASK];
	if (!tctx)
		return clock;
	lo = clock > slice_lag_ns ? clock - slice_lag_ns : 0;
	hi = clock + slice_ns;
	v = rebase_vtime(tctx, cpu);
	if (time_before(v, lo))
		v = lo;
	else if (time_after(v, hi))
		v = hi;
	tctx->vtime = v;
	return v;
}

/* ---- ops ---- */

s32 BPF_STRUCT_OPS(locality_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = place_wakeup(p, tctx, prev_cpu, wake_flags);

	if (cpu < 0)
		return prev_cpu;
	/*
	 * We claimed an idle CPU (its idle bit is cleared), or chose a
	 * waker's CPU with nothing queued: either way the local DSQ is empty
	 * and the task runs next there, so skipping the vtime DSQ costs no
	 * fairness. The task's vtime is still charged in ops.stopping.
	 */
	place_vtime(tctx, cpu);
	if (tctx)
		tctx->queued_at = scx_bpf_now();
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	stat_inc(STAT_DIRECT);
	return cpu;
}

/*
 * Wake-up preemption. A task woken onto a busy CPU would otherwise wait up
 * to a whole slice (5 ms) behind the running one. Like EEVDF's wake-up check, if the
 * woken task is ahead in virtual time -- its vtime more than wake_gran_ns
 * below the running task's (its start vtime plus what it has run since) --
 * the running task's slice is cut short (SCX_KICK_PREEMPT) and the CPU picks
 * again in vtime order. The granularity keeps two ping-ponging tasks from
 * preempting each other on every message. The running task's vtime comes
 * from cpu_diag, written by that CPU at ops.running: a racy read that is at
 * worst one task stale.
 *
 * Off by default (wake_gran_ns == 0, --wake-gran-us): in the lab it
 * preempted often without shortening wakelat's waits, which are not behind
 * a task far behind in vtime (docs/decisions.md, "Wake-up preemption").
 */
static __always_inline void wake_preempt(struct task_struct *p,
					 struct task_ctx *tctx, s32 cpu,
					 u64 vtime)
{
	struct cpu_diag *d;
	u64 now, cur;

	if (!wake_gran_ns || !tctx || !cpu_valid(cpu))
		return;
	d = &cpu_diag[cpu & CPU_MASK];
	now = scx_bpf_now();
	cur = d->run_vtime + time_delta(now, d->run_at);
	if (time_before(vtime + wake_gran_ns, cur)) {
		kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_inc(STAT_WAKE_PREEMPT);
	}
}

void BPF_STRUCT_OPS(locality_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	u32 how = 0;
	bool is_idle, claimed;
	s32 cpu;
	u64 vtime;

	/* where it goes: place_enqueue() (place.bpf.c) holds the rules */
	cpu = place_enqueue(p, tctx, scx_bpf_task_cpu(p), enq_flags, &how);
	if (cpu < 0) {
		/*
		 * No allowed CPU is online (a transient state during
		 * hotplug): the global DSQ is consumed by every CPU
		 * and the kernel checks affinity there.
		 */
		scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, slice_ns, enq_flags);
		return;
	}
	if (how & PLACE_HANDOFF) {
		/* handed to an idle CPU nearby instead of queuing behind a running task */
		place_vtime(tctx, cpu);
		if (tctx)
			tctx->queued_at = scx_bpf_now();
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
		kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	claimed = how & PLACE_CLAIMED;
	is_idle = how & PLACE_IDLE;

	vtime = place_vtime(tctx, cpu);
	if (tctx)
		tctx->queued_at = scx_bpf_now();
	scx_bpf_dsq_insert_vtime(p, p->nr_cpus_allowed > 1 ? (u64)cpu : pinned_dsq(cpu),
				 slice_ns, vtime, enq_flags);
	if (!dsq_maybe_queued[cpu & CPU_MASK])
		__sync_lock_test_and_set(&dsq_maybe_queued[cpu & CPU_MASK], 1);
	stat_inc(STAT_ENQUEUE);

	if (claimed) {
		/* we took its idle bit: it is idle, wake it to run @p */
		kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	/*
	 * The only task of its CPU, put back by the kernel (SCX_OPS_ENQ_LAST;
	 * locality_dispatch() lets only an exec'd task get here) and not
	 * moved: that CPU is about to idle, so wake it to take the task again.
	 */
	if (enq_flags & SCX_ENQ_LAST) {
		kick_cpu(cpu, 0);
		return;
	}

	/*
	 * Wake the owner if it is idle -- or about to be. Testing the idle
	 * mask is not enough: a CPU whose ops.dispatch just found its DSQ
	 * empty has not set its idle bit yet, and would sleep on the task
	 * we just queued. SCX_KICK_IDLE is a no-op for a busy CPU but does
	 * kick one that is still in its balance step, closing the race. Our
	 * own CPU is running this code, so it reschedules anyway.
	 */
	if (cpu != (s32)bpf_get_smp_processor_id())
		kick_cpu(cpu, SCX_KICK_IDLE);

	if (!is_idle && (enq_flags & SCX_ENQ_WAKEUP))
		wake_preempt(p, tctx, cpu, vtime);

	if (!is_idle && p->nr_cpus_allowed > 1) {
		/* queued behind a running task: advertise it to stealers */
		pull_mark_overloaded(cpu);
		pull_kick_stealer(p, cpu);
	}
	/*
	 * A task pinned to @cpu is not advertised: nobody else may run it,
	 * and stealers walking a long DSQ of pinned tasks (stress-ng affinity
	 * piles 100 onto one CPU) only contend for its lock with the one CPU
	 * that can drain it.
	 */
}

/*
 * The vtime of @dsq_id's first task, or false if the DSQ is empty. Read
 * with the DSQ iterator, which takes the DSQ's lock, and not with the
 * lockless scx_bpf_dsq_peek(): its cached first-task pointer can read NULL
 * for a non-empty DSQ. On big64 under stress-ng that left a CPU idle for
 * 24 s with 197 tasks in its pinned DSQ (RCU stall, ejection); scx_mitosis
 * reported the same symptom (sched-ext/scx#3489).
 */
static bool dsq_head_vtime(u64 dsq_id, u64 *vtime)
{
	struct task_struct *p;
	bool found = false;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		*vtime = p->scx.dsq_vtime;
		found = true;
		break;
	}
	return found;
}

/*
 * Move the lower-vtime head of @cpu's two DSQs to its local DSQ. Both are
 * always tried, whatever the head comparison saw: a stealer may take the
 * head meanwhile, and an emptiness test is only a hint. The comparison (two
 * locked reads) is made only when both DSQs hold tasks.
 */
static bool dispatch_own(s32 cpu)
{
	u64 first = cpu, second = pinned_dsq(cpu), t, va, vb;
	u32 *maybe = &dsq_maybe_queued[cpu & CPU_MASK];

	if (!*maybe)
		return false;
	__sync_lock_test_and_set(maybe, 0);
	if (scx_bpf_dsq_nr_queued(first) > 0 && scx_bpf_dsq_nr_queued(second) > 0 &&
	    dsq_head_vtime(first, &va) && dsq_head_vtime(second, &vb) &&
	    time_before(vb, va)) {
		t = first;
		first = second;
		second = t;
	}
	if (scx_bpf_dsq_move_to_local(first, 0) || scx_bpf_dsq_move_to_local(second, 0)) {
		/* more may be waiting: look again next time */
		__sync_lock_test_and_set(maybe, 1);
		return true;
	}
	return false;
}

/* @p exec'd and is waiting for its placement (numa_place.bpf.c) */
static __always_inline bool exec_unplaced(struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);

	return tctx && tctx->exec_pending;
}

void BPF_STRUCT_OPS(locality_dispatch, s32 cpu, struct task_struct *prev)
{
	bool prev_runnable;

	struct cpu_diag *d;

	if (!cpu_valid(cpu))
		return;
	d = &cpu_diag[cpu & CPU_MASK];
	d->dispatches++;
	d->dispatch_at = scx_bpf_now();

	if (dispatch_own(cpu)) {
		d->local_moves++;
		stat_inc(STAT_DISPATCH_LOCAL);
		if (!scx_bpf_dsq_nr_queued(cpu))
			pull_clear_overloaded(cpu);
		return;
	}
	pull_clear_overloaded(cpu);

	prev_runnable = prev && (prev->scx.flags & SCX_TASK_QUEUED);
	if (pull_steal(cpu, prev_runnable)) {
		d->steals++;
		return;
	}

	/*
	 * Nothing worth taking. If prev is still runnable let it keep the
	 * CPU: refill its slice with ours (the kernel keeps a prev that has
	 * slice left; with SCX_OPS_ENQ_LAST it would otherwise put it back
	 * through ops.enqueue). Except a program whose exec placement is not
	 * settled (numa_place.bpf.c place_new): the kernel puts it back through
	 * ops.enqueue, where it is placed. A CPU-bound program alone on its
	 * CPU would otherwise never be enqueued, and never placed.
	 */
	if (prev_runnable && exec_unplaced(prev))
		return;
	if (prev_runnable) {
		scx_bpf_task_set_slice(prev, slice_ns);
		stat_inc(STAT_KEEP_PREV);
		d->keeps++;
	} else {
		d->empties++;
		/* going idle: ask a task that prefers this LLC to come */
		cache_aggr_mark(cpu);
	}
}

void BPF_STRUCT_OPS(locality_running, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u32 why, kind = 0;
	u64 waited = 0;
	s32 last;

	if (!tctx)
		return;

	tctx->started_at = scx_bpf_now();
	numa_run_start(cpu, tctx->started_at);
	if (tctx->queued_at) {
		waited = time_delta(tctx->started_at, tctx->queued_at);
		if (waited > max_wait_ns) {
			max_wait_ns = waited;
			max_wait_pid = p->pid;
			max_wait_cpu = cpu;
			max_wait_allowed = p->nr_cpus_allowed;
			max_wait_queued = cpu_valid(cpu) ? nr_queued_cpu(cpu) : -1;
		}
		tctx->queued_at = 0;
	}
	if (cpu_valid(cpu)) {
		/* a stolen task was placed against its old CPU's clock */
		rebase_vtime(tctx, cpu);
		/* only this CPU writes its clock (we run on @cpu): no race */
		if (time_before(vtime_now[cpu & CPU_MASK], tctx->vtime))
			vtime_now[cpu & CPU_MASK] = tctx->vtime;
		struct cpu_diag *d = &cpu_diag[cpu & CPU_MASK];

		d->run_at = tctx->started_at;
		d->run_vtime = tctx->vtime;
		d->run_pid = p->pid;
	}

	home_running(p, tctx, cpu);
	cache_running(p, cpu, waited);
	last = tctx->last_cpu;
	tctx->last_cpu = cpu;
	why = tctx->why;
	tctx->why = 0;
	if (last == cpu || !cpu_valid(last) || !cpu_valid(cpu))
		return;
	if (cpu_llc[last & CPU_MASK] != cpu_llc[cpu & CPU_MASK]) {
		stat_inc(STAT_MIGR_CROSS_LLC);
		kind = DECIDE_MOVE_LLC;
	}
	if (cpu_node[last & CPU_MASK] != cpu_node[cpu & CPU_MASK]) {
		stat_inc(STAT_MIGR_CROSS_NODE);
		kind = DECIDE_MOVE_NODE;
	}
	if (kind)
		decide_emit(p, kind, last, cpu, why);
}

/*
 * Charge @p's run on @cpu from tctx->started_at to @now: its vtime, its CPU's
 * clock, its node's and its process's accounts (numa_account, cache_account).
 */
static __always_inline void charge_run(struct task_struct *p, struct task_ctx *tctx, s32 cpu,
				       u64 now)
{
	u64 used, weight;

	/*
	 * A task already running when the scheduler was loaded stops without
	 * having started under it (started_at 0): charging it "now - 0", the
	 * whole uptime, made the agent's threads look like 159 s of runtime
	 * on big64 and jumped their CPU's clock by tens of seconds.
	 */
	used = tctx->started_at ? time_delta(now, tctx->started_at) : 0;
	weight = p->scx.weight ?: 100;
	tctx->vtime += used * 100 / weight;

	/*
	 * Advance this CPU's clock by the run shared among its competitors
	 * (the tasks queued here plus this one): over a round in which each
	 * runs once the clock moves as much as each of their vtimes, so it
	 * neither drifts above them nor stalls. "Max vtime started" alone can
	 * stall: tasks re-entering at the clamp floor (clock - lag) and
	 * running only microseconds (QEMU, stress-ng affinity hopping between
	 * CPUs) never start above the clock, so the floor never rises and a
	 * task queued above it waited 5 s: watchdog ejection.
	 */
	if (cpu_valid(cpu))
		vtime_now[cpu & CPU_MASK] +=
			used * 100 / weight / ((u64)nr_queued_cpu(cpu) + 1);
	numa_account(tctx, cpu, used, now);
	cache_account(p, cpu, used);
}

void BPF_STRUCT_OPS(locality_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = task_ctx(p);

	if (!tctx)
		return;
	charge_run(p, tctx, scx_bpf_task_cpu(p), scx_bpf_now());
	tctx->started_at = 0;
}

/*
 * ops.tick: charge the run so far. A task alone on its CPU keeps running
 * past its slice without stopping (the kernel refills it), so charged only
 * at its stop, one run of tens of ms would land in one epoch of its
 * process's occupancy (cache.bpf.c) and in one window of its utilisation
 * (numa_load.bpf.c): a process filling its LLC read as running more threads
 * than the LLC has cores, and lost its preferred LLC. For the same reason
 * the task's home is re-read here once the agent has changed the homes.
 */
void BPF_STRUCT_OPS(locality_tick, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now;

	if (!tctx || !tctx->started_at)
		return;
	now = scx_bpf_now();
	charge_run(p, tctx, cpu, now);
	tctx->started_at = now;
	numa_run_start(cpu, now);
	home_tick(p, tctx, cpu);
}

void BPF_STRUCT_OPS(locality_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	cache_task_exit(p);
}

void BPF_STRUCT_OPS(locality_enable, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);

	/* a new task starts level with the clock of its CPU: no head start */
	if (tctx) {
		tctx->vtime = cpu_valid(cpu) ? vtime_now[cpu & CPU_MASK] : 0;
		tctx->vtime_cpu = cpu;
		tctx->last_cpu = -1;
	}
}

s32 BPF_STRUCT_OPS(locality_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->vtime = 0;
	tctx->vtime_cpu = -1;
	tctx->last_cpu = -1;
	tctx->exec_pending = 0;
	tctx->exec_at = 0;
	tctx->home = -1;
	tctx->home_gen = 0;
	tctx->xnode_at = 0;
	tctx->queued_at = 0;
	tctx->node_rt = 0;
	tctx->rt_node = -1;
	return 0;
}

void BPF_STRUCT_OPS(locality_update_idle, s32 cpu, bool idle)
{
	idle_update(cpu, idle);
}

void BPF_STRUCT_OPS(locality_cpu_online, s32 cpu)
{
	if (cpu_valid(cpu) && !cpu_topo_known[cpu & CPU_MASK]) {
		/* we only guessed this CPU's LLC/node: reload with fresh sysfs */
		scx_bpf_exit(SCX_ECODE_ACT_RESTART | SCX_ECODE_RSN_HOTPLUG,
			     "CPU %d came online with unknown topology", cpu);
		return;
	}
	cpu_set_online(cpu, true);
	/* it may have tasks queued from before it went away */
	kick_cpu(cpu, SCX_KICK_IDLE);
}

void BPF_STRUCT_OPS(locality_cpu_offline, s32 cpu)
{
	cpu_set_online(cpu, false);
	/*
	 * Its DSQ is now drained by others (pull_steal_offline); poke one
	 * idle CPU of its LLC so that starts right away.
	 */
	if (cpu_valid(cpu) && nr_queued_cpu(cpu))
		pull_kick_any_near(cpu);
}

/* ---- init / exit ---- */

/* Create a kernel cpumask holding list[start..end) and store it at key. */
static s32 make_mask(void *map, u32 key, u32 start, u32 end, bool is_llc)
{
	struct bpf_cpumask *mask, *old;
	struct mask_ctx *mc;
	u32 i;

	mc = bpf_map_lookup_elem(map, &key);
	if (!mc)
		return -ENOENT;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	bpf_for(i, start, end) {
		u16 cpu = is_llc ? llc_cpus[i & CPU_MASK] : node_cpus[i & CPU_MASK];

		if (cpu < nr_cpus)
			bpf_cpumask_set_cpu(cpu, mask);
	}
	old = bpf_kptr_xchg(&mc->mask, mask);
	if (old)
		bpf_cpumask_release(old);
	return 0;
}

static s32 init_online(void)
{
	const struct cpumask *online = NULL;
	struct bpf_cpumask *mask, *old;
	struct mask_ctx *mc;
	u32 zero = 0, i;

	mc = bpf_map_lookup_elem(&online_mask, &zero);
	if (!mc)
		return -ENOENT;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;

	if (bpf_ksym_exists(scx_bpf_get_online_cpumask))
		online = scx_bpf_get_online_cpumask();
	bpf_for(i, 0, nr_cpus) {
		bool on;

		if (i >= MAX_CPUS)
			break;
		/* without the kfunc, trust the agent: known == was online */
		on = online ? bpf_cpumask_test_cpu(i, online) : cpu_topo_known[i];
		cpu_is_online[i] = on;
		if (on)
			bpf_cpumask_set_cpu(i, mask);
		else
			nr_offline++;
	}
	if (online)
		scx_bpf_put_cpumask(online);

	old = bpf_kptr_xchg(&mc->mask, mask);
	if (old)
		bpf_cpumask_release(old);
	return 0;
}

static s32 init_scratch(void)
{
	struct bpf_cpumask *mask, *old;
	struct mask_ctx *mc;
	u32 zero = 0, i;

	bpf_for(i, 0, nr_cpus) {
		mc = bpf_map_lookup_percpu_elem(&scratch_masks, &zero, i);
		if (!mc)
			continue;	/* not a possible CPU */
		mask = bpf_cpumask_create();
		if (!mask)
			return -ENOMEM;
		old = bpf_kptr_xchg(&mc->mask, mask);
		if (old)
			bpf_cpumask_release(old);
	}
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(locality_init)
{
	u32 i;
	s32 ret;

	bpf_for(i, 0, nr_cpus) {
		ret = scx_bpf_create_dsq(i, -1);
		if (!ret)
			ret = scx_bpf_create_dsq(pinned_dsq(i), -1);
		if (ret) {
			scx_bpf_error("failed to create the DSQs of CPU %d (%d)", i, ret);
			return ret;
		}
	}

	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		ret = make_mask(&llc_masks, i, llc_off[i], llc_off[i + 1], true);
		if (ret)
			return ret;
	}
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		ret = make_mask(&node_masks, i, node_off[i], node_off[i + 1], false);
		if (ret)
			return ret;
	}

	ret = init_online();
	if (ret)
		return ret;
	ret = init_scratch();
	if (ret)
		return ret;

	return heartbeat_start();
}

/*
 * The kernel's debug dump on an ejection: per CPU, our clock, queue and the
 * history above (times are ms before the dump); per task, its vtime.
 */
void BPF_STRUCT_OPS(locality_dump_cpu, struct scx_dump_ctx *dctx, s32 cpu,
		    bool idle)
{
	struct cpu_diag *d;
	u64 now = scx_bpf_now();

	if (!cpu_valid(cpu))
		return;
	d = &cpu_diag[cpu & CPU_MASK];
	scx_bpf_dump("locality: clock=%llu dsq=%d pinned=%d overloaded=%d online=%d\n",
		     vtime_now[cpu & CPU_MASK], scx_bpf_dsq_nr_queued(cpu),
		     scx_bpf_dsq_nr_queued(pinned_dsq(cpu)),
		     overloaded[cpu & CPU_MASK], cpu_is_online[cpu & CPU_MASK]);
	scx_bpf_dump("locality: dispatch %llu (local %llu steal %llu keep %llu empty %llu) last -%llums\n",
		     d->dispatches, d->local_moves, d->steals, d->keeps,
		     d->empties, time_delta(now, d->dispatch_at) / 1000000);
	scx_bpf_dump("locality: last ran pid %d vtime %llu -%llums\n",
		     d->run_pid, d->run_vtime,
		     time_delta(now, d->run_at) / 1000000);
}

void BPF_STRUCT_OPS(locality_dump_task, struct scx_dump_ctx *dctx,
		    struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);

	if (tctx)
		scx_bpf_dump("locality: vtime=%llu last_cpu=%d\n", tctx->vtime,
			     tctx->last_cpu);
}

void BPF_STRUCT_OPS(locality_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(locality_ops,
	       .select_cpu	= (void *)locality_select_cpu,
	       .enqueue		= (void *)locality_enqueue,
	       .dispatch	= (void *)locality_dispatch,
	       .update_idle	= (void *)locality_update_idle,
	       .flags		= SCX_OPS_KEEP_BUILTIN_IDLE | SCX_OPS_ALLOW_QUEUED_WAKEUP |
				  SCX_OPS_ENQ_LAST,
	       .running		= (void *)locality_running,
	       .stopping	= (void *)locality_stopping,
	       .tick		= (void *)locality_tick,
	       .enable		= (void *)locality_enable,
	       .init_task	= (void *)locality_init_task,
	       .exit_task	= (void *)locality_exit_task,
	       .cpu_online	= (void *)locality_cpu_online,
	       .cpu_offline	= (void *)locality_cpu_offline,
	       .init		= (void *)locality_init,
	       .exit		= (void *)locality_exit,
	       .dump_cpu	= (void *)locality_dump_cpu,
	       .dump_task	= (void *)locality_dump_task,
	       /*
	        * The kernel's default and largest stall timeout. Under QEMU/TCG a
	        * CPU holding 30-100 pinned stress-ng affinity tasks served them
	        * in vtime order yet made the last wait 7-12 s (max_wait_ms);
	        * scx_rusty was ejected at 12.4 s on the same run. max_wait_ms
	        * reports the real figure; SCX_TIMEOUT_MS lowers the limit.
	        */
	       .timeout_ms	= 30000,
	       .name		= "locality");
