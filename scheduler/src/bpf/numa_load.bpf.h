/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_load.bpf.h - the load figures numa_load.bpf.c keeps, and what the
 * NUMA rules (numa_rules.h) see of a node.
 */
#ifndef __LOCALITY_NUMA_LOAD_BPF_H
#define __LOCALITY_NUMA_LOAD_BPF_H

#include "locality.bpf.h"
#include "numa_rules.h"

extern u32 cpu_load[MAX_CPUS];		/* decayed runnable tasks per CPU, 1 << LOAD_SHIFT each */
extern u32 llc_load[MAX_LLCS];		/* decayed runnable tasks per LLC */
extern u32 llc_util[MAX_LLCS];		/* decayed busy CPUs per LLC */
extern u32 node_load[MAX_NODES];
extern u32 node_util[MAX_NODES];
extern u32 node_placed[MAX_NODES];	/* new programs counted, not yet in node_load */
extern u32 node_nr_last[MAX_NODES];	/* runnable tasks per node at the last whole sample */

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

/* tasks that may move from node @src to @dst, @extra not in src's figures yet */
static __always_inline u32 numa_moves(u32 src, u32 dst, u32 extra)
{
	struct numa_node_fig s = numa_fig(src), d = numa_fig(dst);

	return numa_rule_moves(numa_mode, &s, &d, extra);
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

/* tasks waiting for CPU @c now: its own DSQs and its local DSQ */
static __always_inline u32 numa_cpu_queued(s32 c)
{
	s32 lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | c);

	return nr_queued_cpu(c) + (lq > 0 ? lq : 0);
}

/* new programs' counts */
void numa_placed_moved(s32 from_cpu, s32 to_cpu);
/* tasks on node @n now (busy CPUs and queued tasks), @self_cpu free */
u32 numa_nr_now(u32 n, s32 self_cpu);

/* accounting: ops.running / ops.stopping / ops.tick, and the heartbeat timer */
void numa_run_start(s32 cpu, u64 now);
void numa_account(struct task_ctx *tctx, s32 cpu, u64 used, u64 now);
void numa_load_begin(u64 now);
void numa_load_cpu(u32 c, u32 nr, bool busy);
void numa_load_end(void);

#endif /* __LOCALITY_NUMA_LOAD_BPF_H */
