/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * locality.bpf.c - the state every BPF unit shares: the agent's rodata
 * (topology and the knobs several units read), the per-CPU state they all
 * read, kick_cpu() and cpu_set_online(). Declared in locality.bpf.h, with
 * the maps and the small helpers.
 *
 * Idea. The units form layers, each calling only the ones below it, so
 * that a unit can be read without the ones above it and no two units call
 * each other. This file is the bottom: it calls no other unit. From the
 * bottom up:
 *
 *   locality.bpf.c                       shared state (this file)
 *   decide, idle, memory                 the decision record, idle
 *                                        questions, page-fault counts
 *   numa_load                            load and utilisation averages
 *   numa                                 the NUMA policy's rules, steals
 *                                        across nodes
 *   home                                 home nodes
 *   cache                                cache-aware scheduling
 *   numa_balance, numa_place             the balance pass; placement
 *                                        across nodes
 *   push, pull                           wake-up search; stealing
 *   place                                the order of the placement rules
 *   heartbeat                            the periodic timer
 *   main.bpf.c                           the ops callbacks
 *
 * A helper that two units would share goes into the lower one. The
 * mechanisms' own knobs and state stay in their units (cache_*, the idle
 * lines, home_*, the NUMA loads and budgets).
 *
 * Origin: none, this is plumbing. The layering mirrors the kernel's
 * scheduler, where kernel/sched/sched.h holds the run-queue state every
 * class reads and each class's file holds its callbacks.
 *
 * Knobs: the topology (nr_cpus, cpu_llc, cpu_node, ... written from
 * sysfs by topology.rs/rodata.rs), slice_ns, slice_lag_ns, iwq_period_ns,
 * wake_gran_ns, no_steal, handoff_*, no_idle_core, idle_prev_first,
 * steal_cross_node, idle_pull_across, push_cross_*, wake_follow, place_*,
 * wake_affine, sync_to_waker*, numa_mode, numa_interval_ns, node_imb_nr.
 * Stats: STAT_KICK_DROPPED.
 */
#include "locality.bpf.h"

/* ---- knobs and topology: rodata, written by the agent before load ---- */

const volatile u32 nr_cpus = 1;		/* nr_cpu_ids: every CPU id is below */
const volatile u32 nr_llcs = 1;
const volatile u32 nr_nodes = 1;

const volatile u64 slice_ns = DFL_SLICE_US * 1000ULL;
const volatile u64 slice_lag_ns = DFL_SLICE_US * 1000ULL;
const volatile u64 iwq_period_ns = DFL_IWQ_PERIOD_US * 1000ULL;
const volatile bool no_steal;
const volatile bool handoff_wake;	/* pull.bpf.c pull_claim_near(): a waking task */
const volatile bool handoff_requeue = true;	/* ... a task queued again without a wake-up */
const volatile bool no_idle_core;
const volatile bool idle_prev_first = true;
const volatile u64 wake_gran_ns = DFL_WAKE_GRAN_US * 1000ULL; /* 0: no wake-up preemption */
const volatile bool steal_cross_node;
const volatile bool idle_pull_across;	/* numa.bpf.c idle_pull_across */
const volatile bool push_cross_wake;	/* numa_place.bpf.c push_across at a wake-up */
const volatile bool push_cross_fork = true;	/* numa_place.bpf.c push_across for a new task */
const volatile bool push_cross_unpaired;	/* ... for a wake-up not within a pair */
const volatile bool wake_follow = true;	/* numa_place.bpf.c wake_follow */
const volatile bool place_at_fork;	/* numa_place.bpf.c place_new: fork too, not only exec */
const volatile bool place_least_loaded = true;	/* numa_place.bpf.c place_new: Bligh/Hohnbaum's form */
const volatile bool place_quiet_stays = true;	/* ... and its first test: a program on a quiet CPU stays */
const volatile bool wake_affine = true;	/* push.bpf.c wake_affine */
const volatile bool sync_to_waker;		/* push_waker_cpu() */
const volatile bool sync_to_waker_pairs;	/* ... only between partners */

const volatile u16 cpu_llc[MAX_CPUS];	/* dense LLC index of each CPU */
const volatile u16 cpu_node[MAX_CPUS];	/* dense node index of each CPU */
const volatile u16 cpu_core[MAX_CPUS];	/* dense core index of each CPU */
const volatile u8 cpu_topo_known[MAX_CPUS]; /* 0: was offline, topology guessed */

