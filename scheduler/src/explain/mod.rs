// SPDX-License-Identifier: GPL-2.0-only
//! `scx_locality explain PID` and `explain --top`: why a process's threads
//! and pages are where they are.
//!
//! Idea: the scheduler's choices about one process are spread over BPF
//! maps, the memory thread's last pass and /proc; explain asks the running
//! scheduler, which answers with its view (home plan and the rule's reason
//! per process, memory/home.rs reasons(); the memory agent's home and active
//! nodes, locality, chunk counts; the cache-aware policy's preferred LLC;
//! its settings and topology) and reads /proc for the rest.
//!
//! How: a subcommand (its flags stay out of the scheduler's --help). The
//! client (this file) checks sysfs and /proc for the one-line errors below,
//! then sends one request on the scx_stats socket the scheduler already
//! serves (/var/run/scx/root/stats): target "explain" with `pid` and
//! `interval_ms`, or "explain_top" with `limit`. The server's reader thread
//! for the connection (serve.rs) asks the main loop for the view, a clone
//! handed over its channel, and does the slow reads itself, never on the
//! main loop: every STEP_MS (100 ms) over the interval each thread's
//! /proc/PID/task/TID/stat (CPU, policy) and schedstat (runtime); then
//! numa_maps, status and statm once.
//!
//! Per-thread shares of the interval: from those /proc reads (not from the
//! memory agent's per-thread runtime, which it keeps per interval and
//! charges to the last CPU only): each 100 ms step's runtime delta is
//! charged to the CPU the thread is on, or last ran on, at the end of the
//! step; a thread that moved within a step is charged to the last CPU.
//! Cost: two file reads per thread per step on the reader's thread, at most
//! MAX_THREADS (256) threads sampled.
//!
//! Knobs: `--json` (the schema: scheduler/README.md, "scx_locality
//! explain"), `--watch SECS` (repeat; the shares are of each SECS),
//! `--interval-ms` (one-shot sampling interval, default 1000), `--top`
//! with `--limit N`.
//!
//! Modules: report.rs (JSON and the view), serve.rs (the reader and the
//! rules that give reasons), procs.rs (/proc parsers), text.rs (layout).

pub mod procs;
pub mod report;
pub mod serve;
pub mod text;

pub use report::AgentView;

use anyhow::{Context, Result};
use scx_stats::prelude::*;
use std::io::Write;
use std::path::PathBuf;

use crate::exit::{fatal, EXIT_BUSY, EXIT_ERROR, EXIT_NO_SCHED_EXT, EXIT_OK};

pub const EXIT_NO_PID: i32 = 10;
pub const EXIT_NOT_SCX: i32 = 11;
pub const EXIT_NOT_RUNNING: i32 = 12;
pub const EXIT_NOT_ALLOWED: i32 = 13;

const EXIT_CODES: &str = "\
Exit codes:
  0   done
  1   other error
  2   bad command line
  4   kernel without sched_ext
  5   another sched_ext scheduler is loaded
  10  no such process
  11  the process is not under sched_ext (all its threads real-time or deadline)
  12  scx_locality is not running (sched_ext disabled, or no stats socket)
  13  not allowed to read the process, or to use the scheduler's socket
Each error is one line on stderr starting `scx_locality: error: `.";

#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct ExplainOpts {
    /// Process id (a thread id names its process).
    #[arg(required_unless_present = "top", conflicts_with = "top")]
    pub pid: Option<u32>,

    /// List the processes whose placement is least local (lowest memory
    /// locality, threads over most nodes) instead, with why.
    #[arg(long)]
    pub top: bool,

    /// --top: how many processes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,

    /// Print JSON: one object on one line (one line per report with
    /// --watch); schema in scheduler/README.md.
    #[arg(long)]
    pub json: bool,

    /// Repeat every SECS seconds until interrupted; the shares are of
    /// each SECS (1 to 3600).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub watch: Option<u64>,

    /// Interval the shares of a one-shot explain are of, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub interval_ms: u64,
}

/// Where the client looks (tests point them elsewhere).
struct Paths {
    sched_ext: PathBuf,
    proc: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Paths { sched_ext: "/sys/kernel/sched_ext".into(), proc: "/proc".into() }
    }
}

fn io_kind(e: &anyhow::Error) -> Option<std::io::ErrorKind> {
    e.chain().find_map(|c| c.downcast_ref::<std::io::Error>()).map(|io| io.kind())
}

