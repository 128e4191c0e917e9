# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab bench without a guest: benchmark files, sweeps, the guest command, sampler parsing, locality
counters, the collection of a fake run's files, and exit codes."""
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from lab import bench, benchfile, guest_script, image, machines, paths, run, samples

LAB = str(paths.REPO / "bin" / "lab")


def write_bench(tmp_path, text, name="tb"):
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


TB = """
command = "prog {mode} -n {n} -x {x}"
est_seconds = "n * 2 + 1"
timeout_s = 30
[params]
x = 7
[sweep]
mode = ["a", "b"]
n = [1, 3]
[choices]
mode = { a = "--alpha", b = "" }
[[figure]]
name = "t"
regex = 'time: ([0-9.]+)'
unit = "s"
higher_is_better = false
mean = "amean"
"""


def test_every_shipped_benchmark_loads():
    names = benchfile.known_benchmarks()
    for must in ("hackbench", "hackbench-load", "netperf-stream", "netperf-rr", "tbench", "wakelat", "memkern", "jbb2",
                 "numa-residency"):
        assert must in names
    assert "ablation" not in names
    for n in names:
        b = benchfile.load_benchmark(n)
        assert b.cases() and b.figures
        for c in b.cases():
            assert "{" not in c.command.replace("${", "")  # every placeholder filled
            assert c.est_s > 0


def test_sweep_choices_and_estimates(tmp_path):
    b = benchfile.load_benchmark("tb", write_bench(tmp_path, TB))
    cases = b.cases()
    assert [c.label for c in cases] == ["a-1", "a-3", "b-1", "b-3"]
    assert cases[0].id == "tb-a-1"
    assert cases[0].command == "prog --alpha -n 1 -x 7"
    assert cases[3].command == "prog  -n 3 -x 7"
    assert [c.est_s for c in cases] == [3.0, 7.0, 3.0, 7.0]


def test_overrides(tmp_path):
    p = write_bench(tmp_path, TB)
    b = benchfile.load_benchmark("tb:mode=b:n=5/6:x=9", p)
    assert [c.command for c in b.cases()] == ["prog  -n 5 -x 9", "prog  -n 6 -x 9"]
    assert b.spec == "tb:mode=b:n=5/6:x=9"
    b = benchfile.load_benchmark("tb:x=1/2", p)  # several values turn a parameter into a sweep axis
    assert len(b.cases()) == 8
    with pytest.raises(benchfile.BenchError, match="no parameter or sweep axis 'y'"):
        benchfile.load_benchmark("tb:y=1", p)
    with pytest.raises(benchfile.BenchError, match="not one of"):
        benchfile.load_benchmark("tb:mode=c", p)
    with pytest.raises(benchfile.BenchError, match="KEY=VALUE"):
        benchfile.load_benchmark("tb:mode", p)
    with pytest.raises(benchfile.BenchError, match="unknown benchmark 'nonesuch'"):
        benchfile.load_benchmark("nonesuch")


@pytest.mark.parametrize("change, message", [
    (("command = \"prog {mode} -n {n} -x {x}\"", "command = \"prog {zz}\""), "{zz}"),
    (("mean = \"amean\"", "mean = \"median\""), "field 'mean'"),
    (("regex = 'time: ([0-9.]+)'", "regex = 'time: [0-9.]+'"), "capture group"),
    (("est_seconds = \"n * 2 + 1\"", "est_seconds = \"mode * 2\""), "est_seconds"),
    (("est_seconds = \"n * 2 + 1\"", "est_seconds = \"__import__('os')\""), "est_seconds"),
    (("a = \"--alpha\", b = \"\" }", "a = \"--alpha\" }"), "choices.mode"),
])
def test_malformed_benchmark_names_the_field(tmp_path, change, message):
    p = write_bench(tmp_path, TB.replace(*change))
    with pytest.raises(benchfile.BenchError, match=message.replace("{", r"\{").replace("}", r"\}")):
        benchfile.load_benchmark("tb", p)


def test_figure_parse_aggregates():
    text = "jbb_ops_per_s: 100.0\nother\njbb_ops_per_s: 300\n"
    mk = lambda agg: benchfile.Figure("f", r"jbb_ops_per_s:\s*([0-9.]+)", "", True, "hmean", agg)  # noqa: E731
    assert mk("first").parse(text) == 100.0
    assert mk("last").parse(text) == 300.0
    assert mk("sum").parse(text) == 400.0
    assert mk("mean").parse(text) == 200.0
    assert mk("min").parse(text) == 100.0 and mk("max").parse(text) == 300.0
    assert mk("sum").parse("nothing") is None


def test_netperf_and_hackbench_regexes_match_real_output():
    hb = benchfile.load_benchmark("hackbench").figures[0]
    assert hb.parse("Running in process mode with 4 groups\nTime: 15.366\n") == 15.366
    st = benchfile.load_benchmark("netperf-stream").figures[0]
    assert st.parse("153.39,10^6bits/s\n") == 153.39
    rr = benchfile.load_benchmark("netperf-rr").figures[0]
    assert rr.parse("54879.14,Trans/s\n") == 54879.14
    assert rr.parse("153.39,10^6bits/s\n") is None


def test_sched_list_and_ablation():
    specs = bench.parse_sched_list("eevdf,scx_locality:--slice-us 3000", ablate=True)
    labels = [s.label for s in specs]
    assert labels[:2] == ["eevdf", "scx_locality:--slice-us 3000"]
    mechs = benchfile.ablation_mechanisms()
    assert {m["off"] for m in mechs} >= {"--no-steal", "--no-idle-core"}
    for m in mechs:
        assert f"scx_locality:--slice-us 3000 {m['off']}" in labels
    assert len(labels) == 2 + len(mechs)
    assert [s.label for s in bench.parse_sched_list("eevdf", ablate=True)][1] == "scx_locality"
    with pytest.raises(benchfile.BenchError, match="twice"):
        bench.parse_sched_list("eevdf,eevdf", ablate=False)
    with pytest.raises(run.UsageError):
        bench.parse_sched_list("eevdf,scx_nonesuch", ablate=False)


