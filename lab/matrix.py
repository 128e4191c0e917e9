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

The page (write_page): per machine, one table of every figure of every benchmark case (rows) by scheduler
(columns): the mean over runs (Hmean for rates, Amean for times, as mmtests), its coefficient of variation, the
difference against EEVDF with mmtests' t-test at p < 0.05 (stats.significance), the best scheduler of the row in
bold, and scx_locality against the best peer of the row; a placement table (pair on one node, home node and
LLC, cross-node moves per second); the cost of the schedulers' decisions (BPF run time per callback); and a
heatmap of every scheduler's difference to EEVDF. The same figures go to results.json beside the page.
"""
from __future__ import annotations

import fcntl
import json
import math
import re
import shlex
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import bench, benchfile, machines, paths, report, run, stats

MATRIX_FILE = paths.REPO / "lab" / "matrix.toml"
ALPHA = 0.05  # the page's significance level (the bench reports keep mmtests' 0.10)
BASELINE = "eevdf"
OURS = "scx_locality"
STATE = "matrix.json"


class MatrixError(run.UsageError):
    pass


@dataclass(frozen=True)
class Unit:
    """One bench folder of the matrix: one benchmark spec on one machine."""
    machine: str
    spec: str

    @property
    def dirname(self) -> str:
        # hackbench:mode=thread:groups=1/4 -> hackbench_mode=thread_groups=1-4
        return re.sub(r"[^A-Za-z0-9=._-]", "-", self.spec.replace(":", "_"))

    def folder(self, out: Path) -> Path:
        return out / self.machine / self.dirname


@dataclass
class Plan:
    scheds: list[str]
    runs: int
    units: list[Unit] = field(default_factory=list)
    quick: bool = False

    def machines(self) -> list[str]:
        return list(dict.fromkeys(u.machine for u in self.units))


def _list_of_str(path: Path, where: str, v) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise MatrixError(f"{path}: {where} must be a non-empty list of strings")
    return list(v)


def load_plan(path: Path = MATRIX_FILE, quick: bool = False, only_machines: list[str] | None = None,
              only_benches: list[str] | None = None, runs: int | None = None,
              scheds: list[str] | None = None) -> Plan:
    """The plan of the matrix file, or of its [quick] table, narrowed by the command line's filters."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MatrixError(f"{path}: cannot read the matrix: {e}") from None
    part = data
    if quick:
        if "quick" not in data:
            raise MatrixError(f"{path} has no [quick] table")
        part = data["quick"]
    table = part.get("machines")
    if not isinstance(table, dict) or not table:
        raise MatrixError(f"{path}: {'quick.' if quick else ''}machines is missing or empty")
    sched_list = scheds or _list_of_str(path, "schedulers", part.get("schedulers", data.get("schedulers")))
    if sched_list[0] != BASELINE:
        raise MatrixError(f"the first scheduler must be {BASELINE} (the page compares against it), "
                          f"not {sched_list[0]}")
    n = runs if runs is not None else part.get("runs", data.get("runs", 5))
    if not isinstance(n, int) or not 1 <= n <= 100:
        raise MatrixError(f"runs {n!r} is out of range 1..100")
    bench.parse_sched_list(",".join(sched_list), ablate=False)  # unknown or repeated schedulers fail here
    units = []
    for mname, mdef in table.items():
        if only_machines and mname not in only_machines:
            continue
        if not isinstance(mdef, dict):
            raise MatrixError(f"{path}: machines.{mname} must be a table with 'benchmarks'")
        machines.load(mname)  # an unknown machine fails here, before anything runs
        for spec in _list_of_str(path, f"machines.{mname}.benchmarks", mdef.get("benchmarks")):
            if only_benches and benchfile.parse_bench_spec(spec)[0] not in only_benches:
                continue
            benchfile.load_benchmark(spec)  # a bad spec fails here too
            u = Unit(mname, spec)
            if any(x.machine == mname and x.dirname == u.dirname for x in units):
                raise MatrixError(f"{path}: machines.{mname}: {spec!r} is given twice (or names the same folder "
                                  f"as another spec)")
            units.append(u)
    if only_machines:
        unknown = sorted(set(only_machines) - set(table))
        if unknown:
            raise MatrixError(f"machine(s) {', '.join(unknown)} not in the {'quick ' if quick else ''}matrix; "
                              f"it has {', '.join(table)}")
    if only_benches:
        named = {benchfile.parse_bench_spec(u.spec)[0] for u in units}
        unknown = sorted(set(only_benches) - named)
        if unknown:
            raise MatrixError(f"benchmark(s) {', '.join(unknown)} not in the {'quick ' if quick else ''}matrix"
                              + (f" of {', '.join(only_machines)}" if only_machines else ""))
    if not units:
        raise MatrixError("the filters leave nothing to run")
    return Plan(scheds=sched_list, runs=n, units=units, quick=quick)


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
    return {"scheds": plan.scheds, "runs": plan.runs, "quick": plan.quick,
            "units": [{"machine": u.machine, "spec": u.spec} for u in plan.units]}


