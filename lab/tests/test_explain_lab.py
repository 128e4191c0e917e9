# SPDX-License-Identifier: GPL-2.0-only
"""`scx_locality explain` (scheduler/src/explain/) in one numaq4 boot (marked `lab`).

- Under EEVDF, before the scheduler starts: exit 12 (scx_locality not running).
- A 2-thread communicating pair (hackbench, threads over a pipe): explain names the threads /proc/PID/task lists,
  each on the node the guest's sysfs gives its CPU, shares that sum to 1, all under sched_ext; no home because the
  memory agent does not track it (under 16 MB), as its stats agree (no hackbench in memory_procs); no preferred
  LLC because cache-aware scheduling is off on a machine with one LLC per node. `--watch 1 --json` gives one
  object per second.
- A process spanning nodes (memspan: 4 workers on numaq4's 2-CPU nodes): thread homes (too big for one node),
  as the agent's stats show (memspan's thread_homes in --monitor's memory_procs); active over two nodes or more; `--top`
  lists it.
- Memory per node and class (private, shared, file, bound), compared with the test's own reading of numa_maps at the
  moment explain read it. While memspan runs, the agent moves its huge pages between nodes in both directions
  (private chunks follow their writers, shared surplus spreads), and its own counter and pgmigrate_success rise only
  when a move_pages(2) call returns (16 huge pages a call at the default budget), so no reading before or after
  explain's, nor a count of moves, pins a node's figure at explain's instant: of a running memspan only the total is
  compared (a move keeps it). The agent moves pages only of processes that ran in its last interval, so memspan is
  stopped (SIGSTOP) until two numa_maps reads a second apart agree; explain then reads between two numa_maps reads
  that agree, and each of its figures must equal theirs to its 0.1 MB rounding: any error larger than that shows.
- Decisions (the BPF decision record): each one names a thread of the process, a rule the scheduler counts (a
  stats field) or the wake-up's idle search, and a move across nodes is between two nodes; memspan's workers start
  on one 2-CPU node, so some of them move node in its first seconds and the report lists at least one such move.
- Errors: no such pid 10, a real-time process 11, an unprivileged user 13.
Every check is structural (which thread, which node, which rule), none a timing.
"""
import io
import json
import re

import pytest

from lab import machines, run
from labsteps import final_stats

pytestmark = pytest.mark.lab

PAIR = "hackbench -p -T -g 1 -f 1 -l 4000000"
SPAN = "memspan -N 2 -S 128 -P 16 -r 60 -w 1"

EEVDF_STEP = "echo 'explaintest: eevdf'; scx_locality explain $$; echo \"explain_rc: $?\""
SCX_STEP = f"""
echo 'explaintest: topo'
for d in /sys/devices/system/node/node[0-9]*; do echo "$(basename $d) $(cat $d/cpulist)"; done
{PAIR} >/dev/null 2>&1 & HB=$!
sleep 3
echo 'explaintest: pair'
scx_locality explain --json $HB; echo "explain_rc: $?"
echo "tasks: $(ls /proc/$HB/task | tr '\\n' ' ')"
echo 'explaintest: watch'
echo "lines: $(scx_locality explain --watch 1 --json $HB | head -2 | grep -c '^{{')"
kill $HB; wait $HB 2>/dev/null
{SPAN} >/dev/null & MS=$!
sleep 8
echo 'explaintest: span'
scx_locality explain --json $MS; echo "explain_rc: $?"
echo "tasks: $(ls /proc/$MS/task | tr '\\n' ' ')"
echo 'explaintest: span_text'
scx_locality explain $MS
echo 'explaintest: span_maps'
cat /proc/$MS/numa_maps
echo 'explaintest: span_stats'
timeout 2 scx_locality --monitor 1 | grep ' mem '
echo 'explaintest: top'
scx_locality explain --top --json; echo "explain_rc: $?"
echo 'explaintest: still'
kill -STOP $MS
nodes() {{ grep -o 'N[0-9]*=[0-9]*' "$@" | tr '\n' ' '; }}
waits=0; prev=
while [ $waits -lt 15 ]; do
  cur=$(nodes /proc/$MS/numa_maps)
  [ "$cur" = "$prev" ] && break
  prev=$cur; waits=$((waits + 1)); sleep 1
done
echo "waits: $waits"
for round in 1 2 3; do
  B=$(cat /proc/$MS/numa_maps)
  E=$(scx_locality explain --json --interval-ms 100 $MS); rc=$?
  A=$(cat /proc/$MS/numa_maps)
  [ "$(echo "$B" | nodes)" = "$(echo "$A" | nodes)" ] && break
done
echo "rounds: $round"
echo "explain_rc: $rc"
echo 'explaintest: still_before'
echo "$B"
echo 'explaintest: still_explain'
echo "$E"
echo 'explaintest: still_after'
echo "$A"
kill -CONT $MS
echo 'explaintest: errors'
scx_locality explain 999999; echo "nopid_rc: $?"
chrt -f 1 sleep 30 & RT=$!
sleep 1
scx_locality explain $RT; echo "rt_rc: $?"
kill $RT
/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups scx_locality explain $MS; echo "perm_rc: $?"
kill $MS; wait $MS
echo 'explaintest: end'
"""


