// SPDX-License-Identifier: GPL-2.0-only
//! Topology: which CPUs share a core, an LLC, a NUMA node.
//!
//! Idea: the BPF side walks short lists of CPU ids (per core, per LLC, per
//! node) instead of scanning bitmaps. This module builds those lists once,
//! before load, and writes them into the BPF rodata:
//! `cpu_llc/cpu_node/cpu_core[cpu]`, SMT sibling lists, and compressed-row
//! CPU lists per LLC (`llc_off`, `llc_cpus`) and per node (`node_off`,
//! `node_cpus`). LLCs, nodes and cores are renumbered densely (0..n), since
//! kernel ids can be sparse.
//!
//! Origin: scx_utils::Topology reads sysfs (online CPUs only). CPUs that are
//! possible but offline at start get a guessed, single-CPU LLC in node 0 and
//! are marked unknown; if one comes online the BPF side asks for a restart
//! and the agent re-reads sysfs.
//!
//! Knob: `--topology-override FILE`, a JSON object
//! `{"llcs": ["0-3", "4-7"], "comment": "..."}` that replaces the LLC
//! grouping (nodes and cores still come from sysfs). It exists because some
//! machines, notably QEMU guests, cannot show two LLCs in one node. It is
//! validated strictly: every possible CPU in exactly one LLC, no unknown
//! CPU, no LLC spanning two nodes, no core split across LLCs.
//!
//! Stats: none; the startup line reports the resulting counts.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

use crate::bpf_intf;

pub const MAX_CPUS: usize = bpf_intf::locality_consts_MAX_CPUS as usize;
pub const MAX_LLCS: usize = bpf_intf::locality_consts_MAX_LLCS as usize;
pub const MAX_NODES: usize = bpf_intf::locality_consts_MAX_NODES as usize;
pub const MAX_SMT: usize = bpf_intf::locality_consts_MAX_SMT as usize;

/// Parse a kernel-style CPU list ("0-3,8,10-11") strictly: no empty
/// items, no reversed ranges, no junk. Returns the CPUs in the given order.
/// Not scx_utils::read_cpulist(): it takes a reversed range as empty and
/// expands any range, however large.
pub fn parse_cpulist(s: &str) -> std::result::Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty CPU list".into());
    }
    let num = |t: &str| -> std::result::Result<usize, String> {
        let t = t.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("\"{t}\" is not a CPU number"));
        }
        t.parse::<usize>()
            .map_err(|_| format!("\"{t}\" is not a CPU number"))
    };
    let mut cpus = vec![];
    for item in s.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("range \"{}\" is reversed", item.trim()));
                }
                if b - a >= 1 << 16 {
                    return Err(format!("range \"{}\" is too large", item.trim()));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(item)?),
        }
    }
    Ok(cpus)
}

/// Format sorted CPU ids as a compact cpulist ("0-3,8").
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Where one CPU sits. `node`, `llc` and `core` are dense indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuPlace {
    pub node: usize,
    pub llc: usize,
    pub core: usize,
    /// false: the CPU was offline when sysfs was read; `llc`/`core` guessed.
    pub known: bool,
}

/// The machine as the scheduler sees it: one entry per CPU id below
/// `nr_cpu_ids` (None: not a possible CPU).
#[derive(Clone, Debug)]
pub struct Topo {
    pub cpus: Vec<Option<CpuPlace>>,
    pub nr_llcs: usize,
    pub nr_nodes: usize,
    pub nr_cores: usize,
    /// true when the LLC grouping came from an override file
    pub overridden: bool,
}

/// Raw description of one online CPU, with kernel (possibly sparse) ids.
#[derive(Clone, Debug)]
pub struct RawCpu {
    pub cpu: usize,
    pub node: usize,
    /// any key unique per LLC across the machine
    pub llc_key: usize,
    /// any key unique per core across the machine
    pub core_key: usize,
}

