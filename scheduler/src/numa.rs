// SPDX-License-Identifier: GPL-2.0-only
//! NUMA balancing policy: the allowance rules, computed here for the BPF
//! side (rodata) and mirrored here for unit tests.
//!
//! Idea: a node may carry a few more tasks than another while the machine
//! is lightly loaded, so that communicating tasks stay on one node (Mel
//! Gorman 2019, "bounded NUMA imbalance"); balancing across nodes runs on
//! its own slow pass (Bligh & Hohnbaum 2003). The mechanism lives in
//! src/bpf/numa.bpf.c (its header says where each rule applies: the
//! cross-node balance pass, the wake-up push across nodes, a synchronous
//! wakee following its waker's node, fork/exec placement, the
//! once-per-interval rule per task, the settled-task rule for cross-node
//! steals, active balance of running tasks).
//!
//! The rules, exactly as implemented (`adjust`/`moves` here,
//! `numa_adjust()`/`numa_moves()` in BPF). A node is first classed as the
//! kernel classes a sched group (group_is_overloaded()): overloaded when it
//! has more runnable tasks than CPUs at the last sample and its utilisation
//! or runnable average exceeds its capacity with imbalance_pct 117. An
//! overloaded source is balanced by its load in tasks with no allowance. A
//! source with spare capacity is balanced by idle CPUs (CPUs minus the
//! node's utilisation in CPUs), the imbalance being the destination's idle
//! CPUs minus the source's, with the allowance of the mode:
//!
//! - `upstream` (default; Linux's fair.c since 5.19, `adjust_numa_imbalance`):
//!   the allowance `imb_numa_nr` of a node is `max(1, cpus_in_node / 8)` when
//!   the node holds one LLC, else the number of LLCs in the node (the kernel
//!   derives it per sched domain in build_sched_domains()). An imbalance is
//!   ignored when the destination's running tasks, counting the task to be
//!   moved, are at most `imb_numa_nr` AND the imbalance is at most
//!   NUMA_IMBALANCE_MIN = 2. Divergence: on machines whose nodes each hold
//!   one LLC but whose first NUMA domain groups several nodes (AMD
//!   L3-as-NUMA), the kernel counts LLCs of that wider domain; we count per
//!   node.
//! - `idle-cpus` (Mel Gorman's v2 patch, Dec 2019, as posted):
//!   `imbalance_adj = max(2, (busiest_cpus * (imbalance_pct - 100) / 100) >> 1)`,
//!   `imbalance_max = busiest_cpus / 2 + imbalance_adj`, with the NUMA
//!   domains' imbalance_pct of that time, 125; the imbalance is ignored when
//!   it is at most `imbalance_adj` and the busiest node has at least
//!   `imbalance_max` idle CPUs.
//! - A balance move corrects half the adjusted imbalance (the kernel's
//!   `imbalance >>= 1`).
//! - `off`: no policy; cross-node moves whenever a CPU would otherwise
//!   idle (the behaviour of `--steal-cross-node` before this module).
//! - In both policy modes a waking task leaves its node only when that
//!   node, with it, is overloaded and the destination is not; idle CPUs of
//!   a node that is not overloaded steal from an overloaded one between
//!   passes (rule 7 in numa.bpf.c). A synchronous wakee follows its waker's
//!   node only while both have few partners (`few_partners`, the kernel's
//!   wake_wide() counter with the LLC's CPUs as the bound).
//!
//! Measurements behind these choices are in docs/decisions.md.

use crate::bpf_intf as intf;
use crate::topology::Topo;

/// --numa-balance values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NumaBalance {
    /// No policy: steal across nodes whenever a CPU would idle (today's
    /// behaviour with --steal-cross-node).
    Off,
    /// Linux's current bounded imbalance (imb_numa_nr).
    Upstream,
    /// Gorman's 2019 v2 rule: small imbalances ignored while the busiest
    /// node keeps about half its CPUs idle.
    IdleCpus,
}

