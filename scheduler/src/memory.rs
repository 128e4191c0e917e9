// SPDX-License-Identifier: GPL-2.0-only
//! Memory placement for sched_ext tasks (`--memory=off|local|spread`).
//!
//! Idea: the kernel's NUMA balancing never scans a sched_ext task (its
//! scanner is started from the fair class's tick only), so under any
//! sched_ext scheduler nothing moves a task's memory towards where it runs.
//! This module does it from the agent: it watches where each process's
//! threads run, derives the process's home node and active nodes, and
//! migrates the process's resident pages that sit on the wrong node, within
//! a migration budget.
//!
//! Origin: Rik van Riel 2014, "NUMA balancing for workloads that span nodes"
//! (numa_group, active nodes, spreading shared memory over the active
//! nodes, private memory to the thread's node, no migration to inactive
//! nodes). His SPECjbb table: manual pinning 755k bops, automatic balancing
//! with the patches 706-729k, without 638-668k, none 454-544k.
//!
//! Per process (tgid), every `--memory-interval-ms` (default 1000):
//! - Where threads ran: each thread's runtime delta from
//!   /proc/<pid>/task/<tid>/schedstat is charged to the node of the CPU in
//!   field 39 of /proc/<pid>/task/<tid>/stat (the CPU it last ran on),
//!   mapped with the agent's topology. Per node the runtime decays by half
//!   every interval (a few seconds of memory). No BPF involved: a thread
//!   that ran on two nodes within one interval is charged to the last.
//! - Home node: the node with the most (decayed) runtime; it changes only
//!   when another node has 25% more than the current home (hysteresis).
//! - Active nodes: a node is active while its runtime is above a third of
//!   the largest node's. Hysteresis: an inactive node joins at 40% of the
//!   largest, an active one leaves below 27%; the home node is always
//!   active. A process with one active node is "single-node".
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
//! Mechanism, and why: /proc/<pid>/numa_maps (per mapping: pages per node,
//! anon, mapmax) chooses the mappings that need work; move_pages(2) with
//! nodes = NULL reads the node of each page of those mappings (in chunks),
//! and move_pages(2) with MPOL_MF_MOVE moves the chosen pages. move_pages
//! lets each page get its own target (private to one node, shared
//! interleaved) and lets the budget count pages exactly; migrate_pages(2)
//! moves a whole process from node set to node set and cannot split
//! private from shared. DAMON (vaddr, through sysfs) would tell which
//! regions are hot but not from which node they are accessed, which is the
//! question here; its migrate_hot action moves to one target node per
//! scheme, so a per-process, per-mapping target would need a scheme per
//! process. It remains the obvious next step for a hotness filter.
//! Each move_pages call runs with the agent's thread at SCHED_FIFO 1
//! (RtWindow): the owner's threads wait on the pages being moved, and a
//! preempted mover made a CPU-bound job wait for seconds.
//!
//! Tasks to their memory, softly (home nodes, on by default,
//! `--no-home-node`): without them the scheduler's balancing spread the
//! threads of two 4-thread processes over both nodes of numa2, so neither
//! was single-node and its memory could not follow. The kernel's NUMA
//! balancing moves tasks towards their memory (the numa_group's preferred
//! node). Here, every interval, assign_homes() gives each process with two
//! or more busy threads a home node: its current home while it has room,
//! else the node holding most of its memory, else the node with most room;
//! a node's room is its CPUs, capped at its fair share of all candidates'
//! busy threads plus NUMA_IMBALANCE_MIN, so a lone process that the NUMA
//! policy would spread (8 threads on 2 x 8 CPUs) gets no home. Processes
//! with a pinned thread are left out. The plan goes to BPF (proc_home, via
//! the main loop), and home.bpf.c keeps the threads there.
//!
//! Tasks to their memory, hard (`--memory-node-affinity`, off by default):
//! the agent's own lever is CPU affinity. With this switch, each process whose busy threads (more than a
//! tenth of an interval each) fit the free CPUs of one node is bound to a
//! node (its current one while it fits, else the node holding most of its
//! anonymous memory, else the one with the most free CPUs), largest memory
//! first; a process that stops fitting is unbound; on exit every mask is
//! given back. Threads whose affinity was restricted by someone else
//! (taskset, numactl -N, the application) are never touched. It is a hard
//! bind, visible to sched_getaffinity(2): the reason it is off by default.
//!
//! Budget (`--memory-budget-mbps`, default 128 MB/s: half of the address
//! space the kernel's NUMA balancing scans per second at its fastest,
//! numa_balancing_scan_size_mb = 256 every scan_period_min_ms = 1000, and
//! well below what one move_pages(2) caller copies on real hardware; in the
//! TCG lab the guest itself migrates only 10-35 MB/s, so there it does not
//! bind, and the lab test checks it at 4 MB/s): a sliding one
//! second window; a move_pages call is made only if the window's bytes
//! plus the worst case of the call fit, the worst case counting a whole
//! 2 MB huge page per distinct 2 MB region of the call (a transparent huge
//! page moves whole). What the call really moved is then charged: the rise
//! of pgmigrate_success in /proc/vmstat across the call (system-wide, so
//! never less than ours), capped at the call's worst case (compaction and
//! other migrations also raise that counter; see `moved_pages`). So migrated
//! bytes in any one-second window never exceed the knob; the mover sleeps
//! (on its own thread) while the window is full.
//!
//! Below 2 MB/s a single huge page is larger than the budget: it waits for
//! an empty window and may then exceed the knob by its own size.
//!
//! Skipped: mappings with an explicit memory policy (numa_maps shows bind,
//! interleave, prefer...: numactl -m, mbind(2), set_mempolicy(2) are the
//! application's word), kernel threads (PF_KTHREAD), the agent itself, processes with
//! less than MIN_RSS_MB of anonymous memory. A process that exits mid-scan
//! (ESRCH, ENOENT on /proc) is dropped quietly. The work runs on its own
//! thread and never blocks the scheduler's main loop; `--memory=off` starts
//! no thread and touches nothing.
//!
//! Stats (in Metrics, see stats.rs): memory_mode, memory_budget_mbps,
//! memory_scans, memory_pages_migrated, memory_mb_migrated,
//! memory_move_failed (pages the kernel refused), memory_peak_mbps (the
//! largest one-second window seen), memory_budget_waits, and memory_procs:
//! per process home node, active nodes, RSS and memory locality = the
//! overlap of the process's runtime distribution over nodes with its
//! resident (anonymous) pages' distribution, sum over nodes of
//! min(runtime share, page share): for a single-node process exactly the
//! share of its pages on that node; 1.0 when pages sit where threads run in
//! the same proportions.
//!
//! Measurements behind the defaults are in docs/decisions.md. TCG does not
//! make remote memory slower, so throughput there shows overhead and noise,
//! not locality.

