// SPDX-License-Identifier: GPL-2.0-only
//! scx_locality: the user-space agent of a locality-aware sched_ext scheduler.
//!
//! Idea: place waking tasks on an idle CPU as close as possible to where
//! they last ran (push, ops.select_cpu), and let CPUs that run out of work
//! steal queued tasks from the nearest overloaded CPU (pull, ops.dispatch):
//! SMT core first, then the last-level cache, then the NUMA node. Weighted
//! vtime keeps it fair. The BPF side (src/bpf/) does the scheduling; this
//! agent reads the topology, fills the BPF rodata, loads and attaches the
//! scheduler, serves statistics and reports how it ended.
//!
//! Seed: Steve Sistare's 2018 "select_idle_sibling rework" for CFS (idle
//! core/CPU search per LLC plus stealing by CPUs about to go idle).
//!
//! Knobs (see --help): --slice-us, --wake-gran-us, --no-steal, --no-idle-core,
//! --sparse-idle / --no-sparse-idle (idle tracking of the push side, see
//! bpf/idle.bpf.c),
//! --steal-cross-node, --no-push-cross-node, --numa-balance,
//! --numa-interval-ms, --iwq-period-us, --cache-aware / --no-cache-aware,
//! --cache-wake-aggr, --aggr-tolerance, --cache-switch-ratio,
//! --epoch-period-ms, --epoch-affinity-timeout, --overaggr-pct, --imb-pct,
//! --cache-top (cache-aware scheduling, see cache.rs and bpf/cache.bpf.c),
//! --memory, --memory-budget-mbps, --memory-interval-ms (memory placement,
//! agent-side, see memory.rs),
//! --topology-override FILE, --stats SECS, --monitor SECS, --exit-dump-len,
//! -v.
//!
//! Stats: see stats.rs. At exit one JSON line
//! `scx_locality-final-stats: {...}` goes to stdout (summed over restarts),
//! before any error line.
//!
//! Startup prints one line on stdout, `scx_locality: attached (N CPUs, L
//! LLCs, M nodes, steal=on|off, ...)`, once the kernel runs the scheduler
//! (ops name "locality" in /sys/kernel/sched_ext/root/ops). The kernel's
//! stall watchdog is left at the kernel's 30 s (ops.timeout_ms; see
//! bpf/main.bpf.c for the measurement behind it); the environment variable
//! SCX_TIMEOUT_MS overrides it (read by scx_utils). The stat max_wait_ms
//! shows the longest wait actually seen.
//!
//! Exit codes:
//!   0  clean exit (SIGINT/SIGTERM: the scheduler was detached)
//!   1  any other error
//!   2  bad command line (clap)
//!   3  not running as root
//!   4  the kernel has no sched_ext (/sys/kernel/sched_ext missing)
//!   5  another sched_ext scheduler is loaded
//!   6  bad --topology-override file
//!   7  the kernel ejected the scheduler (exit kind and reason printed)
//! Every error is one line on stderr starting `scx_locality: error: `.
//! When the kernel asks for a restart (SCX_ECODE_ACT_RESTART, e.g. a CPU
//! with unknown topology came online) the agent reloads by itself.

mod bpf_intf;
mod bpf_skel;
mod cache;
mod home;
mod memory;
mod numa;
mod stats;
mod topology;

use anyhow::{anyhow, bail, Context, Result};
use bpf_skel::*;
use clap::{ArgAction, Parser};
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, ProgramType};
use log::{debug, info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_read, uei_report};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memory::MemoryMode;
use numa::NumaBalance;
use stats::{Metrics, ProgRunTime, NR_STATS};
use topology::{Topo, MAX_SMT};

/// The name the kernel shows in /sys/kernel/sched_ext/root/ops.
const OPS_NAME: &str = "locality";

const EXIT_CODES: &str = "\
Exit codes:
  0  clean exit (SIGINT/SIGTERM detached the scheduler)
  1  other error
  2  bad command-line flag
  3  not root
  4  kernel without sched_ext (/sys/kernel/sched_ext missing)
  5  another sched_ext scheduler is already loaded
  6  bad --topology-override file
  7  scheduler ejected by the kernel (exit kind and reason are printed)";

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_NOT_ROOT: i32 = 3;
pub const EXIT_NO_SCHED_EXT: i32 = 4;
pub const EXIT_BUSY: i32 = 5;
pub const EXIT_BAD_OVERRIDE: i32 = 6;
pub const EXIT_EJECTED: i32 = 7;

