// SPDX-License-Identifier: GPL-2.0-only
//! Sampling: where each process's threads ran, from /proc.
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
//!   active. A process with one active node is "single-node". A process
//!   given thread homes (home.rs) is active where they are instead.
//!
//! Who: a process is its pid and start time; a pid seen with another start
//! time is a new process, and what was kept about the old one is dropped
//! first. Then scope.rs decides whether the agent may touch it (the
//! administrator's lists, then /proc/PID/status: locked memory, cpuset
//! nodes); a process left alone is dropped from the agent's state (an
//! affinity it had set given back) and counted once.
//!
//! Reading: the procfs crate parses statm, stat and schedstat; status is
//! read by hand (scope::parse_status(), three times cheaper than procfs's
//! parser); the walk over /proc and /proc/<pid>/task is ours (mod.rs,
//! ids()), one file open per read as before. The /proc directory is read
//! only when a pid may be new (roster.rs); a pid without an address space
//! (a kernel thread) is visited once, with one read.
//!
//! Budget: a pass visits at most SCAN_PROCS processes, the ones tracked
//! (past MIN_RSS_MB) or young (listed for the first time within YOUNG_SCANS
//! passes, the agent's first pass included) first, a quarter of the count kept for the others;
//! the sweep over the others (one statm read each) stops SCAN_TIME after it
//! began. Each class resumes where the last pass stopped (ScanCursor), so
//! every process is visited within a bounded number of passes; a process
//! not reached keeps its state (its threads' runtime is counted at its next
//! visit). Without it the sweep read every pid every pass: with 500 idle
//! processes that alone took several percent of a CPU in the lab.
//!
//! Knob: `--memory-interval-ms` (the sampling period; a thread busy for more
//! than a tenth of it counts as busy for home nodes and node binding).
//! Stats: memory_scans, memory_scan_deferred (visits left to a later pass),
//! memory_scan_cpu_ms, memory_proc_lists (reads of the /proc directory);
//! per process (memory_procs) home, active, runtime_ms.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use procfs::process::{Schedstat, Stat, StatM};
use procfs::FromRead;

use super::roster::{self, Listed};
use super::scope::{self, Skip};
use super::{ids, read, Placer, Proc};

/// Processes with less anonymous memory than this are left alone.
pub const MIN_RSS_MB: u64 = 16;
/// Active-node hysteresis around a third of the largest node's runtime.
pub const ACTIVE_JOIN: f64 = 0.40;
pub const ACTIVE_LEAVE: f64 = 0.27;
/// The home node changes when another node has this much more runtime.
pub const HOME_SWITCH: f64 = 1.25;
/// Decay of the per-node runtime per interval.
pub const RT_DECAY: f64 = 0.5;
const PF_KTHREAD: u32 = 0x0020_0000;

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

/// One pass visits at most this many processes...
pub const SCAN_PROCS: usize = 256;
/// ...and its sweep over the processes not tracked (looking for ones that
/// grew past MIN_RSS_MB: one statm read each) stops once it has taken this
/// long (wall time).
pub const SCAN_TIME: Duration = Duration::from_millis(4);
/// A process that appeared in /proc within this many passes is visited
/// every pass, as the tracked ones are: a program just started is found as
/// soon as it has grown past MIN_RSS_MB, not when the sweep comes round.
/// Those already there at the agent's start count as appearing at its
/// first pass: a program started with the scheduler is found at once too.
pub const YOUNG_SCANS: u64 = 10;

/// Is a process first listed at pass `first` still young at pass `scan`?
pub fn young(first: u64, scan: u64) -> bool {
    scan.saturating_sub(first) < YOUNG_SCANS
}

/// The time rule of one pass: tracked processes are bounded by the count
/// (SCAN_PROCS) alone, their sampling is the work itself; the sweep over
/// the others stops at SCAN_TIME after its first visit, which always
/// happens, so the sweep goes on however slow the machine.
#[derive(Debug, Default)]
pub struct Sweep {
    started: Option<Instant>,
}

impl Sweep {
    /// May the pass visit one more process, tracked or not, at `now`?
    pub fn go_on(&mut self, tracked: bool, now: Instant) -> bool {
        if tracked {
            return true;
        }
        match self.started {
            None => {
                self.started = Some(now);
                true
            }
            Some(t) => now.duration_since(t) < SCAN_TIME,
        }
    }
}

