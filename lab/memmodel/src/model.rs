// SPDX-License-Identifier: GPL-2.0-only
//! The memory model itself, free of QEMU so that it is tested on the host.
//!
//! Under TCG a remote node's memory and a cold cache cost nothing. This model charges for them on paper:
//! every guest data access is classified by the NUMA node that holds its guest-physical address (against the
//! node of the vCPU that made it), and is fed to the modeled LLC of that vCPU, a shared set-associative LRU
//! cache of the machine's scaled LLC size. It only counts; it never changes what the guest sees or its timing
//! (apart from the emulator's slowdown of running it).
//!
//! - Layout: QEMU lays the nodes' RAM out in node order over one RAM space, then maps that space to guest
//!   physical addresses with the PCI hole below 4 GiB: RAM offsets [0, below_4g) are at the same addresses,
//!   the rest starts at 4 GiB. The lab computes below_4g for the machine (lab/memmodel.py) and checks the
//!   layout against the guest's own SRAT at every boot.
//! - Coherence: a store invalidates the line in every other LLC (write-invalidate, as MESI does), so data
//!   written in one LLC and read in another misses there, as it would on the machine. A miss is charged by
//!   the distance to the line's home node, whether memory or another cache would serve it.
//! - Counters, per vCPU: accesses and LLC misses per target node, split kernel/user by the virtual
//!   address; accesses to I/O and accesses without a physical address are counted apart. Hits are accesses
//!   less misses. One thread runs a vCPU, so each counter has one writer.
//! - Marks: the guest runs a 7-byte NOP (`nopl 0x4d4c00TT(%rax)`, TT the tag) where it wants the counters
//!   snapshotted (workloads/memmark.h): begin and end of a benchmark case, and ticks in between. Accesses are
//!   counted only from a begin to its end (plugin.rs): outside them the guest runs at TCG's usual speed.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const LINE: u64 = 64;
pub const FOUR_GIB: u64 = 1 << 32;
/// x86-64 user addresses are below the canonical hole.
pub const USER_TOP: u64 = 0x0000_8000_0000_0000;

/// The marker instruction: `nopl 0x4d4c00TT(%rax)`, 0f 1f 80 TT 00 4c 4d.
pub const MARK_LEN: usize = 7;
pub const MARK_BEGIN: u8 = 1;
pub const MARK_END: u8 = 2;
pub const MARK_TICK: u8 = 3;
/// No snapshot: only turns counting on or off to match the last begin or end (see plugin.rs).
pub const MARK_SYNC: u8 = 4;

pub fn mark_tag(bytes: &[u8]) -> Option<u8> {
    match bytes {
        [0x0f, 0x1f, 0x80, t @ (MARK_BEGIN | MARK_END | MARK_TICK | MARK_SYNC), 0x00, 0x4c, 0x4d] => Some(*t),
        _ => None,
    }
}

pub fn mark_name(tag: u8) -> &'static str {
    match tag {
        MARK_BEGIN => "begin",
        MARK_END => "end",
        MARK_SYNC => "sync",
        _ => "tick",
    }
}

/// Guest-physical address -> node, for nodes laid out in order over the RAM space.
#[derive(Debug, Clone)]
pub struct Layout {
    below_4g: u64,
    node_end: Vec<u64>,
}

impl Layout {
    pub fn new(node_bytes: &[u64], below_4g: u64) -> Layout {
        let mut end = 0;
        let node_end = node_bytes.iter().map(|b| { end += b; end }).collect();
        Layout { below_4g, node_end }
    }

    pub fn ram_bytes(&self) -> u64 {
        self.node_end.last().copied().unwrap_or(0)
    }

    /// The node whose RAM holds phys; None in the PCI hole or past the end of RAM.
    pub fn node_of(&self, phys: u64) -> Option<usize> {
        let off = if phys < self.below_4g {
            phys
        } else if phys >= FOUR_GIB {
            phys - FOUR_GIB + self.below_4g
        } else {
            return None;
        };
        self.node_end.iter().position(|&e| off < e)
    }

