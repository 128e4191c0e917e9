# SPDX-License-Identifier: GPL-2.0-only
# make test : unit tests (Rust and Python) plus a fast lab smoke test in QEMU guests
# make demo : a short bench in the default machine (numa2): EEVDF vs scx_locality, tables and a report
# Both run `bin/lab setup` first (idempotent; installs missing Debian packages as root).

CARGO ?= cargo
LAB := bin/lab
PY = $${LOCALITY_CACHE:-$(CURDIR)/.cache}/venv/bin/python

.PHONY: setup build test unit-test lab-test test-lab-all test-mutants demo clean

setup:
	$(LAB) setup

build: setup
	cd scheduler && $(CARGO) build --release
	$(MAKE) -C workloads

unit-test: build
	cd scheduler && $(CARGO) test --release
	cd lab/memmodel && $(CARGO) test --release --target-dir $${LOCALITY_CACHE:-$(CURDIR)/.cache}/memmodel/target
	$(PY) -m pytest -q lab/tests --no-lab

lab-test: build
	$(PY) -m pytest -q --durations=12 -m "lab and not lab_all" lab/tests

test: unit-test lab-test

# Every switch of scx_locality loaded (numaq4), every modeled machine booted once (big64 included) and the soak's
# fast mix (bin/lab soak --fast): slower
# than make test; run it after changing the BPF side, a switch or a machine file.
test-lab-all: build
	$(PY) -m pytest -q -m "lab or lab_all" lab/tests

# Every mechanism's lab tests with that mechanism switched off (lab/mutants.toml, LOCALITY_SCHED_EXTRA_FLAGS):
# passes only when each of them fails. Hours on 2 cores (a boot or more per test); the table (mechanism, flag,
# test, failed yes/no) is printed and written to runs/mutants-DATE/mutants.md. MUTANTS_ARGS=--dry-run shows the
# plan and checks the flags without booting; MUTANTS_ARGS="--only steal" runs one mechanism.
test-mutants: build
	$(PY) -m lab.mutants $(MUTANTS_ARGS)

# EEVDF against scx_locality on numa2: hackbench (process, pipes, 2 group sizes) and wakelat, 3 runs
# (about 4 minutes here); prints the comparison tables and the report's path.
DEMO_OUT = $${LOCALITY_RUNS:-$(CURDIR)/runs}/demo
demo: build
	$(LAB) bench --machine numa2 --sched eevdf,scx_locality --no-build --force --runs 3 --out $(DEMO_OUT) \
	    --bench hackbench:mode=process:ipc=pipe:groups=2/4:loops=300,wakelat:seconds=4

clean:
	rm -rf scheduler/target runs
