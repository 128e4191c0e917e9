# SPDX-License-Identifier: GPL-2.0-only
"""Idle while queued from locsample's rq lines: the parsing, the min(I, W) bound per interval and LLC / node
(inputs worked out by hand), its path through collect_step, and locsample's own rq lines on a stand-in
/proc/schedstat (this host's kernel has none)."""
import shutil
import subprocess
import time

import pytest

from lab import bench, benchfile, machines, paths, run, samples

# 2 nodes of 4 CPUs, 2 LLCs of 2 CPUs per node
TOPO = machines.Topology(nodes=((0, 1, 2, 3), (4, 5, 6, 7)), llcs=((0, 1), (2, 3), (4, 5), (6, 7)),
                         smt=tuple((c,) for c in range(8)), distances=((10, 32), (32, 10)))

TASKS = """# locsample 1 interval_ms=100 budget_pct=10 rq_ms=100
end 300 0
ticks 3 2
stat 4 1500
task 100 100 sh 0 200 0 0:3:0
task 101 101 hackbench 0 200 1 0:2:2,4:1:1
"""

TB = """
command = "prog"
timeout_s = 30
[[figure]]
name = "t"
regex = 'time: ([0-9.]+)'
unit = "s"
higher_is_better = false
mean = "amean"
"""

CPU = """0 cpu0 1 0 1 8 0 0 0 0
0 rq
100 rq 0:100:0 1:0:30000 2:50:0 3:0:5250 4:80:2000 5:10:0 9:500:500000
200 rq 0:20:40000 1:0:60000 2:70:0 5:0:150000 6:100:0
200 cpu0 2 0 1 9 0 0 0 0
300 rq
300 rq 1:x:2
"""


def test_parse_rq_reads_idle_ms_and_wait_us():
    rq = samples.parse_rq(CPU)
    assert [ms for ms, _ in rq] == [0, 100, 200, 300]  # the malformed last line is dropped
    assert rq[0][1] == {} and rq[3][1] == {}
    assert rq[1][1][1] == (0.0, 30.0) and rq[1][1][3] == (0.0, 5.25) and rq[1][1][9] == (500.0, 500.0)
    assert rq[2][1][5] == (0.0, 150.0)
    # the utilisation parser still sees only the cpuN lines
    assert samples.parse_cpustat(CPU) == {0: [(0, 2, 10), (200, 3, 12)]}


def test_bound_per_interval_and_group():
    iq = samples.idle_while_queued(samples.parse_rq(CPU), TOPO)
    # interval to 100 ms (ms idle / ms waited): LLC {0,1} 100/30 -> 30; {2,3} 50/5.25 -> 5.25; {4,5} 90/2 -> 2
    #   node 0: 150/35.25 -> 35.25; node 1: 90/2 -> 2; CPU 9 is not in the machine and left out
    # interval to 200 ms: LLC {0,1} 20/100 -> 20; {2,3} 70/0 -> 0; {4,5} 0/150 -> 0; {6,7} 100/0 -> 0
    #   node 0: 90/100 -> 90; node 1: 100/150 -> 100 (the idle CPU 6 and the waiting one on CPU 5 share a node
    #   but not an LLC)
    # interval to 300 ms: nothing
    assert iq == {"llc_ms": 30 + 5.25 + 2 + 20, "node_ms": 35.25 + 2 + 90 + 100,
                  "idle_ms": 240.0 + 190.0, "wait_ms": 37.25 + 250.0, "intervals": 3, "span_ms": 300}


def test_bound_is_never_above_the_idle_time_or_the_wait():
    # one LLC per node here: the LLC bound is the node bound; min() caps at the smaller side each interval
    topo = machines.Topology(nodes=((0, 1), (2, 3)), llcs=((0, 1), (2, 3)), smt=((0,), (1,), (2,), (3,)),
                             distances=((10, 20), (20, 10)))
    rq = samples.parse_rq("0 rq\n100 rq 0:100:250000 1:100:0\n200 rq 0:5:1000 3:100:0\n")
    iq = samples.idle_while_queued(rq, topo)
    # node 0: 200 idle / 250 waited -> 200, then 5 / 1 -> 1; node 1: 100 idle, nothing waited -> 0
    assert iq["node_ms"] == iq["llc_ms"] == 201.0
    assert iq["idle_ms"] == 305.0 and iq["wait_ms"] == 251.0


