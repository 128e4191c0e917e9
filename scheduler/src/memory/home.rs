// SPDX-License-Identifier: GPL-2.0-only
//! Home nodes: the agent's half (the BPF half is src/bpf/home.bpf.c).
//!
//! Tasks to their memory, softly (home nodes, on by default,
//! `--no-home-node`): two 4-thread processes started together on one node
//! of numa2 are split over both nodes by the balancing without them, so
//! neither is single-node and its memory cannot follow. The kernel's NUMA
//! balancing moves tasks towards their memory (the numa_group's preferred
//! node). Here, every interval, assign_homes() gives each process with two
//! or more busy threads a home node: its current home while it has room,
//! else the node holding most of its memory, else the node with most room;
//! a node's room is its CPUs, capped at its fair share of all candidates'
//! busy threads plus NUMA_IMBALANCE_MIN, so a lone process that the NUMA
//! policy would spread (8 threads on 2 x 8 CPUs) gets no home. Processes
//! with a pinned thread are left out (a homed process only once the pin has
//! lasted from one pass to the next: pin_counts()). The plan goes to BPF (proc_home, via
//! the main loop), and home.bpf.c keeps the threads there.
//!
//! Thread homes (van Riel 2014's case, `--no-thread-home` to turn off): a
//! process too big for one node gets no home, and left alone its threads
//! wander over every node, so no thread's private memory has a node to
//! stay local to (evidence.rs calls a chunk private only when one
//! node wrote it twice in a row). assign_thread_homes() gives each of its
//! busy threads a node of its own instead: the process takes the fewest
//! nodes, those of its current thread homes first, then those it ran on
//! most, whose room (what is left after process homes) holds all its busy
//! threads; each thread keeps its home,
//! else its current node, while that is one of them with room, else goes
//! to the one with most room. The kernel's counterpart is the per-task
//! preferred node of NUMA balancing; its numa_group's active nodes are the
//! set the process takes here. A process that does not fit the room left
//! gets no thread homes and is spread by the NUMA policy.
//!
//! Here: the plan (plan_homes(), on the memory thread, every
//! `--memory-interval-ms`), the rule (assign_homes()), and the copy into
//! BPF (sync(), from the main loop: Homes carries a generation bumped on
//! every change; sync() rewrites proc_home and sets home_gen).
//!
//! Reasons: reasons() says per process why it has the home it has (kept,
//! memory node, most room, thread homes) or none (too few busy threads, a
//! pinned thread, no room), where the rule decides it; the plan carries them
//! beside it (Homes::why) for `scx_locality explain` (../explain/).
//!
//! Knobs: `--no-home-node` (no homes at all), `--no-thread-home` (process
//! homes only); homes need `--memory` (the memory thread plans them) and a
//! NUMA policy (BPF enforces them): see Opts::home_node().
//! Stats (BPF counters, stats.rs): xnode_home, home_kept, home_active,
//! home_swaps; memory_thread_homes (given or changed); per process
//! (memory_procs) thread_homes.

use libbpf_rs::{MapCore, MapFlags};
use log::warn;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;

use crate::bpf_skel::BpfSkel;
use super::affinity::{assign_nodes, get_affinity, pref_node, NodeCand};
use super::{Placer, Proc};

/// Who has which home: processes (tgid -> node) and threads of processes
/// spanning nodes (tid -> (tgid, node)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HomePlan {
    pub procs: HashMap<u32, usize>,
    pub threads: HashMap<u32, (u32, usize)>,
}

impl HomePlan {
    /// Threads of `pid` homed on each of `nr_nodes` nodes.
    pub fn threads_per_node(&self, pid: u32, nr_nodes: usize) -> Vec<u32> {
        let mut per = vec![0u32; nr_nodes];
        for &(p, n) in self.threads.values() {
            if p == pid && n < nr_nodes {
                per[n] += 1;
            }
        }
        per
    }
}

/// The home plan and a generation bumped on every change; the scheduler's
/// main loop copies it into BPF. `why` (not part of the plan: a changed
/// reason alone bumps no generation) says per sampled process why it has
/// its home or none, as of the last pass.
#[derive(Clone, Debug, Default)]
pub struct Homes {
    pub gen: u64,
    pub plan: HomePlan,
    pub why: HashMap<u32, HomeWhy>,
}

