# SPDX-License-Identifier: GPL-2.0-only
"""`bin/lab verifier`: the kernel verifier's cost of each BPF program of scx_locality, against a checked-in
baseline (scheduler/verifier-baseline.toml), as published sched_ext schedulers carry one.

How the numbers are obtained: one guest boots (numa2 by default) and starts scx_locality as the lab always does,
once per configuration of CONFIGS, with lab/guest/verifstats.c preloaded (the "verifier" image extra). The shim
makes each BPF_PROG_LOAD of the agent's libbpf with the verifier's BPF_LOG_STATS log level, which adds the
verifier's summary line to a load without changing what is verified: the same instructions, maps and frozen
rodata the agent writes for that machine and those flags (the rodata prunes whole mechanisms, so a loader of the
bare object would measure another program). From each program's summary ("processed N insns (limit 1000000)
max_states_per_insn N total_states N peak_states N ...") come the three figures compared here:

- insns: instructions the verifier processed (bpf_prog_info's verified_insns; the kernel refuses a program past
  1,000,000);
- total_states: verifier states it created in all; peak_states: the most it held at once.

The load time ("verification time N usec") is printed beside them, not compared: under TCG it is noisy, and it
follows the processed instructions.

The figures are deterministic for one kernel, one build of the BPF side and one machine's rodata, so any change
comes from the code. MARGIN_PCT (10%) lets ordinary edits through (a counter, a branch) and catches the growth
that matters: the rule whose load took 57-65 s under TCG had multiplied its program's processed instructions.
A change must also exceed SLACK (100 instructions, 10 states), so that a small program is not held to 10% of a
few dozen. A program that grows past the margin, a program new since the baseline or one no longer loaded fails
the check until the baseline is rewritten with `bin/lab verifier --update` (and committed), which is the review
point: the commit shows by how much each program grew.
"""
from __future__ import annotations

import io
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from . import image, machines, paths, run, setup

BASELINE = paths.REPO / "scheduler" / "verifier-baseline.toml"
BPF_DIR = paths.REPO / "scheduler" / "src" / "bpf"
MARGIN_PCT = 10
METRICS = ("insns", "total_states", "peak_states")
SLACK = {"insns": 100, "total_states": 10, "peak_states": 10}
# The agent's configurations measured in the boot, by label: the default, and --sparse-idle, the one switch that
# loads a program the default does not (ops.update_idle); memory.bpf.c's fault counter loads by default on a
# machine with more than one node. Labels are TOML bare keys.
CONFIGS = {"default": [], "sparse-idle": ["--sparse-idle"]}
# The most a load may take in the guest before it counts as failed (the bad rule took 57-65 s under TCG).
LOAD_LIMIT_S = 300

STATS_RE = re.compile(r"processed (\d+) insns \(limit \d+\) max_states_per_insn \d+ total_states (\d+) "
                      r"peak_states (\d+)")
TIME_RE = re.compile(r"verification time (\d+) usec")
# The kernel's per-function line of the same summary (7.x): the instructions processed in the function itself and
# with its callees, where the static ones are counted at every call.
SUBPROG_RE = re.compile(r"subprog \d+ \((\w+)\) (\w+) insns_self (\d+) insns_total (\d+)")
STATUS_RE = re.compile(r"^verifier-load: (\S+) state=(\S+) rc=(-?\d+)", re.M)
KNAME_LEN = 15  # the kernel keeps 15 characters of a program's name (BPF_OBJ_NAME_LEN less the NUL)


class VerifierError(Exception):
    """The measurement itself failed (no stats, a load refused); the message says which and where to look."""


@dataclass(frozen=True)
class Stats:
    insns: int
    total_states: int
    peak_states: int

    def get(self, metric: str) -> int:
        return getattr(self, metric)


@dataclass(frozen=True)
class Function:
    """One function of a program as the verifier walked it: static (checked at each call, in the caller's state)
    or global (checked once); the instructions it processed itself and with its callees."""
    name: str
    linkage: str
    insns_self: int
    insns_total: int


@dataclass
class Measured:
    """One configuration's programs: name -> Stats, name -> verification time (us), loads the kernel refused
    (name -> errno), the loads of programs that are not scx_locality's (libbpf's feature probes), and per
    program its functions (when the kernel reports them)."""
    programs: dict[str, Stats]
    time_us: dict[str, int]
    refused: dict[str, int]
    other: list[str]
    functions: dict[str, list[Function]] = field(default_factory=dict)


# Programs the sched_ext headers (scx_cargo's scx/common.bpf.h) put into every scheduler's object, loaded with it.
LIBRARY_PROGRAMS = {"scx_lib_init_probe"}


