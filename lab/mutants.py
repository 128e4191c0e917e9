# SPDX-License-Identifier: GPL-2.0-only
"""make test-mutants: every mechanism's lab tests, run with that mechanism switched off, must fail.

A lab test that passes whether or not its mechanism works proves nothing. lab/mutants.toml lists each
mechanism of scx_locality, its off switch and its tests; for each entry this runs those tests with
LOCALITY_SCHED_EXTRA_FLAGS set to the off switch (lab/run.py appends it to every scx_locality the lab starts, the
test's own off step included) and passes only when every one of them FAILS. The table (mechanism, flag, test,
failed yes/no, and the first line of how it failed) is printed and written to OUT/mutants.md (and mutants.json);
each entry's pytest output is in OUT/NN-*.log.

Before a test runs, the off switch is checked against the built scx_locality, added to each scheduler step the
test names (run.with_extra_flags): a flag scx_locality refuses (exit 2) would fail the test for the wrong reason,
so that entry is not run and counts as not failed.

    python -m lab.mutants [--list | --dry-run] [--only TEXT]... [--out DIR]

Each test boots QEMU at least once: the whole table takes hours on 2 cores. --list prints the plan, --dry-run
also the commands and the flag check, without booting anything.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import image, paths, run

MUTANTS_FILE = paths.REPO / "lab" / "mutants.toml"
NOBODY = "65534"
# scx_locality's exit codes (exit.rs EXIT_CODES): 2 a refused flag; 3 not root, which it says only after clap
# accepted the flags
EXIT_BAD_FLAG, EXIT_NOT_ROOT = 2, 3


class MutantError(Exception):
    pass


@dataclass
class Mutant:
    mechanism: str
    flags: str
    tests: list[str]  # pytest node ids, FILE::TEST

    @property
    def flag_list(self) -> list[str]:
        return shlex.split(self.flags)


@dataclass
class Row:
    mechanism: str
    flags: str
    test: str
    outcome: str  # failed, passed, skipped, not run
    how: str = ""  # the failure's first line, or why the test did not run

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"


@dataclass
class FlagCheck:
    ok: bool | None  # None: could not be checked here
    detail: str = ""
    legs: list[list[str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# The plan


def test_names(path: Path) -> list[str]:
    """The test functions of a test file, in order."""
    return re.findall(r"^def (test_\w+)\(", path.read_text(), re.M)


def expand(test: str, repo: Path = paths.REPO) -> list[str]:
    """A node id as is (its file and function checked), or a file as the node ids of all its tests."""
    file, _, name = test.partition("::")
    path = repo / file
    if not path.is_file():
        raise MutantError(f"{test}: {file} does not exist")
    names = test_names(path)
    if name:
        if name not in names:
            raise MutantError(f"{test}: {file} has no test {name}")
        return [test]
    if not names:
        raise MutantError(f"{test}: no test in it")
    return [f"{file}::{n}" for n in names]


def load(path: Path = MUTANTS_FILE, repo: Path = paths.REPO) -> list[Mutant]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MutantError(f"{path}: {e}") from None
    out = []
    for i, e in enumerate(data.get("mutant", [])):
        where = f"{path.name}: mutant {i + 1}"
        unknown = set(e) - {"mechanism", "flags", "tests"}
        if unknown:
            raise MutantError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if not e.get("mechanism") or not e.get("flags") or not e.get("tests"):
            raise MutantError(f"{where}: needs mechanism, flags and tests")
        try:
            if not shlex.split(e["flags"]):
                raise ValueError("no flag")
        except ValueError as err:
            raise MutantError(f"{where}: flags {e['flags']!r}: {err}") from None
        tests = [t for test in e["tests"] for t in expand(test, repo)]
        out.append(Mutant(e["mechanism"], e["flags"], tests))
    if not out:
        raise MutantError(f"{path}: no [[mutant]] entry")
    return out


def select(mutants: list[Mutant], only: list[str] | None) -> list[Mutant]:
    """The entries whose mechanism or flags contain one of only's texts (all when only is empty)."""
    if not only:
        return mutants
    picked = [m for m in mutants if any(o.lower() in (m.mechanism + " " + m.flags).lower() for o in only)]
    if not picked:
        raise MutantError(f"no mechanism matches {', '.join(only)}")
    return picked


# ---------------------------------------------------------------------------------------------------------
# The flag check: does the built scx_locality take the off switch on top of each step of the test?


def test_source(node: str, repo: Path = paths.REPO) -> str:
    """The source of a test function and of every top-level function and assignment of its file that it uses,
    directly or through them (its helpers, its scheduler tuples): what decides which steps it starts."""
    file, _, name = node.partition("::")
    text = (repo / file).read_text()
    tree = ast.parse(text)
    top = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(target, ast.Name):
                    top[target.id] = stmt
    if name not in top:
        raise MutantError(f"{file}: no test {name}")
    seen, todo = [], [name]
    while todo:
        stmt = top[todo.pop()]
        if stmt in seen:
            continue
        seen.append(stmt)
        todo += [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id in top]
    return "\n\n".join(ast.get_source_segment(text, stmt) for stmt in seen)


