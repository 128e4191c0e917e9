/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * home_rules.h - home nodes' pure rules (rules.h says what "pure" means).
 * home.bpf.c calls them; src/rules.rs tests them.
 */
#ifndef __LOCALITY_HOME_RULES_H
#define __LOCALITY_HOME_RULES_H

#include "rules.h"

/*
 * A home node @n as read from proc_home or thread_home (the agent writes
 * them): @n if this machine has that node, else -1 (no home). Every node
 * below @nr_nodes counts, up to MAX_NODES.
 */
static __always_inline s32 home_rule_node(s32 n, u32 nr_nodes)
{
	return n >= 0 && (u32)n < nr_nodes && n < MAX_NODES ? n : -1;
}

/*
 * The balance pass's look at a busy CPU of node @node (home.bpf.c part 4):
 * the node to send its running task to, or -1. @run_home is that task's
 * home + 1 (0: none) as ops.running or ops.tick last read it, @run_gen the
 * agent's home generation it was read in, @gen the generation now. A task
 * at home stays. A record older than the agent's last update is not acted
 * on: the agent may have moved or removed that home since (ops.tick
 * re-reads it at the task's next tick).
 */
static __always_inline s32 home_rule_pass_dest(s32 run_home, u64 run_gen, u64 gen, u32 node)
{
	s32 h = run_home - 1;

	if (h < 0 || run_gen != gen || (u32)h == node)
		return -1;
	return h;
}

#endif /* __LOCALITY_HOME_RULES_H */