impl NumaBalance {
    pub fn bpf_mode(self) -> u32 {
        match self {
            NumaBalance::Off => intf::numa_mode_NUMA_OFF,
            NumaBalance::Upstream => intf::numa_mode_NUMA_UPSTREAM,
            NumaBalance::IdleCpus => intf::numa_mode_NUMA_IDLE_CPUS,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NumaBalance::Off => "off",
            NumaBalance::Upstream => "upstream",
            NumaBalance::IdleCpus => "idle-cpus",
        }
    }
}

// mirror of the BPF rule, used by the tests
#[cfg_attr(not(test), allow(dead_code))]
pub const NUMA_IMBALANCE_MIN: i64 = intf::locality_consts_NUMA_IMBALANCE_MIN as i64;
#[cfg_attr(not(test), allow(dead_code))]
const IMB_PCT: u64 = intf::locality_consts_NUMA_IMB_PCT as u64;
#[cfg_attr(not(test), allow(dead_code))]
const IMB_PCT_2019: u32 = intf::locality_consts_NUMA_IMB_PCT_2019;
#[cfg_attr(not(test), allow(dead_code))]
const ONE: u32 = 1 << intf::locality_consts_LOAD_SHIFT;

/// Upstream allowance of one node: 1/8 of its CPUs if it holds one LLC,
/// else its number of LLCs; at least 1.
pub fn imb_numa_nr(node_cpus: usize, node_llcs: usize) -> u32 {
    let imb = if node_llcs <= 1 { node_cpus >> 3 } else { node_llcs };
    imb.max(1) as u32
}

/// What the policy sees of one node (fixed point: 1 task or CPU = ONE).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
pub struct Node {
    pub cpus: u32,
    /// runnable tasks at the last sample (node_nr_last)
    pub nr_last: u32,
    /// decayed runnable average (node_load + node_placed)
    pub load: u32,
    /// decayed utilisation (node_util + node_placed)
    pub util: u32,
    /// upstream allowance (imb_numa_nr)
    pub imb_nr: u32,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Node {
    fn tasks(&self) -> i64 {
        ((self.load + ONE / 2) / ONE) as i64
    }
    fn busy(&self) -> i64 {
        (((self.util + ONE / 2) / ONE).min(self.cpus)) as i64
    }
    fn idle(&self, extra: u32) -> i64 {
        (self.cpus as i64 - self.busy() - extra as i64).max(0)
    }
    /// numa_node_overloaded(): more runnable than CPUs, and utilisation or
    /// runnable average past the capacity with imbalance_pct 117.
    pub fn overloaded(&self, extra: u32) -> bool {
        let cap = (self.cpus as u64) * ONE as u64;
        let add = (extra * ONE) as u64;
        self.nr_last + extra > self.cpus
            && ((self.util as u64 + add) * IMB_PCT > cap * 100
                || (self.load as u64 + add) * 100 > cap * IMB_PCT)
    }
}

/// numa_adjust(): the part of an idle-CPU imbalance the policy corrects.
#[cfg_attr(not(test), allow(dead_code))]
pub fn adjust(
    mode: NumaBalance,
    imbalance: i64,
    busiest_idle: i64,
    busiest_cpus: u32,
    local_running: u32,
    local_imb_nr: u32,
) -> i64 {
    if imbalance <= 0 {
        return 0;
    }
    match mode {
        NumaBalance::Off => imbalance,
        NumaBalance::Upstream => {
            if local_running <= local_imb_nr && imbalance <= NUMA_IMBALANCE_MIN {
                0
            } else {
                imbalance
            }
        }
        NumaBalance::IdleCpus => {
            let adj = ((busiest_cpus * (IMB_PCT_2019 - 100) / 100) >> 1).max(2) as i64;
            let max = (busiest_cpus >> 1) as i64 + adj;
            if imbalance <= adj && busiest_idle >= max {
                0
            } else {
                imbalance
            }
        }
    }
}

/// numa_moves(): tasks that may move from `src` to `dst`, `extra` tasks of
/// src not in its figures yet.
#[cfg_attr(not(test), allow(dead_code))]
pub fn moves(mode: NumaBalance, src: &Node, dst: &Node, extra: u32) -> u32 {
    let imb = if src.overloaded(extra) {
        src.tasks() + extra as i64 - dst.tasks()
    } else {
        let si = src.idle(extra);
        adjust(mode, dst.idle(0) - si, si, src.cpus, dst.busy() as u32 + 1, dst.imb_nr)
    };
    (imb.max(0) >> 1) as u32
}

/// numa_place_new(): does a new process whose parent runs on `parent` stay
/// there rather than go to `least`?
#[cfg_attr(not(test), allow(dead_code))]
pub fn new_task_stays(mode: NumaBalance, parent: &Node, least: &Node) -> bool {
    if mode == NumaBalance::Off {
        return true;
    }
    if parent.overloaded(1) {
        return false;
    }
    let si = parent.idle(0);
    adjust(mode, least.idle(0) - si, si, parent.cpus, parent.busy() as u32 + 1, parent.imb_nr) <= 0
}

/// numa_push_across(): may a waking task whose node has no idle CPU for
/// it go to `dst`? `may_cross`: rule 4 (no node change within the interval).
#[cfg_attr(not(test), allow(dead_code))]
pub fn push_across(src: &Node, dst: &Node, may_cross: bool) -> bool {
    may_cross && src.overloaded(1) && !dst.overloaded(1)
}

// mirror of the BPF rule, used by the tests
#[cfg_attr(not(test), allow(dead_code))]
/// Rule 2b's partner test (numa_few_partners()): both the waker and the
/// wakee changed wakee fewer times (decayed) than the waker's LLC has CPUs.
pub fn few_partners(waker_flips: u32, wakee_flips: u32, llc_cpus: u32) -> bool {
    waker_flips < llc_cpus && wakee_flips < llc_cpus
}
/// Per node: (possible CPUs, distinct LLCs), by dense node index.
pub fn node_shapes(topo: &Topo) -> Vec<(usize, usize)> {
    let mut cpus = vec![0usize; topo.nr_nodes];
    let mut llcs: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); topo.nr_nodes];
    for p in topo.cpus.iter().flatten() {
        if p.node < topo.nr_nodes {
            cpus[p.node] += 1;
            llcs[p.node].insert(p.llc);
        }
    }
    cpus.into_iter().zip(llcs).map(|(c, l)| (c, l.len())).collect()
}