def same_plan(a: dict, b: dict) -> bool:
    """Plans that may share a folder: all but the number of runs alike (a resume may ask for more runs)."""
    return {k: v for k, v in a.items() if k != "runs"} == {k: v for k, v in b.items() if k != "runs"}


def run_matrix(plan: Plan, out: Path, page: Path, build: bool, command_line: str, resume: bool,
               stdout=sys.stdout) -> int:
    """Run what the plan still lacks in out, writing the page after every boot; the worst bench exit code."""
    def log(msg):
        print(msg, file=stdout, flush=True)

    out.mkdir(parents=True, exist_ok=True)
    lock = open(out / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise MatrixError(f"another bin/lab matrix is running in {out}") from None
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
    specs = bench.parse_sched_list(",".join(plan.scheds), ablate=False)
    bench.build_workloads(log)
    failed = bench.prepare_schedulers(specs, build, log)
    for label, reason in failed.items():
        log(f"matrix: {label} cannot run, its columns will say so: {reason}")
    runnable = [s for s in specs if s.label not in failed]
    est = {u: unit_estimate(u, runnable) for u in plan.units}
    todo = [(r, u) for r in range(1, plan.runs + 1) for u in plan.units if runs_done(out, u) < r]
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
                f"run {r}/{plan.runs} of {u.machine} {u.spec}")
            b0 = time.monotonic()
            results = bench.run_bench(m, specs, [b], r, folder, build=False, command_line=command_line,
                                      stdout=stdout, resume=old, prepared=failed, runs_total=plan.runs)
            report.write_report(folder)
            state["elapsed_s"] += time.monotonic() - b0
            b0 = None
            state["boots"] += 1
            save_state(out, state)
            done_est += est[u]
            code = bench.exit_code(results)
            if code != run.EXIT_OK:
                log(f"matrix: {u.machine} {u.spec} run {r}: exit {code} (see {folder}/report.md); going on")
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
    "crossed), not as speed: a task on a remote node runs as fast as on its own. Speed figures show the cost of "
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


