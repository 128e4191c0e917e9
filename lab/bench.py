# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab bench: run benchmarks under several schedulers in one boot per run, repeat, report.

Data flows one way: lab/benchfile.py reads the benchmarks (lab/benchmarks/NAME.toml: a shell command
template, a parameter sweep whose every combination is one case, the figures to parse from the output),
lab/guest_script.py writes what a step runs in the guest, run.run_job boots and runs it, lab/samples.py parses
what comes back, and lab/report.py (with lab/stats.py and lab/plots.py) writes the report. This module plans
the runs, prepares the schedulers and workloads, shows the progress and collects the cases into results.json.

One run is one boot. Its steps are (benchmark, scheduler) pairs: for each benchmark every scheduler in turn,
with the schedulers' order rotated from run to run so that none always goes first. When the emulator's
text-patching fault (run.tcg_text_patch_oops) kills a boot, the steps it finished keep their records and the
others go on in a new boot, in the same order; a run gives up after three boots in a row that finish no step.
Each case runs under workloads/locsample, which records where the benchmark's tasks ran (last CPU of every task
every 100 ms, se.nr_migrations, per-CPU /proc/stat every 500 ms; per CPU idle time and run-queue wait every 100 ms
or more, from which the bench bounds the idle time while tasks waited) and sends that to the host with the output. A
benchmark with `colocation_tasks = N` also gets locsample's per-tick record (-k, PREFIX.ticks), from which the bench
derives co-location: the share of samples at which its N busiest tasks were all on one node / one LLC.

Everything lands in --out DIR: results.json (every raw figure, per run, step and case, plus locality
counters), raw/ (the guest's files), report.md and PNGs (lab/report.py, lab/plots.py).

`--host` runs the same plan on this machine instead (lab/host.py): a run is then one pass of the same job
script as a local process, with no boot; the machine's topology comes from /sys, and what the machine cannot
run is refused before anything runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from . import benchfile, guest_script, host, image, machines, memmodel, paths, peers, run, samples, setup

WORKLOADS_DIR = paths.REPO / "workloads"
WORKLOAD_PROGRAMS = ["locsample", "wakelat", "memkern", "jbb", "numajob", "memlocal", "memspan", "bpfcost", "forkfirst"]
DEFAULT_MACHINE = "numa2"
# a run during which other work took this share of the host's CPU time is flagged as noisier (run.RunResult)
HOST_BUSY_WARN_PCT = 20
RESULTS_VERSION = 1


# ---------------------------------------------------------------------------------------------------------
# The schedulers: --sched and --ablate


def parse_sched_list(text: str, ablate: bool) -> list[run.SchedSpec]:
    specs, seen = [], set()
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        spec = run.parse_sched(item)
        # Work around lab/schedulers.toml: peers show a versioned ops name (see peers.ops_name).
        spec.ops = peers.ops_name(spec.name) or spec.ops
        if spec.label in seen:
            raise benchfile.BenchError(f"scheduler {spec.label!r} given twice")
        seen.add(spec.label)
        specs.append(spec)
    if ablate:
        base = next((s for s in specs if s.name == "scx_locality"), None)
        if base is None:
            base = run.parse_sched("scx_locality")
            specs.append(base)
            seen.add(base.label)
        for mech in benchfile.ablation_mechanisms():
            args = list(base.args) + shlex.split(mech["off"])
            spec = run.parse_sched("scx_locality:" + shlex.join(args))
            if spec.label not in seen:
                seen.add(spec.label)
                specs.append(spec)
    if not specs:
        raise benchfile.BenchError("no scheduler given")
    return specs


# ---------------------------------------------------------------------------------------------------------
# Progress


def fmt_dur(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Prints which run/step/case is going, the elapsed time and an ETA scaled by how the estimates fare."""

    def __init__(self, total_est: float, out=sys.stdout):
        self.total_est = max(total_est, 1.0)
        self.done_est = 0.0
        self.t0 = time.monotonic()
        self.out = out

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def eta(self) -> float:
        remaining = max(self.total_est - self.done_est, 0.0)
        if self.done_est <= 0:
            return remaining
        ratio = min(max(self.elapsed() / self.done_est, 0.3), 5.0)
        return remaining * ratio

    def advance(self, est: float) -> None:
        self.done_est += est

    def say(self, msg: str) -> None:
        print(f"bench [{fmt_dur(self.elapsed())} elapsed, ETA {fmt_dur(self.eta())}] {msg}", file=self.out,
              flush=True)


class ConsoleWatcher:
    """Stands in for the console stream of run.run_job: keeps only the bench's own marker lines."""

    def __init__(self, progress: Progress, on_marker):
        self.progress = progress
        self.on_marker = on_marker
        self.buf = ""

    def write(self, text: str) -> None:
        self.buf += text
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            line = line.strip()
            if line.startswith("lab-bench: "):
                try:
                    self.on_marker(line[len("lab-bench: "):].split())
                except (ValueError, IndexError):  # the console is the guest's: a bad marker moves no progress
                    pass

    def flush(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------
# Preparing schedulers and workloads


def build_workloads(log) -> None:
    missing = [p for p in WORKLOAD_PROGRAMS if not (image.workloads_bin_dir() / p).exists()]
    r = subprocess.run(["make", "-s", "-C", str(WORKLOADS_DIR)], capture_output=True, text=True)
    if r.returncode != 0:
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-5:])
        raise setup.SetupMissing(f"building workloads/ failed (make -C workloads): {tail}")
    if missing:
        log(f"bench: built workloads: {', '.join(missing)}")


def build_locality() -> str | None:
    """cargo build --release of scx_locality; None when it built, else the reason (the error's tail)."""
    manifest = paths.REPO / "scheduler" / "Cargo.toml"
    if not manifest.exists():
        return f"{manifest} is missing"
    # Run in scheduler/: cargo reads .cargo/config.toml from the working directory, not the manifest's, and
    # scheduler/.cargo/config.toml is what points BPF_CLANG at a clang that exists (Debian has clang-19 only).
    try:
        r = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(manifest)],
                           capture_output=True, text=True, cwd=manifest.parent)
    except OSError as e:  # no cargo on PATH (sudo's PATH has no ~/.cargo/bin)
        return (f"cannot run cargo ({e.strerror}): build as your own user (make build), then pass --no-build")
    if r.returncode != 0:
        return "cargo build failed: " + peers.error_summary(r.stdout + r.stderr)
    return None


