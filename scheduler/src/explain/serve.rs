// SPDX-License-Identifier: GPL-2.0-only
//! The server's half of explain: the scx_stats targets "explain" (args
//! `pid`, `interval_ms`) and "explain_top" (arg `limit`), run on the
//! server's reader thread of the connection. Each asks the main loop for
//! the agent's view (Req::View: clones, no /proc read there), then reads
//! /proc itself: the threads every STEP_MS over the interval, numa_maps,
//! status and statm once. The rules that turn the view and the reads into
//! reasons are pure functions below, tested here.

use anyhow::{anyhow, bail, Result};
use scx_stats::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::procs::{self, Classes, TaskStat};
use super::report::*;
use crate::memory::home::HomeWhy;
use crate::memory::report::MemProc;
use crate::decisions::Kind;
use crate::stats::{Req, Res, COUNTERS};

/// Threads sampled per process at most; the rest are counted.
pub const MAX_THREADS: usize = 256;
/// One /proc read of every thread per step.
pub const STEP_MS: u64 = 100;
/// Interval bounds (ms) a client may ask for.
pub const INTERVAL_MS: (u64, u64) = (100, 60_000);
/// Below this much anonymous memory the memory agent samples no process
/// (memory/sample.rs MIN_RSS_MB).
const MIN_RSS_KB: u64 = crate::memory::sample::MIN_RSS_MB << 10;

/// The statistics' server data (stats::server_data()) with explain's two
/// targets added: what main.rs serves.
pub fn add_targets(d: StatsServerData<Req, Res>) -> StatsServerData<Req, Res> {
    d.add_stats("explain", Box::new(|args, (req, res)| explain(args, req, res)))
        .add_stats("explain_top", Box::new(|args, (req, res)| top(args, req, res)))
}

fn errno(code: i32, msg: String) -> anyhow::Error {
    anyhow!(msg).context(StatsErrno(code))
}

fn view(req: &crossbeam::channel::Sender<Req>, res: &crossbeam::channel::Receiver<Res>) -> Result<AgentView> {
    req.send(Req::View)?;
    match res.recv()? {
        Res::View(v) => Ok(*v),
        Res::Top(_) => bail!("explain: answer of the wrong kind"),
    }
}

fn arg<T: std::str::FromStr>(args: &BTreeMap<String, String>, k: &str) -> Result<Option<T>> {
    match args.get(k) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| errno(libc::EINVAL, format!("bad {k}: {v:?}"))),
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn explain(
    args: &BTreeMap<String, String>,
    req: &crossbeam::channel::Sender<Req>,
    res: &crossbeam::channel::Receiver<Res>,
) -> Result<Value> {
    let pid: u32 = arg(args, "pid")?.ok_or_else(|| errno(libc::EINVAL, "no pid".into()))?;
    let ms: u64 = arg(args, "interval_ms")?.unwrap_or(1000).clamp(INTERVAL_MS.0, INTERVAL_MS.1);
    let gone = || errno(libc::ESRCH, format!("no such process: {pid}"));
    // a thread id names its process
    let pid = read(&format!("/proc/{pid}/status")).and_then(|s| procs::parse_tgid(&s)).ok_or_else(gone)?;
    let v = view(req, res)?;
    let t0 = Instant::now();
    let sampled = sample(pid, Duration::from_millis(ms), &v.cfg).ok_or_else(gone)?;
    let interval_s = t0.elapsed().as_secs_f64();
    let status = read(&format!("/proc/{pid}/status")).ok_or_else(gone)?;
    let maps = read(&format!("/proc/{pid}/numa_maps")).unwrap_or_default();
    let statm = read(&format!("/proc/{pid}/statm")).unwrap_or_default();
    let page_kb = procfs::page_size() / 1024;
    let nn = v.cfg.nr_nodes.max(1);
    let facts = Facts {
        anon_kb: procs::anon_kb(&statm, page_kb).unwrap_or(0),
        mems_locked: procs::mems_and_locked(&status, nn),
        classes: procs::classes(&maps, nn),
    };
    let comm = read(&format!("/proc/{pid}/comm")).map(|c| crate::comm::escape(c.trim_end().as_bytes())).unwrap_or_default();
    let scheduler = read("/sys/kernel/sched_ext/root/ops").unwrap_or_default().trim().to_string();
    let r = build(&v, pid, comm, scheduler, interval_s, sampled, &facts);
    Ok(serde_json::to_value(r)?)
}

