# SPDX-License-Identifier: GPL-2.0-only
"""What the lab tests share: one boot running a probe under each scheduler in turn, one boot of `bin/lab bench` by
scheduler, and scx_locality's final stats."""
import io
import json
import subprocess
from pathlib import Path

from lab import machines, paths, run, samples

LAB = str(paths.REPO / "bin" / "lab")


def final_stats(sched_log):
    """The scx_locality-final-stats line of a scheduler's log, as a dict (samples.parse_final_stats)."""
    st = samples.parse_final_stats(Path(sched_log).read_text(errors="replace"))
    assert st is not None, f"no final stats line in {sched_log}"
    return st


def bench_steps(tmp_path, machine, scheds, bench):
    """One boot of `bin/lab bench` (one run) with the schedulers of comma-separated @scheds: its steps (cases,
    figures, placement tables, final_stats) by scheduler spec."""
    out = tmp_path / "bench"
    r = subprocess.run([LAB, "bench", "--no-build", "--machine", machine, "--runs", "1", "--sched", scheds,
                        "--bench", bench, "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {st["sched"]: st for run_ in json.loads((out / "results.json").read_text())["runs"] for st in run_["steps"]}


def run_steps(machine, scheds, cmd, timeout_s, step_timeout_s=60):
    """Run shell command @cmd under each scheduler spec of @scheds, in turn in one boot of @machine; the result
    and each scheduler's part of the console output (from the line that names it)."""
    steps = [run.Step(run.parse_sched(s), f"echo 'step-under: {s}'; {cmd}", timeout_s=step_timeout_s)
             for s in scheds]
    buf = io.StringIO()
    res = run.run_job(machines.load(machine), steps, timeout_s=timeout_s, stream=buf, build_scheduler=False)
    out = buf.getvalue()
    assert res.exit_code() == run.EXIT_OK, (res, out[-3000:])
    parts = {part.split("\n", 1)[0].strip(): part for part in out.split("step-under: ")[1:]}
    assert sorted(parts) == sorted(scheds), (list(parts), out[-3000:])
    return res, parts


def run_rounds(machine, scheds, probe, rounds, timeout_s, step_timeout_s, first=""):
    """Shell command @probe @rounds times under each scheduler spec of @scheds, in turn in one boot of @machine
    (after shell command @first, if any); the result and, per scheduler, each round's part of its output."""
    cmd = first + "; ".join(f"echo 'probe-round: {r}'; {probe}" for r in range(1, rounds + 1))
    res, parts = run_steps(machine, scheds, cmd, timeout_s, step_timeout_s=step_timeout_s)
    by_round = {sched: part.split("probe-round: ")[1:] for sched, part in parts.items()}
    for sched, rnds in by_round.items():
        assert len(rnds) == rounds, (sched, parts[sched][-3000:])
    return res, by_round


def cpu_node(cpu):
    """Shell text: a command printing the node of CPU @cpu (a number or a shell expression), from sysfs."""
    return f"ls -d /sys/devices/system/cpu/cpu{cpu}/node* | sed 's/.*node//'"


def nodes_each_second(tag, ids, stat):
    """Shell text: once a second for three seconds, the node each task of the shell word list @ids ran on last,
    from field 39 of its stat file @stat (in which $t is the task), as "TAG-SECOND: TASK NODE" lines."""
    return (f"for s in 1 2 3; do sleep 1; for t in {ids}; do u=$(cut -d' ' -f39 {stat}); "
            f"n=$({cpu_node('$u')}); "
            f"echo \"{tag}-$s: $t $n\"; done; done; ")
