# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab matrix: every seed benchmark on every modeled machine under EEVDF, scx_locality and the published
sched_ext schedulers, and one results page from it.

The plan is data (lab/matrix.toml): per machine, the benchmarks the seed threads measured on a machine of that
shape; the schedulers; the runs. Each (machine, benchmark) is one `bin/lab bench` folder under OUT/MACHINE/, so
each boot runs one benchmark under every scheduler, interleaved, the order rotated from run to run (bench.py).

The matrix goes run-major: first run 1 of every folder, then run 2 of every folder, and so on. So an interrupted
matrix has about as many runs everywhere, host noise of one hour lands on every folder alike, and `--resume`
(the same command again) goes on with the first folder that has fewer runs than the round needs: a folder's
runs are kept boot by boot (bench.run_bench(resume=...)), so at most the boot that was interrupted is lost.

The page of a run-major matrix (write_page) and the store's (store_page) show each machine alike
(machine_section): its cells, then one table of every figure of every benchmark case (rows) by scheduler
(columns): the mean over runs (Hmean for rates, Amean for times, as mmtests), its coefficient of variation, the
difference against EEVDF with mmtests' t-test at p < 0.05 (stats.significance), the best scheduler of the row in
bold, and scx_locality against the best peer of the row; a placement table (pair on one node, home node and
LLC, cross-node moves per second); the cost of the schedulers' decisions (BPF run time per callback); and a
heatmap of every scheduler's difference to EEVDF. The same figures go to results.json beside the page.

The results store (lab/store.py, docs/results-store/) is what docs/results.md is made of. Data flows one way:
runs write cells, the page reads only the store.
- Every folder the run-major matrix finishes goes into the store as a cell (machine x benchmark spec x scheduler
  set), stamped with the scx_locality build's behaviour; `--add FOLDER` stores any bench folder, a `bench --host`
  one on real hardware too.
- `--budget 90m` (run_budget) works cell by cell instead: the plan's cells the store lacks, then those with fewer
  runs than the plan asks, then the stale ones, the oldest first; each whole cell (all its runs) in a bench
  folder under --out, stored when done; none started that cannot finish in what is left of the budget by its
  previous duration, or by the matrix's estimate scaled by how the store's cells fared against theirs.
- `--shard I/N` takes the I-th of N shares of the plan's cells (dealt by the matrix's estimate: the same on every
  host), and `--merge OTHER_STORE` joins the stores of several hosts, the newest cell of each key winning.
- `--page` (store_page) writes the page from the store: "the seeds, reproduced" (SEEDS: each seed thread's
  headline beside ours), the cost per decision by machine size, then per machine its cells with their stamps
  (stale ones marked with the reason and age), speed, memory-model figures, placement and cost tables.
