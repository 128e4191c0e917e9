# SPDX-License-Identifier: GPL-2.0-only
"""Modeled machines: one TOML file each under lab/machines/.

A machine file says what real machine it scales down (models) and which published work it comes from
(origin), and gives the topology the guest must show: sockets, cores, SMT threads, NUMA nodes (as cpulists),
SLIT distances and LLCs. From it we derive the QEMU command line and the topology the guest must report at boot.

QEMU gives every socket exactly one L3 (shared/LAB-NOTES.md), so a machine whose LLCs are not its sockets
must say why in `llc_override_why`; the lab then hands the scheduler an override file with the real LLCs.

The optional `[memory]` table feeds the lab's memory model (lab/memmodel.py, `bin/lab bench --memory-model`):
each LLC's size, scaled like the CPU counts, and the modeled CPU's latencies, with their published source.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import paths


class MachineError(Exception):
    """A machine file that cannot be used; the message names the file and the field."""


class UnknownMachine(Exception):
    pass


def parse_cpulist(text: str) -> list[int]:
    """Parse Linux cpulist syntax ("0-3,8,10-11") into a sorted list of CPU numbers."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo_s, hi_s = part.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
            if lo > hi:
                raise ValueError(f"range {part!r} runs backwards")
            cpus.update(range(lo, hi + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def format_cpulist(cpus: list[int]) -> str:
    """Inverse of parse_cpulist: sorted CPUs back to the kernel's compact form."""
    out: list[str] = []
    cpus = sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class Topology:
    """CPUs by node, LLC and core (SMT siblings), and the nodes' distances; groups are tuples of CPU tuples.
    Machine.topology() is what the machine models (its LLCs, those the scheduler is told); guest_topology() is
    what its guest must show, with the groups sorted so that == compares sets."""
    nodes: tuple[tuple[int, ...], ...]
    llcs: tuple[tuple[int, ...], ...]
    smt: tuple[tuple[int, ...], ...]
    distances: tuple[tuple[int, ...], ...]

    @classmethod
    def from_json(cls, d: dict) -> "Topology":
        """The inverse of to_json (results.json's "topology", which has no distances)."""
        return cls(nodes=_tuples(d["nodes"]), llcs=_tuples(d["llcs"]), smt=_tuples(d["cores"]), distances=())

    def to_json(self) -> dict:
        return {"nodes": [list(n) for n in self.nodes], "llcs": [list(g) for g in self.llcs],
                "cores": [list(g) for g in self.smt]}

    @staticmethod
    def _index(groups) -> dict[int, int]:
        return {cpu: i for i, g in enumerate(groups) for cpu in g}

    def node_of(self) -> dict[int, int]:
        return self._index(self.nodes)

    def llc_of(self) -> dict[int, int]:
        return self._index(self.llcs)

    def core_of(self) -> dict[int, int]:
        return self._index(self.smt)

    def cpu_order(self) -> list[int]:
        """CPUs sorted by node, LLC, core: the rows of the utilisation heatmap."""
        node, llc, core = self.node_of(), self.llc_of(), self.core_of()
        return sorted(node, key=lambda c: (node[c], llc.get(c, -1), core.get(c, -1), c))

    def describe(self) -> dict:
        return {
            "nodes": [format_cpulist(list(n)) for n in self.nodes],
            "llcs": [format_cpulist(list(g)) for g in self.llcs],
            "smt": [format_cpulist(list(g)) for g in self.smt],
            "distances": [list(r) for r in self.distances],
        }

    def differences(self, other: "Topology") -> list[str]:
        """Field names where self and other disagree."""
        return [f for f in ("nodes", "llcs", "smt", "distances") if getattr(self, f) != getattr(other, f)]


def _tuples(groups) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g) for g in groups)


def _groups(groups) -> tuple[tuple[int, ...], ...]:
    return tuple(sorted(tuple(sorted(g)) for g in groups))


@dataclass(frozen=True)
class MemoryModel:
    """The `[memory]` table: one LLC's size and associativity (every LLC of the machine alike), and the latency
    of an LLC hit, a miss to local DRAM and a miss to the farthest node's DRAM (nearer nodes are interpolated by
    SLIT distance), from `source`."""
    llc_kb: int
    llc_ways: int
    llc_hit_ns: float
    dram_local_ns: float
    dram_remote_ns: float
    source: str

    def miss_ns(self, distance: int, farthest: int) -> float:
        """A miss to memory at SLIT distance (10 is local): linear in distance up to the farthest node."""
        if distance <= 10 or farthest <= 10:
            return self.dram_local_ns
        return self.dram_local_ns + (self.dram_remote_ns - self.dram_local_ns) * (distance - 10) / (farthest - 10)


