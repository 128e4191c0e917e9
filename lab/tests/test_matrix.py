# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab matrix without a guest: the plan file, run-major order, resuming after an interruption, and the
results page's statistics. run.run_job is replaced by a fake that answers every case with a given figure."""
import io
import json

import pytest
from fakeboot import FakeBoots

from lab import bench, matrix, run

SPEC_A = "hackbench:mode=thread:ipc=pipe:groups=1"
SPEC_B = "hackbench:mode=process:ipc=pipe:groups=1"


def write_plan(tmp_path, runs=2, scheds='["eevdf", "scx_locality", "scx_p2dq"]'):
    p = tmp_path / "matrix.toml"
    p.write_text(f'schedulers = {scheds}\nruns = {runs}\n[machines.numa2]\nbenchmarks = ["{SPEC_A}", "{SPEC_B}"]\n'
                 f'[quick]\nruns = 1\n[quick.machines.numaq4]\nbenchmarks = ["{SPEC_A}"]\n')
    return p


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALITY_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(bench, "build_workloads", lambda log: None)
    monkeypatch.setattr(bench, "prepare_schedulers", lambda specs, build, log: {})
    lab = FakeBoots(tmp_path, {"eevdf": [2.0, 2.1, 2.2], "scx_locality": [1.0, 1.05, 1.1],
                               "scx_p2dq": [1.5, 3.0, 2.2]})
    monkeypatch.setattr(run, "run_job", lab.run_job)
    return lab


def test_shipped_matrix_and_its_quick_subset_load():
    full = matrix.load_plan()
    quick = matrix.load_plan(quick=True)
    assert full.scheds[0] == "eevdf" and "scx_locality" in full.scheds
    assert {u.machine for u in quick.units} <= {u.machine for u in full.units}
    assert len(quick.units) < len(full.units)


def test_plan_filters_and_errors(tmp_path):
    p = write_plan(tmp_path)
    plan = matrix.load_plan(p)
    assert [u.spec for u in plan.units] == [SPEC_A, SPEC_B] and plan.runs == 2
    assert matrix.load_plan(p, quick=True).units == [matrix.Unit("numaq4", SPEC_A)]
    assert matrix.load_plan(p, runs=4).runs == 4
    with pytest.raises(matrix.MatrixError, match="not in the matrix"):
        matrix.load_plan(p, only_machines=["haswell2s"])
    with pytest.raises(matrix.MatrixError, match="wakelat not in the matrix"):
        matrix.load_plan(p, only_benches=["wakelat", "hackbench"])
    with pytest.raises(run.UsageError, match="given twice"):
        matrix.load_plan(write_plan(tmp_path, scheds='["eevdf", "scx_p2dq", "scx_p2dq"]'))
    with pytest.raises(matrix.MatrixError, match="first scheduler must be eevdf"):
        matrix.load_plan(write_plan(tmp_path, scheds='["scx_locality", "eevdf"]'))
    assert matrix.Unit("numa2", "hackbench:groups=1/4").dirname == "hackbench_groups=1-4"


