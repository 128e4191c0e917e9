// SPDX-License-Identifier: GPL-2.0-only
//! Migration: move_pages(2) within the budget.
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
//! Before each mapping: the process must still be the one sampled (pid and
//! start time, scope.rs), the mapping not backing off after a failure, and
//! its target is kept within the process's cpuset nodes (scope::restrict).
//! Pages refused are counted per cause (failures()); a mapping with any
//! refused page backs off (scope::Backoff).
//!
//! Calls: besides the bytes, at most MOVE_CALLS_PER_S move_pages(2) calls
//! that move run in any second (a second Budget, counting calls): each
//! drains the LRU caches of every CPU first, so its cost grows with the
//! machine, not with the pages. Queries (nodes = NULL) are not counted:
//! they drain nothing.
//!
//! Knob: `--memory-budget-mbps`. Stats: memory_move_calls,
//! memory_call_waits, memory_move_cpu_ms (the thread's CPU time inside the
//! calls that move: the kernel copies on it), memory_pages_migrated,
//! memory_mb_migrated, memory_move_failed (memory_fail_eacces, _enomem,
//! _ebusy, _other by cause), memory_backoffs, memory_peak_mbps,
//! memory_budget_waits; per process (memory_procs) pages_migrated.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::pages::{move_pages, page_nodes};
use super::plan::Target;
use super::report::Fails;
use super::{read, scope, thread_cpu_ns, Placer};

/// Pages per move_pages call.
const CHUNK: usize = 512;
/// 2 MB regions per first (one address per region) move_pages call.
const REGIONS: usize = 64;
const HUGE: u64 = 2 << 20;

/// move_pages(2) calls that move pages, at most, in any one second. Each
/// such call drains the per-CPU LRU caches of every CPU before it moves
/// anything: a cost on the whole machine however few pages it moves.
pub const MOVE_CALLS_PER_S: u64 = 32;

/// Sliding one-second window of migrated bytes (or, for the call cap, of
/// calls: Budget::per_second).
#[derive(Debug)]
pub struct Budget {
    pub bytes_per_s: u64,
    window: VecDeque<(f64, u64)>,
    pub peak: u64,
}

impl Budget {
    pub fn new(mbps: u64) -> Budget {
        Budget::per_second(mbps << 20)
    }