_MEMORY_FIELDS = {"llc_kb": int, "llc_ways": int, "llc_hit_ns": (int, float), "dram_local_ns": (int, float),
                  "dram_remote_ns": (int, float), "source": str}


def _memory_model(path: Path, d) -> MemoryModel:
    if not isinstance(d, dict):
        _fail(path, "memory", "must be a table ([memory])")
    for k, typ in _MEMORY_FIELDS.items():
        if k not in d:
            _fail(path, f"memory.{k}", "missing")
        if not isinstance(d[k], typ) or isinstance(d[k], bool):
            _fail(path, f"memory.{k}", f"has the wrong type ({type(d[k]).__name__})")
    unknown = sorted(set(d) - set(_MEMORY_FIELDS))
    if unknown:
        _fail(path, f"memory.{unknown[0]}", f"unknown field (known: {', '.join(_MEMORY_FIELDS)})")
    if not 1 <= d["llc_ways"] <= 64 or not 16 <= d["llc_kb"] <= 1 << 20:
        _fail(path, "memory", "llc_ways must be 1..64 and llc_kb 16..1048576")
    if not 0 < d["llc_hit_ns"] < d["dram_local_ns"] <= d["dram_remote_ns"]:
        _fail(path, "memory", "latencies must grow: 0 < llc_hit_ns < dram_local_ns <= dram_remote_ns")
    return MemoryModel(**{k: d[k] for k in _MEMORY_FIELDS})


