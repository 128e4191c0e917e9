// SPDX-License-Identifier: GPL-2.0-only
//! Cache-aware scheduling: the agent's half (see src/bpf/cache.bpf.c).
//!
//! Idea: each multi-threaded process gets a preferred LLC, the LLC where
//! it ran most recently (decayed occupancy, halved every epoch). Tasks are
//! pulled toward it while the process fits there, and ordinary balancing
//! takes over when it does not.
//!
//! Seed: Tim Chen, Chen Yu, Peter Zijlstra, "Cache aware scheduling" (RFC
//! v3, 2025; upstream 7.2, CONFIG_SCHED_CACHE, load-balance only).
//!
//! Measurements behind the defaults are in docs/decisions.md.
//!
//! This module mirrors the BPF decision rules as pure functions (the unit
//! tests below pin them), checks the knobs, and reads the per-process map
//! (`cache_procs`) for the statistics: the top processes by runtime with
//! their preferred LLC and the share of their runtime spent in it.

// The pure rules mirror the BPF side for the unit tests; the agent itself
// only decodes the map.
#![cfg_attr(not(test), allow(dead_code))]

use serde::{Deserialize, Serialize};
use scx_stats_derive::Stats;

use crate::bpf_intf as intf;

pub const CACHE_MAX_LLCS: usize = intf::locality_consts_CACHE_MAX_LLCS as usize;
pub const LOAD_SHIFT: u32 = intf::locality_consts_LOAD_SHIFT;
const CACHE_LLC_IMB_PCT: u64 = intf::locality_consts_CACHE_LLC_IMB_PCT as u64;

/// Byte layout of `struct cache_proc` (cache.bpf.c).
const OFF_PREF: usize = 0;
const OFF_NR_THREADS: usize = 4;
const OFF_TOTAL_RT: usize = 16;
const OFF_COMM: usize = 24;
const OFF_OCC: usize = 40;
const OFF_RT: usize = OFF_OCC + 8 * CACHE_MAX_LLCS;
pub const VALUE_SIZE: usize = OFF_RT + 8 * CACHE_MAX_LLCS;

/// Busy percentage of an LLC: its utilisation `llc_util` (fixed point, a
/// busy CPU == 1 << LOAD_SHIFT) over its CPUs, in percent.
pub fn busy_pct(llc_util: u32, cpus: u32) -> u64 {
    if cpus == 0 {
        return 0;
    }
    (llc_util as u64 * 100) / ((cpus as u64) << LOAD_SHIFT)
}

/// Overloaded as the kernel's group_is_overloaded(): more runnable tasks
/// (`llc_load`) than CPUs and utilisation above capacity * 100 / 117.
pub fn overloaded(llc_load: u32, llc_util: u32, cpus: u32) -> bool {
    let cap = (cpus as u64) << LOAD_SHIFT;
    llc_load as u64 > cap && llc_util as u64 * CACHE_LLC_IMB_PCT > cap * 100
}

/// Gate "into": may a task move from an LLC `src_busy`% busy into its
/// preferred LLC, `dst_busy`% busy? Refused when the destination is over
/// `overaggr_pct` and busier than the source by more than `imb_pct`.
pub fn may_enter(src_busy: u64, dst_busy: u64, overaggr_pct: u32, imb_pct: u32) -> bool {
    !(dst_busy > overaggr_pct as u64 && dst_busy * 100 > src_busy * (100 + imb_pct as u64))
}

/// Gate "out": a task may leave its preferred LLC only while it is overloaded.
pub fn may_leave(pref_overloaded: bool) -> bool {
    pref_overloaded
}

/// Decay `occ` by `epochs` halvings (as the BPF side does lazily).
pub fn decay(occ: &mut [u64], epochs: u64) {
    for v in occ.iter_mut() {
        *v = if epochs >= 64 { 0 } else { *v >> epochs };
    }
}

/// Why a process has no preferred LLC after an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pref {
    Llc(usize),
    None,
    /// running threads need more than 80% (x tolerance) of the LLC's cores
    DropFit,
    /// the LLC is overloaded
    DropOverload,
}