- The [core] part of the matrix file is the subset kept current this way (`--core`).
- A machine's `memory_model` benchmarks run again with the memory model (bench --memory-model) as units and cells
  of their own (Unit.memory_model; the store key's "+memory-model"). The model slows the guest 6-11x, so both
  pages show only their memory figures (memory_table), never pooled with a plain run's speed, placement or cost.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import math
import re
import shlex
import shutil
import statistics
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import bench, benchfile, machines, paths, peers, report, run, stats, store

MATRIX_FILE = paths.REPO / "lab" / "matrix.toml"
ALPHA = 0.05  # the page's significance level (the bench reports keep mmtests' 0.10)
BASELINE = "eevdf"
OURS = "scx_locality"
STATE = "matrix.json"
PAGE = paths.REPO / "docs" / "results.md"  # --page's default: written from the results store alone


class MatrixError(run.UsageError):
    pass


def titled(name: str, memory_model: bool) -> str:
    """A benchmark (or machine) as the logs and pages name it: a memory-model run says so."""
    return name + (" (memory model)" if memory_model else "")


@dataclass(frozen=True)
class Unit:
    """One bench folder of the matrix: one benchmark spec on one machine, with the memory model or without."""
    machine: str
    spec: str
    memory_model: bool = False

    @property
    def dirname(self) -> str:
        # hackbench:mode=thread:groups=1/4 -> hackbench_mode=thread_groups=1-4 (+memory-model)
        return store.dirname(self.spec) + (store.MEMORY_MODEL_SUFFIX if self.memory_model else "")

    @property
    def title(self) -> str:
        return titled(self.spec, self.memory_model)

    def folder(self, out: Path) -> Path:
        return out / self.machine / self.dirname


@dataclass
class Plan:
    scheds: list[str]  # the file's (or --sched's); a machine may give its own (unit_scheds)
    runs: int
    units: list[Unit] = field(default_factory=list)
    quick: bool = False
    section: str = ""  # "", "quick" or "core": the part of the matrix file
    unit_scheds: dict[Unit, list[str]] = field(default_factory=dict)  # a machine's own schedulers
    unit_runs: dict[Unit, int] = field(default_factory=dict)  # a machine's own runs

    def machines(self) -> list[str]:
        return list(dict.fromkeys(u.machine for u in self.units))

    def scheds_of(self, u: Unit) -> list[str]:
        return self.unit_scheds.get(u, self.scheds)

    def runs_of(self, u: Unit) -> int:
        return self.unit_runs.get(u, self.runs)

    def all_scheds(self) -> list[str]:
        """Every scheduler of the plan, the file's first, then the machines' own in order."""
        return list(dict.fromkeys(self.scheds + [s for u in self.units for s in self.scheds_of(u)]))

    def key(self, u: Unit) -> str:
        """The unit's cell in the results store."""
        return store.cell_key(u.machine, u.spec, self.scheds_of(u), u.memory_model)


def _list_of_str(path: Path, where: str, v) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise MatrixError(f"{path}: {where} must be a non-empty list of strings")
    return list(v)


def _check_scheds(sched_list: list[str]) -> None:
    if sched_list[0] != BASELINE:
        raise MatrixError(f"the first scheduler must be {BASELINE} (the page compares against it), "
                          f"not {sched_list[0]}")
    bench.parse_sched_list(",".join(sched_list), ablate=False)  # unknown or repeated schedulers fail here


def _check_runs(n) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100:
        raise MatrixError(f"runs {n!r} is out of range 1..100")
    return n


def load_plan(path: Path = MATRIX_FILE, quick: bool = False, only_machines: list[str] | None = None,
              only_benches: list[str] | None = None, runs: int | None = None,
              scheds: list[str] | None = None, section: str = "") -> Plan:
    """The plan of the matrix file, or of one of its parts ([quick], [core]: section), narrowed by the command
    line's filters. A machine of a part may name its own `schedulers` (eevdf first: a variant of scx_locality
    its seed compares with, say) and `runs`; --sched and --runs override every machine's."""
    section = "quick" if quick else section
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MatrixError(f"{path}: cannot read the matrix: {e}") from None
    part = data
    if section:
        if section not in data:
            raise MatrixError(f"{path} has no [{section}] table")
        part = data[section]
    where = f"{section}." if section else ""
    table = part.get("machines")
    if not isinstance(table, dict) or not table:
        raise MatrixError(f"{path}: {where}machines is missing or empty")
    sched_list = scheds or _list_of_str(path, "schedulers", part.get("schedulers", data.get("schedulers")))
    _check_scheds(sched_list)
    n = _check_runs(runs if runs is not None else part.get("runs", data.get("runs", 5)))
    units = []
    unit_scheds: dict[Unit, list[str]] = {}
    unit_runs: dict[Unit, int] = {}
    for mname, mdef in table.items():
        if only_machines and mname not in only_machines:
            continue
        if not isinstance(mdef, dict):
            raise MatrixError(f"{path}: machines.{mname} must be a table with 'benchmarks'")
        mach = machines.load(mname)  # an unknown machine fails here, before anything runs
        m_scheds = None
        if "schedulers" in mdef and not scheds:
            m_scheds = _list_of_str(path, f"{where}machines.{mname}.schedulers", mdef["schedulers"])
            _check_scheds(m_scheds)
        m_runs = _check_runs(mdef["runs"]) if "runs" in mdef and runs is None else None
        mm_specs = (_list_of_str(path, f"{where}machines.{mname}.memory_model", mdef["memory_model"])
                    if "memory_model" in mdef else [])
        if mm_specs and mach.memory is None:
            raise MatrixError(f"{path}: {where}machines.{mname}.memory_model: machine {mname} has no [memory] "
                              "table for the memory model")
        specs = [(x, False) for x in _list_of_str(path, f"machines.{mname}.benchmarks", mdef.get("benchmarks"))]
        for spec, mm in specs + [(x, True) for x in mm_specs]:
            if only_benches and benchfile.parse_bench_spec(spec)[0] not in only_benches:
                continue
            benchfile.load_benchmark(spec)  # a bad spec fails here too
            u = Unit(mname, spec, mm)
            if any(x.machine == mname and x.dirname == u.dirname for x in units):
                raise MatrixError(f"{path}: machines.{mname}: {spec!r} is given twice (or names the same folder "
                                  f"as another spec)")
            units.append(u)
            if m_scheds and m_scheds != sched_list:
                unit_scheds[u] = m_scheds
            if m_runs is not None and m_runs != n:
                unit_runs[u] = m_runs
    what = f"{section} " if section else ""
    if only_machines:
        unknown = sorted(set(only_machines) - set(table))
        if unknown:
            raise MatrixError(f"machine(s) {', '.join(unknown)} not in the {what}matrix; "
                              f"it has {', '.join(table)}")
    if only_benches:
        named = {benchfile.parse_bench_spec(u.spec)[0] for u in units}
        unknown = sorted(set(only_benches) - named)
        if unknown:
            raise MatrixError(f"benchmark(s) {', '.join(unknown)} not in the {what}matrix"
                              + (f" of {', '.join(only_machines)}" if only_machines else ""))
    if not units:
        raise MatrixError("the filters leave nothing to run")
    return Plan(scheds=sched_list, runs=n, units=units, quick=section == "quick", section=section,
                unit_scheds=unit_scheds, unit_runs=unit_runs)


def parse_shard(text: str) -> tuple[int, int]:
    """--shard I/N: 1 <= I <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise MatrixError(f"--shard {text!r}: give I/N with 1 <= I <= N, e.g. 2/4")
    return int(m.group(1)), int(m.group(2))


def shard(plan: Plan, i: int, n: int) -> Plan:
    """The I-th of N shards of the plan (1-based): the cells dealt out by the matrix's own estimate, longest
    first, each to the shard with the least so far (ties by cell key), so that the shards take about as long.
    It depends on the plan alone (the files of this repository), not on the host or the store: every host of a
    job array computes the same split."""
    if n == 1:
        return plan
    specs = {u: bench.parse_sched_list(",".join(plan.scheds_of(u)), ablate=False) for u in plan.units}
    cost = {u: unit_estimate(u, specs[u]) * plan.runs_of(u) for u in plan.units}
    load = [0.0] * n
    mine = set()
    for u in sorted(plan.units, key=lambda u: (-round(cost[u], 3), plan.key(u))):
        k = min(range(n), key=lambda j: (load[j], j))
        load[k] += cost[u]
        if k == i - 1:
            mine.add(u)
    units = [u for u in plan.units if u in mine]
    return Plan(scheds=plan.scheds, runs=plan.runs, units=units, quick=plan.quick, section=plan.section,
                unit_scheds={u: v for u, v in plan.unit_scheds.items() if u in mine},
                unit_runs={u: v for u, v in plan.unit_runs.items() if u in mine})


# ---------------------------------------------------------------------------------------------------------
# Running


def unit_estimate(unit: Unit, specs: list[run.SchedSpec]) -> float:
    """Seconds one boot of the unit should take (bench's own estimates)."""
    m = machines.load(unit.machine)
    b = benchfile.load_benchmark(unit.spec)
    return bench.boot_estimate(m) + sum(bench.sched_overhead(s) + sum(c.est_s for c in b.cases()) for s in specs)


def runs_done(out: Path, unit: Unit) -> int:
    try:
        return len((bench.read_results(unit.folder(out)) or {}).get("runs", []))
    except (OSError, json.JSONDecodeError):
        return 0


def load_state(out: Path) -> dict:
    p = out / STATE
    return json.loads(p.read_text()) if p.exists() else {}


def save_state(out: Path, state: dict) -> None:
    tmp = out / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.rename(out / STATE)


def plan_json(plan: Plan) -> dict:
    units = []
    for u in plan.units:
        d = {"machine": u.machine, "spec": u.spec}
        if u.memory_model:
            d["memory_model"] = True
        if u in plan.unit_scheds:
            d["scheds"] = plan.unit_scheds[u]
        if u in plan.unit_runs:
            d["runs"] = plan.unit_runs[u]
        units.append(d)
    return {"scheds": plan.scheds, "runs": plan.runs, "quick": plan.quick, "units": units}


def same_plan(a: dict, b: dict) -> bool:
    """Plans that may share a folder: all but the number of runs alike (a resume may ask for more runs)."""
    def strip(p):
        return {k: ([{x: y for x, y in u.items() if x != "runs"} for u in v] if k == "units" else v)
                for k, v in p.items() if k != "runs"}
    return strip(a) == strip(b)


def store_folder(st: Path | None, folder: Path, est_s: float | None, spec: str, log) -> None:
    """Put a finished bench folder of the matrix into the results store (st None: no store)."""
    if st is None:
        return
    try:
        paths_ = store.add_folder(st, folder, estimate_s={spec: est_s})
        log(f"matrix: stored {', '.join(str(p.relative_to(st)) for p in paths_)} in {st}")
    except store.StoreError as e:
        log(f"matrix: not stored: {e}")


def _lock_out(out: Path):
    """Create out and hold its .lock for the caller's lifetime: one bin/lab matrix per folder."""
    out.mkdir(parents=True, exist_ok=True)
    lock = open(out / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise MatrixError(f"another bin/lab matrix is running in {out}") from None
    return lock


def run_matrix(plan: Plan, out: Path, page: Path, build: bool, command_line: str, resume: bool,
               stdout=sys.stdout, results_store: Path | None = None) -> int:
    """Run what the plan still lacks in out, writing the page after every boot; the worst bench exit code.
    results_store: where each folder goes as a cell once it has all its runs (None: nowhere)."""
    def log(msg):
        print(msg, file=stdout, flush=True)

    lock = _lock_out(out)
    state = load_state(out)
    if state and not state.get("boots") and not any(runs_done(out, u) for u in plan.units):
        state = {}  # nothing ran there: a fresh start
    if state and not resume:
        raise MatrixError(f"{out} holds a matrix already; --resume goes on with it, or give another --out")
    if state and not same_plan(state.get("plan", {}), plan_json(plan)):
        raise MatrixError(f"cannot resume {out}: it was made by another plan (machines, benchmarks or schedulers "
                          f"differ); give the command it was made with: {state.get('command')}")
    if not state:
        state = {"command": command_line, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "elapsed_s": 0.0,
                 "boots": 0}
    state["plan"] = plan_json(plan)
    save_state(out, state)
    specs = bench.parse_sched_list(",".join(plan.all_scheds()), ablate=False)
    bench.build_workloads(log)
    failed = bench.prepare_schedulers(specs, build, log)
    for label, reason in failed.items():
        log(f"matrix: {label} cannot run, its columns will say so: {reason}")
    by_label = {s.label: s for s in specs}
    uspecs = {u: [by_label[x] for x in plan.scheds_of(u)] for u in plan.units}
    est = {u: unit_estimate(u, [s for s in uspecs[u] if s.label not in failed]) for u in plan.units}
    max_runs = max(plan.runs_of(u) for u in plan.units)
    todo = [(r, u) for r in range(1, max_runs + 1) for u in plan.units
            if r <= plan.runs_of(u) and runs_done(out, u) < r]
    total = sum(est[u] for _r, u in todo)
    log(f"matrix: {len(plan.units)} benchmark folders on {len(plan.machines())} machine(s) x "
        f"{len(plan.scheds)} schedulers x {plan.runs} runs; {len(todo)} boot(s) to go, estimated "
        f"{bench.fmt_dur(total)}; output in {out}, page {page}")
    worst = run.EXIT_OK
    t0, done_est = time.monotonic(), 0.0
    b0 = None
    try:
        for i, (r, u) in enumerate(todo):
            folder = u.folder(out)
            m = machines.load(u.machine)
            b = benchfile.load_benchmark(u.spec)
            old = bench.read_results(folder)  # run_bench refuses it if it is of another plan or build
            spent = time.monotonic() - t0
            eta = (total - done_est) * (min(max(spent / done_est, 0.3), 5.0) if done_est else 1.0)
            log(f"matrix [{bench.fmt_dur(spent)} elapsed, ETA {bench.fmt_dur(eta)}] boot {i + 1}/{len(todo)}: "
                f"run {r}/{plan.runs_of(u)} of {u.machine} {u.title}")
            b0 = time.monotonic()
            results = bench.run_bench(m, uspecs[u], [b], r, folder, build=False, command_line=command_line,
                                      stdout=stdout, resume=old,
                                      prepared={k: v for k, v in failed.items() if k in plan.scheds_of(u)},
                                      runs_total=plan.runs_of(u), memory_model=u.memory_model)
            report.write_report(folder)
            if r == plan.runs_of(u):
                store_folder(results_store, folder, est[u] * plan.runs_of(u), u.spec, log)
            state["elapsed_s"] += time.monotonic() - b0
            b0 = None
            state["boots"] += 1
            save_state(out, state)
            done_est += est[u]
            code = bench.exit_code(results)
            if code != run.EXIT_OK:
                log(f"matrix: {u.machine} {u.title} run {r}: exit {code} (see {folder}/report.md); going on")
                worst = worst if worst != run.EXIT_OK else code
            write_page(out, page)
    finally:
        if b0 is not None:  # the boot that was cut: its time was spent too
            state["elapsed_s"] += time.monotonic() - b0
            save_state(out, state)
        if todo:
            write_page(out, page)
        lock.close()
    log(f"matrix: done; page {page}")
    return worst


# ---------------------------------------------------------------------------------------------------------
# The page


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _family(label: str) -> str:
    return label.split(":", 1)[0]


def _is_peer(label: str) -> bool:
    """A published sched_ext scheduler (one lab/schedulers.toml builds from a crate): not EEVDF, not ours, not a
    reference built here such as scx_defaults, the sched_ext floor."""
    return bool(run.registry().get(_family(label), {}).get("crate"))


def figure_rows(results: dict, labels: list[str]) -> list[dict]:
    """Every (benchmark, case, figure) of one bench folder with its per-scheduler statistics."""
    rows = []
    for bname, bdef in results["benchmarks"].items():
        for fig in bdef["figures"]:
            kind, hib = fig["mean"], fig["higher_is_better"]
            for cid, clabel in report.case_list(results, bname):
                if fig.get("cases") is not None and clabel not in fig["cases"]:
                    continue
                base = report.values(results, bname, cid, labels[0], fig["name"])
                cells = {}
                for s in labels:
                    vals = report.values(results, bname, cid, s, fig["name"])
                    m = stats.mean(vals, kind)
                    cell = {"n": len(vals), "mean": m, "cv": stats.coeffvar(vals, kind), "values": vals}
                    if s != labels[0]:
                        sig = stats.significance(base, vals, kind, alpha=ALPHA)
                        cell["pct_vs_baseline"] = stats.pct_better(m, stats.mean(base, kind), hib)
                        cell["p_vs_baseline"] = None if sig is None else sig.p
                        cell["significant"] = bool(sig and sig.significant)
                    cells[s] = cell
                have = [s for s in labels if cells[s]["mean"] is not None]
                pick = (max if hib else min)
                best = pick(have, key=lambda s: cells[s]["mean"]) if have else None
                peers = [s for s in have if s != labels[0] and _is_peer(s)]
                best_peer = pick(peers, key=lambda s: cells[s]["mean"]) if peers else None
                ours = next((s for s in labels if _family(s) == OURS and cells[s]["mean"] is not None), None)
                vs_peer = None
                if ours and best_peer:
                    sig = stats.significance(cells[best_peer]["values"], cells[ours]["values"], kind, alpha=ALPHA)
                    vs_peer = {"peer": best_peer,
                               "pct": stats.pct_better(cells[ours]["mean"], cells[best_peer]["mean"], hib),
                               "p": None if sig is None else sig.p, "significant": bool(sig and sig.significant)}
                rows.append({"bench": bname, "spec": bdef.get("spec", bname), "case": clabel,
                             "figure": fig["name"], "unit": fig["unit"], "higher_is_better": hib, "mean_kind": kind,
                             "cells": cells, "best": best, "best_peer": best_peer, "ours_vs_best_peer": vs_peer})
    return rows


def placement_rows(results: dict, labels: list[str]) -> list[dict]:
    """Per benchmark: where its tasks ran under each scheduler (from locsample, alike for every scheduler)."""
    out = []
    for bname, bdef in results["benchmarks"].items():
        loc = {r["sched"]: r for r in report.locality_rows(results, bname, labels)}
        colo: dict[str, list] = {}
        for r in report.colocation_rows(results, bname, labels):
            colo.setdefault(r["sched"], []).append(r)
        llc: dict[str, list] = {}
        if bdef.get("process_llc"):
            for r in report.process_llc_rows(results, bname, labels):
                llc.setdefault(r["sched"], []).append(r)
        cells = {}
        for s in labels:
            lr = loc.get(s) or {}
            secs = lr.get("seconds")
            pair = [c["same_node"] for c in colo.get(s, []) if c["same_node"] is not None]
            cells[s] = {"runs": lr.get("runs", 0), "home_node": lr.get("home_node"), "home_llc": lr.get("home_llc"),
                        "cross_node_per_s": (lr["cross_node"] / secs) if secs and lr.get("cross_node") is not None
                        else None,
                        "iwq_node_ms_per_s": (lr["iwq_node_ms"] / secs) if secs and lr.get("iwq_node_ms") is not None
                        else None,
                        "pair_same_node": min(pair) if pair else None,
                        "process_top_llc": (report._mean([c["share"] for c in llc.get(s, [])])
                                            if llc.get(s) else None)}
        out.append({"bench": bname, "spec": bdef.get("spec", bname), "cells": cells,
                    "has_pair": bool(colo), "has_llc": bool(llc)})
    return out


def cost_rows(folders: list[dict], labels: list[str]) -> dict:
    """BPF ns per call per callback and scheduler, pooled over the machine's benchmarks and runs."""
    pooled: dict[str, dict] = {}
    for results in folders:
        for bname in results["benchmarks"]:
            cols, per = report.bpf_cost_rows(results, bname, labels)
            for s in cols:
                agg = pooled.setdefault(s, {"secs": 0.0, "cb": {}, "cpu_ns": 0, "nr_cpus": results.get("nr_cpus")})
                agg["secs"] += per[s]["secs"]
                for cb, a in per[s]["cb"].items():
                    t = agg["cb"].setdefault(cb, {"calls": 0, "ns": 0, "per_run": []})
                    t["calls"] += a["calls"]
                    t["ns"] += a["ns"]
                    t["per_run"] += a["per_run"]
                    agg["cpu_ns"] += a["ns"]
    for s, agg in pooled.items():
        n = agg.pop("nr_cpus")
        agg["cpu_share"] = 100.0 * agg.pop("cpu_ns") / 1e9 / (agg["secs"] * n) if agg["secs"] and n else None
    return pooled


def _cell(row: dict, s: str) -> str:
    c = row["cells"][s]
    if c["mean"] is None:
        return "n/a"
    txt = _fmt(c["mean"])
    if s == row["best"]:
        txt = f"**{txt}**"
    if c["cv"] is not None:
        txt += f" ±{c['cv']:.0f}%"
    if c.get("pct_vs_baseline") is not None:
        txt += f" {c['pct_vs_baseline']:+.0f}%" + ("*" if c.get("significant") else "")
    return txt


def _vs_peer(row: dict) -> str:
    v = row["ours_vs_best_peer"]
    if not v or v["pct"] is None:
        return "n/a"
    p = "n/a" if v["p"] is None else f"{v['p']:.2f}"
    return f"{v['pct']:+.0f}%{'*' if v['significant'] else ''} vs {v['peer']} (p {p})"


def overview(data: dict, labels: list[str]) -> list[str]:
    """One line per machine: how scx_locality's rows compare with EEVDF's and the best peer's, and how local."""
    ours = next((s for s in labels if _family(s) == OURS), None)
    if ours is None or not data["machines"]:
        return []
    lines = ["## Overview", "",
             f"Per machine, the speed rows (benchmark x case x figure) where `{ours}` is significantly better or "
             f"worse (p < {ALPHA}) than `{BASELINE}` and than the best peer of the row, and its pair co-location "
             "(the lowest share of samples with a communicating pair on one node, over the benchmarks that have "
             "a pair) beside EEVDF's.", "",
             f"| machine | speed rows | better / worse than {BASELINE} | better / worse than the best peer | "
             f"pair on one node, {ours} / {BASELINE} |", "|---|---:|---:|---:|---:|"]
    for mname, m in data["machines"].items():
        rows = [r for r in m["figures"] if r["cells"].get(ours, {}).get("mean") is not None]
        c = [r["cells"][ours] for r in rows]
        bb = sum(1 for x in c if x.get("significant") and (x.get("pct_vs_baseline") or 0) > 0)
        bw = sum(1 for x in c if x.get("significant") and (x.get("pct_vs_baseline") or 0) < 0)
        peer = [r["ours_vs_best_peer"] for r in rows if r.get("ours_vs_best_peer")]
        pb = sum(1 for v in peer if v["significant"] and (v["pct"] or 0) > 0)
        pw = sum(1 for v in peer if v["significant"] and (v["pct"] or 0) < 0)
        pair = lambda s: [p["cells"][s]["pair_same_node"] for p in m["placement"]  # noqa: E731
                          if p["cells"].get(s, {}).get("pair_same_node") is not None]
        po, pe = pair(ours), pair(BASELINE)
        lines.append(f"| [{mname}](#{mname}) | {len(rows)} | {bb} / {bw} | {pb} / {pw} of {len(peer)} | "
                     f"{_fmt_pct(min(po) if po else None)} / {_fmt_pct(min(pe) if pe else None)} |")
    return lines + [""]


def _fmt_pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


TCG_NOTE = [
    "What these figures can and cannot show. The machines are modeled in QEMU with TCG (emulation, no KVM), on a "
    "2-core host: the guest has the modeled nodes, LLCs and SMT siblings as the scheduler sees them (ACPI SRAT/SLIT, "
    "CPUID cache leaves), but no modeled cache or memory latency, and its vCPUs are host threads sharing 2 cores. "
    "So locality shows here as placement (the placement tables: which node and LLC tasks ran on, how often they "
    "crossed), not as speed: a task on a remote node runs as fast as on its own. Runs with the lab's memory model "
    "(the machines' *Memory* tables) count every guest data access, local or remote, and charge it a modeled "
    "latency: the memory half of the trade, in a guest slowed 6-11x. Speed figures show the cost of "
    "the scheduler's decisions and of idle CPUs left idle, magnified by emulation (a wake-up of an idle vCPU costs "
    "about 150 us), and they swing with the host's load: compare columns within one row (they ran interleaved in "
    "the same boots), not rows or pages.",
    "On real hardware: `bin/lab bench --host` runs the same benchmark files on the machine itself (root, a "
    "sched_ext kernel, no other sched_ext scheduler loaded) and writes the same results.json and report, one "
    "benchmark folder at a time (`--bench` with the specs of the matrix file, `--sched` with its schedulers); "
    "the matrix itself runs in QEMU guests only.",
    f"Many rows and schedulers are tested at once, each at p < {ALPHA} with no correction: about one row in "
    "forty is expected to be flagged in each direction by chance alone. The best peer of a row is chosen from "
    "the same runs it is then compared with, which favours the peer.",
]


# what the machines' placement tables measure (both pages say it once, before the machines)
PLACEMENT_NOTE = (
    "The placement tables say where the benchmark's tasks ran, from the sampler (every 100 ms, the same for every "
    "scheduler): *pair on one node* is the lowest over the benchmark's cases of the share of samples with its "
    "busiest tasks on one node; *home node / LLC* the share of samples on the node / LLC each task was seen on "
    "most; *cross-node moves/s* a task's node changing between two samples (a lower bound), per second of run time; "
    "*idle while queued* the sampler's bound (per 100 ms, per node: the smaller of the node's idle CPU time and its "
    "tasks' run-queue waits; it includes the time an idle CPU takes to start a task woken onto it), in ms per second "
    "of run time; *top LLC* a process's share of its running time in one LLC.")

# The placement table's rows: (name, placement_rows' key, format); the pair's only for benchmarks with a pair, the
# top LLC's only for those that record it.
PLACEMENT_MEASURES = [
    ("pair on one node", "pair_same_node", _fmt_pct), ("home node", "home_node", _fmt_pct),
    ("home LLC", "home_llc", _fmt_pct), ("cross-node moves/s", "cross_node_per_s", _fmt),
    ("idle while queued, node (ms/s)", "iwq_node_ms_per_s", _fmt), ("top LLC per process", "process_top_llc", _fmt_pct),
]


def write_page(out: Path, page: Path) -> Path:
    """results.md at page, results.json and the PNGs in the folder beside it (page without .md)."""
    from . import plots  # matplotlib: only when a page is written

    state = load_state(out)
    plan = state.get("plan") or {}
    labels = plan.get("scheds") or []
    assets = page.with_suffix("")
    assets.mkdir(parents=True, exist_ok=True)
    units = [Unit(u["machine"], u["spec"], bool(u.get("memory_model"))) for u in plan.get("units", [])]
    machines_order = list(dict.fromkeys(u.machine for u in units))
    data = {"command": state.get("command"), "started": state.get("started"), "elapsed_s": state.get("elapsed_s"),
            "boots": state.get("boots"), "alpha": ALPHA, "baseline": BASELINE, "schedulers": labels,
            "runs_requested": plan.get("runs"), "machines": {}}
    rel = assets.name
    lines = ["# Results: scx_locality against EEVDF and the published sched_ext schedulers", "",
             f"- command: `{state.get('command', '')}`; started {state.get('started')}; "
             f"{state.get('boots', 0)} boots, {bench.fmt_dur(state.get('elapsed_s') or 0)} of lab time"
             + ("" if all(runs_done(out, u) >= (plan.get("runs") or 0) for u in units) else " so far (unfinished)"),
             f"- schedulers: {', '.join(f'`{s}`' for s in labels)}; baseline `{BASELINE}`",
             f"- runs: {plan.get('runs')} requested per benchmark (one boot each, all schedulers interleaved in it, "
             "the order rotated per run); each cell says how many it has",
             f"- reading a cell: mean over runs (Hmean for rates, Amean for times, as mmtests), `±` its coefficient "
             f"of variation, then the difference to `{BASELINE}` in percent, positive when better; `*` marks "
             f"p < {ALPHA} in mmtests' two-sample t-test (lab/stats.py); the best scheduler of a row is in bold. "
             f"The last column compares scx_locality with the best peer of the row (the best published sched_ext "
             "scheduler; not scx_defaults, the sched_ext floor: the kernel's built-in policy with no callbacks) with "
             "the same test.",
             f"- figures per run, the schedulers' logs and per-benchmark reports with plots: the bench folders under "
             f"the matrix's output folder; every figure of this page is also in [{rel}/results.json]"
             f"({rel}/results.json)", ""]
    for p in TCG_NOTE + [PLACEMENT_NOTE]:
        lines += [p, ""]
    head = lines
    lines = []
    for mname in machines_order:
        mcells = []
        for u in units:
            p = u.folder(out) / "results.json"
            if u.machine == mname and p.exists():
                mcells += store.cells_from_results(json.loads(p.read_text()), store.folder_date(u.folder(out)), None)
        if not mcells:
            continue
        for c in mcells:  # not from the store: no stamp to judge them by
            c["_stale"], c["_age"] = None, store.age(c)
        sec, mdata = machine_section(mname, mcells, labels)
        lines += sec
        png = plots.scheduler_heatmap(mdata["figures"], labels, f"{mname}: percent better than {BASELINE}",
                                      assets / f"{mname}.png", ALPHA)
        if png:
            lines += [f"![{mname}: every scheduler against {BASELINE}]({rel}/{png.name})", ""]
        data["machines"][mname] = mdata
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join(head + overview(data, labels) + lines) + "\n")
    (assets / "results.json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    return page


# ---------------------------------------------------------------------------------------------------------
# Slices: --budget runs the cells of the store that are missing, then the stalest, within a time budget


def parse_budget(text: str) -> float:
    """--budget 90m, 1h30m, 2h, 45m, 3600s or a number of minutes: seconds."""
    t = (text or "").strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t) * 60
    m = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+)s)?", t)
    if not t or not m or not any(m.groups()):
        raise MatrixError(f"--budget {text!r}: give a time such as 90m, 1h30m or 2h")
    h, mi, sec = (float(x) if x else 0.0 for x in m.groups())
    secs = h * 3600 + mi * 60 + sec
    if secs <= 0:
        raise MatrixError(f"--budget {text!r} is no time at all")
    return secs


