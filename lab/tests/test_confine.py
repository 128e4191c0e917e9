# SPDX-License-Identifier: GPL-2.0-only
"""QEMU is confined: no network, the seccomp sandbox, and as root no root."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from lab import machines, run


def test_qemu_command_is_confined(monkeypatch):
    monkeypatch.setattr(run, "qemu_has_seccomp", lambda *a: True)
    cmd = run.qemu_command(machines.load("numa2"), Path("/k/vmlinuz"), Path("/r/initrd.img"), Path("/r/ctl.log"))
    assert cmd[cmd.index("-nic") + 1] == "none"
    sandbox = cmd[cmd.index("-sandbox") + 1].split(",")
    assert sandbox[0] == "on" and {"obsolete=deny", "spawn=deny", "resourcecontrol=deny"} <= set(sandbox)
    if os.geteuid() == 0:
        assert cmd[cmd.index("-run-with") + 1] == "user=nobody" and "elevateprivileges=allow" in sandbox
    else:
        assert "-run-with" not in cmd and "elevateprivileges=deny" in sandbox
    # nothing else of the host is handed to the guest: no disk, share, network backend, monitor or display
    for opt in ("-drive", "-hda", "-virtfs", "-fsdev", "-netdev", "-device", "-chardev", "-qmp", "-vnc", "-spice"):
        assert opt not in cmd
    assert cmd[cmd.index("-monitor") + 1] == "none" and "-nodefaults" in cmd
    serials = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-serial"]
    assert serials == ["stdio", "file:/r/ctl.log"]  # the only file QEMU writes


def test_no_seccomp_is_said_once(monkeypatch, capsys, tmp_path):
    fake = tmp_path / "qemu-no-seccomp"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    run.qemu_has_seccomp.cache_clear()
    try:
        assert not run.qemu_has_seccomp(str(fake)) and not run.qemu_has_seccomp(str(fake))
    finally:
        run.qemu_has_seccomp.cache_clear()
    assert capsys.readouterr().err.count("has no seccomp sandbox") == 1


def _status(pid: int) -> dict:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.split()
    return out


@pytest.mark.skipif(shutil.which(run.QEMU) is None, reason="QEMU is not installed (bin/lab setup)")
def test_real_qemu_runs_sandboxed_without_privileges():
    """The confinement options on the installed QEMU, with no guest (machine none): seccomp is on and, as root,
    QEMU drops to nobody with no capabilities."""
    if not run.qemu_has_seccomp():
        pytest.skip("this QEMU has no seccomp")
    p = subprocess.Popen([run.QEMU, "-machine", "none", "-nodefaults", "-display", "none", "-monitor", "none",
                          "-serial", "none", *run.qemu_confinement()], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        want_uid = "65534" if os.geteuid() == 0 else str(os.geteuid())
        end = time.monotonic() + 30
        st = {}
        while time.monotonic() < end and p.poll() is None:
            st = _status(p.pid)
            if st.get("Seccomp") == ["2"] and st["Uid"][0] == want_uid:
                break
            time.sleep(0.1)
        assert p.poll() is None, p.stdout.read().decode()
        assert st["Seccomp"] == ["2"] and st["NoNewPrivs"] == ["1"]
        assert set(st["Uid"]) == {want_uid} and int(st["CapEff"][0], 16) == 0
        if os.geteuid() == 0:
            assert set(st["Gid"]) == {"65534"}
    finally:
        p.kill()
        p.wait()
