// SPDX-License-Identifier: GPL-2.0-only
//! Home nodes: the agent's half (the BPF half is src/bpf/home.bpf.c).
//!
//! Tasks to their memory, softly (home nodes, on by default,
//! `--no-home-node`): without them the scheduler's balancing spread the
//! threads of two 4-thread processes over both nodes of numa2, so neither
//! was single-node and its memory could not follow. The kernel's NUMA
//! balancing moves tasks towards their memory (the numa_group's preferred
//! node). Here, every interval, assign_homes() gives each process with two
//! or more busy threads a home node: its current home while it has room,
//! else the node holding most of its memory, else the node with most room;
//! a node's room is its CPUs, capped at its fair share of all candidates'
//! busy threads plus NUMA_IMBALANCE_MIN, so a lone process that the NUMA
//! policy would spread (8 threads on 2 x 8 CPUs) gets no home. Processes
//! with a pinned thread are left out. The plan goes to BPF (proc_home, via
//! the main loop), and home.bpf.c keeps the threads there.
//!
//! Here: the plan (plan_homes(), on the memory thread, every
//! `--memory-interval-ms`), the rule (assign_homes()), and the copy into
//! BPF (sync(), from the main loop: Homes carries a generation bumped on
//! every change; sync() rewrites proc_home and sets home_gen).
//!
//! Knob: `--no-home-node`; home nodes need `--memory` (the memory thread
//! plans them) and a NUMA policy (BPF enforces them): see Opts::home_node().
//! Stats (BPF counters, stats.rs): xnode_home, home_kept, home_active,
//! home_swaps.

use libbpf_rs::{MapCore, MapFlags};
use log::warn;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::bpf_skel::BpfSkel;
use crate::memory::affinity::{assign_nodes, get_affinity, pref_node, NodeCand};
use crate::memory::{Placer, Proc};

/// The home plan: tgid -> node, and a generation bumped on
/// every change; the scheduler's main loop copies it into BPF.
#[derive(Clone, Debug, Default)]
pub struct Homes {
    pub gen: u64,
    pub map: HashMap<u32, usize>,
}

/// Home nodes: assign_nodes() with each node's room capped
/// at its fair share of all candidates' busy threads (by CPUs, rounded up)
/// plus NUMA_IMBALANCE_MIN, so that homes never build an imbalance the
/// NUMA policy would not tolerate: two 4-thread processes on 2 x 4 CPUs get
/// a node each, one 8-thread process on 2 x 8 CPUs gets none (it is spread).
pub fn assign_homes(cands: &[NodeCand], node_cpus: &[usize]) -> HashMap<u32, usize> {
    let busy: usize = cands.iter().map(|c| c.busy).sum();
    let cpus: usize = node_cpus.iter().sum();
    if cpus == 0 {
        return HashMap::new();
    }
    let slack = crate::numa::NUMA_IMBALANCE_MIN as usize;
    let room: Vec<usize> = node_cpus.iter().map(|&c| c.min((busy * c).div_ceil(cpus) + slack)).collect();
    assign_nodes(cands, &room)
}

impl Placer {
    /// Plan the home nodes of processes with two or more busy
    /// threads (assign_homes()) and publish the plan when it changes.
    pub(crate) fn plan_homes(&mut self) {
        let all = self.known_cpus();
        // a thread someone pinned (taskset, numactl -N, the application)
        // has chosen its CPUs: its process gets no home
        let unpinned = |pid: u32, p: &Proc| {
            std::iter::once(&pid)
                .chain(p.thread_rt.keys())
                .all(|&tid| get_affinity(tid).is_none_or(|cur| all.iter().all(|c| cur.contains(c))))
        };
        let mut cands: Vec<NodeCand> = self
            .procs
            .iter()
            .filter(|(&pid, p)| p.busy >= 2 && unpinned(pid, p))
            .map(|(&pid, p)| NodeCand {
                pid,
                busy: p.busy,
                pages: p.pages.iter().sum(),
                pref: pref_node(&p.pages).or(p.home),
                bound: self.home_plan.get(&pid).copied(),
            })
            .collect();
        cands.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.pid.cmp(&b.pid)));
        let plan = assign_homes(&cands, &self.node_cpus());
        if plan == self.home_plan {
            return;
        }
        log::debug!("memory: home nodes {plan:?}");
        if let Ok(mut h) = self.homes.lock() {
            h.gen += 1;
            h.map = plan.clone();
        }
        self.home_plan = plan;
    }

}

/// Copy the memory thread's home plan into proc_home when it changed,
/// then bump home_gen so tasks re-read their home (home.bpf.c). `synced`
/// is the generation last copied.
pub fn sync(skel: &mut BpfSkel, homes: &Mutex<Homes>, synced: &mut u64) {
    let plan = match homes.lock() {
        Ok(h) if h.gen != *synced => h.clone(),
        _ => return,
    };
    let map = &skel.maps.proc_home;
    for key in map.keys().collect::<Vec<_>>() {
        let keep = key.len() >= 4 && plan.map.contains_key(&u32::from_ne_bytes(key[..4].try_into().unwrap()));
        if !keep {
            let _ = map.delete(&key);
        }
    }
    for (tgid, node) in &plan.map {
        if let Err(e) = map.update(&tgid.to_ne_bytes(), &(*node as i32).to_ne_bytes(), MapFlags::ANY) {
            warn!("home node of {tgid}: {e}");
        }
    }
    if let Some(bss) = skel.maps.bss_data.as_mut() {
        bss.home_gen = plan.gen;
    }
    *synced = plan.gen;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::affinity::tests::cand;

    #[test]
    fn home_assignment() {
        // numa2 (2 x 4 CPUs), two 4-thread jbb instances, both with memory
        // on node 0: the larger takes node 0, the other node 1
        let two = [cand(1, 4, 900, Some(0), None), cand(2, 4, 800, Some(0), None)];
        let h = assign_homes(&two, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&0), Some(&1)));
        // a current home is kept while it has room
        let kept = [cand(1, 4, 900, Some(0), Some(1)), cand(2, 4, 800, Some(0), Some(0))];
        let h = assign_homes(&kept, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&1), Some(&0)));
        // one 8-thread process on 2 x 8 CPUs: fair share 4 + 2 < 8, no home
        assert!(assign_homes(&[cand(3, 8, 900, Some(0), None)], &[8, 8]).is_empty());
        // a 2-thread pair alone gets one (share 1 + 2 >= 2)
        assert_eq!(assign_homes(&[cand(4, 2, 10, Some(1), None)], &[8, 8]).get(&4), Some(&1));
        // more busy threads than the machine: each node's room is its CPUs
        let big = [cand(5, 6, 900, Some(0), None), cand(6, 6, 800, Some(1), None)];
        assert!(assign_homes(&big, &[4, 4]).is_empty());
    }
}
