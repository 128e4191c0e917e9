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
//! One pass every `--memory-interval-ms`, in this order, by job:
//! - sample.rs: where each process's threads ran, its home node and active
//!   nodes (/proc), over the pids roster.rs keeps;
//! - affinity.rs: node binding (`--memory-node-affinity`);
//! - home.rs: home nodes for the BPF side (`--no-home-node`);
//! - evidence.rs: which threads, on which nodes, write each chunk of a
//!   process that spans nodes (write faults counted by memory.bpf.c):
//!   private or shared;
//! - plan.rs: which pages of which mapping go where (`--memory` mode);
//! - migrate.rs: move_pages(2) within the budget (`--memory-budget-mbps`);
//!   plan.rs and it read pages and mappings through pages.rs;
//! - this file: the thread, the pass, and publishing what it saw into
//!   report.rs's types, which stats.rs reads.
//!
//! Skipped: mappings with an explicit memory policy (numa_maps shows bind,
//! interleave, prefer...: numactl -m, mbind(2), set_mempolicy(2) are the
//! application's word), pids without an address space (kernel threads: statm
//! all zeros), the agent itself, processes with
//! less than MIN_RSS_MB of anonymous memory, and what scope.rs leaves
//! alone: processes out of `--memory-include` / `--memory-exclude`, with
//! locked memory, or in a cpuset of one node. A process is known by pid and
//! start time (scope.rs). A process that exits mid-scan
//! (ESRCH, ENOENT on /proc) is dropped quietly. The work runs on its own
//! thread and never blocks the scheduler's main loop; `--memory=off` starts
//! no thread and touches nothing.
//!
//! When it runs at all (MemoryThread::start, Opts::memory_mode()): never on
//! a machine with one NUMA node (nothing to place; said once at start);
//! not when the administrator turned the kernel's NUMA balancing off
//! (kernel.numa_balancing=0) unless `--memory` is given explicitly.
//! On exit, also after SIGTERM/SIGINT or an exit of the BPF side, every
//! CPU affinity it set is given back (Placer's Drop, also on a panic of
//! its thread); a SIGKILL leaves them set (README).
//!
//! Stats (in Metrics, see stats.rs): memory_mode, memory_budget_mbps,
//! memory_scans, memory_pages_migrated, memory_mb_migrated,
//! memory_move_failed (pages the kernel refused), memory_peak_mbps (the
//! largest one-second window seen), memory_budget_waits, memory_cpu_ms (the
//! thread's CPU time; move_pages copies pages on it), of which
//! memory_scan_cpu_ms (sampling) and memory_move_cpu_ms (the calls that
//! move), memory_move_calls and memory_call_waits (the cap on calls),
//! memory_maps_reads (numa_maps), memory_scan_deferred (the scan budget,
//! sample.rs), memory_proc_lists (reads of the /proc directory,
//! roster.rs), and memory_procs:
//! per process home node, active nodes, RSS, its chunks by use for a
//! process spanning nodes (evidence.rs), and memory locality = the
//! overlap of the process's runtime distribution over nodes with its
//! resident (anonymous) pages' distribution, sum over nodes of
//! min(runtime share, page share): for a single-node process exactly the
//! share of its pages on that node; 1.0 when pages sit where threads run in
//! the same proportions.
//!
//! Measurements behind the defaults are in docs/decisions.md. TCG does not
//! make remote memory slower, so throughput there shows overhead and noise,
//! not locality.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) mod affinity;
pub mod evidence;
pub mod home;
mod migrate;
mod pages;
pub(crate) mod plan;
mod roster;
pub mod report;
pub(crate) mod sample;
pub mod scope;

use home::{HomePlan, Homes};
use migrate::Budget;
use scope::{Backoff, Ident, Scope, Skip};
use plan::{parse_numa_maps_line, Vma};
// pub only for stats.rs, which is to import memory::report instead
pub use report::{MemProc, MemStats};

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

