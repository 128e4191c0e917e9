// SPDX-License-Identifier: GPL-2.0-only
//! The BPF side's pure rules, compiled for the host, and their unit tests.
//!
//! src/bpf/*_rules.h hold the decision rules as static inline C functions
//! of plain values. The BPF units call them with their globals; build.rs
//! also compiles them for the host (src/bpf/rules_host.c exports one
//! function per rule into a static library). The tests below call those
//! functions, so they test the rules the scheduler runs and there is no
//! Rust copy to keep equal. Each rule's explanation is its header's
//! comment. Only the tests use this module.
//!
//! Each submodule binds one header: its structs (checked against the C
//! layout), its functions (wrapped as safe calls: they only read what they
//! are given, the cache scan writes its own struct) and the tests.

use crate::bpf_intf as intf;

/// 1 task, or 1 busy CPU, in the rules' fixed point
const ONE: u32 = 1 << intf::locality_consts_LOAD_SHIFT;
#[cfg(test)]
const LOAD_MAX: usize = intf::locality_consts_LOAD_MAX_STEPS as usize;

/// The NUMA policy (numa_rules.h).
mod numa {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use std::sync::{Arc, Barrier};

    const OFF: u32 = intf::numa_mode_NUMA_OFF;
    const UPSTREAM: u32 = intf::numa_mode_NUMA_UPSTREAM;
    const IDLE_CPUS: u32 = intf::numa_mode_NUMA_IDLE_CPUS;
    const NO_ALLOWANCE: u32 = intf::numa_mode_NUMA_NO_ALLOWANCE;