def calibration(cells: list[dict]) -> float:
    """How long cells took against the matrix's estimate (the median ratio over the store's cells that recorded
    both; 1 when none did): a cell never run is estimated at its matrix estimate times this."""
    ratios = [c["duration_s"] / c["estimate_s"] for c in cells if c.get("estimate_s") and c.get("duration_s")]
    return statistics.median(ratios) if ratios else 1.0


@dataclass
class Todo:
    unit: Unit
    status: str  # missing, short (fewer runs than the plan asks), stale
    why: str
    est_s: float
    est_from: str  # "previous run" or "estimate"


def unrun(cell: dict) -> list[str]:
    """The schedulers of a cell that did not run in it (not built, or failed to build, when it ran)."""
    return [s["label"] for s in (cell.get("results") or {}).get("scheds", []) if s.get("prepare_error")]


def runnable_now(labels: list[str]) -> set[str]:
    """The labels whose scheduler can run now without a build: EEVDF, ours, and the peers already built (a
    scheduler this repository builds counts as runnable: the bench builds it first)."""
    reg = peers.registry_peers()
    return {lb for lb in labels if lb.split(":", 1)[0] not in reg or peers.status(lb.split(":", 1)[0])[0] == "built"}


def budget_order(plan: Plan, cells: dict[str, dict], current: dict,
                 now: dt.datetime | None = None, runnable: set[str] | None = None) -> list[Todo]:
    """The cells the plan lacks, in the order a budget runs them: missing ones (in the plan's order), then
    those with fewer runs than the plan asks or without a scheduler that can run now (runnable: the labels
    that can; None: not asked), then the stale ones, the oldest first. Fresh cells are left out."""
    factor = calibration(list(cells.values()))
    ranked = []
    for i, u in enumerate(plan.units):
        c = cells.get(plan.key(u))
        runs = plan.runs_of(u)
        if c is not None and c.get("duration_s") and c.get("runs"):
            est, src = c["duration_s"] / c["runs"] * runs, "previous run"
        else:
            specs = bench.parse_sched_list(",".join(plan.scheds_of(u)), ablate=False)
            est, src = unit_estimate(u, specs) * runs * factor, "estimate" + (f" x {factor:.2f}" if factor != 1
                                                                              else "")
        if c is None:
            ranked.append(((0, 0.0, i), Todo(u, "missing", "not in the store", est, src)))
            continue
        a = store.age(c, now)
        whole = store.whole_runs((c.get("results") or {}).get("runs", []))
        if whole < runs:
            cut = c.get("runs", 0) - whole
            ranked.append(((1, -a, i), Todo(u, "short", f"{whole} of {runs} runs whole"
                                            + (f" ({cut} cut short by a guest fault)" if cut else ""), est, src)))
            continue
        now_ok = [lb for lb in unrun(c) if runnable is not None and lb in runnable]
        if now_ok:
            ranked.append(((1, -a, i), Todo(u, "short", f"{', '.join(now_ok)} did not run in it", est, src)))
            continue
        why = store.staleness(c, current)
        if why:
            ranked.append(((2, -a, i), Todo(u, "stale", f"{why}; {store.fmt_age(a)} old", est, src)))
    return [t for _k, t in sorted(ranked, key=lambda x: x[0])]


