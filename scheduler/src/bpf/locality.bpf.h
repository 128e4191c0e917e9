/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * locality.bpf.h - what every BPF unit of scx_locality shares.
 *
 * The BPF side is compiled as separate units and linked into one object
 * by build.rs. The globals declared here are defined in locality.bpf.c,
 * the bottom unit (it says in which order the units call each other);
 * each map is described once by a *_MAP_DEF macro, defined by its owner and declared
 * extern here (libbpf's linker requires the two to match). Small helpers
 * used everywhere are static inline here; each mechanism's interface to
 * the others is declared in its own header (numa.bpf.h, ...).
 *
 * Functions one unit calls in another are __hidden: visible to the
 * linker, not exported in the skeleton. libbpf gives hidden functions
 * static linkage, so the verifier checks one again at every call, in the
 * caller's state. The few called from many sites or inside loops are
 * plain global functions instead (decide_record(), steal_from(),
 * numa_load_cpu(), numa_nr_now(), idle_pick_llc(), idle_pick_node()):
 * the verifier checks those once, on their own, so their arguments are
 * scalars or trusted task pointers (__arg_trusted) and they check what
 * they index with them. The verifier's cost per function:
 * `bin/lab verifier --functions`.
 */
#ifndef __LOCALITY_BPF_H
#define __LOCALITY_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "numa_rules.h"	/* struct numa_task_util */

#define CPU_MASK	(MAX_CPUS - 1)
#define LLC_MASK	(MAX_LLCS - 1)
#define NODE_MASK	(MAX_NODES - 1)
#define MIN(a, b)	((a) < (b) ? (a) : (b))

/* ---- knobs and topology: rodata written by the agent before load (locality.bpf.c) ---- */

extern const volatile u32 nr_cpus;	/* nr_cpu_ids: every CPU id is below */
extern const volatile u32 nr_llcs;
extern const volatile u32 nr_nodes;

extern const volatile u64 slice_ns;
extern const volatile u64 slice_lag_ns;
extern const volatile u64 iwq_period_ns;
extern const volatile bool no_steal;
extern const volatile bool handoff_wake;
extern const volatile bool handoff_requeue;
extern const volatile bool no_idle_core;
extern const volatile bool idle_prev_first;
extern const volatile u64 wake_gran_ns;
extern const volatile bool steal_cross_node;
extern const volatile bool idle_pull_across;
extern const volatile bool push_cross_wake;
extern const volatile bool push_cross_fork;
extern const volatile bool push_cross_unpaired;
extern const volatile bool wake_follow;
extern const volatile bool place_at_fork;
extern const volatile bool place_least_loaded;
extern const volatile bool place_quiet_stays;
extern const volatile bool wake_affine;
extern const volatile bool sync_to_waker;
extern const volatile bool sync_to_waker_pairs;

/* the NUMA policy's mode, period and allowance per node (numa*.bpf.c) */
extern const volatile u32 numa_mode;
extern const volatile u64 numa_interval_ns;
extern const volatile u32 node_imb_nr[MAX_NODES];

extern const volatile u16 cpu_llc[MAX_CPUS];	/* dense LLC index of each CPU */
extern const volatile u16 cpu_node[MAX_CPUS];	/* dense node index of each CPU */
extern const volatile u16 cpu_core[MAX_CPUS];	/* dense core index of each CPU */
extern const volatile u8 cpu_topo_known[MAX_CPUS];

/* SMT siblings of each CPU (itself excluded): cpu_sibs[cpu * MAX_SMT + i] */
extern const volatile u8 cpu_nr_sibs[MAX_CPUS];
extern const volatile u16 cpu_sibs[MAX_CPUS * MAX_SMT];

/* CPU lists per LLC and node: LLC l owns llc_cpus[llc_off[l] .. llc_off[l + 1]) */
extern const volatile u32 llc_off[MAX_LLCS + 1];
extern const volatile u16 llc_cpus[MAX_CPUS];
extern const volatile u32 node_off[MAX_NODES + 1];
extern const volatile u16 node_cpus[MAX_CPUS];

/* ---- per-CPU state of locality.bpf.c (see the comments there) ---- */

extern u8 cpu_is_online[MAX_CPUS];
extern u32 nr_offline;
extern u32 rotor[MAX_CPUS];
extern u32 dsq_maybe_queued[MAX_CPUS];	/* 0: both DSQs of the CPU are empty */

/* what each CPU last did, written only by that CPU (ops.running, ops.dispatch) */
struct cpu_diag {
	u64 dispatches, local_moves, steals, keeps, empties;
	u64 dispatch_at, run_at, run_vtime;
	s32 run_pid;
};
extern struct cpu_diag cpu_diag[MAX_CPUS];

/* ---- per-task context ---- */

struct task_ctx {
	u64 vtime;		/* weighted virtual time */
	u64 started_at;		/* when it last started running */
	u64 queued_at;		/* when it was last queued, 0 once running */
	s32 last_cpu;		/* where it last ran, -1 if never */
	s32 vtime_cpu;		/* vtime is relative to this CPU's clock */
	u8 exec_pending;	/* exec'd, placement not settled (numa_place.bpf.c) */
	u64 exec_at;		/* its first exec placement check, 0 none yet */
	u32 why;		/* the rule that decided its next move (decide.bpf.h) */
	u64 xnode_at;		/* last NUMA-policy node change, 0 never */
	u64 node_rt;		/* runtime on node rt_node since it came there */
	s32 rt_node;		/* node of its last run, -1 never */
	s32 home;		/* its home node (its own or its process's), -1 none (home.bpf.c) */
	u64 home_gen;		/* ... as of this home_gen */
	u32 last_wakee;		/* pid of the last task it woke (push_record_wakee) */
	u32 wakee_flips;	/* ... how often that changed, halved each second */
	u64 flips_decay_at;	/* ... last halving */
	struct numa_task_util util;	/* its utilisation (numa_rules.h) */
};

/*
 * ---- maps ----
 * Every unit that includes this header defines these maps weak; libbpf's
 * linker merges the identical definitions into one map. (An extern map
 * declaration does not work here: with a section clang emits a definition,
 * without one its BTF leaves the value type incomplete.)
 */
#define LOCALITY_MAP(def, name)	def name SEC(".maps") __weak
#define STATS_MAP_DEF struct {					\
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);		\
	__uint(max_entries, LOC_NR_STATS);			\
	__type(key, u32);					\
	__type(value, u64);					\
}
LOCALITY_MAP(STATS_MAP_DEF, stats);

