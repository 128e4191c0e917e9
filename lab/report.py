# SPDX-License-Identifier: GPL-2.0-only
"""The bench report: DIR/results.json -> DIR/report.md (mmtests-style tables, locality, residency) and PNGs.

`bin/lab bench --report-only DIR` rebuilds it from results.json alone.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from . import stats

FIELD = 12  # width of a value
PCT = 11  # width of "( -12.34%)" / "* -12.34%*"
CACHE_SHARE_GOAL = 0.95  # cache-aware scheduling's goal: a process that fits an LLC should run >= 95% of its time in one


def load(out: Path) -> dict:
    return json.loads((Path(out) / "results.json").read_text())


# ---------------------------------------------------------------------------------------------------------
# Collecting values


def sched_status(results: dict) -> list[dict]:
    """Per scheduler: ok / failed / partial, with the reasons (build, start, ejection)."""
    rows = []
    for s in results["scheds"]:
        label = s["label"]
        if s.get("prepare_error"):
            rows.append({"label": label, "status": "failed", "reason": s["prepare_error"]})
            continue
        steps = [st for r in results.get("runs", []) for st in r["steps"] if st["sched"] == label]
        if not steps:
            rows.append({"label": label, "status": "not run", "reason": "no run completed"})
            continue
        start_errors = sorted({st["start_error"] for st in steps if st.get("start_error")})
        ejections = sorted({f"{st['exit_kind']}: {st['exit_reason']}" for st in steps if st.get("ejected")})
        started = sum(1 for st in steps if st.get("started") and not st.get("start_error"))
        reasons = []
        if start_errors:
            reasons.append(f"did not start in {len(steps) - started} of {len(steps)} steps: " + "; ".join(start_errors))
        if ejections:
            reasons.append(f"ejected in {sum(1 for st in steps if st.get('ejected'))} of {len(steps)} steps: "
                           + "; ".join(ejections))
        if started == 0:
            status = "failed"
        elif reasons:
            status = "partial"
        else:
            status = "ok"
        rows.append({"label": label, "status": status, "reason": " / ".join(reasons)})
    return rows


def run_values(run: dict, bench: str, case_id: str, sched: str, figure: str):
    """The valid raw values of one figure of one case under one scheduler in one run, in step order."""
    for st in run["steps"]:
        if st["bench"] != bench or st["sched"] != sched:
            continue
        for c in st["cases"]:
            if c["case"] == case_id and c["status"] == "ok" and c["figures"].get(figure) is not None:
                yield float(c["figures"][figure])


def values(results: dict, bench: str, case_id: str, sched: str, figure: str) -> list[float]:
    """Every valid raw value of one figure of one case under one scheduler, in run order."""
    return [v for r in results.get("runs", []) for v in run_values(r, bench, case_id, sched, figure)]


def paired_values(results: dict, bench: str, case_id: str, base: str, new: str,
                  figure: str) -> list[tuple[float, float]]:
    """(base, new) values of one figure of one case, one pair per run that has both (each scheduler's first
    value in the run)."""
    out = []
    for r in results.get("runs", []):
        b = next(run_values(r, bench, case_id, base, figure), None)
        n = next(run_values(r, bench, case_id, new, figure), None)
        if b is not None and n is not None:
            out.append((b, n))
    return out


def case_list(results: dict, bench: str) -> list[tuple[str, str]]:
    """(case id, label) in the order the benchmark defines them."""
    seen: dict[str, str] = {c["id"]: c["label"] for c in results["benchmarks"].get(bench, {}).get("cases", [])}
    for r in results.get("runs", []):
        for st in r["steps"]:
            if st["bench"] == bench:
                for c in st["cases"]:
                    seen.setdefault(c["case"], c["label"])
    return list(seen.items())


def case_failures(results: dict, bench: str, case_id: str, sched: str) -> list[str]:
    errs = []
    for r in results.get("runs", []):
        for st in r["steps"]:
            if st["bench"] == bench and st["sched"] == sched:
                for c in st["cases"]:
                    if c["case"] == case_id and c["status"] != "ok" and c.get("error"):
                        errs.append(f"run {r['run']}: {c['error']}")
    return errs


# ---------------------------------------------------------------------------------------------------------
# Formatting


def fmt_num(v: float | None) -> str:
    """Two decimals as mmtests prints them; four for values below 1 so small times keep their digits."""
    if v is None:
        return "n/a"
    return f"{v:.4f}" if abs(v) < 1 else f"{v:.2f}"


def fmt_pct(p: float | None, sig: stats.Significance | None, baseline: bool = False) -> str:
    if baseline:
        return f"({0:7.2f}%)"
    if p is None:
        return " " * PCT
    if sig is not None and sig.significant:
        return f"*{p:7.2f}%*"
    return f"({p:7.2f}%)"


def fmt_paired(pr: stats.Paired | None) -> str:
    """x<ratio> and its p, marked *...* when significant; blank without a test."""
    if pr is None:
        return f"{'':>{FIELD}s} {'':{PCT}s}"
    mark = f"*p {pr.p:.3f}*" if pr.significant else f"(p {pr.p:.3f})"
    return f"{f'x{pr.ratio:.3f}':>{FIELD}s} {mark:>{PCT}s}"


def figure_table(results: dict, bench: str, fig: dict, labels: list[str], failed: set[str]) -> tuple[str, list]:
    """An mmtests-style comparison table of one figure (text, fixed width) and its significance findings."""
    kind = fig["mean"]
    mean_name = "Hmean" if kind == "hmean" else "Amean"
    sd_name = "HStddev" if kind == "hmean" else "Stddev"
    cv_name = "HCoeffVar" if kind == "hmean" else "CoeffVar"
    cases = [(cid, lbl) for cid, lbl in case_list(results, bench) if fig.get("cases") is None or lbl in fig["cases"]]
    width = max([len(lbl) for _cid, lbl in cases] + [8])
    stat_w = max(len(mean_name), len(sd_name), len(cv_name), 4) + 1
    col = max([FIELD + 1 + PCT] + [len(lbl) for lbl in labels])
    head = " " * (stat_w + width + 1) + "".join(f"{lbl:>{col + 1}s}" for lbl in labels)
    rows = [head]
    findings = []
    base = labels[0]
    for stat in ("mean", "sd", "cv", "n", "paired"):
        for cid, clabel in cases:
            name = {"mean": mean_name, "sd": sd_name, "cv": cv_name, "n": "Runs", "paired": "Paired"}[stat]
            line = f"{name:<{stat_w}s}{clabel:<{width}s} "
            bvals = values(results, bench, cid, base, fig["name"])
            bmean = stats.mean(bvals, kind)
            for i, s in enumerate(labels):
                vals = values(results, bench, cid, s, fig["name"])
                if s in failed and not vals:
                    cell = f"{'failed':>{FIELD}s} {'':{PCT}s}"
                elif stat == "mean":
                    m = stats.mean(vals, kind)
                    if i == 0:
                        cell = f"{fmt_num(m):>{FIELD}s} {fmt_pct(None, None, baseline=m is not None)}"
                    else:
                        p = stats.pct_better(m, bmean, fig["higher_is_better"])
                        sig = stats.significance(bvals, vals, kind)
                        if sig is not None:
                            findings.append((cid, s, p, sig))
                        cell = f"{fmt_num(m):>{FIELD}s} {fmt_pct(p, sig)}"
                elif stat == "sd":
                    cell = f"{fmt_num(stats.spread(vals, kind)):>{FIELD}s} {'':{PCT}s}"
                elif stat == "paired":
                    cell = fmt_paired(None if i == 0 else
                                      stats.paired(paired_values(results, bench, cid, base, s, fig["name"])))
                elif stat == "cv":
                    cv = stats.coeffvar(vals, kind)
                    cell = f"{f'{cv:.2f}%' if cv is not None else 'n/a':>{FIELD}s} {'':{PCT}s}"
                else:
                    cell = f"{len(vals):>{FIELD}d} {'':{PCT}s}"
                line += " " + cell.rjust(col)
            rows.append(line.rstrip())
    return "\n".join(rows), findings


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def locality_rows(results: dict, bench: str, labels: list[str]) -> list[dict]:
    """Per scheduler: per-run sums over the benchmark's cases, averaged over runs; shares pooled."""
    out = []
    for s in labels:
        per_run = []
        pooled = {"samples": 0, "home_llc_samples": 0, "home_node_samples": 0}
        colo = {"pair_ticks": 0, "same_node": 0, "same_llc": 0}
        colo_moves = []
        iwq_llc, iwq_node, seconds = [], [], []
        busy_ms = elapsed_ms = 0.0
        for r in results.get("runs", []):
            for st in r["steps"]:
                if st["bench"] != bench or st["sched"] != s:
                    continue
                locs = [c["locality"] for c in st["cases"] if c.get("locality")]
                if locs:
                    nm = [x["nr_migrations"] for x in locs if x.get("nr_migrations") is not None]
                    per_run.append({"moves": sum(x["moves"] for x in locs),
                                    "cross_llc": sum(x["cross_llc"] for x in locs),
                                    "cross_node": sum(x["cross_node"] for x in locs),
                                    "nr_migrations": sum(nm) if nm else None})
                    for k in pooled:
                        pooled[k] += sum(x[k] for x in locs)
                    seconds.append(sum(c["elapsed_s"] or 0 for c in st["cases"]))
                    for c in st["cases"]:
                        smp = c.get("sampler") or {}
                        if smp.get("busy_ms") is not None and c.get("elapsed_s"):
                            busy_ms += smp["busy_ms"] + (smp.get("stat_us") or 0) / 1000.0
                            elapsed_ms += 1000.0 * c["elapsed_s"]
                iwq = [c["idle_queued"] for c in st["cases"] if c.get("idle_queued")]
                if iwq:
                    iwq_llc.append(sum(x["llc_ms"] for x in iwq))
                    iwq_node.append(sum(x["node_ms"] for x in iwq))
                cols = [c["colocation"] for c in st["cases"] if c.get("colocation")]
                if cols:
                    for k in colo:
                        colo[k] += sum(x[k] for x in cols)
                    colo_moves.append(sum(x["cross_node_after_start"] for x in cols))
        row = {"sched": s, "runs": len(per_run)}
        for k in ("moves", "cross_llc", "cross_node", "nr_migrations"):
            row[k] = _mean([p[k] for p in per_run])
        row["seconds"] = _mean(seconds)
        row["home_llc"] = 100.0 * pooled["home_llc_samples"] / pooled["samples"] if pooled["samples"] else None
        row["home_node"] = 100.0 * pooled["home_node_samples"] / pooled["samples"] if pooled["samples"] else None
        row["sampler_pct"] = 100.0 * busy_ms / elapsed_ms if elapsed_ms else None
        row["iwq_llc_ms"] = _mean(iwq_llc)
        row["iwq_node_ms"] = _mean(iwq_node)
        row["colo_same_node"] = 100.0 * colo["same_node"] / colo["pair_ticks"] if colo["pair_ticks"] else None
        row["colo_same_llc"] = 100.0 * colo["same_llc"] / colo["pair_ticks"] if colo["pair_ticks"] else None
        row["colo_cross_node_after"] = _mean(colo_moves)
        out.append(row)
    return out