/// One thread over the interval.
#[derive(Clone, Debug, Default)]
pub struct Acc {
    pub tid: u32,
    pub stat: TaskStat,
    /// under sched_ext at the last read
    pub on_scx: bool,
    rt: u64,
    pub node_ns: Vec<u64>,
    pub llc_ns: Vec<u64>,
}

impl Acc {
    fn new(tid: u32, stat: TaskStat, rt: u64, cfg: &AgentCfg) -> Acc {
        Acc { tid, on_scx: procs::policy(stat.policy).1, stat, rt, node_ns: vec![0; cfg.nr_nodes.max(1)], llc_ns: vec![0; cfg.nr_llcs.max(1)] }
    }

    /// A new read: the runtime since the last one is charged to the CPU it
    /// is on (or last ran on) now.
    pub fn charge(&mut self, stat: TaskStat, rt: u64, cfg: &AgentCfg) {
        let d = rt.saturating_sub(self.rt);
        if let Some(&Some((node, llc))) = stat.cpu.and_then(|c| cfg.cpus.get(c)) {
            if let Some(x) = self.node_ns.get_mut(node) {
                *x += d;
            }
            if let Some(x) = self.llc_ns.get_mut(llc) {
                *x += d;
            }
        }
        self.rt = rt;
        self.stat = stat;
    }
}

/// The threads of `pid` (at most MAX_THREADS) read every STEP_MS for
/// `interval`; those alive at the end, and how many were left out. None if
/// the process is gone.
fn sample(pid: u32, interval: Duration, cfg: &AgentCfg) -> Option<(Vec<Acc>, usize)> {
    let mut accs: BTreeMap<u32, Acc> = BTreeMap::new();
    let mut left_out;
    let deadline = Instant::now() + interval;
    loop {
        let tids = procs::tids(pid)?;
        left_out = tids.len().saturating_sub(MAX_THREADS);
        let mut alive = BTreeMap::new();
        for tid in tids.into_iter().take(MAX_THREADS) {
            let Some((st, rt)) = procs::read_task(pid, tid) else { continue };
            let a = match accs.remove(&tid) {
                Some(mut a) => {
                    a.charge(st, rt, cfg);
                    a
                }
                // first seen: its runtime so far is the baseline
                None => Acc::new(tid, st, rt, cfg),
            };
            alive.insert(tid, a);
        }
        accs = alive;
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(STEP_MS)));
    }
    let mut out: Vec<Acc> = accs.into_values().collect();
    for a in out.iter_mut() {
        a.on_scx = procs::on_scx(pid, a.tid, a.stat.policy);
    }
    Some((out, left_out))
}

/// What /proc said about the process, besides its threads.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub anon_kb: u64,
    /// (Mems_allowed as a mask, VmLck KB)
    pub mems_locked: (Vec<bool>, u64),
    pub classes: Classes,
}

/// Shares of a total, rounded to 0.001; all 0 when nothing ran.
pub fn shares(ns: &[u64]) -> Vec<f64> {
    let t: u64 = ns.iter().sum();
    ns.iter().map(|&x| if t == 0 { 0.0 } else { (x as f64 / t as f64 * 1000.0).round() / 1000.0 }).collect()
}

fn mb(kb: u64) -> f64 {
    (kb as f64 / 1024.0 * 10.0).round() / 10.0
}

fn nodes_list(active: &[u32]) -> String {
    format!("{active:?}")
}