def prepare_schedulers(specs: list[run.SchedSpec], build: bool, log) -> dict[str, str]:
    """Build what is needed; return {label: reason} for the schedulers that cannot run."""
    failed: dict[str, str] = {}
    if any(s.name == "scx_locality" for s in specs):
        reason = None
        if build and not os.environ.get("LOCALITY_SCHED_BIN"):  # a pinned build is used as it is
            log("bench: building scx_locality (cargo build --release)")
            reason = build_locality()
        if reason is None and not image.scheduler_binary().exists():
            reason = f"{image.scheduler_binary()} does not exist (build it: cd scheduler && cargo build --release)"
        if reason:
            for s in specs:
                if s.name == "scx_locality":
                    failed[s.label] = reason
    if any(s.name == image.BASELINE_NAME for s in specs):
        try:
            image.check_baseline()
        except setup.SetupMissing as e:
            for s in specs:
                if s.name == image.BASELINE_NAME:
                    failed[s.label] = str(e)
    for name in sorted({s.name for s in specs
                        if not s.is_eevdf and s.name not in ("scx_locality", image.BASELINE_NAME)}):
        path, built_by = run.other_sched_binary(name)
        if name not in peers.registry_peers():  # built here (make -C workloads, which the bench runs first)
            if not path.exists():
                for s in specs:
                    if s.name == name:
                        failed[s.label] = f"{name} is not built (run: {built_by})"
            continue
        status, detail = peers.status(name)
        if status != "built" and build:
            ok, detail = peers.build(name, log=log)
            status = "built" if ok else "failed"
        if status != "built":
            reason = detail if status == "failed" else f"{name} is not built (run: bin/lab peers {name})"
            for s in specs:
                if s.name == name:
                    failed[s.label] = reason
    return failed


# ---------------------------------------------------------------------------------------------------------
# The bench


def boot_estimate(m: machines.Machine) -> float:
    """Seconds from QEMU start to the first step (seen: 8 vCPUs ~10 s, 16 ~20 s, 64 ~120 s)."""
    return 6.0 + 1.8 * m.nr_cpus


def sched_overhead(spec: run.SchedSpec) -> float:
    return 0.0 if spec.is_eevdf else 4.0 + spec.start_timeout_s / 20.0


def rotate(items: list, k: int) -> list:
    if not items:
        return []
    k %= len(items)
    return items[k:] + items[:k]


def plan_run(benches: list[benchfile.Benchmark], scheds: list[run.SchedSpec],
             run_idx: int) -> list[tuple[benchfile.Benchmark, run.SchedSpec]]:
    """The steps of run run_idx (0-based): each benchmark under every scheduler, the order rotated per run."""
    order = rotate(scheds, run_idx)
    return [(b, s) for b in benches for s in order]


def _rel(path: Path, out: Path) -> str:
    return str(path.relative_to(out))