/// Why a process has the home it has, or none: the rule's own steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum HomeWhy {
    /// its current home, which still has room
    Kept { node: usize },
    /// the node holding most of its memory, which has room
    MemoryNode { node: usize },
    /// no room on its memory's node: the node with most room
    MostRoom { node: usize },
    /// too big for one node: each busy thread a node of its own, on these
    /// nodes (threads per node)
    ThreadHomes { threads_per_node: Vec<u32> },
    /// fewer than two threads busy for a tenth of the last interval
    FewBusy { busy: usize },
    /// a thread someone pinned (taskset, numactl -N, the application)
    Pinned { tid: u32 },
    /// its busy threads fit no node's room (`room`: the largest room, a
    /// node's CPUs capped at its fair share of all busy threads plus
    /// NUMA_IMBALANCE_MIN; when busy <= room, other homes took it)
    NoRoom { busy: usize, room: usize, thread_homes: bool },
}

/// Why each candidate got its home or none, from the plan the rule made
/// (assign_nodes() tries the current home, then the memory's node, then the
/// node with most room, so the first of these that matches is the step
/// that chose). `thread_homes`: whether thread homes were tried.
pub fn reasons(cands: &[NodeCand], p: &HomePlan, node_cpus: &[usize], thread_homes: bool) -> HashMap<u32, HomeWhy> {
    let busy: usize = cands.iter().map(|c| c.busy).sum();
    let room = rooms(busy, node_cpus).into_iter().max().unwrap_or(0);
    let nn = node_cpus.len();
    cands
        .iter()
        .map(|c| {
            let why = match p.procs.get(&c.pid).copied() {
                Some(n) if c.bound == Some(n) => HomeWhy::Kept { node: n },
                Some(n) if c.pref == Some(n) => HomeWhy::MemoryNode { node: n },
                Some(n) => HomeWhy::MostRoom { node: n },
                None if p.threads.values().any(|&(pid, _)| pid == c.pid) => {
                    HomeWhy::ThreadHomes { threads_per_node: p.threads_per_node(c.pid, nn) }
                }
                None => HomeWhy::NoRoom { busy: c.busy, room, thread_homes },
            };
            (c.pid, why)
        })
        .collect()
}

/// Each node's room for homed busy threads: its CPUs, capped at its fair
/// share of all candidates' busy threads (by CPUs, rounded up) plus
/// NUMA_IMBALANCE_MIN, so that homes never build an imbalance the NUMA
/// policy would not tolerate.
fn rooms(busy: usize, node_cpus: &[usize]) -> Vec<usize> {
    let cpus: usize = node_cpus.iter().sum();
    let slack = crate::numa::NUMA_IMBALANCE_MIN as usize;
    node_cpus.iter().map(|&c| if cpus == 0 { 0 } else { c.min((busy * c).div_ceil(cpus) + slack) }).collect()
}

/// A process that may get thread homes: its busy threads, each with the
/// node it last ran on and its current thread home, and its runtime per
/// node (which nodes it ran on most).
#[derive(Clone, Debug)]
pub struct ThreadCand {
    pub pid: u32,
    pub node_rt: Vec<f64>,
    pub threads: Vec<ThreadAt>,
}

#[derive(Clone, Copy, Debug)]
pub struct ThreadAt {
    pub tid: u32,
    pub node: Option<usize>,
    pub home: Option<usize>,
}

