/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * stats.h - the stats contract: one line per counter of the per-CPU
 * "stats" array map, in index order.
 *
 *   LOC_STAT(NAME, field, UNIT, "description")
 *
 * NAME   the BPF side bumps STAT_NAME (enum locality_stat in intf.h).
 * field  the agent's name for it: a Metrics field, the key in the JSON of
 *        the stats server and of the final-stats line.
 * UNIT   CNT: a count, shown as is (u64); NS: nanoseconds, shown in
 *        milliseconds (f64), so field ends in _ms.
 * description  what it counts: the field's description in the stats
 *        meta (scx_stats).
 *
 * Append only: a counter keeps its index for as long as it exists. The
 * file is included with LOC_STAT defined by the includer (intf.h makes the
 * enum of it) and read by build.rs (build/stat_list.rs), which makes the
 * counter fields of Metrics of it (stats.rs): so it holds nothing but
 * LOC_STAT lines, one each, and comments.
 */

/* push side: where ops.select_cpu found a CPU (push.bpf.c) */
LOC_STAT(PICK_PREV_CORE, pick_prev_core, CNT, "select_cpu: prev CPU, whole core idle (prev_idle, core-first)")
LOC_STAT(PICK_LLC_CORE, pick_llc_core, CNT, "select_cpu: idle core in prev's LLC (llc_idle_core)")
LOC_STAT(PICK_LLC_CPU, pick_llc_cpu, CNT, "select_cpu: idle CPU in prev's LLC (llc_idle_cpu)")
LOC_STAT(PICK_NODE_CPU, pick_node_cpu, CNT, "select_cpu: idle CPU in prev's node (node_idle_cpu)")
LOC_STAT(PICK_OTHER, pick_other, CNT, "select_cpu: idle CPU elsewhere (push_across)")
LOC_STAT(PICK_NONE, pick_none, CNT, "select_cpu: nothing idle, stayed on prev (stay_on_prev)")
/* wake_affine (push.bpf.c): waker and prev CPU in one node, different LLCs */
LOC_STAT(PICK_AFFINE, pick_affine, CNT, "select_cpu: sync wake-up, idle CPU in the waker's LLC (wake_affine)")
LOC_STAT(AFFINE_WIDE, affine_wide, CNT, "select_cpu: wake_affine not tried, waker and wakee serve many partners")

/* pull side: where ops.dispatch found work when its own DSQ was empty (pull.bpf.c) */
LOC_STAT(STEAL_SMT, steal_smt, CNT, "dispatch: stolen from an SMT sibling")
LOC_STAT(STEAL_LLC, steal_llc, CNT, "dispatch: stolen within the LLC")
LOC_STAT(STEAL_NODE, steal_node, CNT, "dispatch: stolen within the node")
LOC_STAT(STEAL_REMOTE, steal_remote, CNT, "dispatch: stolen from another node")
LOC_STAT(STEAL_OFFLINE, steal_offline, CNT, "dispatch: drained from an offline CPU's DSQ")

/* migrations seen in ops.running */
LOC_STAT(MIGR_CROSS_LLC, migr_cross_llc, CNT, "task ran in another LLC than last time")
LOC_STAT(MIGR_CROSS_NODE, migr_cross_node, CNT, "task ran in another node than last time")

/* idle-while-queued estimates (sampled by the heartbeat timer, see heartbeat.bpf.c) */
LOC_STAT(IWQ_LLC_NS, idle_while_queued_llc_ms, NS, "sampled ms a CPU idled while a task waited in its LLC")
LOC_STAT(IWQ_NODE_NS, idle_while_queued_node_ms, NS, "sampled ms a CPU idled while a task waited in its node")

/* traffic */
LOC_STAT(ENQUEUE, enqueues, CNT, "tasks queued on a per-CPU DSQ")
LOC_STAT(ENQ_FALLBACK, enq_fallback, CNT, "... on another CPU than task_cpu (offline or affinity)")
LOC_STAT(DIRECT, direct_dispatches, CNT, "select_cpu dispatched straight to an idle CPU")
LOC_STAT(DISPATCH_LOCAL, dispatch_local, CNT, "dispatch took a task from its own DSQ")
LOC_STAT(KEEP_PREV, keep_prev, CNT, "dispatch found nothing, prev kept running")
LOC_STAT(KICK_STEALER, kick_stealer, CNT, "idle CPUs woken to pull from an overloaded one")
/* the heartbeat timer (a softirq on one CPU): is it alive, what it costs (duty cap: TIMER_DUTY_PCT) */
LOC_STAT(IWQ_SAMPLES, iwq_samples, CNT, "idle-while-queued samples taken (timer runs)")
LOC_STAT(TIMER_NS, timer_ms, NS, "time spent in the heartbeat timer's callback (ms)")
LOC_STAT(TIMER_STRETCHED, timer_stretched, CNT, "sampling periods stretched by the timer's duty cap")
/* wake-up preemption, wake_preempt() in main.bpf.c */
LOC_STAT(WAKE_PREEMPT, wake_preempt, CNT, "waking tasks that preempted the running one")
/* a missed wake-up the timer repaired: should stay near 0 */
LOC_STAT(RESCUE_KICK, rescue_kicks, CNT, "idle CPUs with a queued DSQ woken by the heartbeat timer")
/* kick_cpu() in locality.bpf.c; nonzero only around CPU hotplug */
LOC_STAT(KICK_DROPPED, kick_dropped, CNT, "kicks asked for on a CPU going offline, not sent")

