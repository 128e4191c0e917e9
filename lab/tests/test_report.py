# SPDX-License-Identifier: GPL-2.0-only
"""lab/report.py and lab/plots.py on a hand-made results.json: the mmtests-style numbers, the significance
marks, failed schedulers with their reasons, locality and residency tables, and the PNGs."""
import json

import pytest

from lab import plots, report, samples

TOPO = {"nodes": [[0, 1], [2, 3]], "llcs": [[0, 1], [2, 3]], "cores": [[0], [1], [2], [3]]}


def cpu_file(busy_share):
    """Two /proc/stat samples 100 ticks apart per CPU, busy_share[cpu] of them busy."""
    lines = []
    for ms, k in ((0, 0), (500, 1)):
        for cpu, b in enumerate(busy_share):
            busy = int(100 * b) * k
            idle = (100 - int(100 * b)) * k
            lines.append(f"{ms} cpu{cpu} {busy} 0 0 {idle} 0 0 0 0 0 0")
    return "\n".join(lines) + "\n"


def case(cid, label, figs, status="ok", loc=None, resid=None, files=None, error=None, bpf=None, iq=None,
         irq=None):
    return {"case": cid, "label": label, "params": {}, "status": status, "rc": 0 if status == "ok" else 1,
            "bpf_cost": bpf, "interrupts": irq,
            "error": error, "elapsed_s": 2.0, "figures": figs, "locality": loc, "residency": resid,
            "idle_queued": iq, "files": files or {},
            "sampler": {"ticks": 20, "busy_ms": 100, "stat_us": 20000, "rq_ms": 100}}  # 120 ms of 2 s: 6%


def iq(llc, node):
    return {"llc_ms": llc, "node_ms": node, "idle_ms": 900.0, "wait_ms": 50.0, "intervals": 20, "span_ms": 2010}


def loc(cross_llc, cross_node, home, samples=100):
    return {"tasks": 4, "samples": samples, "moves": cross_llc + 1, "cross_llc": cross_llc,
            "cross_node": cross_node, "nr_migrations": 10, "home_llc_samples": home, "home_node_samples": home}


