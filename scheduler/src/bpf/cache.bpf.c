/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cache.bpf.c - which LLC should a process's threads share? (cache-aware
 * scheduling)
 *
 * Idea. Threads of one process share data; while they fit in one LLC,
 * keeping them there avoids bouncing cache lines between LLCs. When they
 * do not fit (too many running threads), the preference is dropped; while
 * the LLCs are too busy, the gates let ordinary balancing decide.
 *
 * Origin: Tim Chen, Chen Yu, Peter Zijlstra, "Cache aware scheduling" (RFC
 * v3, 2025; upstream since 7.2 as load-balance-only, CONFIG_SCHED_CACHE).
 * This is an independent implementation of the rules below, for sched_ext.
 *
 * Occupancy. Per process (key: tgid) a hash-map entry, created lazily when
 * runtime is charged (ops.stopping, ops.tick) to a task of a process with
 * more than one thread (its first preferred LLC is the LLC of that first
 * charge, unless overloaded), holds occ[llc]: the process's runtime on
 * each LLC, halved every epoch (epoch_ns, --epoch-period-ms). The decay is
 * lazy: the first charge in a new epoch shifts the array by the number of
 * epochs elapsed (claimed with a compare-and-swap on the entry's epoch so
 * only one CPU does it; each slot is halved with a compare-and-swap and
 * added to atomically, so no runtime and no decay is lost to a concurrent
 * charge), then re-evaluates the preference:
 *   - candidate = the LLC with the largest occupancy; the preferred LLC
 *     switches to it only if occ[candidate] > switch_ratio * occ[current]
 *     (hysteresis, default 2);
 *   - home node: when the agent gave the process a home node (home.bpf.c,
 *     proc_home), only that node's LLCs are candidates, so the preferred
 *     LLC lies where its memory is meant to be (the series leaves this
 *     alignment as future work); a preference outside the home node is
 *     dropped at once, without hysteresis; with no runtime in the home
 *     node yet, its least loaded LLC is taken. Without a home, the
 *     candidate is the largest-occupancy LLC of any node;
 *   - dropped (pref = -1) when the process's runnable threads, estimated
 *     as (sum(occ) + wait) / epoch right after the decay, wait being the
 *     time its threads waited to run, decayed alike (ops.running adds it,
 *     cache_running(); cache_rule_epoch(), cache_rule_verdict()),
 *     are more than aggr_tolerance times the LLC's cores (CPUs / SMT
 *     width, llc_nr_cores(); aggr_tolerance 100 = never). An overloaded
 *     LLC does not drop it: as in the series, the gates decide each move.
 *   - thread_util: sum(occ) / epoch / threads, one thread's share, which
 *     the gates add to the destination and take from the source (the
 *     series uses the task's own util_avg, which sched_ext tasks lack).
 * Entries are deleted when the process is seen with one thread, and when
 * its thread-group leader is freed (ops.exit_task). A preference not
 * refreshed for epoch_timeout epochs (--epoch-affinity-timeout) is
 * ignored.
 *
 * Gates (cache_may_enter / cache_may_leave; the rules of this file are in
 * cache_rules.h, tested by src/rules.rs), on each LLC's utilisation
 * (llc_util, numa_load.bpf.c: the decayed share of time its CPUs ran tasks)
 * against its capacity. --cache-gates=utilisation, the series'
 * _get_migrate_hint(), the moving thread's thread_util taken from the
 * source and added to the destination:
 *   both LLCs at or past overaggr_pct (--cache-overaggr-pct, 50) of their
 *     capacity: aggregation stands aside, ordinary balancing decides;
 *   into the preferred LLC: refused if it would be past overaggr_pct and
 *     busier than the source by more than imb_pct (--cache-imb-pct, 20);
 *   out of the preferred LLC: refused unless it is past overaggr_pct and
 *     busier than the destination by more than imb_pct;
 *   otherwise (neither LLC preferred): ordinary balancing decides.
 * --cache-gates=overload: into as above, without thread_util and without
 * standing aside; out only while the preferred LLC is overloaded.
 * Overloaded (a new entry's first LLC is not taken when it is) = more
 * runnable tasks than CPUs (llc_load) and utilisation above 100/117 of
 * capacity (the kernel's definition).
 *
 * Where it applies (cache_aware: on where a node holds several LLCs,
 * rodata.rs; --cache-aware / --no-cache-aware force it):
 *   pull.bpf.c: an idle CPU first steals queued tasks of its node's other
 *     LLCs whose process prefers its LLC (aggregation pull, gate "into");
 *     ordinary cross-LLC steals skip tasks whose preferred LLC is the
 *     victim's when the gate "out" forbids the move; a task queued
 *     behind a busy CPU outside its preferred LLC wakes an idle CPU of the
 *     preferred LLC to pull it.
 *   push.bpf.c: a waking task whose prev CPU is in its preferred LLC
 *     does not move to an idle CPU of the waker's LLC when the gate "out"
 *     forbids it (wake-affine step). When its LLC has no idle CPU and the
 *     gate forbids a move to the node's least busy other LLC, it waits
 *     there for a CPU (unless --cache-busy-wake=leave: cache_keep_busy());
 *     pull.bpf.c's hand-over at enqueue follows the same rule.
 *   numa_balance.bpf.c: the balance pass's active move (active_balance)
 *     leaves a thread that cache_keep() keeps in its preferred LLC.
 *   balancing pulls running tasks too (cache_aggr_mark): a CPU about to
 *     go idle, with nothing to steal, looks in its node (then in the other
 *     nodes from which the NUMA policy lets a task come, numa_may_gather(),
 *     unless --cache-within-node) for a CPU of
 *     another LLC running a task whose process prefers the idle CPU's LLC
 *     (cpu_run_pref, set in ops.running) and, gate "into" passing, asks it
 *     to come (cpu_aggr_req); at its next wake-up that task takes an idle
 *     CPU of its preferred LLC (cache_wake_pick). The kernel's balancer
 *     would migrate such a task when it next is queued; a sched_ext
 *     scheduler cannot move a running task, and a task that wakes often
 *     (hackbench's threads) is hardly ever queued, so the move is made at
 *     the wake-up instead. One ask per CPU at a time; an ask no longer
 *     matching the task running there is dropped. The ask belongs to the
 *     CPU, not the task: whichever thread of that process next wakes with
 *     it as its previous CPU uses it (home placement and a synchronous
 *     follow of the waker come first), and cpu_run_pref keeps the last
 *     task's preference after the CPU goes idle, so an idle CPU can be
 *     asked too (its last task then moves when it wakes).
 *   wake aggregation (cache_wake_aggr, --cache-wake-aggr, off by default
 *     as in the series): select_cpu takes an idle CPU of the preferred LLC
 *     (same node as prev) at every wake-up, asked or not.
 * Only LLC ids below CACHE_MAX_LLCS take part (the agent turns the
 * mechanism off on machines with more LLCs).
 *
 * Stats: STAT_CACHE_* (intf.h); the agent reads cache_procs for the
 * per-process preferred LLC and share.
 */

#include "locality.bpf.h"
#include "cache.bpf.h"
#include "cache_rules.h"
#include "home.bpf.h"
#include "numa.bpf.h"
#include "numa_load.bpf.h"
#include "decide.bpf.h"

/* Initialisers here and below are the agent's defaults; rodata.rs writes each. */
const volatile bool cache_aware;
/*
 * Occupancy accounting and the per-process statistics run only with the
 * mechanism on: they cost a hash lookup (or delete) at every ops.stopping and ops.tick.
 * The lab measures LLC residency from outside (locsample), for every
 * scheduler alike.
 */
const volatile bool cache_track;
const volatile bool cache_wake_aggr;
const volatile bool cache_busy_leave;
/* --cache-within-node clears it: aggregation asks only tasks of the idle CPU's node */
const volatile bool cache_across_nodes = true;
const volatile u64 cache_epoch_ns = DFL_CACHE_EPOCH_MS * 1000000ULL;
const volatile u32 cache_epoch_timeout = DFL_CACHE_EPOCH_TIMEOUT;
const volatile u32 cache_switch_ratio = DFL_CACHE_SWITCH_RATIO;
const volatile u32 cache_aggr_tol = DFL_CACHE_AGGR_TOL;
const volatile u32 cache_overaggr_pct = DFL_CACHE_OVERAGGR_PCT;
const volatile u32 cache_imb_pct = DFL_CACHE_IMB_PCT;
/* --cache-gates=utilisation: the series' gates; else =overload */
const volatile bool cache_gates_util;

#define CLLC_MASK	(CACHE_MAX_LLCS - 1)

/* layout known to cache.rs (offsets checked there by the value size) */
struct cache_proc {
	s32 pref_llc;		/* -1: none */
	u32 nr_threads;		/* last seen */
	u64 epoch;		/* epoch of the last decay (= last activity) */
	u64 total_rt;		/* cumulative runtime, ns */
	char comm[16];
	u64 occ[CACHE_MAX_LLCS];	/* decayed runtime per LLC */
	u64 rt[CACHE_MAX_LLCS];		/* cumulative runtime per LLC */
	u64 thread_util;	/* one thread's utilisation, as of the last epoch */
	u64 wait;		/* decayed time its threads waited runnable, ns */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CACHE_MAX_PROCS);
	__type(key, u32);
	__type(value, struct cache_proc);
} cache_procs SEC(".maps");

/* template for new entries (too big for the stack); arrays stay zero */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cache_proc);
} cache_tmpl SEC(".maps");

/* what cache_new_epoch() hands cache_rule_epoch() of each LLC; per CPU: too big for the stack */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cache_epoch_llcs);
} cache_epoch_scratch SEC(".maps");

