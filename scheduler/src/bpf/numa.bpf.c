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
 *   NUMA_OFF: no policy, see below.
 * A balance move corrects half of what remains (numa_moves(), the
 * kernel's "imbalance >>= 1"): a node pair 3 vs 1 moves one task.
 *
 * Where it applies, rule by rule (the names are the same in the code, the
 * counters and the docs):
 * balance_pass. Cross-node balance pass (timer, every numa_interval_ns): for each node
 *    d, src = the most loaded other node, node_budget[d] = numa_moves(src,
 *    d); a budget > 0 lets CPUs of d steal that many tasks from src's DSQs
 *    until the next pass (pull.bpf.c steal_remote), and the pass kicks up to 4
 *    idle CPUs of d to do it. Steals inside a node are unchanged (they run
 *    on every dispatch).
 * idle_pull_across. Idle pull (--idle-pull-across, off by default): a CPU about to go idle
 *    (pull.bpf.c steal_remote, nothing runnable here) may take a task queued in
 *    another node without a budget, when that node holds enough more tasks
 *    now (numa_nr_now(): busy CPUs and queued tasks at this instant) for
 *    numa_rule_idle_pull(), the kernel's newidle balance across nodes: the
 *    difference in tasks, the allowance, halved. Only a task queued for at
 *    least NUMA_PULL_WAIT_US (the kernel's migration cost: a task queued just
 *    now is cache hot, and its CPU frees up soon); settled_kept does not
 *    apply. balance_pass reads averages of utilisation, which a bursty load under
 *    emulation keeps low on both nodes, so it never sees a node that
 *    queues while the other idles.
 * push_across. Push across nodes (push.bpf.c's idle search, reached only when prev's node
 *    has no idle allowed CPU): a new task by default (push_cross_fork), a
 *    waking one only with --push-cross-node=always (push_cross_wake;
 *    also the default with NUMA_OFF) or, with --push-cross-node=unpaired
 *    (push_cross_unpaired), one that is not woken synchronously by a
 *    partner of few partners (numa_wake_paired(): the two ends of a pipe
 *    or socket stay). Only out of a node that is overloaded with the
 *    waking task counted (one more runnable task, adding its own
 *    utilisation: numa_account() keeps it), into the least loaded node if
 *    that one is not (node_overloaded); the CPU is taken from that node (else
 *    anywhere allowed). By default every node keeps its waking tasks, as
 *    the kernel's wake-up does (it searches only the LLC of prev or of the
 *    waker): a CPU there frees up soon, and spreading a lightly loaded
 *    communicating workload over two nodes is Gorman's failure case; on a
 *    node of 2 CPUs any third runnable task made the node "overloaded"
 *    and split a communicating pair. The balance pass and its steals even
 *    out what must be evened out.
 * wake_follow. Wake-up following the waker (push_follow_waker()): a task woken
 *    synchronously (SCX_WAKE_SYNC: pipes, sockets) by a task on another
 *    node takes an idle CPU of the waker's LLC, else of its node, if
 *    numa_moves(waker node + the task, the task's node) == 0: the result is
 *    within the allowance, so a communicating pair ends up on one node
 *    (numa_wake_follow()). The kernel gets the same from wake_affine().
 *    Only for tasks with few partners (numa_few_partners(), below) and
 *    not into a node the task would overload (node_overloaded); --no-wake-follow
 *    turns it off.
 * place_new. Exec (and, with --place-at-fork, a new process: fork of a thread-group
 *    leader, p->pid == p->tgid). Default (--exec-placement=least-loaded,
 *    Bligh and Hohnbaum's exec balancing): stays where it is while its own
 *    CPU runs at most one other task (numa_cpu_nr_now(),
 *    numa_rule_new_cpu_quiet()); else starts on the node with the
 *    fewest tasks now whenever it has fewer than the parent's node without
 *    the program (numa_nr_now(), numa_rule_new_least_loaded(); counted
 *    at the decision, not averaged). --exec-placement=least-loaded-always
 *    skips the first test. --exec-placement=allowance:
 *    stays near its parent (normal push) while the parent's node is
 *    not overloaded and numa_rule_adjust(idle CPUs of the least loaded node -
 *    idle CPUs of the parent's node, busiest = parent node, local_running
 *    = its busy CPUs + 1) is 0, i.e. the parent's node is within the
 *    allowance, as in the kernel's find_idlest_group(); otherwise it starts on an idle CPU of the least loaded
 *    node that has one allowed ("room"; a fuller node's idle CPU is taken
 *    only while the parent's node is still beyond the allowance against
 *    it), like the kernel's find_idlest_group(). Bligh and Hohnbaum balanced at exec
 *    only: code that forks and never execs stays on its node, with the memory
 *    it shares with its parent; the balance pass spreads it if it must. New
 *    threads and forked children start near their parent (its LLC, then
 *    node) through the normal push.
 *    Exec: sched_ext never calls ops.select_cpu for exec (the kernel
 *    returns prev_cpu for WF_EXEC before asking the BPF scheduler, and
 *    the headers have no SCX_WAKE_EXEC), so a
 *    tp_btf/sched_process_exec program marks the task and the placement
 *    is done at its next ops.select_cpu or ops.enqueue; a program that
 *    stayed is checked again at its slice ends for one balance interval
 *    (numa_place_exec()).
 * task_may_cross. Per task: in policy modes a task that changed node (by
 *    any of the above) may not change node again by balance_pass,
 *    idle_pull_across, push_across or wake_follow for numa_interval_ns
 *    (task_ctx.xnode_at). Draining an offline CPU ignores all of this.
 * settled_kept. Settled tasks (policy modes): a task that has run numa_interval_ns
 *    or more on its node since it came there has likely built its memory
 *    there. A cross-node steal (balance_pass) passes over it for a queued task that
 *    has not, and takes it only once its node's budget went unused for
 *    NUMA_SETTLED_TRIES passes in a row (node_unused), i.e. when nothing
 *    else can fix the imbalance. This is the kernel's
 *    migrate_degrades_locality() + nr_balance_failed escalation, with
 *    runtime on the node standing in for NUMA hinting faults, which
 *    sched_ext tasks do not get. Seen on numaq4 (8 memory-bound jobs, 4
 *    nodes): without it a job preempted by a short-lived task was stolen
 *    to another node, away from its memory, and ran there for a long part
 *    of its run.
 * active_balance. Active balance: steals only take queued tasks, so a node whose tasks
 *    all run (8 threads of a parallel job on the 8 CPUs of one node, the
 *    other node idle) never gives one up. When a node's budget has gone
 *    unspent for NUMA_ACTIVE_TRIES passes in a row and it still has an
 *    idle CPU, the pass marks the busiest CPU of the source node
 *    (active_to[cpu] = the node) and preempts it; ops.enqueue then sends
 *    the task it puts back to an idle CPU of the marked node
 *    (numa_active_take(); STAT_XNODE_ACTIVE). One CPU per node per pass.
 *    Not a thread kept in its process's preferred LLC (cache_keep(): the
 *    cache-aware series keeps generic balancing from moving a task out of
 *    its preferred LLC, at every level).
 *    The kernel does the same with its stopper thread (active_load_balance)
 *    after repeated failed balance attempts.
 * node_overloaded. Overloaded nodes: the allowance is for nodes with spare capacity.
 *    An overloaded node (see Policy) is balanced without it, as the kernel
 *    balances an overloaded busiest group: a new task (a waking one with
 *    --push-cross-node=always) that finds no idle CPU on its node may take
 *    one on a node that is not overloaded (push_across; STAT_NUMA_OVERLOAD),
 *    and an idle CPU of a node that is
 *    not overloaded may steal from it between passes (steal_remote;
 *    STAT_XNODE_STEAL_OVERLOAD), woken for it by pull_kick_stealer().
 *    task_may_cross, settled_kept and home nodes still apply, and a task
 *    does not follow its waker (wake_follow) into a node it would overload. The averaged load
 *    cannot show this state: hackbench over sockets keeps about one task
 *    per CPU on average while every wake-up finds its node's CPUs busy
 *    (docs/decisions.md, "Overloaded nodes and the BPF clock").
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
 * docs/decisions.md, "Overloaded nodes and the BPF clock").
 *
 * Stats: STAT_XNODE_* (cross-node moves by cause), STAT_NUMA_* (policy
 * decisions); node_load / node_load_sum / load_samples (globals).
 */
