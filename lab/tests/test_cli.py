# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab's answers to bad input (no guest is booted for these)."""
import json
import subprocess

from lab import paths

LAB = str(paths.REPO / "bin" / "lab")


def lab(*args):
    return subprocess.run([LAB, *args], capture_output=True, text=True)


def test_machines_lists_every_file():
    r = lab("machines")
    assert r.returncode == 0
    for name in ("numa2", "haswell2s", "numaq4", "epyc-l3numa", "spr-1n2llc"):
        assert name in r.stdout


def test_unknown_machine():
    r = lab("run", "--machine", "pdp11", "--", "true")
    assert r.returncode == 7
    assert "unknown machine 'pdp11'" in r.stderr and "numa2" in r.stderr


def test_malformed_machine_file(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text((paths.REPO / "lab/machines/numa2.toml").read_text()
                 .replace('name = "numa2"', 'name = "broken"').replace("distances = [[10, 32], [32, 10]]",
                                                                       "distances = [[10, 32], [31, 10]]"))
    r = lab("run", "--machine", str(p), "--", "true")
    assert r.returncode == 7
    assert str(p) in r.stderr and "field 'distances'" in r.stderr


def test_unknown_scheduler():
    r = lab("run", "--sched", "scx_nonesuch", "--", "true")
    assert r.returncode == 2 and "scx_locality" in r.stderr


def test_missing_command():
    r = lab("run", "--machine", "numa2")
    assert r.returncode == 2 and "no command" in r.stderr


def test_missing_setup(tmp_path):
    r = subprocess.run([LAB, "machines"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "LOCALITY_CACHE": str(tmp_path)})
    assert r.returncode == 3 and "bin/lab setup" in r.stderr
