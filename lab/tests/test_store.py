# SPDX-License-Identifier: GPL-2.0-only
"""The results store (lab/store.py) and its uses in bin/lab matrix, without a guest: the behaviour stamp and stale
cells, merging two stores, an interrupted write, the order and limit of --budget, --shard, and the page written
from a store alone, a memory-model cell beside a plain one. The cells come from
lab/tests/data/spr-cache-hackbench.json, a real bench folder's results.json (runs/light-spr-mm, 2 runs, memory
model) trimmed as the store trims it."""
import datetime as dt
import json
import os
import struct
from pathlib import Path

import pytest
from fakeboot import FakeBoots

from lab import bench, matrix, run, store

DATA = Path(__file__).parent / "data" / "spr-cache-hackbench.json"
STAMP = {"commit": "d118002efb", "behaviour": "b" * 16, "bpf": "p" * 16, "flags": "--slice-us=5000",
         "binary": "c5451330356d369b"}  # binary: the build the fixture's scx_locality ran (its results' builds)


def results(**kw) -> dict:
    """The fixture as a plain run; memory_model=MODEL makes it the memory-model run it was."""
    r = json.loads(DATA.read_text())
    r["memory_model"] = None
    r.update(kw)
    return r


MODEL = json.loads(DATA.read_text())["memory_model"]


def relabel(r: dict, old: str, new: str) -> dict:
    """The fixture with one scheduler renamed (a variant a seed row needs)."""
    for s in r["scheds"]:
        if s["label"] == old:
            s["label"] = new
    r["builds"] = {(new if k == old else k): v for k, v in r["builds"].items()}
    for rn in r["runs"]:
        rn["order"] = [new if x == old else x for x in rn["order"]]
        for st in rn["steps"]:
            st["sched"] = new if st["sched"] == old else st["sched"]
    return r


def cell(date="2026-12-01 21:00:00", stamp=STAMP, **kw) -> dict:
    (c,) = store.cells_from_results(results(**kw), date, stamp, runner={"kind": "lab", "cpu_model": "x",
                                                                          "cores": 2})
    return c


# ---------------------------------------------------------------------------------------------------------
# The stamp