def _n(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def locality_table(rows: list[dict]) -> str:
    """The locality table; with co-location columns when any row has co-location data (locsample -k)."""
    colo = any(r.get("colo_same_node") is not None for r in rows)
    lines = ["| scheduler | runs | seconds | cross-LLC moves | cross-node moves | all moves | se.nr_migrations "
             "| home LLC | home node | idle while queued, LLC / node (ms) | sampler CPU |"
             + (" co-located, node | co-located, LLC | cross-node moves after start |" if colo else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if colo else "")]
    for r in rows:
        iwq = ("n/a" if r["iwq_llc_ms"] is None and r["iwq_node_ms"] is None
               else f"{_n(r['iwq_llc_ms'])} / {_n(r['iwq_node_ms'])}")
        extra = (f" {_n(r.get('colo_same_node'), 2)}% | {_n(r.get('colo_same_llc'), 2)}% | "
                 f"{_n(r.get('colo_cross_node_after'))} |") if colo else ""
        lines.append((f"| {r['sched']} | {r['runs']} | {_n(r['seconds'])} | {_n(r['cross_llc'])} | "
                      f"{_n(r['cross_node'])} | {_n(r['moves'])} | {_n(r['nr_migrations'], 0)} | "
                      f"{_n(r['home_llc'])}% | {_n(r['home_node'])}% | {iwq} | "
                      f"{_n(r.get('sampler_pct'))}% |" + extra).replace("n/a%", "n/a"))
    return "\n".join(lines)


def per_run_field(results: dict, bench: str, case_id: str, sched: str, field: str) -> list:
    """A case's non-empty `field` (colocation, process_llc, ...) under one scheduler, one per run."""
    return [c[field] for r in results.get("runs", []) for st in r["steps"]
            if st["bench"] == bench and st["sched"] == sched
            for c in st["cases"] if c["case"] == case_id and c.get(field)]


def colocation_rows(results: dict, bench: str, labels: list[str]) -> list[dict]:
    """Per case and scheduler: co-location of the case's busiest tasks (locsample -k), pooled over runs
    (shares: summed ticks; moves: mean and largest per run; the lowest per-run share of the node)."""
    out = []
    for cid, clabel in case_list(results, bench):
        for s in labels:
            cols = per_run_field(results, bench, cid, s, "colocation")
            if not cols:
                continue
            tot = {k: sum(x[k] for x in cols) for k in ("pair_ticks", "same_node", "same_llc",
                                                         "pair_ticks_after_start", "same_node_after_start")}
            share = lambda a, b: 100.0 * a / b if b else None  # noqa: E731
            per_run = [share(x["same_node"], x["pair_ticks"]) for x in cols]
            moves = [x["cross_node_after_start"] for x in cols]
            out.append({"case": clabel, "sched": s, "runs": len(cols), "tasks": cols[0]["tasks"],
                        "pair_ticks": tot["pair_ticks"],
                        "same_node": share(tot["same_node"], tot["pair_ticks"]),
                        "same_llc": share(tot["same_llc"], tot["pair_ticks"]),
                        "same_node_min": min((p for p in per_run if p is not None), default=None),
                        "node_share": share(sum(x.get("node_share_sum", 0.0) for x in cols), tot["pair_ticks"])
                        if all("node_share_sum" in x for x in cols) else None,
                        "same_node_after": share(tot["same_node_after_start"], tot["pair_ticks_after_start"]),
                        "own_core_after": share(sum(x["own_core_after_start"] for x in cols),
                                                tot["pair_ticks_after_start"])
                        if all("own_core_after_start" in x for x in cols) else None,
                        "cross_node": _mean([x["cross_node"] for x in cols]),
                        "cross_node_after": _mean(moves), "cross_node_after_max": max(moves),
                        "settle_ms": cols[0].get("settle_ms"),
                        "which": sorted({x["comm"] for c in cols for x in c.get("which", [])})})
    return out


def colocation_table(rows: list[dict]) -> str:
    lines = ["| case | scheduler | runs | tasks | ticks with 2+ seen | all on one node | lowest run | "
             "one node after start | all on one LLC | a core each after start | busiest node's share | "
             "cross-node moves | after start (mean / max) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append((f"| {r['case']} | {r['sched']} | {r['runs']} | {r['tasks']} ({', '.join(r['which'])}) | "
                      f"{r['pair_ticks']} | {_n(r['same_node'], 2)}% | {_n(r['same_node_min'], 2)}% | "
                      f"{_n(r['same_node_after'], 2)}% | {_n(r['same_llc'], 2)}% | "
                      f"{_n(r.get('own_core_after'), 2)}% | {_n(r.get('node_share'), 1)}% | "
                      f"{_n(r['cross_node'])} | "
                      f"{_n(r['cross_node_after'])} / {r['cross_node_after_max']} |").replace("n/a%", "n/a"))
    return "\n".join(lines)