/* ---- the rules are in cache_rules.h, tested by src/rules.rs ---- */

/* cores of LLC @l: its CPUs over the SMT width of its first CPU */
static __always_inline u32 llc_nr_cores(u32 l)
{
	u32 first = llc_off[l & LLC_MASK];

	if (first >= MAX_CPUS)
		return llc_nr_cpus(l);
	return cache_rule_cores(llc_nr_cpus(l),
				cpu_nr_sibs[llc_cpus[first & CPU_MASK] & CPU_MASK] + 1);
}

/* is LLC @l overloaded? */
static __always_inline bool cache_llc_overloaded(u32 l)
{
	return cache_rule_overloaded(llc_load[l & LLC_MASK], llc_util[l & LLC_MASK],
				     llc_nr_cpus(l));
}

static __always_inline u32 cache_hint(u32 src, u32 dst, u64 task_util, bool to_pref)
{
	u64 su = llc_util[src & LLC_MASK], du = llc_util[dst & LLC_MASK];
	u64 sc = (u64)llc_nr_cpus(src) << LOAD_SHIFT, dc = (u64)llc_nr_cpus(dst) << LOAD_SHIFT;

	if (!cache_gates_util)
		return cache_rule_migrate_hint_overload(su, du, dc,
							cache_llc_overloaded(to_pref ? dst : src),
							to_pref, cache_overaggr_pct, cache_imb_pct);
	return cache_rule_migrate_hint(su, sc, du, dc, task_util, to_pref, cache_overaggr_pct,
				       cache_imb_pct);
}

