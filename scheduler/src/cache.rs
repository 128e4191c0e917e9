// SPDX-License-Identifier: GPL-2.0-only
//! Cache-aware scheduling: the agent's half (see src/bpf/cache.bpf.c).
//!
//! Idea: each multi-threaded process gets a preferred LLC, the LLC where
//! it ran most recently (decayed occupancy, halved every epoch). Tasks are
//! pulled toward it while the process fits there, and ordinary balancing
//! takes over when it does not.
//!
//! Origin: Tim Chen, Chen Yu, Peter Zijlstra, "Cache aware scheduling" (RFC
//! v3, 2025; upstream 7.2, CONFIG_SCHED_CACHE, load-balance only).
//!
//! Measurements behind the defaults are in docs/decisions.md.
//!
//! The decision rules are pure functions in src/bpf/cache_rules.h, which
//! the BPF side runs and src/rules.rs tests. This module reads the
//! per-process map (`cache_procs`) for the statistics: the top processes
//! by runtime with their preferred LLC and the share of their runtime
//! spent in it.

use serde::{Deserialize, Serialize};
use scx_stats_derive::Stats;

use crate::bpf_intf as intf;

/// --cache-gates values: when a thread may move into or out of its
/// process's preferred LLC (cache_rules.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CacheGates {
    /// Into the preferred LLC unless it is past --cache-overaggr-pct busy and
    /// busier than the source by --cache-imb-pct; out of it only while it is
    /// overloaded (more runnable tasks than CPUs, busy past 100/117).
    Overload,
    /// The series' _get_migrate_hint(): the same test into it, the moving
    /// thread counted; out of it only when it is past --cache-overaggr-pct and
    /// busier than the destination by --cache-imb-pct; no gate when both
    /// LLCs are past --cache-overaggr-pct.
    Utilisation,
}

/// --cache-busy-wake values: a waking thread finds no idle CPU in its
/// process's preferred LLC, and the gate "out" keeps it there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CacheBusyWake {
    /// It waits there for a CPU of that LLC (the gate's answer).
    Wait,
    /// It takes an idle CPU elsewhere in its node; an idle CPU of the
    /// preferred LLC asks it back later. Shorter waits for processes whose
    /// bursts of wake-ups outnumber the LLC's CPUs, less co-location.
    Leave,
}

pub const CACHE_MAX_LLCS: usize = intf::locality_consts_CACHE_MAX_LLCS as usize;

/// Byte layout of `struct cache_proc` (cache.bpf.c).
const OFF_PREF: usize = 0;
const OFF_NR_THREADS: usize = 4;
const OFF_TOTAL_RT: usize = 16;
const OFF_COMM: usize = 24;
const OFF_OCC: usize = 40;
const OFF_RT: usize = OFF_OCC + 8 * CACHE_MAX_LLCS;
pub const VALUE_SIZE: usize = OFF_RT + 8 * CACHE_MAX_LLCS;

/// One process as the statistics show it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(desc = "a process tracked by the cache-aware policy")]
pub struct CacheProc {
    #[stat(desc = "process id (tgid)")]
    pub tgid: u32,
    #[stat(desc = "command of the thread-group leader")]
    pub comm: String,
    #[stat(desc = "preferred LLC, -1 if none right now")]
    pub pref_llc: i32,
    #[stat(desc = "threads at the last stop")]
    pub nr_threads: u32,
    #[stat(desc = "total runtime, ms")]
    pub runtime_ms: f64,
    #[stat(desc = "share of the runtime spent in the preferred LLC (or the top LLC if none)")]
    pub share: f64,
    #[stat(desc = "LLC holding most of the runtime")]
    pub top_llc: i32,
}

fn rd_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

/// Decode one map value; None if it is too short.
pub fn decode(tgid: u32, b: &[u8], nr_llcs: usize) -> Option<CacheProc> {
    if b.len() < VALUE_SIZE {
        return None;
    }
    let pref = i32::from_ne_bytes(b[OFF_PREF..OFF_PREF + 4].try_into().unwrap());
    let nt = u32::from_ne_bytes(b[OFF_NR_THREADS..OFF_NR_THREADS + 4].try_into().unwrap());
    let comm: Vec<u8> = b[OFF_COMM..OFF_COMM + 16]
        .iter()
        .take_while(|&&c| c != 0)
        .copied()
        .collect();
    let n = nr_llcs.min(CACHE_MAX_LLCS);
    let rt: Vec<u64> = (0..n).map(|i| rd_u64(b, OFF_RT + 8 * i)).collect();
    let sum: u64 = rt.iter().sum();
    let (top, top_rt) = rt
        .iter()
        .enumerate()
        .max_by_key(|(_, &v)| v)
        .map(|(i, &v)| (i as i32, v))
        .unwrap_or((-1, 0));
    let in_pref = if pref >= 0 && (pref as usize) < n {
        rt[pref as usize]
    } else {
        top_rt
    };
    let _ = rd_u64(b, OFF_TOTAL_RT);
    Some(CacheProc {
        tgid,
        comm: crate::comm::escape(&comm),
        pref_llc: pref,
        nr_threads: nt,
        runtime_ms: (sum as f64 / 1e4).round() / 100.0,
        share: if sum > 0 {
            ((in_pref as f64 / sum as f64) * 1000.0).round() / 1000.0
        } else {
            0.0
        },
        top_llc: top,
    })
}

/// The `n` processes with the most runtime, most first.
pub fn top_n(mut v: Vec<CacheProc>, n: usize) -> Vec<CacheProc> {
    v.sort_by(|a, b| {
        b.runtime_ms
            .partial_cmp(&a.runtime_ms)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.tgid.cmp(&b.tgid))
    });
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_bpf() {
        // s32 + u32 + u64 + u64 + char[16] + 2 * u64[64]
        assert_eq!(VALUE_SIZE, 4 + 4 + 8 + 8 + 16 + 2 * 8 * 64);
    }

    #[test]
    fn decode_and_top() {
        let mut b = vec![0u8; VALUE_SIZE];
        b[0..4].copy_from_slice(&1i32.to_ne_bytes());
        b[4..8].copy_from_slice(&5u32.to_ne_bytes());
        b[OFF_COMM..OFF_COMM + 9].copy_from_slice(b"hackbench");
        b[OFF_RT..OFF_RT + 8].copy_from_slice(&10_000_000u64.to_ne_bytes());
        b[OFF_RT + 8..OFF_RT + 16].copy_from_slice(&90_000_000u64.to_ne_bytes());
        let p = decode(42, &b, 2).unwrap();
        assert_eq!(p.comm, "hackbench");
        assert_eq!((p.pref_llc, p.nr_threads, p.top_llc), (1, 5, 1));
        assert_eq!(p.share, 0.9);
        assert_eq!(p.runtime_ms, 100.0);
        assert!(decode(1, &b[..10], 2).is_none());
        let mut q = p.clone();
        q.tgid = 7;
        q.runtime_ms = 500.0;
        let t = top_n(vec![p, q], 1);
        assert_eq!(t[0].tgid, 7);
    }
}
