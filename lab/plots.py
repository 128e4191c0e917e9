# SPDX-License-Identifier: GPL-2.0-only
"""PNGs of the bench report (matplotlib, Agg backend): per-CPU utilisation over time with the CPUs ordered by
node, LLC and core, the job x node residency matrix of residency benchmarks, and the results page's heatmap of
every scheduler against the baseline (bin/lab matrix)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .machines import Topology  # noqa: E402
from .samples import parse_cpustat  # noqa: E402


def utilisation(samples: dict[int, list[tuple[int, int, int]]], cpus: list[int]) -> np.ndarray:
    """CPU x interval matrix of busy share in percent (NaN where a CPU has no interval)."""
    n = max((len(v) for v in samples.values()), default=0) - 1
    mat = np.full((len(cpus), max(n, 0)), np.nan)
    for row, cpu in enumerate(cpus):
        s = samples.get(cpu, [])
        for k in range(len(s) - 1):
            dt = s[k + 1][2] - s[k][2]
            if dt > 0 and k < mat.shape[1]:
                mat[row, k] = 100.0 * (s[k + 1][1] - s[k][1]) / dt
    return mat


def _step_cases(results: dict, bench: str, sched: str):
    """Cases of the first run in which this (bench, sched) step left sampler files."""
    for r in results.get("runs", []):
        for st in r["steps"]:
            if st["bench"] == bench and st["sched"] == sched and any("cpu" in c["files"] for c in st["cases"]):
                return r["run"], st["cases"]
    return None, []


def _cpu_label(cpu: int, node: dict, llc: dict) -> str:
    return f"cpu{cpu} n{node.get(cpu, '?')} L{llc.get(cpu, '?')}"


def cpu_heatmap(results: dict, out: Path, bench: str) -> Path | None:
    topo = Topology.from_json(results["topology"])
    cpus = topo.cpu_order()
    node, llc = topo.node_of(), topo.llc_of()
    scheds = [s["label"] for s in results["scheds"]]
    panels = []
    for s in scheds:
        run_no, cases = _step_cases(results, bench, s)
        if not cases:
            continue
        blocks, labels = [], []
        for c in cases:
            if "cpu" not in c["files"]:
                continue
            mat = utilisation(parse_cpustat((out / c["files"]["cpu"]).read_text(errors="replace")), cpus)
            if mat.shape[1] == 0:
                continue
            blocks.append(mat)
            labels.append(c["label"])
        if blocks:
            panels.append((s, run_no, blocks, labels))
    if not panels:
        return None
    h_per = max(1.6, 0.18 * len(cpus) + 0.8)
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, h_per * len(panels) + 0.8), squeeze=False,
                             layout="constrained")
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("white")
    im = None
    mats = []
    for _s, _run_no, blocks, _labels in panels:
        gap = np.full((len(cpus), 1), np.nan)
        parts, starts = [], []
        pos = 0
        for b in blocks:
            starts.append(pos)
            parts += [b, gap]
            pos += b.shape[1] + 1
        mats.append((np.concatenate(parts[:-1], axis=1), starts))
    width = max(m.shape[1] for m, _ in mats)  # one time scale for every panel
    for ax, (s, run_no, blocks, labels), (mat, starts) in zip(axes[:, 0], panels, mats):
        mat = np.concatenate([mat, np.full((len(cpus), width - mat.shape[1]), np.nan)], axis=1)
        im = ax.imshow(mat, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=100)
        ax.set_title(f"{bench} under {s} (run {run_no}): busy % per CPU, one column per "
                     f"{results['sampler']['cpustat_ms']} ms", fontsize=9, loc="left")
        ax.set_xlim(-0.5, width - 0.5)
        step = max(1, len(cpus) // 32)
        ax.set_yticks(range(0, len(cpus), step))
        ax.set_yticklabels([_cpu_label(cpus[i], node, llc) for i in range(0, len(cpus), step)], fontsize=6)
        for i in range(1, len(cpus)):
            a, b = cpus[i - 1], cpus[i]
            if node.get(a) != node.get(b):
                ax.axhline(i - 0.5, color="red", linewidth=1.2)
            elif llc.get(a) != llc.get(b):
                ax.axhline(i - 0.5, color="orange", linewidth=0.8, linestyle="--")
        ax.set_xticks([st + blocks[k].shape[1] / 2 for k, st in enumerate(starts)])
        ax.set_xticklabels(labels, fontsize=7)
    axes[-1, 0].set_xlabel("rows: CPUs by node, LLC, core (red line: node boundary, dashed: LLC boundary); "
                           "white: between cases, or no ticks counted", fontsize=7)
    fig.colorbar(im, ax=axes[:, 0].tolist(), label="busy %", fraction=0.03, pad=0.01)
    path = out / f"cpu-util-{bench}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _panel_grid(panels: list[tuple], size):
    """A grid of panels, schedulers down and cases across (both in first-seen order), all hidden until used.
    panels: (scheduler, run, case label, data); size(nr_cases, nr_scheds) -> figsize. Returns the figure, its
    axes and panel_ax(scheduler, case label), which shows and returns that panel's axes."""
    cases = sorted({p[2] for p in panels}, key=[p[2] for p in panels].index)
    scheds = sorted({p[0] for p in panels}, key=[p[0] for p in panels].index)
    fig, axes = plt.subplots(len(scheds), len(cases), squeeze=False, figsize=size(len(cases), len(scheds)),
                             layout="constrained")
    for ax in axes.flat:
        ax.set_visible(False)

    def panel_ax(sched: str, label: str):
        ax = axes[scheds.index(sched), cases.index(label)]
        ax.set_visible(True)
        return ax
    return fig, axes, panel_ax