/*
 * gate "into": may a task of utilisation @task_util move from @src into its
 * preferred LLC @dst? Not when the gate forbids it, nor when both LLCs are
 * past the fit (aggregation stands aside).
 */
__hidden bool cache_may_enter(u32 src, u32 dst, u64 task_util)
{
	return cache_hint(src, dst, task_util, true) == CACHE_MIG_ALLOW;
}

/* gate "out": may a task of utilisation @task_util leave its preferred LLC @pref for @dst? */
__hidden bool cache_may_leave(u32 pref, u32 dst, u64 task_util)
{
	return cache_hint(pref, dst, task_util, false) != CACHE_MIG_FORBID;
}

static __always_inline u64 cache_epoch_now(void)
{
	return scx_bpf_now() / (cache_epoch_ns ?: 1);
}

/* the preferred LLC of the process whose entry is @e (may be NULL), as cache_pref() */
static __always_inline s32 cache_entry_pref(struct cache_proc *e, u64 *util)
{
	s32 pref;

	if (!e)
		return -1;
	pref = e->pref_llc;
	if (pref < 0 || pref >= nr_llcs || pref >= CACHE_MAX_LLCS)
		return -1;
	if (cache_epoch_now() - e->epoch > cache_epoch_timeout) {
		stat_inc(STAT_CACHE_DROP_TIMEOUT);
		return -1;
	}
	if (util)
		*util = e->thread_util;
	return pref;
}

