# SPDX-License-Identifier: GPL-2.0-only
"""What the lab tests share: one boot of `bin/lab bench` by scheduler, and scx_locality's final stats."""
import json
import subprocess
from pathlib import Path

from lab import paths, samples

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