def _save_grid(fig, axes, im, title: str, bar_label: str, path: Path) -> Path:
    fig.suptitle(title, fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02, label=bar_label)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def residency_heatmap(results: dict, out: Path, bench: str) -> Path | None:
    """One panel per (scheduler, case): share of each job's samples per node; '*' marks its memory's node."""
    topo = Topology.from_json(results["topology"])
    nr_nodes = len(topo.nodes)
    panels = []
    for s in [x["label"] for x in results["scheds"]]:
        for r in results.get("runs", []):
            st = next((st for st in r["steps"] if st["bench"] == bench and st["sched"] == s), None)
            if st and any(c.get("residency") for c in st["cases"]):
                for c in st["cases"]:
                    if c.get("residency"):
                        panels.append((s, r["run"], c["label"], c["residency"]))
                break
    if not panels:
        return None
    max_jobs = max(len(p[3]) for p in panels)
    fig, axes, panel_ax = _panel_grid(panels, lambda nc, ns: (max(6.0, (1.2 + 1.1 * nr_nodes) * nc),
                                                              0.6 + (0.9 + 0.28 * max_jobs) * ns))
    im = None
    for s, run_no, label, rows in panels:
        ax = panel_ax(s, label)
        mat = np.zeros((len(rows), nr_nodes))
        for i, j in enumerate(rows):
            tot = sum(j["node_samples"]) or 1
            mat[i] = [100.0 * x / tot for x in j["node_samples"]]
        im = ax.imshow(mat, aspect="auto", cmap="Blues", vmin=0, vmax=100, interpolation="nearest")
        for i, j in enumerate(rows):
            for n in range(nr_nodes):
                mark = "*" if j.get("mem_node") == n else ""
                ax.text(n, i, f"{mat[i, n]:.0f}{mark}", ha="center", va="center", fontsize=7,
                        color="white" if mat[i, n] > 60 else "black")
        ax.set_xticks(range(nr_nodes))
        ax.set_xticklabels([f"node {n}" for n in range(nr_nodes)], fontsize=7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"job {j['id'] if j['id'] is not None else j['pid']}" for j in rows], fontsize=6)
        ax.set_title(f"{s}, {label} (run {run_no})", fontsize=8)
    return _save_grid(fig, axes, im, f"{bench}: % of each job's samples per node\n(* = the node holding most of its "
                      "memory)", "% of samples", out / f"residency-{bench}.png")