/*
 * preferred LLC of @p's process, or -1; with @util (may be NULL), the
 * utilisation of one of its threads
 */
__hidden s32 cache_pref(struct task_struct *p __arg_trusted, u64 *util)
{
	u32 tgid = p->tgid;

	if (util)
		*util = 0;
	if (!cache_aware)
		return -1;
	return cache_entry_pref(bpf_map_lookup_elem(&cache_procs, &tgid), util);
}

/* node of LLC @l (its first CPU's), or -1 */
static __always_inline s32 cache_llc_node(u32 l)
{
	u32 first = llc_off[l & LLC_MASK];

	if (first >= MAX_CPUS)
		return -1;
	return cpu_node[llc_cpus[first & CPU_MASK] & CPU_MASK];
}

/*
 * Should @p stay in LLC @llc rather than take an idle CPU in LLC @dst? True
 * if @llc is its preferred LLC and the gate "out" forbids the move. @dst
 * -1: any other LLC of @llc's node, the least busy standing for all (if
 * the gate forbids that one, it forbids every one); the overload gates do
 * not look at the destination, so there the first one found stands.
 */
__hidden bool cache_keep(struct task_struct *p __arg_trusted, u32 llc, s32 dst)
{
	u64 util, least = ~0ULL;
	s32 pref = cache_pref(p, &util), node;
	u32 i, n = nr_llcs;

	if (pref < 0 || (u32)pref != llc)
		return false;
	if (dst < 0) {
		node = cache_llc_node(llc);
		if (n > CACHE_MAX_LLCS)
			n = CACHE_MAX_LLCS;
		bpf_for(i, 0, n) {
			u64 u;

			if (i == llc || cache_llc_node(i) != node)
				continue;
			if (!cache_gates_util) {
				dst = i;
				break;
			}
			/* per CPU, so LLCs of different sizes compare */
			u = ((u64)llc_util[i & LLC_MASK] << LOAD_SHIFT) / (llc_nr_cpus(i) ?: 1);
			if (u < least) {
				least = u;
				dst = i;
			}
		}
		if (dst < 0)
			return false;	/* no other LLC in the node */
	}
	return !cache_may_leave(llc, dst, util);
}

/*
 * @p, waking or about to queue, found no idle CPU in LLC @llc: wait there
 * rather than take an idle CPU elsewhere (@dst as cache_keep())? As the
 * gate "out" says, unless --cache-busy-wake=leave.
 */
__hidden bool cache_keep_busy(struct task_struct *p __arg_trusted, u32 llc, s32 dst)
{
	return !cache_busy_leave && cache_keep(p, llc, dst);
}

/*
 * Decay *@slot by @d epochs and return the value written. With a
 * compare-and-swap: other CPUs keep adding runtime (cache_account) and
 * waits (cache_running) while this one decays, and a plain store would
 * drop what they added, or undo the decay with theirs.
 */
static __always_inline u64 cache_decay_slot(u64 *slot, u64 d)
{
	u64 seen = READ_ONCE(*slot), v = 0, got;
	int k;

	for (k = 0; k < 4; k++) {
		v = cache_rule_decay(seen, d);
		got = __sync_val_compare_and_swap(slot, seen, v);
		if (got == seen)
			break;
		seen = got;
	}
	return v;
}

/*
 * New epoch for @e: decay by @d epochs and re-evaluate the preference
 * (cache_rules.h: decay and scan each LLC, pick, verdict); @home is the
 * process's home node or -1. Not inlined: one copy, called from
 * cache_account().
 */
