// SPDX-License-Identifier: GPL-2.0-only
//! The pids of /proc the memory agent samples, kept from pass to pass.
//!
//! Reading the /proc directory costs the kernel a lookup per process; with
//! a thousand pids it was most of an idle pass under TCG (docs/decisions.md,
//! "The memory agent's own cost"). So the directory is read again only when
//! it can have new entries: when the last pid allocated (/proc/loadavg,
//! field 5) moved since the last read (every new process takes a new pid),
//! and at least every LIST_EVERY passes (exits; a safety net). A process
//! that exits in between is found gone by the first read that fails.
//!
//! A pid without an address space (statm all zeros: a kernel thread, or a
//! process that exited and was not reaped yet) never gets memory to place:
//! one seen by a pass is marked and not visited again while its pid stays
//! listed and is not handed out anew. A pid counts as handed out anew when
//! it lies in the range the pid allocator went through since the last read
//! (it allocates upward from the last pid, wrapping): a process listed there
//! is treated as new (first listed now, no mark), which after a wrap also
//! catches some old processes, at the cost of one more visit each.
//!
//! Only when /proc/loadavg speaks of the pid namespace /proc lists (the
//! agent's own pid is /proc/self): otherwise the directory is read every
//! pass and nothing is marked.

/// Read the /proc directory at least every this many passes.
pub const LIST_EVERY: u64 = 10;

/// One pid listed in /proc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listed {
    pub pid: u32,
    /// the pass that first listed it
    pub first: u64,
    /// no address space (a kernel thread, a zombie): never visited again
    pub memoryless: bool,
}

/// The pids of the last /proc read, sorted, with what the passes learnt.
#[derive(Debug, Default)]
pub struct Roster {
    list: Vec<Listed>,
    /// the buffer of the next merge (no allocation per read)
    spare: Vec<Listed>,
    /// the last pid allocated, read just before the last directory read
    last_pid: Option<u32>,
    /// the pass of the last read (0: none yet)
    read_at: u64,
    /// /proc/loadavg and /proc count the same pid namespace
    trusted: bool,
}

/// Could `pid` have been handed out while the last allocated pid went from
/// `a` to `b`? Pids go upward from the last one and wrap to a low pid.
pub fn allocated_between(a: u32, b: u32, pid: u32) -> bool {
    if b >= a {
        pid > a && pid <= b
    } else {
        pid > a || pid <= b
    }
}

/// The last pid allocated, field 5 of /proc/loadavg ("0.00 0.01 0.05 1/123 4567").
pub fn parse_last_pid(loadavg: &str) -> Option<u32> {
    loadavg.split_ascii_whitespace().nth(4)?.parse().ok()
}

impl Roster {
    pub fn new(trusted: bool) -> Roster {
        Roster { trusted, ..Default::default() }
    }

    /// Must pass `scan` read the /proc directory, `last_pid` being the last
    /// pid allocated now?
    pub fn due(&self, last_pid: Option<u32>, scan: u64) -> bool {
        !self.trusted
            || self.read_at == 0
            || last_pid.is_none()
            || last_pid != self.last_pid
            || scan >= self.read_at + LIST_EVERY
    }

    /// A new read of /proc at pass `scan`: `pids` sorted and without
    /// duplicates, `last_pid` read before it. A pid kept from the last read
    /// keeps what was learnt about it unless it may have been handed out anew.
    pub fn update(&mut self, pids: &[u32], last_pid: Option<u32>, scan: u64) {
        let anew = |pid: u32| match (self.trusted, self.last_pid, last_pid) {
            (true, Some(a), Some(b)) => allocated_between(a, b, pid),
            _ => false,
        };
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        let mut old = self.list.iter().peekable();
        for &pid in pids {
            while old.next_if(|e| e.pid < pid).is_some() {}
            match old.next_if(|e| e.pid == pid) {
                Some(e) if !anew(pid) => out.push(*e),
                _ => out.push(Listed { pid, first: scan, memoryless: false }),
            }
        }
        self.spare = std::mem::replace(&mut self.list, out);
        self.last_pid = last_pid;
        self.read_at = scan;
    }

    pub fn list(&self) -> &[Listed] {
        &self.list
    }

    pub fn listed(&self, pid: u32) -> bool {
        self.get(pid).is_some()
    }

    pub fn get(&self, pid: u32) -> Option<&Listed> {
        self.list.binary_search_by_key(&pid, |e| e.pid).ok().map(|i| &self.list[i])
    }