def elf(sections: list[tuple[str, int, bytes]]) -> bytes:
    """A minimal ELF64 relocatable object of EM_BPF with the given (name, type, contents) sections."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _t, _c in sections) + b".shstrtab\0"
    body, heads, off = b"", [], 64
    pos = 1
    for n, t, c in sections:
        heads.append(struct.pack("<IIQQQQIIQQ", pos, t, 0, 0, off + len(body), len(c), 0, 0, 1, 0))
        pos += len(n) + 1
        body += c
    heads.append(struct.pack("<IIQQQQIIQQ", pos, 3, 0, 0, off + len(body), len(names), 0, 0, 1, 0))
    body += names
    shoff = off + len(body)
    shnum = len(heads) + 1
    hdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 1, store.EM_BPF, 1, 0, 0, shoff, 0, 64,
                                                             0, 0, 64, shnum, shnum - 1)
    return hdr + body + b"\0" * 64 + b"".join(heads)


def test_bpf_stamp_ignores_btf_and_build_paths():
    code = [(".text", 1, b"\x95" + b"\0" * 7), ("struct_ops/x_enqueue", 1, b"\xb7" + b"\0" * 15)]
    a = elf(code + [(".BTF", 1, b"/work/main/scheduler/src/bpf/place.bpf.c\0")])
    b = elf(code + [(".BTF", 1, b"/home/someone/elsewhere/scheduler/src/bpf/place.bpf.c\0")])
    c = elf([(".text", 1, b"\x95" + b"\0" * 7), ("struct_ops/x_enqueue", 1, b"\xb7\x01" + b"\0" * 14)])
    # the object as the skeleton carries it: inside a binary, between other bytes
    blob = b"rust code" * 10 + a + b"more"
    (found,) = store.bpf_objects(blob)
    assert found == a
    assert store.bpf_digest(a) == store.bpf_digest(b) != store.bpf_digest(c)


def test_default_flags_from_help():
    text = ("Options:\n      --slice-us <SLICE_US>\n          Time slice\n\n          [default: 5000]\n\n"
            "      --no-steal\n          Disable stealing\n\n  -v, --verbose\n"
            "      --cache-top <N>\n          [default: 8]\n")
    assert store.default_flags(text) == "--slice-us=5000 --cache-top=8"


def test_stale_detection():
    c = cell()
    assert c["stamp"]["behaviour"] == STAMP["behaviour"] and c["stamp"]["commit"] == "d118002efb"
    assert store.staleness(c, STAMP) is None
    assert store.staleness(c, dict(STAMP, behaviour="x" * 16, bpf="q" * 16)) == "BPF changed"
    assert store.staleness(c, dict(STAMP, behaviour="x" * 16, flags="--slice-us=3000")) == "default flags changed"
    assert store.staleness(c, {"behaviour": None}) is None  # no build here: nothing to compare with
    # a folder run by another build than the current one: its behaviour is unknown, so it is stale
    other = cell(stamp=dict(STAMP, binary="0123456789abcdef"))
    assert other["stamp"]["behaviour"] is None and store.staleness(other, STAMP) == "its build is unknown"
    # a cell without scx_locality is never stale
    eevdf_only = results()
    eevdf_only["scheds"] = [s for s in eevdf_only["scheds"] if s["label"] == "eevdf"]
    (c2,) = store.cells_from_results(eevdf_only, "2026-12-01 21:00:00", None)
    assert store.staleness(c2, STAMP) is None
    now = dt.datetime(2026, 12, 4, 21, 0, tzinfo=dt.timezone.utc)
    assert store.fmt_age(store.age(c, now)) == "3 days"


def test_cell_is_trimmed_and_keyed():
    c = cell()
    k = c["key"]
    assert k["machine"] == "spr-1n2llc" and k["spec"] == "cache-hackbench:ipc=pipe:pairs=1/2:msgs=100000"
    assert k["scheds"] == ["eevdf", "scx_locality", "scx_defaults:--queued-wakeups", "scx_bpfland"]
    assert store.key_of(c) == "spr-1n2llc/cache-hackbench_ipc=pipe_pairs=1-2_msgs=100000/4-" + \
        store.schedset(k["scheds"]).split("-")[1]
    assert c["runs"] == 2 and c["peers"]["scx_bpfland"] == "scx_bpfland 1.1.4" and c["host"]["kind"] == "lab"
    case = next(st for st in c["results"]["runs"][0]["steps"] if st["sched"] == "scx_locality")["cases"][0]
    assert "files" not in case and "interrupts" not in case and case["bpf_cost"] is not None
    assert "run_dir" not in c["results"]["runs"][0]
    assert len(json.dumps(c)) < 50_000


def test_hardware_cell_is_keyed_by_its_description():
    r = results(host=True, machine="host-mybox",
                machine_summary="host-mybox 8 CPUs 1 nodes 2 LLCs of 4 CPUs (L3) no SMT max distance 10  "
                                "[this host: AMD EPYC 7302 16-Core Processor; kernel 6.12.0-scx]")
    (c,) = store.cells_from_results(r, "2026-12-02 10:00:00", None)
    assert c["host"] == {"kind": "hardware", "cpu_model": "AMD EPYC 7302 16-Core Processor", "cpus": 8,
                         "nodes": 1, "llcs": 2, "kernel": "6.12.0-scx", "summary": r["machine_summary"]}
    assert c["key"]["machine"] == "hw-amd-epyc-7302-16-core-8c1n2l"  # not the host's name


# ---------------------------------------------------------------------------------------------------------
# Writing, interrupting, merging


def test_interrupted_write_leaves_the_old_cell(tmp_path, monkeypatch):
    st = tmp_path / "store"
    old = cell()
    path = store.write_cell(st, old)
    new = cell(date="2026-12-02 09:00:00")

    def boom(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        store.write_cell(st, new)
    monkeypatch.undo()
    assert json.loads(path.read_text())["date"] == old["date"]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # its temporary file is gone too
    # a writer killed outright leaves its temporary file: readers ignore it, the next writer removes it
    left = path.parent / f".{path.stem}.abc.tmp"
    left.write_text('{"cell": 1, "half": ')
    assert [store.key_of(c) for c in store.read_cells(st)] == [store.key_of(old)]
    with store.Lock(st):
        pass
    assert not left.exists()


def test_merge_two_stores_newest_wins(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    spr = cell(date="2026-12-01 10:00:00")
    other = relabel(results(), "scx_bpfland", "scx_p2dq")
    (only_b,) = store.cells_from_results(other, "2026-12-01 09:00:00", STAMP)
    store.write_cell(a, spr)
    newer = cell(date="2026-12-02 10:00:00")
    newer["host"] = {"kind": "lab", "cpu_model": "another host", "cores": 64}
    store.write_cell(b, newer)
    store.write_cell(b, only_b)
    assert store.merge(a, b) == (2, 0)
    cells = {store.key_of(c): c for c in store.read_cells(a)}
    assert len(cells) == 2 and cells[store.key_of(spr)]["date"] == "2026-12-02 10:00:00"
    assert cells[store.key_of(spr)]["host"]["cores"] == 64  # recorded, nothing else depends on it
    store.write_cell(b, cell(date="2026-11-30 10:00:00"))  # older than a's: a keeps its own
    assert store.merge(a, b) == (0, 2)
    assert store.read_cell(a, store.key_of(spr))["date"] == "2026-12-02 10:00:00"
    with pytest.raises(store.StoreError):
        store.merge(a, tmp_path / "none")


# ---------------------------------------------------------------------------------------------------------
# Slices: --budget and --shard

SPEC_A = "hackbench:mode=thread:ipc=pipe:groups=1"
SPEC_B = "hackbench:mode=process:ipc=pipe:groups=1"
SPEC_C = "hackbench:mode=thread:ipc=socket:groups=1"
SPEC_D = "hackbench:mode=process:ipc=socket:groups=1"
SPEC_E = "hackbench:mode=thread:ipc=pipe:groups=4"


def write_plan(tmp_path, specs=(SPEC_A, SPEC_B, SPEC_C, SPEC_D, SPEC_E), runs=2):
    p = tmp_path / "matrix.toml"
    p.write_text('schedulers = ["eevdf", "scx_locality", "scx_p2dq"]\nruns = 5\n[machines.numa2]\nbenchmarks = []\n'
                 f'[core]\nruns = {runs}\n[core.machines.numa2]\nbenchmarks = {json.dumps(list(specs))}\n'
                 '[core.machines.xeon-1n32]\nschedulers = ["eevdf", "scx_locality", "scx_locality:--no-steal"]\n'
                 f'runs = 3\nbenchmarks = ["{SPEC_A}"]\n')
    return matrix.load_plan(p, section="core")


def fake_cell(plan, u, date, runs=None, behaviour=STAMP["behaviour"], duration=None, cut=()):
    """A cell of runs runs (default the plan's); the runs numbered in cut (1-based) had their boot cut short."""
    n = runs or plan.runs_of(u)
    return {"cell": store.CELL_VERSION, "key": {"machine": u.machine, "spec": u.spec, "scheds": plan.scheds_of(u)},
            "stamp": {"behaviour": behaviour, "bpf": STAMP["bpf"], "flags": STAMP["flags"], "commit": "x"},
            "date": date, "runs": n, "duration_s": duration, "estimate_s": None,
            "host": {"kind": "lab"},
            "results": {"runs": [{"run": k, "completed": k not in cut, "steps": [{}]} for k in range(1, n + 1)]}}


def test_plan_machine_schedulers_and_runs(tmp_path):
    plan = write_plan(tmp_path)
    x = matrix.Unit("xeon-1n32", SPEC_A)
    assert plan.scheds_of(x) == ["eevdf", "scx_locality", "scx_locality:--no-steal"] and plan.runs_of(x) == 3
    assert plan.runs_of(matrix.Unit("numa2", SPEC_A)) == 2
    assert plan.all_scheds() == ["eevdf", "scx_locality", "scx_p2dq", "scx_locality:--no-steal"]
    assert plan.key(x) != plan.key(matrix.Unit("numa2", SPEC_A))


def test_budget_order_missing_then_short_then_stalest(tmp_path):
    plan = write_plan(tmp_path)
    a, b, c, d, e = plan.units[:5]
    cells = {plan.key(u): cl for u, cl in [
        (b, fake_cell(plan, b, "2026-12-01 10:00:00", behaviour="old")),  # stale, newer
        (c, fake_cell(plan, c, "2026-11-20 10:00:00", behaviour="old")),  # stale, oldest
        (d, fake_cell(plan, d, "2026-11-01 10:00:00")),  # fresh: not run
        (e, fake_cell(plan, e, "2026-12-01 10:00:00", runs=1, duration=100.0)),  # fewer runs than asked
    ]}
    now = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
    todo = matrix.budget_order(plan, cells, STAMP, now)
    assert [(t.unit, t.status) for t in todo] == [(a, "missing"), (plan.units[5], "missing"), (e, "short"),
                                                 (c, "stale"), (b, "stale")]
    assert todo[2].est_s == 200.0 and todo[2].est_from == "previous run"  # 100 s for 1 run, 2 asked
    assert "default flags" not in todo[3].why and "12 days old" in todo[3].why
    # a cell that cannot finish in what is left is not started; a later, shorter one is
    budget = todo[0].est_s + todo[2].est_s + 1
    assert [t.unit for t in matrix.within_budget(todo, budget)] == [a, e]


def test_a_cell_with_a_run_cut_by_a_guest_fault_is_short(tmp_path):
    """A boot that a guest fault cut leaves cases unrun: its cell counts only its whole runs, and the slice that
    runs it again goes on from the folder's runs before the first cut one."""
    plan = write_plan(tmp_path)
    a = plan.units[0]
    cells = {plan.key(a): fake_cell(plan, a, "2026-12-01 10:00:00", runs=2, cut=(2,))}
    todo = matrix.budget_order(plan, cells, STAMP, dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc))
    mine = next(t for t in todo if t.unit == a)
    assert mine.status == "short" and mine.why == "1 of 2 runs whole (1 cut short by a guest fault)"
    folder = {"runs": [{"run": 1, "completed": True, "steps": [{}]}, {"run": 2, "completed": False, "steps": [{}]},
                       {"run": 3, "completed": True, "steps": [{}]}]}
    assert [r["run"] for r in matrix.whole_prefix(folder)["runs"]] == [1]
    assert len(folder["runs"]) == 3  # the folder's own record is left as it was