def process_llc_rows(results: dict, bench: str, labels: list[str]) -> list[dict]:
    """Per case and scheduler: where each process of the benchmark ran, by LLC (samples.process_llc), over runs.
    share: running samples in each process's top LLC over all its running samples, pooled over processes and
    runs; lowest: the smallest one process had in one run; fit: processes with share >= CACHE_SHARE_GOAL;
    distinct: per run, how many different top LLCs the processes had (for concurrent instances)."""
    out = []
    for cid, clabel in case_list(results, bench):
        for s in labels:
            per_run = per_run_field(results, bench, cid, s, "process_llc")
            if not per_run:
                continue
            procs = [p for rows in per_run for p in rows]
            running = sum(p["running"] for p in procs)
            top = sum(p["llc_running"][p["top_llc"]] for p in procs)
            distinct = [len({p["top_llc"] for p in rows}) for rows in per_run]
            out.append({"case": clabel, "sched": s, "runs": len(per_run),
                        "procs": _mean([len(rows) for rows in per_run]),
                        "running_per_proc": running / len(procs) if procs else None,
                        "share": 100.0 * top / running if running else None,
                        "lowest": 100.0 * min(p["share"] for p in procs) if procs else None,
                        "fit": sum(p["share"] >= CACHE_SHARE_GOAL for p in procs), "nprocs": len(procs),
                        "distinct": _mean(distinct),
                        "all_distinct": sum(d == len(rows) for d, rows in zip(distinct, per_run))})
    return out


