// SPDX-License-Identifier: GPL-2.0-only
//! Private or shared: which threads, on which nodes, write each 2 MB chunk
//! of a process's memory, for processes whose threads run on several nodes.
//!
//! Idea (van Riel 2014, seed 003): keep each thread's private memory on its
//! node, spread shared memory over the nodes the process runs on. The kernel
//! learns which is which from NUMA hinting faults: a page whose last two
//! faults came from one task is private, otherwise shared. sched_ext tasks
//! take no hinting faults, so the agent makes write faults instead:
//! writing 4 to /proc/PID/clear_refs write-protects the process's pages
//! (soft-dirty tracking), the next write to each page faults once, and
//! memory.bpf.c counts those faults per (process, chunk, thread, node of
//! the faulting CPU). This file arms the processes, drains the counts every
//! pass and, at the end of each window between two armings, notes per
//! chunk who wrote it in that window (one thread and its node, several
//! threads, or nobody), and adds each writing thread's share of the window
//! to a history that decays by DECAY per window with writes (the kernel
//! decays its NUMA fault statistics the same way). Then, with the kernel's
//! two-stage filter (a page is private only when its last two faults agree)
//! in place of its per-page last-fault record:
//! - written by the same thread from the same node in its last two windows
//!   with writes, that thread holding PRIVATE_SHARE of a history of at
//!   least PRIVATE_WINDOWS windows: private to that node;
//! - written by several threads in a window, or by threads taking turns
//!   (no thread holds PRIVATE_SHARE of the history): shared. This is how a
//!   chunk backed by a transparent huge page looks when several threads
//!   write it: it takes one fault per window, from whichever thread writes
//!   it first after the arming, a race that the threads running at that
//!   moment win, so it must not be read as one node's. A new writer taking
//!   over a chunk looks the same until it holds PRIVATE_SHARE;
//! - anything else is settling, left where it is: too few windows yet, or
//!   the thread that holds the history just moved node. Moving it now would
//!   be the ping-pong the filter exists to stop;
//! - never written (no evidence): shared. Spreading is the safe answer for
//!   memory of unknown use in a process that spans nodes; concentrating it
//!   (what the placement did before, from where pages sat) starves the
//!   other nodes' threads of bandwidth.
//!
//! Shared memory is then balanced over the active nodes
//! (`SharedPlan`): only a node holding more than BALANCE_SLACK times its
//! even share gives pages away, just enough of them, to the nodes below
//! their share, so memory already spread stays where it is. Of the chunks
//! picked to go, one written mostly from the node it sits on stays (so a
//! node may give less than its surplus: slower balance, no ping-pong), and
//! one written mostly from a receiving node goes there (the kernel moves a
//! shared page towards the node that faults on it).
//!
//! Re-arming costs one fault per written page, so its period adapts as the
//! kernel's NUMA scan period does: every pass at first, doubling (up to
//! ARM_MAX_PASSES) while a pass finds nothing to move, back to every pass
//! when the process's active nodes change. A chunk not written for
//! FORGET_WINDOWS windows is forgotten.
//!
//! What it cannot see: reads (read-mostly private data counts as shared),
//! how often each thread writes a page (one fault per page per window), and
//! memory written by a process before it was first armed. clear_refs clears
//! the process's soft-dirty bits, which a checkpointing tool (CRIU)
//! tracking the same process would rely on.
//!
//! No knob of its own: it is how `--memory=spread` tells private from
//! shared. Stats: per process (memory_procs) private_chunks, shared_chunks.

use std::cell::RefCell;
use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::bpf_intf;

/// A thread (or node) that took less than this share of a window's faults
/// in a chunk did not write it in that window (a straggler).
pub const WRITER_SHARE: f32 = 0.1;
/// Per window with writes, a chunk's history of writers keeps this much of
/// what it was: about the last five windows count.
pub const DECAY: f32 = 0.8;
/// A chunk is private only when one thread holds this share of its
/// history of writers,
pub const PRIVATE_SHARE: f32 = 0.8;
/// and the history holds at least this many windows with writes (two
/// windows agree by chance when threads race for a huge page's one fault).
pub const PRIVATE_WINDOWS: u8 = 4;
/// Windows without writes after which a chunk's evidence is dropped.
pub const FORGET_WINDOWS: u8 = 8;
/// A node holding more than this times its even share of the shared
/// memory gives the surplus away.
pub const BALANCE_SLACK: f64 = 1.25;
/// Longest re-arm period, in passes.
pub const ARM_MAX_PASSES: u64 = 32;
pub const CHUNK_SHIFT: u32 = bpf_intf::locality_consts_MEM_CHUNK_SHIFT;