static __noinline void cache_new_epoch(struct cache_proc *e, u64 d, s32 home)
{
	struct cache_epoch_llcs *l;
	struct cache_scan scan;
	u32 i, n = nr_llcs, verdict = CACHE_PREF_KEEP, zero = 0;
	s32 best, cur;
	u64 wait;

	if (!e)
		return;
	l = bpf_map_lookup_elem(&cache_epoch_scratch, &zero);
	if (!l)
		return;
	if (n > CACHE_MAX_LLCS)
		n = CACHE_MAX_LLCS;
	bpf_for(i, 0, n) {
		u32 k = i & CLLC_MASK;

		l->occ[k] = cache_decay_slot(&e->occ[k], d);
		l->load[k] = llc_load[i & LLC_MASK];
		l->node[k] = cache_llc_node(i);
		l->cores[k] = llc_nr_cores(i);
	}
	/* the time its threads waited to run decays with the runtime */
	cache_decay_slot(&e->wait, d);
	cur = e->pref_llc;
	wait = READ_ONCE(e->wait);
	best = cache_rule_epoch(l, n, home, cur, e->occ[cur & CLLC_MASK], wait, cache_switch_ratio,
				cache_epoch_ns, cache_aggr_tol, &scan, &verdict);
	if (best < 0) {
		e->pref_llc = -1;
		return;
	}
	e->thread_util = cache_rule_thread_util(scan.total, cache_epoch_ns, e->nr_threads);
	if (verdict != CACHE_PREF_KEEP) {
		if (cur >= 0)
			stat_inc(STAT_CACHE_DROP_FIT);
		e->pref_llc = -1;
		return;
	}
	if (cur != best)
		stat_inc(cur < 0 ? STAT_CACHE_PREF_SET : STAT_CACHE_PREF_SWITCH);
	e->pref_llc = best;
}

/* ops.stopping, ops.tick: charge @used ns run on @cpu to @p's process. */
__hidden void cache_account(struct task_struct *p __arg_trusted, s32 cpu, u64 used)
{
	struct cache_proc *e, *init;
	u32 tgid, l, nt, zero = 0;
	u64 ep, old;
	s32 home;

	if (!cache_track || !cpu_valid(cpu))
		return;
	l = cpu_llc[cpu & CPU_MASK];
	if (l >= CACHE_MAX_LLCS)
		return;
	tgid = p->tgid;
	nt = p->signal->nr_threads;
	if (nt <= 1) {
		/* one thread: nothing to aggregate; forget it if known */
		bpf_map_delete_elem(&cache_procs, &tgid);
		return;
	}
	ep = cache_epoch_now();
	e = bpf_map_lookup_elem(&cache_procs, &tgid);
	if (!e) {
		init = bpf_map_lookup_elem(&cache_tmpl, &zero);
		if (!init)
			return;
		/*
		 * A new entry starts preferring the LLC it first ran in (unless
		 * overloaded), so threads forked in the first epoch are already
		 * kept together; the epoch re-evaluation takes over from there.
		 * Not outside the process's home node: the first epoch picks
		 * one inside it.
		 */
		home = task_proc_home(p);
		init->pref_llc = cache_llc_overloaded(l) ||
				 (home >= 0 && cache_llc_node(l) != home) ? -1 : (s32)l;
		init->epoch = ep;
		bpf_probe_read_kernel_str(init->comm, sizeof(init->comm),
					  p->group_leader->comm);
		if (!bpf_map_update_elem(&cache_procs, &tgid, init, BPF_NOEXIST) &&
		    init->pref_llc >= 0)
			stat_inc(STAT_CACHE_PREF_SET);
		e = bpf_map_lookup_elem(&cache_procs, &tgid);
		if (!e)
			return;
	}
	e->nr_threads = nt;
	old = e->epoch;
	if (ep != old && __sync_val_compare_and_swap(&e->epoch, old, ep) == old)
		cache_new_epoch(e, ep - old, task_proc_home(p));

	/* several CPUs stop threads of one process at once: the decided-on sum is atomic */
	__sync_fetch_and_add(&e->occ[l & CLLC_MASK], used);
	/* racy adds: statistics only */
	e->rt[l & CLLC_MASK] += used;
	e->total_rt += used;
	stat_add(STAT_CACHE_RT_NS, used);
	if (e->pref_llc == (s32)l)
		stat_add(STAT_CACHE_RT_PREF_NS, used);
}

/* ops.exit_task: the leader's task is freed after its whole group: drop the entry */
__hidden void cache_task_exit(struct task_struct *p __arg_trusted)
{
	u32 tgid;

	if (p->pid != p->tgid)
		return;
	tgid = p->tgid;
	bpf_map_delete_elem(&cache_procs, &tgid);
}