use serde::{Deserialize, Serialize};
use scx_stats_derive::Stats;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// --memory values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryMode {
    /// Do nothing at all (no thread).
    Off,
    /// Every process's memory goes to its home node.
    Local,
    /// Single-node processes as local; multi-node: private to its node,
    /// shared spread over the active nodes.
    Spread,
}

impl MemoryMode {
    pub fn name(self) -> &'static str {
        match self {
            MemoryMode::Off => "off",
            MemoryMode::Local => "local",
            MemoryMode::Spread => "spread",
        }
    }
}

/// Processes with less anonymous memory than this are left alone.
pub const MIN_RSS_MB: u64 = 16;
/// Active-node hysteresis around a third of the largest node's runtime.
pub const ACTIVE_JOIN: f64 = 0.40;
pub const ACTIVE_LEAVE: f64 = 0.27;
/// The home node changes when another node has this much more runtime.
pub const HOME_SWITCH: f64 = 1.25;
/// A mapping with this share of its pages on one node is private to it.
pub const PRIVATE_SHARE: f64 = 0.80;
/// Intervals a process with nothing to move is left alone (no numa_maps
/// read) unless its home node or active set changes.
pub const QUIET_SCANS: u64 = 5;
/// Decay of the per-node runtime per interval.
pub const RT_DECAY: f64 = 0.5;
/// Pages per move_pages call.
const CHUNK: usize = 512;
/// 2 MB regions per first (one address per region) move_pages call.
const REGIONS: usize = 64;
const HUGE: u64 = 2 << 20;
const PF_KTHREAD: u64 = 0x0020_0000;
const MPOL_MF_MOVE: i32 = 1 << 1;

// ---------------------------------------------------------------------------
// Pure logic (unit-tested)

/// New active set from the decayed runtime per node, with hysteresis; the
/// home node is always active.
pub fn update_active(prev: &[bool], rt: &[f64], home: usize) -> Vec<bool> {
    let max = rt.iter().cloned().fold(0.0, f64::max);
    if max <= 0.0 {
        return prev.to_vec();
    }
    (0..rt.len())
        .map(|n| {
            let share = rt[n] / max;
            let was = prev.get(n).copied().unwrap_or(false);
            n == home || if was { share >= ACTIVE_LEAVE } else { share >= ACTIVE_JOIN }
        })
        .collect()
}

/// Home node with hysteresis: the busiest node, unless the current home is
/// within HOME_SWITCH of it.
pub fn update_home(prev: Option<usize>, rt: &[f64]) -> Option<usize> {
    let (best, best_rt) = rt
        .iter()
        .cloned()
        .enumerate()
        .fold((None, 0.0), |(b, v), (n, r)| if r > v { (Some(n), r) } else { (b, v) });
    match (prev, best) {
        (None, b) => b,
        (Some(p), Some(b)) if b != p && best_rt > HOME_SWITCH * rt.get(p).copied().unwrap_or(0.0) => {
            Some(b)
        }
        (p, _) => p,
    }
}

/// Memory locality: overlap of the runtime and page distributions.
pub fn locality(rt: &[f64], pages: &[u64]) -> Option<f64> {
    let rsum: f64 = rt.iter().sum();
    let psum: u64 = pages.iter().sum();
    if rsum <= 0.0 || psum == 0 {
        return None;
    }
    Some(
        (0..rt.len().max(pages.len()))
            .map(|n| {
                let r = rt.get(n).copied().unwrap_or(0.0) / rsum;
                let p = pages.get(n).copied().unwrap_or(0) as f64 / psum as f64;
                r.min(p)
            })
            .sum(),
    )
}

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

/// Sliding one-second window of migrated bytes.
#[derive(Debug)]
pub struct Budget {
    pub bytes_per_s: u64,
    window: VecDeque<(f64, u64)>,
    pub peak: u64,
}

impl Budget {
    pub fn new(mbps: u64) -> Budget {
        Budget { bytes_per_s: mbps << 20, window: VecDeque::new(), peak: 0 }
    }

    fn expire(&mut self, now: f64) {
        while let Some(&(t, _)) = self.window.front() {
            if now - t >= 1.0 {
                self.window.pop_front();
            } else {
                break;
            }
        }
    }

    /// Bytes moved in the second before `now`.
    pub fn used(&mut self, now: f64) -> u64 {
        self.expire(now);
        self.window.iter().map(|&(_, b)| b).sum()
    }

    /// May a move costing at most `worst` bytes start at `now`?
    pub fn allows(&mut self, now: f64, worst: u64) -> bool {
        self.used(now) + worst <= self.bytes_per_s
    }

    /// Record `bytes` actually moved at `now`.
    pub fn charge(&mut self, now: f64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.window.push_back((now, bytes));
        let u = self.used(now);
        self.peak = self.peak.max(u);
    }

    /// Seconds until `worst` bytes fit (0 if now); None if never.
    pub fn wait_for(&mut self, now: f64, worst: u64) -> Option<f64> {
        if worst > self.bytes_per_s {
            return None;
        }
        let mut used = self.used(now);
        for &(t, b) in &self.window {
            if used + worst <= self.bytes_per_s {
                break;
            }
            used -= b;
            if used + worst <= self.bytes_per_s {
                return Some((t + 1.0 - now).max(0.0));
            }
        }
        Some(0.0)
    }
}

