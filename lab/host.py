# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab bench --host: the bench on this machine itself instead of in a QEMU guest.

Everything but the place is the guest path's: the same step plan (lab/bench.py), the same step scripts
(lab/guest_script.py) and job script (run.job_script), sourcing the same lab/guest/lib.sh, and the same
parsing of the same records (run.parse_ctl, lab/samples.py) into the same results.json and report. What
differs:

- the job script runs as a local process (/bin/sh, in a session of its own) instead of as the guest's init;
  its records go to the run folder's ctl.log (lib.sh's LAB_CTL) instead of the guest's ttyS1, its scratch
  files to a temporary folder (LAB_TMP) that is removed afterwards, and its output is the "console";
- the machine is the real one: read_machine() derives nodes, LLCs, SMT siblings and distances from /sys (no
  lab/machines/*.toml, so --machine is refused), and there is no boot and no topology check;
- the kernel log is the host's: KernelLog reads /dev/kmsg from the job's start on (not the whole dmesg,
  which holds older sched_ext exits);
- the machine must be made ready and left as it was: check_environment() and check_programs() refuse, before
  anything runs, what this machine cannot do (one line each: not root, no sched_ext, sched_ext in use by
  another scheduler, a missing program, named with what provides it); Session puts back the settings the
  benchmarks change (SETTINGS, addresses added to lo) after every run, as a new boot would, and removes its
  temporary folder at the end; Session.run_job stops whatever the job left running (its shell, then the
  scheduler with SIGINT, as lib.sh's lab_sched_stop does, then the rest) and waits for sched_ext to read
  "disabled", on every way out (the job's end, a time limit, an error, Ctrl-C/SIGTERM/SIGHUP). Its messages
  never stop it: a log line that cannot be written (a closed pipe or terminal) is dropped.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import benchfile, image, machines, paths, peers, run, setup

# Where the kernel is read; tests point SYS at a fake tree (lib.sh gets it as LAB_SYS).
SYS = Path("/sys")
PROC = Path("/proc")
KMSG = "/dev/kmsg"
LIB = paths.REPO / "lab" / "guest" / "lib.sh"

# What the bench's scripts may change on the machine, put back afterwards: bpfcost -e switches
# kernel.bpf_stats_enabled on (guest_script.py), memory-jbb2 switches kernel.numa_balancing on.
SETTINGS = ("kernel/bpf_stats_enabled", "kernel/numa_balancing")

# Programs the benchmark commands call, and what provides each (said when one is missing). A benchmark needs
# those whose name appears as a word in one of its commands; the harness always needs locsample and bpfcost
# (guest_script.py) and base64 (lib.sh's lab_put_file).
PROVIDERS = {
    "hackbench": "Debian package rt-tests",
    "stress-ng": "Debian package stress-ng",
    "netperf": "Debian package netperf (non-free; bin/lab setup caches one)",
    "netserver": "Debian package netperf (non-free; bin/lab setup caches one)",
    "numactl": "Debian package numactl",
    "migratepages": "Debian package numactl",
    "sysbench": "Debian package sysbench",
    "base64": "Debian package coreutils",
}
HARNESS_PROGRAMS = ("locsample", "bpfcost", "base64")
WORKLOADS_HINT = "make -C workloads"

# How long the stop waits for a scheduler to exit after SIGINT (as lab_sched_stop), then after SIGKILL for
# sched_ext to read "disabled".
STOP_WAIT_S = 30.0
DISABLE_WAIT_S = 30.0


class HostRefused(Exception):
    """This machine cannot run the bench (exit run.EXIT_HOST); the message is the one line said."""


# ---------------------------------------------------------------------------------------------------------
# The machine: its topology from /sys


@dataclass
class HostMachine:
    """This machine, standing in for a machines.Machine in the bench: name, topology and a summary line."""
    name: str
    nodes: tuple[tuple[int, ...], ...]
    node_ids: tuple[int, ...]  # the kernel's node numbers (nodes[i] is node node_ids[i])
    llcs: tuple[tuple[int, ...], ...]
    smt: tuple[tuple[int, ...], ...]
    distances: tuple[tuple[int, ...], ...]  # () when the kernel's rows could not be read
    llc_level: int | None  # the cache level taken as LLC (None: no cache information, one LLC per node)
    cpus_present: int  # CPUs the kernel knows, online or not
    kernel: str = ""
    cpu_model: str = ""

    @property
    def nr_cpus(self) -> int:
        return sum(len(n) for n in self.nodes)

    def topology(self) -> machines.Topology:
        return machines.Topology(nodes=self.nodes, llcs=self.llcs, smt=self.smt, distances=self.distances)

    def summary(self) -> str:
        """One line in the form of machines.Machine.summary, plus what this host is."""
        widths = sorted({len(g) for g in self.smt})
        smt = "no SMT" if widths == [1] else f"{'/'.join(map(str, widths))} SMT"
        sizes = "/".join(map(str, sorted({len(g) for g in self.llcs})))
        llc = f"{len(self.llcs)} LLCs of {sizes} CPUs" + (f" (L{self.llc_level})" if self.llc_level else
                                                          " (no cache information: one per node)")
        far = f"max distance {max(d for row in self.distances for d in row)}" if self.distances else \
            "distances unknown"
        text = f"{self.name:12s} {self.nr_cpus:3d} CPUs  {len(self.nodes)} nodes  {llc}  {smt}  {far}"
        if self.cpus_present > self.nr_cpus:
            text += f"  ({self.cpus_present - self.nr_cpus} CPUs offline)"
        what = "; ".join(x for x in (self.cpu_model, f"kernel {self.kernel}" if self.kernel else "") if x)
        return text + f"  [this host{': ' + what if what else ''}]"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _partition(groups: dict[int, set[int]]) -> tuple[tuple[int, ...], ...]:
    """The groups each CPU reported (cpu -> the CPUs it shares with), merged where they overlap, so that every
    CPU is in exactly one group; sorted by first CPU."""
    merged: list[set[int]] = []
    for cpu in sorted(groups):
        g = set(groups[cpu]) | {cpu}
        for other in [m for m in merged if m & g]:
            g |= other
            merged.remove(other)
        merged.append(g)
    return tuple(sorted(tuple(sorted(g)) for g in merged))


def read_machine(sys_root: Path | None = None, name: str | None = None) -> HostMachine:
    """This machine's online CPUs by NUMA node, LLC (the highest cache level a CPU reports) and SMT core, and the
    nodes' distances, from sysfs. Nodes without CPUs (memory only) are left out; without NUMA support there is
    one node; a CPU without cache information gets its node as LLC."""
    sys_root = SYS if sys_root is None else sys_root
    cpu_dir = sys_root / "devices" / "system" / "cpu"
    node_dir = sys_root / "devices" / "system" / "node"
    online_text = _read(cpu_dir / "online")
    present = sorted(int(p.name[3:]) for p in cpu_dir.glob("cpu[0-9]*") if p.name[3:].isdigit())
    online = machines.parse_cpulist(online_text) if online_text else present
    if not online:
        raise HostRefused(f"no online CPU found in {cpu_dir}")
    on = set(online)

    # NUMA nodes: node ids in order; each node's distance row has one column per online node.
    ids = sorted(int(p.name[4:]) for p in node_dir.glob("node[0-9]*") if p.name[4:].isdigit())
    columns = machines.parse_cpulist(_read(node_dir / "online") or "") or ids
    nodes, node_ids, rows = [], [], []
    for nid in ids:
        cpus = sorted(set(machines.parse_cpulist(_read(node_dir / f"node{nid}" / "cpulist") or "")) & on)
        if not cpus:
            continue
        nodes.append(tuple(cpus))
        node_ids.append(nid)
        rows.append((_read(node_dir / f"node{nid}" / "distance") or "").split())
    if not nodes:
        nodes, node_ids, rows = [tuple(online)], [0], [["10"]]
        columns = [0]
    orphans = on - {c for n in nodes for c in n}
    if orphans:  # online CPUs no node lists (seen in no real kernel): give them the first node
        nodes[0] = tuple(sorted(set(nodes[0]) | orphans))
    try:
        distances = tuple(tuple(int(r[columns.index(j)]) for j in node_ids) for r in rows)
    except (ValueError, IndexError):
        distances = ()

    # LLC: per CPU, the cache of the highest level (data or unified) and the CPUs sharing it.
    node_of = {c: i for i, n in enumerate(nodes) for c in n}
    levels: dict[int, int] = {}
    llc_groups: dict[int, set[int]] = {}
    for cpu in online:
        best = None
        for idx in (cpu_dir / f"cpu{cpu}" / "cache").glob("index[0-9]*"):
            level, kind = _read(idx / "level"), _read(idx / "type")
            shared = _read(idx / "shared_cpu_list")
            if not (level and level.isdigit() and shared) or kind == "Instruction":
                continue
            if best is None or int(level) > best[0]:
                best = (int(level), set(machines.parse_cpulist(shared)) & on)
        if best:
            levels[cpu] = best[0]
            llc_groups[cpu] = best[1]
        else:
            llc_groups[cpu] = set(nodes[node_of[cpu]])
    smt_groups = {cpu: set(machines.parse_cpulist(
        _read(cpu_dir / f"cpu{cpu}" / "topology" / "thread_siblings_list") or str(cpu))) & on for cpu in online}
    llc_level = max(levels.values()) if levels and len(levels) == len(online) else None
    host = name or "host-" + re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname().split(".")[0] or "unknown")
    model = ""
    cpuinfo = _read(PROC / "cpuinfo") or ""
    m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if m:
        model = " ".join(m.group(1).split())
    return HostMachine(name=host, nodes=tuple(nodes), node_ids=tuple(node_ids), llcs=_partition(llc_groups),
                       smt=_partition(smt_groups), distances=distances, llc_level=llc_level,
                       cpus_present=max(len(present), len(online)), kernel=os.uname().release, cpu_model=model)


# ---------------------------------------------------------------------------------------------------------
# Refusals: what this machine cannot run, said in one line before anything runs


def sched_ext_state(sys_root: Path | None = None) -> tuple[str | None, str]:
    """(state, ops) of sched_ext: state None when the kernel has none, else "disabled", "enabled", ..."""
    d = (SYS if sys_root is None else sys_root) / "kernel" / "sched_ext"
    if not d.is_dir():
        return None, ""
    return _read(d / "state") or "unknown", _read(d / "root" / "ops") or ""


def check_environment(specs: list[run.SchedSpec]) -> None:
    """Raise HostRefused when this machine cannot run the bench: not root; a sched_ext scheduler asked for and
    the kernel has none; another sched_ext scheduler loaded (whatever is asked: EEVDF steps would measure it)."""
    if os.geteuid() != 0:
        raise HostRefused("bench --host must run as root (it loads schedulers, runs its sampler as SCHED_FIFO "
                          "and reads BPF statistics); run it with sudo")
    state, ops = sched_ext_state()
    scx = [s.label for s in specs if not s.is_eevdf]
    if scx and state is None:
        raise HostRefused(f"this kernel ({os.uname().release}) has no sched_ext ({SYS}/kernel/sched_ext is "
                          f"missing), so {', '.join(scx)} cannot run; boot a kernel built with "
                          "CONFIG_SCHED_CLASS_EXT=y, or bench EEVDF alone (--sched eevdf)")
    if state is not None and state != "disabled":
        raise HostRefused(f"another sched_ext scheduler is loaded (state {state}"
                          + (f", ops {ops}" if ops else "") + "); stop it first (Ctrl-C its scx_* process, or "
                          "systemctl stop scx_locality / scx_loader / scx), then run the bench again")


def job_path() -> str:
    """PATH of the job: our workloads first, then the netperf bin/lab setup caches (if any), then the caller's."""
    parts = [str(image.workloads_bin_dir())]
    nd = setup.netperf_dir() / "usr" / "bin"
    if nd.is_dir():
        parts.append(str(nd))
    parts += [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if p]
    parts += [p for p in ("/usr/local/sbin", "/usr/sbin", "/sbin") if p not in parts]
    return ":".join(dict.fromkeys(parts))


def needed_programs(benches: list[benchfile.Benchmark], workloads: list[str]) -> list[str]:
    """The programs the benches' commands and the harness call: those of PROVIDERS and workloads named as a
    word in a command (not as part of another word or path)."""
    known = list(PROVIDERS) + list(workloads)
    text = "\n".join(c.command for b in benches for c in b.cases())
    found = [p for p in known if re.search(rf"(?<![\w./-]){re.escape(p)}(?![\w.-])", text)]
    return list(dict.fromkeys(list(HARNESS_PROGRAMS) + found))


def check_programs(benches: list[benchfile.Benchmark], workloads: list[str]) -> None:
    """Raise setup.SetupMissing naming every needed program that the job's PATH lacks and what provides it."""
    extra = [b.name for b in benches if b.image_extras]
    if extra:
        raise setup.SetupMissing(f"bench --host cannot run {', '.join(extra)}: what it runs (image_extras) "
                                 "exists only in the lab's guest image; run it in the lab")
    path = job_path()
    missing = [p for p in needed_programs(benches, workloads) if shutil.which(p, path=path) is None]
    if missing:
        hints = [f"{p} ({WORKLOADS_HINT if p in workloads else PROVIDERS.get(p, 'not packaged')})" for p in missing]
        raise setup.SetupMissing("bench --host: needed programs are missing: " + ", ".join(hints))


NETPERF_PORT = 12865  # the port the netperf benchmarks' own netserver listens on


def warnings(benches: list[benchfile.Benchmark]) -> list[str]:
    """What may make this machine's figures differ from the lab's, without stopping the bench."""
    out = []
    if "netserver" in needed_programs(benches, []):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", NETPERF_PORT))
            except OSError:
                out.append(f"port {NETPERF_PORT} is taken (Debian's netperf package starts a netserver): the "
                           "benchmark's netperf will talk to that one, which locsample does not sample")
    return out


def find_peer(name: str) -> str | None:
    """A sched_ext scheduler other than scx_locality: the lab's build (bin/lab peers NAME, or the workloads' for
    one marked built_by) if there is one, else one on PATH."""
    path, _ = run.other_sched_binary(name)
    if path.is_file():
        return str(path)
    return shutil.which(name)


def sched_binaries(specs: list[run.SchedSpec]) -> dict[str, str]:
    """name -> binary of every sched_ext scheduler asked for; raise setup.SetupMissing for a missing one, saying
    what builds it. A peer found on PATH (another build than the lab's) is waited for by its plain ops name."""
    bins: dict[str, str] = {}
    missing: list[str] = []
    reg = run.registry()
    for s in specs:
        if s.is_eevdf or s.name in bins:
            continue
        if s.name == "scx_locality":
            b = image.scheduler_binary()
            if b.is_file() and os.access(b, os.X_OK):
                bins[s.name] = str(b)
            else:
                missing.append(f"scx_locality ({b} does not exist; build it: cd scheduler && cargo build --release)")
        elif s.name == image.BASELINE_NAME:
            image.check_baseline()
            bins[s.name] = str(image.baseline_binary())
        else:
            b = find_peer(s.name)
            if b is None:
                missing.append(f"{s.name} (not built and not on PATH; build it: {run.other_sched_binary(s.name)[1]})")
            else:
                bins[s.name] = b
                if b != str(peers.binary(s.name)):
                    # not our pinned crates.io build: its ops name carries another version; lib.sh also
                    # accepts the registry's name followed by "_..."
                    s.ops = reg[s.name].get("ops", s.ops)
    if missing:
        raise setup.SetupMissing("bench --host: scheduler binaries are missing: " + "; ".join(missing))
    return bins


# ---------------------------------------------------------------------------------------------------------
# The kernel log and the job's processes


class KernelLog:
    """The kernel's messages from this object's creation on, read from /dev/kmsg (every reader has its own
    position; SEEK_END skips what was logged before), as "[seconds] text" lines like dmesg's, which
    run.sched_exits reads. poll() often: the kernel's ring buffer may overwrite what was not read yet."""

    def __init__(self, path: str = KMSG):
        self.lines: list[str] = []
        self.lost = 0
        self.error: str | None = None
        try:
            self.fd: int | None = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError as e:
            self.fd, self.error = None, f"{path}: {e.strerror}"

    def poll(self) -> None:
        while self.fd is not None:
            try:
                rec = os.read(self.fd, 16384)
            except BlockingIOError:
                return
            except BrokenPipeError:  # records overwritten before they were read; go on with the next
                self.lost += 1
                continue
            if not rec:
                return
            self.lines.append(format_kmsg(rec))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def text(self) -> str:
        note = [f"[lab: {self.lost} kernel messages were overwritten before the lab read them]"] if self.lost else []
        return "\n".join(self.lines + note) + ("\n" if self.lines or note else "")


def format_kmsg(rec: bytes) -> str:
    """One /dev/kmsg record ("prio,seq,usec,flags;text\\n" and " KEY=value" lines) as "[seconds] text"."""
    head, _, body = rec.decode(errors="replace").partition(";")
    fields = head.split(",")
    usec = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
    return f"[{usec / 1e6:12.6f}] {body.split(chr(10), 1)[0]}"


def _runs_one_of(pid: int, binaries: set[str]) -> bool:
    """Whether pid runs one of binaries (real paths): as its executable, or as the script its interpreter runs
    (argv[0] or argv[1]; a scheduler started through a wrapper script)."""
    try:
        # a binary rebuilt while it runs reads "PATH (deleted)"
        exe = os.readlink(PROC / str(pid) / "exe").removesuffix(" (deleted)")
        if os.path.realpath(exe) in binaries:
            return True
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")[:2]
    except OSError:
        return False
    return any(a.startswith(b"/") and os.path.realpath(a.decode(errors="replace")) in binaries for a in argv)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while True:
        alive = [p for p in pids if (PROC / str(p)).exists() and _state(p) != "Z"]
        if not alive or time.monotonic() >= end:
            return alive
        time.sleep(0.1)


def _state(pid: int) -> str | None:
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------------------
# One bench on this machine


def _ip_lo() -> set[str] | None:
    """The addresses of lo ("127.0.0.2/8", ...), or None without ip(8)."""
    if shutil.which("ip") is None:
        return None
    r = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return {w[3] for w in (ln.split() for ln in r.stdout.splitlines()) if len(w) > 3 and w[2] in ("inet", "inet6")}


class Session:
    """The bench's time on this machine, as a context manager: a temporary folder for the job's scratch files
    and working directory, the settings the benchmarks change saved at the start and put back at the end (with
    any address they added to lo: the netperf benchmarks add 127.0.0.2 as the guest's init does), the folder
    removed. run_job runs one run's job."""

    def __init__(self, machine: HostMachine, sched_bins: dict[str, str], log=None):
        self.machine = machine
        self.sched_bins = dict(sched_bins)
        out = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

        def safe_log(msg: str) -> None:
            # the clean-up must go on when the output is gone (`| tee` killed by the same Ctrl-C, a closed
            # terminal after SIGHUP): a message that cannot be written is dropped
            try:
                out(msg)
            except (OSError, ValueError):
                pass
        self.log = safe_log
        self.tmp: str | None = None
        self.place: run.JobPlace | None = None
        self.saved: dict[str, str] = {}
        self.lo: set[str] | None = None

    def __enter__(self) -> "Session":
        for s in SETTINGS:
            v = _read(PROC / "sys" / s)
            if v is not None:
                self.saved[s] = v
        self.lo = _ip_lo()
        self.tmp = tempfile.mkdtemp(prefix="locality-host-")
        os.mkdir(os.path.join(self.tmp, "work"))
        self.place = run.JobPlace(lib=str(LIB), tmp=self.tmp, workdir=os.path.join(self.tmp, "work"),
                                  sched_bins=self.sched_bins, guest=False)
        return self

    def __exit__(self, *exc) -> None:
        with run.signals_held():  # a second Ctrl-C must not leave the machine half restored
            self.restore()
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def restore(self) -> None:
        for s, old in self.saved.items():
            if _read(PROC / "sys" / s) != old:
                try:
                    (PROC / "sys" / s).write_text(old + "\n")
                    self.log(f"bench: restored {s.replace('/', '.')} = {old}")
                except OSError as e:
                    self.log(f"bench: warning: could not restore {s.replace('/', '.')} to {old}: {e.strerror}")
        if self.lo is not None:
            for addr in sorted((_ip_lo() or set()) - self.lo):
                subprocess.run(["ip", "addr", "del", addr, "dev", "lo"], capture_output=True)
                self.log(f"bench: removed the address {addr} the benchmarks added to lo")

    def env(self, ctl: Path) -> dict[str, str]:
        return dict(os.environ, PATH=job_path(), LAB_CTL=str(ctl), LAB_TMP=self.tmp, LAB_SYS=str(SYS))

    def run_job(self, steps: list[run.Step], timeout_s: int, run_dir: Path, stream=None) -> run.RunResult:
        """Run the steps as one job on this machine; the result as run.run_job gives it for a boot (no boot
        time, no topology check). Whatever happens, nothing of the job is left running when this returns or
        raises, and sched_ext has been waited for to read "disabled"."""
        assert self.place is not None, "Session.run_job outside its with block"
        log = self.log
        ctl, console = run_dir / "ctl.log", run_dir / "console.log"
        result = run.RunResult(machine=self.machine.name, run_dir=str(run_dir), kernel_log=str(run_dir / "kernel.log"))
        ctl.write_bytes(b"")
        script = run_dir / "job.sh"
        script.write_text(run.job_script(steps, None, self.place))
        # as the guest's limit, without the boot: the cases' budgets plus each scheduler's start and stop
        limit = timeout_s + run.sched_overhead_s(steps)
        klog = KernelLog()
        if klog.error:
            log(f"bench: warning: cannot read the kernel log ({klog.error}); scheduler exits will not be named")
        proc = pump = None
        t0 = time.monotonic()
        try:
            with run.signals_held():  # no signal between the job's start and its noting
                proc = subprocess.Popen(["/bin/sh", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=self.place.workdir, env=self.env(ctl),
                                        start_new_session=True)
            pump = run.pump_console(proc, console, stream, log)
            while True:
                try:
                    proc.wait(timeout=1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                klog.poll()
                if ctl.stat().st_size > run.CTL_MAX_BYTES:
                    result.guest_errors.append(f"the job's records (ctl.log) passed {run.CTL_MAX_BYTES >> 20} MiB; "
                                               "the job was stopped")
                    why = f"the job wrote more than {run.CTL_MAX_BYTES >> 20} MiB of records"
                elif time.monotonic() - t0 > limit:
                    result.timed_out = True
                    why = f"the job did not finish within {limit} s"
                else:
                    continue
                log(f"bench: error: {why}; stopping it (logs in {run_dir})")
                break
        finally:
            with run.signals_held():  # the stop must finish: Ctrl-C again waits for it
                if proc is not None:
                    self.stop(proc, steps)
                # the next run starts as from a new boot: settings as they were, an empty working folder
                self.restore()
                shutil.rmtree(self.place.workdir, ignore_errors=True)
                os.mkdir(self.place.workdir)
                klog.poll()
                klog.close()
                (run_dir / "kernel.log").write_text(klog.text())
        if pump is not None:
            pump.join(timeout=5)
        result.wall_s = round(time.monotonic() - t0, 1)
        if klog.error is None:
            result.files["kernel.log"] = str(run_dir / "kernel.log")  # parse_ctl reads the exits from it
        with open(ctl, "rb") as fh:
            run.parse_ctl(fh, run_dir, result, steps)
        (run_dir / "result.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
        return result

    def stop(self, proc: subprocess.Popen, steps: list[run.Step]) -> None:
        """Leave nothing of the job running: the job's shell first (so that it starts nothing more), then the
        scheduler with SIGINT (its clean exit, as lab_sched_stop does; SIGKILL after STOP_WAIT_S), then every
        other process of its session (benchmarks, daemons they started), and wait for sched_ext to read
        "disabled". After a job that ended by itself there is nothing left and this says nothing."""
        log = self.log
        sid = proc.pid
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            log("bench: stopped the job on this host; stopping what it left (a second Ctrl-C waits for this)")
        exes = {os.path.realpath(b) for b in self.sched_bins.values()}
        scheds = [p for p in run.live_pids(session=sid) if _runs_one_of(p, exes)]
        if scheds:
            log(f"bench: stopping the scheduler (SIGINT to pid {', '.join(map(str, scheds))})")
            _signal(scheds, signal.SIGINT)
            left = _wait_gone(scheds, STOP_WAIT_S)
            if left:
                log(f"bench: the scheduler did not exit within {STOP_WAIT_S:.0f} s; SIGKILL")
                _signal(left, signal.SIGKILL)
                left = _wait_gone(left, 10)
            if left:
                log(f"bench: warning: scheduler pid {', '.join(map(str, left))} outlived SIGKILL (asleep in the "
                    "kernel); see the kernel log")
        for _ in range(100):  # processes may fork while being killed; a few sweeps catch them
            rest = run.live_pids(session=sid)
            if not rest:
                break
            _signal(rest, signal.SIGKILL)
            _wait_gone(rest, 0.5)
        else:
            log(f"bench: warning: processes of the job are still running: {', '.join(map(str, run.live_pids(session=sid)))}")
        if any(not s.sched.is_eevdf for s in steps):
            end = time.monotonic() + DISABLE_WAIT_S
            state, ops = sched_ext_state()
            while state not in (None, "disabled") and time.monotonic() < end:
                time.sleep(0.1)
                state, ops = sched_ext_state()
            if state not in (None, "disabled"):
                log(f"bench: warning: sched_ext still reads {state!r} (ops {ops!r}) after the job was stopped")
