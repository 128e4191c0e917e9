# SPDX-License-Identifier: GPL-2.0-only
"""What runs in the guest: the shell script of one step of a bench boot.

Each case of the step runs under workloads/locsample, which records where the benchmark's tasks ran; its output
(ended by a "lab-bench-rc: N" line with the exit status, read back by RESULT_RE) and locsample's files go to the
host with lab_put_file. workloads/bpfcost snapshots the BPF run time of the scheduler's callbacks before and after
each case (it turns kernel.bpf_stats_enabled on; nothing is counted under EEVDF, which runs no BPF); /proc/interrupts is
snapshotted the same way, for the interrupts (IPIs among them) each scheduler causes.
"lab-bench: step-begin / case-begin / case-end" lines on the console mark the progress.
`bin/lab bench --host` runs the same script on the host itself (lab/host.py), with the host's paths.
"""
from __future__ import annotations

import re
import shlex

from . import benchfile, memmodel, run

# Sampler periods (ms): last CPU of every task, se.nr_migrations, /proc/stat; and the most of one CPU (percent)
# the task scans may take (the scan period stretches beyond SAMPLE_MS to stay within it).
SAMPLE_MS, SCHED_MS, CPUSTAT_MS, SAMPLER_BUDGET_PCT = 100, 500, 500, 10
RESULT_RE = re.compile(r"^lab-bench-rc: (-?\d+)\s*$", re.M)


def case_tag(step: int, case: int) -> str:
    """Name of a case's files in the boot (lab_put_file names must be unique within one boot)."""
    return f"s{step}c{case}"


def step_command(cases: list[benchfile.Case], step: int, header: str, place: run.JobPlace = run.GUEST,
                 memory_model: bool = False) -> str:
    """The shell command of one step: every case under locsample, its files sent to the host. place says where
    lib.sh and the scratch folder are (the guest's, or the host's for bench --host). memory_model: the boot
    runs the memory model plugin; each case is cut out of its counts by memmark (lab/memmodel.py), and each step
    prints the guest's memory blocks per node for the layout check."""
    begin = shlex.quote(f"lab-bench: step-begin {step} {header}")
    work = shlex.quote(f"{place.tmp}/lb")
    lines = [f". {shlex.quote(place.lib)}", f"mkdir -p {work}", f"echo {begin}"]
    if memory_model:  # every step: a step whose scheduler failed to start runs no command
        lines.append(memmodel.guest_layout_command())
    for j, c in enumerate(cases):
        tag = case_tag(step, j)
        base = f"{work}/{tag}"
        limit = int(max(1, c.timeout_s))
        kinds = ["out", "tasks", "cpu", "bpf", "irq"] + (["ticks"] if c.ticks else []) + (["mm"] if memory_model else [])
        lines += [
            f"echo 'lab-bench: case-begin {step} {j}'",
            f"{{ echo begin; bpfcost -e; }} > {base}.bpf 2>&1",
            f"{{ echo begin; cat /proc/interrupts; }} > {base}.irq 2>&1",
        ] + (memmodel.case_begin_lines(base) if memory_model else []) + [
            f"locsample -i {SAMPLE_MS} -m {SCHED_MS} -s {CPUSTAT_MS} -b {SAMPLER_BUDGET_PCT} -t {limit}"
            f"{' -k' if c.ticks else ''} -o {base} -- "
            f"/bin/sh -c {shlex.quote(c.command)} > {base}.out 2>&1",
            f"echo \"lab-bench-rc: $?\" >> {base}.out",
        ] + (memmodel.case_end_lines() if memory_model else []) + [
            f"{{ echo end; cat /proc/interrupts; }} >> {base}.irq 2>&1",
            f"{{ echo end; bpfcost; }} >> {base}.bpf 2>&1",
            f"cat {base}.out",
        ] + [f"lab_put_file {tag}.{k} {base}.{k}" for k in kinds] + [
            "rm -f " + " ".join(f"{base}.{k}" for k in kinds),
            f"echo 'lab-bench: case-end {step} {j}'",
        ]
    lines.append("true")
    return "\n".join(lines)
