# SPDX-License-Identifier: GPL-2.0-only
"""scx_locality as a systemd service (services/), in a guest whose PID 1 is the host's systemd 252 (marked `lab`).

The guest boots the "systemd" image flavour (lab/image.py, lab/guest/systemd/): the base image plus systemd,
journald, systemctl, journalctl and a few minimal units; its job runs lab/guest/systemd/service-check.sh, which
installs the unit as the README says and checks start, stop, restart after kill -9, the start limit, a bad flag
and enable, waiting on states with timeouts. Its verdicts ("svc-check NAME ok|FAIL ...") are read here.
"""
import io
import re

import pytest

from lab import image, machines, run, unitfile

# make test-lab-all: it checks the packaging, not a mechanism, and its image flavour and boot cost make test about 3
# minutes on a 2-core host, which make test's 50-minute limit has no room for.
pytestmark = pytest.mark.lab_all

CHECKS = ["enable", "load", "start", "attached-line", "stats-socket", "monitor", "ops-name", "quiet", "stop",
          "migrated", "boot-start", "crash", "crash-stop", "bad-flag", "limit-setup", "limit", "limit-cleanup"]
# Journal lines one start or one stop may add: PID 1's own ("Started", "Stopping", "Deactivated", "Stopped",
# "Consumed ... CPU time") and the agent's (topology, attached, final stats). Anything per interval is far more.
MAX_LINES_PER_EVENT = 8


def test_scx_locality_runs_as_a_service_numa2(monkeypatch):
    monkeypatch.setenv(image.FLAVOUR_ENV, "systemd")
    cmd = unitfile.check_command(unitfile.UNIT_FILE.read_text(), quiet_s=10)
    buf = io.StringIO()
    # guest seconds: about 100 on a quiet host; the bound is for a loaded one
    res = run.run_job(machines.load("numa2"), [run.Step(run.parse_sched("eevdf"), cmd, timeout_s=480)],
                      timeout_s=600, stream=buf, build_scheduler=False)
    console = buf.getvalue()
    verdicts = dict((m.group(1), (m.group(2), m.group(3)))
                    for m in re.finditer(r"^svc-check (\S+) (ok|FAIL) ?(.*?)\s*$", console, re.M))
    figures = dict(re.findall(r"^svc: (\S+) (.*?)\s*$", console, re.M))
    report = "\n".join(f"{k}: {v[0]} {v[1]}" for k, v in verdicts.items()) + "\n" + console[-4000:]
    assert res.exit_code() == run.EXIT_OK, (res, report)
    assert sorted(verdicts) == sorted(CHECKS), report
    assert all(v[0] == "ok" for v in verdicts.values()), report
    assert figures["systemd"].startswith("systemd "), figures
    assert int(figures["journal_start_lines"]) <= MAX_LINES_PER_EVENT, report
    assert int(figures["journal_stop_lines"]) <= MAX_LINES_PER_EVENT, report
    print("\nservice test:", {k: figures[k] for k in ("systemd", "start_s", "stop_s", "restart_delay_s",
                                                       "journal_start_lines", "journal_stop_lines",
                                                       "start_limit_tries", "start_limit_hit_after_s", "total_s")},
          f"boot wall {res.wall_s} s")
