# SPDX-License-Identifier: GPL-2.0-only
"""The verifier baseline in a real guest (marked `lab`): what `bin/lab verifier` checks, in one numa2 boot."""
import pytest

from lab import machines, verifier

pytestmark = pytest.mark.lab


def test_verifier_cost_within_the_baseline_numa2():
    """Each BPF program of scx_locality, loaded by the agent on numa2 in each configuration of verifier.CONFIGS
    (default flags; --sparse-idle, which adds ops.update_idle), is verified with no more instructions processed,
    total states or peak states than scheduler/verifier-baseline.toml records, within the margin: 10% and more
    than 100 instructions or 10 states (lab/verifier.py: MARGIN_PCT, SLACK).

    Why 10%: the counts are deterministic for one kernel, one build and one machine (the agent's rodata decides
    which code the verifier walks), so any change is the code's; ordinary edits move a program by a few percent,
    while the rule whose load took 57-65 s under TCG multiplied its program's processed instructions. The slack
    keeps a program of a few dozen instructions from failing on a one-line change. A program new since the
    baseline, one no longer loaded and a refused load fail as well. The failure names each program and says how
    to update: `bin/lab verifier --update`, then commit the baseline (its diff is the review of the growth).
    One boot, two agent starts: about 1-2 minutes on a 2-core host."""
    m = machines.load("numa2")
    base = verifier.load_baseline().get(m.name)
    assert base, f"{verifier.BASELINE} has no {m.name} section; run: bin/lab verifier --machine {m.name} --update"
    measured, res = verifier.measure(m)
    rows = verifier.compare(base["configs"], measured)
    assert not verifier.failures(rows), (verifier.failure_message(rows, m.name) + "\n\n"
                                         + verifier.format_table(rows) + f"\n(run folder {res.run_dir})")
    assert all(r.now is not None for r in rows)