    /// `struct numa_node_fig`: what the policy sees of a node.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    struct NumaNodeFig {
        cpus: u32,
        nr_last: u32,
        load: u32,
        util: u32,
        placed: u32,
        imb_nr: u32,
    }

    /// `struct numa_task_util`: a task's utilisation average.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    struct NumaTaskUtil {
        at: u64,
        run: u64,
        util: u32,
    }

    extern "C" {
        static rules_numa_node_fig_layout: [usize; 7];
        static rules_numa_task_util_layout: [usize; 4];
        fn rules_numa_tasks(n: *const NumaNodeFig) -> u32;
        fn rules_numa_busy(n: *const NumaNodeFig) -> u32;
        fn rules_numa_idle(n: *const NumaNodeFig, extra: u32) -> i32;
        fn rules_numa_overloaded(n: *const NumaNodeFig, extra: u32) -> bool;
        fn rules_numa_adjust(
            mode: u32,
            imb: i32,
            busiest_idle: i32,
            busiest_cpus: u32,
            local_running: u32,
            local_imb_nr: u32,
        ) -> i32;
        fn rules_numa_moves(
            mode: u32,
            src: *const NumaNodeFig,
            dst: *const NumaNodeFig,
            extra: u32,
        ) -> u32;
        fn rules_numa_idle_pull(
            mode: u32,
            src_nr: u32,
            src_cpus: u32,
            dst_nr: u32,
            dst_cpus: u32,
            dst_imb_nr: u32,
        ) -> u32;
        fn rules_numa_new_stays(
            mode: u32,
            parent: *const NumaNodeFig,
            least: *const NumaNodeFig,
        ) -> bool;
        fn rules_numa_new_stays_least_loaded(parent_nr: u32, least_nr: u32) -> bool;
        fn rules_numa_least(
            nr: *const u32,
            load: *const u32,
            nr_nodes: u32,
            skip: u64,
            least_nr: *mut u32,
        ) -> i32;
        fn rules_numa_new_least_loaded(
            nr: *const u32,
            load: *const u32,
            nr_nodes: u32,
            tried: u64,
            src: u32,
            parent_nr: u32,
        ) -> i32;
        fn rules_numa_new_cpu_quiet(cpu_nr: u32) -> bool;
        fn rules_numa_claim(placed: *mut u32, seen: u32) -> bool;
        fn rules_numa_may_gather(mode: u32, to: *const NumaNodeFig, from: *const NumaNodeFig) -> bool;
        fn rules_numa_push_across(
            src: *const NumaNodeFig,
            dst: *const NumaNodeFig,
            task_util: u32,
        ) -> bool;
        fn rules_numa_util_add(u: *mut NumaTaskUtil, now: u64, used: u64);
        fn rules_numa_util_now(u: *const NumaTaskUtil, now: u64) -> u32;
        fn rules_numa_load_steps(gap: u64) -> u32;
        fn rules_numa_load_decay(old: u32, target: u32, steps: u32) -> u32;
        fn rules_numa_may_cross(mode: u32, xnode_at: u64, now: u64, interval_ns: u64) -> bool;
        fn rules_numa_few_partners(waker_flips: i64, wakee_flips: i64, llc_cpus: u32) -> bool;
        fn rules_numa_exec_done(moved: bool, recheck: bool, since_first_ns: u64, interval_ns: u64) -> bool;
        /// NUMA_MARK_OTHER, NUMA_MARK_MINE, NUMA_MARK_EXPIRED
        static rules_numa_mark_verdicts: [u32; 3];
        fn rules_numa_mark_for(pid: i32, marked_pid: i32, age_ns: u64, interval_ns: u64) -> u32;
    }

    fn tasks(n: &NumaNodeFig) -> u32 {
        unsafe { rules_numa_tasks(n) }
    }
    fn busy(n: &NumaNodeFig) -> u32 {
        unsafe { rules_numa_busy(n) }
    }
    fn idle(n: &NumaNodeFig, extra: u32) -> i32 {
        unsafe { rules_numa_idle(n, extra) }
    }
    fn overloaded(n: &NumaNodeFig, extra: u32) -> bool {
        unsafe { rules_numa_overloaded(n, extra) }
    }
    fn adjust(mode: u32, imb: i32, b_idle: i32, b_cpus: u32, l_running: u32, l_imb_nr: u32) -> i32 {
        unsafe { rules_numa_adjust(mode, imb, b_idle, b_cpus, l_running, l_imb_nr) }
    }
    fn moves(mode: u32, src: &NumaNodeFig, dst: &NumaNodeFig, extra: u32) -> u32 {
        unsafe { rules_numa_moves(mode, src, dst, extra) }
    }
    /// idle_pull_across: tasks now on the source (`src`: tasks, CPUs) and on the idle CPU's node (`dst`)
    fn idle_pull(mode: u32, src: (u32, u32), dst: (u32, u32), dst_imb_nr: u32) -> u32 {
        unsafe { rules_numa_idle_pull(mode, src.0, src.1, dst.0, dst.1, dst_imb_nr) }
    }
    fn new_stays(mode: u32, parent: &NumaNodeFig, least: &NumaNodeFig) -> bool {
        unsafe { rules_numa_new_stays(mode, parent, least) }
    }
    /// tasks runnable now: on the parent's node without the program, on the least loaded node
    fn new_stays_least_loaded(parent_nr: u32, least_nr: u32) -> bool {
        unsafe { rules_numa_new_stays_least_loaded(parent_nr, least_nr) }
    }
    /// tasks on the program's own CPU, itself included
    fn new_cpu_quiet(cpu_nr: u32) -> bool {
        unsafe { rules_numa_new_cpu_quiet(cpu_nr) }
    }
    /// the claim works on a shared counter (node_placed in BPF), here an atomic
    fn claim(placed: &AtomicU32, seen: u32) -> bool {
        unsafe { rules_numa_claim(placed.as_ptr(), seen) }
    }
    fn may_gather(mode: u32, to: &NumaNodeFig, from: &NumaNodeFig) -> bool {
        unsafe { rules_numa_may_gather(mode, to, from) }
    }
    /// node_overloaded at a wake-up, the waking task using `util` CPUs
    fn push_across(src: &NumaNodeFig, dst: &NumaNodeFig, util: f64) -> bool {
        unsafe { rules_numa_push_across(src, dst, (util * ONE as f64) as u32) }
    }
    fn util_add(u: &mut NumaTaskUtil, now: u64, used: u64) {
        unsafe { rules_numa_util_add(u, now, used) }
    }
    fn util_now(u: &NumaTaskUtil, now: u64) -> u32 {
        unsafe { rules_numa_util_now(u, now) }
    }
    fn load_steps(gap: u64) -> u32 {
        unsafe { rules_numa_load_steps(gap) }
    }
    fn load_decay(old: u32, target: u32, steps: u32) -> u32 {
        unsafe { rules_numa_load_decay(old, target, steps) }
    }

    #[test]
    fn load_decay_one_step_moves_an_eighth_of_the_distance_rounded_up() {
        // the single-step rule the averages always had: ceil(distance / 8) towards the target
        for (old, target) in [(0u32, 1024u32), (1024, 0), (1000, 1003), (5, 0), (1, 0), (700, 700)] {
            let d = old.abs_diff(target);
            let want = if target >= old { old + d.div_ceil(8) } else { old - d.div_ceil(8) };
            assert_eq!(load_decay(old, target, 1), want, "{old} -> {target}");
        }
    }

    #[test]
    fn load_decay_over_several_steps_matches_stepping_them_one_by_one() {
        // one sample after a gap of k steps moves the average as k samples of the same target would
        for (old, target) in [(0u32, 4096u32), (8192, 1024), (3000, 0), (0, 1 << 20)] {
            let mut v = old;
            for k in 1..=LOAD_MAX as u32 {
                v = load_decay(v, target, 1);
                let once = load_decay(old, target, k);
                // each single step rounds up by less than 1; the k-step form rounds (7/8)^k to 16 bits
                let tol = k + (old.abs_diff(target) >> 12);
                assert!(once.abs_diff(v) <= tol, "{old} -> {target}, {k} steps: {once} vs {v}");
            }
        }
        // it reaches the target and never overshoots
        let exact = 4096.0 * 0.875f64.powi(LOAD_MAX as i32);
        assert!((load_decay(4096, 0, LOAD_MAX as u32) as f64 - exact).abs() <= 2.0);
        assert_eq!(load_decay(10, 0, 32), 0);
        assert!(load_decay(0, 4096, 20) <= 4096 && load_decay(4096, 0, 20) < 4096);
    }

    #[test]
    fn load_steps_count_the_gap_in_whole_steps() {
        let step = intf::locality_consts_LOAD_STEP_NS as u64;
        assert_eq!(load_steps(0), 1); // the first sample: one step
        assert_eq!(load_steps(step), 1);
        assert_eq!(load_steps(5 * step), 5); // a 20 ms period
        assert_eq!(load_steps(5 * step + step / 3), 5);
        assert_eq!(load_steps(5 * step + step * 2 / 3), 6);
        assert_eq!(load_steps(1000 * step), LOAD_MAX as u32); // held off for long: capped
    }

    fn may_cross(mode: u32, xnode_at: u64, now: u64, interval_ns: u64) -> bool {
        unsafe { rules_numa_may_cross(mode, xnode_at, now, interval_ns) }
    }
    fn few_partners(waker_flips: i64, wakee_flips: i64, llc_cpus: u32) -> bool {
        unsafe { rules_numa_few_partners(waker_flips, wakee_flips, llc_cpus) }
    }

    #[test]
    fn fig_layout_matches_c() {
        let layout = [
            size_of::<NumaNodeFig>(),
            offset_of!(NumaNodeFig, cpus),
            offset_of!(NumaNodeFig, nr_last),
            offset_of!(NumaNodeFig, load),
            offset_of!(NumaNodeFig, util),
            offset_of!(NumaNodeFig, placed),
            offset_of!(NumaNodeFig, imb_nr),
        ];
        assert_eq!(unsafe { rules_numa_node_fig_layout }, layout);
        let layout = [
            size_of::<NumaTaskUtil>(),
            offset_of!(NumaTaskUtil, at),
            offset_of!(NumaTaskUtil, run),
            offset_of!(NumaTaskUtil, util),
        ];
        assert_eq!(unsafe { rules_numa_task_util_layout }, layout);
    }

    /// a node of `cpus` CPUs: `busy` busy CPUs (utilisation), `tasks`
    /// runnable on average and `nr` at the last sample
    fn node(cpus: u32, busy: f64, tasks: f64, nr: u32, imb_nr: u32) -> NumaNodeFig {
        NumaNodeFig {
            cpus,
            nr_last: nr,
            load: (tasks * ONE as f64) as u32,
            util: (busy * ONE as f64) as u32,
            placed: 0,
            imb_nr,
        }
    }

    #[test]
    fn a_cpu_going_idle_pulls_across_nodes_as_the_kernels_newidle_balance() {
        // numa2 (2 x 4 CPUs, imb_numa_nr 2): a pair alone on one node stays,
        // within the allowance (local running 0 + 1 <= 2, imbalance 2)
        assert_eq!(idle_pull(UPSTREAM, (2, 4), (0, 4), 2), 0);
        // three tasks now against none: past NUMA_IMBALANCE_MIN, one comes
        assert_eq!(idle_pull(UPSTREAM, (3, 4), (0, 4), 2), 1);
        // wakelat at full load: 6 tasks now against 3, the local node past
        // its allowance: one comes; 5 against 4 is balanced after halving
        assert_eq!(idle_pull(UPSTREAM, (6, 4), (3, 4), 2), 1);
        assert_eq!(idle_pull(UPSTREAM, (5, 4), (4, 4), 2), 0);
        // nothing flows towards the busier node
        assert_eq!(idle_pull(UPSTREAM, (2, 4), (4, 4), 2), 0);
        // no allowance: any difference of two moves one
        assert_eq!(idle_pull(OFF, (2, 4), (0, 4), 2), 1);
        // nodes of different sizes compare tasks per CPU: 4 on 2 CPUs against
        // 4 on 8, two come (then 1 and 0.75 per CPU) ...
        assert_eq!(idle_pull(UPSTREAM, (4, 2), (4, 8), 2), 2);
        // ... and 2 on 2 against 8 on 8 is balanced
        assert_eq!(idle_pull(UPSTREAM, (2, 2), (8, 8), 2), 0);
        // no CPUs: nothing
        assert_eq!(idle_pull(UPSTREAM, (3, 0), (0, 4), 2), 0);
    }

    #[test]
    fn gathering_a_process_across_nodes_stays_within_the_allowance() {
        let m = UPSTREAM;
        // Milan's shape, 16 CPUs per node, allowance 4: three threads busy
        // 75% of the time here, the fourth there. Moved, it leaves 2 busy
        // CPUs' difference in idle CPUs: within NUMA_IMBALANCE_MIN, it may come
        let here = node(16, 2.25, 3.0, 3, 4);
        let there = node(16, 0.75, 1.0, 1, 4);
        assert!(may_gather(m, &here, &there));
        // fully busy threads leave a difference of 3: the balance pass would
        // send one back, so it may not come
        assert!(!may_gather(m, &node(16, 3.0, 3.0, 3, 4), &node(16, 1.0, 1.0, 1, 4)));
        // nor into a node that is overloaded with it
        assert!(!may_gather(m, &node(16, 16.0, 16.0, 16, 4), &node(16, 0.0, 0.0, 0, 4)));
        // without a policy (--numa-balance=off) nothing holds it back
        assert!(may_gather(OFF, &node(16, 3.0, 3.0, 3, 4), &node(16, 1.0, 1.0, 1, 4)));
    }

    #[test]
    fn overload_needs_tasks_and_utilisation() {
        // more runnable than CPUs at the sample, but a quarter busy: spare
        assert!(!overloaded(&node(4, 1.0, 3.0, 5, 1), 0));
        // 5 runnable and fully busy: overloaded
        assert!(overloaded(&node(4, 4.0, 5.0, 5, 1), 0));
        // full by the runnable average alone (4 * 1.17 < 5)
        assert!(overloaded(&node(4, 3.0, 5.0, 5, 1), 0));
        // busy but no more runnable than CPUs: not overloaded
        assert!(!overloaded(&node(4, 4.0, 4.0, 4, 1), 0));
        // the waking task counts
        assert!(overloaded(&node(4, 3.5, 4.0, 4, 1), 1));
    }

    #[test]
    fn placed_tasks_count_at_once() {
        // a new task not in the averages yet counts in the load, the busy
        // CPUs and the overload test
        let mut n = node(4, 2.0, 2.6, 4, 1);
        assert_eq!((tasks(&n), busy(&n), idle(&n, 0)), (3, 2, 2));
        assert!(!overloaded(&n, 1));
        n.placed = ONE;
        assert_eq!((tasks(&n), busy(&n), idle(&n, 0)), (4, 3, 1));
        assert!(overloaded(&n, 1));
        // busy CPUs stop at the node's CPUs, idle CPUs at 0
        n.util = 6 * ONE;
        assert_eq!((busy(&n), idle(&n, 2)), (4, 0));
    }

    #[test]
    fn upstream_keeps_a_pair_together() {
        let m = UPSTREAM;
        // pair on node A (8 CPUs, 2 busy), node B idle: 2 idle CPUs apart,
        // B would run 1 <= 1: tolerated
        assert_eq!(
            moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            0
        );
        // three busy: imbalance 3 > NUMA_IMBALANCE_MIN, one moves
        assert_eq!(
            moves(m, &node(8, 3.0, 3.0, 3, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            1
        );
        // destination already running beyond its allowance: no tolerance
        assert_eq!(
            moves(m, &node(8, 4.0, 4.0, 4, 1), &node(8, 2.0, 2.0, 2, 1), 0),
            1
        );
        assert_eq!(adjust(m, 2, 4, 8, 3, 1), 2);
        // larger allowance (16-CPU node)
        assert_eq!(
            moves(m, &node(16, 3.0, 3.0, 3, 2), &node(16, 1.0, 1.0, 1, 2), 0),
            0
        );
        // no imbalance, negative imbalance
        assert_eq!(adjust(m, 0, 8, 8, 1, 1), 0);
        assert_eq!(adjust(m, -3, 8, 8, 4, 1), 0);
    }

    /// A waking task adds its own utilisation to its node, not a whole CPU.
    #[test]
    fn waking_task_adds_its_own_utilisation() {
        // numaq4's 2-CPU nodes, both CPUs busy most of the time and a third
        // task waking: overloaded if it brings most of a CPU's work, not
        // if it brings a tenth
        let (two, idle) = (node(2, 1.6, 2.0, 2, 1), node(2, 0.0, 0.0, 0, 1));
        assert!(push_across(&two, &idle, 0.9));
        assert!(!push_across(&two, &idle, 0.1));
        // more runnable tasks than CPUs is needed whatever the utilisation
        assert!(!push_across(&node(2, 1.9, 1.0, 1, 1), &idle, 1.0));
    }

    /// The average: the share run, halving every window; decays through sleep.
    #[test]
    fn task_utilisation_is_the_share_run() {
        let (ms, w) = (1_000_000u64, intf::locality_consts_NUMA_UTIL_WINDOW_NS as u64);
        let mut u = NumaTaskUtil::default();
        // running a quarter of the time for many windows: a quarter
        let mut now = 1_000 * ms;
        for _ in 0..40 {
            now += w / 4;
            util_add(&mut u, now, w / 4);
            now += 3 * w / 4;
            util_add(&mut u, now, 0);
        }
        let q = util_now(&u, now);
        assert!(q.abs_diff(ONE / 4) <= ONE / 64, "{q}");
        // always running: one CPU within a few windows
        for _ in 0..8 {
            now += w;
            util_add(&mut u, now, w);
        }
        assert!(util_now(&u, now) >= ONE * 95 / 100 && util_now(&u, now) <= ONE);
        // a sleep of three windows: an eighth of it
        let full = util_now(&u, now);
        assert_eq!(util_now(&u, now + 3 * w), full >> 3);
        // a run shorter than a window is kept for the next fold
        let mut v = NumaTaskUtil::default();
        util_add(&mut v, 10 * ms, ms);
        assert_eq!((v.util, v.run), (0, ms));
        // the first run counts from its own start
        assert_eq!(v.at, 9 * ms);
    }

    #[test]
    fn light_communicating_load_is_not_spread() {
        // numa2, wakelat at half load: 6 threads, often 5 runnable at a
        // sample, one CPU's worth busy: the idle nodes differ by one CPU
        let m = UPSTREAM;
        let (a, b) = (node(4, 1.2, 3.5, 5, 1), node(4, 0.0, 0.0, 0, 1));
        assert!(!overloaded(&a, 1));
        assert_eq!(moves(m, &a, &b, 1), 0);
        assert!(!push_across(&a, &b, 1.0));
        // really overloaded: the waking task may go, unless task_may_cross holds it
        let full = node(4, 4.0, 6.0, 6, 1);
        assert!(push_across(&full, &b, 0.1));
        let ms = 1_000_000;
        assert!(!may_cross(m, 10_000 * ms, 10_001 * ms, 150 * ms));
        // ... and not into a node that is overloaded too
        assert!(!push_across(&full, &full, 1.0));
        // an overloaded source is balanced by tasks, without the allowance
        assert_eq!(moves(m, &full, &b, 0), 3);
    }

    #[test]
    fn one_node_change_per_interval() {
        let (ms, now) = (1_000_000, 10_000_000_000);
        for m in [UPSTREAM, IDLE_CPUS] {
            // never changed node
            assert!(may_cross(m, 0, now, 150 * ms));
            assert!(!may_cross(m, now - 149 * ms, now, 150 * ms));
            assert!(may_cross(m, now - 150 * ms, now, 150 * ms));
            // a clock behind the mark counts as no time passed
            assert!(!may_cross(m, now + ms, now, 150 * ms));
        }
        assert!(may_cross(OFF, now - ms, now, 150 * ms));
    }

    #[test]
    fn idle_cpus_rule_as_posted() {
        let m = IDLE_CPUS;
        // 48-CPU node (the thread's Haswell): adj = max(2, 48*25/100 >> 1) = 6,
        // max = 24 + 6 = 30 idle CPUs
        assert_eq!(adjust(m, 6, 30, 48, 1, 1), 0);
        assert_eq!(adjust(m, 7, 30, 48, 1, 1), 7);
        assert_eq!(adjust(m, 6, 29, 48, 1, 1), 6);
        // 8-CPU node: adj = max(2, 8*25/100 >> 1 = 1) = 2, max = 6
        assert_eq!(adjust(m, 2, 6, 8, 1, 1), 0);
        assert_eq!(adjust(m, 2, 5, 8, 1, 1), 2);
        // a pair on an 8-CPU node stays; four busy move one
        assert_eq!(
            moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            0
        );
        assert_eq!(
            moves(m, &node(8, 4.0, 4.0, 4, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            2
        );
        // differs from upstream: a destination running 2 already
        assert_eq!(adjust(UPSTREAM, 2, 6, 8, 2, 1), 2);
        assert_eq!(adjust(m, 2, 6, 8, 2, 1), 0);
    }

    #[test]
    fn off_moves_every_imbalance() {
        assert_eq!(adjust(OFF, 2, 6, 8, 1, 1), 2);
        assert_eq!(
            moves(OFF, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            1
        );
        assert!(new_stays(
            OFF,
            &node(8, 7.0, 7.0, 7, 1),
            &node(8, 0.0, 0.0, 0, 1)
        ));
    }

    #[test]
    fn no_allowance_evens_out_what_upstream_allows() {
        // a pair on an 8-CPU node against an idle node: upstream keeps it, no-allowance moves one
        let pair = node(8, 2.0, 2.0, 2, 1);
        let idle = node(8, 0.0, 0.0, 0, 1);
        assert_eq!(moves(UPSTREAM, &pair, &idle, 0), 0);
        assert_eq!(moves(NO_ALLOWANCE, &pair, &idle, 0), 1);
        assert_eq!(adjust(NO_ALLOWANCE, 2, 6, 8, 1, 1), 2);
        // a new process beside one busy task, allowance 2: upstream keeps it by its parent
        let one = node(16, 1.0, 1.0, 1, 2);
        let none = node(16, 0.0, 0.0, 0, 2);
        assert!(new_stays(UPSTREAM, &one, &none));
        assert!(!new_stays(NO_ALLOWANCE, &one, &none));
        // still a policy, unlike off: balanced nodes keep their tasks, and a task that just
        // changed node waits an interval before it changes again
        assert!(new_stays(NO_ALLOWANCE, &node(8, 3.0, 3.0, 3, 1), &node(8, 3.0, 3.0, 3, 1)));
        assert!(!may_cross(NO_ALLOWANCE, 1_000, 2_000, 150_000_000));
        assert!(may_cross(OFF, 1_000, 2_000, 150_000_000));
    }

    #[test]
    fn new_process_placement() {
        let m = UPSTREAM;
        let idle = node(8, 0.0, 0.0, 0, 1);
        // first process: parent's node idle -> stays
        assert!(new_stays(m, &idle, &idle));
        // parent's node runs 1, other 0: it would run 2 > imb_numa_nr 1 -> goes
        assert!(!new_stays(m, &node(8, 1.0, 1.0, 1, 1), &idle));
        // with allowance 2 it stays
        assert!(new_stays(
            m,
            &node(16, 1.0, 1.0, 1, 2),
            &node(16, 0.0, 0.0, 0, 2)
        ));
        // balanced nodes: stays
        assert!(new_stays(
            m,
            &node(8, 3.0, 3.0, 3, 1),
            &node(8, 3.0, 3.0, 3, 1)
        ));
        // overloaded parent's node: goes
        assert!(!new_stays(
            m,
            &node(8, 8.0, 9.0, 9, 1),
            &node(8, 7.0, 7.0, 7, 1)
        ));
        // idle-cpus: 2 ahead on an 8-CPU node with 6 idle stays, 3 ahead goes
        assert!(new_stays(IDLE_CPUS, &node(8, 2.0, 2.0, 2, 1), &idle));
        assert!(!new_stays(IDLE_CPUS, &node(8, 3.0, 3.0, 3, 1), &idle));
    }

    #[test]
    fn new_program_on_the_least_loaded_node() {
        // first program, all idle: stays by its parent
        assert!(new_stays_least_loaded(0, 0));
        // another task runs by the parent: goes where none runs (the allowance
        // would keep a pair here: see new_process_placement)
        assert!(!new_stays_least_loaded(1, 0));
        assert!(new_stays(UPSTREAM, &node(16, 1.0, 1.0, 1, 2), &node(16, 0.0, 0.0, 0, 2)));
        // every node runs one: stays (moving would only swap the nodes)
        assert!(new_stays_least_loaded(1, 1));
        // two others by the parent against one: goes (2 and 2, not 3 and 1)
        assert!(!new_stays_least_loaded(2, 1));
        // one other against one: stays (1 and 2 either way)
        assert!(new_stays_least_loaded(1, 1));
    }

    #[test]
    fn new_program_stays_on_a_quiet_cpu() {
        // alone on its CPU, or with one other task (its waiting parent): stays
        assert!(new_cpu_quiet(1));
        assert!(new_cpu_quiet(2));
        // a third task on the CPU: looks for the least loaded node
        assert!(!new_cpu_quiet(3));
        assert!(!new_cpu_quiet(8));
    }

    #[test]
    fn claim_holds_only_on_the_figure_read() {
        let placed = AtomicU32::new(0);
        assert!(claim(&placed, 0));
        assert_eq!(placed.load(SeqCst), ONE);
        // another program was counted since the figure was read: refused, unchanged
        assert!(!claim(&placed, 0));
        assert_eq!(placed.load(SeqCst), ONE);
        assert!(claim(&placed, ONE));
        assert_eq!(placed.load(SeqCst), 2 * ONE);
    }

    /// numa_rule_least(): the node not in `skip` with the fewest `nr` (then
    /// the lower `load`, then the lower id) and its count; None if none.
    fn least(nr: &[u32], load: &[u32], skip: u64) -> Option<(usize, u32)> {
        assert_eq!(nr.len(), load.len());
        let mut least_nr = 0;
        let d = unsafe { rules_numa_least(nr.as_ptr(), load.as_ptr(), nr.len() as u32, skip, &mut least_nr) };
        usize::try_from(d).ok().map(|d| (d, least_nr))
    }

    /// numa_rule_new_least_loaded(): where a program on node `src` goes
    /// (`src`: it stays), None when every node was tried.
    fn new_least_loaded(nr: &[u32], load: &[u32], tried: u64, src: usize, parent_nr: u32) -> Option<usize> {
        assert_eq!(nr.len(), load.len());
        let d = unsafe {
            rules_numa_new_least_loaded(nr.as_ptr(), load.as_ptr(), nr.len() as u32, tried, src as u32, parent_nr)
        };
        usize::try_from(d).ok()
    }

    /// A program on node `src` chooses (numa_place_new(), least-loaded) on
    /// nodes whose only tasks are the programs counted there: each shows in
    /// BPF's count of tasks now at once, as the idle CPU it took, so the
    /// figures the rule gets are the placed counts. Returns the node and the
    /// placed figure read there, for its claim.
    fn choose(placed: &[AtomicU32], src: usize) -> (usize, u32) {
        let seen: Vec<u32> = placed.iter().map(|p| p.load(SeqCst)).collect();
        let nr: Vec<u32> = seen.iter().map(|&p| p / ONE).collect();
        let d = new_least_loaded(&nr, &seen, 1 << src, src, nr[src]).expect("another node");
        (d, seen[d])
    }

    #[test]
    fn least_loaded_node_by_tasks_then_load_then_id() {
        // fewest tasks now
        assert_eq!(least(&[3, 1, 2, 1], &[0, 9, 0, 5], 0), Some((3, 1)));
        // on a tie in load too, the lower id
        assert_eq!(least(&[3, 1, 2, 1], &[0, 5, 0, 5], 0), Some((1, 1)));
        // skipped nodes are not looked at
        assert_eq!(least(&[3, 1, 2, 1], &[0, 5, 0, 5], 0b1010), Some((2, 2)));
        // every node skipped: none
        assert_eq!(least(&[3, 1], &[0, 0], 0b11), None);
        assert_eq!(least(&[], &[], 0), None);
        // no counts (allowance, the cross-node candidates): by the decayed load
        assert_eq!(least(&[0; 4], &[4 * ONE, ONE, ONE / 2, 3 * ONE], 1), Some((2, 0)));
    }

    #[test]
    fn a_new_program_goes_to_the_least_loaded_node_or_stays() {
        // one task by the parent, none elsewhere: to the first idle node
        assert_eq!(new_least_loaded(&[1, 0, 0, 0], &[0; 4], 1, 0, 1), Some(1));
        // every node runs as many: stays
        assert_eq!(new_least_loaded(&[1, 1, 1, 1], &[0; 4], 1, 0, 1), Some(0));
        // node 1 tried already (claimed, no idle CPU there): the next one
        assert_eq!(new_least_loaded(&[2, 0, 1, 1], &[0; 4], 0b11, 0, 2), Some(2));
        // the parent's count is the one BPF read, not nr[src]
        assert_eq!(new_least_loaded(&[0, 1, 1, 1], &[0; 4], 1, 0, 2), Some(1));
        // every other node tried: none
        assert_eq!(new_least_loaded(&[2, 0], &[0; 2], 0b11, 0, 2), None);
    }

    #[test]
    fn programs_choosing_at_once_end_one_per_node() {
        // Four programs exec'd on node 0 choose at the same instant: all read
        // the same idle figures, so all choose node 0. The claim lets one of
        // them count there; each other one fails, chooses again and goes on.
        let placed: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        let mut choices: Vec<(usize, u32)> = (0..4).map(|_| choose(&placed, 0)).collect();
        assert!(choices.iter().all(|&(d, _)| d == 0));
        for c in choices.iter_mut() {
            while !claim(&placed[c.0], c.1) {
                *c = choose(&placed, 0);
            }
        }
        let mut nodes: Vec<usize> = choices.iter().map(|c| c.0).collect();
        nodes.sort();
        assert_eq!(nodes, [0, 1, 2, 3]);
        assert!(placed.iter().all(|p| p.load(SeqCst) == ONE));
    }

    #[test]
    fn programs_on_threads_end_one_per_node() {
        // the same with real concurrency: 8 programs, 8 threads, 4 nodes
        for _ in 0..50 {
            let placed: Arc<Vec<AtomicU32>> = Arc::new((0..4).map(|_| AtomicU32::new(0)).collect());
            let start = Arc::new(Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|i| {
                    let (placed, start) = (placed.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        loop {
                            let (d, seen) = choose(&placed, i % 2);
                            if claim(&placed[d], seen) {
                                return;
                            }
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            let counts: Vec<u32> = placed.iter().map(|p| p.load(SeqCst) / ONE).collect();
            assert_eq!(counts, [2, 2, 2, 2]);
        }
    }

    fn exec_done(moved: bool, recheck: bool, since_first_ns: u64, interval_ns: u64) -> bool {
        unsafe { rules_numa_exec_done(moved, recheck, since_first_ns, interval_ns) }
    }

    #[test]
    fn exec_placement_is_checked_again_for_one_interval() {
        const MS: u64 = 1_000_000;
        let interval = 100 * MS;
        // least-loaded, stayed at its first check (0 ns after it): checked again
        assert!(!exec_done(false, true, 0, interval));
        // ... at every slice end inside the interval
        assert!(!exec_done(false, true, 5 * MS, interval));
        assert!(!exec_done(false, true, interval - 1, interval));
        // ... and no more once the interval has passed
        assert!(exec_done(false, true, interval, interval));
        assert!(exec_done(false, true, 10 * interval, interval));
        // a program that moved is placed: once only
        assert!(exec_done(true, true, 0, interval));
        assert!(exec_done(true, true, 5 * MS, interval));
        // allowance (today's kernel rule) decides at the first check only
        assert!(exec_done(false, false, 0, interval));
    }

    fn mark_for(pid: i32, marked_pid: i32, age_ns: u64, interval_ns: u64) -> u32 {
        unsafe { rules_numa_mark_for(pid, marked_pid, age_ns, interval_ns) }
    }

    #[test]
    fn an_active_mark_moves_only_the_task_it_was_set_for() {
        let [other, mine, expired] = unsafe { rules_numa_mark_verdicts };
        let interval = 100_000_000;
        // the task that ran on the CPU when the pass marked it
        assert_eq!(mark_for(41, 41, 0, interval), mine);
        assert_eq!(mark_for(41, 41, interval, interval), mine);
        // a task that ran there after it (the marked one stopped on its own,
        // or was stolen, before the kick's preemption): not its move
        assert_eq!(mark_for(42, 41, 1_000, interval), other);
        // a mark older than one balance interval is stale for everyone
        assert_eq!(mark_for(41, 41, interval + 1, interval), expired);
        assert_eq!(mark_for(42, 41, interval + 1, interval), expired);
    }

    #[test]
    fn only_few_partners_follow() {
        // a pair: each always wakes the other
        assert!(few_partners(0, 0, 4));
        assert!(few_partners(3, 1, 4));
        // a hackbench sender switches receiver at every write
        assert!(!few_partners(1500, 2, 4));
        assert!(!few_partners(2, 4, 4));
        // a task with no context (-1) has few partners, whatever the LLC
        assert!(few_partners(-1, 3, 4));
        assert!(few_partners(-1, -1, 0));
        assert!(!few_partners(0, 0, 0));
    }
}

/// Cache-aware scheduling (cache_rules.h).
mod cache {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// `struct cache_scan`: the epoch re-evaluation's scan of the LLCs.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    struct CacheScan {
        best_occ: u64,
        total: u64,
        least: u64,
        best: i32,
        idle_best: i32,
    }

    extern "C" {
        static rules_cache_scan_layout: [usize; 6];
        /// CACHE_PREF_KEEP, CACHE_PREF_DROP_FIT
        static rules_cache_pref_verdicts: [u32; 2];
        /// CACHE_MIG_ALLOW, CACHE_MIG_IGNORE, CACHE_MIG_FORBID
        static rules_cache_mig_hints: [u32; 3];
        fn rules_cache_overloaded(load: u32, util: u32, cpus: u32) -> bool;
        #[allow(clippy::too_many_arguments)]
        fn rules_cache_migrate_hint(
            src_util: u64,
            src_cap: u64,
            dst_util: u64,
            dst_cap: u64,
            task_util: u64,
            to_pref: bool,
            aggr_cap_pct: u32,
            imb_pct: u32,
        ) -> u32;
        #[allow(clippy::too_many_arguments)]
        fn rules_cache_migrate_hint_overload(
            src_util: u64,
            dst_util: u64,
            dst_cap: u64,
            pref_overloaded: bool,
            to_pref: bool,
            aggr_cap_pct: u32,
            imb_pct: u32,
        ) -> u32;
        fn rules_cache_thread_util(total: u64, epoch_ns: u64, nr_threads: u32) -> u64;
        fn rules_cache_cores(cpus: u32, smt: u32) -> u32;
        fn rules_cache_decay(occ: u64, epochs: u64) -> u64;
        static rules_cache_epoch_llcs_layout: [usize; 5];
        #[allow(clippy::too_many_arguments)]
        fn rules_cache_epoch(
            l: *const CacheEpochLlcs,
            n: u32,
            home: i32,
            cur: i32,
            cur_occ: u64,
            wait: u64,
            switch_ratio: u32,
            epoch_ns: u64,
            aggr_tol: u32,
            s: *mut CacheScan,
            verdict: *mut u32,
        ) -> i32;
    }

    const MAX_LLCS: usize = intf::locality_consts_CACHE_MAX_LLCS as usize;

    /// `struct cache_epoch_llcs`: what the epoch re-evaluation reads of each LLC.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    struct CacheEpochLlcs {
        occ: [u64; MAX_LLCS],
        load: [u32; MAX_LLCS],
        node: [i32; MAX_LLCS],
        cores: [u32; MAX_LLCS],
    }

    fn overloaded(load: u32, util: u32, cpus: u32) -> bool {
        unsafe { rules_cache_overloaded(load, util, cpus) }
    }

    /// What the gates answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Hint {
        Allow,
        Ignore,
        Forbid,
    }

    fn to_hint(h: u32) -> Hint {
        let [allow, ignore, forbid] = unsafe { rules_cache_mig_hints };
        match h {
            v if v == allow => Hint::Allow,
            v if v == ignore => Hint::Ignore,
            v if v == forbid => Hint::Forbid,
            v => panic!("hint {v}"),
        }
    }

    fn busy(b: f64) -> u64 {
        (b * ONE as f64) as u64
    }

    /// The gate (--cache-gates=utilisation) for a move between two LLCs of
    /// 4 CPUs, utilisation in busy CPUs, the series' defaults (50% fit,
    /// 20% imbalance).
    fn hint(src_busy: f64, dst_busy: f64, task_busy: f64, to_pref: bool) -> Hint {
        let cap = 4 * ONE as u64;
        to_hint(unsafe {
            rules_cache_migrate_hint(busy(src_busy), cap, busy(dst_busy), cap, busy(task_busy), to_pref, 50, 20)
        })
    }

    /// The same under --cache-gates=overload.
    fn hint_overload(src_busy: f64, dst_busy: f64, pref_overloaded: bool, to_pref: bool) -> Hint {
        let cap = 4 * ONE as u64;
        to_hint(unsafe {
            rules_cache_migrate_hint_overload(
                busy(src_busy),
                busy(dst_busy),
                cap,
                pref_overloaded,
                to_pref,
                50,
                20,
            )
        })
    }
    fn cores(cpus: u32, smt: u32) -> u32 {
        unsafe { rules_cache_cores(cpus, smt) }
    }
    fn decay(occ: u64, epochs: u64) -> u64 {
        unsafe { rules_cache_decay(occ, epochs) }
    }

    /// A process's occupancy of one LLC as cache_new_epoch() sees it, just
    /// after the decay, when `threads` threads have run there all the time
    /// for many epochs: the real decay rule applied to the real sequence
    /// (an epoch of runtime added, then the halving at the next epoch).
    fn steady(threads: f64) -> u64 {
        let per_epoch = (threads * EP as f64) as u64;
        (0..64).fold(0, |occ, _| decay(occ + per_epoch, 1))
    }

    #[test]
    fn scan_layout_matches_c() {
        let layout = [
            size_of::<CacheScan>(),
            offset_of!(CacheScan, best_occ),
            offset_of!(CacheScan, total),
            offset_of!(CacheScan, least),
            offset_of!(CacheScan, best),
            offset_of!(CacheScan, idle_best),
        ];
        assert_eq!(unsafe { rules_cache_scan_layout }, layout);
        let layout = [
            size_of::<CacheEpochLlcs>(),
            offset_of!(CacheEpochLlcs, occ),
            offset_of!(CacheEpochLlcs, load),
            offset_of!(CacheEpochLlcs, node),
            offset_of!(CacheEpochLlcs, cores),
        ];
        assert_eq!(unsafe { rules_cache_epoch_llcs_layout }, layout);
    }

    const EP: u64 = 10_000_000;

    /// Why a process has no preferred LLC after an epoch.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Pref {
        Llc(usize),
        None,
        /// more running threads than the LLC's cores (x tolerance)
        DropFit,
    }

    /// What cache_new_epoch() knows of each LLC.
    struct Llcs<'a> {
        /// cores of each LLC (cache_rule_cores())
        cores: &'a [u32],
        /// node of each LLC
        node: &'a [usize],
        /// llc_load (fixed point), for the homed process with no runtime at home
        load: &'a [u32],
    }

    /// cache_rule_epoch(), as cache_new_epoch() (cache.bpf.c) calls it after
    /// the decay: `occ` the decayed occupancy of each LLC, `cur` the current
    /// preference (its occupancy is the decayed one), `home` the process's
    /// home node, `wait` the decayed time its threads waited to run.
    #[allow(clippy::too_many_arguments)]
    fn choose_waited(
        occ: &[u64],
        cur: Option<usize>,
        home: Option<usize>,
        switch_ratio: u32,
        aggr_tol: u32,
        epoch_ns: u64,
        llcs: &Llcs,
        wait: u64,
    ) -> Pref {
        let mut l = CacheEpochLlcs {
            occ: [0; MAX_LLCS],
            load: [0; MAX_LLCS],
            node: [0; MAX_LLCS],
            cores: [0; MAX_LLCS],
        };
        for (i, &v) in occ.iter().enumerate() {
            l.occ[i] = v;
            l.load[i] = llcs.load[i];
            l.node[i] = llcs.node[i] as i32;
            l.cores[i] = llcs.cores[i];
        }
        let (mut s, mut verdict) = (CacheScan::default(), u32::MAX);
        let best = unsafe {
            rules_cache_epoch(
                &l,
                occ.len() as u32,
                home.map_or(-1, |h| h as i32),
                cur.map_or(-1, |c| c as i32),
                cur.map_or(0, |c| occ[c]),
                wait,
                switch_ratio,
                epoch_ns,
                aggr_tol,
                &mut s,
                &mut verdict,
            )
        };
        let Ok(best) = usize::try_from(best) else {
            return Pref::None;
        };
        assert_eq!(s.total, occ.iter().sum::<u64>());
        let [keep, fit] = unsafe { rules_cache_pref_verdicts };
        match verdict {
            v if v == keep => Pref::Llc(best),
            v if v == fit => Pref::DropFit,
            v => panic!("verdict {v}"),
        }
    }

    /// The same for threads that never waited to run.
    fn choose(
        occ: &[u64],
        cur: Option<usize>,
        home: Option<usize>,
        switch_ratio: u32,
        aggr_tol: u32,
        epoch_ns: u64,
        llcs: &Llcs,
    ) -> Pref {
        choose_waited(occ, cur, home, switch_ratio, aggr_tol, epoch_ns, llcs, 0)
    }

    const NODE0: [usize; 2] = [0, 0];
    const LOAD0: [u32; 2] = [0, 0];

    fn llcs(cores: &[u32]) -> Llcs<'_> {
        Llcs {
            cores,
            node: &NODE0,
            load: &LOAD0,
        }
    }

    #[test]
    fn hysteresis_needs_twice() {
        let l = llcs(&[4, 4]);
        // LLC 1 leads, but not by more than 2x: keep 0
        let occ = [1_000_000, 2_000_000];
        assert_eq!(choose(&occ, Some(0), None, 2, 1, EP, &l), Pref::Llc(0));
        // more than twice: switch
        let occ = [1_000_000, 2_000_001];
        assert_eq!(choose(&occ, Some(0), None, 2, 1, EP, &l), Pref::Llc(1));
        // no current preference: the largest wins outright
        let occ = [1_000_000, 1_000_001];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(1));
        // nothing recorded
        assert_eq!(choose(&[0, 0], None, None, 2, 1, EP, &l), Pref::None);
        // ratio 1: any lead switches
        let occ = [1_000_000, 1_000_001];
        assert_eq!(choose(&occ, Some(0), None, 1, 1, EP, &l), Pref::Llc(1));
    }

    #[test]
    fn steady_occupancy_is_one_epoch_of_runtime() {
        // what the verdict sees right after the decay: r threads' runtime of
        // one epoch (the halving sum's steady state is 2x that just before)
        assert!(steady(3.0).abs_diff(3 * EP) <= 1);
        assert!(decay(steady(3.0) + 3 * EP, 0).abs_diff(6 * EP) <= 1);
    }

    #[test]
    fn fit_counts_cores_not_smt_siblings() {
        // epyc-l3numa's LLC: 4 CPUs, 2 cores of 2 SMT siblings. hackbench -T
        // with 2 pairs keeps about 2.2 threads running: more than 2 cores,
        // so no preference; 1 pair (about 1.1) fits.
        assert_eq!(cores(4, 2), 2);
        let l = llcs(&[2, 2]);
        assert_eq!(choose(&[steady(2.2), 0], None, None, 2, 1, EP, &l), Pref::DropFit);
        assert_eq!(choose(&[steady(1.1), 0], None, None, 2, 1, EP, &l), Pref::Llc(0));
        // the same load on 4 cores without SMT (spr-1n2llc) fits
        assert_eq!(cores(4, 1), 4);
        let l = llcs(&[4, 4]);
        assert_eq!(choose(&[steady(2.2), 0], None, None, 2, 1, EP, &l), Pref::Llc(0));
        // at least one core
        assert_eq!(cores(1, 2), 1);
    }

    #[test]
    fn backs_off_when_it_does_not_fit() {
        let l = llcs(&[4, 4]);
        // 3.9 threads busy on 4 cores: fits
        assert_eq!(choose(&[steady(3.9), 0], None, None, 2, 1, EP, &l), Pref::Llc(0));
        // 4.4 threads busy > 4 cores: does not fit, wherever they ran
        assert_eq!(choose(&[steady(4.4), 0], None, None, 2, 1, EP, &l), Pref::DropFit);
        assert_eq!(
            choose(&[steady(2.5), steady(2.0)], None, None, 2, 1, EP, &l),
            Pref::DropFit
        );
        // runnable, not only running: a process kept in a 4-core LLC never
        // runs more than 4 threads there, however many wait; cache_new_epoch()
        // adds the threads' decayed waiting time to the occupancy
        let occ = [steady(3.9), 0];
        assert_eq!(choose_waited(&occ, None, None, 2, 1, EP, &l, 0), Pref::Llc(0));
        assert_eq!(choose_waited(&occ, None, None, 2, 1, EP, &l, steady(1.5)), Pref::DropFit);
        assert_eq!(choose_waited(&[steady(2.0), 0], None, None, 2, 1, EP, &l, steady(1.5)), Pref::Llc(0));
        // the waits count against the LLC picked, also when kept by hysteresis
        let occ = [steady(2.0), steady(3.0)];
        assert_eq!(choose_waited(&occ, Some(0), None, 2, 1, EP, &l, steady(1.5)), Pref::DropFit);
        assert_eq!(choose_waited(&occ, Some(0), None, 2, 100, EP, &l, steady(1.5)), Pref::Llc(0));
        // tolerance 2 doubles the limit; 100 removes it
        assert_eq!(choose(&[steady(4.4), 0], None, None, 2, 2, EP, &l), Pref::Llc(0));
        assert_eq!(choose(&[steady(100.0), 0], None, None, 2, 100, EP, &l), Pref::Llc(0));
    }

    #[test]
    fn home_node_bounds_the_choice() {
        // 4 LLCs, two per node; LLC 3 (node 1) is the busiest
        let node = [0, 0, 1, 1];
        let load = [0, 0, 3 * ONE, ONE];
        let l = Llcs {
            cores: &[4; 4],
            node: &node,
            load: &load,
        };
        let occ = [EP / 4, EP / 2, 0, 2 * EP];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(3));
        // home node 0: the best LLC inside it, however much ran elsewhere
        assert_eq!(choose(&occ, None, Some(0), 2, 1, EP, &l), Pref::Llc(1));
        // a preference outside the home is left without hysteresis
        assert_eq!(choose(&occ, Some(3), Some(0), 2, 1, EP, &l), Pref::Llc(1));
        // inside the home, hysteresis as usual: LLC 1 is not twice LLC 0
        let occ = [EP / 2, EP, 0, 0];
        assert_eq!(choose(&occ, Some(0), Some(0), 2, 1, EP, &l), Pref::Llc(0));
        // homed on node 1 with no runtime there yet: its least loaded LLC
        let occ = [2 * EP, 0, 0, 0];
        assert_eq!(choose(&occ, None, Some(1), 2, 1, EP, &l), Pref::Llc(3));
        // the fit limit still counts the runtime of every LLC
        let occ = [5 * EP, 0, 0, 0];
        assert_eq!(choose(&occ, None, Some(1), 2, 1, EP, &l), Pref::DropFit);
    }

    #[test]
    fn decay_halves_per_epoch() {
        let occ = [1024, 3, u64::MAX].map(|v| decay(v, 1));
        assert_eq!(occ, [512, 1, u64::MAX >> 1]);
        assert_eq!(occ.map(|v| decay(v, 64)), [0, 0, 0]);
    }

    #[test]
    fn overloaded_as_the_kernel() {
        let one = ONE;
        // runnable tasks up to the CPUs: never overloaded
        assert!(!overloaded(4 * one, 4 * one, 4));
        // more tasks than CPUs and util above 100/117 (85.5%) of 4 CPUs
        assert!(overloaded(4 * one + 1, 4 * one, 4));
        assert!(overloaded(5 * one, 35 * one / 10, 4)); // 87.5%
        // a burst queued on a half-idle LLC is not overload
        assert!(!overloaded(6 * one, 2 * one, 4));
        assert!(!overloaded(5 * one, 34 * one / 10, 4)); // 85%
    }

    #[test]
    fn gate_into_the_preferred_llc() {
        // LLCs of 4 CPUs, "fits" below 2 busy CPUs (50%)
        // destination with room after the move: allowed whatever the source
        assert_eq!(hint(0.0, 1.0, 0.5, true), Hint::Allow);
        // destination past 50% with the task, but not 20% busier than the
        // source without it: allowed (2.4 vs 2.0)
        assert_eq!(hint(2.5, 1.9, 0.5, true), Hint::Allow);
        // past 50% and more than 20% busier: refused (2.4 vs 1.9)
        assert_eq!(hint(2.4, 1.9, 0.5, true), Hint::Forbid);
        assert_eq!(hint(0.0, 1.6, 0.5, true), Hint::Forbid);
        // both past 50%: aggregation stands aside
        assert_eq!(hint(2.0, 2.0, 0.5, true), Hint::Ignore);
    }

    #[test]
    fn gate_out_of_the_preferred_llc() {
        // the preferred LLC still has room once the task is gone: stay
        assert_eq!(hint(2.4, 0.0, 0.5, false), Hint::Forbid);
        // past 50% without the task and more than 20% busier than the
        // destination with it: may leave (2.5 vs 1.5)
        assert_eq!(hint(3.0, 1.0, 0.5, false), Hint::Allow);
        // past 50%, but the destination would be within 20%: a move back
        // would follow, so stay (2.5 vs 2.1)
        assert_eq!(hint(3.0, 1.6, 0.5, false), Hint::Forbid);
        // both past 50%: ordinary balancing decides
        assert_eq!(hint(3.0, 2.0, 0.5, false), Hint::Ignore);
    }

    #[test]
    fn gates_of_the_overload_mode() {
        // into: refused only past 50% and more than 20% busier than the source
        assert_eq!(hint_overload(0.0, 1.9, false, true), Hint::Allow);
        assert_eq!(hint_overload(2.5, 2.9, false, true), Hint::Allow);
        assert_eq!(hint_overload(2.0, 2.5, false, true), Hint::Forbid);
        // both busy: no standing aside, the same rule
        assert_eq!(hint_overload(3.0, 3.9, false, true), Hint::Forbid);
        // out: only while the preferred LLC is overloaded, however busy
        assert_eq!(hint_overload(3.9, 0.0, false, false), Hint::Forbid);
        assert_eq!(hint_overload(3.9, 0.0, true, false), Hint::Allow);
    }

    #[test]
    fn thread_util_is_the_process_average() {
        let t = |total, threads| unsafe { rules_cache_thread_util(total, EP, threads) };
        // 2 busy CPUs' worth over 4 threads: half a CPU each
        assert!(t(steady(2.0), 4).abs_diff(ONE as u64 / 2) <= 1);
        assert_eq!(t(steady(2.0), 0), 0);
        assert_eq!(unsafe { rules_cache_thread_util(EP, 0, 4) }, 0);
    }
}

