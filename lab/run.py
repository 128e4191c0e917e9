# SPDX-License-Identifier: GPL-2.0-only
"""Boot a modeled machine in QEMU and run a job in it.

A job is a list of steps; each step starts a scheduler (or none, for EEVDF), runs a shell command, and stops
the scheduler again. `bin/lab run` is a one-step job; the bench interleaves schedulers as several steps of one
boot, so that they share the boot's noise. The host writes the job into a small cpio appended to the cached
image; the guest (lab/guest/lib.sh) checks its topology against the machine file first, runs the steps, and
reports through its second serial port (ttyS1) with "@@" records; the console (ttyS0) is streamed to the user.

Everything of one run lands in a run folder: console.log, ctl.log (the records), kernel.log (the guest's
dmesg), one sched-<step>.log per scheduler and result.json.

`bin/lab bench --host` (lab/host.py) runs the same job script on the host itself: job_script takes a JobPlace
with the host's paths, and parse_ctl reads the records it leaves in a file.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import pwd
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from . import image, machines, memmodel, paths, setup

# Exit codes of `bin/lab run` (also in the README).
EXIT_OK = 0
EXIT_CMD_FAILED = 1
EXIT_USAGE = 2
EXIT_SETUP = 3
EXIT_TOPOLOGY = 4
EXIT_SCHED = 5
EXIT_TIMEOUT = 6
EXIT_MACHINE = 7
EXIT_INTERNAL = 8
EXIT_HOST = 9  # bin/lab bench --host only: this machine cannot run it (not root, no sched_ext, sched_ext in use)
EXIT_INTERRUPTED = 130  # SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as shells report it); every QEMU was killed

QEMU = "qemu-system-x86_64"
# What the guest may send back with lab_put_file: plain names in the run folder, bounded in size and number.
# The guest is untrusted (it runs the kernel and the schedulers under test) and the lab runs as root.
GUEST_FILE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
GUEST_FILE_MAX_BYTES = 64 << 20
GUEST_FILES_MAX = 4096
# Files the lab itself writes in a run folder: a guest may not replace them.
RUN_DIR_OWN = frozenset({"console.log", "ctl.log", "result.json", "qemu.cmd", "initrd.img", "job.cpio",
                         "job.sh"})  # job.sh: the job script of bench --host (lab/host.py)
# QEMU writes ctl.log itself, so its size is watched and the guest killed past this; the console is capped.
CTL_MAX_BYTES = 1 << 30
CONSOLE_MAX_BYTES = 256 << 20
# Control characters (terminal escapes among them) are not passed from the guest's console to the terminal.
CONSOLE_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
RECORD_MAX_LINE = 1 << 16  # records and base64 lines are short; a longer line is junk
GUEST_ERRORS_MAX = 50
MAX_TOPOLOGY_LINES = machines.MAX_CPUS * 3  # a node, an LLC and an SMT line per CPU at most

SCHED_REGISTRY = paths.REPO / "lab" / "schedulers.toml"
KERNEL_ARGS = "console=ttyS0 quiet loglevel=4 panic=-1"
# The guest's clock. Under TCG the kernel's boot-time TSC synchronisation check fails (vCPUs are host threads
# that run late), marks the TSC unstable and falls back to the HPET, whose every read is an emulated device
# access. QEMU derives every vCPU's TSC from one host clock, so it is synchronised; "tsc" trusts it. "hpet"
# keeps the kernel's own choice. LOCALITY_GUEST_CLOCK picks one (lab/README.md, "The guest's clock").
GUEST_CLOCKS = {"tsc": "tsc=reliable", "hpet": ""}
DEFAULT_GUEST_CLOCK = "tsc"


def guest_clock() -> str:
    c = os.environ.get("LOCALITY_GUEST_CLOCK", DEFAULT_GUEST_CLOCK)
    if c not in GUEST_CLOCKS:
        raise UsageError(f"LOCALITY_GUEST_CLOCK={c!r}: expected one of {', '.join(GUEST_CLOCKS)}")
    return c


def kernel_args() -> str:
    return " ".join(a for a in (KERNEL_ARGS, GUEST_CLOCKS[guest_clock()]) if a)


class UsageError(Exception):
    pass


# Flags (split like a shell would) appended to every scx_locality the lab starts: bin/lab run, bench, soak and the
# lab tests, so that e.g. `LOCALITY_SCHED_EXTRA_FLAGS=--no-cache-aware make lab-test` runs every lab test against
# that variant (make test-mutants, lab/mutants.py). Both builds get them: scx_locality and scx_locality_baseline.
EXTRA_FLAGS_ENV = "LOCALITY_SCHED_EXTRA_FLAGS"
EXTRA_FLAGS_TO = ("scx_locality", image.BASELINE_NAME)
# Options of scx_locality that may be given more than once (the Vec<_> and counted options of
# scheduler/src/cli.rs; lab/tests/test_extra_flags.py keeps the two in step): an extra one adds to the step's own.
REPEATABLE_OPTIONS = frozenset({"--memory-include", "--memory-exclude", "--verbose"})


def extra_sched_flags() -> list[str]:
    """The flags of LOCALITY_SCHED_EXTRA_FLAGS ([] when unset or blank)."""
    text = os.environ.get(EXTRA_FLAGS_ENV, "")
    try:
        return shlex.split(text)
    except ValueError as e:
        raise UsageError(f"{EXTRA_FLAGS_ENV}={text!r} does not split like a shell would: {e}") from None


def extra_flags_note(flags: list[str] | None = None) -> str | None:
    """The one line every run log and report header carries when extra flags are set, None when none are."""
    flags = extra_sched_flags() if flags is None else flags
    if not flags:
        return None
    return (f"{EXTRA_FLAGS_ENV}={shlex.join(flags)}: appended to every {' and '.join(EXTRA_FLAGS_TO)} "
            f"started here (not the default)")


def _option_groups(args: list[str]) -> list[tuple[str | None, list[str]]]:
    """args as (option name, its tokens): "--x=V" and "--x V" (a next token that does not start with "-" is the
    value: scx_locality takes no positional argument when it schedules) are one group each; any other token
    (a short flag such as -v) is a group of its own with no name."""
    out: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and len(a) > 2:
            name = a.split("=", 1)[0]
            if "=" not in a and i + 1 < len(args) and not args[i + 1].startswith("-"):
                out.append((name, [a, args[i + 1]]))
                i += 2
                continue
            out.append((name, [a]))
        else:
            out.append((None, [a]))
        i += 1
    return out


def _twin(name: str) -> str:
    """--no-X for --X and --X for --no-X: the switch that undoes it."""
    return "--" + name[5:] if name.startswith("--no-") else "--no-" + name[2:]


def with_extra_flags(args: list[str], extra: list[str]) -> list[str]:
    """A step's own scx_locality arguments with the extra flags last. The extra flags decide: an option they give
    (or its --no- twin) is taken out of the step's own first, since scx_locality (clap) refuses a single-valued
    option or switch given twice (exit 2) and --push-cross-node with --no-push-cross-node. So a step that runs
    --exec-placement=least-loaded-always under LOCALITY_SCHED_EXTRA_FLAGS=--exec-placement=allowance runs
    allowance, as every other step of the run does: every scx_locality the lab starts is the variant.
    Repeatable options (REPEATABLE_OPTIONS, short flags) are added to the step's own."""
    if not extra:
        return list(args)
    given = {name for name, _ in _option_groups(extra) if name and name not in REPEATABLE_OPTIONS}
    drop = given | {_twin(n) for n in given}
    kept = [tok for name, toks in _option_groups(args) if name not in drop for tok in toks]
    return kept + list(extra)


