# SPDX-License-Identifier: GPL-2.0-only
"""LOCALITY_SCHED_EXTRA_FLAGS (lab/run.py): flags appended to every scx_locality the lab starts, and shown in every
run's log and report so that a result of the variant is never taken for the default's."""
import json
import re
import shutil
import os
import subprocess
from pathlib import Path

import pytest

from lab import bench, image, machines, mutants, paths, report, run, soak

from fakelab import start

ENV = run.EXTRA_FLAGS_ENV


def test_extra_flags_come_last(monkeypatch):
    monkeypatch.setenv(ENV, "--no-cache-aware  --slice-us 3000")
    assert run.extra_sched_flags() == ["--no-cache-aware", "--slice-us", "3000"]
    assert run.sched_args(run.parse_sched("scx_locality:--no-steal")) == \
        ["--no-steal", "--no-cache-aware", "--slice-us", "3000"]
    # the spec (and so every label: bench tables, the tests' step names) stays the step's own
    assert run.parse_sched("scx_locality:--no-steal").label == "scx_locality:--no-steal"
    # the baseline build is an scx_locality too; peers and EEVDF are not touched
    assert run.sched_args(run.parse_sched("scx_locality_baseline")) == ["--no-cache-aware", "--slice-us", "3000"]
    assert run.sched_args(run.parse_sched("scx_rusty")) == []


def test_no_extra_flags(monkeypatch):
    for value in (None, "", "   "):
        if value is None:
            monkeypatch.delenv(ENV, raising=False)
        else:
            monkeypatch.setenv(ENV, value)
        assert run.extra_sched_flags() == [] and run.extra_flags_note() is None
        assert run.sched_args(run.parse_sched("scx_locality:--no-steal")) == ["--no-steal"]


def test_bad_quoting_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(ENV, "--memory-include 'comm:a b")
    with pytest.raises(run.UsageError, match=ENV):
        run.extra_sched_flags()


@pytest.mark.parametrize("own, extra, want", [
    # the extra option replaces the step's own (clap refuses a single-valued option given twice)
    (["--exec-placement=least-loaded-always"], ["--exec-placement=allowance"], ["--exec-placement=allowance"]),
    (["--slice-us", "3000", "--no-steal"], ["--slice-us=2000"], ["--no-steal", "--slice-us=2000"]),
    (["--slice-us=3000"], ["--slice-us", "2000"], ["--slice-us", "2000"]),
    # a switch the step gives itself is not given twice (clap refuses that too)
    (["--no-wake-follow"], ["--no-wake-follow"], ["--no-wake-follow"]),
    # nor with its --no- twin, whichever way round
    (["--cache-aware"], ["--no-cache-aware"], ["--no-cache-aware"]),
    (["--no-cache-aware", "-v"], ["--cache-aware"], ["-v", "--cache-aware"]),
    (["--push-cross-node=always"], ["--no-push-cross-node"], ["--no-push-cross-node"]),
    # repeatable options and short flags add up
    (["--memory-include", "comm:a"], ["--memory-include=comm:b"], ["--memory-include", "comm:a", "--memory-include=comm:b"]),
    (["-v"], ["-v"], ["-v", "-v"]),
    # options the extra flags do not name stay as they were, in their order
    (["--numa-balance=off", "--memory", "off"], ["--no-steal"], ["--numa-balance=off", "--memory", "off", "--no-steal"]),
    (["--no-steal"], [], ["--no-steal"]),
])
def test_with_extra_flags(own, extra, want):
    assert run.with_extra_flags(own, extra) == want


def test_repeatable_options_match_the_cli():
    """REPEATABLE_OPTIONS are the options cli.rs lets a command line give more than once (Vec<_> or counted)."""
    text = (paths.REPO / "scheduler" / "src" / "cli.rs").read_text()
    text = text[text.index("pub struct Opts"):]
    text = text[:text.index("\n}\n")]
    fields = re.findall(r"#\[arg\(([^]]*)\)\]\s*pub (\w+): (\w+)", text)
    repeatable = {"--" + name.replace("_", "-") for attrs, name, ty in fields
                  if ty == "Vec" or "ArgAction::Count" in attrs}
    assert repeatable and repeatable == set(run.REPEATABLE_OPTIONS)


def test_job_script_shows_and_appends_the_flags(monkeypatch):
    m = machines.load("numa2")
    steps = [run.Step(run.parse_sched("eevdf"), "true"),
             run.Step(run.parse_sched("scx_locality:--no-steal"), "true")]
    plain = run.job_script(steps, m)
    assert ENV not in plain
    monkeypatch.setenv(ENV, "--no-cache-aware")
    text = run.job_script(steps, m)
    assert "/usr/local/bin/scx_locality --no-steal --no-cache-aware; then" in text
    # the lab's LLC override (machines that need one) comes after them
    ov = "/lab/llc-override.json"
    assert run._sched_command(steps[1].sched, ov) == \
        ["/usr/local/bin/scx_locality", "--no-steal", "--no-cache-aware", "--topology-override", ov]
    # the console (and the job script) says so before anything runs
    assert f"echo 'lab: {ENV}=--no-cache-aware: appended to every scx_locality" in text
    assert text.index(ENV) < text.index("lab_check_topology")
    # a job without scx_locality does not mention it
    assert ENV not in run.job_script(steps[:1], m)
    # an override given in the extra flags is not given twice
    monkeypatch.setenv(ENV, "--topology-override=/x.json")
    assert run._sched_command(steps[1].sched, ov) == \
        ["/usr/local/bin/scx_locality", "--no-steal", "--topology-override=/x.json"]


RECORDS = "\n".join(["@@booted 1.0", "@@topology ok", "@@step-begin 0", "@@sched-start ok 1.0", "@@cmd-begin 0 1.0",
                     "@@cmd-end 0 0 2.0", "@@step-end 0", "@@done"]).encode() + b"\n"


