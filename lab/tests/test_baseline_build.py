# SPDX-License-Identifier: GPL-2.0-only
"""scx_locality_baseline: a second scx_locality build (LOCALITY_BASELINE_BIN) run beside the current one."""
import pytest

from lab import bench, image, run, setup


def test_the_baseline_is_a_known_scheduler_showing_our_ops_name():
    spec = run.parse_sched("scx_locality_baseline:--no-steal")
    assert spec.ops == "locality" and spec.args == ["--no-steal"]


def test_without_the_variable_it_is_refused_with_the_fix(monkeypatch):
    monkeypatch.delenv(image.BASELINE_ENV, raising=False)
    with pytest.raises(setup.SetupMissing, match="LOCALITY_BASELINE_BIN"):
        image.check_baseline()
    specs = [run.parse_sched("eevdf"), run.parse_sched("scx_locality_baseline")]
    failed = bench.prepare_schedulers(specs, build=False, log=lambda s: None)
    assert list(failed) == ["scx_locality_baseline"] and "not set" in failed["scx_locality_baseline"]


def test_a_path_that_is_no_executable_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(image.BASELINE_ENV, str(tmp_path / "missing"))
    with pytest.raises(setup.SetupMissing, match="not an executable"):
        image.check_baseline()


def test_the_build_goes_into_the_guest_under_its_own_name(monkeypatch, tmp_path):
    b = tmp_path / "scx_locality"
    b.write_text("#!/bin/sh\n")
    b.chmod(0o755)
    monkeypatch.setenv(image.BASELINE_ENV, str(b))
    image.check_baseline()
    try:
        files = image.collect_inputs(include_scheduler=False)
    except setup.SetupMissing as e:  # a host without the lab's packages
        pytest.skip(str(e))
    assert files["/usr/local/bin/scx_locality_baseline"] == str(b)
    assert run._sched_command(run.parse_sched("scx_locality_baseline:-v"), None) == \
        ["/usr/local/bin/scx_locality_baseline", "-v"]
