# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab bench --host (lab/host.py) without running a bench: the topology read from a fake sysfs, the
refusals (one line, documented exit code, nothing created), the job script on the host, the kernel log, the
settings put back."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from lab import __main__ as cli
from lab import bench, benchfile, host, image, machines, run, setup


def fake_sysfs(root: Path, nodes: dict[int, str] | None, llcs: list[str], smt: list[str], cpus: str,
               distances: dict[int, str] | None = None, node_online: str | None = None,
               no_cache: tuple[int, ...] = (), sched_ext: tuple[str, str] | None = None) -> Path:
    """A sysfs tree with what read_machine and check_environment read: CPUs online, per-CPU caches (L1d, L1i,
    L2 private, the LLC shared by each group of llcs) and SMT siblings, nodes with cpulists and distances, and
    sched_ext's state and ops if given."""
    cpu_dir = root / "devices/system/cpu"
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text(cpus + "\n")
    every = sorted({c for g in llcs for c in machines.parse_cpulist(g)})
    for c in every:
        d = cpu_dir / f"cpu{c}"
        (d / "topology").mkdir(parents=True)
        sib = next(g for g in smt if c in machines.parse_cpulist(g))
        (d / "topology/thread_siblings_list").write_text(sib + "\n")
        if c in no_cache:
            continue
        llc = next(g for g in llcs if c in machines.parse_cpulist(g))
        for i, (level, kind, shared) in enumerate([(1, "Data", sib), (1, "Instruction", sib), (2, "Unified", sib),
                                                   (3, "Unified", llc)]):
            idx = d / f"cache/index{i}"
            idx.mkdir(parents=True)
            (idx / "level").write_text(f"{level}\n")
            (idx / "type").write_text(kind + "\n")
            (idx / "shared_cpu_list").write_text(shared + "\n")
    if nodes is not None:
        nd = root / "devices/system/node"
        nd.mkdir(parents=True)
        (nd / "online").write_text((node_online or machines.format_cpulist(sorted(nodes))) + "\n")
        for n, cl in nodes.items():
            (nd / f"node{n}").mkdir()
            (nd / f"node{n}/cpulist").write_text(cl + "\n")
            (nd / f"node{n}/distance").write_text((distances or {}).get(n, "10") + "\n")
    if sched_ext is not None:
        (root / "kernel/sched_ext/root").mkdir(parents=True)
        (root / "kernel/sched_ext/state").write_text(sched_ext[0] + "\n")
        (root / "kernel/sched_ext/root/ops").write_text(sched_ext[1] + ("\n" if sched_ext[1] else ""))
    return root


def test_topology_of_a_two_node_smt_machine(tmp_path):
    """2 nodes x 2 cores x 2 SMT, one L3 per node; a memory-only node 2 (no CPUs) is left out of nodes and of
    the distance rows; CPU 7 is offline."""
    sys_root = fake_sysfs(tmp_path, nodes={0: "0-3", 1: "4-7", 2: ""}, llcs=["0-3", "4-7"],
                          smt=["0,2", "1,3", "4,6", "5,7"], cpus="0-6",
                          distances={0: "10 21 17", 1: "21 10 28", 2: "17 28 10"})
    m = host.read_machine(sys_root, name="host-test")
    assert m.nodes == ((0, 1, 2, 3), (4, 5, 6)) and m.node_ids == (0, 1)
    assert m.llcs == ((0, 1, 2, 3), (4, 5, 6)) and m.llc_level == 3
    assert m.smt == ((0, 2), (1, 3), (4, 6), (5,))
    assert m.distances == ((10, 21), (21, 10))
    assert m.nr_cpus == 7 and m.cpus_present == 8
    t = m.topology()
    assert t.node_of()[5] == 1 and t.llc_of()[3] == 0 and t.to_json()["cores"][3] == [5]
    s = m.summary()
    assert s.startswith("host-test      7 CPUs  2 nodes  2 LLCs of 3/4 CPUs (L3)  1/2 SMT  max distance 21")
    assert "(1 CPUs offline)" in s and "[this host" in s