@pytest.fixture
def out(tmp_path):
    """Two runs of eevdf (baseline) and scx_locality; scx_rusty failed to build; scx_bad never started."""
    raw = tmp_path / "raw" / "run1"
    raw.mkdir(parents=True)
    (raw / "s0c0.cpu").write_text(cpu_file([1.0, 0.5, 0.0, 0.25]))
    (raw / "s1c0.cpu").write_text(cpu_file([0.0, 0.0, 1.0, 1.0]))
    # time figure t: case A eevdf [15, 17], locality [10, 12] -> 31.25% better, p = 0.0715: significant
    #                case B eevdf [10, 12], locality [14, 16] -> -36.36%, p = 0.1056: not significant
    # rate figure r: case A eevdf [1, 2, 4]... only two runs here: eevdf [100, 100], locality [110, 110]
    vals = {  # (sched, run) -> {case: (t, r)}
        ("eevdf", 1): {"A": (15, 100), "B": (10, 50)}, ("eevdf", 2): {"A": (17, 100), "B": (12, 50)},
        ("scx_locality", 1): {"A": (10, 110), "B": (14, 40)}, ("scx_locality", 2): {"A": (12, 110), "B": (16, 60)},
    }
    runs = []
    for r in (1, 2):
        steps = []
        for i, s in enumerate(("eevdf", "scx_locality")):
            v = vals[(s, r)]
            resid = [{"pid": 10, "id": 0, "node_samples": [9, 1], "mem_node": 0, "elapsed_s": 2.0},
                     {"pid": 11, "id": 1, "node_samples": [5, 5], "mem_node": 1, "elapsed_s": 3.0}]
            steps.append({
                "step": i, "bench": "tb", "sched": s, "started": True, "start_error": None, "start_s": 1.0,
                "ejected": False, "exit_kind": None, "exit_reason": None, "cmd_seconds": 5.0,
                "final_stats": ({"idle_while_queued_llc_ms": 4.0 * r, "idle_while_queued_node_ms": 2.0,
                                 "migr_cross_llc": 7, "migr_cross_node": 4 * r, "xnode_push_wake": r,
                                 "xnode_exec": 0} if s == "scx_locality" else None),
                "sched_log": None,
                "cases": [case("tb-A", "A", {"t": v["A"][0], "r": v["A"][1]}, loc=loc(2 * r, r, 80), resid=resid,
                               files={"cpu": f"raw/run1/s{i}c0.cpu"} if r == 1 else {},
                               bpf=({"select_cpu": {"calls": 100 * r, "ns": 100000 * r * r}}
                                    if s == "scx_locality" else None),
                               iq=iq(3.0 * r, 5.0 * r) if s == "eevdf" else iq(2.0, 4.0),
                               irq={"RES": 100 * r if s == "eevdf" else 300, "LOC": 500, "NMI": 1}),
                          case("tb-B", "B", {"t": v["B"][0], "r": v["B"][1]}, loc=loc(0, 0, 100),
                               iq=iq(1.0, 1.0) if s == "eevdf" else None)]})
        steps.append({"step": 2, "bench": "tb", "sched": "scx_bad", "started": False,
                      "start_error": "exited 1: libbpf: failed to load", "ejected": False, "exit_kind": None,
                      "exit_reason": None, "cmd_seconds": None, "final_stats": None, "sched_log": None,
                      "cases": [case("tb-A", "A", {"t": None, "r": None}, status="not-run", error="did not start"),
                                case("tb-B", "B", {"t": None, "r": None}, status="not-run", error="did not start")]})
        runs.append({"run": r, "run_dir": f"/x/run{r}", "order": ["eevdf", "scx_locality", "scx_bad"],
                     "boot_s": 5.0, "wall_s": 60.0, "timed_out": False, "completed": True, "topology_ok": True,
                     "exit": 5, "steps": steps, **({"host_other_pct": 37.5} if r == 1 else {})})
    results = {
        "version": 1, "created": "now", "command": "bin/lab bench ...", "machine": "tiny", "machine_summary": "tiny",
        "nr_cpus": 4, "topology": TOPO, "runs_requested": 2,
        "scheds": [{"label": "eevdf", "name": "eevdf", "args": [], "prepare_error": None},
                   {"label": "scx_locality", "name": "scx_locality", "args": [], "prepare_error": None},
                   {"label": "scx_rusty", "name": "scx_rusty", "args": [],
                    "prepare_error": "cargo install scx_rusty 1.1.4 failed (exit 101): error: linker not found"},
                   {"label": "scx_bad", "name": "scx_bad", "args": [], "prepare_error": None}],
        "benchmarks": {"tb": {"name": "tb", "spec": "tb", "description": "test bench", "command": "tb {x}",
                              "params": {}, "sweep": {"x": ["A", "B"]}, "choices": {}, "residency_comm": "numajob",
                              "sample_comm": [],
                              "figures": [{"name": "t", "regex": "", "unit": "s", "higher_is_better": False,
                                           "mean": "amean", "aggregate": "first"},
                                          {"name": "r", "regex": "", "unit": "ops/s", "higher_is_better": True,
                                           "mean": "hmean", "aggregate": "first"}]}},
        "sampler": {"sample_ms": 100, "sched_ms": 500, "cpustat_ms": 500},
        "runs": runs,
    }
    (tmp_path / "results.json").write_text(json.dumps(results))
    return tmp_path


def table_lines(text, first_word, case_label):
    return [ln for ln in text.splitlines() if ln.split()[:2] == [first_word, case_label]]