def collect_step(result: run.RunResult, step_idx: int, bench: benchfile.Benchmark, spec: run.SchedSpec,
                 topo: machines.Topology, out: Path, raw_dir: Path, mm: tuple | None = None,
                 pos: int | None = None) -> dict:
    """One step's record. step_idx: its index in the run's plan (its files are named by it); pos: its position
    among the boot's steps, when the boot ran only some of the plan (default step_idx). mm: (machine, parsed
    memmodel log) when the boot ran the memory model."""
    pos = step_idx if pos is None else pos
    sr = result.steps[pos] if pos < len(result.steps) else run.StepResult(sched=spec.label)
    started = bool(sr.sched_started or (spec.is_eevdf and sr.cmd_exit is not None))
    step = {"step": step_idx, "bench": bench.name, "sched": spec.label, "started": started,
            "start_error": sr.sched_start_error, "start_s": sr.sched_start_s,
            "ejected": sr.sched_ejected, "exit_kind": sr.sched_exit_kind, "exit_reason": sr.sched_exit_reason,
            "cmd_seconds": sr.cmd_seconds, "final_stats": None, "sched_log": None, "cases": []}
    if sr.sched_log and Path(sr.sched_log).exists():
        dest = raw_dir / f"sched-{step_idx}.log"
        shutil.copyfile(sr.sched_log, dest)
        step["sched_log"] = _rel(dest, out)
        step["final_stats"] = samples.parse_final_stats(dest.read_text(errors="replace"))
        if sr.sched_start_error:
            tail = samples.log_tail(str(dest))
            if tail:
                step["start_error"] = f"{sr.sched_start_error}: {tail}"
    for j, case in enumerate(bench.cases()):
        tag = guest_script.case_tag(step_idx, j)
        figures = [f for f in bench.figures if f.applies(case.label)]
        c = {"case": case.id, "label": case.label, "params": case.params, "status": "not-run", "rc": None,
             "error": None, "elapsed_s": None, "figures": {f.name: None for f in figures},
             "locality": None, "residency": None, "colocation": None, "process_llc": None, "bpf_cost": None,
             "interrupts": None, "idle_queued": None, "files": {}}
        for kind in ("out", "tasks", "cpu", "ticks", "bpf", "irq", "mm"):
            src = result.files.get(f"{tag}.{kind}")
            if src and Path(src).exists():
                dest = raw_dir / f"{tag}.{kind}"
                shutil.copyfile(src, dest)
                c["files"][kind] = _rel(dest, out)
        if "bpf" in c["files"]:
            c["bpf_cost"] = samples.parse_bpfcost((out / c["files"]["bpf"]).read_text(errors="replace"))
        if "irq" in c["files"]:
            c["interrupts"] = samples.parse_interrupts((out / c["files"]["irq"]).read_text(errors="replace"))
        if "out" not in c["files"]:
            c["error"] = (step["start_error"] and f"{spec.label} did not start: {step['start_error']}") or \
                ("the guest was killed (timeout)" if result.timed_out else "no output came back")
            step["cases"].append(c)
            continue
        text = (out / c["files"]["out"]).read_text(errors="replace")
        rcs = guest_script.RESULT_RE.findall(text)
        c["rc"] = int(rcs[-1]) if rcs else None
        meta, tasks = samples.parse_tasks((out / c["files"]["tasks"]).read_text(errors="replace")) \
            if "tasks" in c["files"] else samples.parse_tasks("")
        if meta["elapsed_ms"] is not None:
            c["elapsed_s"] = round(meta["elapsed_ms"] / 1000.0, 3)
        c["sampler"] = {"ticks": meta["ticks"], "busy_ms": meta["busy_ms"], "stat_samples": meta["stat_samples"],
                        "stat_us": meta["stat_us"], "rq_ms": meta["rq_ms"]}
        if "cpu" in c["files"]:
            c["idle_queued"] = samples.idle_while_queued(
                samples.parse_rq((out / c["files"]["cpu"]).read_text(errors="replace")), topo)
        if mm is not None:
            c["memory"] = case_memory(mm, out / c["files"]["mm"] if "mm" in c["files"] else None)
        if c["rc"] == 0:
            c["figures"] = {f.name: f.parse(text) for f in figures}
            if mm is not None:
                c["figures"].update(memmodel.figures(c["memory"]))
            missing = [k for k, v in c["figures"].items() if v is None]
            c["status"] = "ok" if not missing else "failed"
            if missing:
                c["error"] = f"figure(s) not found in the output: {', '.join(missing)}"
        else:
            c["status"] = "failed"
            tail = " | ".join(ln for ln in text.strip().splitlines()[-4:] if not ln.startswith("lab-bench-rc"))
            c["error"] = ("timed out after %ds" % case.timeout_s if meta.get("timeout") else
                          f"exit status {c['rc']}") + (f": {tail}" if tail else "")
        if tasks:
            c["locality"] = samples.locality(samples.select_tasks(tasks, bench.sample_comm), topo)
            if "ticks" in c["files"]:
                ticks = samples.parse_ticks((out / c["files"]["ticks"]).read_text(errors="replace"))
                idx = samples.busiest(tasks, samples.select_tasks(tasks, bench.sample_comm),
                                      bench.colocation_tasks)
                c["colocation"] = samples.colocation(ticks, idx, topo, bench.colocation_settle_ms, tasks)
            if bench.residency_comm:
                c["residency"] = samples.residency(tasks, topo, bench.residency_comm, text)
            if bench.process_llc:
                c["process_llc"] = samples.process_llc(samples.select_tasks(tasks, bench.sample_comm), topo)
        step["cases"].append(c)
    return step


def case_memory(mm: tuple, mm_file: Path | None) -> dict | None:
    """The memory model's record of a case: its BASE.mm names the case's begin mark in the boot."""
    m, log = mm
    if mm_file is None:
        return None
    w = mm_file.read_text(errors="replace").split()
    if len(w) != 2 or w[0] != "begin" or not w[1].isdigit():
        return None
    return memmodel.case_memory(m, log, int(w[1]))


