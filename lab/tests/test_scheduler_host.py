# SPDX-License-Identifier: GPL-2.0-only
"""scx_locality's refusals that the host itself can show (it has no sched_ext): one line, documented code."""
import os
import subprocess
from pathlib import Path

import pytest

from lab import paths

BIN = paths.REPO / "scheduler" / "target" / "release" / "scx_locality"


def run_bin(*args, user=None):
    if not BIN.exists():
        pytest.fail(f"{BIN} not built (make build)")
    cmd = [str(BIN), *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_not_root_exit_3():
    r = run_bin(user=65534)
    assert r.returncode == 3, r
    assert r.stderr.strip().splitlines() == ["scx_locality: error: must run as root (CAP_SYS_ADMIN and CAP_BPF)"]


@pytest.mark.skipif(os.geteuid() != 0 or Path("/sys/kernel/sched_ext").exists(),
                    reason="needs root on a kernel without sched_ext (the lab's hosts)")
def test_no_sched_ext_exit_4():
    r = run_bin()
    assert r.returncode == 4, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no sched_ext" in lines[0], r.stderr


def test_bad_flag_exit_2():
    r = run_bin("--slice-us", "5")
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--slice-us" in lines[0], r.stderr