def whole_prefix(results: dict) -> dict:
    """A bench folder's results to go on from: its runs up to the first that a guest fault cut short (that one
    and those after run again, so the schedulers' order keeps rotating run by run)."""
    runs = results.get("runs", [])
    k = next((n for n, run in enumerate(runs) if not store.is_whole(run)), len(runs))
    return dict(results, runs=runs[:k])


def within_budget(todo: list[Todo], budget_s: float, spent_s: float = 0.0) -> list[Todo]:
    """The cells a budget would run, in order: each that can still finish in what is left (est_s); one that
    cannot is skipped, not started."""
    picked = []
    for t in todo:
        if spent_s + t.est_s <= budget_s:
            picked.append(t)
            spent_s += t.est_s
    return picked


def cell_folder(out: Path, plan: Plan, u: Unit) -> Path:
    """The bench folder a cell is run in under --out (kept after: its raw files and report)."""
    return out / u.machine / f"{u.dirname}@{store.schedset(plan.scheds_of(u))}"


def run_budget(plan: Plan, out: Path, results_store: Path, budget_s: float, build: bool, command_line: str,
               stdout=sys.stdout, clock=time.monotonic) -> int:
    """Run the plan's cells the store lacks (budget_order) one whole cell at a time, each stored when all its
    runs are done, and start none that cannot finish within budget_s by its estimate. An interrupted cell leaves
    the store as it was; its bench folder under out keeps its finished boots and the next slice goes on with it
    (when it is of the same build). The worst bench exit code."""
    def log(msg):
        print(msg, file=stdout, flush=True)

    lock = _lock_out(out)
    t0 = clock()
    worst = run.EXIT_OK
    try:
        current = store.current_stamp()
        cells = {store.key_of(c): c for c in store.read_cells(results_store)}
        todo = budget_order(plan, cells, current, runnable=runnable_now(plan.all_scheds()))
        fits = within_budget(todo, budget_s)
        log(f"matrix: budget {bench.fmt_dur(budget_s)}; {len(todo)} of {len(plan.units)} cell(s) missing, short "
            f"or stale; {len(fits)} fit by their estimates ({bench.fmt_dur(sum(t.est_s for t in fits))}); "
            f"store {results_store}")
        if not todo:
            return worst
        specs = bench.parse_sched_list(",".join(plan.all_scheds()), ablate=False)
        bench.build_workloads(log)
        failed = bench.prepare_schedulers(specs, build, log)
        for label, reason in failed.items():
            log(f"matrix: {label} cannot run, its columns will say so: {reason}")
        if build:  # the build may have changed what is stale
            current = store.current_stamp()
        # and preparing them says which schedulers can run
        todo = budget_order(plan, cells, current, runnable={lb for lb in plan.all_scheds() if lb not in failed})
        by_label = {s.label: s for s in specs}
        done = set()
        while True:
            left = budget_s - (clock() - t0)
            t = next((t for t in todo if t.unit not in done and t.est_s <= left), None)
            if t is None:
                break
            u = t.unit
            done.add(u)
            uspecs = [by_label[x] for x in plan.scheds_of(u)]
            folder = cell_folder(out, plan, u)
            b = benchfile.load_benchmark(u.spec)
            old = bench.read_results(folder)
            if old is not None:
                old = whole_prefix(old)
                why = bench.resume_check(old, uspecs, [b], u.machine, memory_model=u.memory_model)
                if why:
                    log(f"matrix: {folder}: starting again ({why})")
                    shutil.rmtree(folder)
                    old = None
            runs = plan.runs_of(u)
            log(f"matrix [{bench.fmt_dur(clock() - t0)} of {bench.fmt_dur(budget_s)}] {u.machine} {u.title}: "
                f"{t.status} ({t.why}); {runs} run(s), ~{bench.fmt_dur(t.est_s)} ({t.est_from})")
            results = bench.run_bench(machines.load(u.machine), uspecs, [b], runs, folder, build=False,
                                      command_line=command_line, stdout=stdout, resume=old,
                                      prepared={k: v for k, v in failed.items() if k in plan.scheds_of(u)},
                                      runs_total=runs, memory_model=u.memory_model)
            report.write_report(folder)
            specs_ok = [s for s in uspecs if s.label not in failed]
            store_folder(results_store, folder, unit_estimate(u, specs_ok) * runs, u.spec, log)
            code = bench.exit_code(results)
            if code != run.EXIT_OK:
                log(f"matrix: {u.machine} {u.title}: exit {code} (see {folder}/report.md); going on")
                worst = worst if worst != run.EXIT_OK else code
        rest = [t for t in todo if t.unit not in done]
        log(f"matrix: budget slice done in {bench.fmt_dur(clock() - t0)}; {len(done)} cell(s) run, {len(rest)} "
            f"left" + (f" (next: {rest[0].unit.machine} {rest[0].unit.title}, ~{bench.fmt_dur(rest[0].est_s)})"
                       if rest else ""))
    finally:
        lock.close()
    return worst


