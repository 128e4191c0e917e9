# SPDX-License-Identifier: GPL-2.0-only
"""The guest's clocksource is chosen by the lab, not left to the kernel's fallback under TCG."""
from pathlib import Path

import pytest

from lab import machines, run


def _append(monkeypatch, clock=None):
    if clock is None:
        monkeypatch.delenv("LOCALITY_GUEST_CLOCK", raising=False)
    else:
        monkeypatch.setenv("LOCALITY_GUEST_CLOCK", clock)
    monkeypatch.setattr(run, "qemu_has_seccomp", lambda *a: True)
    cmd = run.qemu_command(machines.load("numa2"), Path("/k/vmlinuz"), Path("/r/initrd.img"), Path("/r/ctl.log"))
    return cmd[cmd.index("-append") + 1].split()


def test_every_machine_boots_with_the_tsc_by_default(monkeypatch):
    for name in machines.known():
        monkeypatch.delenv("LOCALITY_GUEST_CLOCK", raising=False)
        monkeypatch.setattr(run, "qemu_has_seccomp", lambda *a: True)
        cmd = run.qemu_command(machines.load(name), Path("/k/vmlinuz"), Path("/r/i"), Path("/r/c"))
        assert "tsc=reliable" in cmd[cmd.index("-append") + 1].split(), name


def test_hpet_keeps_the_kernels_own_choice(monkeypatch):
    args = _append(monkeypatch, "hpet")
    assert not any(a.startswith(("tsc=", "clocksource=")) for a in args)
    assert "console=ttyS0" in args


def test_unknown_clock_is_a_usage_error(monkeypatch):
    with pytest.raises(run.UsageError, match="LOCALITY_GUEST_CLOCK"):
        _append(monkeypatch, "kvm-clock")