def image_extras(benches: list[benchfile.Benchmark]) -> list[str]:
    """The image extras the benches' boots need (each benchmark's image_extras): no boot gets one it does not."""
    return sorted({e for b in benches for e in b.image_extras})


def write_results(out: Path, results: dict) -> None:
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.rename(out / "results.json")


def run_bench(m: machines.Machine | host.HostMachine, specs: list[run.SchedSpec], benches: list[benchfile.Benchmark],
              runs: int, out: Path, build: bool = True, command_line: str = "", stdout=sys.stdout,
              session: host.Session | None = None, resume: dict | None = None,
              prepared: dict[str, str] | None = None, runs_total: int | None = None,
              memory_model: bool = False) -> dict:
    """The bench in guests of m, or with session (inside its with block) on this machine (m its HostMachine).
    resume: an earlier results.json of the same plan (see load_resume); its runs are kept and the bench goes on
    with the next run number, so the scheduler order keeps rotating as if it had never stopped.
    prepared: the schedulers that cannot run ({label: reason}) when the caller built and checked them already
    (bin/lab matrix); runs_total: the runs the caller means to reach in the end, for the report (default runs).
    memory_model: every boot runs the memory model (lab/memmodel.py); its figures join each case's."""
    def log(msg):
        print(msg, file=stdout, flush=True)

    out.mkdir(parents=True, exist_ok=True)
    topo = m.topology()
    if prepared is not None:
        failed = dict(prepared)
    elif session is None:
        build_workloads(log)
        failed = prepare_schedulers(specs, build, log)
    else:
        failed = {}  # on the host, what cannot run was refused before (main), and built there
    builds = build_ids(specs)  # known only now: this may have built scx_locality
    if resume is not None:
        why = resume_check(resume, specs, benches, m.name, builds, memory_model=memory_model)
        if why:
            raise benchfile.BenchError(f"cannot resume {out}: {why}")
    runnable = [s for s in specs if s.label not in failed]
    place = session.place if session is not None else run.GUEST
    boot_est = 0.0 if session is not None else boot_estimate(m)
    results = {
        "version": RESULTS_VERSION, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command_line,
        "machine": m.name, "machine_summary": m.summary().strip(), "nr_cpus": m.nr_cpus,
        "host": session is not None,  # bench --host: this machine itself, not a guest
        "topology": topo.to_json(), "runs_requested": runs_total or runs, "builds": builds,
        "scheds": [{"label": s.label, "name": s.name, "args": s.args,
                    "prepare_error": failed.get(s.label)} for s in specs],
        # LOCALITY_SCHED_EXTRA_FLAGS: appended to every scx_locality of the bench (run.sched_args); [] for none
        "sched_extra_flags": extra_flags(specs),
        "benchmarks": {b.name: b.to_json() for b in benches},
        "memory_model": None,
        "sampler": {"sample_ms": guest_script.SAMPLE_MS, "sched_ms": guest_script.SCHED_MS,
                    "cpustat_ms": guest_script.CPUSTAT_MS, "budget_pct": guest_script.SAMPLER_BUDGET_PCT,
                    "settle_ms": benchfile.COLOCATION_SETTLE_MS},
        "runs": [],
    }
    if memory_model:  # main() refuses it with --host
        memmodel.plugin_args(m)  # refuses a machine without a [memory] table before anything runs
        memmodel.build(log)
        results["memory_model"] = {"tick_ms": memmodel.TICK_MS, **asdict(m.memory)}
        for b in results["benchmarks"].values():
            b["figures"] = b["figures"] + memmodel.figure_defs()
    if resume is not None:
        results["created"] = resume.get("created", results["created"])
        results["runs"] = list(resume.get("runs", []))
    first = len(results["runs"])
    for label, reason in failed.items():
        log(f"bench: {label} cannot run: {reason}")
    write_results(out, results)
    if not runnable:
        log("bench: no scheduler can run; writing the report of the failures")
        return results
    per_run_est = boot_est + sum(sched_overhead(s) + sum(c.est_s for c in b.cases())
                                         for b, s in plan_run(benches, runnable, 0))
    progress = Progress(per_run_est * max(runs - first, 0), out=stdout)
    nr_cases = {b.name: len(b.cases()) for b in benches}
    for r in range(first, runs):
        steps_plan = plan_run(benches, runnable, r)
        state = {"booted": False}

        def on_marker(words, steps_plan=steps_plan, r=r, state=state):
            if not words:
                return
            if not state["booted"]:
                state["booted"] = True
                progress.advance(boot_est)
            if words[0] == "step-begin" and len(words) >= 2:
                i = int(words[1])
                b, s = steps_plan[i]
                progress.advance(sched_overhead(s))
            elif words[0] in ("case-begin", "case-end") and len(words) >= 3:
                i, j = int(words[1]), int(words[2])
                b, s = steps_plan[i]
                case = b.cases()[j]
                if words[0] == "case-end":
                    progress.advance(case.est_s)
                    return
                progress.say(f"run {r + 1}/{runs}, step {i + 1}/{len(steps_plan)} [{s.label}] {b.name} "
                             f"case {j + 1}/{nr_cases[b.name]}: {case.label}")

        order = [s.label for s in rotate(runnable, r)]
        where = f"on this host ({m.name})" if session is not None else f"booting {m.name}"
        progress.say(f"run {r + 1}/{runs}: {where}; scheduler order {', '.join(order)}")
        est_before = progress.done_est
        watcher = ConsoleWatcher(progress, on_marker)
        raw_dir = out / "raw" / f"run{r + 1}"
        raw_dir.mkdir(parents=True, exist_ok=True)
        collected: dict[int, dict] = {}
        boots: list[dict] = []
        pending = list(range(len(steps_plan)))
        fruitless = 0
        while True:
            # the steps not done yet, each under its index in the plan (its files' names, its progress markers)
            steps = [run.Step(s, guest_script.step_command(b.cases(), i, f"run={r + 1} bench={b.name} sched={s.label}",
                                                           place, memory_model=memory_model))
                     for i in pending for b, s in [steps_plan[i]]]
            timeout = int(sum(c.timeout_s for i in pending for c in steps_plan[i][0].cases()) + 30 * len(pending))
            run_dir = run.new_run_dir(m.name, "bench")
            if session is not None:
                result = session.run_job(steps, timeout, run_dir, stream=watcher)
            else:
                # an emulator fault is resumed below, from the step it cut, instead of booting the whole run again
                result = run.run_job(m, steps, timeout_s=timeout, run_dir=run_dir, stream=watcher,
                                     log=lambda s: None, build_scheduler=False, image_extras=image_extras(benches),
                                     memory_model=memory_model, retry_text_patch=False)
            # the boot the results come from: RUN_DIR-retry or -retry2 when run_job booted again
            used_dir = Path(result.run_dir) if result.run_dir else run_dir
            boot_raw = raw_dir if not boots else raw_dir / f"boot{len(boots) + 1}"
            boot_raw.mkdir(parents=True, exist_ok=True)
            for name in ("console.log", "kernel.log", "result.json"):
                if (used_dir / name).exists():
                    shutil.copyfile(used_dir / name, boot_raw / name)
            boot = boot_record(result, used_dir, pending)
            mm = None
            if memory_model:
                mm, boot["memory_model"] = memory_model_run(m, used_dir, boot_raw)
            done = []
            for pos, i in enumerate(pending):
                b, s = steps_plan[i]
                collected[i] = collect_step(result, i, b, s, topo, out, boot_raw, mm, pos=pos)
                if step_finished(result, pos, collected[i]):
                    done.append(i)
            boots.append(boot)
            left = [i for i in pending if i not in done]
            cut = (session is None and left and not result.guest_errors and not result.cut_by_deadline
                   and run.tcg_text_patch_oops(used_dir))
            if not cut:
                break
            boot["emulator_fault"] = "text-patching int3 oops"
            fruitless = 0 if done else fruitless + 1
            if fruitless > run.EMULATOR_RETRIES:
                break
            progress.say(f"run {r + 1}/{runs}: the guest oopsed on the emulator's text-patching int3 (see "
                         f"{used_dir / 'console.log'}); its {len(left)} step(s) not done go on in a new boot "
                         f"({len(done)} done in that one)")
            pending = left
        # Whatever the markers said, this run's share of the estimate is now done.
        progress.done_est = est_before + per_run_est
        rec = run_record(r + 1, order, boots, [collected[i] for i in range(len(steps_plan))], memory_model)
        results["runs"].append(rec)
        write_results(out, results)
        bad = []
        for st in rec["steps"]:
            ok = sum(1 for c in st["cases"] if c["status"] == "ok")
            if ok < len(st["cases"]):
                why = st["start_error"] or next((c["error"] for c in st["cases"] if c["error"]), "")
                bad.append(f"{st['sched']} {st['bench']}: {ok}/{len(st['cases'])} cases ok ({why})")
            if st["ejected"]:
                bad.append(f"{st['sched']} {st['bench']}: ejected: {st['exit_kind']}: {st['exit_reason']}")
        bad += [f"the lab refused a record of the guest: {e}" for e in rec["guest_errors"]]
        busy = rec["host_other_pct"]
        progress.say(f"run {r + 1}/{runs} done in {fmt_dur(rec['wall_s'] or 0)}"
                     + (f" (boot {rec['boot_s']} s" + (f"; {len(boots)} boots" if len(boots) > 1 else "") + ")"
                        if session is None else "")
                     + (f"; the host gave {busy}% of its CPU time to other work meanwhile: this run's figures "
                        "are noisier" if busy is not None and busy >= HOST_BUSY_WARN_PCT else "")
                     + ("" if not bad else "; problems:\n  " + "\n  ".join(bad)))
    return results