def write_page(out: Path, page: Path) -> Path:
    """results.md at page, results.json and the PNGs in the folder beside it (page without .md)."""
    from . import plots  # matplotlib: only when a page is written

    state = load_state(out)
    plan = state.get("plan") or {}
    labels = plan.get("scheds") or []
    assets = page.with_suffix("")
    assets.mkdir(parents=True, exist_ok=True)
    units = [Unit(u["machine"], u["spec"]) for u in plan.get("units", [])]
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
    for p in TCG_NOTE:
        lines += [p, ""]
    head = lines
    lines = []
    for mname in machines_order:
        folders = []
        for u in units:
            if u.machine != mname:
                continue
            p = u.folder(out) / "results.json"
            if p.exists():
                folders.append((u, json.loads(p.read_text())))
        if not folders:
            continue
        mdata = {"summary": folders[0][1].get("machine_summary"), "figures": [], "placement": [], "cost": {},
                 "status": {}}
        lines += [f"## {mname}", "", f"`{folders[0][1].get('machine_summary', mname)}`", ""]
        for u, res in folders:
            for st in report.sched_status(res):
                if st["status"] != "ok":
                    mdata["status"].setdefault(st["label"], []).append(f"{u.spec}: {st['status']}: {st['reason']}")
        if mdata["status"]:
            lines += ["Schedulers that did not run everywhere:", ""]
            for s, why in mdata["status"].items():
                lines += [f"- `{s}`: " + "; ".join(w.replace("|", "/") for w in why[:4])
                          + (f" (and {len(why) - 4} more)" if len(why) > 4 else "")]
            lines.append("")
        lines += ["### Speed", "",
                  "| benchmark | case | figure | " + " | ".join(f"`{s}`" for s in labels) +
                  " | scx_locality vs best peer |",
                  "|---|---|---|" + "---:|" * len(labels) + "---|"]
        all_rows = []
        for u, res in folders:
            rows = figure_rows(res, labels)
            all_rows += rows
            for r in rows:
                unit = f" ({r['unit']}, {'higher' if r['higher_is_better'] else 'lower'} is better)"
                lines.append(f"| {r['spec']} | {r['case']} | {r['figure']}{unit} | " +
                             " | ".join(_cell(r, s) for s in labels) + f" | {_vs_peer(r)} |")
        mdata["figures"] = all_rows
        n_runs = sorted({c["n"] for r in all_rows for c in r["cells"].values() if c["n"]})
        lines += ["", f"Runs per cell: {', '.join(map(str, n_runs)) or 'none'}"
                  + ("; n/a where a scheduler has no value (see above)." if any(
                      not c["n"] for r in all_rows for c in r["cells"].values()) else "."), ""]
        png = plots.scheduler_heatmap(all_rows, labels, f"{mname}: percent better than {BASELINE}",
                                      assets / f"{mname}.png", ALPHA)
        if png:
            lines += [f"![{mname}: every scheduler against {BASELINE}]({rel}/{png.name})", ""]
        lines += ["### Placement", "",
                  "Where the benchmark's tasks ran, from the sampler (every 100 ms, the same for every scheduler): "
                  "*pair on one node* is the lowest over the benchmark's cases of the share of samples with its "
                  "busiest tasks on one node; *home node / LLC* the share of samples on the node / LLC each task "
                  "was seen on most; *cross-node moves/s* a task's node changing between two samples (a lower "
                  "bound), per second of run time; *idle while queued* the sampler's bound (per 100 ms, per node: "
                  "the smaller of the node's idle CPU time and its tasks' run-queue waits; it includes the time an "
                  "idle CPU takes to start a task woken onto it), in ms per second of run time; *top LLC* a "
                  "process's share of its running time in one LLC.", "",
                  "| benchmark | measure | " + " | ".join(f"`{s}`" for s in labels) + " |",
                  "|---|---|" + "---:|" * len(labels)]
        for u, res in folders:
            for pr in placement_rows(res, labels):
                mdata["placement"].append(pr)
                measures = [("home node", "home_node", _fmt_pct), ("home LLC", "home_llc", _fmt_pct),
                            ("cross-node moves/s", "cross_node_per_s", lambda v: _fmt(v)),
                            ("idle while queued, node (ms/s)", "iwq_node_ms_per_s", lambda v: _fmt(v))]
                if pr["has_pair"]:
                    measures.insert(0, ("pair on one node", "pair_same_node", _fmt_pct))
                if pr["has_llc"]:
                    measures.append(("top LLC per process", "process_top_llc", _fmt_pct))
                for name, key, f in measures:
                    lines.append(f"| {pr['spec']} | {name} | " +
                                 " | ".join(f(pr["cells"][s][key]) for s in labels) + " |")
        cost = cost_rows([res for _u, res in folders], labels)
        mdata["cost"] = cost
        if cost:
            cols = [s for s in labels if s in cost]
            lines += ["", "### Cost of the decisions", "",
                      "BPF run time per call of each callback (the kernel's own per-program statistics, "
                      "kernel.bpf_stats_enabled = 1, read before and after each case), pooled over this machine's "
                      "benchmarks and runs; the range is the lowest and highest of one benchmark's run; calls per "
                      "second of case run time; the last row is all callbacks' time as a share of the CPUs. EEVDF "
                      "runs no BPF. Guest times under TCG: compare columns, not with native figures.", "",
                      report.bpf_cost_table(cols, cost)]
        lines.append("")
        data["machines"][mname] = mdata
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join(head + overview(data, labels) + lines) + "\n")
    (assets / "results.json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    return page


# ---------------------------------------------------------------------------------------------------------
# The command


def main(args) -> int:
    if args.report_only:
        out = Path(args.report_only)
        if not (out / STATE).exists():
            raise MatrixError(f"{out} holds no matrix ({STATE} is missing)")
        page = Path(args.page) if args.page else out / "results.md"
        write_page(out, page)
        print(f"matrix: page {page}")
        return run.EXIT_OK
    plan = load_plan(Path(args.file) if args.file else MATRIX_FILE, quick=args.quick,
                     only_machines=[x for x in (args.machine or "").split(",") if x] or None,
                     only_benches=[x for x in (args.bench or "").split(",") if x] or None,
                     runs=args.runs, scheds=[x for x in (args.sched or "").split(",") if x] or None)
    if args.list:
        specs = bench.parse_sched_list(",".join(plan.scheds), ablate=False)
        total = 0.0
        for u in plan.units:
            e = unit_estimate(u, specs)
            total += e * plan.runs
            print(f"{u.machine:14s} {u.spec:40s} ~{bench.fmt_dur(e)} per run")
        print(f"{len(plan.units)} benchmark folders x {plan.runs} runs x {len(plan.scheds)} schedulers: "
              f"about {bench.fmt_dur(total)} (estimates; under TCG often 1.5-2x more)")
        return run.EXIT_OK
    out = Path(args.out) if args.out else paths.runs_dir() / ("matrix-quick" if args.quick else "matrix")
    page = Path(args.page) if args.page else out / "results.md"
    cmdline = "bin/lab " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0] else ""
    return run_matrix(plan, out, page, build=not args.no_build, command_line=cmdline, resume=args.resume)