#include "locality.bpf.h"
#include "numa.bpf.h"
#include "numa_rules.h"
#include "home.bpf.h"
#include "decide.bpf.h"
#include "cache.bpf.h"

const volatile u32 numa_mode = NUMA_UPSTREAM;
const volatile u64 numa_interval_ns = DFL_NUMA_INTERVAL_MS * 1000000ULL;
const volatile u32 node_imb_nr[MAX_NODES];	/* upstream allowance per node */

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

s32 node_budget[MAX_NODES];	/* cross-node steals allowed until the next pass */
u32 node_src[MAX_NODES];	/* ... from this node */
u64 numa_last_pass_ns;
u32 node_unused[MAX_NODES];	/* passes in a row whose budget was not spent */
s32 active_to[MAX_CPUS];	/* active_balance: node to send this CPU's preempted task to, +1; 0 none */
u64 active_at[MAX_CPUS];	/* ... marked then; a mark older than one interval is void */
s32 active_pid[MAX_CPUS];	/* ... for the task that was running there then */

/* timer scratch */
u32 llc_load_acc[MAX_LLCS], node_load_acc[MAX_NODES], node_nr_now[MAX_NODES];
u32 node_util_acc[MAX_NODES];
u32 node_nr_last[MAX_NODES];	/* runnable tasks per node at the last whole sample */

