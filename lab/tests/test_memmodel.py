# SPDX-License-Identifier: GPL-2.0-only
"""The memory model's host side (lab/memmodel.py): its plugin arguments, the plugin's log, the layout check and
the figures of a case. The plugin itself is tested in lab/memmodel (cargo test) and in a guest
(test_memmodel_lab.py)."""
import pytest

from lab import machines, memmodel


def numa2():
    return machines.load("numa2")


def snap(what, seq, t_ns, rows):
    return [f"memmodel {what} seq={seq} vcpu=0 t_ns={t_ns}"] + [f"memmodel c {v} {' '.join(map(str, r))}"
                                                                 for v, r in enumerate(rows)]


ZERO = [0] * 10


def test_below_4g_follows_the_pc_machine():
    assert memmodel.below_4g(2048) == 2048 << 20
    assert memmodel.below_4g(3072) == 3072 << 20
    assert memmodel.below_4g(3584) == 0xC0000000  # 3.5 GiB does not fit below the hole: split at 3 GiB
    assert memmodel.below_4g(8192) == 0xC0000000


def test_api_version_by_qemu_version():
    assert memmodel.api_version((10, 0)) == 4
    assert memmodel.api_version((9, 2)) == 4
    assert memmodel.api_version((10, 1)) == 5
    with pytest.raises(memmodel.MemoryModelError):
        memmodel.api_version((8, 2))


def test_plugin_args_name_every_vcpu():
    args = dict(a.split("=", 1) for a in memmodel.plugin_args(numa2()))
    assert args == {"ram_mb": "1024.1024", "below_4g": str(2 << 30), "vcpu_llc": "0.0.0.0.1.1.1.1",
                    "llc_kb": "5632", "ways": "11"}
    # milan: 8 LLCs, 2 nodes
    args = dict(a.split("=", 1) for a in memmodel.plugin_args(machines.load("milan-2n8llc")))
    assert args["vcpu_llc"].split(".")[:8] == ["0", "0", "0", "0", "1", "1", "1", "1"]


def test_every_machine_has_a_memory_model():
    for name in machines.known():
        m = machines.load(name)
        assert m.memory is not None, name
        memmodel.plugin_args(m)


def test_miss_latency_grows_with_distance():
    mm = machines.load("big64").memory
    assert mm.miss_ns(10, 32) == mm.dram_local_ns
    assert mm.miss_ns(32, 32) == mm.dram_remote_ns
    assert mm.dram_local_ns < mm.miss_ns(16, 32) < mm.dram_remote_ns


def test_parse_log_and_case_window():
    text = "\n".join(
        ["memmodel config nodes=2 vcpus=2 llcs=2 llc_bytes=64 ways=1 ranges=0:0x0-0x40000000;1:0x40000000-0x80000000"]
        + snap("begin", 0, 1_000_000_000, [ZERO, ZERO])
        + snap("tick", 1, 2_000_000_000, [[0, 0, 0, 0, 10, 0, 5, 0, 0, 0], ZERO])
        + snap("end", 2, 3_000_000_000, [[0, 0, 0, 0, 30, 10, 10, 0, 1, 0], [0, 0, 0, 0, 0, 20, 0, 20, 0, 0]])
        + snap("begin", 3, 4_000_000_000, [ZERO, ZERO])
        + ["memmodel end seq=4 vcpu=0 t_ns=5", "memmodel c 0 1 2"])  # cut short: dropped
    log = memmodel.parse_log(text)
    assert (log.nodes, log.vcpus) == (2, 2)
    assert log.ranges == {0: [(0, 1 << 30)], 1: [(1 << 30, 2 << 30)]}
    assert [s.what for s in log.snapshots] == ["begin", "tick", "end", "begin"]
    begin, ticks, end = memmodel.case_window(log, 0)
    assert (begin.seq, [t.seq for t in ticks], end.seq) == (0, [1], 2)
    assert memmodel.case_window(log, 1) is None  # its end never came
    assert memmodel.case_window(log, 2) is None


def test_case_figures():
    """vCPU 0 (node 0): 30 user accesses to node 0 (10 missed), 10 to node 1 (all hit); vCPU 4 (node 1): 20 user
    accesses to node 1, all missed."""
    m = numa2()
    rows = [ZERO[:] for _ in range(8)]
    rows[0] = [0, 0, 0, 0, 30, 10, 10, 0, 1, 0]
    rows[4] = [0, 0, 0, 0, 0, 20, 0, 20, 0, 2]
    text = "\n".join(["memmodel config nodes=2 vcpus=8 llcs=2 llc_bytes=64 ways=1 ranges=0:0x0-0x1;1:0x1-0x2"]
                     + snap("begin", 0, 0, [ZERO] * 8) + snap("end", 1, 2_000_000_000, rows))
    rec = memmodel.case_memory(m, memmodel.parse_log(text), 0)
    assert rec["accesses"] == 60 and rec["user_accesses"] == 60
    assert rec["local_pct"] == pytest.approx(100 * 50 / 60)
    assert rec["llc_hit_pct"] == pytest.approx(100 * 30 / 60)
    assert rec["by_distance_pct"] == {"10": 83.333, "32": 16.667}
    mm = m.memory
    want_ns = 30 * mm.llc_hit_ns + 10 * mm.dram_local_ns + 20 * mm.dram_local_ns
    assert rec["mem_s"] == pytest.approx(want_ns / 1e9)
    assert rec["mem_ns"] == pytest.approx(want_ns / 60)
    assert rec["miss_s"] == pytest.approx(30 * mm.dram_local_ns / 1e9)  # 10 + 20 misses, all to local nodes
    assert rec["misses"] == 30 and rec["miss_by_distance_pct"] == {"10": 100.0, "32": 0.0}
    assert (rec["io"], rec["unmapped"]) == (1, 2)
    assert rec["seconds"] == 2.0
    assert rec["per_cpu"][0] == [40, pytest.approx(75.0), pytest.approx(75.0)]
    assert rec["series"][-1]["nodes"][1] == [pytest.approx(100.0), pytest.approx(0.0), 20]
    figs = memmodel.figures(rec)
    assert figs["mem-local-pct"] == rec["local_pct"] and figs["mem-s"] == rec["mem_s"]
    assert memmodel.figures(None) == {"mem-local-pct": None, "llc-hit-pct": None, "mem-ns": None, "mem-s": None,
                                      "miss-s": None}


def test_layout_check_compares_memory_blocks():
    log = memmodel.parse_log("memmodel config nodes=2 vcpus=1 llcs=1 llc_bytes=64 ways=1 "
                             "ranges=0:0x0-0x40000000;1:0x40000000-0x80000000")
    good = "lab-memblocks 0 0 1 2 3 4 5 6 7 \nlab-memblocks 1 8 9 10 11 12 13 14 15 \nlab-memblock-bytes 8000000\n"
    assert memmodel.layout_problems(log, good) == []
    bad = good.replace("lab-memblocks 1 8 9", "lab-memblocks 1 9")
    probs = memmodel.layout_problems(log, bad.replace("7 \n", "7 8 \n"))
    assert len(probs) == 2 and "node 0" in probs[0] and "0-8" in probs[0]
    assert memmodel.layout_problems(log, "") == ["the guest printed no memory blocks per node (lab-memblocks)"]