/// Where the next pass starts in each class of processes (pid order,
/// wrapping): the ones tracked (enough memory to place, or young) and the
/// others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCursor {
    pub tracked: u32,
    pub other: u32,
}

/// How one pass of at most `cap` visits is shared between `t` tracked
/// processes and `o` others: the tracked first, but a quarter of the cap
/// kept for the others while there are any (a new large process is
/// noticed even when more than `cap` are tracked).
pub fn shares(t: usize, o: usize, cap: usize) -> (usize, usize) {
    let nt = t.min(cap - o.min(cap / 4));
    (nt, o.min(cap - nt))
}

/// `sorted` from its first pid at or after `from` on, wrapping.
pub fn rotated(sorted: &[u32], from: u32) -> impl Iterator<Item = u32> + '_ {
    let i = sorted.partition_point(|&p| p < from);
    sorted[i..].iter().chain(&sorted[..i]).copied()
}

/// The others a pass may visit, in pid order from `from` on, wrapping:
/// listed, with an address space, not `tracked` (sorted).
pub fn others<'a>(list: &'a [Listed], tracked: &'a [u32], from: u32) -> impl Iterator<Item = u32> + 'a {
    let i = list.partition_point(|e| e.pid < from);
    list[i..]
        .iter()
        .chain(&list[..i])
        .filter(move |e| !e.memoryless && tracked.binary_search(&e.pid).is_err())
        .map(|e| e.pid)
}

/// The cursor after a pass: unless the pass visited every process, each
/// class resumes after the last pid it visited in that class.
pub fn next_cursor(cur: ScanCursor, last_tracked: Option<u32>, last_other: Option<u32>, all: bool) -> ScanCursor {
    if all {
        return cur;
    }
    ScanCursor {
        tracked: last_tracked.map_or(cur.tracked, |p| p.wrapping_add(1)),
        other: last_other.map_or(cur.other, |p| p.wrapping_add(1)),
    }
}

impl Placer {
    /// Read where the threads ran since the last sample, within the pass's
    /// budget (SCAN_PROCS, SCAN_TIME): processes it does not reach keep
    /// their state and come first in a later pass (memory_scan_deferred).
    /// The pids come from the roster (roster.rs), which reads /proc only
    /// when it can have changed.
    pub(super) fn sample(&mut self) {
        self.scan += 1;
        let scan = self.scan;
        let last_pid = read("/proc/loadavg").as_deref().and_then(roster::parse_last_pid);
        if self.roster.due(last_pid, scan) {
            let Some(ids) = ids("/proc") else { return };
            let me = self.me;
            let mut pids = std::mem::take(&mut self.pid_buf);
            pids.clear();
            pids.extend(ids.filter(|&p| p != me));
            pids.sort_unstable();
            self.roster.update(&pids, last_pid, scan);
            self.pid_buf = pids;
            self.stats.lock().map(|mut s| s.proc_lists += 1).ok();
        }
        // tracked: held state or young (sorted); the others counted
        let mut tracked: Vec<u32> = self.procs.keys().copied().collect();
        let mut o = 0;
        for e in self.roster.list().iter().filter(|e| !e.memoryless) {
            if young(e.first, scan) {
                tracked.push(e.pid);
            } else {
                o += 1;
            }
        }
        // the ones held that are listed and no longer young are not others
        let roster = &self.roster;
        o -= self.procs.keys().filter(|&&p| roster.get(p).is_some_and(|e| !e.memoryless && !young(e.first, scan))).count();
        tracked.sort_unstable();
        tracked.dedup();
        let (nt, no) = shares(tracked.len(), o, SCAN_PROCS);
        let mut visited = Vec::with_capacity(nt + no);
        let (mut last_t, mut last_o) = (None, None);
        let first: Vec<u32> = rotated(&tracked, self.scan_cursor.tracked).take(nt).collect();
        for pid in first {
            if self.sample_proc(pid) {
                self.roster.mark_memoryless(pid);
            }
            visited.push(pid);
            last_t = Some(pid);
        }
        let rest: Vec<u32> = others(self.roster.list(), &tracked, self.scan_cursor.other).take(no).collect();
        let mut sweep = Sweep::default();
        for pid in rest {
            if !sweep.go_on(false, Instant::now()) {
                break;
            }
            if self.sample_proc(pid) {
                self.roster.mark_memoryless(pid);
            }
            visited.push(pid);
            last_o = Some(pid);
        }
        let all = tracked.len() + o;
        self.scan_cursor = next_cursor(self.scan_cursor, last_t, last_o, visited.len() >= all);
        let deferred = all.saturating_sub(visited.len()) as u64;
        if deferred > 0 {
            self.stats.lock().map(|mut s| s.scan_deferred += deferred).ok();
        }
        // gone: visited and not seen, or no longer in /proc
        visited.sort_unstable();
        let (roster, visited) = (&self.roster, &visited);
        let waiting = |pid: &u32| visited.binary_search(pid).is_err() && roster.listed(*pid);
        self.procs.retain(|pid, p| p.seen == scan || waiting(pid));
        self.skipped.retain(|pid, s| s.2 == scan || waiting(pid));
        let procs = &self.procs;
        self.cursor.retain(|(pid, _), _| procs.contains_key(pid));
        self.backoff.retain(|(pid, start)| procs.get(&pid).is_some_and(|p| p.start == start));
    }

