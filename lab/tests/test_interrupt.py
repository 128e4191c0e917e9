# SPDX-License-Identifier: GPL-2.0-only
"""No QEMU outlives bin/lab: Ctrl-C, SIGTERM (timeout(1), CI), SIGHUP and exceptions kill it, remove the run's
temporary files and say so; bin/lab run bounds its command in the guest."""
import signal

import fakelab
import pytest

from lab import __main__ as cli
from lab import run

RUN = ["run", "--no-build", "--machine", "numa2", "--timeout", "60", "--", "true"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_leaves_no_qemu(tmp_path, sig):
    p = fakelab.start(tmp_path, "hang", RUN)
    pids = []
    try:
        pids = fakelab.wait_pids(tmp_path)
        assert all(fakelab.alive(pid) for pid in pids)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        assert p.returncode == run.EXIT_INTERRUPTED == 130, err
        assert err.strip().splitlines()[-1].startswith(f"lab: interrupted ({sig.name}); no QEMU of this run is left")
        assert "stopped the guest (QEMU pid" in err
        assert not any(fakelab.alive(pid) for pid in pids)  # QEMU and its whole process group
        (run_dir,) = fakelab.run_dirs(tmp_path)
        assert not (run_dir / "initrd.img").exists()  # the run's copy of the image
        assert (run_dir / "console.log").exists()  # what there was to see is kept
    finally:
        p.kill()
        fakelab.kill(pids)


def test_an_exception_leaves_no_qemu(tmp_path):
    p = fakelab.start(tmp_path, "hang", RUN, env={"FAKE_FAIL": "1"})
    pids = []
    try:
        pids = fakelab.wait_pids(tmp_path)
        out, err = p.communicate(timeout=60)
        assert p.returncode == run.EXIT_INTERNAL, err
        assert err.strip().splitlines()[-1].startswith("lab: internal error: RuntimeError: injected failure")
        assert not any(fakelab.alive(pid) for pid in pids)
        (run_dir,) = fakelab.run_dirs(tmp_path)
        assert not (run_dir / "initrd.img").exists()
    finally:
        p.kill()
        fakelab.kill(pids)


def test_run_bounds_its_command_in_the_guest(monkeypatch, capsys):
    """bin/lab run --timeout S gives its step S seconds in the guest (timeout(1)), not only a host limit."""
    seen = {}

    def fake_run_job(m, steps, timeout_s, **kw):
        seen["steps"], seen["timeout_s"] = steps, timeout_s
        r = run.RunResult(machine=m.name, run_dir="/nonexistent", kernel_log="/nonexistent/kernel.log",
                          topology_ok=True, completed=True)
        r.steps = [run.StepResult(sched="eevdf", cmd_exit=143, cmd_seconds=42.0, cmd_timed_out=True)]
        return r

    monkeypatch.setattr(run, "run_job", fake_run_job)
    monkeypatch.setattr(run, "install_signal_handlers", lambda: None)  # leave pytest's own alone
    rc = cli.main(["run", "--no-build", "--timeout", "42", "--", "sleep", "600"])
    assert seen["steps"][0].timeout_s == 42 and seen["timeout_s"] == 42
    assert "timeout -k 10 42 /bin/sh -c 'sleep 600'" in run.job_script(seen["steps"], run.machines.load("numa2"))
    err = capsys.readouterr().err
    assert rc == run.EXIT_TIMEOUT and "ran past --timeout 42 s and was killed in the guest" in err


def test_a_command_killed_by_its_budget_is_a_timeout(tmp_path):
    steps = [run.Step(run.parse_sched("eevdf"), "sleep 600", timeout_s=42)]

    def result(rc, seconds):
        r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="")
        run.parse_ctl(f"@@booted 1\n@@topology ok\n@@step-begin 0\n@@cmd-begin 0 10\n@@cmd-end 0 {rc} "
                      f"{10 + seconds}\n@@done\n", tmp_path, r, steps)
        return r

    assert result(143, 42.05).steps[0].cmd_timed_out and result(143, 42.05).exit_code() == run.EXIT_TIMEOUT
    assert result(137, 52.0).exit_code() == run.EXIT_TIMEOUT  # SIGKILL after the grace
    # the command's own status 143, long before its budget: a failure, not a timeout
    assert not result(143, 1.0).steps[0].cmd_timed_out and result(143, 1.0).exit_code() == run.EXIT_CMD_FAILED