@dataclass
class SchedSpec:
    """A scheduler to start in the guest: registry name, its arguments, the ops name to wait for."""
    name: str
    args: list[str] = field(default_factory=list)
    ops: str = ""
    start_timeout_s: int = 60

    @property
    def label(self) -> str:
        return self.name + (":" + " ".join(self.args) if self.args else "")

    @property
    def is_eevdf(self) -> bool:
        return self.name == "eevdf"


def registry() -> dict:
    return tomllib.loads(SCHED_REGISTRY.read_text())


def other_sched_binary(name: str) -> tuple[Path, str]:
    """A sched_ext scheduler other than scx_locality: (where the image takes its binary from, what builds it).
    Published ones are the peer builder's; those lab/schedulers.toml marks `built_by` are the workloads'."""
    built_by = registry().get(name, {}).get("built_by")
    if built_by:
        return image.workloads_bin_dir() / name, built_by
    return image.peer_bin_dir() / name, f"bin/lab peers {name}"


def parse_sched(spec: str) -> SchedSpec:
    """NAME[:ARGS], ARGS split like a shell would: "scx_locality:--no-steal --slice-us 3000"."""
    name, _, args = spec.partition(":")
    reg = registry()
    if name not in reg:
        raise UsageError(f"unknown scheduler {name!r}; known: {', '.join(reg)}")
    if name == "eevdf" and args:
        raise UsageError("eevdf takes no arguments (it is the kernel's own scheduler)")
    entry = reg[name]
    return SchedSpec(name=name, args=shlex.split(args), ops=entry.get("ops", ""),
                     start_timeout_s=int(entry.get("start_timeout_s", 60)))


@dataclass
class Step:
    sched: SchedSpec
    command: str  # a shell command line run by the guest's /bin/sh
    # Guest seconds the command may run before timeout(1) kills it (SIGTERM, then SIGKILL 10 s later). None: no
    # limit but the host's for the whole boot. A hung step then costs its own budget, and the rest of the job
    # (and the guest's dmesg) still reaches the host.
    timeout_s: int | None = None


# cmd-end codes that mean "killed by the step's timeout". The guest's timeout is busybox's: it exits with the
# killed command's status, 143 after SIGTERM and 137 after -k's SIGKILL; coreutils' would exit 124.
CMD_TIMED_OUT = (124, 137, 143)


@dataclass
class StepResult:
    sched: str
    cmd_exit: int | None = None
    sched_started: bool = False
    sched_start_error: str | None = None
    sched_start_s: float | None = None
    sched_exit_code: int | None = None
    sched_alive_at_stop: bool | None = None
    sched_exit_kind: str | None = None
    sched_exit_reason: str | None = None
    sched_ejected: bool = False
    sched_log: str | None = None
    cmd_seconds: float | None = None
    # the scheduler process outlived SIGINT and SIGKILL at the stop (asleep in the kernel); the guest left it
    sched_stuck: bool = False
    # the command ran past its Step.timeout_s and the guest's timeout(1) killed it
    cmd_timed_out: bool = False


@dataclass
class RunResult:
    machine: str
    run_dir: str
    kernel_log: str
    topology_ok: bool | None = None
    topology_actual: list[str] = field(default_factory=list)
    topology_expected: list[str] = field(default_factory=list)
    timed_out: bool = False
    boot_hung: bool = False  # killed because no "booted" record came within the machine's boot_timeout_s
    cut_by_deadline: bool = False  # killed at the deadline its caller gave (bin/lab soak --minutes)
    completed: bool = False
    qemu_exit: int | None = None
    boot_s: float | None = None
    wall_s: float | None = None
    # percent of the host's CPU time that went to other work than this run (its QEMU and bin/lab) meanwhile:
    # the guest's vCPUs compete with it for the host's cores, so figures of a run with much of it are noisier
    host_other_pct: float | None = None
    steps: list[StepResult] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    # records of the guest that the lab refused (bad file names, sizes, junk); nothing of them was written
    guest_errors: list[str] = field(default_factory=list)
    # LOCALITY_SCHED_EXTRA_FLAGS as this run appended them to every scx_locality it started ([]: none)
    sched_extra_flags: list[str] = field(default_factory=list)

    def exit_code(self) -> int:
        if self.guest_errors:  # the guest's report cannot be trusted
            return EXIT_INTERNAL
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.topology_ok is False:
            return EXIT_TOPOLOGY
        if not self.completed:
            return EXIT_INTERNAL
        for s in self.steps:
            if s.sched_start_error or s.sched_ejected or s.sched_stuck:
                return EXIT_SCHED
        if any(s.cmd_timed_out for s in self.steps):
            return EXIT_TIMEOUT
        for s in self.steps:
            if s.cmd_exit != 0:
                return EXIT_CMD_FAILED
        return EXIT_OK