/// Thread homes for the processes in `spanning` (largest memory first)
/// within `room`, what each node has left; taken from `room` as assigned.
pub fn assign_thread_homes(spanning: &[ThreadCand], room: &mut [usize]) -> HashMap<u32, (u32, usize)> {
    let mut out = HashMap::new();
    for c in spanning {
        let rt = |n: usize| c.node_rt.get(n).copied().unwrap_or(0.0);
        let homed = |n: usize| c.threads.iter().filter(|t| t.home == Some(n)).count();
        let mut order: Vec<usize> = (0..room.len()).filter(|&n| room[n] > 0).collect();
        order.sort_by(|&a, &b| homed(b).cmp(&homed(a)).then(rt(b).total_cmp(&rt(a))).then(a.cmp(&b)));
        // the fewest nodes that hold every busy thread: those with its
        // thread homes first (a set once taken is kept), then those it ran
        // on most
        let (mut set, mut have) = (vec![], 0);
        for n in order {
            if have >= c.threads.len() {
                break;
            }
            set.push(n);
            have += room[n];
        }
        if have < c.threads.len() {
            continue;
        }
        let mut left: Vec<Option<&ThreadAt>> = c.threads.iter().map(Some).collect();
        let mut take = |t: &ThreadAt, n: usize, room: &mut [usize]| {
            room[n] -= 1;
            out.insert(t.tid, (c.pid, n));
        };
        // its home, then its node, while that is in the set with room
        for pick in [(|t: &ThreadAt| t.home) as fn(&ThreadAt) -> Option<usize>, |t| t.node] {
            for slot in left.iter_mut() {
                if let Some(n) = slot.and_then(pick).filter(|n| set.contains(n) && room[*n] > 0) {
                    take(slot.take().unwrap(), n, room);
                }
            }
        }
        // the rest: the set's node with most room
        for t in left.into_iter().flatten() {
            if let Some(&n) = set.iter().filter(|&&n| room[n] > 0).max_by_key(|&&n| (room[n], std::cmp::Reverse(n))) {
                take(t, n, room);
            }
        }
    }
    out
}

/// Whether a process with a thread found pinned now loses its homes (it
/// has chosen its CPUs). Not when it has homes and the last plan found none
/// of its threads pinned: a pin gone by the next plan (a thread moved with
/// taskset and let go) is a move, not a choice, and dropping the homes would
/// re-home every thread where it happens to be. A pin that lasts takes them
/// away one plan later; a process found pinned before it had homes never
/// gets any. @pinned_last: the processes the last plan found pinned.
pub fn pin_counts(pid: u32, homed: bool, pinned_last: &std::collections::HashSet<u32>) -> bool {
    !homed || pinned_last.contains(&pid)
}

/// The whole plan. Process homes first: assign_nodes() within rooms(), so
/// two 4-thread processes on 2 x 4 CPUs get a node each and one 8-thread
/// process on 2 x 8 CPUs gets none (it is spread). Then thread homes for
/// the processes in `spanning` that got none, in what room is left.
pub fn plan(cands: &[NodeCand], spanning: &[ThreadCand], node_cpus: &[usize]) -> HomePlan {
    let busy: usize = cands.iter().map(|c| c.busy).sum();
    let mut room = rooms(busy, node_cpus);
    let procs = assign_nodes(cands, &room);
    for c in cands {
        if let Some(&n) = procs.get(&c.pid) {
            room[n] = room[n].saturating_sub(c.busy);
        }
    }
    let rest: Vec<ThreadCand> = spanning.iter().filter(|s| !procs.contains_key(&s.pid)).cloned().collect();
    let threads = assign_thread_homes(&rest, &mut room);
    HomePlan { procs, threads }
}