/* NUMA (numa*.bpf.c): cross-node moves by cause */
LOC_STAT(XNODE_PUSH_WAKE, xnode_push_wake, CNT, "cross-node move: select_cpu put a waking task on another node")
LOC_STAT(XNODE_PUSH_FORK, xnode_push_fork, CNT, "cross-node move: a new task (fork) started on another node")
LOC_STAT(XNODE_EXEC, xnode_exec, CNT, "cross-node move: exec placement (place_exec)")
LOC_STAT(XNODE_STEAL_BALANCE, xnode_steal_balance, CNT, "cross-node move: steal (policy modes: within a balance pass budget, balance_pass)")
LOC_STAT(XNODE_STEAL_OFFLINE, xnode_steal_offline, CNT, "cross-node move: drained an offline CPU of another node")
LOC_STAT(XNODE_WAKE_FOLLOW, xnode_wake_follow, CNT, "cross-node move: a synchronous wakee followed its waker's node (wake_follow)")
LOC_STAT(XNODE_ACTIVE, xnode_active, CNT, "cross-node move: active_balance sent a preempted task to an idle node")
LOC_STAT(XNODE_STEAL_OVERLOAD, xnode_steal_overload, CNT, "cross-node move: steal from an overloaded node (node_overloaded)")
LOC_STAT(XNODE_STEAL_IDLE, xnode_steal_idle, CNT, "cross-node move: a CPU going idle pulled from a node with more tasks now (idle_pull_across)")
/* NUMA policy decisions */
LOC_STAT(NUMA_PASSES, numa_passes, CNT, "cross-node balance passes run")
LOC_STAT(NUMA_BUDGET, numa_budget, CNT, "tasks the balance passes allowed to move")
LOC_STAT(NUMA_PUSH_KEPT, numa_push_kept, CNT, "push_across denied: node within the allowance")
LOC_STAT(NUMA_NEW_LOCAL, numa_new_local, CNT, "new process (fork/exec) kept on its parent's node (place_new)")
LOC_STAT(NUMA_TASK_RECENT, numa_task_recent, CNT, "cross-node move denied: task changed node within the interval (task_may_cross)")
LOC_STAT(NUMA_FOLLOW_REFUSED, numa_follow_refused, CNT, "wakee kept off its waker's node (all reasons; beyond the allowance unless counted below)")
LOC_STAT(NUMA_SETTLED_KEPT, numa_settled_kept, CNT, "cross-node steal passed over a task settled on its node (settled_kept)")
LOC_STAT(NUMA_PULL_HOT, numa_pull_hot, CNT, "idle pull across nodes passed over a task queued too recently (idle_pull_across)")
LOC_STAT(NUMA_ACTIVE_KICK, numa_active_kicks, CNT, "active_balance: busy CPUs preempted for an idle node")
LOC_STAT(NUMA_OVERLOAD, numa_overload, CNT, "push_across allowed past the allowance: its node was overloaded (node_overloaded)")
/* home nodes (home.bpf.c) */
LOC_STAT(XNODE_HOME, xnode_home, CNT, "cross-node move: a waking task went back to an idle CPU of its home node (home_wake)")
LOC_STAT(HOME_KEPT, home_kept, CNT, "push, follow or steal away from the task's home node refused (home_may_leave, home_steal_ok)")
LOC_STAT(HOME_ACTIVE, home_active, CNT, "balance pass: tasks away from home preempted to go back (home_balance)")
LOC_STAT(HOME_SWAP, home_swaps, CNT, "balance pass: swaps (home full, a task homed here sent back with it)")

