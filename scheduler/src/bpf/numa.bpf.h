/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa.bpf.h - what the other units ask the NUMA policy (numa.bpf.c).
 * Its figures are numa_load.bpf.h's; the balance pass and the placement
 * across nodes have their own headers (numa_balance.bpf.h, numa_place.bpf.h).
 */
#ifndef __LOCALITY_NUMA_BPF_H
#define __LOCALITY_NUMA_BPF_H

#include "locality.bpf.h"

extern s32 node_budget[MAX_NODES];	/* cross-node steals allowed until the next pass */
extern u32 node_src[MAX_NODES];		/* ... from this node */
extern u32 node_unused[MAX_NODES];	/* passes in a row whose budget was not spent */
extern s32 active_to[MAX_CPUS];		/* active_balance's mark: node + 1, 0 none */
extern u64 active_at[MAX_CPUS];
extern s32 active_pid[MAX_CPUS];

/* per-task rules */
bool numa_node_overloaded(u32 n, u32 extra);
bool numa_task_may_cross(struct task_ctx *tctx, u64 now);
void numa_task_crossed(struct task_ctx *tctx, u64 now);
s32 numa_idle_in_node(struct task_struct *p, u32 n);
bool numa_may_gather(u32 dst, u32 src);
void numa_active_mark(s32 cpu, u32 to, u64 now);

/* stealing across nodes (pull.bpf.c steal_remote) */
enum { NUMA_STEAL_NO, NUMA_STEAL_BUDGET, NUMA_STEAL_OVERLOAD, NUMA_STEAL_IDLE };
bool numa_steal_open(s32 cpu, bool going_idle);
u32 numa_may_steal_across(s32 cpu, s32 victim);
void numa_idle_pull_begin(s32 cpu);
bool numa_idle_pull_ok(s32 cpu, u32 vn);
void numa_steal_end(s32 cpu, u32 why, bool stole);
bool numa_steal_settled_ok(struct task_ctx *tctx, u32 dst);

/*
 * Take one unit of node @n's cross-node budget. Several CPUs of @n may steal
 * at once, so the check and the spending are one atomic step: the budget
 * never goes below zero and the steals never exceed what the pass gave.
 * Used by numa.bpf.c's steals and numa_balance.bpf.c's active take; inline,
 * as it was inside numa.bpf.c: as a function of its own, clang's code for
 * its result read a register that the verifier sees unset on the path
 * where the loop does not run, and the load was refused.
 */
static __always_inline bool numa_budget_take(u32 n)
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

#endif /* __LOCALITY_NUMA_BPF_H */
