/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * push.bpf.h - the wake-up steps push.bpf.c implements (place.bpf.c orders them).
 */
#ifndef __LOCALITY_PUSH_BPF_H
#define __LOCALITY_PUSH_BPF_H

#include "locality.bpf.h"

bool push_tracks_wakees(void);
void push_record_wakee(struct task_struct *p, struct task_ctx *waker);
s32 push_follow_waker(struct task_struct *p, struct task_ctx *tctx,
		      struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu);
s32 push_waker_cpu(struct task_struct *p, struct task_ctx *tctx,
		   struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu);
s32 push_wake_affine(struct task_struct *p, struct task_ctx *tctx,
		     struct task_ctx *waker, s32 prev_cpu, s32 waker_cpu);
s32 push_pick_cpu(struct task_struct *p, s32 prev_cpu, bool is_fork, bool paired);

#endif /* __LOCALITY_PUSH_BPF_H */
