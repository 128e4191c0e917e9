/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * intf.h - what the BPF side and the Rust agent must agree on.
 *
 * Only plain enums and plain structs of fixed-size integers live here:
 * the header is compiled both by clang for the BPF object and by bindgen
 * for the Rust side, and neither needs the other's type vocabulary. Arrays sized by these constants are declared in
 * locality.bpf.c (rodata filled by the agent before load) so that their
 * layout comes from one place, the skeleton.
 *
 * Nothing assumes a small machine: CPU ids are u16 (up to 65535) and the
 * arrays are sized for MAX_CPUS; the agent refuses to load on a machine
 * with more possible CPU ids than that.
 */
#ifndef __LOCALITY_INTF_H
#define __LOCALITY_INTF_H

enum locality_consts {
	MAX_CPUS	= 1024,		/* power of two: used as an index mask */
	MAX_LLCS	= MAX_CPUS,	/* an override may make every CPU its own LLC */
	MAX_NODES	= 64,
	MAX_SMT		= 8,		/* hardware threads per core (POWER has 8) */
	IDLE_LINE_CPUS	= 8,		/* --sparse-idle: CPUs of one LLC per 64-byte line (idle_rules.h) */

	/*
	 * Defaults of knobs the command line sets (DFL_*, here and below):
	 * stated here only. The BPF initialisers use them and cli.rs takes
	 * them (bpf_intf.rs, dfl); rodata.rs writes every knob before load,
	 * and its tests check that with no flag it writes what the
	 * initialisers hold.
	 */
	DFL_SLICE_US	= 5000,
	DFL_IWQ_PERIOD_US = 20000,	/* heartbeat timer period (see heartbeat.bpf.c) */
	DFL_WAKE_GRAN_US = 0,		/* wake-up preemption off: see wake_preempt() */

	/*
	 * A stealer looks at no more than this many tasks of one victim DSQ
	 * (it skips tasks whose affinity excludes it). Keeps dispatch cheap
	 * and the verifier's job bounded.
	 */
	STEAL_SCAN_MAX	= 8,

	/*
	 * Each CPU has two vtime DSQs: id == CPU for tasks other CPUs may run
	 * (the one stealers scan), PINNED_DSQ_BASE + CPU for tasks allowed on
	 * that CPU only.
	 */
	PINNED_DSQ_BASE	= MAX_CPUS,

	/* NUMA balancing (numa.bpf.c, numa.rs) */
	DFL_NUMA_INTERVAL_MS = 150,	/* cross-node balance pass period */
	NUMA_IMBALANCE_MIN = 2,		/* upstream: imbalances <= this are ignored */
	NUMA_IMB_PCT	= 117,		/* imbalance_pct of the kernel's NUMA domains (overload test) */
	NUMA_IMB_PCT_2019 = 125,	/* ... when Gorman's v2 patch was posted (idle-cpus rule) */
	NUMA_UTIL_WINDOW_NS = 16000000,	/* a task's utilisation average halves every 16 ms */
	NUMA_SETTLED_TRIES = 2,		/* unspent balance passes before settled tasks may move */
	NUMA_PULL_WAIT_US = 500,	/* idle_pull_across pulls a task queued at least this long (the kernel's migration cost) */
	NUMA_ACTIVE_TRIES = 3,		/* unspent balance passes before a running task is preempted to move */
	NUMA_CLAIM_TRIES = 4,		/* new-program placement: choices made again after a lost claim */
	NUMA_EXEC_QUIET_NR = 2,		/* least-loaded: a program stays while its CPU runs this many, itself included */
	TIMER_DUTY_PCT = 10,		/* the heartbeat timer's largest share of its CPU */
	LOAD_SHIFT	= 10,		/* load fixed point: 1 task == 1 << LOAD_SHIFT */
	LOAD_DECAY_SHIFT = 3,		/* EWMA weight of one step: 1/8 (8 steps: 32 ms) */
	LOAD_STEP_NS	= 4000000,	/* decay step of the load averages, whatever the period */
	LOAD_MAX_STEPS	= 32,		/* steps one sample may stand for (numa_rule_load_steps) */

