# SPDX-License-Identifier: GPL-2.0-only
"""What comes back from a bench case: the one parser of locsample's files and of the scheduler's log, and the
counters the bench derives from them per case.

workloads/locsample writes PREFIX.tasks (per task: the CPUs it was seen on and how often running there,
se.nr_migrations; the command's end and the sampler's own cost), PREFIX.cpu (per-CPU /proc/stat, and per CPU
and interval the idle time and run-queue wait) and, with -k, PREFIX.ticks (which task was on which CPU at every
sample). From them: locality (moves between samples by level, home LLC / node), the co-location of a
benchmark's busiest tasks, process x LLC residency, job x node residency and the bound on idle time while tasks
waited (idle_while_queued).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import benchfile, machines

# Tasks that belong to the harness, not the benchmark (the sh -c wrapper, sleeps between its commands).
HARNESS_COMMS = {"sh", "sleep", "cat", "kill", "wait", "timeout", "busybox", "nproc", "locsample"}
FINAL_STATS_RE = re.compile(r"scx_locality-final-stats:\s*(\{.*\})\s*$", re.M)


@dataclass
class TaskSamples:
    tgid: int
    tid: int
    comm: str
    first_ms: int
    last_ms: int
    nr_migrations: int | None
    runs: list[tuple[int, int, int]]  # (cpu, samples, running samples), in time order


def parse_tasks(text: str) -> tuple[dict, list[TaskSamples]]:
    """locsample's PREFIX.tasks -> ({"elapsed_ms", "rc", "timeout", "ticks", "busy_ms", "stat_samples",
    "stat_us", "rq_ms"}, tasks). ticks / busy_ms: the task scans and the wall ms they took; stat_samples /
    stat_us: the per-CPU sampler's samples and its CPU time in us; rq_ms: its rq interval (None: older file)."""
    meta: dict = {"elapsed_ms": None, "rc": None, "timeout": False, "ticks": None, "busy_ms": None,
                  "stat_samples": None, "stat_us": None, "rq_ms": None}
    tasks = []
    for line in text.splitlines():
        w = line.split()
        if not w:
            continue
        if w[0].startswith("#"):
            if w[0] == "#":  # the header: "# locsample 1 key=value ..."
                for kv in w[1:]:
                    k, eq, v = kv.partition("=")
                    if eq and k == "rq_ms" and v.isdigit():
                        meta["rq_ms"] = int(v)
            continue
        if w[0] == "end" and len(w) >= 3:
            meta.update(elapsed_ms=int(w[1]), rc=int(w[2]), timeout="timeout" in w[3:])
        elif w[0] == "ticks" and len(w) >= 3:
            meta.update(ticks=int(w[1]), busy_ms=int(w[2]))
        elif w[0] == "stat" and len(w) >= 3:
            meta.update(stat_samples=int(w[1]), stat_us=int(w[2]))
        elif w[0] == "task" and len(w) >= 7:
            runs = []
            if len(w) >= 8:
                for r in w[7].split(","):
                    parts = r.split(":")
                    if len(parts) == 3:
                        runs.append((int(parts[0]), int(parts[1]), int(parts[2])))
            nm = int(w[6])
            tasks.append(TaskSamples(tgid=int(w[1]), tid=int(w[2]), comm=w[3], first_ms=int(w[4]),
                                     last_ms=int(w[5]), nr_migrations=nm if nm >= 0 else None, runs=runs))
    return meta, tasks


def select_tasks(tasks: list[TaskSamples], sample_comm: list[str] | None = None) -> list[TaskSamples]:
    """The benchmark's own tasks: those named in sample_comm if given, else all but the harness's."""
    if sample_comm:
        return [t for t in tasks if t.comm in sample_comm]
    return [t for t in tasks if t.comm not in HARNESS_COMMS]


