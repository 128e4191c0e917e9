// SPDX-License-Identifier: GPL-2.0-only
//! What the memory thread publishes: MemStats, its counters, and MemProc,
//! one process. Plain data, read by stats.rs (the Metrics fields memory_*)
//! without depending on the agent; filled by publish() (mod.rs) and the
//! mover (migrate.rs, affinity.rs).

use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(desc = "memory placement: one process")]
pub struct MemProc {
    #[stat(desc = "process id (tgid)")]
    pub tgid: u32,
    #[stat(desc = "command")]
    pub comm: String,
    #[stat(desc = "home node")]
    pub home: i32,
    #[stat(desc = "active nodes")]
    pub active: Vec<u32>,
    #[stat(desc = "resident anonymous memory, MB")]
    pub rss_mb: f64,
    #[stat(desc = "memory locality: overlap of runtime and pages over nodes")]
    pub locality: f64,
    #[stat(desc = "pages per node")]
    pub pages_node: Vec<u64>,
    #[stat(desc = "pages migrated for this process")]
    pub pages_migrated: u64,
    #[stat(desc = "runtime seen, ms")]
    pub runtime_ms: f64,
    #[stat(desc = "node its threads are bound to (--memory-node-affinity), -1 if none")]
    pub bound_node: i32,
    #[stat(desc = "2 MB chunks written lately by one thread only (private), for a process spanning nodes")]
    pub private_chunks: u64,
    #[stat(desc = "2 MB chunks written by several threads, at once or taking turns (shared), for a process spanning nodes")]
    pub shared_chunks: u64,
    #[stat(desc = "2 MB chunks changing hands: a writer that moved node, or too little evidence yet (settling: left where they are)")]
    pub settling_chunks: u64,
    #[stat(desc = "its threads with a thread home, per node (a process spanning nodes; empty if none)")]
    pub thread_homes: Vec<u32>,
}

/// Pages move_pages(2) did not move, by cause: per-page status or the
/// whole call's error (EACCES: a target outside the task's cpuset, or a
/// page mapped by several processes; ENOMEM: no room on the target node;
/// EBUSY: a page busy or pinned; other: the rest, and pages the call
/// reported as not migrated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fails {
    pub eacces: u64,
    pub enomem: u64,
    pub ebusy: u64,
    pub other: u64,
}

impl Fails {
    pub fn total(&self) -> u64 {
        self.eacces + self.enomem + self.ebusy + self.other
    }

    /// Count `pages` refused with `errno` (positive).
    pub fn add(&mut self, errno: i32, pages: u64) {
        match errno {
            libc::EACCES => self.eacces += pages,
            libc::ENOMEM => self.enomem += pages,
            libc::EBUSY => self.ebusy += pages,
            _ => self.other += pages,
        }
    }

    pub fn plus(&mut self, o: &Fails) {
        self.eacces += o.eacces;
        self.enomem += o.enomem;
        self.ebusy += o.ebusy;
        self.other += o.other;
    }
}

#[derive(Clone, Debug, Default)]
pub struct MemStats {
    pub scans: u64,
    pub pages_migrated: u64,
    pub bytes_migrated: u64,
    pub move_failed: u64,
    pub peak_bytes_per_s: u64,
    pub budget_waits: u64,
    pub affinity_binds: u64,
    /// thread homes given or changed (home.rs)
    pub thread_homes: u64,
    pub affinity_unbinds: u64,
    /// pages refused per cause (move_failed is their sum)
    pub fail: Fails,
    /// mappings passed over while they back off after a failure
    pub backoffs: u64,
    /// queries of a mapping's page nodes that failed (the mapping changed
    /// under the agent, or the kernel refused): that mapping backs off
    pub query_failed: u64,
    /// processes left alone, once each, per cause (scope.rs)
    pub skip_rule: u64,
    pub skip_mlock: u64,
    pub skip_cpuset: u64,
    /// processes with mappings under an explicit memory policy
    pub skip_mempolicy: u64,
    /// pids seen again with another start time
    pub pid_reused: u64,
    /// CPU time the memory thread used
    pub cpu_ns: u64,
    /// of which sampling /proc and planning home nodes (sample(), then
    /// bind_nodes, plan_homes, watch_spanning)
    pub scan_cpu_ns: u64,
    /// of which in move_pages(2) calls that move (the kernel copies pages
    /// on this thread)
    pub move_cpu_ns: u64,
    /// move_pages(2) calls that move pages (each drains every CPU's LRU
    /// caches: a system-wide cost)
    pub move_calls: u64,
    /// numa_maps reads (each walks the process's page tables)
    pub maps_reads: u64,
    /// processes a pass left for a later one (scan budget)
    pub scan_deferred: u64,
    /// passes that read the /proc directory (roster.rs)
    pub proc_lists: u64,
    /// times the mover waited for the cap on move_pages(2) calls
    pub call_waits: u64,
    pub procs: BTreeMap<u32, MemProc>,
}
