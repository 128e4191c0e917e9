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
 * The gates, as the series' _get_migrate_hint(): may a task whose
 * utilisation is @task_util move from an LLC with utilisation @src_util
 * (capacity @src_cap) to one with @dst_util (@dst_cap)? @to_pref: the
 * destination is the process's preferred LLC (gate "into"); else the
 * source is (gate "out"). Utilisation and capacity in the same unit (1 busy
 * CPU == 1 << LOAD_SHIFT). An LLC "fits" while its utilisation is below
 * @aggr_cap_pct % of its capacity; one is "greater" than another when it
 * exceeds it by more than @imb_pct %.
 *   both LLCs past the fit: IGNORE, aggregation stands aside and ordinary
 *     balancing decides;
 *   into: FORBID if the destination, the task added, no longer fits and is
 *     greater than the source, the task taken away;
 *   out: FORBID if the preferred LLC, the task taken away, still fits, or
 *     is not greater than the destination, the task added (the move would
 *     invite a move back).
 */
enum cache_mig_hint {
	CACHE_MIG_ALLOW,
	CACHE_MIG_IGNORE,
	CACHE_MIG_FORBID,
};

static __always_inline bool cache_rule_fits(u64 util, u64 cap, u32 aggr_cap_pct)
{
	return util * 100 < cap * aggr_cap_pct;
}

static __always_inline bool cache_rule_greater(u64 a, u64 b, u32 imb_pct)
{
	return a * 100 > b * (100 + imb_pct);
}

/* gate "into", both modes: the preferred LLC @dst would be past the fit and greater than @src */
static __always_inline bool cache_rule_crowds_pref(u64 src_util, u64 dst_util, u64 dst_cap,
						   u32 aggr_cap_pct, u32 imb_pct)
{
	return !cache_rule_fits(dst_util, dst_cap, aggr_cap_pct) &&
	       cache_rule_greater(dst_util, src_util, imb_pct);
}

static __always_inline u32 cache_rule_migrate_hint(u64 src_util, u64 src_cap, u64 dst_util,
						    u64 dst_cap, u64 task_util, bool to_pref,
						    u32 aggr_cap_pct, u32 imb_pct)
{
	if (!cache_rule_fits(dst_util, dst_cap, aggr_cap_pct) &&
	    !cache_rule_fits(src_util, src_cap, aggr_cap_pct))
		return CACHE_MIG_IGNORE;
	src_util = src_util < task_util ? 0 : src_util - task_util;
	dst_util += task_util;
	if (to_pref)
		return cache_rule_crowds_pref(src_util, dst_util, dst_cap, aggr_cap_pct, imb_pct) ?
		       CACHE_MIG_FORBID : CACHE_MIG_ALLOW;
	return cache_rule_fits(src_util, src_cap, aggr_cap_pct) ||
	       !cache_rule_greater(src_util, dst_util, imb_pct) ?
	       CACHE_MIG_FORBID : CACHE_MIG_ALLOW;
}

/*
 * The same question under --cache-gates=overload: into the preferred LLC
 * as above but without the task's utilisation and without standing aside
 * when both LLCs are busy; out of it only while it is overloaded
 * (@pref_overloaded, cache_rule_overloaded()).
 */
static __always_inline u32 cache_rule_migrate_hint_overload(u64 src_util, u64 dst_util,
							     u64 dst_cap, bool pref_overloaded,
							     bool to_pref, u32 aggr_cap_pct,
							     u32 imb_pct)
{
	if (to_pref)
		return cache_rule_crowds_pref(src_util, dst_util, dst_cap, aggr_cap_pct, imb_pct) ?
		       CACHE_MIG_FORBID : CACHE_MIG_ALLOW;
	return pref_overloaded ? CACHE_MIG_ALLOW : CACHE_MIG_FORBID;
}

/*
 * Utilisation of one thread of a process, the process's average: @total
 * (its occupancy over every LLC, just after the decay: about one epoch of
 * runtime, see cache_rule_verdict()) over @epoch_ns and @nr_threads, in
 * the unit of cache_rule_migrate_hint() (1 busy CPU == 1 << LOAD_SHIFT).
 * Stands in for the kernel's per-task util_avg, which sched_ext tasks do
 * not maintain.
 */