def test_topology_with_llcs_smaller_than_nodes_and_sparse_node_ids(tmp_path):
    """AMD-like: two L3s in each node; node ids 0 and 2 (the distance columns follow node/online)."""
    sys_root = fake_sysfs(tmp_path, nodes={0: "0-3", 2: "4-7"}, llcs=["0-1", "2-3", "4-5", "6-7"],
                          smt=[str(c) for c in range(8)], cpus="0-7", distances={0: "10 32", 2: "32 10"},
                          node_online="0,2")
    m = host.read_machine(sys_root, name="h")
    assert m.node_ids == (0, 2) and m.distances == ((10, 32), (32, 10))
    assert m.llcs == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert "4 LLCs of 2 CPUs (L3)  no SMT  max distance 32" in m.summary()


def test_topology_without_numa_or_cache_information(tmp_path):
    """No node folder (a kernel without NUMA): one node; a CPU without cache information gets its node as LLC,
    merged with the LLC that overlaps it."""
    sys_root = fake_sysfs(tmp_path, nodes=None, llcs=["0-1", "2-3"], smt=["0", "1", "2", "3"], cpus="0-3",
                          no_cache=(3,))
    m = host.read_machine(sys_root, name="h")
    assert m.nodes == ((0, 1, 2, 3),) and m.distances == ((10,),)
    assert m.llcs == ((0, 1, 2, 3),) and m.llc_level is None
    assert "no cache information" in m.summary()


def test_the_real_host_reads():
    m = host.read_machine()
    online = machines.parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    for groups in (m.nodes, m.llcs, m.smt):  # each level covers every online CPU once
        assert sorted(c for g in groups for c in g) == online
    assert len(m.distances) == len(m.nodes) and all(m.distances[i][i] == 10 for i in range(len(m.nodes)))


# ---------------------------------------------------------------------------------------------------------
# Refusals


def specs(text):
    return bench.parse_sched_list(text, False)


def test_refused_when_not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(host.HostRefused, match="must run as root"):
        host.check_environment(specs("eevdf"))


def test_sched_ext_schedulers_need_sched_ext(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host, "SYS", fake_sysfs(tmp_path, {0: "0-1"}, ["0-1"], ["0", "1"], "0-1"))
    with pytest.raises(host.HostRefused, match=r"has no sched_ext .* so scx_locality:--no-steal cannot run"):
        host.check_environment(specs("eevdf,scx_locality:--no-steal"))
    host.check_environment(specs("eevdf"))  # EEVDF alone needs none


@pytest.mark.parametrize("state,refused", [("disabled", False), ("enabled", True), ("enabling", True)])
def test_refused_while_another_scheduler_is_loaded(monkeypatch, tmp_path, state, refused):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    ops = "" if state == "disabled" else "rusty_1.1.4_x86_64_unknown_linux_gnu"
    monkeypatch.setattr(host, "SYS", fake_sysfs(tmp_path, {0: "0-1"}, ["0-1"], ["0", "1"], "0-1",
                                                sched_ext=(state, ops)))
    for sched in ("eevdf", "eevdf,scx_locality"):  # EEVDF steps would measure the loaded one
        if refused:
            with pytest.raises(host.HostRefused, match=f"another sched_ext scheduler is loaded \\(state {state}, "
                                                       f"ops {ops}\\); stop it first"):
                host.check_environment(specs(sched))
        else:
            host.check_environment(specs(sched))