#define TASK_CTXS_MAP_DEF struct {				\
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);		\
	__uint(map_flags, BPF_F_NO_PREALLOC);			\
	__type(key, int);					\
	__type(value, struct task_ctx);				\
}
LOCALITY_MAP(TASK_CTXS_MAP_DEF, task_ctxs);

struct mask_ctx {
	struct bpf_cpumask __kptr *mask;
};

#define MASK_MAP_DEF(type_, nr) struct {			\
	__uint(type, type_);					\
	__uint(max_entries, nr);				\
	__type(key, u32);					\
	__type(value, struct mask_ctx);				\
}
/* kernel cpumasks of each LLC / node, for scx_bpf_pick_idle_cpu() */
LOCALITY_MAP(MASK_MAP_DEF(BPF_MAP_TYPE_ARRAY, MAX_LLCS), llc_masks);
LOCALITY_MAP(MASK_MAP_DEF(BPF_MAP_TYPE_ARRAY, MAX_NODES), node_masks);
/* [0]: CPUs online as far as sched_ext told us */
LOCALITY_MAP(MASK_MAP_DEF(BPF_MAP_TYPE_ARRAY, 1), online_mask);
/*
 * Per-CPU scratch mask for "LLC (or node) AND p->cpus_ptr". Only the
 * scheduling callbacks use it; they run with IRQs off and do not nest on
 * one CPU, so one mask per CPU is enough.
 */
