# SPDX-License-Identifier: GPL-2.0-only
"""The memory model in a guest (marked `lab`): one numa2 boot under EEVDF with the plugin loaded, six cases of
workloads/memwalk (one access per 64-byte line), each cut out of the counts by memwalk's own marks (-M: the walk
alone, not the filling of its buffer). Judged by the user-mode accesses of the CPUs the walkers are pinned to
(nothing else runs user code there).

What each case must show, and why (stated before the first run; the figures seen are in docs/memory-model.md):
- memory bound to the other node (numactl --membind=1, CPU 0 on node 0): >= 95% of CPU 0's accesses remote;
  bound to its own node: <= 5% remote. Every page of the walker is on the bound node; what is left is the
  stack and libc's data, bound too.
- a buffer of 1/4 of the modeled LLC (numa2: 5.5 MB): >= 90% LLC hits (only the first pass misses); four times
  the LLC: <= 10% (LRU walked in order evicts every line before it comes round again).
- two threads storing to one 256 KB buffer, taking turns (a whole pass each, so that every pass finds the lines
  last written by the other thread, whether or not the two vCPUs run at once): in one LLC (CPUs 0 and 1) >= 90%
  hits; across the two LLCs (CPUs 0 and 4) <= 50% on each CPU, since each store invalidates the other LLC's copy.
And the plugin's node layout must match the guest's own memory blocks per node.
"""
from pathlib import Path

import pytest

from lab import bench, machines, memmodel, run

pytestmark = pytest.mark.lab

CASES = [
    ("remote", "numactl --membind=1 memwalk -M -k 4096 -s 2 -c 0"),
    ("local", "numactl --membind=0 memwalk -M -k 4096 -s 2 -c 0"),
    ("fits", "memwalk -M -k 1408 -s 2 -c 0"),
    ("spills", "memwalk -M -k 22528 -s 2 -c 0"),
    ("share_one_llc", "memwalk -M -k 256 -s 2 -c 0,1 -w -S -T"),
    ("share_two_llcs", "memwalk -M -k 256 -s 2 -c 0,4 -w -S -T"),
]


@pytest.fixture(scope="module")
def boot(tmp_path_factory):
    m = machines.load("numa2")
    memmodel.build()
    lines = [memmodel.guest_layout_command()]
    for i, (name, cmd) in enumerate(CASES):
        lines += [f"echo 'case {name}'", f"{cmd} || echo 'case {name} failed'"]
    result = run.run_job(m, [run.Step(run.parse_sched("eevdf"), "\n".join(lines))], timeout_s=900, stream=None,
                         memory_model=True, build_scheduler=False)
    assert result.exit_code() == 0, f"the boot failed: see {result.run_dir}"
    out = tmp_path_factory.mktemp("mm")
    mm, rec = bench.memory_model_run(m, Path(result.run_dir), out)
    assert rec["layout_ok"], rec["error"]
    _m, log = mm
    cases = {name: memmodel.case_memory(m, log, i) for i, (name, _cmd) in enumerate(CASES)}
    for name, c in cases.items():
        assert c is not None, f"case {name} has no begin/end snapshots in {result.run_dir}"
        print(name, "per_cpu user [accesses, local %, hit %]:", c["per_cpu"][0], c["per_cpu"][1], c["per_cpu"][4])
    return cases


def test_remote_memory_is_counted_remote(boot):
    acc, local, _hit = boot["remote"]["per_cpu"][0]
    assert acc > 100_000
    assert local <= 5.0


def test_local_memory_is_counted_local(boot):
    acc, local, _hit = boot["local"]["per_cpu"][0]
    assert acc > 100_000
    assert local >= 95.0


def test_a_working_set_inside_the_llc_hits(boot):
    assert boot["fits"]["per_cpu"][0][2] >= 90.0


def test_a_working_set_four_times_the_llc_misses(boot):
    assert boot["spills"]["per_cpu"][0][2] <= 10.0


def test_sharing_across_llcs_misses_where_one_llc_does_not(boot):
    one = [boot["share_one_llc"]["per_cpu"][c][2] for c in (0, 1)]
    two = [boot["share_two_llcs"]["per_cpu"][c][2] for c in (0, 4)]
    assert min(one) >= 90.0, one
    assert max(two) <= 50.0, two

