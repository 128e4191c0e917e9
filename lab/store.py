# SPDX-License-Identifier: GPL-2.0-only
"""The results store: one file per (machine, benchmark spec, scheduler set) cell, the source of docs/results.md.

Layout: STORE/MACHINE/BENCH-DIR/SCHEDSET.json, where BENCH-DIR is the spec spelled as a folder name
(matrix.Unit.dirname), followed by "+memory-model" for a cell run with the lab's memory model (its guest runs
6-11x slower, so its figures never pool with the plain cell's), and SCHEDSET the number of schedulers and a hash
of their labels in order ("7-1a2b3c4d.json"). A cell is one bench folder's results.json for that one benchmark, trimmed to what the page
reads (lab/report.py's figures, placement and cost tables; not the raw files, per-step final stats, interrupts or
the sampler's own figures: the bench folder keeps those), with its stamp:

- `commit`: the scx_locality commit the binary was built from (its --version);
- `behaviour`: what tells a stale cell (see current_stamp): a hash of the BPF object the binary carries (its
  programs, maps and data; not its BTF and debug sections, which name the build's own paths) and of the
  scheduler's default flags (every `[default: X]` of its --help-all). A cell whose behaviour differs from the
  current build's is stale: the page marks it with its age;
- `peers`: each other scheduler's build (a peer's crate and version, a hash for what this repository builds);
- `date` (UTC, when the cell's last run ended), `runs`, `duration_s` (lab time of all its runs) and `estimate_s`
  (the matrix's estimate of the same, when a matrix ran it);
- `host`: where it ran: "lab" (a QEMU guest; the CPU model and cores of the host that ran QEMU) or "hardware"
  (`bin/lab bench --host`: the machine itself, its CPU model, CPUs, nodes, LLCs and kernel). Hardware cells are
  keyed by that description (hw-MODEL-NcNnNl), not by the host's name.

Writes are atomic (a temporary file in the cell's folder, then a rename), so an interrupted run or merge leaves
either the old cell or the new one; a temporary file left by a killed writer starts with "." and is ignored by
readers and removed by the next writer. Nothing in a cell depends on which host ran it apart from `host`: two
stores merge cell by cell, the newest `date` winning (merge()).
"""
from __future__ import annotations

import copy
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import struct
import subprocess
import tempfile
from pathlib import Path

from . import image, paths, peers

STORE_DIR = paths.REPO / "docs" / "results-store"
CELL_VERSION = 1
TRIM_NOTE = ("results store cell: per-step final_stats and sched_log, per-case files, interrupts and sampler, and "
             "the runs' run_dir were removed; idle_queued and memory keep their totals")
OURS = "scx_locality"


class StoreError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# Keys and paths


def dirname(spec: str) -> str:
    """A benchmark spec as a folder name (as matrix.Unit.dirname): hackbench:groups=1/4 -> hackbench_groups=1-4."""
    return re.sub(r"[^A-Za-z0-9=._-]", "-", spec.replace(":", "_"))


def schedset(scheds: list[str]) -> str:
    return f"{len(scheds)}-{hashlib.sha256(','.join(scheds).encode()).hexdigest()[:8]}"


MEMORY_MODEL_SUFFIX = "+memory-model"  # a cell run with the memory model: its own key beside the plain cell's


def cell_key(machine: str, spec: str, scheds: list[str], memory_model: bool = False) -> str:
    return f"{machine}/{dirname(spec)}{MEMORY_MODEL_SUFFIX if memory_model else ''}/{schedset(list(scheds))}"


def key_of(cell: dict) -> str:
    k = cell["key"]
    return cell_key(k["machine"], k["spec"], k["scheds"], bool(k.get("memory_model")))


def cell_path(store: Path, key: str) -> Path:
    return store / (key + ".json")


# ---------------------------------------------------------------------------------------------------------
# Reading and writing


def _is_temp(p: Path) -> bool:
    return p.name.startswith(".")


def read_cells(store: Path) -> list[dict]:
    """Every cell of the store, sorted by key; temporary files of interrupted writers and unreadable files are
    left out (a cell is either whole or absent)."""
    cells = []
    if not store.is_dir():
        return cells
    for p in sorted(store.glob("*/*/*.json")):
        if _is_temp(p):
            continue
        try:
            c = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(c, dict) and c.get("cell") == CELL_VERSION:
            cells.append(c)
    return cells