/// What a chunk is used as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Use {
    Private(usize),
    Shared,
    /// changing hands: left where it is
    Settling,
}

/// Who wrote a chunk in one window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Writers {
    #[default]
    None,
    /// one thread, from CPUs of this node (most of its faults)
    One { thread: u32, node: usize },
    Several,
}

/// One window's faults in a chunk: (thread, node, faults).
pub type Window = Vec<(u32, usize, f32)>;

/// Each writer's share of a window's faults, by thread or by node: a
/// writer under WRITER_SHARE (a straggler) is left out, and the shares of
/// the others add up to 1.
fn writer_shares<K: std::hash::Hash + Eq>(faults: impl Iterator<Item = (K, f32)>) -> HashMap<K, f32> {
    let mut by: HashMap<K, f32> = HashMap::new();
    for (k, f) in faults {
        *by.entry(k).or_default() += f;
    }
    let total: f32 = by.values().sum();
    by.retain(|_, f| total > 0.0 && *f >= WRITER_SHARE * total);
    let kept: f32 = by.values().sum();
    by.values_mut().for_each(|f| *f /= kept);
    by
}

/// Who wrote it, from one window's faults and its writers' shares by thread.
fn writers_of(w: &[(u32, usize, f32)], threads: &HashMap<u32, f32>) -> Writers {
    let mut it = threads.keys();
    match (it.next(), it.next()) {
        (None, _) => Writers::None,
        (Some(&thread), None) => {
            let nodes = writer_shares(w.iter().filter(|x| x.0 == thread).map(|x| (x.1, x.2)));
            // the node with most of its faults (the lower one on a tie)
            let node = nodes.into_iter().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0))).map_or(0, |x| x.0);
            Writers::One { thread, node }
        }
        _ => Writers::Several,
    }
}

/// One chunk's evidence: this window's faults, who wrote it in the last
/// two windows that had writes, and the decayed history of its writers,
/// per thread and per node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    pub window: Window,
    pub last: Writers,
    pub before: Writers,
    pub threads: HashMap<u32, f32>,
    pub nodes: Vec<f32>,
    /// windows with writes so far (saturating)
    pub windows: u8,
    /// windows since the last one with writes
    pub idle: u8,
}

impl Chunk {
    /// The chunk's use: the two-stage filter, on a history. Private memory
    /// follows its writer even to a node outside the process's active set,
    /// as the kernel always migrates on a private fault; only shared memory
    /// is bound to the active nodes.
    pub fn use_now(&self) -> Use {
        // the thread holding most of the history, and its share
        let total: f32 = self.threads.values().sum();
        let (top, most) = self.threads.iter().fold((0, 0.0), |a, (&t, &h)| if h > a.1 { (t, h) } else { a });
        let held = total > 0.0 && most >= PRIVATE_SHARE * total;
        match (self.last, self.before) {
            (Writers::None, _) => Use::Shared,
            (Writers::Several, _) | (_, Writers::Several) => Use::Shared,
            (Writers::One { thread: t, node: n }, Writers::One { thread: u, node: m }) => {
                if t == u && n == m && held && top == t && self.windows >= PRIVATE_WINDOWS {
                    Use::Private(n)
                } else if !held {
                    // threads taking turns
                    Use::Shared
                } else {
                    Use::Settling
                }
            }
            (Writers::One { .. }, Writers::None) => Use::Settling,
        }
    }

    /// The node that wrote most of it, once two windows had writes.
    pub fn lean(&self) -> Option<usize> {
        if self.windows < 2 {
            return None;
        }
        let total: f32 = self.nodes.iter().sum();
        (0..self.nodes.len()).find(|&n| self.nodes[n] > 0.5 * total)
    }