    /// Each node's guest-physical ranges [start, end), as the guest's SRAT must list them (merged).
    pub fn ranges(&self) -> Vec<Vec<(u64, u64)>> {
        let mut start = 0;
        self.node_end
            .iter()
            .map(|&end| {
                let mut r = Vec::new();
                if start < self.below_4g {
                    r.push((start, end.min(self.below_4g)));
                }
                if end > self.below_4g {
                    let s = start.max(self.below_4g);
                    r.push((s - self.below_4g + FOUR_GIB, end - self.below_4g + FOUR_GIB));
                }
                start = end;
                r
            })
            .collect()
    }
}

/// One shared LLC: set-associative, LRU, physically indexed (line number modulo the set count).
///
/// The vCPUs of one LLC update it without a lock: each way is an atomic word, a set is read, reordered and
/// written back. Two vCPUs in the same set at the same instant may then lose or duplicate one line's place,
/// an error of the order of the share of such collisions, bought for a large cut in the cost per access.
pub struct Cache {
    sets: u64,
    ways: usize,
    tags: Vec<AtomicU64>,
}

/// The most ways a set may have (machine files allow up to 64).
const MAX_WAYS: usize = 64;

impl Cache {
    pub fn new(bytes: u64, ways: usize) -> Cache {
        let ways = ways.clamp(1, MAX_WAYS);
        let sets = (bytes / LINE / ways as u64).max(1);
        Cache { sets, ways, tags: (0..sets as usize * ways).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn bytes(&self) -> u64 {
        self.sets * self.ways as u64 * LINE
    }

    /// The ways of phys's set, most recent first, and the line's tag (0 marks an empty way).
    fn set_of(&self, phys: u64) -> (&[AtomicU64], u64) {
        let line = phys / LINE;
        let base = (line % self.sets) as usize * self.ways;
        (&self.tags[base..base + self.ways], line + 1)
    }

    /// Drop phys's line if this cache holds it (another LLC wrote it).
    pub fn invalidate(&self, phys: u64) {
        let (set, tag) = self.set_of(phys);
        if let Some(p) = set.iter().position(|t| t.load(Relaxed) == tag) {
            for i in p..set.len() - 1 {
                set[i].store(set[i + 1].load(Relaxed), Relaxed);
            }
            set[set.len() - 1].store(0, Relaxed);
        }
    }

    /// Look phys up and make its line the most recent of its set; true on a hit.
    pub fn access(&self, phys: u64) -> bool {
        let (set, tag) = self.set_of(phys);
        if set[0].load(Relaxed) == tag {
            return true; // already the most recent: nothing moves
        }
        let found = set.iter().position(|t| t.load(Relaxed) == tag);
        // Shift the more recent ways down by one (dropping the LRU way on a miss) and put the line first.
        let last = found.unwrap_or(set.len() - 1);
        for i in (1..=last).rev() {
            set[i].store(set[i - 1].load(Relaxed), Relaxed);
        }
        set[0].store(tag, Relaxed);
        found.is_some()
    }
}

/// Counter slots of one vCPU: [mode][kind][node], mode 0 kernel / 1 user, kind 0 accesses / 1 LLC misses;
/// then I/O accesses and accesses QEMU gave no physical address for.
pub struct Counters {
    nodes: usize,
    per_vcpu: Vec<Box<[AtomicU64]>>,
}

impl Counters {
    pub fn new(vcpus: usize, nodes: usize) -> Counters {
        // 16 slots of padding keep two vCPUs' counters off one host cache line.
        let per_vcpu = (0..vcpus).map(|_| (0..Self::slots(nodes) + 16).map(|_| AtomicU64::new(0)).collect()).collect();
        Counters { nodes, per_vcpu }
    }

    pub fn slots(nodes: usize) -> usize {
        4 * nodes + 2
    }

    fn bump(&self, vcpu: usize, slot: usize) {
        if let Some(c) = self.per_vcpu.get(vcpu) {
            // One writer per vCPU: a plain load and store, no locked instruction.
            c[slot].store(c[slot].load(Relaxed) + 1, Relaxed);
        }
    }

    pub fn access(&self, vcpu: usize, user: bool, node: usize, hit: bool) {
        let mode = user as usize;
        self.bump(vcpu, (mode * 2) * self.nodes + node);
        if !hit {
            self.bump(vcpu, (mode * 2 + 1) * self.nodes + node);
        }
    }

    pub fn io(&self, vcpu: usize) {
        self.bump(vcpu, 4 * self.nodes);
    }

    pub fn unmapped(&self, vcpu: usize) {
        self.bump(vcpu, 4 * self.nodes + 1);
    }

    pub fn read(&self, vcpu: usize) -> Vec<u64> {
        self.per_vcpu[vcpu][..Self::slots(self.nodes)].iter().map(|c| c.load(Relaxed)).collect()
    }
}

/// What the lab passes as plugin arguments (key=value; lists are dot-separated, QEMU splits on commas).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub node_mb: Vec<u64>,
    pub below_4g: u64,
    pub vcpu_llc: Vec<usize>,
    pub llc_kb: u64,
    pub ways: usize,
}

fn list(v: &str, key: &str) -> Result<Vec<u64>, String> {
    v.split('.').map(|x| x.parse::<u64>().map_err(|_| format!("{key}: {x:?} is not a number"))).collect()
}

impl Config {
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>, vcpus: usize) -> Result<Config, String> {
        let (mut node_mb, mut below, mut vllc, mut llc_kb, mut ways) = (None, None, None, None, 16);
        for a in args {
            let (k, v) = a.split_once('=').ok_or_else(|| format!("argument {a:?} is not key=value"))?;
            match k {
                "ram_mb" => node_mb = Some(list(v, k)?),
                "below_4g" => below = Some(list(v, k)?[0]),
                "vcpu_llc" => vllc = Some(list(v, k)?),
                "llc_kb" => llc_kb = Some(list(v, k)?[0]),
                "ways" => ways = list(v, k)?[0] as usize,
                _ => return Err(format!("unknown argument {k:?} (known: ram_mb, below_4g, vcpu_llc, llc_kb, ways)")),
            }
        }
        let node_mb = node_mb.ok_or("ram_mb is missing")?;
        let to_idx = |v: Vec<u64>| v.into_iter().map(|x| x as usize).collect::<Vec<_>>();
        let vcpu_llc = to_idx(vllc.ok_or("vcpu_llc is missing")?);
        if vcpu_llc.len() != vcpus {
            return Err(format!("vcpu_llc must name {vcpus} vCPUs, got {}", vcpu_llc.len()));
        }
        if node_mb.is_empty() || node_mb.contains(&0) {
            return Err("ram_mb must give every node some memory".into());
        }
        let cfg = Config {
            node_mb,
            below_4g: below.ok_or("below_4g is missing")?,
            vcpu_llc,
            llc_kb: llc_kb.ok_or("llc_kb is missing")?,
            ways: ways.max(1),
        };
        Ok(cfg)
    }
}