impl Topo {
    /// Build from raw per-CPU facts. `possible` lists every possible CPU id;
    /// those missing from `online` get a singleton LLC in node 0.
    pub fn from_raw(possible: &[usize], online: &[RawCpu]) -> Result<Topo> {
        let nr_cpu_ids = possible
            .iter()
            .chain(online.iter().map(|c| &c.cpu))
            .max()
            .map_or(0, |m| m + 1);
        if nr_cpu_ids == 0 {
            bail!("no CPUs found");
        }
        if nr_cpu_ids > MAX_CPUS {
            bail!(
                "{nr_cpu_ids} CPU ids but scx_locality supports at most {MAX_CPUS}; \
                 rebuild with a larger MAX_CPUS in src/bpf/intf.h"
            );
        }

        // dense node ids in kernel-id order
        let mut node_ids: BTreeMap<usize, usize> =
            online.iter().map(|c| (c.node, 0)).collect();
        for (i, v) in node_ids.values_mut().enumerate() {
            *v = i;
        }
        if node_ids.is_empty() {
            node_ids.insert(0, 0);
        }
        // LLCs ordered by (node, lowest CPU) so that numbering is stable and
        // a node's LLCs are contiguous
        let mut llc_first: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for c in online {
            let e = llc_first
                .entry(c.llc_key)
                .or_insert((node_ids[&c.node], c.cpu));
            e.1 = e.1.min(c.cpu);
        }
        let mut llc_order: Vec<(usize, usize, usize)> =
            llc_first.iter().map(|(k, (n, f))| (*n, *f, *k)).collect();
        llc_order.sort();
        let llc_ids: BTreeMap<usize, usize> = llc_order
            .iter()
            .enumerate()
            .map(|(i, (_, _, k))| (*k, i))
            .collect();
        let mut core_ids: BTreeMap<usize, usize> = BTreeMap::new();

        let mut cpus: Vec<Option<CpuPlace>> = vec![None; nr_cpu_ids];
        for c in online {
            if cpus[c.cpu].is_some() {
                bail!("CPU {} described twice", c.cpu);
            }
            let n = core_ids.len();
            let core = *core_ids.entry(c.core_key).or_insert(n);
            cpus[c.cpu] = Some(CpuPlace {
                node: node_ids[&c.node],
                llc: llc_ids[&c.llc_key],
                core,
                known: true,
            });
        }
        let (mut nr_llcs, mut nr_cores) = (llc_ids.len(), core_ids.len());
        for &p in possible {
            if cpus[p].is_none() {
                cpus[p] = Some(CpuPlace {
                    node: 0,
                    llc: nr_llcs,
                    core: nr_cores,
                    known: false,
                });
                nr_llcs += 1;
                nr_cores += 1;
            }
        }
        let topo = Topo {
            cpus,
            nr_llcs,
            nr_nodes: node_ids.len(),
            nr_cores,
            overridden: false,
        };
        topo.check_limits()?;
        Ok(topo)
    }

    /// Read the running system: scx_utils::Topology for online CPUs and
    /// /sys/devices/system/cpu/possible for the rest.
    pub fn from_system() -> Result<Topo> {
        let possible_str = std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .context("reading /sys/devices/system/cpu/possible")?;
        let possible = parse_cpulist(&possible_str)
            .map_err(|e| anyhow::anyhow!("/sys/devices/system/cpu/possible: {e}"))?;
        let t = scx_utils::Topology::new().context("reading the CPU topology from sysfs")?;
        let mut online = vec![];
        // Walk node -> LLC -> core so that keys are unique per object even
        // where kernel core ids repeat across packages.
        let mut core_key = 0;
        for node in t.nodes.values() {
            for llc in node.llcs.values() {
                for core in llc.cores.values() {
                    for cpu in core.cpus.keys() {
                        online.push(RawCpu {
                            cpu: *cpu,
                            node: node.id,
                            llc_key: llc.id,
                            core_key,
                        });
                    }
                    core_key += 1;
                }
            }
        }
        Topo::from_raw(&possible, &online)
    }

    fn check_limits(&self) -> Result<()> {
        if self.nr_llcs > MAX_LLCS {
            bail!("{} LLCs, at most {MAX_LLCS} supported", self.nr_llcs);
        }
        if self.nr_nodes > MAX_NODES {
            bail!("{} NUMA nodes, at most {MAX_NODES} supported", self.nr_nodes);
        }
        Ok(())
    }

