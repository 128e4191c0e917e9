/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * numa_balance.bpf.h - the balance pass and active balance (numa_balance.bpf.c).
 */
#ifndef __LOCALITY_NUMA_BALANCE_BPF_H
#define __LOCALITY_NUMA_BALANCE_BPF_H

#include "locality.bpf.h"

void numa_balance_pass(u64 now);
s32 numa_active_take(struct task_struct *p, s32 cpu, bool *claimed);

#endif /* __LOCALITY_NUMA_BALANCE_BPF_H */