/// The checks that give the one-line errors, in order: sched_ext, our
/// scheduler running, the process (resolved to its tgid), the right to read
/// it, and one thread under sched_ext. Some(tgid) if a pid was given.
fn preflight(p: &Paths, pid: Option<u32>) -> Result<Option<u32>> {
    if !p.sched_ext.exists() {
        return Err(fatal(EXIT_NO_SCHED_EXT, "this kernel has no sched_ext (/sys/kernel/sched_ext missing)"));
    }
    let state = std::fs::read_to_string(p.sched_ext.join("state")).unwrap_or_default().trim().to_string();
    if state != "enabled" {
        return Err(fatal(EXIT_NOT_RUNNING, format!("scx_locality is not running (sched_ext state: {state})")));
    }
    let ops = std::fs::read_to_string(p.sched_ext.join("root/ops")).unwrap_or_default().trim().to_string();
    if !ops.starts_with("locality") {
        return Err(fatal(
            EXIT_BUSY,
            format!("another sched_ext scheduler is loaded: \"{ops}\" (explain asks scx_locality)"),
        ));
    }
    let Some(pid) = pid else { return Ok(None) };
    let dir = p.proc.join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status"))
        .map_err(|_| fatal(EXIT_NO_PID, format!("no such process: {pid}")))?;
    let tgid = procs::parse_tgid(&status).unwrap_or(pid);
    let pdir = p.proc.join(tgid.to_string());
    if let Err(e) = std::fs::File::open(pdir.join("numa_maps")) {
        if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
            return Err(fatal(
                EXIT_NOT_ALLOWED,
                format!("not allowed to read process {tgid} (/proc/{tgid}/numa_maps: permission denied): run as root or as its owner"),
            ));
        }
    }
    // (policy, under sched_ext) per thread: ext.enabled where the kernel
    // prints it, else by the policy
    let threads: Vec<(u32, bool)> = std::fs::read_dir(pdir.join("task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let s = procs::parse_stat(&std::fs::read(e.path().join("stat")).ok()?)?;
                    let ext = std::fs::read_to_string(e.path().join("sched")).ok().and_then(|t| procs::parse_ext_enabled(&t));
                    Some((s.policy, ext.unwrap_or(procs::policy(s.policy).1)))
                })
                .collect()
        })
        .unwrap_or_default();
    if threads.is_empty() && !pdir.exists() {
        return Err(fatal(EXIT_NO_PID, format!("no such process: {pid}")));
    }
    if !threads.is_empty() && threads.iter().all(|&(_, ext)| !ext) {
        let policies: Vec<u32> = threads.iter().map(|t| t.0).collect();
        let names: std::collections::BTreeSet<&str> = policies.iter().map(|&pol| procs::policy(pol).0).collect();
        return Err(fatal(
            EXIT_NOT_SCX,
            format!(
                "process {tgid} is not under sched_ext: its threads run under {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(Some(tgid))
}

fn connect(timeout_ms: u64) -> Result<StatsClient> {
    StatsClient::new().connect(Some(timeout_ms)).map_err(|e| match io_kind(&e) {
        Some(std::io::ErrorKind::PermissionDenied) => fatal(
            EXIT_NOT_ALLOWED,
            "not allowed to use the scheduler's socket /var/run/scx/root/stats (run as root)",
        ),
        Some(std::io::ErrorKind::NotFound) | Some(std::io::ErrorKind::ConnectionRefused) => fatal(
            EXIT_NOT_RUNNING,
            "scx_locality is not running (no stats server at /var/run/scx/root/stats)",
        ),
        _ => e.context("connecting to /var/run/scx/root/stats"),
    })
}

/// One request; the server's errors as our one-line ones.
fn request<T: serde::de::DeserializeOwned>(c: &mut StatsClient, args: Vec<(&str, String)>, pid: u32) -> Result<T> {
    let args = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    c.request::<T>("stats", args).map_err(|e| match e.downcast_ref::<StatsErrno>().map(|s| s.0) {
        Some(libc::ESRCH) => fatal(EXIT_NO_PID, format!("no such process: {pid} (it exited)")),
        Some(libc::EINVAL) if format!("{e:#}").contains("unknown stat target") => fatal(
            EXIT_ERROR,
            "the running scx_locality does not serve explain (an older build: restart it)",
        ),
        _ => match e.to_string().as_str() {
            "read timed out" => fatal(EXIT_ERROR, "no answer from scx_locality in time"),
            "connection closed" => fatal(EXIT_NOT_RUNNING, "scx_locality stopped while answering"),
            _ => e.context("explain request"),
        },
    })
}

fn emit(out: &mut impl Write, json: bool, watch: bool, v: &impl serde::Serialize, text: String) -> Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(v)?)?;
    } else {
        if watch {
            writeln!(out)?;
        }
        write!(out, "{text}")?;
    }
    out.flush()?;
    Ok(())
}

