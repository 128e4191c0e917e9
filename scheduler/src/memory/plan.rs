// SPDX-License-Identifier: GPL-2.0-only
//! Placement plan: which pages of which mapping go where (`--memory`).
//!
//! Placement (only anonymous memory: heap, stacks, anonymous mmaps; file
//! pages and shared library text are left alone, they are shared with other
//! processes; hugetlbfs is left alone):
//! - `local`: every process's pages go to its home node (also for
//!   multi-node processes: a simple "memory follows the majority" policy).
//! - `spread` (default): single-node processes as `local`. Multi-node
//!   processes: each mapping (VMA) is classified as private or shared (see
//!   below); a private mapping's pages go to the active node holding most
//!   of it; a shared mapping's pages that sit on an inactive node are
//!   spread over the active nodes (page index modulo the number of active
//!   nodes); pages already on an active node stay (no churn). Nothing ever
//!   moves to an inactive node.
//! - Hot memory: there is no access sampling; the resident pages of a
//!   process whose threads ran in the last interval are taken as hot.
//!   Processes are served in order of recent runtime, so the busiest comes
//!   first, and the budget bounds the rest.
//!
//! Private vs shared (the guess, and where it is weak): the kernel's NUMA
//! balancing learns it from hinting faults (which thread touched a page
//! last); without faults for sched_ext tasks we only have where pages are
//! now. A mapping whose resident pages are at least 80% on one node was
//! first-touched there, by threads that ran there: it is taken as private to
//! that node (glibc's per-thread malloc arenas and thread stacks look like
//! this), and its stragglers join it. A mapping with no dominant node, or
//! with pages mapped more than once (numa_maps `mapmax>1`, e.g. shared
//! after fork), is taken as shared. Weak: (1) a thread that moves to
//! another node for good leaves its private memory behind as long as both
//! nodes stay active, because the mapping still looks private to the old
//! node; (2) one big mapping holding both shared data and per-thread parts
//! (one malloc arena serving several threads, one mmap sliced between
//! threads as OpenMP programs do) is judged as a whole; (3) a shared table
//! first-touched by one thread looks private to that thread's node and is
//! not spread. Single-node processes need no guess: everything goes home.
//!
//! numa_maps is parsed here (parse_numa_maps_line): the procfs crate has no
//! reader for it.
//!
//! Knob: `--memory=off|local|spread`. Stats: per process (memory_procs)
//! pages_node, rss_mb (anonymous pages from numa_maps).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::migrate::vma_ends;
use super::{read, MemoryMode, Placer, QUIET_SCANS};

/// A mapping with this share of its pages on one node is private to it.
pub const PRIVATE_SHARE: f64 = 0.80;

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
    /// pages on inactive nodes spread over these (page index modulo len)
    Spread(Vec<usize>),
}

impl Target {
    /// Desired node of the page at index `idx` now on `cur`, if it should move.
    pub fn want(&self, idx: u64, cur: usize, active: &[bool]) -> Option<usize> {
        match self {
            Target::Keep => None,
            Target::Node(n) => (cur != *n).then_some(*n),
            Target::Spread(nodes) => {
                if nodes.is_empty() || active.get(cur).copied().unwrap_or(false) {
                    None
                } else {
                    Some(nodes[(idx % nodes.len() as u64) as usize])
                }
            }
        }
    }
}