/// The wake-up search (push_rules.h).
mod push {
    extern "C" {
        fn rules_push_wake_wide(waker_flips: u32, wakee_flips: u32, llc_cpus: u32) -> bool;
    }

    fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_cpus: u32) -> bool {
        unsafe { rules_push_wake_wide(waker_flips, wakee_flips, llc_cpus) }
    }

    #[test]
    fn wake_wide_needs_one_task_feeding_many() {
        // a pair, or a task with no context (0 flips): not wide
        assert!(!wake_wide(0, 0, 4));
        assert!(!wake_wide(1, 1, 4));
        // hackbench: every sender writes to every receiver, all flip a lot
        assert!(!wake_wide(1500, 1500, 4));
        // a dispatcher feeding a pool: wide once the pool's tasks flip too
        assert!(!wake_wide(100, 3, 4));
        assert!(wake_wide(100, 4, 4));
        assert!(wake_wide(16, 4, 4));
        assert!(!wake_wide(15, 4, 4));
        // either side may be the busier flipper
        assert!(wake_wide(4, 100, 4));
    }
}

/// Home nodes (home_rules.h).
mod home {
    use crate::bpf_intf as intf;

    extern "C" {
        fn rules_home_node(n: i32, nr_nodes: u32) -> i32;
        fn rules_home_pass_dest(run_home: i32, run_gen: u64, gen: u64, node: u32) -> i32;
    }

