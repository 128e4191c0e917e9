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

/// The NUMA policy (numa_rules.h).
mod numa {
    use super::*;
    use std::mem::{offset_of, size_of};

    const OFF: u32 = intf::numa_mode_NUMA_OFF;
    const UPSTREAM: u32 = intf::numa_mode_NUMA_UPSTREAM;
    const IDLE_CPUS: u32 = intf::numa_mode_NUMA_IDLE_CPUS;

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

    extern "C" {
        static rules_numa_node_fig_layout: [usize; 7];
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
        fn rules_numa_new_stays(
            mode: u32,
            parent: *const NumaNodeFig,
            least: *const NumaNodeFig,
        ) -> bool;
        fn rules_numa_push_across(src: *const NumaNodeFig, dst: *const NumaNodeFig) -> bool;
        fn rules_numa_may_cross(mode: u32, xnode_at: u64, now: u64, interval_ns: u64) -> bool;
        fn rules_numa_few_partners(waker_flips: i64, wakee_flips: i64, llc_cpus: u32) -> bool;
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
    fn new_stays(mode: u32, parent: &NumaNodeFig, least: &NumaNodeFig) -> bool {
        unsafe { rules_numa_new_stays(mode, parent, least) }
    }
    fn push_across(src: &NumaNodeFig, dst: &NumaNodeFig) -> bool {
        unsafe { rules_numa_push_across(src, dst) }
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

    #[test]
    fn light_communicating_load_is_not_spread() {
        // numa2, wakelat at half load: 6 threads, often 5 runnable at a
        // sample, one CPU's worth busy: the idle nodes differ by one CPU
        let m = UPSTREAM;
        let (a, b) = (node(4, 1.2, 3.5, 5, 1), node(4, 0.0, 0.0, 0, 1));
        assert!(!overloaded(&a, 1));
        assert_eq!(moves(m, &a, &b, 1), 0);
        assert!(!push_across(&a, &b));
        // really overloaded: the waking task may go, unless rule 4 holds it
        let full = node(4, 4.0, 6.0, 6, 1);
        assert!(push_across(&full, &b));
        let ms = 1_000_000;
        assert!(!may_cross(m, 10_000 * ms, 10_001 * ms, 150 * ms));
        // ... and not into a node that is overloaded too
        assert!(!push_across(&full, &full));
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
        assert_eq!(
            moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0),
            0
        );
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