/// The report from the view and the reads.
pub fn build(
    v: &AgentView,
    pid: u32,
    comm: String,
    scheduler: String,
    interval_s: f64,
    (accs, left_out): (Vec<Acc>, usize),
    f: &Facts,
) -> Report {
    let cfg = &v.cfg;
    let nn = cfg.nr_nodes.max(1);
    let nl = cfg.nr_llcs.max(1);
    let mut p_node = vec![0u64; nn];
    let mut p_llc = vec![0u64; nl];
    let mut per_node = vec![0u32; nn];
    let mut threads = vec![];
    for a in &accs {
        let (pol, _) = procs::policy(a.stat.policy);
        let place = a.stat.cpu.and_then(|c| cfg.cpus.get(c).copied().flatten());
        if let Some((n, _)) = place {
            per_node[n.min(nn - 1)] += 1;
        }
        for (x, y) in p_node.iter_mut().zip(&a.node_ns) {
            *x += y;
        }
        for (x, y) in p_llc.iter_mut().zip(&a.llc_ns) {
            *x += y;
        }
        threads.push(Thread {
            tid: a.tid,
            comm: a.stat.comm.clone(),
            policy: pol.into(),
            on_scx: a.on_scx,
            state: a.stat.state.clone(),
            cpu: a.stat.cpu.map_or(-1, |c| c as i32),
            llc: place.map_or(-1, |p| p.1 as i32),
            node: place.map_or(-1, |p| p.0 as i32),
            run_ms: a.node_ns.iter().sum::<u64>() as f64 / 1e6,
            node_share: shares(&a.node_ns),
            llc_share: shares(&a.llc_ns),
            thread_home: v.homes.plan.threads.get(&a.tid).map_or(-1, |&(_, n)| n as i32),
        });
    }
    let mem = v.mem.get(&pid).filter(|m| m.comm == comm || comm.is_empty());
    let untracked = untracked(cfg, f);
    let home = home_reason(cfg, v.homes.why.get(&pid), untracked.as_ref());
    let run_ms = p_node.iter().sum::<u64>() as f64 / 1e6;
    let pref_llc = llc_reason(cfg, v.cache.iter().find(|c| c.tgid == pid));
    let memory_home = MemHome {
        tracked: mem.is_some() && untracked.is_none(),
        node: mem.map_or(-1, |m| m.home),
        active: mem.map_or(vec![], |m| m.active.clone()),
        locality: mem.map_or(-1.0, |m| m.locality),
    };
    let c = &f.classes;
    let memory = Memory {
        mode: cfg.memory_mode.clone(),
        nodes: (0..nn)
            .map(|n| NodeMem {
                node: n,
                private_mb: mb(c.private[n]),
                shared_mb: mb(c.shared[n]),
                file_mb: mb(c.file[n]),
                bound_mb: mb(c.bound[n]),
            })
            .collect(),
        chunks_private: mem.map_or(0, |m| m.private_chunks),
        chunks_shared: mem.map_or(0, |m| m.shared_chunks),
        chunks_settling: mem.map_or(0, |m| m.settling_chunks),
        migrated_mb: mem.map_or(0.0, |m| mb(m.pages_migrated * procfs::page_size() / 1024)),
    };
    let plan = plan(cfg, mem.filter(|_| untracked.is_none()), untracked.as_ref(), f, run_ms);
    Report {
        version: SCHEMA_VERSION,
        pid,
        comm,
        scheduler,
        interval_s: (interval_s * 1000.0).round() / 1000.0,
        nr_nodes: nn,
        nr_llcs: nl,
        threads,
        threads_not_sampled: left_out,
        process: Share { run_ms, node_share: shares(&p_node), llc_share: shares(&p_llc), threads_per_node: per_node },
        home,
        memory_home,
        pref_llc,
        memory,
        plan,
        decisions: decisions_of(v, pid, monotonic_ns()),
    }
}