def memory_model_run(m: machines.Machine, run_dir: Path, raw_dir: Path) -> tuple[tuple | None, dict]:
    """Read one boot's memory model log; check its layout against the guest's. Returns ((machine, log) or None
    when the counts cannot be used, the run's memory_model record)."""
    src = run_dir / memmodel.LOG_NAME
    if not src.exists():
        return None, {"error": f"the plugin wrote no log ({src})"}
    if src.resolve() != (raw_dir / memmodel.LOG_NAME).resolve():
        shutil.copyfile(src, raw_dir / memmodel.LOG_NAME)
    text = src.read_text(errors="replace")
    log = memmodel.parse_log(text)
    console = (run_dir / "console.log").read_text(errors="replace") if (run_dir / "console.log").exists() else ""
    problems = ([f"the plugin refused to start: {log.error}"] if log.error else []) + \
        memmodel.layout_problems(log, console)
    last = log.snapshots[-1] if log.snapshots else None
    rec = {"snapshots": len(log.snapshots), "layout_ok": not problems, "error": "; ".join(problems) or None,
           "whole_boot": memmodel.summarize(m, last.counters) if last else None}
    return (None if problems else (m, log)), rec


def boot_record(result: run.RunResult, used_dir: Path, steps: list[int]) -> dict:
    """One boot of a run: which of the plan's steps it was given, and how it went."""
    boot = {"run_dir": str(used_dir), "steps": list(steps), "boot_s": result.boot_s, "wall_s": result.wall_s,
            "host_other_pct": getattr(result, "host_other_pct", None), "timed_out": result.timed_out,
            "completed": result.completed, "topology_ok": result.topology_ok, "exit": result.exit_code(),
            "guest_errors": result.guest_errors, "emulator_fault": None}
    if result.topology_ok is False:
        boot["error"] = "the guest's topology does not match the machine file:\n" + run.topology_report(result)
    return boot


