# SPDX-License-Identifier: GPL-2.0-only
"""The memory model: what locality would buy on the modeled machine, which TCG cannot show by itself.

Under TCG remote memory and a cold cache cost nothing, so a lab run charges nothing for what a scheduler's
locality saves. `bin/lab bench --memory-model` loads a QEMU TCG plugin (lab/memmodel/, Rust) that sees every
guest data access: it classifies the access by the node holding its guest-physical address against the node of
the accessing vCPU, and feeds it to the modeled LLC of that vCPU (one shared set-associative LRU cache per LLC of
the machine file, of the `[memory]` table's scaled size). Each benchmark case is cut out of the counts by
snapshots the guest asks for (workloads/memmark runs a marker NOP at the case's begin and end, and ticks
in between); from the difference come, per case:

- mem-local-pct: the share of the guest's RAM accesses that went to the accessing vCPU's own node;
- llc-hit-pct: the share that hit the modeled LLC;
- mem-ns: the modeled mean latency of one access (LLC hit, or a miss to local or remote DRAM, the remote one by
  SLIT distance; the latencies are the machine file's, from the published figures it names);
- mem-s: the modeled memory time of the whole case, accesses x latency summed over all vCPUs (CPU seconds);
  every access is charged at least an LLC hit, since the private caches are not modeled;
- miss-s: the part of mem-s spent in LLC misses (local or remote DRAM): the part a scheduler's placement
  moves, where mem-s is mostly the work done.

It never changes the guest's timing beyond the emulator's slowdown of running it; the counts are of the whole
guest (kernel and user), since a scheduler's moves cost the kernel's accesses too. Instruction fetches are not
memory callbacks in QEMU and are not counted.

The plugin's layout of the nodes' RAM (QEMU's: nodes in order over one RAM space, the part above the
PCI hole moved to 4 GiB) is checked at every boot against the guest's own view (its memory blocks per node).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import machines, paths

CRATE = paths.REPO / "lab" / "memmodel"
LOG_NAME = "memmodel.log"
# The snapshot period while a case runs (ms): the time series of the report's heatmap.
TICK_MS = 1000
# QEMU's pc machine keeps RAM below 3.5 GiB when all of it fits there; otherwise only up to 3 GiB (the rest goes
# above 4 GiB). The lab's machines use the pc machine (run.qemu_command).
PC_LOWMEM = 0xE0000000
PC_LOWMEM_SPLIT = 0xC0000000
FIGURES = [
    # name, unit, higher is better
    ("mem-local-pct", "% of accesses", True),
    ("llc-hit-pct", "% of accesses", True),
    ("mem-ns", "ns per access", False),
    ("mem-s", "CPU s", False),
    ("miss-s", "CPU s", False),
]


class MemoryModelError(Exception):
    """The memory model cannot run or its counts cannot be trusted; the message says why."""


def below_4g(total_mb: int) -> int:
    ram = total_mb << 20
    return ram if ram < PC_LOWMEM else PC_LOWMEM_SPLIT


def qemu_version(qemu: str = "qemu-system-x86_64") -> tuple[int, int]:
    exe = shutil.which(qemu)
    if exe is None:
        raise MemoryModelError(f"{qemu} is not installed; run: bin/lab setup")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    if not m:
        raise MemoryModelError(f"cannot read QEMU's version from: {out.strip()!r}")
    return int(m.group(1)), int(m.group(2))


def api_version(version: tuple[int, int]) -> int:
    """The plugin API the QEMU of that version speaks (a plugin built for a newer one is refused)."""
    if version >= (10, 1):
        return 5
    if version >= (9, 2):
        return 4
    raise MemoryModelError(f"QEMU {version[0]}.{version[1]} is too old for the memory model (9.2 or newer)")


def plugin_path() -> Path:
    return paths.cache() / "memmodel" / "libmemmodel.so"


def build(log=print) -> Path:
    """Build the plugin for the installed QEMU's API (cargo; a second or so when nothing changed) and copy it
    where QEMU, running as nobody, can read it."""
    api = api_version(qemu_version())
    target = paths.cache() / "memmodel" / "target"
    r = subprocess.run(["cargo", "build", "--release", "--quiet", "--no-default-features", "--features",
                        f"api-v{api}", "--target-dir", str(target)], cwd=CRATE)
    if r.returncode != 0:
        raise MemoryModelError(f"building the memory model plugin failed (cargo exit {r.returncode})")
    dest = plugin_path()
    tmp = dest.with_suffix(".tmp")
    shutil.copyfile(target / "release" / "libmemmodel.so", tmp)
    os.chmod(tmp, 0o644)
    tmp.rename(dest)
    for d in (dest.parent, *dest.parent.parents):
        if d == Path("/"):
            break
        if not os.stat(d).st_mode & 0o001:
            log(f"lab: warning: {d} is not searchable by others; QEMU running as nobody may not load {dest}")
            break
    return dest


def plugin_args(m: machines.Machine) -> list[str]:
    if m.memory is None:
        raise MemoryModelError(f"{m.path} has no [memory] table (LLC size and latencies); the memory model "
                               "needs one")
    llc_of = m.topology().llc_of()
    return [f"ram_mb={'.'.join(str(m.memory_mb_per_node) for _ in m.nodes)}",
            f"below_4g={below_4g(m.memory_mb_per_node * len(m.nodes))}",
            f"vcpu_llc={'.'.join(str(llc_of[c]) for c in range(m.nr_cpus))}",
            f"llc_kb={m.memory.llc_kb}", f"ways={m.memory.llc_ways}"]


def qemu_args(m: machines.Machine, log_path: Path) -> list[str]:
    return ["-plugin", ",".join([str(plugin_path()), *plugin_args(m)]), "-d", "plugin", "-D", str(log_path)]


# ---------------------------------------------------------------------------------------------------------
# The guest side: shell lines of a bench step


def guest_layout_command() -> str:
    """Prints the guest's memory blocks per node ("lab-memblocks N B B ...") and their size, once per boot."""
    return ("for d in /sys/devices/system/node/node[0-9]*; do n=${d##*node}; "
            "echo \"lab-memblocks $n $(ls -d $d/memory[0-9]* 2>/dev/null | sed 's/.*memory//' | sort -n | "
            "tr '\\n' ' ')\"; done; "
            "echo \"lab-memblock-bytes $(cat /sys/devices/system/memory/block_size_bytes)\"")


