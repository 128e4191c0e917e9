# SPDX-License-Identifier: GPL-2.0-only
"""The systemd unit of services/ and the lab's "systemd" image flavour, without booting a guest.

- The unit promises what the README and its own comments say (paths, restart policy, back-off, start limit,
  hardening that leaves BPF, /proc and move_pages alone), and the host's systemd-analyze finds nothing in it
  but the two keys systemd 252 does not know yet.
- The guest command of the service test is built from the unit's own settings.
- LOCALITY_IMAGE_FLAVOUR selects the flavour; the base image is the same file with or without a flavour.
"""
import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import image, paths, setup, unitfile

UNIT = unitfile.parse(unitfile.UNIT_FILE.read_text())
GUEST_SYSTEMD = paths.REPO / "lab" / "guest" / "systemd"


def v(section, key):
    return unitfile.value(UNIT, section, key)


# --- the unit file parser and time spans

def test_parse_sections_repeats_comments_and_continuations():
    u = unitfile.parse("# c\n[Unit]\nA = 1\n; c\nA=2\n[Service]\nExecStart=/bin/x \\\n  -y\n")
    assert u == {"Unit": {"A": ["1", "2"]}, "Service": {"ExecStart": ["/bin/x -y"]}}
    assert unitfile.value(u, "Unit", "A") == "2"
    with pytest.raises(KeyError):
        unitfile.value(u, "Unit", "B")
    with pytest.raises(ValueError):
        unitfile.parse("no section\n")


@pytest.mark.parametrize("text,seconds", [("2s", 2), ("2", 2), ("500ms", 0.5), ("1min 30s", 90), ("2min", 120),
                                          ("1h", 3600), ("30s", 30)])
def test_timespan(text, seconds):
    assert unitfile.timespan_s(text) == seconds


@pytest.mark.parametrize("text", ["", "2 parsecs", "-1s", "1,5s"])
def test_timespan_refuses_junk(text):
    with pytest.raises(ValueError):
        unitfile.timespan_s(text)


def test_check_command_takes_the_units_settings():
    assert unitfile.check_command(unitfile.UNIT_FILE.read_text()) == \
        f"sh {unitfile.CHECK_SCRIPT} 2 5 10"
    text = "[Unit]\nStartLimitBurst=3\n[Service]\nRestartSec=500ms\n"
    assert unitfile.check_command(text, quiet_s=4) == f"sh {unitfile.CHECK_SCRIPT} 0.5 3 4"
    with pytest.raises(KeyError):
        unitfile.check_command("[Unit]\nStartLimitBurst=3\n[Service]\n")
    assert (GUEST_SYSTEMD / Path(unitfile.CHECK_SCRIPT).name).is_file()


# --- what the shipped unit promises

def test_runs_the_installed_binary_with_the_flags_of_the_defaults_file():
    assert v("Service", "Type") == "simple"
    assert v("Service", "ExecStart") == "/usr/local/bin/scx_locality $SCX_LOCALITY_FLAGS"
    assert v("Service", "EnvironmentFile") == "-/etc/default/scx_locality"
    assert re.search(r"^SCX_LOCALITY_FLAGS=", unitfile.DEFAULTS_FILE.read_text(), re.M)
    header = unitfile.UNIT_FILE.read_text()
    # the install lines in the header put the files where the unit looks for them
    assert "install -m 0755 scheduler/target/release/scx_locality /usr/local/bin/scx_locality" in header
    assert "services/scx_locality.default /etc/default/scx_locality" in header
    assert v("Install", "WantedBy") == "multi-user.target"


def test_restart_policy():
    assert v("Service", "Restart") == "on-failure"
    # configuration errors are not retried; crashes, ejections (7), busy (5) and other errors (1) are
    assert set(v("Service", "RestartPreventExitStatus").split()) == {"2", "3", "4", "6"}
    assert v("Service", "KillSignal") in ("SIGTERM", "SIGINT")
    assert unitfile.timespan_s(v("Service", "TimeoutStopSec")) <= 60


def restart_delays(restart_s, steps, max_s, n):
    """systemd >= 254's delay before restart 1..n (RestartSteps=, RestartMaxDelaySec=; systemd.service(5))."""
    out = []
    for k in range(1, n + 1):
        if k == 1 or steps == 0:
            out.append(restart_s)
        elif k > steps:
            out.append(max_s)
        else:
            out.append(restart_s * (max_s / restart_s) ** ((k - 1) / steps))
    return out


