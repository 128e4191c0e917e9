/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * decide.bpf.c - a record of placement decisions, for `scx_locality explain`.
 *
 * Idea: the counters say how often each rule acted, not on whom. Here each
 * CPU records the moves it sees (a task running in another LLC or node
 * than last time, with the rule that sent it: task_ctx.why, set by the
 * rule, decide_why()) and the refusals of the rules that kept a task where
 * it was, into a BPF ring buffer. The agent drains it every second and
 * keeps the last few records per process (decisions.rs); explain shows
 * them.
 *
 * Bounded rate: a per-CPU token bucket in its GCRA form (one stored time
 * per CPU, no timer, no lock: only the CPU itself writes its slot, and
 * the scheduling callbacks do not nest on a CPU) passes decision_rate
 * records per second with bursts of DECIDE_BURST; the rest are counted and
 * dropped before any ring buffer work; refusals, which come in runs, are
 * first sampled one in DECIDE_REFUSED_EVERY (decide.bpf.h), without a
 * helper call. Records are submitted without a
 * wake-up (BPF_RB_NO_WAKEUP): the agent polls, so no irq_work per record.
 *
 * Knob: --decision-rate (records per second per CPU; 0 = off, the A/B
 * switch for its cost). Stats: DECIDE_EMIT, DECIDE_DROP_RATE,
 * DECIDE_DROP_FULL; the cost: one call in DECIDE_TIME_EVERY is timed whole,
 * dropped or written (DECIDE_TIMED, DECIDE_TIMED_NS), which the agent
 * scales to all calls.
 */
#include "locality.bpf.h"
#include "decide.bpf.h"

/* 1e9 / --decision-rate; 0: nothing is recorded */
const volatile u64 decide_period_ns = 1000000000ULL / DFL_DECISION_RATE;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DECIDE_RING_KB * 1024);
} decisions SEC(".maps");

u64 decide_tat[MAX_CPUS];	/* per CPU: the bucket's theoretical arrival time */
u32 decide_nr[MAX_CPUS];	/* per CPU: calls, for the 1-in-N timing */
u32 decide_refusals[MAX_CPUS];	/* per CPU: refusals seen, for decide_refused()'s sample */

static __always_inline void emit(u64 ids, u32 kind, s32 from_cpu, s32 to_cpu, u32 rule, u32 me)
{
	struct decision *d;
	u64 now = scx_bpf_now(), tat = decide_tat[me];

	/* the bucket: at most DECIDE_BURST records ahead of now */
	if (tat > now + DECIDE_BURST * decide_period_ns) {
		stat_inc(STAT_DECIDE_DROP_RATE);
		return;
	}
	decide_tat[me] = (tat > now ? tat : now) + decide_period_ns;
	d = bpf_ringbuf_reserve(&decisions, sizeof(*d), 0);
	if (!d) {
		stat_inc(STAT_DECIDE_DROP_FULL);
		return;
	}
	d->at_ns = bpf_ktime_get_ns();
	d->pid = (u32)ids;
	d->tgid = ids >> 32;
	d->from_cpu = from_cpu;
	d->to_cpu = to_cpu;
	d->kind = kind;
	d->rule = rule;
	bpf_ringbuf_submit(d, BPF_RB_NO_WAKEUP);
	stat_inc(STAT_DECIDE_EMIT);
}

/*
 * One call in DECIDE_TIME_EVERY is timed whole, dropped or written. @ids:
 * tgid << 32 | pid (decide_emit()). A global function, so the verifier
 * checks it once rather than at each of its many call sites.
 */
void decide_record(u64 ids, u32 kind, s32 from_cpu, s32 to_cpu, u32 rule)
{
	u32 me = bpf_get_smp_processor_id() & CPU_MASK;
	u64 t0;

	if (!decide_period_ns)
		return;
	if (decide_nr[me]++ % DECIDE_TIME_EVERY) {
		emit(ids, kind, from_cpu, to_cpu, rule, me);
		return;
	}
	t0 = bpf_ktime_get_ns();
	emit(ids, kind, from_cpu, to_cpu, rule, me);
	stat_inc(STAT_DECIDE_TIMED);
	stat_add(STAT_DECIDE_TIMED_NS, bpf_ktime_get_ns() - t0);
}