def program_names(bpf_dir: Path = BPF_DIR) -> set[str]:
    """The names of scx_locality's BPF programs: from its sources, the struct_ops callbacks (BPF_STRUCT_OPS,
    BPF_STRUCT_OPS_SLEEPABLE) and the other programs (BPF_PROG); and LIBRARY_PROGRAMS."""
    names = set(LIBRARY_PROGRAMS)
    for f in sorted(bpf_dir.glob("*.bpf.c")):
        names |= set(re.findall(r"\bBPF_(?:STRUCT_OPS(?:_SLEEPABLE)?|PROG)\(\s*(\w+)", f.read_text()))
    return names


def full_name(kname: str, names: set[str]) -> str | None:
    """The program whose name the kernel keeps as kname (its first 15 characters), if exactly one has it."""
    hits = [n for n in names if n[:KNAME_LEN] == kname]
    return hits[0] if len(hits) == 1 else None


def parse_verifstats(text: str, names: set[str]) -> Measured:
    """The shim's lines ("verifstats: NAME<TAB>rc=N<TAB>LOG") of one configuration."""
    m = Measured({}, {}, {}, [])
    for line in text.splitlines():
        if not line.startswith("verifstats: "):
            continue
        parts = line[len("verifstats: "):].split("\t", 2)
        if len(parts) < 3 or not parts[1].startswith("rc="):
            continue
        kname, rc, log = parts[0], int(parts[1][3:]), parts[2]
        name = full_name(kname, names)
        if name is None:
            m.other.append(kname)
            continue
        if rc < 0:
            m.refused[name] = -rc
            continue
        st = STATS_RE.search(log)
        if not st:
            raise VerifierError(f"{name}: the verifier's log has no stats line: {log[:300]!r}")
        m.programs[name] = Stats(*(int(x) for x in st.groups()))
        t = TIME_RE.search(log)
        if t:
            m.time_us[name] = int(t.group(1))
        funcs = [Function(f, link, int(a), int(b)) for f, link, a, b in SUBPROG_RE.findall(log)]
        if funcs:
            m.functions[name] = funcs
    return m


def format_functions(measured: Measured, min_insns: int = 1000, top: int = 6) -> str:
    """Where the verifier's work goes: for each program of at least @min_insns processed instructions, its
    @top functions by instructions processed in the function itself (a static one once per call)."""
    out = []
    for prog in sorted(measured.programs, key=lambda p: -measured.programs[p].insns):
        if measured.programs[prog].insns < min_insns or prog not in measured.functions:
            continue
        funcs = sorted(measured.functions[prog], key=lambda f: -f.insns_self)[:top]
        out.append(f"{prog} ({measured.programs[prog].insns:,} insns): " +
                   ", ".join(f"{f.name} {f.insns_self:,}{' (global)' if f.linkage == 'global' else ''}"
                             for f in funcs))
    return "\n".join(out)


# ---- the baseline file ----