#[derive(Debug, Parser)]
#[command(
    name = "scx_locality",
    version,
    about = "Locality-aware sched_ext scheduler: idle-core/LLC/node push at wakeup, \
             SMT/LLC/node pull when idle",
    after_help = EXIT_CODES
)]
struct Opts {
    /// Time slice in microseconds.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_SLICE_US as u64,
          value_parser = clap::value_parser!(u64).range(100..=100_000))]
    slice_us: u64,

    /// Disable the pull side (dispatch-time stealing and stealer wake-ups).
    #[arg(long)]
    no_steal: bool,

    /// Wake-up preemption: a woken task more than this many microseconds
    /// of virtual time ahead of the running one preempts it. 0 (default)
    /// = off: 1000 did not lower wakelat's latency in the lab (see
    /// bpf/main.bpf.c, wake_preempt).
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_WAKE_GRAN_US as u64,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    wake_gran_us: u64,

    /// Skip the idle-core steps of the push side (prev core, idle core in
    /// the LLC): an A/B switch for the idle-core preference.
    #[arg(long)]
    no_idle_core: bool,

    /// Allow stealing from CPUs of other NUMA nodes whenever a CPU would
    /// otherwise idle. Without --numa-balance this selects
    /// --numa-balance=off (the behaviour this flag always had); with a
    /// policy mode it is ignored (the policy decides).
    #[arg(long)]
    steal_cross_node: bool,

    /// NUMA balancing policy. off: cross-node steals whenever a CPU would
    /// idle (= --steal-cross-node), wake-ups leave the node when it has no
    /// idle CPU; upstream: Linux's bounded imbalance (imb_numa_nr); idle-cpus:
    /// the allowance of Gorman's 2019 v2 patch (small imbalances ignored while
    /// the busiest node keeps about half its CPUs idle). Default: upstream
    /// (off with --steal-cross-node).
    #[arg(long, value_enum, value_name = "MODE")]
    numa_balance: Option<NumaBalance>,

    /// Period of the cross-node balance pass, in milliseconds; also the
    /// least time between two node changes of one task (policy modes).
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_NUMA_INTERVAL_MS as u64,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    numa_interval_ms: u64,

    /// Idle-CPU search at wakeup from our own sparse idle flags (one cache
    /// line per CPU, updated by ops.update_idle, searched by walking the
    /// LLC / node CPU lists; bpf/idle.bpf.c) instead of the kernel's
    /// built-in idle masks. Off by default: see bpf/push.bpf.c for the
    /// lab figures.
    #[arg(long, overrides_with = "no_sparse_idle")]
    sparse_idle: bool,

    /// Use the kernel's built-in idle masks for the wakeup search (default).
    #[arg(long, overrides_with = "sparse_idle")]
    no_sparse_idle: bool,

    /// Never place a waking task on an idle CPU outside its previous node.
    #[arg(long)]
    no_push_cross_node: bool,

    /// NUMA policy: a task woken synchronously from another node never
    /// follows its waker there (numa.bpf.c rule 2b; A/B switch).
    #[arg(long)]
    no_wake_follow: bool,

    /// NUMA policy: place a new process on the least loaded node at fork
    /// too, not only at exec (a forked child then starts away from the
    /// memory it shares with its parent).
    #[arg(long)]
    place_at_fork: bool,

    /// A task woken synchronously by a task in another LLC of its node is
    /// not moved to an idle CPU of the waker's LLC (push.bpf.c step 0b,
    /// the kernel's wake_affine(); A/B switch).
    #[arg(long)]
    no_wake_affine: bool,

    /// Cache-aware scheduling (off by default): each multi-threaded process
    /// gets a preferred LLC; idle CPUs pull its tasks there and
    /// steals/wakeups do not take them out of it while it is not
    /// overloaded; an idle CPU of the preferred LLC asks a task running
    /// elsewhere to come at its next wake-up. Off by default: in the lab
    /// (spr-1n2llc, hackbench -T 2 pairs, 3 boots) it keeps a 4-thread
    /// process's runtime in one LLC (99-100%, without it 76-77%, EEVDF
    /// 98-99%) and was not slower than EEVDF anywhere, but its speed gains
    /// are mostly within the noise, and the NUMA and memory benchmarks
    /// were measured with it off and have not been re-run with it on.
    #[arg(long, overrides_with = "no_cache_aware")]
    cache_aware: bool,

    /// Switch cache-aware scheduling off.
    #[arg(long, overrides_with = "cache_aware")]
    no_cache_aware: bool,

    /// Wake-time aggregation (off by default, as in the seed): a waking
    /// task takes an idle CPU of its process's preferred LLC (same node)
    /// instead of searching from its previous LLC, at every wake-up (without
    /// it only tasks asked by an idle CPU there do). Needs cache-aware.
    #[arg(long)]
    cache_wake_aggr: bool,

    /// Cache-aware: scales the fit limit (a process keeps its preferred LLC
    /// while its running threads need at most 80% x N of the LLC's cores,
    /// SMT siblings counted once); 100 = no limit.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_AGGR_TOL,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    aggr_tolerance: u32,

    /// Cache-aware: hysteresis; the preferred LLC changes only when another
    /// LLC has more than N times its occupancy.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_SWITCH_RATIO,
          value_parser = clap::value_parser!(u32).range(1..=16))]
    cache_switch_ratio: u32,

    /// Cache-aware: epoch length in ms; occupancy halves every epoch.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_EPOCH_MS as u64,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    epoch_period_ms: u64,

    /// Cache-aware: epochs without activity after which a process's
    /// preferred LLC is ignored.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_EPOCH_TIMEOUT,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    epoch_affinity_timeout: u32,

    /// Cache-aware: a move into the preferred LLC is refused when that LLC
    /// is more than PCT busy (utilisation, so 100 turns the gate off) and
    /// busier than the source by --imb-pct.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_OVERAGGR_PCT,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    overaggr_pct: u32,

    /// Cache-aware: how much busier (percent) than the source the
    /// preferred LLC may be before a move into it is refused.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_CACHE_IMB_PCT,
          value_parser = clap::value_parser!(u32).range(0..=1000))]
    imb_pct: u32,

    /// Cache-aware: processes listed in the statistics (top by runtime).
    #[arg(long, default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(0..=1000))]
    cache_top: u64,

    /// Memory placement (agent-side, memory.rs): off does nothing at all;
    /// local moves each process's memory to its home node; spread (van
    /// Riel 2014) does that for single-node processes and, for processes
    /// spanning nodes, keeps private memory on its node and spreads shared
    /// memory over the active nodes.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = MemoryMode::Spread)]
    memory: MemoryMode,

    /// Memory placement: most MB migrated in any one second.
    #[arg(long, default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    memory_budget_mbps: u64,

    /// Memory placement: bind each process whose busy threads fit one node
    /// to a node (the one holding its memory if it has room), so that it
    /// becomes single-node and its memory can follow; restricted threads
    /// are left alone, masks are given back on exit. Off by default: it
    /// overrides the CPU affinity the application sees.
    #[arg(long)]
    memory_node_affinity: bool,

    /// Memory placement: do not give processes home nodes. By default each
    /// process with two or more busy threads that fit one node gets a home
    /// node (the one holding its memory if it has room, within a fair share
    /// of the busy threads) and BPF keeps its threads there: wake-ups go
    /// home, pushes and steals do not take them away, the balance pass
    /// sends them back or swaps two (home.bpf.c). A soft preference, unlike
    /// --memory-node-affinity. Needs --memory and a NUMA policy.
    #[arg(long)]
    no_home_node: bool,

    /// Memory placement: period of the /proc scan, in milliseconds.
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..=60_000))]
    memory_interval_ms: u64,

    /// JSON file replacing the LLC grouping, e.g. {"llcs": ["0-3", "4-7"]}.
    #[arg(long, value_name = "FILE")]
    topology_override: Option<PathBuf>,

    /// Period of the sampling timer (idle-while-queued estimate, load
    /// averages, rescue kicks), in microseconds. Every run is a softirq on
    /// one CPU: 1000 cost netperf TCP_STREAM ~10% on haswell2s.
    #[arg(long, default_value_t = bpf_intf::locality_consts_DFL_IWQ_PERIOD_US as u64,
          value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    iwq_period_us: u64,

    /// Run the scheduler and print statistics every SECS seconds.
    #[arg(long, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    stats: Option<u64>,

    /// Do not load anything: print statistics of the running instance
    /// every SECS seconds.
    #[arg(long, value_name = "SECS", conflicts_with = "stats",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    monitor: Option<u64>,

    /// Size of the kernel's debug dump on ejection, in bytes (0: default).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=(1 << 24)))]
    exit_dump_len: u32,

    /// More logging (-v: debug, -vv: also libbpf debug output).
    #[arg(short, long, action = ArgAction::Count)]
    verbose: u8,
}

