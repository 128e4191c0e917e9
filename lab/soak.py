# SPDX-License-Identifier: GPL-2.0-only
"""Reliability suite: stress, hotplug, cgroups, RT hogs, pinning, nice churn, start/stop cycles, kill -9.

A scheduler that gets ejected or stalls a task is worse than none. Each case is a guest script under
lab/reliability/ run as one step of a boot with the scheduler loaded (start-stop loads it itself). A case
passes when its workload exits 0, the scheduler is still enabled when the lab stops it and detaches cleanly,
and the kernel log has no ejection, stall, Oops, BUG or hung-task line.

`bin/lab soak --fast` is the subset `make test-lab-all` runs; `bin/lab soak --minutes 30` repeats the full mix, one boot
per round, within 30 minutes of wall time: a round starts only if it is expected to end in time (the first
round's estimate comes from the cases' est_s, later ones from the last round's duration), a first round that
cannot fit is refused before anything boots, and the guest is killed at the deadline at the latest (that
round then fails, named as cut). Progress lines carry the elapsed time and an ETA. The summary (summary.json
and summary.md) lands in the run folder.
"""
from __future__ import annotations

import json
import math
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import machines, paths, run
from .bench import boot_estimate, fmt_dur


@dataclass(frozen=True)
class Case:
    name: str
    script: str
    fast_args: str
    full_args: str
    loads_scheduler_itself: bool = False
    what: str = ""
    # guest seconds the case may take (fast, full) before the round is called hung; generous for TCG on a
    # shared 2-core host (start-stop: one BPF load and verification per cycle under 8 CPU hogs, up to
    # about 100 s each there, 140 s on a slower host: its 4 loads of the fast run took 606 s)
    budget_s: tuple[int, int] = (120, 400)
    # expected wall seconds (fast, full) on an 8-CPU machine on a 2-core host: for the ETA and for --minutes
    est_s: tuple[float, float] = (20, 45)
    scales_with_cpus: bool = False  # est_s grows with the guest's CPUs (work per CPU on the same host cores)


CASES = [
    Case("stress-mix", "stress-mix.sh", "15", "60", what="stress-ng --aggressive cpu, fork, affinity, switch",
         est_s=(25, 75)),
    Case("hotplug", "hotplug.sh", "20", "100", what="offline/online cycles of random CPUs under load",
         est_s=(30, 150)),
    Case("cgroup-moves", "cgroup-moves.sh", "10", "30", what="cgroup v2 moves and cpuset changes under load"),
    Case("fifo-hog", "fifo-hog.sh", "10", "30", what="SCHED_FIFO busy loop on CPU 1 beside normal load"),
    Case("pinned-everywhere", "pinned-everywhere.sh", "150", "1500", what="a pinned task on every CPU at once",
         est_s=(40, 200), scales_with_cpus=True),
    Case("nice-churn", "nice-churn.sh", "10", "30", what="random nice changes under load"),
    Case("start-stop", "start-stop.sh", "3", "20", loads_scheduler_itself=True,
         what="scheduler start/stop cycles under load, then kill -9 of the agent", budget_s=(1200, 2400),
         est_s=(200, 450)),
]
SCHED_START_STOP_S = 15  # the lab's start and stop of the scheduler around a case, under TCG


def case_estimate(c: Case, m: machines.Machine, fast: bool) -> float:
    est = c.est_s[0] if fast else c.est_s[1]
    if c.scales_with_cpus:
        est *= max(1.0, m.nr_cpus / 8)
    return est + (0 if c.loads_scheduler_itself else SCHED_START_STOP_S)


def round_estimate(m: machines.Machine, cases: list[Case], fast: bool) -> float:
    """Expected wall seconds of one round: the boot and every case (an estimate, printed as such)."""
    return boot_estimate(m) + sum(case_estimate(c, m, fast) for c in cases)

# Kernel log lines that fail a run whatever else happened.
BAD_LOG = re.compile(r"(BUG:|Oops|hung_task|blocked for more than|soft lockup|hard LOCKUP|"
                     r"runnable task stall|watchdog failed|Kernel panic|WARNING: CPU)")


def case_steps(sched: run.SchedSpec, cases: list[Case], fast: bool) -> list[run.Step]:
    """One step per case, each bounded in the guest by the case's budget, so that a hung case fails alone."""
    steps = []
    for c in cases:
        args = c.fast_args if fast else c.full_args
        if c.loads_scheduler_itself:
            step_sched, command = run.parse_sched("eevdf"), f"/lab/reliability/{c.script} {args} {shlex.join(run.sched_args(sched))}"
        else:
            step_sched, command = sched, f"/lab/reliability/{c.script} {args}"
        steps.append(run.Step(step_sched, command.strip(), timeout_s=c.budget_s[0] if fast else c.budget_s[1]))
    return steps


