// SPDX-License-Identifier: GPL-2.0-only
//! Statistics: what the push and pull sides did, and what it cost.
//!
//! Idea: the BPF side bumps u64 counters in a per-CPU array map (no shared
//! cache line between CPUs); the agent sums the per-CPU values on demand
//! and serves them as one `Metrics` struct through scx_stats (a UNIX socket,
//! default /var/run/scx/root/stats). `--stats SECS` runs the scheduler and
//! a client thread printing interval deltas; `--monitor SECS` is only the
//! client, for an instance already running. On exit the agent prints the
//! cumulative `Metrics` as one JSON line, `scx_locality-final-stats: {...}`.
//!
//! Origin: the scx_stats server/client pattern of the sched-ext schedulers:
//! the socket thread sends a request over a channel and the main loop,
//! which owns the BPF skeleton, answers with fresh numbers.
//!
//! Counters (names as in the JSON): each counter of the BPF side is one
//! line of src/bpf/stats.h (index, name, unit, description). build.rs
//! makes the first fields of `Metrics` of that list, and `from_counters`,
//! `delta` and `plus` handle them all, so adding a counter takes that line
//! and its place in `format` (a test fails until it is shown there or
//! listed as not shown). `--help-stats` prints every field with its
//! description.
//!
//! The agent's own fields:
//! - node_load (decayed average of runnable tasks per node, at read time),
//!   node_load_mean (mean over the period, from node_load_sum /
//!   load_samples); llc_load and llc_util (decayed runnable tasks, and
//!   CPUs' worth of run time, per LLC, at read time: what the cache-aware
//!   gates see).
//! - max_wait_ms: the longest a queued task waited before it ran, since
//!   load (a high-water mark; the stall watchdog only sees it cross its
//!   timeout); max_wait_task says who: pid, the CPU it ran on, how many
//!   CPUs it may use (1 = pinned) and how many tasks were still queued there.
//! - cache_procs: top processes of the cache-aware policy by runtime
//!   (tgid, comm, preferred LLC, share of their runtime in it, top LLC),
//!   exited ones from the agent's last snapshot (100 ms).
//! - bpf_prog: per-callback BPF run time, when kernel.bpf_stats_enabled=1.
//! - decide_cost_ms / decide_cost_pct: what the decision record for
//!   explain costs (decide.bpf.c times one call in DECIDE_TIME_EVERY), in ms
//!   and in percent of all BPF run time.
//! - agent_cpu_ms / agent_elapsed_ms: the agent process's CPU time (all its
//!   threads; CLOCK_PROCESS_CPUTIME_ID) and wall time since it attached;
//!   agent_cpu_pct, their ratio in percent of one CPU, over the run in the
//!   final line and over the interval in --stats.
//! - memory_*: memory placement (memory/, agent-side): mode, budget,
//!   scans, pages / MB migrated, pages refused (and by cause:
//!   memory_fail_*), mappings backing off, the largest MB moved in one
//!   second, budget waits, processes left alone by cause (memory_skip_*:
//!   memory/scope.rs), pids reused; memory_procs: per process home node, active
//!   nodes, anonymous RSS, pages per node and memory locality.

use anyhow::Result;
use scx_stats::prelude::*;
use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::bpf_intf as intf;
use crate::cache::CacheProc;
use crate::memory::report::{MemProc, MemStats};

pub const NR_STATS: usize = intf::locality_stat_LOC_NR_STATS as usize;

/// Sum one counter's per-CPU values, as returned by a per-CPU map lookup
/// (one native-endian u64 per CPU, possibly padded to 8 bytes).
pub fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter(|v| v.len() >= 8)
        .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
        .fold(0u64, |a, b| a.wrapping_add(b))
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(desc = "BPF run time of one scheduler callback")]
pub struct ProgRunTime {
    #[stat(desc = "total run time (ns)")]
    pub run_time_ns: u64,
    #[stat(desc = "number of runs")]
    pub run_cnt: u64,
}

include!(concat!(env!("OUT_DIR"), "/stat_list.rs"));

/// How a counter of stats.h reads and adds up: a count (CNT) is a u64, a
/// duration (NS) f64 milliseconds.
trait CounterValue: Copy {
    /// From the summed value in the map.
    fn from_raw(raw: u64) -> Self;
    /// self - prev, never below 0: the counters only grow.
    fn minus(self, prev: Self) -> Self;
    fn plus(self, other: Self) -> Self;
}

impl CounterValue for u64 {
    fn from_raw(raw: u64) -> u64 {
        raw
    }
    fn minus(self, prev: u64) -> u64 {
        self.saturating_sub(prev)
    }
    fn plus(self, other: u64) -> u64 {
        self + other
    }
}

impl CounterValue for f64 {
    fn from_raw(ns: u64) -> f64 {
        ns as f64 / 1e6
    }
    fn minus(self, prev: f64) -> f64 {
        (self - prev).max(0.0)
    }
    fn plus(self, other: f64) -> f64 {
        self + other
    }
}

