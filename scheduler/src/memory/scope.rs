// SPDX-License-Identifier: GPL-2.0-only
//! Scope: which processes, and which nodes of them, the memory agent may
//! touch. The rules a system service owes the machine it runs on.
//!
//! Left alone, never sampled, moved or bound (checked every interval, so a
//! process that changes is seen within one; each process is counted once
//! per cause):
//! - a process the administrator's lists leave out (`--memory-include`,
//!   `--memory-exclude`, rules `comm:NAME` or `cgroup:/PATH`; Rule, Scope):
//!   with include rules, only a process matching one of them is touched; a
//!   process matching an exclude rule never is (exclude wins). `comm:`
//!   matches the kernel's name exactly (15 bytes at most: a longer NAME is
//!   cut there, as the kernel cuts it); `cgroup:` matches the process's
//!   cgroup v2 path (/proc/PID/cgroup, line `0::`) and every cgroup below
//!   it. Stat memory_skip_rule.
//! - a process with locked memory (VmLck > 0 in /proc/PID/status: mlock(2),
//!   mlockall(2)): it asked for its pages to stay put. memory_skip_mlock.
//! - a process whose cpuset allows one node of the machine
//!   (Mems_allowed_list in /proc/PID/status): nothing to choose, and the
//!   kernel refuses a move elsewhere. memory_skip_cpuset. A cpuset with
//!   more nodes limits the targets: restrict() keeps a mapping's target
//!   within them (the kernel would refuse the whole move_pages call with
//!   EACCES); such a process is not bound with --memory-node-affinity.
//! - mappings with an explicit memory policy (numactl -m, mbind(2),
//!   set_mempolicy(2); plan.rs keeps them): counted once per process that
//!   has one, memory_skip_mempolicy.
//!
//! Identity: a process is (pid, start time) (field 22 of /proc/PID/stat).
//! When a pid comes back with another start time, everything the agent
//! kept about the old process (its samples, cursors, back-offs, home node,
//! the node it bound it to) is dropped before anything is done to the new
//! one (memory_pid_reused). The start time is read again before each
//! mapping the mover moves, and before a process not sampled in the same
//! pass is bound to a node or re-armed (Placer::still_same()), so a pid
//! reused in between is not touched.
//!
//! Failures: move_pages(2) pages refused are counted per cause
//! (memory_fail_eacces, _enomem, _ebusy, _other); a mapping where any
//! page failed is not tried again for backoff_scans() intervals, doubling
//! with every failure up to BACKOFF_MAX_SCANS, and forgotten once it moves
//! cleanly (memory_backoffs counts the mappings passed over).
//!
//! Status is read by hand (parse_status(): decisions.md, "/proc/PID/status
//! by hand").

use std::collections::HashMap;
use std::str::FromStr;

use std::sync::Arc;

use super::plan::{Mixed, Target, Vma};

/// The kernel's longest comm (TASK_COMM_LEN less the NUL).
pub const COMM_LEN: usize = 15;

/// One `--memory-include` / `--memory-exclude` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// the process's name, escaped as comm::escape() does
    Comm(String),
    /// a cgroup v2 path, "/" or without a trailing '/'
    Cgroup(String),
}

impl FromStr for Rule {
    type Err = String;

    fn from_str(s: &str) -> Result<Rule, String> {
        if let Some(name) = s.strip_prefix("comm:") {
            if name.is_empty() {
                return Err("comm: needs a name".into());
            }
            let b = name.as_bytes();
            return Ok(Rule::Comm(crate::comm::escape(&b[..b.len().min(COMM_LEN)])));
        }
        if let Some(path) = s.strip_prefix("cgroup:") {
            if !path.starts_with('/') {
                return Err(format!("{path:?}: a cgroup path starts with '/' (as in /proc/PID/cgroup)"));
            }
            let p = path.trim_end_matches('/');
            return Ok(Rule::Cgroup(if p.is_empty() { "/".into() } else { p.into() }));
        }
        Err(format!("{s:?}: expected comm:NAME or cgroup:/PATH"))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Rule::Comm(n) => write!(f, "comm:{n}"),
            Rule::Cgroup(p) => write!(f, "cgroup:{}", crate::comm::printable(p)),
        }
    }
}