    fn home_node(n: i32, nr_nodes: u32) -> i32 {
        unsafe { rules_home_node(n, nr_nodes) }
    }
    fn pass_dest(run_home: i32, run_gen: u64, gen: u64, node: u32) -> i32 {
        unsafe { rules_home_pass_dest(run_home, run_gen, gen, node) }
    }

    #[test]
    fn every_node_of_the_machine_can_be_a_home() {
        let max = intf::locality_consts_MAX_NODES;
        // big64 has 8 nodes: the last one is a home like the first
        assert_eq!(home_node(0, 8), 0);
        assert_eq!(home_node(7, 8), 7);
        // and on machines with more nodes, all of them
        assert_eq!(home_node(8, 16), 8);
        assert_eq!(home_node(15, 16), 15);
        assert_eq!(home_node(max as i32 - 1, max), max as i32 - 1);
        // a node the machine does not have, or none (-1), is no home
        assert_eq!(home_node(8, 8), -1);
        assert_eq!(home_node(-1, 8), -1);
        assert_eq!(home_node(max as i32, max + 1), -1);
    }

    #[test]
    fn the_pass_acts_on_the_home_the_task_has_now() {
        // a task homed on node 2 (recorded as 3) runs on node 0: sent home
        assert_eq!(pass_dest(3, 7, 7, 0), 2);
        // at home, or with no home: left alone
        assert_eq!(pass_dest(3, 7, 7, 2), -1);
        assert_eq!(pass_dest(0, 7, 7, 0), -1);
        // the agent has changed the homes since the record (its generation
        // is 8 now): the task may be homed elsewhere or nowhere; wait for
        // its next tick to read it again
        assert_eq!(pass_dest(3, 7, 8, 0), -1);
        // once re-read in generation 8: acted on
        assert_eq!(pass_dest(2, 8, 8, 0), 1);
        // a swap partner is found through the same rule: a CPU of node 1
        // running a task homed on node 0
        assert_eq!(pass_dest(1, 8, 8, 1), 0);
        assert_eq!(pass_dest(1, 7, 8, 1), -1);
    }
}

