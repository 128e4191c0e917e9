// SPDX-License-Identifier: GPL-2.0-only
//! scx_locality: the user-space agent of a locality-aware sched_ext scheduler.
//!
//! Idea: place waking tasks on an idle CPU as close as possible to where
//! they last ran (push, ops.select_cpu), and let CPUs that run out of work
//! steal queued tasks from the nearest overloaded CPU (pull, ops.dispatch):
//! SMT core first, then the last-level cache, then the NUMA node. Weighted
//! vtime keeps it fair. The BPF side (src/bpf/) does the scheduling; this
//! agent reads the topology, fills the BPF rodata, loads and attaches the
//! scheduler, serves statistics and reports how it ended. This file holds
//! the start-up and the main loop; the command line is cli.rs, the rodata
//! written from it rodata.rs.
//!
//! Origin: Steve Sistare's 2018 "select_idle_sibling rework" for CFS (idle
//! core/CPU search per LLC plus stealing by CPUs about to go idle).
//!
//! Knobs (cli.rs, --help): --slice-us, --wake-gran-us, --no-steal,
//! --idle-search, --no-idle-core, --sparse-idle / --no-sparse-idle (idle tracking of the
//! push side, see bpf/idle.bpf.c), --no-wake-affine, --no-queued-wakeups,
//! --steal-cross-node, --push-cross-node, --no-wake-follow,
//! --place-at-fork, --numa-balance, --numa-interval-ms, --heartbeat-us,
//! --cache-aware / --no-cache-aware,
//! --cache-wake-aggr, --cache-aggr-tolerance, --cache-switch-ratio,
//! --cache-epoch-ms, --cache-epoch-timeout, --cache-overaggr-pct, --cache-imb-pct,
//! --cache-top (cache-aware scheduling, see cache.rs and bpf/cache.bpf.c),
//! --memory, --memory-budget-mbps, --memory-interval-ms,
//! --memory-node-affinity, --memory-include, --memory-exclude,
//! --no-home-node (memory placement, agent-side,
//! see memory/ and memory/home.rs),
//! --topology-override FILE, --stats SECS, --monitor SECS, --help-stats,
//! --exit-dump-len, -v / --log-level, --version.
//!
//! Stats: see stats.rs. At exit one JSON line
//! `scx_locality-final-stats: {...}` goes to stdout (summed over restarts),
//! before any error line.
//!
//! Startup prints one line on stdout, `scx_locality: attached (N CPUs, L
//! LLCs, M nodes, steal=on|off, ...)`, once the kernel runs the scheduler
//! (ops name "locality_<version>_<target>" in /sys/kernel/sched_ext/root/ops). The kernel's
//! stall watchdog is left at the kernel's 30 s (ops.timeout_ms; see
//! bpf/main.bpf.c for the measurement behind it); the environment variable
//! SCX_TIMEOUT_MS overrides it (read by scx_utils). The stat max_wait_ms
//! shows the longest wait actually seen.
//!
//! Exit codes (exit.rs):
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
mod cli;
mod comm;
mod decisions;
mod exit;
mod explain;
mod memory;
mod numa;
mod rodata;
#[cfg(test)]
mod rules;
mod stats;
mod topology;

use anyhow::{bail, Context, Result};
use bpf_skel::*;
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, MapHandle, ProgramType};
use log::{debug, info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_read, uei_report};
use std::collections::BTreeMap;
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cli::{full_version, parse_opts, Opts};
use exit::{
    classify, fatal, EXIT_BAD_OVERRIDE, EXIT_BUSY, EXIT_EJECTED, EXIT_NOT_ROOT, EXIT_NO_SCHED_EXT, EXIT_OK,
};
use memory::MemoryMode;
use numa::NumaBalance;
use stats::{Metrics, ProgRunTime, NR_STATS};
use topology::Topo;

/// Checks that need no BPF: who we are and what the kernel offers.
fn preflight() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
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

/// The name a user types for a value of an option (`--cache-gates=overload`).
fn value_name<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
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
    /// The decision record (dropped before the skeleton that holds its map).
    decisions: Option<decisions::Record>,
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    /// None if the socket could not be created: scheduling goes on.
    server: Option<scx_stats::StatsServer<stats::Req, stats::Res>>,
    /// What `explain` is told of the settings and topology.
    explain_cfg: explain::report::AgentCfg,
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
    memory_last: memory::report::MemStats,
    /// Generation of the home plan last written to proc_home.
    home_gen: u64,
    /// The process's CPU time and the time when this incarnation attached:
    /// the agent's own cost is counted from there (loading is not).
    attached: (u64, std::time::Instant),
}