def test_missing_programs_are_named_with_what_provides_them(monkeypatch, tmp_path):
    wl = tmp_path / "workloads"
    wl.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("locsample", "base64", "stress-ng"):
        (wl if name == "locsample" else bindir).joinpath(name).write_text("#!/bin/sh\n")
        (wl if name == "locsample" else bindir).joinpath(name).chmod(0o755)
    monkeypatch.setattr(image, "workloads_bin_dir", lambda: wl)
    monkeypatch.setattr(setup, "netperf_dir", lambda: tmp_path / "no-netperf")
    monkeypatch.setenv("PATH", str(bindir))
    benches = [benchfile.load_benchmark("numa-pair"), benchfile.load_benchmark("wakelat")]
    assert host.needed_programs(benches, bench.WORKLOAD_PROGRAMS) == [
        "locsample", "bpfcost", "base64", "hackbench", "stress-ng", "netperf", "netserver", "wakelat"]
    with pytest.raises(setup.SetupMissing) as e:
        host.check_programs(benches, bench.WORKLOAD_PROGRAMS)
    assert str(e.value) == ("bench --host: needed programs are missing: bpfcost (make -C workloads), hackbench "
                            "(Debian package rt-tests), netperf (Debian package netperf (non-free; bin/lab setup "
                            "caches one)), netserver (Debian package netperf (non-free; bin/lab setup caches one)), "
                            "wakelat (make -C workloads)")
    # a word inside another word or a path is no call of that program
    b = benchfile.load_benchmark("memory-jbb2")
    assert "numactl" in host.needed_programs([b], []) and "jbb" in host.needed_programs([b], ["jbb"])
    assert "jbb" not in host.needed_programs([benchfile.load_benchmark("hackbench")], ["jbb"])


def test_missing_scheduler_binaries_say_what_builds_them(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALITY_SCHED_BIN", str(tmp_path / "nonesuch"))
    monkeypatch.setattr(image, "peer_bin_dir", lambda: tmp_path / "peers")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(setup.SetupMissing) as e:
        host.sched_binaries(specs("eevdf,scx_locality,scx_rusty"))
    msg = str(e.value)
    assert "scx_locality (" in msg and "cd scheduler && cargo build --release" in msg
    assert "scx_rusty (not built and not on PATH; build it: bin/lab peers scx_rusty)" in msg
    # a scheduler built in this repository (lab/schedulers.toml built_by) is looked for in workloads/build
    monkeypatch.setattr(image, "workloads_bin_dir", lambda: tmp_path / "workloads")
    with pytest.raises(setup.SetupMissing) as e:
        host.sched_binaries(specs("scx_defaults"))
    assert "scx_defaults (not built and not on PATH; build it: make -C workloads)" in str(e.value)
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "scx_defaults").write_text("#!/bin/sh\n")
    assert host.sched_binaries(specs("scx_defaults")) == {"scx_defaults": str(tmp_path / "workloads" / "scx_defaults")}
    # a peer on PATH (not the lab's pinned build) is used, and waited for by its plain ops name
    (tmp_path / "scx_rusty").write_text("#!/bin/sh\n")
    (tmp_path / "scx_rusty").chmod(0o755)
    sp = specs("scx_rusty")
    assert sp[0].ops.startswith("rusty_1.1.4")
    assert host.sched_binaries(sp) == {"scx_rusty": str(tmp_path / "scx_rusty")} and sp[0].ops == "rusty"


def run_cli(argv, capsys):
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture
def no_signal_handlers(monkeypatch):
    monkeypatch.setattr(run, "install_signal_handlers", lambda: None)  # leave pytest's own alone