def test_back_off_and_start_limit_agree():
    """With 254+'s back-off, the start limit is still reached: the start after BURST ones comes within
    StartLimitIntervalSec (else the window would pass and a broken scheduler loop at the longest delay)."""
    restart = unitfile.timespan_s(v("Service", "RestartSec"))
    steps = int(v("Service", "RestartSteps"))
    longest = unitfile.timespan_s(v("Service", "RestartMaxDelaySec"))
    burst = int(v("Unit", "StartLimitBurst"))
    interval = unitfile.timespan_s(v("Unit", "StartLimitIntervalSec"))
    assert 1 <= restart < longest and steps >= 1 and burst >= 2
    delays = restart_delays(restart, steps, longest, burst)
    assert [round(d, 1) for d in delays] == [2.0, 3.9, 7.7, 15.2, 30.0]
    assert sum(delays) < interval
    # on 252 (fixed RestartSec) too, and the default limit (5 in 10 s) is not what stops it
    assert restart * burst < interval and interval > 10


def test_hardening_leaves_bpf_proc_and_page_migration_alone():
    service = UNIT["Service"]
    for key in ("ProtectProc", "ProcSubset", "PrivateUsers", "RestrictRealtime", "ProtectKernelTunables",
                "DynamicUser", "User", "AmbientCapabilities"):
        assert key not in service, key
    caps = set(v("Service", "CapabilityBoundingSet").split())
    assert {"CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_SYS_NICE"} <= caps
    # a deny list only, answered with EPERM; none of the groups holds a call the agent makes
    flt = v("Service", "SystemCallFilter")
    assert flt.startswith("~") and v("Service", "SystemCallErrorNumber") == "EPERM"
    assert "AF_UNIX" in v("Service", "RestrictAddressFamilies").split()
    assert v("Service", "RuntimeDirectory") == "scx"  # the statistics socket under ProtectSystem=strict
    assert v("Service", "ProtectSystem") == "strict"
    if shutil.which("systemd-analyze"):
        denied = set()
        for group in flt[1:].split():
            r = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            denied |= {w.strip() for w in r.stdout.splitlines() if w.strip() and not w.strip().startswith(("#", "@"))}
        assert not denied & {"bpf", "perf_event_open", "move_pages", "migrate_pages", "mbind", "sched_setaffinity",
                             "sched_setscheduler", "process_vm_readv", "ptrace", "prctl", "ioctl", "mmap"}


def test_files_carry_license_headers():
    for f in (unitfile.UNIT_FILE, unitfile.DEFAULTS_FILE):
        assert f.read_text().startswith("# SPDX-License-Identifier: GPL-2.0-only\n"), f
    for f in GUEST_SYSTEMD.iterdir():
        assert "SPDX-License-Identifier: GPL-2.0-only" in f.read_text().splitlines()[0] + \
            f.read_text().splitlines()[1], f


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze on this host")
def test_systemd_analyze_verify(tmp_path):
    """Typos in keys or values show up here. ExecStart's binary need not be installed on this host, so the copy
    runs /bin/true; systemd 252 complains about the two back-off keys of 254 and nothing else."""
    text = unitfile.UNIT_FILE.read_text().replace("ExecStart=/usr/local/bin/scx_locality", "ExecStart=/bin/true")
    unit = tmp_path / "scx_locality.service"
    unit.write_text(text)
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    complaints = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    known = re.compile(r"Unknown key '(RestartSteps|RestartMaxDelaySec)' in section \[Service\], ignoring\.$")
    assert r.returncode == 0 and all(known.search(ln) for ln in complaints), complaints


@pytest.mark.skipif(not os.path.exists(image.BUSYBOX), reason="busybox-static missing (bin/lab setup)")
def test_guest_scripts_parse_in_busybox_sh():
    for script in ("init", "service-check.sh"):
        r = subprocess.run([image.BUSYBOX, "sh", "-n", str(GUEST_SYSTEMD / script)], capture_output=True, text=True)
        assert r.returncode == 0, (script, r.stderr)


# --- image flavours

