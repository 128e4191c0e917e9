// SPDX-License-Identifier: GPL-2.0-only
//! The BPF side's configuration, written from the options before the
//! scheduler loads: the struct_ops fields the options set (name,
//! exit_dump_len) and every rodata variable the BPF reads (`const volatile`
//! in src/bpf/*.c), the knobs and the topology tables. Each variable is
//! written here whatever its BPF initialiser, so the defaults in force are
//! the options' (cli.rs; a knob's default is intf.h's DFL_*). Tests fail
//! when the skeleton has a rodata variable this file does not assign, and
//! when, with no flag, it writes a knob other than what the BPF object
//! starts with.

use anyhow::{anyhow, Result};
use log::warn;

use crate::bpf_skel::{types, OpenBpfSkel};
use crate::cache::{self, CacheBusyWake, CacheGates};
use crate::cli::{EnqueueHandoff, IdleSearch, Opts, PushCrossNode, SyncWakeTarget};
use crate::numa::{self, ExecPlacement, NumaBalance};
use crate::topology::{Topo, MAX_SMT};

/// The ops name, before the version suffix (cli::ops_name()).
pub const OPS_NAME: &str = "locality";

/// What the attach line reports of the values written.
pub struct Written {
    /// cache-aware scheduling in force (asked for, and few enough LLCs)
    pub cache_on: bool,
    /// the upstream NUMA allowance of each node (node_imb_nr)
    pub allowances: Vec<u32>,
}

/// Write the struct_ops fields and the rodata from the options and the
/// topology.
pub fn write(skel: &mut OpenBpfSkel, opts: &Opts, topo: &Topo) -> Result<Written> {
    // The kernel shows this name in /sys/kernel/sched_ext/root/ops:
    // "locality_<version>_<target>" (scx_ops_open! wrote the crate's
    // version without our commit; cli::ops_name() adds it). The last byte
    // stays NUL.
    {
        let ops = skel.struct_ops.locality_ops_mut();
        let name = crate::cli::ops_name(OPS_NAME);
        ops.name.fill(0);
        let room = ops.name.len() - 1;
        for (d, s) in ops.name.iter_mut().take(room).zip(name.bytes()) {
            *d = s as _;
        }
        ops.exit_dump_len = opts.exit_dump_len;
    }

    let r = skel
        .maps
        .rodata_data
        .as_mut()
        .ok_or_else(|| anyhow!("BPF object has no rodata"))?;
    Ok(fill(r, opts, topo))
}