def process_llc_table(rows: list[dict]) -> str:
    lines = ["| case | scheduler | runs | processes | running samples per process | runtime in its top LLC | "
             f"lowest process | processes >= {100 * CACHE_SHARE_GOAL:.0f}% | distinct top LLCs | "
             "runs with one LLC per process |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append((f"| {r['case']} | {r['sched']} | {r['runs']} | {_n(r['procs'])} | "
                      f"{_n(r['running_per_proc'], 0)} | {_n(r['share'], 1)}% | {_n(r['lowest'], 1)}% | "
                      f"{r['fit']}/{r['nprocs']} | {_n(r['distinct'])} | {r['all_distinct']}/{r['runs']} |")
                     .replace("n/a%", "n/a"))
    return "\n".join(lines)


def final_stats_table(results: dict, labels: list[str]) -> str | None:
    """scx_locality's own counters (its final-stats line), per scheduler label, mean over all its steps."""
    per: dict[str, dict[str, list[float]]] = {}
    for r in results.get("runs", []):
        for st in r["steps"]:
            fs = st.get("final_stats")
            if not fs:
                continue
            d = per.setdefault(st["sched"], {})
            for k, v in fs.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    d.setdefault(k, []).append(float(v))
    if not per:
        return None
    cols = [s for s in labels if s in per]
    keys = sorted({k for d in per.values() for k in d})
    lines = ["| counter (mean per step) | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(_n(_mean(per[s].get(k, [])), 1) for s in cols) + " |")
    return "\n".join(lines)


def xnode_rate_table(results: dict, bench: str, labels: list[str]) -> str | None:
    """scx_locality's cross-node moves per second of the benchmark's case run time, by cause (its xnode_*
    counters; migr_cross_node counts every run on another node than the last, whatever moved the task), per
    scheduler label: the step's counters summed over runs, over the cases' summed elapsed time. The counters
    cover the whole step (all tasks, the seconds between cases too), so they are an upper bound for the
    benchmark's own tasks."""
    per: dict[str, dict] = {}
    for r in results.get("runs", []):
        for st in r["steps"]:
            fs = st.get("final_stats")
            if st["bench"] != bench or not fs:
                continue
            secs = sum(c.get("elapsed_s") or 0.0 for c in st["cases"])
            if not secs:
                continue
            agg = per.setdefault(st["sched"], {"secs": 0.0, "n": {}})
            agg["secs"] += secs
            for k, v in fs.items():
                if (k.startswith("xnode_") or k == "migr_cross_node") and isinstance(v, (int, float)):
                    agg["n"][k] = agg["n"].get(k, 0) + v
    cols = [s for s in labels if s in per]
    if not cols:
        return None
    keys = sorted({k for s in cols for k in per[s]["n"]}, key=lambda k: (k == "migr_cross_node", k))
    lines = ["| cross-node moves per second, by cause | " + " | ".join(f"`{s}`" for s in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(_n(per[s]["n"].get(k, 0) / per[s]["secs"], 2) for s in cols) + " |")
    lines.append("| (seconds of cases) | " + " | ".join(_n(per[s]["secs"], 1) for s in cols) + " |")
    return "\n".join(lines)


BPF_COST_MAIN = ("select_cpu", "enqueue", "dispatch", "tick", "running", "stopping", "runnable", "quiescent",
                 "update_idle")


def bpf_cost_rows(results: dict, bench: str, labels: list[str]) -> tuple[list[str], dict]:
    """Per sched_ext scheduler and callback: ns per call pooled over the benchmark's cases and runs, the
    lowest and highest per-run ns per call, calls per second of case run time; and the share of the CPUs the
    scheduler's BPF took. Schedulers without BPF counts (EEVDF) are left out."""
    nr_cpus = sum(len(n) for n in results.get("topology", {}).get("nodes", [])) or None
    per: dict[str, dict] = {}
    for r in results.get("runs", []):
        for st in r["steps"]:
            if st["bench"] != bench:
                continue
            run_tot: dict[str, list[int]] = {}
            secs = 0.0
            for c in st["cases"]:
                if not c.get("bpf_cost"):
                    continue
                secs += c.get("elapsed_s") or 0.0
                for cb, d in c["bpf_cost"].items():
                    t = run_tot.setdefault(cb, [0, 0])
                    t[0] += d["calls"]
                    t[1] += d["ns"]
            if not run_tot:
                continue
            agg = per.setdefault(st["sched"], {"secs": 0.0, "cb": {}})
            agg["secs"] += secs
            for cb, (calls, ns) in run_tot.items():
                a = agg["cb"].setdefault(cb, {"calls": 0, "ns": 0, "per_run": []})
                a["calls"] += calls
                a["ns"] += ns
                a["per_run"].append(ns / calls)
    cols = [s for s in labels if s in per]
    for s in cols:
        tot = sum(a["ns"] for a in per[s]["cb"].values())
        secs = per[s]["secs"]
        per[s]["cpu_share"] = 100.0 * tot / 1e9 / (secs * nr_cpus) if secs and nr_cpus else None
    return cols, per


IRQ_MAIN = ("RES", "CAL", "IWI", "LOC", "TLB")


def interrupt_rows(results: dict, bench: str, labels: list[str]) -> tuple[list[str], dict]:
    """Per scheduler and /proc/interrupts row (IRQ_MAIN): interrupts per second of the benchmark's case run
    time, pooled over cases and runs, and the lowest and highest per-run rate."""
    per: dict[str, dict] = {}
    for r in results.get("runs", []):
        for st in r["steps"]:
            if st["bench"] != bench:
                continue
            counts: dict[str, int] = {}
            secs = 0.0
            for c in st["cases"]:
                if not c.get("interrupts") or not c.get("elapsed_s"):
                    continue
                secs += c["elapsed_s"]
                for row in IRQ_MAIN:
                    counts[row] = counts.get(row, 0) + c["interrupts"].get(row, 0)
            if not secs:
                continue
            agg = per.setdefault(st["sched"], {"secs": 0.0, "rows": {}})
            agg["secs"] += secs
            for row, n in counts.items():
                a = agg["rows"].setdefault(row, {"count": 0, "per_run": []})
                a["count"] += n
                a["per_run"].append(n / secs)
    return [s for s in labels if s in per], per


def interrupt_table(cols: list[str], per: dict) -> str:
    lines = ["| interrupts per second, all CPUs (lowest-highest run) | " + " | ".join(f"`{s}`" for s in cols) +
             " |", "|---|" + "---:|" * len(cols)]
    for row in IRQ_MAIN:
        cells = []
        for s in cols:
            a = per[s]["rows"].get(row)
            cells.append(f"{a['count'] / per[s]['secs']:,.0f} ({min(a['per_run']):,.0f}-{max(a['per_run']):,.0f})"
                         if a else "")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bpf_cost_table(cols: list[str], per: dict) -> str:
    seen = {cb for s in cols for cb in per[s]["cb"]}
    order = [cb for cb in BPF_COST_MAIN if cb in seen] + sorted(seen - set(BPF_COST_MAIN))
    lines = ["| callback: ns per call (lowest-highest run; calls/s) | " + " | ".join(f"`{s}`" for s in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for cb in order:
        cells = []
        for s in cols:
            a = per[s]["cb"].get(cb)
            if not a or not a["calls"]:
                cells.append("")
                continue
            rate = a["calls"] / per[s]["secs"] if per[s]["secs"] else None
            cells.append(f"{a['ns'] / a['calls']:,.0f} ({min(a['per_run']):,.0f}-{max(a['per_run']):,.0f}; "
                         f"{_n(rate, 0)}/s)")
        lines.append(f"| {cb} | " + " | ".join(cells) + " |")
    lines.append("| all callbacks: share of the CPUs | " +
                 " | ".join(f"{_n(per[s]['cpu_share'], 2)}%" for s in cols) + " |")
    return "\n".join(lines)


def residency_section(results: dict, bench: str, labels: list[str]) -> list[str]:
    nr_nodes = len(results["topology"]["nodes"])
    out = []
    for cid, clabel in case_list(results, bench):
        summary = ["| scheduler | runs | jobs | samples on the job's memory node | samples on the job's main node | "
                   "mean job s |", "|---|---:|---:|---:|---:|---:|"]
        tables = []
        for s in labels:
            on_mem = tot = on_main = 0
            nruns, njobs, secs = 0, [], []
            first = None
            for r in results.get("runs", []):
                for st in r["steps"]:
                    if st["bench"] != bench or st["sched"] != s:
                        continue
                    for c in st["cases"]:
                        if c["case"] != cid or not c.get("residency"):
                            continue
                        nruns += 1
                        njobs.append(len(c["residency"]))
                        if first is None:
                            first = (r["run"], c["residency"])
                        for j in c["residency"]:
                            t = sum(j["node_samples"])
                            tot += t
                            on_main += max(j["node_samples"]) if t else 0
                            if j.get("mem_node") is not None and j["mem_node"] < nr_nodes:
                                on_mem += j["node_samples"][j["mem_node"]]
                            if j.get("elapsed_s") is not None:
                                secs.append(j["elapsed_s"])
            if not nruns:
                continue
            mem_pct = 100.0 * on_mem / tot if tot else None
            main_pct = 100.0 * on_main / tot if tot else None
            summary.append(f"| {s} | {nruns} | {_n(_mean(njobs), 0)} | {_n(mem_pct)}% | {_n(main_pct)}% | "
                           f"{_n(_mean(secs), 2)} |".replace("n/a%", "n/a"))
            run_no, rows = first
            t = [f"{s}, run {run_no}: % of each job's samples per node (* = the node holding most of its memory)",
                 "", "| job | " + " | ".join(f"node {n}" for n in range(nr_nodes)) + " | run s |",
                 "|---|" + "---:|" * (nr_nodes + 1)]
            for j in rows:
                tot_j = sum(j["node_samples"]) or 1
                cells = [f"{100.0 * x / tot_j:.0f}{'*' if j.get('mem_node') == n else ''}"
                         for n, x in enumerate(j["node_samples"])]
                t.append(f"| {j['id'] if j['id'] is not None else j['pid']} | " + " | ".join(cells) +
                         f" | {_n(j.get('elapsed_s'), 2)} |")
            tables.append("\n".join(t))
        if len(summary) > 2:
            out += [f"#### {bench} {clabel}: job x node residency", "", "\n".join(summary), ""]
            for t in tables:
                out += [t, ""]
    return out


# ---------------------------------------------------------------------------------------------------------
# The report


SIG_RULE = (
    "A difference is marked significant (`*  x.xx%*` instead of `(  x.xx%)`) by the two-sample t-test that "
    "mmtests' compare used (Compare.pm `_significanceTest`, until mmtests switched to confidence-interval "
    "overlap in late 2024): with each side's mean (Hmean for rates, Amean for times), spread (HStddev / Stddev "
    "as in the table) and number of valid runs n, t = |mean_base - mean_new| / sqrt(sd_base^2/n_base + "
    "sd_new^2/n_new), df = n_base + n_new - 2, two-sided p = 2 * P(T_df > t) (scipy.stats.t.sf), significant "
    "when p < 0.10 (mmtests' default level, 90% confidence). When both spreads are 0 the difference is "
    "significant exactly when the means differ. A side with fewer than 2 valid runs is not tested (no mark).")

METHOD = [
    "- Means: Hmean for rates (higher is better), Amean for times (lower is better). Stddev is the sample "
    "standard deviation (n - 1); HStddev is mmtests' spread around a harmonic mean, "
    "sqrt(sum((1/x - 1/Hmean)^2) * Hmean^4 / n). CoeffVar = 100 * spread / mean.",
    "- Percentages compare each scheduler with the first one (the baseline column) and are positive when "
    "better: 100 * new / base - 100 for rates, 100 - 100 * new / base for times.",
    "- " + SIG_RULE,
    "- Paired: the geometric mean of the per-run ratios scheduler / baseline (boot by boot, so a boot's own "
    "speed cancels) and the p of a one-sample t-test of their logs; marked `*p ...*` when p < 0.10. Under TCG "
    "the speed of a whole boot varies for every scheduler alike: the two-sample test above counts that as "
    "spread, the paired test does not.",
    "- Schedulers are interleaved: one boot per run, every benchmark under every scheduler in turn, the order "
    "rotated from run to run; so each run's schedulers share that boot's noise.",
    "- Host noise: the guest's vCPUs are threads of the host competing for its cores. *Host CPU to other work* "
    "(Runs table) is the host's busy CPU time during the boot (/proc/stat) minus what this run's QEMU and "
    "bin/lab used, as a share of the host's CPU time: other work than the run (another guest, a build). Runs "
    "with much of it are noisier; under TCG a vCPU that waits for a host core still sees its clock advance, "
    "so a starved guest shows long waits that no scheduler caused.",
    "- Locality: workloads/locsample runs each case and reads the last CPU (field 39 of "
    "/proc/<pid>/task/<tid>/stat) of every task of the benchmark every {sample_ms} ms (less often when one "
    "scan would cost more than {budget_pct}% of a CPU: with hundreds of tasks under TCG a scan takes tens of "
    "ms), and se.nr_migrations "
    "from .../sched every {sched_ms} ms (its last value per task; counts every migration, intra-LLC too). A "
    "*move* is a change of last CPU between two samples of a task (a lower bound of migrations: moves and back "
    "between samples are missed); cross-LLC / cross-node moves change LLC / node (the LLCs the machine models). "
    "Counts are summed over a benchmark's cases and averaged over runs. A task's home LLC / node is where it "
    "was seen most; *home LLC/node* is the share of all samples taken there. The harness' own tasks (sh, "
    "sleep, ...) are left out. The sampler runs as SCHED_FIFO priority 1 so it keeps its period on saturated "
    "CPUs; *sampler CPU* is the time its task scans took plus the CPU time of its per-CPU sampler (/proc/stat, "
    "/proc/schedstat), in percent of one CPU over the cases' run time.",
    "- Co-location (benchmarks with `colocation_tasks = N`): locsample also writes which task was on which CPU "
    "at every sample (-k, PREFIX.ticks). Of the tasks the locality table counts, the N found running (state R) "
    "at the most samples form the group (for a communicating pair: the two data tasks, not an idle main "
    "thread or a listening daemon). *Ticks with 2+ seen*: samples at which at least two of them were alive; "
    "*all on one node / LLC*: the share of those at which every one seen had last run on one node / LLC "
    "(pooled over runs; *lowest run* is the smallest per-run share); *after start* leaves out, per task, the "
    "first {settle_ms} ms (unless the benchmark sets colocation_settle_ms) after its first sample (initial "
    "placement and first balancing). A cross-node move is a "
    "change of node between two consecutive samples of a task (a lower bound, as above). The locality table's "
    "co-location columns pool a benchmark's cases; its moves after start are summed over cases, mean over runs.",
    "- Process x LLC residency (benchmarks with `process_llc = true`): per process of the benchmark, the samples "
    "that found one of its threads running (state R) on each LLC, a proxy for its runtime per LLC; its *top LLC* "
    "holds most of them. *Runtime in its top LLC* pools processes and runs; *distinct top LLCs* (mean per run) "
    "says whether concurrent instances took different LLCs.",
    "- Idle while queued, LLC / node: an upper bound on the CPU time that tasks waiting to run could have had on "
    "an idle CPU of the same LLC / node, measured by locsample alike for every scheduler. At every interval "
    "({rq_ms} ms asked, longer when one sample would cost more than 3% of a CPU, locsample -c; {rq_mean_ms} ms "
    "on average in this report) it reads per CPU the idle time I (idle + iowait of /proc/stat: the kernel counts "
    "it in ns while the tick is stopped and by whole ticks otherwise, and shows it in 10 ms units, so one "
    "interval's I can be off by up to 10 ms per CPU) and the time W tasks waited on its run queue before running "
    "(run_delay of /proc/schedstat, ns, kept by the core scheduler for every scheduling class, sched_ext "
    "included, and for every task on the CPU, not only the benchmark's). Per interval and LLC / node, I and W "
    "are summed over its CPUs; the time CPUs there were idle while tasks waited there, counted up to one idle "
    "CPU per waiting task, is at most min(I, W); the column sums that over intervals, LLCs / nodes and the "
    "benchmark's cases (mean over runs). It is a bound from interval sums, not a measured overlap: it cannot see "
    "whether the idle time and the waits fell at the same moments of an interval, so under partial load it comes "
    "close to all the waiting, which includes the time an idle CPU takes to pick up a task woken onto it. Nor "
    "can it see when a wait happened: the kernel charges a wait when it ends (the task runs, or moves to another "
    "CPU's run queue, which is then charged the rest) to the CPU whose run queue it was on, so a wait longer "
    "than the interval is compared with the idle time of the interval it ended in only, and one still under way "
    "when the case ends is not counted. LLC and node are alike on a machine with one LLC per node. "
    "scx_locality's own counter (sampled inside the scheduler: a CPU idle while a task waited in its LLC / node, "
    "over the whole step) is in its counters table.",
    "- BPF cost: workloads/bpfcost reads every struct_ops program's run count and run time (the kernel keeps "
    "them while kernel.bpf_stats_enabled = 1, which the bench sets) before and after each case; the difference, "
    "per callback, pooled over cases and runs, gives ns per call; the range is the lowest and highest run. The "
    "times are the guest's: under TCG they are many times native ones and include moments the host "
    "descheduled the vCPU, so compare schedulers within one report, not with figures from real hardware. "
    "*Share of the CPUs*: all callbacks' run time over the cases' run time times the CPUs.",
    "- Interrupts: /proc/interrupts is read before and after each case; each named row (RES: rescheduling IPIs, "
    "which wake an idle CPU or make a busy one pick again; CAL: function-call IPIs, among them the wake-ups the "
    "kernel queues on the target CPU; IWI: irq-work interrupts, which sched_ext raises on the kicking CPU for "
    "every scx_bpf_kick_cpu(); LOC: local timer ticks; TLB: shootdowns) is summed over the CPUs and divided by "
    "the cases' run time, pooled over cases and runs; the range is the lowest and highest run. They count the "
    "whole guest during the case, not only the benchmark's tasks. Under TCG every interrupt is emulated, and "
    "a halted vCPU woken by one has to be scheduled again by the host.",
    "- Utilisation heatmaps: per-CPU busy share from /proc/stat every {cpustat_ms} ms, CPUs ordered by node, "
    "LLC and core.",
]


def memory_section(results: dict, bench: str, labels: list[str]) -> list[str]:
    """What the memory model adds beyond its four figures (whose tables, with their tests, are above): per case
    and scheduler the share of accesses by SLIT distance, the share in user mode, and wall time beside the
    modeled memory time (means over runs)."""
    mm = results["memory_model"]
    rows = []
    for cid, clabel in case_list(results, bench):
        for s in labels:
            recs = [c["memory"] for r in results.get("runs", []) for st in r["steps"]
                    if st["bench"] == bench and st["sched"] == s for c in st["cases"]
                    if c["case"] == cid and c["status"] == "ok" and c.get("memory")]
            if not recs:
                continue
            dists = sorted({d for rec in recs for d in rec["by_distance_pct"]}, key=int)
            by_d = ", ".join(f"{d}: {_mean([rec['by_distance_pct'].get(d, 0.0) for rec in recs]):.2f}%"
                             for d in dists)
            mdists = sorted({d for rec in recs for d in rec.get("miss_by_distance_pct", {})}, key=int)
            miss_d = ", ".join(f"{d}: {_mean([rec['miss_by_distance_pct'].get(d, 0.0) for rec in recs]):.1f}%"
                               for d in mdists)
            user = _mean([100.0 * rec["user_accesses"] / rec["accesses"] for rec in recs if rec["accesses"]])
            rows.append(f"| {clabel} | `{s}` | {len(recs)} | {by_d} | {miss_d} | {_n(user)}% | "
                        f"{_n(_mean([rec['seconds'] for rec in recs]), 2)} | "
                        f"{_n(_mean([rec.get('mem_s') for rec in recs]), 3)} |")
    if not rows:
        return []
    return [f"### {bench}: the memory model", "",
            f"Every guest data access of the case, kernel and user, counted by the distance from the accessing CPU's "
            f"node to the memory's node, and through the modeled LLC ({mm['llc_kb']} KB, {mm['llc_ways']}-way, one "
            f"per LLC of the machine). Latencies: LLC hit {mm['llc_hit_ns']} ns, local DRAM {mm['dram_local_ns']} ns, "
            f"farthest node {mm['dram_remote_ns']} ns ({mm['source']}). mem-s is the modeled memory time of all CPUs "
            "together, to read beside the case's wall time; it is not added to it. Every access is charged at least an LLC "
            "hit (private caches are not modeled), so mem-s mostly measures the work done; miss-s, the time of the LLC "
            "misses alone, is the part placement moves.", "",
            "| case | scheduler | runs | accesses by distance | LLC misses by distance | user mode | wall s | "
            "mem-s (CPU s) |",
            "|---|---|---:|---|---|---:|---:|---:|"] + rows + [""]


def rq_interval(results: dict) -> dict:
    """The sampler's rq interval: as asked (locsample -q) and its mean over every case measured."""
    asked, span, n = set(), 0, 0
    for r in results.get("runs", []):
        for st in r["steps"]:
            for c in st["cases"]:
                iq = c.get("idle_queued")
                if iq and iq.get("intervals"):
                    span += iq["span_ms"]
                    n += iq["intervals"]
                    asked.add((c.get("sampler") or {}).get("rq_ms"))
    asked.discard(None)
    return {"rq_ms": "/".join(str(x) for x in sorted(asked)) if asked else "n/a",
            "rq_mean_ms": f"{span / n:.1f}" if n else "n/a"}


def extra_flags_line(results: dict) -> str | None:
    """What LOCALITY_SCHED_EXTRA_FLAGS (lab/run.py) appended to every scx_locality of the bench, None if nothing:
    the report then never passes for one of the default flags."""
    flags = results.get("sched_extra_flags") or []
    if not flags:
        return None
    return (f"LOCALITY_SCHED_EXTRA_FLAGS={shlex.join(flags)}: appended to every scx_locality of this bench "
            f"(its rows are not the default flags)")


def write_report(out: Path) -> Path:
    from . import plots

    out = Path(out)
    results = load(out)
    labels = [s["label"] for s in results["scheds"]]
    status = sched_status(results)
    failed = {s["label"] for s in status if s["status"] in ("failed", "not run")}
    smp = {"sample_ms": 100, "sched_ms": 500, "cpustat_ms": 500, "budget_pct": 10, "settle_ms": 1000,
           **results.get("sampler", {}), **rq_interval(results)}
    lines = [f"# Bench report: {results['machine']}", "",
             f"- machine: `{results.get('machine_summary', results['machine'])}`",
             *(["- where: on this machine itself (`bin/lab bench --host`), not in a QEMU guest: a run is one pass "
                "of every step with no boot in between, and times (BPF costs too) are native"]
               if results.get("host") else []),
             f"- schedulers: {', '.join(f'`{x}`' for x in labels)} (baseline: `{labels[0]}`)",
             "- benchmarks: " + ", ".join(f"`{b.get('spec', n)}`" for n, b in results["benchmarks"].items()),
             f"- runs: {len(results.get('runs', []))} of {results.get('runs_requested')} requested; created "
             f"{results.get('created')}",
             f"- command: `{results.get('command', '')}`",
             *([f"- **{extra_flags_line(results)}**"] if extra_flags_line(results) else []), "",
             "## Schedulers", "", "| scheduler | status | reason |", "|---|---|---|"]
    for s in status:
        lines.append(f"| `{s['label']}` | {s['status']} | {s['reason'].replace('|', '/') or ''} |")
    lines.append("")
    pngs = []
    for bname, bdef in results["benchmarks"].items():
        lines += [f"## {bname}", "", bdef.get("description", ""), "",
                  f"Command: `{bdef['command']}`" + (f"; sweep: " + ", ".join(
                      f"{k} = {'/'.join(map(str, v))}" for k, v in bdef['sweep'].items()) if bdef['sweep'] else ""),
                  ""]
        for fig in bdef["figures"]:
            table, _findings = figure_table(results, bname, fig, labels, failed)
            better = "higher is better" if fig["higher_is_better"] else "lower is better"
            lines += [f"### {bname} {fig['name']} ({fig['unit']}; {better}; "
                      f"{'Hmean' if fig['mean'] == 'hmean' else 'Amean'})", "", "```", table, "```", ""]
        fails = []
        for cid, _lbl in case_list(results, bname):
            for s in labels:
                for e in case_failures(results, bname, cid, s):
                    fails.append(f"- `{s}` {cid}, {e}")
        if fails:
            more = [f"- ... and {len(fails) - 40} more"] if len(fails) > 40 else []
            lines += ["Failed cases:", ""] + fails[:40] + more + [""]
        lines += [f"### {bname}: locality of the benchmark's tasks", "",
                  locality_table(locality_rows(results, bname, labels)), ""]
        crows = colocation_rows(results, bname, labels)
        if crows:
            n = bdef.get("colocation_tasks")
            lines += [f"### {bname}: co-location of its {n} busiest tasks, sample by sample", "",
                      colocation_table(crows), ""]
        prows = process_llc_rows(results, bname, labels) if bdef.get("process_llc") else []
        if prows:
            lines += [f"### {bname}: process x LLC residency", "", process_llc_table(prows), ""]
        if bdef.get("residency_comm"):
            lines += residency_section(results, bname, labels)
            p = plots.residency_heatmap(results, out, bname)
            if p:
                pngs.append(p)
                lines += [f"![job x node residency]({p.name})", ""]
        xt = xnode_rate_table(results, bname, labels)
        if xt:
            lines += [f"### {bname}: scx_locality's cross-node moves per second, by cause", "", xt, ""]
        bcols, bper = bpf_cost_rows(results, bname, labels)
        if bcols:
            lines += [f"### {bname}: cost of the scheduler's decisions (BPF run time per callback)", "",
                      bpf_cost_table(bcols, bper), ""]
        icols, iper = interrupt_rows(results, bname, labels)
        if icols:
            lines += [f"### {bname}: interrupts during the cases", "", interrupt_table(icols, iper), ""]
        p = plots.cpu_heatmap(results, out, bname)
        if p:
            pngs.append(p)
            lines += [f"![per-CPU utilisation]({p.name})", ""]
        if results.get("memory_model"):
            lines += memory_section(results, bname, labels)
            p = plots.memory_heatmap(results, out, bname)
            pngs += [p] if p else []
            lines += [f"![remote accesses over time]({p.name})", ""] if p else []
    fst = final_stats_table(results, labels)
    if fst:
        lines += ["## scx_locality's own counters", "",
                  "From its `scx_locality-final-stats` line at the end of each step (all tasks, not only the "
                  "benchmark's), mean over steps.", "", fst, ""]
    lines += ["## Runs", "", "| run | order | boot s | wall s | host CPU to other work | exit | run folder |",
              "|---:|---|---:|---:|---:|---:|---|"]
    for r in results.get("runs", []):
        other = r.get("host_other_pct")
        lines.append(f"| {r['run']} | {', '.join(r['order'])} | {r.get('boot_s')} | {r.get('wall_s')} | "
                     f"{'n/a' if other is None else f'{other}%'} | "
                     f"{r.get('exit')}{' (timed out)' if r.get('timed_out') else ''} | `{r.get('run_dir')}`"
                     + (f" (the last of {len(r['boots'])} boots: an emulator fault cut "
                        f"{sum(1 for b in r['boots'] if b.get('emulator_fault'))}, the steps left went on in the next)"
                        if r.get("boots") else "") + " |")
        if r.get("error"):
            lines += ["", "```", r["error"], "```"]
    lines += ["", "## Method", ""] + [m.format(**smp) for m in METHOD] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def summary_text(out: Path) -> str:
    """The comparison tables and the scheduler status, for the terminal."""
    results = load(out)
    labels = [s["label"] for s in results["scheds"]]
    status = sched_status(results)
    failed = {s["label"] for s in status if s["status"] in ("failed", "not run")}
    parts = [extra_flags_line(results), ""] if extra_flags_line(results) else []
    for bname, bdef in results["benchmarks"].items():
        for fig in bdef["figures"]:
            table, _ = figure_table(results, bname, fig, labels, failed)
            better = "higher is better" if fig["higher_is_better"] else "lower is better"
            parts += [f"== {bname} {fig['name']} ({fig['unit']}; {better})", table, ""]
    for s in status:
        if s["status"] != "ok":
            parts.append(f"{s['label']}: {s['status']}: {s['reason']}")
    return "\n".join(parts)