    /// End of a window: note who wrote it, and add each writer's share of
    /// the window to the history.
    fn close_window(&mut self, nr_nodes: usize) {
        self.window.retain(|x| x.1 < nr_nodes);
        let threads = writer_shares(self.window.iter().map(|x| (x.0, x.2)));
        let w = writers_of(&self.window, &threads);
        if w != Writers::None {
            self.threads.values_mut().for_each(|h| *h *= DECAY);
            for (t, f) in threads {
                *self.threads.entry(t).or_default() += f;
            }
            // a thread gone from the history (under 1% of one window) is dropped
            self.threads.retain(|_, h| *h >= 0.01);
            let nodes = writer_shares(self.window.iter().map(|x| (x.1, x.2)));
            self.nodes.resize(nr_nodes, 0.0);
            for (n, h) in self.nodes.iter_mut().enumerate() {
                *h = *h * DECAY + nodes.get(&n).copied().unwrap_or(0.0);
            }
        }
        self.window.clear();
        if w == Writers::None {
            self.idle = self.idle.saturating_add(1);
        } else {
            self.before = self.last;
            self.last = w;
            self.idle = 0;
            self.windows = self.windows.saturating_add(1);
        }
    }
}

/// How the shared pages of one process move between its active nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedPlan {
    /// active nodes
    pub act: Vec<usize>,
    /// per node: the share of its shared pages to give away (0 keeps all)
    pub give: Vec<f64>,
    /// the active nodes below their even share, which receive
    pub take: Vec<usize>,
}

impl SharedPlan {
    /// From the shared pages per node: pages on inactive nodes go, and an
    /// active node above BALANCE_SLACK x its even share gives its surplus
    /// over the even share.
    pub fn new(pages: &[u64], active: &[bool]) -> SharedPlan {
        let act: Vec<usize> = (0..active.len()).filter(|&n| active[n]).collect();
        let total: u64 = pages.iter().sum();
        let mut give = vec![0.0; pages.len().max(active.len())];
        if act.is_empty() || total == 0 {
            return SharedPlan { act, give, take: vec![] };
        }
        let even = total as f64 / act.len() as f64;
        let on = |n: usize| pages.get(n).copied().unwrap_or(0) as f64;
        for (n, g) in give.iter_mut().enumerate() {
            let here = on(n);
            if !active.get(n).copied().unwrap_or(false) {
                *g = 1.0;
            } else if here > BALANCE_SLACK * even {
                *g = (here - even) / here;
            }
        }
        let mut take: Vec<usize> = act.iter().copied().filter(|&n| on(n) < even).collect();
        if take.is_empty() {
            // only inactive nodes hold too much: spread over every active node
            take = act.clone();
        }
        SharedPlan { act, give, take }
    }

    /// Where a shared page of `chunk` (address >> CHUNK_SHIFT), now on node
    /// `cur` and written mostly from `lean` (if known), should go. Whole chunks
    /// are picked, by a hash of the chunk, so that a transparent huge page is
    /// never asked to go two ways and the same chunks are picked pass after
    /// pass. Of the chunks picked, one written mostly from where it sits
    /// stays (unless that node is inactive), and one written mostly from a
    /// receiving node goes there.
    pub fn want(&self, chunk: u64, cur: usize, lean: Option<usize>) -> Option<usize> {
        let g = self.give.get(cur).copied().unwrap_or(1.0);
        if g <= 0.0 || self.take.is_empty() || pick(chunk) >= g || (lean == Some(cur) && self.act.contains(&cur)) {
            return None;
        }
        let to = match lean {
            Some(l) if self.take.contains(&l) => l,
            _ => self.take[(chunk % self.take.len() as u64) as usize],
        };
        (to != cur).then_some(to)
    }
}

/// A fixed pseudo-random number in [0, 1) for a chunk.
fn pick(chunk: u64) -> f64 {
    (chunk.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) as f64 / (1u64 << 53) as f64
}

/// What the agent knows of one process's chunks.
#[derive(Debug, Default)]
pub struct Evidence {
    /// by chunk (address >> CHUNK_SHIFT)
    pub chunks: HashMap<u64, Chunk>,
    /// pass of the first arming (evidence is complete one pass later)
    pub first_armed: Option<u64>,
    /// pass of the next re-arm, and the current period in passes
    pub next_arm: u64,
    pub period: u64,
    /// the nodes shared memory may sit on: the process's active nodes, a
    /// node kept for ACTIVE_STICKY passes after it left the active set
    pub active: Vec<bool>,
    /// per node, passes it stays in `active` without runtime there
    sticky: Vec<u64>,
}

