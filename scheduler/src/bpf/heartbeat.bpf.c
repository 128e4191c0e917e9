/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * heartbeat.bpf.c - the periodic BPF timer (--heartbeat-us, iwq_period_ns)
 *
 * One timer, one CPU at a time, every iwq_period_ns (20 ms by default). Each
 * tick:
 *   - samples every CPU's queue and idle state for the NUMA load averages
 *     and utilisation (numa_load_begin / numa_load_cpu / numa_load_end,
 *     numa_load.bpf.c), then runs the cross-node balance pass when due
 *     (numa_balance_pass, numa_balance.bpf.c);
 *   - re-syncs the sparse idle flags with the kernel's (idle_resync);
 *   - wakes an idle CPU that has tasks queued in its own DSQs (a missed
 *     wake-up: STAT_RESCUE_KICK, expected zero);
 *   - estimates idle-while-queued time per LLC and per node: CPU time that
 *     idle CPUs could have spent running tasks queued nearby
 *     (STAT_IWQ_LLC_NS, STAT_IWQ_NODE_NS), a locality figure for the stats.
 *
 * Knobs: iwq_period_ns. Stats: STAT_IWQ_SAMPLES, STAT_IWQ_LLC_NS,
 * STAT_IWQ_NODE_NS, STAT_RESCUE_KICK, STAT_TIMER_NS, STAT_TIMER_STRETCHED.
 */
#include "locality.bpf.h"
#include "heartbeat.bpf.h"
#include "idle.bpf.h"
#include "numa_load.bpf.h"
#include "numa_balance.bpf.h"

/* scratch, used only by the (single) timer callback */
u64 iwq_last_ns;
u32 iwq_llc_idle[MAX_LLCS], iwq_llc_queued[MAX_LLCS];
u32 iwq_node_idle[MAX_NODES], iwq_node_queued[MAX_NODES];

struct iwq_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct iwq_timer);
} iwq_timers SEC(".maps");

/*
 * Every iwq_period_ns, per LLC: idle = its online CPUs in the idle mask,
 * queued = tasks waiting in its CPUs' DSQs. min(idle, queued) CPUs could
 * have been running queued work, so add min * (time since the last sample)
 * to the LLC counter; likewise per node. This is a sampled estimate (a
 * state shorter than the period may be missed or counted whole) and it
 * ignores affinity, but it is cheap: one pass over the CPUs and one over
 * the LLCs and nodes.
 *
 * Period (--heartbeat-us): 20 ms. Every pass is a softirq on one CPU, which
 * slows whatever runs there, and its cost grows with the CPUs it reads;
 * the load averages it feeds decay by elapsed time (numa_rule_load_decay()),
 * so the period sets how often they are sampled, not how fast they move
 * (docs/decisions.md, "Heartbeat period").
 */
