# SPDX-License-Identifier: GPL-2.0-only
"""lab/thresholds.py: the verdict of a mechanism test and the rates derived from its calibration."""
import json

import pytest
from scipy.stats import binom

from lab import thresholds as th

BAR = th.Bar(name="t", figure="share", bar=0.8, higher=True, rounds=4, need=2, gap=1)


def test_a_round_reaches_the_bar_in_its_direction():
    assert BAR.reached([0.8, 0.79, 1.0]) == 2
    low = th.Bar(name="t", figure="spread", bar=3, higher=False, rounds=1, need=1, gap=1)
    assert low.reached([3, 4, 0]) == 2


def test_the_verdict_asks_both_the_bar_and_the_gap():
    assert BAR.passes(2, 1) and BAR.passes(4, 3)
    assert not BAR.passes(1, 0)  # below the absolute bar
    assert not BAR.passes(3, 3)  # the off switch does as well


def test_rates_are_the_binomials_summed_by_hand():
    one = th.Bar(name="t", figure="f", bar=1, higher=True, rounds=1, need=1, gap=1)
    # one round a side: passes only when the default reaches the bar and the off switch does not
    assert one.pass_probability(0.9, 0.2) == pytest.approx(0.9 * 0.8)
    two = th.Bar(name="t", figure="f", bar=1, higher=True, rounds=2, need=2, gap=1)
    want = binom.pmf(2, 2, 0.9) * (binom.pmf(0, 2, 0.3) + binom.pmf(1, 2, 0.3))
    assert two.false_failure(0.9, 0.3) == pytest.approx(1 - want)
    assert two.escape(0.3) == pytest.approx(0.3 ** 2 * (1 - 0.3 ** 2))


def test_clopper_pearson_ends():
    # all n successes: the lower end solves p^n = 1 - confidence
    assert th.on_rate_low(10, 10) == pytest.approx(0.05 ** (1 / 10))
    # no success: the upper end solves (1 - p)^n = 1 - confidence
    assert th.off_rate_high(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10))
    assert th.on_rate_low(0, 10) == 0.0 and th.off_rate_high(10, 10) == 1.0
    assert th.on_rate_low(0, 0) == 0.0 and th.off_rate_high(0, 0) == 1.0


def boots(n, on, off):
    return {"boots": [{"on": list(on), "off": list(off)} for _ in range(n)]}


def test_a_well_separated_calibration_passes_the_check():
    a = th.assess(BAR, boots(10, [0.95] * 4, [0.5] * 4))
    assert (a.on_reached, a.on_rounds, a.off_reached) == (40, 40, 0)
    assert th.problems(BAR, a) == [] and a.false_failure <= th.MAX_FALSE_FAILURE


def test_too_few_boots_a_flaky_default_or_a_strong_off_switch_are_refused():
    few = th.problems(BAR, th.assess(BAR, boots(9, [0.95] * 4, [0.5] * 4)))
    assert len(few) == 1 and "9 calibration boots" in few[0]
    flaky = th.problems(BAR, th.assess(BAR, boots(10, [0.95, 0.95, 0.95, 0.7], [0.5] * 4)))
    assert len(flaky) == 1 and "false failure" in flaky[0]
    strong_off = th.problems(BAR, th.assess(BAR, boots(10, [0.95] * 4, [0.9, 0.9, 0.5, 0.5])))
    assert any("escape" in p for p in strong_off)


def test_an_off_rate_that_differs_by_boot_is_judged_boot_by_boot():
    """Off rounds reaching the bar 2 of 40 times: spread over 2 boots, or both in one boot (2 of its 4, as the pair
    test's off switch did): the same pooled rate, but a test run is one boot, and in that boot the test passes
    with the mechanism off a third of the time, which the mixture over boots counts and the pooled rate does not."""
    def cal(offs):
        return {"boots": [{"on": [0.95] * 4, "off": [0.9] * k + [0.5] * (4 - k)} for k in offs]}
    spread, clustered = cal([1, 1] + [0] * 8), cal([2] + [0] * 9)
    pooled = BAR.escape(2 / 40)
    assert th.escape(BAR, clustered) == pytest.approx(max(pooled, BAR.escape(0.5) / 10))
    assert th.escape(BAR, clustered) > 2 * pooled
    assert th.escape(BAR, spread) == pytest.approx(max(pooled, 2 * BAR.escape(0.25) / 10))
    assert th.escape(BAR, cal([0] * 10)) == 0.0 and th.escape(BAR, {"boots": []}) == 1.0