def test_cli_refusals_are_one_line_and_create_nothing(monkeypatch, tmp_path, capsys, no_signal_handlers):
    out = tmp_path / "out"
    base = ["bench", "--host", "--no-build", "--runs", "1", "--bench", "hackbench", "--out", str(out)]

    rc, _, err = run_cli(base + ["--machine", "numa2"], capsys)
    assert rc == run.EXIT_USAGE == 2
    assert err.splitlines() == ["lab: error: --machine does not go with --host: --host runs on this machine "
                                "and reads its topology from /sys"]

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rc, _, err = run_cli(base + ["--sched", "eevdf"], capsys)
    assert rc == run.EXIT_HOST == 9 and len(err.splitlines()) == 1 and "must run as root" in err

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host, "SYS", fake_sysfs(tmp_path / "sys", {0: "0-1"}, ["0-1"], ["0", "1"], "0-1"))
    rc, _, err = run_cli(base + ["--sched", "eevdf,scx_locality"], capsys)
    assert rc == 9 and len(err.splitlines()) == 1 and "has no sched_ext" in err

    monkeypatch.setattr(host, "SYS", fake_sysfs(tmp_path / "sys2", {0: "0-1"}, ["0-1"], ["0", "1"], "0-1",
                                                sched_ext=("enabled", "lavd")))
    rc, _, err = run_cli(base + ["--sched", "eevdf"], capsys)
    assert rc == 9 and err.splitlines() == [
        "lab: error: another sched_ext scheduler is loaded (state enabled, ops lavd); stop it first (Ctrl-C its "
        "scx_* process, or systemctl stop scx_locality / scx_loader / scx), then run the bench again"]

    monkeypatch.setattr(host, "SYS", fake_sysfs(tmp_path / "sys3", {0: "0-1"}, ["0-1"], ["0", "1"], "0-1"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc, _, err = run_cli(base + ["--sched", "eevdf"], capsys)
    assert rc == run.EXIT_SETUP == 3 and len(err.splitlines()) == 1
    assert "needed programs are missing: " in err and "hackbench (Debian package rt-tests)" in err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------------------
# The job on the host


def test_job_script_on_the_host_has_no_boot_and_ends_with_done(tmp_path):
    place = run.JobPlace(lib="/repo/lab/guest/lib.sh", tmp="/tmp/locality-host-x", workdir="/tmp/locality-host-x/w",
                         sched_bins={"scx_locality": "/opt/scx_locality"}, guest=False)
    steps = [run.Step(run.parse_sched("eevdf"), "hackbench -g 1"),
             run.Step(run.parse_sched("scx_locality:--no-steal"), "true")]
    text = run.job_script(steps, None, place)
    assert ". /repo/lab/guest/lib.sh" in text
    assert "booted" not in text and "lab_check_topology" not in text and "lab_finish" not in text
    assert text.rstrip().endswith('lab_rec "done"')
    assert "lab_sched_start locality 60 /opt/scx_locality --no-steal; then" in text
    assert "(cd /tmp/locality-host-x/w && /bin/sh -c 'hackbench -g 1'); rc=$?" in text
    assert ("[ -f /tmp/locality-host-x/sched.log ] && mv /tmp/locality-host-x/sched.log "
            "/tmp/locality-host-x/sched-1.log && lab_put_file sched-1.log /tmp/locality-host-x/sched-1.log") in text
    assert subprocess.run(["sh", "-n", "-c", text]).returncode == 0
    # the guest's script is what it was
    guest = run.job_script(steps, machines.load("numa2"))
    assert guest.startswith("#!/bin/sh\n# Generated by lab/run.py for one boot.\n. /lab/lib.sh\nlab_rec \"booted")
    assert "[ -f /tmp/sched.log ] && mv /tmp/sched.log /tmp/sched-1.log" in guest
    assert "/usr/local/bin/scx_locality --no-steal" in guest and guest.rstrip().endswith("lab_finish")


def test_records_of_the_real_lib_sh_go_to_a_file(tmp_path):
    """lib.sh on the host: records appended to LAB_CTL (never truncated), files base64 as on the serial port,
    sched_ext read from LAB_SYS; run.parse_ctl reads them back."""
    (tmp_path / "data").write_bytes(b"payload \x00\xff\n")
    ctl = tmp_path / "ctl.log"
    script = (f". {host.LIB}\nlab_rec \"step-begin 0\"\nlab_rec \"cmd-begin 0 1.0\"\n"
              f"lab_put_file s0c0.out {tmp_path / 'data'}\nlab_rec \"cmd-end 0 0 2.5\"\n"
              "lab_rec \"state $(lab_sched_state)\"\nlab_rec done\n")
    env = dict(os.environ, LAB_CTL=str(ctl), LAB_TMP=str(tmp_path), LAB_SYS=str(tmp_path / "nosys"))
    subprocess.run(["/bin/sh", "-c", script], env=env, check=True)
    text = ctl.read_text()
    assert text.startswith("@@step-begin 0\n@@cmd-begin 0 1.0\n@@file-begin s0c0.out\n")
    assert "@@state missing\n" in text
    out = tmp_path / "run"
    out.mkdir()
    r = run.RunResult(machine="h", run_dir=str(out), kernel_log="")
    steps = [run.Step(run.parse_sched("eevdf"), "true")]
    run.parse_ctl(text.replace("@@state missing\n", ""), out, r, steps)
    assert r.completed and not r.guest_errors and r.steps[0].cmd_exit == 0 and r.steps[0].cmd_seconds == 1.5
    assert (out / "s0c0.out").read_bytes() == b"payload \x00\xff\n"


def test_kernel_log_from_kmsg_records(tmp_path):
    recs = [b'6,2001,20200000,-;sched_ext: BPF scheduler "locality" disabled (runnable task stall)\n',
            b"3,2002,20200100,-;sched_ext: locality: kworker/1:1[81] failed to run for 30.4s\n SUBSYSTEM=x\n"]
    lines = [host.format_kmsg(r) for r in recs]
    assert lines[0] == '[   20.200000] sched_ext: BPF scheduler "locality" disabled (runnable task stall)'
    assert run.sched_exits("\n".join(lines)) == [("locality", "runnable task stall",
                                                  "kworker/1:1[81] failed to run for 30.4s")]
    k = host.KernelLog(str(tmp_path / "no-kmsg"))
    assert k.error and k.fd is None
    k.poll()
    assert k.text() == ""


def test_session_puts_settings_back_and_removes_its_folder(monkeypatch, tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/bpf_stats_enabled").write_text("0\n")
    (proc / "sys/kernel/numa_balancing").write_text("0\n")
    monkeypatch.setattr(host, "PROC", proc)
    monkeypatch.setattr(host, "_ip_lo", lambda: None)
    monkeypatch.setattr(host.tempfile, "tempdir", str(tmp_path))
    said = []
    m = host.read_machine()
    with host.Session(m, {}, log=said.append) as s:
        assert Path(s.tmp).is_dir() and s.place.workdir == os.path.join(s.tmp, "work") and not s.place.guest
        (proc / "sys/kernel/bpf_stats_enabled").write_text("1\n")  # as bpfcost -e does
    assert (proc / "sys/kernel/bpf_stats_enabled").read_text() == "0\n"
    assert (proc / "sys/kernel/numa_balancing").read_text() == "0\n"
    assert said == ["bench: restored kernel.bpf_stats_enabled = 0"]
    assert not Path(s.tmp).exists()


def test_stop_goes_on_when_its_messages_cannot_be_written(monkeypatch, tmp_path):
    """A log that raises (stdout a closed pipe: `| tee` killed by the same Ctrl-C) must not cut the clean-up
    short: the job's shell and everything of its session are gone afterwards."""
    monkeypatch.setattr(host, "_ip_lo", lambda: None)

    def broken(msg):
        raise BrokenPipeError(32, "Broken pipe")
    m = host.read_machine()
    with host.Session(m, {}, log=broken) as s:
        job = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
        deadline = time.monotonic() + 5
        while len(run.live_pids(session=job.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(run.live_pids(session=job.pid)) >= 3
        s.stop(job, [])
        assert job.poll() is not None
        assert run.live_pids(session=job.pid) == []


def test_report_says_where_it_ran(tmp_path):
    from lab import report
    results = {"version": 1, "machine": "host-x", "machine_summary": "host-x  2 CPUs", "host": True,
               "topology": {"nodes": [[0, 1]], "llcs": [[0, 1]], "cores": [[0], [1]]}, "runs_requested": 1,
               "scheds": [{"label": "eevdf", "name": "eevdf", "args": [], "prepare_error": None}],
               "benchmarks": {}, "runs": []}
    (tmp_path / "results.json").write_text(__import__("json").dumps(results))
    text = report.write_report(tmp_path).read_text()
    assert "- where: on this machine itself (`bin/lab bench --host`)" in text