def expected_topology_text(m: machines.Machine) -> str:
    """The canonical text lab_topology prints in the guest, built from the machine file."""
    t = m.guest_topology()
    lines = []
    for i, cpus in enumerate(t.nodes):
        lines.append(f"node {i} {machines.format_cpulist(list(cpus))} {' '.join(map(str, t.distances[i]))}")
    lines += sorted(f"llc {machines.format_cpulist(list(g))}" for g in t.llcs)
    lines += sorted(f"smt {machines.format_cpulist(list(g))}" for g in t.smt)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class JobPlace:
    """Where a job script runs and finds its things: in the guest (the defaults), or on this machine itself
    (`bin/lab bench --host`, lab/host.py), where the paths are the host's and there is no boot."""
    lib: str = "/lab/lib.sh"  # lab/guest/lib.sh as the script sources it
    tmp: str = "/tmp"  # scratch files (lib.sh's LAB_TMP)
    workdir: str = "/root"  # where the steps' commands run
    # scheduler name -> its binary; None: the guest's /usr/local/bin/NAME
    sched_bins: dict[str, str] | None = None
    # the guest's own beginning and end: the boot record, the topology check, and its dmesg sent at the end
    # (lab_finish); on the host there is no boot, the topology is read from /sys and the kernel log is read
    # by the lab itself (lab/host.py), so the job ends with a bare "done" record.
    guest: bool = True


GUEST = JobPlace()


def sched_args(spec: SchedSpec) -> list[str]:
    """The arguments spec's scheduler is started with: its own, and LOCALITY_SCHED_EXTRA_FLAGS for scx_locality."""
    if spec.name in EXTRA_FLAGS_TO:
        return with_extra_flags(spec.args, extra_sched_flags())
    return list(spec.args)


def _sched_command(spec: SchedSpec, override_path: str | None, place: JobPlace = GUEST) -> list[str]:
    args = sched_args(spec)
    if spec.name in ("scx_locality", image.BASELINE_NAME) and override_path and \
            "--topology-override" not in (name for name, _ in _option_groups(args)):
        args += ["--topology-override", override_path]
    binary = place.sched_bins[spec.name] if place.sched_bins is not None else f"/usr/local/bin/{spec.name}"
    return [binary, *args]


def job_script(steps: list[Step], m: machines.Machine | None, place: JobPlace = GUEST) -> str:
    """The job's shell script; m is the guest's machine (None on the host: no LLC override there)."""
    override = "/lab/llc-override.json" if m is not None and m.needs_llc_override else None
    q = shlex.quote
    out = ["#!/bin/sh", "# Generated by lab/run.py for one " + ("boot." if place.guest else "bench run on the host."),
           f". {q(place.lib)}"]
    note = extra_flags_note()
    if note and any(st.sched.name in EXTRA_FLAGS_TO for st in steps):
        out += [f"# {note}", f"echo {q('lab: ' + note)}"]
    if place.guest:
        out += ['lab_rec "booted $(cut -d" " -f1 /proc/uptime)"',
                "if ! lab_check_topology; then lab_finish; exit 0; fi"]
    for i, st in enumerate(steps):
        out.append(f'lab_rec "step-begin {i}"')
        limit = f"timeout -k 10 {int(st.timeout_s)} " if st.timeout_s else ""
        run_cmd = [
            f'lab_rec "cmd-begin {i} $(cut -d" " -f1 /proc/uptime)"',
            f"(cd {q(place.workdir)} && {limit}/bin/sh -c {shlex.quote(st.command)}); rc=$?",
            f'lab_rec "cmd-end {i} $rc $(cut -d" " -f1 /proc/uptime)"',
        ]
        if st.sched.is_eevdf:
            out.append('if [ "$(lab_sched_state)" = enabled ]; then lab_rec "sched-start fail busy"; else')
            out += ["  " + line for line in run_cmd]
            out.append("fi")
        else:
            cmd = " ".join(shlex.quote(a) for a in _sched_command(st.sched, override, place))
            out.append(f"if lab_sched_start {shlex.quote(st.sched.ops)} {st.sched.start_timeout_s} {cmd}; then")
            out += ["  " + line for line in run_cmd]
            out.append("fi")
            out.append("lab_sched_stop")
            log, kept = q(f"{place.tmp}/sched.log"), q(f"{place.tmp}/sched-{i}.log")
            out.append(f"[ -f {log} ] && mv {log} {kept} && lab_put_file sched-{i}.log {kept}")
        out.append(f'lab_rec "step-end {i}"')
    out.append("lab_finish" if place.guest else 'lab_rec "done"')
    return "\n".join(out) + "\n"


DISABLED_RE = re.compile(r'sched_ext: BPF scheduler "([^"]+)" disabled \(([^)]*)\)')
REASON_RE = re.compile(r"sched_ext: ([^:\s]+): (.+)")