def test_flavour_selection(monkeypatch):
    monkeypatch.delenv(image.FLAVOUR_ENV, raising=False)
    assert image.flavour() == "base"
    monkeypatch.setenv(image.FLAVOUR_ENV, "")
    assert image.flavour() == "base"
    monkeypatch.setenv(image.FLAVOUR_ENV, "systemd")
    assert image.flavour() == "systemd"
    monkeypatch.setenv(image.FLAVOUR_ENV, "sysvinit")
    with pytest.raises(setup.SetupMissing, match="base, systemd"):
        image.flavour()
    with pytest.raises(ValueError):
        image.overlay_inputs("base")


@pytest.mark.skipif(not all(os.path.exists(b) for b in image.SYSTEMD_BINARIES), reason="no systemd on this host")
def test_systemd_overlay_inputs():
    files = image.overlay_inputs("systemd")
    assert files["/init"] == str(GUEST_SYSTEMD / "init")
    assert files["/lab/systemd/service-check.sh"] == str(GUEST_SYSTEMD / "service-check.sh")
    assert files["/etc/os-release"] == str(GUEST_SYSTEMD / "os-release")
    for u in ("default.target", "sysinit.target", "basic.target", "multi-user.target", "lab-job.service",
              "systemd-journald.service", "systemd-journald.socket"):
        assert f"{image.SYSTEMD_UNIT_DIR}/{u}" in files, u
    assert files["/lab/services/scx_locality.service"] == str(unitfile.UNIT_FILE)
    assert files["/lab/services/scx_locality.default"] == str(unitfile.DEFAULTS_FILE)
    for b in image.SYSTEMD_BINARIES:
        assert files[b] == b
    # the init the systemd guest runs is the one the overlay carries
    assert "exec /lib/systemd/systemd" in (GUEST_SYSTEMD / "init").read_text()


def test_base_inputs_do_not_change_with_the_flavour(monkeypatch):
    """The base image's inputs (so its hash and file) are the same whatever LOCALITY_IMAGE_FLAVOUR says."""
    try:
        monkeypatch.delenv(image.FLAVOUR_ENV, raising=False)
        plain = image.collect_inputs(include_scheduler=False)
        monkeypatch.setenv(image.FLAVOUR_ENV, "systemd")
        flavoured = image.collect_inputs(include_scheduler=False)
    except setup.SetupMissing as e:
        pytest.skip(str(e))
    assert plain == flavoured
    assert plain["/init"] == str(image.GUEST_DIR / "init")
    assert not any(g.startswith(("/lab/systemd", "/lab/services", "/lib/systemd")) for g in plain)


@pytest.mark.skipif(not os.path.exists(image.BUSYBOX) or not all(os.path.exists(b) for b in image.SYSTEMD_BINARIES),
                    reason="busybox-static or systemd missing")
def test_flavoured_image_is_the_base_image_then_the_overlay(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path))
    monkeypatch.setattr(image, "collect_inputs", lambda include_scheduler=True: {
        "/bin/busybox": image.BUSYBOX, "/init": str(image.GUEST_DIR / "init")})
    logs = []
    monkeypatch.delenv(image.FLAVOUR_ENV, raising=False)
    base = image.build(include_scheduler=False, log=logs.append)
    monkeypatch.setenv(image.FLAVOUR_ENV, "systemd")
    flavoured = image.build(include_scheduler=False, log=logs.append)
    assert base.name.startswith("base-") and flavoured.name.startswith("systemd-")
    assert base.exists()  # the flavour leaves the base image in place, same name
    overlays = list(paths.images_dir().glob("overlay-systemd-*.cpio.gz"))
    assert len(overlays) == 1
    assert flavoured.read_bytes() == base.read_bytes() + overlays[0].read_bytes()
    # gzip members one after the other, as the kernel unpacks them: the base's init first, the overlay's last
    cpio = gzip.decompress(flavoured.read_bytes())
    base_at, overlay_at = cpio.find(b"bin/busybox"), cpio.find(b"lab/systemd/service-check.sh")
    assert 0 <= base_at < overlay_at
    assert cpio.rfind(b"exec /lib/systemd/systemd") > cpio.find(b"/bin/sh /lab/job")
    # a second build reuses all three
    n = len(logs)
    assert image.build(include_scheduler=False, log=logs.append) == flavoured and len(logs) == n