def locality(tasks: list[TaskSamples], topo: machines.Topology) -> dict:
    """Counters of one case: observed moves between samples (all, cross-LLC, cross-node), se.nr_migrations,
    and how many samples found each task in its home LLC / node (home = where it was seen most)."""
    node_of, llc_of = topo.node_of(), topo.llc_of()
    out = {"tasks": len(tasks), "samples": 0, "moves": 0, "cross_llc": 0, "cross_node": 0,
           "nr_migrations": None, "home_llc_samples": 0, "home_node_samples": 0}
    nr_mig = [t.nr_migrations for t in tasks if t.nr_migrations is not None]
    if nr_mig:
        out["nr_migrations"] = sum(nr_mig)
    for t in tasks:
        per_node: dict[int, int] = {}
        per_llc: dict[int, int] = {}
        prev = None
        for cpu, n, _running in t.runs:
            out["samples"] += n
            per_node[node_of.get(cpu, -1)] = per_node.get(node_of.get(cpu, -1), 0) + n
            per_llc[llc_of.get(cpu, -1)] = per_llc.get(llc_of.get(cpu, -1), 0) + n
            if prev is not None and cpu != prev:
                out["moves"] += 1
                if llc_of.get(cpu) != llc_of.get(prev):
                    out["cross_llc"] += 1
                if node_of.get(cpu) != node_of.get(prev):
                    out["cross_node"] += 1
            prev = cpu
        if per_node:
            out["home_node_samples"] += max(per_node.values())
            out["home_llc_samples"] += max(per_llc.values())
    return out


def parse_ticks(text: str) -> list[tuple[int, dict[int, int], list[int]]]:
    """locsample's PREFIX.ticks (-k) -> one (ms, {task index: cpu}, [task indices gone]) per tick, in time order:
    the tasks named at a tick (new, or on another CPU than at the previous tick) and those no longer seen. A
    task index is the position of its "task" line in PREFIX.tasks (the order parse_tasks returns)."""
    out = []
    for line in text.splitlines():
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        try:
            ms = int(w[0])
        except ValueError:
            continue
        seen: dict[int, int] = {}
        gone: list[int] = []
        for item in w[1:]:
            if item.startswith("-"):
                if item[1:].isdigit():
                    gone.append(int(item[1:]))
            else:
                idx, colon, cpu = item.partition(":")
                if colon and idx.isdigit() and cpu.lstrip("-").isdigit():
                    seen[int(idx)] = int(cpu)
        out.append((ms, seen, gone))
    return out