def load_baseline(path: Path = BASELINE) -> dict:
    """{machine: {"kernel": str, "configs": {config: {program: Stats}}}}; {} when the file does not exist."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    out = {}
    for machine, sect in data.items():
        configs = {}
        for config, progs in sect.items():
            if not isinstance(progs, dict):
                continue
            configs[config] = {p: Stats(**{k: int(v[k]) for k in METRICS}) for p, v in progs.items()}
        out[machine] = {"kernel": sect.get("kernel", ""), "configs": configs}
    return out


HEADER = """\
# The kernel verifier's cost of each BPF program of scx_locality: instructions processed (insns) and states
# (total_states: created in all; peak_states: held at once), as the lab's guest kernel verifies them when the
# agent loads on MACHINE with each configuration's flags ("default": none). Written by
# `bin/lab verifier --update` (lab/verifier.py, which says how they are measured); `make test` fails when a
# program grows by more than the margin there without this file being rewritten.
"""


def format_baseline(base: dict) -> str:
    out = [HEADER]
    for machine in sorted(base):
        out.append(f"[{machine}]")
        out.append(f'kernel = "{base[machine]["kernel"]}"')
        out.append("")
        for config in sorted(base[machine]["configs"], key=lambda c: (c != "default", c)):
            out.append(f"[{machine}.{config}]")
            progs = base[machine]["configs"][config]
            width = max((len(p) for p in progs), default=0)
            for p in sorted(progs):
                s = progs[p]
                out.append(f"{p:<{width}} = {{ insns = {s.insns}, total_states = {s.total_states}, "
                           f"peak_states = {s.peak_states} }}")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# ---- the comparison ----

@dataclass
class Row:
    config: str
    program: str
    now: Stats | None
    base: Stats | None
    time_us: int | None = None
    verdict: str = "ok"  # ok, grew, smaller, new, gone, refused
    detail: str = ""


def change_pct(now: int, base: int) -> float | None:
    return None if base == 0 else (now - base) * 100.0 / base


def grew(now: int, base: int, metric: str, margin_pct: float = MARGIN_PCT) -> bool:
    """Over the margin: more than margin_pct above the baseline and more than SLACK[metric] above it."""
    return now - base > SLACK[metric] and now > base * (1 + margin_pct / 100.0)


def compare(base_configs: dict[str, dict[str, Stats]], measured: dict[str, Measured],
            margin_pct: float = MARGIN_PCT) -> list[Row]:
    """One row per configuration and program, measured or in the baseline; a row's verdict is not "ok" or
    "smaller" when it fails the check (see failures())."""
    rows = []
    for config in sorted(set(base_configs) | set(measured), key=lambda c: (c != "default", c)):
        b = base_configs.get(config, {})
        m = measured.get(config, Measured({}, {}, {}, []))
        for prog in sorted(set(b) | set(m.programs) | set(m.refused)):
            row = Row(config, prog, m.programs.get(prog), b.get(prog), m.time_us.get(prog))
            if prog in m.refused:
                row.verdict, row.detail = "refused", f"the kernel refused the load (errno {m.refused[prog]})"
            elif row.now is None:
                row.verdict, row.detail = "gone", "in the baseline but not loaded"
            elif row.base is None:
                row.verdict, row.detail = "new", "loaded but not in the baseline"
            else:
                over = [k for k in METRICS if grew(row.now.get(k), row.base.get(k), k, margin_pct)]
                if over:
                    row.verdict = "grew"
                    row.detail = "; ".join(f"{k} {row.base.get(k):,} -> {row.now.get(k):,} "
                                           f"(+{change_pct(row.now.get(k), row.base.get(k)):.0f}%)" for k in over)
                elif any(grew(row.base.get(k), row.now.get(k), k, margin_pct) for k in METRICS):
                    # shrunk past the margin: fine, but an update keeps the baseline tight
                    row.verdict = "smaller"
            rows.append(row)
    return rows


def failures(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.verdict not in ("ok", "smaller")]


def failure_message(rows: list[Row], machine: str, margin_pct: float = MARGIN_PCT) -> str:
    """What a failed check says: each failing program, why, and how to update the baseline."""
    bad = failures(rows)
    lines = [f"verifier baseline ({BASELINE.relative_to(paths.REPO)}, machine {machine}, margin {margin_pct}%): "
             f"{len(bad)} program(s) fail:"]
    lines += [f"  {r.program} ({r.config}): {r.verdict}: {r.detail}" for r in bad]
    lines.append(f"If the change is intended, rewrite the baseline with `bin/lab verifier --machine {machine} "
                 f"--update` and commit {BASELINE.relative_to(paths.REPO)} with it (the diff shows the growth).")
    return "\n".join(lines)


def _cell(now: int | None, base: int | None) -> tuple[str, str, str]:
    n = f"{now:,}" if now is not None else "-"
    b = f"{base:,}" if base is not None else "-"
    if now is None or base is None:
        return n, b, ""
    pct = change_pct(now, base)
    if pct is None:
        return n, b, ("" if now == base else f"{now - base:+,}")
    return n, b, ("" if now == base else f"{now - base:+,} ({pct:+.{1 if abs(pct) < 1 else 0}f}%)")


def format_table(rows: list[Row]) -> str:
    """program / insns / states (total, peak) / baseline / change, per configuration."""
    head = ["config", "program", "insns", "base", "change", "total_st", "base", "change", "peak_st", "base",
            "change", "verify_ms", "verdict"]
    body = []
    for r in rows:
        cells = [r.config, r.program]
        for k in METRICS:
            cells += _cell(r.now.get(k) if r.now else None, r.base.get(k) if r.base else None)
        cells.append(f"{r.time_us / 1000:.0f}" if r.time_us is not None else "-")
        cells.append(r.verdict)
        body.append(cells)
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    left = {0, 1, len(head) - 1}
    fmt = lambda cells: "  ".join(c.ljust(w) if i in left else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([fmt(head)] + [fmt(c) for c in body])


# ---- the measurement in a guest ----

def guest_command(configs: dict[str, list[str]], override: str | None, limit_s: int = LOAD_LIMIT_S) -> str:
    """The job's shell command: per configuration, start scx_locality with the shim preloaded, wait until it is
    enabled (or has exited), stop it, send the shim's lines and the agent's log to the host."""
    q = shlex.quote
    lines = [". /lab/lib.sh",
             "vs_load() {",
             "  label=$1; shift",
             "  out=/tmp/verifstats-$label.txt; alog=/tmp/verifier-agent-$label.log",
             "  rm -f $out",
             f"  VERIFSTATS_OUT=$out LD_PRELOAD={image.VERIFSTATS_GUEST} \"$@\" > $alog 2>&1 &",
             "  pid=$!",
             "  i=0",
             f"  while [ $i -lt {limit_s * 10} ] && [ \"$(lab_sched_state)\" != enabled ]; do",
             "    kill -0 $pid 2>/dev/null || break",
             "    sleep 0.1; i=$((i + 1))",
             "  done",
             "  state=$(lab_sched_state)",
             "  kill -INT $pid 2>/dev/null; wait $pid; rc=$?",
             "  j=0",
             "  while [ \"$(lab_sched_state)\" != disabled ] && [ $j -lt 300 ]; do sleep 0.1; j=$((j + 1)); done",
             "  echo \"verifier-load: $label state=$state rc=$rc\"",
             "  lab_put_file verifstats-$label.txt $out",
             "  lab_put_file verifier-agent-$label.log $alog",
             "}"]
    for label, args in configs.items():
        extra = ["--topology-override", override] if override else []
        lines.append("vs_load " + " ".join(q(a) for a in [label, "/usr/local/bin/scx_locality", *args, *extra]))
    return "\n".join(lines)


def measure(m: machines.Machine, configs: dict[str, list[str]] = CONFIGS, stream=None, log=None
            ) -> tuple[dict[str, Measured], run.RunResult]:
    """Boot m once and measure every configuration; VerifierError when a load did not report."""
    override = "/lab/llc-override.json" if m.needs_llc_override else None
    if run.extra_sched_flags():
        print(f"lab: verifier: {run.EXTRA_FLAGS_ENV} is not applied here: the baseline is of the configurations "
              f"of lab/verifier.py CONFIGS", file=sys.stderr)
    timeout = LOAD_LIMIT_S * len(configs) + 120
    step = run.Step(run.parse_sched("eevdf"), guest_command(configs, override), timeout_s=timeout)
    buf = io.StringIO()
    res = run.run_job(m, [step], timeout_s=timeout + 60, stream=buf if stream is None else stream, log=log,
                      build_scheduler=False, image_extras=("verifier",))
    if res.exit_code() != run.EXIT_OK:
        raise VerifierError(f"the boot failed (exit {res.exit_code()}); its folder: {res.run_dir}")
    console = (Path(res.run_dir) / "console.log").read_text(errors="replace")
    status = {label: (state, int(rc)) for label, state, rc in STATUS_RE.findall(console)}
    names = program_names()
    out = {}
    for label in configs:
        f = Path(res.run_dir) / f"verifstats-{label}.txt"
        agent_log = Path(res.run_dir) / f"verifier-agent-{label}.log"
        state, _rc = status.get(label, ("?", -1))
        if not f.exists():
            raise VerifierError(f"{label}: no verifier stats came back (agent state {state}); the agent's log: "
                                f"{agent_log}")
        out[label] = parse_verifstats(f.read_text(errors="replace"), names)
        if not out[label].refused and state != "enabled":
            raise VerifierError(f"{label}: scx_locality did not reach enabled (state {state}); its log: {agent_log}")
    return out, res


def main(args) -> int:
    m = machines.load(args.machine)
    if not args.no_build:
        image.build_scheduler()
    if not image.scheduler_binary().exists():
        raise setup.SetupMissing("scx_locality is not built; run: cargo build --release in scheduler/ "
                                 "(or drop --no-build)")
    path = Path(args.baseline) if args.baseline else BASELINE
    try:
        measured, res = measure(m)
    except VerifierError as e:
        print(f"lab: error: verifier: {e}", file=sys.stderr)
        return run.EXIT_SCHED
    rel = setup.kernel_files()[0]
    base = load_baseline(path)
    mine = base.get(m.name, {"kernel": "", "configs": {}})
    rows = compare(mine["configs"], measured)
    print(format_table(rows))
    for label, ms in measured.items():
        if ms.other:
            print(f"({label}: {len(ms.other)} other loads not of scx_locality's programs, libbpf's feature "
                  f"probes: {', '.join(sorted(set(ms.other)))})")
    if args.functions:
        for label, ms in measured.items():
            text = format_functions(ms)
            if text:
                print(f"{label}: the functions that cost the verifier most, instructions processed in each:")
                print(text)
    print(f"run folder: {res.run_dir}")
    if args.update:
        base[m.name] = {"kernel": rel, "configs": {label: ms.programs for label, ms in measured.items()}}
        path.write_text(format_baseline(base))
        print(f"wrote {path} ({m.name}, kernel {rel})")
        return run.EXIT_OK
    if mine["kernel"] and mine["kernel"] != rel:
        print(f"note: the baseline was measured on kernel {mine['kernel']}, this guest runs {rel}: the verifier "
              f"itself may count differently")
    if failures(rows):
        print(failure_message(rows, m.name), file=sys.stderr)
        return run.EXIT_CMD_FAILED
    print(f"all {len(rows)} programs within {MARGIN_PCT}% of the baseline")
    return run.EXIT_OK
