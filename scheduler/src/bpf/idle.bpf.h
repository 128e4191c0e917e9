/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * idle.bpf.h - the idle-CPU questions idle.bpf.c answers (built-in or sparse tracking).
 */
#ifndef __LOCALITY_IDLE_BPF_H
#define __LOCALITY_IDLE_BPF_H

#include "locality.bpf.h"

bool idle_claim_core(s32 cpu);
bool idle_claim_cpu(s32 cpu);
s32 idle_pick_llc(struct task_struct *p, u32 llc, bool core);
s32 idle_pick_node(struct task_struct *p, u32 node, u32 skip_llc);
void idle_update(s32 cpu, bool idle);
void idle_resync(u32 cpu, bool builtin_idle, s32 local_queued);

#endif /* __LOCALITY_IDLE_BPF_H */