def parse_cpustat(text: str) -> dict[int, list[tuple[int, int, int]]]:
    """locsample's PREFIX.cpu -> {cpu: [(ms, busy_ticks, total_ticks), ...]} (idle and iowait are not busy)."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for line in text.splitlines():
        w = line.split()
        if len(w) < 6 or not w[1].startswith("cpu") or not w[1][3:].isdigit():
            continue
        try:
            ms = int(w[0])
            vals = [int(x) for x in w[2:10]]
        except ValueError:
            continue
        vals += [0] * (8 - len(vals))
        # user nice system idle iowait irq softirq steal (guest time is already in user)
        total = sum(vals)
        idle = vals[3] + vals[4]
        out.setdefault(int(w[1][3:]), []).append((ms, total - idle, total))
    return out


def parse_rq(text: str) -> list[tuple[int, dict[int, tuple[float, float]]]]:
    """The rq lines of locsample's PREFIX.cpu -> [(ms, {cpu: (idle_ms, wait_ms)}), ...] in time order: per CPU,
    its idle time and the run-queue wait the kernel charged to it since the previous rq line (a CPU left out
    had neither). The first line starts the record and has no entries."""
    out = []
    for line in text.splitlines():
        w = line.split()
        if len(w) < 2 or w[1] != "rq":
            continue
        try:
            ms = int(w[0])
            per: dict[int, tuple[float, float]] = {}
            for item in w[2:]:
                cpu, idle_ms, wait_us = (int(x) for x in item.split(":"))
                per[cpu] = (float(idle_ms), wait_us / 1000.0)
        except ValueError:
            continue
        out.append((ms, per))
    return out


def idle_while_queued(rq: list[tuple[int, dict[int, tuple[float, float]]]], topo: machines.Topology) -> dict | None:
    """An upper bound on the idle CPU time that waiting tasks could have used in their own LLC / node: per
    interval of parse_rq and per LLC (node), the idle time I of its CPUs and the wait W charged to them; idle
    time while tasks waited there, counted up to one idle CPU per waiting task, is at most min(I, W); summed
    over intervals and LLCs (nodes). Also the plain sums of I and W over the machine's CPUs, the intervals and
    the ms they span. None without at least one interval."""
    if len(rq) < 2:
        return None
    out = {"llc_ms": 0.0, "node_ms": 0.0, "idle_ms": 0.0, "wait_ms": 0.0, "intervals": len(rq) - 1,
           "span_ms": rq[-1][0] - rq[0][0]}
    for key, group_of in (("llc_ms", topo.llc_of()), ("node_ms", topo.node_of())):
        for _ms, per in rq[1:]:
            idle: dict[int, float] = {}
            wait: dict[int, float] = {}
            for cpu, (i, w) in per.items():
                g = group_of.get(cpu)
                if g is None:
                    continue
                idle[g] = idle.get(g, 0.0) + i
                wait[g] = wait.get(g, 0.0) + w
            out[key] += sum(min(idle[g], wait[g]) for g in idle)
            if key == "node_ms":  # every CPU of the machine is in one node: the plain sums
                out["idle_ms"] += sum(idle.values())
                out["wait_ms"] += sum(wait.values())
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def busiest(tasks: list[TaskSamples], selected: list[TaskSamples], n: int | None) -> list[int]:
    """Indices (into tasks) of the n selected tasks found running (state R) at the most samples; ties go to the
    one with more samples, then the earlier one. n None: every selected task."""
    ids = {id(t) for t in selected}
    idx = [i for i, t in enumerate(tasks) if id(t) in ids]
    if n is None:
        return idx

    def key(i):
        runs = tasks[i].runs
        return (-sum(r[2] for r in runs), -sum(r[1] for r in runs), i)
    return sorted(sorted(idx, key=key)[:n])


def colocation(ticks: list[tuple[int, dict[int, int], list[int]]], indices: list[int], topo: machines.Topology,
               settle_ms: float = benchfile.COLOCATION_SETTLE_MS, tasks: list[TaskSamples] | None = None) -> dict:
    """Co-location of a group of tasks (indices into PREFIX.tasks), tick by tick. Over the ticks at which at
    least two of them were seen ("pair ticks"), how many found all of those seen on one node (same_node) and
    on one LLC (same_llc). Moves: a change of a task's CPU between two of its consecutive samples that changes
    node (cross_node) or LLC (cross_llc); the *_after_start ones happen settle_ms or more after the task's
    first sample. same_node_after_start / pair_ticks_after_start count only ticks at which every task seen is
    past its settle time. node_share_sum: over the pair ticks, the sum of the share of the tasks seen that sat on
    the node holding most of them (1.0 = all on one node; 1/nodes = evenly spread), so node_share_sum /
    pair_ticks says whether a group spreads (a parallel job) as well as whether it stays together (a pair).
    own_core(_after_start): pair ticks at which no two of the tasks seen shared a core (SMT siblings or one CPU),
    what an idle-core search is for."""
    node_of, llc_of, core_of = topo.node_of(), topo.llc_of(), topo.core_of()
    want = set(indices)
    state: dict[int, int] = {}
    first: dict[int, int] = {}
    prev: dict[int, int] = {}
    out = {"tasks": len(indices), "ticks": 0, "pair_ticks": 0, "same_node": 0, "same_llc": 0,
           "pair_ticks_after_start": 0, "same_node_after_start": 0, "same_llc_after_start": 0,
           "own_core": 0, "own_core_after_start": 0,
           "cross_node": 0, "cross_llc": 0, "cross_node_after_start": 0, "cross_llc_after_start": 0,
           "node_share_sum": 0.0, "settle_ms": settle_ms}
    for ms, seen, gone in ticks:
        out["ticks"] += 1
        for i in gone:
            state.pop(i, None)
        state.update(seen)
        cur = {i: state[i] for i in want if i in state}
        settled = True
        for i, cpu in cur.items():
            first.setdefault(i, ms)
            after = ms - first[i] >= settle_ms
            settled = settled and after
            p = prev.get(i)
            if p is not None and p != cpu:
                if node_of.get(p) != node_of.get(cpu):
                    out["cross_node"] += 1
                    out["cross_node_after_start"] += after
                if llc_of.get(p) != llc_of.get(cpu):
                    out["cross_llc"] += 1
                    out["cross_llc_after_start"] += after
            prev[i] = cpu
        if len(cur) < 2:
            continue
        per_node: dict = {}
        for c in cur.values():
            per_node[node_of.get(c)] = per_node.get(node_of.get(c), 0) + 1
        out["node_share_sum"] += max(per_node.values()) / len(cur)
        one_node = len(per_node) == 1
        one_llc = len({llc_of.get(c) for c in cur.values()}) == 1
        own_core = len({core_of.get(c, c) for c in cur.values()}) == len(cur)
        out["pair_ticks"] += 1
        out["same_node"] += one_node
        out["same_llc"] += one_llc
        out["own_core"] += own_core
        if settled:
            out["pair_ticks_after_start"] += 1
            out["same_node_after_start"] += one_node
            out["same_llc_after_start"] += one_llc
            out["own_core_after_start"] += own_core
    if tasks is not None:
        out["which"] = [{"tid": tasks[i].tid, "comm": tasks[i].comm, "samples": sum(r[1] for r in tasks[i].runs),
                         "running": sum(r[2] for r in tasks[i].runs)} for i in indices if i < len(tasks)]
    return out


def process_llc(tasks: list[TaskSamples], topo: machines.Topology) -> list[dict]:
    """One row per process (tgid) of the given tasks: the samples that found one of its threads running
    (state R) on each LLC, a proxy for its runtime per LLC (cache-aware scheduling wants a process's runtime in
    one LLC). top_llc holds the most; share = top / all. Processes never seen running are left out; rows in
    order of first appearance."""
    llc_of = topo.llc_of()
    procs: dict[int, dict] = {}
    for t in tasks:
        p = procs.setdefault(t.tgid, {"pid": t.tgid, "comm": t.comm, "threads": 0,
                                      "llc_running": [0] * len(topo.llcs), "first_ms": t.first_ms})
        p["threads"] += 1
        p["first_ms"] = min(p["first_ms"], t.first_ms)
        for cpu, _n, running in t.runs:
            llc = llc_of.get(cpu)
            if llc is not None:
                p["llc_running"][llc] += running
    rows = []
    for p in sorted(procs.values(), key=lambda p: (p["first_ms"], p["pid"])):
        tot = sum(p["llc_running"])
        if not tot:
            continue
        top = max(range(len(p["llc_running"])), key=lambda i: p["llc_running"][i])
        del p["first_ms"]
        rows.append({**p, "running": tot, "top_llc": top, "share": round(p["llc_running"][top] / tot, 4)})
    return rows


NUMAJOB_RE = re.compile(r"numajob id=(\d+) pid=(\d+) .*?mem_pages=(\S*) elapsed_s=([0-9.]+)")


def residency(tasks: list[TaskSamples], topo: machines.Topology, comm: str, output: str) -> list[dict]:
    """One row per job (process named comm): samples per node, the node holding most of its memory (from
    the job's own numajob report line, if any) and its run time."""
    node_of = topo.node_of()
    nr_nodes = len(topo.nodes)
    jobs: dict[int, dict] = {}
    for t in tasks:
        if t.comm != comm:
            continue
        j = jobs.setdefault(t.tgid, {"pid": t.tgid, "id": None, "node_samples": [0] * nr_nodes,
                                     "mem_node": None, "elapsed_s": None, "first_ms": t.first_ms})
        j["first_ms"] = min(j["first_ms"], t.first_ms)
        for cpu, n, _running in t.runs:
            nd = node_of.get(cpu)
            if nd is not None:
                j["node_samples"][nd] += n
    for m in NUMAJOB_RE.finditer(output):
        pid = int(m.group(2))
        if pid not in jobs:
            continue
        pages = {}
        for part in m.group(3).split(","):
            if ":" in part:
                k, v = part.split(":", 1)
                pages[int(k)] = int(v)
        jobs[pid]["id"] = int(m.group(1))
        jobs[pid]["elapsed_s"] = float(m.group(4))
        if pages:
            jobs[pid]["mem_node"] = max(pages, key=pages.get)
    rows = sorted(jobs.values(), key=lambda j: (j["id"] if j["id"] is not None else 1 << 30, j["first_ms"]))
    for r in rows:
        del r["first_ms"]
    return rows


def parse_final_stats(log_text: str) -> dict | None:
    """scx_locality's `scx_locality-final-stats: {json}` line, if its log has one."""
    found = None
    for m in FINAL_STATS_RE.finditer(log_text):
        try:
            found = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
    return found


# sched_ext_ops callbacks, for naming a struct_ops program whose name the kernel cut to 15 characters
SCX_CALLBACKS = ("select_cpu", "enqueue", "dequeue", "dispatch", "tick", "runnable", "running", "stopping",
                 "quiescent", "yield", "core_sched_before", "set_weight", "set_cpumask", "update_idle",
                 "cpu_acquire", "cpu_release", "init_task", "exit_task", "enable", "disable", "dump", "dump_cpu",
                 "dump_task", "cgroup_init", "cgroup_exit", "cgroup_prep_move", "cgroup_move",
                 "cgroup_cancel_move", "cgroup_set_weight", "cgroup_set_bandwidth", "cpu_online", "cpu_offline",
                 "init", "exit")
BPF_NAME_LEN = 15


def callback_of(prog_name: str) -> str:
    """The sched_ext callback a struct_ops program implements, from its name: schedulers name them
    PREFIX_CALLBACK (locality_select_cpu, bpfland_enqueue), which the kernel cuts to 15 characters
    ("locality_select"). The longest suffix after an underscore that is, or (when the name was cut) begins,
    exactly one callback wins; a name that matches none or several is returned as it is."""
    cut = len(prog_name) >= BPF_NAME_LEN
    for i, ch in enumerate(prog_name):
        if ch != "_":
            continue
        tail = prog_name[i + 1:]
        if not tail:
            break
        hits = [c for c in SCX_CALLBACKS if c == tail or (cut and c.startswith(tail))]
        if tail in hits:
            return tail
        if len(hits) == 1:
            return hits[0]
    return prog_name


def parse_bpfcost(text: str) -> dict[str, dict[str, int]] | None:
    """workloads/bpfcost snapshots around a case ("begin" line, programs, "end" line, programs) ->
    {callback: {"calls", "ns"}} spent in the case; None when no struct_ops program ran (EEVDF)."""
    snaps: dict[str, dict[int, tuple[str, int, int]]] = {"begin": {}, "end": {}}
    cur = None
    for line in text.splitlines():
        w = line.split()
        if w and w[0] in snaps:
            cur = snaps[w[0]]
        elif cur is not None and len(w) == 7 and w[0] == "prog" and w[3] == "run_cnt" and w[5] == "run_time_ns":
            cur[int(w[1])] = (w[2], int(w[4]), int(w[6]))
    out: dict[str, dict[str, int]] = {}
    for pid, (name, cnt, ns) in snaps["end"].items():
        _, cnt0, ns0 = snaps["begin"].get(pid, (name, 0, 0))
        if cnt - cnt0 <= 0:
            continue
        d = out.setdefault(callback_of(name), {"calls": 0, "ns": 0})
        d["calls"] += cnt - cnt0
        d["ns"] += ns - ns0
    return out or None


def parse_interrupts(text: str) -> dict[str, int] | None:
    """Two /proc/interrupts snapshots around a case ("begin" line, table, "end" line, table) -> {row: count} of
    the rows named by the kernel (RES rescheduling IPIs, CAL function-call IPIs, IWI irq-work interrupts, LOC
    local timer, TLB shootdowns, ...), summed over CPUs, that the case saw. Numbered device lines are left out:
    their counts are per device, not per scheduling event. None without both snapshots."""
    snaps: dict[str, dict[str, int]] = {}
    cur = None
    for line in text.splitlines():
        w = line.split()
        if w and w[0] in ("begin", "end") and len(w) == 1:
            cur = snaps.setdefault(w[0], {})
        elif cur is not None and len(w) >= 2 and w[0].endswith(":") and not w[0][:-1].isdigit():
            # one count per CPU, then a description that may hold numbers of its own: stop at its first word
            total = 0
            for x in w[1:]:
                if not x.isdigit():
                    break
                total += int(x)
            cur[w[0][:-1]] = total
    if "begin" not in snaps or "end" not in snaps:
        return None
    return {k: v - snaps["begin"].get(k, 0) for k, v in snaps["end"].items() if v - snaps["begin"].get(k, 0) >= 0}


ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def log_tail(path: str | None, lines: int = 6) -> str:
    """The last lines of a scheduler's log, on one line, without terminal colour codes."""
    if not path or not Path(path).exists():
        return ""
    text = ANSI_RE.sub("", Path(path).read_text(errors="replace")).strip().splitlines()
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())