/// Idle tracking used by the push side when neither --sparse-idle nor
/// --no-sparse-idle is given (see bpf/push.bpf.c for why).
const DFL_SPARSE_IDLE: bool = false;

impl Opts {
    /// Sparse idle tracking in force: the last of --sparse-idle /
    /// --no-sparse-idle wins, neither gives DFL_SPARSE_IDLE.
    fn sparse_idle(&self) -> bool {
        if self.sparse_idle {
            true
        } else if self.no_sparse_idle {
            false
        } else {
            DFL_SPARSE_IDLE
        }
    }

    /// Cache-aware scheduling in force (only with --cache-aware; the last
    /// of --cache-aware / --no-cache-aware wins).
    fn cache_aware(&self) -> bool {
        self.cache_aware && !self.no_cache_aware
    }

    /// The NUMA mode in force: --numa-balance, else off if
    /// --steal-cross-node was given (its old meaning), else upstream.
    fn numa_mode(&self) -> NumaBalance {
        match self.numa_balance {
            Some(m) => m,
            None if self.steal_cross_node => NumaBalance::Off,
            None => NumaBalance::Upstream,
        }
    }

    /// Home nodes (home.bpf.c): on unless --no-home-node; they need the
    /// memory thread (it plans them) and a NUMA policy (it enforces them).
    fn home_node(&self) -> bool {
        !self.no_home_node && self.memory != MemoryMode::Off && self.numa_mode() != NumaBalance::Off
    }
}

/// An error with its own exit code.
#[derive(Debug)]
struct Fatal {
    code: i32,
    msg: String,
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.msg)
    }
}

impl std::error::Error for Fatal {}

fn fatal(code: i32, msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Fatal {
        code,
        msg: msg.into(),
    })
}

/// Map an error to (exit code, one-line message).
fn classify(e: &anyhow::Error) -> (i32, String) {
    if let Some(f) = e.downcast_ref::<Fatal>() {
        return (f.code, f.msg.clone());
    }
    let msg = format!("{e:#}").replace('\n', " ");
    (EXIT_ERROR, msg)
}

/// Checks that need no BPF: who we are and what the kernel offers.
fn preflight() -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(fatal(EXIT_NOT_ROOT, "must run as root (CAP_SYS_ADMIN and CAP_BPF)"));
    }
    if !std::path::Path::new("/sys/kernel/sched_ext").exists() {
        return Err(fatal(
            EXIT_NO_SCHED_EXT,
            "this kernel has no sched_ext (/sys/kernel/sched_ext missing; \
             needs CONFIG_SCHED_CLASS_EXT=y)",
        ));
    }
    check_not_busy()
}

fn check_not_busy() -> Result<()> {
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state")
        .context("reading /sys/kernel/sched_ext/state")?;
    if state.trim() != "disabled" {
        let name = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        return Err(fatal(
            EXIT_BUSY,
            format!(
                "another sched_ext scheduler is loaded: \"{name}\" (state: {})",
                state.trim()
            ),
        ));
    }
    Ok(())
}

/// After an exit the kernel tears the scheduler down asynchronously; wait
/// (bounded) until sched_ext reports "disabled" before loading again.
fn wait_disabled(max: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < max {
        match std::fs::read_to_string("/sys/kernel/sched_ext/state") {
            Ok(s) if s.trim() != "disabled" => std::thread::sleep(Duration::from_millis(50)),
            _ => return,
        }
    }
}