def test_figure_table_numbers_and_significance(out):
    res = report.load(out)
    labels = [s["label"] for s in res["scheds"]]
    fig_t, fig_r = res["benchmarks"]["tb"]["figures"]
    text, findings = report.figure_table(res, "tb", fig_t, labels, {"scx_rusty", "scx_bad"})
    (a,) = table_lines(text, "Amean", "A")
    # eevdf 16.00, baseline; locality 11.00: 100 - 100 * 11 / 16 = 31.25% better, significant (p 0.0715)
    assert "16.00 (   0.00%)" in a and "11.00 *  31.25%*" in a
    assert a.count("failed") == 2
    (b,) = table_lines(text, "Amean", "B")
    # 11 vs 15: 100 - 100 * 15 / 11 = -36.36%, p 0.1056: not significant
    assert "15.00 ( -36.36%)" in b
    (sd,) = table_lines(text, "Stddev", "A")
    assert sd.split()[2:4] == ["1.41", "1.41"]  # sqrt(2)
    (cv,) = table_lines(text, "CoeffVar", "A")
    assert "8.84%" in cv and "12.86%" in cv  # 100 * sqrt(2) / 16, 100 * sqrt(2) / 11
    (n,) = table_lines(text, "Runs", "A")
    assert n.split()[2:4] == ["2", "2"]
    sig = {(cid, s): f.significant for cid, s, _p, f in findings}
    assert sig == {("tb-A", "scx_locality"): True, ("tb-B", "scx_locality"): False}
    # paired by run: A 10/15 and 12/17, geometric mean 0.686, p 0.048; B 14/10 and 16/12 (x1.366, p 0.0497),
    # significant paired although not by the two-sample test above
    assert report.paired_values(res, "tb", "tb-B", "eevdf", "scx_locality", "t") == [(10, 14), (12, 16)]
    (pa,) = table_lines(text, "Paired", "A")
    assert pa.split()[2:] == ["x0.686", "*p", "0.048*", "failed", "failed"]
    (pb,) = table_lines(text, "Paired", "B")
    assert pb.split()[2:5] == ["x1.366", "*p", "0.050*"]
    text, _ = report.figure_table(res, "tb", fig_r, labels, {"scx_rusty", "scx_bad"})
    (a,) = table_lines(text, "Hmean", "A")
    assert "100.00 (   0.00%)" in a and "110.00 *  10.00%*" in a  # zero spread, means differ: significant
    (b,) = table_lines(text, "Hmean", "B")
    # locality [40, 60]: Hmean 2 / (1/40 + 1/60) = 48, vs 50: 100 * 48 / 50 - 100 = -4%
    assert "48.00 (  -4.00%)" in b


def test_sched_status_reasons(out):
    st = {s["label"]: s for s in report.sched_status(report.load(out))}
    assert st["eevdf"]["status"] == "ok" and st["scx_locality"]["status"] == "ok"
    assert st["scx_rusty"]["status"] == "failed" and "linker not found" in st["scx_rusty"]["reason"]
    assert st["scx_bad"]["status"] == "failed"
    assert "did not start in 2 of 2 steps" in st["scx_bad"]["reason"] and "libbpf" in st["scx_bad"]["reason"]


def test_locality_rows(out):
    res = report.load(out)
    rows = {r["sched"]: r for r in report.locality_rows(res, "tb", ["eevdf", "scx_locality", "scx_bad"])}
    e = rows["eevdf"]
    # per run: cross_llc 2r + 0, cross_node r + 0 -> runs 1, 2: means 3 and 1.5; all moves (2r+1)+(0+1) -> 5
    assert (e["cross_llc"], e["cross_node"], e["moves"]) == (3.0, 1.5, 5.0)
    assert e["home_node"] == pytest.approx(90.0)  # (80 + 100) * 2 / 400
    # idle while queued from the sampler, per run summed over cases: eevdf llc 3r + 1, node 5r + 1 -> 5.5, 8.5;
    # scx_locality only case A, 2 and 4 (its own final-stats counter, 6.0 / 2.0, is not this column)
    assert (e["iwq_llc_ms"], e["iwq_node_ms"]) == (5.5, 8.5)
    assert rows["scx_locality"]["iwq_llc_ms"] == 2.0 and rows["scx_locality"]["iwq_node_ms"] == 4.0
    assert rows["scx_bad"]["iwq_llc_ms"] is None
    assert e["sampler_pct"] == pytest.approx(6.0)  # task scans 100 ms + per-CPU sampler 20 ms per 2 s case
    assert rows["scx_bad"]["runs"] == 0 and rows["scx_bad"]["cross_llc"] is None


