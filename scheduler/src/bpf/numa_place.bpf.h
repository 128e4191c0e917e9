/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_place.bpf.h - where a new or waking task may go across nodes
 * (numa_place.bpf.c).
 */
#ifndef __LOCALITY_NUMA_PLACE_BPF_H
#define __LOCALITY_NUMA_PLACE_BPF_H

#include "locality.bpf.h"

s32 numa_place_new(struct task_struct *p, s32 prev_cpu, u32 cause, bool again);
s32 numa_place_exec(struct task_struct *p, struct task_ctx *tctx, s32 cpu);
s32 numa_push_across(struct task_struct *p, s32 prev_cpu, bool is_fork, bool paired);
bool numa_wake_follow(struct task_struct *p, struct task_ctx *tctx,
		      struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu);
void numa_followed(struct task_ctx *tctx);
bool numa_wake_paired(struct task_ctx *t, struct task_ctx *w, s32 waker_cpu);

#endif /* __LOCALITY_NUMA_PLACE_BPF_H */
