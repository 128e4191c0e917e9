/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rules_host.c - the pure rules (*_rules.h) compiled for the host: one
 * exported function per rule, for the unit tests in src/rules.rs. build.rs
 * compiles it with the cc crate into a static library; it is no part of
 * the BPF object.
 */
#include <stddef.h>

#include "numa_rules.h"
#include "cache_rules.h"
#include "push_rules.h"
#include "idle_rules.h"
#include "home_rules.h"

/* layouts the Rust side checks: size, then each field's offset in order */
const size_t rules_numa_node_fig_layout[] = {
	sizeof(struct numa_node_fig),
	offsetof(struct numa_node_fig, cpus),
	offsetof(struct numa_node_fig, nr_last),
	offsetof(struct numa_node_fig, load),
	offsetof(struct numa_node_fig, util),
	offsetof(struct numa_node_fig, placed),
	offsetof(struct numa_node_fig, imb_nr),
};

const size_t rules_numa_task_util_layout[] = {
	sizeof(struct numa_task_util),
	offsetof(struct numa_task_util, at),
	offsetof(struct numa_task_util, run),
	offsetof(struct numa_task_util, util),
};

const size_t rules_cache_scan_layout[] = {
	sizeof(struct cache_scan),
	offsetof(struct cache_scan, best_occ),
	offsetof(struct cache_scan, total),
	offsetof(struct cache_scan, least),
	offsetof(struct cache_scan, best),
	offsetof(struct cache_scan, idle_best),
};

const size_t rules_cache_epoch_llcs_layout[] = {
	sizeof(struct cache_epoch_llcs),
	offsetof(struct cache_epoch_llcs, occ),
	offsetof(struct cache_epoch_llcs, load),
	offsetof(struct cache_epoch_llcs, node),
	offsetof(struct cache_epoch_llcs, cores),
};

const u32 rules_numa_mark_verdicts[] = {
	NUMA_MARK_OTHER,
	NUMA_MARK_MINE,
	NUMA_MARK_EXPIRED,
};

const u32 rules_cache_pref_verdicts[] = {
	CACHE_PREF_KEEP,
	CACHE_PREF_DROP_FIT,
};

/* ---- numa_rules.h ---- */

u32 rules_numa_tasks(const struct numa_node_fig *n)
{
	return numa_rule_tasks(n);
}

u32 rules_numa_busy(const struct numa_node_fig *n)
{
	return numa_rule_busy(n);
}

s32 rules_numa_idle(const struct numa_node_fig *n, u32 extra)
{
	return numa_rule_idle(n, extra);
}

bool rules_numa_overloaded(const struct numa_node_fig *n, u32 extra)
{
	return numa_rule_overloaded(n, extra);
}

s32 rules_numa_adjust(u32 mode, s32 imb, s32 busiest_idle, u32 busiest_cpus,
		      u32 local_running, u32 local_imb_nr)
{
	return numa_rule_adjust(mode, imb, busiest_idle, busiest_cpus, local_running,
				local_imb_nr);
}

u32 rules_numa_moves(u32 mode, const struct numa_node_fig *src,
		     const struct numa_node_fig *dst, u32 extra)
{
	return numa_rule_moves(mode, src, dst, extra);
}

u32 rules_numa_idle_pull(u32 mode, u32 src_nr, u32 src_cpus, u32 dst_nr, u32 dst_cpus,
			 u32 dst_imb_nr)
{
	return numa_rule_idle_pull(mode, src_nr, src_cpus, dst_nr, dst_cpus, dst_imb_nr);
}

bool rules_numa_new_stays(u32 mode, const struct numa_node_fig *parent,
			  const struct numa_node_fig *least)
{
	return numa_rule_new_stays(mode, parent, least);
}

bool rules_numa_new_stays_least_loaded(u32 parent_nr, u32 least_nr)
{
	return numa_rule_new_stays_least_loaded(parent_nr, least_nr);
}

s32 rules_numa_least(const u32 *nr, const u32 *load, u32 nr_nodes, u64 skip, u32 *least_nr)
{
	return numa_rule_least(nr, load, nr_nodes, skip, least_nr);
}

s32 rules_numa_new_least_loaded(const u32 *nr, const u32 *load, u32 nr_nodes, u64 tried, u32 src,
				u32 parent_nr)
{
	return numa_rule_new_least_loaded(nr, load, nr_nodes, tried, src, parent_nr);
}

bool rules_numa_new_cpu_quiet(u32 cpu_nr)
{
	return numa_rule_new_cpu_quiet(cpu_nr);
}

bool rules_numa_exec_done(bool moved, bool recheck, u64 since_first_ns, u64 interval_ns)
{
	return numa_rule_exec_done(moved, recheck, since_first_ns, interval_ns);
}

u32 rules_numa_mark_for(s32 pid, s32 marked_pid, u64 age_ns, u64 interval_ns)
{
	return numa_rule_mark_for(pid, marked_pid, age_ns, interval_ns);
}