/// Intervals a process with nothing to move is left alone (no numa_maps
/// read) unless its home node or active set changes.
pub const QUIET_SCANS: u64 = 5;

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
    /// plan home nodes for the BPF side (home.rs, home.bpf.c)
    pub home_nodes: bool,
    /// ... and thread homes for processes spanning nodes
    pub thread_homes: bool,
    /// the processes it may touch (--memory-include, --memory-exclude)
    pub scope: Scope,
    /// the fault counters of memory.bpf.c (None: every chunk counts as shared)
    pub faults: Option<evidence::Maps>,
}

pub struct MemoryThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    pub stats: Arc<Mutex<MemStats>>,
    pub homes: Arc<Mutex<Homes>>,
}

/// Does memory placement run at all: not `--memory=off` (or
/// kernel.numa_balancing=0), and more than one node?
pub fn wanted(mode: MemoryMode, nr_nodes: usize) -> bool {
    mode != MemoryMode::Off && nr_nodes > 1
}

impl MemoryThread {
    /// The thread, or None when not wanted(): --memory=off, or a machine
    /// with one node (said once, here).
    pub fn start(opts: MemOpts) -> Option<MemoryThread> {
        if opts.mode == MemoryMode::Off {
            return None;
        }
        if opts.nr_nodes <= 1 {
            log::info!("memory placement: one NUMA node, nothing to place; not started");
            return None;
        }
        if let Some(d) = opts.scope.describe() {
            log::info!("memory placement: {d}");
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
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

pub(crate) struct Proc {
    /// start time (/proc/PID/stat field 22): with the pid, who it is
    pub(crate) start: u64,
    /// escaped (crate::comm)
    comm: String,
    /// nodes its cpuset allows (Mems_allowed_list)
    pub(crate) mems: Vec<bool>,
    /// counted in memory_skip_mempolicy
    policy_noted: bool,
    pub(crate) thread_rt: HashMap<u32, u64>,
    /// threads busy in the last interval, with the node each last ran on
    pub(crate) busy_threads: Vec<(u32, Option<usize>)>,
    pub(crate) node_rt: Vec<f64>,
    total_rt: u64,
    recent: u64,
    pub(crate) home: Option<usize>,
    pub(crate) active: Vec<bool>,
    seen: u64,
    migrated: u64,
    /// threads that ran more than a tenth of the last interval
    pub(crate) busy: usize,
    /// anonymous pages per node at the last publish
    pub(crate) pages: Vec<u64>,
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

impl Proc {
    /// Its threads run on more than one node (its active set).
    pub(crate) fn spans_nodes(&self) -> bool {
        self.active.iter().filter(|&&a| a).count() > 1
    }

    fn new(start: u64, comm: String, mems: Vec<bool>, nr_nodes: usize) -> Proc {
        Proc {
            start,
            comm,
            mems,
            policy_noted: false,
            thread_rt: HashMap::new(),
            busy_threads: vec![],
            node_rt: vec![0.0; nr_nodes],
            total_rt: 0,
            recent: 0,
            home: None,
            active: vec![false; nr_nodes],
            seen: 0,
            migrated: 0,
            busy: 0,
            pages: vec![],
            bound: None,
            maps_scan: 0,
            dirty: false,
            quiet_until: 0,
            quiet_key: (None, vec![]),
        }
    }
}

pub(crate) struct Placer {
    pub(crate) o: MemOpts,
    pub(crate) stats: Arc<Mutex<MemStats>>,
    pub(crate) homes: Arc<Mutex<Homes>>,
    /// the home plan last published (home.rs)
    pub(crate) home_plan: HomePlan,
    /// processes found with a pinned thread by the last home plan (home.rs pin_counts())
    pub(crate) pinned_last: std::collections::HashSet<u32>,
    pub(crate) procs: HashMap<u32, Proc>,
    budget: Budget,
    /// move_pages(2) calls that move, per second (migrate::MOVE_CALLS_PER_S)
    call_budget: Budget,
    t0: Instant,
    page: u64,
    me: u32,
    scan: u64,
    /// (pid, mapping start) -> where the last pass stopped in it
    cursor: HashMap<(u32, u64), u64>,
    /// where the next pass's /proc sweep starts (sample.rs)
    scan_cursor: sample::ScanCursor,
    /// the pids of /proc, what was learnt about them (roster.rs)
    roster: roster::Roster,
    /// the buffer of the last /proc directory read
    pid_buf: Vec<u32>,
    /// move_pages calls in this pass (debug log)
    calls: u64,
    /// processes left alone (scope.rs): pid -> (start time, why, last
    /// scan it was seen), to count each once
    skipped: HashMap<u32, (u64, Skip, u64)>,
    /// mappings whose move failed, tried again later
    backoff: Backoff,
    /// pages that failed in the mapping being moved
    vma_failed: u64,
    /// the kernel refused a target of that mapping (EACCES: outside the
    /// task's cpuset, ENOMEM: node full): the rest waits for the back-off
    vma_refused: bool,
    /// write-fault evidence of the processes that span nodes
    evidence: HashMap<u32, evidence::Evidence>,
    /// a process was watched at the end of the last pass
    watched: bool,
}

/// CPU time of the calling thread (clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
pub(crate) fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The numeric entries of a /proc directory: the pids in /proc, the tids in
/// /proc/<pid>/task; None if it cannot be read (the process is gone). Not
/// procfs's all_processes() or Process::tasks(): those open an O_PATH
/// descriptor per process and per thread before any read, which cost 28%
/// more CPU time on the statm sweep over every pid and 8% more on the
/// per-thread reads (measured).
fn ids(dir: &str) -> Option<impl Iterator<Item = u32>> {
    let d = std::fs::read_dir(dir).ok()?;
    Some(d.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())))
}

impl Placer {
    fn new(o: MemOpts, stats: Arc<Mutex<MemStats>>, homes: Arc<Mutex<Homes>>) -> Placer {
        let budget = Budget::new(o.budget_mbps);
        Placer {
            o,
            stats,
            homes,
            home_plan: HomePlan::default(),
            pinned_last: Default::default(),
            procs: HashMap::new(),
            budget,
            call_budget: Budget::per_second(migrate::MOVE_CALLS_PER_S),
            t0: Instant::now(),
            page: procfs::page_size(),
            me: std::process::id(),
            scan: 0,
            cursor: HashMap::new(),
            scan_cursor: Default::default(),
            roster: roster::Roster::new(roster::same_namespace(std::process::id())),
            pid_buf: Vec::new(),
            calls: 0,
            skipped: HashMap::new(),
            backoff: Backoff::default(),
            vma_failed: 0,
            vma_refused: false,
            evidence: HashMap::new(),
            watched: false,
        }
    }

    /// The identity of a process the agent holds state for.
    pub(crate) fn ident(&self, pid: u32) -> Option<Ident> {
        self.procs.get(&pid).map(|p| (pid, p.start))
    }

    /// Is `pid` still the process the agent knows by that pid? One sampled
    /// this pass was checked then; for another one the start time is read
    /// again. A pid now held by another process (or by none) is forgotten,
    /// so nothing decided for the old process (a node mask, soft-dirty
    /// re-arming) reaches the new one.
    pub(crate) fn still_same(&mut self, pid: u32) -> bool {
        let Some(p) = self.procs.get(&pid) else { return false };
        if p.seen == self.scan || scope::start_time(pid) == Some(p.start) {
            return true;
        }
        self.forget(pid);
        false
    }

    /// `pid` seen now with start time `start`: if the agent knew the pid
    /// with another start time, that process is gone and this is another
    /// one: forget the old (its affinity bookkeeping included: the mask was
    /// set on a process that no longer exists). True if it did.
    pub(crate) fn renew(&mut self, pid: u32, start: u64) -> bool {
        if self.procs.get(&pid).is_none_or(|p| p.start == start) {
            return false;
        }
        self.forget(pid);
        self.stats.lock().map(|mut s| s.pid_reused += 1).ok();
        true
    }

    /// Drop everything kept about `pid` (it exited, is left alone now, or
    /// the pid belongs to another process): its samples, cursors,
    /// back-offs, fault evidence and home node. The caller gives back an affinity first if
    /// the process is still the one it was set on.
    pub(crate) fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        if self.evidence.remove(&pid).is_some() {
            if let Some(m) = &self.o.faults {
                m.watch(pid, false);
            }
        }
        self.cursor.retain(|(p, _), _| *p != pid);
        let procs = &self.procs;
        self.backoff.retain(|(p, s)| procs.get(&p).is_some_and(|x| x.start == s));
        let threads = self.home_plan.threads.len();
        self.home_plan.threads.retain(|_, &mut (p, _)| p != pid);
        if self.home_plan.procs.remove(&pid).is_some() || self.home_plan.threads.len() != threads {
            if let Ok(mut h) = self.homes.lock() {
                h.plan = self.home_plan.clone();
                h.gen += 1;
            }
        }
    }

    /// Count, once per process, one with anonymous memory under an
    /// explicit memory policy (plan.rs leaves those mappings alone).
    pub(crate) fn note_policy(&mut self, pid: u32, vmas: &[Vma]) {
        let Some(p) = self.procs.get_mut(&pid) else { return };
        if p.policy_noted || !vmas.iter().any(scope::explicit_policy) {
            return;
        }
        p.policy_noted = true;
        log::debug!("memory: {pid} ({}) has memory under an explicit policy: left where it is", p.comm);
        self.stats.lock().map(|mut s| s.skip_mempolicy += 1).ok();
    }

    /// Give back every affinity set, to the processes that are still the
    /// ones it was set on.
    fn unbind_all(&mut self) {
        let bound: Vec<Ident> =
            self.procs.iter().filter(|(_, p)| p.bound.is_some()).map(|(&k, p)| (k, p.start)).collect();
        for (pid, start) in bound {
            if scope::start_time(pid) == Some(start) {
                self.set_node(pid, None);
            }
        }
    }

    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn run(mut self, stop: &AtomicBool) {
        let intv = Duration::from_millis(self.o.interval_ms);
        while !stop.load(Ordering::Relaxed) {
            let start = Instant::now();
            let cpu0 = thread_cpu_ns();
            self.sample();
            let cpu_sample = thread_cpu_ns();
            if self.o.node_affinity {
                self.bind_nodes();
            }
            if self.o.home_nodes {
                self.plan_homes();
            }
            self.watch_spanning();
            let sampled = start.elapsed();
            let cpu1 = thread_cpu_ns();
            let deadline = start + intv;
            let before = self.stats.lock().map(|s| (s.pages_migrated, s.budget_waits, s.move_cpu_ns)).unwrap_or_default();
            self.place(stop, deadline);
            let after = self.stats.lock().map(|s| (s.pages_migrated, s.budget_waits, s.move_cpu_ns)).unwrap_or_default();
            let cpu = thread_cpu_ns();
            self.stats
                .lock()
                .map(|mut s| {
                    s.cpu_ns = cpu;
                    s.scan_cpu_ns += cpu1.saturating_sub(cpu0);
                })
                .ok();
            log::debug!(
                "memory: scan {} sample {:?} place {:?} procs {} of {} pids ({} without an address space) moved {} pages, \
                 {} budget waits, {} calls; cpu scan {}us (sampling /proc {}us) place {}us of which moving {}us",
                self.scan,
                sampled,
                start.elapsed() - sampled,
                self.procs.len(),
                self.roster.list().len(),
                self.roster.memoryless(),
                after.0 - before.0,
                after.1 - before.1,
                std::mem::take(&mut self.calls),
                cpu1.saturating_sub(cpu0) / 1000,
                cpu_sample.saturating_sub(cpu0) / 1000,
                cpu.saturating_sub(cpu1) / 1000,
                after.2.saturating_sub(before.2) / 1000
            );
            // Sleep to the next pass; Drop unparks us to stop at once. A
            // polling sleep here woke a vCPU 50 times a second on an idle
            // machine (docs/decisions.md, "A quiet agent").
            loop {
                let now = Instant::now();
                if stop.load(Ordering::Relaxed) || now >= deadline {
                    break;
                }
                std::thread::park_timeout(deadline - now);
            }
        }
        if let Some(m) = &self.o.faults {
            for &pid in self.evidence.keys() {
                m.watch(pid, false);
            }
        }
        // every affinity set is given back by Drop
    }

    /// Gather the write faults counted since the last pass, then watch and
    /// (re-)arm the processes that span nodes under `--memory=spread`
    /// (evidence.rs); forget the others.
    fn watch_spanning(&mut self) {
        // Nothing watched since the last drain: no count can have risen, and
        // a drain walks the whole fault map (MEM_FAULTS_MAX buckets).
        if let Some(m) = self.o.faults.as_ref().filter(|_| self.watched) {
            let counts = m.drain();
            log::debug!(
                "memory: {} fault counts, {} faults, {} processes watched",
                counts.len(),
                counts.iter().map(|c| c.n).sum::<u64>(),
                self.evidence.len()
            );
            // a node out of range is dropped when the window closes
            for f in counts {
                if let Some(e) = self.evidence.get_mut(&f.tgid) {
                    e.add(f.chunk, f.thread, f.node, f.n);
                }
            }
        }
        let spread = self.o.mode == MemoryMode::Spread;
        let spanning: Vec<(u32, Vec<bool>)> = self
            .procs
            .iter()
            .filter(|(_, p)| spread && p.spans_nodes())
            .map(|(&pid, p)| (pid, p.active.clone()))
            .collect();
        let keep: std::collections::HashSet<u32> = spanning.iter().map(|(pid, _)| *pid).collect();
        let faults = &self.o.faults;
        self.evidence.retain(|pid, _| {
            let k = keep.contains(pid);
            if !k {
                if let Some(m) = faults {
                    m.watch(*pid, false);
                }
            }
            k
        });
        let scan = self.scan;
        for (pid, active) in spanning {
            if !self.still_same(pid) {
                continue;
            }
            let faults = &self.o.faults;
            let e = self.evidence.entry(pid).or_insert_with(|| {
                if let Some(m) = faults {
                    m.watch(pid, true);
                }
                evidence::Evidence::default()
            });
            if e.arm_due(scan, &active) && evidence::arm(pid).is_err() {
                // gone, or not ours to arm: no evidence, so no plan
                e.first_armed = None;
            }
        }
        self.watched = !self.evidence.is_empty();
    }

    /// CPUs whose node is known.
    pub(crate) fn known_cpus(&self) -> Vec<usize> {
        (0..self.o.cpu_node.len()).filter(|&c| self.o.cpu_node[c] != usize::MAX).collect()
    }

    /// CPUs per node.
    pub(crate) fn node_cpus(&self) -> Vec<usize> {
        let nn = self.o.nr_nodes.max(1);
        let mut cpus = vec![0usize; nn];
        for &n in &self.o.cpu_node {
            if n < nn {
                cpus[n] += 1;
            }
        }
        cpus
    }


    /// Per process locality (from numa_maps) into the shared stats.
    fn publish(&mut self) {
        let mut out = BTreeMap::new();
        let mut seen_pages = vec![];
        let mut maps_reads = 0;
        let scan = self.scan;
        for (&pid, p) in &self.procs {
            // reuse this pass's read unless pages moved since (or it is old)
            let reuse = !p.dirty && !p.pages.is_empty() && p.maps_scan + QUIET_SCANS > scan;
            let pages = if reuse {
                p.pages.clone()
            } else {
                let Some(text) = read(&format!("/proc/{pid}/numa_maps")) else { continue };
                maps_reads += 1;
                let vmas: Vec<Vma> = text.lines().filter_map(parse_numa_maps_line).collect();
                self.anon_pages(&vmas)
            };
            let loc = locality(&p.node_rt, &pages);
            let (private_chunks, shared_chunks, settling_chunks) =
                self.evidence.get(&pid).map_or((0, 0, 0), |e| e.counts());
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
                    private_chunks,
                    shared_chunks,
                    settling_chunks,
                    thread_homes: Some(self.home_plan.threads_per_node(pid, self.o.nr_nodes))
                        .filter(|per| per.iter().any(|&c| c > 0))
                        .unwrap_or_default(),
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
            s.maps_reads += maps_reads;
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

impl Drop for Placer {
    /// Give back every affinity set: at the end of run(), and on a panic
    /// of the thread.
    fn drop(&mut self) {
        self.unbind_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locality_overlap() {
        assert_eq!(locality(&[10.0, 0.0], &[90, 10]), Some(0.9));
        assert_eq!(locality(&[1.0, 1.0], &[50, 50]), Some(1.0));
        assert_eq!(locality(&[1.0, 1.0], &[100, 0]), Some(0.5));
        assert_eq!(locality(&[0.0, 0.0], &[1, 1]), None);
        assert_eq!(locality(&[1.0], &[0, 0]), None);
        assert_eq!(locality(&[0.0, 3.0], &[4]), Some(0.0));
    }

    fn opts(nr_nodes: usize, scope: Scope) -> MemOpts {
        MemOpts {
            mode: MemoryMode::Spread,
            budget_mbps: 1,
            interval_ms: 600_000,
            cpu_node: (0..2).map(|c| c % nr_nodes).collect(),
            nr_nodes,
            node_affinity: false,
            home_nodes: false,
            thread_homes: false,
            scope,
            faults: None,
        }
    }

    /// Stopping does not wait for the next pass: the thread sleeps parked
    /// between passes and Drop wakes it. (An include rule nothing matches:
    /// nothing on this machine is touched.)
    #[test]
    fn stops_at_once_between_passes() {
        let none = Scope { include: vec!["comm:\u{7}none".parse().unwrap()], exclude: vec![] };
        let t = MemoryThread::start(opts(2, none)).expect("thread starts");
        // let the first pass end and the thread go to sleep
        while t.snapshot().scans == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let start = Instant::now();
        drop(t);
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "{:?}", start.elapsed());
    }

    /// A pid that comes back with another start time is another process:
    /// nothing the agent kept about the old one survives, and a later start
    /// time of the same pid is not confused with it.
    #[test]
    fn a_reused_pid_is_a_new_process() {
        let homes = Arc::new(Mutex::new(Homes::default()));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let mut pl = Placer::new(opts(2, Scope::default()), stats.clone(), homes.clone());
        let (pid, old, new) = (4_000_000, 100, 200);
        let mut p = Proc::new(old, "db".into(), vec![true, true], 2);
        p.bound = Some(1);
        pl.procs.insert(pid, p);
        pl.procs.insert(7, Proc::new(5, "other".into(), vec![true, true], 2));
        pl.cursor.insert((pid, 0x1000), 0x2000);
        pl.cursor.insert((7, 0x1000), 0x2000);
        pl.backoff.failed((pid, old), 0x1000, 1);
        pl.home_plan.procs.insert(pid, 1);
        pl.home_plan.threads.insert(pid + 1, (pid, 0));
        homes.lock().unwrap().plan = pl.home_plan.clone();
        // the same process: nothing happens
        assert!(!pl.renew(pid, old));
        assert!(pl.procs.contains_key(&pid) && pl.cursor.len() == 2);
        // another process under the same pid: the old one's state is gone
        assert!(pl.renew(pid, new));
        assert!(!pl.procs.contains_key(&pid));
        assert_eq!(pl.cursor.keys().copied().collect::<Vec<_>>(), vec![(7, 0x1000)]);
        assert!(pl.backoff.due((pid, old), 0x1000, 2) && pl.backoff.len() == 0);
        assert!(!pl.home_plan.procs.contains_key(&pid) && pl.home_plan.threads.is_empty());
        let h = homes.lock().unwrap();
        assert!(h.plan == HomePlan::default() && h.gen == 1);
        assert_eq!(stats.lock().unwrap().pid_reused, 1);
        // the other process is untouched
        assert!(pl.procs.contains_key(&7));
        drop(h);
        // its affinity bookkeeping went with it: Drop has nothing to give back
        pl.procs.clear();
    }

    /// A process not sampled this pass is checked by its start time before
    /// the agent acts on it: kept while it is the same process, forgotten
    /// when its pid is gone or held by another.
    #[test]
    fn a_process_not_sampled_this_pass_is_checked_again() {
        let homes = Arc::new(Mutex::new(Homes::default()));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let mut pl = Placer::new(opts(2, Scope::default()), stats, homes);
        let me = std::process::id();
        let start = scope::start_time(me).expect("own start time");
        pl.scan = 5;
        pl.procs.insert(me, Proc::new(start, "me".into(), vec![true, true], 2));
        assert!(pl.still_same(me) && pl.procs.contains_key(&me));
        // another start time: the pid now belongs to another process
        pl.procs.insert(me, Proc::new(start + 1, "me".into(), vec![true, true], 2));
        assert!(!pl.still_same(me) && !pl.procs.contains_key(&me));
        // gone (beyond any pid_max)
        pl.procs.insert(4_194_305, Proc::new(1, "gone".into(), vec![true, true], 2));
        assert!(!pl.still_same(4_194_305) && pl.procs.is_empty());
        // sampled this pass: taken as checked, no read
        let mut p = Proc::new(1, "gone".into(), vec![true, true], 2);
        p.seen = 5;
        pl.procs.insert(4_194_305, p);
        assert!(pl.still_same(4_194_305));
        pl.procs.clear();
    }

    /// A failed query of a mapping's page nodes: the process gone ends the
    /// pass and drops it; any other error is counted, marks the mapping as
    /// failed (move_vma then backs it off) and the pass goes on.
    #[test]
    fn a_failed_page_query_backs_the_mapping_off() {
        let homes = Arc::new(Mutex::new(Homes::default()));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let mut pl = Placer::new(opts(2, Scope::default()), stats.clone(), homes);
        pl.procs.insert(4_000_000, Proc::new(1, "p".into(), vec![true, true], 2));
        assert!(pl.query_failed(4_000_000, libc::EFAULT));
        assert_eq!((pl.vma_failed, stats.lock().unwrap().query_failed), (1, 1));
        assert!(pl.procs.contains_key(&4_000_000));
        assert!(!pl.query_failed(4_000_000, libc::ESRCH));
        assert!(!pl.procs.contains_key(&4_000_000));
        assert_eq!(stats.lock().unwrap().query_failed, 1);
    }

    /// The fault map is drained only after a pass that ended with a process
    /// watched: `watched` follows the processes that span nodes.
    #[test]
    fn drains_only_after_watching() {
        let homes = Arc::new(Mutex::new(Homes::default()));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let mut pl = Placer::new(opts(2, Scope::default()), stats, homes);
        pl.watch_spanning();
        assert!(!pl.watched);
        let mut p = Proc::new(1, "span".into(), vec![true, true], 2);
        p.active = vec![true, true];
        pl.procs.insert(4_000_000, p);
        pl.watch_spanning();
        assert!(pl.watched && pl.evidence.contains_key(&4_000_000));
        pl.procs.get_mut(&4_000_000).unwrap().active = vec![true, false];
        pl.watch_spanning();
        assert!(!pl.watched && pl.evidence.is_empty());
        pl.procs.clear();
    }

    /// A pid without an address space (kthreadd, pid 2, where /proc shows
    /// the host's pids) is told by its statm alone; a process is not.
    #[test]
    fn a_pid_without_memory_is_told_by_statm() {
        let homes = Arc::new(Mutex::new(Homes::default()));
        let stats = Arc::new(Mutex::new(MemStats::default()));
        let mut pl = Placer::new(opts(2, Scope::default()), stats, homes);
        if read("/proc/2/statm").is_some_and(|s| s.split_whitespace().all(|f| f == "0")) {
            assert!(pl.sample_proc(2));
        }
        assert!(!pl.sample_proc(std::process::id()));
        assert!(!pl.sample_proc(u32::MAX));
        pl.procs.clear();
    }

    /// A machine with one node: no thread, nothing touched.
    #[test]
    fn one_node_starts_nothing() {
        assert!(MemoryThread::start(opts(1, Scope::default())).is_none());
        let mut off = opts(2, Scope::default());
        off.mode = MemoryMode::Off;
        assert!(MemoryThread::start(off).is_none());
    }
}