/// Called by `loc_stats!` with the struct written below and the counters of
/// stats.h: defines the struct with the counters as its first fields,
/// `COUNTERS`, and the counter-wise `from_counters`, `counters_minus` and
/// `counters_plus`.
macro_rules! metrics_with_counters {
    ({ $(#[$($attr:tt)*])* pub struct $name:ident { $($fields:tt)* } }
     $(($idx:path, $field:ident, $ty:ident, $desc:tt),)*) => {
        $(#[$($attr)*])*
        pub struct $name {
            $(#[stat(desc = $desc)] pub $field: $ty,)*
            $($fields)*
        }

        /// (index in the stats map, field, description) of each counter, in
        /// index order.
        pub const COUNTERS: [(usize, &str, &str); NR_STATS] =
            [$(($idx as usize, stringify!($field), $desc)),*];

        impl $name {
            /// Build from the summed counters, indexed as enum locality_stat
            /// (a short vector, from an older object, reads as zeros); the
            /// agent's fields are left empty.
            pub fn from_counters(c: &[u64]) -> $name {
                let g = |i: u32| c.get(i as usize).copied().unwrap_or(0);
                $name { $($field: CounterValue::from_raw(g($idx)),)* ..Default::default() }
            }

            /// The counters of self - prev; the agent's fields empty.
            fn counters_minus(&self, prev: &$name) -> $name {
                $name { $($field: self.$field.minus(prev.$field),)* ..Default::default() }
            }

            /// The counters of self + other; the agent's fields empty.
            fn counters_plus(&self, other: &$name) -> $name {
                $name { $($field: self.$field.plus(other.$field),)* ..Default::default() }
            }
        }
    };
}

// COUNTERS has NR_STATS entries (or this does not compile), each at its
// index: the list build.rs read is the one clang made the enum of.
const _: () = {
    let mut i = 0;
    while i < NR_STATS {
        assert!(
            COUNTERS[i].0 == i,
            "stats.h: the list and enum locality_stat disagree"
        );
        i += 1;
    }
};

loc_stats!(metrics_with_counters! {
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
    #[stat(top, desc = "scx_locality statistics (cumulative since load)")]
    pub struct Metrics {
        // the counters of stats.h come first; then the agent's own fields
        #[stat(desc = "per node: decayed average of runnable tasks, at read time")]
        pub node_load: Vec<f64>,
        #[stat(desc = "per node: mean runnable tasks over the period (node_load_sum / load_samples)")]
        pub node_load_mean: Vec<f64>,
        #[stat(desc = "per node: sum of runnable tasks over the load samples")]
        pub node_load_sum: Vec<u64>,
        #[stat(desc = "load samples taken")]
        pub load_samples: u64,
        #[stat(desc = "per LLC: decayed average of runnable tasks, at read time")]
        pub llc_load: Vec<f64>,
        #[stat(desc = "per LLC: decayed utilisation (busy CPUs), at read time; cache-aware gates compare it")]
        pub llc_util: Vec<f64>,
        #[stat(desc = "longest wait of a queued task before it ran, ms, since load")]
        pub max_wait_ms: f64,
        #[stat(desc = "who waited max_wait_ms: pid, CPU, allowed CPUs, tasks still queued there")]
        pub max_wait_task: String,
        #[stat(desc = "cache-aware: top processes by runtime (tgid, comm, preferred LLC, share)")]
        pub cache_procs: Vec<CacheProc>,
        #[stat(desc = "per-callback BPF run time (needs kernel.bpf_stats_enabled=1)")]
        pub bpf_prog: BTreeMap<String, ProgRunTime>,
        #[stat(desc = "CPU time of the agent process (all its threads, BPF not included) since it attached, ms")]
        pub agent_cpu_ms: f64,
        #[stat(desc = "wall time since the agent attached, ms")]
        pub agent_elapsed_ms: f64,
        #[stat(desc = "agent_cpu_ms per agent_elapsed_ms: percent of one CPU the agent used")]
        pub agent_cpu_pct: f64,
        #[stat(desc = "decision records: estimated ms spent in their calls (the timed calls' mean x all calls, written or dropped)")]
        pub decide_cost_ms: f64,
        #[stat(desc = "decide_cost_ms in percent of all BPF run time (bpf_prog); 0 without kernel.bpf_stats_enabled")]
        pub decide_cost_pct: f64,
        #[stat(desc = "memory placement: mode (off, local, spread)")]
        pub memory_mode: String,
        #[stat(desc = "memory placement: migration budget, MB/s")]
        pub memory_budget_mbps: u64,
        #[stat(desc = "memory placement: scans of /proc done")]
        pub memory_scans: u64,
        #[stat(desc = "memory placement: pages migrated (base pages)")]
        pub memory_pages_migrated: u64,
        #[stat(desc = "memory placement: MB migrated")]
        pub memory_mb_migrated: f64,
        #[stat(desc = "memory placement: pages the kernel did not move")]
        pub memory_move_failed: u64,
        #[stat(desc = "memory placement: largest MB migrated in any one-second window")]
        pub memory_peak_mbps: f64,
        #[stat(desc = "memory placement: times the mover waited for the budget")]
        pub memory_budget_waits: u64,
        #[stat(desc = "memory placement: processes bound to a node (--memory-node-affinity)")]
        pub memory_affinity_binds: u64,
        #[stat(desc = "memory placement: processes unbound")]
        pub memory_affinity_unbinds: u64,
        #[stat(desc = "home nodes: thread homes given or changed (threads of processes too big for one node)")]
        pub memory_thread_homes: u64,
        #[stat(desc = "memory placement: pages refused with EACCES (a target outside the task's cpuset, or a page mapped by several processes)")]
        pub memory_fail_eacces: u64,
        #[stat(desc = "memory placement: pages refused with ENOMEM (no room on the target node)")]
        pub memory_fail_enomem: u64,
        #[stat(desc = "memory placement: pages refused with EBUSY (busy or pinned)")]
        pub memory_fail_ebusy: u64,
        #[stat(desc = "memory placement: pages refused for other causes, or not migrated")]
        pub memory_fail_other: u64,
        #[stat(desc = "memory placement: mappings passed over while backing off after a failed move")]
        pub memory_backoffs: u64,
        #[stat(desc = "memory placement: failed queries of a mapping's page nodes (the mapping then backs off)")]
        pub memory_query_failed: u64,
        #[stat(desc = "memory placement: processes left alone by --memory-include/--memory-exclude")]
        pub memory_skip_rule: u64,
        #[stat(desc = "memory placement: processes left alone for locked memory (VmLck)")]
        pub memory_skip_mlock: u64,
        #[stat(desc = "memory placement: processes left alone, their cpuset allows one node")]
        pub memory_skip_cpuset: u64,
        #[stat(desc = "memory placement: processes with memory under an explicit policy (numactl -m, mbind), left where it is")]
        pub memory_skip_mempolicy: u64,
        #[stat(desc = "memory placement: pids seen again with another start time (state of the old process dropped)")]
        pub memory_pid_reused: u64,
        #[stat(desc = "memory placement: CPU time of its thread, ms (sampling /proc, planning, moving)")]
        pub memory_cpu_ms: u64,
        #[stat(desc = "memory placement: CPU time of its thread sampling /proc and planning home nodes, ms")]
        pub memory_scan_cpu_ms: u64,
        #[stat(desc = "memory placement: CPU time of its thread inside move_pages(2) calls that move pages (copying), ms")]
        pub memory_move_cpu_ms: u64,
        #[stat(desc = "memory placement: move_pages(2) calls that move pages (each drains every CPU's LRU caches)")]
        pub memory_move_calls: u64,
        #[stat(desc = "memory placement: /proc/PID/numa_maps reads (each walks the process's page tables)")]
        pub memory_maps_reads: u64,
        #[stat(desc = "memory placement: processes a pass left to a later pass (processes or time per pass used up)")]
        pub memory_scan_deferred: u64,
        #[stat(desc = "memory placement: passes that read the /proc directory (only when a pid may be new, at least every 10 passes)")]
        pub memory_proc_lists: u64,
        #[stat(desc = "memory placement: times the mover waited for the cap on move_pages(2) calls per second")]
        pub memory_call_waits: u64,
        #[stat(desc = "memory placement: per process home, active nodes, locality")]
        pub memory_procs: Vec<MemProc>,
    }
});

impl Metrics {
    /// Fill the memory placement fields from the memory thread's stats.
    pub fn set_memory(&mut self, mode: &str, budget_mbps: u64, m: &MemStats) {
        self.memory_mode = mode.to_string();
        self.memory_budget_mbps = budget_mbps;
        self.memory_scans = m.scans;
        self.memory_pages_migrated = m.pages_migrated;
        self.memory_mb_migrated = round2(m.bytes_migrated as f64 / (1u64 << 20) as f64);
        self.memory_move_failed = m.move_failed;
        self.memory_peak_mbps = round2(m.peak_bytes_per_s as f64 / (1u64 << 20) as f64);
        self.memory_budget_waits = m.budget_waits;
        self.memory_affinity_binds = m.affinity_binds;
        self.memory_thread_homes = m.thread_homes;
        self.memory_affinity_unbinds = m.affinity_unbinds;
        self.memory_fail_eacces = m.fail.eacces;
        self.memory_fail_enomem = m.fail.enomem;
        self.memory_fail_ebusy = m.fail.ebusy;
        self.memory_fail_other = m.fail.other;
        self.memory_backoffs = m.backoffs;
        self.memory_query_failed = m.query_failed;
        self.memory_skip_rule = m.skip_rule;
        self.memory_skip_mlock = m.skip_mlock;
        self.memory_skip_cpuset = m.skip_cpuset;
        self.memory_skip_mempolicy = m.skip_mempolicy;
        self.memory_pid_reused = m.pid_reused;
        self.memory_cpu_ms = m.cpu_ns / 1_000_000;
        self.memory_scan_cpu_ms = m.scan_cpu_ns / 1_000_000;
        self.memory_move_cpu_ms = m.move_cpu_ns / 1_000_000;
        self.memory_move_calls = m.move_calls;
        self.memory_maps_reads = m.maps_reads;
        self.memory_scan_deferred = m.scan_deferred;
        self.memory_proc_lists = m.proc_lists;
        self.memory_call_waits = m.call_waits;
        let mut procs: Vec<MemProc> = m.procs.values().cloned().collect();
        procs.sort_by(|a, b| b.runtime_ms.total_cmp(&a.runtime_ms));
        procs.truncate(16);
        self.memory_procs = procs;
    }

    /// self - prev, counter by counter (for interval reports).
    pub fn delta(&self, prev: &Metrics) -> Metrics {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let mut bpf_prog = BTreeMap::new();
        for (name, cur) in &self.bpf_prog {
            let old = prev.bpf_prog.get(name).cloned().unwrap_or_default();
            bpf_prog.insert(
                name.clone(),
                ProgRunTime {
                    run_time_ns: d(cur.run_time_ns, old.run_time_ns),
                    run_cnt: d(cur.run_cnt, old.run_cnt),
                },
            );
        }
        Metrics {
            cache_procs: self.cache_procs.clone(),
            node_load: self.node_load.clone(),
            node_load_mean: vec![],
            node_load_sum: zip_with(&self.node_load_sum, &prev.node_load_sum, d),
            llc_load: self.llc_load.clone(),
            llc_util: self.llc_util.clone(),
            load_samples: d(self.load_samples, prev.load_samples),
            // a high-water mark: the interval shows it as it is
            max_wait_ms: self.max_wait_ms,
            max_wait_task: self.max_wait_task.clone(),
            bpf_prog,
            memory_mode: self.memory_mode.clone(),
            memory_budget_mbps: self.memory_budget_mbps,
            memory_scans: d(self.memory_scans, prev.memory_scans),
            memory_pages_migrated: d(self.memory_pages_migrated, prev.memory_pages_migrated),
            memory_mb_migrated: round2((self.memory_mb_migrated - prev.memory_mb_migrated).max(0.0)),
            memory_move_failed: d(self.memory_move_failed, prev.memory_move_failed),
            memory_peak_mbps: self.memory_peak_mbps,
            memory_budget_waits: d(self.memory_budget_waits, prev.memory_budget_waits),
            memory_affinity_binds: d(self.memory_affinity_binds, prev.memory_affinity_binds),
            memory_thread_homes: d(self.memory_thread_homes, prev.memory_thread_homes),
            memory_affinity_unbinds: d(self.memory_affinity_unbinds, prev.memory_affinity_unbinds),
            memory_fail_eacces: d(self.memory_fail_eacces, prev.memory_fail_eacces),
            memory_fail_enomem: d(self.memory_fail_enomem, prev.memory_fail_enomem),
            memory_fail_ebusy: d(self.memory_fail_ebusy, prev.memory_fail_ebusy),
            memory_fail_other: d(self.memory_fail_other, prev.memory_fail_other),
            memory_backoffs: d(self.memory_backoffs, prev.memory_backoffs),
            memory_query_failed: d(self.memory_query_failed, prev.memory_query_failed),
            memory_skip_rule: d(self.memory_skip_rule, prev.memory_skip_rule),
            memory_skip_mlock: d(self.memory_skip_mlock, prev.memory_skip_mlock),
            memory_skip_cpuset: d(self.memory_skip_cpuset, prev.memory_skip_cpuset),
            memory_skip_mempolicy: d(self.memory_skip_mempolicy, prev.memory_skip_mempolicy),
            memory_pid_reused: d(self.memory_pid_reused, prev.memory_pid_reused),
            memory_cpu_ms: d(self.memory_cpu_ms, prev.memory_cpu_ms),
            memory_scan_cpu_ms: d(self.memory_scan_cpu_ms, prev.memory_scan_cpu_ms),
            memory_move_cpu_ms: d(self.memory_move_cpu_ms, prev.memory_move_cpu_ms),
            memory_move_calls: d(self.memory_move_calls, prev.memory_move_calls),
            memory_maps_reads: d(self.memory_maps_reads, prev.memory_maps_reads),
            memory_scan_deferred: d(self.memory_scan_deferred, prev.memory_scan_deferred),
            memory_proc_lists: d(self.memory_proc_lists, prev.memory_proc_lists),
            memory_call_waits: d(self.memory_call_waits, prev.memory_call_waits),
            agent_cpu_ms: (self.agent_cpu_ms - prev.agent_cpu_ms).max(0.0),
            agent_elapsed_ms: (self.agent_elapsed_ms - prev.agent_elapsed_ms).max(0.0),
            memory_procs: self.memory_procs.clone(),
            ..self.counters_minus(prev)
        }
        .with_means()
    }

    /// self + other, counter by counter (to add up scheduler restarts).
    pub fn plus(&self, other: &Metrics) -> Metrics {
        let mut bpf_prog = self.bpf_prog.clone();
        for (name, o) in &other.bpf_prog {
            let e = bpf_prog.entry(name.clone()).or_default();
            e.run_time_ns += o.run_time_ns;
            e.run_cnt += o.run_cnt;
        }
        Metrics {
            // a snapshot: the later incarnation's
            cache_procs: other.cache_procs.clone(),
            // a gauge: the later incarnation's value
            node_load: other.node_load.clone(),
            node_load_mean: vec![],
            node_load_sum: zip_with(&self.node_load_sum, &other.node_load_sum, |a, b| a + b),
            llc_load: other.llc_load.clone(),
            llc_util: other.llc_util.clone(),
            load_samples: self.load_samples + other.load_samples,
            max_wait_ms: self.max_wait_ms.max(other.max_wait_ms),
            max_wait_task: if other.max_wait_ms > self.max_wait_ms {
                other.max_wait_task.clone()
            } else {
                self.max_wait_task.clone()
            },
            bpf_prog,
            // the later incarnation's settings and snapshot
            memory_mode: other.memory_mode.clone(),
            memory_budget_mbps: other.memory_budget_mbps,
            memory_scans: self.memory_scans + other.memory_scans,
            memory_pages_migrated: self.memory_pages_migrated + other.memory_pages_migrated,
            memory_mb_migrated: round2(self.memory_mb_migrated + other.memory_mb_migrated),
            memory_move_failed: self.memory_move_failed + other.memory_move_failed,
            memory_peak_mbps: self.memory_peak_mbps.max(other.memory_peak_mbps),
            memory_budget_waits: self.memory_budget_waits + other.memory_budget_waits,
            memory_affinity_binds: self.memory_affinity_binds + other.memory_affinity_binds,
            memory_thread_homes: self.memory_thread_homes + other.memory_thread_homes,
            memory_affinity_unbinds: self.memory_affinity_unbinds + other.memory_affinity_unbinds,
            memory_fail_eacces: self.memory_fail_eacces + other.memory_fail_eacces,
            memory_fail_enomem: self.memory_fail_enomem + other.memory_fail_enomem,
            memory_fail_ebusy: self.memory_fail_ebusy + other.memory_fail_ebusy,
            memory_fail_other: self.memory_fail_other + other.memory_fail_other,
            memory_backoffs: self.memory_backoffs + other.memory_backoffs,
            memory_query_failed: self.memory_query_failed + other.memory_query_failed,
            memory_skip_rule: self.memory_skip_rule + other.memory_skip_rule,
            memory_skip_mlock: self.memory_skip_mlock + other.memory_skip_mlock,
            memory_skip_cpuset: self.memory_skip_cpuset + other.memory_skip_cpuset,
            memory_skip_mempolicy: self.memory_skip_mempolicy + other.memory_skip_mempolicy,
            memory_pid_reused: self.memory_pid_reused + other.memory_pid_reused,
            memory_cpu_ms: self.memory_cpu_ms + other.memory_cpu_ms,
            memory_scan_cpu_ms: self.memory_scan_cpu_ms + other.memory_scan_cpu_ms,
            memory_move_cpu_ms: self.memory_move_cpu_ms + other.memory_move_cpu_ms,
            memory_move_calls: self.memory_move_calls + other.memory_move_calls,
            memory_maps_reads: self.memory_maps_reads + other.memory_maps_reads,
            memory_scan_deferred: self.memory_scan_deferred + other.memory_scan_deferred,
            memory_proc_lists: self.memory_proc_lists + other.memory_proc_lists,
            memory_call_waits: self.memory_call_waits + other.memory_call_waits,
            agent_cpu_ms: self.agent_cpu_ms + other.agent_cpu_ms,
            agent_elapsed_ms: self.agent_elapsed_ms + other.agent_elapsed_ms,
            memory_procs: other.memory_procs.clone(),
            ..self.counters_plus(other)
        }
        .with_means()
    }

    /// Fill the per-node load fields from the BPF globals: `load` in
    /// fixed point (1 task == 1 << LOAD_SHIFT), `sum` and `samples` raw.
    pub fn set_node_load(&mut self, load: Vec<u32>, sum: Vec<u64>, samples: u64) {
        let one = (1u64 << intf::locality_consts_LOAD_SHIFT) as f64;
        self.node_load = load.iter().map(|&l| round2(l as f64 / one)).collect();
        self.node_load_sum = sum;
        self.load_samples = samples;
        self.node_load_mean = vec![];
        *self = std::mem::take(self).with_means();
    }

    /// Fill the per-LLC gauges from the BPF globals (fixed point).
    pub fn set_llc_load(&mut self, load: &[u32], util: &[u32]) {
        let one = (1u64 << intf::locality_consts_LOAD_SHIFT) as f64;
        self.llc_load = load.iter().map(|&l| round2(l as f64 / one)).collect();
        self.llc_util = util.iter().map(|&l| round2(l as f64 / one)).collect();
    }

    /// Set the agent's CPU time and wall time since it attached.
    pub fn set_agent_cpu(&mut self, cpu_ns: u64, elapsed: Duration) {
        self.agent_cpu_ms = cpu_ns as f64 / 1e6;
        self.agent_elapsed_ms = elapsed.as_secs_f64() * 1e3;
        *self = std::mem::take(self).with_means();
    }

    fn with_means(mut self) -> Metrics {
        self.agent_cpu_pct = if self.agent_elapsed_ms > 0.0 {
            (100.0 * self.agent_cpu_ms / self.agent_elapsed_ms * 1000.0).round() / 1000.0
        } else {
            0.0
        };
        // the timed calls' mean, scaled to all calls (written or dropped)
        let calls = self.decide_emitted + self.decide_dropped_rate + self.decide_dropped_full;
        self.decide_cost_ms = if self.decide_timed > 0 {
            round2(self.decide_timed_ms / self.decide_timed as f64 * calls as f64)
        } else {
            0.0
        };
        let bpf_ms = self.bpf_prog.values().map(|p| p.run_time_ns).sum::<u64>() as f64 / 1e6;
        self.decide_cost_pct = if bpf_ms > 0.0 { round2(100.0 * self.decide_cost_ms / bpf_ms) } else { 0.0 };
        let n = self.load_samples.max(1) as f64;
        self.node_load_mean = self
            .node_load_sum
            .iter()
            .map(|&s| round2(s as f64 / n))
            .collect();
        self
    }

    /// Human-readable report; `what` says which period it covers.
    pub fn format<W: Write>(&self, w: &mut W, what: &str) -> Result<()> {
        writeln!(w, "[scx_locality] {what}")?;
        writeln!(
            w,
            "  pick   prev={} prev_core={} llc_core={} llc_cpu={} node_cpu={} other={} none={} \
             affine={} (wide {}) waker={}",
            self.pick_prev,
            self.pick_prev_core,
            self.pick_llc_core,
            self.pick_llc_cpu,
            self.pick_node_cpu,
            self.pick_other,
            self.pick_none,
            self.pick_affine,
            self.affine_wide,
            self.pick_waker
        )?;
        writeln!(
            w,
            "  steal  smt={} llc={} node={} remote={} offline={} kicks={} handoffs={} (waking {})",
            self.steal_smt,
            self.steal_llc,
            self.steal_node,
            self.steal_remote,
            self.steal_offline,
            self.kick_stealer,
            self.enq_handoff,
            self.enq_handoff_wake
        )?;
        writeln!(
            w,
            "  migr   cross_llc={} cross_node={}  idle_while_queued llc={:.1}ms node={:.1}ms \
             ({} samples, timer {:.1}ms, {} stretched)",
            self.migr_cross_llc,
            self.migr_cross_node,
            self.idle_while_queued_llc_ms,
            self.idle_while_queued_node_ms,
            self.iwq_samples,
            self.timer_ms,
            self.timer_stretched
        )?;
        writeln!(
            w,
            "  queue  enq={} fallback={} direct={} local={} keep_prev={} wake_preempt={} rescue_kicks={} kick_dropped={} \
             max_wait={:.1}ms ({}) idle_resync={} idle_claim_lost={}",
            self.enqueues,
            self.enq_fallback,
            self.direct_dispatches,
            self.dispatch_local,
            self.keep_prev,
            self.wake_preempt,
            self.rescue_kicks,
            self.kick_dropped,
            self.max_wait_ms,
            self.max_wait_task,
            self.idle_resync,
            self.idle_claim_lost
        )?;
        writeln!(
            w,
            "  numa   xnode push_wake={} push_fork={} exec={} steal_balance={} steal_offline={} \
             wake_follow={} active={} steal_overload={} steal_idle={}  passes={} budget={} push_kept={} \
             new_local={} claim_lost={} task_recent={} follow_refused={} (overload {} partners {}) settled_kept={} pull_hot={} active_kicks={} \
             overload={}  home xnode={} kept={} active={} swaps={}",
            self.xnode_push_wake,
            self.xnode_push_fork,
            self.xnode_exec,
            self.xnode_steal_balance,
            self.xnode_steal_offline,
            self.xnode_wake_follow,
            self.xnode_active,
            self.xnode_steal_overload,
            self.xnode_steal_idle,
            self.numa_passes,
            self.numa_budget,
            self.numa_push_kept,
            self.numa_new_local,
            self.numa_claim_lost,
            self.numa_task_recent,
            self.numa_follow_refused,
            self.numa_follow_refused_overload,
            self.numa_follow_refused_partners,
            self.numa_settled_kept,
            self.numa_pull_hot,
            self.numa_active_kicks,
            self.numa_overload,
            self.xnode_home,
            self.home_kept,
            self.home_active,
            self.home_swaps
        )?;
        let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ");
        writeln!(
            w,
            "  load   node_now=[{}] node_mean=[{}]  llc_now=[{}] llc_util=[{}]",
            fmt(&self.node_load),
            fmt(&self.node_load_mean),
            fmt(&self.llc_load),
            fmt(&self.llc_util)
        )?;
        writeln!(
            w,
            "  cache  pref_set={} switch={} drop_fit={} drop_timeout={}  \
             aggr pull={} wake={} kick={} mark={} move={} (xnode {}) keep_wake={}  refused out={} overaggr={}  \
             in_pref={:.1}% of {:.1}ms",
            self.cache_pref_set,
            self.cache_pref_switch,
            self.cache_drop_fit,
            self.cache_drop_timeout,
            self.cache_aggr_pull,
            self.cache_aggr_wake,
            self.cache_aggr_kick,
            self.cache_aggr_mark,
            self.cache_aggr_move,
            self.xnode_cache_aggr,
            self.cache_keep_wake,
            self.cache_refuse_out,
            self.cache_refuse_overaggr,
            if self.cache_rt_ms > 0.0 { 100.0 * self.cache_rt_pref_ms / self.cache_rt_ms } else { 0.0 },
            self.cache_rt_ms
        )?;
        for p in &self.cache_procs {
            writeln!(
                w,
                "    proc {:>7} {:<16} threads={:<4} pref_llc={:<3} share={:.1}% top_llc={} run={:.1}ms",
                p.tgid,
                crate::comm::printable(&p.comm),
                p.nr_threads,
                p.pref_llc,
                p.share * 100.0,
                p.top_llc,
                p.runtime_ms
            )?;
        }
        writeln!(
            w,
            "  memory mode={} budget={}MB/s scans={} migrated={} pages ({:.1} MB) failed={} \
             (eacces={} enomem={} ebusy={} other={}, backoffs={} queries_failed={}) peak={:.1}MB/s waits={}",
            if self.memory_mode.is_empty() { "off" } else { &self.memory_mode },
            self.memory_budget_mbps,
            self.memory_scans,
            self.memory_pages_migrated,
            self.memory_mb_migrated,
            self.memory_move_failed,
            self.memory_fail_eacces,
            self.memory_fail_enomem,
            self.memory_fail_ebusy,
            self.memory_fail_other,
            self.memory_backoffs,
            self.memory_query_failed,
            self.memory_peak_mbps,
            self.memory_budget_waits
        )?;
        writeln!(
            w,
            "  memory left alone: rule={} mlock={} cpuset={} mempolicy={}  pid_reused={}  affinity binds={} unbinds={}  \
             thread_homes={}",
            self.memory_skip_rule,
            self.memory_skip_mlock,
            self.memory_skip_cpuset,
            self.memory_skip_mempolicy,
            self.memory_pid_reused,
            self.memory_affinity_binds,
            self.memory_affinity_unbinds,
            self.memory_thread_homes,
        )?;
        writeln!(
            w,
            "  memory cpu={}ms (scan {}ms, moving {}ms) move_calls={} (waits {}) numa_maps_reads={} scan_deferred={} proc_lists={}",
            self.memory_cpu_ms,
            self.memory_scan_cpu_ms,
            self.memory_move_cpu_ms,
            self.memory_move_calls,
            self.memory_call_waits,
            self.memory_maps_reads,
            self.memory_scan_deferred,
            self.memory_proc_lists
        )?;
        writeln!(
            w,
            "  agent  cpu={:.1}ms in {:.1}s: {:.3}% of one CPU",
            self.agent_cpu_ms,
            self.agent_elapsed_ms / 1e3,
            self.agent_cpu_pct
        )?;
        writeln!(
            w,
            "  decide emitted={} dropped rate={} full={}  cost={:.2}ms (timed {} in {:.3}ms){}",
            self.decide_emitted,
            self.decide_dropped_rate,
            self.decide_dropped_full,
            self.decide_cost_ms,
            self.decide_timed,
            self.decide_timed_ms,
            if self.decide_cost_pct > 0.0 { format!(" ({:.2}% of BPF time)", self.decide_cost_pct) } else { String::new() },
        )?;
        for p in &self.memory_procs {
            writeln!(
                w,
                "    mem  {:>7} {:<16} home={} active={:?} rss={:.1}MB locality={:.1}% pages_node={:?} migrated={}{}{}",
                p.tgid,
                crate::comm::printable(&p.comm),
                p.home,
                p.active,
                p.rss_mb,
                p.locality * 100.0,
                p.pages_node,
                p.pages_migrated,
                if p.private_chunks + p.shared_chunks + p.settling_chunks > 0 {
                    format!(
                        " chunks private={} shared={} settling={}",
                        p.private_chunks, p.shared_chunks, p.settling_chunks
                    )
                } else {
                    String::new()
                },
                if p.thread_homes.is_empty() { String::new() } else { format!(" thread_homes={:?}", p.thread_homes) }
            )?;
        }
        if !self.bpf_prog.is_empty() {
            let parts: Vec<String> = self
                .bpf_prog
                .iter()
                .filter(|(_, p)| p.run_cnt > 0)
                .map(|(n, p)| {
                    format!("{}={}ns/{}", n, p.run_time_ns / p.run_cnt.max(1), p.run_cnt)
                })
                .collect();
            writeln!(w, "  bpf    {}", parts.join(" "))?;
        }
        Ok(())
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Element-wise `f(a[i], b[i])`, missing entries read as 0.
fn zip_with(a: &[u64], b: &[u64], f: impl Fn(u64, u64) -> u64) -> Vec<u64> {
    (0..a.len().max(b.len()))
        .map(|i| f(a.get(i).copied().unwrap_or(0), b.get(i).copied().unwrap_or(0)))
        .collect()
}

/// What a reader thread of the server asks the owner of the BPF skeleton
/// (the main loop) for: the statistics ("top"), or the agent's view of
/// processes (`scx_locality explain`, ../explain/).
pub enum Req {
    Top,
    View,
}

/// The main loop's answer, one per Req, of the same kind.
pub enum Res {
    Top(Box<Metrics>),
    View(Box<crate::explain::AgentView>),
}

/// What the scx_stats server serves of the statistics: the meta of
/// `Metrics` and its parts (also what --help-stats prints) and the "top"
/// request, forwarded to the owner of the BPF skeleton over the server's
/// channels (Req::Top, answered with Res::Top). explain/serve.rs adds its
/// targets to it, and main.rs launches the server.
pub fn server_data() -> StatsServerData<Req, Res> {
    StatsServerData::<Req, Res>::new()
        .add_meta(Metrics::meta())
        .add_meta(ProgRunTime::meta())
        .add_meta(CacheProc::meta())
        .add_meta(MemProc::meta())
        .add_stats(
            "top",
            Box::new(move |_args, (req, res)| {
                req.send(Req::Top)?;
                match res.recv()? {
                    Res::Top(m) => m.to_json(),
                    Res::View(_) => anyhow::bail!("stats: answer of the wrong kind"),
                }
            }),
        )
}

/// Client loop: print interval deltas every `intv` until `shutdown`.
pub fn monitor(intv: Duration, shutdown: Arc<AtomicBool>) -> Result<()> {
    let mut prev: Option<Metrics> = None;
    let secs = intv.as_secs_f64();
    scx_utils::monitor_stats::<Metrics>(
        &[],
        intv,
        || shutdown.load(Ordering::Relaxed),
        |m| {
            let mut out = std::io::stdout().lock();
            match &prev {
                Some(p) => m.delta(p).format(&mut out, &format!("last {secs}s"))?,
                None => m.format(&mut out, "since load")?,
            }
            out.flush()?;
            prev = Some(m);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_percpu_values() {
        let vals = vec![
            5u64.to_ne_bytes().to_vec(),
            7u64.to_ne_bytes().to_vec(),
            u64::MAX.to_ne_bytes().to_vec(),
        ];
        // wrapping, like the kernel's u64 counters
        assert_eq!(sum_percpu(&vals), 11);
        assert_eq!(sum_percpu(&vals[..2]), 12);
        assert_eq!(sum_percpu(&[]), 0);
        // short (malformed) entries are ignored, padding is not read
        let mut padded = 3u64.to_ne_bytes().to_vec();
        padded.extend([0xff; 8]);
        assert_eq!(sum_percpu(&[padded, vec![1, 2]]), 3);
    }

    #[test]
    fn counters_map_to_fields() {
        let mut c = vec![0u64; NR_STATS];
        c[intf::locality_stat_STAT_PICK_LLC_CORE as usize] = 3;
        c[intf::locality_stat_STAT_STEAL_NODE as usize] = 4;
        c[intf::locality_stat_STAT_MIGR_CROSS_NODE as usize] = 5;
        c[intf::locality_stat_STAT_IWQ_LLC_NS as usize] = 2_500_000;
        c[intf::locality_stat_STAT_KICK_STEALER as usize] = 6;
        let m = Metrics::from_counters(&c);
        assert_eq!(m.pick_llc_core, 3);
        assert_eq!(m.steal_node, 4);
        assert_eq!(m.migr_cross_node, 5);
        assert_eq!(m.kick_stealer, 6);
        assert_eq!(m.idle_while_queued_llc_ms, 2.5);
        assert_eq!(m.pick_prev_core, 0);
        // a short vector (older object) reads as zeros, no panic
        assert_eq!(Metrics::from_counters(&[1]).pick_prev_core, 1);
    }

    #[test]
    fn delta_subtracts() {
        let mut a = Metrics::from_counters(&[10; NR_STATS]);
        let b = Metrics::from_counters(&[4; NR_STATS]);
        a.bpf_prog.insert(
            "dispatch".into(),
            ProgRunTime { run_time_ns: 900, run_cnt: 9 },
        );
        let d = a.delta(&b);
        assert_eq!(d.enqueues, 6);
        assert_eq!(d.steal_smt, 6);
        assert_eq!(d.bpf_prog["dispatch"].run_cnt, 9);
        // counters never go negative
        assert_eq!(b.delta(&a).enqueues, 0);
    }

    #[test]
    fn plus_adds_up_restarts() {
        let mut a = Metrics::from_counters(&[3; NR_STATS]);
        let mut b = Metrics::from_counters(&[4; NR_STATS]);
        a.bpf_prog.insert("enqueue".into(), ProgRunTime { run_time_ns: 10, run_cnt: 1 });
        b.bpf_prog.insert("enqueue".into(), ProgRunTime { run_time_ns: 5, run_cnt: 2 });
        b.bpf_prog.insert("dispatch".into(), ProgRunTime { run_time_ns: 7, run_cnt: 1 });
        let s = a.plus(&b);
        assert_eq!(s.steal_llc, 7);
        assert_eq!(s.iwq_samples, 7);
        assert_eq!(s.bpf_prog["enqueue"], ProgRunTime { run_time_ns: 15, run_cnt: 3 });
        assert_eq!(s.bpf_prog["dispatch"].run_cnt, 1);
        // and delta undoes it
        assert_eq!(s.delta(&b).steal_llc, a.steal_llc);
    }

    #[test]
    fn json_roundtrip_and_names() {
        let m = Metrics::from_counters(&[1; NR_STATS]);
        let s = serde_json::to_string(&m).unwrap();
        for key in [
            "pick_prev_core",
            "steal_remote",
            "migr_cross_llc",
            "idle_while_queued_node_ms",
            "idle_resync",
            "idle_claim_lost",
            "bpf_prog",
        ] {
            assert!(s.contains(&format!("\"{key}\"")), "{key} missing in {s}");
        }
        let back: Metrics = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn node_loads() {
        let mut a = Metrics::from_counters(&[0; NR_STATS]);
        a.set_node_load(vec![2048, 512], vec![300, 100], 100);
        assert_eq!(a.node_load, vec![2.0, 0.5]);
        assert_eq!(a.node_load_mean, vec![3.0, 1.0]);
        let mut b = Metrics::from_counters(&[0; NR_STATS]);
        b.set_node_load(vec![1024, 0], vec![500, 100], 200);
        // interval: (500-300)/(200-100) = 2 on node 0, 0 on node 1
        let d = b.delta(&a);
        assert_eq!(d.node_load_mean, vec![2.0, 0.0]);
        assert_eq!(d.node_load, vec![1.0, 0.0]);
        // per-LLC gauges: fixed point to tasks / busy CPUs, the latest wins
        b.set_llc_load(&[3072, 256], &[2048, 256]);
        assert_eq!((b.llc_load.clone(), b.llc_util.clone()), (vec![3.0, 0.25], vec![2.0, 0.25]));
        assert_eq!(b.delta(&a).llc_util, vec![2.0, 0.25]);
        // restarts: sums add up, the gauge is the latest
        let s = a.plus(&b);
        assert_eq!(s.load_samples, 300);
        assert_eq!(s.node_load_mean, vec![2.67, 0.67]);
        assert_eq!(s.node_load, vec![1.0, 0.0]);
        let mut c = Metrics::from_counters(&[0; NR_STATS]);
        c.xnode_exec = 3;
        let j = serde_json::to_string(&s.plus(&c)).unwrap();
        assert!(j.contains("\"node_load_mean\"") && j.contains("\"xnode_steal_balance\""), "{j}");
    }

    /// Each index of the stats map lands in its own field, and only there:
    /// a count as is, nanoseconds as milliseconds.
    #[test]
    fn every_index_maps_to_its_field() {
        for &(idx, name, _) in &COUNTERS {
            let mut c = vec![0u64; NR_STATS];
            c[idx] = 7_000_000;
            let v = serde_json::to_value(Metrics::from_counters(&c)).unwrap();
            for &(_, other, _) in &COUNTERS {
                let got = v[other].as_f64().unwrap_or_else(|| panic!("{other} not a number"));
                let want = match (other == name, other.ends_with("_ms")) {
                    (false, _) => 0.0,
                    (true, false) => 7_000_000.0,
                    (true, true) => 7.0,
                };
                assert_eq!(got, want, "index {idx} ({name}): {other}");
            }
        }
    }

    /// Counters `format` leaves out on purpose (none today).
    const NOT_SHOWN: &[&str] = &[];

    /// Every counter shows in the --stats text (moving it changes the
    /// text), unless NOT_SHOWN says otherwise.
    #[test]
    fn every_counter_is_shown() {
        let text = |c: &[u64]| {
            let mut out = vec![];
            Metrics::from_counters(c).format(&mut out, "t").unwrap();
            String::from_utf8(out).unwrap()
        };
        let base = text(&[1; NR_STATS]);
        for &(idx, name, _) in &COUNTERS {
            let mut c = vec![1u64; NR_STATS];
            c[idx] = 987_654_321_000;
            assert_eq!(
                text(&c) != base,
                !NOT_SHOWN.contains(&name),
                "{name}: print it in Metrics::format or list it in NOT_SHOWN"
            );
        }
    }

    /// The decision record's cost: the timed calls' mean time, scaled to
    /// every call (written or dropped), and its share of all BPF run time.
    #[test]
    fn decide_cost_is_the_timed_mean_scaled() {
        let mut m = Metrics {
            decide_emitted: 1000,
            decide_dropped_rate: 550,
            decide_dropped_full: 50,
            decide_timed: 100,
            decide_timed_ms: 0.5,
            ..Default::default()
        };
        m.bpf_prog.insert("enqueue".into(), ProgRunTime { run_time_ns: 400_000_000, run_cnt: 1 });
        let m = m.with_means();
        assert_eq!(m.decide_cost_ms, 8.0);
        assert_eq!(m.decide_cost_pct, 2.0);
        let none = Metrics { decide_emitted: 5, ..Default::default() }.with_means();
        assert_eq!((none.decide_cost_ms, none.decide_cost_pct), (0.0, 0.0));
    }

    /// A Metrics with no field at its default value.
    fn full_sample() -> Metrics {
        let c: Vec<u64> = (1..=NR_STATS as u64).map(|i| i * 1_000_000).collect();
        let mut m = Metrics::from_counters(&c);
        m.set_node_load(vec![2048, 512], vec![300, 100], 100);
        m.set_llc_load(&[3072, 256], &[2048, 256]);
        m.max_wait_ms = 12.5;
        m.max_wait_task = "pid 1 cpu 2".into();
        m.bpf_prog.insert("enqueue".into(), ProgRunTime { run_time_ns: 10, run_cnt: 1 });
        m.cache_procs = vec![CacheProc { tgid: 42, ..Default::default() }];
        let mut ms = MemStats {
            scans: 3,
            pages_migrated: 99,
            bytes_migrated: 5 << 20,
            move_failed: 1,
            peak_bytes_per_s: 7 << 20,
            budget_waits: 2,
            affinity_binds: 1,
            affinity_unbinds: 2,
            thread_homes: 12,
            fail: crate::memory::report::Fails { eacces: 1, enomem: 2, ebusy: 3, other: 4 },
            backoffs: 5,
            skip_rule: 6,
            skip_mlock: 7,
            skip_cpuset: 8,
            skip_mempolicy: 9,
            pid_reused: 10,
            cpu_ns: 11_000_000,
            scan_cpu_ns: 3_000_000,
            move_cpu_ns: 4_000_000,
            move_calls: 12,
            maps_reads: 13,
            scan_deferred: 14,
            call_waits: 15,
            proc_lists: 16,
            query_failed: 17,
            ..Default::default()
        };
        ms.procs.insert(42, MemProc { tgid: 42, ..Default::default() });
        m.set_memory("spread", 128, &ms);
        m.set_agent_cpu(50_000_000, Duration::from_secs(10));
        m
    }

    /// The agent's CPU share: over the whole run, over an interval, and
    /// over restarts added up.
    #[test]
    fn agent_cpu_share() {
        let mut a = Metrics::default();
        a.set_agent_cpu(50_000_000, Duration::from_secs(10));
        assert_eq!(a.agent_cpu_pct, 0.5);
        let mut b = Metrics::default();
        b.set_agent_cpu(80_000_000, Duration::from_secs(12));
        // 30 ms in 2 s
        assert_eq!(b.delta(&a).agent_cpu_pct, 1.5);
        // 130 ms in 22 s
        assert_eq!(a.plus(&b).agent_cpu_pct, 0.591);
        assert_eq!(Metrics::default().agent_cpu_pct, 0.0);
    }

    /// delta and plus carry every field: a field they forget reads as its
    /// default.
    #[test]
    fn delta_and_plus_cover_every_field() {
        let m = full_sample();
        let v = serde_json::to_value(&m).unwrap();
        for (k, x) in v.as_object().unwrap() {
            let empty = x.as_f64() == Some(0.0)
                || x.as_str() == Some("")
                || x.as_array().is_some_and(|a| a.is_empty())
                || x.as_object().is_some_and(|o| o.is_empty());
            assert!(!empty, "full_sample leaves {k} at its default: set it");
        }
        assert_eq!(m.delta(&Metrics::default()), m);
        assert_eq!(Metrics::default().plus(&m), m);
    }

    /// --help-stats lists every counter with its description.
    #[test]
    fn help_lists_every_counter() {
        let mut out = vec![];
        server_data().describe_meta(&mut out, None).unwrap();
        let text = String::from_utf8(out).unwrap();
        for &(_, name, desc) in &COUNTERS {
            let line = text.lines().find(|l| l.split_whitespace().next() == Some(name));
            assert!(line.is_some_and(|l| l.ends_with(&format!(" : {desc}"))), "{name}:\n{text}");
        }
    }

    /// The --stats text, line by line: a change of layout is a change of
    /// this test.
    #[test]
    fn format_layout() {
        let c: Vec<u64> = (1..=NR_STATS as u64).map(|i| i * 1_000_000).collect();
        let mut out = vec![];
        Metrics::from_counters(&c).format(&mut out, "test").unwrap();
        let want = "\
[scx_locality] test
  pick   prev=78000000 prev_core=1000000 llc_core=2000000 llc_cpu=3000000 node_cpu=4000000 other=5000000 none=6000000 affine=7000000 (wide 8000000) waker=81000000
  steal  smt=9000000 llc=10000000 node=11000000 remote=12000000 offline=13000000 kicks=23000000 handoffs=77000000 (waking 80000000)
  migr   cross_llc=14000000 cross_node=15000000  idle_while_queued llc=16.0ms node=17.0ms (24000000 samples, timer 25.0ms, 26000000 stretched)
  queue  enq=18000000 fallback=19000000 direct=20000000 local=21000000 keep_prev=22000000 wake_preempt=27000000 rescue_kicks=28000000 kick_dropped=29000000 max_wait=0.0ms () idle_resync=67000000 idle_claim_lost=68000000
  numa   xnode push_wake=30000000 push_fork=31000000 exec=32000000 steal_balance=33000000 steal_offline=34000000 wake_follow=35000000 active=36000000 steal_overload=37000000 steal_idle=38000000  passes=39000000 budget=40000000 push_kept=41000000 new_local=42000000 claim_lost=71000000 task_recent=43000000 follow_refused=44000000 (overload 69000000 partners 70000000) settled_kept=45000000 pull_hot=46000000 active_kicks=47000000 overload=48000000  home xnode=49000000 kept=50000000 active=51000000 swaps=52000000
  load   node_now=[] node_mean=[]  llc_now=[] llc_util=[]
  cache  pref_set=53000000 switch=54000000 drop_fit=55000000 drop_timeout=56000000  aggr pull=57000000 wake=58000000 kick=59000000 mark=60000000 move=61000000 (xnode 79000000) keep_wake=62000000  refused out=63000000 overaggr=64000000  in_pref=101.5% of 65.0ms
  memory mode=off budget=0MB/s scans=0 migrated=0 pages (0.0 MB) failed=0 (eacces=0 enomem=0 ebusy=0 other=0, backoffs=0 queries_failed=0) peak=0.0MB/s waits=0
  memory left alone: rule=0 mlock=0 cpuset=0 mempolicy=0  pid_reused=0  affinity binds=0 unbinds=0  thread_homes=0
  memory cpu=0ms (scan 0ms, moving 0ms) move_calls=0 (waits 0) numa_maps_reads=0 scan_deferred=0 proc_lists=0
  agent  cpu=0.0ms in 0.0s: 0.000% of one CPU
  decide emitted=72000000 dropped rate=73000000 full=74000000  cost=0.00ms (timed 75000000 in 76.000ms)
";
        let got = String::from_utf8(out).unwrap();
        for (g, w) in got.lines().zip(want.lines()) {
            assert_eq!(g, w);
        }
        assert_eq!(got, want);
    }

    #[test]
    fn format_mentions_levels() {
        let mut out = vec![];
        Metrics::from_counters(&[2; NR_STATS])
            .format(&mut out, "test")
            .unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("prev_core=2"));
        assert!(s.contains("remote=2"));
        assert!(s.contains("idle_resync=2 idle_claim_lost=2"), "{s}");
    }
}