def run_record(number: int, order: list[str], boots: list[dict], steps: list[dict], memory_model: bool) -> dict:
    """A run's record in results.json from its boots' (one, or more when an emulator fault cut a boot and the
    steps it had not finished went on in another): wall time summed, exit and completion the last boot's."""
    last = boots[-1]
    rec = {"run": number, "run_dir": last["run_dir"], "order": order, "boot_s": boots[0]["boot_s"],
           "wall_s": round(sum(bt["wall_s"] or 0.0 for bt in boots), 1) if last["wall_s"] is not None else None,
           "host_other_pct": max((bt["host_other_pct"] for bt in boots if bt["host_other_pct"] is not None),
                                 default=None),
           "timed_out": any(bt["timed_out"] for bt in boots), "completed": last["completed"],
           "topology_ok": False if any(bt["topology_ok"] is False for bt in boots) else last["topology_ok"],
           "exit": last["exit"], "steps": steps, "guest_errors": [e for bt in boots for e in bt["guest_errors"]]}
    if len(boots) > 1:  # which boot ran which steps
        rec["boots"] = [{k: v for k, v in bt.items() if k not in ("memory_model", "guest_errors")} for bt in boots]
    errors = [bt["error"] for bt in boots if bt.get("error")]
    if errors:
        rec["error"] = "\n".join(errors)
    if memory_model:
        rec["memory_model"] = merged_memory_records([bt["memory_model"] for bt in boots])
    return rec


def merged_memory_records(recs: list[dict]) -> dict:
    """A run's memory model record from those of its boots (more than one when it was resumed after an
    emulator fault): usable only if every boot's layout was; the whole-boot counts are the first boot's."""
    if len(recs) == 1:
        return recs[0]
    errors = [f"boot {k + 1}: {r['error']}" for k, r in enumerate(recs) if r.get("error")]
    return {"snapshots": sum(r.get("snapshots") or 0 for r in recs),
            "layout_ok": all(r.get("layout_ok") for r in recs), "error": "; ".join(errors) or None,
            "whole_boot": recs[0].get("whole_boot")}


def step_finished(result: run.RunResult, pos: int, step: dict) -> bool:
    """Did the step at position pos of a boot run to its end: its command exited and every case's output came
    back? (A step cut by a guest fault is run again in a new boot; one that finished keeps its record.)"""
    sr = result.steps[pos] if pos < len(result.steps) else None
    return (sr is not None and sr.cmd_exit is not None
            and all("out" in c["files"] for c in step["cases"]))


def refresh_memory(out: Path) -> None:
    """Derive every case's memory-model record and figures again from the plugin logs kept under OUT/raw (a bench
    run with --memory-model), so that a report rebuilt with --report-only has the current figures."""
    results = read_results(out)
    if not results or not results.get("memory_model"):
        return
    m = machines.load(results["machine"])
    for r in results["runs"]:
        raw = out / "raw" / f"run{r['run']}"
        mm, r["memory_model"] = memory_model_run(m, raw, raw) if (raw / memmodel.LOG_NAME).exists() else \
            (None, r.get("memory_model"))
        for st in r["steps"]:
            for c in st["cases"]:
                if mm is None or "mm" not in c["files"]:
                    continue
                c["memory"] = case_memory(mm, out / c["files"]["mm"])
                if c["status"] == "ok":
                    c["figures"].update(memmodel.figures(c["memory"]))
    for b in results["benchmarks"].values():
        b["figures"] = [f for f in b["figures"] if not f.get("memory_model")] + memmodel.figure_defs()
    write_results(out, results)


