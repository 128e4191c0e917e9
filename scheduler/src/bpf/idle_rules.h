/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * idle_rules.h - where a CPU's flag lives in the sparse idle lines of
 * --sparse-idle (rules.h says what "pure" means). idle.bpf.c calls them;
 * the agent lays the lines out to match (topology.rs, BpfTopo) and
 * src/rules.rs checks both against each other.
 *
 * Each LLC owns whole 64-byte lines; line k of an LLC holds, in the low
 * IDLE_LINE_CPUS bits of its first word, the flags of the CPUs at
 * positions k * IDLE_LINE_CPUS .. + IDLE_LINE_CPUS - 1 of the LLC's CPU
 * list (llc_cpus). A CPU's slot is line * IDLE_LINE_CPUS + bit.
 */
#ifndef __LOCALITY_IDLE_RULES_H
#define __LOCALITY_IDLE_RULES_H

#include "rules.h"

/* lines an LLC of @cpus CPUs owns */
static __always_inline u32 idle_rule_llc_lines(u32 cpus)
{
	return (cpus + IDLE_LINE_CPUS - 1) / IDLE_LINE_CPUS;
}

/* slot of the CPU at position @pos of an LLC whose lines start at @first_line */
static __always_inline u32 idle_rule_slot(u32 first_line, u32 pos)
{
	return (first_line + pos / IDLE_LINE_CPUS) * IDLE_LINE_CPUS + pos % IDLE_LINE_CPUS;
}

/* the line of @slot */
static __always_inline u32 idle_rule_slot_line(u32 slot)
{
	return slot / IDLE_LINE_CPUS;
}

/* the bit of @slot inside its line's word */
static __always_inline u64 idle_rule_slot_bit(u32 slot)
{
	return 1ULL << (slot % IDLE_LINE_CPUS);
}

/*
 * Position in llc_cpus[] of the CPU whose flag is bit @bit (0-based) of
 * @line, a line of the LLC whose CPUs start at llc_cpus[@llc_first_cpu]
 * and whose lines start at @llc_first_line.
 */
static __always_inline u32 idle_rule_line_cpu(u32 llc_first_cpu, u32 llc_first_line,
					      u32 line, u32 bit)
{
	return llc_first_cpu + (line - llc_first_line) * IDLE_LINE_CPUS + bit;
}

#endif /* __LOCALITY_IDLE_RULES_H */