/// What cache_new_epoch() knows of each LLC.
pub struct Llcs<'a> {
    /// cores of each LLC: its CPUs over the SMT width (the fit limit counts
    /// cores, see llc_nr_cores() in cache.bpf.c)
    pub cores: &'a [u32],
    pub overloaded: &'a [bool],
    /// node of each LLC
    pub node: &'a [usize],
    /// llc_load (fixed point), for the homed process with no runtime at home
    pub load: &'a [u32],
}

/// The epoch re-evaluation of cache_new_epoch() (after decay): `cur` is
/// the current preference, `home` the process's home node if the agent
/// gave it one (then only that node's LLCs are candidates).
pub fn choose(
    occ: &[u64],
    cur: Option<usize>,
    home: Option<usize>,
    switch_ratio: u32,
    aggr_tol: u32,
    epoch_ns: u64,
    llcs: &Llcs,
) -> Pref {
    let at_home = |l: usize| home.is_none_or(|h| llcs.node.get(l) == Some(&h));
    let mut best: Option<usize> = None;
    let mut best_occ = 0u64;
    let mut total = 0u64;
    let mut least: Option<(u32, usize)> = None;
    for (i, &v) in occ.iter().enumerate() {
        total += v;
        if !at_home(i) {
            continue;
        }
        if home.is_some() {
            let load = llcs.load.get(i).copied().unwrap_or(0);
            if least.is_none_or(|(l, _)| load < l) {
                least = Some((load, i));
            }
        }
        if v > best_occ {
            best_occ = v;
            best = Some(i);
        }
    }
    let Some(mut best) = best.or(least.map(|(_, i)| i)) else {
        return Pref::None;
    };
    if let Some(c) = cur {
        if c != best && c < occ.len() && at_home(c) && best_occ <= switch_ratio as u64 * occ[c] {
            best = c;
        }
    }
    let ncores = llcs.cores.get(best).copied().unwrap_or(0) as u64;
    let limit = 2 * epoch_ns * ncores * 80 / 100;
    if aggr_tol < 100 && total > limit * aggr_tol as u64 {
        return Pref::DropFit;
    }
    if llcs.overloaded.get(best).copied().unwrap_or(false) {
        return Pref::DropOverload;
    }
    Pref::Llc(best)
}

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
        comm: String::from_utf8_lossy(&comm).into_owned(),
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

    const EP: u64 = 10_000_000;

    #[test]
    fn layout_matches_bpf() {
        // s32 + u32 + u64 + u64 + char[16] + 2 * u64[64]
        assert_eq!(VALUE_SIZE, 4 + 4 + 8 + 8 + 16 + 2 * 8 * 64);
    }

    const NODE0: [usize; 2] = [0, 0];
    const LOAD0: [u32; 2] = [0, 0];

    fn llcs<'a>(cores: &'a [u32], ovl: &'a [bool]) -> Llcs<'a> {
        Llcs { cores, overloaded: ovl, node: &NODE0, load: &LOAD0 }
    }

    #[test]
    fn hysteresis_needs_twice() {
        let l = llcs(&[4, 4], &[false, false]);
        // LLC 1 leads, but not by more than 2x: keep 0
        let occ = [1_000_000, 2_000_000];
        assert_eq!(choose(&occ, Some(0), None, 2, 1, EP, &l), Pref::Llc(0));
        // more than twice: switch
        let occ = [1_000_000, 2_000_001];
        assert_eq!(choose(&occ, Some(0), None, 2, 1, EP, &l), Pref::Llc(1));
        // no current preference: the largest wins outright
        let occ = [1_000_000, 1_000_001];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(1));
        // nothing recorded
        assert_eq!(choose(&[0, 0], None, None, 2, 1, EP, &l), Pref::None);
        // ratio 1: any lead switches
        let occ = [1_000_000, 1_000_001];
        assert_eq!(choose(&occ, Some(0), None, 1, 1, EP, &l), Pref::Llc(1));
    }

    #[test]
    fn fit_counts_cores_not_smt_siblings() {
        // epyc-l3numa's LLC: 4 CPUs, 2 cores of 2 SMT siblings. hackbench -T
        // with 2 pairs keeps about 2.2 threads running: over 80% of 2 cores
        // (1.6), so no preference; 1 pair (about 1.1) fits.
        let l = llcs(&[2, 2], &[false, false]);
        let occ = [2 * 22 * EP / 10, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::DropFit);
        let occ = [2 * 11 * EP / 10, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(0));
        // the same load on 4 cores without SMT (spr-1n2llc) fits
        let l = llcs(&[4, 4], &[false, false]);
        let occ = [2 * 22 * EP / 10, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(0));
    }

    #[test]
    fn backs_off_when_it_does_not_fit() {
        let l = llcs(&[4, 4], &[false, false]);
        // steady state: occ sum = 2 x runtime per epoch. 3 threads busy on
        // 4 cores = 75% < 80%: fits
        let occ = [2 * 3 * EP, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(0));
        // 3.3 threads busy > 3.2: does not fit
        let occ = [2 * 33 * EP / 10, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::DropFit);
        // tolerance 2 doubles the limit; 100 removes it
        assert_eq!(choose(&occ, None, None, 2, 2, EP, &l), Pref::Llc(0));
        let occ = [2 * 100 * EP, 0];
        assert_eq!(choose(&occ, None, None, 2, 100, EP, &l), Pref::Llc(0));
        // overloaded LLC
        let occ = [EP, 0];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &llcs(&[4, 4], &[true, false])), Pref::DropOverload);
    }

    #[test]
    fn home_node_bounds_the_choice() {
        // 4 LLCs, two per node; LLC 3 (node 1) is the busiest
        let node = [0, 0, 1, 1];
        let load = [0, 0, 3 << LOAD_SHIFT, 1 << LOAD_SHIFT];
        let l = Llcs { cores: &[4; 4], overloaded: &[false; 4], node: &node, load: &load };
        let occ = [EP / 2, EP, 0, 4 * EP];
        assert_eq!(choose(&occ, None, None, 2, 1, EP, &l), Pref::Llc(3));
        // home node 0: the best LLC inside it, however much ran elsewhere
        assert_eq!(choose(&occ, None, Some(0), 2, 1, EP, &l), Pref::Llc(1));
        // a preference outside the home is left without hysteresis
        assert_eq!(choose(&occ, Some(3), Some(0), 2, 1, EP, &l), Pref::Llc(1));
        // inside the home, hysteresis as usual: LLC 1 is not twice LLC 0
        let occ = [EP, 2 * EP, 0, 0];
        assert_eq!(choose(&occ, Some(0), Some(0), 2, 1, EP, &l), Pref::Llc(0));
        // homed on node 1 with no runtime there yet: its least loaded LLC
        let occ = [4 * EP, 0, 0, 0];
        assert_eq!(choose(&occ, None, Some(1), 2, 1, EP, &l), Pref::Llc(3));
        // the fit limit still counts the runtime of every LLC
        let occ = [8 * EP, 0, 0, 0];
        assert_eq!(choose(&occ, None, Some(1), 2, 1, EP, &l), Pref::DropFit);
    }

    #[test]
    fn decay_halves_per_epoch() {
        let mut occ = [1024, 3, u64::MAX];
        decay(&mut occ, 1);
        assert_eq!(occ, [512, 1, u64::MAX >> 1]);
        decay(&mut occ, 64);
        assert_eq!(occ, [0, 0, 0]);
    }

    #[test]
    fn gates() {
        let one = 1u32 << LOAD_SHIFT;
        assert_eq!(busy_pct(2 * one, 4), 50);
        assert_eq!(busy_pct(4 * one, 4), 100);
        assert_eq!(busy_pct(one, 0), 0);
        // runnable tasks up to the CPUs: never overloaded
        assert!(!overloaded(4 * one, 4 * one, 4));
        // more tasks than CPUs and util above 100/117 (85.5%) of 4 CPUs
        assert!(overloaded(4 * one + 1, 4 * one, 4));
        assert!(overloaded(5 * one, 35 * one / 10, 4)); // 87.5%
        // a burst queued on a half-idle LLC is not overload
        assert!(!overloaded(6 * one, 2 * one, 4));
        assert!(!overloaded(5 * one, 34 * one / 10, 4)); // 85%
        // into: destination lightly used -> allowed whatever the source
        assert!(may_enter(0, 50, 50, 20));
        // destination over 50% but not 20% busier than the source
        assert!(may_enter(60, 72, 50, 20));
        // over 50% and more than 20% busier: refused
        assert!(!may_enter(60, 73, 50, 20));
        assert!(!may_enter(0, 51, 50, 20));
        // out: only when the preferred LLC is overloaded
        assert!(!may_leave(false));
        assert!(may_leave(true));
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