LOCALITY_MAP(MASK_MAP_DEF(BPF_MAP_TYPE_PERCPU_ARRAY, 1), scratch_masks);

/* ---- small helpers ---- */

static __always_inline void stat_add(u32 idx, u64 val)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (cnt)
		*cnt += val;
}

static __always_inline void stat_inc(u32 idx)
{
	stat_add(idx, 1);
}

static __always_inline bool cpu_valid(s32 cpu)
{
	return cpu >= 0 && cpu < nr_cpus && cpu < MAX_CPUS;
}

static __always_inline bool cpu_online(s32 cpu)
{
	return cpu_valid(cpu) && cpu_is_online[cpu & CPU_MASK];
}

static __always_inline struct task_ctx *task_ctx(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

static __always_inline const struct cpumask *llc_cpumask(u32 llc)
{
	struct mask_ctx *m = bpf_map_lookup_elem(&llc_masks, &llc);

	return m && m->mask ? cast_mask(m->mask) : NULL;
}

static __always_inline const struct cpumask *node_cpumask(u32 node)
{
	struct mask_ctx *m = bpf_map_lookup_elem(&node_masks, &node);

	return m && m->mask ? cast_mask(m->mask) : NULL;
}

static __always_inline struct bpf_cpumask *scratch_mask(void)
{
	u32 zero = 0;
	struct mask_ctx *m = bpf_map_lookup_elem(&scratch_masks, &zero);

	return m ? m->mask : NULL;
}

static __always_inline const struct cpumask *online_cpumask(void)
{
	u32 zero = 0;
	struct mask_ctx *m = bpf_map_lookup_elem(&online_mask, &zero);

	return m && m->mask ? cast_mask(m->mask) : NULL;
}

static __always_inline u64 pinned_dsq(s32 cpu)
{
	return PINNED_DSQ_BASE + (u64)(cpu & CPU_MASK);
}

/* tasks waiting in both of @cpu's DSQs (no lookup while they are known empty) */
static __always_inline s32 nr_queued_cpu(s32 cpu)
{
	s32 a, b;

	if (!dsq_maybe_queued[cpu & CPU_MASK])
		return 0;
	a = scx_bpf_dsq_nr_queued(cpu);
	b = scx_bpf_dsq_nr_queued(pinned_dsq(cpu));
	return (a > 0 ? a : 0) + (b > 0 ? b : 0);
}

static __always_inline u32 node_nr_cpus(u32 n)
{
	n &= NODE_MASK;
	return node_off[n + 1] - node_off[n];
}

static __always_inline u32 llc_nr_cpus(u32 l)
{
	l &= LLC_MASK;
	return llc_off[l + 1] - llc_off[l];
}

/* is @cpu idle now, by the kernel's built-in idle mask? */
static __always_inline bool cpu_idle_now(s32 cpu)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	bool is_idle = bpf_cpumask_test_cpu(cpu, idle);

	scx_bpf_put_idle_cpumask(idle);
	return is_idle;
}

/* every kick goes through here (locality.bpf.c says why) */
void kick_cpu(s32 cpu, u64 flags);
/* ops.cpu_online / ops.cpu_offline: keep cpu_is_online, nr_offline, online_mask */
void cpu_set_online(s32 cpu, bool online);

/* Claim and kick one idle CPU of @mask allowed for @p (any if @p is NULL); uses the scratch mask. */
static __always_inline bool kick_idle_in(struct task_struct *p,
					 const struct cpumask *mask)
{
	struct bpf_cpumask *tmp = scratch_mask();
	s32 cpu;

	if (!tmp || !mask)
		return false;
	if (p)
		bpf_cpumask_and(tmp, mask, p->cpus_ptr);
	else
		bpf_cpumask_copy(tmp, mask);
	cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
	if (cpu < 0)
		return false;
	kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(STAT_KICK_STEALER);
	return true;
}

#endif /* __LOCALITY_BPF_H */