/* SMT siblings of each CPU (itself excluded): cpu_sibs[cpu * MAX_SMT + i] */
const volatile u8 cpu_nr_sibs[MAX_CPUS];
const volatile u16 cpu_sibs[MAX_CPUS * MAX_SMT];

/*
 * CPU lists per LLC and per node, compressed-row style: LLC l owns
 * llc_cpus[llc_off[l] .. llc_off[l + 1]). Walking a short list of ids is
 * cheaper and easier on the verifier than scanning a bitmap.
 */
const volatile u32 llc_off[MAX_LLCS + 1];
const volatile u16 llc_cpus[MAX_CPUS];
const volatile u32 node_off[MAX_NODES + 1];
const volatile u16 node_cpus[MAX_CPUS];
const volatile u32 numa_mode = NUMA_UPSTREAM;
const volatile u64 numa_interval_ns = DFL_NUMA_INTERVAL_MS * 1000000ULL;
const volatile u32 node_imb_nr[MAX_NODES];	/* upstream allowance per node */

/* ---- state every unit reads ---- */

u8 cpu_is_online[MAX_CPUS];
u32 nr_offline;				/* possible CPUs currently offline */

u32 rotor[MAX_CPUS];			/* per-CPU scan start rotation */

/*
 * Whether a CPU's two DSQs may hold tasks. Each DSQ is found by its id in
 * a hash table on every kfunc that names it, the costliest part of asking
 * it anything; this flag answers "empty" without asking. Set by
 * ops.enqueue after each insert (the only way into these DSQs), cleared by
 * the owner in ops.dispatch before it looks at them: an insert before the
 * clear is found by that look, one after it sets the flag again. So 0
 * means empty; 1 means maybe (stealers take tasks without clearing it).
 */
u32 dsq_maybe_queued[MAX_CPUS];

/*
 * Per-CPU record of what each CPU last did: the running task's start time
 * and vtime (read by wake_preempt() on other CPUs) and dispatch counters,
 * printed in the kernel's exit dump (ops.dump_cpu) if we are ever ejected.
 * Written only by its own CPU.
 */
struct cpu_diag cpu_diag[MAX_CPUS];

/*
 * Every kick goes through here. scx_bpf_kick_cpu() queues an irq_work on
 * the calling CPU and raises a self-IPI for it. On a CPU that is going
 * down, past the point where its pending irq_work is flushed, that IPI is
 * lost and the work stays pending for good; the kernel (7.3) then spins
 * forever in irq_work_sync() when the scheduler is disabled, and the agent
 * hangs in close() unkillable. Seen in the lab: hotplug cycles, then stop.
 * The kernel clears a dying CPU from cpu_online_mask before that point, so
 * a kick asked for on a CPU outside it is dropped and counted. Nothing is
 * lost for long: tasks queued there are drained by the others and the
 * heartbeat timer wakes idle CPUs with queued work (rescue kicks).
 */
__hidden void kick_cpu(s32 cpu, u64 flags)
{
	const struct cpumask *online = scx_bpf_get_online_cpumask();
	bool here_online = bpf_cpumask_test_cpu(bpf_get_smp_processor_id(), online);

	scx_bpf_put_cpumask(online);
	if (!here_online) {
		stat_inc(STAT_KICK_DROPPED);
		return;
	}
	scx_bpf_kick_cpu(cpu, flags);
}

/*
 * ops.cpu_online / ops.cpu_offline: @cpu is now @online. Kept here with
 * the state it changes: cpu_is_online, nr_offline and online_mask.
 */
__hidden void cpu_set_online(s32 cpu, bool online)
{
	u32 zero = 0;
	struct mask_ctx *mc;

	if (!cpu_valid(cpu))
		return;
	if (cpu_is_online[cpu & CPU_MASK] == online)
		return;
	cpu_is_online[cpu & CPU_MASK] = online;
	if (online)
		__sync_fetch_and_sub(&nr_offline, 1);
	else
		__sync_fetch_and_add(&nr_offline, 1);

	mc = bpf_map_lookup_elem(&online_mask, &zero);
	if (mc && mc->mask) {
		if (online)
			bpf_cpumask_set_cpu(cpu, mc->mask);
		else
			bpf_cpumask_clear_cpu(cpu, mc->mask);
	}
}
