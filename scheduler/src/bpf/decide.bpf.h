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

void decide_emit(struct task_struct *p, u32 kind, s32 from_cpu, s32 to_cpu, u32 rule);

/* a rule counted as @rule kept @p from moving from @from_cpu towards @to_cpu */
#define decide_refused(p, from_cpu, to_cpu, rule) \
	decide_emit((p), DECIDE_REFUSED, (from_cpu), (to_cpu), (rule))

#endif /* __DECIDE_BPF_H */
