# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab setup and the host's apt sources: it says before it adds one, and --no-apt-source adds none.
The system commands are fakes on PATH that log their calls: nothing is installed or copied."""
import os
import subprocess

import pytest

from lab import paths

LAB = str(paths.REPO / "bin" / "lab")

FAKES = {
    # every Debian package present; QEMU at $FAKE_QEMU_VERSION
    "dpkg-query": 'case "$2" in *Status*) echo "install ok installed";; *Version*) echo "$FAKE_QEMU_VERSION";; esac',
    "apt-get": 'echo "FAKE apt-get $*" >&2',
    "cp": 'echo "FAKE cp $*" >&2',
    # stops setup right after QEMU, before the venv and the downloads
    "cargo": "exit 0",
    "rustc": 'echo "rustc 1.0.0"',
}


def setup(tmp_path, *args, qemu="1:7.2+dfsg-7+deb12u7"):
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name, body in FAKES.items():
        (fake / name).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name).chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "LOCALITY_CACHE": str(tmp_path / "cache"), "FAKE_QEMU_VERSION": qemu}
    return subprocess.run([LAB, "setup", *args], capture_output=True, text=True, env=env, timeout=60)


def test_no_apt_source_adds_none_and_explains(tmp_path):
    r = setup(tmp_path, "--no-apt-source")
    assert r.returncode == 3
    assert "FAKE" not in r.stderr  # no apt-get, no copy into /etc/apt
    assert "QEMU >= 10 is needed (found: 1:7.2+dfsg-7+deb12u7)" in r.stderr
    assert "apt-get install -t bookworm-backports qemu-system-x86" in r.stderr
    assert "--no-apt-source: setup adds no apt source" in r.stderr


def test_no_apt_source_accepts_a_qemu_10_the_user_installed(tmp_path):
    r = setup(tmp_path, "--no-apt-source", qemu="1:10.0.2+ds-2+deb13u1~bpo12+1")
    assert "FAKE" not in r.stderr and "QEMU: 1:10.0.2" in r.stderr
    assert "rustc 1.0.0 is too old" in r.stderr  # setup went on past QEMU


@pytest.mark.skipif(os.geteuid() != 0, reason="setup adds an apt source only as root")
def test_setup_says_before_it_adds_the_source(tmp_path):
    r = setup(tmp_path)
    lines = r.stderr.splitlines()
    copy = next(i for i, ln in enumerate(lines) if ln.startswith("FAKE cp "))
    said = next(i for i, ln in enumerate(lines) if "adding the apt source" in ln)
    assert said < copy
    told = "\n".join(lines[said:copy])
    assert "/etc/apt/sources.list.d/locality-bookworm-backports.sources" in told
    assert "It stays after setup" in told and "--no-apt-source" in told


def test_help_installs_nothing(tmp_path):
    """`bin/lab setup --help` prints its usage and exits 0 before touching apt (it once ran the whole setup)."""
    for flag in ("--help", "-h"):
        r = setup(tmp_path, flag)
        assert r.returncode == 0, r.stderr
        assert "usage: bin/lab setup" in r.stdout
        assert "FAKE" not in r.stderr and "lab setup:" not in r.stderr
