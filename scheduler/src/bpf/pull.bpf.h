/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pull.bpf.h - dispatch-time stealing, the hand-over at enqueue and
 * stealer kicks (pull.bpf.c).
 */
#ifndef __LOCALITY_PULL_BPF_H
#define __LOCALITY_PULL_BPF_H

#include "locality.bpf.h"

extern u32 overloaded[MAX_CPUS];	/* queued behind a running task: a hint for stealers */

bool pull_steal(s32 cpu, bool prev_runnable);
s32 pull_claim_near(struct task_struct *p, s32 victim, bool wakeup);
void pull_kick_stealer(struct task_struct *p, s32 victim);
void pull_kick_any_near(s32 victim);
void pull_mark_overloaded(s32 cpu);
void pull_clear_overloaded(s32 cpu);

#endif /* __LOCALITY_PULL_BPF_H */
