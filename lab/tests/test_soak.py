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
    assert start_stop.sched.is_eevdf and start_stop.command.endswith("3 --no-steal")


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


class FakeClock:
    """time.monotonic for the soak, and a run_job that spends a round's time on it (no guest is booted)."""

    def __init__(self, round_s):
        self.now, self.round_s, self.boots, self.deadlines = 1000.0, round_s, 0, []

    def monotonic(self):
        return self.now

    def run_job(self, m, steps, timeout_s, run_dir=None, on_step_end=None, deadline=None, **kw):
        self.boots += 1
        self.deadlines.append(deadline)
        spend = self.round_s if deadline is None else min(self.round_s, max(0.0, deadline - self.now))
        cut = spend < self.round_s
        start = self.now
        for i in range(len(steps)):
            self.now = start + spend * (i + 1) / len(steps)
            if on_step_end and not cut:
                on_step_end(i, 0)
        (run_dir / "kernel.log").write_text("")
        srs = [run.StepResult(sched="scx_locality", cmd_exit=None if cut else 0, sched_started=True,
                              sched_alive_at_stop=True, cmd_seconds=1.0) for _ in steps]
        return run.RunResult(machine=m.name, run_dir=str(run_dir), kernel_log=str(run_dir / "kernel.log"),
                             completed=not cut, timed_out=cut, cut_by_deadline=cut, steps=srs)


@pytest.fixture
def clock(monkeypatch):
    def make(round_s):
        c = FakeClock(round_s)
        monkeypatch.setattr(soak.time, "monotonic", c.monotonic)
        monkeypatch.setattr(run, "run_job", c.run_job)
        return c
    return make


def test_minutes_too_short_for_one_round_is_refused_before_booting(tmp_path, clock):
    c = clock(15 * 60)
    with pytest.raises(run.UsageError) as e:
        soak.main("haswell2s", "scx_locality", False, 3, None, str(tmp_path), False, build=False)
    assert c.boots == 0
    est = soak.round_estimate(run.machines.load("haswell2s"), soak.CASES, False)
    assert f"--minutes 3 cannot hold one full round of 7 case(s) on haswell2s: about {soak.fmt_dur(est)}" in str(e.value)
    assert "or --fast" in str(e.value)


def test_minutes_bound_the_wall_time_and_an_eta_is_printed(tmp_path, clock, capsys):
    """Rounds of 15 minutes in --minutes 40: two rounds (a third would end at 45), never past 40 minutes."""
    c = clock(15 * 60)
    rc = soak.main("haswell2s", "scx_locality", False, 40, None, str(tmp_path), False, build=False)
    assert rc == 0 and c.boots == 2 and c.now - 1000.0 <= 40 * 60
    assert all(d == 1000.0 + 40 * 60 for d in c.deadlines)  # each guest is killed at the deadline at the latest
    err = capsys.readouterr().err
    assert "ETA" in err.splitlines()[0] and "fit in --minutes 40" in err.splitlines()[0]
    assert "hotplug ended (exit 0), case 2/7" in err and "; ETA " in err
    assert "stopping after 2 round(s): another would take about 15m00s and 10m00s of --minutes 40 are left" in err


def test_a_round_running_past_the_deadline_is_cut_and_named(tmp_path, clock, capsys):
    c = clock(60 * 60)  # far slower than estimated
    rc = soak.main("haswell2s", "scx_locality", False, 30, None, str(tmp_path), False, build=False)
    assert rc == 1 and c.boots == 1 and c.now - 1000.0 <= 30 * 60
    assert "still running at the --minutes deadline; the guest was killed" in capsys.readouterr().err


def test_fast_is_one_round_with_an_eta(tmp_path, clock, capsys):
    c = clock(5 * 60)
    assert soak.main("numa2", "scx_locality", True, 30, None, str(tmp_path), False, build=False) == 0
    assert c.boots == 1 and c.deadlines == [None]
    first = capsys.readouterr().err.splitlines()[0]
    est = soak.round_estimate(run.machines.load("numa2"), soak.CASES, True)
    assert f"ETA {soak.fmt_dur(est)}" in first