impl Rule {
    pub fn matches(&self, comm: &str, cgroup: Option<&str>) -> bool {
        match self {
            Rule::Comm(n) => n == comm,
            Rule::Cgroup(p) => cgroup.is_some_and(|c| {
                p == "/" || c == p || c.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with('/'))
            }),
        }
    }
}

/// The administrator's lists.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub include: Vec<Rule>,
    pub exclude: Vec<Rule>,
}

impl Scope {
    /// The lists in words (for the start-up log), None if there are none.
    pub fn describe(&self) -> Option<String> {
        let list = |v: &[Rule]| v.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        match (self.include.is_empty(), self.exclude.is_empty()) {
            (true, true) => None,
            (false, true) => Some(format!("only processes matching {}", list(&self.include))),
            (true, false) => Some(format!("never processes matching {}", list(&self.exclude))),
            (false, false) => Some(format!(
                "only processes matching {}, never those matching {}",
                list(&self.include),
                list(&self.exclude)
            )),
        }
    }

    /// Whether the cgroup of a process must be read to decide.
    pub fn needs_cgroup(&self) -> bool {
        self.include.iter().chain(&self.exclude).any(|r| matches!(r, Rule::Cgroup(_)))
    }

    /// May the agent touch a process with this name and cgroup?
    pub fn allows(&self, comm: &str, cgroup: Option<&str>) -> bool {
        (self.include.is_empty() || self.include.iter().any(|r| r.matches(comm, cgroup)))
            && !self.exclude.iter().any(|r| r.matches(comm, cgroup))
    }
}

/// Why a process is left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    Rule,
    Mlock,
    Cpuset,
}

impl Skip {
    pub fn name(self) -> &'static str {
        match self {
            Skip::Rule => "--memory-include/--memory-exclude",
            Skip::Mlock => "locked memory (VmLck)",
            Skip::Cpuset => "cpuset allows one node",
        }
    }
}

/// The cgroup v2 path in the text of /proc/PID/cgroup (its `0::` line).
pub fn cgroup_v2_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::trim_end)
}

/// What the rules need of /proc/PID/status: the ranges of
/// Mems_allowed_list (None if it is not shown) and VmLck in kB (0 if not
/// shown). By hand: procfs's Status parses every line into a map, three
/// times the CPU time per read (decisions.md).
pub fn parse_status(text: &str) -> (Option<Vec<(u32, u32)>>, u64) {
    let (mut mems, mut lck) = (None, 0);
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("VmLck:") {
            lck = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("Mems_allowed_list:") {
            mems = Some(
                v.trim()
                    .split(',')
                    .filter_map(|r| {
                        let (a, b) = r.split_once('-').unwrap_or((r, r));
                        Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
                    })
                    .collect(),
            );
        }
    }
    (mems, lck)
}

/// The nodes of a Mems_allowed_list (ranges), as a mask over the machine's
/// nodes; None (not shown): every node.
pub fn mems_mask(ranges: Option<&[(u32, u32)]>, nr_nodes: usize) -> Vec<bool> {
    let Some(ranges) = ranges else { return vec![true; nr_nodes] };
    let mut m = vec![false; nr_nodes];
    for &(a, b) in ranges {
        for n in a..=b.min(nr_nodes.saturating_sub(1) as u32) {
            m[n as usize] = true;
        }
    }
    m
}

/// The rule on what /proc/PID/status says: locked memory first, then a
/// cpuset of one node (or none of the machine's).
pub fn status_skip(mems: &[bool], vmlck_kb: u64) -> Option<Skip> {
    if vmlck_kb > 0 {
        Some(Skip::Mlock)
    } else if mems.iter().filter(|&&m| m).count() <= 1 {
        Some(Skip::Cpuset)
    } else {
        None
    }
}