/// The upstream allowance of every node, for the BPF rodata.
pub fn node_allowances(topo: &Topo) -> Vec<u32> {
    node_shapes(topo)
        .into_iter()
        .map(|(c, l)| imb_numa_nr(c, l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::RawCpu;

    fn topo(nodes: usize, llcs_per_node: usize, cpus_per_llc: usize) -> Topo {
        let mut online = vec![];
        let mut cpu = 0;
        for n in 0..nodes {
            for l in 0..llcs_per_node {
                for _ in 0..cpus_per_llc {
                    online.push(RawCpu {
                        cpu,
                        node: n,
                        llc_key: n * 100 + l,
                        core_key: cpu,
                    });
                    cpu += 1;
                }
            }
        }
        Topo::from_raw(&(0..cpu).collect::<Vec<_>>(), &online).unwrap()
    }

    #[test]
    fn imb_numa_nr_rule() {
        // one LLC per node: 1/8 of the node, at least 1
        assert_eq!(imb_numa_nr(4, 1), 1);
        assert_eq!(imb_numa_nr(8, 1), 1);
        assert_eq!(imb_numa_nr(15, 1), 1);
        assert_eq!(imb_numa_nr(16, 1), 2);
        assert_eq!(imb_numa_nr(48, 1), 6);
        // several LLCs: their number
        assert_eq!(imb_numa_nr(8, 2), 2);
        assert_eq!(imb_numa_nr(64, 8), 8);
        assert_eq!(imb_numa_nr(0, 0), 1);
    }

    #[test]
    fn allowances_from_topology() {
        // haswell2s: 2 nodes x 8 CPUs, one LLC each
        assert_eq!(node_allowances(&topo(2, 1, 8)), vec![1, 1]);
        // a 2-LLC node (spr-1n2llc)
        assert_eq!(node_allowances(&topo(1, 2, 4)), vec![2]);
        // 2 nodes of 32 CPUs in one LLC
        assert_eq!(node_allowances(&topo(2, 1, 32)), vec![4, 4]);
        assert_eq!(node_shapes(&topo(2, 3, 2)), vec![(6, 3), (6, 3)]);
    }

    /// a node of `cpus` CPUs: `busy` busy CPUs (utilisation), `tasks`
    /// runnable on average and `nr` at the last sample
    fn node(cpus: u32, busy: f64, tasks: f64, nr: u32, imb_nr: u32) -> Node {
        Node {
            cpus,
            nr_last: nr,
            load: (tasks * ONE as f64) as u32,
            util: (busy * ONE as f64) as u32,
            imb_nr,
        }
    }

    #[test]
    fn overload_needs_tasks_and_utilisation() {
        // more runnable than CPUs at the sample, but a quarter busy: spare
        assert!(!node(4, 1.0, 3.0, 5, 1).overloaded(0));
        // 5 runnable and fully busy: overloaded
        assert!(node(4, 4.0, 5.0, 5, 1).overloaded(0));
        // full by the runnable average alone (4 * 1.17 < 5)
        assert!(node(4, 3.0, 5.0, 5, 1).overloaded(0));
        // busy but no more runnable than CPUs: not overloaded
        assert!(!node(4, 4.0, 4.0, 4, 1).overloaded(0));
        // the waking task counts
        assert!(node(4, 3.5, 4.0, 4, 1).overloaded(1));
    }

    #[test]
    fn upstream_keeps_a_pair_together() {
        let m = NumaBalance::Upstream;
        // pair on node A (8 CPUs, 2 busy), node B idle: 2 idle CPUs apart,
        // B would run 1 <= 1: tolerated
        assert_eq!(moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0), 0);
        // three busy: imbalance 3 > NUMA_IMBALANCE_MIN, one moves
        assert_eq!(moves(m, &node(8, 3.0, 3.0, 3, 1), &node(8, 0.0, 0.0, 0, 1), 0), 1);
        // destination already running beyond its allowance: no tolerance
        assert_eq!(moves(m, &node(8, 4.0, 4.0, 4, 1), &node(8, 2.0, 2.0, 2, 1), 0), 1);
        assert_eq!(adjust(m, 2, 4, 8, 3, 1), 2);
        // larger allowance (16-CPU node)
        assert_eq!(moves(m, &node(16, 3.0, 3.0, 3, 2), &node(16, 1.0, 1.0, 1, 2), 0), 0);
        // no imbalance, negative imbalance
        assert_eq!(adjust(m, 0, 8, 8, 1, 1), 0);
        assert_eq!(adjust(m, -3, 8, 8, 4, 1), 0);
    }

    #[test]
    fn light_communicating_load_is_not_spread() {
        // numa2, wakelat at half load: 6 threads, often 5 runnable at a
        // sample, one CPU's worth busy: the idle nodes differ by one CPU
        let m = NumaBalance::Upstream;
        let (a, b) = (node(4, 1.2, 3.5, 5, 1), node(4, 0.0, 0.0, 0, 1));
        assert!(!a.overloaded(1));
        assert_eq!(moves(m, &a, &b, 1), 0);
        assert!(!push_across(&a, &b, true));
        // really overloaded: the waking task may go, unless rule 4 holds it
        let full = node(4, 4.0, 6.0, 6, 1);
        assert!(push_across(&full, &b, true));
        assert!(!push_across(&full, &b, false));
        // ... and not into a node that is overloaded too
        assert!(!push_across(&full, &full, true));
        // an overloaded source is balanced by tasks, without the allowance
        assert_eq!(moves(m, &full, &b, 0), 3);
    }

    #[test]
    fn idle_cpus_rule_as_posted() {
        let m = NumaBalance::IdleCpus;
        // 48-CPU node (the thread's Haswell): adj = max(2, 48*25/100 >> 1) = 6,
        // max = 24 + 6 = 30 idle CPUs
        assert_eq!(adjust(m, 6, 30, 48, 1, 1), 0);
        assert_eq!(adjust(m, 7, 30, 48, 1, 1), 7);
        assert_eq!(adjust(m, 6, 29, 48, 1, 1), 6);
        // 8-CPU node: adj = max(2, 8*25/100 >> 1 = 1) = 2, max = 6
        assert_eq!(adjust(m, 2, 6, 8, 1, 1), 0);
        assert_eq!(adjust(m, 2, 5, 8, 1, 1), 2);
        // a pair on an 8-CPU node stays; four busy move one
        assert_eq!(moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0), 0);
        assert_eq!(moves(m, &node(8, 4.0, 4.0, 4, 1), &node(8, 0.0, 0.0, 0, 1), 0), 2);
        // differs from upstream: a destination running 2 already
        assert_eq!(moves(m, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0), 0);
        assert_eq!(adjust(NumaBalance::Upstream, 2, 6, 8, 2, 1), 2);
        assert_eq!(adjust(m, 2, 6, 8, 2, 1), 0);
    }

    #[test]
    fn off_moves_every_imbalance() {
        assert_eq!(adjust(NumaBalance::Off, 2, 6, 8, 1, 1), 2);
        assert_eq!(moves(NumaBalance::Off, &node(8, 2.0, 2.0, 2, 1), &node(8, 0.0, 0.0, 0, 1), 0), 1);
        assert!(new_task_stays(NumaBalance::Off, &node(8, 7.0, 7.0, 7, 1), &node(8, 0.0, 0.0, 0, 1)));
    }

    #[test]
    fn new_process_placement() {
        let m = NumaBalance::Upstream;
        let idle = node(8, 0.0, 0.0, 0, 1);
        // first process: parent's node idle -> stays
        assert!(new_task_stays(m, &idle, &idle));
        // parent's node runs 1, other 0: it would run 2 > imb_numa_nr 1 -> goes
        assert!(!new_task_stays(m, &node(8, 1.0, 1.0, 1, 1), &idle));
        // with allowance 2 it stays
        assert!(new_task_stays(m, &node(16, 1.0, 1.0, 1, 2), &node(16, 0.0, 0.0, 0, 2)));
        // balanced nodes: stays
        assert!(new_task_stays(m, &node(8, 3.0, 3.0, 3, 1), &node(8, 3.0, 3.0, 3, 1)));
        // overloaded parent's node: goes
        assert!(!new_task_stays(m, &node(8, 8.0, 9.0, 9, 1), &node(8, 7.0, 7.0, 7, 1)));
        // idle-cpus: 2 ahead on an 8-CPU node with 6 idle stays, 3 ahead goes
        assert!(new_task_stays(NumaBalance::IdleCpus, &node(8, 2.0, 2.0, 2, 1), &idle));
        assert!(!new_task_stays(NumaBalance::IdleCpus, &node(8, 3.0, 3.0, 3, 1), &idle));
    }

    #[test]
    fn modes_match_bpf_enum() {
        assert_eq!(NumaBalance::Off.bpf_mode(), 0);
        assert_eq!(NumaBalance::Upstream.bpf_mode(), 1);
        assert_eq!(NumaBalance::IdleCpus.bpf_mode(), 2);
        assert_eq!(NUMA_IMBALANCE_MIN, 2);
    }

    #[test]
    fn only_few_partners_follow() {
        // a pair: each always wakes the other
        assert!(few_partners(0, 0, 4));
        assert!(few_partners(3, 1, 4));
        // a hackbench sender switches receiver at every write
        assert!(!few_partners(1500, 2, 4));
        assert!(!few_partners(2, 4, 4));
    }
}
