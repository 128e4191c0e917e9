/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cache_rules.h - cache-aware scheduling's pure rules (rules.h says what
 * "pure" means). cache.bpf.c says where each applies and calls them with
 * its globals; src/rules.rs tests them.
 *
 * Fixed point: 1 task, or 1 busy CPU, == 1 << LOAD_SHIFT.
 */
#ifndef __LOCALITY_CACHE_RULES_H
#define __LOCALITY_CACHE_RULES_H

#include "rules.h"

/*
 * Busy percentage of an LLC of @cpus CPUs: its utilisation @util (llc_util)
 * in percent, 0-100, as upstream compares util.
 */
static __always_inline u64 cache_rule_busy_pct(u32 util, u32 cpus)
{
	if (!cpus)
		return 0;
	return ((u64)util * 100) / ((u64)cpus << LOAD_SHIFT);
}

/*
 * Overloaded, as the kernel's group_is_overloaded(): more runnable tasks
 * (@load, llc_load) than CPUs and utilisation above capacity /
 * imbalance_pct (117 at the LLC level). A burst of wake-ups that queues
 * tasks for a moment on a half-idle LLC is not overload.
 */
static __always_inline bool cache_rule_overloaded(u32 load, u32 util, u32 cpus)
{
	u64 cap = (u64)cpus << LOAD_SHIFT;

	return load > cap && (u64)util * CACHE_LLC_IMB_PCT > cap * 100;
}

/*
 * Gate "into": may a task move from an LLC @src_busy % busy into its
 * preferred LLC, @dst_busy % busy? Refused when the destination is over
 * @overaggr_pct busy and busier than the source by more than @imb_pct.
 */
static __always_inline bool cache_rule_may_enter(u64 src_busy, u64 dst_busy,
						 u32 overaggr_pct, u32 imb_pct)
{
	return !(dst_busy > overaggr_pct && dst_busy * 100 > src_busy * (100 + imb_pct));
}

/* Gate "out": a task may leave its preferred LLC only while that one is overloaded. */
static __always_inline bool cache_rule_may_leave(bool pref_overloaded)
{
	return pref_overloaded;
}

/*
 * Cores of an LLC of @cpus CPUs whose SMT width is @smt (>= 1), at least 1.
 * The fit limit counts cores: two busy threads on the siblings of one core
 * compete for it, and upstream's later revisions of the series
 * (exceed_llc_nr()) multiply the process's running threads by the SMT
 * width for the same reason.
 */
static __always_inline u32 cache_rule_cores(u32 cpus, u32 smt)
{
	u32 cores = cpus / smt;

	return cores ? cores : 1;
}

/* an occupancy @occ after @epochs halvings (the lazy decay of a new epoch) */
static __always_inline u64 cache_rule_decay(u64 occ, u64 epochs)
{
	return epochs >= 64 ? 0 : occ >> epochs;
}

/*
 * The epoch re-evaluation of a process's preferred LLC, in three steps:
 * cache_rule_scan() over every LLC (after the decay), cache_rule_pick(),
 * then cache_rule_verdict() on the LLC picked.
 */
struct cache_scan {
	u64 best_occ;	/* largest occupancy of a candidate */
	u64 total;	/* occupancy of every LLC */
	u64 least;	/* smallest load of a candidate, homed processes only */
	s32 best;	/* candidate with best_occ, -1 none */
	s32 idle_best;	/* candidate with least, -1 none */
};

static __always_inline void cache_rule_scan_start(struct cache_scan *s)
{
	s->best_occ = 0;
	s->total = 0;
	s->least = ~0ULL;
	s->best = -1;
	s->idle_best = -1;
}

/*
 * LLC @llc, whose occupancy is @occ and runnable load @load (llc_load).
 * @homed: the process has a home node (home.bpf.c, proc_home); then only
 * that node's LLCs (@at_home) are candidates, so the preferred LLC lies
 * where its memory is meant to be (the series leaves this alignment as
 * future work). Without a home every LLC is a candidate (@at_home true).
 * The fit limit counts the occupancy of every LLC, candidate or not.
 */
static __always_inline void cache_rule_scan(struct cache_scan *s, u32 llc, u64 occ,
					    bool homed, bool at_home, u32 load)
{
	s->total += occ;
	if (!at_home)
		return;
	if (homed && load < s->least) {
		s->least = load;
		s->idle_best = llc;
	}
	if (occ > s->best_occ) {
		s->best_occ = occ;
		s->best = llc;
	}
}

/*
 * The LLC to prefer after the scan @s, or -1 (nothing recorded). The
 * candidate is the LLC with the largest occupancy; a homed process with no
 * runtime in its home node yet takes the home's least loaded LLC. The
 * current preference @cur (-1 none; @cur_at_home: in the home node, or no
 * home; @cur_occ: its occupancy) is kept unless the candidate's occupancy
 * is more than @switch_ratio times its own (hysteresis); a preference
 * outside the home node is dropped at once.
 */
static __always_inline s32 cache_rule_pick(const struct cache_scan *s, s32 cur,
					   bool cur_at_home, u64 cur_occ, u32 switch_ratio)
{
	s32 best = s->best >= 0 ? s->best : s->idle_best;

	if (best < 0)
		return -1;
	if (cur >= 0 && cur < CACHE_MAX_LLCS && cur != best && cur_at_home &&
	    s->best_occ <= (u64)switch_ratio * cur_occ)
		best = cur;	/* not clearly better */
	return best;
}

enum cache_pref_verdict {
	CACHE_PREF_KEEP,		/* prefer the LLC picked */
	CACHE_PREF_DROP_FIT,		/* no preference: the threads do not fit */
	CACHE_PREF_DROP_OVERLOAD,	/* no preference: the LLC is overloaded */
};

/*
 * Back off: does a process whose occupancy over all LLCs is @total keep
 * preferring an LLC of @cores cores, @overloaded or not? Its running
 * threads, estimated as total / (2 * @epoch_ns) (the steady state of a sum
 * halved every epoch), must not need more than 80% * @aggr_tol of the
 * cores (@aggr_tol 100: no limit), and the LLC must not be overloaded.
 */
static __always_inline u32 cache_rule_verdict(u64 total, u32 cores, bool overloaded,
					      u64 epoch_ns, u32 aggr_tol)
{
	u64 limit = 2 * epoch_ns * cores * 80 / 100;

	if (aggr_tol < 100 && total > limit * aggr_tol)
		return CACHE_PREF_DROP_FIT;
	if (overloaded)
		return CACHE_PREF_DROP_OVERLOAD;
	return CACHE_PREF_KEEP;
}

#endif /* __LOCALITY_CACHE_RULES_H */