bool rules_numa_claim(u32 *placed, u32 seen)
{
	return numa_rule_claim(placed, seen);
}

bool rules_numa_may_gather(u32 mode, const struct numa_node_fig *to,
			   const struct numa_node_fig *from)
{
	return numa_rule_may_gather(mode, to, from);
}

bool rules_numa_push_across(const struct numa_node_fig *src, const struct numa_node_fig *dst,
			    u32 task_util)
{
	return numa_rule_push_across(src, dst, task_util);
}

void rules_numa_util_add(struct numa_task_util *u, u64 now, u64 used)
{
	numa_rule_util_add(u, now, used);
}

u32 rules_numa_util_now(const struct numa_task_util *u, u64 now)
{
	return numa_rule_util_now(u, now);
}

u32 rules_numa_load_steps(u64 gap)
{
	return numa_rule_load_steps(gap);
}

u32 rules_numa_load_decay(u32 old, u32 target, u32 steps)
{
	return numa_rule_load_decay(old, target, steps);
}

bool rules_numa_may_cross(u32 mode, u64 xnode_at, u64 now, u64 interval_ns)
{
	return numa_rule_may_cross(mode, xnode_at, now, interval_ns);
}

bool rules_numa_few_partners(s64 waker_flips, s64 wakee_flips, u32 llc_cpus)
{
	return numa_rule_few_partners(waker_flips, wakee_flips, llc_cpus);
}

/* ---- cache_rules.h ---- */

bool rules_cache_overloaded(u32 load, u32 util, u32 cpus)
{
	return cache_rule_overloaded(load, util, cpus);
}

const u32 rules_cache_mig_hints[] = {
	CACHE_MIG_ALLOW,
	CACHE_MIG_IGNORE,
	CACHE_MIG_FORBID,
};

u32 rules_cache_migrate_hint(u64 src_util, u64 src_cap, u64 dst_util, u64 dst_cap, u64 task_util,
			     bool to_pref, u32 aggr_cap_pct, u32 imb_pct)
{
	return cache_rule_migrate_hint(src_util, src_cap, dst_util, dst_cap, task_util, to_pref,
				       aggr_cap_pct, imb_pct);
}

u32 rules_cache_migrate_hint_overload(u64 src_util, u64 dst_util, u64 dst_cap,
				      bool pref_overloaded, bool to_pref, u32 aggr_cap_pct,
				      u32 imb_pct)
{
	return cache_rule_migrate_hint_overload(src_util, dst_util, dst_cap,
						pref_overloaded, to_pref, aggr_cap_pct, imb_pct);
}

u64 rules_cache_thread_util(u64 total, u64 epoch_ns, u32 nr_threads)
{
	return cache_rule_thread_util(total, epoch_ns, nr_threads);
}

u32 rules_cache_cores(u32 cpus, u32 smt)
{
	return cache_rule_cores(cpus, smt);
}

u64 rules_cache_decay(u64 occ, u64 epochs)
{
	return cache_rule_decay(occ, epochs);
}

s32 rules_cache_epoch(const struct cache_epoch_llcs *l, u32 n, s32 home, s32 cur, u64 cur_occ,
		      u64 wait, u32 switch_ratio, u64 epoch_ns, u32 aggr_tol, struct cache_scan *s,
		      u32 *verdict)
{
	return cache_rule_epoch(l, n, home, cur, cur_occ, wait, switch_ratio, epoch_ns, aggr_tol, s,
				verdict);
}

/* ---- push_rules.h ---- */

bool rules_push_wake_wide(u32 waker_flips, u32 wakee_flips, u32 llc_cpus)
{
	return push_rule_wake_wide(waker_flips, wakee_flips, llc_cpus);
}

/* ---- idle_rules.h ---- */

u32 rules_idle_llc_lines(u32 cpus)
{
	return idle_rule_llc_lines(cpus);
}

u32 rules_idle_slot(u32 first_line, u32 pos)
{
	return idle_rule_slot(first_line, pos);
}

u32 rules_idle_slot_line(u32 slot)
{
	return idle_rule_slot_line(slot);
}

u64 rules_idle_slot_bit(u32 slot)
{
	return idle_rule_slot_bit(slot);
}

u32 rules_idle_line_cpu(u32 llc_first_cpu, u32 llc_first_line, u32 line, u32 bit)
{
	return idle_rule_line_cpu(llc_first_cpu, llc_first_line, line, bit);
}

/* ---- home_rules.h ---- */

s32 rules_home_node(s32 n, u32 nr_nodes)
{
	return home_rule_node(n, nr_nodes);
}

s32 rules_home_pass_dest(s32 run_home, u64 run_gen, u64 gen, u32 node)
{
	return home_rule_pass_dest(run_home, run_gen, gen, node);
}
