/* SPDX-License-Identifier: GPL-2.0-only */
/* decide.bpf.h - the decision record for explain (decide.bpf.c) */
#ifndef __DECIDE_BPF_H
#define __DECIDE_BPF_H

/* @t's next move, if it moves, was decided by the rule counted as @rule */
static __always_inline void decide_why(struct task_ctx *t, u32 rule)
{
	if (t)
		t->why = rule;
}

void decide_record(u64 ids, u32 kind, s32 from_cpu, s32 to_cpu, u32 rule);

/* record that @p (kind DECIDE_*) went or was kept from going @from_cpu -> @to_cpu by @rule */
static __always_inline void decide_emit(struct task_struct *p, u32 kind, s32 from_cpu, s32 to_cpu, u32 rule)
{
	decide_record((u64)p->tgid << 32 | (u32)p->pid, kind, from_cpu, to_cpu, rule);
}

extern u32 decide_refusals[MAX_CPUS];

/*
 * A rule counted as @rule kept @p from moving from @from_cpu towards
 * @to_cpu. Refusals come in runs (a steal scan may refuse the same task
 * at each dispatch), so only one in DECIDE_REFUSED_EVERY goes on to the
 * rate limit, sampled here without a helper call.
 */
static __always_inline void decide_refused(struct task_struct *p, s32 from_cpu, s32 to_cpu, u32 rule)
{
	u32 me = bpf_get_smp_processor_id() & CPU_MASK;

	if (decide_refusals[me]++ % DECIDE_REFUSED_EVERY)
		return;
	decide_emit(p, DECIDE_REFUSED, from_cpu, to_cpu, rule);
}

#endif /* __DECIDE_BPF_H */
