# SPDX-License-Identifier: GPL-2.0-only
"""make test-mutants (lab/mutants.py): the table's logic, on the host, without booting anything."""
import json
import sys
import textwrap

import pytest

from lab import mutants, paths, run

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1">
<testcase classname="lab.tests.test_scheduler_lab" name="test_a" time="300"><failure message="AssertionError: assert 0 &gt; 0&#10;more">tb</failure></testcase>
<testcase classname="lab.tests.test_scheduler_lab" name="test_b" time="300" />
<testcase classname="lab.tests.test_scheduler_lab" name="test_c" time="1"><error message="error in setup">tb</error></testcase>
<testcase classname="lab.tests.test_scheduler_lab" name="test_d" time="0"><skipped message="--no-lab given" /></testcase>
</testsuite></testsuites>"""

NODES = [f"lab/tests/test_scheduler_lab.py::test_{x}" for x in "abcde"]


def test_the_table_loads_and_names_real_tests():
    ms = mutants.load()
    flags = {m.flags for m in ms}
    for want in ("--no-cache-aware", "--exec-placement=allowance", "--numa-balance=no-allowance",
                 "--numa-balance=off", "--memory=off", "--no-home-node", "--no-steal", "--no-wake-follow"):
        assert want in flags
    for m in ms:
        assert m.tests
        for t in m.tests:
            file, _, name = t.partition("::")
            assert name in mutants.test_names(paths.REPO / file)
            # every one is a lab test: make test-mutants boots, and --no-lab would skip it (never failing)
            assert "pytestmark = pytest.mark.lab" in (paths.REPO / file).read_text()
    memory = next(m for m in ms if m.flags == "--memory=off")
    assert memory.tests == [f"lab/tests/test_memory_lab.py::{n}"
                            for n in mutants.test_names(paths.REPO / "lab/tests/test_memory_lab.py")]


def write_toml(tmp_path, body):
    p = tmp_path / "m.toml"
    p.write_text(textwrap.dedent(body))
    return p


@pytest.mark.parametrize("body, match", [
    ('[[mutant]]\nmechanism = "x"\nflags = "--no-steal"\ntests = ["lab/tests/nonesuch.py"]\n', "does not exist"),
    ('[[mutant]]\nmechanism = "x"\nflags = "--no-steal"\ntests = ["lab/tests/test_scheduler_lab.py::test_nope"]\n',
     "has no test test_nope"),
    ('[[mutant]]\nmechanism = "x"\nflags = ""\ntests = ["lab/tests/test_scheduler_lab.py"]\n', "needs"),
    ('[[mutant]]\nmechanism = "x"\nflags = "\'--a"\ntests = ["lab/tests/test_scheduler_lab.py"]\n', "flags"),
    ('[[mutant]]\nmechanism = "x"\nflag = "--a"\nflags = "--a"\ntests = ["lab/tests/test_scheduler_lab.py"]\n',
     "unknown key"),
    ("", "no \\[\\[mutant\\]\\]"),
])
def test_bad_tables_are_refused(tmp_path, body, match):
    with pytest.raises(mutants.MutantError, match=match):
        mutants.load(write_toml(tmp_path, body))


def test_select():
    ms = mutants.load()
    assert [m.flags for m in mutants.select(ms, ["steal"])] == ["--no-steal"]
    assert {m.flags for m in mutants.select(ms, ["CACHE", "wake follow"])} == {"--no-cache-aware", "--no-wake-follow"}
    assert mutants.select(ms, None) == ms
    with pytest.raises(mutants.MutantError):
        mutants.select(ms, ["nonesuch"])


def test_outcomes_from_junit():
    got = mutants.outcomes(XML, NODES)
    assert got[NODES[0]] == ("failed", "AssertionError: assert 0 > 0")
    assert got[NODES[1]] == ("passed", "")
    assert got[NODES[2]] == ("failed", "error in setup")  # an error fails the test too
    assert got[NODES[3]] == ("skipped", "--no-lab given")
    assert got[NODES[4]][0] == "not run"
    assert all(o == "not run" for o, _ in mutants.outcomes(None, NODES).values())
    assert all(o == "not run" for o, _ in mutants.outcomes("<broken", NODES).values())


def test_table_and_verdict():
    m = mutants.Mutant("steal | pull", "--no-steal", NODES)
    rows = mutants.rows_of(m, mutants.outcomes(XML, NODES))
    text = mutants.table(rows)
    lines = text.splitlines()
    assert lines[0] == "| mechanism | flag | test | failed | how |"
    assert lines[2] == "| steal / pull | `--no-steal` | `test_a` | yes | AssertionError: assert 0 > 0 |"
    assert [ln.split(" | ")[3] for ln in lines[2:]] == ["yes", "no", "yes", "no (skipped)", "no (not run)"]
    assert not mutants.verdict(rows)
    assert mutants.verdict([r for r in rows if r.failed])
    assert not mutants.verdict([])  # nothing run proves nothing
    assert "Verdict: FAIL (3 of 5 test(s) did not fail" in mutants.report(rows, "now")
    assert "Verdict: PASS" in mutants.report([r for r in rows if r.failed], "now")
    assert "Verdict: FAIL" in mutants.report([r for r in rows if r.failed], "now", pending=1)


def test_test_legs():
    legs = mutants.test_legs("lab/tests/test_scheduler_lab.py::test_steal_switch_on_haswell2s")
    assert legs == [[], ["--no-steal"], ["--enqueue-handoff=all"]]


def test_list_and_dry_run(capsys, monkeypatch):
    assert mutants.main(["--list", "--only", "steal"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "| mechanism | flag | test |"
    assert "`--no-steal` | `test_steal_switch_on_haswell2s` |" in out
    # the flag check: one refused flag makes --dry-run fail, and the run would not boot for it
    monkeypatch.setattr(mutants, "parse_check", lambda binary, args: (False, "exit 2: nope") if "--no-steal" in args
                        else (True, ""))
    assert mutants.main(["--dry-run", "--only", "steal"]) == 1
    out = capsys.readouterr().out
    assert "flags: REFUSED" in out and f"{run.EXTRA_FLAGS_ENV}=--no-steal " in out
    assert "--enqueue-handoff=all -> --enqueue-handoff=all --no-steal" in out
    assert mutants.main(["--dry-run", "--only", "cache"]) == 0
    monkeypatch.setattr(mutants, "parse_check", lambda binary, args: (None, "not here"))
    assert mutants.main(["--dry-run", "--only", "cache"]) == 0
    assert "flags: not checked: not here" in capsys.readouterr().out


def test_a_run_end_to_end(tmp_path, monkeypatch):
    """Two fake mechanisms: one whose test fails when the flags reach it, one whose test passes regardless."""
    tests = tmp_path / "test_fake_mutant.py"
    tests.write_text(textwrap.dedent(f"""\
        import os
        def test_sees_no_flags():
            assert os.environ.get({run.EXTRA_FLAGS_ENV!r}) is None, "the mechanism is off"
        def test_passes_anyway():
            pass
        """))
    toml = write_toml(tmp_path, f"""\
        [[mutant]]
        mechanism = "caught"
        flags = "--no-steal"
        tests = ["{tests}::test_sees_no_flags"]
        [[mutant]]
        mechanism = "missed"
        flags = "--no-wake-follow"
        tests = ["{tests}::test_passes_anyway"]
        """)
    monkeypatch.setattr(mutants, "parse_check", lambda binary, args: (True, ""))
    out = tmp_path / "out"
    assert mutants.main(["--file", str(toml), "--out", str(out)]) == 1
    res = json.loads((out / "mutants.json").read_text())
    assert [(r["mechanism"], r["outcome"]) for r in res["rows"]] == [("caught", "failed"), ("missed", "passed")]
    assert not res["pass"] and res["pending"] == 0
    assert "AssertionError: the mechanism is off" in res["rows"][0]["how"]
    md = (out / "mutants.md").read_text()
    assert "| caught | `--no-steal` | `test_sees_no_flags` | yes |" in md and "Verdict: FAIL" in md
    assert (out / "01-no-steal.log").read_text().startswith(f"$ {run.EXTRA_FLAGS_ENV}=--no-steal ")
    assert mutants.main(["--file", str(toml), "--out", str(out), "--only", "caught"]) == 0
