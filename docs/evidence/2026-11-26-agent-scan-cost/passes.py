#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Per-pass CPU of the memory thread's scan (debug lines) over pass ranges: idle before memspan (passes 20-30) and the last 8 passes."""
import re, sys, pathlib, statistics
log = (pathlib.Path(sys.argv[1]) / "sched-0.log").read_text(errors="replace")
rows = []
for m in re.finditer(r"memory: scan (\d+) .*?(?:of (\d+) pids \((\d+) kernel threads\) )?moved .*?cpu scan (\d+)us(?: \(sampling /proc (\d+)us\))? place (\d+)us", log):
    rows.append(tuple(int(x) if x else None for x in m.groups()))
def show(name, sel):
    if not sel:
        return
    cs = [r[3] for r in sel]; sp = [r[4] for r in sel if r[4] is not None]; pl = [r[5] for r in sel]
    s = f"{name}: passes {sel[0][0]}-{sel[-1][0]}: scan cpu median {statistics.median(cs)/1000:.1f} ms (min {min(cs)/1000:.1f}, max {max(cs)/1000:.1f})"
    if sp:
        s += f", of which sampling /proc median {statistics.median(sp)/1000:.1f} ms"
    s += f"; place median {statistics.median(pl)/1000:.2f} ms"
    if sel[-1][1] is not None:
        s += f"; {sel[-1][1]} pids listed, {sel[-1][2]} kernel threads"
    print(s)
show("idle (500 sleeps)", [r for r in rows if 20 <= r[0] <= 30])
show("after memspan", rows[-8:])