/// A mapping's target kept within the process's cpuset nodes; None: leave
/// the mapping (nothing to do, or its only target is outside).
pub fn restrict(target: &Target, mems: &[bool]) -> Option<Target> {
    let ok = |n: usize| mems.get(n).copied().unwrap_or(false);
    match target {
        Target::Keep => None,
        Target::Node(n) => ok(*n).then_some(Target::Node(*n)),
        Target::Mixed(m) => {
            // private chunks bound for a node outside stay; shared pages go
            // only to allowed nodes
            let private = m.private.iter().filter(|(_, &n)| ok(n)).map(|(&c, &n)| (c, n)).collect();
            let mut shared = (*m.shared).clone();
            shared.take.retain(|&n| ok(n));
            Some(Target::Mixed(Box::new(Mixed { private, hold: m.hold.clone(), lean: m.lean.clone(), shared: Arc::new(shared) })))
        }
    }
}

/// An anonymous mapping with resident pages under an explicit memory
/// policy (numa_maps shows bind, interleave, prefer...): the
/// application's word, left where it is.
pub fn explicit_policy(v: &Vma) -> bool {
    !v.default_policy && !v.file && v.anon > 0 && v.total() > 0
}

/// Longest wait, in intervals, before a mapping that failed is tried again.
pub const BACKOFF_MAX_SCANS: u64 = 64;

/// Intervals to wait after the `failures`-th failure in a row: 2, 4, 8 ...
/// up to BACKOFF_MAX_SCANS.
pub fn backoff_scans(failures: u32) -> u64 {
    (1u64 << failures.min(12)).min(BACKOFF_MAX_SCANS)
}

/// A process: pid and start time (clock ticks after boot).
pub type Ident = (u32, u64);

/// Mappings whose move failed: (process, mapping start) -> (failures in a
/// row, first scan it may be tried again).
#[derive(Debug, Default)]
pub struct Backoff {
    map: HashMap<(Ident, u64), (u32, u64)>,
}

impl Backoff {
    /// May this mapping be tried at `scan`?
    pub fn due(&self, id: Ident, vma: u64, scan: u64) -> bool {
        self.map.get(&(id, vma)).is_none_or(|&(_, until)| scan >= until)
    }

    /// A try at `scan` had failures.
    pub fn failed(&mut self, id: Ident, vma: u64, scan: u64) {
        let e = self.map.entry((id, vma)).or_insert((0, 0));
        e.0 += 1;
        e.1 = scan + backoff_scans(e.0);
    }

    /// A try went through: forget the mapping.
    pub fn ok(&mut self, id: Ident, vma: u64) {
        self.map.remove(&(id, vma));
    }