def print_budget(plan: Plan, results_store: Path, budget_s: float | None, stdout=sys.stdout) -> None:
    """--list with the store: what a budget would run, in order, and what it leaves."""
    cells = {store.key_of(c): c for c in store.read_cells(results_store)}
    todo = budget_order(plan, cells, store.current_stamp(), runnable=runnable_now(plan.all_scheds()))
    fits = within_budget(todo, budget_s) if budget_s is not None else todo
    print(f"store {results_store}: {len(plan.units) - len(todo)} of {len(plan.units)} cell(s) fresh", file=stdout)
    for t in todo:
        mark = "run " if t in fits else "skip"
        print(f"  {mark} {t.unit.machine:14s} {t.unit.title:44s} {t.status:7s} ~{bench.fmt_dur(t.est_s):>7s} "
              f"({t.est_from}; {t.why})", file=stdout)
    if budget_s is not None:
        print(f"budget {bench.fmt_dur(budget_s)}: {len(fits)} cell(s), ~{bench.fmt_dur(sum(t.est_s for t in fits))}",
              file=stdout)


# ---------------------------------------------------------------------------------------------------------
# The page from the store (--page): it reads the store and nothing else


MEMORY_FIGURES = {"mem-local-pct", "llc-hit-pct", "mem-ns", "mem-s", "miss-s"}
MEMORY_SHOWN = ("mem-local-pct", "miss-s")


