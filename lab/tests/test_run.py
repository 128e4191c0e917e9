# SPDX-License-Identifier: GPL-2.0-only
"""The host side of a run: scheduler specs, job scripts, the guest's records and the kernel's exit lines."""
import base64
from pathlib import Path

import pytest

from lab import machines, run, setup


def test_parse_sched():
    s = run.parse_sched("scx_locality:--no-steal --slice-us 3000")
    assert s.name == "scx_locality" and s.args == ["--no-steal", "--slice-us", "3000"] and s.ops == "locality"
    assert run.parse_sched("eevdf").is_eevdf
    with pytest.raises(run.UsageError, match="known"):
        run.parse_sched("scx_nonesuch")
    with pytest.raises(run.UsageError):
        run.parse_sched("eevdf:--x")


def test_job_script_starts_and_stops_scheduler():
    m = machines.load("numa2")
    steps = [run.Step(run.parse_sched("eevdf"), "hackbench -g 1"),
             run.Step(run.parse_sched("scx_locality:--no-steal"), "echo 'a b'")]
    text = run.job_script(steps, m)
    assert "lab_check_topology" in text
    assert "lab_sched_start locality 60 /usr/local/bin/scx_locality --no-steal; then" in text
    assert text.count("lab_sched_stop") == 1
    assert "'echo '\"'\"'a b'\"'\"''" in text  # the command is shell-quoted once for /bin/sh -c


KLOG = """\
[   10.1] sched_ext: BPF scheduler "locality" enabled
[   20.2] sched_ext: BPF scheduler "locality" disabled (unregistered from user space)
[   30.3] sched_ext: BPF scheduler "locality" disabled (runnable task stall)
[   30.3] sched_ext: locality: kworker/1:1[81] failed to run for 30.4s
[   30.4] other line
"""


def test_sched_exits():
    ex = run.sched_exits(KLOG)
    assert ex == [("locality", "unregistered from user space", None),
                  ("locality", "runnable task stall", "kworker/1:1[81] failed to run for 30.4s")]
    assert run.is_clean_exit(ex[0][1]) and not run.is_clean_exit(ex[1][1])


def ctl_text(records, files=None):
    out = [f"@@{r}\r" for r in records]
    for name, data in (files or {}).items():
        out.append(f"@@file-begin {name}")
        out.append(base64.b64encode(data).decode())
        out.append(f"@@file-end {name}")
    return "\n".join(out) + "\n@@done\n"


def test_parse_ctl_success(tmp_path):
    steps = [run.Step(run.parse_sched("scx_locality"), "true")]
    text = ctl_text(["booted 3.5", "topo node 0 0-3 10", "topology ok", "step-begin 0",
                     "sched-start ok locality 4.0 5.25", "cmd-begin 0 5.3", "cmd-end 0 0 7.3",
                     "sched-stop rc=0 alive_at_stop=1 state=disabled", "step-end 0"],
                    {"kernel.log": KLOG.splitlines()[1].encode() + b"\n", "sched-0.log": b"hello\n"})
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log=str(tmp_path / "kernel.log"))
    run.parse_ctl(text, tmp_path, r, steps)
    assert r.completed and r.topology_ok and r.boot_s == 3.5
    s = r.steps[0]
    assert s.sched_started and s.sched_start_s == 1.25 and s.cmd_exit == 0 and s.cmd_seconds == 2.0
    assert s.sched_exit_kind == "unregistered from user space" and not s.sched_ejected
    assert (tmp_path / "sched-0.log").read_text() == "hello\n"
    assert r.exit_code() == run.EXIT_OK


def test_parse_ctl_ejection(tmp_path):
    steps = [run.Step(run.parse_sched("scx_locality"), "true")]
    text = ctl_text(["booted 3.5", "topology ok", "step-begin 0", "sched-start ok locality 4.0 5.0",
                     "cmd-begin 0 5.0", "cmd-end 0 0 9.0", "sched-stop rc=7 alive_at_stop=0 state=disabled"],
                    {"kernel.log": KLOG.encode()})
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log=str(tmp_path / "kernel.log"))
    run.parse_ctl(text, tmp_path, r, steps)
    assert r.steps[0].sched_ejected
    assert r.exit_code() == run.EXIT_SCHED


def test_parse_ctl_failures(tmp_path):
    steps = [run.Step(run.parse_sched("eevdf"), "false")]
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="")
    run.parse_ctl(ctl_text(["booted 1", "topology mismatch"]), tmp_path, r, steps)
    assert r.exit_code() == run.EXIT_TOPOLOGY
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="")
    run.parse_ctl(ctl_text(["booted 1", "topology ok", "step-begin 0", "cmd-begin 0 1", "cmd-end 0 3 2"]),
                  tmp_path, r, steps)
    assert r.steps[0].cmd_exit == 3 and r.exit_code() == run.EXIT_CMD_FAILED
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="", timed_out=True)
    assert r.exit_code() == run.EXIT_TIMEOUT
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="")
    run.parse_ctl("", tmp_path, r, steps)
    assert r.exit_code() == run.EXIT_INTERNAL