def value(text, name):
    m = re.search(rf"^{name}: *(.*)$", text, re.M)
    assert m, f"{name} missing in:\n{text[-2000:]}"
    return m.group(1).strip()


def report(text):
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    assert len(lines) == 1, text[-3000:]
    return json.loads(lines[0])


def cpu_nodes(text):
    """{cpu: node} from 'nodeN LIST' lines (sysfs cpulist: 0-1,4)."""
    out = {}
    for m in re.finditer(r"^node(\d+) (\S+)$", text, re.M):
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            for c in range(int(lo), int(hi or lo) + 1):
                out[c] = int(m.group(1))
    return out


CLASSES = ("private", "shared", "file", "bound")


def numa_maps_classes(text, nr_nodes):
    """{class: KB per node} of a numa_maps text, by explain's classes (scheduler/README.md): bound (a policy other
    than default or local), file (file-backed), shared (anonymous, mapmax > 1), private (anonymous)."""
    kb = {c: [0] * nr_nodes for c in CLASSES}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 2 or not re.fullmatch(r"[0-9a-f]+", f[0]):
            continue
        kv = dict(t.split("=", 1) for t in f[2:] if "=" in t)
        if f[1] not in ("default", "local"):
            c = "bound"
        elif "file" in kv:
            c = "file"
        else:
            c = "shared" if int(kv.get("mapmax", "1")) > 1 else "private"
        page = int(kv.get("kernelpagesize_kB", "4"))
        for k, v in kv.items():
            if re.fullmatch(r"N\d+", k) and int(k[1:]) < nr_nodes:
                kb[c][int(k[1:])] += int(v) * page
    return kb


def anon_mb(kb):
    """Anonymous memory (private + shared) per node, MB."""
    return [(p + s) / 1024 for p, s in zip(kb["private"], kb["shared"])]


def check_threads(r, tasks, nodes):
    """Threads as /proc lists them, each on its CPU's node, shares that add up."""
    assert sorted(t["tid"] for t in r["threads"]) == sorted(int(x) for x in tasks.split()), (r["threads"], tasks)
    assert r["nr_nodes"] == len(set(nodes.values()))
    for t in r["threads"]:
        assert t["on_scx"] and t["policy"] == "SCHED_OTHER", t
        assert t["cpu"] in nodes and t["node"] == nodes[t["cpu"]], (t, nodes)
        assert 0 <= t["llc"] < r["nr_llcs"], t
        if t["run_ms"] > 0:
            assert abs(sum(t["node_share"]) - 1) <= 0.01 and abs(sum(t["llc_share"]) - 1) <= 0.01, t
    p = r["process"]
    assert p["run_ms"] > 0 and abs(sum(p["node_share"]) - 1) <= 0.01, p
    assert sum(p["threads_per_node"]) == len(r["threads"]), p


def check_decisions(r, tasks, nodes, counters):
    """Each decision: a thread of the process, a known rule, nodes as the guest's topology gives them."""
    d = r["decisions"]
    assert d["rate_per_cpu"] > 0, d
    tids = {int(x) for x in tasks.split()} | {r["pid"]}
    for i in d["items"]:
        assert i["tid"] in tids, (i, tids)
        assert i["rule"] in counters or i["rule"] == "idle_search", i
        assert i["kind"] in ("move_llc", "move_node", "refused"), i
        assert nodes[i["from_cpu"]] == i["from_node"], (i, nodes)
        if i["to_cpu"] >= 0:
            assert nodes[i["to_cpu"]] == i["to_node"], (i, nodes)
        if i["kind"] == "move_node":
            assert i["from_node"] != i["to_node"], i
        if i["kind"] == "move_llc":
            assert i["from_node"] == i["to_node"], i
    return d["items"]


