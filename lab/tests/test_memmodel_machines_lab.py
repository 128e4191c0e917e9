# SPDX-License-Identifier: GPL-2.0-only
"""The memory model on every modeled machine (marked `lab_all`, make test-lab-all: it boots all eight)."""
from pathlib import Path

import pytest

from lab import bench, machines, memmodel, run

pytestmark = pytest.mark.lab_all


@pytest.mark.parametrize("name", machines.known())
def test_every_machine_runs_the_memory_model(name):
    """Each modeled machine boots with the plugin, its node layout matches the guest's, and a walker pinned to
    its first CPU with its memory bound to that CPU's node is counted >= 95% local there (a 4 MB walk: every
    machine's layout is checked where a wrong node would show, node 0's RAM)."""
    m = machines.load(name)
    memmodel.build()
    cmd = "\n".join([memmodel.guest_layout_command(), "numactl --membind=0 memwalk -M -k 4096 -s 1 -c 0"])
    result = run.run_job(m, [run.Step(run.parse_sched("eevdf"), cmd)], timeout_s=m.boot_timeout_s + 600,
                         stream=None, memory_model=True, build_scheduler=False)
    assert result.exit_code() == 0, f"the boot failed: see {result.run_dir}"
    mm, rec = bench.memory_model_run(m, Path(result.run_dir), Path(result.run_dir))
    assert rec["layout_ok"], rec["error"]
    acc, local, _hit = memmodel.case_memory(m, mm[1], 0)["per_cpu"][0]
    assert acc > 100_000 and local >= 95.0, (acc, local)
