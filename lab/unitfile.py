# SPDX-License-Identifier: GPL-2.0-only
"""The systemd unit of services/ as data, for the service test (lab/tests/test_service_lab.py) and its unit tests.

The service test checks the unit against its own settings (the back-off it waits for, the number of tries
before the start limit), so they are read from the unit file rather than written twice.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from . import paths

UNIT_FILE = paths.REPO / "services" / "scx_locality.service"
DEFAULTS_FILE = paths.REPO / "services" / "scx_locality.default"
CHECK_SCRIPT = "/lab/systemd/service-check.sh"  # lab/guest/systemd/service-check.sh in the systemd flavour


def parse(text: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> values in order (a key may repeat), as systemd reads a unit file: '#' and ';' start
    comment lines, a trailing backslash continues a line, white space around '=' and values is dropped."""
    units: dict[str, dict[str, list[str]]] = {}
    section = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            units.setdefault(section, {})
            continue
        if section is None or "=" not in line:
            raise ValueError(f"not a unit file line: {line!r}")
        key, _, value = line.partition("=")
        units[section].setdefault(key.strip(), []).append(value.strip())
    return units


def value(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    """The last value of a key (the one systemd uses for single-valued settings)."""
    try:
        return unit[section][key][-1]
    except KeyError:
        raise KeyError(f"[{section}] {key}= is not set") from None


_SPAN_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0,
               "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
               "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0}


def timespan_s(text: str) -> float:
    """A systemd time span ("2s", "1min 30s", "500ms", a bare number of seconds) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip())
    if not parts or re.sub(r"[\d.\sa-z]", "", text.strip()):
        raise ValueError(f"not a time span: {text!r}")
    total = 0.0
    for number, unit in parts:
        if unit not in _SPAN_UNITS:
            raise ValueError(f"unknown time unit {unit!r} in {text!r}")
        total += float(number) * _SPAN_UNITS[unit]
    return total


def check_command(unit_text: str, quiet_s: int = 10) -> str:
    """The guest command of the service test: the check script with the unit's RestartSec and StartLimitBurst
    (what it waits for and counts) and how long the journal must stay quiet while the scheduler runs."""
    unit = parse(unit_text)
    restart_s = timespan_s(value(unit, "Service", "RestartSec"))
    burst = int(value(unit, "Unit", "StartLimitBurst"))
    if burst < 1 or quiet_s < 1:
        raise ValueError("StartLimitBurst and the quiet time must be positive")
    return shlex.join(["sh", CHECK_SCRIPT, f"{restart_s:g}", str(burst), str(quiet_s)])