/* preferred LLC + 1 of the task running on each CPU, 0 none (ops.running) */
s32 cpu_run_pref[MAX_CPUS];
/* utilisation of one thread of that task's process (cache_rule_thread_util) */
u64 cpu_run_util[MAX_CPUS];
/* LLC + 1 of an idle CPU that asked the task on this CPU to come, 0 none */
s32 cpu_aggr_req[MAX_CPUS];
/*
 * Per LLC: how many CPUs of other nodes last ran a task whose process
 * prefers it (kept by cache_running(), the only writer of a CPU's
 * cpu_run_pref): an idle CPU looks beyond its node only when its LLC's count
 * is not 0, so the common case costs one read.
 */
u32 nr_pref_away[MAX_LLCS];

/*
 * cpu_run_pref of CPU @c changes from @old to @want (LLC + 1, 0 none); the
 * count is read only by cache_aggr_mark's look beyond the node, so it is not
 * kept where that look never happens
 */
static __always_inline void pref_away_update(u32 c, s32 old, s32 want)
{
	if (old == want || !cache_across_nodes || nr_nodes < 2)
		return;
	if (old > 0 && old <= MAX_LLCS && cache_llc_node(old - 1) != cpu_node[c])
		__sync_fetch_and_sub(&nr_pref_away[(old - 1) & LLC_MASK], 1);
	if (want > 0 && want <= MAX_LLCS && cache_llc_node(want - 1) != cpu_node[c])
		__sync_fetch_and_add(&nr_pref_away[(want - 1) & LLC_MASK], 1);
}

/* ops.running: note @p's preferred LLC; drop an ask meant for another */
__hidden void cache_running(struct task_struct *p __arg_trusted, s32 cpu, u64 waited)
{
	u32 c = cpu & CPU_MASK, tgid = p->tgid;
	struct cache_proc *e;
	u64 util = 0;
	s32 want;

	if (!cache_aware || !cpu_valid(cpu))
		return;
	e = bpf_map_lookup_elem(&cache_procs, &tgid);
	/* runnable, not only running: the fit counts the threads that wait too */
	if (e && waited)
		__sync_fetch_and_add(&e->wait, waited);
	want = cache_entry_pref(e, &util) + 1;
	pref_away_update(c, cpu_run_pref[c], want);
	cpu_run_pref[c] = want;
	cpu_run_util[c] = util;
	if (cpu_aggr_req[c] && cpu_aggr_req[c] != want)
		cpu_aggr_req[c] = 0;
}

/*
 * Ask one task running on a CPU of node @m, outside LLC @l, whose process
 * prefers @l, to come: true if one was asked. *@refused is set when the gate
 * "into" refused a candidate.
 */
static __noinline bool aggr_ask_in_node(u32 l, u32 m, bool *refused)
{
	u32 i, start, end;

	if (m >= MAX_NODES)
		return false;
	start = node_off[m];
	end = node_off[m + 1];
	if (end > MAX_CPUS || end <= start)
		return false;
	bpf_for(i, start, end) {
		u32 v = node_cpus[i & CPU_MASK] & CPU_MASK;

		if (cpu_llc[v] == l || cpu_run_pref[v] != (s32)l + 1 || cpu_aggr_req[v])
			continue;
		if (!cache_may_enter(cpu_llc[v], l, cpu_run_util[v])) {
			*refused = true;
			continue;
		}
		/* another idle CPU may be asking the same one: first wins */
		if (__sync_val_compare_and_swap(&cpu_aggr_req[v], 0, (s32)l + 1) != 0)
			continue;
		return true;
	}
	return false;
}

/*
 * @cpu goes idle with nothing to steal: ask one task running in another LLC,
 * whose process prefers @cpu's LLC, to come: first in @cpu's node, then
 * (--cache-within-node off) in the other nodes, from each only while the
 * NUMA policy lets one task move from there to here (numa_may_gather()).
 * The series migrates towards the preferred LLC at every level of load
 * balancing, NUMA included.
 */
__hidden void cache_aggr_mark(s32 cpu)
{
	u32 c = cpu & CPU_MASK, l = cpu_llc[c], n = cpu_node[c], m;
	bool refused = false;

	if (!cache_aware || l >= CACHE_MAX_LLCS || n >= MAX_NODES)
		return;
	if (aggr_ask_in_node(l, n, &refused)) {
		stat_inc(STAT_CACHE_AGGR_MARK);
		return;
	}
	if (cache_across_nodes && nr_nodes > 1 && nr_pref_away[l & LLC_MASK]) {
		bpf_for(m, 0, nr_nodes) {
			if (m >= MAX_NODES)
				break;
			if (m == n || !numa_may_gather(n, m))
				continue;
			if (aggr_ask_in_node(l, m, &refused)) {
				stat_inc(STAT_CACHE_AGGR_MARK);
				return;
			}
		}
	}
	/* one refusal per CPU going idle, not one per candidate looked at */
	if (refused)
		stat_inc(STAT_CACHE_REFUSE_OVERAGGR);
}