def _bench_name(spec: str) -> str:
    return spec.split(":", 1)[0]


def _pick(cells: list[dict], machine: str, bench_name: str, need: str | None = None,
          memory_model: bool = False) -> dict | None:
    """The cell of a machine and benchmark a seed row quotes: one with scheduler `need`, run with the memory model
    or without as asked, fresh before stale, then the most runs, then the newest."""
    cands = [c for c in cells if c["key"]["machine"] == machine and _bench_name(c["key"]["spec"]) == bench_name
             and (need is None or need in c["key"]["scheds"])
             and bool(c["key"].get("memory_model")) == memory_model]
    if not cands:
        return None
    return max(cands, key=lambda c: (not c.get("_stale"), c.get("runs", 0), c.get("date", "")))


def _pct(row: dict, s: str) -> str:
    c = row["cells"].get(s) or {}
    if c.get("pct_vs_baseline") is None:
        return "n/a"
    return f"{c['pct_vs_baseline']:+.0f}%" + ("*" if c.get("significant") else "")


def _speed(cell: dict, ours: str, versus: str, figures: tuple[str, ...]) -> list[str]:
    """ours against versus, per case and figure: the difference in percent, positive when better."""
    res = cell["results"]
    if ours not in cell["key"]["scheds"] or versus not in cell["key"]["scheds"]:
        return []
    return [f"{r['case']} {r['figure']} {_pct(r, ours)}" for r in figure_rows(res, [versus, ours])
            if r["figure"] in figures]


def _placement(cell: dict, scheds: list[str], key: str, what: str) -> str | None:
    have = [s for s in scheds if s in cell["key"]["scheds"]]
    rows = placement_rows(cell["results"], have)
    vals = {s: [p["cells"][s][key] for p in rows if p["cells"][s][key] is not None] for s in have}
    if not any(vals.values()):
        return None
    fmt = next(f for _name, k, f in PLACEMENT_MEASURES if k == key)
    return f"{what}: " + ", ".join(f"`{s}` {fmt(min(v)) if v else 'n/a'}" for s, v in vals.items())


def _memory(cell: dict, ours: str, versus: str) -> str | None:
    """Per case, the share of local accesses of versus and ours, and ours' LLC-miss time against versus'."""
    if ours not in cell["key"]["scheds"] or versus not in cell["key"]["scheds"]:
        return None
    rows = figure_rows(cell["results"], [versus, ours])
    local = {r["case"]: r for r in rows if r["figure"] == "mem-local-pct"}
    miss = {r["case"]: r for r in rows if r["figure"] == "miss-s"}
    parts = []
    for case, r in local.items():
        v, o = r["cells"][versus]["mean"], r["cells"][ours]["mean"]
        if v is None or o is None:
            continue
        parts.append(f"{case} local accesses `{versus}` {v:.1f}%, `{ours}` {o:.1f}%"
                     + (f", miss time {_pct(miss[case], ours)}" if case in miss else ""))
    return "memory model: " + "; ".join(parts) if parts else None


def _cell_note(cell: dict) -> str:
    note = f"{titled(cell['key']['machine'], bool(cell['key'].get('memory_model')))}, {cell['runs']} runs, " \
        f"{cell['date'][:10]}"
    if cell.get("_stale"):
        note += f", **stale** ({cell['_stale']}; {store.fmt_age(cell['_age'])} old)"
    return note


SEEDS = [
    {"seed": "000", "what": "a communicating pair's locality (Gorman 2019)",
     "thread": "55% -> 100% of the time on one node",
     "tcg": "placement: yes; the speed of a local pair: no (no cache or memory latency)",
     "parts": [("numa2", "numa-pair", None, lambda c: _placement(c, [BASELINE, OURS], "pair_same_node",
                                                                   "pair on one node"))]},
    {"seed": "000", "what": "netperf and hackbench at low utilisation (Gorman 2019)",
     "thread": "the wake-up path's cost and idle CPUs left idle decide it",
     "tcg": "the cost of decisions and of idle CPUs, magnified by emulation; not cache speed, which the memory "
            "model's local accesses and miss time stand in for (wakelat, a slowed guest)",
     "parts": [("numa2", "netperf-rr", None, lambda c: "; ".join(_speed(c, OURS, BASELINE, ("transactions",)))),
               ("numa2", "hackbench", None, lambda c: "; ".join(_speed(c, OURS, BASELINE, ("time",)))),
               ("numa2", "wakelat", None, lambda c: _memory(c, OURS, BASELINE), True)]},
    {"seed": "001", "what": "hackbench from stealing at dispatch (Sistare 2018)", "thread": "up to +88% at 2 groups",
     "tcg": "the time idle CPUs stay idle while tasks wait: yes; the speed it buys: no. 32 vCPUs share the host's "
            "2 cores, so waking one more vCPU to run a stolen task adds no throughput, and a steal takes another "
            "CPU's queue lock, whose holder the host may have descheduled (the cost tables: ops.dispatch per call "
            "with and without stealing)",
     "parts": [("xeon-1n32", "hackbench", f"{OURS}:--no-steal",
                lambda c: "; ".join(x for x in [
                    _placement(c, [OURS, f"{OURS}:--no-steal"], "iwq_node_ms_per_s",
                               "idle while queued (ms/s)"),
                    "time, steal vs `--no-steal`: " + "; ".join(_speed(c, OURS, f"{OURS}:--no-steal",
                                                                       ("time",)))] if x))]},
    {"seed": "002", "what": "hackbench threads over pipes, cache-aware wake-ups (Chen/Chen/Zijlstra 2025)",
     "thread": "+10-35% at light load, losses past ~75% utilisation",
     "tcg": "the share of time in the preferred LLC: yes; the speed it buys: no (no modeled cache)",
     "parts": [(m, "cache-hackbench", f"{OURS}:--no-cache-aware",
                lambda c: "; ".join(x for x in [
                    _placement(c, [OURS, f"{OURS}:--no-cache-aware"], "process_top_llc", "top LLC per process"),
                    "time vs `--no-cache-aware`: " + "; ".join(_speed(c, OURS, f"{OURS}:--no-cache-aware",
                                                                       ("time",)))] if x))
               for m in ("spr-1n2llc", "milan-2n8llc")]},
    {"seed": "003", "what": "two SPECjbb-like instances on 4 nodes (van Riel 2014)",
     "thread": "private memory local, shared memory spread, few migrations",
     "tcg": "placement and page locality: yes (memspan's own counts); memory speed: no",
     "parts": [("numaq4", "memory-span", None, lambda c: "; ".join(x for x in [
         _placement(c, [BASELINE, OURS], "cross_node_per_s", "cross-node moves/s"),
         "vs eevdf: " + "; ".join(_speed(c, OURS, BASELINE, ("private-local-min", "shared-imbalance",
                                                             "migrated-mb")))] if x))]},
    {"seed": "004", "what": "per-job node residency and exec placement on 4 small nodes (Bligh/Hohnbaum 2003)",
     "thread": "each job stays on its node; exec places it on the least loaded node",
     "tcg": "residency: yes; the memory-bound speed it buys: no",
     "parts": [("numaq4", "numa-residency", None, lambda c: "; ".join(x for x in [
         _placement(c, [BASELINE, OURS], "home_node", "home node"),
         "vs eevdf: " + "; ".join(_speed(c, OURS, BASELINE, ("job-mean", "job-longest")))] if x))]},
]


def seeds_section(cells: list[dict]) -> list[str]:
    lines = ["## The seeds, reproduced", "",
             "One row per seed headline: the thread's own figure beside ours from the store, on the lab machine of "
             "that shape (differences in percent, positive when `scx_locality` is better; `*` p < "
             f"{ALPHA}). What TCG can show is placement, not cache or memory speed.", "",
             "| seed | headline | the thread | ours | what TCG can and cannot show | cell |",
             "|---|---|---|---|---|---|"]
    for s in SEEDS:
        ours, where = [], []
        for part in s["parts"]:
            machine, bname, need, fn = part[:4]
            mm = len(part) > 4 and part[4]  # a part from a memory-model cell
            c = _pick(cells, machine, bname, need, mm)
            if c is None:
                ours.append(f"{machine} {titled(bname, mm)}: not yet run")
                continue
            try:
                txt = fn(c)
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                txt = None
            ours.append(f"{machine}: {txt}" if txt else f"{machine} {bname}: no figure in the cell")
            where.append(_cell_note(c))
        lines.append(f"| {s['seed']} | {s['what']} | {s['thread']} | " + "<br>".join(ours) +
                     f" | {s['tcg']} | " + ("<br>".join(where) or "not yet run") + " |")
    return lines + [""]


