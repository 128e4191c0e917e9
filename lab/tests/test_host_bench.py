# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab bench --host for real on this machine (as root, like the host-only tests of test_scheduler_host.py):
an EEVDF bench end to end, and the scheduler path with a stand-in scheduler on a fake sched_ext sysfs (this
host's kernel has none): started and stopped by lib.sh, and stopped by the lab on Ctrl-C, leaving nothing
running, the settings as they were and no temporary folder."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lab import host, image, paths, run

LAB = str(paths.REPO / "bin" / "lab")
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("hackbench") is None
    or not all((image.workloads_bin_dir() / p).exists() for p in ("locsample", "bpfcost")),
    reason="needs root, hackbench (rt-tests) and the workloads built (make -C workloads)")

# long enough (about 1-2 s here) for the sampler, which looks every 100 ms, to see its tasks: 200 loops took
# 0.08 s once and the sampler saw nothing
CASE = "hackbench:mode=process:ipc=pipe:groups=1:loops=3000"


def lab_env(tmp_path: Path, **extra) -> dict:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    # TMPDIR: where the bench's temporary folder goes, so that the test sees it removed
    return dict(os.environ, TMPDIR=str(tmp_path / "tmp"), LOCALITY_RUNS=str(tmp_path / "runs"),
                PYTHONPATH=str(paths.REPO), **extra)