static __always_inline u64 cache_rule_thread_util(u64 total, u64 epoch_ns, u32 nr_threads)
{
	if (!epoch_ns || !nr_threads)
		return 0;
	return (total << LOAD_SHIFT) / epoch_ns / nr_threads;
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
 * then cache_rule_verdict() on the LLC picked; cache_rule_epoch() takes
 * them in that order.
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
};

/*
 * Back off: does a process whose runnable time over all LLCs is @total
 * keep preferring an LLC of @cores cores? Its runnable threads must not be
 * more than the cores times @aggr_tol (@aggr_tol 100: no limit), as the
 * series' exceed_llc_nr() counts them (nr_running_avg) against the LLC's
 * CPUs over the SMT width. @total is the occupancy plus the time the
 * threads waited to run: runtime alone cannot exceed the LLC the process
 * is kept in, so a process squeezed into it would always seem to fit.
 * Called right after the decay: a sum to which r runnable threads add
 * r * epoch each epoch and which is halved every epoch settles, just after
 * the halving, at r * epoch, so the runnable threads are total / @epoch_ns.
 * Overload does not drop the preference (the series keeps it while the
 * LLC overflows); the gates decide each move.
 */
static __always_inline u32 cache_rule_verdict(u64 total, u32 cores, u64 epoch_ns, u32 aggr_tol)
{
	u64 limit = epoch_ns * cores;

	if (aggr_tol < 100 && total > limit * aggr_tol)
		return CACHE_PREF_DROP_FIT;
	return CACHE_PREF_KEEP;
}

/* what the epoch re-evaluation reads of each LLC (cache.bpf.c's cache_new_epoch() fills it) */
struct cache_epoch_llcs {
	u64 occ[CACHE_MAX_LLCS];	/* the process's occupancy there, just decayed */
	u32 load[CACHE_MAX_LLCS];	/* runnable load (llc_load) */
	s32 node[CACHE_MAX_LLCS];	/* its node, -1 unknown */
	u32 cores[CACHE_MAX_LLCS];	/* its cores (cache_rule_cores()) */
};

/*
 * The epoch re-evaluation of a process's preferred LLC (cache_new_epoch()),
 * after the decay: cache_rule_scan() over the @n LLCs of @l, candidates in
 * the home node @home only (-1: no home, every LLC); cache_rule_pick()
 * against the current preference @cur (-1 none; @cur_occ its occupancy);
 * then cache_rule_verdict() on the LLC picked, of the runtime of every LLC
 * plus @wait, the time the threads waited to run (decayed with it).
 * Returns the LLC picked, -1 for none (no verdict then); its verdict in
 * *@verdict, the scan in *@s (its total gives the thread utilisation).
 */
static __always_inline s32 cache_rule_epoch(const struct cache_epoch_llcs *l, u32 n, s32 home,
					    s32 cur, u64 cur_occ, u64 wait, u32 switch_ratio,
					    u64 epoch_ns, u32 aggr_tol, struct cache_scan *s,
					    u32 *verdict)
{
	s32 best;
	u32 i;

	cache_rule_scan_start(s);
	rules_for(i, 0, n) {
		u32 k = i & (CACHE_MAX_LLCS - 1);

		if (i >= CACHE_MAX_LLCS)
			break;
		cache_rule_scan(s, k, l->occ[k], home >= 0, home < 0 || l->node[k] == home, l->load[k]);
	}
	best = cache_rule_pick(s, cur,
			       home < 0 || (cur >= 0 && l->node[cur & (CACHE_MAX_LLCS - 1)] == home),
			       cur_occ, switch_ratio);
	if (best < 0)
		return -1;
	*verdict = cache_rule_verdict(s->total + wait, l->cores[best & (CACHE_MAX_LLCS - 1)], epoch_ns,
				      aggr_tol);
	return best;
}

#endif /* __LOCALITY_CACHE_RULES_H */
