# SPDX-License-Identifier: GPL-2.0-only
"""Every switch of scx_locality loaded, and every modeled machine booted, at least once (marked `lab_all`: slow,
`make test-lab-all`, not part of `make test`).

- Every switch: one boot of numaq4 (4 nodes: the verifier walks the NUMA paths, which it prunes on one node),
  one step per switch (each boolean flag alone, each non-default value of each choice flag alone), each running
  a short hackbench. A step passes when the scheduler attached, the command succeeded and the scheduler
  detached cleanly. The switches are read from `scx_locality --help-all` (every option: `--help` leaves out the
  experiment switches), so a new one is covered without editing this file.
- Every machine: one boot of each lab/machines/*.toml with default flags and the same hackbench; the lab
  checks the topology the guest sees against the model.
"""
import os
import re
import subprocess

import pytest

from lab import image, machines, run

WORK = "hackbench -p -g 2 -l 200"
# flags that are no scheduling switch: they print and exit, or only change logging / statistics output
NOT_SWITCHES = {"help", "help-all", "version", "help-stats", "verbose", "log-level"}

# an option's own line: clap indents it by 2 ("  -v, --verbose") or 6 ("      --flag"), its description by 10
# or more, so a description line that wraps to start with a "--name" is not taken for an option
OPTION_RE = re.compile(r"^(?:  -\w, |      )--([a-z][a-z0-9-]*)(?: <([A-Z_]+)>)?(\.\.\.)?\s*$")


def switches_from_help(text: str) -> list[str]:
    """The switch sets to load, from clap's long help (--help-all): "--flag" for every flag without a value, and
    "--opt=VALUE" for every value of a choice option ("Possible values:" list) other than its default."""
    blocks: list[tuple[str, bool, list[str]]] = []
    for line in text.splitlines():
        m = OPTION_RE.match(line)
        if m:
            blocks.append((m.group(1), m.group(2) is not None, []))
        elif blocks:
            blocks[-1][2].append(line)
    out = []
    for name, takes_value, body in blocks:
        if name in NOT_SWITCHES:
            continue
        text_ = "\n".join(body)
        if not takes_value:
            out.append(f"--{name}")
            continue
        if "Possible values:" not in text_:
            continue
        default = re.search(r"\[default: ([^\]]+)\]", text_)
        for value in re.findall(r"^\s+- ([a-z0-9-]+):", text_.split("Possible values:", 1)[1], re.M):
            if not default or value != default.group(1):
                out.append(f"--{name}={value}")
    return out


def help_switches() -> list[str]:
    """The switch sets of the binary the guest runs (image.scheduler_binary(): LOCALITY_SCHED_BIN or the build)."""
    text = subprocess.run([str(image.scheduler_binary()), "--help-all"], capture_output=True, text=True,
                          check=True).stdout
    sw = switches_from_help(text)
    assert sw, text[:2000]
    return sw


def test_switches_from_help_reads_the_real_help():
    """The parser against the built binary's own --help-all (no guest needed)."""
    if not image.scheduler_binary().exists():
        pytest.skip(f"{image.scheduler_binary()} not built (make build)")
    sw = help_switches()
    for expected in ["--no-steal", "--cache-aware", "--no-home-node", "--numa-balance=off",
                     "--numa-balance=idle-cpus", "--exec-placement=allowance", "--memory=off", "--memory=local"]:
        assert expected in sw, sw
    assert "--exec-placement=least-loaded" not in sw  # a default clap knows is left out
    # --memory has no clap default: given explicitly, spread overrides kernel.numa_balancing=0 (a switch of its own)
    assert "--memory=spread" in sw
    assert not any(s.startswith(("--help", "--version", "--verbose", "--log-level", "--slice-us")) for s in sw)
    # experiment switches are hidden from --help, not from --help-all
    for hidden in ["--no-wake-affine", "--idle-search=core-first", "--enqueue-handoff=all", "--sparse-idle"]:
        assert hidden in sw, sw
    short = subprocess.run([str(image.scheduler_binary()), "--help"], capture_output=True, text=True,
                           check=True).stdout
    assert "--no-wake-affine" not in short and "--help-all" in short, short
    assert set(switches_from_help(short)) < set(sw)
    # the same switches however clap wraps the text: at 80 columns a description once wrapped to a line holding
    # only "--cache-overaggr-pct", which was taken for a flag without a value
    for cols in ("80", "200"):
        text = subprocess.run([str(image.scheduler_binary()), "--help-all"], capture_output=True, text=True,
                              check=True, env={**os.environ, "COLUMNS": cols}).stdout
        assert switches_from_help(text) == sw, cols


def clean(step) -> bool:
    return step.sched_started and step.cmd_exit == 0 and step.sched_exit_kind == "unregistered from user space"


@pytest.mark.lab_all
def test_every_switch_loads_on_numaq4():
    sw = help_switches()
    steps = [run.Step(run.parse_sched(f"scx_locality:{s}"), WORK, timeout_s=120) for s in sw]
    res = run.run_job(machines.load("numaq4"), steps, timeout_s=60 * len(steps) + 300, stream=None,
                      build_scheduler=False)
    bad = [(s, st.sched_start_error, st.cmd_exit, st.sched_exit_kind)
           for s, st in zip(sw, res.steps) if not clean(st)]
    assert len(res.steps) == len(sw) and not bad, (res.run_dir, bad)


@pytest.mark.lab_all
@pytest.mark.parametrize("machine", machines.known())
def test_every_machine_runs_scx_locality(machine):
    m = machines.load(machine)
    # big64 (64 vCPUs, 8 nodes) takes about 2 minutes to boot under TCG
    res = run.run_job(m, [run.Step(run.parse_sched("scx_locality"), WORK, timeout_s=300)], timeout_s=900,
                      stream=None, build_scheduler=False)
    assert res.topology_ok is not False, res.run_dir
    assert res.exit_code() == run.EXIT_OK and clean(res.steps[0]), res