def test_host_bench_eevdf_end_to_end(tmp_path):
    before = BPF_STATS.read_text() if BPF_STATS.exists() else None
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = subprocess.run([LAB, "bench", "--host", "--no-build", "--sched", "eevdf", "--runs", "1", "--bench", CASE,
                        "--out", str(out)], env=lab_env(tmp_path), capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    assert took < 60, f"the host bench took {took:.0f} s"
    assert "run 1/1: on this host (" in r.stdout
    assert "run 1/1, step 1/1 [eevdf] hackbench case 1/1: process-pipe-1" in r.stdout

    results = json.loads((out / "results.json").read_text())
    m = host.read_machine()
    assert results["host"] is True and results["machine"] == m.name and results["nr_cpus"] == m.nr_cpus
    assert results["topology"] == m.topology().to_json()
    (rec,) = results["runs"]
    assert rec["completed"] and rec["exit"] == 0 and rec["boot_s"] is None and rec["topology_ok"] is None
    assert not rec["guest_errors"]
    (step,) = rec["steps"]
    (case,) = step["cases"]
    assert step["started"] and case["status"] == "ok" and case["rc"] == 0, case
    assert case["figures"]["time"] > 0 and case["locality"]["tasks"] > 0 and case["locality"]["samples"] > 0
    for kind in ("out", "tasks", "cpu", "bpf"):
        assert (out / case["files"][kind]).is_file()
    run_dir = Path(rec["run_dir"])
    for name in ("job.sh", "ctl.log", "console.log", "kernel.log", "result.json"):
        assert (run_dir / name).exists(), name

    report = (out / "report.md").read_text()
    assert report.startswith(f"# Bench report: {m.name}")
    assert "- where: on this machine itself (`bin/lab bench --host`)" in report
    assert "### hackbench time (s; lower is better; Amean)" in report and "process-pipe-1" in report

    if before is not None:
        assert BPF_STATS.read_text() == before  # bpfcost -e switched it on; the bench put it back
    assert list((tmp_path / "tmp").iterdir()) == []  # the temporary folder is gone


# A stand-in scx_locality for a fake sched_ext sysfs (the real kernel here has none): "enables" sched_ext with
# its ops name and, on SIGINT, "disables" it and exits, as a real scheduler does. Python, because a shell script
# started in the background by a non-interactive shell cannot trap SIGINT (it is ignored there).
FAKE_SCHED = """#!{python}
import os, signal, sys, time
d = os.path.join(os.environ["FAKE_SYS"], "kernel", "sched_ext")
log = open(os.environ["FAKE_LOG"], "a", buffering=1)

def stop(*_):
    open(os.path.join(d, "state"), "w").write("disabled\\n")
    log.write("got-sigint\\n")
    sys.exit(0)

signal.signal(signal.SIGINT, stop)
open(os.path.join(d, "root", "ops"), "w").write("locality\\n")
open(os.path.join(d, "state"), "w").write("enabled\\n")
log.write("started " + " ".join(sys.argv[1:]) + "\\n")
while True:
    time.sleep(0.1)
"""

RUNNER = """
import sys
from pathlib import Path
from lab import host, __main__ as cli
host.SYS = Path(sys.argv[1])
sys.exit(cli.main(sys.argv[2:]))
"""


def stand_in(tmp_path: Path) -> tuple[Path, dict]:
    sys_root = tmp_path / "sys"
    (sys_root / "kernel/sched_ext/root").mkdir(parents=True)
    (sys_root / "devices").symlink_to("/sys/devices")  # the real topology
    (sys_root / "kernel/sched_ext/state").write_text("disabled\n")
    (sys_root / "kernel/sched_ext/root/ops").write_text("")
    fake = tmp_path / "scx_locality"
    fake.write_text(FAKE_SCHED.format(python=sys.executable))
    fake.chmod(0o755)
    tag = uuid.uuid4().hex
    env = lab_env(tmp_path, FAKE_SYS=str(sys_root), FAKE_LOG=str(tmp_path / "fake.log"),
                  LOCALITY_SCHED_BIN=str(fake), LOCALITY_TEST_TAG=tag)
    return sys_root, env


def start(tmp_path: Path, env: dict, bench_spec: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "sys"), "bench", "--host", "--no-build",
                             "--sched", "scx_locality:--no-steal", "--runs", "1", "--bench", bench_spec,
                             "--out", str(tmp_path / "out")],
                            cwd=paths.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def tagged(tag: str) -> list[int]:
    """Processes that carry the test's tag in their environment (the lab's descendants, wherever they went)."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if f"LOCALITY_TEST_TAG={tag}".encode() in (d / "environ").read_bytes().split(b"\0"):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def test_host_bench_starts_and_stops_a_scheduler(tmp_path):
    sys_root, env = stand_in(tmp_path)
    p = start(tmp_path, env, CASE)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert (tmp_path / "fake.log").read_text().splitlines() == ["started --no-steal", "got-sigint"]
    assert (sys_root / "kernel/sched_ext/state").read_text() == "disabled\n"
    results = json.loads((tmp_path / "out/results.json").read_text())
    (step,) = results["runs"][0]["steps"]
    assert step["started"] and not step["start_error"] and not step["ejected"] and step["start_s"] is not None
    assert step["cases"][0]["status"] == "ok" and step["sched_log"]
    assert not tagged(env["LOCALITY_TEST_TAG"]) and list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_scheduler_and_leaves_nothing(tmp_path, sig):
    before = BPF_STATS.read_text() if BPF_STATS.exists() else None
    sys_root, env = stand_in(tmp_path)
    p = start(tmp_path, env, "hackbench:mode=process:ipc=pipe:groups=1:loops=100000000")
    try:
        end = time.monotonic() + 60
        ctl = None
        while time.monotonic() < end:  # wait until the case runs under the started scheduler
            ctls = list((tmp_path / "runs").glob("*/ctl.log"))
            if ctls and "@@cmd-begin 0" in ctls[0].read_text():
                ctl = ctls[0]
                break
            time.sleep(0.2)
        assert ctl is not None, "the step did not begin"
        time.sleep(1.5)
        assert (sys_root / "kernel/sched_ext/state").read_text() == "enabled\n"
        p.send_signal(sig)
        out, err = p.communicate(timeout=90)
    finally:
        p.kill()
    assert p.returncode == run.EXIT_INTERRUPTED, out + err
    assert f"lab: interrupted ({sig.name})" in err
    assert "bench: stopped the job on this host" in out and "bench: stopping the scheduler (SIGINT to pid" in out
    assert (tmp_path / "fake.log").read_text().splitlines()[-1] == "got-sigint"
    assert (sys_root / "kernel/sched_ext/state").read_text() == "disabled\n"
    assert not tagged(env["LOCALITY_TEST_TAG"])  # no scheduler, sampler, hackbench or shell of the job is left
    assert list((tmp_path / "tmp").iterdir()) == []
    if before is not None:
        assert BPF_STATS.read_text() == before
    assert (ctl.parent / "console.log").exists() and (ctl.parent / "kernel.log").exists()
