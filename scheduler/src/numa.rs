// SPDX-License-Identifier: GPL-2.0-only
//! NUMA balancing policy: the agent's half (see src/bpf/numa.bpf.c).
//!
//! Idea: a node may carry a few more tasks than another while the machine
//! is lightly loaded, so that communicating tasks stay on one node (Mel
//! Gorman 2019, "bounded NUMA imbalance"); balancing across nodes runs on
//! its own slow pass (Bligh & Hohnbaum 2003). The mechanism lives in
//! src/bpf/numa.bpf.c (its header says where each rule applies and which
//! unit holds it: balance_pass and active_balance in numa_balance.bpf.c;
//! push_across, wake_follow and place_new in numa_place.bpf.c;
//! task_may_cross, settled_kept, node_overloaded and idle_pull_across in
//! numa.bpf.c itself; the loads they compare in numa_load.bpf.c). The rules themselves are pure
//! functions in src/bpf/numa_rules.h, which the BPF side runs and
//! src/rules.rs tests.
//!
//! This module gives the BPF side what the rules take from the agent: the
//! mode (--numa-balance) and each node's upstream allowance, `imb_numa_nr`
//! (rodata `node_imb_nr`): `max(1, cpus_in_node / 8)` when the node holds
//! one LLC, else the number of LLCs in the node (the kernel derives it per
//! sched domain in build_sched_domains()). Divergence: on machines whose
//! nodes each hold one LLC but whose first NUMA domain groups several nodes
//! (AMD L3-as-NUMA), the kernel counts LLCs of that wider domain; we count
//! per node.
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
    /// The policy without an allowance: nodes evened out by idle CPUs
    /// however few tasks run (the kernel before Gorman's 2019 patch).
    NoAllowance,
}

impl NumaBalance {
    pub fn bpf_mode(self) -> u32 {
        match self {
            NumaBalance::Off => intf::numa_mode_NUMA_OFF,
            NumaBalance::Upstream => intf::numa_mode_NUMA_UPSTREAM,
            NumaBalance::IdleCpus => intf::numa_mode_NUMA_IDLE_CPUS,
            NumaBalance::NoAllowance => intf::numa_mode_NUMA_NO_ALLOWANCE,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NumaBalance::Off => "off",
            NumaBalance::Upstream => "upstream",
            NumaBalance::IdleCpus => "idle-cpus",
            NumaBalance::NoAllowance => "no-allowance",
        }
    }
}

/// --exec-placement values: where a new program starts (numa_rules.h, the rule place_new).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecPlacement {
    /// Near its parent while the parent's node is within the NUMA policy's
    /// allowance (today's kernel, find_idlest_group()).
    Allowance,
    /// Where it is when its CPU runs at most one other task at the exec;
    /// else on the least loaded node when that runs fewer tasks than the
    /// parent's (Bligh and Hohnbaum 2003, exec balancing).
    LeastLoaded,
    /// On the least loaded node whenever it runs fewer tasks than the
    /// parent's, however quiet the program's own CPU.
    LeastLoadedAlways,
}

impl ExecPlacement {
    pub fn name(self) -> &'static str {
        match self {
            ExecPlacement::Allowance => "allowance",
            ExecPlacement::LeastLoaded => "least-loaded",
            ExecPlacement::LeastLoadedAlways => "least-loaded-always",
        }
    }
}

/// Upstream: imbalances up to this many tasks are ignored (numa_rules.h).
pub const NUMA_IMBALANCE_MIN: i64 = intf::locality_consts_NUMA_IMBALANCE_MIN as i64;

/// Upstream allowance of one node: 1/8 of its CPUs if it holds one LLC,
/// else its number of LLCs; at least 1.
pub fn imb_numa_nr(node_cpus: usize, node_llcs: usize) -> u32 {
    let imb = if node_llcs <= 1 { node_cpus >> 3 } else { node_llcs };
    imb.max(1) as u32
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

    #[test]
    fn modes_match_bpf_enum() {
        assert_eq!(NumaBalance::Off.bpf_mode(), 0);
        assert_eq!(NumaBalance::Upstream.bpf_mode(), 1);
        assert_eq!(NumaBalance::IdleCpus.bpf_mode(), 2);
        assert_eq!(NUMA_IMBALANCE_MIN, 2);
    }
}
