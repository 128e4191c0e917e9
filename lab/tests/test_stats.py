# SPDX-License-Identifier: GPL-2.0-only
"""lab/stats.py against values worked out by hand (the arithmetic is in the comments)."""
import math

import pytest

from lab import stats

XS = [2, 4, 4, 4, 5, 5, 7, 9]  # sum 40, mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32


def test_amean_and_stddev():
    assert stats.amean(XS) == 5.0
    assert stats.stddev(XS) == pytest.approx(math.sqrt(32 / 7))  # 2.13809
    assert stats.stddev(XS) == pytest.approx(2.138090, abs=1e-6)
    assert stats.coeffvar(XS, "amean") == pytest.approx(100 * 2.138090 / 5, abs=1e-4)  # 42.7618%


def test_hmean_and_hstddev():
    # 3 / (1 + 1/2 + 1/4) = 3 / 1.75 = 12/7
    assert stats.hmean([1, 2, 4]) == pytest.approx(12 / 7)
    # reciprocals 1, .5, .25 minus 7/12: 5/12, -1/12, -4/12; squares sum 42/144 = 7/24;
    # * (12/7)^4 / 3 = 7 * 20736 / (24 * 2401 * 3) = 0.839650; sqrt = 0.916324
    assert stats.hstddev([1, 2, 4]) == pytest.approx(0.916324, abs=1e-6)
    assert stats.coeffvar([1, 2, 4], "hmean") == pytest.approx(100 * 0.916324 / (12 / 7), abs=1e-4)


def test_degenerate_inputs():
    assert stats.amean([]) is None and stats.hmean([]) is None
    assert stats.hmean([1, 0]) is None  # a zero rate has no harmonic mean
    assert stats.stddev([3]) is None and stats.hstddev([3]) is None
    assert stats.coeffvar([3], "amean") is None
    assert stats.amean([1, None, 3]) == 2.0  # missing values are skipped
    assert stats.coeffvar([0, 0], "amean") is None


def test_pct_better_sign_follows_direction():
    assert stats.pct_better(110, 100, higher_is_better=True) == pytest.approx(10.0)
    assert stats.pct_better(90, 100, higher_is_better=True) == pytest.approx(-10.0)
    assert stats.pct_better(90, 100, higher_is_better=False) == pytest.approx(10.0)  # less time is better
    assert stats.pct_better(125, 100, higher_is_better=False) == pytest.approx(-25.0)
    assert stats.pct_better(5, 0, higher_is_better=True) is None
    assert stats.pct_better(None, 1, higher_is_better=True) is None


def test_significance_t_test_by_hand():
    # means 11 and 15, each sd sqrt(2), n 2: se = sqrt(2/2 + 2/2) = sqrt(2), t = 4 / sqrt(2) = 2 sqrt(2), df 2.
    # Student's t with 2 df: P(T <= t) = 1/2 + t / (2 sqrt(2 + t^2)), so p = 1 - t / sqrt(2 + t^2)
    # = 1 - 2.828427 / 3.162278 = 0.105573: just above mmtests' 10% level.
    s = stats.significance([10, 12], [14, 16], "amean")
    assert s.df == 2 and s.t == pytest.approx(2 * math.sqrt(2))
    assert s.p == pytest.approx(1 - 2 * math.sqrt(2) / math.sqrt(10), abs=1e-9)
    assert not s.significant
    # means 11 and 16: t = 5 / sqrt(2) = 3.535534; p = 1 - 3.535534 / sqrt(14.5) = 0.071523 < 0.10
    s = stats.significance([10, 12], [15, 17], "amean")
    assert s.p == pytest.approx(1 - 3.5355339 / math.sqrt(14.5), abs=1e-6)
    assert s.significant
    # the direction does not matter (two-sided)
    assert stats.significance([15, 17], [10, 12], "amean").p == pytest.approx(s.p)


def test_significance_uses_hmean_and_hstddev_for_rates():
    # base: H = 12/7, HStddev 0.916324; new = 2 * base: H = 24/7, HStddev 1.832649 (both scale with the data).
    # se = sqrt(0.839650/3 + 4*0.839650/3) = 1.182970, t = (12/7) / 1.182970 = 1.449138, df 4.
    # Student's t with 4 df: F(t) = 1/2 + 3/8 * u * (1 - t^2 / (12 (1 + t^2/4))), u = t / sqrt(1 + t^2/4)
    t = 1.449138
    u = t / math.sqrt(1 + t * t / 4)
    p = 2 * (1 - (0.5 + 3 / 8 * u * (1 - t * t / (12 * (1 + t * t / 4)))))  # 0.220888
    s = stats.significance([1, 2, 4], [2, 4, 8], "hmean")
    assert s.t == pytest.approx(t, abs=1e-5) and s.df == 4
    assert s.p == pytest.approx(p, abs=1e-5) and not s.significant


def test_significance_zero_spread_and_too_few_runs():
    assert not stats.significance([5, 5], [5, 5], "amean").significant
    z = stats.significance([5, 5], [6, 6], "amean")
    assert z.significant and z.p == 0.0
    assert stats.significance([5], [6, 7], "amean") is None
    assert stats.significance([5, 6], [], "hmean") is None


def test_paired_ratio_and_t_test_by_hand():
    # ratios 2, 1, 4: logs ln 2, 0, 2 ln 2; mean ln 2 -> x2.0; sd of the logs ln 2, se ln 2 / sqrt 3, so
    # t = sqrt 3 with 2 df, whose tail is 1/2 - t / (2 sqrt(t^2 + 2)): p = 1 - sqrt(3/5)
    pr = stats.paired([(1, 2), (1, 1), (1, 4)])
    assert pr.n == 3 and pr.ratio == pytest.approx(2.0)
    assert pr.p == pytest.approx(1 - math.sqrt(3 / 5)) and not pr.significant


def test_paired_cancels_the_boot_that_the_two_sample_test_counts_as_spread():
    # every run 10% faster than its baseline, but one boot twice as fast as the other for both
    base, new = [100, 200], [110, 220]
    assert not stats.significance(base, new, "hmean").significant
    pr = stats.paired(zip(base, new))
    assert pr.significant and pr.p == 0.0 and pr.ratio == pytest.approx(1.1)


def test_paired_degenerate_inputs():
    assert stats.paired([(100, 110)]) is None
    assert stats.paired([(0, 110), (100, None), (5, 5)]) is None  # one usable pair
    same = stats.paired([(100, 100), (7, 7)])
    assert not same.significant and same.p == 1.0 and same.ratio == pytest.approx(1.0)
