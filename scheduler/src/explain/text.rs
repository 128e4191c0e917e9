// SPDX-License-Identifier: GPL-2.0-only
//! explain's human layout: one block per report, pinned by the tests below.
//! Shares are percent; a thread's node and LLC columns list only where it ran.

use std::fmt::Write;

use super::report::{Report, TopReport};
use crate::comm::printable;

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// "0:75% 1:25%", every index.
fn split_all(v: &[f64]) -> String {
    v.iter().enumerate().map(|(i, &x)| format!("{i}:{}", pct(x))).collect::<Vec<_>>().join(" ")
}

/// "3:60% 5:40%", only indexes with a share; "-" if none.
fn split_some(v: &[f64]) -> String {
    let s: Vec<String> = v.iter().enumerate().filter(|(_, &x)| x > 0.0).map(|(i, &x)| format!("{i}:{}", pct(x))).collect();
    if s.is_empty() {
        "-".into()
    } else {
        s.join(" ")
    }
}

fn opt(v: i32) -> String {
    if v < 0 {
        "-".into()
    } else {
        v.to_string()
    }
}

pub fn report(r: &Report) -> String {
    let mut o = String::new();
    let on = r.threads.iter().filter(|t| t.on_scx).count();
    let _ = writeln!(o, "pid {} ({})  scheduler {}  last {:.1} s", r.pid, printable(&r.comm), r.scheduler, r.interval_s);
    let _ = writeln!(
        o,
        "threads: {} ({} under sched_ext){}",
        r.threads.len(),
        on,
        if r.threads_not_sampled > 0 { format!(", {} more not sampled", r.threads_not_sampled) } else { String::new() }
    );
    let _ = writeln!(
        o,
        "  {:>7} {:<16} {:<5} {:>4} {:>4} {:>4} {:>9}  {:<14} {:<14} home",
        "tid", "comm", "state", "cpu", "llc", "node", "run_ms", "node share", "llc share"
    );
    for t in &r.threads {
        let _ = writeln!(
            o,
            "  {:>7} {:<16} {:<5} {:>4} {:>4} {:>4} {:>9.1}  {:<14} {:<14} {}{}",
            t.tid,
            printable(&t.comm),
            t.state,
            opt(t.cpu),
            opt(t.llc),
            opt(t.node),
            t.run_ms,
            split_some(&t.node_share),
            split_some(&t.llc_share),
            opt(t.thread_home),
            if t.on_scx { String::new() } else { format!("  ({}: not under sched_ext)", t.policy) }
        );
    }
    let p = &r.process;
    let _ = writeln!(
        o,
        "process: ran {:.1} ms; per node {}; per LLC {}; threads now per node {:?}",
        p.run_ms,
        split_all(&p.node_share),
        split_some(&p.llc_share),
        p.threads_per_node
    );
    let _ = writeln!(o, "home node: {}", r.home.text);
    let m = &r.memory_home;
    if m.tracked {
        let _ = writeln!(
            o,
            "memory agent: busiest node {}, active nodes {:?}, locality {}",
            opt(m.node),
            m.active,
            if m.locality < 0.0 { "unknown".into() } else { pct(m.locality) }
        );
    }
    let _ = writeln!(o, "preferred LLC: {}", r.pref_llc.text);
    let mm = &r.memory;
    let _ = writeln!(o, "memory (numa_maps, MB; --memory={}, migrated {:.1} MB):", mm.mode, mm.migrated_mb);
    let _ = writeln!(o, "  {:>4} {:>10} {:>10} {:>10} {:>10}", "node", "private", "shared", "file", "bound");
    for n in &mm.nodes {
        let _ = writeln!(
            o,
            "  {:>4} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            n.node, n.private_mb, n.shared_mb, n.file_mb, n.bound_mb
        );
    }
    let _ = writeln!(o, "next: {}", r.plan.text);
    for mv in &r.plan.next {
        let to = if mv.to < 0 { "its active nodes".to_string() } else { format!("node {}", mv.to) };
        let _ = writeln!(o, "  {:.1} MB node {} -> {}", mv.mb, mv.from, to);
    }
    for l in &r.plan.left_alone {
        if l.mb > 0.0 {
            let _ = writeln!(o, "left alone: {:.1} MB {}", l.mb, l.text);
        } else {
            let _ = writeln!(o, "left alone: {}", l.text);
        }
    }
    let d = &r.decisions;
    if d.rate_per_cpu == 0 {
        let _ = writeln!(o, "decisions: not recorded (--decision-rate=0)");
    } else if d.items.is_empty() {
        let _ = writeln!(o, "decisions: none recorded for its threads");
    } else {
        let _ = writeln!(
            o,
            "last decisions ({} recorded; at most {} per second per CPU):",
            d.items.len(),
            d.rate_per_cpu
        );
        for i in &d.items {
            let to = if i.to_cpu < 0 { "another node".to_string() } else { format!("cpu {} (node {})", i.to_cpu, i.to_node) };
            let what = match i.kind.as_str() {
                "refused" => "kept",
                "move_node" => "moved node",
                _ => "moved LLC",
            };
            let _ = writeln!(
                o,
                "  {:>8.0} ms ago  tid {:>7}  {:<10}  cpu {} (node {}) -> {}  {}: {}",
                i.age_ms, i.tid, what, i.from_cpu, i.from_node, to, i.rule, i.text
            );
        }
    }
    o
}

