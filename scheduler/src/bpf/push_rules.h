/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * push_rules.h - the wake-up search's pure rules (rules.h says what "pure"
 * means). push.bpf.c calls them; src/rules.rs tests them.
 */
#ifndef __LOCALITY_PUSH_RULES_H
#define __LOCALITY_PUSH_RULES_H

#include "rules.h"

/*
 * The kernel's wake_wide() test on the wakee_flips counters of the waker
 * and the wakee (0 for a task with no context): the wake-up is "wide" (one
 * task feeding many that should spread, not gather round it) when the
 * busier flipper flips at least @llc_cpus (the CPUs of the waker's LLC)
 * times as often as the other, and the other at least @llc_cpus times.
 * Two tasks that both switch partners all the time (hackbench: every
 * sender writes to every receiver) are not wide: they are one group and
 * may share an LLC.
 */
static __always_inline bool push_rule_wake_wide(u32 waker_flips, u32 wakee_flips,
						u32 llc_cpus)
{
	u32 master = waker_flips, slave = wakee_flips;

	if (master < slave) {
		u32 x = master;

		master = slave;
		slave = x;
	}
	return slave >= llc_cpus && (u64)master >= (u64)slave * llc_cpus;
}

#endif /* __LOCALITY_PUSH_RULES_H */