def test_write_report_and_pngs(out):
    path = report.write_report(out)
    text = path.read_text()
    assert "| `scx_rusty` | failed | cargo install scx_rusty 1.1.4 failed" in text
    assert "did not start in 2 of 2 steps" in text
    assert "### tb t (s; lower is better; Amean)" in text and "### tb r (ops/s; higher is better; Hmean)" in text
    assert "p < 0.10" in text and "df = n_base + n_new - 2" in text  # the significance rule is stated
    assert "| eevdf | 2 | 4.0 | 3.0 | 1.5 | 5.0 | 20 | 90.0% | 90.0% | 5.5 / 8.5 | 6.0% |" in text
    assert "| 2.0 / 4.0 | 6.0% |" in text  # scx_locality: the sampler's bound, like every scheduler's
    assert "100 ms asked, " in text and "; 100.5 ms on average in this report)" in text  # 2010 ms / 20 intervals
    assert "| idle_while_queued_llc_ms | 6.0 |" in text  # its own counter stays in its counters table
    assert "| 0 | 90* | 10 | 2.00 |" in text  # residency row, memory node marked
    assert "| migr_cross_llc | 7.0 |" in text
    # the host's CPU time given to other work, per run; n/a where a run did not record it
    assert "| 1 | eevdf, scx_locality, scx_bad | 5.0 | 60.0 | 37.5% | 5 |" in text
    assert "| 2 | eevdf, scx_locality, scx_bad | 5.0 | 60.0 | n/a | 5 |" in text
    assert "### tb: cost of the scheduler's decisions (BPF run time per callback)" in text
    for png in ("cpu-util-tb.png", "residency-tb.png"):
        assert (out / png).exists() and (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text
    summary = report.summary_text(out)
    assert "== tb t (s; lower is better)" in summary and "scx_rusty: failed" in summary


def test_cross_node_moves_per_second_by_cause(out):
    results = report.load(out)
    table = report.xnode_rate_table(results, "tb", ["eevdf", "scx_locality", "scx_bad"])
    # runs 1 and 2: push_wake 1 + 2, all cross-node runs 4 + 8, over 2 runs x 2 cases x 2 s
    assert "| xnode_push_wake | 0.38 |" in table and "| xnode_exec | 0.00 |" in table
    assert table.index("xnode_exec") < table.index("migr_cross_node")  # the causes first, the total last
    assert "| migr_cross_node | 1.50 |" in table and "| (seconds of cases) | 8.0 |" in table
    assert "eevdf" not in table  # no counters of its own
    assert report.xnode_rate_table(results, "other", ["scx_locality"]) is None
    assert "### tb: scx_locality's cross-node moves per second, by cause" in report.write_report(out).read_text()


def test_bpf_cost_per_call_pooled_over_runs(out):
    results = report.load(out)
    cols, per = report.bpf_cost_rows(results, "tb", ["eevdf", "scx_locality", "scx_bad"])
    assert cols == ["scx_locality"]             # EEVDF runs no BPF; scx_bad never started
    # run 1: 100 calls, 100 us; run 2: 200 calls, 400 us -> 1,000 and 2,000 ns per call, 1,667 pooled
    a = per["scx_locality"]["cb"]["select_cpu"]
    assert (a["calls"], a["ns"], a["per_run"]) == (300, 500000, [1000.0, 2000.0])
    # 500 us over 2 x 2 s of case A (the only case with counts) on 4 CPUs
    assert per["scx_locality"]["cpu_share"] == pytest.approx(100 * 500e-6 / (4.0 * 4))
    table = report.bpf_cost_table(cols, per)
    assert "| select_cpu | 1,667 (1,000-2,000; 75/s) |" in table


def test_interrupts_per_second_pooled_over_runs(out):
    results = report.load(out)
    cols, per = report.interrupt_rows(results, "tb", ["eevdf", "scx_locality", "scx_bad"])
    assert cols == ["eevdf", "scx_locality"]   # EEVDF has interrupts too; scx_bad never ran a case
    # eevdf RES: 100 then 200 over 2 s of case A per run (case B has no snapshot): 75/s pooled, 50-100 per run
    assert per["eevdf"]["rows"]["RES"] == {"count": 300, "per_run": [50.0, 100.0]}
    table = report.interrupt_table(cols, per)
    assert "| RES | 75 (50-100) | 150 (150-150) |" in table
    assert "| LOC | 250 (250-250) | 250 (250-250) |" in table
    assert "NMI" not in table and "| IWI | 0 (0-0) | 0 (0-0) |" in table
    assert "### tb: interrupts during the cases" in report.write_report(out).read_text()


def test_cpu_utilisation_matrix():
    cpustat = samples.parse_cpustat(cpu_file([1.0, 0.5, 0.0, 0.25]))
    mat = plots.utilisation(cpustat, [3, 2, 1, 0])
    assert mat.shape == (4, 1)
    assert list(mat[:, 0]) == [25.0, 0.0, 50.0, 100.0]
    assert samples.parse_cpustat("garbage\n0 cpu 1 2 3 4\n") == {}


def colo(pair_ticks, same_node, same_llc, cross_node, after, after_ticks=None, after_same=None, own_core=None):
    """A case's co-location record; own_core None leaves own_core_after_start out, as records made before it."""
    own = {} if own_core is None else {"own_core_after_start": own_core}
    return own | {"tasks": 2, "ticks": pair_ticks + 1, "pair_ticks": pair_ticks, "same_node": same_node,
            "same_llc": same_llc, "pair_ticks_after_start": after_ticks if after_ticks is not None else pair_ticks,
            "same_node_after_start": after_same if after_same is not None else same_node,
            "same_llc_after_start": same_llc, "cross_node": cross_node, "cross_llc": cross_node,
            "cross_node_after_start": after, "cross_llc_after_start": after, "settle_ms": 1000,
            "node_share_sum": same_node + 0.5 * (pair_ticks - same_node),  # a pair: all on one node or half
            "which": [{"tid": 5, "comm": "netperf", "samples": 9, "running": 9},
                      {"tid": 7, "comm": "netserver", "samples": 9, "running": 8}]}


def test_colocation_columns_and_table(out):
    res = report.load(out)
    # eevdf: case A runs 1, 2: 100 ticks, 50 and 70 on one node; case B: 100 ticks, all on one node
    # scx_locality: case A 100 ticks, 100 and 99 on one node; no co-location for case B
    for r in res["runs"]:
        for st in r["steps"]:
            for c in st["cases"]:
                if st["sched"] == "eevdf":
                    c["colocation"] = (colo(100, 30 + 20 * r["run"], 20, 4, r["run"]) if c["label"] == "A"
                                       else colo(100, 100, 100, 0, 0))
                elif st["sched"] == "scx_locality" and c["label"] == "A":
                    c["colocation"] = colo(100, 101 - r["run"], 90, 1, 0, after_ticks=80, after_same=80,
                                           own_core=40)
    res["benchmarks"]["tb"]["colocation_tasks"] = 2
    (out / "results.json").write_text(json.dumps(res))
    rows = {r["sched"]: r for r in report.locality_rows(res, "tb", ["eevdf", "scx_locality", "scx_bad"])}
    # eevdf pooled: (50 + 100 + 70 + 100) / 400 = 80%; LLC (20 + 100) * 2 / 400 = 60%;
    # moves after start per run (A + B): 1, 2 -> mean 1.5
    assert rows["eevdf"]["colo_same_node"] == pytest.approx(80.0)
    assert rows["eevdf"]["colo_same_llc"] == pytest.approx(60.0)
    assert rows["eevdf"]["colo_cross_node_after"] == 1.5
    assert rows["scx_locality"]["colo_same_node"] == pytest.approx(99.5)  # (100 + 99) / 200
    assert rows["scx_bad"]["colo_same_node"] is None
    crow = {(r["case"], r["sched"]): r for r in report.colocation_rows(res, "tb", ["eevdf", "scx_locality"])}
    assert set(crow) == {("A", "eevdf"), ("B", "eevdf"), ("A", "scx_locality")}
    a = crow[("A", "eevdf")]
    assert (a["runs"], a["pair_ticks"], a["same_node"], a["same_node_min"]) == (2, 200, 60.0, 50.0)
    assert (a["cross_node"], a["cross_node_after"], a["cross_node_after_max"]) == (4.0, 1.5, 2)
    assert crow[("A", "scx_locality")]["same_node_after"] == 100.0  # 160 of 160 after start
    assert crow[("A", "scx_locality")]["which"] == ["netperf", "netserver"]
    text = report.write_report(out).read_text()
    assert "| co-located, node | co-located, LLC | cross-node moves after start |" in text
    assert "| 80.00% | 60.00% | 1.5 |" in text
    assert "### tb: co-location of its 2 busiest tasks, sample by sample" in text
    # a core each after start: 2 x 40 of 160 = 50%; busiest node's share: (100 + 99 + 0.5) / 200 ticks = 99.75%
    assert ("| A | scx_locality | 2 | 2 (netperf, netserver) | 200 | 99.50% | 99.00% | 100.00% | 90.00% | 50.00% | "
            "99.8% | 1.0 | 0.0 / 0 |") in text
    # records made before the own-core count show n/a there
    assert "| B | eevdf | 2 | 2 (netperf, netserver) | 200 | 100.00% | 100.00% | 100.00% | 100.00% | n/a | " in text
    assert "first 1000 ms" in text


def pllc(pid, llc_running):
    tot = sum(llc_running)
    top = max(range(len(llc_running)), key=lambda i: llc_running[i])
    return {"pid": pid, "comm": "hackbench", "threads": 3, "llc_running": llc_running, "running": tot,
            "top_llc": top, "share": llc_running[top] / tot}


def test_process_llc_rows_and_table(out):
    res = report.load(out)
    # eevdf, case A: run 1 two processes on LLCs 0 and 1, run 2 both on LLC 1 (90 of 100 samples each);
    # scx_locality: every process all on one LLC, two distinct LLCs each run
    for r in res["runs"]:
        for st in r["steps"]:
            for c in st["cases"]:
                if c["label"] != "A":
                    continue
                if st["sched"] == "eevdf":
                    c["process_llc"] = ([pllc(1, [90, 10]), pllc(2, [40, 60])] if r["run"] == 1
                                        else [pllc(1, [10, 90]), pllc(2, [10, 90])])
                elif st["sched"] == "scx_locality":
                    c["process_llc"] = [pllc(1, [100, 0]), pllc(2, [0, 100])]
    res["benchmarks"]["tb"]["process_llc"] = True
    (out / "results.json").write_text(json.dumps(res))
    rows = {r["sched"]: r for r in report.process_llc_rows(res, "tb", ["eevdf", "scx_locality", "scx_bad"])}
    assert set(rows) == {"eevdf", "scx_locality"}
    e = rows["eevdf"]
    # pooled: (90 + 60 + 90 + 90) / 400 = 82.5%; lowest 60%; >= 95%: none; distinct 2 then 1
    assert (e["runs"], e["procs"], e["share"], e["lowest"]) == (2, 2.0, 82.5, 60.0)
    assert (e["fit"], e["nprocs"], e["distinct"], e["all_distinct"]) == (0, 4, 1.5, 1)
    s = rows["scx_locality"]
    assert (s["share"], s["fit"], s["all_distinct"]) == (100.0, 4, 2)
    text = report.write_report(out).read_text()
    assert "### tb: process x LLC residency" in text
    assert "| A | eevdf | 2 | 2.0 | 100 | 82.5% | 60.0% | 0/4 | 1.5 | 1/2 |" in text