static int iwq_timerfn(void *map, int *key, struct bpf_timer *timer)
{
	const struct cpumask *idle;
	u64 llc_sum = 0, node_sum = 0, now, dt, sample_at;
	u32 i;

	/*
	 * Weight the sample by the time since the previous one: timers fire
	 * late under load (and much later in an emulator), and a sample
	 * stands for the whole gap. Capped (100 periods) so a timer held off
	 * for long, e.g. across CPU hotplug, does not extrapolate a moment's
	 * state over seconds.
	 */
	now = bpf_ktime_get_ns();
	dt = iwq_last_ns ? now - iwq_last_ns : iwq_period_ns;
	if (dt > 100 * iwq_period_ns)
		dt = 100 * iwq_period_ns;
	iwq_last_ns = now;
	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		iwq_llc_idle[i] = 0;
		iwq_llc_queued[i] = 0;
	}
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		iwq_node_idle[i] = 0;
		iwq_node_queued[i] = 0;
	}

	sample_at = scx_bpf_now();
	numa_load_begin(sample_at);
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, 0, nr_cpus) {
		u32 c = i & CPU_MASK, l, n;
		s32 q, pq, lq;
		bool is_idle;

		if (i >= MAX_CPUS)
			break;
		l = cpu_llc[c];
		n = cpu_node[c];
		if (l >= MAX_LLCS || n >= MAX_NODES)
			continue;
		if (!cpu_is_online[c]) {
			numa_load_cpu(c, 0, false);
			continue;
		}
		is_idle = bpf_cpumask_test_cpu(i, idle);
		/* movable (what idle neighbours could run) and pinned; none while flagged empty */
		q = dsq_maybe_queued[c] ? scx_bpf_dsq_nr_queued(i) : 0;
		pq = dsq_maybe_queued[c] ? scx_bpf_dsq_nr_queued(pinned_dsq(i)) : 0;
		lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | i);
		idle_resync(i, is_idle, lq);
		if (is_idle && (q > 0 || pq > 0)) {
			/*
			 * Idle with its own DSQ queued: a wake-up was missed
			 * somewhere. Its owner is the one CPU sure to be
			 * allowed for those tasks: wake it. Counted, since it
			 * should not happen.
			 */
			kick_cpu(i, SCX_KICK_IDLE);
			stat_inc(STAT_RESCUE_KICK);
		}
		numa_load_cpu(c, (q > 0 ? q : 0) + (pq > 0 ? pq : 0) +
			      (lq > 0 ? lq : 0) + !is_idle, !is_idle);
		if (is_idle) {
			iwq_llc_idle[l]++;
			iwq_node_idle[n]++;
		}
		if (q > 0) {
			iwq_llc_queued[l] += q;
			iwq_node_queued[n] += q;
		}
	}
	scx_bpf_put_idle_cpumask(idle);

	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		llc_sum += MIN(iwq_llc_idle[i], iwq_llc_queued[i]);
	}
	bpf_for(i, 0, nr_nodes) {
		if (i >= MAX_NODES)
			break;
		node_sum += MIN(iwq_node_idle[i], iwq_node_queued[i]);
	}
	if (llc_sum)
		stat_add(STAT_IWQ_LLC_NS, llc_sum * dt);
	if (node_sum)
		stat_add(STAT_IWQ_NODE_NS, node_sum * dt);
	stat_inc(STAT_IWQ_SAMPLES);
	numa_load_end();
	/* balance_pass, when due, on the loads just sampled */
	numa_balance_pass(sample_at);

	/*
	 * Duty cap: the callback runs in softirq context on one CPU and the
	 * tasks of that CPU wait while it runs. Its cost grows with the CPU
	 * count and, under emulation, with the vCPUs sharing a host core: on
	 * big64 (64 vCPUs on 2 host cores) one pass took ~130 ms of wall time,
	 * so a 1 ms period kept one CPU in softirq nearly all the time; its
	 * pinned tasks and its ksoftirqd starved past the 30 s watchdog. The
	 * next period is stretched so that the timer takes at most
	 * TIMER_DUTY_PCT of its CPU; the samples are already weighted by the
	 * real gap (dt above).
	 */
	dt = bpf_ktime_get_ns() - now;
	stat_add(STAT_TIMER_NS, dt);
	dt = dt * (100 - TIMER_DUTY_PCT) / TIMER_DUTY_PCT;
	if (dt > iwq_period_ns)
		stat_inc(STAT_TIMER_STRETCHED);
	bpf_timer_start(timer, dt > iwq_period_ns ? dt : iwq_period_ns, 0);
	return 0;
}

/* Arm the timer (from ops.init); 0 or the error, reported. */
__hidden s32 heartbeat_start(void)
{
	struct bpf_timer *timer;
	u32 zero = 0;
	s32 ret;

	timer = bpf_map_lookup_elem(&iwq_timers, &zero);
	if (!timer)
		return -ENOENT;
	bpf_timer_init(timer, &iwq_timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(timer, iwq_timerfn);
	ret = bpf_timer_start(timer, iwq_period_ns, 0);
	if (ret)
		scx_bpf_error("failed to start the idle-while-queued timer (%d)", ret);
	return ret;
}
