// SPDX-License-Identifier: GPL-2.0-only
//! Node binding: a process that fits one node is bound to it.
//!
//! Tasks to their memory, hard (`--memory-node-affinity`, off by default):
//! the agent's own lever is CPU affinity. With this switch, each process
//! whose busy threads (more than a
//! tenth of an interval each) fit the free CPUs of one node is bound to a
//! node (its current one while it fits, else the node holding most of its
//! anonymous memory, else the one with the most free CPUs), largest memory
//! first; a process that stops fitting is unbound; on exit every mask is
//! given back. Threads whose affinity was restricted by someone else
//! (taskset, numactl -N, the application) are never touched. It is a hard
//! bind, visible to sched_getaffinity(2): the reason it is off by default.
//! Processes whose cpuset leaves out nodes are not bound. On exit (also
//! after SIGTERM, SIGINT or an exit of the BPF side: mod.rs) every mask is
//! given back to the processes that still hold it (same pid and start
//! time); a process the agent stops tracking (left alone, shrunk below
//! MIN_RSS_MB) gets its mask back at once.
//!
//! The fitting rule (assign_nodes()) also serves home nodes (home.rs).
//!
//! Knob: `--memory-node-affinity`. Stats: memory_affinity_binds,
//! memory_affinity_unbinds; per process (memory_procs) bound_node.

use std::collections::HashMap;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use super::{ids, Placer};

impl Placer {
    /// --memory-node-affinity: bind each process that fits one node to a
    /// node, the one holding most of its memory if it has room.
    pub(super) fn bind_nodes(&mut self) {
        let cpus = self.node_cpus();
        let mut cands: Vec<NodeCand> = self
            .procs
            .iter()
            // a cpuset that leaves out nodes has chosen for it
            .filter(|(_, p)| (p.busy > 0 || p.bound.is_some()) && p.mems.iter().all(|&m| m))
            .map(|(&pid, p)| NodeCand {
                pid,
                busy: p.busy.max(1),
                pages: p.pages.iter().sum(),
                pref: pref_node(&p.pages).or(p.home),
                bound: p.bound,
            })
            .collect();
        cands.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.pid.cmp(&b.pid)));
        let plan = assign_nodes(&cands, &cpus);
        for c in &cands {
            if !self.still_same(c.pid) {
                continue;
            }
            let want = plan.get(&c.pid).copied();
            // again while bound too: threads created since get the mask
            if want != c.bound || want.is_some() {
                self.set_node(c.pid, want);
            }
        }
    }

    /// Bind every thread of `pid` to the CPUs of `node` (None: give back all
    /// CPUs). Threads whose affinity someone else restricted are left alone.
    pub(super) fn set_node(&mut self, pid: u32, node: Option<usize>) {
        let all = self.known_cpus();
        let prev = self.procs.get(&pid).and_then(|p| p.bound);
        let mask_of = |n: Option<usize>| -> Vec<usize> {
            match n {
                Some(n) => all.iter().copied().filter(|&c| self.o.cpu_node[c] == n).collect(),
                None => all.clone(),
            }
        };
        let (ours, want) = (mask_of(prev), mask_of(node));
        let Some(tids) = ids(&format!("/proc/{pid}/task")) else { return };
        for tid in tids {
            let Some(cur) = get_affinity(tid) else { continue };
            // only threads with every CPU (nobody restricted them) or
            // with the mask we set ourselves
            let cur_known: Vec<usize> = cur.into_iter().filter(|c| all.contains(c)).collect();
            if cur_known != all && cur_known != ours {
                continue;
            }
            set_affinity(tid, &want);
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.bound = node;
        }
        if let Ok(mut s) = self.stats.lock() {
            if prev != node && node.is_some() {
                s.affinity_binds += 1;
            } else if prev != node {
                s.affinity_unbinds += 1;
            }
        }
    }

}

/// A process that could be bound to a node.
#[derive(Clone, Debug)]
pub struct NodeCand {
    pub pid: u32,
    /// threads that were busy in the last interval
    pub busy: usize,
    pub pages: u64,
    /// the node holding most of its memory
    pub pref: Option<usize>,
    pub bound: Option<usize>,
}

/// The node holding most pages.
pub fn pref_node(pages: &[u64]) -> Option<usize> {
    let (n, &c) = pages.iter().enumerate().max_by_key(|&(n, c)| (*c, std::cmp::Reverse(n)))?;
    (c > 0).then_some(n)
}

/// Which processes get bound to which node: in the given order (largest
/// memory first), a process whose busy threads fit the free CPUs of a node
/// goes to its current node, else its memory's node, else the node with
/// the most free CPUs; a process that fits nowhere stays unbound.
pub fn assign_nodes(cands: &[NodeCand], node_cpus: &[usize]) -> HashMap<u32, usize> {
    let mut free: Vec<i64> = node_cpus.iter().map(|&c| c as i64).collect();
    let mut out = HashMap::new();
    for c in cands {
        let busy = c.busy as i64;
        let fits = |n: usize, free: &[i64]| n < free.len() && free[n] >= busy;
        let pick = c
            .bound
            .filter(|&n| fits(n, &free))
            .or(c.pref.filter(|&n| fits(n, &free)))
            .or_else(|| (0..free.len()).filter(|&n| fits(n, &free)).max_by_key(|&n| (free[n], std::cmp::Reverse(n))));
        if let Some(n) = pick {
            free[n] -= busy;
            out.insert(c.pid, n);
        }
    }
    out
}

/// The CPUs `tid` may run on; None if it is gone.
pub(crate) fn get_affinity(tid: u32) -> Option<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(tid as i32)).ok()?;
    Some((0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

fn set_affinity(tid: u32, cpus: &[usize]) {
    let mut set = CpuSet::new();
    for &c in cpus {
        // a CPU beyond the set's size cannot be named: left out
        let _ = set.set(c);
    }
    // ESRCH (the thread exited) and EINVAL are harmless here
    let _ = sched_setaffinity(Pid::from_raw(tid as i32), &set);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A candidate, for these tests and home.rs's.
    pub(crate) fn cand(pid: u32, busy: usize, pages: u64, pref: Option<usize>, bound: Option<usize>) -> NodeCand {
        NodeCand { pid, busy, pages, pref, bound }
    }

    #[test]
    fn node_assignment() {
        assert_eq!(pref_node(&[3, 9]), Some(1));
        assert_eq!(pref_node(&[5, 5]), Some(0));
        assert_eq!(pref_node(&[0, 0]), None);
        // two 4-thread processes on 2 x 4 CPUs, both with memory mostly on
        // node 0: the larger gets node 0, the other the free node
        let a = assign_nodes(&[cand(1, 4, 100, Some(0), None), cand(2, 4, 90, Some(0), None)], &[4, 4]);
        assert_eq!((a[&1], a[&2]), (0, 1));
        // a bound process keeps its node while it fits
        let a = assign_nodes(&[cand(1, 4, 100, Some(0), Some(1)), cand(2, 4, 90, Some(0), None)], &[4, 4]);
        assert_eq!((a[&1], a[&2]), (1, 0));
        // too many busy threads for any node: not bound
        let a = assign_nodes(&[cand(1, 5, 100, Some(0), Some(0))], &[4, 4]);
        assert!(a.is_empty());
        // a third process finds no room
        let a = assign_nodes(
            &[cand(1, 3, 100, Some(0), None), cand(2, 3, 90, Some(1), None), cand(3, 2, 80, Some(0), None)],
            &[4, 4],
        );
        assert_eq!(a.len(), 2);
        assert!(!a.contains_key(&3));
    }
}