    /// At most `units` in any one second.
    pub fn per_second(units: u64) -> Budget {
        Budget { bytes_per_s: units, window: VecDeque::new(), peak: 0 }
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

/// pgmigrate_success from /proc/vmstat. Read twice per move_pages call,
/// so by hand: procfs::vmstat() builds a map of every counter, 1.8x the
/// CPU time per read (measured).
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
/// no-op. (libc: neither nix nor rustix wraps sched_setscheduler(2).)
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

/// Pages one move_pages(2) call with targets did not move, by cause: the
/// whole batch under the call's error if it failed (ESRCH aside: the
/// process is gone), else each page's negative status but ENOENT (not
/// present: nothing to move), plus the pages a successful call reports as
/// not migrated (its positive return).
pub fn failures(status: &[i32], call: Result<i64, i32>) -> Fails {
    let mut f = Fails::default();
    match call {
        Err(libc::ESRCH) => {}
        Err(e) => f.add(e, status.len() as u64),
        Ok(left) => {
            for &s in status {
                if s < 0 && s != -libc::ENOENT {
                    f.add(-s, 1);
                }
            }
            if left > 0 {
                f.add(0, left as u64);
            }
        }
    }
    f
}

impl Placer {
    /// Move one mapping, if the process is still the one sampled, the
    /// mapping is not backing off and its target lies in the process's
    /// cpuset; false if the pass must end (deadline, stop, process gone).
    pub(super) fn move_vma(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        target: &Target,
        stop: &AtomicBool,
        deadline: Instant,
    ) -> bool {
        let Some(id) = self.ident(pid) else { return false };
        if !self.backoff.due(id, start, self.scan) {
            self.stats.lock().map(|mut s| s.backoffs += 1).ok();
            return true;
        }
        let Some(target) = self.procs.get(&pid).and_then(|p| scope::restrict(target, &p.mems)) else {
            return true;
        };
        // the pid may have been reused since it was sampled
        if scope::start_time(pid) != Some(id.1) {
            self.forget(pid);
            return false;
        }
        self.vma_failed = 0;
        self.vma_refused = false;
        let go_on = self.move_vma_pages(pid, start, end, &target, stop, deadline);
        if self.vma_failed > 0 {
            self.backoff.failed(id, start, self.scan);
        } else if go_on {
            self.backoff.ok(id, start);
        }
        go_on
    }

    /// Query and move one mapping; false if the pass must end (deadline,
    /// stop, process gone).
    fn move_vma_pages(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        target: &Target,
        stop: &AtomicBool,
        deadline: Instant,
    ) -> bool {
        let page = self.page;
        let key = (pid, start);
        // resume where the last pass stopped (a mapping may take several)
        let mut addr = self.cursor.get(&key).copied().filter(|&a| a > start && a < end).unwrap_or(start);
        // a refused target (vma_refused) ends the mapping for this pass
        'mapping: while addr < end {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                self.cursor.insert(key, addr);
                return false;
            }
            // In 2 MB regions (every decision is per region: a whole target,
            // or per chunk): first the head page of each region (a
            // transparent huge page moves whole), then every page of the
            // regions whose last page is still elsewhere (small pages); the
            // kernel skips pages already there and pages not present.
            let mut regions = vec![];
            let mut a = addr;
            let max_regions = ((self.budget.bytes_per_s / 4 / HUGE) as usize).clamp(1, REGIONS);
            while a < end && regions.len() < max_regions {
                let re = ((a / HUGE + 1) * HUGE).min(end);
                regions.push((a, re));
                a = re;
            }
            // (start, end, target node) of the regions that move
            let moves: Vec<(u64, u64, i32)> = match target {
                Target::Keep => vec![],
                Target::Node(n) => regions.iter().map(|&(rs, re)| (rs, re, *n as i32)).collect(),
                Target::Mixed(_) => {
                    // where each region is now decides where it goes
                    let first: Vec<u64> = regions.iter().map(|&(rs, _)| rs).collect();
                    let st = match page_nodes(pid, &first) {
                        Ok(st) => st,
                        Err(e) => return self.query_failed(pid, e),
                    };
                    regions
                        .iter()
                        .zip(&st)
                        .filter_map(|(&(rs, re), &s)| Some((rs, re, target.want(rs, usize::try_from(s).ok()?)? as i32)))
                        .collect()
                }
            };
            if moves.is_empty() {
                addr = a;
                continue;
            }
            log::debug!(
                "memory: {pid} moves 2 MB regions (address >> 21 -> node) {}",
                moves.iter().map(|&(rs, _, n)| format!("{:x}->{n}", rs / HUGE)).collect::<Vec<_>>().join(" ")
            );
            let heads: Vec<(u64, i32)> = moves.iter().map(|&(rs, _, n)| (rs, n)).collect();
            if !self.move_batch(pid, &heads, stop, deadline) {
                self.cursor.insert(key, addr);
                return false;
            }
            if self.vma_refused {
                break 'mapping;
            }
            let lasts: Vec<u64> = moves.iter().map(|&(_, re, _)| re - page).collect();
            let st = match page_nodes(pid, &lasts) {
                Ok(st) => st,
                Err(e) => return self.query_failed(pid, e),
            };
            for (&(rs, re, n), &s) in moves.iter().zip(&st) {
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
                    if self.vma_refused {
                        break 'mapping;
                    }
                }
            }
            addr = a;
        }
        self.cursor.remove(&key);
        true
    }

    /// A query of the pages' nodes failed with `errno`: false (end the
    /// pass) if the process is gone, which drops it; true (next mapping,
    /// e.g. EFAULT: the mapping changed) otherwise, counted, and the
    /// mapping backs off as after a refused move.
    pub(super) fn query_failed(&mut self, pid: u32, errno: i32) -> bool {
        if errno == libc::ESRCH {
            self.procs.remove(&pid);
            return false;
        }
        self.vma_failed += 1;
        self.stats.lock().map(|mut s| s.query_failed += 1).ok();
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
                let bytes_ok = self.budget.allows(now, worst);
                let call_ok = self.call_budget.allows(now, 1);
                if bytes_ok && call_ok {
                    break;
                }
                let w = if bytes_ok {
                    self.stats.lock().map(|mut s| s.call_waits += 1).ok();
                    self.call_budget.wait_for(now, 1)
                } else {
                    self.stats.lock().map(|mut s| s.budget_waits += 1).ok();
                    self.budget.wait_for(now, worst)
                };
                std::thread::sleep(Duration::from_secs_f64(w.unwrap_or(0.05).clamp(0.005, 0.05)));
            }
            let nodes: Vec<i32> = rest[..n].iter().map(|x| x.1).collect();
            let mut status = vec![0i32; n];
            let before = vmstat_migrated();
            let cpu0 = thread_cpu_ns();
            let r = {
                let _rt = RtWindow::enter();
                move_pages(pid, addrs, Some(&nodes), &mut status)
            };
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            self.calls += 1;
            let after = vmstat_migrated();
            let now = self.now();
            // pages this call moved, bounded from both sides: see moved_pages
            let pages = moved_pages(after.saturating_sub(before), worst_bytes(addrs, self.page), self.page);
            let fails = failures(&status, r);
            self.vma_failed += fails.total();
            self.vma_refused |= fails.eacces + fails.enomem > 0;
            self.budget.charge(now, pages * self.page);
            self.call_budget.charge(now, 1);
            if let Ok(mut s) = self.stats.lock() {
                s.pages_migrated += pages;
                s.bytes_migrated += pages * self.page;
                s.move_failed += fails.total();
                s.fail.plus(&fails);
                s.peak_bytes_per_s = s.peak_bytes_per_s.max(self.budget.peak);
                s.move_cpu_ns += cpu;
                s.move_calls += 1;
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

    /// The call cap: a window of calls, not bytes.
    #[test]
    fn call_cap_window() {
        let mut c = Budget::per_second(3);
        for t in [0.0, 0.1, 0.2] {
            assert!(c.allows(t, 1));
            c.charge(t, 1);
        }
        assert!(!c.allows(0.5, 1));
        // the first call leaves the window at 1.0
        assert!((c.wait_for(0.5, 1).unwrap() - 0.5).abs() < 1e-9);
        assert!(c.allows(1.0, 1));
        assert_eq!(Budget::new(2).bytes_per_s, 2 << 20);
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
    fn failures_by_cause() {
        use libc::{EACCES, EBUSY, EFAULT, ENOENT, ENOMEM, ESRCH};
        // per page: not present is no failure
        let f = failures(&[0, -ENOENT, -EACCES, -EBUSY, -EBUSY, -ENOMEM, -EFAULT, 1], Ok(0));
        assert_eq!((f.eacces, f.enomem, f.ebusy, f.other), (1, 1, 2, 1));
        assert_eq!(f.total(), 5);
        // the whole call refused (a target outside the cpuset): every page
        let f = failures(&[0; 4], Err(EACCES));
        assert_eq!((f.eacces, f.total()), (4, 4));
        assert_eq!(failures(&[0; 3], Err(ENOMEM)).enomem, 3);
        // the process exited: nothing refused
        assert_eq!(failures(&[0; 3], Err(ESRCH)).total(), 0);
        // pages the call could not migrate
        assert_eq!(failures(&[0; 3], Ok(2)).other, 2);
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

}