    /// `pid` has no address space: pass it over from now on (not while the
    /// last pid is unknown: a pid handed out anew could not be told).
    pub fn mark_memoryless(&mut self, pid: u32) {
        if !self.trusted || self.last_pid.is_none() {
            return;
        }
        if let Ok(i) = self.list.binary_search_by_key(&pid, |e| e.pid) {
            self.list[i].memoryless = true;
        }
    }

    pub fn memoryless(&self) -> usize {
        self.list.iter().filter(|e| e.memoryless).count()
    }
}

/// Does /proc list the pid namespace the agent runs in (so /proc/loadavg's
/// last pid counts the pids /proc lists)?
pub fn same_namespace(me: u32) -> bool {
    std::fs::read_link("/proc/self").ok().and_then(|p| p.to_str().and_then(|s| s.parse().ok())) == Some(me)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(r: &Roster) -> Vec<u32> {
        r.list().iter().map(|e| e.pid).collect()
    }

    #[test]
    fn pid_ranges() {
        // upward, no wrap
        assert!(allocated_between(100, 105, 101) && allocated_between(100, 105, 105));
        assert!(!allocated_between(100, 105, 100) && !allocated_between(100, 105, 106));
        assert!(!allocated_between(100, 100, 100) && !allocated_between(100, 100, 5));
        // wrapped past pid_max to the low pids
        assert!(allocated_between(32760, 310, 32767) && allocated_between(32760, 310, 300));
        assert!(!allocated_between(32760, 310, 311) && !allocated_between(32760, 310, 32760));
        assert_eq!(parse_last_pid("0.00 0.01 0.05 1/123 4567\n"), Some(4567));
        assert_eq!(parse_last_pid("0.00 0.01"), None);
    }

    /// When the directory is read: at the first pass, when a pid was
    /// allocated, at least every LIST_EVERY passes; always when the pid
    /// counts cannot be trusted or read.
    #[test]
    fn reads_when_pids_can_be_new() {
        let mut r = Roster::new(true);
        assert!(r.due(Some(500), 1));
        r.update(&[1, 2, 400], Some(500), 1);
        assert!(!r.due(Some(500), 2) && !r.due(Some(500), LIST_EVERY));
        assert!(r.due(Some(500), 1 + LIST_EVERY));
        assert!(r.due(Some(501), 2));
        assert!(r.due(None, 2));
        let mut u = Roster::new(false);
        u.update(&[1], Some(500), 1);
        assert!(u.due(Some(500), 2));
    }

    /// A read keeps what was learnt about the pids that stayed, forgets the
    /// pids gone, and starts over for new pids and for pids handed out anew.
    #[test]
    fn merge_keeps_marks_of_the_same_processes() {
        let mut r = Roster::new(true);
        r.update(&[2, 3, 10, 500], Some(500), 1);
        r.mark_memoryless(2);
        r.mark_memoryless(10);
        r.mark_memoryless(7); // not listed: nothing
        assert_eq!(r.memoryless(), 2);
        assert!(r.listed(3) && !r.listed(7));
        // 3 exited; 501, 502 are new; 10 is the same kernel thread
        r.update(&[2, 10, 500, 501, 502], Some(502), 4);
        assert_eq!(pids(&r), vec![2, 10, 500, 501, 502]);
        assert_eq!(r.list()[0], Listed { pid: 2, first: 1, memoryless: true });
        assert_eq!(r.list()[1], Listed { pid: 10, first: 1, memoryless: true });
        assert_eq!(r.list()[3], Listed { pid: 501, first: 4, memoryless: false });
        // the allocator wrapped (pid_max) and handed out 2 again: another
        // process under that pid, no longer marked; 10 and the others stay
        r.update(&[2, 10, 500, 501, 502], Some(5), 5);
        assert_eq!(r.list()[0], Listed { pid: 2, first: 5, memoryless: false });
        assert_eq!(r.list()[1], Listed { pid: 10, first: 1, memoryless: true });
        assert_eq!(r.list()[4].first, 4);
        // an empty /proc read (cannot happen, but): nothing kept
        r.update(&[], Some(12), 6);
        assert!(r.list().is_empty());
    }

    /// Untrusted or unknown pid counts: nothing is marked (a pid handed out
    /// anew could not be told).
    #[test]
    fn untrusted_marks_nothing() {
        let mut r = Roster::new(false);
        r.update(&[2, 3], Some(9), 1);
        r.mark_memoryless(2);
        assert_eq!(r.memoryless(), 0);
        // /proc/loadavg unreadable at the last read: the same
        let mut r = Roster::new(true);
        r.update(&[2, 3], None, 1);
        r.mark_memoryless(2);
        assert_eq!(r.memoryless(), 0);
    }

    #[test]
    fn this_process_is_in_its_own_proc() {
        assert!(same_namespace(std::process::id()));
    }
}