/// Passes a node stays among the nodes shared memory may sit on after it
/// left the process's active set: a thread's move between nodes shifts the
/// runtime-based active set for a pass or two, and a node that holds shared
/// memory must not be emptied for that.
pub const ACTIVE_STICKY: u64 = 3;

impl Evidence {
    /// True when a pass has ended since the first arming.
    pub fn ready(&self, scan: u64) -> bool {
        self.first_armed.is_some_and(|a| scan > a)
    }

    /// Takes this pass's active nodes; re-arm due at this pass (at once
    /// when the nodes shared memory may sit on changed)? Closes the window
    /// when it is.
    pub fn arm_due(&mut self, scan: u64, active: &[bool]) -> bool {
        self.sticky.resize(active.len(), 0);
        for (t, &a) in self.sticky.iter_mut().zip(active) {
            *t = if a { ACTIVE_STICKY } else { t.saturating_sub(1) };
        }
        let now: Vec<bool> = self.sticky.iter().map(|&t| t > 0).collect();
        if self.active != now {
            self.active = now;
            self.period = 1;
        } else if self.first_armed.is_some() && scan < self.next_arm {
            return false;
        }
        self.first_armed.get_or_insert(scan);
        self.period = self.period.clamp(1, ARM_MAX_PASSES);
        self.next_arm = scan + self.period;
        let nr_nodes = active.len();
        self.chunks.retain(|_, c| {
            c.close_window(nr_nodes);
            c.idle < FORGET_WINDOWS
        });
        true
    }

    /// A pass planned nothing to move: re-arm less often. Something moved,
    /// or the active nodes changed: every pass again.
    pub fn settle(&mut self, idle: bool) {
        self.period = if idle { (self.period * 2).clamp(1, ARM_MAX_PASSES) } else { 1 };
    }

    /// `faults` write faults of `thread` in `chunk`, from CPUs of `node`.
    pub fn add(&mut self, chunk: u64, thread: u32, node: usize, faults: u64) {
        let c = self.chunks.entry(chunk).or_default();
        match c.window.iter_mut().find(|x| x.0 == thread && x.1 == node) {
            Some(x) => x.2 += faults as f32,
            None => c.window.push((thread, node, faults as f32)),
        }
    }

    /// Written chunks by use: (private, shared, settling).
    pub fn counts(&self) -> (u64, u64, u64) {
        let mut n = (0, 0, 0);
        for c in self.chunks.values().filter(|c| c.last != Writers::None) {
            match c.use_now() {
                Use::Private(_) => n.0 += 1,
                Use::Shared => n.1 += 1,
                Use::Settling => n.2 += 1,
            }
        }
        n
    }

    /// The node that wrote a chunk most (Chunk::lean).
    pub fn lean(&self, chunk: u64) -> Option<usize> {
        self.chunks.get(&chunk).and_then(|c| c.lean())
    }

    pub fn use_of(&self, chunk: u64) -> Use {
        self.chunks.get(&chunk).map(|c| c.use_now()).unwrap_or(Use::Shared)
    }
}

/// Write-protect a process's pages so that its next writes fault.
pub fn arm(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "4")
}

/// The BPF maps of memory.bpf.c. The counts stay in the map and only grow
/// (an update of an existing key is one atomic add in BPF, an insert takes
/// the map's locks): each drain reads them all and keeps the difference.
pub struct Maps {
    pub watch: MapHandle,
    pub faults: MapHandle,
    /// the count of each key at the last drain
    seen: RefCell<HashMap<Key, u64>>,
}

/// A mem_faults key as the map returns it.
type Key = [u8; KEY_SIZE];
const KEY_SIZE: usize = std::mem::size_of::<bpf_intf::mem_fault_key>();

/// Write faults of one thread in one chunk from CPUs of one node, since
/// the last drain.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    pub tgid: u32,
    pub chunk: u64,
    pub thread: u32,
    pub node: usize,
    pub n: u64,
}

/// (tgid, chunk, thread, node) of a mem_faults key.
fn key_fields(k: &Key) -> (u32, u64, u32, usize) {
    let u32_at = |o: usize| u32::from_ne_bytes(k[o..o + 4].try_into().unwrap());
    let chunk = u64::from_ne_bytes(k[8..16].try_into().unwrap());
    (u32_at(0), chunk, u32_at(16), u32_at(4) as usize)
}