def judge(result: run.RunResult, cases: list[Case]) -> list[dict]:
    """One verdict per case: passed, and why not."""
    klog = Path(result.kernel_log).read_text(errors="replace") if Path(result.kernel_log).exists() else ""
    bad = [line.strip() for line in klog.splitlines() if BAD_LOG.search(line)]
    exits = run.sched_exits(klog)
    unclean = [e for e in exits if not run.is_clean_exit(e[1])]
    verdicts = []
    for i, c in enumerate(cases):
        st = result.steps[i] if i < len(result.steps) else None
        why = []
        if st is None or st.cmd_exit is None:
            why.append("did not run" + (f" ({st.sched_start_error})" if st and st.sched_start_error else ""))
        else:
            if st.cmd_exit in run.CMD_TIMED_OUT:
                why.append(f"workload still running after its {c.budget_s[0]}/{c.budget_s[1]} s (fast/full) "
                           f"budget; killed (exit {st.cmd_exit})")
            elif st.cmd_exit != 0:
                why.append(f"workload exited {st.cmd_exit}")
            if st.sched_ejected:
                why.append(f"scheduler ejected: {st.sched_exit_kind}: {st.sched_exit_reason}")
            if st.sched_stuck:
                why.append("the scheduler process did not exit after SIGINT and SIGKILL (stuck in the kernel; "
                           "its stacks are in console.log, every blocked task's in kernel.log)")
            elif not c.loads_scheduler_itself and st.sched_alive_at_stop is False:
                why.append("scheduler process was gone before the stop")
        verdicts.append({"case": c.name, "what": c.what, "passed": not why, "why": why,
                         "seconds": st.cmd_seconds if st else None})
    if bad or unclean or result.timed_out or not result.completed or result.guest_errors:
        extra = bad[:5] + [f"sched_ext disable: {k} ({r})" for _, k, r in unclean]
        extra += [f"the lab refused a record of the guest: {e}" for e in result.guest_errors[:5]]
        if result.cut_by_deadline:
            extra.append("the round was still running at the --minutes deadline; the guest was killed")
        elif result.timed_out:
            extra.append("guest timed out")
        elif not result.completed:
            extra.append("guest did not finish its job")
        verdicts.append({"case": "kernel-log", "what": "no ejection, stall, Oops, BUG, hung task",
                         "passed": False, "why": extra, "seconds": None})
    else:
        verdicts.append({"case": "kernel-log", "what": "no ejection, stall, Oops, BUG, hung task",
                         "passed": True, "why": [], "seconds": None})
    return verdicts


def run_round(m: machines.Machine, sched: run.SchedSpec, cases: list[Case], fast: bool, run_dir: Path,
              stream=None, build: bool = True, deadline: float | None = None,
              eta_after=lambda: 0.0) -> tuple[run.RunResult, list[dict]]:
    """One boot running every case. deadline (time.monotonic()) kills the guest then; eta_after() is the
    expected time after this round (later rounds), for the ETA printed as each case ends."""
    steps = case_steps(sched, cases, fast)
    budget = sum(st.timeout_s for st in steps)
    t0 = time.monotonic()

    def step_end(i: int, rc: int) -> None:
        name = cases[i].name if 0 <= i < len(cases) else f"step {i}"
        left = sum(case_estimate(c, m, fast) for c in cases[i + 1:]) + eta_after()
        print(f"lab soak:   {name} ended (exit {rc}), case {i + 1}/{len(cases)}, "
              f"{time.monotonic() - t0:.0f} s into the round; ETA {fmt_dur(left)}", file=sys.stderr, flush=True)

    result = run.run_job(m, steps, timeout_s=budget, run_dir=run_dir, stream=stream, build_scheduler=build,
                         on_step_end=step_end, deadline=deadline)
    return result, judge(result, cases)


def failure_tail(run_dir: Path, lines: int = 40) -> str:
    """The end of a failed round's console (the guest's kernel messages and the cases' output), for logs that
    outlive the run folder, such as CI's."""
    console = Path(run_dir) / "console.log"
    if not console.exists():
        return f"(no console.log in {run_dir})"
    text = console.read_text(errors="replace").replace("\r", "").splitlines()
    return "\n".join(text[-lines:])


def summary_md(rounds: list[dict], machine: str, sched: str, minutes: float) -> str:
    note = run.extra_flags_note()
    lines = [f"# Soak: {sched} on {machine}", "", *([f"**{note}**", ""] if note and sched.split(":")[0] in run.EXTRA_FLAGS_TO else []),
             f"{len(rounds)} round(s) in {minutes:.1f} minutes; each round is one boot running every case.", "",
             "| round | case | what | result | seconds | why |", "|---|---|---|---|---|---|"]
    for r in rounds:
        for v in r["verdicts"]:
            lines.append(f"| {r['round']} | {v['case']} | {v['what']} | {'pass' if v['passed'] else 'FAIL'} | "
                         f"{v['seconds'] if v['seconds'] is not None else ''} | {'; '.join(v['why'])} |")
    passed = all(v["passed"] for r in rounds for v in r["verdicts"])
    lines += ["", f"Overall: {'PASS' if passed else 'FAIL'}"]
    return "\n".join(lines) + "\n"


