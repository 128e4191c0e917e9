/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * intf.h - what the BPF side and the Rust agent must agree on.
 *
 * Only plain enums live here: the header is compiled both by clang for
 * the BPF object and by bindgen for the Rust side, and neither needs the
 * other's type vocabulary. Arrays sized by these constants are declared in
 * main.bpf.c (rodata filled by the agent before load) so that their
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

	/* default knobs, overridable from the command line */
	DFL_SLICE_US	= 5000,
	DFL_IWQ_PERIOD_US = 4000,	/* sampling timer period (one 250 Hz tick; see main.bpf.c) */
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
	NUMA_SETTLED_TRIES = 2,		/* unspent balance passes before settled tasks may move */
	NUMA_ACTIVE_TRIES = 3,		/* unspent balance passes before a running task is preempted to move */
	TIMER_DUTY_PCT = 10,		/* the sampling timer's largest share of its CPU */
	LOAD_SHIFT	= 10,		/* load fixed point: 1 task == 1 << LOAD_SHIFT */
	LOAD_DECAY_SHIFT = 3,		/* EWMA weight of a new sample: 1/8 (32 ms at 4 ms) */

	/* cache-aware scheduling (cache.bpf.c, cache.rs) */
	CACHE_MAX_LLCS	= 64,		/* power of two; more LLCs: mechanism off */
	CACHE_MAX_PROCS	= 8192,		/* processes tracked at once */
	DFL_CACHE_EPOCH_MS = 10,	/* occupancy halves every epoch */
	DFL_CACHE_EPOCH_TIMEOUT = 50,	/* epochs without activity: preference ignored */
	DFL_CACHE_SWITCH_RATIO = 2,	/* hysteresis: switch if new > ratio * current */
	DFL_CACHE_AGGR_TOL = 1,		/* scales the 80% fit limit; 100: no limit */
	DFL_CACHE_OVERAGGR_PCT = 50,
	DFL_CACHE_IMB_PCT = 20,
	CACHE_LLC_IMB_PCT = 117,	/* the kernel's imbalance_pct of an LLC domain */
};

/* --numa-balance: who decides whether a task may change node */
enum numa_mode {
	NUMA_OFF	= 0,	/* no policy: cross-node moves whenever a CPU would idle */
	NUMA_UPSTREAM	= 1,	/* Linux's current rule (imb_numa_nr, NUMA_IMBALANCE_MIN) */
	NUMA_IDLE_CPUS	= 2,	/* Gorman's 2019 v2 patch: allowance while the busiest node has idle CPUs */
};

/*
 * Counter indices of the per-CPU "stats" array map. The agent sums the
 * per-CPU values. Append only: the Rust side names them by index.
 */
enum locality_stat {
	/* push side: where ops.select_cpu found a CPU */
	STAT_PICK_PREV_CORE,	/* prev CPU, its whole core idle */
	STAT_PICK_LLC_CORE,	/* an idle core in prev's LLC */
	STAT_PICK_LLC_CPU,	/* an idle CPU (maybe prev) in prev's LLC */
	STAT_PICK_NODE_CPU,	/* an idle CPU in prev's node */
	STAT_PICK_OTHER,	/* an idle CPU anywhere else */
	STAT_PICK_NONE,		/* nothing idle: stay on prev */
	STAT_PICK_AFFINE,	/* sync wake-up: an idle CPU in the waker's LLC (same node) */
	STAT_AFFINE_WIDE,	/* ... not tried: waker and wakee serve many partners */

	/* pull side: where ops.dispatch found work when its own DSQ was empty */
	STAT_STEAL_SMT,
	STAT_STEAL_LLC,
	STAT_STEAL_NODE,
	STAT_STEAL_REMOTE,
	STAT_STEAL_OFFLINE,	/* drained the DSQ of an offline CPU */

	/* migrations seen in ops.running */
	STAT_MIGR_CROSS_LLC,
	STAT_MIGR_CROSS_NODE,

	/* idle-while-queued estimates, in ns (sampled, see main.bpf.c) */
	STAT_IWQ_LLC_NS,
	STAT_IWQ_NODE_NS,

	/* traffic */
	STAT_ENQUEUE,		/* ops.enqueue inserts into a per-CPU DSQ */
	STAT_ENQ_FALLBACK,	/* ... into another CPU than task_cpu (offline/affinity) */
	STAT_DIRECT,		/* select_cpu dispatched straight to an idle CPU */
	STAT_DISPATCH_LOCAL,	/* ops.dispatch took from its own DSQ */
	STAT_KEEP_PREV,		/* nothing found, prev keeps the CPU */
	STAT_KICK_STEALER,	/* woke an idle CPU to pull from an overloaded one */
	STAT_IWQ_SAMPLES,	/* idle-while-queued timer runs (is it alive?) */
	STAT_TIMER_NS,		/* time spent in the sampling timer's callback */
	STAT_TIMER_STRETCHED,	/* periods stretched by the duty cap (TIMER_DUTY_PCT) */
	STAT_WAKE_PREEMPT,	/* a waking task preempted the running one */
	STAT_RESCUE_KICK,	/* the timer found an idle CPU with a queued DSQ and woke it */
	STAT_KICK_DROPPED,	/* a kick asked for on a CPU already out of cpu_online_mask (main.bpf.c kick_cpu) */