/// Faults since the last read: the rise of each count (a count below the
/// last one is a key evicted and inserted again: all of it is new).
pub fn rises(now: &[(Key, u64)], seen: &HashMap<Key, u64>) -> Vec<Faults> {
    now.iter()
        .filter_map(|(k, n)| {
            let before = seen.get(k).copied().filter(|&b| b <= *n).unwrap_or(0);
            let (tgid, chunk, thread, node) = key_fields(k);
            (*n > before).then_some(Faults { tgid, chunk, thread, node, n: n - before })
        })
        .collect()
}

impl Maps {
    pub fn new(watch: MapHandle, faults: MapHandle) -> Maps {
        Maps { watch, faults, seen: RefCell::new(HashMap::new()) }
    }

    /// Count (or stop counting, and drop the counts of) this process.
    pub fn watch(&self, pid: u32, on: bool) {
        let key = pid.to_ne_bytes();
        if on {
            let _ = self.watch.update(&key, &[1u8], MapFlags::ANY);
            return;
        }
        let _ = self.watch.delete(&key);
        self.seen.borrow_mut().retain(|k, _| {
            let mine = key_fields(k).0 == pid;
            if mine {
                let _ = self.faults.delete(k);
            }
            !mine
        });
    }

    /// Every fault since the last drain.
    pub fn drain(&self) -> Vec<Faults> {
        let Ok(it) = self.faults.lookup_batch(1024, MapFlags::ANY, MapFlags::ANY) else {
            return vec![];
        };
        let now: Vec<(Key, u64)> = it
            .filter_map(|(k, v)| Some((k.get(0..KEY_SIZE)?.try_into().ok()?, u64::from_ne_bytes(v.get(0..8)?.try_into().ok()?))))
            .collect();
        let mut seen = self.seen.borrow_mut();
        let out = rises(&now, &seen);
        *seen = now.into_iter().collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_layout_matches_the_bpf_side() {
        assert_eq!(KEY_SIZE, 24);
        assert_eq!(std::mem::offset_of!(bpf_intf::mem_fault_key, node), 4);
        assert_eq!(std::mem::offset_of!(bpf_intf::mem_fault_key, chunk), 8);
        assert_eq!(std::mem::offset_of!(bpf_intf::mem_fault_key, tid), 16);
    }

    #[test]
    fn drains_keep_the_rise_of_each_count() {
        let key = |tgid: u32, node: u32, chunk: u64| {
            let mut k = [0u8; KEY_SIZE];
            k[0..4].copy_from_slice(&tgid.to_ne_bytes());
            k[4..8].copy_from_slice(&node.to_ne_bytes());
            k[8..16].copy_from_slice(&chunk.to_ne_bytes());
            k[16..20].copy_from_slice(&(tgid + 1).to_ne_bytes());
            k
        };
        let f = |tgid: u32, chunk: u64, node: usize, n: u64| Faults { tgid, chunk, thread: tgid + 1, node, n };
        let seen = HashMap::from([(key(7, 1, 3), 5), (key(7, 0, 4), 9)]);
        let now = [(key(7, 1, 3), 8), (key(7, 0, 4), 2), (key(8, 1, 9), 1), (key(7, 1, 5), 0)];
        // risen by 3; evicted and counted again from 0; new; nothing yet
        assert_eq!(rises(&now, &seen), vec![f(7, 3, 1, 3), f(7, 4, 0, 2), f(8, 9, 1, 1)]);
        assert_eq!(rises(&now[..1], &HashMap::from([(key(7, 1, 3), 8)])), vec![]);
    }

    /// Who wrote it, from one window's faults.
    fn writers(w: &[(u32, usize, f32)]) -> Writers {
        writers_of(w, &writer_shares(w.iter().map(|x| (x.0, x.2))))
    }

    #[test]
    fn who_wrote_a_window() {
        let one = |thread, node| Writers::One { thread, node };
        assert_eq!(writers(&[(10, 0, 3.0)]), one(10, 0));
        // one thread, whose faults came mostly from node 1
        assert_eq!(writers(&[(10, 0, 1.0), (10, 1, 4.0)]), one(10, 1));
        assert_eq!(writers(&[(10, 0, 5.0), (11, 0, 4.0)]), Writers::Several);
        // a straggler under WRITER_SHARE does not count
        assert_eq!(writers(&[(10, 0, 20.0), (11, 1, 1.0)]), one(10, 0));
        assert_eq!(writers(&[(10, 0, 0.0)]), Writers::None);
        assert_eq!(writers(&[]), Writers::None);
    }

    /// The two-stage filter on a history, window by window.
    #[test]
    fn private_only_when_one_thread_wrote_it_lately() {
        let both = [true, true];
        let mut e = Evidence::default();
        // (thread, node, faults) of one window
        let window = |e: &mut Evidence, scan: u64, faults: &[(u32, usize, u64)]| {
            for &(t, n, f) in faults {
                e.add(7, t, n, f);
            }
            e.period = 1;
            assert!(e.arm_due(scan, &both));
            e.use_of(7)
        };
        assert_eq!(e.use_of(7), Use::Shared); // never written
        for scan in 1..=3 {
            assert_eq!(window(&mut e, scan, &[(11, 1, 1)]), Use::Settling, "window {scan}");
        }
        assert_eq!(window(&mut e, 4, &[(11, 1, 1)]), Use::Private(1));
        // another thread took over: the two share the history (shared, not
        // private to either) until the new one holds PRIVATE_SHARE of it
        for scan in 5..=9 {
            assert_eq!(window(&mut e, scan, &[(10, 0, 1)]), Use::Shared, "window {scan}");
        }
        assert_eq!(window(&mut e, 10, &[(10, 0, 1)]), Use::Private(0));
        // a window without writes changes nothing
        assert_eq!(window(&mut e, 11, &[]), Use::Private(0));
        // one window of another thread: taking turns, for a few windows
        assert_eq!(window(&mut e, 12, &[(11, 1, 1)]), Use::Shared);
        assert_eq!(window(&mut e, 13, &[(10, 0, 1)]), Use::Shared);
        assert_eq!(window(&mut e, 14, &[(10, 0, 1)]), Use::Shared);
        assert_eq!(window(&mut e, 15, &[(10, 0, 1)]), Use::Private(0));
        // the same thread, now writing from node 1: settling for a window
        assert_eq!(window(&mut e, 16, &[(10, 1, 1)]), Use::Settling);
        assert_eq!(window(&mut e, 17, &[(10, 1, 1)]), Use::Private(1));
        // written by two threads in one window: shared, for two windows
        assert_eq!(window(&mut e, 18, &[(10, 0, 3), (11, 1, 2)]), Use::Shared);
        assert_eq!(window(&mut e, 19, &[(11, 1, 1)]), Use::Shared);
        // thread 11 alone, twice, but thread 10 still holds much of the history
        assert_eq!(window(&mut e, 20, &[(11, 1, 1)]), Use::Shared);
        assert_eq!(e.counts(), (0, 1, 0));
        // forgotten after FORGET_WINDOWS windows without writes
        for s in 21..21 + FORGET_WINDOWS as u64 {
            window(&mut e, s, &[]);
        }
        assert!(e.chunks.is_empty());
    }

    /// A chunk backed by a huge page takes one fault per window, from the
    /// first thread to write it after the arming: written by threads of two
    /// nodes, it reads as one node's in each window, in runs of two or three.
    /// That is not private to either, and its lean follows the majority.
    #[test]
    fn a_chunk_whose_first_writer_takes_turns_is_shared() {
        let both = [true, true];
        let mut e = Evidence::default();
        // threads 10 and 11 on node 0, 12 on node 1; node 0 wins most races
        for (scan, w) in "0011200100211010012100".bytes().enumerate() {
            let t = (w - b'0') as u32;
            e.add(7, 10 + t, (t == 2) as usize, 1);
            e.period = 1;
            assert!(e.arm_due(scan as u64 + 1, &both));
            if scan >= 2 {
                assert_eq!(e.use_of(7), Use::Shared, "window {scan}");
            }
        }
        assert_eq!(e.lean(7), Some(0));
        // a straggler's faults do not enter the history
        let mut c = Chunk { window: vec![(10, 0, 95.0), (11, 1, 5.0)], ..Default::default() };
        c.close_window(2);
        assert_eq!((c.threads.clone(), c.nodes.clone()), (HashMap::from([(10, 1.0)]), vec![1.0, 0.0]));
        assert_eq!(c.lean(), None); // one window: no lean yet
        // faults from a node the machine does not have are dropped
        let mut c = Chunk { window: vec![(10, 5, 9.0)], ..Default::default() };
        c.close_window(2);
        assert_eq!((c.last, c.nodes.len()), (Writers::None, 0));
    }

    #[test]
    fn shared_memory_is_balanced_only_beyond_the_slack() {
        let both = [true, true];
        // all on node 0 (first-touched by one thread): node 0 gives half away to node 1
        let p = SharedPlan::new(&[1000, 0], &both);
        assert_eq!((p.give.clone(), p.take.clone()), (vec![0.5, 0.0], vec![1]));
        let moved: Vec<u64> = (0..10_000).filter(|&i| p.want(i, 0, None).is_some()).collect();
        assert!((4_700..5_300).contains(&moved.len()), "{}", moved.len());
        assert!(moved.iter().all(|&i| p.want(i, 0, None) == Some(1)));
        // the same pages pass after pass; pages on the receiving node stay
        assert_eq!(moved, (0..10_000).filter(|&i| p.want(i, 0, None).is_some()).collect::<Vec<_>>());
        assert!((0..100).all(|i| p.want(i, 1, None).is_none()));
        // 60/40 is within the slack: nothing moves
        let p = SharedPlan::new(&[600, 400], &both);
        assert_eq!(p.give, vec![0.0, 0.0]);
        assert!((0..100).all(|i| p.want(i, 0, None).is_none()));
        // pages on an inactive node all go, to the active nodes below their share
        let p = SharedPlan::new(&[100, 500, 400], &[true, true, false]);
        assert_eq!(p.give, vec![0.0, 0.0, 1.0]);
        assert_eq!(p.take, vec![0]);
        assert!((0..100).all(|i| p.want(i, 2, None) == Some(0)));
        // 3 active nodes, one holding all: 2/3 of it go to the other two
        let p = SharedPlan::new(&[900, 0, 0], &[true, true, true]);
        let to: Vec<Option<usize>> = (0..30_000).map(|i| p.want(i, 0, None)).collect();
        let n1 = to.iter().filter(|&&t| t == Some(1)).count();
        let n2 = to.iter().filter(|&&t| t == Some(2)).count();
        assert!((9_000..11_000).contains(&n1) && (9_000..11_000).contains(&n2), "{n1} {n2}");
        // nothing shared: nothing to do
        assert_eq!(SharedPlan::new(&[0, 0], &both).give, vec![0.0, 0.0]);
        // a chunk written most where it sits stays; one written most from a
        // receiving node goes there, even when the hash picks another
        let p = SharedPlan::new(&[900, 0, 0], &[true, true, true]);
        let moving: Vec<u64> = (0..1000).filter(|&i| p.want(i, 0, None).is_some()).collect();
        assert!(moving.iter().all(|&i| p.want(i, 0, Some(0)).is_none()));
        assert!(moving.iter().all(|&i| p.want(i, 0, Some(2)) == Some(2)));
        assert!(moving.iter().all(|&i| p.want(i, 0, Some(1)) == Some(1)));
        // pages on an inactive node go whatever their lean
        let p = SharedPlan::new(&[100, 500, 400], &[true, true, false]);
        assert!((0..100).all(|i| p.want(i, 2, Some(2)) == Some(0)));
    }

    #[test]
    fn arming_backs_off_while_idle() {
        let both = [true, true];
        let mut e = Evidence::default();
        assert!(!e.ready(1));
        assert!(e.arm_due(1, &both));
        assert!(!e.ready(1) && e.ready(2));
        // idle passes double the period
        e.settle(true);
        assert!(e.arm_due(2, &both));
        assert!(!e.arm_due(3, &both));
        assert!(e.arm_due(4, &both));
        e.settle(true);
        e.settle(true);
        assert_eq!(e.period, 8);
        e.settle(false);
        assert_eq!(e.period, 1);
        // new active nodes: re-armed at once, every pass
        e.settle(true);
        assert!(e.arm_due(5, &[true, true, true]));
        assert_eq!(e.period, 1);
        // a node that leaves the active set stays for ACTIVE_STICKY passes
        e.settle(true);
        assert!(e.arm_due(6, &[true, true, false]));
        assert!(!e.arm_due(7, &[true, true, false]));
        assert_eq!(e.active, vec![true, true, true]);
        assert!(e.arm_due(8, &[true, true, false]));
        assert_eq!((e.active.clone(), e.period), (vec![true, true, false], 1));
    }
}