/* cache-aware scheduling (cache.bpf.c) */
LOC_STAT(CACHE_PREF_SET, cache_pref_set, CNT, "cache-aware: a process got a preferred LLC")
LOC_STAT(CACHE_PREF_SWITCH, cache_pref_switch, CNT, "cache-aware: a process switched preferred LLC (hysteresis passed)")
/* drop_fit: at an epoch; drop_timeout: at a lookup (events, not processes) */
LOC_STAT(CACHE_DROP_FIT, cache_drop_fit, CNT, "cache-aware: preference dropped, more running threads than the LLC's cores")
LOC_STAT(CACHE_DROP_TIMEOUT, cache_drop_timeout, CNT, "cache-aware: preference ignored, no activity for the timeout")
LOC_STAT(CACHE_AGGR_PULL, cache_aggr_pull, CNT, "cache-aware: steals into the task's preferred LLC")
LOC_STAT(CACHE_AGGR_WAKE, cache_aggr_wake, CNT, "cache-aware: wake aggregation picks in the preferred LLC (cache_wake)")
LOC_STAT(CACHE_AGGR_KICK, cache_aggr_kick, CNT, "cache-aware: idle CPUs of the preferred LLC woken to pull")
LOC_STAT(CACHE_AGGR_MARK, cache_aggr_mark, CNT, "cache-aware: running tasks outside their preferred LLC asked to move by an idle CPU there")
LOC_STAT(CACHE_AGGR_MOVE, cache_aggr_move, CNT, "cache-aware: asked tasks moved into their preferred LLC at their next wake-up")
LOC_STAT(CACHE_KEEP_WAKE, cache_keep_wake, CNT, "cache-aware: wakeups kept in the preferred LLC (gate out)")
LOC_STAT(CACHE_REFUSE_OUT, cache_refuse_out, CNT, "cache-aware: steals out of the preferred LLC refused (gate out)")
LOC_STAT(CACHE_REFUSE_OVERAGGR, cache_refuse_overaggr, CNT, "cache-aware: moves into the preferred LLC refused (over-aggregated)")
LOC_STAT(CACHE_RT_NS, cache_rt_ms, NS, "cache-aware: ms run by tracked (multi-thread) processes")
LOC_STAT(CACHE_RT_PREF_NS, cache_rt_pref_ms, NS, "cache-aware: ms of that run in the process's preferred LLC")

/* sparse idle tracking (idle.bpf.c, --sparse-idle): both stay 0 with the built-in masks */
LOC_STAT(IDLE_RESYNC, idle_resync, CNT, "sparse idle: idle CPUs whose slot the timer set again")
LOC_STAT(IDLE_CLAIM_LOST, idle_claim_lost, CNT, "sparse idle: slot claimed but built-in idle bit already clear")

/* why wake_follow was refused (numa_wake_follow() in numa_place.bpf.c), beside the total above */
LOC_STAT(NUMA_FOLLOW_REFUSED_OVERLOAD, numa_follow_refused_overload, CNT, "wake_follow refused: the waker's node would be overloaded")
LOC_STAT(NUMA_FOLLOW_REFUSED_PARTNERS, numa_follow_refused_partners, CNT, "wake_follow refused: waker or wakee has many partners")

/* new-program placement (numa_place_new() in numa_place.bpf.c) */
LOC_STAT(NUMA_CLAIM_LOST, numa_claim_lost, CNT, "new program: another was counted on the chosen node meanwhile, chosen again")

/* the decision record for explain (decide.bpf.c) */
LOC_STAT(DECIDE_EMIT, decide_emitted, CNT, "decision records written to the ring buffer")
LOC_STAT(DECIDE_DROP_RATE, decide_dropped_rate, CNT, "decision records not written: over the per-CPU rate")
LOC_STAT(DECIDE_DROP_FULL, decide_dropped_full, CNT, "decision records not written: ring buffer full")
LOC_STAT(DECIDE_TIMED, decide_timed, CNT, "decision record calls timed (one in 16, dropped or written)")
LOC_STAT(DECIDE_TIMED_NS, decide_timed_ms, NS, "time spent in the timed decision record calls")

/* ops.enqueue: a task about to queue behind a running one, handed to an idle CPU nearby (pull_claim_near() in pull.bpf.c) */
LOC_STAT(ENQ_HANDOFF, enq_handoff, CNT, "enqueue: handed to an idle CPU of the LLC or node instead of queuing")

/* prev_idle (push.bpf.c) with --idle-search=prev-first */
LOC_STAT(PICK_PREV, pick_prev, CNT, "select_cpu: prev CPU idle, its SMT siblings busy or not (prev_idle)")
LOC_STAT(XNODE_CACHE_AGGR, xnode_cache_aggr, CNT, "cross-node move: a waking task went to an idle CPU of its preferred LLC in another node that asked for it")

/* of enq_handoff, the tasks handed over at a wake-up (--enqueue-handoff=all; pull_claim_near()) */
LOC_STAT(ENQ_HANDOFF_WAKE, enq_handoff_wake, CNT, "enqueue: of enq_handoff, waking tasks")
/* push_waker_cpu(): a sync wake-up queued on the waker's own CPU (--sync-wake-target) */
LOC_STAT(PICK_WAKER, pick_waker, CNT, "select_cpu: sync wake-up put on the waker's CPU, to run when it sleeps (waker_cpu)")