    pub fn possible_cpus(&self) -> Vec<usize> {
        (0..self.cpus.len())
            .filter(|&c| self.cpus[c].is_some())
            .collect()
    }

    /// Replace the LLC grouping with `ov`. Errors are one line each.
    pub fn apply_override(&mut self, ov: &Override) -> std::result::Result<(), String> {
        if ov.llcs.is_empty() {
            return Err("\"llcs\" is empty".into());
        }
        if ov.llcs.len() > MAX_LLCS {
            return Err(format!("{} LLCs, at most {MAX_LLCS} supported", ov.llcs.len()));
        }
        let mut owner: Vec<Option<usize>> = vec![None; self.cpus.len()];
        for (i, spec) in ov.llcs.iter().enumerate() {
            let cpus =
                parse_cpulist(spec).map_err(|e| format!("llcs[{i}] \"{spec}\": {e}"))?;
            let mut node_of_llc: Option<(usize, usize)> = None; // (node, witness cpu)
            for cpu in cpus {
                let place = match self.cpus.get(cpu) {
                    Some(Some(p)) => p,
                    _ => {
                        return Err(format!(
                            "llcs[{i}]: CPU {cpu} does not exist (possible CPUs: {})",
                            format_cpulist(&self.possible_cpus())
                        ))
                    }
                };
                if let Some(j) = owner[cpu] {
                    return Err(if i == j {
                        format!("llcs[{i}]: CPU {cpu} is listed twice")
                    } else {
                        format!("CPU {cpu} is listed twice (llcs[{j}] and llcs[{i}])")
                    });
                }
                owner[cpu] = Some(i);
                // CPUs offline at start have no known node: they cannot
                // contradict the rule
                if place.known {
                    match node_of_llc {
                        None => node_of_llc = Some((place.node, cpu)),
                        Some((n, w)) if n != place.node => {
                            return Err(format!(
                                "llcs[{i}] spans two NUMA nodes (CPU {w} and CPU {cpu}); \
                                 an LLC must lie within one node"
                            ))
                        }
                        _ => {}
                    }
                }
            }
        }
        let missing: Vec<usize> = self
            .possible_cpus()
            .into_iter()
            .filter(|&c| owner[c].is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "CPUs in no LLC: {} (every possible CPU must be listed exactly once)",
                format_cpulist(&missing)
            ));
        }
        // a core split across LLCs would make "idle core in the LLC" and
        // the SMT steal level contradict each other
        let mut core_llc: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for (cpu, place) in self.cpus.iter().enumerate() {
            let (Some(place), Some(llc)) = (place, owner[cpu]) else {
                continue;
            };
            if !place.known {
                continue;
            }
            match core_llc.get(&place.core) {
                None => {
                    core_llc.insert(place.core, (llc, cpu));
                }
                Some(&(l, w)) if l != llc => {
                    return Err(format!(
                        "CPUs {w} and {cpu} are SMT siblings of one core but are in \
                         llcs[{l}] and llcs[{llc}]"
                    ))
                }
                _ => {}
            }
        }

        // Renumber: keep the file's order, a node's LLCs need not be
        // contiguous for the BPF side. Nodes of unknown CPUs follow their LLC.
        let mut llc_node: Vec<Option<usize>> = vec![None; ov.llcs.len()];
        for (cpu, place) in self.cpus.iter().enumerate() {
            if let (Some(p), Some(l)) = (place, owner[cpu]) {
                if p.known {
                    llc_node[l] = Some(p.node);
                }
            }
        }
        for (cpu, place) in self.cpus.iter_mut().enumerate() {
            if let (Some(p), Some(l)) = (place.as_mut(), owner[cpu]) {
                p.llc = l;
                if !p.known {
                    p.node = llc_node[l].unwrap_or(0);
                }
            }
        }
        self.nr_llcs = ov.llcs.len();
        self.overridden = true;
        Ok(())
    }

    /// The rodata arrays the BPF side wants.
    pub fn to_bpf(&self) -> BpfTopo {
        let n = self.cpus.len();
        let mut b = BpfTopo {
            nr_cpus: n as u32,
            nr_llcs: self.nr_llcs as u32,
            nr_nodes: self.nr_nodes as u32,
            cpu_llc: vec![0; n],
            cpu_node: vec![0; n],
            cpu_core: vec![0; n],
            cpu_known: vec![0; n],
            cpu_sibs: vec![vec![]; n],
            llc_off: vec![0; self.nr_llcs + 1],
            llc_cpus: vec![],
            node_off: vec![0; self.nr_nodes + 1],
            node_cpus: vec![],
            llc_line_off: vec![],
            line_llc: vec![],
            cpu_idle_slot: vec![],
            node_line_off: vec![],
            node_lines: vec![],
        };
        // CPU ids that are not possible never run anything; give them a
        // core of their own in LLC 0 so every array entry is in range.
        let mut core_cpus: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (cpu, place) in self.cpus.iter().enumerate() {
            if let Some(p) = place {
                b.cpu_llc[cpu] = p.llc as u16;
                b.cpu_node[cpu] = p.node as u16;
                b.cpu_core[cpu] = p.core as u16;
                b.cpu_known[cpu] = p.known as u8;
                core_cpus.entry(p.core).or_default().push(cpu);
            } else {
                b.cpu_core[cpu] = (self.nr_cores + cpu) as u16;
            }
        }
        for sibs in core_cpus.values() {
            for &cpu in sibs {
                b.cpu_sibs[cpu] = sibs
                    .iter()
                    .copied()
                    .filter(|&s| s != cpu)
                    .take(MAX_SMT)
                    .map(|s| s as u16)
                    .collect();
            }
        }
        for llc in 0..self.nr_llcs {
            b.llc_off[llc] = b.llc_cpus.len() as u32;
            for (cpu, place) in self.cpus.iter().enumerate() {
                if matches!(place, Some(p) if p.llc == llc) {
                    b.llc_cpus.push(cpu as u16);
                }
            }
        }
        b.llc_off[self.nr_llcs] = b.llc_cpus.len() as u32;
        // a node's list groups its CPUs LLC by LLC
        for node in 0..self.nr_nodes {
            b.node_off[node] = b.node_cpus.len() as u32;
            for llc in 0..self.nr_llcs {
                for i in b.llc_off[llc]..b.llc_off[llc + 1] {
                    let cpu = b.llc_cpus[i as usize];
                    if b.cpu_node[cpu as usize] as usize == node {
                        b.node_cpus.push(cpu);
                    }
                }
            }
        }
        b.node_off[self.nr_nodes] = b.node_cpus.len() as u32;
        b.idle_lines();
        b
    }

    /// Does some node hold more than one LLC? Only there can threads of a
    /// process be gathered into one LLC without leaving their node.
    pub fn node_has_several_llcs(&self) -> bool {
        let mut node_of_llc: Vec<Option<usize>> = vec![None; self.nr_llcs];
        for p in self.cpus.iter().flatten() {
            node_of_llc[p.llc].get_or_insert(p.node);
        }
        let mut seen = vec![false; self.nr_nodes];
        for n in node_of_llc.into_iter().flatten() {
            if std::mem::replace(&mut seen[n], true) {
                return true;
            }
        }
        false
    }

    /// One-line summary for logs.
    pub fn describe(&self) -> String {
        let mut llcs: Vec<Vec<usize>> = vec![vec![]; self.nr_llcs];
        for (cpu, p) in self.cpus.iter().enumerate() {
            if let Some(p) = p {
                llcs[p.llc].push(cpu);
            }
        }
        let parts: Vec<String> = llcs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let node = c
                    .first()
                    .and_then(|&cpu| self.cpus[cpu].as_ref())
                    .map_or(0, |p| p.node);
                format!("llc{i}(node{node})={}", format_cpulist(c))
            })
            .collect();
        parts.join(" ")
    }
}

