# SPDX-License-Identifier: GPL-2.0-only
"""The reliability suite's host side: per-case budgets in the guest, and how a case's end is judged."""
import pytest

from lab import run, soak


def test_every_case_is_bounded_by_its_budget():
    sched = run.parse_sched("scx_locality:--no-steal")
    fast = soak.case_steps(sched, soak.CASES, fast=True)
    full = soak.case_steps(sched, soak.CASES, fast=False)
    for c, f, u in zip(soak.CASES, fast, full):
        assert (f.timeout_s, u.timeout_s) == c.budget_s
    start_stop = fast[[c.name for c in soak.CASES].index("start-stop")]
    assert start_stop.sched.is_eevdf and start_stop.command.endswith("5 --no-steal")


def _result(tmp_path, exits, klog="", completed=True):
    (tmp_path / "kernel.log").write_text(klog)
    steps = [run.StepResult(sched="scx_locality", cmd_exit=e, sched_started=True, sched_alive_at_stop=True,
                            cmd_seconds=1.0) for e in exits]
    return run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log=str(tmp_path / "kernel.log"),
                         completed=completed, steps=steps)


@pytest.mark.parametrize("killed", [124, 137, 143])  # coreutils; busybox (the guest's) after KILL, after TERM
def test_judge_names_a_killed_case_and_a_bad_kernel_line(tmp_path, killed):
    cases = soak.CASES[:3]
    res = _result(tmp_path, [0, killed, 1], klog="[ 5.0] INFO: task sh:77 blocked for more than 120 seconds.\n")
    v = {x["case"]: x for x in soak.judge(res, cases)}
    assert v["stress-mix"]["passed"]
    assert not v["hotplug"]["passed"] and f"budget; killed (exit {killed})" in v["hotplug"]["why"][0]
    assert v["cgroup-moves"]["why"] == ["workload exited 1"]
    assert not v["kernel-log"]["passed"] and "blocked for more than" in v["kernel-log"]["why"][0]


def test_judge_passes_a_clean_round(tmp_path):
    res = _result(tmp_path, [0, 0])
    assert all(x["passed"] for x in soak.judge(res, soak.CASES[:2]))


def test_failure_tail(tmp_path):
    assert "no console.log" in soak.failure_tail(tmp_path)
    (tmp_path / "console.log").write_text("".join(f"line {i}\r\n" for i in range(100)))
    tail = soak.failure_tail(tmp_path, lines=3)
    assert tail == "line 97\nline 98\nline 99"