    /// Stop tracking `pid`, giving back the affinity set on it if it is
    /// still the process it was set on.
    fn drop_proc(&mut self, pid: u32, start: u64) {
        if self.procs.get(&pid).is_some_and(|p| p.start == start && p.bound.is_some()) {
            self.set_node(pid, None);
        }
        self.forget(pid);
    }

    /// May the agent touch `pid`, named `comm` (scope.rs)? Ok(the nodes of
    /// its cpuset) or Err(why not); None if it is gone.
    fn scope_of(&self, pid: u32, comm: &str) -> Option<Result<Vec<bool>, Skip>> {
        let cgroup = if self.o.scope.needs_cgroup() { read(&format!("/proc/{pid}/cgroup")) } else { None };
        if !self.o.scope.allows(comm, cgroup.as_deref().and_then(scope::cgroup_v2_path)) {
            return Some(Err(Skip::Rule));
        }
        let (ranges, vmlck) = scope::parse_status(&read(&format!("/proc/{pid}/status"))?);
        let mems = scope::mems_mask(ranges.as_deref(), self.o.nr_nodes.max(1));
        Some(match scope::status_skip(&mems, vmlck) {
            Some(why) => Err(why),
            None => Ok(mems),
        })
    }

    /// Count a process left alone, once per process and cause.
    fn note_skip(&mut self, pid: u32, start: u64, comm: &str, why: Skip) {
        let scan = self.scan;
        let new = self.skipped.get(&pid).is_none_or(|&(s, w, _)| (s, w) != (start, why));
        self.skipped.insert(pid, (start, why, scan));
        if !new {
            return;
        }
        log::debug!("memory: leaving {pid} ({comm}) alone: {}", why.name());
        if let Ok(mut s) = self.stats.lock() {
            match why {
                Skip::Rule => s.skip_rule += 1,
                Skip::Mlock => s.skip_mlock += 1,
                Skip::Cpuset => s.skip_cpuset += 1,
            }
        }
    }