/*
 * Wake-up into the preferred LLC: when the task's last CPU was asked to
 * send it there (cache_aggr_mark), or always with wake aggregation
 * (cache_wake_aggr). A claimed idle CPU of @p's preferred LLC if that LLC
 * is not prev's, passes the gate "into" and lies in prev's node, or in
 * another node that asked and the NUMA policy still lets @p go to; else -1.
 * Uses the scratch mask.
 */
__hidden s32 cache_wake_pick(struct task_struct *p __arg_trusted, s32 prev_cpu)
{
	struct task_ctx *tctx = NULL;
	struct bpf_cpumask *tmp;
	const struct cpumask *m;
	u64 util;
	u32 src, dn, pn;
	s32 pref, cpu, asked;

	if (!cache_aware || !cpu_valid(prev_cpu))
		return -1;
	/* nothing asked and no wake aggregation: spare the map lookup */
	if (!cache_wake_aggr && !cpu_aggr_req[prev_cpu & CPU_MASK])
		return -1;
	pref = cache_pref(p, &util);
	src = cpu_llc[prev_cpu & CPU_MASK];
	asked = cpu_aggr_req[prev_cpu & CPU_MASK];
	if (pref < 0 || (u32)pref == src)
		return -1;
	if (asked == pref + 1)
		cpu_aggr_req[prev_cpu & CPU_MASK] = 0;	/* one try per ask */
	else if (!cache_wake_aggr)
		return -1;
	dn = cache_llc_node(pref);
	pn = cpu_node[prev_cpu & CPU_MASK];
	if (dn >= MAX_NODES)
		return -1;
	/*
	 * Another node only when asked from there, and while the NUMA policy
	 * still lets this task go (the ask was checked when made; loads move)
	 */
	if (dn != pn) {
		tctx = task_ctx(p);
		if (asked != pref + 1 || !cache_across_nodes || !numa_may_gather(dn, pn) ||
		    !numa_task_may_cross(tctx, scx_bpf_now()) || !home_may_leave(p, tctx, pn))
			return -1;
	}
	if (!cache_may_enter(src, pref, util)) {
		stat_inc(STAT_CACHE_REFUSE_OVERAGGR);
		return -1;
	}
	tmp = scratch_mask();
	m = llc_cpumask(pref);
	if (!tmp || !m)
		return -1;
	bpf_cpumask_and(tmp, m, p->cpus_ptr);
	cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
	if (cpu >= 0) {
		u32 why = asked == pref + 1 ? STAT_CACHE_AGGR_MOVE : STAT_CACHE_AGGR_WAKE;

		stat_inc(why);
		if (dn != pn) {
			numa_task_crossed(tctx, scx_bpf_now());
			why = STAT_XNODE_CACHE_AGGR;
			stat_inc(why);
		}
		decide_why(task_ctx(p), why);
	}
	return cpu;
}

/*
 * @p was queued on busy @victim outside its preferred LLC: kick an idle CPU
 * of the preferred LLC (same node) to pull it. True if one was kicked.
 */
__hidden bool cache_kick_pref(struct task_struct *p __arg_trusted, s32 victim)
{
	u32 v = victim & CPU_MASK, src = cpu_llc[v];
	u64 util;
	s32 pref = cache_pref(p, &util);

	if (pref < 0 || (u32)pref == src)
		return false;
	if (llc_off[pref & LLC_MASK] >= MAX_CPUS ||
	    cpu_node[llc_cpus[llc_off[pref & LLC_MASK] & CPU_MASK] & CPU_MASK] != cpu_node[v])
		return false;
	if (!cache_may_enter(src, pref, util))
		return false;
	if (kick_idle_in(p, llc_cpumask(pref))) {
		stat_inc(STAT_CACHE_AGGR_KICK);
		return true;
	}
	return false;
}