/// CPU time of the whole process, all threads (CLOCK_PROCESS_CPUTIME_ID).
fn process_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

impl<'a> Scheduler<'a> {
    fn init(
        opts: &Opts,
        topo: &Topo,
        open_object: &'a mut MaybeUninit<libbpf_rs::OpenObject>,
    ) -> Result<Self> {
        // libbpf's output goes through init_logging() (main); do not
        // call obj_builder.debug(), which would replace that callback.
        let t_open = std::time::Instant::now();
        let builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            locality_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;

        let written = rodata::write(&mut skel, opts, topo)?;
        let memory_wanted = memory::wanted(opts.memory_mode(), topo.nr_nodes);
        // memory.bpf.c's fault counter serves memory placement only
        let count_faults = memory_wanted && opts.memory_mode() == MemoryMode::Spread;
        skel.progs.memory_fault.set_autoload(count_faults);
        if opts.no_queued_wakeups {
            skel.struct_ops.locality_ops_mut().flags &= !*scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP;
        }
        // ops.update_idle feeds only the sparse idle flags (bpf/idle.bpf.c):
        // without them it is not attached, saving a BPF call at every idle
        // transition; the kernel keeps its built-in idle masks either way.
        if !opts.sparse_idle() {
            skel.struct_ops.locality_ops_mut().update_idle = std::ptr::null_mut();
            skel.progs.locality_update_idle.set_autoload(false);
        }

        let t_load = std::time::Instant::now();
        let mut skel = scx_ops_load!(skel, locality_ops, uei)?;
        let t_attach = std::time::Instant::now();

        // Last chance to notice another scheduler before attaching: gives
        // the right exit code instead of a generic attach failure.
        check_not_busy()?;
        let link = scx_ops_attach!(skel, locality_ops)?;
        // where a slow start goes (the verifier's share is in "load")
        debug!(
            "start: open {} ms, load {} ms, attach {} ms",
            t_load.duration_since(t_open).as_millis(),
            t_attach.duration_since(t_load).as_millis(),
            t_attach.elapsed().as_millis()
        );

        // one socket: the statistics ("top") and explain's targets
        let data = explain::serve::add_targets(stats::server_data());
        let server = match scx_stats::StatsServer::new(data).launch() {
            Ok(s) => Some(s),
            Err(e) => {
                warn!("stats server unavailable ({e:#}); --stats/--monitor will not work");
                None
            }
        };

        println!(
            "scx_locality: attached ({} CPUs, {} LLCs, {} nodes, steal={}, enqueue_handoff={}, idle_core={}, idle_search={}, sparse_idle={}, wake_gran={}us, \
             steal_cross_node={}, push_cross_node={}, wake_follow={}, wake_affine={}, queued_wakeups={}, numa_balance={}, exec_placement={}, \
             numa_interval={}ms, \
             imb_numa_nr={:?}, cache_aware={}, cache_wake_aggr={}, cache_gates={}, cache_busy_wake={}, epoch={}ms, \
             memory={}, memory_budget={}MB/s, home_node={}, slice={}us, topology={})",
            topo.possible_cpus().len(),
            topo.nr_llcs,
            topo.nr_nodes,
            on_off(!opts.no_steal),
            if opts.no_steal { "off" } else { opts.enqueue_handoff.name() },
            on_off(!opts.no_idle_core),
            opts.idle_search.name(),
            on_off(opts.sparse_idle()),
            opts.wake_gran_us,
            on_off(opts.numa_mode() == NumaBalance::Off),
            opts.push_cross_node().name(),
            on_off(!opts.no_wake_follow),
            on_off(!opts.no_wake_affine),
            on_off(!opts.no_queued_wakeups),
            opts.numa_mode().name(),
            opts.exec_placement.name(),
            opts.numa_interval_ms,
            written.allowances,
            on_off(written.cache_on),
            on_off(written.cache_on && opts.cache_wake_aggr),
            value_name(&opts.cache_gates),
            value_name(&opts.cache_busy_wake),
            opts.cache_epoch_ms,
            // on one node the memory thread, which also sets home nodes, does not start
            if memory_wanted { opts.memory_mode().name() } else { "off" },
            opts.memory_budget_mbps,
            match (opts.home_node() && memory_wanted, opts.thread_home()) {
                (false, _) => "off",
                (true, false) => "process",
                (true, true) => "process+thread",
            },
            opts.slice_us,
            if topo.overridden { "override" } else { "sysfs" },
        );
        let _ = std::io::stdout().flush();
        // once attached, so that a start that fails stays one line on stderr
        info!("scx_locality {}", full_version());
        info!("topology: {}", topo.describe());

        // Memory placement runs on its own thread (never in this loop).
        let memory_faults = if count_faults {
            match (MapHandle::try_from(&skel.maps.mem_watch), MapHandle::try_from(&skel.maps.mem_faults)) {
                (Ok(watch), Ok(faults)) => Some(memory::evidence::Maps::new(watch, faults)),
                (Err(e), _) | (_, Err(e)) => {
                    warn!("memory: no fault counters ({e}); every chunk of a process spanning nodes counts as shared");
                    None
                }
            }
        } else {
            None
        };
        let memory = memory::MemoryThread::start(memory::MemOpts {
            mode: opts.memory_mode(),
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
            thread_homes: opts.thread_home(),
            scope: memory::scope::Scope {
                include: opts.memory_include.clone(),
                exclude: opts.memory_exclude.clone(),
            },
            faults: memory_faults,
        });
        if memory_wanted && memory.is_none() {
            warn!("memory placement thread could not start; going on without it");
        }

        // The cache map is filled only while cache-aware scheduling runs.
        let cache_on = skel.maps.rodata_data.as_ref().is_some_and(|r| r.cache_aware);
        let explain_cfg = explain_cfg(opts, topo, memory.is_some(), cache_on);

        // the record for explain; scheduling goes on without it
        let decisions = if opts.decision_rate > 0 {
            decisions::Record::new(&skel.maps.decisions)
                .map_err(|e| warn!("decision record off: {e:#}"))
                .ok()
        } else {
            None
        };
        Ok(Self {
            decisions,
            skel,
            link: Some(link),
            // what runs: off when no thread does (one node)
            memory_mode: if memory.is_some() { opts.memory_mode() } else { MemoryMode::Off },
            memory,
            memory_budget_mbps: opts.memory_budget_mbps,
            memory_last: Default::default(),
            home_gen: 0,
            server,
            explain_cfg,
            nr_llcs: topo.nr_llcs,
            cache_top: if cache_on { opts.cache_top as usize } else { 0 },
            cache_seen: BTreeMap::new(),
            cache_last: std::time::Instant::now(),
            attached: (process_cpu_ns(), std::time::Instant::now()),
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
            // the ops callbacks, and memory.bpf.c's fault counter (when loaded)
            if !matches!(prog.prog_type(), ProgramType::StructOps | ProgramType::Tracing) {
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
            memory::home::sync(&mut self.skel, &t.homes, &mut self.home_gen);
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
        m.set_agent_cpu(process_cpu_ns().saturating_sub(self.attached.0), self.attached.1.elapsed());
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

    /// What `explain` needs of the agent (explain/serve.rs reads /proc
    /// itself, on its own thread): clones only.
    fn explain_view(&mut self) -> explain::AgentView {
        self.cache_refresh(true);
        let (mem, homes) = match &self.memory {
            Some(t) => (t.snapshot(), t.homes.lock().map(|h| h.clone()).unwrap_or_default()),
            None => (self.memory_last.clone(), Default::default()),
        };
        self.drain_decisions();
        let decisions = self.decisions.as_ref().map(|r| r.all()).unwrap_or_default();
        explain::AgentView {
            cfg: self.explain_cfg.clone(),
            mem: mem.procs,
            homes,
            cache: self.cache_seen.values().cloned().collect(),
            decisions,
        }
    }

    /// Take the decision records written since the last drain (explain).
    fn drain_decisions(&self) {
        if let Some(r) = &self.decisions {
            if let Err(e) = r.drain() {
                warn!("decision record: {e:#}");
            }
        }
    }

    /// Serve stats until asked to stop or the scheduler exits; return how
    /// it ended and the final counters (read before detaching).
    fn run(&mut self, shutdown: &AtomicBool) -> Result<(Outcome, Metrics)> {
        let chans = self.server.as_ref().map(|s| s.channels());
        // Wake often only for the cache map's snapshots; else once a second,
        // as the peers' loops do: homes change once per memory pass, and a
        // stop or an ejection is seen within the second.
        let tick = Duration::from_millis(if self.cache_top > 0 { 100 } else { 1000 });
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            self.cache_refresh(false);
            self.home_sync();
            self.drain_decisions();
            let Some((res_tx, req_rx)) = &chans else {
                std::thread::sleep(tick);
                continue;
            };
            match req_rx.recv_timeout(tick) {
                Ok(stats::Req::Top) => res_tx.send(stats::Res::Top(Box::new(self.metrics())))?,
                Ok(stats::Req::View) => res_tx.send(stats::Res::View(Box::new(self.explain_view())))?,
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

/// The settings and topology `explain` reports, and why home nodes or
/// memory placement are off.
fn explain_cfg(opts: &Opts, topo: &Topo, memory_runs: bool, cache_on: bool) -> explain::report::AgentCfg {
    let memory_off_why = if memory_runs {
        String::new()
    } else if opts.memory_mode() == MemoryMode::Off && opts.memory.is_none() {
        format!("kernel.numa_balancing={}; --memory=spread places memory anyway", opts.numa_balancing_sysctl.unwrap_or(0))
    } else if opts.memory_mode() == MemoryMode::Off {
        "--memory=off".into()
    } else if topo.nr_nodes <= 1 {
        "one NUMA node".into()
    } else {
        "its thread could not start".into()
    };
    let home_off_why = if opts.no_home_node {
        "--no-home-node".to_string()
    } else if !memory_runs {
        format!("memory placement is off: {memory_off_why}")
    } else if opts.numa_mode() == NumaBalance::Off {
        "--numa-balance=off: homes need a NUMA policy".into()
    } else {
        String::new()
    };
    explain::report::AgentCfg {
        cpus: topo.cpus.iter().map(|c| c.as_ref().map(|p| (p.node, p.llc))).collect(),
        nr_nodes: topo.nr_nodes,
        nr_llcs: topo.nr_llcs,
        memory_mode: if memory_runs { opts.memory_mode().name().into() } else { "off".into() },
        memory_off_why,
        home_nodes: opts.home_node() && memory_runs,
        home_off_why,
        cache_aware: cache_on,
        budget_mbps: opts.memory_budget_mbps,
        interval_ms: opts.memory_interval_ms,
        scope: memory::scope::Scope { include: opts.memory_include.clone(), exclude: opts.memory_exclude.clone() }
            .describe()
            .unwrap_or_default(),
        decision_rate: opts.decision_rate,
    }
}

fn init_logging(opts: &Opts) {
    let (level, libbpf_debug) = opts.log_level();
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
    // a warning), everything with -vv or --log-level=trace. Not
    // scx_utils::init_libbpf_logging(): it passes every message through at
    // libbpf's level, so the attach warning libbpf_print() demotes would
    // show at every start.
    let min = if libbpf_debug {
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
    if let Some(cli::Command::Explain(e)) = &opts.command {
        return explain::run(e);
    }
    if opts.version {
        println!("scx_locality {}", full_version());
        return Ok(EXIT_OK);
    }
    if opts.help_stats {
        // a reader that stops early (`| head`) is not an error
        if let Err(e) = stats::server_data().describe_meta(&mut std::io::stdout(), None) {
            let pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if !pipe {
                return Err(e);
            }
        }
        return Ok(EXIT_OK);
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    {
        let shutdown = shutdown.clone();
        ctrlc::set_handler(move || shutdown.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }

    if let Some(secs) = opts.monitor {
        stats::monitor(Duration::from_secs_f64(secs), shutdown)?;
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

    if opts.memory.is_none() && opts.memory_mode() == MemoryMode::Off {
        info!(
            "memory placement off: kernel.numa_balancing={} (the administrator's switch); \
             --memory=spread places memory anyway",
            opts.numa_balancing_sysctl.unwrap_or(0)
        );
    }
    if opts.memory_node_affinity && opts.memory_mode() == MemoryMode::Off {
        warn!("--memory-node-affinity has no effect with memory placement off (nothing runs)");
    }

    if let Some(secs) = opts.stats {
        let shutdown = shutdown.clone();
        std::thread::spawn(move || {
            if let Err(e) = stats::monitor(Duration::from_secs_f64(secs), shutdown) {
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

/// kernel.numa_balancing (bits: 1 NUMA balancing, 2 memory tiering); None
/// if the kernel has no NUMA balancing.
fn read_numa_balancing() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok()?.trim().parse().ok()
}

fn main() {
    let mut opts = parse_opts();
    opts.numa_balancing_sysctl = read_numa_balancing();
    init_logging(&opts);
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