def test_plan_rotates_scheduler_order_per_run(tmp_path):
    b1 = benchfile.load_benchmark("tb", write_bench(tmp_path, TB))
    b2 = benchfile.load_benchmark("wakelat")
    s = [run.parse_sched(x) for x in ("eevdf", "scx_locality", "scx_rusty")]
    p0 = [(b.name, x.label) for b, x in bench.plan_run([b1, b2], s, 0)]
    p1 = [(b.name, x.label) for b, x in bench.plan_run([b1, b2], s, 1)]
    assert p0[:3] == [("tb", "eevdf"), ("tb", "scx_locality"), ("tb", "scx_rusty")]
    assert p1[:3] == [("tb", "scx_locality"), ("tb", "scx_rusty"), ("tb", "eevdf")]
    assert p1[3:] == [("wakelat", "scx_locality"), ("wakelat", "scx_rusty"), ("wakelat", "eevdf")]
    assert bench.plan_run([b1], s, 3) == bench.plan_run([b1], s, 0)


def test_step_command_runs_every_case_under_the_sampler(tmp_path):
    b = benchfile.load_benchmark("tb", write_bench(tmp_path, TB))
    cmd = guest_script.step_command(b.cases(), 2, "run=1 bench=tb sched=eevdf")
    assert cmd.startswith(". /lab/lib.sh")
    assert cmd.count("locsample ") == 4
    assert "-t 30 -o /tmp/lb/s2c0 -- /bin/sh -c 'prog --alpha -n 1 -x 7'" in cmd
    for kind in ("out", "tasks", "cpu", "bpf", "irq"):
        assert f"lab_put_file s2c3.{kind} /tmp/lb/s2c3.{kind}" in cmd
    # interrupts: /proc/interrupts before and after the case
    assert cmd.index("{ echo begin; cat /proc/interrupts; } > /tmp/lb/s2c0.irq") < cmd.index("-o /tmp/lb/s2c0 --") < \
        cmd.index("{ echo end; cat /proc/interrupts; } >> /tmp/lb/s2c0.irq")
    # BPF cost: stats switched on and a snapshot taken before the case, another after it
    assert cmd.index("{ echo begin; bpfcost -e; } > /tmp/lb/s2c0.bpf") < cmd.index("-o /tmp/lb/s2c0 --") < \
        cmd.index("{ echo end; bpfcost; } >> /tmp/lb/s2c0.bpf")
    # The lab quotes the step command once more for the guest's /bin/sh -c: it must survive that.
    assert shlex.split(shlex.quote(cmd)) == [cmd]
    r = subprocess.run(["sh", "-n", "-c", cmd])
    assert r.returncode == 0


TASKS = """# locsample 1 interval_ms=100
end 2500 0
ticks 25 40
task 100 100 sh 0 2400 0 0:25:0
task 101 101 hackbench 0 2400 5 0:10:10,1:5:5,4:5:5,0:5:5
task 101 102 hackbench 100 2400 -1 2:24:20
task 103 103 numajob 0 2400 2 5:20:20,1:5:5
"""

TOPO = machines.Topology(nodes=((0, 1, 2, 3), (4, 5, 6, 7)), llcs=((0, 1), (2, 3), (4, 5), (6, 7)),
                         smt=tuple((c,) for c in range(8)), distances=((10, 32), (32, 10)))


def test_parse_tasks():
    meta, tasks = samples.parse_tasks(TASKS)
    assert meta == {"elapsed_ms": 2500, "rc": 0, "timeout": False, "ticks": 25, "busy_ms": 40,
                    "stat_samples": None, "stat_us": None, "rq_ms": None}  # a file from before the rq lines
    assert len(tasks) == 4
    t = tasks[1]
    assert (t.tgid, t.tid, t.comm, t.nr_migrations) == (101, 101, "hackbench", 5)
    assert t.runs == [(0, 10, 10), (1, 5, 5), (4, 5, 5), (0, 5, 5)]
    assert tasks[2].nr_migrations is None
    meta, _ = samples.parse_tasks("end 10 124 timeout\n")
    assert meta["timeout"] and meta["rc"] == 124


def test_locality_counts_moves_by_level():
    _, tasks = samples.parse_tasks(TASKS)
    loc = samples.locality(samples.select_tasks(tasks), TOPO)
    # sh is the harness's; task 101: 0->1 (same LLC), 1->4 (LLC and node), 4->0 (LLC and node);
    # task 102: no move; task 103: 5->1 (LLC and node).
    assert loc["tasks"] == 3
    assert (loc["moves"], loc["cross_llc"], loc["cross_node"]) == (4, 3, 3)
    assert loc["nr_migrations"] == 7  # 5 + 2; the task without a sched file is left out
    assert loc["samples"] == 25 + 24 + 25
    # homes: 101 node 0 (20 of 25), LLC 0 (20); 102 all 24; 103 node 1 (20), LLC 2 (20)
    assert loc["home_node_samples"] == 20 + 24 + 20
    assert loc["home_llc_samples"] == 20 + 24 + 20
    only = samples.locality(samples.select_tasks(tasks, ["numajob"]), TOPO)
    assert only["tasks"] == 1 and only["cross_node"] == 1


def test_residency_rows_with_memory_node():
    _, tasks = samples.parse_tasks(TASKS + "task 104 104 numajob 0 2400 0 1:25:25\n")
    out = ("numajob id=1 pid=104 sum=3 mem_pages=0:16384 elapsed_s=2.000\n"
           "numajob id=0 pid=103 sum=1 mem_pages=0:100,1:16284 elapsed_s=3.500\n")
    rows = samples.residency(tasks, TOPO, "numajob", out)
    assert [r["id"] for r in rows] == [0, 1]
    assert rows[0]["node_samples"] == [5, 20] and rows[0]["mem_node"] == 1 and rows[0]["elapsed_s"] == 3.5
    assert rows[1]["node_samples"] == [25, 0] and rows[1]["mem_node"] == 0


