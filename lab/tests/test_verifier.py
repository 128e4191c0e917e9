# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab verifier without a guest: reading the shim's lines, naming programs, the comparison against the
baseline and its margin, the baseline file's round trip, the checked-in baseline against the sources, the
guest's shell command, and the shim itself on the host's kernel (a one-instruction socket filter)."""
import os
import subprocess
from pathlib import Path

import pytest

from lab import image, verifier
from lab.verifier import Measured, Stats

STATS = ("verification time {t} usec | stack depth 48 | processed {i} insns (limit 1000000) "
         "max_states_per_insn 4 total_states {ts} peak_states {ps} mark_read 12")
NAMES = {"locality_select_cpu", "locality_init", "locality_init_task", "memory_fault"}


def line(kname, rc=5, i=100, ts=10, ps=8, t=250):
    return f"verifstats: {kname}\trc={rc}\t" + STATS.format(i=i, ts=ts, ps=ps, t=t)


def test_parse_names_programs_and_sets_aside_probes_and_refusals():
    text = "\n".join([
        line("locality_select", i=5000, ts=300, ps=120, t=41000),  # cut to 15 characters by the kernel
        line("locality_init"), line("locality_init_t", i=7),
        line("memory_fault", i=42),
        line("-", i=2), line("libbpf_nametest", i=2),  # libbpf's feature probes
        "verifstats: locality_init\trc=-22\tprocessed 0 insns",  # a second load, refused: noted, not stats
        "some other line",
    ])
    m = verifier.parse_verifstats(text, NAMES)
    assert m.programs["locality_select_cpu"] == Stats(5000, 300, 120)
    assert m.time_us["locality_select_cpu"] == 41000
    assert m.programs["locality_init_task"].insns == 7 and m.programs["memory_fault"].insns == 42
    assert m.refused == {"locality_init": 22}
    assert sorted(m.other) == ["-", "libbpf_nametest"]


def test_functions_come_from_the_subprog_lines_and_the_largest_are_shown():
    log = ("verification time 11089931 usec | stack depth max 304 | "
           "subprog 0 (locality_init) main insns_self 434 insns_total 364895 stack 32 | "
           "subprog 3 (iwq_timerfn) static insns_self 6727 insns_total 364176 stack 96 | "
           "subprog 5 (numa_load_cpu) static insns_self 350970 insns_total 350970 stack 16 | "
           "subprog 9 (decide_record) global insns_self 217 insns_total 217 stack 24 | "
           "processed 364895 insns (limit 1000000) max_states_per_insn 15 total_states 12706 peak_states 26467 "
           "mark_read 0")
    m = verifier.parse_verifstats(f"verifstats: locality_init\trc=5\t{log}\n" + line("memory_fault", i=42), NAMES)
    assert m.functions["locality_init"][1] == verifier.Function("iwq_timerfn", "static", 6727, 364176)
    assert "memory_fault" not in m.functions  # an older kernel's summary: no per-function lines
    text = verifier.format_functions(m, top=2).splitlines()
    assert text == ["locality_init (364,895 insns): numa_load_cpu 350,970, iwq_timerfn 6,727"]
    assert "decide_record 217 (global)" in verifier.format_functions(m, top=4)
    assert verifier.format_functions(m, min_insns=400000) == ""


def test_a_load_without_a_stats_line_is_an_error():
    with pytest.raises(verifier.VerifierError, match="locality_init.*no stats line"):
        verifier.parse_verifstats("verifstats: locality_init\trc=4\tstack depth 8", NAMES)


def test_full_name_needs_one_program_with_that_prefix():
    assert verifier.full_name("locality_init", NAMES) == "locality_init"
    assert verifier.full_name("locality_init_t", NAMES) == "locality_init_task"
    assert verifier.full_name("locality_dump_x", NAMES | {"locality_dump_x_a", "locality_dump_x_b"}) is None
    assert verifier.full_name("nothing", NAMES) is None


def test_program_names_come_from_the_sources():
    names = verifier.program_names()
    assert {"locality_enqueue", "locality_select_cpu", "locality_init", "memory_fault", "scx_lib_init_probe"} <= names
    # no two programs share the 15 characters the kernel keeps, or the shim's lines could not be told apart
    assert len({n[:verifier.KNAME_LEN] for n in names}) == len(names)


def measured(**progs):
    return Measured(dict(progs), {}, {}, [])


def verdicts(rows):
    return {(r.config, r.program): r.verdict for r in rows}


def test_compare_margin_and_slack():
    base = {"default": {"a": Stats(10000, 500, 200), "b": Stats(10000, 500, 200), "c": Stats(40, 3, 2),
                        "d": Stats(10000, 500, 200), "e": Stats(10000, 500, 200)}}
    now = {"default": measured(a=Stats(10900, 540, 215),       # +9%: within the margin
                               b=Stats(11200, 500, 200),       # +12% insns: over it
                               c=Stats(120, 9, 6),             # 3x, but under the slack (80 insns, 6 states)
                               d=Stats(10000, 500, 260),       # +30% peak states alone: over it
                               e=Stats(5000, 200, 100))}       # halved: fine, flagged as smaller
    v = verdicts(verifier.compare(base, now))
    assert v == {("default", "a"): "ok", ("default", "b"): "grew", ("default", "c"): "ok",
                 ("default", "d"): "grew", ("default", "e"): "smaller"}
    assert [r.program for r in verifier.failures(verifier.compare(base, now))] == ["b", "d"]
    # a wider margin lets b through, not d
    assert [r.program for r in verifier.failures(verifier.compare(base, now, margin_pct=20))] == ["d"]


def test_compare_new_gone_refused_and_configs():
    base = {"default": {"a": Stats(100, 5, 5), "gone": Stats(100, 5, 5)},
            "sparse-idle": {"a": Stats(100, 5, 5)}}
    now = {"default": Measured({"a": Stats(100, 5, 5), "new": Stats(1, 1, 1)}, {}, {"bad": 13}, []),
           "extra": measured(a=Stats(100, 5, 5))}
    v = verdicts(verifier.compare(base, now))
    assert v == {("default", "a"): "ok", ("default", "gone"): "gone", ("default", "new"): "new",
                 ("default", "bad"): "refused", ("extra", "a"): "new", ("sparse-idle", "a"): "gone"}


def test_failure_message_names_the_program_and_the_update_command():
    base = {"default": {"locality_enqueue": Stats(20000, 900, 300)}}
    now = {"default": measured(locality_enqueue=Stats(90000, 4000, 300))}
    msg = verifier.failure_message(verifier.compare(base, now), "numa2")
    assert "locality_enqueue (default): grew: insns 20,000 -> 90,000 (+350%)" in msg
    assert "total_states 900 -> 4,000" in msg
    assert "bin/lab verifier --machine numa2 --update" in msg and "verifier-baseline.toml" in msg
    assert "margin 10%" in msg


def test_table_has_a_row_per_program():
    base = {"default": {"a": Stats(1000, 50, 20)}}
    now = {"default": Measured({"a": Stats(1100, 50, 20)}, {"a": 12500}, {}, [])}
    table = verifier.format_table(verifier.compare(base, now)).splitlines()
    assert table[0].split()[:3] == ["config", "program", "insns"]
    assert table[1].split() == ["default", "a", "1,100", "1,000", "+100", "(+10%)", "50", "50", "20", "20", "12",
                                "ok"]


def test_baseline_round_trip(tmp_path):
    base = {"numa2": {"kernel": "7.3.4+deb13-amd64",
                      "configs": {"default": {"locality_enqueue": Stats(1, 2, 3), "memory_fault": Stats(4, 5, 6)},
                                  "sparse-idle": {"locality_update_idle": Stats(7, 8, 9)}}}}
    f = tmp_path / "b.toml"
    f.write_text(verifier.format_baseline(base))
    assert verifier.load_baseline(f) == base
    assert verifier.load_baseline(tmp_path / "none.toml") == {}


def test_checked_in_baseline_matches_the_sources():
    """Every program the baseline names is one of the sources', and numa2's configurations together name every
    program of the sources: a program added, removed or renamed needs the baseline rewritten (without a boot,
    this test says so before the lab test does)."""
    base = verifier.load_baseline()
    assert "numa2" in base, f"{verifier.BASELINE} has no numa2 section; run: bin/lab verifier --update"
    names = verifier.program_names()
    seen = set()
    for config, progs in base["numa2"]["configs"].items():
        assert config in verifier.CONFIGS, config
        assert set(progs) <= names, (config, set(progs) - names)
        seen |= set(progs)
    assert seen == names, f"not in the baseline: {sorted(names - seen)}; run: bin/lab verifier --update"


def test_guest_command_is_valid_busybox_sh():
    cmd = verifier.guest_command(verifier.CONFIGS, "/lab/llc-override.json")
    assert "--topology-override /lab/llc-override.json" in cmd
    assert "vs_load sparse-idle /usr/local/bin/scx_locality --sparse-idle" in cmd
    if os.path.exists(image.BUSYBOX):
        r = subprocess.run([image.BUSYBOX, "sh", "-n", "-c", cmd], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


LOADER = r"""
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void)
{
	struct bpf_insn insns[] = { { .code = 0xb7 }, { .code = 0x95 } };  /* r0 = 0; exit */
	union bpf_attr a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	a.insns = (unsigned long)insns;
	a.insn_cnt = 2;
	a.license = (unsigned long)"GPL";
	strcpy(a.prog_name, "lab_vs_test");
	fd = syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	printf("fd=%ld errno=%d log_level=%u pid=%d/%ld\n", fd, fd < 0 ? errno : 0, a.log_level, getpid(),
	       syscall(__NR_getpid));
	return fd < 0;
}
"""


def test_shim_adds_the_stats_to_a_load(tmp_path, monkeypatch):
    """verifstats.so on the host's own kernel: a program loaded without a log comes back with its stats line
    written out, the caller's attributes untouched, and other system calls pass through."""
    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path / "cache"))
    so = image.build_verifstats(log=lambda s: None)
    assert so.exists() and image.build_verifstats(log=lambda s: pytest.fail(s)) == so  # built once per source
    src = tmp_path / "load.c"
    src.write_text(LOADER)
    exe = tmp_path / "load"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    out = tmp_path / "stats.txt"
    r = subprocess.run([str(exe)], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=str(so), VERIFSTATS_OUT=str(out)))
    if r.returncode != 0:
        pytest.skip(f"this host may not load a BPF program: {r.stdout.strip()}")
    fields = r.stdout.split()
    assert fields[2] == "log_level=0"  # the caller's attributes are its own
    pid = fields[3].split("=")[1].split("/")
    assert pid[0] == pid[1]
    m = verifier.parse_verifstats(Path(out).read_text(), {"lab_vs_test"})
    assert m.programs == {"lab_vs_test": Stats(2, 0, 0)}
    assert "lab_vs_test" in m.time_us
