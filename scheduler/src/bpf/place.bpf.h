/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * place.bpf.h - where a waking or new task goes (place.bpf.c).
 */
#ifndef __LOCALITY_PLACE_BPF_H
#define __LOCALITY_PLACE_BPF_H

#include "locality.bpf.h"

s32 place_wakeup(struct task_struct *p, struct task_ctx *tctx, s32 prev_cpu, u64 wake_flags);

#endif /* __LOCALITY_PLACE_BPF_H */