def test_newest_kernel_and_config():
    names = ["linux-binary-7.2.12+deb13-amd64", "linux-binary-7.3.4+deb13-amd64",
             "linux-binary-7.3.4+deb13-rt-amd64", "linux-binary-unsigned-7.3.9+deb13-amd64",
             "linux-binary-7.10.1+deb13-cloud-amd64", "linux-binary-7.3.10+deb13-amd64"]
    assert setup.newest_kernel(names) == "linux-binary-7.3.10+deb13-amd64"
    assert setup.newest_kernel([]) is None
    assert setup.check_config("CONFIG_SCHED_CLASS_EXT=y\nCONFIG_DEBUG_INFO_BTF=y\nCONFIG_NUMA=y\n") == []
    assert setup.check_config("# CONFIG_SCHED_CLASS_EXT is not set\nCONFIG_NUMA=y\n") == [
        "CONFIG_SCHED_CLASS_EXT=y", "CONFIG_DEBUG_INFO_BTF=y"]


def test_crashed_before_job(tmp_path):
    """Only a kernel crash with no step begun counts as a boot crash worth one more boot."""
    d = tmp_path / "r"
    d.mkdir()
    (d / "console.log").write_text("[    3.1] Oops: int3: 0000 [#1] SMP NOPTI\n[    3.2] Kernel panic - not syncing\n")
    (d / "ctl.log").write_text("")
    assert run.crashed_before_job(d)
    # the job had begun: a crash there is the run's result, never hidden by a retry
    (d / "ctl.log").write_text("@@booted 9.7\n@@topology ok\n@@step-begin 0\n")
    assert not run.crashed_before_job(d)
    # no crash, nothing began (e.g. a topology mismatch): not a boot crash
    (d / "console.log").write_text("[    3.1] Run /init as init process\n")
    (d / "ctl.log").write_text("@@booted 9.7\n@@topology mismatch\n")
    assert not run.crashed_before_job(d)


def test_step_timeout_bounds_the_command_in_the_guest():
    m = machines.load("numa2")
    text = run.job_script([run.Step(run.parse_sched("eevdf"), "sleep 9", timeout_s=30),
                           run.Step(run.parse_sched("eevdf"), "true")], m)
    assert "(cd /root && timeout -k 10 30 /bin/sh -c 'sleep 9'); rc=$?" in text
    assert "(cd /root && /bin/sh -c true); rc=$?" in text  # no budget: no timeout(1)


def test_ctl_watcher_reads_records_as_they_arrive(tmp_path):
    """Booted and step ends are seen across partial writes; file payloads are not mistaken for records."""
    ctl = tmp_path / "ctl.log"
    ended = []
    w = run._CtlWatcher(ctl, lambda i, rc: ended.append((i, rc)))
    w.poll()  # the file does not exist yet
    assert not w.booted
    with open(ctl, "ab") as fh:
        fh.write(b"@@boo")
    w.poll()
    assert not w.booted
    with open(ctl, "ab") as fh:
        fh.write(b"ted 9.1\n@@step-begin 0\n@@cmd-begin 0 10.0\n@@cmd-end 0 124 40.0\n@@file-begin x\nQEBjbWQt\n")
    w.poll()
    assert w.booted and ended == [(0, 124)]
    with open(ctl, "ab") as fh:
        fh.write(b"@@file-end x\n@@cmd-end 1 0 41.0\n")
    w.poll()
    assert ended == [(0, 124), (1, 0)]


def test_parse_ctl_stuck_scheduler(tmp_path):
    """A scheduler that outlives SIGKILL at the stop is a scheduler failure, not a silent hang."""
    steps = [run.Step(run.parse_sched("scx_locality"), "true")]
    r = run.RunResult(machine="numa2", run_dir=str(tmp_path), kernel_log="")
    run.parse_ctl(ctl_text(["booted 1", "topology ok", "step-begin 0", "sched-start ok locality 1.0 2.0",
                            "cmd-begin 0 2", "cmd-end 0 0 3", "sched-stop killed",
                            "sched-stop rc=-1 alive_at_stop=1 stuck=1 state=disabling", "step-end 0", "done"]),
                  tmp_path, r, steps)
    assert r.steps[0].sched_stuck and r.steps[0].cmd_exit == 0
    assert r.exit_code() == run.EXIT_SCHED


