/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa.bpf.h - what the other units ask the NUMA policy (numa.bpf.c).
 */
#ifndef __LOCALITY_NUMA_BPF_H
#define __LOCALITY_NUMA_BPF_H

#include "locality.bpf.h"

extern const volatile u32 numa_mode;
extern const volatile u64 numa_interval_ns;

extern u32 llc_load[MAX_LLCS];		/* decayed runnable tasks per LLC */
extern u32 llc_util[MAX_LLCS];		/* decayed busy CPUs per LLC */
extern u32 node_unused[MAX_NODES];
extern s32 active_to[MAX_CPUS];

/* placement */
void numa_placed_moved(s32 from_cpu, s32 to_cpu);
s32 numa_place_new(struct task_struct *p, s32 prev_cpu, u32 cause, bool again);
s32 numa_place_exec(struct task_struct *p, struct task_ctx *tctx, s32 cpu);
s32 numa_push_across(struct task_struct *p, s32 prev_cpu, bool is_fork, bool paired);
bool numa_wake_follow(struct task_struct *p, struct task_ctx *tctx,
		      struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu);
void numa_followed(struct task_ctx *tctx);
bool numa_wake_paired(struct task_ctx *t, struct task_ctx *w, s32 waker_cpu);
bool numa_may_gather(u32 dst, u32 src);
void numa_active_mark(s32 cpu, u32 to, u64 now);
s32 numa_active_take(struct task_struct *p, s32 cpu, bool *claimed);
s32 numa_idle_in_node(struct task_struct *p, u32 n);

/* per-task rules */
bool numa_node_overloaded(u32 n, u32 extra);
bool numa_task_may_cross(struct task_ctx *tctx, u64 now);
void numa_task_crossed(struct task_ctx *tctx, u64 now);

/* stealing across nodes (pull.bpf.c steal_remote) */
enum { NUMA_STEAL_NO, NUMA_STEAL_BUDGET, NUMA_STEAL_OVERLOAD, NUMA_STEAL_IDLE };
bool numa_steal_open(s32 cpu, bool going_idle);
u32 numa_may_steal_across(s32 cpu, s32 victim);
void numa_idle_pull_begin(s32 cpu);
bool numa_idle_pull_ok(s32 cpu, u32 vn);
void numa_steal_end(s32 cpu, u32 why, bool stole);
bool numa_steal_settled_ok(struct task_ctx *tctx, u32 dst);

/* accounting: ops.running / ops.stopping / ops.tick, and the heartbeat timer */
void numa_run_start(s32 cpu, u64 now);
void numa_account(struct task_ctx *tctx, s32 cpu, u64 used, u64 now);
void numa_load_begin(u64 now);
void numa_load_cpu(u32 c, u32 nr, bool busy);
void numa_load_end(void);

#endif /* __LOCALITY_NUMA_BPF_H */