def test_run_result_and_log_carry_the_flags(tmp_path):
    """bin/lab run (fake QEMU): the log says it, result.json and the final JSON line record the flags."""
    fake_bin = tmp_path / "scx_locality"
    fake_bin.write_text("")
    p = start(tmp_path, "records", ["run", "--no-build", "--machine", "numa2", "--sched", "scx_locality", "--",
                                     "true"], records=RECORDS, env={ENV: "--no-steal", "LOCALITY_SCHED_BIN": str(fake_bin)})
    out, err = p.communicate(timeout=120)
    assert f"lab: {ENV}=--no-steal: appended to every scx_locality" in err, err
    final = json.loads(out.strip().splitlines()[-1])
    assert final["sched_extra_flags"] == ["--no-steal"]
    res = json.loads((Path(final["run_dir"]) / "result.json").read_text())
    assert res["sched_extra_flags"] == ["--no-steal"]


def test_run_without_flags_records_none(tmp_path):
    p = start(tmp_path, "records", ["run", "--no-build", "--machine", "numa2", "--sched", "eevdf", "--", "true"],
              records=RECORDS, env={ENV: "--no-steal"})
    out, err = p.communicate(timeout=120)
    assert ENV not in err  # EEVDF only: nothing got the flags
    assert json.loads(out.strip().splitlines()[-1])["sched_extra_flags"] == []


def test_bench_results_report_and_resume(tmp_path, monkeypatch):
    specs = bench.parse_sched_list("eevdf,scx_locality", ablate=False)
    assert bench.extra_flags(specs) == []
    monkeypatch.setenv(ENV, "--no-steal")
    assert bench.extra_flags(specs) == ["--no-steal"]
    assert bench.extra_flags(specs[:1]) == []
    # a bench of other extra flags is not resumed (its runs would be pooled with the variant's)
    old = {"version": bench.RESULTS_VERSION, "machine": "numa2", "scheds": [{"label": s.label} for s in specs],
           "builds": {}, "benchmarks": {}, "sched_extra_flags": []}
    why = bench.resume_check(old, specs, [], "numa2", builds={})
    assert why and ENV in why
    old["sched_extra_flags"] = ["--no-steal"]
    assert bench.resume_check(old, specs, [], "numa2", builds={}) is None
    # the report's header and the terminal summary say it
    results = {"sched_extra_flags": ["--no-steal", "--slice-us", "3000"]}
    line = report.extra_flags_line(results)
    assert line.startswith(f"{ENV}=--no-steal --slice-us 3000") and "not the default" in line
    assert report.extra_flags_line({}) is None and report.extra_flags_line({"sched_extra_flags": []}) is None


def test_soak_start_stop_gets_the_flags(monkeypatch):
    monkeypatch.setenv(ENV, "--no-cache-aware")
    sched = run.parse_sched("scx_locality:--no-steal")
    steps = soak.case_steps(sched, soak.CASES, fast=True)
    start_stop = steps[[c.name for c in soak.CASES].index("start-stop")]
    assert start_stop.command.endswith("3 --no-steal --no-cache-aware")
    assert f"**{ENV}=--no-cache-aware" in soak.summary_md([], "numa2", sched.label, 1.0)
    assert ENV not in soak.summary_md([], "numa2", "eevdf", 1.0)


def test_unit_tests_do_not_see_the_flags():
    """conftest.py takes LOCALITY_SCHED_EXTRA_FLAGS away from every test but the lab's."""
    assert ENV not in os.environ


# ---------------------------------------------------------------------------------------------------------
# Every mutant's off switch, on top of every scheduler step of the lab tests, is taken by the built scx_locality


def lab_test_legs() -> list[list[str]]:
    legs = [[]]
    for f in sorted((paths.REPO / "lab" / "tests").glob("test_*_lab.py")):
        for name in mutants.test_names(f):
            for leg in mutants.test_legs(f"lab/tests/{f.name}::{name}"):
                if leg not in legs:
                    legs.append(leg)
    return legs


def test_every_off_switch_parses_on_top_of_every_lab_step():
    binary = image.scheduler_binary()
    ok, why = mutants.parse_check(binary, [])
    if ok is None:
        pytest.skip(why)
    assert ok, why
    legs = [leg for leg in lab_test_legs() if "--slice-us" not in leg]  # test_bad_flag's step is refused on purpose
    assert len(legs) > 5, legs
    refused = []
    for m in mutants.load():
        for leg in legs:
            args = run.with_extra_flags(leg, m.flag_list)
            ok, why = mutants.parse_check(binary, args)
            if not ok:
                refused.append((m.flags, leg, why))
    assert not refused, refused


def test_appending_twice_is_refused_by_the_binary():
    """Why with_extra_flags replaces: scx_locality refuses a switch given twice."""
    ok, why = mutants.parse_check(image.scheduler_binary(), ["--no-steal", "--no-steal"])
    if ok is None:
        pytest.skip(why)
    assert ok is False and why.startswith("exit 2:"), why


def test_the_results_store_refuses_a_variant(tmp_path):
    """A bench of extra flags never becomes a cell of the results page (lab/store.py), where it would pass for
    the default flags' figures."""
    from lab import store

    data = json.loads((paths.REPO / "lab" / "tests" / "data" / "spr-cache-hackbench.json").read_text())
    folder = tmp_path / "bench"
    folder.mkdir()
    data["sched_extra_flags"] = ["--no-cache-aware"]
    (folder / "results.json").write_text(json.dumps(data))
    with pytest.raises(store.StoreError, match=f"{ENV}=--no-cache-aware"):
        store.add_folder(tmp_path / "store", folder, stamp={})
