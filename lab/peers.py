# SPDX-License-Identifier: GPL-2.0-only
"""Published sched_ext schedulers ("peers") built on demand from crates.io.

`bin/lab peers [NAME...]` runs `cargo install --locked --root <cache>/peers <crate> --version <version>` for each
named peer of lab/schedulers.toml (all of them without names), one at a time; the binaries land in
<cache>/peers/bin, which lab/image.py copies into the guest. A build takes about 5 minutes on 2 cores (less for
the second: all peers share <cache>/peers/target). The sched_ext crates' build scripts run $BPF_CLANG (default
"clang"); Debian only has clang-N, so the newest clang-N on PATH is passed as BPF_CLANG when needed.
Each build's output goes to <cache>/peers/logs/NAME.log; a failed build leaves NAME.failed there with the
error's last lines, which the bench report shows as the reason.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import image, paths, run


def root() -> Path:
    return paths.cache() / "peers"


def logs_dir() -> Path:
    return root() / "logs"


def registry_peers() -> dict[str, dict]:
    """Schedulers of lab/schedulers.toml that name a crate to build."""
    return {name: e for name, e in run.registry().items() if "crate" in e}


def binary(name: str) -> Path:
    return image.peer_bin_dir() / name


def status(name: str) -> tuple[str, str]:
    """("built", path) | ("failed", reason) | ("missing", hint)."""
    if binary(name).exists():
        return "built", str(binary(name))
    failed = logs_dir() / f"{name}.failed"
    if failed.exists():
        return "failed", failed.read_text(errors="replace").strip()
    return "missing", f"{name} is not built; run: bin/lab peers {name}"


def error_summary(log_text: str, limit: int = 5) -> str:
    """The lines of a cargo log that say what went wrong: error lines and the message under a panic (a build
    script's own error), without cargo's notes about artifacts and backtraces."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    key: list[str] = []
    for i, ln in enumerate(lines):
        if ln.startswith("error") and "intermediate artifacts" not in ln:
            key.append(ln)
        elif "panicked at" in ln and i + 1 < len(lines):
            key.append(lines[i + 1])
    key = list(dict.fromkeys(key))
    return " | ".join(key[:limit] if key else lines[-limit:])


def clang_for_bpf() -> str | None:
    """The clang the sched_ext crates' build scripts should run (they run $BPF_CLANG, default "clang"):
    None when "clang" is on PATH or BPF_CLANG is set, else the newest clang-N (Debian names them so)."""
    if os.environ.get("BPF_CLANG") or shutil.which("clang"):
        return None
    for v in range(30, 15, -1):
        path = shutil.which(f"clang-{v}")
        if path:
            return path
    return None


_host_triple: str | None = None


def host_triple() -> str:
    """rustc's host target triple (the peers are built for it)."""
    global _host_triple
    if _host_triple is None:
        _host_triple = "x86_64-unknown-linux-gnu"
        try:
            out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, timeout=30).stdout
            for line in out.splitlines():
                if line.startswith("host:"):
                    _host_triple = line.split(":", 1)[1].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return _host_triple


def ops_name(name: str) -> str | None:
    """The ops name a crates.io build of peer `name` shows in /sys/kernel/sched_ext/root/ops.

    scx_utils' scx_ops_open! appends "_<version>[_g<git sha>]_<target triple>" to the BPF ops name, with every
    character other than letters, digits, '.' and '_' turned into '_': scx_rusty 1.1.4 shows
    "rusty_1.1.4_x86_64_unknown_linux_gnu", not the "rusty" of lab/schedulers.toml. A crates.io build has no
    git sha. None for a name that is no peer; the registry's own name when it already carries the version.
    """
    e = registry_peers().get(name)
    if not e or not e.get("ops"):
        return None
    base, version = e["ops"], str(e.get("version", ""))
    if not version or version in base:
        return base
    suffix = f"_{version}_{host_triple()}"
    return base + "".join(c if c.isascii() and (c.isalnum() or c in "._") else "_" for c in suffix)