@dataclass
class Machine:
    name: str
    path: Path
    models: str
    origin: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb_per_node: int
    nodes: list[list[int]]
    distances: list[list[int]]
    llcs: list[list[int]]
    llc_override_why: str | None = None
    boot_timeout_s: int = 240
    extra: dict = field(default_factory=dict)
    memory: MemoryModel | None = None

    @property
    def nr_cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def socket_cpus(self) -> list[list[int]]:
        per = self.cores_per_socket * self.threads_per_core
        return [list(range(s * per, (s + 1) * per)) for s in range(self.sockets)]

    def smt_groups(self) -> list[list[int]]:
        t = self.threads_per_core
        return [list(range(c * t, (c + 1) * t)) for c in range(self.nr_cpus // t)]

    @property
    def needs_llc_override(self) -> bool:
        return _groups(self.llcs) != _groups(self.socket_cpus())

    def topology(self) -> Topology:
        """CPU -> node, LLC and core of the modeled machine (the LLCs the scheduler is told, not QEMU's)."""
        return Topology(nodes=_tuples(self.nodes), llcs=_tuples(self.llcs), smt=_tuples(self.smt_groups()),
                        distances=_tuples(self.distances))

    def guest_topology(self) -> Topology:
        """What the booted guest must report: QEMU's L3 is per socket, whatever the model says."""
        return Topology(
            nodes=_tuples(self.nodes),  # node order matters: node i holds nodes[i]
            llcs=_groups(self.socket_cpus()),
            smt=_groups(self.smt_groups()),
            distances=_tuples(self.distances),
        )

    def llc_override(self) -> dict | None:
        """The scheduler's topology override (scx_locality --topology-override), when the guest can't show LLCs."""
        if not self.needs_llc_override:
            return None
        return {"llcs": [format_cpulist(g) for g in self.llcs], "comment": self.llc_override_why}

    def summary(self) -> str:
        smt = f"{self.threads_per_core} SMT" if self.threads_per_core > 1 else "no SMT"
        llc_sizes = sorted({len(g) for g in self.llcs})
        llc_desc = f"{len(self.llcs)} LLCs of {'/'.join(map(str, llc_sizes))} CPUs"
        far = max((d for row in self.distances for d in row), default=10)
        text = (f"{self.name:12s} {self.nr_cpus:3d} CPUs  {len(self.nodes)} nodes  {llc_desc}  {smt}  "
                f"max distance {far}")
        if self.needs_llc_override:
            text += "  [LLC override: the guest cannot show these LLCs; the scheduler is told them]"
        return text

    def qemu_topology_args(self) -> list[str]:
        args = ["-smp", f"{self.nr_cpus},sockets={self.sockets},cores={self.cores_per_socket},"
                        f"threads={self.threads_per_core}",
                "-m", f"{self.memory_mb_per_node * len(self.nodes)}M"]
        for i, cpus in enumerate(self.nodes):
            args += ["-object", f"memory-backend-ram,id=mem{i},size={self.memory_mb_per_node}M",
                     "-numa", f"node,nodeid={i},cpus={format_cpulist(cpus)},memdev=mem{i}"]
        for i, row in enumerate(self.distances):
            for j, d in enumerate(row):
                if i < j:
                    args += ["-numa", f"dist,src={i},dst={j},val={d}"]
        return args


_REQUIRED = {
    "name": str, "models": str, "origin": str, "sockets": int, "cores_per_socket": int,
    "threads_per_core": int, "memory_mb_per_node": int, "nodes": list, "distances": list, "llcs": list,
}
_OPTIONAL = {"llc_override_why": str, "boot_timeout_s": int, "memory": dict}

# What the lab can boot: QEMU's default machine (pc, i440fx) takes at most 255 vCPUs.
MAX_CPUS = 255
MAX_NODES = 128
MAX_PER_LEVEL = 64  # sockets, cores per socket, threads per core
MEMORY_MB_PER_NODE = (128, 8192)
MAX_GUEST_MEMORY_MB = 65536
# A boot under TCG takes seconds to minutes (64 vCPUs on 2 host cores: about 110 s); an hour is a hang.
BOOT_TIMEOUT_S = (10, 3600)
# Host memory left to the host itself when a guest is checked against it (check_host).
HOST_RESERVE_MB = 1024


def _fail(path: Path, fld: str, why: str):
    raise MachineError(f"{path}: field '{fld}': {why}")


def _cpulists(path: Path, fld: str, value, nr_cpus: int) -> list[list[int]]:
    groups = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            _fail(path, fld, f"entry {i} must be a cpulist string like \"0-3\", got {item!r}")
        try:
            cpus = parse_cpulist(item)
        except ValueError as e:
            _fail(path, fld, f"entry {i} {item!r} is not a cpulist ({e})")
        if not cpus:
            _fail(path, fld, f"entry {i} is empty")
        if cpus[-1] >= nr_cpus:
            _fail(path, fld, f"entry {i} names CPU {cpus[-1]} but the machine has {nr_cpus} CPUs")
        groups.append(cpus)
    seen = [c for g in groups for c in g]
    if sorted(seen) != list(range(nr_cpus)):
        dup = sorted({c for c in seen if seen.count(c) > 1})
        missing = sorted(set(range(nr_cpus)) - set(seen))
        _fail(path, fld, f"must cover CPUs 0-{nr_cpus - 1} exactly once"
                         + (f"; listed twice: {format_cpulist(dup)}" if dup else "")
                         + (f"; missing: {format_cpulist(missing)}" if missing else ""))
    return groups


def load_file(path: Path) -> Machine:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise MachineError(f"{path}: not valid TOML: {e}") from None
    for fld, typ in _REQUIRED.items():
        if fld not in data:
            _fail(path, fld, "missing")
        if not isinstance(data[fld], typ) or (typ is int and isinstance(data[fld], bool)):
            _fail(path, fld, f"must be {typ.__name__}, got {type(data[fld]).__name__}")
    for fld, typ in _OPTIONAL.items():
        if fld in data and (not isinstance(data[fld], typ) or (typ is int and isinstance(data[fld], bool))):
            _fail(path, fld, f"must be {typ.__name__}, got {type(data[fld]).__name__}")
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        _fail(path, unknown[0], f"unknown field (known: {', '.join(sorted({**_REQUIRED, **_OPTIONAL}))})")
    if data["name"] != path.stem:
        _fail(path, "name", f"{data['name']!r} must match the file name {path.stem!r}")
    for fld in ("sockets", "cores_per_socket", "threads_per_core"):
        if not 1 <= data[fld] <= MAX_PER_LEVEL:
            _fail(path, fld, f"{data[fld]} is out of range 1..{MAX_PER_LEVEL}")
    lo, hi = MEMORY_MB_PER_NODE
    if not lo <= data["memory_mb_per_node"] <= hi:
        _fail(path, "memory_mb_per_node", f"{data['memory_mb_per_node']} is out of range {lo}..{hi}")
    nr_cpus = data["sockets"] * data["cores_per_socket"] * data["threads_per_core"]
    if nr_cpus > MAX_CPUS:
        _fail(path, "sockets", f"sockets x cores_per_socket x threads_per_core = {nr_cpus} CPUs; the lab boots at "
                               f"most {MAX_CPUS} (QEMU's pc machine)")
    lo, hi = BOOT_TIMEOUT_S
    if "boot_timeout_s" in data and not lo <= data["boot_timeout_s"] <= hi:
        _fail(path, "boot_timeout_s", f"{data['boot_timeout_s']} is out of range {lo}..{hi} seconds")
    nodes = _cpulists(path, "nodes", data["nodes"], nr_cpus)
    if len(nodes) > MAX_NODES:
        _fail(path, "nodes", f"{len(nodes)} nodes; QEMU takes at most {MAX_NODES}")
    llcs = _cpulists(path, "llcs", data["llcs"], nr_cpus)
    t = data["threads_per_core"]
    for fld, groups in (("nodes", nodes), ("llcs", llcs)):
        for g in groups:
            for c in g:
                if any(s not in g for s in range(c - c % t, c - c % t + t)):
                    _fail(path, fld, f"CPU {c}'s SMT siblings must be in the same group")
    for llc in llcs:
        homes = {i for i, n in enumerate(nodes) if set(llc) & set(n)}
        if len(homes) != 1:
            _fail(path, "llcs", f"LLC {format_cpulist(llc)} spans nodes {sorted(homes)}; an LLC sits in one node")
    dist = data["distances"]
    n = len(nodes)
    total_mb = data["memory_mb_per_node"] * n
    if total_mb > MAX_GUEST_MEMORY_MB:
        _fail(path, "memory_mb_per_node", f"{n} nodes x {data['memory_mb_per_node']} MB = {total_mb} MB; the lab "
                                          f"gives a guest at most {MAX_GUEST_MEMORY_MB} MB")
    if len(dist) != n or any(not isinstance(r, list) or len(r) != n for r in dist):
        _fail(path, "distances", f"must be a {n}x{n} matrix (one row and column per node)")
    for i in range(n):
        for j in range(n):
            d = dist[i][j]
            if not isinstance(d, int) or isinstance(d, bool):
                _fail(path, "distances", f"[{i}][{j}] must be an integer")
            if i == j and d != 10:
                _fail(path, "distances", f"[{i}][{i}] must be 10 (local)")
            if i != j and not 10 < d <= 255:
                _fail(path, "distances", f"[{i}][{j}] = {d} must be in 11..255")
            if dist[j][i] != d:
                _fail(path, "distances", f"not symmetric at [{i}][{j}]; QEMU sets both directions at once")
    m = Machine(name=data["name"], path=path, models=data["models"], origin=data["origin"],
                sockets=data["sockets"], cores_per_socket=data["cores_per_socket"], threads_per_core=t,
                memory_mb_per_node=data["memory_mb_per_node"], nodes=nodes, distances=dist, llcs=llcs,
                llc_override_why=data.get("llc_override_why"), boot_timeout_s=data.get("boot_timeout_s", 240),
                memory=_memory_model(path, data["memory"]) if "memory" in data else None)
    # QEMU's L3 is per socket, so a socket split across nodes would give the guest an L3 spanning nodes.
    for sock in m.socket_cpus():
        if not any(set(sock) <= set(nd) for nd in nodes):
            _fail(path, "nodes", f"socket CPUs {format_cpulist(sock)} are split across nodes; QEMU's L3 would "
                                 "span nodes (model each LLC as a socket instead)")
    if m.needs_llc_override and not m.llc_override_why:
        _fail(path, "llc_override_why", "the llcs differ from QEMU's one-L3-per-socket, so the file must say why "
                                        "an override is used")
    if not m.needs_llc_override and m.llc_override_why:
        _fail(path, "llc_override_why", "given, but the llcs are what QEMU shows; remove it")
    return m


def host_memory_mb() -> int:
    """The host's MemTotal in MB."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("/proc/meminfo has no MemTotal")


def check_host(m: Machine) -> None:
    """Raise MachineError if this host cannot give m its memory (MemTotal less HOST_RESERVE_MB for the host)."""
    total = m.memory_mb_per_node * len(m.nodes)
    room = host_memory_mb() - HOST_RESERVE_MB
    if total > room:
        raise MachineError(f"{m.path}: field 'memory_mb_per_node': {len(m.nodes)} nodes x {m.memory_mb_per_node} MB "
                           f"= {total} MB is more than this host can give a guest ({room} MB: MemTotal less "
                           f"{HOST_RESERVE_MB} MB for the host)")


def machine_dir() -> Path:
    return paths.REPO / "lab" / "machines"


def known() -> list[str]:
    return sorted(p.stem for p in machine_dir().glob("*.toml"))


def load(name_or_path: str) -> Machine:
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.exists():
        return load_file(p)
    path = machine_dir() / f"{name_or_path}.toml"
    if not path.exists():
        raise UnknownMachine(f"unknown machine {name_or_path!r}; known machines: {', '.join(known())}")
    return load_file(path)


def override_file(machine: Machine, dest: Path) -> Path | None:
    ov = machine.llc_override()
    if ov is None:
        return None
    dest.write_text(json.dumps(ov, indent=1) + "\n")
    return dest