def read_cell(store: Path, key: str) -> dict | None:
    p = cell_path(store, key)
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class Lock:
    """One writer at a time per store (an fcntl lock on the store's folder itself: no lock file in the tree);
    the writer removes the temporary files of writers killed before."""

    def __init__(self, store: Path):
        self.store = store

    def __enter__(self):
        self.store.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.store, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        clean(self.store)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def clean(store: Path) -> list[Path]:
    """Remove the temporary files interrupted writers left (call with the store's lock held)."""
    gone = []
    for p in store.glob("*/*/.*.tmp"):
        p.unlink(missing_ok=True)
        gone.append(p)
    return gone


def write_cell(store: Path, cell: dict) -> Path:
    """Write one cell atomically: a temporary file in its folder, flushed, then renamed over the old cell."""
    path = cell_path(store, key_of(cell))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.stem + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(cell, f, separators=(",", ":"), default=float)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is not a source tree's mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def merge(store: Path, other: Path) -> tuple[int, int]:
    """Copy every cell of other that this store lacks or holds older (by date) into it; (copied, kept)."""
    if not other.is_dir():
        raise StoreError(f"{other} is not a results store (no such folder)")
    copied = kept = 0
    with Lock(store):
        for c in read_cells(other):
            mine = read_cell(store, key_of(c))
            if mine is not None and mine.get("date", "") >= c.get("date", ""):
                kept += 1
                continue
            write_cell(store, c)
            copied += 1
    return copied, kept


# ---------------------------------------------------------------------------------------------------------
# The behaviour stamp of a scx_locality build


EM_BPF = 247
_SKIP = (".BTF", ".rel.BTF", ".debug", ".rel.debug", ".llvm", ".comment")


def bpf_objects(blob: bytes) -> list[bytes]:
    """The BPF ELF objects (e_machine EM_BPF) a binary carries (the skeleton embeds its object whole)."""
    out, i = [], 0
    while True:
        i = blob.find(b"\x7fELF\x02\x01\x01", i)
        if i < 0:
            return out
        try:
            machine = struct.unpack_from("<H", blob, i + 18)[0]
            shoff, = struct.unpack_from("<Q", blob, i + 0x28)
            shentsize, shnum = struct.unpack_from("<HH", blob, i + 0x3A)
        except struct.error:
            return out
        end = i + shoff + shentsize * shnum
        if machine == EM_BPF and shentsize == 64 and 0 < shnum < 10000 and end <= len(blob):
            out.append(blob[i:end])
            i = end
        else:
            i += 4


def bpf_digest(obj: bytes) -> str:
    """sha256 of a BPF object's loaded parts: every section but BTF, debug info and the like (named by name and
    contents), so that the same source built in another folder or on another host hashes alike."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", obj, 0x3C)
    heads = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * k) for k in range(shnum)]
    names = heads[shstrndx]
    h = hashlib.sha256()
    for sh_name, sh_type, *_r in heads:
        name = obj[names[4] + sh_name:obj.index(b"\0", names[4] + sh_name)].decode(errors="replace")
        if not name or name.startswith(_SKIP):
            continue
        off, size = _r[2], _r[3]
        h.update(name.encode() + b"\0" + (b"" if sh_type == 8 else obj[off:off + size]))  # 8: NOBITS (.bss)
    return h.hexdigest()


def default_flags(help_text: str) -> str:
    """The scheduler's default flags from its --help-all: "--opt=default ..." in the order of the help."""
    out, opt = [], None
    for line in help_text.splitlines():
        # an option's own line (clap indents it by 2 or 6, a description by 10 or more)
        m = re.match(r"(?:  -\w, |      )(--[\w-]+)", line)
        if m:
            opt = m.group(1)
        d = re.search(r"\[default: ([^\]]*)\]", line)
        if d and opt:
            out.append(f"{opt}={d.group(1)}")
            opt = None
    return " ".join(out)