def _labels(cells: list[dict], order: list[str]) -> list[str]:
    seen = list(dict.fromkeys(s for c in cells for s in c["key"]["scheds"]))
    return [s for s in order if s in seen] + [s for s in seen if s not in order]


def _row_cell(row: dict, s: str) -> str:
    return _cell(row, s) if s in row["cells"] else ""


def machine_section(mname: str, mcells: list[dict], labels: list[str]) -> tuple[list[str], dict]:
    first = mcells[0]
    hw = first.get("host", {}).get("kind") == "hardware"
    summary = first["host"].get("summary") if hw else first["results"].get("machine_summary", mname)
    lines = [f"## {mname}", "", f"`{summary}`" + (" (real hardware: `bin/lab bench --host`)" if hw else ""), "",
             "| benchmark | schedulers | runs | date (UTC) | scx_locality | state | ran on |",
             "|---|---|---:|---|---|---|---|"]
    mdata = {"summary": summary, "figures": [], "placement": [], "cost": {}}
    for c in mcells:
        st = c.get("stamp") or {}
        state = (f"stale: {c['_stale']}, {store.fmt_age(c['_age'])} old" if c.get("_stale")
                 else "current" if st.get("behaviour") else "not stamped")
        h = c.get("host") or {}
        ran = (f"{h.get('cpu_model') or 'unknown CPU'}, {h.get('cpus')} CPUs, {h.get('nodes')} nodes, "
               f"{h.get('llcs')} LLCs, kernel {h.get('kernel') or '?'}") if hw else \
            f"lab (QEMU TCG) on {h.get('cpu_model') or 'unknown CPU'}, {h.get('cores')} cores"
        extra = [s for s in c["key"]["scheds"] if ":" in s]
        lines.append(f"| {_title(c)} | {len(c['key']['scheds'])}"
                     + (f" (with {', '.join(f'`{s}`' for s in extra)})" if extra else "")
                     + f" | {c['runs']} | {c['date']} | {st.get('commit') or 'n/a'} | {state} | {ran} |")
    status: dict[str, list[str]] = {}
    for c in mcells:
        for stt in report.sched_status(c["results"]):
            if stt["status"] != "ok":
                status.setdefault(stt["label"], []).append(f"{c['key']['spec']}: {stt['status']}: {stt['reason']}")
    if status:
        lines += ["", "Schedulers that did not run everywhere:", ""]
        for s, why in status.items():
            lines.append(f"- `{s}`: " + "; ".join(w.replace("|", "/") for w in why[:4])
                         + (f" (and {len(why) - 4} more)" if len(why) > 4 else ""))
    lines += ["", "### Speed", "",
              "| benchmark | case | figure | " + " | ".join(f"`{s}`" for s in labels) +
              " | scx_locality vs best peer |",
              "|---|---|---|" + "---:|" * len(labels) + "---|"]
    mem_rows = []
    plain = [c for c in mcells if not c["key"].get("memory_model")]
    for c in mcells:
        rows = figure_rows(c["results"], c["key"]["scheds"])
        for r in rows:
            if r["figure"] in MEMORY_FIGURES:
                if r["figure"] in MEMORY_SHOWN:
                    mem_rows.append((_title(c), r))
                continue
            if c["key"].get("memory_model"):
                continue  # a slowed guest's speed: not comparable with the rows of the plain cells
            mdata["figures"].append(r)
            unit = f" ({r['unit']}, {'higher' if r['higher_is_better'] else 'lower'} is better)"
            lines.append(f"| {r['spec']} | {r['case']} | {r['figure']}{unit} | " +
                         " | ".join(_row_cell(r, s) for s in labels) + f" | {_vs_peer(r)} |")
    lines += memory_table(mem_rows, labels)
    lines += ["", "### Placement", "",
              "| benchmark | measure | " + " | ".join(f"`{s}`" for s in labels) + " |",
              "|---|---|" + "---:|" * len(labels)]
    for c in plain:
        for pr in placement_rows(c["results"], c["key"]["scheds"]):
            mdata["placement"].append(pr)
            shown = [m for m in PLACEMENT_MEASURES if (m[1] != "pair_same_node" or pr["has_pair"])
                     and (m[1] != "process_top_llc" or pr["has_llc"])]
            for name, key, f in shown:
                lines.append(f"| {pr['spec']} | {name} | " + " | ".join(
                    f(pr["cells"][s][key]) if s in pr["cells"] else "" for s in labels) + " |")
    cost = cost_rows([c["results"] for c in plain], labels)
    mdata["cost"] = cost
    lines += cost_section(cost, labels, "cells")
    return lines + [""], mdata


def _title(cell: dict) -> str:
    return titled(cell["key"]["spec"], bool(cell["key"].get("memory_model")))


def memory_table(rows: list[tuple[str, dict]], labels: list[str]) -> list[str]:
    """The "Memory (the memory model)" table of a machine: (benchmark title, figure row) of its memory-model runs;
    [] without any. Only these figures of such a run are shown: its guest ran 6-11x slower."""
    if not rows:
        return []
    lines = ["", "### Memory (the memory model)", "",
             "From runs with the lab's memory model (`memory_model` in lab/matrix.toml, `bin/lab bench "
             "--memory-model`): every guest data access counted and charged a modeled latency. *mem-local-pct* is "
             "the share of the accesses that went to the accessing CPU's own node, *miss-s* the modeled time of "
             "the LLC misses (CPU seconds, lower is better). Read them beside the wall times of the same benchmark "
             "above, both halves of the trade; the model slows the guest 6-11x, so those runs' own speed figures "
             "are left out (docs/memory-model.md).", "",
             "| benchmark | case | figure | " + " | ".join(f"`{s}`" for s in labels) + " |",
             "|---|---|---|" + "---:|" * len(labels)]
    for title, r in rows:
        lines.append(f"| {title} | {r['case']} | {r['figure']} ({r['unit']}) | " +
                     " | ".join(_row_cell(r, s) for s in labels) + " |")
    return lines


def cost_section(cost: dict, labels: list[str], pooled: str) -> list[str]:
    """A machine's "Cost of the decisions" table (cost_rows pooled over its @pooled and runs); [] without BPF costs."""
    if not cost:
        return []
    cols = [s for s in labels if s in cost]
    return ["", "### Cost of the decisions", "",
            "BPF run time per call of each callback (the kernel's own per-program statistics, "
            f"kernel.bpf_stats_enabled = 1, read before and after each case), pooled over this machine's {pooled} "
            "and runs; the range is the lowest and highest of one benchmark's run; calls per second of case run "
            "time; the last row is all callbacks' time as a share of the CPUs. EEVDF runs no BPF. Guest times "
            "under TCG: compare columns, not with native figures.", "",
            report.bpf_cost_table(cols, cost)]


def cost_growth(machines_cost: list[tuple[str, int, dict]], labels: list[str]) -> list[str]:
    """ns per call of every callback, every scheduler, per machine by its CPUs, with the peers' median."""
    rows = [(m, n, cost) for m, n, cost in machines_cost if cost]
    if not rows:
        return []
    cols = [s for s in labels if any(s in cost for _m, _n, cost in rows)]
    peers_ = [s for s in cols if _is_peer(s)]
    cbs = {cb for _m, _n, cost in rows for s in cost for cb in cost[s]["cb"]}
    order = [cb for cb in report.BPF_COST_MAIN if cb in cbs] + sorted(cbs - set(report.BPF_COST_MAIN))
    lines = ["## Cost per decision", "",
             "BPF ns per call of every callback, per machine (its CPUs), every scheduler: how the cost of a "
             "decision grows with the machine (guest time under TCG: compare columns). *median peer* is the "
             "median over the published schedulers that have the callback. The last rows, *all callbacks*, are "
             "every callback's time together as a share of the machine's CPUs while the cases ran: schedulers "
             "split a decision differently between callbacks (one does at ops.enqueue what another does at "
             "ops.dispatch), so the per-call rows compare callbacks and these the whole.", "",
             "| callback | machine (CPUs) | " + " | ".join(f"`{s}`" for s in cols) + " | median peer |",
             "|---|---|" + "---:|" * (len(cols) + 1)]

    def ns(cost, s, cb):
        a = cost.get(s, {}).get("cb", {}).get(cb)
        return a["ns"] / a["calls"] if a and a["calls"] else None
    for cb in order:
        for m, n, cost in sorted(rows, key=lambda x: (x[1], x[0])):
            vals = {s: ns(cost, s, cb) for s in cols}
            if not any(v is not None for v in vals.values()):
                continue
            pv = [vals[s] for s in peers_ if vals[s] is not None]
            med = statistics.median(pv) if pv else None
            lines.append(f"| {cb} | {m} ({n}) | " + " | ".join("" if v is None else f"{v:,.0f}"
                                                                for v in vals.values())
                         + f" | {'' if med is None else f'{med:,.0f}'} |")
    for m, n, cost in sorted(rows, key=lambda x: (x[1], x[0])):
        vals = {s: cost.get(s, {}).get("cpu_share") for s in cols}
        if not any(v is not None for v in vals.values()):
            continue
        pv = [vals[s] for s in peers_ if vals[s] is not None]
        med = statistics.median(pv) if pv else None
        lines.append(f"| all callbacks (% of the CPUs) | {m} ({n}) | " +
                     " | ".join("" if v is None else f"{v:.2f}%" for v in vals.values()) +
                     f" | {'' if med is None else f'{med:.2f}%'} |")
    return lines + [""]