def test_process_llc_counts_running_samples_per_llc():
    _, tasks = samples.parse_tasks(TASKS + "task 105 105 hackbench 0 2400 0 6:10:0\n")
    rows = samples.process_llc(samples.select_tasks(tasks, ["hackbench"]), TOPO)
    # process 101: thread 101 ran 20 on LLC 0 (cpus 0, 1) and 5 on LLC 2 (cpu 4); thread 102 20 on LLC 1
    # (a tie: the lower LLC is the top); process 105 was never seen running: left out
    assert len(rows) == 1
    r = rows[0]
    assert (r["pid"], r["threads"], r["llc_running"], r["running"]) == (101, 2, [20, 20, 5, 0], 45)
    assert (r["top_llc"], r["share"]) == (0, 0.4444)
    assert samples.process_llc([], TOPO) == []


def test_cache_benchmarks_sweep_pairs_and_instances():
    b = benchfile.load_benchmark("cache-hackbench")
    assert b.process_llc and b.sample_comm == ["hackbench"]
    cmds = {c.label: c.command for c in b.cases()}
    assert cmds["socket-8"] == "hackbench  -T -g 1 -f 8 -l $(( 1000000 / (8 * 8) ))"
    assert cmds["pipe-1"].startswith("hackbench --pipe -T -g 1 -f 1 ")
    i = benchfile.load_benchmark("cache-instances:instances=2")
    assert i.process_llc and [c.label for c in i.cases()] == ["pipe", "socket"]
    assert "-lt 2 ]" in i.cases()[0].command
    assert i.to_json()["process_llc"] is True


GUEST_SH = image.BUSYBOX if Path(image.BUSYBOX).exists() else None  # the guest's shell (busybox-static)


