// SPDX-License-Identifier: GPL-2.0-only
//! /proc for one process, read by explain: its threads (stat, schedstat),
//! its status, and its memory by class and node (numa_maps, parsed by
//! memory/plan.rs). stat, schedstat, status and statm are parsed by the
//! procfs crate; `sched` (ext.enabled), which it does not read, here. The
//! reads return None when the process or thread is gone.

use procfs::process::{Schedstat, Stat, StatM, Status};
use procfs::FromRead;

use crate::memory::plan::{parse_numa_maps_line, Vma};

/// One read of a thread.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskStat {
    pub comm: String,
    pub state: String,
    /// the CPU it runs on or last ran on (field 39)
    pub cpu: Option<usize>,
    /// scheduling policy (field 41)
    pub policy: u32,
}

/// The comm, state, CPU and policy of /proc/PID/task/TID/stat.
pub fn parse_stat(raw: &[u8]) -> Option<TaskStat> {
    let s = Stat::from_read(raw).ok()?;
    Some(TaskStat {
        comm: crate::comm::escape(s.comm.as_bytes()),
        state: s.state.to_string(),
        cpu: s.processor.and_then(|c| usize::try_from(c).ok()),
        policy: s.policy.unwrap_or(0),
    })
}

/// The policy's name, and whether a task under it runs under sched_ext
/// while scx_locality is loaded: every fair-class policy (the scheduler
/// does not set SCX_OPS_SWITCH_PARTIAL, main.bpf.c) and SCHED_EXT; not the
/// real-time and deadline classes.
pub fn policy(p: u32) -> (&'static str, bool) {
    match p {
        0 => ("SCHED_OTHER", true),
        1 => ("SCHED_FIFO", false),
        2 => ("SCHED_RR", false),
        3 => ("SCHED_BATCH", true),
        5 => ("SCHED_IDLE", true),
        6 => ("SCHED_DEADLINE", false),
        7 => ("SCHED_EXT", true),
        _ => ("unknown", false),
    }
}

/// `ext.enabled` of /proc/PID/task/TID/sched (1 while the task is under
/// sched_ext); None where the kernel does not print it.
pub fn parse_ext_enabled(sched: &str) -> Option<bool> {
    let l = sched.lines().find(|l| l.trim_start().starts_with("ext.enabled"))?;
    Some(l.rsplit(':').next()?.trim() == "1")
}

/// Whether a thread is under sched_ext: ext.enabled, else by its policy.
pub fn on_scx(pid: u32, tid: u32, policy_: u32) -> bool {
    std::fs::read_to_string(format!("{}/sched", task_dir(pid, tid)))
        .ok()
        .and_then(|s| parse_ext_enabled(&s))
        .unwrap_or(policy(policy_).1)
}

/// Runtime so far, ns (/proc/.../schedstat).
pub fn parse_schedstat(text: &str) -> Option<u64> {
    Schedstat::from_read(text.as_bytes()).ok().map(|s| s.sum_exec_runtime)
}

/// `Tgid:` of /proc/PID/status: the process a thread id belongs to.
pub fn parse_tgid(status: &str) -> Option<u32> {
    Status::from_read(status.as_bytes()).ok().and_then(|s| u32::try_from(s.tgid).ok())
}

pub fn task_dir(pid: u32, tid: u32) -> String {
    format!("/proc/{pid}/task/{tid}")
}

/// Thread ids of `pid`, ascending; None if it is gone.
pub fn tids(pid: u32) -> Option<Vec<u32>> {
    let d = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut v: Vec<u32> = d.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect();
    v.sort_unstable();
    Some(v)
}

/// (stat, runtime ns) of one thread now.
pub fn read_task(pid: u32, tid: u32) -> Option<(TaskStat, u64)> {
    let dir = task_dir(pid, tid);
    let st = parse_stat(&std::fs::read(format!("{dir}/stat")).ok()?)?;
    let rt = parse_schedstat(&std::fs::read_to_string(format!("{dir}/schedstat")).ok()?)?;
    Some((st, rt))
}

/// Memory of one process by class, KB per node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Classes {
    pub private: Vec<u64>,
    pub shared: Vec<u64>,
    pub file: Vec<u64>,
    pub bound: Vec<u64>,
    /// of `private` + `shared`: what the memory agent may move (not
    /// hugetlbfs), KB per node
    pub movable: Vec<u64>,
}

