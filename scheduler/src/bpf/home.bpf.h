/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * home.bpf.h - what the other units ask home.bpf.c (home nodes).
 */
#ifndef __LOCALITY_HOME_BPF_H
#define __LOCALITY_HOME_BPF_H

#include "locality.bpf.h"

extern u64 home_gen;	/* bumped by the agent after each proc_home change */

s32 task_home(struct task_struct *p, struct task_ctx *tctx);
s32 task_proc_home(struct task_struct *p);
s32 home_wake_pick(struct task_struct *p, struct task_ctx *tctx, s32 prev_cpu);
bool home_may_leave(struct task_struct *p, struct task_ctx *tctx, u32 n);
bool home_steal_ok(struct task_struct *p, struct task_ctx *tctx, u32 src, u32 dst);
void home_running(struct task_struct *p, struct task_ctx *tctx, s32 cpu);
void home_tick(struct task_struct *p, struct task_ctx *tctx, s32 cpu);
void home_balance(u64 now);

#endif /* __LOCALITY_HOME_BPF_H */