def marked_sections(text: str, marker: str) -> dict[str, str]:
    """Console text split at the 'MARKER: NAME' lines a job's commands echo: NAME -> the lines after it."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(marker)}: (\S+)\s*$", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def sched_exits(kernel_log: str) -> list[tuple[str, str, str | None]]:
    """(ops name, exit kind, reason) for every sched_ext disable the guest kernel logged, in order."""
    exits: list[tuple[str, str, str | None]] = []
    lines = kernel_log.splitlines()
    for i, line in enumerate(lines):
        m = DISABLED_RE.search(line)
        if not m:
            continue
        reason = None
        for nxt in lines[i + 1:i + 3]:
            if DISABLED_RE.search(nxt):
                break
            r = REASON_RE.search(nxt)
            if r and r.group(1) == m.group(1):
                reason = r.group(2).strip()
                break
        exits.append((m.group(1), m.group(2), reason))
    return exits


def is_clean_exit(kind: str) -> bool:
    # "unregistered from user space" (the agent detached) and "unregistered from BPF" (it chose to exit) are
    # the scheduler's own doing; every other kind (runtime error, stall, scx_bpf_error, sysrq) is an ejection.
    return kind.startswith("unregistered from")


def _record_lines(src):
    """The lines of the guest's records, as text; None for a line longer than RECORD_MAX_LINE (junk).
    src is the records as a str, or ctl.log opened in binary, read in bounded pieces."""
    if isinstance(src, str):
        for line in src.split("\n"):
            yield None if len(line) > RECORD_MAX_LINE else line
        return
    while raw := src.readline(RECORD_MAX_LINE + 1):
        if len(raw) > RECORD_MAX_LINE:
            while raw and not raw.endswith(b"\n"):  # skip the rest of the over-long line
                raw = src.readline(RECORD_MAX_LINE + 1)
            yield None
            continue
        yield raw.decode("utf-8", errors="replace").rstrip("\n")


@dataclass
class _GuestFile:
    name: str
    ok: bool
    parts: list[str] = field(default_factory=list)
    size: int = 0


def _write_guest_file(run_dir: Path, name: str, data: bytes) -> None:
    """Write a plain name inside run_dir, never through a symlink (O_NOFOLLOW relative to the folder)."""
    dfd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def parse_ctl(text, run_dir: Path, result: RunResult, steps: list[Step]) -> None:
    """Fill result from the guest's @@ records (a str, or ctl.log opened in binary); write the files it sent
    into run_dir. The guest is not trusted: a file is written only under a plain name (GUEST_FILE_NAME_RE, not
    one of the lab's own files), within GUEST_FILE_MAX_BYTES and GUEST_FILES_MAX, as valid base64, and ended by
    its own @@file-end; anything else is dropped and named in result.guest_errors."""
    step_results = [StepResult(sched=s.sched.label) for s in steps]
    errors = result.guest_errors

    def refuse(msg: str) -> None:
        if len(errors) < GUEST_ERRORS_MAX:
            errors.append(msg)
        elif len(errors) == GUEST_ERRORS_MAX:
            errors.append("more refused records not listed")

    def step_of(word: str) -> int:
        i = int(word)
        if not 0 <= i < len(step_results):
            raise ValueError(f"no step {i}")
        return i

    def finish(f: _GuestFile) -> None:
        if not f.ok:
            return
        try:
            data = base64.b64decode("".join(f.parts), validate=True)
        except (binascii.Error, ValueError):
            refuse(f"file {f.name!r} is not valid base64; dropped")
            return
        try:
            _write_guest_file(run_dir, f.name, data)
        except OSError as e:
            refuse(f"file {f.name!r} could not be written as a plain file in the run folder ({e.strerror}); "
                   "dropped")
            return
        result.files[f.name] = str(run_dir / f.name)

    max_b64 = (GUEST_FILE_MAX_BYTES + 2) // 3 * 4
    cur: _GuestFile | None = None
    begun = 0
    cur_step = None
    cmd_began: dict[int, float] = {}  # step -> guest uptime when its command started
    for line in _record_lines(text):
        if line is None:
            if cur is not None and cur.ok:
                refuse(f"file {cur.name!r} holds a line longer than {RECORD_MAX_LINE} bytes; dropped")
                cur.ok, cur.parts = False, []
            elif cur is None:
                refuse(f"a line longer than {RECORD_MAX_LINE} bytes")
            continue
        line = line.rstrip("\r")
        if cur is not None:
            if line == f"@@file-end {cur.name}":
                finish(cur)
                cur = None
                continue
            if not line.startswith("@@"):
                if cur.ok:
                    cur.size += len(line)
                    if cur.size > max_b64:
                        refuse(f"file {cur.name!r} is larger than {GUEST_FILE_MAX_BYTES} bytes; dropped")
                        cur.ok, cur.parts = False, []
                    else:
                        cur.parts.append(line.strip())
                continue
            refuse(f"file {cur.name!r} was not ended by its @@file-end (a record came first); dropped")
            cur = None
        if not line.startswith("@@"):
            if line.strip():
                refuse(f"a line that is not a record: {line[:60]!r}")
            continue
        words = line[2:].split()
        if not words:
            continue
        tag, rest = words[0], words[1:]
        try:
            if tag == "booted":
                result.boot_s = float(rest[0])
            elif tag == "topo":
                if len(result.topology_actual) >= 2 * MAX_TOPOLOGY_LINES:
                    raise ValueError("more topology lines than any machine has")
                result.topology_actual.append(" ".join(rest))
            elif tag == "topology":
                result.topology_ok = rest[0] == "ok"
            elif tag == "step-begin":
                cur_step = step_results[step_of(rest[0])]
            elif tag == "sched-start" and cur_step is not None:
                if rest[0] == "ok":
                    cur_step.sched_start_s = round(float(rest[3]) - float(rest[2]), 2)
                    cur_step.sched_started = True
                else:
                    cur_step.sched_start_error = " ".join(rest[1:])
            elif tag == "cmd-begin" and cur_step is not None:
                cmd_began[step_of(rest[0])] = float(rest[1])
            elif tag == "cmd-end" and cur_step is not None:
                i, rc, t = step_of(rest[0]), int(rest[1]), float(rest[2])
                cur_step.cmd_exit = rc
                if i in cmd_began:
                    cur_step.cmd_seconds = round(t - cmd_began[i], 3)
                limit = steps[i].timeout_s
                # timeout(1)'s kill, not the command's own status: the command had run its whole budget
                cur_step.cmd_timed_out = bool(limit) and rc in CMD_TIMED_OUT and (
                    cur_step.cmd_seconds is None or cur_step.cmd_seconds >= limit - 1)
            elif tag == "sched-stop" and cur_step is not None:
                kv = dict(w.split("=", 1) for w in rest if "=" in w)
                cur_step.sched_exit_code = int(kv.get("rc", "-1"))
                cur_step.sched_alive_at_stop = kv.get("alive_at_stop") == "1"
                cur_step.sched_stuck = kv.get("stuck") == "1"
            elif tag == "file-begin":
                name = " ".join(rest)
                ok = False
                if len(rest) != 1 or not GUEST_FILE_NAME_RE.fullmatch(name):
                    refuse(f"file name {name[:80]!r} is not a plain name inside the run folder; dropped")
                elif name in RUN_DIR_OWN:
                    refuse(f"file name {name!r} is one of the lab's own files; dropped")
                elif name in result.files:
                    refuse(f"file {name!r} sent twice; the second dropped")
                elif begun >= GUEST_FILES_MAX:
                    refuse(f"more than {GUEST_FILES_MAX} files; {name!r} dropped")
                else:
                    ok = True
                begun += 1
                cur = _GuestFile(name=name, ok=ok)
            elif tag == "done":
                result.completed = True
        except (ValueError, IndexError) as e:
            refuse(f"malformed record {line[:80]!r} ({e})")
    if cur is not None and not result.timed_out:  # a guest killed by the lab stops mid-file: not its fault
        refuse(f"file {cur.name!r} was not ended by its @@file-end; dropped")
    for i, sr in enumerate(step_results):
        if f"sched-{i}.log" in result.files:
            sr.sched_log = result.files[f"sched-{i}.log"]
    # Match the kernel's disable lines to the steps that started a sched_ext scheduler, in order.
    klog = run_dir / "kernel.log"
    exits = sched_exits(klog.read_text(errors="replace")) if "kernel.log" in result.files else []
    started = [(sr, st) for sr, st in zip(step_results, steps) if sr.sched_started]
    for (sr, st), ex in zip(started, exits):
        sr.sched_exit_kind, sr.sched_exit_reason = ex[1], ex[2]
        sr.sched_ejected = not is_clean_exit(ex[1]) or sr.sched_alive_at_stop is False
        if sr.sched_alive_at_stop is False and sr.sched_exit_kind and is_clean_exit(sr.sched_exit_kind):
            sr.sched_exit_reason = (sr.sched_exit_reason or "") + " (the scheduler process died before the stop)"
    result.steps = step_results


@lru_cache(maxsize=None)
def qemu_has_seccomp(qemu: str = QEMU) -> bool:
    """Whether this QEMU was built with its seccomp sandbox (-sandbox): it then links libseccomp."""
    path = shutil.which(qemu)
    if path is None:
        raise setup.SetupMissing(f"{qemu} is not installed; run: bin/lab setup")
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    if "libseccomp" not in r.stdout:
        print(f"lab: warning: {path} has no seccomp sandbox (-sandbox); guests run without it",
              file=sys.stderr, flush=True)
        return False
    return True


def qemu_confinement() -> list[str]:
    """QEMU options that limit what a guest (or a QEMU it has broken into) can reach on the host.

    No network device at all (-nic none); no monitor, disk, shared folder or display (-nodefaults and the
    command line name none). The seccomp sandbox denies obsolete system calls, fork/exec (spawn) and
    scheduler/priority changes (resourcecontrol). As root, QEMU also drops to user nobody once it has opened
    its files (the kernel, the initrd, ctl.log); set*id calls must then stay allowed for that drop, which is
    harmless: after it QEMU holds no capability and runs with no_new_privs, so it cannot become root again."""
    args = ["-nic", "none"]
    if not qemu_has_seccomp():
        return args
    drop = os.geteuid() == 0 and _has_user("nobody")
    args += ["-sandbox", "on,obsolete=deny,elevateprivileges=" + ("allow" if drop else "deny")
             + ",spawn=deny,resourcecontrol=deny"]
    if drop:
        args += ["-run-with", "user=nobody"]
    return args


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def qemu_command(m: machines.Machine, vmlinuz: Path, initrd: Path, ctl_log: Path,
                 memory_model_log: Path | None = None) -> list[str]:
    """memory_model_log: load the memory model plugin (lab/memmodel.py), its counts going to that file."""
    return [QEMU, "-accel", "tcg,thread=multi", "-cpu", "max",
            *m.qemu_topology_args(),
            "-kernel", str(vmlinuz), "-initrd", str(initrd), "-append", kernel_args(),
            "-nodefaults", "-display", "none", "-no-reboot", "-monitor", "none",
            *qemu_confinement(),
            *(memmodel.qemu_args(m, memory_model_log) if memory_model_log else []),
            "-serial", "stdio", "-serial", f"file:{ctl_log}"]


def new_run_dir(machine: str, label: str = "run") -> Path:
    """A new run folder; mkdir without exist_ok, so that two runs started in the same second never share one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    paths.runs_dir().mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        d = paths.runs_dir() / (f"{stamp}-{label}-{machine}" + (f"-{n}" if n > 1 else ""))
        try:
            d.mkdir()
            return d
        except FileExistsError:
            n += 1


# A guest kernel that dies while booting, before the job starts, under QEMU TCG: seen here now and then as
# "Oops: int3" in early boot (more often with QEMU 7.2). Nothing of the job ran, so one new boot is honest.
BOOT_CRASH_RE = re.compile(r"(Oops|Kernel panic|BUG:|general protection fault)")


def crashed_before_job(run_dir: Path) -> bool:
    """True if the guest's kernel crashed and no step of the job began."""
    ctl = run_dir / "ctl.log"
    if ctl.exists():
        with open(ctl, "rb") as fh:
            if any(line is not None and line.startswith("@@step-begin") for line in _record_lines(fh)):
                return False
    console = run_dir / "console.log"
    return console.exists() and bool(BOOT_CRASH_RE.search(console.read_text(errors="replace")))


# The same emulator fault later in a run: multi-threaded TCG now and then lets a vCPU run a stale copy of kernel
# text that the kernel is patching with text_poke_bp() (static keys flip when sched_ext is enabled), so it hits
# the temporary int3 after the kernel has dropped it, and the kernel oopses with RIP in ordinary kernel text
# (seen here: sched_tick, sched_balance_update_blocked_averages, under EEVDF and scx_locality alike, about
# once in 40 scheduler starts). That is the emulator's fault, not the job's, so the whole run gets one new
# boot. A BPF program that jumps into its JIT image's int3 padding oopses too, but with RIP in bpf_prog_*: that
# is the scheduler's fault and stays the run's result. Between the Oops line and its RIP come the CPU and
# hardware lines, the "Sched_ext:" state line and now and then another CPU's message (seen: the "BPF scheduler
# ... enabled" line): up to 8 lines are allowed.
TCG_TEXT_PATCH_OOPS_RE = re.compile(r"Oops: int3\b[^\n]*\n(?:[^\n]*\n){0,8}?[^\n]*RIP: 0010:(?!bpf_prog_)[A-Za-z_]")


# New boots after an emulator fault (a crash or hang before the job, or the text-patching int3). Seen in one CI
# run: 3 such oopses in 25 boots, two of them in a row in one test (docs/decisions.md), so one new boot was not
# enough to keep a test that holds on a working emulator from failing.
EMULATOR_RETRIES = 2


def tcg_text_patch_oops(run_dir: Path) -> bool:
    """True if the guest oopsed on an int3 in kernel text (not in a BPF program): see TCG_TEXT_PATCH_OOPS_RE."""
    console = run_dir / "console.log"
    return console.exists() and bool(TCG_TEXT_PATCH_OOPS_RE.search(console.read_text(errors="replace")))


def run_job(m: machines.Machine, steps: list[Step], timeout_s: int, run_dir: Path | None = None,
            stream=sys.stdout, log=None, build_scheduler: bool = True, on_step_end=None,
            deadline: float | None = None, image_extras=(), memory_model: bool = False,
            retry_text_patch: bool = True) -> RunResult:
    """Boot m, run the steps, return what happened. Raises setup.SetupMissing when setup has not run.
    A guest that crashes or hangs while booting, before the job began, or (retry_text_patch) that oopses on the
    emulator's text-patching int3 at any time (tcg_text_patch_oops), is booted again, at most EMULATOR_RETRIES
    times (in RUN_DIR-retry, RUN_DIR-retry2). A caller that can go on from the step the oops cut (bin/lab bench)
    passes retry_text_patch=False and boots again itself.
    on_step_end(step index, exit code), if given, is called as each step's command ends in the guest.
    deadline (a time.monotonic() value), if given, bounds the whole call: the guest is killed then.
    image_extras: image.EXTRAS the guest gets on top of the base image (a benchmark's image_extras).
    memory_model: load the memory model plugin (built beforehand: memmodel.build); its log is
    RUN_DIR/memmodel.log.
    On an exception or a signal every QEMU started here is killed before it propagates."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    machines.check_host(m)
    result = _run_job_once(m, steps, timeout_s, run_dir, stream, log, build_scheduler, on_step_end, deadline,
                           image_extras, memory_model)
    first = Path(result.run_dir)
    for n in range(1, EMULATOR_RETRIES + 1):
        last = Path(result.run_dir)
        if result.guest_errors or result.cut_by_deadline:
            return result
        if result.boot_hung or crashed_before_job(last):
            what = "hung" if result.boot_hung else "crashed"
            why = f"lab: the guest kernel {what} before the job began (see {last / 'console.log'})"
        elif retry_text_patch and (not result.completed or result.exit_code() != 0) and tcg_text_patch_oops(last):
            why = (f"lab: the guest kernel oopsed on an int3 in kernel text, the emulator's text-patching fault "
                   f"(see {last / 'console.log'}); the whole run is booted again")
        else:
            return result
        retry_dir = first.with_name(first.name + ("-retry" if n == 1 else f"-retry{n}"))
        retry_dir.mkdir(parents=True, exist_ok=True)
        log(f"{why}; new boot {n} of at most {EMULATOR_RETRIES}")
        result = _run_job_once(m, steps, timeout_s, retry_dir, stream, log, False, on_step_end, deadline,
                               image_extras, memory_model)
    return result


class _CtlWatcher:
    """Reads the guest's records as they arrive: has it booted, and which steps have ended (for progress).
    Malformed records are left to parse_ctl, which names them; here they are only skipped."""

    def __init__(self, ctl: Path, on_step_end=None):
        self.ctl, self.on_step_end = ctl, on_step_end
        self.offset, self.partial, self.booted = 0, b"", False

    def poll(self) -> None:
        try:
            with open(self.ctl, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(CTL_MAX_BYTES)
        except FileNotFoundError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > RECORD_MAX_LINE:  # no record is that long
            self.partial = b""
        for raw in lines:
            if raw.startswith(b"@@booted"):
                self.booted = True
            elif raw.startswith(b"@@cmd-end") and self.on_step_end is not None:
                words = raw.decode(errors="replace").split()
                try:
                    i, rc = int(words[1]), int(words[2])
                except (ValueError, IndexError):
                    continue
                if i >= 0:
                    self.on_step_end(i, rc)


# Every QEMU this process has running, so that a signal or an exception anywhere can kill them all.
_LIVE: set[subprocess.Popen] = set()


# How long _kill_guest waits for the rest of QEMU's process group to die after SIGKILL (a killed process dies
# as soon as it runs, unless it is asleep in the kernel).
KILL_WAIT_S = 10.0


def live_pids(*, pgrp: int | None = None, session: int | None = None) -> list[int]:
    """Live processes (not zombies) of process group @pgrp or session @session, whatever their parent now is;
    never this process."""
    field, want = (2, pgrp) if pgrp is not None else (3, session)
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[field]) == want and int(d.name) != os.getpid():
            out.append(int(d.name))
    return out


def _kill_guest(proc: subprocess.Popen, log=None) -> None:
    """SIGKILL QEMU's whole process group (it runs in its own session), reap QEMU and wait for the rest of the
    group to be gone: SIGKILL only marks a process, and QEMU's helpers are not ours to reap."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    _LIVE.discard(proc)
    end = time.monotonic() + KILL_WAIT_S
    while (left := live_pids(pgrp=proc.pid)) and time.monotonic() < end:
        time.sleep(0.05)
    if left:
        (log or (lambda msg: print(msg, file=sys.stderr, flush=True)))(
            f"lab: warning: pid {', '.join(map(str, left))} of QEMU's process group outlived SIGKILL by "
            f"{KILL_WAIT_S:.0f} s (asleep in the kernel)")


def kill_all_guests() -> list[int]:
    """Kill every QEMU still running (the last resort of bin/lab's signal and exception handling)."""
    pids = []
    for proc in list(_LIVE):
        if proc.poll() is None:
            pids.append(proc.pid)
        _kill_guest(proc)
    return pids


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_held = {"depth": 0, "pending": None}


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP as an exception, so that every cleanup on the way out runs (Python's default
    for SIGTERM and SIGHUP is to die at once, leaving QEMU running)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, _frame) -> None:
    if _held["depth"]:
        _held["pending"] = _held["pending"] or signum
        return
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """bin/lab's handlers: SIGINT, SIGTERM and SIGHUP raise Interrupted (see signals_held)."""
    for s in _SIGNALS:
        signal.signal(s, _on_signal)