fn load_topology(opts: &Opts) -> Result<Topo> {
    let mut topo = Topo::from_system()?;
    if let Some(path) = &opts.topology_override {
        topology::apply_override_file(&mut topo, path)
            .map_err(|e| fatal(EXIT_BAD_OVERRIDE, e))?;
    }
    Ok(topo)
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn cstr(bytes: &[std::os::raw::c_char]) -> String {
    let b: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// Name of a kernel exit kind (enum scx_exit_kind).
fn exit_kind_name(kind: i32) -> &'static str {
    match kind {
        0 => "NONE",
        1 => "DONE",
        64 => "UNREG",
        65 => "UNREG_BPF",
        66 => "UNREG_KERN",
        67 => "SYSRQ",
        1024 => "ERROR",
        1025 => "ERROR_BPF",
        1026 => "ERROR_STALL",
        _ => "UNKNOWN",
    }
}

enum Outcome {
    /// Detached on request.
    Done,
    /// The kernel or the BPF side asked for a reload.
    Restart,
    /// The kernel threw us out: message for the error line.
    Ejected(String),
}

struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    /// None if the socket could not be created: scheduling goes on.
    server: Option<scx_stats::StatsServer<(), Metrics>>,
    nr_llcs: usize,
    cache_top: usize,
    /// Every process seen in the cache map, last snapshot: a process that
    /// exited (its entry deleted) still shows in the final statistics.
    cache_seen: BTreeMap<u32, cache::CacheProc>,
    cache_last: std::time::Instant,
    /// The memory placement thread (None with --memory=off).
    memory: Option<memory::MemoryThread>,
    memory_mode: MemoryMode,
    memory_budget_mbps: u64,
    /// Its stats once stopped.
    memory_last: memory::MemStats,
    /// Generation of the home plan last written to proc_home.
    home_gen: u64,
}

impl<'a> Scheduler<'a> {
    fn init(
        opts: &Opts,
        topo: &Topo,
        open_object: &'a mut MaybeUninit<libbpf_rs::OpenObject>,
    ) -> Result<Self> {
        // libbpf's output goes through init_libbpf_logging() (main); do not
        // call obj_builder.debug(), which would replace that callback.
        let builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            locality_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;

        // scx_ops_open! appends a version suffix to the ops name; the lab
        // (and anyone reading /sys/kernel/sched_ext/root/ops) expects
        // exactly "locality".
        {
            let ops = skel.struct_ops.locality_ops_mut();
            ops.name.fill(0);
            for (d, s) in ops.name.iter_mut().zip(OPS_NAME.bytes()) {
                *d = s as _;
            }
            ops.exit_dump_len = opts.exit_dump_len;
        }

        let b = topo.to_bpf();
        let r = skel
            .maps
            .rodata_data
            .as_mut()
            .ok_or_else(|| anyhow!("BPF object has no rodata"))?;
        r.nr_cpus = b.nr_cpus;
        r.nr_llcs = b.nr_llcs;
        r.nr_nodes = b.nr_nodes;
        r.slice_ns = opts.slice_us * 1000;
        // a sleeper may come back at most one slice ahead of the front
        r.slice_lag_ns = opts.slice_us * 1000;
        r.iwq_period_ns = opts.iwq_period_us * 1000;
        r.no_steal = opts.no_steal;
        r.no_idle_core = opts.no_idle_core;
        r.sparse_idle = opts.sparse_idle();
        r.wake_gran_ns = opts.wake_gran_us * 1000;
        let mode = opts.numa_mode();
        // off: cross-node steals whenever a CPU would idle (the old flag)
        r.steal_cross_node = mode == NumaBalance::Off;
        r.push_cross_node = !opts.no_push_cross_node;
        r.wake_follow = !opts.no_wake_follow;
        r.place_at_fork = opts.place_at_fork;
        r.wake_affine = !opts.no_wake_affine;
        r.numa_mode = mode.bpf_mode();
        r.numa_interval_ns = opts.numa_interval_ms * 1_000_000;
        r.home_enabled = opts.home_node();
        let cache_on = opts.cache_aware() && (topo.nr_llcs as usize) <= cache::CACHE_MAX_LLCS;
        if opts.cache_aware() && !cache_on {
            warn!(
                "cache-aware scheduling off: {} LLCs, more than the {} it tracks",
                topo.nr_llcs,
                cache::CACHE_MAX_LLCS
            );
        }
        r.cache_aware = cache_on;
        r.cache_track = cache_on;
        r.cache_wake_aggr = cache_on && opts.cache_wake_aggr;
        r.cache_epoch_ns = opts.epoch_period_ms * 1_000_000;
        r.cache_epoch_timeout = opts.epoch_affinity_timeout;
        r.cache_switch_ratio = opts.cache_switch_ratio;
        r.cache_aggr_tol = opts.aggr_tolerance;
        r.cache_overaggr_pct = opts.overaggr_pct;
        r.cache_imb_pct = opts.imb_pct;
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

        let mut skel = scx_ops_load!(skel, locality_ops, uei)?;

        // Last chance to notice another scheduler before attaching: gives
        // the right exit code instead of a generic attach failure.
        check_not_busy()?;
        let link = scx_ops_attach!(skel, locality_ops)?;

        let server = match stats::launch_server() {
            Ok(s) => Some(s),
            Err(e) => {
                warn!("stats server unavailable ({e:#}); --stats/--monitor will not work");
                None
            }
        };

        println!(
            "scx_locality: attached ({} CPUs, {} LLCs, {} nodes, steal={}, idle_core={}, sparse_idle={}, wake_gran={}us, \
             steal_cross_node={}, push_cross_node={}, wake_follow={}, wake_affine={}, numa_balance={}, numa_interval={}ms, \
             imb_numa_nr={:?}, cache_aware={}, cache_wake_aggr={}, epoch={}ms, \
             memory={}, memory_budget={}MB/s, home_node={}, slice={}us, topology={})",
            topo.possible_cpus().len(),
            topo.nr_llcs,
            topo.nr_nodes,
            on_off(!opts.no_steal),
            on_off(!opts.no_idle_core),
            on_off(opts.sparse_idle()),
            opts.wake_gran_us,
            on_off(opts.numa_mode() == NumaBalance::Off),
            on_off(!opts.no_push_cross_node),
            on_off(!opts.no_wake_follow),
            on_off(!opts.no_wake_affine),
            opts.numa_mode().name(),
            opts.numa_interval_ms,
            allowances,
            on_off(cache_on),
            on_off(cache_on && opts.cache_wake_aggr),
            opts.epoch_period_ms,
            opts.memory.name(),
            opts.memory_budget_mbps,
            on_off(opts.home_node()),
            opts.slice_us,
            if topo.overridden { "override" } else { "sysfs" },
        );
        let _ = std::io::stdout().flush();
        info!("topology: {}", topo.describe());

        // Memory placement runs on its own thread (never in this loop).
        let memory = memory::MemoryThread::start(memory::MemOpts {
            mode: opts.memory,
            budget_mbps: opts.memory_budget_mbps,
            interval_ms: opts.memory_interval_ms,
            cpu_node: topo
                .cpus
                .iter()
                .map(|c| c.as_ref().map(|p| p.node).unwrap_or(usize::MAX))
                .collect(),
            nr_nodes: topo.nr_nodes,
            node_affinity: opts.memory_node_affinity,
            home_nodes: opts.home_node(),
        });
        if opts.memory != MemoryMode::Off && memory.is_none() {
            warn!("memory placement thread could not start; going on without it");
        }

        Ok(Self {
            skel,
            link: Some(link),
            memory,
            memory_mode: opts.memory,
            memory_budget_mbps: opts.memory_budget_mbps,
            memory_last: Default::default(),
            home_gen: 0,
            server,
            nr_llcs: topo.nr_llcs as usize,
            cache_top: opts.cache_top as usize,
            cache_seen: BTreeMap::new(),
            cache_last: std::time::Instant::now(),
        })
    }