/// Where --sparse-idle keeps a CPU's flag (idle_rules.h), and the agent's
/// layout (topology.rs) checked against the rules idle.bpf.c runs.
mod idle {
    use crate::bpf_intf as intf;
    use crate::topology::{BpfTopo, Override, RawCpu, Topo, MAX_CPUS, NO_IDLE_SLOT};

    const PER_LINE: u32 = intf::locality_consts_IDLE_LINE_CPUS;

    extern "C" {
        fn rules_idle_llc_lines(cpus: u32) -> u32;
        fn rules_idle_slot(first_line: u32, pos: u32) -> u32;
        fn rules_idle_slot_line(slot: u32) -> u32;
        fn rules_idle_slot_bit(slot: u32) -> u64;
        fn rules_idle_line_cpu(llc_first_cpu: u32, llc_first_line: u32, line: u32, bit: u32) -> u32;
    }

    fn llc_lines(cpus: u32) -> u32 {
        unsafe { rules_idle_llc_lines(cpus) }
    }
    fn slot(first_line: u32, pos: u32) -> u32 {
        unsafe { rules_idle_slot(first_line, pos) }
    }
    fn slot_line(slot: u32) -> u32 {
        unsafe { rules_idle_slot_line(slot) }
    }
    fn slot_bit(slot: u32) -> u64 {
        unsafe { rules_idle_slot_bit(slot) }
    }
    fn line_cpu(llc_first_cpu: u32, llc_first_line: u32, line: u32, bit: u32) -> u32 {
        unsafe { rules_idle_line_cpu(llc_first_cpu, llc_first_line, line, bit) }
    }