@contextmanager
def signals_held():
    """Hold the signals of install_signal_handlers for a short critical section (starting QEMU and noting it;
    killing it and removing its files) and raise the first one that came once it is over."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            signum, _held["pending"] = _held["pending"], None
            raise Interrupted(signum)


def host_cpu_seconds(stat_text: str | None = None) -> float | None:
    """The host's busy CPU time in seconds, all CPUs together (the first line of /proc/stat without idle and
    iowait; guest time is already counted in user and nice), or None if it cannot be read."""
    try:
        text = stat_text if stat_text is not None else Path("/proc/stat").read_text()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in text.splitlines()[0].split()[1:9])
    except (OSError, ValueError, IndexError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time of this process and of its children that have been waited for (QEMU, once it has ended)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def host_other_pct(host_busy_s: float, own_s: float, wall_s: float, host_cpus: int) -> float | None:
    """Percent of the host's CPU time over wall_s that went to other work than ours: busy minus our own, over
    wall time x CPUs; None for no wall time."""
    if wall_s <= 0 or host_cpus <= 0:
        return None
    return round(max(0.0, host_busy_s - own_s) * 100 / (wall_s * host_cpus), 1)


def _run_job_once(m: machines.Machine, steps: list[Step], timeout_s: int, run_dir: Path | None,
                  stream, log, build_scheduler: bool, on_step_end=None, deadline: float | None = None,
                  image_extras=(), memory_model: bool = False) -> RunResult:
    rel, vmlinuz, _ = setup.kernel_files()
    needs_locality = any(s.sched.name == "scx_locality" for s in steps)
    if needs_locality and build_scheduler:
        image.build_scheduler()
    base = image.build(include_scheduler=image.scheduler_binary().exists(), log=log, extras=image_extras)
    if needs_locality and not image.scheduler_binary().exists():
        raise setup.SetupMissing("scx_locality is not built; run: make -C scheduler or cargo build --release")
    for s in steps:
        if s.sched.name == image.BASELINE_NAME:
            image.check_baseline()
        elif not s.sched.is_eevdf and s.sched.name != "scx_locality":
            path, built_by = other_sched_binary(s.sched.name)
            if not path.exists():
                raise setup.SetupMissing(f"{s.sched.name} is not built; run: {built_by}")
    run_dir = run_dir or new_run_dir(m.name)
    job_files = {"/lab/job": job_script(steps, m).encode(),
                 "/lab/topology.expected": expected_topology_text(m).encode()}
    ov = m.llc_override()
    if ov:
        job_files["/lab/llc-override.json"] = (json.dumps(ov, indent=1) + "\n").encode()
    ctl = run_dir / "ctl.log"
    console = run_dir / "console.log"
    initrd = run_dir / "initrd.img"
    result = RunResult(machine=m.name, run_dir=str(run_dir), kernel_log=str(run_dir / "kernel.log"),
                       topology_expected=expected_topology_text(m).splitlines())
    if any(s.sched.name in EXTRA_FLAGS_TO for s in steps):
        result.sched_extra_flags = extra_sched_flags()
    proc = pump = None
    try:
        job_cpio = image.job_archive(job_files, run_dir / "job.cpio")
        with open(initrd, "wb") as out:
            for part in (job_cpio, base):  # uncompressed first: the kernel cannot resume after a gzip member
                with open(part, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        out.write(chunk)
        cmd = qemu_command(m, vmlinuz, initrd, ctl, run_dir / memmodel.LOG_NAME if memory_model else None)
        (run_dir / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
        log(f"lab: booting {m.name} ({m.nr_cpus} vCPUs, kernel {rel}); run folder {run_dir}")
        if result.sched_extra_flags:
            log(f"lab: {extra_flags_note(result.sched_extra_flags)}")
        host0, own0 = host_cpu_seconds(), own_cpu_seconds()
        t0 = time.monotonic()
        # No signal between QEMU's start and its registration, nor before its console is being copied: a
        # signal held here is raised when the block ends, and console.log must exist by then.
        with signals_held():
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            _LIVE.add(proc)
            pump = pump_console(proc, console, stream, log)
        _supervise(proc, pump, m, steps, timeout_s, run_dir, result, log, on_step_end, deadline, t0)
    finally:
        # An exception or a signal (KeyboardInterrupt, Interrupted) leaves no QEMU and no initrd copy behind;
        # signals are held meanwhile so that a second Ctrl-C cannot cut this short.
        with signals_held():
            if proc is not None and proc.poll() is None:
                _kill_guest(proc, log)
                log(f"lab: stopped the guest (QEMU pid {proc.pid}); its logs so far are in {run_dir}")
            _LIVE.discard(proc)
            initrd.unlink(missing_ok=True)
            if pump is not None:
                pump.join(timeout=5)  # the console up to QEMU's end, also on the way out of an interrupt
    if proc is not None and proc.poll() is not None and result.wall_s:
        host1 = host_cpu_seconds()
        if host0 is not None and host1 is not None:
            result.host_other_pct = host_other_pct(host1 - host0, own_cpu_seconds() - own0, result.wall_s,
                                                   os.cpu_count() or 1)
    if ctl.exists():
        with open(ctl, "rb") as fh:
            parse_ctl(fh, run_dir, result, steps)
    else:
        parse_ctl("", run_dir, result, steps)
    if "kernel.log" not in result.files:
        # The guest never sent its dmesg (hang, crash): the console is the best kernel log there is.
        (run_dir / "kernel.log").unlink(missing_ok=True)
        (run_dir / "kernel.log").write_bytes(console.read_bytes() if console.exists() else b"")
    (run_dir / "result.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    return result


def pump_console(proc: subprocess.Popen, console: Path, stream, log) -> threading.Thread:
    """Copy proc's output (the guest's console, or the host job's output) to console (capped at
    CONSOLE_MAX_BYTES) and to stream without control characters, in a thread; returns the started thread.
    console is created here, before the thread starts, so that it exists whatever this process does next."""
    stream_ok = [True]
    out = open(console, "wb")

    def pump():
        written = 0
        with out as fh:
            for line in iter(proc.stdout.readline, b""):
                if written > CONSOLE_MAX_BYTES:
                    continue  # keep draining, so that the writer (QEMU, the host's job) never blocks on a full pipe
                written += len(line)
                fh.write(line)
                if written > CONSOLE_MAX_BYTES:
                    fh.write(f"\n[lab: console output beyond {CONSOLE_MAX_BYTES >> 20} MiB dropped]\n".encode())
                fh.flush()
                if stream is not None and stream_ok[0]:
                    try:
                        stream.write(CONSOLE_CONTROL_RE.sub("", line.decode(errors="replace")))
                        stream.flush()
                    except Exception as e:  # a broken consumer must not stop the draining
                        log(f"lab: console consumer failed ({e!r}); the console still goes to {console}")
                        stream_ok[0] = False

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    return th


def sched_overhead_s(steps: list[Step]) -> int:
    """Seconds a job's time limit allows, beyond its cases' budgets, for starting and stopping its schedulers."""
    return sum(s.sched.start_timeout_s + 40 for s in steps if not s.sched.is_eevdf)


def _supervise(proc, th: threading.Thread, m: machines.Machine, steps: list[Step], timeout_s: int, run_dir: Path,
               result: RunResult, log, on_step_end, deadline: float | None, t0: float) -> None:
    """Watch the records while th copies the console, and kill the guest past its time limits or its output
    caps."""
    ctl = run_dir / "ctl.log"
    # Steps bounded in the guest get the kill's grace (timeout -k 10) and the sending of their logs on top.
    limit = m.boot_timeout_s + timeout_s + sched_overhead_s(steps) + sum(30 for s in steps if s.timeout_s)
    watch = _CtlWatcher(ctl, on_step_end)
    while True:
        try:
            result.qemu_exit = proc.wait(timeout=2)
            break
        except subprocess.TimeoutExpired:
            pass
        watch.poll()
        elapsed = time.monotonic() - t0
        if ctl.exists() and ctl.stat().st_size > CTL_MAX_BYTES:
            result.guest_errors.append(f"the guest's records (ctl.log) passed {CTL_MAX_BYTES >> 20} MiB; "
                                       "the guest was killed")
            why = f"the guest wrote more than {CTL_MAX_BYTES >> 20} MiB of records"
        elif deadline is not None and time.monotonic() >= deadline:
            why = "the guest reached the deadline it was given"
            result.timed_out = result.cut_by_deadline = True
        elif not watch.booted and elapsed > m.boot_timeout_s:
            why = f"the guest did not boot within {m.boot_timeout_s} s"
            result.timed_out = result.boot_hung = True
        elif elapsed > limit:
            why = f"the guest did not finish within {limit} s"
            result.timed_out = True
        else:
            continue
        _kill_guest(proc, log)
        log(f"lab: error: {why} and was killed; logs in {run_dir}")
        break
    _LIVE.discard(proc)
    th.join(timeout=5)
    result.wall_s = round(time.monotonic() - t0, 1)


def topology_report(result: RunResult) -> str:
    exp, act = result.topology_expected, result.topology_actual
    width = max((len(x) for x in exp), default=10) + 2
    rows = [f"  {'expected (machine file)':{width}s} guest"]
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else ""
        a = act[i] if i < len(act) else ""
        mark = "  " if e == a else "!="
        rows.append(f"{mark}{e:{width}s} {a}")
    return "\n".join(rows)