/// Worst-case bytes of moving these pages: a whole huge page per distinct
/// 2 MB region (transparent huge pages move whole), at least the pages.
pub fn worst_bytes(addrs: &[u64], page: u64) -> u64 {
    let mut regions: Vec<u64> = addrs.iter().map(|a| a / HUGE).collect();
    regions.dedup();
    (regions.len() as u64 * HUGE).max(addrs.len() as u64 * page)
}

/// Pages one move_pages(2) call is charged for. The rise of pgmigrate_success
/// across the call is never less than what the call moved, but it is
/// system-wide: compaction and other callers' migrations land in it too (one
/// numaq4 run charged 1 GB to a single call that ran while compaction did).
/// The call cannot have moved more than its worst case (whole huge pages), so
/// the charge is the smaller of the two: still never less than ours, and the
/// budget's window, which admitted the call on its worst case, holds.
/// (status[] alone would count pages already moved by an earlier call that
/// took their whole huge page, and miss the rest of a huge page moved now.)
pub fn moved_pages(vmstat_rise: u64, worst: u64, page: u64) -> u64 {
    vmstat_rise.min(worst / page)
}

// ---------------------------------------------------------------------------
// Stats

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

// ---------------------------------------------------------------------------
// The thread

pub struct MemOpts {
    pub mode: MemoryMode,
    pub budget_mbps: u64,
    pub interval_ms: u64,
    /// node of each CPU (dense index), usize::MAX if unknown
    pub cpu_node: Vec<usize>,
    pub nr_nodes: usize,
    /// bind processes that fit a node to the node holding their memory
    pub node_affinity: bool,
    /// plan home nodes for the BPF side (--home-node, home.bpf.c)
    pub home_nodes: bool,
}

/// The home plan (--home-node): tgid -> node, and a generation bumped on
/// every change; the scheduler's main loop copies it into BPF.
#[derive(Clone, Debug, Default)]
pub struct Homes {
    pub gen: u64,
    pub map: HashMap<u32, usize>,
}

pub struct MemoryThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    pub stats: Arc<Mutex<MemStats>>,
    pub homes: Arc<Mutex<Homes>>,
}

impl MemoryThread {
    pub fn start(opts: MemOpts) -> Option<MemoryThread> {
        if opts.mode == MemoryMode::Off {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let homes = Arc::new(Mutex::new(Homes::default()));
        let (s2, st2, h2) = (stop.clone(), stats.clone(), homes.clone());
        let handle = std::thread::Builder::new()
            .name("locality-memory".into())
            .spawn(move || Placer::new(opts, st2, h2).run(&s2))
            .ok()?;
        Some(MemoryThread { stop, handle: Some(handle), stats, homes })
    }

    pub fn snapshot(&self) -> MemStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for MemoryThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

struct Proc {
    comm: String,
    thread_rt: HashMap<u32, u64>,
    node_rt: Vec<f64>,
    total_rt: u64,
    recent: u64,
    home: Option<usize>,
    active: Vec<bool>,
    seen: u64,
    migrated: u64,
    /// threads that ran more than a tenth of the last interval
    busy: usize,
    /// anonymous pages per node at the last publish
    pages: Vec<u64>,
    /// node its threads are bound to (--memory-node-affinity)
    bound: Option<usize>,
    /// scan at which `pages` was read from numa_maps
    maps_scan: u64,
    /// pages moved since `pages` was read
    dirty: bool,
    /// nothing to move at the last look: skip placement until this scan
    /// unless the home node or the active set changes
    quiet_until: u64,
    quiet_key: (Option<usize>, Vec<bool>),
}

struct Placer {
    o: MemOpts,
    stats: Arc<Mutex<MemStats>>,
    homes: Arc<Mutex<Homes>>,
    /// the home plan last published (--home-node)
    home_plan: HashMap<u32, usize>,
    procs: HashMap<u32, Proc>,
    budget: Budget,
    t0: Instant,
    page: u64,
    me: u32,
    scan: u64,
    /// (pid, mapping start) -> where the last pass stopped in it
    cursor: HashMap<(u32, u64), u64>,
    /// move_pages calls in this pass (debug log)
    calls: u64,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Fields after the ")" of a /proc stat line (field 3 is index 0).
fn stat_fields(s: &str) -> Option<Vec<&str>> {
    let i = s.rfind(')')?;
    Some(s[i + 1..].split_whitespace().collect())
}

fn vmstat_migrated() -> u64 {
    read("/proc/vmstat")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("pgmigrate_success ").and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

/// Runs the calling thread as SCHED_FIFO 1 while it lives, then puts its
/// old policy back. Why: while move_pages(2) moves a batch, the owner's
/// threads that touch those pages sleep on the migration entries (D state,
/// in the fault) until the copy is done. If the agent is preempted in the
/// middle -- every CPU busy with the owner's own threads, the usual case
/// for a CPU-bound job -- they sleep until it gets a CPU back. In the lab
/// (numaq4, 8 memory-bound jobs on 8 CPUs) one job spent most of 25 s like
/// that. The kernel's own NUMA balancing has no such wait: the faulting
/// task moves its page itself. An RT thread is not scheduled by sched_ext
/// and is not preempted by the jobs; the window is one batch (CHUNK pages)
/// and the migration budget bounds the total. Without CAP_SYS_NICE it is a
/// no-op.
struct RtWindow {
    old: Option<(libc::c_int, libc::sched_param)>,
}

impl RtWindow {
    fn enter() -> RtWindow {
        let mut param = libc::sched_param { sched_priority: 0 };
        let policy = unsafe { libc::sched_getscheduler(0) };
        if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } != 0 {
            return RtWindow { old: None };
        }
        let rt = libc::sched_param { sched_priority: 1 };
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &rt) } != 0 {
            return RtWindow { old: None };
        }
        RtWindow { old: Some((policy, param)) }
    }
}

impl Drop for RtWindow {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.old {
            unsafe { libc::sched_setscheduler(0, policy, &param) };
        }
    }
}