/// Sort the mappings of a numa_maps text into classes: bound (an explicit
/// policy, whatever the mapping), file, then anonymous mappings mapped by
/// several processes (mapmax > 1: shared) or one (private). Pages are
/// counted in KB of their own page size.
pub fn classes(numa_maps: &str, nr_nodes: usize) -> Classes {
    let z = || vec![0u64; nr_nodes];
    let mut c = Classes { private: z(), shared: z(), file: z(), bound: z(), movable: z() };
    for v in numa_maps.lines().filter_map(parse_numa_maps_line) {
        let to: &mut Vec<u64> = if !v.default_policy {
            &mut c.bound
        } else if v.file {
            &mut c.file
        } else if v.mapmax > 1 {
            &mut c.shared
        } else {
            &mut c.private
        };
        add(to, &v);
        if v.default_policy && !v.file && !v.huge && v.anon > 0 {
            add(&mut c.movable, &v);
        }
    }
    c
}

fn add(to: &mut [u64], v: &Vma) {
    for (n, &pages) in v.nodes.iter().enumerate() {
        if let Some(x) = to.get_mut(n) {
            *x += pages * v.page_kb;
        }
    }
}

/// (Mems_allowed as a node mask, VmLck KB) from /proc/PID/status.
pub fn mems_and_locked(status: &str, nr_nodes: usize) -> (Vec<bool>, u64) {
    let (ranges, vmlck) = crate::memory::scope::parse_status(status);
    (crate::memory::scope::mems_mask(ranges.as_deref(), nr_nodes), vmlck)
}

/// Anonymous resident memory, KB, from /proc/PID/statm (resident - shared,
/// as the memory agent counts it).
pub fn anon_kb(statm: &str, page_kb: u64) -> Option<u64> {
    let m = StatM::from_read(statm.as_bytes()).ok()?;
    Some(m.resident.saturating_sub(m.shared) * page_kb)
}

/// A whole /proc/PID/status (this process's) with `tgid` as its Tgid, for
/// tests: the procfs crate wants every field a kernel writes.
#[cfg(test)]
pub fn status_text(tgid: u32) -> String {
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    own.lines()
        .map(|l| if l.starts_with("Tgid:") { format!("Tgid:\t{tgid}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields() {
        let s = b"123 (a (b) c) R 1 123 123 0 -1 4194560 0 0 0 0 5 6 0 0 20 0 3 0 100 1000 50 \
                  18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 1 0 0 0";
        let t = parse_stat(s).unwrap();
        assert_eq!((t.comm.as_str(), t.state.as_str(), t.cpu, t.policy), ("a (b) c", "R", Some(5), 1));
        assert_eq!(policy(t.policy), ("SCHED_FIFO", false));
        assert_eq!(policy(0), ("SCHED_OTHER", true));
        assert!(parse_stat(b"garbage").is_none());
        assert_eq!(parse_schedstat("1234567 89 10\n"), Some(1234567));
        let sched = "w (50, #threads: 1)\n---\nse.exec_start : 1.0\next.enabled                                  :                    1\n";
        assert_eq!(parse_ext_enabled(sched), Some(true));
        assert_eq!(parse_ext_enabled(&sched.replace(" 1\n", " 0\n")), Some(false));
        assert_eq!(parse_ext_enabled("se.exec_start : 1.0\n"), None);
        assert_eq!(parse_tgid(&status_text(77)), Some(77));
        assert_eq!(parse_tgid("Name:\tx\nTgid:\t77\n"), None); // not a whole status
        assert_eq!(anon_kb("2000 1500 300 10 0 900 0\n", 4), Some(4800));
    }

    #[test]
    fn memory_classes() {
        let maps = "\
7f0000000000 default anon=100 dirty=100 N0=60 N1=40 kernelpagesize_kB=4
7f0000200000 default anon=10 dirty=10 mapmax=3 N1=10 kernelpagesize_kB=4
7f0000400000 default file=/usr/lib/libc.so.6 mapped=50 mapmax=9 N0=50 kernelpagesize_kB=4
7f0000600000 bind:1 anon=20 dirty=20 N1=20 kernelpagesize_kB=4
7f0000800000 default file=/anon_hugepage\\040(deleted) huge anon=2 dirty=2 N0=2 kernelpagesize_kB=2048
7f0000a00000 default
";
        let c = classes(maps, 2);
        assert_eq!(c.private, vec![240, 160]);
        assert_eq!(c.shared, vec![0, 40]);
        // the hugetlbfs mapping is a file mapping in numa_maps
        assert_eq!(c.file, vec![200 + 4096, 0]);
        assert_eq!(c.bound, vec![0, 80]);
        assert_eq!(c.movable, vec![240, 200]);
    }
}