def _run(binary: Path, arg: str) -> str:
    try:
        r = subprocess.run([str(binary), arg], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout if r.returncode == 0 else ""


def current_stamp(binary: Path | None = None) -> dict:
    """The stamp of the scx_locality build the lab runs (image.scheduler_binary()): commit, behaviour (None
    when the binary is missing or carries no BPF object), and its parts."""
    binary = binary or image.scheduler_binary()
    try:
        blob = binary.read_bytes()
    except OSError:
        return {"commit": None, "behaviour": None, "bpf": None, "flags": None, "binary": None}
    objs = bpf_objects(blob)
    version = _run(binary, "--version")
    m = re.search(r"-g([0-9a-f]{7,40})", version)
    # --help-all: every option, the hidden experiment switches too (a build before it had only --help)
    flags = default_flags(_run(binary, "--help-all") or _run(binary, "--help"))
    bpf = hashlib.sha256("".join(bpf_digest(o) for o in objs).encode()).hexdigest()[:16] if objs else None
    behaviour = None
    if bpf:
        behaviour = hashlib.sha256(f"{bpf} {flags}".encode()).hexdigest()[:16]
    return {"commit": m.group(1) if m else None, "behaviour": behaviour, "bpf": bpf, "flags": flags,
            "binary": hashlib.sha256(blob).hexdigest()[:16]}


def staleness(cell: dict, current: dict) -> str | None:
    """None when the cell is of the current behaviour (or holds no scx_locality run), else why it is stale."""
    if not any(s.split(":", 1)[0] == OURS for s in cell["key"]["scheds"]):
        return None
    was = cell.get("stamp") or {}
    if not was.get("behaviour"):
        return "its build is unknown"
    if not current.get("behaviour"):
        return None  # no current build to compare with: the page says so in its head
    if was["behaviour"] == current["behaviour"]:
        return None
    why = []
    if was.get("bpf") != current.get("bpf"):
        why.append("BPF changed")
    if was.get("flags") != current.get("flags"):
        why.append("default flags changed")
    return ", ".join(why) or "behaviour changed"


def is_whole(run: dict) -> bool:
    """Did a bench's run (of results.json's or a cell's "runs") run every step to its end? A boot that a guest
    fault cut short, even after the bench booted again, leaves its steps' cases unrun."""
    return bool(run.get("steps") and run.get("completed"))


def whole_runs(runs: list[dict]) -> int:
    return sum(1 for run in runs if is_whole(run))


def age(cell: dict, now: dt.datetime | None = None) -> float:
    """Seconds since the cell's date."""
    now = now or dt.datetime.now(dt.timezone.utc)
    try:
        d = dt.datetime.strptime(cell["date"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    except (KeyError, ValueError):
        return float("inf")
    return max((now - d).total_seconds(), 0.0)


def fmt_age(s: float) -> str:
    if s == float("inf"):
        return "age unknown"
    if s < 3600:
        return f"{int(s // 60)} min"
    if s < 2 * 86400:
        return f"{s / 3600:.0f} h"
    return f"{s / 86400:.0f} days"


# ---------------------------------------------------------------------------------------------------------
# A cell from a bench folder


def trim(results: dict) -> dict:
    """A compact copy of a results.json: what the page reads, without the raw parts (see TRIM_NOTE)."""
    r = copy.deepcopy(results)
    r.pop("sampler", None)
    for run in r.get("runs", []):
        run.pop("run_dir", None)
        if isinstance(run.get("memory_model"), dict):
            run["memory_model"] = {k: run["memory_model"].get(k) for k in ("layout_ok", "error")}
        for st in run.get("steps", []):
            st.pop("final_stats", None)
            st.pop("sched_log", None)
            for c in st.get("cases", []):
                for k in ("files", "interrupts", "sampler"):
                    c.pop(k, None)
                if c.get("idle_queued"):
                    c["idle_queued"] = {k: c["idle_queued"].get(k) for k in ("llc_ms", "node_ms")}
                if c.get("memory"):
                    c["memory"] = {k: v for k, v in c["memory"].items()
                                   if not isinstance(v, (dict, list)) or k == "by_distance_pct"}
    r["trimmed"] = TRIM_NOTE
    return r


def one_bench(results: dict, name: str) -> dict:
    """results.json narrowed to one of its benchmarks."""
    r = dict(results)
    r["benchmarks"] = {name: results["benchmarks"][name]}
    r["runs"] = [dict(run, steps=[st for st in run["steps"] if st["bench"] == name]) for run in results["runs"]]
    return r


def _summary_field(summary: str, pattern: str) -> str:
    m = re.search(pattern, summary or "")
    return m.group(1).strip() if m else ""


def hardware(results: dict) -> dict:
    """What a bench --host folder ran on, from its machine summary ("[this host: MODEL; kernel K]") and topology."""
    summary = results.get("machine_summary", "")
    what = _summary_field(summary, r"\[this host: ([^\]]*)\]")
    kernel = _summary_field(what, r"kernel (\S+)")
    model = what.split(";")[0].strip() if what and not what.startswith("kernel ") else ""
    topo = results.get("topology") or {}
    return {"kind": "hardware", "cpu_model": model, "cpus": results.get("nr_cpus"),
            "nodes": len(topo.get("nodes", [])), "llcs": len(topo.get("llcs", [])), "kernel": kernel,
            "summary": summary}


def hardware_machine(hw: dict) -> str:
    model = re.sub(r"\(R\)|\(TM\)|CPU|Processor|@.*$", "", hw.get("cpu_model") or "unknown")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", model).strip("-").lower()[:40] or "unknown"
    return f"hw-{slug}-{hw.get('cpus')}c{hw.get('nodes')}n{hw.get('llcs')}l"


def lab_runner() -> dict:
    """The host that runs the QEMU guests: CPU model and cores (recorded; no key depends on it)."""
    model = ""
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = " ".join(m.group(1).split()) if m else ""
    except OSError:
        pass
    return {"kind": "lab", "cpu_model": model, "cores": os.cpu_count()}


def build_digest(binary: Path) -> str | None:
    """bench.build_ids' digest of a binary (16 hex digits of its sha256)."""
    try:
        return hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _duration(results: dict, name: str) -> float:
    """Lab time of one benchmark of a bench folder: each run's wall time, shared among its benchmarks by their
    steps' command time when the boot ran several."""
    total = 0.0
    for run in results.get("runs", []):
        steps = run.get("steps") or []
        mine = [st for st in steps if st["bench"] == name]
        if not mine:
            continue
        all_s = sum(st.get("cmd_seconds") or 0.0 for st in steps)
        share = (sum(st.get("cmd_seconds") or 0.0 for st in mine) / all_s if all_s
                 else 1.0 / max(len(results.get("benchmarks", {})), 1))
        total += (run.get("wall_s") or 0.0) * share
    return total


def cells_from_results(results: dict, date: str, stamp: dict | None, runner: dict | None = None,
                       estimate_s=None) -> list[dict]:
    """One cell per benchmark of a bench folder's results.json. stamp: the scx_locality build's (current_stamp)
    when the folder ran that build, else None (the cell's behaviour is then unknown: stale). estimate_s: the
    matrix's estimate of each cell's runs, {spec: seconds} or a function (machine, spec, schedulers, runs)."""
    labels = [s["label"] for s in results.get("scheds", [])]
    builds = results.get("builds") or {}
    if results.get("host"):
        hw = hardware(results)
        machine, host = hardware_machine(hw), hw
    else:
        machine, host = results["machine"], runner or lab_runner()
    ours = [s for s in labels if s.split(":", 1)[0] == OURS]
    st = {"commit": None, "behaviour": None, "bpf": None, "flags": None}
    if stamp and ours and builds.get(ours[0]) == stamp.get("binary"):
        st = {k: stamp.get(k) for k in st}
    cells = []
    for name, bdef in results.get("benchmarks", {}).items():
        r = trim(one_bench(results, name))
        spec = bdef.get("spec", name)
        runs = [run for run in r["runs"] if run.get("steps")]
        key = {"machine": machine, "spec": spec, "scheds": labels}
        if results.get("memory_model"):  # a slowed guest (6-11x): never pooled with the plain cell
            key["memory_model"] = True
        cells.append({
            "cell": CELL_VERSION,
            "key": key,
            "stamp": st,
            "peers": {s: builds.get(s) for s in labels if s.split(":", 1)[0] != OURS and s != "eevdf"},
            "date": date, "runs": len(runs),
            "duration_s": round(_duration(results, name), 1),
            "estimate_s": (estimate_s(results.get("machine"), spec, labels, len(runs)) if callable(estimate_s)
                           else (estimate_s or {}).get(spec)),
            "host": host, "lab_machine": results.get("machine"),
            "results": r,
        })
    return cells


def folder_date(folder: Path) -> str:
    """When a bench folder's last run ended: its results.json's modification time, UTC."""
    t = (folder / "results.json").stat().st_mtime
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def add_folder(store: Path, folder: Path, stamp: dict | None = None, estimate_s=None,
               runner: dict | None = None) -> list[Path]:
    """Put a bench folder (bin/lab bench, bench --host, or one of a matrix) into the store, one cell per benchmark;
    the stamp is the current build's (current_stamp()) when the folder ran it. Folders with no run are refused."""
    p = folder / "results.json"
    try:
        results = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise StoreError(f"{folder}: no results.json to store ({e})") from None
    if not any(run.get("steps") for run in results.get("runs", [])):
        raise StoreError(f"{folder}: it holds no run")
    if results.get("sched_extra_flags"):  # a variant (lab/run.py): its cells would pass for the default's
        raise StoreError(f"{folder}: its scx_locality ran with LOCALITY_SCHED_EXTRA_FLAGS="
                         f"{' '.join(results['sched_extra_flags'])}, not its default flags")
    if stamp is None:
        stamp = current_stamp()
    cells = cells_from_results(results, folder_date(folder), stamp, runner, estimate_s)
    with Lock(store):
        return [write_cell(store, c) for c in cells]


def peer_versions() -> dict[str, str]:
    """The peers' pinned versions (lab/schedulers.toml)."""
    return {n: str(e.get("version", "")) for n, e in peers.registry_peers().items()}