/// Every rodata variable, from the options and the topology.
fn fill(r: &mut types::rodata, opts: &Opts, topo: &Topo) -> Written {
    let b = topo.to_bpf();
    r.nr_cpus = b.nr_cpus;
    r.nr_llcs = b.nr_llcs;
    r.nr_nodes = b.nr_nodes;
    r.slice_ns = opts.slice_us * 1000;
    // a sleeper may come back at most one slice ahead of the front
    r.slice_lag_ns = opts.slice_us * 1000;
    r.iwq_period_ns = opts.heartbeat_us * 1000;
    r.no_steal = opts.no_steal;
    r.handoff_wake = opts.enqueue_handoff == EnqueueHandoff::All;
    r.handoff_requeue = opts.enqueue_handoff != EnqueueHandoff::Off;
    r.no_idle_core = opts.no_idle_core;
    r.idle_prev_first = opts.idle_search == IdleSearch::PrevFirst;
    r.sparse_idle = opts.sparse_idle();
    r.wake_gran_ns = opts.wake_gran_us * 1000;
    r.decide_period_ns = 1_000_000_000u64.checked_div(opts.decision_rate).unwrap_or(0);
    let mode = opts.numa_mode();
    // off: cross-node steals whenever a CPU would idle (the old flag)
    r.steal_cross_node = mode == NumaBalance::Off;
    r.idle_pull_across = opts.idle_pull_across() && mode != NumaBalance::Off;
    let push = opts.push_cross_node();
    r.push_cross_wake = push == PushCrossNode::Always;
    r.push_cross_fork = push != PushCrossNode::Never;
    r.push_cross_unpaired = push == PushCrossNode::Unpaired;
    r.wake_follow = !opts.no_wake_follow;
    r.place_at_fork = opts.place_at_fork;
    r.place_least_loaded = opts.exec_placement != ExecPlacement::Allowance;
    r.place_quiet_stays = opts.exec_placement == ExecPlacement::LeastLoaded;
    r.wake_affine = !opts.no_wake_affine;
    r.sync_to_waker = opts.sync_wake_target != SyncWakeTarget::Search;
    r.sync_to_waker_pairs = opts.sync_wake_target == SyncWakeTarget::WakerIfPair;
    r.numa_mode = mode.bpf_mode();
    r.numa_interval_ns = opts.numa_interval_ms * 1_000_000;
    r.home_enabled = opts.home_node();
    // by default only where a node holds several LLCs: elsewhere there is
    // nothing to gather and the accounting would be cost without use
    let cache_wanted = opts.cache_aware().unwrap_or_else(|| topo.node_has_several_llcs());
    let cache_on = cache_wanted && topo.nr_llcs <= cache::CACHE_MAX_LLCS;
    if cache_wanted && !cache_on {
        warn!(
            "cache-aware scheduling off: {} LLCs, more than the {} it tracks",
            topo.nr_llcs,
            cache::CACHE_MAX_LLCS
        );
    }
    r.cache_aware = cache_on;
    r.cache_track = cache_on;
    r.cache_wake_aggr = cache_on && opts.cache_wake_aggr;
    r.cache_across_nodes = !opts.cache_within_node;
    r.cache_epoch_ns = opts.cache_epoch_ms * 1_000_000;
    r.cache_epoch_timeout = opts.cache_epoch_timeout;
    r.cache_switch_ratio = opts.cache_switch_ratio;
    r.cache_aggr_tol = opts.cache_aggr_tolerance;
    r.cache_overaggr_pct = opts.cache_overaggr_pct;
    r.cache_imb_pct = opts.cache_imb_pct;
    r.cache_gates_util = opts.cache_gates == CacheGates::Utilisation;
    r.cache_busy_leave = opts.cache_busy_wake == CacheBusyWake::Leave;
    let allowances = numa::node_allowances(topo);
    for (n, a) in allowances.iter().enumerate().take(r.node_imb_nr.len()) {
        r.node_imb_nr[n] = *a;
    }
    for cpu in 0..b.nr_cpus as usize {
        r.cpu_llc[cpu] = b.cpu_llc[cpu];
        r.cpu_node[cpu] = b.cpu_node[cpu];
        r.cpu_core[cpu] = b.cpu_core[cpu];
        r.cpu_topo_known[cpu] = b.cpu_known[cpu];
        r.cpu_nr_sibs[cpu] = b.cpu_sibs[cpu].len() as u8;
        for (j, s) in b.cpu_sibs[cpu].iter().take(MAX_SMT).enumerate() {
            r.cpu_sibs[cpu * MAX_SMT + j] = *s;
        }
    }
    r.llc_off[..b.llc_off.len()].copy_from_slice(&b.llc_off);
    r.llc_cpus[..b.llc_cpus.len()].copy_from_slice(&b.llc_cpus);
    r.node_off[..b.node_off.len()].copy_from_slice(&b.node_off);
    r.node_cpus[..b.node_cpus.len()].copy_from_slice(&b.node_cpus);
    // --sparse-idle's lines (idle.bpf.c); ids past nr_cpus hold no slot
    r.nr_idle_lines = b.line_llc.len() as u32;
    r.cpu_idle_slot.fill(crate::topology::NO_IDLE_SLOT);
    r.cpu_idle_slot[..b.cpu_idle_slot.len()].copy_from_slice(&b.cpu_idle_slot);
    r.llc_line_off[..b.llc_line_off.len()].copy_from_slice(&b.llc_line_off);
    r.line_llc[..b.line_llc.len()].copy_from_slice(&b.line_llc);
    r.node_line_off[..b.node_line_off.len()].copy_from_slice(&b.node_line_off);
    r.node_lines[..b.node_lines.len()].copy_from_slice(&b.node_lines);

    Written { cache_on, allowances }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::RawCpu;
    use clap::Parser;

    /// What the agent writes with no flag, on 2 nodes of 2 CPUs (one LLC
    /// each, no SMT): the defaults the BPF side runs with.
    #[test]
    fn defaults_written() {
        let online: Vec<RawCpu> =
            (0..4).map(|cpu| RawCpu { cpu, node: cpu / 2, llc_key: cpu / 2, core_key: cpu }).collect();
        let topo = Topo::from_raw(&[0, 1, 2, 3], &online).unwrap();
        // all-zero is a valid rodata (integers, bools and arrays of them)
        let filled = |args: &[&str]| {
            let opts = Opts::try_parse_from(args).unwrap();
            let mut r: Box<types::rodata> = Box::new(unsafe { std::mem::zeroed() });
            let w = fill(&mut r, &opts, &topo);
            (r, w)
        };
        let (r, w) = filled(&["scx_locality"]);
        assert_eq!((r.nr_cpus, r.nr_llcs, r.nr_nodes), (4, 2, 2));
        assert_eq!((r.slice_ns, r.slice_lag_ns, r.wake_gran_ns), (5_000_000, 5_000_000, 0));
        assert_eq!(r.iwq_period_ns, 20_000_000);
        assert!(!r.no_steal && !r.no_idle_core && !r.sparse_idle && r.idle_prev_first);
        // a waking task waits to be stolen; a requeued one is handed over
        assert!(!r.handoff_wake && r.handoff_requeue);
        assert!(!r.steal_cross_node && r.wake_follow && r.wake_affine);
        // a CPU going idle pulls across nodes only when asked (idle_pull_across)
        assert!(!r.idle_pull_across);
        // under a NUMA policy only new tasks are pushed to another node
        assert!(r.push_cross_fork && !r.push_cross_wake && !r.push_cross_unpaired);
        // unpaired: new tasks, and wake-ups the BPF side finds unpaired
        let (u, _) = filled(&["scx_locality", "--push-cross-node", "unpaired"]);
        assert!(u.push_cross_fork && !u.push_cross_wake && u.push_cross_unpaired);
        assert!(!r.place_at_fork);
        assert!(r.place_least_loaded && r.place_quiet_stays);
        let (a, _) = filled(&["scx_locality", "--exec-placement", "least-loaded-always"]);
        assert!(a.place_least_loaded && !a.place_quiet_stays);
        assert_eq!(r.numa_mode, NumaBalance::Upstream.bpf_mode());
        assert_eq!(r.numa_interval_ns, 150_000_000);
        assert_eq!(&r.node_imb_nr[..3], &[1, 1, 0]);
        assert_eq!(w.allowances, vec![1, 1]);
        assert!(r.home_enabled);
        assert!(!r.cache_aware && !r.cache_track && !r.cache_wake_aggr && !w.cache_on);
        assert_eq!((r.cache_epoch_ns, r.cache_epoch_timeout, r.cache_switch_ratio), (10_000_000, 50, 2));
        assert_eq!((r.cache_aggr_tol, r.cache_overaggr_pct, r.cache_imb_pct), (1, 50, 20));
        assert!(!r.cache_gates_util);
        assert_eq!((&r.cpu_node[..4], &r.cpu_llc[..4], &r.cpu_core[..4]), (&[0, 0, 1, 1][..], &[0, 0, 1, 1][..], &[0, 1, 2, 3][..]));
        assert_eq!((&r.cpu_topo_known[..4], &r.cpu_nr_sibs[..4]), (&[1, 1, 1, 1][..], &[0, 0, 0, 0][..]));
        assert_eq!((&r.llc_off[..3], &r.node_off[..3]), (&[0, 2, 4][..], &[0, 2, 4][..]));
        assert_eq!((&r.llc_cpus[..4], &r.node_cpus[..4]), (&[0, 1, 2, 3][..], &[0, 1, 2, 3][..]));
        // --sparse-idle: one line per 2-CPU LLC; no slot past the last CPU
        assert_eq!(r.nr_idle_lines, 2);
        assert_eq!(&r.cpu_idle_slot[..5], &[0, 1, 8, 9, crate::topology::NO_IDLE_SLOT][..]);
        assert_eq!((&r.llc_line_off[..3], &r.line_llc[..2]), (&[0, 1, 2][..], &[0, 1][..]));
        assert_eq!((&r.node_line_off[..3], &r.node_lines[..2]), (&[0, 1, 2][..], &[0, 1][..]));
    }

    /// The knobs: the rodata variables the options set (the others are
    /// the topology's, and scx_utils' own).
    const KNOBS: &[&str] = &[
        "slice_ns", "slice_lag_ns", "iwq_period_ns", "no_steal", "handoff_wake", "handoff_requeue",
        "no_idle_core", "idle_prev_first", "sparse_idle", "wake_gran_ns", "decide_period_ns",
        "steal_cross_node", "idle_pull_across", "push_cross_wake", "push_cross_fork", "push_cross_unpaired",
        "wake_follow", "place_at_fork", "place_least_loaded", "place_quiet_stays", "wake_affine",
        "sync_to_waker", "sync_to_waker_pairs",
        "numa_mode", "numa_interval_ns", "home_enabled", "cache_aware", "cache_track", "cache_wake_aggr",
        "cache_across_nodes", "cache_epoch_ns", "cache_epoch_timeout", "cache_switch_ratio",
        "cache_aggr_tol", "cache_overaggr_pct", "cache_imb_pct", "cache_gates_util", "cache_busy_leave",
    ];
    const TOPOLOGY: &[&str] = &[
        "nr_cpus", "nr_llcs", "nr_nodes", "node_imb_nr", "cpu_llc", "cpu_node", "cpu_core",
        "cpu_topo_known", "cpu_nr_sibs", "cpu_sibs", "llc_off", "llc_cpus", "node_off", "node_cpus",
        "nr_idle_lines", "cpu_idle_slot", "llc_line_off", "line_llc", "node_line_off", "node_lines",
    ];
    /// The rodata variable names of the skeleton, scx_utils' own left out.
    fn rodata_names() -> Vec<String> {
        let skel = include_str!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
        let start = skel.find("pub struct rodata {").expect("the skeleton has no rodata struct");
        let body = &skel[start..start + skel[start..].find("\n}").unwrap()];
        body.lines()
            .skip(1)
            .filter_map(|l| l.trim().strip_prefix("pub ")?.split(':').next())
            .filter(|n| !written_by_scx_utils(n))
            .map(str::to_string)
            .collect()
    }

    /// Every default in one place: with no flag, rodata.rs writes each
    /// knob what the BPF object holds before the agent writes anything (its
    /// initialisers: intf.h's DFL_* and the .bpf.c files' constants), read
    /// from the object opened (not loaded) as the agent opens it.
    #[test]
    fn defaults_written_are_what_bpf_starts_with() {
        let names = rodata_names();
        for n in &names {
            assert!(
                KNOBS.contains(&n.as_str()) || TOPOLOGY.contains(&n.as_str()),
                "rodata variable {n}: add it to KNOBS (set by an option) or TOPOLOGY"
            );
        }
        use libbpf_rs::skel::SkelBuilder;
        let mut obj = std::mem::MaybeUninit::uninit();
        let open = crate::bpf_skel::BpfSkelBuilder::default()
            .open(&mut obj)
            .expect("opening the BPF object (no load)");
        let init: &types::rodata = open.maps.rodata_data.as_deref().expect("the object has no rodata");
        // 2 nodes of one LLC each: cache-aware off by default, as BPF starts
        let online: Vec<RawCpu> =
            (0..4).map(|cpu| RawCpu { cpu, node: cpu / 2, llc_key: cpu / 2, core_key: cpu }).collect();
        let topo = Topo::from_raw(&[0, 1, 2, 3], &online).unwrap();
        let opts = Opts::try_parse_from(["scx_locality"]).unwrap();
        let mut w: Box<types::rodata> = Box::new(unsafe { std::mem::zeroed() });
        fill(&mut w, &opts, &topo);
        let mut differ = Vec::new();
        macro_rules! compare {
            ($($f:ident),* $(,)?) => {
                $(
                    if init.$f != w.$f {
                        differ.push(stringify!($f));
                    }
                    eprintln!("{}: BPF starts with {:?}, rodata.rs writes {:?}", stringify!($f), init.$f, w.$f);
                )*
                let listed = [$(stringify!($f)),*];
                assert_eq!(&listed[..], KNOBS, "compare! lists every knob of KNOBS, in order");
            };
        }
        compare!(
            slice_ns, slice_lag_ns, iwq_period_ns, no_steal, handoff_wake, handoff_requeue,
            no_idle_core, idle_prev_first, sparse_idle, wake_gran_ns, decide_period_ns,
            steal_cross_node, idle_pull_across, push_cross_wake, push_cross_fork, push_cross_unpaired,
            wake_follow, place_at_fork, place_least_loaded, place_quiet_stays, wake_affine,
            sync_to_waker, sync_to_waker_pairs,
            numa_mode, numa_interval_ns, home_enabled, cache_aware, cache_track, cache_wake_aggr,
            cache_across_nodes, cache_epoch_ns, cache_epoch_timeout, cache_switch_ratio,
            cache_aggr_tol, cache_overaggr_pct, cache_imb_pct, cache_gates_util, cache_busy_leave,
        );
        assert!(differ.is_empty(), "knobs whose BPF initialiser is not the default: {differ:?}");
    }

    /// Variables of the skeleton's rodata that scx_utils writes itself:
    /// the kernel's enum values (import_enums!), the library's feature bits
    /// and the size of the exit dump (uei_set_size!, from exit_dump_len).
    fn written_by_scx_utils(name: &str) -> bool {
        name.starts_with("__SCX_") || name.starts_with("SCX_") || name == "scx_lib_features" || name == "uei_dump_len"
    }

    #[test]
    fn every_rodata_variable_is_written() {
        let this = include_str!("rodata.rs");
        let names = rodata_names();
        assert!(names.len() > 30, "{names:?}");
        for name in names {
            assert!(
                this.contains(&format!("r.{name} =")) || this.contains(&format!("r.{name}[")),
                "rodata variable {name} is not written by rodata.rs"
            );
        }
    }
}