    /// One process. Any read that fails (ESRCH, ENOENT: it or the thread
    /// exited) skips it quietly; the process leaves `procs` at the end of
    /// the pass if it was not seen. True if it has no address space.
    pub(super) fn sample_proc(&mut self, pid: u32) -> bool {
        // statm first: anon ~ resident - shared (pages). Kernel threads (all
        // zeros) and small processes stop here, one short read each
        // instead of two.
        let Ok(statm) = StatM::from_file(format!("/proc/{pid}/statm")) else { return false };
        if statm.resident.saturating_sub(statm.shared) * self.page < MIN_RSS_MB << 20 {
            if let Some(start) = self.procs.get(&pid).map(|p| p.start) {
                if scope::start_time(pid) == Some(start) {
                    self.drop_proc(pid, start);
                } else {
                    self.forget(pid);
                }
            }
            // no address space at all: a kernel thread, or a process that
            // exited. Neither will have memory to place, so no stat read to
            // tell them apart: at the agent's first pass, with every pid
            // new, that read was half of the pass.
            return statm.size == 0;
        }
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/stat")) else { return false };
        let Ok(stat) = Stat::from_read(&raw[..]) else { return false };
        if stat.flags & PF_KTHREAD != 0 {
            return true;
        }
        let start = stat.starttime;
        self.renew(pid, start);
        let comm = crate::comm::escape(crate::comm::from_stat(&raw).unwrap_or_default());
        let mems = match self.scope_of(pid, &comm) {
            None => return false,
            Some(Ok(mems)) => mems,
            Some(Err(why)) => {
                self.note_skip(pid, start, &comm, why);
                self.drop_proc(pid, start);
                return false;
            }
        };
        let nn = self.o.nr_nodes.max(1);
        let scan = self.scan;
        let p = self.procs.entry(pid).or_insert_with(|| Proc::new(start, comm, mems.clone(), nn));
        p.seen = scan;
        p.mems = mems;
        for x in p.node_rt.iter_mut() {
            *x *= RT_DECAY;
        }
        p.recent = 0;
        p.busy = 0;
        p.busy_threads.clear();
        let busy_ns = self.o.interval_ms * 100_000;
        let Some(tids) = ids(&format!("/proc/{pid}/task")) else { return false };
        let mut alive = HashMap::new();
        for tid in tids {
            let Ok(ss) = Schedstat::from_file(format!("/proc/{pid}/task/{tid}/schedstat")) else { continue };
            let rt = ss.sum_exec_runtime;
            let Ok(ts) = Stat::from_file(format!("/proc/{pid}/task/{tid}/stat")) else { continue };
            // the CPU it last ran on (field 39 of stat)
            let cpu = ts.processor.and_then(|c| usize::try_from(c).ok());
            let prev = p.thread_rt.get(&tid).copied();
            alive.insert(tid, rt);
            // a thread seen for the first time: its runtime so far counts,
            // charged to the node it is on now (on a process's first sample
            // that is a guess about its past; it decays within seconds)
            let d = match prev {
                Some(x) => rt.saturating_sub(x),
                None => rt,
            };
            let node = cpu.and_then(|c| self.o.cpu_node.get(c).copied()).filter(|&n| n < nn);
            if d > busy_ns {
                p.busy += 1;
                p.busy_threads.push((tid, node));
            }
            if let Some(node) = node {
                if d > 0 {
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
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// One pass of the budget over `list` (pids 1..=n) as sample() does
    /// it, without time limit: the pids visited and the next cursor.
    fn pass(list: &[Listed], tracked: &[u32], c: ScanCursor, cap: usize) -> (Vec<u32>, ScanCursor) {
        let o = list.iter().filter(|e| !e.memoryless && tracked.binary_search(&e.pid).is_err()).count();
        let (nt, no) = shares(tracked.len(), o, cap);
        let t: Vec<u32> = rotated(tracked, c.tracked).take(nt).collect();
        let r: Vec<u32> = others(list, tracked, c.other).take(no).collect();
        let all = t.len() + r.len() >= tracked.len() + o;
        let c = next_cursor(c, t.last().copied(), r.last().copied(), all);
        (t.into_iter().chain(r).collect(), c)
    }

    fn listed(n: u32) -> Vec<Listed> {
        (1..=n).map(|pid| Listed { pid, first: 1, memoryless: false }).collect()
    }

    /// The scan budget: tracked processes first, a quarter of the cap kept
    /// for the others, each class resumed where the last pass stopped; every
    /// process is visited within a bounded number of passes.
    #[test]
    fn scan_budget_visits_everyone_in_turn() {
        let list = listed(20);
        let tracked = [5, 10, 15, 20];
        let c = ScanCursor::default();
        // everything fits: all, tracked first; the cursor stays
        let (v, c2) = pass(&list, &tracked, c, 100);
        assert_eq!(&v[..4], &tracked);
        assert_eq!(v.len(), 20);
        assert_eq!(c2, c);
        // a cap of 8: the 4 tracked and 4 others per pass; the others in turn
        let mut c = c;
        let mut seen = std::collections::BTreeSet::new();
        for pass_no in 0..4 {
            let (v, next) = pass(&list, &tracked, c, 8);
            assert_eq!(v.len(), 8);
            assert_eq!(&v[..4], &tracked, "{pass_no}: {v:?}");
            seen.extend(v.iter().copied());
            c = next;
        }
        // 16 others at 4 a pass: all seen in 4 passes
        assert_eq!(seen.len(), 20);
        // more tracked than the cap: a quarter of it still goes to the others
        let many: Vec<u32> = (1..=16).collect();
        let (v, c) = pass(&list, &many, ScanCursor::default(), 8);
        assert_eq!(v, vec![1, 2, 3, 4, 5, 6, 17, 18]);
        assert_eq!(c, ScanCursor { tracked: 7, other: 19 });
        let (v, c) = pass(&list, &many, c, 8);
        assert_eq!(v, vec![7, 8, 9, 10, 11, 12, 19, 20]);
        assert_eq!(c, ScanCursor { tracked: 13, other: 21 });
        // the others wrap round
        let (v, _) = pass(&list, &many, c, 8);
        assert_eq!(v, vec![13, 14, 15, 16, 1, 2, 17, 18]);
        // cut short by time after 3: the tracked resume at the 4th, the others where they were
        let c = next_cursor(c, Some(15), None, false);
        assert_eq!(c, ScanCursor { tracked: 16, other: 21 });
        // no others: the whole cap for the tracked
        let all: Vec<u32> = (1..=20).collect();
        let (v, _) = pass(&list, &all, ScanCursor::default(), 8);
        assert_eq!(v, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(shares(3, 0, 8), (3, 0));
        assert_eq!(shares(0, 30, 8), (0, 8));
        assert_eq!(shares(30, 1, 8), (7, 1));
    }

    /// Pids without an address space are neither others nor counted: the sweep goes
    /// round the rest only.
    #[test]
    fn pids_without_memory_are_passed_over() {
        let mut list = listed(10);
        for e in list.iter_mut().filter(|e| e.pid % 2 == 0) {
            e.memoryless = true;
        }
        let (v, c) = pass(&list, &[], ScanCursor::default(), 2);
        assert_eq!(v, vec![1, 3]);
        let (v, c) = pass(&list, &[], c, 2);
        assert_eq!(v, vec![5, 7]);
        let (v, _) = pass(&list, &[], c, 4);
        assert_eq!(v, vec![9, 1, 3, 5]);
        assert_eq!(others(&list, &[3], 0).collect::<Vec<_>>(), vec![1, 5, 7, 9]);
        assert_eq!(rotated(&[2, 4, 6], 5).collect::<Vec<_>>(), vec![6, 2, 4]);
        assert_eq!(rotated(&[2, 4, 6], 7).collect::<Vec<_>>(), vec![2, 4, 6]);
    }

    /// Young processes: for YOUNG_SCANS passes after they were first listed.
    #[test]
    fn young_processes() {
        assert!(young(1, 1) && young(1, YOUNG_SCANS) && !young(1, 1 + YOUNG_SCANS));
        assert!(young(3, 3) && young(3, 3 + YOUNG_SCANS - 1));
        assert!(!young(3, 3 + YOUNG_SCANS));
    }

    /// The sweep's time rule: tracked processes always go on; the first
    /// other process always goes, the others until SCAN_TIME after it.
    #[test]
    fn sweep_time_rule() {
        let t = Instant::now();
        let mut s = Sweep::default();
        assert!(s.go_on(true, t + SCAN_TIME * 10));
        // the first untracked visit starts the clock, even late
        assert!(s.go_on(false, t + SCAN_TIME * 10));
        assert!(s.go_on(false, t + SCAN_TIME * 10 + SCAN_TIME / 2));
        assert!(!s.go_on(false, t + SCAN_TIME * 11));
        // tracked processes are not cut by time
        assert!(s.go_on(true, t + SCAN_TIME * 20));
    }

    /// The fields sample_proc() takes from procfs's parsers: flags and the
    /// last CPU of stat (a comm with parentheses and spaces does not shift
    /// them), the runtime of schedstat, resident and shared of statm.
    #[test]
    fn proc_fields() {
        let s = "123 (a (b) c) R 1 123 123 0 -1 4194560 0 0 0 0 5 6 0 0 20 0 3 0 100 1000 50 \
                 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0";
        let st = Stat::from_read(s.as_bytes()).unwrap();
        assert_eq!(st.comm, "a (b) c");
        assert_eq!(st.flags, 4194560); // field 9
        assert_eq!(st.flags & PF_KTHREAD, 0);
        assert_eq!(st.processor, Some(5)); // field 39
        let k = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 4 0 0 \
                 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        assert_ne!(Stat::from_read(k.as_bytes()).unwrap().flags & PF_KTHREAD, 0);
        let ss = Schedstat::from_read("1234567 89 10\n".as_bytes()).unwrap();
        assert_eq!(ss.sum_exec_runtime, 1234567);
        let m = StatM::from_read("2000 1500 300 10 0 900 0\n".as_bytes()).unwrap();
        assert_eq!((m.resident, m.shared), (1500, 300));
    }
}