    #[test]
    fn eight_cpus_of_one_llc_per_line() {
        assert_eq!(PER_LINE, 8);
        assert_eq!((llc_lines(0), llc_lines(1), llc_lines(8), llc_lines(9), llc_lines(32)), (0, 1, 1, 2, 4));
        // an LLC starting at line 3: positions 0-7 in line 3, 8-15 in line 4
        assert_eq!((slot(3, 0), slot(3, 7), slot(3, 8), slot(3, 13)), (24, 31, 32, 37));
        assert_eq!((slot_line(37), slot_bit(37)), (4, 1 << 5));
        assert_eq!((slot_line(24), slot_bit(24)), (3, 1));
        // bit 5 of line 4 of that LLC (CPUs from llc_cpus[40]): position 13
        assert_eq!(line_cpu(40, 3, 4, 5), 40 + 13);
    }

    /// The agent's tables and the rules agree: every possible CPU has one
    /// slot, in a line of its own LLC only, and the walk's way back from
    /// (line, bit) to llc_cpus finds the same CPU; a node's lines are its
    /// LLCs' lines.
    fn check(b: &BpfTopo) {
        let nr_lines = b.line_llc.len() as u32;
        assert!(nr_lines <= b.nr_cpus && (nr_lines as usize) <= MAX_CPUS);
        let mut seen = std::collections::BTreeSet::new();
        for llc in 0..b.nr_llcs as usize {
            let (c0, c1) = (b.llc_off[llc], b.llc_off[llc + 1]);
            let (l0, l1) = (b.llc_line_off[llc], b.llc_line_off[llc + 1]);
            assert_eq!(l1 - l0, llc_lines(c1 - c0), "LLC {llc}");
            for pos in 0..c1 - c0 {
                let cpu = b.llc_cpus[(c0 + pos) as usize] as usize;
                let s = b.cpu_idle_slot[cpu];
                assert_eq!(s, slot(l0, pos), "CPU {cpu}");
                assert!(seen.insert(s), "slot {s} twice");
                let line = slot_line(s);
                assert!((l0..l1).contains(&line));
                assert_eq!(b.line_llc[line as usize] as usize, llc);
                let bit = slot_bit(s).trailing_zeros();
                assert!(bit < PER_LINE);
                assert_eq!(b.llc_cpus[line_cpu(c0, l0, line, bit) as usize] as usize, cpu);
            }
        }
        for node in 0..b.nr_nodes as usize {
            let lines = &b.node_lines[b.node_line_off[node] as usize..b.node_line_off[node + 1] as usize];
            let mut want: Vec<u16> = vec![];
            for llc in 0..b.nr_llcs as usize {
                let first = b.llc_cpus[b.llc_off[llc] as usize] as usize;
                if b.cpu_node[first] as usize == node {
                    want.extend((b.llc_line_off[llc]..b.llc_line_off[llc + 1]).map(|l| l as u16));
                }
            }
            assert_eq!(lines, &want[..], "node {node}");
        }
    }