impl Placer {
    /// Plan the home nodes of processes with two or more busy threads, and
    /// with --thread-home the thread homes of those spanning nodes
    /// (plan()); publish the plan when it changes.
    pub(crate) fn plan_homes(&mut self) {
        let all = self.known_cpus();
        // a thread someone pinned (taskset, numactl -N, the application)
        // has chosen its CPUs: its process gets no home
        let pinned = |pid: u32, p: &Proc| {
            std::iter::once(&pid)
                .chain(p.thread_rt.keys())
                .find(|&&tid| get_affinity(tid).is_some_and(|cur| !all.iter().all(|c| cur.contains(c))))
                .copied()
        };
        let homed = |pid: u32| {
            self.home_plan.procs.contains_key(&pid) || self.home_plan.threads.values().any(|&(p, _)| p == pid)
        };
        let mut why: HashMap<u32, HomeWhy> = HashMap::new();
        let mut pinned_now = std::collections::HashSet::new();
        for (&pid, p) in &self.procs {
            if p.busy < 2 {
                why.insert(pid, HomeWhy::FewBusy { busy: p.busy });
            } else if let Some(tid) = pinned(pid, p) {
                pinned_now.insert(pid);
                if pin_counts(pid, homed(pid), &self.pinned_last) {
                    why.insert(pid, HomeWhy::Pinned { tid });
                }
            }
        }
        self.pinned_last = pinned_now;
        let mut cands: Vec<NodeCand> = self
            .procs
            .iter()
            .filter(|(pid, _)| !why.contains_key(pid))
            .map(|(&pid, p)| NodeCand {
                pid,
                busy: p.busy,
                pages: p.pages.iter().sum(),
                pref: pref_node(&p.pages).or(p.home),
                bound: self.home_plan.procs.get(&pid).copied(),
            })
            .collect();
        cands.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.pid.cmp(&b.pid)));
        let spanning: Vec<ThreadCand> = if self.o.thread_homes {
            let was = &self.home_plan.threads;
            cands
                .iter()
                .filter_map(|c| self.procs.get(&c.pid).map(|p| (c.pid, p)))
                .map(|(pid, p)| ThreadCand {
                    pid,
                    node_rt: p.node_rt.clone(),
                    threads: p
                        .busy_threads
                        .iter()
                        .map(|&(tid, node)| ThreadAt { tid, node, home: was.get(&tid).map(|&(_, n)| n) })
                        .collect(),
                })
                .collect()
        } else {
            vec![]
        };
        let plan = plan(&cands, &spanning, &self.node_cpus());
        why.extend(reasons(&cands, &plan, &self.node_cpus(), self.o.thread_homes));
        if let Ok(mut h) = self.homes.lock() {
            h.why = why;
        }
        // a process with thread homes is active where they are: its memory
        // is planned for the nodes its threads are kept on, from this pass
        let nn = self.o.nr_nodes.max(1);
        let homed: std::collections::HashSet<u32> = plan.threads.values().map(|&(pid, _)| pid).collect();
        for pid in homed {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.active = plan.threads_per_node(pid, nn).iter().map(|&c| c > 0).collect();
            }
        }
        if plan == self.home_plan {
            return;
        }
        log::debug!("memory: home nodes {:?}, thread homes {:?}", plan.procs, plan.threads);
        let given = plan.threads.iter().filter(|(tid, h)| self.home_plan.threads.get(tid) != Some(h)).count();
        self.stats.lock().map(|mut s| s.thread_homes += given as u64).ok();
        if let Ok(mut h) = self.homes.lock() {
            h.gen += 1;
            h.plan = plan.clone();
        }
        self.home_plan = plan;
    }
}

/// Write `plan` (id -> node) into the BPF hash `map`, deleting the rest.
fn sync_map(map: &libbpf_rs::Map, plan: &HashMap<u32, usize>) {
    for key in map.keys().collect::<Vec<_>>() {
        let keep = key.len() >= 4 && plan.contains_key(&u32::from_ne_bytes(key[..4].try_into().unwrap()));
        if !keep {
            let _ = map.delete(&key);
        }
    }
    for (id, node) in plan {
        if let Err(e) = map.update(&id.to_ne_bytes(), &(*node as i32).to_ne_bytes(), MapFlags::ANY) {
            warn!("home node of {id}: {e}");
        }
    }
}