def test_a_cell_without_a_scheduler_that_can_run_now_is_short(tmp_path):
    plan = write_plan(tmp_path)
    a = plan.units[0]
    cell = fake_cell(plan, a, "2026-12-01 10:00:00")
    cell["results"]["scheds"] = [{"label": "eevdf", "prepare_error": None},
                                 {"label": "scx_locality", "prepare_error": None},
                                 {"label": "scx_p2dq", "prepare_error": "scx_p2dq is not built"}]
    cells = {plan.key(a): cell}
    now = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
    # still not built (or not asked): the cell is fresh, not run again each slice
    for runnable in (None, {"eevdf", "scx_locality"}):
        assert a not in [t.unit for t in matrix.budget_order(plan, cells, STAMP, now, runnable=runnable)]
    todo = {t.unit: t for t in matrix.budget_order(plan, cells, STAMP, now,
                                                     runnable={"eevdf", "scx_locality", "scx_p2dq"})}
    assert todo[a].status == "short" and "scx_p2dq did not run" in todo[a].why


def test_budget_parse_and_shard_parse():
    assert matrix.parse_budget("90m") == 5400 and matrix.parse_budget("1h30m") == 5400
    assert matrix.parse_budget("2h") == 7200 and matrix.parse_budget("45") == 2700
    for bad in ("", "soon", "0m"):
        with pytest.raises(matrix.MatrixError):
            matrix.parse_budget(bad)
    assert matrix.parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(matrix.MatrixError):
            matrix.parse_shard(bad)