    fn counters(&self) -> Vec<u64> {
        (0..NR_STATS as u32)
            .map(|idx| {
                match self
                    .skel
                    .maps
                    .stats
                    .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
                {
                    Ok(Some(v)) => stats::sum_percpu(&v),
                    Ok(None) => 0,
                    Err(e) => {
                        debug!("reading stats[{idx}]: {e}");
                        0
                    }
                }
            })
            .collect()
    }

    /// Per-callback run time, if the kernel is counting it.
    fn prog_run_times(&self) -> BTreeMap<String, ProgRunTime> {
        let mut out = BTreeMap::new();
        let enabled = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
            .map(|s| s.trim() == "1")
            .unwrap_or(false);
        if !enabled {
            return out;
        }
        for prog in self.skel.object().progs() {
            if prog.prog_type() != ProgramType::StructOps {
                continue;
            }
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            let ret = unsafe {
                libbpf_rs::libbpf_sys::bpf_obj_get_info_by_fd(
                    prog.as_fd().as_raw_fd(),
                    &mut info as *mut _ as *mut std::ffi::c_void,
                    &mut len,
                )
            };
            if ret != 0 {
                continue;
            }
            let name = prog.name().to_string_lossy();
            let name = name.strip_prefix("locality_").unwrap_or(&name).to_string();
            out.insert(
                name,
                ProgRunTime {
                    run_time_ns: info.run_time_ns,
                    run_cnt: info.run_cnt,
                },
            );
        }
        out
    }