def test_run_major_order_interrupt_and_resume(tmp_path, fake):
    plan = matrix.load_plan(write_plan(tmp_path))
    out, page = tmp_path / "m", tmp_path / "page" / "results.md"
    fake.fail_on_call = 3  # the third boot (run 2 of the first folder) is interrupted
    with pytest.raises(KeyboardInterrupt):
        matrix.run_matrix(plan, out, page, build=False, command_line="cmd", resume=False)
    assert [matrix.runs_done(out, u) for u in plan.units] == [1, 1]  # run 1 of each folder before any run 2
    assert page.exists()  # written even on the way out
    with pytest.raises(matrix.MatrixError, match="--resume"):
        matrix.run_matrix(plan, out, page, build=False, command_line="cmd", resume=False)
    with pytest.raises(matrix.MatrixError, match="another plan"):
        matrix.run_matrix(matrix.load_plan(write_plan(tmp_path), scheds=["eevdf", "scx_locality"]), out, page,
                          build=False, command_line="cmd", resume=True)
    fake.fail_on_call = None
    assert matrix.run_matrix(plan, out, page, build=False, command_line="cmd2", resume=True) == run.EXIT_OK
    assert len(fake.calls) == 5  # 3 before (the last interrupted), 2 after: nothing run twice
    assert [matrix.runs_done(out, u) for u in plan.units] == [2, 2]
    res = json.loads((plan.units[0].folder(out) / "results.json").read_text())
    assert [r["order"] for r in res["runs"]] == [["eevdf", "scx_locality", "scx_p2dq"],
                                                ["scx_locality", "scx_p2dq", "eevdf"]]  # rotation went on
    state = matrix.load_state(out)
    assert state["boots"] == 4 and state["command"] == "cmd"
    assert res["runs_requested"] == 2 and "scx_p2dq" in res["builds"]
    matrix.run_matrix(matrix.load_plan(write_plan(tmp_path), runs=3), out, page, build=False, command_line="c",
                      resume=True)  # more runs for a finished matrix: only the third run of each folder
    assert len(fake.calls) == 7 and [matrix.runs_done(out, u) for u in plan.units] == [3, 3]


def test_page_flags_significance_best_and_best_peer(tmp_path, fake):
    plan = matrix.load_plan(write_plan(tmp_path, runs=5))
    out, page = tmp_path / "m", tmp_path / "docs" / "results.md"
    matrix.run_matrix(plan, out, page, build=False, command_line="cmd", resume=False)
    data = json.loads((tmp_path / "docs" / "results" / "results.json").read_text())
    rows = data["machines"]["numa2"]["figures"]
    assert len(rows) == 2 and all(r["figure"] == "time" for r in rows)
    for r in rows:
        ours, peer = r["cells"]["scx_locality"], r["cells"]["scx_p2dq"]
        assert ours["n"] == 5 and ours["significant"] and ours["pct_vs_baseline"] > 40  # ~1.05 s against ~2.1 s
        assert r["best"] == "scx_locality" and r["best_peer"] == "scx_p2dq"
        assert r["ours_vs_best_peer"]["pct"] > 0 and r["ours_vs_best_peer"]["peer"] == "scx_p2dq"
        assert peer["p_vs_baseline"] is not None
    text = page.read_text()
    assert "**1.0" in text and "| [numa2](#numa2) | 2 | 2 / 0 |" in text
    assert (tmp_path / "docs" / "results" / "numa2.png").exists()


def test_a_same_mean_is_not_significant(tmp_path, fake):
    fake.times["scx_locality"] = fake.times["eevdf"]
    plan = matrix.load_plan(write_plan(tmp_path, runs=3))
    matrix.run_matrix(plan, tmp_path / "m", tmp_path / "r.md", build=False, command_line="c", resume=False)
    rows = json.loads((tmp_path / "r" / "results.json").read_text())["machines"]["numa2"]["figures"]
    assert not any(r["cells"]["scx_locality"]["significant"] for r in rows)


def test_bench_resume_check_refuses_another_plan(tmp_path, fake):
    from lab import benchfile, machines
    m = machines.load("numa2")
    specs = bench.parse_sched_list("eevdf,scx_locality", ablate=False)
    b = benchfile.load_benchmark(SPEC_A)
    res = bench.run_bench(m, specs, [b], 1, tmp_path / "b", build=False)
    assert bench.resume_check(res, specs, [b], "numa2") is None
    assert "machine" in bench.resume_check(res, specs, [b], "numaq4")
    assert "schedulers" in bench.resume_check(res, specs[:1], [b], "numa2")
    assert "other cases" in bench.resume_check(res, specs, [benchfile.load_benchmark(SPEC_A + ":loops=7")], "numa2")
    other = json.loads(json.dumps(res))
    other["builds"]["scx_locality"] = "0123456789abcdef"
    assert "another build" in bench.resume_check(other, specs, [b], "numa2")
    res2 = bench.run_bench(m, specs, [b], 3, tmp_path / "b", build=False, resume=res)
    assert [r["run"] for r in res2["runs"]] == [1, 2, 3]