def test_explain_numaq4():
    m = machines.load("numaq4")
    steps = [run.Step(run.parse_sched("eevdf"), EEVDF_STEP, timeout_s=30),
             run.Step(run.parse_sched("scx_locality"), SCX_STEP, timeout_s=90)]
    buf = io.StringIO()
    res = run.run_job(m, steps, timeout_s=300, stream=buf, build_scheduler=False)
    assert res.exit_code() == run.EXIT_OK, (res, buf.getvalue()[-3000:])
    out = run.marked_sections(buf.getvalue(), "explaintest")
    assert "end" in out, buf.getvalue()[-3000:]
    stats = final_stats(res.steps[1].sched_log)
    nodes = cpu_nodes(out["topo"])
    assert len(set(nodes.values())) == 4, out["topo"]

    # under EEVDF: not running
    assert value(out["eevdf"], "explain_rc") == "12", out["eevdf"]
    assert "scx_locality: error: scx_locality is not running" in out["eevdf"]

    # the communicating pair: its threads, not tracked (small), no LLC preference (one LLC per node)
    pair = out["pair"]
    assert value(pair, "explain_rc") == "0", pair
    r = report(pair)
    check_threads(r, value(pair, "tasks"), nodes)
    assert r["comm"] == "hackbench" and len(r["threads"]) == 3, r["threads"]
    assert (r["home"]["value"], r["home"]["reason"]) == (-1, "not_tracked"), r["home"]
    assert not any(p["comm"] == "hackbench" for p in stats["memory_procs"]), stats["memory_procs"]
    assert r["pref_llc"]["reason"] == "cache_off", r["pref_llc"]
    assert r["plan"]["reason"] == "not_tracked" and not r["plan"]["next"], r["plan"]
    assert value(out["watch"], "lines") == "2", out["watch"]
    counters = {k for k, v in stats.items() if isinstance(v, int)}
    check_decisions(r, value(pair, "tasks"), nodes, counters)
    assert stats["decide_emitted"] > 0 and stats["decide_dropped_full"] == 0, stats

    # the process spanning nodes: thread homes, as the agent's stats show
    span = out["span"]
    assert value(span, "explain_rc") == "0", span
    r = report(span)
    check_threads(r, value(span, "tasks"), nodes)
    assert (r["home"]["value"], r["home"]["reason"]) == (-1, "thread_homes"), r["home"]
    homed = [t for t in r["threads"] if t["thread_home"] >= 0]
    assert len(homed) >= 2 and sum(r["home"]["thread_homes"]) == len(homed), (r["home"], r["threads"])
    # the agent's stats at that time (--monitor's memory_procs line) show thread homes too
    agent = re.search(rf"^\s+mem\s+{r['pid']} memspan .* thread_homes=\[([0-9, ]+)\]", out["span_stats"], re.M)
    assert agent and sum(int(x) for x in agent.group(1).split(",")) >= 2, out["span_stats"]
    assert r["memory_home"]["tracked"] and len(r["memory_home"]["active"]) >= 2, r["memory_home"]
    assert r["plan"]["reason"] == "spanning", r["plan"]
    moves = [i for i in check_decisions(r, value(span, "tasks"), nodes, counters) if i["kind"] == "move_node"]
    assert moves, r["decisions"]
    # its anonymous memory in all, as numa_maps read after shows it: the agent's moves keep the total (a huge page
    # in the middle of a move is in neither reading's count)
    maps = anon_mb(numa_maps_classes(out["span_maps"], r["nr_nodes"]))
    mine = [n["private_mb"] + n["shared_mb"] for n in r["memory"]["nodes"]]
    assert abs(sum(mine) - sum(maps)) <= max(4.0, 0.05 * sum(maps)), (mine, maps)
    assert sum(maps) >= 128, maps

    # memory per node and class of the stopped memspan, as numa_maps read just before and just after explain (the
    # same) shows it; explain rounds each figure to 0.1 MB
    still = out["still"]
    assert value(still, "explain_rc") == "0", still
    before = numa_maps_classes(out["still_before"], r["nr_nodes"])
    after = numa_maps_classes(out["still_after"], r["nr_nodes"])
    assert before == after, (still, before, after)
    assert sum(anon_mb(before)) >= 128, before
    sr = report(out["still_explain"])
    assert sr["pid"] == r["pid"] and sr["nr_nodes"] == r["nr_nodes"], sr
    for c in CLASSES:
        mine = [n[f"{c}_mb"] for n in sr["memory"]["nodes"]]
        assert all(abs(a - b / 1024) <= 0.05 + 1e-9 for a, b in zip(mine, before[c])), (c, mine, before[c])

    # the same in text
    assert "home node: none for the process, too big for one node" in out["span_text"], out["span_text"]
    assert "last decisions (" in out["span_text"], out["span_text"]

    # --top lists it, with the same rule
    top = out["top"]
    assert value(top, "explain_rc") == "0", top
    t = report(top)
    listed = [p for p in t["procs"] if p["pid"] == r["pid"]]
    assert t["tracked"] >= 1 and listed and listed[0]["home_reason"] == "thread_homes", t

    # the errors, one line each
    err = out["errors"]
    assert value(err, "nopid_rc") == "10" and "scx_locality: error: no such process: 999999" in err, err
    assert value(err, "rt_rc") == "11" and "is not under sched_ext: its threads run under SCHED_FIFO" in err, err
    assert value(err, "perm_rc") == "13" and "scx_locality: error: not allowed" in err, err
