// SPDX-License-Identifier: GPL-2.0-only
//! The agent's half of the decision record (bpf/decide.bpf.c), for
//! `scx_locality explain`.
//!
//! The BPF side writes, at a bounded rate per CPU, one record per move a
//! task made across LLCs or nodes (with the rule that sent it) and per move
//! a rule refused, into a ring buffer. The main loop drains it every second
//! and before it answers explain (`Record::drain()`: no thread of its own,
//! no wake-up per record). Kept: the last PER_PROC records of each process,
//! for the MAX_PROCS processes with the newest records.
//!
//! Knob: --decision-rate. Stats: decide_* (stats.h) and their cost,
//! decide_cost_ms / decide_cost_pct (stats.rs).

use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use crate::bpf_intf as intf;

/// Records kept per process.
pub const PER_PROC: usize = 32;
/// Processes kept; the one with the oldest newest record goes first.
pub const MAX_PROCS: usize = 1024;

/// One decoded record (intf.h struct decision).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// CLOCK_MONOTONIC, ns
    pub at_ns: u64,
    pub pid: u32,
    pub tgid: u32,
    pub from_cpu: i32,
    /// -1: towards another node, no CPU chosen
    pub to_cpu: i32,
    pub kind: Kind,
    /// the stats.h counter of the rule that decided (0 for a move: the
    /// wake-up's idle-CPU search)
    pub rule: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    MoveLlc,
    MoveNode,
    Refused,
}

impl Kind {
    fn from_raw(k: u32) -> Option<Kind> {
        match k {
            intf::decision_kind_DECIDE_MOVE_LLC => Some(Kind::MoveLlc),
            intf::decision_kind_DECIDE_MOVE_NODE => Some(Kind::MoveNode),
            intf::decision_kind_DECIDE_REFUSED => Some(Kind::Refused),
            _ => None,
        }
    }
}

/// The record's layout, read field by field (native endian, as written).
pub fn decode(b: &[u8]) -> Option<Decision> {
    if b.len() < std::mem::size_of::<intf::decision>() {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    Some(Decision {
        at_ns: u64::from_ne_bytes(b[0..8].try_into().unwrap()),
        pid: u32_at(8),
        tgid: u32_at(12),
        from_cpu: u32_at(16) as i32,
        to_cpu: u32_at(20) as i32,
        kind: Kind::from_raw(u32_at(24))?,
        rule: u32_at(28),
    })
}

/// The last records per process.
#[derive(Clone, Debug, Default)]
pub struct Store {
    procs: BTreeMap<u32, VecDeque<Decision>>,
    /// records that did not decode (a layout mismatch would show here)
    pub bad: u64,
}

impl Store {
    pub fn push(&mut self, d: Decision) {
        let q = self.procs.entry(d.tgid).or_default();
        if q.len() == PER_PROC {
            q.pop_front();
        }
        q.push_back(d);
        if self.procs.len() > MAX_PROCS {
            if let Some(oldest) = self
                .procs
                .iter()
                .min_by_key(|(_, q)| q.back().map(|d| d.at_ns).unwrap_or(0))
                .map(|(&t, _)| t)
            {
                self.procs.remove(&oldest);
            }
        }
    }

    /// The records of process @tgid, oldest first.
    #[cfg(test)]
    pub fn of(&self, tgid: u32) -> Vec<Decision> {
        self.procs.get(&tgid).map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }
}

/// The ring buffer and what was drained from it.
pub struct Record {
    rb: libbpf_rs::RingBuffer<'static>,
    store: Rc<RefCell<Store>>,
}

impl Record {
    pub fn new(map: &dyn libbpf_rs::MapCore) -> Result<Record> {
        let store = Rc::new(RefCell::new(Store::default()));
        let s = store.clone();
        let mut b = libbpf_rs::RingBufferBuilder::new();
        b.add(map, move |bytes: &[u8]| {
            let mut st = s.borrow_mut();
            match decode(bytes) {
                Some(d) => st.push(d),
                None => st.bad += 1,
            }
            0
        })?;
        Ok(Record { rb: b.build()?, store })
    }

    /// Take every record written so far.
    pub fn drain(&self) -> Result<()> {
        self.rb.consume()?;
        Ok(())
    }

    /// Every process's records (explain --top counts them).
    pub fn all(&self) -> BTreeMap<u32, Vec<Decision>> {
        self.store.borrow().procs.iter().map(|(&t, q)| (t, q.iter().cloned().collect())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: u32, tgid: u32, at: u64) -> Vec<u8> {
        let mut b = vec![];
        b.extend(at.to_ne_bytes());
        b.extend(7u32.to_ne_bytes());
        b.extend(tgid.to_ne_bytes());
        b.extend(3i32.to_ne_bytes());
        b.extend((-1i32).to_ne_bytes());
        b.extend(kind.to_ne_bytes());
        b.extend(42u32.to_ne_bytes());
        b
    }

    #[test]
    fn decodes_the_bpf_layout() {
        assert_eq!(raw(1, 5, 9).len(), std::mem::size_of::<intf::decision>());
        let d = decode(&raw(intf::decision_kind_DECIDE_REFUSED, 5, 9)).unwrap();
        assert_eq!(
            d,
            Decision { at_ns: 9, pid: 7, tgid: 5, from_cpu: 3, to_cpu: -1, kind: Kind::Refused, rule: 42 }
        );
        assert!(decode(&raw(99, 5, 9)).is_none());
        assert!(decode(&[0u8; 8]).is_none());
    }

    #[test]
    fn keeps_the_last_per_process_and_the_newest_processes() {
        let mut s = Store::default();
        for i in 0..(PER_PROC as u64 + 5) {
            s.push(decode(&raw(1, 1, i)).unwrap());
        }
        let v = s.of(1);
        assert_eq!(v.len(), PER_PROC);
        assert_eq!(v[0].at_ns, 5);
        for t in 2..(MAX_PROCS as u32 + 2) {
            s.push(decode(&raw(1, t, 1000 + t as u64)).unwrap());
        }
        // process 1 had the oldest newest record: it went
        assert!(s.of(1).is_empty());
        assert_eq!(s.procs.len(), MAX_PROCS);
        assert_eq!(s.of(5).len(), 1);
    }
}