def test_a_run_cut_by_the_emulator_goes_on_from_the_cut_step(tmp_path, monkeypatch):
    """The text-patching oops cuts a boot: the steps it finished keep their records, those it cut run in a new
    boot under their own names; boots that finish nothing end the run after two new ones."""
    from lab import benchfile, machines
    monkeypatch.setenv("LOCALITY_RUNS", str(tmp_path / "runs"))
    m = machines.load("numa2")
    specs = bench.parse_sched_list("eevdf,scx_locality,scx_p2dq,scx_lavd", ablate=False)
    b = benchfile.load_benchmark(SPEC_A)
    # boot 1 dies in step 3, boot 2 in step 4; boot 3 runs to the end
    lab = FakeBoots(tmp_path, wall_s=100.0, cut_after=[2, 1])
    monkeypatch.setattr(run, "run_job", lab.run_job)
    res = bench.run_bench(m, specs, [b], 1, tmp_path / "b", build=False, prepared={}, stdout=io.StringIO())
    assert lab.calls == [["eevdf", "scx_locality", "scx_p2dq", "scx_lavd"], ["scx_p2dq", "scx_lavd"], ["scx_lavd"]]
    assert lab.retry_flags == [False, False, False]  # run_job does not boot the whole run again itself
    r = res["runs"][0]
    assert [st["sched"] for st in r["steps"]] == ["eevdf", "scx_locality", "scx_p2dq", "scx_lavd"]
    assert [st["cases"][0]["figures"]["time"] for st in r["steps"]] == [1.0, 1.1, 1.2, 1.3]  # each its own
    assert [bt["steps"] for bt in r["boots"]] == [[0, 1, 2, 3], [2, 3], [3]]
    assert [bt["emulator_fault"] is not None for bt in r["boots"]] == [True, True, False]
    assert r["completed"] and r["wall_s"] == 300.0 and bench.exit_code(res) == run.EXIT_OK

    lab = FakeBoots(tmp_path, cut_after=[1, 0, 0, 0, 0])  # after one step, nothing more: three fruitless boots end it
    monkeypatch.setattr(run, "run_job", lab.run_job)
    res = bench.run_bench(m, specs, [b], 1, tmp_path / "c", build=False, prepared={}, stdout=io.StringIO())
    r = res["runs"][0]
    assert len(lab.calls) == 4 and not r["completed"] and bench.exit_code(res) == run.EXIT_INTERNAL
    assert [st["cases"][0]["status"] for st in r["steps"]] == ["ok", "not-run", "not-run", "not-run"]


def test_placement_idle_while_queued_per_second(monkeypatch):
    from lab import report
    loc = {"sched": "eevdf", "runs": 2, "seconds": 10.0, "iwq_node_ms": 250.0, "cross_node": 5.0,
           "home_node": 90.0, "home_llc": 80.0}
    monkeypatch.setattr(report, "locality_rows", lambda res, b, labels: [loc])
    monkeypatch.setattr(report, "colocation_rows", lambda res, b, labels: [])
    rows = matrix.placement_rows({"benchmarks": {"wakelat": {}}}, ["eevdf", "scx_locality"])
    assert rows[0]["cells"]["eevdf"]["iwq_node_ms_per_s"] == 25.0
    assert rows[0]["cells"]["eevdf"]["cross_node_per_s"] == 0.5
    assert rows[0]["cells"]["scx_locality"]["iwq_node_ms_per_s"] is None


def test_only_published_schedulers_are_peers():
    # the best-peer column compares us with published schedulers, not with the sched_ext floor built here
    assert matrix._is_peer("scx_p2dq") and matrix._is_peer("scx_lavd:--performance")
    assert not matrix._is_peer("scx_defaults") and not matrix._is_peer("scx_defaults:--callbacks")
    assert not matrix._is_peer("scx_locality") and not matrix._is_peer("scx_locality_baseline")
    assert not matrix._is_peer("eevdf")