/// Flat arrays in the layout of the BPF rodata (see locality.bpf.c).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpfTopo {
    pub nr_cpus: u32,
    pub nr_llcs: u32,
    pub nr_nodes: u32,
    pub cpu_llc: Vec<u16>,
    pub cpu_node: Vec<u16>,
    pub cpu_core: Vec<u16>,
    pub cpu_known: Vec<u8>,
    pub cpu_sibs: Vec<Vec<u16>>,
    pub llc_off: Vec<u32>,
    pub llc_cpus: Vec<u16>,
    pub node_off: Vec<u32>,
    pub node_cpus: Vec<u16>,
    /// --sparse-idle's lines (idle_rules.h): LLC l owns lines
    /// llc_line_off[l] .. llc_line_off[l + 1], IDLE_LINE_CPUS CPUs of its
    /// llc_cpus list per line; line_llc[line] is its LLC
    pub llc_line_off: Vec<u32>,
    pub line_llc: Vec<u16>,
    /// slot (line * IDLE_LINE_CPUS + bit) of each CPU; NO_IDLE_SLOT for an
    /// id that is not a possible CPU
    pub cpu_idle_slot: Vec<u32>,
    /// the lines of each node's LLCs: node_lines[node_line_off[n] .. node_line_off[n + 1]]
    pub node_line_off: Vec<u32>,
    pub node_lines: Vec<u16>,
}