pub struct Model {
    pub cfg: Config,
    pub layout: Layout,
    pub caches: Vec<Cache>,
    pub counters: Counters,
}

impl Model {
    pub fn new(cfg: Config) -> Model {
        let layout = Layout::new(&cfg.node_mb.iter().map(|mb| mb << 20).collect::<Vec<_>>(), cfg.below_4g);
        let nr_llc = cfg.vcpu_llc.iter().max().map_or(0, |m| m + 1);
        let caches = (0..nr_llc).map(|_| Cache::new(cfg.llc_kb << 10, cfg.ways)).collect();
        let counters = Counters::new(cfg.vcpu_llc.len(), cfg.node_mb.len());
        Model { cfg, layout, caches, counters }
    }

    /// One data access of vcpu to RAM at guest-physical phys.
    pub fn access(&self, vcpu: usize, phys: u64, vaddr: u64, store: bool) {
        let Some(node) = self.layout.node_of(phys) else {
            self.counters.unmapped(vcpu);
            return;
        };
        let Some(&llc) = self.cfg.vcpu_llc.get(vcpu) else { return };
        let hit = self.caches[llc].access(phys);
        if store && self.caches.len() > 1 {
            for (i, c) in self.caches.iter().enumerate() {
                if i != llc {
                    c.invalidate(phys);
                }
            }
        }
        self.counters.access(vcpu, vaddr < USER_TOP, node, hit);
    }