def case_begin_lines(base: str) -> list[str]:
    """Before a case: count the begin marks of this boot (the plugin's begin snapshots come in the same order),
    write the ordinal to BASE.mm, mark begin and start the ticks."""
    return [f"MMN=$(cat /tmp/lab-mm-n 2>/dev/null || echo 0); echo $((MMN + 1)) > /tmp/lab-mm-n; "
            f"echo \"begin $MMN\" > {base}.mm",
            "memmark begin",
            f"memmark tick -p {TICK_MS} & MMT=$!"]


def case_end_lines() -> list[str]:
    return ["kill $MMT 2>/dev/null; wait $MMT 2>/dev/null", "memmark end"]


# ---------------------------------------------------------------------------------------------------------
# The plugin's log


@dataclass
class Snapshot:
    what: str  # begin, end, tick, exit
    seq: int
    t_ns: int
    counters: list[list[int]]  # per vCPU: kernel_acc[n], kernel_miss[n], user_acc[n], user_miss[n], io, unmapped


@dataclass
class Log:
    nodes: int = 0
    vcpus: int = 0
    ranges: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    snapshots: list[Snapshot] = field(default_factory=list)
    error: str | None = None


def parse_log(text: str) -> Log:
    log = Log()
    cur: Snapshot | None = None
    for line in text.splitlines():
        if line.startswith("memmodel: error:"):
            log.error = line.split(":", 2)[2].strip()
        elif line.startswith("memmodel config "):
            kv = dict(w.split("=", 1) for w in line.split()[2:] if "=" in w)
            log.nodes, log.vcpus = int(kv["nodes"]), int(kv["vcpus"])
            for part in kv["ranges"].split(";"):
                n, rs = part.split(":", 1)
                log.ranges[int(n)] = [tuple(int(x, 16) for x in r.split("-")) for r in rs.split("+") if r]
        elif line.startswith("memmodel c ") and cur is not None:
            words = line.split()
            cur.counters.append([int(x) for x in words[3:]])
        elif line.startswith("memmodel "):
            words = line.split()
            kv = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            if "seq" in kv:
                cur = Snapshot(words[1], int(kv["seq"]), int(kv.get("t_ns", 0)), [])
                log.snapshots.append(cur)
    # A snapshot cut short (QEMU killed while writing it) is dropped.
    log.snapshots = [s for s in log.snapshots if len(s.counters) == log.vcpus]
    return log


