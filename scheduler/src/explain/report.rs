// SPDX-License-Identifier: GPL-2.0-only
//! What `explain` answers: the JSON of `--json` (Report, TopReport) and
//! what the main loop hands the reader (AgentView). The schema is documented
//! in scheduler/README.md ("scx_locality explain"); a change to a field
//! there bumps SCHEMA_VERSION.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::cache::CacheProc;
use crate::memory::home::Homes;
use crate::memory::report::MemProc;

pub const SCHEMA_VERSION: u32 = 1;

/// What the agent knows that /proc does not: its settings, its topology
/// and the memory thread's last pass. Built by the main loop on request
/// (cheap clones), read on the server's reader thread.
#[derive(Clone, Debug, Default)]
pub struct AgentView {
    pub cfg: AgentCfg,
    /// memory_procs of the last pass (processes of 16 MB or more)
    pub mem: BTreeMap<u32, MemProc>,
    pub homes: Homes,
    /// the cache-aware policy's processes (empty when it is off)
    pub cache: Vec<CacheProc>,
    /// the last decision records per process (tgid), oldest first
    pub decisions: BTreeMap<u32, Vec<crate::decisions::Decision>>,
}

/// The agent's settings and topology, fixed while it runs.
#[derive(Clone, Debug, Default)]
pub struct AgentCfg {
    /// (node, LLC) of each CPU id; None: not a possible CPU
    pub cpus: Vec<Option<(usize, usize)>>,
    pub nr_nodes: usize,
    pub nr_llcs: usize,
    /// what runs: "off" when the memory thread does not
    pub memory_mode: String,
    /// why the memory thread does not run (empty when it does)
    pub memory_off_why: String,
    pub home_nodes: bool,
    /// why home nodes are off (empty when on)
    pub home_off_why: String,
    pub cache_aware: bool,
    pub budget_mbps: u64,
    pub interval_ms: u64,
    /// --memory-include / --memory-exclude, if any
    pub scope: String,
    /// --decision-rate: records per second per CPU, 0 none
    pub decision_rate: u64,
}

/// `explain PID`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub pid: u32,
    pub comm: String,
    /// /sys/kernel/sched_ext/root/ops
    pub scheduler: String,
    /// the interval the shares are of, s
    pub interval_s: f64,
    pub nr_nodes: usize,
    pub nr_llcs: usize,
    pub threads: Vec<Thread>,
    /// threads beyond MAX_THREADS: counted, not sampled
    pub threads_not_sampled: usize,
    pub process: Share,
    pub home: Reason,
    pub memory_home: MemHome,
    pub pref_llc: Reason,
    pub memory: Memory,
    pub plan: Plan,
    #[serde(default)]
    pub decisions: Decisions,
}

/// The last placement decisions that touched the process's threads, from
/// the decision record (decide.bpf.c): at most `rate_per_cpu` records per
/// second per CPU are written, so these are samples, not every decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    pub rate_per_cpu: u64,
    /// oldest first
    pub items: Vec<DecisionItem>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionItem {
    /// how long before the report, ms
    pub age_ms: f64,
    pub tid: u32,
    /// move_llc, move_node or refused
    pub kind: String,
    pub from_cpu: i32,
    /// -1: a move towards another node, no CPU chosen
    pub to_cpu: i32,
    pub from_node: i32,
    pub to_node: i32,
    /// the rule: the stats counter it bumps (a Metrics field), or
    /// idle_search (the wake-up's search for an idle CPU)
    pub rule: String,
    /// what the rule does, in words
    pub text: String,
}

/// One thread: where it is now and where it ran in the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: u32,
    pub comm: String,
    /// SCHED_OTHER, SCHED_FIFO, ... (stat field 41)
    pub policy: String,
    pub on_scx: bool,
    /// R, S, D... (stat field 3)
    pub state: String,
    /// the CPU it runs on or last ran on (stat field 39), its LLC and node
    pub cpu: i32,
    pub llc: i32,
    pub node: i32,
    pub run_ms: f64,
    /// share of its runtime in the interval per node / per LLC (index)
    pub node_share: Vec<f64>,
    pub llc_share: Vec<f64>,
    /// its thread home (a process spanning nodes), -1 if none
    pub thread_home: i32,
}

/// The process's runtime in the interval and its split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub run_ms: f64,
    pub node_share: Vec<f64>,
    pub llc_share: Vec<f64>,
    /// threads on each node now (by the CPU each last ran on)
    pub threads_per_node: Vec<u32>,
}

/// A choice and why: `value` (a node, an LLC; -1 for none), a stable
/// `reason` code and a sentence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub value: i32,
    pub reason: String,
    pub text: String,
    /// home only: threads with a thread home per node (empty if none)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_homes: Vec<u32>,
}

/// The memory agent's own home node (busiest node by decayed runtime) and
/// active nodes, and its measure of locality.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemHome {
    pub tracked: bool,
    pub node: i32,
    pub active: Vec<u32>,
    /// overlap of runtime and pages over nodes, -1 if unknown
    pub locality: f64,
}

/// Memory per node by class, from /proc/PID/numa_maps read now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub mode: String,
    pub nodes: Vec<NodeMem>,
    /// for a process spanning nodes: its 2 MB chunks by the writers the
    /// agent saw (memory.bpf.c's fault counts)
    pub chunks_private: u64,
    pub chunks_shared: u64,
    pub chunks_settling: u64,
    pub migrated_mb: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMem {
    pub node: usize,
    /// anonymous, default policy, mapped by this process only
    pub private_mb: f64,
    /// anonymous, default policy, mapped by several processes (mapmax > 1)
    pub shared_mb: f64,
    /// file-backed, default policy
    pub file_mb: f64,
    /// under a policy the application set (bind, interleave, prefer...)
    pub bound_mb: f64,
}

/// What the agent would move next, and what it leaves alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub next: Vec<Move>,
    pub next_mb: f64,
    pub reason: String,
    pub text: String,
    pub left_alone: Vec<LeftAlone>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Move {
    pub from: usize,
    /// a node, or -1: spread over the active nodes
    pub to: i32,
    pub mb: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeftAlone {
    pub reason: String,
    pub mb: f64,
    pub text: String,
}

/// `explain --top`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopReport {
    pub version: u32,
    pub memory_mode: String,
    /// processes the memory agent tracks (16 MB of anonymous memory or more)
    pub tracked: usize,
    pub procs: Vec<TopProc>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopProc {
    pub pid: u32,
    pub comm: String,
    pub threads: usize,
    pub threads_per_node: Vec<u32>,
    pub home: i32,
    pub home_reason: String,
    pub active: Vec<u32>,
    pub rss_mb: f64,
    /// anonymous memory on nodes outside its active set
    pub remote_mb: f64,
    pub locality: f64,
    pub text: String,
}
