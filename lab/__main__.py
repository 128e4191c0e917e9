# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab: boot modeled NUMA/LLC machines in QEMU with a sched_ext kernel and run things in them.

Commands:
  setup                 install what the lab needs (Debian packages, venv, guest kernel, netperf); idempotent
  machines              one line per machine with its topology summary
  run                   boot a machine, optionally start a scheduler, run a command, report as JSON
  image                 build (or reuse) the guest image and print its path
  bench                 run benchmarks under several schedulers, repeated and interleaved; write a report
                        (--host: on this machine itself instead of in QEMU guests; see lab/host.py)
  matrix                every seed benchmark on every machine under every scheduler (lab/matrix.toml), resumable;
                        writes one results page (--quick: a subset, about 52 minutes estimated)
  peers                 build published sched_ext schedulers (cargo install) for the guest
  soak                  reliability suite (stress, hotplug, cgroups, RT hog, pinning, start/stop, kill -9)
  verifier              the verifier's instructions and states per BPF program of scx_locality, against
                        scheduler/verifier-baseline.toml (--update rewrites it)

Exit codes of `run`: 0 ok, 1 the command failed, 2 bad usage, 3 setup missing, 4 topology mismatch,
5 scheduler failed to start or was ejected, 6 timeout (the command or the guest killed), 7 unknown or malformed
machine, 8 internal error (QEMU broke, the lab refused the guest's report, or the lab itself failed),
130 interrupted (SIGINT, SIGTERM or SIGHUP; every QEMU the lab started is killed).
`bench --host` adds 9: this machine cannot run it (not root, no sched_ext for a sched_ext scheduler, or another
sched_ext scheduler loaded); a missing program or scheduler binary is 3, --machine with --host 2.
"""
from __future__ import annotations

import argparse
import json
import shlex
import os
import sys
import traceback
from dataclasses import asdict

from . import host, image, machines, memmodel, run, setup, soak


def cmd_setup(args) -> int:
    # --no-apt-source is bin/lab's (the system half of setup, in bash); the downloads here add no apt source
    return setup.main(refresh=args.refresh)


def cmd_machines(args) -> int:
    rc = 0
    for name in machines.known():
        try:
            m = machines.load(name)
        except machines.MachineError as e:
            print(f"{name:12s} MALFORMED: {e}")
            rc = run.EXIT_MACHINE
            continue
        print(m.summary())
        if args.verbose:
            print(f"{'':12s} models: {m.models}")
            print(f"{'':12s} origin: {m.origin}")
            if m.needs_llc_override:
                print(f"{'':12s} LLC override: {m.llc_override_why}")
    return rc


def cmd_image(args) -> int:
    if not args.no_build:
        image.build_scheduler()
    print(image.build(include_scheduler=image.scheduler_binary().exists(),
                      log=lambda s: print(s, file=sys.stderr), extras=args.extra or ()))
    return 0


def cmd_run(args) -> int:
    if not args.command:
        raise run.UsageError("no command given; usage: bin/lab run --machine M [--sched NAME[:ARGS]] -- CMD...")
    if not 1 <= args.timeout <= 24 * 3600:
        raise run.UsageError(f"--timeout {args.timeout} is out of range 1..86400 seconds")
    m = machines.load(args.machine)
    spec = run.parse_sched(args.sched)
    command = args.command[0] if len(args.command) == 1 else shlex.join(args.command)
    # The guest bounds the command itself (timeout(1)), so that a command past --timeout is killed there and the
    # guest's kernel log still comes back; the host's limit for the whole boot stays behind it.
    result = run.run_job(m, [run.Step(spec, command, timeout_s=args.timeout)], timeout_s=args.timeout,
                         build_scheduler=not args.no_build, image_extras=args.extra or ())
    step = result.steps[0] if result.steps else run.StepResult(sched=spec.label)
    if result.guest_errors:
        more = f" (and {len(result.guest_errors) - 1} more)" if len(result.guest_errors) > 1 else ""
        print(f"lab: error: the lab refused the guest's report: {result.guest_errors[0]}{more}; nothing was "
              f"written outside {result.run_dir} (all in its result.json)", file=sys.stderr)
    if step.cmd_timed_out:
        print(f"lab: error: the command ran past --timeout {args.timeout} s and was killed in the guest "
              f"(exit {step.cmd_exit}); its kernel log: {result.kernel_log}", file=sys.stderr)
    if result.topology_ok is False:
        print(f"lab: error: the guest's topology does not match {m.path}:\n{run.topology_report(result)}",
              file=sys.stderr)
    if step.sched_start_error:
        print(f"lab: error: {spec.label} did not start: {step.sched_start_error} (its log: {step.sched_log})",
              file=sys.stderr)
    if step.sched_ejected:
        print(f"lab: error: {spec.label} was ejected: {step.sched_exit_kind}: {step.sched_exit_reason}",
              file=sys.stderr)
    final = {
        "machine": m.name, "sched": spec.label, "cmd_exit": step.cmd_exit,
        "cmd_seconds": step.cmd_seconds, "sched_exit_kind": step.sched_exit_kind,
        "sched_exit_reason": step.sched_exit_reason, "sched_ejected": step.sched_ejected,
        "sched_start_error": step.sched_start_error, "topology_ok": result.topology_ok,
        "cmd_timed_out": step.cmd_timed_out, "timed_out": result.timed_out, "kernel_log": result.kernel_log, "run_dir": result.run_dir,
        "sched_extra_flags": result.sched_extra_flags, "exit": result.exit_code(),
    }
    print(json.dumps(final), flush=True)
    return result.exit_code()


def cmd_soak(args) -> int:
    if not 1 <= args.minutes <= 24 * 60:
        raise run.UsageError(f"--minutes {args.minutes} is out of range 1..1440")
    return soak.main(args.machine, args.sched, args.fast, args.minutes, args.case, args.out, args.verbose,
                     build=not args.no_build)


def cmd_bench(args) -> int:
    from . import bench
    return bench.main(args)


def cmd_matrix(args) -> int:
    from . import matrix
    return matrix.main(args)


def cmd_peers(args) -> int:
    from . import peers
    return peers.main(args.names, force=args.force, list_only=args.list)


def cmd_verifier(args) -> int:
    from . import verifier
    return verifier.main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bin/lab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="install what the lab needs (idempotent; run as root)")
    s.add_argument("--refresh", action="store_true", help="look for a newer guest kernel even if one is cached")
    s.add_argument("--no-apt-source", action="store_true",
                   help="do not add the bookworm-backports apt source for QEMU 10 (setup then only checks that "
                        "QEMU >= 10 is installed, and says how to get it)")
    s.set_defaults(func=cmd_setup)
    s = sub.add_parser("machines", help="list the modeled machines")
    s.add_argument("-v", "--verbose", action="store_true", help="also say what each models and why")
    s.set_defaults(func=cmd_machines)
    s = sub.add_parser("image", help="build or reuse the guest image and print its path")
    s.add_argument("--no-build", action="store_true", help="do not run cargo build for scx_locality first")
    s.add_argument("--extra", action="append", choices=image.EXTRAS,
                   help="add this image extra's overlay (repeatable; kernbench: the compiler and its tree; perf: "
                        "Debian's perf)")
    s.set_defaults(func=cmd_image)
    s = sub.add_parser("run", help="boot a machine and run a command in it",
                       description="Boot MACHINE, check its topology, start the scheduler, run CMD, stop the "
                                   "scheduler, save the kernel log, print one JSON line.")
    s.add_argument("--machine", default="numa2", help="machine name (see `bin/lab machines`) or a .toml path")
    s.add_argument("--sched", default="eevdf", help="NAME[:ARGS], e.g. scx_locality:--no-steal (default eevdf)")
    s.add_argument("--timeout", type=int, default=600,
                   help="seconds the command may run; the guest kills it then (exit 6) and still sends its kernel "
                        "log (boot and scheduler start get extra time); default 600")
    s.add_argument("--no-build", action="store_true", help="do not run cargo build for scx_locality first")
    s.add_argument("--extra", action="append", choices=image.EXTRAS,
                   help="boot with this image extra's overlay (repeatable; kernbench: the compiler and its "
                        "tree; perf: Debian's perf, for `perf record -a -e cpu-clock`: TCG has no PMU)")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD... (run by the guest's /bin/sh)")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("soak", help="reliability suite: stress, hotplug, cgroups, RT hog, pinning, start/stop",
                       description="Run the reliability cases (lab/reliability/) with the scheduler loaded. "
                                   "Exit 0 when every case passed, 1 otherwise.")
    s.add_argument("--machine", default="haswell2s", help="machine (default haswell2s)")
    s.add_argument("--sched", default="scx_locality", help="NAME[:ARGS] (default scx_locality)")
    s.add_argument("--fast", action="store_true", help="one short round (what make test runs)")
    s.add_argument("--minutes", type=float, default=30,
                   help="wall-time bound of the whole soak: full rounds are repeated while the next is expected "
                        "to end in time, and a guest still running at the end is killed (default 30)")
    s.add_argument("--case", action="append", help="run only this case (repeatable)")
    s.add_argument("--out", help="folder for the rounds and the summary (default: a new run folder)")
    s.add_argument("-v", "--verbose", action="store_true", help="stream the guest console")
    s.add_argument("--no-build", action="store_true", help="do not run cargo build for scx_locality first")
    s.set_defaults(func=cmd_soak)
    s = sub.add_parser("bench", help="benchmark schedulers against each other and write a report",
                       description="Run benchmarks (lab/benchmarks/*.toml) under several schedulers: one boot "
                                   "per run, the schedulers interleaved as steps in an order rotated per run; "
                                   "write DIR/results.json, DIR/report.md and PNGs. Exit codes as for run "
                                   "(5: a scheduler failed to build, start or stay loaded; 1: a case failed).")
    s.add_argument("--machine", default="",
                   help="machine name (see `bin/lab machines`) or a .toml path (default numa2; not with --host)")
    s.add_argument("--host", action="store_true",
                   help="run on this machine itself, not in QEMU guests: needs root, a sched_ext kernel for "
                        "sched_ext schedulers, and none loaded (exit 9 otherwise); same results.json and report")
    s.add_argument("--sched", default="eevdf,scx_locality",
                   help="comma-separated NAME[:ARGS] list; the first is the baseline (default eevdf,scx_locality)")
    s.add_argument("--bench", default="",
                   help="comma-separated NAME[:KEY=V1/V2...] list, e.g. hackbench:mode=process:groups=2/4")
    s.add_argument("--runs", type=int, default=3, help="boots (repetitions); default 3")
    s.add_argument("--out", default="", help="output folder (default runs/bench-<time>-<machine>)")
    s.add_argument("--ablate", action="store_true",
                   help="add scx_locality with each mechanism of lab/benchmarks/ablation.toml switched off")
    s.add_argument("--no-build", action="store_true",
                   help="do not build scx_locality or missing peers (unbuilt ones are reported as failed)")
    s.add_argument("--force", action="store_true", help="overwrite an --out folder that holds results")
    s.add_argument("--resume", action="store_true",
                   help="go on with the bench in --out: keep its runs and run the rest up to --runs (same "
                        "machine, schedulers and benchmarks only)")
    s.add_argument("--memory-model", action="store_true",
                   help="count every guest data access local/remote and through the modeled LLC (a QEMU "
                        "plugin; while a case runs the guest does 6-11x less work): adds mem-local-pct, "
                        "llc-hit-pct, mem-ns, mem-s and miss-s to every case (docs/memory-model.md)")
    s.add_argument("--list", action="store_true", help="list the benchmarks and their cases")
    s.add_argument("--report-only", metavar="DIR", default="", help="rebuild DIR's report from its results.json")
    s.set_defaults(func=cmd_bench)
    s = sub.add_parser("matrix", help="the results matrix: every seed benchmark, machine and scheduler; one page",
                       description="Run lab/matrix.toml: per machine its benchmarks under every scheduler, one "
                                   "bench folder each (OUT/MACHINE/BENCH), run-major (run 1 of every folder, then "
                                   "run 2, ...), and write the results page after every boot. Interrupted, the "
                                   "same command with --resume goes on where it stopped. Each finished folder goes "
                                   "into the results store (--store) as a cell; --budget runs the store's missing "
                                   "and stale cells instead, whole cells within a time budget; --page writes "
                                   "docs/results.md from the store alone. Exit codes as for bench (the first "
                                   "non-zero one of its folders; it goes on after a failed folder).")
    s.add_argument("--quick", action="store_true", help="the matrix file's [quick] subset (its estimated time: --quick --list)")
    s.add_argument("--core", action="store_true", help="the matrix file's [core] subset: each seed's machine and "
                                                       "headline, within 5 hours (--core --list)")
    s.add_argument("--machine", default="", help="only these machines (comma-separated)")
    s.add_argument("--bench", default="", help="only these benchmarks, by name (comma-separated)")
    s.add_argument("--sched", default="", help="these schedulers instead of the file's (comma-separated; eevdf "
                                               "first)")
    s.add_argument("--runs", type=int, default=None, help="runs per folder instead of the file's")
    s.add_argument("--out", default="", help="output folder (default runs/matrix, runs/matrix-quick or "
                                             "runs/matrix-core)")
    s.add_argument("--resume", action="store_true", help="go on with the matrix in --out (the same plan only)")
    s.add_argument("--file", default="", help="another matrix file (default lab/matrix.toml)")
    s.add_argument("--list", "--dry-run", dest="list", action="store_true",
                   help="print the plan with time estimates (per cell and machine) and, with the store, what "
                        "--budget would run; run nothing")
    s.add_argument("--no-build", action="store_true", help="do not build scx_locality or missing peers")
    s.add_argument("--report-only", metavar="OUT", default="", help="rewrite the page of the matrix in OUT "
                                                                    "(OUT/results.md)")
    s.add_argument("--store", default="", help="the results store (default docs/results-store)")
    s.add_argument("--no-store", action="store_true", help="a run-major matrix stores nothing")
    s.add_argument("--budget", default="", metavar="TIME",
                   help="run the store's missing cells, then the stalest, one whole cell at a time, starting none "
                        "that cannot finish within TIME (90m, 1h30m) by its previous duration or estimate")
    s.add_argument("--shard", default="", metavar="I/N", help="only the I-th of N shares of the plan's cells "
                                                              "(the same split on every host)")
    s.add_argument("--merge", default="", metavar="OTHER_STORE",
                   help="merge another results store into --store (the newest cell of each key wins)")
    s.add_argument("--add", action="append", metavar="FOLDER",
                   help="put a bench folder (bin/lab bench, or bench --host on real hardware) into the store, one "
                        "cell per benchmark; may be given again")
    s.add_argument("--page", nargs="?", const="", default=None, metavar="F.md",
                   help="write the results page (default docs/results.md) from the store alone; alone, or with "
                        "--add/--merge, it runs nothing; after --budget, the page of the store it filled")
    s.set_defaults(func=cmd_matrix)
    s = sub.add_parser("peers", help="build published schedulers from crates.io (cargo install, ~5 min each)")
    s.add_argument("names", nargs="*", help="peers to build (default: every peer in lab/schedulers.toml)")
    s.add_argument("--force", action="store_true", help="rebuild even if built")
    s.add_argument("--list", action="store_true", help="list the peers and whether they are built")
    s.set_defaults(func=cmd_peers)
    s = sub.add_parser("verifier", help="verifier instructions and states per BPF program, against the baseline",
                       description="Boot one guest, load scx_locality in each configuration of lab/verifier.py "
                                   "with the verifier's stats log, and print per program the instructions "
                                   "processed and the states (total, peak) beside scheduler/verifier-baseline.toml."
                                   " Exit 0 when every program is within the margin (or with --update), 1 when "
                                   "one grew past it, is new or is gone, 5 when a load failed.")
    s.add_argument("--machine", default="numa2", help="machine name or a .toml path (default numa2)")
    s.add_argument("--update", action="store_true", help="rewrite the machine's section of the baseline file")
    s.add_argument("--baseline", default="", help="another baseline file (default scheduler/verifier-baseline.toml)")
    s.add_argument("--no-build", action="store_true", help="do not run cargo build for scx_locality first")
    s.add_argument("--functions", action="store_true",
                   help="also print, per large program, the functions the verifier spent most instructions in "
                        "(a static function counts at every call; the kernel must report them, as 7.x does)")
    s.set_defaults(func=cmd_verifier)
    return p


def main(argv: list[str] | None = None) -> int:
    # SIGTERM and SIGHUP unwind like Ctrl-C, so that no QEMU outlives bin/lab (see run.Interrupted)
    run.install_signal_handlers()
    p = build_parser()
    args = p.parse_args(argv)
    if getattr(args, "command", None) and args.command[0] == "--":
        args.command = args.command[1:]
    # what each failure prints after "lab: error: " and the exit code it maps to (README: exit codes)
    failures = [(run.UsageError, "", run.EXIT_USAGE),
                (machines.UnknownMachine, "", run.EXIT_MACHINE),
                (machines.MachineError, "malformed machine file: ", run.EXIT_MACHINE),
                (setup.SetupMissing, "", run.EXIT_SETUP),
                (memmodel.MemoryModelError, "memory model: ", run.EXIT_SETUP),
                (host.HostRefused, "", run.EXIT_HOST),
                (image.BuildFailed, "", run.EXIT_INTERNAL)]
    try:
        return args.func(args)
    except tuple(f[0] for f in failures) as e:
        _, prefix, code = next(f for f in failures if isinstance(e, f[0]))
        print(f"lab: error: {prefix}{e}", file=sys.stderr)
        return code
    except KeyboardInterrupt as e:
        killed = run.kill_all_guests()  # run_job has done it already; this is the last resort
        name = e.args[0] if isinstance(e, run.Interrupted) else "SIGINT"
        left = "nothing of the job is left running" if getattr(args, "host", False) else "no QEMU of this run is left"
        print(f"lab: interrupted ({name}); {left}" +
              (f" (killed pid {', '.join(map(str, killed))})" if killed else ""), file=sys.stderr)
        return run.EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (`| head`): stop like an interrupt, quietly
        killed = run.kill_all_guests()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        print("lab: output closed (broken pipe); stopped" +
              (f" (killed QEMU pid {', '.join(map(str, killed))})" if killed else ""), file=sys.stderr)
        return run.EXIT_INTERRUPTED
    except Exception as e:
        killed = run.kill_all_guests()
        traceback.print_exc()
        print(f"lab: internal error: {type(e).__name__}: {e} (the traceback is above"
              + (f"; killed QEMU pid {', '.join(map(str, killed))}" if killed else "") + ")", file=sys.stderr)
        return run.EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
