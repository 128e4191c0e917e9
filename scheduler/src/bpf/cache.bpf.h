/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cache.bpf.h - what the other units ask cache.bpf.c (cache-aware scheduling).
 */
#ifndef __LOCALITY_CACHE_BPF_H
#define __LOCALITY_CACHE_BPF_H

#include "locality.bpf.h"

extern const volatile bool cache_aware;

/* the process's preferred LLC and the gates around it */
s32 cache_pref(struct task_struct *p, u64 *util);
bool cache_keep(struct task_struct *p, u32 llc, s32 dst);
bool cache_keep_busy(struct task_struct *p, u32 llc, s32 dst);
bool cache_may_enter(u32 src, u32 dst, u64 task_util);
bool cache_may_leave(u32 pref, u32 dst, u64 task_util);

/* placement: wake-up aggregation, and kicks towards the preferred LLC */
s32 cache_wake_pick(struct task_struct *p, s32 prev_cpu);
bool cache_kick_pref(struct task_struct *p, s32 victim);
void cache_aggr_mark(s32 cpu);

/* accounting: ops.running, ops.stopping, ops.exit_task */
void cache_running(struct task_struct *p, s32 cpu, u64 waited);
void cache_account(struct task_struct *p, s32 cpu, u64 used);
void cache_task_exit(struct task_struct *p);

#endif /* __LOCALITY_CACHE_BPF_H */