/// CLOCK_MONOTONIC now, the clock of the decision records.
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The decision records of process @tgid, oldest first, each named by its
/// rule's counter (0 for a move: the wake-up's idle-CPU search).
pub fn decisions_of(v: &AgentView, tgid: u32, now_ns: u64) -> Decisions {
    let node = |c: i32| {
        usize::try_from(c).ok().and_then(|c| v.cfg.cpus.get(c).copied().flatten()).map_or(-1, |p| p.0 as i32)
    };
    let items = v
        .decisions
        .get(&tgid)
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    let (rule, text) = match (d.kind, d.rule as usize) {
                        (Kind::MoveLlc | Kind::MoveNode, 0) => {
                            ("idle_search", "wake-up: an idle CPU found by the push side's search")
                        }
                        (_, r) => COUNTERS.get(r).map_or(("unknown", ""), |c| (c.1, c.2)),
                    };
                    DecisionItem {
                        age_ms: (now_ns.saturating_sub(d.at_ns) as f64 / 1e6).round(),
                        tid: d.pid,
                        kind: match d.kind {
                            Kind::MoveLlc => "move_llc",
                            Kind::MoveNode => "move_node",
                            Kind::Refused => "refused",
                        }
                        .into(),
                        from_cpu: d.from_cpu,
                        to_cpu: d.to_cpu,
                        from_node: node(d.from_cpu),
                        to_node: node(d.to_cpu),
                        rule: rule.into(),
                        text: text.into(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Decisions { rate_per_cpu: v.cfg.decision_rate, items }
}

/// Why the memory agent keeps nothing about the process, if it does not:
/// (code, sentence). From /proc read now, so a stale entry of the agent's
/// last pass does not count.
pub fn untracked(cfg: &AgentCfg, f: &Facts) -> Option<(String, String)> {
    let (mems, locked) = &f.mems_locked;
    let r = |c: &str, t: String| Some((c.to_string(), t));
    if cfg.memory_mode == "off" {
        return r("memory_off", format!("memory placement is off ({})", cfg.memory_off_why));
    }
    if f.anon_kb < MIN_RSS_KB {
        return r(
            "not_tracked",
            format!(
                "not tracked: {:.1} MB of anonymous memory, below the {} MB the memory agent samples",
                f.anon_kb as f64 / 1024.0,
                MIN_RSS_KB >> 10
            ),
        );
    }
    if *locked > 0 {
        return r("left_alone", "left alone: it has locked memory (mlock)".into());
    }
    if mems.iter().filter(|&&m| m).count() == 1 {
        return r("left_alone", "left alone: its cpuset allows one node".into());
    }
    None
}

/// The home node and why, from the rule's own reason (memory/home.rs reasons()).
pub fn home_reason(cfg: &AgentCfg, why: Option<&HomeWhy>, untracked: Option<&(String, String)>) -> Reason {
    let r = |value: i32, reason: &str, text: String| Reason { value, reason: reason.into(), text, thread_homes: vec![] };
    if !cfg.home_nodes {
        return r(-1, "switch_off", format!("none: home nodes are off ({})", cfg.home_off_why));
    }
    if let Some((code, text)) = untracked {
        return r(-1, code, format!("none: {text}"));
    }
    let Some(why) = why else {
        let text = if cfg.scope.is_empty() {
            format!("none: not planned yet (the memory agent plans every {} ms)", cfg.interval_ms)
        } else {
            format!("none: not planned yet, or left out by the administrator's lists ({})", cfg.scope)
        };
        return r(-1, "not_yet_planned", text);
    };
    match why {
        HomeWhy::Kept { node } => r(*node as i32, "kept", format!("node {node}: its home already, still with room")),
        HomeWhy::MemoryNode { node } => {
            r(*node as i32, "memory_node", format!("node {node}: the node holding most of its memory, with room"))
        }
        HomeWhy::MostRoom { node } => {
            r(*node as i32, "most_room", format!("node {node}: the node with most room (its memory's node had none)"))
        }
        HomeWhy::ThreadHomes { threads_per_node } => Reason {
            value: -1,
            reason: "thread_homes".into(),
            text: format!(
                "none for the process, too big for one node: its busy threads have thread homes, per node {threads_per_node:?}"
            ),
            thread_homes: threads_per_node.clone(),
        },
        HomeWhy::FewBusy { busy } => r(
            -1,
            "few_busy",
            format!("none: {busy} thread(s) busy for a tenth of the last interval; a home needs two"),
        ),
        HomeWhy::Pinned { tid } => {
            r(-1, "pinned", format!("none: thread {tid} is pinned (its CPU affinity was restricted by someone else)"))
        }
        HomeWhy::NoRoom { busy, room, thread_homes } => {
            let mut t = if busy > room {
                format!(
                    "none: its {busy} busy threads do not fit one node (a node takes {room}: its CPUs, \
                     at most its fair share of all busy threads plus {})",
                    crate::numa::NUMA_IMBALANCE_MIN
                )
            } else {
                format!("none: no node had room left for its {busy} busy threads (other processes' homes took it)")
            };
            t += if *thread_homes {
                "; no room for thread homes either"
            } else {
                "; thread homes are off (--no-thread-home)"
            };
            r(-1, "no_room", t)
        }
    }
}

/// The preferred LLC and why (the BPF side keeps no reason for "none").
pub fn llc_reason(cfg: &AgentCfg, c: Option<&crate::cache::CacheProc>) -> Reason {
    let r = |value: i32, reason: &str, text: String| Reason { value, reason: reason.into(), text, thread_homes: vec![] };
    if !cfg.cache_aware {
        return r(
            -1,
            "cache_off",
            "none: cache-aware scheduling is off (on by default only where a node holds several LLCs; --cache-aware)"
                .into(),
        );
    }
    match c {
        None => r(-1, "no_entry", "none: not tracked by the cache-aware policy (it tracks processes with two or more threads once they run)".into()),
        Some(c) if c.pref_llc >= 0 => {
            let node = cfg
                .cpus
                .iter()
                .flatten()
                .find(|&&(_, l)| l as i32 == c.pref_llc)
                .map_or(-1, |&(n, _)| n as i32);
            r(
                c.pref_llc,
                "preferred",
                format!(
                    "LLC {} (node {node}): where its threads ran most lately; {:.0}% of its runtime there",
                    c.pref_llc,
                    c.share * 100.0
                ),
            )
        }
        Some(c) => r(
            -1,
            "none",
            format!(
                "none right now ({} threads): more running threads than the LLC's cores, its LLC overloaded or \
                 outside its home node, or no recent runtime; its runtime is mostly in LLC {}",
                c.nr_threads, c.top_llc
            ),
        ),
    }
}

/// What the memory agent moves next, from the numa_maps read now and the
/// agent's home and active nodes (a dry run of memory/plan.rs's rule for
/// single-node processes; for a process spanning nodes only what sits
/// outside its active nodes, as the per-chunk plan needs the write
/// evidence the memory thread holds), and what it leaves alone.
pub fn plan(cfg: &AgentCfg, mem: Option<&MemProc>, untracked: Option<&(String, String)>, f: &Facts, run_ms: f64) -> Plan {
    let c = &f.classes;
    let nn = c.movable.len();
    let mut p = Plan::default();
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    if sum(&c.bound) > 0 {
        p.left_alone.push(LeftAlone {
            reason: "policy".into(),
            mb: mb(sum(&c.bound)),
            text: "under a memory policy the application set (numactl -m, mbind): left where it is".into(),
        });
    }
    if sum(&c.file) > 0 {
        p.left_alone.push(LeftAlone {
            reason: "file".into(),
            mb: mb(sum(&c.file)),
            text: "file pages (and hugetlbfs): never moved".into(),
        });
    }
    let mems = &f.mems_locked.0;
    if mems.iter().any(|&m| !m) {
        let allowed: Vec<usize> = (0..mems.len()).filter(|&n| mems[n]).collect();
        p.left_alone.push(LeftAlone {
            reason: "cpuset".into(),
            mb: 0.0,
            text: format!("its cpuset allows nodes {allowed:?}: no move to any other"),
        });
    }
    if let Some((code, text)) = untracked {
        p.reason = code.clone();
        p.text = format!("nothing: {text}");
        return p;
    }
    let Some(m) = mem.filter(|m| m.home >= 0) else {
        p.reason = "not_yet_sampled".into();
        p.text = format!("nothing yet: the memory agent samples every {} ms", cfg.interval_ms);
        return p;
    };
    let active: Vec<usize> = m.active.iter().map(|&n| n as usize).filter(|&n| n < nn).collect();
    let home = m.home as usize;
    let spread = cfg.memory_mode == "spread" && active.len() > 1;
    for n in 0..nn {
        let kb = c.movable[n];
        let stays = if spread { active.contains(&n) } else { n == home };
        // below 0.1 MB: nothing worth a line
        if mb(kb) > 0.0 && !stays && mems.get(n).copied().unwrap_or(true) {
            let to = if spread { -1 } else { home as i32 };
            if to < 0 || mems.get(home).copied().unwrap_or(true) {
                p.next.push(Move { from: n, to, mb: mb(kb) });
            }
        }
    }
    p.next_mb = (p.next.iter().map(|x| x.mb).sum::<f64>() * 10.0).round() / 10.0;
    if spread {
        p.reason = "spanning".into();
        p.text = format!(
            "spans nodes {}: private chunks follow the thread that writes them, shared ones are spread over those \
             nodes, nothing goes to another node (chunks now: private {}, shared {}, settling {})",
            nodes_list(&m.active),
            m.private_chunks,
            m.shared_chunks,
            m.settling_chunks
        );
        if !p.next.is_empty() {
            p.text += &format!("; {} MB sit outside them and go to them", p.next_mb);
        }
    } else if p.next.is_empty() {
        p.reason = "in_place".into();
        p.text = format!("nothing: its anonymous memory is on its home node {home}");
    } else {
        p.reason = "follow_home".into();
        p.text = format!("{} MB to its home node {home} (pages follow a single-node process's home)", p.next_mb);
    }
    if !p.next.is_empty() {
        if run_ms <= 0.0 {
            p.text += "; not while it does not run (the agent moves the memory of processes that ran)";
        } else if cfg.budget_mbps > 0 && p.next_mb > cfg.budget_mbps as f64 {
            p.text += &format!(
                "; the budget (--memory-budget-mbps {}) spreads it over about {:.0} s",
                cfg.budget_mbps,
                p.next_mb / cfg.budget_mbps as f64
            );
        }
    }
    p
}

fn top(
    args: &BTreeMap<String, String>,
    req: &crossbeam::channel::Sender<Req>,
    res: &crossbeam::channel::Receiver<Res>,
) -> Result<Value> {
    let limit: usize = arg(args, "limit")?.unwrap_or(10);
    let v = view(req, res)?;
    let mut procs = vec![];
    for m in v.mem.values() {
        // the agent keeps the last entry of a process that exited
        let Some(tids) = procs::tids(m.tgid) else { continue };
        let nodes: Vec<Option<usize>> = tids
            .iter()
            .filter_map(|&t| std::fs::read(format!("{}/stat", procs::task_dir(m.tgid, t))).ok())
            .filter_map(|raw| procs::parse_stat(&raw))
            .map(|s| s.cpu.and_then(|c| v.cfg.cpus.get(c).copied().flatten()).map(|p| p.0))
            .collect();
        procs.push(top_proc(&v, m, &nodes));
    }
    Ok(serde_json::to_value(top_report(&v, procs, limit))?)
}

/// One line of --top: `nodes`, each thread's node now.
pub fn top_proc(v: &AgentView, m: &MemProc, nodes: &[Option<usize>]) -> TopProc {
    let nn = v.cfg.nr_nodes.max(1);
    let mut per = vec![0u32; nn];
    for &n in nodes.iter().flatten() {
        per[n.min(nn - 1)] += 1;
    }
    let total: u64 = m.pages_node.iter().sum();
    let remote: u64 = (0..m.pages_node.len()).filter(|&n| !m.active.contains(&(n as u32))).map(|n| m.pages_node[n]).sum();
    let remote_mb = if total == 0 { 0.0 } else { (m.rss_mb * remote as f64 / total as f64 * 10.0).round() / 10.0 };
    let home = home_reason(&v.cfg, v.homes.why.get(&m.tgid), None);
    let split = per.iter().filter(|&&x| x > 0).count();
    let text = format!(
        "locality {}; {remote_mb} MB outside its active nodes {:?}; threads on {split} node(s); home {}",
        if m.locality < 0.0 { "unknown".into() } else { format!("{:.0}%", m.locality * 100.0) },
        m.active,
        home.text
    );
    TopProc {
        pid: m.tgid,
        comm: m.comm.clone(),
        threads: nodes.len(),
        threads_per_node: per,
        home: home.value,
        home_reason: home.reason,
        active: m.active.clone(),
        rss_mb: (m.rss_mb * 10.0).round() / 10.0,
        remote_mb,
        locality: m.locality,
        text,
    }
}

/// Least local first: lowest locality (unknown last), then most nodes
/// holding its threads, then most memory outside its active nodes.
pub fn top_report(v: &AgentView, mut procs: Vec<TopProc>, limit: usize) -> TopReport {
    let key = |p: &TopProc| if p.locality < 0.0 { 2.0 } else { p.locality };
    let split = |p: &TopProc| p.threads_per_node.iter().filter(|&&x| x > 0).count();
    procs.sort_by(|a, b| {
        key(a)
            .total_cmp(&key(b))
            .then(split(b).cmp(&split(a)))
            .then(b.remote_mb.total_cmp(&a.remote_mb))
            .then(a.pid.cmp(&b.pid))
    });
    let tracked = procs.len();
    procs.truncate(limit);
    TopReport { version: SCHEMA_VERSION, memory_mode: v.cfg.memory_mode.clone(), tracked, procs }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// numa2: 2 nodes x 4 CPUs, one LLC per node.
    pub(crate) fn numa2() -> AgentCfg {
        AgentCfg {
            cpus: (0..8).map(|c| Some((c / 4, c / 4))).collect(),
            nr_nodes: 2,
            nr_llcs: 2,
            memory_mode: "spread".into(),
            home_nodes: true,
            budget_mbps: 128,
            interval_ms: 1000,
            ..Default::default()
        }
    }

    fn st(cpu: usize) -> TaskStat {
        TaskStat { comm: "t".into(), state: "R".into(), cpu: Some(cpu), policy: 0 }
    }

    pub(crate) fn facts(anon_mb: u64, movable_kb: Vec<u64>) -> Facts {
        let nn = movable_kb.len();
        Facts {
            anon_kb: anon_mb << 10,
            mems_locked: (vec![true; nn], 0),
            classes: Classes {
                private: movable_kb.clone(),
                shared: vec![0; nn],
                file: vec![0; nn],
                bound: vec![0; nn],
                movable: movable_kb,
            },
        }
    }

    pub(crate) fn memproc(pid: u32, home: i32, active: &[u32]) -> MemProc {
        MemProc { tgid: pid, comm: "w".into(), home, active: active.to_vec(), locality: 0.5, ..Default::default() }
    }

    #[test]
    fn runtime_is_charged_where_the_thread_is() {
        let cfg = numa2();
        let mut a = Acc::new(7, st(1), 1_000, &cfg);
        a.charge(st(1), 4_000, &cfg);
        a.charge(st(6), 5_000, &cfg);
        // no runtime: nothing charged, wherever it is
        a.charge(st(2), 5_000, &cfg);
        assert_eq!((a.node_ns.clone(), a.llc_ns.clone()), (vec![3_000, 1_000], vec![3_000, 1_000]));
        assert_eq!(shares(&a.node_ns), vec![0.75, 0.25]);
        assert_eq!(shares(&[0, 0]), vec![0.0, 0.0]);
        // an unknown CPU charges nothing
        a.charge(TaskStat { cpu: Some(99), ..st(0) }, 9_000, &cfg);
        assert_eq!(a.node_ns.iter().sum::<u64>(), 4_000);
    }

    #[test]
    fn home_reasons_in_order() {
        let mut cfg = numa2();
        let small = untracked(&cfg, &facts(3, vec![0, 0]));
        assert_eq!(small.as_ref().unwrap().0, "not_tracked");
        assert!(untracked(&cfg, &facts(64, vec![0, 0])).is_none());
        let mut locked = facts(64, vec![0, 0]);
        locked.mems_locked.1 = 4;
        assert_eq!(untracked(&cfg, &locked).unwrap().0, "left_alone");
        // the rule's reason, when tracked
        let r = home_reason(&cfg, Some(&HomeWhy::MemoryNode { node: 1 }), None);
        assert_eq!((r.value, r.reason.as_str()), (1, "memory_node"));
        let r = home_reason(&cfg, Some(&HomeWhy::NoRoom { busy: 8, room: 4, thread_homes: true }), None);
        assert_eq!((r.value, r.reason.as_str()), (-1, "no_room"));
        assert!(r.text.contains("do not fit one node"), "{}", r.text);
        let r = home_reason(&cfg, Some(&HomeWhy::ThreadHomes { threads_per_node: vec![1, 1] }), None);
        assert_eq!((r.reason.as_str(), r.thread_homes.clone()), ("thread_homes", vec![1, 1]));
        // not tracked wins over a stale reason; the switch wins over all
        let r = home_reason(&cfg, Some(&HomeWhy::Kept { node: 0 }), small.as_ref());
        assert_eq!((r.value, r.reason.as_str()), (-1, "not_tracked"));
        assert_eq!(home_reason(&cfg, None, None).reason, "not_yet_planned");
        cfg.home_nodes = false;
        cfg.home_off_why = "--no-home-node".into();
        let r = home_reason(&cfg, Some(&HomeWhy::Kept { node: 0 }), None);
        assert_eq!(r.reason, "switch_off");
        assert!(r.text.contains("--no-home-node"));
    }

    #[test]
    fn plan_dry_run() {
        let cfg = numa2();
        // single-node on node 0 with 8 MB on node 1: they go home
        let p = plan(&cfg, Some(&memproc(1, 0, &[0])), None, &facts(64, vec![56 << 10, 8 << 10]), 10.0);
        assert_eq!((p.reason.as_str(), p.next.clone()), ("follow_home", vec![Move { from: 1, to: 0, mb: 8.0 }]));
        let p = plan(&cfg, Some(&memproc(1, 0, &[0])), None, &facts(64, vec![64 << 10, 0]), 10.0);
        assert_eq!((p.reason.as_str(), p.next.len()), ("in_place", 0));
        // spanning both nodes: nothing outside its active nodes
        let p = plan(&cfg, Some(&memproc(1, 0, &[0, 1])), None, &facts(64, vec![32 << 10, 32 << 10]), 10.0);
        assert_eq!((p.reason.as_str(), p.next.len()), ("spanning", 0));
        // left alone: file and policy-bound memory, and the cpuset
        let mut f = facts(64, vec![64 << 10, 0]);
        f.classes.file = vec![1024, 0];
        f.classes.bound = vec![0, 2048];
        let p = plan(&cfg, Some(&memproc(1, 0, &[0])), None, &f, 10.0);
        let why: Vec<(&str, f64)> = p.left_alone.iter().map(|l| (l.reason.as_str(), l.mb)).collect();
        assert_eq!(why, vec![("policy", 2.0), ("file", 1.0)]);
        // not tracked: nothing planned, the reason said
        let u = untracked(&cfg, &facts(1, vec![1024, 0]));
        let p = plan(&cfg, None, u.as_ref(), &facts(1, vec![1024, 0]), 10.0);
        assert_eq!((p.reason.as_str(), p.next.len()), ("not_tracked", 0));
    }

    #[test]
    fn top_orders_least_local_first() {
        let mut v = AgentView { cfg: numa2(), ..Default::default() };
        v.homes.why.insert(2, HomeWhy::NoRoom { busy: 8, room: 4, thread_homes: true });
        let mut a = memproc(1, 0, &[0]);
        a.locality = 0.9;
        a.pages_node = vec![90, 10];
        a.rss_mb = 100.0;
        let mut b = memproc(2, 0, &[0, 1]);
        b.locality = 0.6;
        b.pages_node = vec![50, 50];
        let pa = top_proc(&v, &a, &[Some(0), Some(0)]);
        let pb = top_proc(&v, &b, &[Some(0), Some(1), None]);
        assert_eq!((pa.remote_mb, pa.threads_per_node.clone()), (10.0, vec![2, 0]));
        assert_eq!((pb.remote_mb, pb.threads, pb.home_reason.as_str()), (0.0, 3, "no_room"));
        let t = top_report(&v, vec![pa, pb], 1);
        assert_eq!((t.tracked, t.procs.len(), t.procs[0].pid), (2, 1, 2));
    }
}