	/* NUMA (numa.bpf.c): cross-node moves by cause */
	STAT_XNODE_PUSH_WAKE,	/* select_cpu put a waking task on another node */
	STAT_XNODE_PUSH_FORK,	/* ... a new task (fork) on another node */
	STAT_XNODE_EXEC,	/* exec placement moved a task to another node */
	STAT_XNODE_STEAL_BALANCE, /* remote steal (policy modes: within a balance pass budget) */
	STAT_XNODE_STEAL_OFFLINE, /* drained an offline CPU of another node */
	STAT_XNODE_WAKE_FOLLOW,	/* a synchronous wakee followed its waker's node */
	STAT_XNODE_ACTIVE,	/* active balance: a preempted task sent to an idle node */
	STAT_XNODE_STEAL_OVERLOAD, /* remote steal from an overloaded node (rule 7) */
	/* NUMA policy decisions */
	STAT_NUMA_PASSES,	/* cross-node balance passes run */
	STAT_NUMA_BUDGET,	/* tasks the passes allowed to move (sum of budgets) */
	STAT_NUMA_PUSH_KEPT,	/* push across denied: node within the allowance */
	STAT_NUMA_NEW_LOCAL,	/* new process (fork/exec) kept on its parent's node */
	STAT_NUMA_TASK_RECENT,	/* move across denied: task crossed within the interval */
	STAT_NUMA_FOLLOW_REFUSED, /* wakee kept off its waker's node: beyond the allowance */
	STAT_NUMA_SETTLED_KEPT,	/* cross-node steal passed over a task settled on its node */
	STAT_NUMA_ACTIVE_KICK,	/* active balance: a busy CPU preempted for an idle node */
	STAT_NUMA_OVERLOAD,	/* push across allowed past the allowance: node overloaded (rule 7) */
	/* home nodes (home.bpf.c) */
	STAT_XNODE_HOME,	/* a waking task went back to an idle CPU of its home node */
	STAT_HOME_KEPT,		/* a push, follow or steal away from home refused */
	STAT_HOME_ACTIVE,	/* the pass preempted a task away from home to send it back */
	STAT_HOME_SWAP,		/* ... and, its home being full, a task homed here with it */

	/* cache-aware scheduling (cache.bpf.c) */
	STAT_CACHE_PREF_SET,	/* a process got a preferred LLC */
	STAT_CACHE_PREF_SWITCH,	/* ... changed it (hysteresis passed) */
	STAT_CACHE_DROP_FIT,	/* preference dropped: threads need > 80% of the LLC */
	STAT_CACHE_DROP_OVERLOAD, /* preference dropped: LLC overloaded */
	STAT_CACHE_DROP_TIMEOUT, /* preference ignored: no activity for the timeout */
	STAT_CACHE_AGGR_PULL,	/* steal into the task's preferred LLC */
	STAT_CACHE_AGGR_WAKE,	/* wake aggregation: idle CPU of the preferred LLC */
	STAT_CACHE_AGGR_KICK,	/* woke an idle CPU of the preferred LLC to pull */
	STAT_CACHE_AGGR_MARK,	/* an idle CPU asked a running outsider to come */
	STAT_CACHE_AGGR_MOVE,	/* ... and the task came at its next wake-up */
	STAT_CACHE_KEEP_WAKE,	/* push kept a task in its preferred LLC (gate out) */
	STAT_CACHE_REFUSE_OUT,	/* steal out of a non-overloaded preferred LLC refused */
	STAT_CACHE_REFUSE_OVERAGGR, /* move into preferred refused: over-aggregated */
	STAT_CACHE_RT_NS,	/* runtime of tracked (multi-thread) processes */
	STAT_CACHE_RT_PREF_NS,	/* ... of it spent in the process's preferred LLC */

	/* sparse idle tracking (idle.bpf.c, --sparse-idle) */
	STAT_IDLE_RESYNC,	/* idle CPU whose slot was 0 set idle again by the timer */
	STAT_IDLE_CLAIM_LOST,	/* slot won but built-in idle bit already clear */

	LOC_NR_STATS,
};

#endif /* __LOCALITY_INTF_H */
