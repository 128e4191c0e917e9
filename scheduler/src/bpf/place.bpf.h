/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * place.bpf.h - where a waking, new or queued task goes (place.bpf.c).
 */
#ifndef __LOCALITY_PLACE_BPF_H
#define __LOCALITY_PLACE_BPF_H

#include "locality.bpf.h"

s32 place_wakeup(struct task_struct *p, struct task_ctx *tctx, s32 prev_cpu, u64 wake_flags);

/* what place_enqueue()'s CPU is */
enum {
	PLACE_CLAIMED	= 1,	/* its idle bit taken for the task: queue there, kick it */
	PLACE_IDLE	= 2,	/* idle now (not claimed): queue there */
	PLACE_HANDOFF	= 4,	/* an idle CPU nearby claimed: insert into its local DSQ */
};
s32 place_enqueue(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 enq_flags, u32 *how);

#endif /* __LOCALITY_PLACE_BPF_H */
