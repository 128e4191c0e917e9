// SPDX-License-Identifier: GPL-2.0-only
//! Process names (comm) made safe to print.
//!
//! A process chooses its own name (prctl(PR_SET_NAME), or the file name it
//! was exec'd from): up to 15 bytes, any byte but NUL, not necessarily
//! UTF-8. Printed as they are, control characters would reach the log, a
//! terminal running `--monitor` or a journal reader (escape sequences,
//! a fake new line). So every name the agent reads is escaped once, where it
//! is read (escape()): control characters, DEL and bytes that are not UTF-8
//! become `\xNN`, a backslash `\\`; everything else, other scripts included,
//! stays as it is. The escaped form is what the stats carry (JSON too) and
//! what the logs and tables print; printable() escapes again only what a
//! string received from elsewhere (the --monitor client reads another
//! process's JSON) still holds of control characters, and leaves an escaped
//! name as it is.

/// `raw` (a comm as the kernel holds it) as printable text.
pub fn escape(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while !rest.is_empty() {
        let (good, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (g, b) = rest.split_at(e.valid_up_to());
                // valid_up_to() ends where the UTF-8 is valid
                (std::str::from_utf8(g).unwrap_or_default(), b)
            }
        };
        for c in good.chars() {
            push_char(&mut out, c, true);
        }
        if let Some((&b, tail)) = bad.split_first() {
            out.push_str(&format!("\\x{b:02x}"));
            rest = tail;
        } else {
            rest = &[];
        }
    }
    out
}

/// `s` with its control characters escaped (a name already escaped by
/// escape() comes back unchanged).
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_char(&mut out, c, false);
    }
    out
}

fn push_char(out: &mut String, c: char, backslash: bool) {
    if c.is_control() {
        // C0, DEL and C1: all below 0x100
        out.push_str(&format!("\\x{:02x}", c as u32));
    } else if backslash && c == '\\' {
        out.push_str("\\\\");
    } else {
        out.push(c);
    }
}

/// The comm in a /proc/PID/stat line, raw: between the first '(' and the
/// last ')' (a name may hold parentheses and spaces itself).
pub fn from_stat(stat: &[u8]) -> Option<&[u8]> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    (close > open).then(|| &stat[open + 1..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape(b"memlocal"), "memlocal");
        assert_eq!(escape("kworker/ü:1".as_bytes()), "kworker/ü:1");
        assert_eq!(escape(b"a\nb"), "a\\x0ab");
        assert_eq!(escape(b"\x1b[2J"), "\\x1b[2J");
        assert_eq!(escape(b"del\x7f"), "del\\x7f");
        // not UTF-8: each bad byte on its own, the rest kept
        assert_eq!(escape(b"x\xff\xfey"), "x\\xff\\xfey");
        assert_eq!(escape(b"\xc3"), "\\xc3");
        // a backslash is doubled: the escaped form cannot be forged
        assert_eq!(escape(b"a\\x0a"), "a\\\\x0a");
        // C1 controls too
        assert_eq!(escape("a\u{9b}b".as_bytes()), "a\\x9bb");
    }

    #[test]
    fn printable_leaves_escaped_names_alone() {
        for raw in [&b"a\nb"[..], b"x\xffy", b"a\\b", b"plain"] {
            let e = escape(raw);
            assert_eq!(printable(&e), e);
        }
        assert_eq!(printable("a\rb\u{1b}"), "a\\x0db\\x1b");
    }

    #[test]
    fn comm_of_a_stat_line() {
        assert_eq!(from_stat(b"12 (a (b) c) R 1 2"), Some(&b"a (b) c"[..]));
        assert_eq!(from_stat(b"12 (x\n) S"), Some(&b"x\n"[..]));
        assert_eq!(from_stat(b"12 x"), None);
    }
}