/// move_pages(2); Err(errno) on failure.
fn move_pages(pid: u32, addrs: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> Result<i64, i32> {
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            ptrs.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.map(|n| n.as_ptr()).unwrap_or(std::ptr::null()),
            status.as_mut_ptr(),
            if nodes.is_some() { MPOL_MF_MOVE } else { 0 } as libc::c_int,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r as i64)
    }
}

impl Placer {
    fn new(o: MemOpts, stats: Arc<Mutex<MemStats>>, homes: Arc<Mutex<Homes>>) -> Placer {
        let budget = Budget::new(o.budget_mbps);
        Placer {
            o,
            stats,
            homes,
            home_plan: HashMap::new(),
            procs: HashMap::new(),
            budget,
            t0: Instant::now(),
            page: unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64,
            me: std::process::id(),
            scan: 0,
            cursor: HashMap::new(),
            calls: 0,
        }
    }

    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn run(mut self, stop: &AtomicBool) {
        let intv = Duration::from_millis(self.o.interval_ms);
        while !stop.load(Ordering::Relaxed) {
            let start = Instant::now();
            self.sample();
            if self.o.node_affinity {
                self.bind_nodes();
            }
            if self.o.home_nodes {
                self.plan_homes();
            }
            let sampled = start.elapsed();
            let deadline = start + intv;
            let before = self.stats.lock().map(|s| (s.pages_migrated, s.budget_waits)).unwrap_or_default();
            self.place(stop, deadline);
            let after = self.stats.lock().map(|s| (s.pages_migrated, s.budget_waits)).unwrap_or_default();
            log::debug!(
                "memory: scan {} sample {:?} place {:?} procs {} moved {} pages, {} budget waits, {} calls",
                self.scan,
                sampled,
                start.elapsed() - sampled,
                self.procs.len(),
                after.0 - before.0,
                after.1 - before.1,
                std::mem::take(&mut self.calls)
            );
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // give back every affinity we set
        let bound: Vec<u32> = self.procs.iter().filter(|(_, p)| p.bound.is_some()).map(|(&k, _)| k).collect();
        for pid in bound {
            self.set_node(pid, None);
        }
    }

    /// CPUs whose node is known.
    fn known_cpus(&self) -> Vec<usize> {
        (0..self.o.cpu_node.len()).filter(|&c| self.o.cpu_node[c] != usize::MAX).collect()
    }

    /// CPUs per node.
    fn node_cpus(&self) -> Vec<usize> {
        let nn = self.o.nr_nodes.max(1);
        let mut cpus = vec![0usize; nn];
        for &n in &self.o.cpu_node {
            if n < nn {
                cpus[n] += 1;
            }
        }
        cpus
    }

    /// --home-node: plan the home nodes of processes with two or more busy
    /// threads (assign_homes()) and publish the plan when it changes.
    fn plan_homes(&mut self) {
        let all = self.known_cpus();
        // a thread someone pinned (taskset, numactl -N, the application)
        // has chosen its CPUs: its process gets no home
        let unpinned = |pid: u32, p: &Proc| {
            std::iter::once(&pid)
                .chain(p.thread_rt.keys())
                .all(|&tid| get_affinity(tid).is_none_or(|cur| all.iter().all(|c| cur.contains(c))))
        };
        let mut cands: Vec<NodeCand> = self
            .procs
            .iter()
            .filter(|(&pid, p)| p.busy >= 2 && unpinned(pid, p))
            .map(|(&pid, p)| NodeCand {
                pid,
                busy: p.busy,
                pages: p.pages.iter().sum(),
                pref: pref_node(&p.pages).or(p.home),
                bound: self.home_plan.get(&pid).copied(),
            })
            .collect();
        cands.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.pid.cmp(&b.pid)));
        let plan = assign_homes(&cands, &self.node_cpus());
        if plan == self.home_plan {
            return;
        }
        log::debug!("memory: home nodes {plan:?}");
        if let Ok(mut h) = self.homes.lock() {
            h.gen += 1;
            h.map = plan.clone();
        }
        self.home_plan = plan;
    }

    /// --memory-node-affinity: bind each process that fits one node to a
    /// node, the one holding most of its memory if it has room.
    fn bind_nodes(&mut self) {
        let cpus = self.node_cpus();
        let mut cands: Vec<NodeCand> = self
            .procs
            .iter()
            .filter(|(_, p)| p.busy > 0 || p.bound.is_some())
            .map(|(&pid, p)| NodeCand {
                pid,
                busy: p.busy.max(1),
                pages: p.pages.iter().sum(),
                pref: pref_node(&p.pages).or(p.home),
                bound: p.bound,
            })
            .collect();
        cands.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.pid.cmp(&b.pid)));
        let plan = assign_nodes(&cands, &cpus);
        for c in &cands {
            let want = plan.get(&c.pid).copied();
            // again while bound too: threads created since get the mask
            if want != c.bound || want.is_some() {
                self.set_node(c.pid, want);
            }
        }
    }

    /// Bind every thread of `pid` to the CPUs of `node` (None: give back all
    /// CPUs). Threads whose affinity someone else restricted are left alone.
    fn set_node(&mut self, pid: u32, node: Option<usize>) {
        let all = self.known_cpus();
        let prev = self.procs.get(&pid).and_then(|p| p.bound);
        let mask_of = |n: Option<usize>| -> Vec<usize> {
            match n {
                Some(n) => all.iter().copied().filter(|&c| self.o.cpu_node[c] == n).collect(),
                None => all.clone(),
            }
        };
        let (ours, want) = (mask_of(prev), mask_of(node));
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let Some(cur) = get_affinity(tid) else { continue };
            // only threads with every CPU (nobody restricted them) or
            // with the mask we set ourselves
            let cur_known: Vec<usize> = cur.into_iter().filter(|c| all.contains(c)).collect();
            if cur_known != all && cur_known != ours {
                continue;
            }
            set_affinity(tid, &want);
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.bound = node;
        }
        if let Ok(mut s) = self.stats.lock() {
            if prev != node && node.is_some() {
                s.affinity_binds += 1;
            } else if prev != node {
                s.affinity_unbinds += 1;
            }
        }
    }

    /// Read where every thread ran since the last sample.
    fn sample(&mut self) {
        self.scan += 1;
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == self.me {
                continue;
            }
            self.sample_proc(pid);
        }
        let scan = self.scan;
        self.procs.retain(|_, p| p.seen == scan);
        let procs = &self.procs;
        self.cursor.retain(|(pid, _), _| procs.contains_key(pid));
    }

    fn sample_proc(&mut self, pid: u32) {
        // statm first: size resident shared ... (pages); anon ~ resident -
        // shared. Kernel threads (all zeros) and small processes stop here,
        // one short read each instead of two.
        let Some(statm) = read(&format!("/proc/{pid}/statm")) else { return };
        let v: Vec<u64> = statm.split_whitespace().filter_map(|s| s.parse().ok()).collect();
        if v.len() < 3 || v[1].saturating_sub(v[2]) * self.page < MIN_RSS_MB << 20 {
            self.procs.remove(&pid);
            return;
        }
        let Some(stat) = read(&format!("/proc/{pid}/stat")) else { return };
        let Some(f) = stat_fields(&stat) else { return };
        let flags: u64 = f.get(6).and_then(|s| s.parse().ok()).unwrap_or(0);
        if flags & PF_KTHREAD != 0 {
            return;
        }
        let nn = self.o.nr_nodes.max(1);
        let scan = self.scan;
        let p = self.procs.entry(pid).or_insert_with(|| Proc {
            comm: stat
                .find('(')
                .and_then(|a| stat.rfind(')').map(|b| stat[a + 1..b].to_string()))
                .unwrap_or_default(),
            thread_rt: HashMap::new(),
            node_rt: vec![0.0; nn],
            total_rt: 0,
            recent: 0,
            home: None,
            active: vec![false; nn],
            seen: 0,
            migrated: 0,
            busy: 0,
            pages: vec![],
            bound: None,
            maps_scan: 0,
            dirty: false,
            quiet_until: 0,
            quiet_key: (None, vec![]),
        });
        p.seen = scan;
        for x in p.node_rt.iter_mut() {
            *x *= RT_DECAY;
        }
        p.recent = 0;
        p.busy = 0;
        let busy_ns = self.o.interval_ms * 100_000;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
        let mut alive = HashMap::new();
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Some(ss) = read(&format!("/proc/{pid}/task/{tid}/schedstat")) else { continue };
            let Some(rt) = ss.split_whitespace().next().and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            let Some(ts) = read(&format!("/proc/{pid}/task/{tid}/stat")) else { continue };
            let cpu = stat_fields(&ts).and_then(|f| f.get(36).and_then(|s| s.parse::<usize>().ok()));
            let prev = p.thread_rt.get(&tid).copied();
            alive.insert(tid, rt);
            // a thread seen for the first time: its runtime so far counts,
            // charged to the node it is on now (on a process's first sample
            // that is a guess about its past; it decays within seconds)
            let d = match prev {
                Some(x) => rt.saturating_sub(x),
                None => rt,
            };
            if d > busy_ns {
                p.busy += 1;
            }
            if let Some(node) = cpu.and_then(|c| self.o.cpu_node.get(c).copied()) {
                if node < nn && d > 0 {
                    p.node_rt[node] += d as f64;
                    p.recent += d;
                    p.total_rt += d;
                }
            }
        }
        p.thread_rt = alive;
        p.home = update_home(p.home, &p.node_rt);
        if let Some(h) = p.home {
            p.active = update_active(&p.active, &p.node_rt, h);
        }
    }

    /// Move pages of the processes that ran, busiest first, within the
    /// budget, until `deadline`.
    fn place(&mut self, stop: &AtomicBool, deadline: Instant) {
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
    fn anon_pages(&self, vmas: &[Vma]) -> Vec<u64> {
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

    /// Query and move one mapping; false if the pass must end (deadline,
    /// stop, process gone).
    #[allow(clippy::too_many_arguments)]
    fn move_vma(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        target: &Target,
        active: &[bool],
        stop: &AtomicBool,
        deadline: Instant,
    ) -> bool {
        let page = self.page;
        let key = (pid, start);
        // resume where the last pass stopped (a mapping may take several)
        let mut addr = self.cursor.get(&key).copied().filter(|&a| a > start && a < end).unwrap_or(start);
        let mut status = vec![0i32; CHUNK];
        let mut todo: Vec<(u64, i32)> = vec![];
        while addr < end {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                self.cursor.insert(key, addr);
                return false;
            }
            let addrs: Vec<u64> = (0..CHUNK as u64).map(|i| addr + i * page).take_while(|&a| a < end).collect();
            if let Target::Node(n) = target {
                // One target for all, in 2 MB regions: first one address per
                // region (a transparent huge page moves whole), then every
                // page of the regions whose last page is still elsewhere
                // (small pages); the kernel skips pages already there and
                // pages not present.
                let n = *n as i32;
                let mut regions = vec![];
                let mut a = addr;
                let max_regions = ((self.budget.bytes_per_s / 4 / HUGE) as usize).clamp(1, REGIONS);
                while a < end && regions.len() < max_regions {
                    let re = ((a / HUGE + 1) * HUGE).min(end);
                    regions.push((a, re));
                    a = re;
                }
                let heads: Vec<(u64, i32)> = regions.iter().map(|&(rs, _)| (rs, n)).collect();
                if !self.move_batch(pid, &heads, stop, deadline) {
                    self.cursor.insert(key, addr);
                    return false;
                }
                let lasts: Vec<u64> = regions.iter().map(|&(_, re)| re - page).collect();
                let mut st = vec![0i32; lasts.len()];
                match move_pages(pid, &lasts, None, &mut st) {
                    Ok(_) => {}
                    Err(libc::ESRCH) => {
                        self.procs.remove(&pid);
                        return false;
                    }
                    Err(_) => return true,
                }
                for (&(rs, re), &s) in regions.iter().zip(&st) {
                    if s == n {
                        continue;
                    }
                    let mut p = rs + page;
                    while p < re {
                        let batch: Vec<(u64, i32)> =
                            (0..CHUNK as u64).map(|i| p + i * page).take_while(|&x| x < re).map(|x| (x, n)).collect();
                        p += batch.len() as u64 * page;
                        if !self.move_batch(pid, &batch, stop, deadline) {
                            self.cursor.insert(key, addr);
                            return false;
                        }
                    }
                }
                addr = a;
                continue;
            }
            let st = &mut status[..addrs.len()];
            match move_pages(pid, &addrs, None, st) {
                Ok(_) => {}
                Err(libc::ESRCH) => {
                    self.procs.remove(&pid);
                    return false;
                }
                Err(_) => return true, // e.g. EFAULT: the mapping changed; next scan
            }
            for (a, &s) in addrs.iter().zip(st.iter()) {
                if s < 0 {
                    continue;
                }
                if let Some(n) = target.want((a - start) / page, s as usize, active) {
                    todo.push((*a, n as i32));
                }
            }
            addr += addrs.len() as u64 * page;
            while todo.len() >= CHUNK || (addr >= end && !todo.is_empty()) {
                let n = todo.len().min(CHUNK);
                let batch: Vec<(u64, i32)> = todo.drain(..n).collect();
                if !self.move_batch(pid, &batch, stop, deadline) {
                    self.cursor.insert(key, addr);
                    return false;
                }
            }
        }
        self.cursor.remove(&key);
        true
    }

    /// Move one batch within the budget (shrinking it if needed).
    fn move_batch(&mut self, pid: u32, batch: &[(u64, i32)], stop: &AtomicBool, deadline: Instant) -> bool {
        let mut rest = batch;
        while !rest.is_empty() {
            // the largest prefix whose worst case fits the budget at all
            let mut n = rest.len();
            let addrs_all: Vec<u64> = rest.iter().map(|x| x.0).collect();
            while n > 1 && worst_bytes(&addrs_all[..n], self.page) > self.budget.bytes_per_s {
                n /= 2;
            }
            let addrs = &addrs_all[..n];
            // below 2 MB/s one page may still be a huge page: it then waits
            // for an empty window (the only overshoot possible)
            let worst = worst_bytes(addrs, self.page).min(self.budget.bytes_per_s);
            loop {
                if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    return false;
                }
                let now = self.now();
                if self.budget.allows(now, worst) {
                    break;
                }
                self.stats.lock().map(|mut s| s.budget_waits += 1).ok();
                let w = self.budget.wait_for(now, worst).unwrap_or(0.05).clamp(0.005, 0.05);
                std::thread::sleep(Duration::from_secs_f64(w));
            }
            let nodes: Vec<i32> = rest[..n].iter().map(|x| x.1).collect();
            let mut status = vec![0i32; n];
            let before = vmstat_migrated();
            let r = {
                let _rt = RtWindow::enter();
                move_pages(pid, addrs, Some(&nodes), &mut status)
            };
            self.calls += 1;
            let after = vmstat_migrated();
            let now = self.now();
            // pages this call moved, bounded from both sides: see moved_pages
            let pages = moved_pages(after.saturating_sub(before), worst_bytes(addrs, self.page), self.page);
            let failed = status.iter().filter(|&&s| s < 0 && s != -libc::ENOENT).count() as u64;
            self.budget.charge(now, pages * self.page);
            if let Ok(mut s) = self.stats.lock() {
                s.pages_migrated += pages;
                s.bytes_migrated += pages * self.page;
                s.move_failed += failed;
                s.peak_bytes_per_s = s.peak_bytes_per_s.max(self.budget.peak);
            }
            if let Some(p) = self.procs.get_mut(&pid) {
                p.migrated += pages;
                p.dirty |= pages > 0;
            }
            if r == Err(libc::ESRCH) {
                self.procs.remove(&pid);
                return false;
            }
            rest = &rest[n..];
        }
        true
    }

    /// Per process locality (from numa_maps) into the shared stats.
    fn publish(&mut self) {
        let mut out = BTreeMap::new();
        let mut seen_pages = vec![];
        let scan = self.scan;
        for (&pid, p) in &self.procs {
            // reuse this pass's read unless pages moved since (or it is old)
            let reuse = !p.dirty && !p.pages.is_empty() && p.maps_scan + QUIET_SCANS > scan;
            let pages = if reuse {
                p.pages.clone()
            } else {
                let Some(text) = read(&format!("/proc/{pid}/numa_maps")) else { continue };
                let vmas: Vec<Vma> = text.lines().filter_map(parse_numa_maps_line).collect();
                self.anon_pages(&vmas)
            };
            let loc = locality(&p.node_rt, &pages);
            if !reuse {
                seen_pages.push((pid, pages.clone()));
            }
            out.insert(
                pid,
                MemProc {
                    tgid: pid,
                    comm: p.comm.clone(),
                    home: p.home.map(|h| h as i32).unwrap_or(-1),
                    active: (0..p.active.len()).filter(|&n| p.active[n]).map(|n| n as u32).collect(),
                    rss_mb: (pages.iter().sum::<u64>() * self.page) as f64 / (1 << 20) as f64,
                    locality: loc.map(|l| (l * 1000.0).round() / 1000.0).unwrap_or(-1.0),
                    pages_node: pages,
                    pages_migrated: p.migrated,
                    runtime_ms: p.total_rt as f64 / 1e6,
                    bound_node: p.bound.map(|n| n as i32).unwrap_or(-1),
                },
            );
        }
        for (pid, pages) in seen_pages {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.pages = pages;
                p.maps_scan = scan;
                p.dirty = false;
            }
        }
        if let Ok(mut s) = self.stats.lock() {
            s.scans = self.scan;
            // exited processes keep their last entry (bounded)
            for (pid, mp) in out {
                s.procs.insert(pid, mp);
            }
            if s.procs.len() > 256 {
                let mut v: Vec<MemProc> = std::mem::take(&mut s.procs).into_values().collect();
                v.sort_by(|a, b| b.runtime_ms.total_cmp(&a.runtime_ms));
                v.truncate(128);
                s.procs = v.into_iter().map(|p| (p.tgid, p)).collect();
            }
        }
    }
}