def test_legs(node: str, repo: Path = paths.REPO) -> list[list[str]]:
    """The scx_locality arguments of each scheduler step the test names ("scx_locality:-..." in its source), the
    default step's [] first; steps whose arguments are formatted at run time ({...}) are left out."""
    legs = [[]]
    for args in re.findall(r"scx_locality:(-[^\"',]*)", test_source(node, repo)):
        if "{" not in args and shlex.split(args) not in legs:
            legs.append(shlex.split(args))
    return legs


def parse_check(binary: Path, args: list[str]) -> tuple[bool | None, str]:
    """Does binary take args? Run as nobody, it stops at its root check (exit 3) once clap accepted them and
    exits 2 with one line when it refuses them; it loads nothing either way. None: not checkable here."""
    setpriv = shutil.which("setpriv")
    if not binary.exists():
        return None, f"{binary} is not built"
    if os.geteuid() != 0 or not setpriv:
        return None, "needs root and setpriv(1) to run it as nobody"
    r = subprocess.run([setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", str(binary), *args],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if r.returncode == EXIT_NOT_ROOT:
        return True, ""
    line = (r.stderr.strip().splitlines() or [""])[0]
    return False, f"exit {r.returncode}: {line}"


def check_flags(m: Mutant, binary: Path | None = None, repo: Path = paths.REPO) -> FlagCheck:
    """The off switch on top of every step of every test of m (run.with_extra_flags, as the lab will start it)."""
    binary = binary or image.scheduler_binary()
    legs = [leg for t in m.tests for leg in test_legs(t, repo)]
    uniq = [leg for i, leg in enumerate(legs) if leg not in legs[:i]]
    for leg in uniq:
        args = run.with_extra_flags(leg, m.flag_list)
        ok, detail = parse_check(binary, args)
        if ok is None:
            return FlagCheck(None, detail, uniq)
        if not ok:
            return FlagCheck(False, f"scx_locality {shlex.join(args)}: {detail}", uniq)
    return FlagCheck(True, "", uniq)


# ---------------------------------------------------------------------------------------------------------
# Running and judging


def pytest_command(m: Mutant, junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *m.tests]


def shell_line(m: Mutant, junit: Path) -> str:
    """The command as a shell would run it, for --dry-run."""
    return f"{run.EXTRA_FLAGS_ENV}={shlex.quote(m.flags)} {shlex.join(pytest_command(m, junit))}"


def case_key(case: ET.Element) -> tuple[str, str]:
    """A junit testcase as (module, test): pytest writes classname lab.tests.test_x and name test_y."""
    return case.get("classname", "").split(".")[-1], case.get("name", "")


def node_key(node: str) -> tuple[str, str]:
    """A node id FILE::TEST as (module, test)."""
    file, _, name = node.partition("::")
    return Path(file).stem, name


def first_line(text: str | None) -> str:
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    return line if len(line) <= 160 else line[:157] + "..."


def outcomes(junit_xml: str | None, tests: list[str]) -> dict[str, tuple[str, str]]:
    """test -> (outcome, how) from pytest's junit XML; a test missing from it (no XML: pytest died, or a
    collection error) did not run."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    if junit_xml:
        try:
            root = ET.fromstring(junit_xml)
        except ET.ParseError as e:
            return {t: ("not run", f"pytest's junit XML is broken: {e}") for t in tests}
        for case in root.iter("testcase"):
            node = case_key(case)
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            skip = case.find("skipped")
            if bad is not None:
                found[node] = ("failed", first_line(bad.get("message")) or first_line(bad.text))
            elif skip is not None:
                found[node] = ("skipped", first_line(skip.get("message")))
            else:
                found[node] = ("passed", "")
    return {t: found.get(node_key(t), ("not run", "not in pytest's report")) for t in tests}


def rows_of(m: Mutant, results: dict[str, tuple[str, str]]) -> list[Row]:
    return [Row(m.mechanism, m.flags, t, *results[t]) for t in m.tests]


def verdict(rows: list[Row]) -> bool:
    """make test-mutants passes only when there are rows and every test failed with its mechanism off."""
    return bool(rows) and all(r.failed for r in rows)


def failed_cell(r: Row) -> str:
    return "yes" if r.failed else ("no" if r.outcome == "passed" else f"no ({r.outcome})")


def table(rows: list[Row], with_outcome: bool = True) -> str:
    """The markdown table: mechanism, flag, test, failed yes/no (and how), one row per test."""
    def cell(s: str) -> str:
        return s.replace("|", "/")

    if not with_outcome:
        out = ["| mechanism | flag | test |", "|---|---|---|"]
        return "\n".join(out + [f"| {cell(r.mechanism)} | `{r.flags}` | `{r.test.split('::')[-1]}` |"
                                for r in rows]) + "\n"
    out = ["| mechanism | flag | test | failed | how |", "|---|---|---|---|---|"]
    out += [f"| {cell(r.mechanism)} | `{r.flags}` | `{r.test.split('::')[-1]}` | {failed_cell(r)} | {cell(r.how)} |"
            for r in rows]
    return "\n".join(out) + "\n"


def report(rows: list[Row], started: str, pending: int = 0) -> str:
    ok = verdict(rows) and not pending
    passed = [r for r in rows if not r.failed]
    lines = ["# make test-mutants", "",
             f"Started {started}; scx_locality {image.scheduler_binary()}. Each mechanism's lab tests ran with "
             f"{run.EXTRA_FLAGS_ENV} set to its off switch (lab/mutants.toml); each must fail.", "",
             table(rows)]
    if pending:
        lines.append(f"{pending} mechanism(s) still to run.\n")
    lines.append(f"Verdict: {'PASS' if ok else 'FAIL'}" + (
        f" ({len(passed)} of {len(rows)} test(s) did not fail with their mechanism off)" if passed else ""))
    return "\n".join(lines) + "\n"


def slug(i: int, m: Mutant) -> str:
    return f"{i + 1:02d}-" + re.sub(r"[^a-z0-9]+", "-", m.flags.lower()).strip("-")


def run_mutant(i: int, m: Mutant, out: Path, log=print) -> list[Row]:
    check = check_flags(m)
    if check.ok is False:
        log(f"mutants: {m.mechanism}: {check.detail}; its tests are not run")
        return rows_of(m, {t: ("not run", f"flags refused: {check.detail}") for t in m.tests})
    if check.ok is None:
        log(f"mutants: {m.mechanism}: flags not checked ({check.detail})")
    junit, logf = out / f"{slug(i, m)}.xml", out / f"{slug(i, m)}.log"
    junit.unlink(missing_ok=True)
    log(f"mutants: {m.mechanism}: {run.EXTRA_FLAGS_ENV}={m.flags}, {len(m.tests)} test(s); log {logf}")
    with open(logf, "w") as fh:
        fh.write(f"$ {shell_line(m, junit)}\n")
        fh.flush()
        subprocess.run(pytest_command(m, junit), cwd=paths.REPO, stdout=fh, stderr=subprocess.STDOUT,
                       env=dict(os.environ, **{run.EXTRA_FLAGS_ENV: m.flags}), stdin=subprocess.DEVNULL)
    return rows_of(m, outcomes(junit.read_text() if junit.exists() else None, m.tests))


def write(out: Path, rows: list[Row], started: str, pending: int) -> Path:
    (out / "mutants.json").write_text(json.dumps({"started": started, "pending": pending,
                                                  "pass": verdict(rows) and not pending,
                                                  "rows": [asdict(r) for r in rows]}, indent=1) + "\n")
    (out / "mutants.md").write_text(report(rows, started, pending))
    return out / "mutants.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=str(MUTANTS_FILE), help="the mutant table (default lab/mutants.toml)")
    ap.add_argument("--only", action="append", metavar="TEXT",
                    help="only the mechanisms whose name or flags contain TEXT (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the plan (mechanism, flag, test) and exit")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the plan, each entry's command and the flag check; boot nothing")
    ap.add_argument("--out", help="folder for the table and the logs (default runs/mutants-DATE)")
    args = ap.parse_args(argv)
    try:
        mutants = select(load(Path(args.file)), args.only)
    except MutantError as e:
        print(f"mutants: error: {e}", file=sys.stderr)
        return 2
    plan = [Row(m.mechanism, m.flags, t, "not run") for m in mutants for t in m.tests]
    if args.list:
        print(table(plan, with_outcome=False), end="")
        return 0
    if args.dry_run:
        print(table(plan, with_outcome=False))
        bad = False
        for i, m in enumerate(mutants):
            check = check_flags(m)
            state = {True: "take", False: "REFUSED", None: "not checked"}[check.ok]
            legs = "; ".join(f"{shlex.join(leg) or '(default)'} -> {shlex.join(run.with_extra_flags(leg, m.flag_list))}"
                             for leg in check.legs)
            print(f"{m.mechanism}:\n  scx_locality steps: {legs}\n  flags: {state}"
                  f"{': ' + check.detail if check.detail else ''}\n"
                  f"  $ {shell_line(m, Path('OUT') / (slug(i, m) + '.xml'))}")
            bad = bad or check.ok is False
        return 1 if bad else 0
    out = Path(args.out) if args.out else paths.runs_dir() / f"mutants-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    rows: list[Row] = []
    for i, m in enumerate(mutants):
        rows += run_mutant(i, m, out)
        path = write(out, rows, started, len(mutants) - i - 1)
    print(report(rows, started), end="")
    print(f"mutants: table in {path}")
    return 0 if verdict(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
