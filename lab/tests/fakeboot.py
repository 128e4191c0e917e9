# SPDX-License-Identifier: GPL-2.0-only
"""A run.run_job stand-in for tests of what bin/lab bench and matrix do with the boots' results, without QEMU:
each case of each step prints hackbench's Time line and exits 0, unless the test asks for an interruption or for
the emulator's text-patching oops to cut a boot."""
import re
from pathlib import Path

from lab import guest_script, run

# what the guest's console holds after TCG's text-patching fault (run.tcg_text_patch_oops)
OOPS = ("[ 123.8] Oops: int3: 0000 [#1] SMP NOPTI\n[ 123.8] CPU: 40 UID: 0\n"
        "[ 123.8] RIP: 0010:update_rq_clock+0x3a/0x160\n")


class FakeBoots:
    """times: {scheduler name: [Time values]}, used in turn per scheduler (default: 1.0 + 0.1 x the step's index
    in the run's plan); wall_s: each boot's wall time; fail_on_call: the boot (1-based) interrupted as by SIGINT;
    cut_after: per boot, how many of its steps finish before the oops kills it (None: all of them).
    Recorded per boot: calls (its steps' scheduler labels), extras (image_extras), retry_flags (retry_text_patch)."""

    def __init__(self, tmp_path: Path, times: dict | None = None, wall_s: float | None = None,
                 fail_on_call: int | None = None, cut_after=()):
        self.tmp, self.times, self.wall_s, self.fail_on_call = tmp_path, times, wall_s, fail_on_call
        self.cut_after = list(cut_after)
        self.calls: list[list[str]] = []
        self.extras: list[list[str]] = []
        self.retry_flags: list[bool] = []
        self.used: dict[str, int] = {}

    def run_job(self, m, steps, timeout_s, run_dir, image_extras=(), retry_text_patch=True, **kw):
        self.calls.append([s.sched.label for s in steps])
        self.extras.append(list(image_extras))
        self.retry_flags.append(retry_text_patch)
        n = len(self.calls)
        if self.fail_on_call == n:
            raise KeyboardInterrupt("SIGINT")
        cut = self.cut_after[n - 1] if n <= len(self.cut_after) else None
        d = Path(run_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "console.log").write_text(OOPS if cut is not None else "")
        res = run.RunResult(machine=m.name, run_dir=str(d), kernel_log="", completed=cut is None, topology_ok=True)
        res.wall_s = self.wall_s
        for pos, st in enumerate(steps):
            if cut is not None and pos >= cut:
                res.steps.append(run.StepResult(sched=st.sched.label))
                continue
            i = int(re.search(r"step-begin (\d+)", st.command).group(1))  # the step's index in the run's plan
            res.steps.append(run.StepResult(sched=st.sched.label, cmd_exit=0, sched_started=True))
            if self.times is None:
                value = 1.0 + i * 0.1
            else:
                vals, k = self.times[st.sched.name], self.used.get(st.sched.name, 0)
                self.used[st.sched.name] = k + 1
                value = vals[k % len(vals)]
            tag = guest_script.case_tag(i, 0)
            f = self.tmp / f"{n}-{tag}.out"
            f.write_text(f"Time: {value}\nlab-bench-rc: 0\n")
            res.files[f"{tag}.out"] = str(f)
        return res
