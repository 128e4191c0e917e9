# SPDX-License-Identifier: GPL-2.0-only
# make test : unit tests (Rust and Python) plus a fast lab smoke test in QEMU guests
# make demo : a short scheduler session in the default machine (numa2)
# Both run `bin/lab setup` first (idempotent; installs missing Debian packages as root).

CARGO ?= cargo
LAB := bin/lab
PY = $${LOCALITY_CACHE:-$(CURDIR)/.cache}/venv/bin/python

.PHONY: setup build test unit-test lab-test demo clean

setup:
	$(LAB) setup

build: setup
	$(CARGO) build --release --manifest-path scheduler/Cargo.toml

unit-test: build
	$(CARGO) test --release --manifest-path scheduler/Cargo.toml
	$(PY) -m pytest -q lab/tests --no-lab

lab-test: build
	$(PY) -m pytest -q -m lab lab/tests

test: unit-test lab-test

demo: build
	$(LAB) run --machine numa2 --sched scx_locality:--stats=2 --timeout 120 -- \
	    'hackbench -p -g 4 -l 2000 && hackbench -T -g 2 -l 2000'

clean:
	rm -rf scheduler/target runs