    fn raw(n: usize, node: impl Fn(usize) -> usize, llc: impl Fn(usize) -> usize, core: impl Fn(usize) -> usize) -> Topo {
        let online: Vec<RawCpu> =
            (0..n).map(|cpu| RawCpu { cpu, node: node(cpu), llc_key: llc(cpu), core_key: core(cpu) }).collect();
        Topo::from_raw(&(0..n).collect::<Vec<_>>(), &online).unwrap()
    }

    #[test]
    fn layout_one_big_smt_llc() {
        // xeon-1n32: 1 node, 1 LLC, 16 cores x 2 SMT, siblings n and n+16
        let b = raw(32, |_| 0, |_| 0, |c| c % 16).to_bpf();
        check(&b);
        assert_eq!(b.line_llc, vec![0; 4]);
        assert_eq!(b.cpu_idle_slot, (0..32).collect::<Vec<u32>>());
    }

    #[test]
    fn layout_many_cpus_and_uneven_llcs() {
        // 1024 CPUs: 8 nodes x 4 LLCs x 16 cores x 2 SMT (siblings n, n+512)
        check(&raw(1024, |c| (c % 512) / 64, |c| (c % 512) / 16, |c| c % 512).to_bpf());
        // big64: 8 nodes x 4 cores x 2 SMT, one LLC per node
        check(&raw(64, |c| c / 8, |c| c / 8, |c| c / 2).to_bpf());
        // LLCs of 5, 11 and 16 CPUs (an override), and every CPU its own LLC
        let mut t = raw(32, |_| 0, |_| 0, |c| c);
        let ov = Override { llcs: vec!["0-4".into(), "5-15".into(), "16-31".into()], comment: None };
        t.apply_override(&ov).unwrap();
        let b = t.to_bpf();
        check(&b);
        assert_eq!(b.llc_line_off, vec![0, 1, 3, 5]);
        let each: Vec<String> = (0..32).map(|c| c.to_string()).collect();
        let mut t = raw(32, |_| 0, |_| 0, |c| c);
        t.apply_override(&Override { llcs: each, comment: None }).unwrap();
        check(&t.to_bpf());
        // an offline CPU gets its own LLC in node 0, numbered last
        let online: Vec<RawCpu> =
            (0..15).map(|cpu| RawCpu { cpu, node: cpu / 8, llc_key: cpu / 8, core_key: cpu }).collect();
        let b = Topo::from_raw(&(0..16).collect::<Vec<_>>(), &online).unwrap().to_bpf();
        check(&b);
        assert_eq!(b.node_lines, vec![0, 2, 1]);
        assert!(b.cpu_idle_slot.iter().all(|&s| s != NO_IDLE_SLOT));
    }
}