def test_shards_are_deterministic_disjoint_and_whole(tmp_path):
    plan = write_plan(tmp_path)
    for n in (1, 2, 3, 6, 8):
        parts = [matrix.shard(plan, i, n).units for i in range(1, n + 1)]
        assert parts == [matrix.shard(write_plan(tmp_path), i, n).units for i in range(1, n + 1)]
        flat = [u for p in parts for u in p]
        assert sorted(flat, key=plan.key) == sorted(plan.units, key=plan.key) and len(set(flat)) == len(flat)
    core = matrix.load_plan(section="core")
    two = [matrix.shard(core, i, 2) for i in (1, 2)]
    est = [sum(matrix.unit_estimate(u, bench.parse_sched_list(",".join(p.scheds_of(u)), ablate=False))
               * p.runs_of(u) for u in p.units) for p in two]
    assert max(est) < 1.2 * min(est)  # dealt by estimate: about as long each
    assert all(p.scheds_of(u) == core.scheds_of(u) for p in two for u in p.units)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALITY_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(bench, "build_workloads", lambda log: None)
    monkeypatch.setattr(bench, "prepare_schedulers", lambda specs, build, log: {})
    monkeypatch.setattr(bench, "build_ids", lambda specs: {s.label: "missing" for s in specs if not s.is_eevdf})
    monkeypatch.setattr(store, "current_stamp", lambda binary=None: dict(STAMP, binary="missing"))
    lab = FakeBoots(tmp_path, wall_s=10.0)
    monkeypatch.setattr(run, "run_job", lab.run_job)
    return lab