def run_case_shell(command: str, ncpus: int, fakes: str) -> str:
    """A case's command in the guest's shell with nproc answering ncpus and the benchmark's programs replaced
    by shell functions (fakes) that print their arguments."""
    if GUEST_SH is None:
        pytest.skip("busybox-static missing (bin/lab setup)")
    script = f"nproc() {{ echo {ncpus}; }}; {fakes}\n{command}"
    r = subprocess.run([GUEST_SH, "sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_hackbench_load_runs_the_load_times_the_cpus_as_tasks():
    """hackbench-load: 2 tasks a group (-f 1), groups = load x CPUs / 2 (at least 1), the same messages a case."""
    b = benchfile.load_benchmark("hackbench-load")
    msgs = b.params["msgs"]
    want = {8: {"0.25x": 2, "0.5x": 4, "1x": 8, "2x": 16, "4x": 32},
            16: {"0.25x": 4, "0.5x": 8, "1x": 16, "2x": 32, "4x": 64},
            4: {"0.25x": 2, "0.5x": 2, "1x": 4, "2x": 8, "4x": 16}}
    assert len(b.cases()) == 20
    for ncpus, tasks in want.items():
        for c in b.cases():
            mode, ipc, load = c.label.split("-")
            args = run_case_shell(c.command, ncpus, 'hackbench() { echo "$@"; }').split()
            opt = dict(zip(args[:-1], args[1:]))
            assert opt["-f"] == "1" and 2 * int(opt["-g"]) == tasks[load], (ncpus, c.label, args)
            g, loops = int(opt["-g"]), int(opt["-l"])
            assert msgs - g < g * loops <= msgs
            assert ("--threads" in args) == (mode == "thread") and ("--pipe" in args) == (ipc == "pipe")


TBENCH_OUT = """Running for 10 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 2 secs
   8       119    41.70 MB/sec  warmup   1 sec  latency 88.911 ms
   8       852    22.03 MB/sec  execute   3 sec  latency 95.102 ms
   0  cleanup  11 sec
Throughput 21.4848 MB/sec  8 clients  8 procs  max_latency=161.833 ms
"""


def test_tbench_clients_and_figure():
    """tbench: clients 1x and 2x the CPUs against a local tbench_srv; the figure is the final throughput line,
    not a per-second progress line."""
    b = benchfile.load_benchmark("tbench")
    fakes = 'tbench_srv() { :; }; sleep() { :; }; tbench() { echo "$@"; }'
    got = {c.label: run_case_shell(c.command, 8, fakes).split() for c in b.cases()}
    assert got == {"1x": ["-t", "10", "8", "127.0.0.1"], "2x": ["-t", "10", "16", "127.0.0.1"]}
    fig = b.figures[0]
    assert fig.higher_is_better and fig.mean == "hmean" and fig.parse(TBENCH_OUT) == 21.4848
    assert fig.parse(TBENCH_OUT.replace("Throughput 21.4848", "Throughput 1.5e+03")) == 1500.0


def test_kernbench_jobs_half_full_double_and_its_extra():
    """kernbench: make -j at half (rounded up, at least 1), once and twice the CPUs, in boots with its extra."""
    b = benchfile.load_benchmark("kernbench")
    assert b.image_extras == ["kernbench"]
    fakes = "kb() { echo \"$@\"; }"
    for ncpus, want in ((8, {"half": "4", "full": "8", "double": "16"}), (1, {"half": "1", "full": "1", "double": "2"}),
                        (3, {"half": "2", "full": "3", "double": "6"})):
        got = {c.label: run_case_shell(c.command.replace("/lab/kernbench.sh", "kb"), ncpus, fakes).strip()
               for c in b.cases()}
        assert got == want, ncpus
    fig = b.figures[0]
    assert not fig.higher_is_better and fig.mean == "amean" and fig.unit == "s"


def test_topology_order_of_a_machine():
    t = machines.load("haswell2s").topology()
    order = t.cpu_order()
    node = t.node_of()
    assert sorted(order) == list(range(16))
    assert [node[c] for c in order] == sorted(node[c] for c in order)


def test_final_stats_line():
    log = ("starting\nscx_locality-final-stats: {\"migr_cross_llc\": 4, \"idle_while_queued_llc_ms\": 1.5}\n")
    assert samples.parse_final_stats(log) == {"migr_cross_llc": 4, "idle_while_queued_llc_ms": 1.5}
    assert samples.parse_final_stats("no stats here\n") is None
    assert samples.parse_final_stats("scx_locality-final-stats: {broken\n") is None


def test_bpf_program_names_map_to_callbacks():
    # the kernel keeps 15 characters of a program's name
    assert samples.callback_of("locality_select") == "select_cpu"
    assert samples.callback_of("locality_dispat") == "dispatch"
    assert samples.callback_of("locality_init_t") == "init_task"   # not "tick" from the last "_t"
    assert samples.callback_of("locality_init") == "init"          # not cut: exact
    assert samples.callback_of("bpfland_runnabl") == "runnable"
    assert samples.callback_of("bpfland_runnin") == "bpfland_runnin"  # 14 characters: not cut, no callback
    assert samples.callback_of("p2dq_select_cpu") == "select_cpu"
    assert samples.callback_of("rusty_cgroup_") == "rusty_cgroup_"   # several callbacks begin so: kept as is


BPFCOST = """begin
prog 40 locality_select run_cnt 100 run_time_ns 50000
prog 41 locality_dispat run_cnt 10 run_time_ns 9000
prog 42 locality_init_t run_cnt 3 run_time_ns 300
end
prog 40 locality_select run_cnt 300 run_time_ns 250000
prog 41 locality_dispat run_cnt 10 run_time_ns 9000
prog 42 locality_init_t run_cnt 5 run_time_ns 700
prog 43 locality_enqueu run_cnt 7 run_time_ns 700
"""


INTERRUPTS = """begin
            CPU0       CPU1
   1:          9          0   IO-APIC   1-edge      i8042
 LOC:       1000       2000   Local timer interrupts
 RES:         10         20   Rescheduling interrupts
 IWI:          0          0   IRQ work interrupts
 ERR:          0
 RTR:          5          5   APIC ICR read retries
end
            CPU0       CPU1
   1:         99          0   IO-APIC   1-edge      i8042
 LOC:       1500       2600   Local timer interrupts
 RES:         15         45   Rescheduling interrupts
 IWI:          7          0   IRQ work interrupts
 ERR:          0
 RTR:          5          5   APIC ICR read retries
"""


def test_parse_interrupts_sums_named_rows_over_cpus():
    # numbered device lines left out; a description's own words (and numbers) are not counts
    assert samples.parse_interrupts(INTERRUPTS) == {"LOC": 1100, "RES": 30, "IWI": 7, "ERR": 0, "RTR": 0}
    assert samples.parse_interrupts("begin\n LOC: 1 2 Local timer interrupts\n") is None   # no end snapshot
    assert samples.parse_interrupts("") is None


def test_parse_bpfcost_takes_the_difference_per_callback():
    assert samples.parse_bpfcost(BPFCOST) == {"select_cpu": {"calls": 200, "ns": 200000},
                                              "init_task": {"calls": 2, "ns": 400},
                                              "enqueue": {"calls": 7, "ns": 700}}
    assert samples.parse_bpfcost("begin\nend\n") is None            # EEVDF: no struct_ops programs
    assert samples.parse_bpfcost("begin\nbpfcost: Operation not permitted\nend\n") is None


def fake_result(tmp_path, files, steps):
    rd = tmp_path / "rundir"
    rd.mkdir(exist_ok=True)
    r = run.RunResult(machine="numa2", run_dir=str(rd), kernel_log=str(rd / "kernel.log"), completed=True,
                      topology_ok=True, steps=steps)
    for name, text in files.items():
        (rd / name).write_text(text)
        r.files[name] = str(rd / name)
    return r


def test_collect_step_parses_figures_locality_and_failures(tmp_path):
    b = benchfile.load_benchmark("tb:mode=a", write_bench(tmp_path, TB))
    out = tmp_path / "out"
    raw = out / "raw" / "run1"
    raw.mkdir(parents=True)
    files = {"s0c0.out": "time: 1.25\nlab-bench-rc: 0\n", "s0c0.tasks": TASKS, "s0c0.cpu": "0 cpu0 1 0 1 8 0 0 0 0\n",
             "s0c0.bpf": BPFCOST, "s0c1.out": "boom\nlab-bench-rc: 2\n", "s0c1.tasks": "end 10 2\n"}
    res = fake_result(tmp_path, files, [run.StepResult(sched="eevdf", cmd_exit=0, cmd_seconds=3.0)])
    st = bench.collect_step(res, 0, b, run.parse_sched("eevdf"), TOPO, out, raw)
    assert st["started"] and st["sched"] == "eevdf"
    ok, bad = st["cases"]
    assert ok["status"] == "ok" and ok["figures"] == {"t": 1.25} and ok["elapsed_s"] == 2.5
    assert ok["locality"]["cross_node"] == 3
    assert ok["sampler"] == {"ticks": 25, "busy_ms": 40, "stat_samples": None, "stat_us": None, "rq_ms": None}
    assert ok["idle_queued"] is None  # a .cpu file without rq lines
    assert ok["bpf_cost"]["select_cpu"] == {"calls": 200, "ns": 200000} and bad["bpf_cost"] is None
    assert (out / ok["files"]["tasks"]).exists()
    assert bad["status"] == "failed" and bad["figures"] == {"t": None}
    assert "exit status 2" in bad["error"] and "boom" in bad["error"]


def test_collect_step_of_a_scheduler_that_did_not_start(tmp_path):
    b = benchfile.load_benchmark("tb:mode=a:n=1", write_bench(tmp_path, TB))
    out = tmp_path / "out"
    raw = out / "raw" / "run1"
    raw.mkdir(parents=True)
    res = fake_result(tmp_path, {"sched-0.log": "libbpf: failed to load\nError: Invalid argument\n"},
                      [run.StepResult(sched="scx_locality", sched_start_error="exited 1")])
    res.steps[0].sched_log = res.files["sched-0.log"]
    st = bench.collect_step(res, 0, b, run.parse_sched("scx_locality"), TOPO, out, raw)
    assert not st["started"]
    assert st["start_error"].startswith("exited 1: ") and "Invalid argument" in st["start_error"]
    (c,) = st["cases"]
    assert c["status"] == "not-run" and "did not start" in c["error"]


def test_exit_code():
    ok_case = {"status": "ok"}
    base = {"scheds": [{"label": "eevdf"}], "runs": [
        {"topology_ok": True, "timed_out": False, "completed": True,
         "steps": [{"start_error": None, "ejected": False, "cases": [ok_case]}]}]}
    assert bench.exit_code(base) == 0
    bad = json.loads(json.dumps(base))
    bad["runs"][0]["steps"][0]["cases"][0]["status"] = "failed"
    assert bench.exit_code(bad) == run.EXIT_CMD_FAILED
    bad["runs"][0]["steps"][0]["start_error"] = "exited 1"
    assert bench.exit_code(bad) == run.EXIT_SCHED
    bad["runs"][0]["timed_out"] = True
    assert bench.exit_code(bad) == run.EXIT_TIMEOUT
    prep = json.loads(json.dumps(base))
    prep["scheds"].append({"label": "scx_rusty", "prepare_error": "cargo install failed"})
    assert bench.exit_code(prep) == run.EXIT_SCHED


def test_progress_eta_scales_with_observed_pace():
    p = bench.Progress(total_est=100)
    assert p.eta() == pytest.approx(100)
    p.t0 -= 20  # 20 s went by for 10 estimated seconds: twice as slow as estimated
    p.advance(10)
    assert p.eta() == pytest.approx(180, rel=0.05)


def test_console_watcher_keeps_only_markers():
    seen = []
    w = bench.ConsoleWatcher(bench.Progress(10), seen.append)
    w.write("kernel noise\nlab-bench: case-begin 0 1\nlab-bench: case-")
    w.write("end 0 1\npartial")
    assert seen == [["case-begin", "0", "1"], ["case-end", "0", "1"]]


def test_cli_usage_errors():
    r = subprocess.run([LAB, "bench", "--bench", "nonesuch", "--runs", "1"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown benchmark 'nonesuch'" in r.stderr and "hackbench" in r.stderr
    r = subprocess.run([LAB, "bench", "--sched", "eevdf,scx_nonesuch", "--bench", "wakelat"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unknown scheduler" in r.stderr
    r = subprocess.run([LAB, "bench", "--bench", "wakelat", "--runs", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--runs" in r.stderr
    r = subprocess.run([LAB, "bench", "--list"], capture_output=True, text=True)
    assert r.returncode == 0 and "numa-residency" in r.stdout
    r = subprocess.run([LAB, "peers", "scx_nonesuch"], capture_output=True, text=True)
    assert r.returncode == 2 and "scx_rusty" in r.stderr


CARGO_LOG = """   Compiling bitvec v1.1.1
error: failed to run custom build command for `scx_utils v1.1.4`
Caused by:
  process didn't exit successfully: `/tmp/x/build-script-build` (exit status: 101)
  --- stderr
  thread 'main' (1321) panicked at /root/.cargo/registry/src/scx_utils-1.1.4/build.rs:15:34:
  called `Result::unwrap()` on an `Err` value: Failed to run "clang --version"
warning: build failed, waiting for other jobs to finish...
error: failed to compile `scx_rusty v1.1.4`, intermediate artifacts can be found at `/tmp/cargo-installX`.
"""


def test_peer_failure_reason_names_the_cause():
    from lab import peers

    s = peers.error_summary(CARGO_LOG)
    assert s.startswith("error: failed to run custom build command for `scx_utils v1.1.4`")
    assert 'Failed to run "clang --version"' in s
    assert "intermediate artifacts" not in s
    assert peers.error_summary("just\nsome\nlines\n", limit=2) == "some | lines"


def test_peer_clang_choice(monkeypatch):
    from lab import peers

    monkeypatch.delenv("BPF_CLANG", raising=False)
    monkeypatch.setattr(peers.shutil, "which", lambda n: "/usr/bin/clang-19" if n == "clang-19" else None)
    assert peers.clang_for_bpf() == "/usr/bin/clang-19"
    monkeypatch.setenv("BPF_CLANG", "/opt/clang")
    assert peers.clang_for_bpf() is None  # the user's choice wins
    monkeypatch.delenv("BPF_CLANG")
    monkeypatch.setattr(peers.shutil, "which", lambda n: "/usr/bin/clang" if n == "clang" else None)
    assert peers.clang_for_bpf() is None


def test_peer_status_and_unknown_peer(monkeypatch, tmp_path):
    from lab import peers

    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path))
    assert peers.status("scx_rusty")[0] == "missing"
    (tmp_path / "peers" / "logs").mkdir(parents=True)
    (tmp_path / "peers" / "logs" / "scx_rusty.failed").write_text("cargo install failed: no clang\n")
    assert peers.status("scx_rusty") == ("failed", "cargo install failed: no clang")
    (tmp_path / "peers" / "bin").mkdir()
    (tmp_path / "peers" / "bin" / "scx_rusty").write_text("")
    assert peers.status("scx_rusty")[0] == "built"
    ok, why = peers.build("scx_locality")
    assert not ok and "no crate" in why


def test_peer_ops_name_carries_the_version_suffix(monkeypatch):
    from lab import peers

    monkeypatch.setattr(peers, "host_triple", lambda: "x86_64-unknown-linux-gnu")
    # seen in the guest: /sys/kernel/sched_ext/root/ops of a crates.io scx_rusty 1.1.4
    assert peers.ops_name("scx_rusty") == "rusty_1.1.4_x86_64_unknown_linux_gnu"
    assert peers.ops_name("scx_locality") is None and peers.ops_name("eevdf") is None
    specs = {s.name: s for s in bench.parse_sched_list("eevdf,scx_locality,scx_bpfland", ablate=False)}
    assert specs["scx_bpfland"].ops == "bpfland_1.1.4_x86_64_unknown_linux_gnu"
    assert specs["scx_locality"].ops == "locality"


# Co-location (locsample -k). Tasks by index: 0 sh, 1 hackbench main thread (idle), 2 sender, 3 receiver.
PAIR_TASKS = """# locsample 1 interval_ms=100
end 1000 0
ticks 8 4
task 200 200 sh 0 700 0 0:8:0
task 201 201 hackbench 0 700 0 0:8:1
task 201 202 hackbench 0 700 3 1:3:3,4:2:2,2:3:3
task 201 203 hackbench 0 600 2 1:2:2,5:4:4,6:1:0
"""
# One line per tick: ms, then index:cpu for new tasks or a changed CPU, -index for tasks gone.
#            tick ms   sender(2)  receiver(3)   nodes        LLCs (TOPO: 0-1, 2-3, 4-5, 6-7)
#            0    0    1          1             0 0 same     0 0 same
#            1    100  1          1             same         same
#            2    300  1          5             0 1 split    0 2 split
#            3    500  4          5             1 1 same     2 2 same
#            4    900  4          5             same         same
#            5    1100 2          5             0 1 split    1 2 split
#            6    1300 2          6             0 1 split    1 3 split
#            7    1400 2          (gone)        one task: not a pair tick
PAIR_TICKS = """# locsample-ticks 1 interval_ms=100
0 0:0 1:0 2:1 3:1
100
300 3:5
500 2:4
900
1100 2:2
1300 3:6 -0
1400 -3
"""


def test_parse_ticks():
    ticks = samples.parse_ticks(PAIR_TICKS + "garbage line\n")
    assert len(ticks) == 8
    assert ticks[0] == (0, {0: 0, 1: 0, 2: 1, 3: 1}, [])
    assert ticks[1] == (100, {}, [])
    assert ticks[6] == (1300, {3: 6}, [0])
    assert ticks[7] == (1400, {}, [3])


def test_busiest_tasks_pick_the_pair():
    _, tasks = samples.parse_tasks(PAIR_TASKS)
    sel = samples.select_tasks(tasks, ["hackbench"])
    assert len(sel) == 3
    # running samples: main thread 1, sender 8, receiver 6
    assert samples.busiest(tasks, sel, 2) == [2, 3]
    assert samples.busiest(tasks, sel, None) == [1, 2, 3]
    assert samples.busiest(tasks, samples.select_tasks(tasks), 1) == [2]


def test_colocation_of_a_pair_tick_by_tick():
    _, tasks = samples.parse_tasks(PAIR_TASKS)
    co = samples.colocation(samples.parse_ticks(PAIR_TICKS), [2, 3], TOPO, settle_ms=1000, tasks=tasks)
    # pair ticks 0..6 (7); on one node at ticks 0, 1, 3, 4 (4); on one LLC at the same four
    assert (co["ticks"], co["pair_ticks"], co["same_node"], co["same_llc"]) == (8, 7, 4, 4)
    # sender 1->4 at 500 ms (node, LLC), 4->2 at 1100 ms (node, LLC, after start: 1100 - 0 >= 1000);
    # receiver 1->5 at 300 ms (node, LLC), 5->6 at 1300 ms (LLC only, same node 1)
    assert (co["cross_node"], co["cross_llc"]) == (3, 4)
    assert (co["cross_node_after_start"], co["cross_llc_after_start"]) == (1, 2)
    # after start: ticks 5 and 6 (both tasks past 1000 ms), both split
    assert (co["pair_ticks_after_start"], co["same_node_after_start"], co["same_llc_after_start"]) == (2, 0, 0)
    assert [w["tid"] for w in co["which"]] == [202, 203]
    assert co["which"][0] == {"tid": 202, "comm": "hackbench", "samples": 8, "running": 8}
    # With the idle main thread (always on CPU 0, node 0) as a third task: every tick has 2+ tasks (at 1400 ms
    # the main thread and the sender); all on one node at ticks 0, 1 (CPUs 0, 1, 1) and 7 (CPUs 0, 2) only,
    # since whenever the pair is together on node 1 (ticks 3, 4) the main thread is on node 0
    three = samples.colocation(samples.parse_ticks(PAIR_TICKS), [1, 2, 3], TOPO, settle_ms=0)
    assert (three["pair_ticks"], three["same_node"]) == (8, 3)
    # ...and no settle time counts every move as after start
    assert three["cross_node_after_start"] == three["cross_node"] == 3


def test_colocation_counts_a_tick_with_three_on_one_node():
    ticks = samples.parse_ticks("0 0:0 1:1 2:2\n100 2:4\n200 2:3\n")
    co = samples.colocation(ticks, [0, 1, 2], TOPO, settle_ms=150)
    assert (co["pair_ticks"], co["same_node"], co["same_llc"]) == (3, 2, 0)  # LLCs {0, 1}, then node split
    assert (co["cross_node"], co["cross_node_after_start"]) == (2, 1)  # 2->4 at 100 ms, 4->3 at 200 ms
    # busiest node's share per tick: 3/3, 2/3 (task 2 alone on node 1), 3/3
    assert co["node_share_sum"] == pytest.approx(1 + 2 / 3 + 1)


def test_colocation_counts_ticks_with_a_core_each():
    smt = machines.Topology(nodes=((0, 1, 2, 3, 4, 5, 6, 7),), llcs=((0, 1, 2, 3, 4, 5, 6, 7),),
                            smt=((0, 1), (2, 3), (4, 5), (6, 7)), distances=((10,),))
    # cores 0, 1, 2 | CPUs 0 and 1 are siblings | CPU 4 twice | one task seen alone (not a pair tick)
    ticks = samples.parse_ticks("0 0:0 1:2 2:4\n100 0:0 1:1 2:4\n200 0:4 1:4 2:6\n300 0:0 1:2 2:6\n400 -1 -2\n")
    co = samples.colocation(ticks, [0, 1, 2], smt, settle_ms=150)
    assert (co["pair_ticks"], co["own_core"]) == (4, 2)
    assert (co["pair_ticks_after_start"], co["own_core_after_start"]) == (2, 1)
    # without SMT every CPU is its own core: only the tick with CPU 4 twice shares one
    assert samples.colocation(ticks, [0, 1, 2], TOPO, settle_ms=0)["own_core"] == 3


def test_idle_core_benchmark_confines_its_workers_to_node_0():
    b = benchfile.load_benchmark("idle-core")
    (case,) = b.cases()
    assert case.command.startswith("taskset -c $(cat /sys/devices/system/node/node0/cpulist) stress-ng --cpu 3 ")
    assert b.colocation_tasks == 3
    # stress-ng's --metrics-brief line: the real-time bogo ops/s is the figure
    line = "stress-ng: metrc: [812] cpu              41230      5.01     14.92      0.01      8229.54        2761.85\n"
    assert re.search(b.figures[0].regex, line, re.M).group(1) == "8229.54"


def test_numa_pair_benchmark_cases_and_figures():
    b = benchfile.load_benchmark("numa-pair")
    cases = {c.label: c for c in b.cases()}
    assert set(cases) == {"hackbench-pair", "hackbench-pair-after-stress", "netperf-stream",
                          "hackbench-pair-beside-spinner"}
    assert cases["hackbench-pair"].command.startswith("hackbench -p -T -g 1 -f 1 -l ")
    after = cases["hackbench-pair-after-stress"].command
    assert after.startswith("stress-ng --affinity") and "-t 10 " in after and "hackbench -p -T -g 1 -f 1" in after
    assert "{" not in cases["hackbench-pair"].command  # the choice's {loops} was filled in
    assert "-t TCP_STREAM" in cases["netperf-stream"].command and "127.0.0.2" in cases["netperf-stream"].command
    assert all(c.ticks for c in cases.values()) and b.colocation_tasks == 2
    assert {f.name: f.cases for f in b.figures} == {
        "hackbench-time": ["hackbench-pair", "hackbench-pair-after-stress", "hackbench-pair-beside-spinner"],
        "netperf-throughput": ["netperf-stream"]}
    small = benchfile.load_benchmark("numa-pair:loops=1000:pair=hackbench-pair")
    assert [c.command for c in small.cases()] == ["hackbench -p -T -g 1 -f 1 -l 1000"]
    # a choice names another sweep axis: each case fills in its own value (the pair test's rounds)
    rounds = benchfile.load_benchmark("numa-pair:pair=hackbench-pair:loops=1000/1001")
    assert [c.command for c in rounds.cases()] == ["hackbench -p -T -g 1 -f 1 -l 1000",
                                                   "hackbench -p -T -g 1 -f 1 -l 1001"]
    assert not any(c.ticks for c in benchfile.load_benchmark("hackbench").cases())


def test_malformed_colocation_fields(tmp_path):
    with pytest.raises(benchfile.BenchError, match="colocation_tasks"):
        benchfile.load_benchmark("tb", write_bench(tmp_path, "colocation_tasks = 1\n" + TB))
    with pytest.raises(benchfile.BenchError, match=r"choices.mode.a.*\{nope\}"):
        benchfile.load_benchmark("tb", write_bench(tmp_path, TB.replace('"--alpha"', '"--alpha {nope}"')))
    with pytest.raises(benchfile.BenchError, match=r"choices.mode.a.*\{mode\}"):  # not its own axis
        benchfile.load_benchmark("tb", write_bench(tmp_path, TB.replace('"--alpha"', '"--alpha {mode}"')))
    zz = TB.replace('mean = "amean"', 'mean = "amean"\ncases = ["zz"]')
    with pytest.raises(benchfile.BenchError, match="no case 'zz'"):
        benchfile.load_benchmark("tb", write_bench(tmp_path, zz))


def test_step_command_asks_for_ticks_only_with_colocation(tmp_path):
    b = benchfile.load_benchmark("tb", write_bench(tmp_path, "colocation_tasks = 2\n" + TB))
    cmd = guest_script.step_command(b.cases(), 0, "run=1 bench=tb sched=eevdf")
    assert cmd.count(" -k -o ") == 4
    assert "lab_put_file s0c1.ticks /tmp/lb/s0c1.ticks" in cmd and "/tmp/lb/s0c1.ticks\n" in cmd
    plain = guest_script.step_command(benchfile.load_benchmark("tb", write_bench(tmp_path, TB)).cases(), 0, "x")
    assert " -k " not in plain and ".ticks" not in plain


def test_collect_step_with_ticks_and_per_case_figures(tmp_path):
    text = TB.replace('mean = "amean"', 'mean = "amean"\ncases = ["a-1"]') + """
[[figure]]
name = "rate"
regex = 'rate: ([0-9.]+)'
higher_is_better = true
mean = "hmean"
cases = ["b-1"]
"""
    text = "colocation_tasks = 2\nsample_comm = [\"hackbench\"]\n" + text.replace("n = [1, 3]", "n = [1]")
    b = benchfile.load_benchmark("tb", write_bench(tmp_path, text))
    out = tmp_path / "out"
    raw = out / "raw" / "run1"
    raw.mkdir(parents=True)
    files = {"s0c0.out": "time: 1.5\nlab-bench-rc: 0\n", "s0c0.tasks": PAIR_TASKS, "s0c0.ticks": PAIR_TICKS,
             "s0c1.out": "rate: 40\nlab-bench-rc: 0\n", "s0c1.tasks": PAIR_TASKS}
    res = fake_result(tmp_path, files, [run.StepResult(sched="eevdf", cmd_exit=0, cmd_seconds=3.0)])
    st = bench.collect_step(res, 0, b, run.parse_sched("eevdf"), TOPO, out, raw)
    a, bb = st["cases"]
    assert a["status"] == "ok" and a["figures"] == {"t": 1.5}
    assert bb["status"] == "ok" and bb["figures"] == {"rate": 40.0}
    assert a["colocation"]["pair_ticks"] == 7 and a["colocation"]["same_node"] == 4
    assert [w["tid"] for w in a["colocation"]["which"]] == [202, 203]
    assert (out / a["files"]["ticks"]).exists()
    assert bb["colocation"] is None  # no ticks file came back
    assert b.to_json()["figures"][0]["cases"] == ["a-1"]


MEMSPAN_TWO = """memspan: pid=257 threads=4 shared_mb=128 private_mb=16 init=main runtime_s=20 nodes=4 instance=1
memspan: pid=258 threads=4 shared_mb=128 private_mb=16 init=main runtime_s=20 nodes=4 instance=2
memspan_ops_per_s: 1875.1 instance=1
memspan_active_nodes: 2 nodes=0,1 instance=1
memspan_shared_node: 0 pages=30208 share=0.922 active=1 instance=1
memspan_shared_imbalance: 1.844 instance=1
memspan_private_local: 0.950 instance=1
memspan_inactive_share: 0.010 instance=1
memspan_migrated_mb: 10.0 instance=1
memspan_ops_per_s: 1000 instance=2
memspan_active_nodes: 3 nodes=1,2,3 instance=2
memspan_shared_imbalance: 1.100 instance=2
memspan_private_local: 0.800 instance=2
memspan_inactive_share: 0.000 instance=2
memspan_migrated_mb: 12.5 instance=2
"""


def test_memory_span_benchmark_cases_and_figures():
    """van Riel 2014's spanning case: one or two memspan instances spanning 2 nodes each, kernel NUMA balancing on; the figures take
    the worst instance (shared-imbalance, inactive share: max; private locality: min)."""
    b = benchfile.load_benchmark("memory-span")
    cases = {c.label: c.command for c in b.cases()}
    assert set(cases) == {"1-main", "1-threads", "2-main", "2-threads"}
    for label, cmd in cases.items():
        assert cmd.startswith("echo 1 > /proc/sys/kernel/numa_balancing;")
        assert f"--init={label.split('-')[1]}" in cmd and f"-le {label[0]} ]" in cmd
        assert "memspan -N 2 -S 128 -P 16 -r 20 " in cmd and "-s $i &" in cmd
    assert b.residency_comm == "memspan"
    got = {f.name: f.parse(MEMSPAN_TWO) for f in b.figures}
    assert got == {"ops-total": 2875.1, "ops-slowest": 1000.0, "active-nodes-max": 3.0, "shared-imbalance": 1.844,
                   "private-local-min": 0.8, "inactive-share-max": 0.01, "migrated-mb": 12.5}
    lower = {f.name for f in b.figures if not f.higher_is_better}
    assert lower == {"active-nodes-max", "shared-imbalance", "inactive-share-max", "migrated-mb"}
    one = benchfile.load_benchmark("memory-span:instances=1:init=main:seconds=5")
    assert [c.label for c in one.cases()] == ["1-main"] and "-r 5 " in one.cases()[0].command


def test_memory_jbb2_spanning_placement_and_figures():
    """van Riel 2014's spanning case: jbb instances bigger than a node; pinned-half binds each instance to half the nodes."""
    b = benchfile.load_benchmark("memory-jbb2")
    assert [c.label for c in b.cases()] == ["free", "pinned"]  # pinned-half is asked for by name
    half = benchfile.load_benchmark("memory-jbb2:placement=pinned-half").cases()[0].command
    assert "numactl -N 0-$(( h - 1 )) -m 0-$(( h - 1 )) jbb $a -s 1 &" in half
    assert "numactl -N $h-$(( n - 1 )) -m $h-$(( n - 1 )) jbb $a -s 2 &" in half
    text = ("jbb_ops_per_s: 10.0\njbb_active_nodes: 2 nodes=0,1 instance=1\njbb_wh_local: 0.900 instance=1\n"
            "jbb_inactive_share: 0.020 instance=1\njbb_migrated_mb: 4.0 instance=1\n"
            "jbb_ops_per_s: 20.0\njbb_active_nodes: 3 nodes=1,2,3 instance=2\njbb_wh_local: 0.700 instance=2\n"
            "jbb_inactive_share: 0.000 instance=2\njbb_migrated_mb: 6.5 instance=2\n")
    got = {f.name: f.parse(text) for f in b.figures}
    assert got["ops-total"] == 30.0 and got["active-nodes-max"] == 3.0 and got["wh-local-min"] == 0.7
    assert got["inactive-share-max"] == 0.02 and got["migrated-mb"] == 6.5


def test_memspan_output_matches_the_memory_span_figures():
    """workloads/memspan on this machine (tiny sizes): every figure of memory-span parses from its output."""
    prog = paths.REPO / "workloads" / "build" / "memspan"
    if not prog.exists():
        pytest.skip("workloads not built (make -C workloads)")
    r = subprocess.run([str(prog), "-t", "2", "-S", "4", "-P", "1", "-r", "0.3", "-w", "0", "--init=threads",
                        "-s", "7"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("memspan_")]
    assert lines and all(x.endswith(" instance=7") for x in lines)
    got = {f.name: f.parse(r.stdout) for f in benchfile.load_benchmark("memory-span").figures}
    assert None not in got.values(), got
    assert got["ops-total"] > 0 and 0 <= got["private-local-min"] <= 1 and 0 <= got["inactive-share-max"] <= 1
    assert got["active-nodes-max"] >= 1 and got["shared-imbalance"] > 0