def store_page(cells: list[dict], current: dict, order_machines: list[str], order_scheds: list[str],
               now: dt.datetime | None = None) -> str:
    """docs/results.md from the store's cells: nothing else is read (current: the build's stamp, to mark stale
    cells; the orders: the matrix file's machines and schedulers, for the layout only)."""
    for c in cells:
        c["_stale"] = store.staleness(c, current)
        c["_age"] = store.age(c, now)
    by_machine: dict[str, list[dict]] = {}
    for c in cells:
        by_machine.setdefault(c["key"]["machine"], []).append(c)
    lab = [m for m in order_machines if m in by_machine] + sorted(
        m for m in by_machine if m not in order_machines and not m.startswith("hw-"))
    hw = sorted(m for m in by_machine if m.startswith("hw-"))
    labels_all = _labels(cells, order_scheds)
    stale = [c for c in cells if c["_stale"]]
    dates = sorted(c["date"] for c in cells)
    lines = ["# Results: scx_locality against EEVDF and the published sched_ext schedulers", "",
             f"- generated by `bin/lab matrix --page` from the results store (`docs/results-store/`, one file per "
             f"machine x benchmark x scheduler set; `bin/lab matrix --budget` fills it): {len(cells)} cell(s) on "
             f"{len(by_machine)} machine(s)" + (f", run {dates[0][:10]} to {dates[-1][:10]}" if dates else ""),
             f"- the current scx_locality build: commit {current.get('commit') or 'unknown'}, behaviour "
             f"{current.get('behaviour') or 'unknown (no build found: no cell is marked stale)'} (a hash of its "
             "BPF object and default flags); "
             + (f"{len(stale)} cell(s) ran another behaviour and are marked **stale** with their age"
                if stale else "every cell ran it"),
             f"- schedulers: {', '.join(f'`{s}`' for s in labels_all)}; baseline `{BASELINE}`",
             f"- reading a cell: mean over runs (Hmean for rates, Amean for times, as mmtests), `±` its coefficient "
             f"of variation, then the difference to `{BASELINE}` in percent, positive when better; `*` marks "
             f"p < {ALPHA} in mmtests' two-sample t-test (lab/stats.py); the best scheduler of a row is in bold. "
             "The last column compares scx_locality with the best peer of the row (the best published sched_ext "
             "scheduler) with the same test.",
             "- real hardware: a folder of `bin/lab bench --host` joins the store with `bin/lab matrix --add FOLDER` "
             "(its machine named by its CPU model, CPUs, nodes and LLCs); a store of another host with "
             "`bin/lab matrix --merge STORE`", ""]
    for p in TCG_NOTE + [PLACEMENT_NOTE]:
        lines += [p, ""]
    lines += seeds_section(cells)
    data = {"machines": {}}
    body: list[str] = []
    mcost = []
    for m in lab + hw:
        mcells = sorted(by_machine[m], key=lambda c: c["key"]["spec"])
        labels = _labels(mcells, order_scheds)
        sec, mdata = machine_section(m, mcells, labels)
        data["machines"][m] = mdata
        mcost.append((m, mcells[0]["results"].get("nr_cpus") or 0, mdata["cost"]))
        body += sec
    lines += overview(data, labels_all)
    lines += cost_growth(mcost, labels_all)
    return "\n".join(lines + body) + "\n"


def folder_estimate(machine: str | None, spec: str, scheds: list[str], runs: int) -> float | None:
    """The matrix's estimate of a bench folder's runs (--add), for the store's calibration; None off the lab."""
    try:
        return unit_estimate(Unit(machine or "", spec), bench.parse_sched_list(",".join(scheds), ablate=False)) * runs
    except Exception:  # a machine or benchmark this lab does not know (a --host folder): no estimate
        return None


def write_store_page(results_store: Path, page: Path, plan: Plan | None = None,
                     now: dt.datetime | None = None) -> Path:
    """The page of the store (store_page), written atomically; plan (default the whole matrix file) orders it."""
    cells = store.read_cells(results_store)
    full = load_plan()
    order_m = list(dict.fromkeys((plan.machines() if plan else []) + full.machines()))
    order_s = list(dict.fromkeys((plan.all_scheds() if plan else []) + full.all_scheds()))
    text = store_page(cells, store.current_stamp(), order_m, order_s, now)
    page.parent.mkdir(parents=True, exist_ok=True)
    tmp = page.with_name("." + page.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(page)
    return page


# ---------------------------------------------------------------------------------------------------------
# The command


def main(args) -> int:
    if args.report_only:
        out = Path(args.report_only)
        if not (out / STATE).exists():
            raise MatrixError(f"{out} holds no matrix ({STATE} is missing)")
        page = out / "results.md"
        write_page(out, page)
        print(f"matrix: page {page}")
        return run.EXIT_OK
    st = Path(args.store) if args.store else store.STORE_DIR
    if args.core and args.quick:
        raise MatrixError("--core and --quick name two parts of the matrix file; give one")
    section = "core" if args.core else ""
    plan = load_plan(Path(args.file) if args.file else MATRIX_FILE, quick=args.quick, section=section,
                     only_machines=[x for x in (args.machine or "").split(",") if x] or None,
                     only_benches=[x for x in (args.bench or "").split(",") if x] or None,
                     runs=args.runs, scheds=[x for x in (args.sched or "").split(",") if x] or None)
    if args.shard:
        i, n = parse_shard(args.shard)
        plan = shard(plan, i, n)
        if not plan.units:
            print(f"matrix: shard {i}/{n} has no cell (the plan has fewer cells than shards)")
            return run.EXIT_OK
    budget_s = parse_budget(args.budget) if args.budget else None
    if args.list:
        total = 0.0
        per_machine: dict[str, float] = {}
        for u in plan.units:
            specs = bench.parse_sched_list(",".join(plan.scheds_of(u)), ablate=False)
            e = unit_estimate(u, specs)
            total += e * plan.runs_of(u)
            per_machine[u.machine] = per_machine.get(u.machine, 0.0) + e * plan.runs_of(u)
            print(f"{u.machine:14s} {u.title:44s} ~{bench.fmt_dur(e)} per run x {plan.runs_of(u)} "
                  f"x {len(plan.scheds_of(u))} schedulers = {bench.fmt_dur(e * plan.runs_of(u))}")
        print("per machine: " + ", ".join(f"{m} {bench.fmt_dur(t)}" for m, t in per_machine.items()))
        print(f"{len(plan.units)} cells: about {bench.fmt_dur(total)} of lab time (the matrix's estimates; under "
              "TCG often 1.5-2x more)")
        if budget_s is not None or args.shard or st.is_dir():
            print_budget(plan, st, budget_s)
        return run.EXIT_OK
    cmdline = "bin/lab " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0] else ""
    code = run.EXIT_OK
    for folder in args.add or []:
        for p in store.add_folder(st, Path(folder), estimate_s=folder_estimate):
            print(f"matrix: stored {p}")
    if args.merge:
        copied, kept = store.merge(st, Path(args.merge))
        print(f"matrix: merged {args.merge} into {st}: {copied} cell(s) copied, {kept} kept (as new or newer)")
    out = Path(args.out) if args.out else paths.runs_dir() / (
        "matrix-quick" if args.quick else "matrix-core" if args.core else "matrix")
    if budget_s is not None:
        code = run_budget(plan, out, st, budget_s, build=not args.no_build, command_line=cmdline)
    elif args.page is None and not args.add and not args.merge:
        code = run_matrix(plan, out, out / "results.md", build=not args.no_build, command_line=cmdline,
                          resume=args.resume, results_store=None if args.no_store else st)
    if args.page is not None:
        page = write_store_page(st, Path(args.page) if args.page else PAGE, plan)
        print(f"matrix: page {page} (from {st})")
    return code