def build(name: str, log=print, force: bool = False) -> tuple[bool, str]:
    """cargo install one peer; (True, binary path) or (False, reason with the error's tail)."""
    entries = registry_peers()
    if name not in entries:
        return False, f"{name} has no crate in lab/schedulers.toml (peers: {', '.join(entries) or 'none'})"
    if binary(name).exists() and not force:
        return True, str(binary(name))
    # One peer build at a time per cache: concurrent runs (CI, a second bin/lab) share its log files and
    # target folder. A build that waited finds the binary its predecessor installed.
    with image.cache_lock(root(), log, what="peer build"):
        if binary(name).exists() and not force:
            return True, str(binary(name))
        return _install(name, entries[name], log, force)


def _install(name: str, entry: dict, log, force: bool) -> tuple[bool, str]:
    """build()'s cargo install, under its lock."""
    crate, version = entry["crate"], str(entry.get("version", ""))
    logs_dir().mkdir(parents=True, exist_ok=True)
    logfile = logs_dir() / f"{name}.log"
    failed = logs_dir() / f"{name}.failed"
    # One target folder for every peer: they share most dependencies (scx_utils, libbpf-sys), so the second
    # build reuses the first one's artifacts.
    cmd = ["cargo", "install", "--locked", "--root", str(root()), "--target-dir", str(root() / "target"), crate]
    if version:
        cmd += ["--version", version]
    if force:
        cmd.append("--force")
    log(f"lab: building peer {name} ({crate} {version}) with cargo install; about 5 minutes on 2 cores; "
        f"log: {logfile}")
    t0 = time.monotonic()
    with open(logfile, "w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        env = dict(os.environ)
        clang = clang_for_bpf()
        if clang:
            env["BPF_CLANG"] = clang
            fh.write(f"BPF_CLANG={clang}\n")
            fh.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        except FileNotFoundError:
            reason = "cargo is not on PATH"
            failed.write_text(reason + "\n")
            return False, reason
        stop = threading.Event()

        def heartbeat():
            while not stop.wait(30):
                last = ""
                try:
                    lines = [ln for ln in logfile.read_text(errors="replace").splitlines() if ln.strip()]
                    last = lines[-1].strip() if lines else ""
                except OSError:
                    pass
                log(f"lab: building {name}: {int(time.monotonic() - t0)} s; {last[:100]}")

        th = threading.Thread(target=heartbeat, daemon=True)
        th.start()
        rc = proc.wait()
        stop.set()
    took = int(time.monotonic() - t0)
    if rc == 0 and binary(name).exists():
        failed.unlink(missing_ok=True)
        log(f"lab: built {name} in {took} s: {binary(name)}")
        return True, str(binary(name))
    tail = error_summary(logfile.read_text(errors="replace"))
    reason = (f"cargo install {crate} {version} failed (exit {rc}) after {took} s: {tail}" if rc else
              f"cargo install {crate} {version} succeeded but {binary(name)} is missing")
    failed.write_text(reason + "\n")
    log(f"lab: error: {reason}")
    return False, reason


def main(names: list[str], force: bool = False, list_only: bool = False) -> int:
    entries = registry_peers()
    if list_only:
        for n, e in entries.items():
            st, detail = status(n)
            print(f"{n:14s} {e['crate']} {e.get('version', '')}: {st}"
                  + (f" ({detail})" if st != "missing" else ""))
        return 0
    for n in names:
        if n not in entries:
            raise run.UsageError(f"{n} is not a peer that can be built; peers: {', '.join(entries)}")
    rc = 0
    for n in names or list(entries):
        ok, detail = build(n, log=lambda s: print(s, file=sys.stderr, flush=True), force=force)
        print(f"{n}: {'built' if ok else 'FAILED'}: {detail}", flush=True)
        if not ok:
            rc = 1
    return rc
