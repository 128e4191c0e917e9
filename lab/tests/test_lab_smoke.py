# SPDX-License-Identifier: GPL-2.0-only
"""Boots real guests (marked `lab`): the topology check, a command's output and exit status, the JSON line."""
import json
import subprocess

import pytest

from lab import machines, paths, run

pytestmark = pytest.mark.lab
LAB = str(paths.REPO / "bin" / "lab")


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def test_numa2_online_nodes():
    # --timeout keeps the lab's own limit (boot + command) below pytest's, so a hang is the lab's report
    r = subprocess.run([LAB, "run", "--machine", "numa2", "--timeout", "120", "--",
                        "cat", "/sys/devices/system/node/online"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "0-1" in r.stdout.splitlines()
    final = last_json(r.stdout)
    assert final["cmd_exit"] == 0 and final["topology_ok"] is True and final["exit"] == 0
    assert final["kernel_log"].endswith("kernel.log")


def test_failing_command_exit_status():
    r = subprocess.run([LAB, "run", "--machine", "numa2", "--timeout", "120", "--", "exit 3"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 1
    assert last_json(r.stdout)["cmd_exit"] == 3


def test_wrong_topology_is_caught(monkeypatch, capsys):
    """A machine file that does not describe what boots: its declared distances disagree with the guest's."""
    m = machines.load("numa2")
    wrong = run.expected_topology_text(m).replace("node 0 0-3 10 32", "node 0 0-3 10 21")
    monkeypatch.setattr(run, "expected_topology_text", lambda _m: wrong)
    result = run.run_job(m, [run.Step(run.parse_sched("eevdf"), "echo must-not-run")], timeout_s=120, stream=None)
    assert result.topology_ok is False
    assert result.exit_code() == run.EXIT_TOPOLOGY
    assert result.steps[0].cmd_exit is None  # the command never ran
    report = run.topology_report(result)
    mismatched = [row for row in report.splitlines() if row.startswith("!=")]
    assert len(mismatched) == 1 and "0-3 10 21" in mismatched[0] and "0-3 10 32" in mismatched[0]


def test_timeout_kills_guest():
    r = subprocess.run([LAB, "run", "--machine", "numa2", "--timeout", "1", "--", "sleep 600"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 6
    assert "killed" in r.stderr and "kernel.log" in r.stdout