/* a node's load as the policy sees it: the average plus what it has not caught up with */
static __always_inline u32 node_load_now(u32 n)
{
	return node_load[n & NODE_MASK] + node_placed[n & NODE_MASK];
}

/* what the rules (numa_rules.h) see of node @n */
static __always_inline struct numa_node_fig numa_fig(u32 n)
{
	n &= NODE_MASK;
	return (struct numa_node_fig){
		.cpus = node_nr_cpus(n),
		.nr_last = node_nr_last[n],
		.load = node_load[n],
		.util = node_util[n],
		.placed = node_placed[n],
		.imb_nr = node_imb_nr[n],
	};
}

/*
 * A new program (exec, or a process placed at fork) is counted on its node
 * at once: the average only sees it after several samples, so until then
 * its load is counted in node_placed; each sample removes the part the
 * average has taken up (numa_load_end()). Without this, eight jobs started
 * together all saw the same stale loads: numaq4 started three on one node
 * and one on another, and the balance pass later moved a job away from its
 * memory. numa_place_new() counts it with its choice (numa_rule_claim());
 * this is the plain count, where there was no choice to make.
 */
static __always_inline void numa_count_placed(u32 n)
{
	__sync_fetch_and_add(&node_placed[n & NODE_MASK], 1 << LOAD_SHIFT);
}

/*
 * Take one new program's count off node @n again, never below 0: a sample
 * may have taken part of it up meanwhile (numa_load_end()).
 */
static __always_inline void numa_uncount_placed(u32 n)
{
	u32 i, v;

	bpf_for(i, 0, NUMA_CLAIM_TRIES) {
		v = node_placed[n & NODE_MASK];
		if (__sync_val_compare_and_swap(&node_placed[n & NODE_MASK], v,
						v > 1 << LOAD_SHIFT ? v - (1 << LOAD_SHIFT) : 0) == v)
			break;
	}
}

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