	/* cache-aware scheduling (cache.bpf.c, cache.rs) */
	CACHE_MAX_LLCS	= 64,		/* power of two; more LLCs: mechanism off */
	CACHE_MAX_PROCS	= 8192,		/* processes tracked at once */
	DFL_CACHE_EPOCH_MS = 10,	/* occupancy halves every epoch */
	DFL_CACHE_EPOCH_TIMEOUT = 50,	/* epochs without activity: preference ignored */
	DFL_CACHE_SWITCH_RATIO = 2,	/* hysteresis: switch if new > ratio * current */
	DFL_CACHE_AGGR_TOL = 1,		/* scales the fit limit (the LLC's cores); 100: no limit */
	DFL_CACHE_OVERAGGR_PCT = 50,
	DFL_CACHE_IMB_PCT = 20,
	CACHE_LLC_IMB_PCT = 117,	/* the kernel's imbalance_pct of an LLC domain */

	/* memory placement's fault evidence (memory.bpf.c, memory/evidence.rs) */
	MEM_CHUNK_SHIFT	= 21,		/* 2 MB chunks of address space */
	MEM_WATCH_MAX	= 1024,		/* processes watched at once */
	MEM_FAULTS_MAX	= 65536,	/* (process, chunk, thread, node) counts */

	/* the decision record for explain (decide.bpf.c, decisions.rs) */
	DFL_DECISION_RATE = 25,		/* records per second per CPU, at most */
	DECIDE_BURST	= 16,		/* ... and this many at once */
	DECIDE_RING_KB	= 512,		/* ring buffer size; the agent drains it every second */
	DECIDE_TIME_EVERY = 16,		/* one call in this many is timed (its cost) */
	DECIDE_REFUSED_EVERY = 8,	/* one refusal in this many is offered to the record */
};

/* what a decision record tells */
enum decision_kind {
	DECIDE_MOVE_LLC	= 1,	/* the task ran in another LLC of the same node than last time */
	DECIDE_MOVE_NODE = 2,	/* ... in another node */
	DECIDE_REFUSED	= 3,	/* a rule kept the task from moving from from_cpu towards to_cpu */
};

/*
 * One record of the decision ring buffer. rule: the stats.h counter of the
 * rule that decided (the agent names it with that counter's description);
 * 0 for a move means the wake-up's idle-CPU search (push.bpf.c).
 */
struct decision {
	unsigned long long at_ns;	/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	unsigned int pid;
	unsigned int tgid;
	int from_cpu;
	int to_cpu;
	unsigned int kind;		/* enum decision_kind */
	unsigned int rule;		/* enum locality_stat */
};

/* mem_faults key: user page faults of thread tid of process tgid in one chunk, from CPUs of node */
struct mem_fault_key {
	unsigned int tgid;
	unsigned int node;
	unsigned long long chunk;	/* address >> MEM_CHUNK_SHIFT */
	unsigned int tid;
	unsigned int pad;
};

/* --numa-balance: who decides whether a task may change node */
enum numa_mode {
	NUMA_OFF	= 0,	/* no policy: cross-node moves whenever a CPU would idle */
	NUMA_UPSTREAM	= 1,	/* Linux's current rule (imb_numa_nr, NUMA_IMBALANCE_MIN) */
	NUMA_IDLE_CPUS	= 2,	/* Gorman's 2019 v2 patch: allowance while the busiest node has idle CPUs */
	NUMA_NO_ALLOWANCE = 3,	/* the policy without an allowance: nodes evened out by idle CPUs */
};

/*
 * Counter indices of the per-CPU "stats" array map, one per line of
 * stats.h (append only). The agent sums the per-CPU values.
 */
enum locality_stat {
#define LOC_STAT(name, field, unit, desc) STAT_##name,
#include "stats.h"
#undef LOC_STAT
	LOC_NR_STATS,
};

#endif /* __LOCALITY_INTF_H */