    /// Snapshot the cache map into `cache_seen` (at most every 100 ms).
    fn cache_refresh(&mut self, force: bool) {
        if self.cache_top == 0
            || (!force && self.cache_last.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.cache_last = std::time::Instant::now();
        for p in self.cache_read() {
            self.cache_seen.insert(p.tgid, p);
        }
        // bounded: keep the processes with the most runtime
        if self.cache_seen.len() > 4096 {
            let keep = cache::top_n(self.cache_seen.values().cloned().collect(), 2048);
            self.cache_seen = keep.into_iter().map(|p| (p.tgid, p)).collect();
        }
    }

    /// The cache-aware policy's processes, top `cache_top` by runtime,
    /// exited ones included (last snapshot).
    fn cache_procs(&self) -> Vec<cache::CacheProc> {
        let mut all = self.cache_seen.clone();
        for p in self.cache_read() {
            all.insert(p.tgid, p);
        }
        cache::top_n(all.into_values().collect(), self.cache_top)
    }

    /// Copy the memory thread's home plan into BPF when it changed.
    fn home_sync(&mut self) {
        if let Some(t) = &self.memory {
            home::sync(&mut self.skel, &t.homes, &mut self.home_gen);
        }
    }

    fn cache_read(&self) -> Vec<cache::CacheProc> {
        if self.cache_top == 0 {
            return vec![];
        }
        let map = &self.skel.maps.cache_procs;
        let mut out = vec![];
        for key in map.keys() {
            if key.len() < 4 {
                continue;
            }
            let tgid = u32::from_ne_bytes(key[..4].try_into().unwrap());
            if let Ok(Some(v)) = map.lookup(&key, MapFlags::ANY) {
                if let Some(p) = cache::decode(tgid, &v, self.nr_llcs) {
                    out.push(p);
                }
            }
        }
        out
    }

    fn metrics(&self) -> Metrics {
        let mut m = Metrics::from_counters(&self.counters());
        m.cache_procs = self.cache_procs();
        m.bpf_prog = self.prog_run_times();
        let mem = match &self.memory {
            Some(t) => t.snapshot(),
            None => self.memory_last.clone(),
        };
        m.set_memory(self.memory_mode.name(), self.memory_budget_mbps, &mem);
        if let Some(bss) = self.skel.maps.bss_data.as_ref() {
            let n = (self.skel.maps.rodata_data.as_ref().map(|r| r.nr_nodes).unwrap_or(1) as usize)
                .min(bss.node_load.len());
            // plain loads of BPF-updated u32/u64 globals: a torn value is
            // impossible on 64-bit, a stale one harmless
            m.set_node_load(
                (0..n)
                    .map(|i| unsafe { std::ptr::read_volatile(&bss.node_load[i]) })
                    .collect(),
                (0..n)
                    .map(|i| unsafe { std::ptr::read_volatile(&bss.node_load_sum[i]) })
                    .collect(),
                unsafe { std::ptr::read_volatile(&bss.load_samples) },
            );
            let nl = (self.skel.maps.rodata_data.as_ref().map(|r| r.nr_llcs).unwrap_or(1) as usize)
                .min(bss.llc_load.len());
            let gauge = |v: &[u32]| -> Vec<u32> {
                (0..nl).map(|i| unsafe { std::ptr::read_volatile(&v[i]) }).collect()
            };
            m.set_llc_load(&gauge(&bss.llc_load), &gauge(&bss.llc_util));
            m.max_wait_ms = unsafe { std::ptr::read_volatile(&bss.max_wait_ns) } as f64 / 1e6;
            let (pid, cpu, allowed, queued) = unsafe {
                (
                    std::ptr::read_volatile(&bss.max_wait_pid),
                    std::ptr::read_volatile(&bss.max_wait_cpu),
                    std::ptr::read_volatile(&bss.max_wait_allowed),
                    std::ptr::read_volatile(&bss.max_wait_queued),
                )
            };
            if pid > 0 {
                m.max_wait_task =
                    format!("pid {pid} cpu {cpu} allowed {allowed} queued {queued}");
            }
        }
        m
    }

    /// Serve stats until asked to stop or the scheduler exits; return how
    /// it ended and the final counters (read before detaching).
    fn run(&mut self, shutdown: &AtomicBool) -> Result<(Outcome, Metrics)> {
        let chans = self.server.as_ref().map(|s| s.channels());
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            self.cache_refresh(false);
            self.home_sync();
            let Some((res_tx, req_rx)) = &chans else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            match req_rx.recv_timeout(Duration::from_millis(100)) {
                Ok(()) => res_tx.send(self.metrics())?,
                Err(e) if e.is_timeout() => {}
                Err(e) => bail!("stats channel: {e}"),
            }
        }

        // stop the memory thread first: its last numbers go into `m`
        if let Some(t) = self.memory.take() {
            let stats = t.stats.clone();
            drop(t);
            self.memory_last = stats.lock().map(|s| s.clone()).unwrap_or_default();
        }
        let m = self.metrics();
        let exited_on_its_own = uei_exited!(&self.skel, uei);
        // Detach (a no-op for the kernel if it already disabled us).
        self.link.take();

        let uei = uei_read!(&self.skel, uei);
        if uei.should_restart() {
            info!("the kernel asked for a restart; reloading");
            return Ok((Outcome::Restart, m));
        }
        if !exited_on_its_own {
            return Ok((Outcome::Done, m));
        }

        let d = self.skel.maps.data_data.as_ref().unwrap();
        let kind = unsafe { std::ptr::read_volatile(&d.uei.kind as *const i32) };
        let reason = cstr(&d.uei.reason);
        let msg = cstr(&d.uei.msg);
        // the kernel's debug dump (stderr), then our one line
        if kind >= 1024 {
            let _ = uei_report!(&self.skel, uei);
        }
        let mut line = format!(
            "scheduler ejected by the kernel: {} ({kind})",
            exit_kind_name(kind)
        );
        if !reason.is_empty() {
            line += &format!(": {reason}");
        }
        if !msg.is_empty() {
            line += &format!(" ({})", msg.replace('\n', " "));
        }
        Ok((Outcome::Ejected(line), m))
    }
}