def test_run_budget_whole_cells_interrupt_and_resume(tmp_path, fake, capsys):
    plan = write_plan(tmp_path, specs=(SPEC_A, SPEC_B), runs=2)
    st, out = tmp_path / "store", tmp_path / "out"
    first = matrix.budget_order(plan, {}, STAMP)[0]

    def clock():  # each boot takes the time the estimate gives it
        return len(fake.calls) * first.est_s / 2

    # room for the first cell only
    assert matrix.run_budget(plan, out, st, first.est_s + 5, build=False, command_line="c",
                             clock=clock) == run.EXIT_OK
    cells = store.read_cells(st)
    assert [c["key"]["spec"] for c in cells] == [SPEC_A] and cells[0]["runs"] == 2 and len(fake.calls) == 2
    assert cells[0]["stamp"]["behaviour"] == STAMP["behaviour"] and cells[0]["estimate_s"] == pytest.approx(
        first.est_s)
    # the next slice: SPEC_B is interrupted in its second boot; the store is as it was
    fake.fail_on_call = 4
    with pytest.raises(KeyboardInterrupt):
        matrix.run_budget(plan, out, st, 10**5, build=False, command_line="c", clock=clock)
    assert [c["key"]["spec"] for c in store.read_cells(st)] == [SPEC_A]
    assert not list(st.glob("*/*/.*"))
    # and the one after goes on with SPEC_B's folder (its first boot kept), then xeon-1n32's cell
    fake.fail_on_call = None
    matrix.run_budget(plan, out, st, 10**5, build=False, command_line="c", clock=clock)
    assert len(fake.calls) == 4 + 1 + 3
    assert sorted(c["key"]["machine"] + " " + c["key"]["spec"] for c in store.read_cells(st)) == \
        sorted(["numa2 " + SPEC_A, "numa2 " + SPEC_B, "xeon-1n32 " + SPEC_A])
    # nothing left: a fourth slice runs nothing
    matrix.run_budget(plan, out, st, 10**5, build=False, command_line="c", clock=clock)
    assert len(fake.calls) == 8


# ---------------------------------------------------------------------------------------------------------
# The page


def test_page_from_a_fake_store(tmp_path, monkeypatch):
    st = tmp_path / "store"
    seed002 = relabel(results(), "scx_defaults:--queued-wakeups", "scx_locality:--no-cache-aware")
    for c in store.cells_from_results(seed002, "2026-12-01 21:00:00", STAMP, runner={"kind": "lab",
                                                                                    "cpu_model": "Xeon", "cores": 2}):
        store.write_cell(st, c)
    old = cell(date="2026-11-20 10:00:00")
    store.write_cell(st, old)
    hw = results(host=True, machine="host-box",
                 machine_summary="host-box 8 CPUs [this host: AMD EPYC 7302 16-Core Processor; kernel 6.12.0]")
    for c in store.cells_from_results(hw, "2026-12-02 10:00:00", None):
        store.write_cell(st, c)
    monkeypatch.setattr(store, "current_stamp", lambda binary=None: dict(STAMP, behaviour="n" * 16, bpf="q" * 16))
    now = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.timezone.utc)
    page = matrix.write_store_page(st, tmp_path / "results.md", now=now)
    text = page.read_text()
    assert "## The seeds, reproduced" in text
    seeds = text.split("## The seeds, reproduced")[1].split("\n## ")[0]
    assert seeds.count("not yet run") >= 4  # numa2, xeon-1n32, numaq4: no cells
    row002 = next(ln for ln in seeds.splitlines() if ln.startswith("| 002 "))
    assert "spr-1n2llc: top LLC per process: `scx_locality`" in row002 and "milan-2n8llc cache-hackbench: not yet " \
        "run" in row002 and "vs `--no-cache-aware`: pipe-1 time" in row002
    assert "**stale** (BPF changed" in row002
    assert "stale: BPF changed, 12 days old" in text and "(BPF changed; 13 h old)" in row002
    assert "## hw-amd-epyc-7302-16-core-8c1n2l" in text and "real hardware" in text and "kernel 6.12.0" in text
    assert "### Memory (the memory model)" in text and "| mem-local-pct (% of accesses) |" in text
    assert "## Cost per decision" in text and "| select_cpu | spr-1n2llc (8) |" in text
    assert "| all callbacks (% of the CPUs) | spr-1n2llc (8) | " in text
    assert "mem-local-pct" not in text.split("### Speed")[1].split("### Memory")[0]
    # it reads the store alone: the same store gives the same page
    assert matrix.write_store_page(st, tmp_path / "again.md", now=now).read_text() == text


