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
    pub affinity_unbinds: u64,
    pub procs: BTreeMap<u32, MemProc>,
}