/// The placement decision for one mapping of a process.
pub fn plan_vma(mode: MemoryMode, v: &Vma, active: &[bool], home: usize) -> Target {
    if mode == MemoryMode::Off || !v.default_policy || v.file || v.huge || v.anon == 0 || v.total() == 0 {
        return Target::Keep;
    }
    let on = |n: usize| v.nodes.get(n).copied().unwrap_or(0);
    let act: Vec<usize> = (0..active.len()).filter(|&n| active[n]).collect();
    let single = act.len() <= 1;
    if mode == MemoryMode::Local || single {
        return if on(home) == v.total() { Target::Keep } else { Target::Node(home) };
    }
    // multi-node process, spread mode
    let (dom, dom_pages) = act.iter().map(|&n| (n, on(n))).max_by_key(|&(_, c)| c).unwrap();
    if v.mapmax <= 1 && dom_pages as f64 >= PRIVATE_SHARE * v.total() as f64 {
        return if dom_pages == v.total() { Target::Keep } else { Target::Node(dom) };
    }
    let on_inactive: u64 = (0..v.nodes.len()).filter(|&n| !active.get(n).copied().unwrap_or(false)).map(on).sum();
    if on_inactive == 0 {
        Target::Keep
    } else {
        Target::Spread(act)
    }
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
        let vmas: Vec<Vma> = text.lines().filter_map(parse_numa_maps_line).collect();
        self.note_policy(pid, &vmas);
        let pages = self.anon_pages(&vmas);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.pages = pages;
            p.maps_scan = scan;
            p.dirty = false;
        }
        let work: Vec<(u64, Target)> = vmas
            .iter()
            .map(|v| (v.start, plan_vma(self.o.mode, v, &active, home)))
            .filter(|(_, t)| *t != Target::Keep)
            .collect();
        if let Some(p) = self.procs.get_mut(&pid) {
            p.quiet_until = if work.is_empty() { scan + QUIET_SCANS } else { 0 };
            p.quiet_key = key;
        }
        if work.is_empty() {
            return;
        }
        let ends = vma_ends(pid);
        for (start, target) in &work {
            let Some(&end) = ends.get(start) else { continue };
            if !self.move_vma(pid, *start, end, target, &active, stop, deadline) {
                return;
            }
        }
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
        let one = [true, false];
        let both = [true, true];
        // single-node process: everything home
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[2, 8]), &one, 0), Target::Node(0));
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[10, 0]), &one, 0), Target::Keep);
        // off, files, huge, no anon: keep
        assert_eq!(plan_vma(MemoryMode::Off, &vma(10, &[2, 8]), &one, 0), Target::Keep);
        let mut f = vma(10, &[2, 8]);
        f.file = true;
        assert_eq!(plan_vma(MemoryMode::Local, &f, &one, 0), Target::Keep);
        assert_eq!(plan_vma(MemoryMode::Local, &vma(0, &[2, 8]), &one, 0), Target::Keep);
        // an explicit policy (numactl -m, mbind, set_mempolicy) is the application's word: keep
        let mut b = vma(10, &[2, 8]);
        b.default_policy = false;
        assert_eq!(plan_vma(MemoryMode::Spread, &b, &one, 0), Target::Keep);
        // multi-node, local mode: home
        assert_eq!(plan_vma(MemoryMode::Local, &vma(10, &[2, 8]), &both, 0), Target::Node(0));
        // multi-node, spread: private (>= 80% on one node) consolidates there
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[1, 9]), &both, 0), Target::Node(1));
        // shared (no dominant node) and all on active nodes: keep
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[4, 6]), &both, 0), Target::Keep);
        // shared with pages on an inactive node: spread over the active ones
        let three = [true, true, false];
        assert_eq!(
            plan_vma(MemoryMode::Spread, &vma(10, &[3, 3, 4]), &three, 0),
            Target::Spread(vec![0, 1])
        );
        // mapmax > 1: shared even if dominant
        let mut m = vma(10, &[1, 0, 9]);
        m.mapmax = 2;
        assert_eq!(plan_vma(MemoryMode::Spread, &m, &three, 1), Target::Spread(vec![0, 1]));
        // private on an inactive node is never a target: goes to the dominant active node
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[0, 1, 9]), &three, 0), Target::Spread(vec![0, 1]));
        assert_eq!(plan_vma(MemoryMode::Spread, &vma(10, &[9, 0, 1]), &three, 1), Target::Node(0));
    }

    #[test]
    fn target_wants() {
        let act = [true, true, false];
        assert_eq!(Target::Node(0).want(5, 1, &act), Some(0));
        assert_eq!(Target::Node(0).want(5, 0, &act), None);
        let s = Target::Spread(vec![0, 1]);
        assert_eq!(s.want(4, 0, &act), None); // already on an active node
        assert_eq!(s.want(4, 2, &act), Some(0));
        assert_eq!(s.want(5, 2, &act), Some(1));
        assert_eq!(Target::Keep.want(0, 2, &act), None);
    }

}