/// A process that could be bound to a node.
#[derive(Clone, Debug)]
pub struct NodeCand {
    pub pid: u32,
    /// threads that were busy in the last interval
    pub busy: usize,
    pub pages: u64,
    /// the node holding most of its memory
    pub pref: Option<usize>,
    pub bound: Option<usize>,
}

/// The node holding most pages.
pub fn pref_node(pages: &[u64]) -> Option<usize> {
    let (n, &c) = pages.iter().enumerate().max_by_key(|&(n, c)| (*c, std::cmp::Reverse(n)))?;
    (c > 0).then_some(n)
}

/// Which processes get bound to which node: in the given order (largest
/// memory first), a process whose busy threads fit the free CPUs of a node
/// goes to its current node, else its memory's node, else the node with
/// the most free CPUs; a process that fits nowhere stays unbound.
pub fn assign_nodes(cands: &[NodeCand], node_cpus: &[usize]) -> HashMap<u32, usize> {
    let mut free: Vec<i64> = node_cpus.iter().map(|&c| c as i64).collect();
    let mut out = HashMap::new();
    for c in cands {
        let busy = c.busy as i64;
        let fits = |n: usize, free: &[i64]| n < free.len() && free[n] >= busy;
        let pick = c
            .bound
            .filter(|&n| fits(n, &free))
            .or(c.pref.filter(|&n| fits(n, &free)))
            .or_else(|| (0..free.len()).filter(|&n| fits(n, &free)).max_by_key(|&n| (free[n], std::cmp::Reverse(n))));
        if let Some(n) = pick {
            free[n] -= busy;
            out.insert(c.pid, n);
        }
    }
    out
}