    /// The header line: how to read the snapshot lines that follow.
    pub fn describe(&self) -> String {
        let ranges: Vec<String> = self
            .layout
            .ranges()
            .iter()
            .enumerate()
            .map(|(n, r)| {
                let rs: Vec<String> = r.iter().map(|(s, e)| format!("{s:#x}-{e:#x}")).collect();
                format!("{n}:{}", rs.join("+"))
            })
            .collect();
        format!(
            "memmodel config nodes={} vcpus={} llcs={} llc_bytes={} ways={} ranges={} slots=kernel_acc[n],kernel_miss[n],user_acc[n],user_miss[n],io,unmapped\n",
            self.cfg.node_mb.len(),
            self.cfg.vcpu_llc.len(),
            self.caches.len(),
            self.caches.first().map_or(0, |c| c.bytes()),
            self.cfg.ways,
            ranges.join(";")
        )
    }

    /// A snapshot: one header line, then one line of counters per vCPU.
    pub fn snapshot(&self, what: &str, seq: u64, vcpu: u32, t_ns: u128) -> String {
        let mut s = format!("memmodel {what} seq={seq} vcpu={vcpu} t_ns={t_ns}\n");
        for v in 0..self.cfg.vcpu_llc.len() {
            let c: Vec<String> = self.counters.read(v).iter().map(u64::to_string).collect();
            s += &format!("memmodel c {v} {}\n", c.join(" "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_maps_nodes_in_order_below_4g() {
        let l = Layout::new(&[1 << 30, 1 << 30], 2 << 30);
        assert_eq!(l.node_of(0), Some(0));
        assert_eq!(l.node_of((1 << 30) - 1), Some(0));
        assert_eq!(l.node_of(1 << 30), Some(1));
        assert_eq!(l.node_of((2 << 30) - 1), Some(1));
        assert_eq!(l.node_of(2 << 30), None);
        assert_eq!(l.ranges(), vec![vec![(0, 1 << 30)], vec![(1 << 30, 2 << 30)]]);
    }

    #[test]
    fn layout_skips_the_pci_hole() {
        // 4 nodes of 1 GiB with RAM split at 3 GiB: node 3 lives above 4 GiB.
        let l = Layout::new(&[1 << 30; 4], 3 << 30);
        assert_eq!(l.node_of((3 << 30) - 1), Some(2));
        assert_eq!(l.node_of(3 << 30), None); // the hole
        assert_eq!(l.node_of(FOUR_GIB), Some(3));
        assert_eq!(l.node_of(FOUR_GIB + (1 << 30)), None); // past the end
        // A node straddling the split has two ranges.
        let l = Layout::new(&[(3 << 30) / 2, (3 << 30) / 2, 1 << 30], 3 << 30);
        assert_eq!(l.ranges()[1], vec![((3 << 30) / 2, 3 << 30)]);
        let l = Layout::new(&[2 << 30, 2 << 30], 3 << 30);
        assert_eq!(l.ranges()[1], vec![(2 << 30, 3 << 30), (FOUR_GIB, FOUR_GIB + (1 << 30))]);
        assert_eq!(l.node_of(FOUR_GIB + (1 << 30) - 1), Some(1));
    }

    #[test]
    fn cache_hits_what_fits_and_misses_what_does_not() {
        let c = Cache::new(64 << 10, 8);
        assert_eq!(c.bytes(), 64 << 10);
        let pass = |bytes: u64| (0..bytes / LINE).filter(|i| c.access(i * LINE)).count() as u64;
        assert_eq!(pass(32 << 10), 0, "cold");
        assert_eq!(pass(32 << 10), (32 << 10) / LINE, "a half-size working set stays");
        // Twice the size, walked in order: LRU evicts every line before its reuse.
        pass(128 << 10);
        assert_eq!(pass(128 << 10), 0);
    }

    #[test]
    fn cache_is_lru_within_a_set() {
        let c = Cache::new(2 * LINE, 2); // one set, two ways
        assert!(!c.access(0));
        assert!(!c.access(LINE));
        assert!(c.access(0)); // 0 is now most recent
        assert!(!c.access(2 * LINE)); // evicts LINE
        assert!(c.access(0));
        assert!(!c.access(LINE));
    }

    #[test]
    fn marks_are_the_seven_byte_nop() {
        assert_eq!(mark_tag(&[0x0f, 0x1f, 0x80, 1, 0, 0x4c, 0x4d]), Some(MARK_BEGIN));
        assert_eq!(mark_tag(&[0x0f, 0x1f, 0x80, 3, 0, 0x4c, 0x4d]), Some(MARK_TICK));
        assert_eq!(mark_tag(&[0x0f, 0x1f, 0x80, 4, 0, 0x4c, 0x4d]), Some(MARK_SYNC));
        assert_eq!(mark_tag(&[0x0f, 0x1f, 0x80, 5, 0, 0x4c, 0x4d]), None);
        assert_eq!(mark_tag(&[0x0f, 0x1f, 0x80, 1, 0, 0x4c]), None);
    }

    #[test]
    fn model_counts_local_remote_and_misses_per_vcpu() {
        let cfg = Config::parse(
            ["ram_mb=1.1", "below_4g=2097152", "vcpu_llc=0.1", "llc_kb=64", "ways=4"],
            2,
        )
        .unwrap();
        let m = Model::new(cfg);
        m.access(0, 0x1000, 0x1000, false); // user, node 0, miss
        m.access(0, 0x1000, 0x1000, false); // hit
        m.access(0, (1 << 20) + 64, 0xffff_8880_0000_0000, false); // kernel, node 1, miss
        m.access(1, 0x1000, 0x1000, false); // vCPU 1's own LLC: a miss there
        m.access(1, 3 << 20, 0x1000, false); // beyond RAM
        // slots: kacc[2], kmiss[2], uacc[2], umiss[2], io, unmapped
        assert_eq!(m.counters.read(0), vec![0, 1, 0, 1, 2, 0, 1, 0, 0, 0]);
        assert_eq!(m.counters.read(1), vec![0, 0, 0, 0, 1, 0, 1, 0, 0, 1]);
        let snap = m.snapshot("begin", 0, 0, 5);
        assert!(snap.starts_with("memmodel begin seq=0 vcpu=0 t_ns=5\nmemmodel c 0 0 1 0 1 2 0 1 0 0 0\n"));
    }

    #[test]
    fn a_store_in_one_llc_invalidates_the_line_in_the_others() {
        let cfg = Config::parse(["ram_mb=1", "below_4g=1048576", "vcpu_llc=0.1", "llc_kb=64"], 2).unwrap();
        let m = Model::new(cfg);
        let miss = |v: usize| m.counters.read(v)[3]; // user misses (one node)
        m.access(0, 0x40, 0x40, false);
        m.access(1, 0x40, 0x40, false);
        m.access(1, 0x40, 0x40, false); // both LLCs hold the line: a hit in LLC 1
        assert_eq!((miss(0), miss(1)), (1, 1));
        m.access(0, 0x40, 0x40, true); // LLC 0 writes it: a hit there, gone from LLC 1
        m.access(1, 0x40, 0x40, false);
        assert_eq!((miss(0), miss(1)), (1, 2));
        m.access(0, 0x40, 0x40, true); // and back
        assert_eq!(miss(0), 1);
        // One LLC shared by both vCPUs never misses on the other's stores.
        let cfg = Config::parse(["ram_mb=1", "below_4g=1048576", "vcpu_llc=0.0", "llc_kb=64"], 2).unwrap();
        let m = Model::new(cfg);
        for v in [0, 1, 0, 1] {
            m.access(v, 0x40, 0x40, true);
        }
        assert_eq!(m.counters.read(0)[3] + m.counters.read(1)[3], 1);
    }

    #[test]
    fn config_names_what_is_wrong() {
        let e = Config::parse(["ram_mb=1.0", "below_4g=1", "vcpu_llc=0.0", "llc_kb=1"], 2).unwrap_err();
        assert!(e.contains("every node"), "{e}");
        let e = Config::parse(["ram_mb=1.1", "below_4g=1", "vcpu_llc=0", "llc_kb=1"], 2).unwrap_err();
        assert!(e.contains("2 vCPUs"), "{e}");
        assert!(Config::parse(["bogus=1"], 1).unwrap_err().contains("unknown argument"));
    }
}