/// `scx_locality explain`: the exit code, or an error (one line, its code).
pub fn run(o: &ExplainOpts) -> Result<i32> {
    let pid = preflight(&Paths::default(), o.pid)?;
    let ms = o.watch.map_or(o.interval_ms, |s| s * 1000);
    let mut c = connect(ms + 15_000)?;
    let mut out = std::io::stdout().lock();
    loop {
        let r = match pid {
            Some(pid) => {
                let r: report::Report =
                    request(&mut c, vec![("target", "explain".into()), ("pid", pid.to_string()), ("interval_ms", ms.to_string())], pid)?;
                let t = text::report(&r);
                emit(&mut out, o.json, o.watch.is_some(), &r, t)
            }
            None => {
                let r: report::TopReport =
                    request(&mut c, vec![("target", "explain_top".into()), ("limit", o.limit.to_string())], 0)?;
                let t = text::top(&r);
                emit(&mut out, o.json, o.watch.is_some(), &r, t)
            }
        };
        // a reader that stops early (`| head`) ends the watch, not an error
        if let Err(e) = r {
            if io_kind(&e) == Some(std::io::ErrorKind::BrokenPipe) {
                return Ok(EXIT_OK);
            }
            return Err(e).context("writing the report");
        }
        match o.watch {
            None => return Ok(EXIT_OK),
            // explain's request itself lasts the interval; --top's does not
            Some(s) if pid.is_none() => std::thread::sleep(std::time::Duration::from_secs(s)),
            Some(_) => {}
        }
    }
}

/// Paths in a test's directory: a fake sched_ext and /proc.
#[cfg(test)]
fn fake(root: &std::path::Path, state: &str, ops: &str) -> Paths {
    let sx = root.join("sched_ext");
    std::fs::create_dir_all(sx.join("root")).unwrap();
    std::fs::write(sx.join("state"), state).unwrap();
    std::fs::write(sx.join("root/ops"), ops).unwrap();
    Paths { sched_ext: sx, proc: root.join("proc") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::classify;

    fn code(r: Result<Option<u32>>) -> i32 {
        match r {
            Ok(_) => 0,
            Err(e) => classify(&e).0,
        }
    }

    fn task(proc_: &std::path::Path, pid: u32, tid: u32, tgid: u32, policy: u32) {
        let d = proc_.join(format!("{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        let stat = format!(
            "{tid} (w) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 50 1 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 {policy} 0 0 0"
        );
        std::fs::write(d.join("stat"), stat).unwrap();
        std::fs::write(proc_.join(format!("{pid}/status")), procs::status_text(tgid)).unwrap();
        std::fs::write(proc_.join(format!("{pid}/numa_maps")), "").unwrap();
    }

    #[test]
    fn errors_have_their_codes() {
        let dir = std::env::temp_dir().join(format!("explain-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let none = Paths { sched_ext: dir.join("nothing"), proc: dir.join("proc") };
        assert_eq!(code(preflight(&none, Some(1))), EXIT_NO_SCHED_EXT);
        assert_eq!(code(preflight(&fake(&dir, "disabled\n", ""), Some(1))), EXIT_NOT_RUNNING);
        assert_eq!(code(preflight(&fake(&dir, "enabled\n", "rusty_1.0\n"), Some(1))), EXIT_BUSY);
        let p = fake(&dir, "enabled\n", "locality_0.1.0_x86_64_unknown_linux_gnu\n");
        assert_eq!(code(preflight(&p, Some(4242))), EXIT_NO_PID);
        // --top needs no process
        assert_eq!(preflight(&p, None).unwrap(), None);
        // a fair-class thread: fine; a thread id names its process
        task(&p.proc, 50, 50, 50, 0);
        task(&p.proc, 50, 51, 50, 1);
        assert_eq!(preflight(&p, Some(50)).unwrap(), Some(50));
        std::fs::create_dir_all(p.proc.join("51")).unwrap();
        std::fs::write(p.proc.join("51/status"), procs::status_text(50)).unwrap();
        assert_eq!(preflight(&p, Some(51)).unwrap(), Some(50));
        // every thread real-time: not under sched_ext
        task(&p.proc, 60, 60, 60, 1);
        task(&p.proc, 60, 61, 60, 6);
        let e = preflight(&p, Some(60)).unwrap_err();
        assert_eq!(classify(&e), (EXIT_NOT_SCX, "process 60 is not under sched_ext: its threads run under SCHED_DEADLINE, SCHED_FIFO".into()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
