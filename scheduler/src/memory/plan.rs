// SPDX-License-Identifier: GPL-2.0-only
//! Placement plan: which pages of which mapping go where (`--memory`).
//!
//! Placement (only anonymous memory: heap, stacks, anonymous mmaps; file
//! pages and shared library text are left alone, they are shared with other
//! processes; hugetlbfs is left alone):
//! - `local`: every process's pages go to its home node (also for
//!   multi-node processes: a simple "memory follows the majority" policy).
//! - `spread` (default): single-node processes as `local`. A process whose
//!   threads run on several nodes (active nodes, sample.rs) is planned per
//!   2 MB chunk from the evidence of who writes it (evidence.rs): a chunk
//!   private to a thread goes to that thread's node; shared memory (written
//!   by several threads, or not written at all) is balanced over the active
//!   nodes, moving only the surplus of a node above its even share
//!   (`SharedPlan`). Nothing ever moves to an inactive node. A process is
//!   planned only once a full pass of evidence has been gathered.
//! - Hot memory: there is no access sampling; the resident pages of a
//!   process whose threads ran in the last interval are taken as hot.
//!   Processes are served in order of recent runtime, so the busiest comes
//!   first, and the budget bounds the rest.
//!
//! numa_maps is parsed here (parse_numa_maps_line): the procfs crate has no
//! reader for it.
//!
//! Knob: `--memory=off|local|spread`. Stats: per process (memory_procs)
//! pages_node, rss_mb (anonymous pages from numa_maps).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::evidence::{Evidence, SharedPlan, Use, CHUNK_SHIFT};
use super::pages::{page_nodes, vma_ends};
use super::{read, MemoryMode, Placer, QUIET_SCANS};

/// The census of shared pages in mappings that also hold private chunks
/// asks the node of one page in this many.
const CENSUS_STEP: u64 = 16;

/// One line of /proc/<pid>/numa_maps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vma {
    pub start: u64,
    /// the memory policy is the default (or "local"): no explicit binding
    pub default_policy: bool,
    pub file: bool,
    pub huge: bool,
    pub anon: u64,
    pub mapmax: u64,
    pub page_kb: u64,
    /// pages per node (index = node)
    pub nodes: Vec<u64>,
}

impl Vma {
    pub fn total(&self) -> u64 {
        self.nodes.iter().sum()
    }
}