def build_ids(specs: list[run.SchedSpec]) -> dict[str, str]:
    """What each scheduler ran as: the sha256 (16 hex digits) of the binaries built here, a peer's crate version;
    a resumed bench must not pool runs of another build."""
    def digest(path: Path | None) -> str:
        if path is None or not path.exists():
            return "missing"
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]

    out = {}
    for s in specs:
        if s.name == "scx_locality":
            out[s.label] = digest(image.scheduler_binary())
        elif s.name == image.BASELINE_NAME:
            out[s.label] = digest(image.baseline_binary())
        elif s.name not in peers.registry_peers() and not s.is_eevdf:  # built here (lab/schedulers.toml built_by)
            out[s.label] = digest(run.other_sched_binary(s.name)[0])
        elif not s.is_eevdf:
            e = peers.registry_peers().get(s.name, {})
            out[s.label] = f"{e.get('crate', s.name)} {e.get('version', '')}".strip()
    return out


def extra_flags(specs: list[run.SchedSpec]) -> list[str]:
    """LOCALITY_SCHED_EXTRA_FLAGS when one of specs gets them, else []."""
    return run.extra_sched_flags() if any(s.name in run.EXTRA_FLAGS_TO for s in specs) else []


def read_results(out: Path) -> dict | None:
    """out's results.json, None when there is none."""
    p = out / "results.json"
    return json.loads(p.read_text()) if p.exists() else None


def load_resume(out: Path, specs: list[run.SchedSpec], benches: list[benchfile.Benchmark], machine: str,
                memory_model: bool | None = None) -> dict | None:
    """out's results.json to go on with, None when there is none; raises BenchError when it is of another plan."""
    old = read_results(out)
    if old is None:
        return None
    why = resume_check(old, specs, benches, machine, memory_model=memory_model)
    if why:
        raise benchfile.BenchError(f"cannot resume {out}: {why}")
    return old


def resume_check(old: dict, specs: list[run.SchedSpec], benches: list[benchfile.Benchmark], machine: str,
                 builds: dict[str, str] | None = None, memory_model: bool | None = None) -> str | None:
    """None when the results.json `old` was made by the same plan (machine, schedulers and their builds,
    benchmarks and their cases, with or without the memory model), else what differs: runs of another plan must
    not be pooled with new ones. builds: build_ids(specs) when the caller has it already; memory_model: None
    when the caller does not know."""
    if old.get("version") != RESULTS_VERSION:
        return f"it has results version {old.get('version')}, this lab writes {RESULTS_VERSION}"
    if old.get("machine") != machine:
        return f"it is of machine {old.get('machine')}, not {machine}"
    if memory_model is not None and bool(old.get("memory_model")) != memory_model:
        return f"it ran {'with' if old.get('memory_model') else 'without'} the memory model"
    labels = [s["label"] for s in old.get("scheds", [])]
    if labels != [s.label for s in specs]:
        return f"its schedulers are {', '.join(labels)}, not {', '.join(s.label for s in specs)}"
    was, now_flags = old.get("sched_extra_flags") or [], extra_flags(specs)
    if was != now_flags:
        return (f"its scx_locality ran with {run.EXTRA_FLAGS_ENV}={shlex.join(was)!r}, now it is "
                f"{shlex.join(now_flags)!r}")
    now = builds if builds is not None else build_ids(specs)
    for label, was in (old.get("builds") or {}).items():
        if now.get(label) != was:
            return f"{label} was {was} there and is {now.get(label)} now (another build)"
    new = {b.name: b.to_json() for b in benches}
    for name in sorted(set(new) | set(old.get("benchmarks", {}))):
        a, b = old.get("benchmarks", {}).get(name), new.get(name)
        if a is None or b is None:
            return f"benchmark {name} is in {'the new plan' if a is None else 'it'} only"
        if [(c["id"], c["command"]) for c in a.get("cases", [])] != \
                [(c["id"], c["command"]) for c in b.get("cases", [])]:
            return f"benchmark {name} has another command or other cases now"
    return None


def exit_code(results: dict) -> int:
    """0 all well; 5 a scheduler could not be prepared, failed to start or was ejected; 1 a case failed;
    6 a guest was killed; 4 topology mismatch; 8 a boot broke or the lab refused a record of the guest."""
    runs = results.get("runs", [])
    if any(r.get("guest_errors") for r in runs):
        return run.EXIT_INTERNAL
    if any(r.get("topology_ok") is False for r in runs):
        return run.EXIT_TOPOLOGY
    if any(r.get("timed_out") for r in runs):
        return run.EXIT_TIMEOUT
    if any(not r.get("completed") for r in runs):
        return run.EXIT_INTERNAL
    if any(s.get("prepare_error") for s in results.get("scheds", [])) or any(
            st.get("start_error") or st.get("ejected") for r in runs for st in r["steps"]):
        return run.EXIT_SCHED
    if any(c["status"] != "ok" for r in runs for st in r["steps"] for c in st["cases"]):
        return run.EXIT_CMD_FAILED
    return run.EXIT_OK