/// Copy the memory thread's home plan into proc_home and thread_home when
/// it changed, then bump home_gen so tasks re-read their home
/// (home.bpf.c). `synced` is the generation last copied.
pub fn sync(skel: &mut BpfSkel, homes: &Mutex<Homes>, synced: &mut u64) {
    let h = match homes.lock() {
        Ok(h) if h.gen != *synced => h.clone(),
        _ => return,
    };
    sync_map(&skel.maps.proc_home, &h.plan.procs);
    let threads: HashMap<u32, usize> = h.plan.threads.iter().map(|(&tid, &(_, n))| (tid, n)).collect();
    sync_map(&skel.maps.thread_home, &threads);
    if let Some(bss) = skel.maps.bss_data.as_mut() {
        bss.home_gen = h.gen;
    }
    *synced = h.gen;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::affinity::tests::cand;

    fn homes(cands: &[NodeCand], cpus: &[usize]) -> HashMap<u32, usize> {
        plan(cands, &[], cpus).procs
    }

    #[test]
    fn home_assignment() {
        // numa2 (2 x 4 CPUs), two 4-thread jbb instances, both with memory
        // on node 0: the larger takes node 0, the other node 1
        let two = [cand(1, 4, 900, Some(0), None), cand(2, 4, 800, Some(0), None)];
        let h = homes(&two, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&0), Some(&1)));
        // a current home is kept while it has room
        let kept = [cand(1, 4, 900, Some(0), Some(1)), cand(2, 4, 800, Some(0), Some(0))];
        let h = homes(&kept, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&1), Some(&0)));
        // one 8-thread process on 2 x 8 CPUs: fair share 4 + 2 < 8, no home
        assert!(homes(&[cand(3, 8, 900, Some(0), None)], &[8, 8]).is_empty());
        // a 2-thread pair alone gets one (share 1 + 2 >= 2)
        assert_eq!(homes(&[cand(4, 2, 10, Some(1), None)], &[8, 8]).get(&4), Some(&1));
        // more busy threads than the machine: each node's room is its CPUs
        let big = [cand(5, 6, 900, Some(0), None), cand(6, 6, 800, Some(1), None)];
        assert!(homes(&big, &[4, 4]).is_empty());
    }

    #[test]
    fn a_pin_takes_homes_away_only_when_it_lasts_or_came_first() {
        let none = std::collections::HashSet::new();
        let last: std::collections::HashSet<u32> = [7].into_iter().collect();
        // a process without homes found pinned: no homes
        assert!(pin_counts(7, false, &none));
        // a homed process found pinned for the first time: homes kept for this plan
        assert!(!pin_counts(7, true, &none));
        // still pinned at the next plan (whichever of its threads): homes taken away
        assert!(pin_counts(7, true, &last));
        // another process found pinned for the first time: kept
        assert!(!pin_counts(8, true, &last));
    }

    #[test]
    fn home_reasons() {
        let why = |cands: &[NodeCand], spanning: &[ThreadCand], cpus: &[usize]| {
            reasons(cands, &plan(cands, spanning, cpus), cpus, true)
        };
        // kept (its current home), memory node, most room (its memory's
        // node is taken): three 2-thread processes on 2 x 4 CPUs
        let c = [cand(1, 2, 900, Some(0), Some(1)), cand(2, 2, 800, Some(1), None), cand(3, 2, 700, Some(1), None)];
        let w = why(&c, &[], &[4, 4]);
        assert_eq!(w[&1], HomeWhy::Kept { node: 1 });
        assert_eq!(w[&2], HomeWhy::MemoryNode { node: 1 });
        assert_eq!(w[&3], HomeWhy::MostRoom { node: 0 });
        // a current home equal to the memory's node reads as kept
        let w = why(&[cand(4, 2, 10, Some(1), Some(1))], &[], &[8, 8]);
        assert_eq!(w[&4], HomeWhy::Kept { node: 1 });
        // one 8-thread process on 2 x 4 CPUs: no room (a node takes 4)
        let w = why(&[cand(5, 8, 900, Some(0), None)], &[], &[4, 4]);
        assert_eq!(w[&5], HomeWhy::NoRoom { busy: 8, room: 4, thread_homes: true });
        // the same with thread homes that fit: thread homes, per node
        let q4 = [2, 2, 2, 2];
        let a = span(6, &[9.0, 8.0, 1.0, 1.0], &[(61, 0, None), (62, 1, None), (63, 2, None), (64, 3, None)]);
        let w = why(&[cand(6, 4, 900, Some(0), None)], &[a], &q4);
        assert_eq!(w[&6], HomeWhy::ThreadHomes { threads_per_node: vec![2, 2, 0, 0] });
        // the JSON form names the rule
        let j = serde_json::to_value(HomeWhy::MemoryNode { node: 1 }).unwrap();
        assert_eq!(j, serde_json::json!({"rule": "memory_node", "node": 1}));
    }

    /// A spanning candidate: runtime per node, and (tid, node, home) per busy thread.
    fn span(pid: u32, node_rt: &[f64], threads: &[(u32, usize, Option<usize>)]) -> ThreadCand {
        ThreadCand {
            pid,
            node_rt: node_rt.to_vec(),
            threads: threads.iter().map(|&(tid, n, home)| ThreadAt { tid, node: Some(n), home }).collect(),
        }
    }

    fn nodes_of(p: &HomePlan, pid: u32, nn: usize) -> Vec<u32> {
        p.threads_per_node(pid, nn)
    }

    #[test]
    fn thread_homes() {
        let q4 = [2, 2, 2, 2];
        // numaq4, two 4-thread processes spread over all four nodes: each
        // takes the two nodes it ran on most, its threads two per node
        let a = span(1, &[9.0, 8.0, 1.0, 1.0], &[(11, 0, None), (12, 1, None), (13, 2, None), (14, 3, None)]);
        let b = span(2, &[1.0, 2.0, 7.0, 6.0], &[(21, 0, None), (22, 1, None), (23, 2, None), (24, 3, None)]);
        let cands = [cand(1, 4, 900, Some(0), None), cand(2, 4, 800, Some(2), None)];
        let p = plan(&cands, &[a.clone(), b.clone()], &q4);
        assert!(p.procs.is_empty());
        assert_eq!(nodes_of(&p, 1, 4), vec![2, 2, 0, 0]);
        assert_eq!(nodes_of(&p, 2, 4), vec![0, 0, 2, 2]);
        // threads already on one of the process's nodes stay there
        assert_eq!((p.threads[&11].1, p.threads[&12].1), (0, 1));
        // a set once taken is kept while it has room, even where the
        // process ran less
        let a3 = span(1, &[1.0, 1.0, 9.0, 9.0], &[(11, 2, Some(0)), (12, 3, Some(0)), (13, 2, Some(1)), (14, 3, None)]);
        assert_eq!(nodes_of(&plan(&cands[..1], &[a3], &q4), 1, 4), vec![2, 2, 0, 0]);
        // a home is kept while its node is one of the process's nodes
        let a2 = span(1, &[9.0, 8.0, 1.0, 1.0], &[(11, 1, Some(0)), (12, 0, Some(1)), (13, 0, Some(0)), (14, 1, Some(1))]);
        let p2 = plan(&cands[..1], &[a2], &q4);
        assert_eq!(
            (p2.threads[&11].1, p2.threads[&12].1, p2.threads[&13].1, p2.threads[&14].1),
            (0, 1, 0, 1)
        );
        // a process that fits one node gets a process home, no thread homes
        let small = span(3, &[1.0, 5.0], &[(31, 0, None), (32, 1, None)]);
        let p3 = plan(&[cand(3, 2, 100, Some(1), None)], &[small], &[4, 4]);
        assert_eq!((p3.procs.get(&3), p3.threads.len()), (Some(&1), 0));
        // more busy threads than the room left: none
        let huge = span(4, &[1.0, 1.0], &(0..10).map(|t| (40 + t, 0, None)).collect::<Vec<_>>());
        let p4 = plan(&[cand(4, 10, 100, None, None)], &[huge], &[4, 4]);
        assert!(p4.threads.is_empty() && p4.procs.is_empty());
        // thread homes go into what process homes leave: on numa2, beside
        // a 4-thread process homed on node 0, a 6-thread one does not fit
        // the 4 CPUs left and gets none
        let six = span(5, &[5.0, 5.0], &(0..6).map(|t| (50 + t, (t % 2) as usize, None)).collect::<Vec<_>>());
        let cands5 = [cand(6, 4, 900, Some(0), None), cand(5, 6, 800, None, None)];
        let p5 = plan(&cands5, &[six], &[4, 4]);
        assert_eq!(p5.procs.get(&6), Some(&0));
        assert!(p5.threads.is_empty(), "node 0 has no room left: {p5:?}");
    }
}