def layout_problems(log: Log, console: str) -> list[str]:
    """Where the plugin's node layout disagrees with the guest's memory blocks (lab-memblocks lines); [] if they
    agree. A block belongs to a node by its start address; the guest must list every block the plugin's ranges
    cover for that node, and no other."""
    size_m = re.search(r"^lab-memblock-bytes ([0-9a-fA-F]+)\s*$", console, re.M)
    blocks = {int(n): [int(b) for b in bs.split()]
              for n, bs in re.findall(r"^lab-memblocks (\d+) ?([\d ]*)$", console, re.M)}
    if not size_m or not blocks:
        return ["the guest printed no memory blocks per node (lab-memblocks)"]
    if not log.ranges:
        return ["the plugin printed no layout (its config line is missing)"]
    bs = int(size_m.group(1), 16)
    problems = []
    for n in sorted(set(blocks) | set(log.ranges)):
        want = sorted({b for s, e in log.ranges.get(n, []) for b in range(s // bs, (e + bs - 1) // bs)})
        got = sorted(blocks.get(n, []))
        if want != got:
            problems.append(f"node {n}: the plugin puts blocks {_span(want)} there, the guest {_span(got)} "
                            f"(blocks of {bs >> 20} MB)")
    return problems


def _span(bs: list[int]) -> str:
    return machines.format_cpulist(bs) or "none"


def case_window(log: Log, ordinal: int) -> tuple[Snapshot, list[Snapshot], Snapshot] | None:
    """The begin snapshot number `ordinal` of the boot, the ticks after it and the end that closes it."""
    begins = [i for i, s in enumerate(log.snapshots) if s.what == "begin"]
    if ordinal >= len(begins):
        return None
    i = begins[ordinal]
    ticks = []
    for s in log.snapshots[i + 1:]:
        if s.what == "end":
            return log.snapshots[i], ticks, s
        if s.what == "begin":
            return None
        if s.what == "tick":
            ticks.append(s)
    return None


def _delta(a: Snapshot, b: Snapshot) -> list[list[int]]:
    return [[y - x for x, y in zip(ca, cb)] for ca, cb in zip(a.counters, b.counters)]


def summarize(m: machines.Machine, counters: list[list[int]]) -> dict:
    """Per-case figures from counter differences (per vCPU)."""
    nodes = len(m.nodes)
    node_of = m.topology().node_of()
    far = max(max(r) for r in m.distances)
    acc = local = miss = 0
    mem_ns = miss_ns = 0.0
    by_dist: dict[int, int] = {}
    miss_by_dist: dict[int, int] = {}
    user_acc = user_local = 0
    for v, c in enumerate(counters):
        home = node_of.get(v, 0)
        for mode in (0, 1):
            a = c[(2 * mode) * nodes:(2 * mode + 1) * nodes]
            ms = c[(2 * mode + 1) * nodes:(2 * mode + 2) * nodes]
            for n in range(nodes):
                d = m.distances[home][n]
                acc += a[n]
                miss += ms[n]
                by_dist[d] = by_dist.get(d, 0) + a[n]
                miss_by_dist[d] = miss_by_dist.get(d, 0) + ms[n]
                if n == home:
                    local += a[n]
                if mode == 1:
                    user_acc += a[n]
                    user_local += a[n] if n == home else 0
                if m.memory is not None:
                    mem_ns += (a[n] - ms[n]) * m.memory.llc_hit_ns + ms[n] * m.memory.miss_ns(d, far)
                    miss_ns += ms[n] * m.memory.miss_ns(d, far)
    out = {"accesses": acc, "local_pct": 100.0 * local / acc if acc else None,
           "user_local_pct": 100.0 * user_local / user_acc if user_acc else None,
           "user_accesses": user_acc,
           "llc_hit_pct": 100.0 * (acc - miss) / acc if acc else None,
           "by_distance_pct": {str(d): round(100.0 * x / acc, 3) for d, x in sorted(by_dist.items())} if acc else {},
           "misses": miss,
           "miss_by_distance_pct": ({str(d): round(100.0 * x / miss, 3) for d, x in sorted(miss_by_dist.items())}
                                    if miss else {}),
           "io": sum(c[4 * nodes] for c in counters), "unmapped": sum(c[4 * nodes + 1] for c in counters)}
    if m.memory is not None:
        out["mem_ns"] = mem_ns / acc if acc else None
        out["mem_s"] = mem_ns / 1e9
        out["miss_s"] = miss_ns / 1e9
    return out


def case_memory(m: machines.Machine, log: Log, ordinal: int) -> dict | None:
    """The memory model's record of one case: its figures and a time series (per tick: seconds since begin,
    local share and LLC hit rate per node of the accessing vCPU)."""
    w = case_window(log, ordinal)
    if w is None:
        return None
    begin, ticks, end = w
    delta = _delta(begin, end)
    rec = summarize(m, delta)
    rec["seconds"] = round((end.t_ns - begin.t_ns) / 1e9, 3)
    # Per vCPU, its user-mode accesses alone: [accesses, local %, LLC hit %] (what a pinned process did there).
    nodes, node_of = len(m.nodes), m.topology().node_of()
    rec["per_cpu"] = []
    for v, c in enumerate(delta):
        acc, miss = c[2 * nodes:3 * nodes], c[3 * nodes:4 * nodes]
        total = sum(acc)
        rec["per_cpu"].append([total, 100.0 * acc[node_of.get(v, 0)] / total if total else None,
                               100.0 * (total - sum(miss)) / total if total else None])
    series = []
    prev = begin
    for s in ticks + [end]:
        d = _delta(prev, s)
        row = {"t": round((s.t_ns - begin.t_ns) / 1e9, 2), "nodes": []}
        for n in range(len(m.nodes)):
            part = [c if node_of.get(v) == n else [0] * len(c) for v, c in enumerate(d)]
            f = summarize(m, part)
            row["nodes"].append([f["local_pct"], f["llc_hit_pct"], f["accesses"]])
        series.append(row)
        prev = s
    rec["series"] = series
    return rec


def figures(rec: dict | None) -> dict:
    """The case's memory figures under their report names (None where the case has no record)."""
    if rec is None:
        return {name: None for name, _u, _h in FIGURES}
    return {"mem-local-pct": rec["local_pct"], "llc-hit-pct": rec["llc_hit_pct"], "mem-ns": rec.get("mem_ns"),
            "mem-s": rec.get("mem_s"), "miss-s": rec.get("miss_s")}


def figure_defs() -> list[dict]:
    """The memory figures as the report's figure definitions (results.json's benchmarks[..].figures)."""
    return [{"name": n, "regex": "", "unit": u, "higher_is_better": h, "mean": "amean", "aggregate": "first",
             "memory_model": True} for n, u, h in FIGURES]