pub fn top(t: &TopReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "least local of {} processes the memory agent tracks (--memory={}; 16 MB of anonymous memory or more):",
        t.tracked, t.memory_mode
    );
    let _ = writeln!(
        o,
        "  {:>7} {:<16} {:>7} {:>9} {:>9} {:>8} {:<12} {:>4}  why",
        "pid", "comm", "threads", "rss_mb", "remote_mb", "locality", "per node", "home"
    );
    for p in &t.procs {
        let _ = writeln!(
            o,
            "  {:>7} {:<16} {:>7} {:>9.1} {:>9.1} {:>8} {:<12} {:>4}  {}",
            p.pid,
            printable(&p.comm),
            p.threads,
            p.rss_mb,
            p.remote_mb,
            if p.locality < 0.0 { "-".into() } else { pct(p.locality) },
            format!("{:?}", p.threads_per_node),
            opt(p.home),
            p.text
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::report::*;

    fn sample() -> Report {
        Report {
            version: SCHEMA_VERSION,
            pid: 300,
            comm: "hackbench".into(),
            scheduler: "locality_0.1.0_x86_64".into(),
            interval_s: 1.0,
            nr_nodes: 2,
            nr_llcs: 2,
            threads: vec![Thread {
                tid: 301,
                comm: "hackbench".into(),
                policy: "SCHED_OTHER".into(),
                on_scx: true,
                state: "R".into(),
                cpu: 2,
                llc: 0,
                node: 0,
                run_ms: 812.25,
                node_share: vec![1.0, 0.0],
                llc_share: vec![1.0, 0.0],
                thread_home: -1,
            }],
            threads_not_sampled: 0,
            process: Share {
                run_ms: 812.25,
                node_share: vec![1.0, 0.0],
                llc_share: vec![1.0, 0.0],
                threads_per_node: vec![1, 0],
            },
            home: Reason { value: -1, reason: "not_tracked".into(), text: "none: not tracked".into(), thread_homes: vec![] },
            memory_home: MemHome { tracked: false, node: -1, active: vec![], locality: -1.0 },
            pref_llc: Reason { value: -1, reason: "cache_off".into(), text: "none: off".into(), thread_homes: vec![] },
            memory: Memory {
                mode: "spread".into(),
                nodes: vec![
                    NodeMem { node: 0, private_mb: 1.5, shared_mb: 0.0, file_mb: 2.0, bound_mb: 0.0 },
                    NodeMem { node: 1, private_mb: 0.0, shared_mb: 0.0, file_mb: 0.0, bound_mb: 0.0 },
                ],
                ..Default::default()
            },
            plan: Plan {
                reason: "not_tracked".into(),
                text: "nothing: not tracked".into(),
                left_alone: vec![LeftAlone { reason: "file".into(), mb: 2.0, text: "file pages: never moved".into() }],
                ..Default::default()
            },
            decisions: Decisions {
                rate_per_cpu: 100,
                items: vec![
                    DecisionItem {
                        age_ms: 1520.0,
                        tid: 301,
                        kind: "move_node".into(),
                        from_cpu: 5,
                        to_cpu: 2,
                        from_node: 1,
                        to_node: 0,
                        rule: "xnode_wake_follow".into(),
                        text: "wake-follow".into(),
                    },
                    DecisionItem {
                        age_ms: 20.0,
                        tid: 301,
                        kind: "refused".into(),
                        from_cpu: 2,
                        to_cpu: -1,
                        from_node: 0,
                        to_node: -1,
                        rule: "numa_push_kept".into(),
                        text: "kept".into(),
                    },
                ],
            },
        }
    }

    #[test]
    fn report_layout() {
        let want = "\
pid 300 (hackbench)  scheduler locality_0.1.0_x86_64  last 1.0 s
threads: 1 (1 under sched_ext)
      tid comm             state  cpu  llc node    run_ms  node share     llc share      home
      301 hackbench        R        2    0    0     812.2  0:100%         0:100%         -
process: ran 812.2 ms; per node 0:100% 1:0%; per LLC 0:100%; threads now per node [1, 0]
home node: none: not tracked
preferred LLC: none: off
memory (numa_maps, MB; --memory=spread, migrated 0.0 MB):
  node    private     shared       file      bound
     0        1.5        0.0        2.0        0.0
     1        0.0        0.0        0.0        0.0
next: nothing: not tracked
left alone: 2.0 MB file pages: never moved
last decisions (2 recorded; at most 100 per second per CPU):
      1520 ms ago  tid     301  moved node  cpu 5 (node 1) -> cpu 2 (node 0)  xnode_wake_follow: wake-follow
        20 ms ago  tid     301  kept        cpu 2 (node 0) -> another node  numa_push_kept: kept
";
        assert_eq!(report(&sample()), want);
    }

    #[test]
    fn top_layout() {
        let t = TopReport {
            version: SCHEMA_VERSION,
            memory_mode: "spread".into(),
            tracked: 3,
            procs: vec![TopProc {
                pid: 42,
                comm: "memkern".into(),
                threads: 8,
                threads_per_node: vec![4, 4],
                home: -1,
                home_reason: "no_room".into(),
                active: vec![0, 1],
                rss_mb: 256.0,
                remote_mb: 0.0,
                locality: 0.97,
                text: "locality 97%".into(),
            }],
        };
        let want = "\
least local of 3 processes the memory agent tracks (--memory=spread; 16 MB of anonymous memory or more):
      pid comm             threads    rss_mb remote_mb locality per node     home  why
       42 memkern                8     256.0       0.0      97% [4, 4]          -  locality 97%
";
        assert_eq!(top(&t), want);
    }

    #[test]
    fn json_round_trip() {
        let r = sample();
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&j).unwrap(), r);
        // thread_homes is left out when empty
        assert!(!j.contains("thread_homes"));
    }
}
