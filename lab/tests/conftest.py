# SPDX-License-Identifier: GPL-2.0-only
import pytest


def pytest_addoption(parser):
    parser.addoption("--no-lab", action="store_true", help="skip tests that boot a QEMU guest")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--no-lab"):
        skip = pytest.mark.skip(reason="--no-lab given")
        for item in items:
            if item.get_closest_marker("lab") or item.get_closest_marker("lab_all"):
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: boots a QEMU guest (slow; needs bin/lab setup)")
    config.addinivalue_line("markers", "lab_all: boots every machine or loads every switch (make test-lab-all; "
                                       "not in make test)")


@pytest.fixture(autouse=True)
def _no_extra_sched_flags_in_unit_tests(request, monkeypatch):
    """LOCALITY_SCHED_EXTRA_FLAGS (lab/run.py) is for the lab tests, which boot the variant it names; the host's
    unit tests check the lab's own output, which must not change with it."""
    if not (request.node.get_closest_marker("lab") or request.node.get_closest_marker("lab_all")):
        monkeypatch.delenv("LOCALITY_SCHED_EXTRA_FLAGS", raising=False)