pub fn parse_numa_maps_line(line: &str) -> Option<Vma> {
    let mut it = line.split_whitespace();
    let start = u64::from_str_radix(it.next()?, 16).ok()?;
    let policy = it.next()?;
    let default_policy = policy == "default" || policy == "local";
    let mut v = Vma { start, default_policy, mapmax: 1, page_kb: 4, ..Default::default() };
    for tok in it {
        if tok == "huge" {
            v.huge = true;
        } else if let Some((k, val)) = tok.split_once('=') {
            match k {
                "file" => v.file = true,
                "anon" => v.anon = val.parse().unwrap_or(0),
                "mapmax" => v.mapmax = val.parse().unwrap_or(1),
                "kernelpagesize_kB" => v.page_kb = val.parse().unwrap_or(4),
                _ if k.len() > 1 && k.starts_with('N') => {
                    if let (Ok(n), Ok(c)) = (k[1..].parse::<usize>(), val.parse::<u64>()) {
                        if n < 4096 {
                            if v.nodes.len() <= n {
                                v.nodes.resize(n + 1, 0);
                            }
                            v.nodes[n] += c;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Some(v)
}

/// Where the pages of one mapping should go.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// leave it
    Keep,
    /// every page to this node
    Node(usize),
    /// a mapping of a process spanning nodes: by chunk
    Mixed(Box<Mixed>),
}

/// The plan of one mapping of a process that spans nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Mixed {
    /// chunks (address >> CHUNK_SHIFT) private to a node
    pub private: HashMap<u64, usize>,
    /// chunks changing hands (Use::Settling): left where they are
    pub hold: HashSet<u64>,
    /// shared chunks: the node that wrote each most, where known
    pub lean: HashMap<u64, usize>,
    /// the process's plan for its shared pages
    pub shared: Arc<SharedPlan>,
}

impl Target {
    /// Desired node of the page at `addr` now on `cur`, if it should move.
    pub fn want(&self, addr: u64, cur: usize) -> Option<usize> {
        match self {
            Target::Keep => None,
            Target::Node(n) => (cur != *n).then_some(*n),
            Target::Mixed(m) => {
                let c = addr >> CHUNK_SHIFT;
                match m.private.get(&c) {
                    Some(&n) => (cur != n).then_some(n),
                    None if m.hold.contains(&c) => None,
                    None => m.shared.want(c, cur, m.lean.get(&c).copied()),
                }
            }
        }
    }
}

/// Anonymous memory placement may touch: default policy (an explicit one,
/// numactl -m, mbind(2), set_mempolicy(2), is the application's word), not
/// a file, not hugetlbfs, resident.
pub fn movable(v: &Vma) -> bool {
    v.default_policy && !v.file && !v.huge && v.anon > 0 && v.total() > 0
}

/// Single-node processes, and every process under `--memory=local`: the
/// whole mapping to the home node.
pub fn plan_vma(mode: MemoryMode, v: &Vma, home: usize) -> Target {
    if mode == MemoryMode::Off || !movable(v) || v.nodes.get(home).copied().unwrap_or(0) == v.total() {
        Target::Keep
    } else {
        Target::Node(home)
    }
}

/// The chunks of [start, end).
fn chunks(start: u64, end: u64) -> std::ops::RangeInclusive<u64> {
    (start >> CHUNK_SHIFT)..=((end.max(start + 1) - 1) >> CHUNK_SHIFT)
}

/// A mapping of a process spanning nodes (`--memory=spread`): private
/// chunks to their node, settling chunks left alone, shared pages by the
/// process's SharedPlan.
pub fn plan_spanning_vma(v: &Vma, end: u64, ev: &Evidence, shared: &Arc<SharedPlan>) -> Target {
    if !movable(v) {
        return Target::Keep;
    }
    let mut private = HashMap::new();
    let mut hold = HashSet::new();
    let mut lean = HashMap::new();
    for c in chunks(v.start, end) {
        match ev.use_of(c) {
            Use::Private(n) => {
                private.insert(c, n);
            }
            Use::Settling => {
                hold.insert(c);
            }
            Use::Shared => {
                if let Some(n) = ev.lean(c) {
                    lean.insert(c, n);
                }
            }
        }
    }
    let on = |n: usize| v.nodes.get(n).copied().unwrap_or(0);
    if private.is_empty() && hold.is_empty() {
        // all shared: only if a node holding some of it gives pages away
        if (0..v.nodes.len()).all(|n| on(n) == 0 || shared.give.get(n).copied().unwrap_or(1.0) <= 0.0) {
            return Target::Keep;
        }
    } else if private.len() as u64 == chunks(v.start, end).count() as u64 {
        // all private to one node: the fast path
        let mut nodes = private.values();
        let n = *nodes.next().unwrap();
        if nodes.all(|&m| m == n) {
            return if on(n) == v.total() { Target::Keep } else { Target::Node(n) };
        }
    }
    Target::Mixed(Box::new(Mixed { private, hold, lean, shared: shared.clone() }))
}

impl Placer {
    /// Move pages of the processes that ran, busiest first, within the
    /// budget, until `deadline`.
    pub(super) fn place(&mut self, stop: &AtomicBool, deadline: Instant) {
        let mut order: Vec<(u64, u32)> =
            self.procs.iter().filter(|(_, p)| p.recent > 0).map(|(&pid, p)| (p.recent, pid)).collect();
        order.sort_unstable_by(|a, b| b.cmp(a));
        for (_, pid) in order {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                break;
            }
            self.place_proc(pid, stop, deadline);
        }
        self.publish();
    }

    fn place_proc(&mut self, pid: u32, stop: &AtomicBool, deadline: Instant) {
        let scan = self.scan;
        let Some(p) = self.procs.get(&pid) else { return };
        let Some(home) = p.home else { return };
        let active = p.active.clone();
        let spanning = self.o.mode == MemoryMode::Spread && p.spans_nodes();
        if self.o.mode == MemoryMode::Spread && !spanning && p.busy > self.node_cpus().get(home).copied().unwrap_or(0) {
            // more busy threads than its home node has CPUs: it spans nodes,
            // its active nodes are still being learnt; pulling everything
            // home now would be undone in a few passes
            return;
        }
        let key = (p.home, active.clone());
        // numa_maps walks the page tables: do not read it every interval
        // for a process that had nothing to move and has not changed
        if scan < p.quiet_until && key == p.quiet_key {
            return;
        }
        let Some(text) = read(&format!("/proc/{pid}/numa_maps")) else {
            self.procs.remove(&pid);
            return;
        };
        self.stats.lock().map(|mut s| s.maps_reads += 1).ok();
        let vmas: Vec<Vma> = text.lines().filter_map(parse_numa_maps_line).collect();
        self.note_policy(pid, &vmas);
        let pages = self.anon_pages(&vmas);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.pages = pages;
            p.maps_scan = scan;
            p.dirty = false;
        }
        let ends = vma_ends(pid);
        let work: Vec<(u64, Target)> = if spanning {
            // planned from a full pass of evidence (evidence.rs), armed by watch_spanning()
            let Some(ev) = self.evidence.get(&pid).filter(|e| e.ready(scan)) else { return };
            let Some(census) = self.shared_pages(pid, &vmas, &ends, ev) else { return };
            let shared = Arc::new(SharedPlan::new(&census, &ev.active));
            log::debug!(
                "memory: {pid} spans {:?}: chunks (private, shared) {:?}, shared pages per node {census:?}, give {:?}",
                (0..ev.active.len()).filter(|&n| ev.active[n]).collect::<Vec<_>>(),
                ev.counts(),
                shared.give
            );
            vmas.iter()
                .filter_map(|v| Some((v.start, plan_spanning_vma(v, *ends.get(&v.start)?, ev, &shared))))
                .filter(|(_, t)| *t != Target::Keep)
                .collect()
        } else {
            vmas.iter().map(|v| (v.start, plan_vma(self.o.mode, v, home))).filter(|(_, t)| *t != Target::Keep).collect()
        };
        if let Some(p) = self.procs.get_mut(&pid) {
            p.quiet_until = if work.is_empty() { scan + QUIET_SCANS } else { 0 };
            p.quiet_key = key;
        }
        if let Some(ev) = self.evidence.get_mut(&pid) {
            ev.settle(work.is_empty());
        }
        for (start, target) in &work {
            let Some(&end) = ends.get(start) else { continue };
            if !self.move_vma(pid, *start, end, target, stop, deadline) {
                return;
            }
        }
    }

    /// Shared (not private) anonymous pages per node of a process spanning
    /// nodes: numa_maps' counts for a mapping with no private chunk, a
    /// sampled query of the shared chunks' pages for a mapping with some.
    /// None if the process is gone.
    fn shared_pages(
        &self,
        pid: u32,
        vmas: &[Vma],
        ends: &HashMap<u64, u64>,
        ev: &Evidence,
    ) -> Option<Vec<u64>> {
        let mut out = vec![0u64; self.o.nr_nodes.max(1)];
        for v in vmas.iter().filter(|v| movable(v)) {
            let Some(&end) = ends.get(&v.start) else { continue };
            let shared: Vec<u64> =
                chunks(v.start, end).filter(|&c| ev.use_of(c) == Use::Shared).collect();
            if shared.len() as u64 == chunks(v.start, end).count() as u64 {
                for (n, o) in self.anon_pages(std::slice::from_ref(v)).iter().zip(out.iter_mut()) {
                    *o += n;
                }
                continue;
            }
            for c in shared {
                let (cs, ce) = ((c << CHUNK_SHIFT).max(v.start), ((c + 1) << CHUNK_SHIFT).min(end));
                // one page in CENSUS_STEP stands for its neighbours (a huge page is on one node)
                let addrs: Vec<u64> = (cs..ce).step_by((self.page * CENSUS_STEP) as usize).collect();
                let st = match page_nodes(pid, &addrs) {
                    Ok(st) => st,
                    Err(libc::ESRCH) => return None,
                    Err(_) => continue,
                };
                for s in st {
                    if let Some(o) = usize::try_from(s).ok().and_then(|n| out.get_mut(n)) {
                        *o += CENSUS_STEP;
                    }
                }
            }
        }
        Some(out)
    }

    /// Anonymous resident pages per node (in base pages) of these mappings.
    pub(super) fn anon_pages(&self, vmas: &[Vma]) -> Vec<u64> {
        let mut pages = vec![0u64; self.o.nr_nodes.max(1)];
        for v in vmas {
            if v.file || v.huge || v.anon == 0 {
                continue;
            }
            for (n, c) in v.nodes.iter().enumerate() {
                if n < pages.len() {
                    // numa_maps counts in kernelpagesize units
                    pages[n] += c * (v.page_kb * 1024 / self.page).max(1);
                }
            }
        }
        pages
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::evidence::PRIVATE_WINDOWS;

    #[test]
    fn numa_maps_lines() {
        let v = parse_numa_maps_line(
            "7f0c2c000000 default anon=25600 dirty=25600 active=0 N0=1024 N1=24576 kernelpagesize_kB=4",
        )
        .unwrap();
        assert_eq!(v.start, 0x7f0c2c000000);
        assert_eq!((v.anon, v.file, v.huge, v.mapmax), (25600, false, false, 1));
        assert_eq!(v.nodes, vec![1024, 24576]);
        assert_eq!(v.total(), 25600);
        let f = parse_numa_maps_line(
            "5581f2a00000 default file=/usr/bin/jbb\\ x mapped=3 mapmax=4 N1=3 kernelpagesize_kB=4",
        )
        .unwrap();
        assert!(f.file);
        assert_eq!(f.mapmax, 4);
        assert_eq!(f.nodes, vec![0, 3]);
        let h = parse_numa_maps_line("7f0000000000 default file=/mnt/h huge dirty=1 N0=1 kernelpagesize_kB=2048")
            .unwrap();
        assert!(h.huge && h.page_kb == 2048);
        assert!(v.default_policy && h.default_policy);
        assert!(!parse_numa_maps_line("7f0000000000 bind:1 anon=1 N1=1").unwrap().default_policy);
        assert!(!parse_numa_maps_line("7f0000000000 interleave:0-1 anon=1 N1=1").unwrap().default_policy);
        assert!(parse_numa_maps_line("7f0000000000 local anon=1 N1=1").unwrap().default_policy);
        let s = parse_numa_maps_line("7ffd10000000 default stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4").unwrap();
        assert_eq!((s.anon, s.nodes.clone()), (3, vec![0, 3]));
        // no pages resident: no N entries
        let e = parse_numa_maps_line("7f0000001000 interleave:0-1").unwrap();
        assert_eq!(e.total(), 0);
        assert!(parse_numa_maps_line("").is_none());
        assert!(parse_numa_maps_line("7f0000001000").is_none());
        assert!(parse_numa_maps_line("zzz default").is_none());
    }

    fn vma(anon: u64, nodes: &[u64]) -> Vma {
        Vma {
            start: 0x1000,
            default_policy: true,
            anon,
            mapmax: 1,
            page_kb: 4,
            nodes: nodes.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn plans() {
        // single-node process or --memory=local: everything home
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[2, 8]), 0), Target::Node(0));
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[10, 0]), 0), Target::Keep);
        assert_eq!(plan_vma(MemoryMode::Local, &vma(10, &[2, 8]), 0), Target::Node(0));
        // off, files, huge, no anon: keep
        assert_eq!(plan_vma(MemoryMode::Off, &vma(10, &[2, 8]), 0), Target::Keep);
        let mut f = vma(10, &[2, 8]);
        f.file = true;
        assert_eq!(plan_vma(MemoryMode::Local, &f, 0), Target::Keep);
        assert_eq!(plan_vma(MemoryMode::Local, &vma(0, &[2, 8]), 0), Target::Keep);
        // an explicit policy (numactl -m, mbind, set_mempolicy) is the application's word: keep
        let mut b = vma(10, &[2, 8]);
        b.default_policy = false;
        assert_eq!(plan_vma(MemoryMode::Spread, &b, 0), Target::Keep);
    }

    /// Evidence of PRIVATE_WINDOWS windows, each with `faults[n]` write faults from a
    /// thread of node n in each chunk of [start, start + nr chunks).
    fn evidence(start: u64, faults: &[&[u64]]) -> Evidence {
        let mut e = Evidence::default();
        for scan in 1..=PRIVATE_WINDOWS as u64 {
            for (i, f) in faults.iter().enumerate() {
                for (n, &c) in f.iter().enumerate() {
                    if c > 0 {
                        e.add((start >> CHUNK_SHIFT) + i as u64, 100 + n as u32, n, c);
                    }
                }
            }
            e.arm_due(scan, &[true, true]);
        }
        e
    }

    #[test]
    fn spanning_processes_are_planned_by_chunk() {
        const MB2: u64 = 1 << CHUNK_SHIFT;
        let both = [true, true];
        let start = 0x7f00_0000_0000u64;
        let v = Vma { start, ..vma(1024, &[1024, 0]) };
        let end = start + 4 * MB2;
        let even = Arc::new(SharedPlan::new(&[500, 500], &both));
        let lopsided = Arc::new(SharedPlan::new(&[1000, 0], &both));
        // a heap used by threads of both nodes, all of it on node 0 (first-touched
        // there): not "private to node 0", as the rule from where pages sat had it
        let e = evidence(start, &[&[5, 5], &[0, 0], &[3, 4], &[9, 8]]);
        let t = plan_spanning_vma(&v, end, &e, &lopsided);
        let Target::Mixed(m) = &t else { panic!("{t:?}") };
        assert!(m.private.is_empty());
        let moved = (0..2048u64).filter(|i| t.want(start + i * 4096, 0) == Some(1)).count();
        // whole chunks: 0, 512, 1024, 1536 or 2048 of the 4 chunks' pages
        assert!(moved % 512 == 0 && moved > 0, "{moved}");
        // the same mapping when the process's shared memory is already spread: kept
        assert_eq!(plan_spanning_vma(&v, end, &e, &even), Target::Keep);
        // of the chunks the hash picks, one written mostly from node 0, where
        // it sits, stays; one written mostly from node 1 goes there
        let e = evidence(start, &[&[6, 3], &[3, 6], &[6, 3], &[3, 6]]);
        let t = plan_spanning_vma(&v, end, &e, &lopsided);
        let Target::Mixed(m) = &t else { panic!("{t:?}") };
        let c0 = start >> CHUNK_SHIFT;
        assert_eq!(m.lean, HashMap::from([(c0, 0), (c0 + 1, 1), (c0 + 2, 0), (c0 + 3, 1)]));
        let picked: Vec<u64> = (0..4).filter(|&i| lopsided.want(c0 + i, 0, None).is_some()).collect();
        assert!(!picked.is_empty());
        for i in 0..4 {
            let want = t.want(start + i * MB2, 0);
            assert_eq!(want, (picked.contains(&i) && i % 2 == 1).then_some(1), "chunk {i}");
        }
        // chunks written by one thread go to its node, the rest follow the shared plan
        let e = evidence(start, &[&[6, 0], &[0, 6], &[3, 3], &[0, 0]]);
        let t = plan_spanning_vma(&v, end, &e, &even);
        let Target::Mixed(m) = &t else { panic!("{t:?}") };
        assert_eq!(m.private, HashMap::from([(start >> CHUNK_SHIFT, 0), ((start >> CHUNK_SHIFT) + 1, 1)]));
        assert_eq!(t.want(start + MB2 + 4096, 0), Some(1));
        assert_eq!(t.want(start + 4096, 1), Some(0));
        assert_eq!(t.want(start + 2 * MB2, 0), None);
        // a chunk whose writer just moved to another node is left where it is
        let mut e = evidence(start, &[&[6, 0], &[0, 6], &[3, 3], &[0, 0]]);
        e.add(start >> CHUNK_SHIFT, 100, 1, 1);
        e.arm_due(PRIVATE_WINDOWS as u64 + 1, &[true, true]);
        let t = plan_spanning_vma(&v, end, &e, &lopsided);
        let Target::Mixed(m) = &t else { panic!("{t:?}") };
        assert_eq!(m.hold, HashSet::from([start >> CHUNK_SHIFT]));
        assert_eq!(t.want(start + 4096, 0), None);
        assert_eq!(t.want(start + 4096, 1), None);
        // every chunk private to one node: the whole mapping goes there
        let e = evidence(start, &[&[0, 6], &[0, 6], &[1, 19], &[0, 3]]);
        assert_eq!(plan_spanning_vma(&v, end, &e, &even), Target::Node(1));
        let on1 = Vma { start, ..vma(1024, &[0, 1024]) };
        assert_eq!(plan_spanning_vma(&on1, end, &e, &even), Target::Keep);
        // an explicit policy is kept here too
        let mut b = v.clone();
        b.default_policy = false;
        assert_eq!(plan_spanning_vma(&b, end, &e, &lopsided), Target::Keep);
    }

    #[test]
    fn target_wants() {
        assert_eq!(Target::Node(0).want(5 * 4096, 1), Some(0));
        assert_eq!(Target::Node(0).want(5 * 4096, 0), None);
        assert_eq!(Target::Keep.want(0, 2), None);
    }
}