/* ---- the policy: its rules are in numa_rules.h, tested by src/rules.rs ---- */

/* node_overloaded: is node @n overloaded, counting @extra tasks about to be added? */
__hidden bool numa_node_overloaded(u32 n, u32 extra)
{
	struct numa_node_fig f = numa_fig(n);

	return numa_rule_overloaded(&f, extra);
}

/* tasks that may move from node @src to @dst, @extra not in src's figures yet */
static __always_inline u32 numa_moves(u32 src, u32 dst, u32 extra)
{
	struct numa_node_fig s = numa_fig(src), d = numa_fig(dst);

	return numa_rule_moves(numa_mode, &s, &d, extra);
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
 * function is global: with a local count the verifier followed every CPU of
 * every node and gave up.
 */
struct nr_now_acc {
	u32 busy, queued, free;
} nr_now_acc[MAX_CPUS];

/* tasks waiting for CPU @c now: its own DSQs and its local DSQ */
static __always_inline u32 numa_cpu_queued(s32 c)
{
	s32 lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | c);

	return nr_queued_cpu(c) + (lq > 0 ? lq : 0);
}

__hidden __noinline u32 numa_nr_now(u32 n, s32 self_cpu)
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
 * Take one unit of node @n's cross-node budget. Several CPUs of @n may steal
 * at once, so the check and the spending are one atomic step: the budget
 * never goes below zero and the steals never exceed what the pass gave.
 */
static bool numa_budget_take(u32 n)
{
	s32 *b = &node_budget[n & NODE_MASK], old;
	u32 i;

	bpf_for(i, 0, 8) {
		old = *b;
		if (old <= 0)
			return false;
		if (__sync_val_compare_and_swap(b, old, old - 1) == old)
			return true;
	}
	return false;
}

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

/* active_balance: preempt the busiest non-idle CPU of node @src for node @d */
static void numa_active_kick(u32 src, u32 d)
{
	const struct cpumask *idle;
	u32 i, best_load = 0;
	s32 best = -1;

	if (src >= MAX_NODES)
		return;
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, node_off[src], node_off[src + 1]) {
		u32 c = node_cpus[i & CPU_MASK] & CPU_MASK;

		if (bpf_cpumask_test_cpu(c, idle) || !cpu_online(c))
			continue;
		if (best < 0 || cpu_load[c] > best_load) {
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

/* ---- hooks used by push.bpf.c and pull.bpf.c ---- */

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

/*
 * wake_follow's partner test (numa_rule_few_partners()) for the wakee @t and
 * the waker @w (either may be NULL), which runs on @waker_cpu; both
 * counts are kept by push_record_wakee() in push.bpf.c. Without it a
 * task feeding many wakees piled them all on its node (docs/decisions.md,
 * "Overloaded nodes and the BPF clock").
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

/* @p followed its waker to another node (the push found it a CPU there) */
__hidden void numa_followed(struct task_ctx *tctx)
{
	numa_task_crossed(tctx, scx_bpf_now());
	decide_why(tctx, STAT_XNODE_WAKE_FOLLOW);
	stat_inc(STAT_XNODE_WAKE_FOLLOW);
}

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

/* ---- load tracking and the balance pass (called from the timer) ---- */

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

/* One sample of CPU @c: @nr runnable tasks, @busy not idle now. */
__hidden void numa_load_cpu(u32 c, u32 nr, bool busy)
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

static void numa_balance_pass(u64 now);

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
	numa_balance_pass(util_now);
}

static void numa_balance_pass(u64 now)
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

/* ---- exec ---- */

/*
 * Mark an exec so the next ops.select_cpu / ops.enqueue places the task
 * (the kernel does not ask sched_ext schedulers at exec, see above).
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(locality_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	struct task_ctx *tctx;

	if (numa_mode == NUMA_OFF || nr_nodes < 2)
		return 0;
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (tctx) {
		tctx->exec_pending = 1;
		tctx->exec_at = 0;
	}
	return 0;
}