def main(machine: str, sched_spec: str, fast: bool, minutes: float, only: list[str] | None,
         out: str | None, verbose: bool, build: bool = True) -> int:
    m = machines.load(machine)
    sched = run.parse_sched(sched_spec)
    cases = [c for c in CASES if not only or c.name in only]
    if only:
        unknown = set(only) - {c.name for c in CASES}
        if unknown:
            raise run.UsageError(f"unknown case(s) {sorted(unknown)}; known: {', '.join(c.name for c in CASES)}")
    est = round_estimate(m, cases, fast)
    if not fast and est > minutes * 60:
        raise run.UsageError(
            f"--minutes {minutes:g} cannot hold one full round of {len(cases)} case(s) on {m.name}: about "
            f"{fmt_dur(est)} here (an estimate); give --minutes {math.ceil(est / 60)} or more, or --fast (one "
            f"short round, about {fmt_dur(round_estimate(m, cases, True))})")
    base = Path(out) if out else run.new_run_dir(m.name, "soak")
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # --minutes bounds the wall time of the whole soak; --fast is one round, bounded by its cases' budgets.
    deadline = None if fast else t0 + minutes * 60
    rounds = []
    n = 0
    stop_why = ""

    def rounds_fitting(now: float) -> int:
        """Rounds (this one included) expected to fit before the deadline."""
        return 1 if deadline is None else max(1, int((deadline - now) // est))

    try:
        while True:
            n += 1
            rd = base / f"round-{n}"
            rd.mkdir(exist_ok=True)
            start = time.monotonic()
            k = rounds_fitting(start)
            planned = "" if fast else f" ({k} round(s) of about {fmt_dur(est)} fit in --minutes {minutes:g})"
            print(f"lab soak: round {n} on {m.name} with {sched.label}: {', '.join(c.name for c in cases)} "
                  f"({'fast' if fast else 'full'}); {fmt_dur(start - t0)} elapsed, ETA {fmt_dur(k * est)}{planned}",
                  file=sys.stderr, flush=True)
            result, verdicts = run_round(m, sched, cases, fast, rd, stream=sys.stdout if verbose else None,
                                         build=build and n == 1, deadline=deadline,
                                         eta_after=lambda k=k: (k - 1) * est)
            for v in verdicts:
                print(f"lab soak:   {v['case']:18s} {'pass' if v['passed'] else 'FAIL'} {'; '.join(v['why'])}",
                      file=sys.stderr, flush=True)
            round_ok = all(v["passed"] for v in verdicts)
            if not round_ok:
                print(f"lab soak: round {n} failed; the last lines of {Path(result.run_dir) / 'console.log'}:\n"
                      f"{failure_tail(Path(result.run_dir))}", file=sys.stderr, flush=True)
            rounds.append({"round": n, "run_dir": str(rd), "verdicts": verdicts,
                           "seconds": round(time.monotonic() - start, 1)})
            if fast or not round_ok:
                break
            est = time.monotonic() - start  # the next round is expected to take as long as this one
            left = deadline - time.monotonic()
            if est > left:
                stop_why = (f"lab soak: stopping after {n} round(s): another would take about {fmt_dur(est)} and "
                            f"{fmt_dur(left)} of --minutes {minutes:g} are left")
                break
    except KeyboardInterrupt:
        print(f"lab soak: interrupted in round {n}; the summary holds the {len(rounds)} finished round(s)",
              file=sys.stderr, flush=True)
        _write_summary(base, m, sched, rounds, t0, minutes)
        raise
    if stop_why:
        print(stop_why, file=sys.stderr, flush=True)
    return _write_summary(base, m, sched, rounds, t0, minutes)


def _write_summary(base: Path, m: machines.Machine, sched: run.SchedSpec, rounds: list[dict], t0: float,
                   minutes_limit: float) -> int:
    elapsed = (time.monotonic() - t0) / 60
    (base / "summary.json").write_text(json.dumps({"machine": m.name, "sched": sched.label, "minutes": elapsed,
                                                   "sched_extra_flags": run.extra_sched_flags()
                                                   if sched.name in run.EXTRA_FLAGS_TO else [],
                                                   "minutes_limit": minutes_limit, "rounds": rounds},
                                                  indent=1) + "\n")
    md = summary_md(rounds, m.name, sched.label, elapsed)
    (base / "summary.md").write_text(md)
    print(md)
    print(f"lab soak: summary in {base / 'summary.md'}", file=sys.stderr)
    ok = bool(rounds) and all(v["passed"] for r in rounds for v in r["verdicts"])
    return 0 if ok else 1