def default_out(machine: str) -> Path:
    return paths.runs_dir() / f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{machine}"


def host_builds(specs: list[run.SchedSpec], log) -> None:
    """bench --host without --no-build: build the workloads, scx_locality and any peer found neither built nor
    on PATH, as the guest path would; a failed build raises setup.SetupMissing."""
    build_workloads(log)
    if any(s.name == "scx_locality" for s in specs) and not os.environ.get("LOCALITY_SCHED_BIN"):
        log("bench: building scx_locality (cargo build --release)")
        reason = build_locality()
        if reason:
            raise setup.SetupMissing(f"building scx_locality failed: {reason}")
    for name in sorted({s.name for s in specs if s.name in peers.registry_peers()}):
        if host.find_peer(name) is None:
            ok, detail = peers.build(name, log=log)
            if not ok:
                raise setup.SetupMissing(f"building {name} failed: {detail}")


def main(args) -> int:
    from . import report

    if args.list:
        for name in benchfile.known_benchmarks():
            b = benchfile.load_benchmark(name)
            sweep = " ".join(f"{k}={'/'.join(map(str, v))}" for k, v in b.sweep.items())
            print(f"{name:16s} {len(b.cases()):3d} cases  {sweep:40s} {b.description}")
        return 0
    if args.report_only:
        out = Path(args.report_only)
        if not (out / "results.json").exists():
            raise benchfile.BenchError(f"{out}/results.json does not exist")
        refresh_memory(out)
        path = report.write_report(out)
        print(report.summary_text(out))
        print(f"bench: report: {path}")
        return exit_code(json.loads((out / "results.json").read_text()))
    if not args.bench:
        raise benchfile.BenchError("no benchmark given (--bench NAME[,NAME...]); `bin/lab bench --list` lists them")
    if not 1 <= args.runs <= 100:
        raise benchfile.BenchError(f"--runs {args.runs} is out of range 1..100")
    if args.host and getattr(args, "memory_model", False):
        raise run.UsageError("--memory-model needs the lab's guests (a QEMU plugin); it does not go with --host")
    if args.host and args.machine:
        raise run.UsageError("--machine does not go with --host: --host runs on this machine and reads its "
                             "topology from /sys")
    m = None if args.host else machines.load(args.machine or DEFAULT_MACHINE)
    specs = parse_sched_list(args.sched, args.ablate)
    benches = [benchfile.load_benchmark(s) for s in args.bench.split(",") if s.strip()]
    names = [b.name for b in benches]
    if len(set(names)) != len(names):
        raise benchfile.BenchError("a benchmark is given twice; give its sweep values in one spec instead")
    session = None
    if args.host:
        # Refusals first (one line each, nothing run yet); with building allowed, what is missing of ours is
        # built before the programs and binaries are checked.
        host.check_environment(specs)
        if not args.no_build:
            host_builds(specs, lambda s: print(s, flush=True))
        host.check_programs(benches, WORKLOAD_PROGRAMS)
        m = host.read_machine()
        session = host.Session(m, host.sched_binaries(specs), log=lambda s: print(s, flush=True))
        for w in host.warnings(benches):
            print(f"bench: warning: {w}", flush=True)
    out = Path(args.out) if args.out else default_out(m.name)
    resume = None
    if args.resume:
        if not args.out:
            raise run.UsageError("--resume needs --out: the folder of the bench to go on with")
        resume = load_resume(out, specs, benches, m.name, getattr(args, "memory_model", False))
        if resume is not None:
            print(f"bench: resuming {out}: {len(resume['runs'])} of {args.runs} run(s) done", flush=True)
    elif (out / "results.json").exists() and not args.force:
        raise benchfile.BenchError(f"{out} already holds results.json; use another --out, --resume to go on with "
                                   f"it, or --force to overwrite")
    if out.exists() and args.force and not args.resume:
        for sub in ("raw",):
            shutil.rmtree(out / sub, ignore_errors=True)
        for f in out.glob("*.png"):
            f.unlink()
    if session is None:
        setup.kernel_files()  # raises SetupMissing early
    cmdline = "bin/lab " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0] else ""
    total_cases = sum(len(b.cases()) for b in benches)
    if session is not None:
        print(f"bench: this host: {m.summary()}", flush=True)
    print(f"bench: {m.name}, schedulers {', '.join(s.label for s in specs)}; {len(benches)} benchmark(s), "
          f"{total_cases} case(s), {args.runs} run(s); output in {out}", flush=True)
    if extra_flags(specs):
        print(f"bench: {run.extra_flags_note(extra_flags(specs))}", flush=True)
    if session is None:
        results = run_bench(m, specs, benches, args.runs, out, build=not args.no_build, command_line=cmdline,
                            resume=resume, memory_model=getattr(args, "memory_model", False))
    else:
        with session:
            results = run_bench(m, specs, benches, args.runs, out, command_line=cmdline, session=session,
                                resume=resume)
    path = report.write_report(out)
    print(report.summary_text(out), flush=True)
    print(f"bench: report: {path}", flush=True)
    return exit_code(results)