def test_no_interval_no_figure():
    assert samples.idle_while_queued(samples.parse_rq(""), TOPO) is None
    assert samples.idle_while_queued(samples.parse_rq("0 rq\n"), TOPO) is None


def test_parse_tasks_reads_the_stat_thread_and_rq_interval():
    meta, tasks = samples.parse_tasks(TASKS)
    assert (meta["stat_samples"], meta["stat_us"], meta["rq_ms"]) == (4, 1500, 100)
    assert (meta["ticks"], meta["busy_ms"], meta["elapsed_ms"]) == (3, 2, 300) and len(tasks) == 2


def test_collect_step_bounds_idle_while_queued(tmp_path):
    (tmp_path / "tb.toml").write_text(TB)
    b = benchfile.load_benchmark("tb", tmp_path / "tb.toml")
    out = tmp_path / "out"
    raw = out / "raw" / "run1"
    raw.mkdir(parents=True)
    rd = tmp_path / "rundir"
    rd.mkdir()
    res = run.RunResult(machine="numa2", run_dir=str(rd), kernel_log=str(rd / "kernel.log"), completed=True,
                        topology_ok=True, steps=[run.StepResult(sched="eevdf", cmd_exit=0, cmd_seconds=3.0)])
    for name, text in {"s0c0.out": "time: 1.25\nlab-bench-rc: 0\n", "s0c0.tasks": TASKS, "s0c0.cpu": CPU}.items():
        (rd / name).write_text(text)
        res.files[name] = str(rd / name)
    (c,) = bench.collect_step(res, 0, b, run.parse_sched("eevdf"), TOPO, out, raw)["cases"]
    assert c["status"] == "ok"
    assert c["idle_queued"]["llc_ms"] == 57.25 and c["idle_queued"]["node_ms"] == 227.25
    assert c["sampler"] == {"ticks": 3, "busy_ms": 2, "stat_samples": 4, "stat_us": 1500, "rq_ms": 100}


CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_locsample_writes_rq_lines_from_schedstat(tmp_path):
    """locsample built to read a stand-in schedstat file that the command itself rewrites: the waits charged in
    its rq lines add up to the growth of run_delay, per CPU, and a file older than version 15 gives none."""
    exe = tmp_path / "locsample"
    fake = tmp_path / "schedstat"
    subprocess.run([CC, "-O2", "-pthread", f'-DPROC_SCHEDSTAT="{fake}"', "-o", str(exe),
                    str(paths.REPO / "workloads" / "locsample.c")], check=True)

    def schedstat(version, d0, d1):
        return (f"version {version}\ntimestamp 1\ncpu0 0 0 5 5 5 5 1000 {d0} 3\ndomain0 MC 3 1 2 3\n"
                f"cpu1 0 0 5 5 5 5 1000 {d1} 3\n")

    fake.write_text(schedstat(17, 1_000_000, 7_000_000_999))
    later = tmp_path / "later"
    later.write_text(schedstat(17, 251_000_000, 7_400_000_999))
    t0 = time.monotonic()
    subprocess.run([str(exe), "-q", "50", "-o", str(tmp_path / "p"), "--", "sh", "-c",
                    f"sleep 0.3; cat {later} > {fake}; sleep 0.3"], check=True, timeout=30)
    elapsed_us = (time.monotonic() - t0) * 1e6
    assert elapsed_us < 10e6
    rq = samples.parse_rq((tmp_path / "p.cpu").read_text())
    assert len(rq) >= 5 and rq[0][1] == {}
    waits = {cpu: sum(per.get(cpu, (0, 0))[1] for _, per in rq) for cpu in (0, 1)}
    assert waits == {0: 250.0, 1: 400.0}  # 251 - 1 ms; 7400000.999 - 7000000.999 us
    assert all(i >= 0 for _, per in rq for i, _w in per.values())
    meta, _ = samples.parse_tasks((tmp_path / "p.tasks").read_text())
    # the sampler's own CPU time: some, and no more than the run's wall time
    assert meta["rq_ms"] == 50 and meta["stat_samples"] >= 5 and 0 < meta["stat_us"] <= elapsed_us

    fake.write_text(schedstat(14, 0, 0))
    subprocess.run([str(exe), "-o", str(tmp_path / "old"), "--", "sleep", "0.2"], check=True, timeout=30)
    assert samples.parse_rq((tmp_path / "old.cpu").read_text()) == []
    assert "cpu0 " in (tmp_path / "old.cpu").read_text()  # the /proc/stat copy goes on
