#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Per-interval agent cost from a bin/lab run folder (sched-0.log, console.log, ctl.log)."""
import re, sys, pathlib
d = pathlib.Path(sys.argv[1])
log = (d / "sched-0.log").read_text(errors="replace")
ctl = (d / "ctl.log").read_text(errors="replace") + (d / "console.log").read_text(errors="replace")
m = re.search(r"@@sched-start ok \S+ (\S+) (\S+)", ctl)
t0 = float(m.group(2)) if m else 0.0
marks = {k: float(v) - t0 for k, v in re.findall(r"@@(span-start|span-end|cmd-begin \d+) (\S+)", ctl) if k}
cb = re.search(r"@@cmd-begin \d+ (\S+)", ctl)
if cb:
    marks["idle-start"] = float(cb.group(1)) - t0
blocks = re.split(r"^\[scx_locality\] ", log, flags=re.M)[1:]
rows, t = [], 0.0
for b in blocks:
    a = re.search(r"agent  cpu=([\d.]+)ms in ([\d.]+)s: ([\d.]+)%", b)
    mem = re.search(r"memory cpu=(\d+)ms \(scan (\d+)ms, moving (\d+)ms\) move_calls=(\d+) \(waits (\d+)\) numa_maps_reads=(\d+) scan_deferred=(\d+)(?: proc_lists=(\d+))?", b)
    sc = re.search(r"scans=(\d+) migrated=(\d+) pages \(([\d.]+) MB\)", b)
    if not a or not mem:
        continue
    t += float(a.group(2))
    rows.append((t, float(a.group(3)), *mem.groups(), sc.group(1), sc.group(3)))
print("| # | s (end, from attach) | agent % of a CPU | memory thread ms | of which scan | moving | move calls | numa_maps reads | deferred | /proc reads | passes | MB moved |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for i, r in enumerate(rows):
    t, pct, cpu, scan, mov, calls, waits, maps, dfr, lists, scans, mb = r
    print(f"| {i} | {t:.0f} | {pct:.2f} | {cpu} | {scan} | {mov} | {calls} | {maps} | {dfr} | {lists if lists is not None else '-'} | {scans} | {mb} |")
for k in ("idle-start", "span-start", "span-end"):
    if k in marks:
        print(f"{k} {marks[k]:.1f} s after attach")
fin = re.search(r"scx_locality-final-stats: (\{.*\})", log)
if fin:
    import json
    j = json.loads(fin.group(1))
    keys = ["agent_cpu_ms", "agent_elapsed_ms", "agent_cpu_pct", "memory_scans", "memory_mb_migrated", "memory_cpu_ms", "memory_scan_cpu_ms", "memory_move_cpu_ms", "memory_move_calls", "memory_maps_reads", "memory_scan_deferred", "memory_proc_lists", "memory_call_waits"]
    print("final:", {k: j[k] for k in keys if k in j})