/// Home nodes (--home-node): assign_nodes() with each node's room capped
/// at its fair share of all candidates' busy threads (by CPUs, rounded up)
/// plus NUMA_IMBALANCE_MIN, so that homes never build an imbalance the
/// NUMA policy would not tolerate: two 4-thread processes on 2 x 4 CPUs get
/// a node each, one 8-thread process on 2 x 8 CPUs gets none (it is spread).
pub fn assign_homes(cands: &[NodeCand], node_cpus: &[usize]) -> HashMap<u32, usize> {
    let busy: usize = cands.iter().map(|c| c.busy).sum();
    let cpus: usize = node_cpus.iter().sum();
    if cpus == 0 {
        return HashMap::new();
    }
    let slack = crate::numa::NUMA_IMBALANCE_MIN as usize;
    let room: Vec<usize> = node_cpus.iter().map(|&c| c.min((busy * c).div_ceil(cpus) + slack)).collect();
    assign_nodes(cands, &room)
}

fn get_affinity(tid: u32) -> Option<Vec<usize>> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    Some((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

fn set_affinity(tid: u32, cpus: &[usize]) {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // ESRCH (the thread exited) and EINVAL are harmless here
    unsafe { libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

/// Start -> end of every mapping of a process (/proc/<pid>/maps).
fn vma_ends(pid: u32) -> HashMap<u64, u64> {
    read(&format!("/proc/{pid}/maps"))
        .map(|s| {
            s.lines()
                .filter_map(|l| {
                    let range = l.split_whitespace().next()?;
                    let (a, b) = range.split_once('-')?;
                    Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_window_is_fifo_inside_and_restores_the_old_policy() {
        let before = unsafe { libc::sched_getscheduler(0) };
        {
            let w = RtWindow::enter();
            let inside = unsafe { libc::sched_getscheduler(0) };
            if w.old.is_some() {
                assert_eq!(inside, libc::SCHED_FIFO);
            } else {
                // no CAP_SYS_NICE: nothing changed
                assert_eq!(inside, before);
            }
        }
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, before);
    }

    #[test]
    fn active_set_hysteresis() {
        // node 1 at 35% of node 0: not enough to join (40%)
        let a = update_active(&[true, false], &[100.0, 35.0], 0);
        assert_eq!(a, vec![true, false]);
        // at 45% it joins
        let a = update_active(&a, &[100.0, 45.0], 0);
        assert_eq!(a, vec![true, true]);
        // back at 30%: above the leave mark (27%), it stays (no flapping)
        let a = update_active(&a, &[100.0, 30.0], 0);
        assert_eq!(a, vec![true, true]);
        // 20%: it leaves
        let a = update_active(&a, &[100.0, 20.0], 0);
        assert_eq!(a, vec![true, false]);
        // the home node is always active, even without runtime share
        assert_eq!(update_active(&[false, false], &[0.0, 10.0], 0), vec![true, true]);
        // no runtime at all: unchanged
        assert_eq!(update_active(&[false, true], &[0.0, 0.0], 1), vec![false, true]);
        // three nodes around a third
        let a = update_active(&[false; 3], &[90.0, 31.0, 40.0], 0);
        assert_eq!(a, vec![true, false, true]);
    }

    #[test]
    fn home_hysteresis() {
        assert_eq!(update_home(None, &[0.0, 0.0]), None);
        assert_eq!(update_home(None, &[1.0, 5.0]), Some(1));
        // 20% more is not enough to switch
        assert_eq!(update_home(Some(0), &[100.0, 120.0]), Some(0));
        assert_eq!(update_home(Some(0), &[100.0, 130.0]), Some(1));
        assert_eq!(update_home(Some(1), &[0.0, 0.0]), Some(1));
    }

    #[test]
    fn locality_overlap() {
        assert_eq!(locality(&[10.0, 0.0], &[90, 10]), Some(0.9));
        assert_eq!(locality(&[1.0, 1.0], &[50, 50]), Some(1.0));
        assert_eq!(locality(&[1.0, 1.0], &[100, 0]), Some(0.5));
        assert_eq!(locality(&[0.0, 0.0], &[1, 1]), None);
        assert_eq!(locality(&[1.0], &[0, 0]), None);
        assert_eq!(locality(&[0.0, 3.0], &[4]), Some(0.0));
    }

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

    #[test]
    fn budget_window() {
        let mb = 1u64 << 20;
        let mut b = Budget::new(10);
        assert!(b.allows(0.0, 10 * mb));
        assert!(!b.allows(0.0, 11 * mb));
        b.charge(0.0, 6 * mb);
        assert!(b.allows(0.1, 4 * mb));
        assert!(!b.allows(0.1, 5 * mb));
        b.charge(0.5, 4 * mb);
        assert_eq!(b.used(0.9), 10 * mb);
        assert_eq!(b.peak, 10 * mb);
        // 2 MB fit once the first charge (6 MB at 0.0) has left: at 1.0
        let w = b.wait_for(0.9, 2 * mb).unwrap();
        assert!((w - 0.1).abs() < 1e-9, "{w}");
        assert_eq!(b.wait_for(0.9, 11 * mb), None);
        // the first charge leaves the window one second later
        assert_eq!(b.used(1.0), 4 * mb);
        assert!(b.allows(1.0, 6 * mb));
        assert_eq!(b.wait_for(2.0, 10 * mb), Some(0.0));
        // a 1 s window never holds more than the rate, whatever the order
        let mut b = Budget::new(4);
        let mut t = 0.0;
        let mut moved = vec![];
        while t < 5.0 {
            if b.allows(t, mb) {
                b.charge(t, mb);
                moved.push(t);
            }
            t += 0.01;
        }
        for &s in &moved {
            let n = moved.iter().filter(|&&x| x >= s && x < s + 1.0).count();
            assert!(n <= 4, "window at {s}: {n} MB");
        }
        assert!(moved.len() >= 16);
        assert_eq!(b.peak, 4 * mb);
    }

    #[test]
    fn charge_is_bounded_by_the_calls_worst_case() {
        let p = 4096;
        // a quiet system: the rise is ours
        assert_eq!(moved_pages(3, 3 * p, p), 3);
        // a huge page moved whole for one listed page: 512 pages, within worst case
        assert_eq!(moved_pages(512, worst_bytes(&[0x200000], p), p), 512);
        // compaction migrated 1 GB meanwhile: charged at most the call's worst case
        assert_eq!(moved_pages(262144, worst_bytes(&[0x200000, 0x400000], p), p), 1024);
        assert_eq!(moved_pages(0, HUGE, p), 0);
    }

    #[test]
    fn worst_case_counts_huge_pages() {
        let p = 4096;
        // 3 pages in one 2 MB region: a whole huge page, worst case
        assert_eq!(worst_bytes(&[0x200000, 0x201000, 0x202000], p), HUGE);
        // two regions
        assert_eq!(worst_bytes(&[0x200000, 0x400000], p), 2 * HUGE);
        assert_eq!(worst_bytes(&[], p), 0);
    }

    fn cand(pid: u32, busy: usize, pages: u64, pref: Option<usize>, bound: Option<usize>) -> NodeCand {
        NodeCand { pid, busy, pages, pref, bound }
    }

    #[test]
    fn home_assignment() {
        // numa2 (2 x 4 CPUs), two 4-thread jbb instances, both with memory
        // on node 0: the larger takes node 0, the other node 1
        let two = [cand(1, 4, 900, Some(0), None), cand(2, 4, 800, Some(0), None)];
        let h = assign_homes(&two, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&0), Some(&1)));
        // a current home is kept while it has room
        let kept = [cand(1, 4, 900, Some(0), Some(1)), cand(2, 4, 800, Some(0), Some(0))];
        let h = assign_homes(&kept, &[4, 4]);
        assert_eq!((h.get(&1), h.get(&2)), (Some(&1), Some(&0)));
        // one 8-thread process on 2 x 8 CPUs: fair share 4 + 2 < 8, no home
        assert!(assign_homes(&[cand(3, 8, 900, Some(0), None)], &[8, 8]).is_empty());
        // a 2-thread pair alone gets one (share 1 + 2 >= 2)
        assert_eq!(assign_homes(&[cand(4, 2, 10, Some(1), None)], &[8, 8]).get(&4), Some(&1));
        // more busy threads than the machine: each node's room is its CPUs
        let big = [cand(5, 6, 900, Some(0), None), cand(6, 6, 800, Some(1), None)];
        assert!(assign_homes(&big, &[4, 4]).is_empty());
    }

    #[test]
    fn node_assignment() {
        assert_eq!(pref_node(&[3, 9]), Some(1));
        assert_eq!(pref_node(&[5, 5]), Some(0));
        assert_eq!(pref_node(&[0, 0]), None);
        // two 4-thread processes on 2 x 4 CPUs, both with memory mostly on
        // node 0: the larger gets node 0, the other the free node
        let a = assign_nodes(&[cand(1, 4, 100, Some(0), None), cand(2, 4, 90, Some(0), None)], &[4, 4]);
        assert_eq!((a[&1], a[&2]), (0, 1));
        // a bound process keeps its node while it fits
        let a = assign_nodes(&[cand(1, 4, 100, Some(0), Some(1)), cand(2, 4, 90, Some(0), None)], &[4, 4]);
        assert_eq!((a[&1], a[&2]), (1, 0));
        // too many busy threads for any node: not bound
        let a = assign_nodes(&[cand(1, 5, 100, Some(0), Some(0))], &[4, 4]);
        assert!(a.is_empty());
        // a third process finds no room
        let a = assign_nodes(
            &[cand(1, 3, 100, Some(0), None), cand(2, 3, 90, Some(1), None), cand(3, 2, 80, Some(0), None)],
            &[4, 4],
        );
        assert_eq!(a.len(), 2);
        assert!(!a.contains_key(&3));
    }

    #[test]
    fn stat_line_fields() {
        let s = "123 (a (b) c) R 1 123 123 0 -1 4194560 0 0 0 0 5 6 0 0 20 0 3 0 100 1000 50 \
                 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0";
        let f = stat_fields(s).unwrap();
        assert_eq!(f[0], "R");
        assert_eq!(f[6], "4194560"); // flags (field 9)
        assert_eq!(f[36], "5"); // processor (field 39)
    }
}