fn init_logging(verbose: u8) {
    let level = if verbose > 0 {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .build();
    let _ = simplelog::TermLogger::init(
        level,
        cfg,
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
    // libbpf's own messages: warnings always (a verifier rejection log is
    // a warning), everything with -vv.
    let min = if verbose > 1 {
        libbpf_rs::PrintLevel::Debug
    } else {
        libbpf_rs::PrintLevel::Warn
    };
    libbpf_rs::set_print(Some((min, libbpf_print)));
}

fn libbpf_print(level: libbpf_rs::PrintLevel, msg: String) {
    let msg = msg.trim_end();
    // scx_ops_attach! attaches the struct_ops map itself, after the
    // skeleton's generic attach() has complained that it would not.
    if msg.contains("skeleton link is uninitialized") {
        debug!("{msg}");
        return;
    }
    match level {
        libbpf_rs::PrintLevel::Warn => warn!("{msg}"),
        libbpf_rs::PrintLevel::Info => info!("{msg}"),
        libbpf_rs::PrintLevel::Debug => debug!("{msg}"),
    }
}

fn run(opts: &Opts) -> Result<i32> {
    let shutdown = Arc::new(AtomicBool::new(false));
    {
        let shutdown = shutdown.clone();
        ctrlc::set_handler(move || shutdown.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }

    if let Some(secs) = opts.monitor {
        stats::monitor(Duration::from_secs(secs), shutdown)?;
        return Ok(EXIT_OK);
    }

    preflight()?;
    if opts.steal_cross_node && opts.no_steal {
        warn!("--steal-cross-node has no effect with --no-steal");
    }
    if opts.steal_cross_node && opts.numa_mode() != NumaBalance::Off {
        warn!(
            "--steal-cross-node is ignored with --numa-balance={}: the policy decides",
            opts.numa_mode().name()
        );
    }

    if opts.memory_node_affinity && opts.memory == MemoryMode::Off {
        warn!("--memory-node-affinity has no effect with --memory=off (nothing runs)");
    }

    if let Some(secs) = opts.stats {
        let shutdown = shutdown.clone();
        std::thread::spawn(move || {
            if let Err(e) = stats::monitor(Duration::from_secs(secs), shutdown) {
                warn!("stats monitor: {e:#}");
            }
        });
    }

    // Counters of every incarnation (restarts included), printed once at
    // the end whatever the outcome: they are what the lab came for.
    let mut total: Option<Metrics> = None;
    let res = load_loop(opts, &shutdown, &mut total);
    if let Some(m) = &total {
        println!(
            "scx_locality-final-stats: {}",
            serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
        );
        let _ = std::io::stdout().flush();
    }
    res
}

/// Load, attach and run until a clean exit, an ejection or an error;
/// reload when the kernel asks for a restart.
fn load_loop(opts: &Opts, shutdown: &AtomicBool, total: &mut Option<Metrics>) -> Result<i32> {
    loop {
        let topo = load_topology(opts)?;
        let mut open_object = MaybeUninit::uninit();
        let mut sched = Scheduler::init(opts, &topo, &mut open_object)?;
        let (outcome, m) = sched.run(shutdown)?;
        *total = Some(match total.take() {
            Some(t) => t.plus(&m),
            None => m,
        });
        match outcome {
            Outcome::Done => return Ok(EXIT_OK),
            Outcome::Restart => {
                drop(sched);
                wait_disabled(Duration::from_secs(10));
                check_not_busy()?;
                continue;
            }
            Outcome::Ejected(line) => return Err(fatal(EXIT_EJECTED, line)),
        }
    }
}

/// Parse the command line; on a bad flag print one prefixed line and exit 2
/// (clap's code), --help/--version go to stdout with exit 0.
fn parse_opts() -> Opts {
    match Opts::try_parse() {
        Ok(o) => o,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprintln!("scx_locality: error: {}", flag_error_line(&e));
            std::process::exit(e.exit_code());
        }
    }
}

/// The first line of a clap error, without clap's own "error: " prefix.
fn flag_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("bad command line").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

fn main() {
    let opts = parse_opts();
    init_logging(opts.verbose);
    let code = match run(&opts) {
        Ok(code) => code,
        Err(e) => {
            let (code, msg) = classify(&e);
            eprintln!("scx_locality: error: {msg}");
            code
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> std::result::Result<Opts, clap::Error> {
        Opts::try_parse_from(std::iter::once("scx_locality").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.slice_us, 5000);
        assert_eq!(o.iwq_period_us, 4000);
        assert!(!o.no_steal && !o.no_idle_core && !o.steal_cross_node);
        assert!(o.stats.is_none() && o.monitor.is_none());
        assert_eq!(o.numa_mode(), NumaBalance::Upstream);
        assert_eq!(o.numa_interval_ms, 150);
    }

    #[test]
    fn numa_flags() {
        assert_eq!(parse(&["--numa-balance=off"]).unwrap().numa_mode(), NumaBalance::Off);
        assert_eq!(
            parse(&["--numa-balance", "idle-cpus"]).unwrap().numa_mode(),
            NumaBalance::IdleCpus
        );
        // the old flag alone keeps its old meaning
        assert_eq!(parse(&["--steal-cross-node"]).unwrap().numa_mode(), NumaBalance::Off);
        assert_eq!(
            parse(&["--steal-cross-node", "--numa-balance=upstream"])
                .unwrap()
                .numa_mode(),
            NumaBalance::Upstream
        );
        assert!(parse(&["--numa-balance=bogus"]).is_err());
        assert!(parse(&["--numa-interval-ms", "0"]).is_err());
        assert_eq!(parse(&["--numa-interval-ms", "40"]).unwrap().numa_interval_ms, 40);
    }

    #[test]
    fn cache_flags() {
        let o = parse(&[]).unwrap();
        assert!(!o.cache_aware() && !o.cache_wake_aggr);
        assert_eq!(
            (o.aggr_tolerance, o.cache_switch_ratio, o.epoch_period_ms),
            (1, 2, 10)
        );
        assert_eq!((o.epoch_affinity_timeout, o.overaggr_pct, o.imb_pct), (50, 50, 20));
        assert!(!parse(&["--no-cache-aware"]).unwrap().cache_aware());
        assert!(parse(&["--cache-aware"]).unwrap().cache_aware());
        // the last of the pair wins
        assert!(parse(&["--no-cache-aware", "--cache-aware"]).unwrap().cache_aware());
        assert!(!parse(&["--cache-aware", "--no-cache-aware"]).unwrap().cache_aware());
        assert!(parse(&["--cache-wake-aggr"]).unwrap().cache_wake_aggr);
        for bad in [
            "--aggr-tolerance=0",
            "--aggr-tolerance=101",
            "--cache-switch-ratio=0",
            "--cache-switch-ratio=17",
            "--epoch-period-ms=0",
            "--epoch-period-ms=10001",
            "--epoch-affinity-timeout=0",
            "--overaggr-pct=0",
            "--overaggr-pct=101",
            "--imb-pct=-1",
            "--imb-pct=1001",
            "--cache-top=1001",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(flag_error_line(&e).contains(flag), "{bad}: {e}");
        }
        assert_eq!(parse(&["--imb-pct=0"]).unwrap().imb_pct, 0);
        assert_eq!(parse(&["--aggr-tolerance=100"]).unwrap().aggr_tolerance, 100);
    }

    #[test]
    fn sparse_idle_flags() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.sparse_idle(), DFL_SPARSE_IDLE);
        assert!(parse(&["--sparse-idle"]).unwrap().sparse_idle());
        assert!(!parse(&["--no-sparse-idle"]).unwrap().sparse_idle());
        // the last of the pair wins; a repeat is refused like other switches
        assert!(parse(&["--no-sparse-idle", "--sparse-idle"]).unwrap().sparse_idle());
        assert!(!parse(&["--sparse-idle", "--no-sparse-idle"]).unwrap().sparse_idle());
        assert_eq!(parse(&["--sparse-idle", "--sparse-idle"]).unwrap_err().exit_code(), 2);
        // a switch, not an option with a value
        let e = parse(&["--sparse-idle=1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(flag_error_line(&e).contains("--sparse-idle"), "{e}");
        // independent of the idle-core switch
        let o = parse(&["--sparse-idle", "--no-idle-core"]).unwrap();
        assert!(o.sparse_idle() && o.no_idle_core);
    }

    #[test]
    fn memory_flags() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.memory, MemoryMode::Spread);
        assert_eq!((o.memory_budget_mbps, o.memory_interval_ms), (128, 1000));
        assert!(!o.memory_node_affinity);
        assert!(parse(&["--memory-node-affinity"]).unwrap().memory_node_affinity);
        assert!(o.home_node());
        assert!(!parse(&["--no-home-node"]).unwrap().home_node());
        assert!(!parse(&["--memory=off"]).unwrap().home_node());
        assert!(!parse(&["--numa-balance=off"]).unwrap().home_node());
        assert_eq!(parse(&["--memory=off"]).unwrap().memory, MemoryMode::Off);
        assert_eq!(parse(&["--memory", "local"]).unwrap().memory, MemoryMode::Local);
        assert_eq!(parse(&["--memory-budget-mbps=1"]).unwrap().memory_budget_mbps, 1);
        assert_eq!(parse(&["--memory-interval-ms=100"]).unwrap().memory_interval_ms, 100);
        for bad in [
            "--memory=bogus",
            "--memory-budget-mbps=0",
            "--memory-budget-mbps=100001",
            "--memory-interval-ms=99",
            "--memory-interval-ms=60001",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(flag_error_line(&e).contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn slice_range() {
        assert_eq!(parse(&["--slice-us", "100"]).unwrap().slice_us, 100);
        assert_eq!(parse(&["--slice-us", "100000"]).unwrap().slice_us, 100_000);
        for bad in ["99", "100001", "0", "-5", "abc"] {
            let arg = format!("--slice-us={bad}");
            let e = parse(&[arg.as_str()]).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue),
                "{bad}: {e}"
            );
            // clap exits with 2 for these
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("--slice-us"), "{e}");
        }
    }

    #[test]
    fn flag_errors_are_one_line() {
        let e = parse(&["--slice-us=5"]).unwrap_err();
        let line = flag_error_line(&e);
        assert!(!line.starts_with("error:"), "{line}");
        assert!(line.contains("--slice-us") && line.contains("100..=100000"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn other_ranges() {
        assert!(parse(&["--stats", "0"]).is_err());
        assert!(parse(&["--stats", "3601"]).is_err());
        assert_eq!(parse(&["--stats", "2"]).unwrap().stats, Some(2));
        assert!(parse(&["--monitor", "0"]).is_err());
        assert!(parse(&["--iwq-period-us", "99"]).is_err());
        assert!(parse(&["--wake-gran-us", "100001"]).is_err());
        assert_eq!(parse(&["--wake-gran-us", "0"]).unwrap().wake_gran_us, 0);
        assert_eq!(parse(&[]).unwrap().wake_gran_us, 0);
        assert!(parse(&["--iwq-period-us", "1000001"]).is_err());
        assert!(parse(&["--exit-dump-len", "16777217"]).is_err());
        assert!(parse(&["--stats", "1", "--monitor", "1"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }

    #[test]
    fn flags() {
        let o = parse(&[
            "--no-steal",
            "--no-idle-core",
            "--steal-cross-node",
            "--no-push-cross-node",
            "--topology-override",
            "/tmp/x.json",
            "-vv",
        ])
        .unwrap();
        assert!(o.no_steal && o.no_idle_core && o.steal_cross_node && o.no_push_cross_node);
        assert_eq!(o.topology_override, Some(PathBuf::from("/tmp/x.json")));
        assert_eq!(o.verbose, 2);
    }

    #[test]
    fn help_lists_exit_codes() {
        let e = parse(&["--help"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        let s = e.to_string();
        for code in ["0  clean exit", "5  another sched_ext", "6  bad --topology-override", "7  scheduler ejected"] {
            assert!(s.contains(code), "help lacks {code:?}");
        }
    }

    #[test]
    fn fatal_codes() {
        let (c, m) = classify(&fatal(EXIT_BAD_OVERRIDE, "f.json: CPU 9 does not exist"));
        assert_eq!((c, m.as_str()), (6, "f.json: CPU 9 does not exist"));
        let (c, m) = classify(&anyhow!("line one\nline two").context("loading"));
        assert_eq!(c, EXIT_ERROR);
        assert!(!m.contains('\n'));
        assert!(m.starts_with("loading: "), "{m}");
    }

    #[test]
    fn exit_kinds() {
        assert_eq!(exit_kind_name(1026), "ERROR_STALL");
        assert_eq!(exit_kind_name(64), "UNREG");
        assert_eq!(exit_kind_name(12345), "UNKNOWN");
    }

    #[test]
    fn cstr_stops_at_nul() {
        let raw: Vec<std::os::raw::c_char> = b"abc\0def".iter().map(|&b| b as _).collect();
        assert_eq!(cstr(&raw), "abc");
    }
}
