// SPDX-License-Identifier: GPL-2.0-only
//! How the agent ends: its exit codes (EXIT_CODES is the list --help
//! prints) and the error that carries one: fatal() makes it, classify()
//! turns any error into its code and the one line printed after
//! `scx_locality: error: `. Below the command line (cli.rs shows the
//! list) and the commands that end with them (main.rs, explain/, which
//! adds its own codes from 10 up).

use std::fmt;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  clean exit (SIGINT/SIGTERM detached the scheduler)
  1  other error
  2  bad command-line flag
  3  not root
  4  kernel without sched_ext (/sys/kernel/sched_ext missing)
  5  another sched_ext scheduler is already loaded
  6  bad --topology-override file
  7  scheduler ejected by the kernel (exit kind and reason are printed)
`scx_locality explain --help` lists explain's own codes.";

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_NOT_ROOT: i32 = 3;
pub const EXIT_NO_SCHED_EXT: i32 = 4;
pub const EXIT_BUSY: i32 = 5;
pub const EXIT_BAD_OVERRIDE: i32 = 6;
pub const EXIT_EJECTED: i32 = 7;

/// An error with its own exit code.
#[derive(Debug)]
struct Fatal {
    code: i32,
    msg: String,
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.msg)
    }
}

impl std::error::Error for Fatal {}

pub fn fatal(code: i32, msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Fatal {
        code,
        msg: msg.into(),
    })
}

/// Map an error to (exit code, one-line message).
pub fn classify(e: &anyhow::Error) -> (i32, String) {
    if let Some(f) = e.downcast_ref::<Fatal>() {
        return (f.code, f.msg.clone());
    }
    let msg = format!("{e:#}").replace('\n', " ");
    (EXIT_ERROR, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;

    #[test]
    fn fatal_codes() {
        let (c, m) = classify(&fatal(EXIT_BAD_OVERRIDE, "f.json: CPU 9 does not exist"));
        assert_eq!((c, m.as_str()), (6, "f.json: CPU 9 does not exist"));
        let (c, m) = classify(&anyhow!("line one\nline two").context("loading"));
        assert_eq!(c, EXIT_ERROR);
        assert!(!m.contains('\n'));
        assert!(m.starts_with("loading: "), "{m}");
    }
}