def scheduler_heatmap(rows: list[dict], labels: list[str], title: str, path: Path,
                      alpha: float) -> Path | None:
    """The results page's rows (lab/matrix.py figure_rows) x schedulers but the first (the baseline): colour =
    percent better than the baseline, clipped to +-50; * where the t-test gave p < alpha."""
    cols = labels[1:]
    rows = [r for r in rows if any(r["cells"][s].get("pct_vs_baseline") is not None for s in cols)]
    if not rows or not cols:
        return None
    mat = np.full((len(rows), len(cols)), np.nan)
    for i, r in enumerate(rows):
        for j, s in enumerate(cols):
            v = r["cells"][s].get("pct_vs_baseline")
            if v is not None:
                mat[i, j] = max(-50.0, min(50.0, v))
    fig, ax = plt.subplots(figsize=(1.3 * len(cols) + 4.5, 0.28 * len(rows) + 1.6), layout="constrained")
    cmap = plt.get_cmap("RdYlGn").copy()
    cmap.set_bad("#dddddd")
    im = ax.imshow(mat, cmap=cmap, vmin=-50, vmax=50, aspect="auto")
    for i, r in enumerate(rows):
        for j, s in enumerate(cols):
            c = r["cells"][s]
            if c.get("pct_vs_baseline") is not None:
                ax.text(j, i, f"{c['pct_vs_baseline']:+.0f}{'*' if c.get('significant') else ''}",
                        ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [f"{r['spec']} {r['case']} {r['figure']}" for r in rows], fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label=f"% better than {labels[0]} (* p < {alpha})")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def memory_heatmap(results: dict, out: Path, bench: str) -> Path | None:
    """The memory model's time series (bench --memory-model), first run: one panel per (scheduler, case), rows the
    nodes of the accessing vCPUs, columns the ticks; colour = % of those vCPUs' accesses to another node's
    memory."""
    panels = []
    for s in [x["label"] for x in results["scheds"]]:
        for r in results.get("runs", []):
            st = next((st for st in r["steps"] if st["bench"] == bench and st["sched"] == s), None)
            if st and any((c.get("memory") or {}).get("series") for c in st["cases"]):
                panels += [(s, r["run"], c["label"], c["memory"]["series"]) for c in st["cases"]
                           if (c.get("memory") or {}).get("series")]
                break
    if not panels:
        return None
    nodes = len(panels[0][3][0]["nodes"])
    fig, axes, panel_ax = _panel_grid(panels, lambda nc, ns: (max(6.0, 3.2 * nc), 0.8 + (0.5 + 0.3 * nodes) * ns))
    im = None
    for s, run_no, label, series in panels:
        ax = panel_ax(s, label)
        mat = np.array([[np.nan if row["nodes"][n][0] is None else 100.0 - row["nodes"][n][0]
                         for row in series] for n in range(nodes)])
        im = ax.imshow(mat, aspect="auto", cmap="Reds", vmin=0, vmax=100, interpolation="nearest",
                       extent=(0, series[-1]["t"], nodes - 0.5, -0.5))
        ax.set_yticks(range(nodes))
        ax.set_yticklabels([f"node {n}" for n in range(nodes)], fontsize=7)
        ax.set_xlabel("s", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.set_title(f"{s}, {label} (run {run_no})", fontsize=8)
    return _save_grid(fig, axes, im, f"{bench}: % of accesses to another node's memory, by the node of the "
                      "accessing CPU (memory model)", "% remote", out / f"memory-remote-{bench}.png")