// The layout rules idle.bpf.c runs (idle_rules.h), built into this binary
// by build.rs with the other rule headers, so the agent lays the lines out
// with the very same arithmetic.
extern "C" {
    fn rules_idle_llc_lines(cpus: u32) -> u32;
    fn rules_idle_slot(first_line: u32, pos: u32) -> u32;
}

/// cpu_idle_slot of a CPU id that is not possible (no line holds it)
pub const NO_IDLE_SLOT: u32 = u32::MAX;

impl BpfTopo {
    /// Lay out --sparse-idle's lines from the LLC and node lists: LLC by
    /// LLC, each LLC on whole lines, so a line is shared only by CPUs of
    /// one LLC. At most one line per CPU (MAX_CPUS lines).
    fn idle_lines(&mut self) {
        let nr_llcs = self.nr_llcs as usize;
        self.llc_line_off = vec![0; nr_llcs + 1];
        self.cpu_idle_slot = vec![NO_IDLE_SLOT; self.nr_cpus as usize];
        self.line_llc.clear();
        for llc in 0..nr_llcs {
            let (first, end) = (self.llc_off[llc], self.llc_off[llc + 1]);
            let first_line = self.line_llc.len() as u32;
            self.llc_line_off[llc] = first_line;
            for pos in 0..end - first {
                let cpu = self.llc_cpus[(first + pos) as usize] as usize;
                self.cpu_idle_slot[cpu] = unsafe { rules_idle_slot(first_line, pos) };
            }
            let lines = unsafe { rules_idle_llc_lines(end - first) };
            self.line_llc.extend(std::iter::repeat_n(llc as u16, lines as usize));
        }
        self.llc_line_off[nr_llcs] = self.line_llc.len() as u32;
        // a node lists the lines of every LLC with a CPU in it (LLCs do not
        // span nodes, but the BPF walk checks each CPU's node anyway)
        self.node_line_off = vec![0; self.nr_nodes as usize + 1];
        self.node_lines.clear();
        for node in 0..self.nr_nodes as usize {
            self.node_line_off[node] = self.node_lines.len() as u32;
            for llc in 0..nr_llcs {
                let cpus = &self.llc_cpus[self.llc_off[llc] as usize..self.llc_off[llc + 1] as usize];
                if cpus.iter().any(|&c| self.cpu_node[c as usize] as usize == node) {
                    self.node_lines
                        .extend((self.llc_line_off[llc]..self.llc_line_off[llc + 1]).map(|l| l as u16));
                }
            }
        }
        self.node_line_off[self.nr_nodes as usize] = self.node_lines.len() as u32;
    }
}

/// The override file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub llcs: Vec<String>,
    #[allow(dead_code)]
    #[serde(default)]
    pub comment: Option<String>,
}

/// Parse override text; errors are one line.
pub fn parse_override(text: &str) -> std::result::Result<Override, String> {
    serde_json::from_str::<Override>(text).map_err(|e| format!("invalid override JSON: {e}"))
}