def test_tcg_text_patch_oops(tmp_path):
    """An int3 Oops in kernel text is the emulator's (one more boot); one in a BPF program is the scheduler's."""
    d = tmp_path / "r"
    d.mkdir()
    head = "[   35.08] Oops: int3: 0000 [#1] SMP NOPTI\n[   35.08] CPU: 0 UID: 0 PID: 0 Comm: swapper/0\n" \
           "[   35.08] Hardware name: QEMU Standard PC\n"
    (d / "console.log").write_text(head + "[   35.08] RIP: 0010:sched_balance_update_blocked_averages+0x45/0x90\n")
    assert run.tcg_text_patch_oops(d)
    (d / "console.log").write_text(head + "[   35.08] RIP: 0010:bpf_prog_3f2a_locality_enqueue+0x1c/0x80\n")
    assert not run.tcg_text_patch_oops(d)
    (d / "console.log").write_text("[   35.08] Oops: general protection fault [#1]\n"
                                   "[   35.08] RIP: 0010:sched_tick+0x10/0x90\n")
    assert not run.tcg_text_patch_oops(d)
    (d / "console.log").write_text("[   35.08] Run /init as init process\n")
    assert not run.tcg_text_patch_oops(d)
    # seen on numa2 as scx_locality was enabled: another CPU's message and the sched_ext state line between
    (d / "console.log").write_text(
        "[   29.73] Oops: int3: 0000 [#1] SMP NOPTI\n"
        "[   29.73] sched_ext: BPF scheduler \"locality_0.1.0_x86_64_unknown_linux_gnu\" enabled\n"
        "[   29.74] CPU: 3 UID: 0 PID: 169 Comm: sh Not tainted 7.3.4+deb13-amd64 #1 PREEMPT(lazy)\n"
        "[   29.74] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996)\n"
        "[   29.74] Sched_ext: locality_0.1.0_x86_64_unknown_linux_gnu (enabled+all), task: runnable_at=-20ms\n"
        "[   29.74] RIP: 0010:sched_tick+0xd6/0x250\n")
    assert run.tcg_text_patch_oops(d)


def test_host_cpu_given_to_other_work():
    hz = __import__("os").sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal: idle and iowait are not busy
    busy = run.host_cpu_seconds(f"cpu  {3 * hz} {hz} {hz} 9999 500 0 {hz} 0 0 0\ncpu0 1 2 3\n")
    assert busy == pytest.approx(6.0)
    assert run.host_cpu_seconds("garbage") is None and run.host_cpu_seconds("") is None
    # 2 host CPUs for 10 s: 20 CPU-seconds; 14 busy, 9 of them ours: 5 to others, 25%
    assert run.host_other_pct(14.0, 9.0, 10.0, 2) == 25.0
    # our own time counted beyond the host's (clock granularity) is no negative share
    assert run.host_other_pct(8.0, 9.0, 10.0, 2) == 0.0
    assert run.host_other_pct(8.0, 1.0, 0.0, 2) is None
    assert run.own_cpu_seconds() > 0



def test_emulator_faults_get_at_most_two_new_boots(tmp_path, monkeypatch):
    """The text-patching oops twice in a row (seen in CI) gets a third boot, whose result counts; a third oops in a
    row is the run's result; a step that fails without the emulator's fault is never booted again."""
    oops = "[ 48.6] Oops: int3: 0000 [#1] SMP NOPTI\n[ 48.7] CPU: 5 UID: 0\n[ 48.7] RIP: 0010:sched_tick+0xd6/0x250\n"
    boots = []

    def boot_each(consoles):
        """_run_job_once stand-in: boot k writes consoles[k]; its step fails unless the console is "ok"."""
        boots.clear()

        def once(m, steps, timeout_s, run_dir, *rest):
            d = Path(run_dir)
            d.mkdir(parents=True, exist_ok=True)
            console = consoles[len(boots)]
            (d / "console.log").write_text(console)
            boots.append(d.name)
            r = run.RunResult(machine="numa2", run_dir=str(d), kernel_log="", completed=True)
            r.steps = [run.StepResult(sched="eevdf", cmd_exit=0 if console == "ok\n" else 1)]
            return r
        monkeypatch.setattr(run, "_run_job_once", once)

    m = machines.load("numa2")
    quiet = {"stream": None, "log": lambda msg: None}
    boot_each([oops, oops, "ok\n"])
    r = run.run_job(m, [], 60, run_dir=tmp_path / "a", **quiet)
    assert boots == ["a", "a-retry", "a-retry2"] and r.exit_code() == run.EXIT_OK
    boot_each([oops, oops, oops, "ok\n"])
    r = run.run_job(m, [], 60, run_dir=tmp_path / "b", **quiet)
    assert boots == ["b", "b-retry", "b-retry2"] and r.exit_code() == run.EXIT_CMD_FAILED
    boot_each(["a step failed\n", "ok\n"])
    r = run.run_job(m, [], 60, run_dir=tmp_path / "c", **quiet)
    assert boots == ["c"] and r.exit_code() == run.EXIT_CMD_FAILED