    /// Keep only the processes `live` holds.
    pub fn retain(&mut self, live: impl Fn(Ident) -> bool) {
        self.map.retain(|(id, _), _| live(*id));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// The start time of `pid` (field 22 of /proc/PID/stat); None if it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    use procfs::FromRead;
    procfs::process::Stat::from_file(format!("/proc/{pid}/stat")).ok().map(|s| s.starttime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> Rule {
        s.parse().unwrap()
    }

    #[test]
    fn rules_parse() {
        assert_eq!(rule("comm:memlocal"), Rule::Comm("memlocal".into()));
        assert_eq!(rule("cgroup:/system.slice/"), Rule::Cgroup("/system.slice".into()));
        assert_eq!(rule("cgroup:/"), Rule::Cgroup("/".into()));
        // a name longer than the kernel keeps is cut as the kernel cuts it
        assert_eq!(rule("comm:a_very_long_program_name"), Rule::Comm("a_very_long_pro".into()));
        // control characters in a rule compare with the escaped name
        assert_eq!(rule("comm:a\nb"), Rule::Comm("a\\x0ab".into()));
        for bad in ["memlocal", "comm:", "cgroup:system.slice", "pid:1", ""] {
            assert!(bad.parse::<Rule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cgroup_rules_match_the_subtree() {
        let r = rule("cgroup:/system.slice");
        assert!(r.matches("x", Some("/system.slice")));
        assert!(r.matches("x", Some("/system.slice/cron.service")));
        assert!(!r.matches("x", Some("/system.slices")));
        assert!(!r.matches("x", Some("/user.slice")));
        assert!(!r.matches("x", None));
        assert!(rule("cgroup:/").matches("x", Some("/a/b")));
        assert!(rule("comm:jbb").matches("jbb", None));
        assert!(!rule("comm:jbb").matches("jbb2", None));
    }

    #[test]
    fn include_and_exclude() {
        let all = Scope::default();
        assert_eq!(all.describe(), None);
        assert!(all.allows("anything", None));
        assert!(!all.needs_cgroup());
        let s = Scope { include: vec![rule("cgroup:/work")], exclude: vec![rule("comm:backup")] };
        assert!(s.needs_cgroup());
        assert_eq!(s.describe().unwrap(), "only processes matching cgroup:/work, never those matching comm:backup");
        assert!(s.allows("db", Some("/work/db")));
        assert!(!s.allows("db", Some("/user.slice")));
        // exclude wins over include
        assert!(!s.allows("backup", Some("/work/db")));
        let ex = Scope { include: vec![], exclude: vec![rule("comm:backup"), rule("cgroup:/batch")] };
        assert!(ex.allows("db", Some("/work")));
        assert!(!ex.allows("db", Some("/batch/x")));
        assert!(!ex.allows("backup", None));
    }

    #[test]
    fn cgroup_file() {
        assert_eq!(cgroup_v2_path("0::/system.slice/x.service\n"), Some("/system.slice/x.service"));
        // hybrid hierarchy: the v2 line among v1 ones
        assert_eq!(cgroup_v2_path("12:cpuset:/\n0::/user.slice\n"), Some("/user.slice"));
        assert_eq!(cgroup_v2_path("4:memory:/docker/abc\n"), None);
    }

    #[test]
    fn status_fields() {
        let t = "Name:\tmemlocal\nVmPeak:\t  1000 kB\nVmLck:\t       8 kB\nCpus_allowed_list:\t0-3\n\
                 Mems_allowed:\t00000000,00000002\nMems_allowed_list:\t1\nvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_status(t), (Some(vec![(1, 1)]), 8));
        let t = "VmLck:\t       0 kB\nMems_allowed_list:\t0-1,3,5-6\n";
        assert_eq!(parse_status(t), (Some(vec![(0, 1), (3, 3), (5, 6)]), 0));
        // a kernel thread shows no VmLck; a kernel without cpusets no list
        assert_eq!(parse_status("Name:\tkthreadd\n"), (None, 0));
        // the real file of this process
        let (mems, lck) = parse_status(&std::fs::read_to_string("/proc/self/status").unwrap());
        assert!(mems.is_some_and(|m| !m.is_empty()));
        let st = procfs::process::Process::myself().unwrap().status().unwrap();
        assert_eq!(lck, st.vmlck.unwrap_or(0));
    }

    #[test]
    fn status_rules() {
        assert_eq!(mems_mask(Some(&[(1, 1)]), 2), vec![false, true]);
        assert_eq!(mems_mask(Some(&[(0, 1), (3, 3)]), 4), vec![true, true, false, true]);
        assert_eq!(mems_mask(None, 2), vec![true, true]);
        // nodes beyond the machine's are ignored (a list of possible nodes)
        assert_eq!(mems_mask(Some(&[(0, 63)]), 2), vec![true, true]);
        assert_eq!(status_skip(&[true, true], 0), None);
        assert_eq!(status_skip(&[false, true], 0), Some(Skip::Cpuset));
        assert_eq!(status_skip(&[false, false], 0), Some(Skip::Cpuset));
        assert_eq!(status_skip(&[true, true], 4), Some(Skip::Mlock));
        assert_eq!(status_skip(&[true, false], 4), Some(Skip::Mlock));
        assert_eq!(status_skip(&[true, true, false, false], 0), None);
    }

    #[test]
    fn targets_stay_in_the_cpuset() {
        let m = [true, true, false, false];
        assert_eq!(restrict(&Target::Node(1), &m), Some(Target::Node(1)));
        assert_eq!(restrict(&Target::Node(2), &m), None);
        use super::super::evidence::SharedPlan;
        // by chunk: a private chunk bound outside stays, shared pages go only inside
        let shared = Arc::new(SharedPlan::new(&[0, 0, 100, 0], &[true, true, true, false]));
        let mixed = Target::Mixed(Box::new(Mixed {
            private: HashMap::from([(1, 2), (2, 0)]),
            hold: Default::default(),
            lean: HashMap::from([(3, 1)]),
            shared,
        }));
        let Some(Target::Mixed(r)) = restrict(&mixed, &m) else { panic!() };
        assert_eq!(r.private, HashMap::from([(2, 0)]));
        assert_eq!(r.lean, HashMap::from([(3, 1)]));
        assert_eq!(r.shared.take, vec![0, 1]);
        let none = restrict(&mixed, &[false, false, true, false]).unwrap();
        assert_eq!(none.want(1 << 21, 2), None);
        assert_eq!(restrict(&Target::Keep, &m), None);
    }

    #[test]
    fn bound_mappings() {
        use super::super::plan::parse_numa_maps_line as line;
        let v = |s: &str| explicit_policy(&line(s).unwrap());
        assert!(v("7f0000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4"));
        assert!(v("7f0000000000 interleave:0-1 anon=2 N0=1 N1=1"));
        assert!(v("7f0000000000 prefer:1 anon=2 N1=2"));
        assert!(!v("7f0000000000 default anon=2 N1=2"));
        assert!(!v("7f0000000000 local anon=2 N1=2"));
        // files, and nothing resident, are not counted
        assert!(!v("7f0000000000 bind:1 file=/usr/lib/libc.so.6 mapped=3 N1=3"));
        assert!(!v("7f0000000000 bind:1"));
    }

    #[test]
    fn failed_mappings_back_off() {
        assert_eq!((backoff_scans(1), backoff_scans(2), backoff_scans(3)), (2, 4, 8));
        assert_eq!(backoff_scans(6), BACKOFF_MAX_SCANS);
        assert_eq!(backoff_scans(40), BACKOFF_MAX_SCANS);
        let mut b = Backoff::default();
        let (p, q) = ((7, 100), (7, 200)); // one pid, two start times
        assert!(b.due(p, 0x1000, 10));
        b.failed(p, 0x1000, 10);
        assert!(!b.due(p, 0x1000, 11));
        assert!(b.due(p, 0x1000, 12));
        // the next failure doubles the wait
        b.failed(p, 0x1000, 12);
        assert!(!b.due(p, 0x1000, 15) && b.due(p, 0x1000, 16));
        // other mappings and a reused pid are not held back
        assert!(b.due(p, 0x2000, 11) && b.due(q, 0x1000, 11));
        b.ok(p, 0x1000);
        assert!(b.due(p, 0x1000, 13));
        b.failed(p, 0x1000, 20);
        b.failed(q, 0x1000, 20);
        b.retain(|id| id == q);
        assert_eq!(b.len(), 1);
        assert!(b.due(p, 0x1000, 21) && !b.due(q, 0x1000, 21));
    }

    #[test]
    fn start_time_of_this_process() {
        let me = std::process::id();
        let t = start_time(me).expect("own stat");
        assert_eq!(start_time(me), Some(t));
        let ours = procfs::process::Process::myself().unwrap().stat().unwrap().starttime;
        assert_eq!(t, ours);
    }
}