def test_memory_model_cell_beside_the_plain_one(tmp_path, monkeypatch):
    st = tmp_path / "store"
    plain, mm = cell(), cell(memory_model=MODEL)
    assert "memory_model" not in plain["key"] and mm["key"]["memory_model"] is True
    assert store.key_of(mm) == store.key_of(plain).replace("msgs=100000/", "msgs=100000+memory-model/")
    store.write_cell(st, plain)
    monkeypatch.setattr(store, "current_stamp", lambda binary=None: STAMP)
    now = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.timezone.utc)
    alone = matrix.write_store_page(st, tmp_path / "alone.md", now=now).read_text()
    store.write_cell(st, mm)
    assert len(store.read_cells(st)) == 2  # its own key: neither replaces the other
    text = matrix.write_store_page(st, tmp_path / "both.md", now=now).read_text()
    spr = text.split("## spr-1n2llc")[1]
    assert "| cache-hackbench:ipc=pipe:pairs=1/2:msgs=100000 (memory model) | 4 (with " in spr
    # its speed, placement and cost rows are left out: the slowed guest's figures would pool with the plain cell's
    for section in ("### Speed", "### Placement", "### Cost of the decisions"):
        assert spr.split(section)[1].split("\n### ")[0] == alone.split("## spr-1n2llc")[1].split(section)[1] \
            .split("\n### ")[0]
    memory = spr.split("### Memory (the memory model)")[1].split("\n### ")[0]
    assert "| cache-hackbench:ipc=pipe:pairs=1/2:msgs=100000 (memory model) | pipe-1 | mem-local-pct" in memory
    said = matrix._memory(mm, "scx_locality", "eevdf")
    assert said.startswith("memory model: pipe-1 local accesses `eevdf` ") and "miss time " in said
    assert matrix._pick([plain, mm], "spr-1n2llc", "cache-hackbench") is plain
    assert matrix._pick([plain, mm], "spr-1n2llc", "cache-hackbench", memory_model=True) is mm


def test_plan_memory_model_units(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('schedulers = ["eevdf", "scx_locality"]\nruns = 2\n[machines.numa2]\n'
                 'benchmarks = ["wakelat"]\nmemory_model = ["wakelat"]\n')
    plan = matrix.load_plan(f)
    plain, mm = plan.units
    assert (plain.memory_model, mm.memory_model) == (False, True) and plain.spec == mm.spec == "wakelat"
    assert mm.dirname == "wakelat+memory-model" and mm.title == "wakelat (memory model)"
    assert plan.key(mm) == store.cell_key("numa2", "wakelat", ["eevdf", "scx_locality"], True) != plan.key(plain)
    assert matrix.plan_json(plan)["units"][1] == {"machine": "numa2", "spec": "wakelat", "memory_model": True}
    old = {"version": bench.RESULTS_VERSION, "machine": "numa2", "memory_model": None}
    assert "without the memory model" in bench.resume_check(old, [], [], "numa2", memory_model=True)


def test_shipped_core_matrix_fits_five_hours():
    core = matrix.load_plan(section="core")
    want = {"numa2", "haswell2s", "numaq4", "spr-1n2llc", "milan-2n8llc", "xeon-1n32", "big64"}
    assert set(core.machines()) == want
    seven = ["eevdf", "scx_locality", "scx_p2dq", "scx_lavd", "scx_rusty", "scx_bpfland", "scx_cosmos"]
    assert all(set(seven) <= set(core.scheds_of(u)) for u in core.units)
    assert all(core.runs_of(u) >= 3 for u in core.units)
    assert all(core.runs_of(u) == 5 for u in core.units if u.machine == "numa2")
    assert "scx_locality:--no-steal" in core.scheds_of(next(u for u in core.units if u.machine == "xeon-1n32"))
    total = sum(matrix.unit_estimate(u, bench.parse_sched_list(",".join(core.scheds_of(u)), ablate=False))
                * core.runs_of(u) for u in core.units)
    assert total <= 5 * 3600
    assert os.path.isdir(store.STORE_DIR)