def test_a_boot_whose_off_side_reaches_the_bar_throughout_counts_as_a_false_failure():
    """A test run is one boot. Off rounds reaching the bar 4 of 40 times, all in one boot: pooled, the default's 40
    of 40 leave little room for a failure, but in that boot the off side reaches the bar in every round, so the
    test fails there whatever the default does; the mixture over boots counts it (a tenth of the runs)."""
    clustered = {"boots": [{"on": [0.95] * 4, "off": [0.9] * 4}] + [{"on": [0.95] * 4, "off": [0.5] * 4}] * 9}
    a = th.assess(BAR, clustered)
    assert BAR.false_failure(a.p_on, a.p_off) < 0.1
    assert a.false_failure == pytest.approx(0.1)
    assert any("false failure" in p for p in th.problems(BAR, a))
    spread = {"boots": [{"on": [0.95] * 4, "off": [0.9] + [0.5] * 3}] * 4 + [{"on": [0.95] * 4, "off": [0.5] * 4}] * 6}
    b = th.assess(BAR, spread)
    assert b.false_failure == pytest.approx(BAR.false_failure(b.p_on, b.p_off))


def test_design_finds_the_fewest_rounds_that_meet_both_limits():
    cal = boots(10, [0.95] * 4, [0.9, 0.5, 0.5, 0.5])  # default 40/40, off 10/40
    b = th.design(BAR, cal)
    a = th.assess(b, cal)
    assert th.problems(b, a) == [] and (b.bar, b.higher) == (BAR.bar, BAR.higher)
    # no bar with a round fewer meets them, whatever its need and gap
    from dataclasses import replace
    for need in range(1, b.rounds):
        for gap in range(1, need + 1):
            fewer = replace(BAR, rounds=b.rounds - 1, need=need, gap=gap)
            assert th.problems(fewer, th.assess(fewer, cal)) != []
    # an off switch that reaches the bar as often as the default: no design
    assert th.design(BAR, boots(10, [0.95] * 4, [0.95] * 4)) is None


def test_record_appends_a_boot_and_judge_uses_it(tmp_path, monkeypatch):
    monkeypatch.setattr(th, "CALIBRATION_DIR", tmp_path)
    for _ in range(th.MIN_BOOTS):
        th.record(BAR, [0.95] * 4, [0.5] * 4, when="2026-12-02T00:00:00Z", commit="abc")
    cal = json.loads((tmp_path / "t.json").read_text())
    assert len(cal["boots"]) == th.MIN_BOOTS and cal["boots"][0]["commit"] == "abc"
    th.judge(BAR, [0.95, 0.9, 0.5, 0.5], [0.5, 0.6, 0.81, 0.4])
    with pytest.raises(AssertionError, match="gap"):
        th.judge(BAR, [0.95, 0.9, 0.5, 0.5], [0.9, 0.9, 0.5, 0.4])
    with pytest.raises(AssertionError):
        th.judge(BAR, [0.95], [0.5])  # not the calibrated number of rounds


def test_judge_refuses_an_uncalibrated_bar(tmp_path, monkeypatch):
    monkeypatch.setattr(th, "CALIBRATION_DIR", tmp_path)
    with pytest.raises(AssertionError, match="calibration boots"):
        th.judge(BAR, [1.0] * 4, [0.0] * 4)


def test_every_registered_bar_holds_against_its_calibration():
    """The bars of the lab tests that use this module, against docs/test-calibration/ (no QEMU needed)."""
    bad = [p for name, (bar, _) in sorted(th.registered().items()) for p in th.problems(bar, th.assess(bar, th.load(name)))]
    assert not bad, bad