/// Read, parse and apply an override file. The error names the file.
pub fn apply_override_file(topo: &mut Topo, path: &Path) -> std::result::Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let ov = parse_override(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    topo.apply_override(&ov)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 nodes x 1 LLC x 2 cores x 2 threads: CPUs 0-3 node 0, 4-7 node 1;
    /// siblings (0,1) (2,3) (4,5) (6,7).
    fn two_node_smt() -> Topo {
        let online: Vec<RawCpu> = (0..8)
            .map(|cpu| RawCpu {
                cpu,
                node: cpu / 4,
                llc_key: 100 + cpu / 4,
                core_key: cpu / 2,
            })
            .collect();
        Topo::from_raw(&(0..8).collect::<Vec<_>>(), &online).unwrap()
    }

    /// 1 node, 1 LLC, 8 CPUs without SMT
    fn one_llc(n: usize) -> Topo {
        let online: Vec<RawCpu> = (0..n)
            .map(|cpu| RawCpu {
                cpu,
                node: 0,
                llc_key: 7,
                core_key: cpu,
            })
            .collect();
        Topo::from_raw(&(0..n).collect::<Vec<_>>(), &online).unwrap()
    }

    #[test]
    fn several_llcs_in_a_node() {
        // one LLC per node, or one LLC in all: nothing to gather
        assert!(!two_node_smt().node_has_several_llcs());
        assert!(!one_llc(8).node_has_several_llcs());
        // spr-1n2llc: one node, two LLCs
        let online: Vec<RawCpu> = (0..8)
            .map(|cpu| RawCpu {
                cpu,
                node: 0,
                llc_key: cpu / 4,
                core_key: cpu,
            })
            .collect();
        let t = Topo::from_raw(&(0..8).collect::<Vec<_>>(), &online).unwrap();
        assert!(t.node_has_several_llcs());
    }

    fn ov(llcs: &[&str]) -> Override {
        Override {
            llcs: llcs.iter().map(|s| s.to_string()).collect(),
            comment: None,
        }
    }

    #[test]
    fn cpulist_ok() {
        assert_eq!(parse_cpulist("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cpulist(" 0-1,5, 7-8\n").unwrap(), vec![0, 1, 5, 7, 8]);
        assert_eq!(parse_cpulist("4").unwrap(), vec![4]);
        assert_eq!(parse_cpulist("3-3").unwrap(), vec![3]);
    }

    #[test]
    fn cpulist_bad() {
        for bad in ["", " ", "a", "1-", "-1", "3-1", "1,,2", "1,", "0x3", "1-2-3", "+1"] {
            assert!(parse_cpulist(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_cpulist("0-99999999").is_err());
    }

    #[test]
    fn cpulist_roundtrip() {
        let cpus = vec![0, 1, 2, 3, 8, 10, 11];
        assert_eq!(format_cpulist(&cpus), "0-3,8,10-11");
        assert_eq!(parse_cpulist(&format_cpulist(&cpus)).unwrap(), cpus);
        assert_eq!(format_cpulist(&[]), "");
    }

    #[test]
    fn raw_dense_numbering() {
        // sparse kernel ids: node 3 and node 8, LLC keys 40 and 12
        let online = vec![
            RawCpu { cpu: 0, node: 8, llc_key: 40, core_key: 5 },
            RawCpu { cpu: 1, node: 3, llc_key: 12, core_key: 9 },
        ];
        let t = Topo::from_raw(&[0, 1], &online).unwrap();
        assert_eq!(t.nr_nodes, 2);
        assert_eq!(t.nr_llcs, 2);
        // node 3 sorts first, and LLCs are ordered by node
        let p0 = t.cpus[0].as_ref().unwrap();
        let p1 = t.cpus[1].as_ref().unwrap();
        assert_eq!((p1.node, p1.llc), (0, 0));
        assert_eq!((p0.node, p0.llc), (1, 1));
    }

    #[test]
    fn raw_offline_cpu_is_guessed() {
        let online = vec![RawCpu { cpu: 0, node: 0, llc_key: 0, core_key: 0 }];
        let t = Topo::from_raw(&[0, 1], &online).unwrap();
        assert_eq!(t.nr_llcs, 2);
        let p1 = t.cpus[1].as_ref().unwrap();
        assert!(!p1.known);
        assert_eq!(p1.llc, 1);
        assert_eq!(t.to_bpf().cpu_known, vec![1, 0]);
    }

    #[test]
    fn raw_too_many_cpus() {
        let possible: Vec<usize> = (0..MAX_CPUS + 1).collect();
        assert!(Topo::from_raw(&possible, &[]).is_err());
    }

    #[test]
    fn bpf_arrays() {
        let b = two_node_smt().to_bpf();
        assert_eq!(b.nr_cpus, 8);
        assert_eq!(b.nr_llcs, 2);
        assert_eq!(b.nr_nodes, 2);
        assert_eq!(b.cpu_llc, vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(b.cpu_node, vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(b.llc_off, vec![0, 4, 8]);
        assert_eq!(b.llc_cpus, vec![0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(b.node_off, vec![0, 4, 8]);
        // --sparse-idle: one line per 4-CPU LLC, bits 0-3 of each
        assert_eq!((b.llc_line_off.clone(), b.line_llc.clone()), (vec![0, 1, 2], vec![0, 1]));
        assert_eq!(b.cpu_idle_slot, vec![0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!((b.node_line_off.clone(), b.node_lines.clone()), (vec![0, 1, 2], vec![0, 1]));
        assert_eq!(b.cpu_sibs[0], vec![1]);
        assert_eq!(b.cpu_sibs[5], vec![4]);
        assert_eq!(b.cpu_core[2], b.cpu_core[3]);
        assert_ne!(b.cpu_core[1], b.cpu_core[2]);
    }

    /// The CPU lists the BPF walks use (push's sparse idle search, the
    /// stealers): every possible CPU exactly once in its LLC's slice and
    /// once in its node's, offsets ascending and within MAX_CPUS, a node's
    /// slice grouped LLC by LLC. On a 512-CPU machine (8 nodes x 2 LLCs x
    /// 16 cores x 2 SMT, siblings n and n+256 as on x86) to catch any
    /// 64-CPU assumption.
    #[test]
    fn bpf_lists_512_cpus() {
        let online: Vec<RawCpu> = (0..512)
            .map(|cpu| {
                let core = cpu % 256;
                RawCpu { cpu, node: core / 32, llc_key: core / 16, core_key: core }
            })
            .collect();
        let t = Topo::from_raw(&(0..512).collect::<Vec<_>>(), &online).unwrap();
        let b = t.to_bpf();
        assert_eq!((b.nr_cpus, b.nr_llcs, b.nr_nodes), (512, 16, 8));
        assert_eq!(b.llc_off.len(), 17);
        assert_eq!(b.node_off.len(), 9);
        assert_eq!(*b.llc_off.last().unwrap(), 512);
        assert_eq!(*b.node_off.last().unwrap(), 512);
        assert!(b.llc_off.windows(2).all(|w| w[0] < w[1]));
        assert!(b.node_off.windows(2).all(|w| w[0] < w[1]));
        assert!(b.llc_cpus.len() <= MAX_CPUS && b.node_cpus.len() <= MAX_CPUS);
        let mut seen_llc = vec![0; 512];
        for llc in 0..16 {
            let cpus = &b.llc_cpus[b.llc_off[llc] as usize..b.llc_off[llc + 1] as usize];
            assert_eq!(cpus.len(), 32, "LLC {llc}");
            for &c in cpus {
                assert_eq!(b.cpu_llc[c as usize] as usize, llc);
                seen_llc[c as usize] += 1;
                // the sibling is in the same LLC: a core is idle-checked
                // from one LLC walk
                for &s in &b.cpu_sibs[c as usize] {
                    assert_eq!(b.cpu_llc[s as usize] as usize, llc);
                }
            }
        }
        assert!(seen_llc.iter().all(|&n| n == 1));
        let mut seen_node = vec![0; 512];
        for node in 0..8 {
            let cpus = &b.node_cpus[b.node_off[node] as usize..b.node_off[node + 1] as usize];
            assert_eq!(cpus.len(), 64, "node {node}");
            let llcs: Vec<u16> = cpus.iter().map(|&c| b.cpu_llc[c as usize]).collect();
            // grouped: the LLC index never goes back
            assert!(llcs.windows(2).all(|w| w[0] <= w[1]), "node {node}: {llcs:?}");
            for &c in cpus {
                assert_eq!(b.cpu_node[c as usize] as usize, node);
                seen_node[c as usize] += 1;
            }
        }
        assert!(seen_node.iter().all(|&n| n == 1));
        // CPU 300 is core 44's second thread: LLC 2, node 1, sibling 44
        assert_eq!((b.cpu_llc[300], b.cpu_node[300]), (2, 1));
        assert_eq!(b.cpu_sibs[300], vec![44]);
    }

    #[test]
    fn override_splits_llc() {
        let mut t = one_llc(8);
        t.apply_override(&ov(&["4-7", "0-3"])).unwrap();
        assert!(t.overridden);
        assert_eq!(t.nr_llcs, 2);
        let b = t.to_bpf();
        // file order is kept: "4-7" is LLC 0
        assert_eq!(b.cpu_llc, vec![1, 1, 1, 1, 0, 0, 0, 0]);
        assert_eq!(b.llc_off, vec![0, 4, 8]);
        assert_eq!(b.llc_cpus, vec![4, 5, 6, 7, 0, 1, 2, 3]);
        // the node list still holds all 8, grouped by LLC
        assert_eq!(b.node_off, vec![0, 8]);
        assert_eq!(b.node_cpus, vec![4, 5, 6, 7, 0, 1, 2, 3]);
    }

    #[test]
    fn override_errors() {
        let t = one_llc(8);
        let cases: &[(&[&str], &str)] = &[
            (&[], "empty"),
            (&["0-3", "4-8"], "CPU 8 does not exist"),
            (&["0-4", "4-7"], "CPU 4 is listed twice (llcs[0] and llcs[1])"),
            (&["0-3,3", "4-7"], "CPU 3 is listed twice"),
            (&["0-3", "4-6"], "CPUs in no LLC: 7 "),
            (&["0-3", "4-x"], "llcs[1] \"4-x\""),
            (&["0-3", "7-4"], "reversed"),
        ];
        for (llcs, want) in cases {
            let mut t = t.clone();
            let err = t.apply_override(&ov(llcs)).unwrap_err();
            assert!(err.contains(want), "{llcs:?}: got {err:?}, want {want:?}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn override_spanning_nodes() {
        let mut t = two_node_smt();
        let err = t.apply_override(&ov(&["0-5", "6-7"])).unwrap_err();
        assert!(err.contains("spans two NUMA nodes"), "{err}");
        // within nodes it is fine
        let mut t = two_node_smt();
        t.apply_override(&ov(&["0-1", "2-3", "4-5", "6-7"])).unwrap();
        assert_eq!(t.nr_llcs, 4);
        assert_eq!(t.nr_nodes, 2);
    }

    #[test]
    fn override_split_core() {
        let mut t = two_node_smt();
        let err = t.apply_override(&ov(&["0-2", "3", "4-7"])).unwrap_err();
        assert!(err.contains("SMT siblings"), "{err}");
    }

    #[test]
    fn override_json() {
        let o = parse_override(r#"{"llcs": ["0-3", "4-7"], "comment": "qemu"}"#).unwrap();
        assert_eq!(o.llcs, vec!["0-3", "4-7"]);
        assert!(parse_override(r#"{"llcs": ["0-3"], "extra": 1}"#).is_err());
        assert!(parse_override(r#"{"llcs": "0-3"}"#).is_err());
        assert!(parse_override(r#"{"comment": "x"}"#).is_err());
        assert!(parse_override("{").is_err());
    }

    #[test]
    fn override_file_error_names_file() {
        let dir = std::env::temp_dir().join(format!("scx_locality_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.json");
        std::fs::write(&path, r#"{"llcs": ["0-3"]}"#).unwrap();
        let mut t = one_llc(8);
        let err = apply_override_file(&mut t, &path).unwrap_err();
        assert!(err.starts_with(&path.display().to_string()), "{err}");
        assert!(err.contains("CPUs in no LLC: 4-7"), "{err}");
        let missing = dir.join("missing.json");
        assert!(apply_override_file(&mut t, &missing).unwrap_err().contains("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
