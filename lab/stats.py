# SPDX-License-Identifier: GPL-2.0-only
"""Statistics of the bench report, after the rules of mmtests (Mel Gorman's kernel benchmark suite).

- Rates (higher is better) are summarised by the harmonic mean (Hmean), times (lower is better) by the
  arithmetic mean (Amean).
- Spread: for an Amean the sample standard deviation (n - 1 in the denominator); for an Hmean mmtests'
  harmonic standard deviation, sqrt(sum((1/x_i - 1/H)^2) * H^4 / n), the spread of the reciprocals carried
  back to the scale of the data. CoeffVar is 100 * spread / mean.
- Percent against the baseline is positive when the new value is better: for rates 100 * new / base - 100,
  for times 100 - 100 * new / base.
- Significance (`significance`): the two-sample t-test mmtests' compare used to mark a difference (its
  Compare.pm `_significanceTest`, default level 10%): t = |mean_base - mean_new| / sqrt(s_base^2 / n_base +
  s_new^2 / n_new) with the means and spreads above, df = n_base + n_new - 2, two-sided p = 2 * P(T_df > t)
  (scipy.stats.t.sf); significant when p < alpha = 0.10. When both spreads are 0 the difference is
  significant exactly when the means differ. With fewer than 2 values on a side there is no test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.10  # mmtests' default significance level


def _clean(xs) -> list[float]:
    return [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]


def amean(xs) -> float | None:
    xs = _clean(xs)
    return sum(xs) / len(xs) if xs else None


def hmean(xs) -> float | None:
    """Harmonic mean; None for no values or any value <= 0 (a rate of 0 has no harmonic mean)."""
    xs = _clean(xs)
    if not xs or any(x <= 0 for x in xs):
        return None
    return len(xs) / sum(1.0 / x for x in xs)


def stddev(xs) -> float | None:
    """Sample standard deviation (n - 1); None for fewer than 2 values."""
    xs = _clean(xs)
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def hstddev(xs) -> float | None:
    """mmtests' standard deviation around the harmonic mean; None for fewer than 2 values or a value <= 0."""
    xs = _clean(xs)
    h = hmean(xs)
    if len(xs) < 2 or h is None:
        return None
    return math.sqrt(sum((1.0 / x - 1.0 / h) ** 2 for x in xs) * h ** 4 / len(xs))


def mean(xs, kind: str) -> float | None:
    """kind "hmean" or "amean"."""
    return hmean(xs) if kind == "hmean" else amean(xs)


def spread(xs, kind: str) -> float | None:
    return hstddev(xs) if kind == "hmean" else stddev(xs)


def coeffvar(xs, kind: str = "amean") -> float | None:
    """100 * spread / mean, in percent; None when undefined."""
    m, s = mean(xs, kind), spread(xs, kind)
    if m is None or s is None or m == 0:
        return None
    return 100.0 * s / m


def pct_better(new: float | None, base: float | None, higher_is_better: bool) -> float | None:
    """Percent by which new is better than base (negative: worse). None when either is missing or base is 0."""
    if new is None or base is None or base == 0:
        return None
    if higher_is_better:
        return 100.0 * new / base - 100.0
    return 100.0 - 100.0 * new / base


@dataclass
class Significance:
    significant: bool
    p: float
    t: float
    df: int


def significance(base, new, kind: str, alpha: float = ALPHA) -> Significance | None:
    """mmtests' t-test of two samples (see the module text). None when a side has fewer than 2 values."""
    from scipy import stats as sst

    base, new = _clean(base), _clean(new)
    if len(base) < 2 or len(new) < 2:
        return None
    mb, mn = mean(base, kind), mean(new, kind)
    sb, sn = spread(base, kind), spread(new, kind)
    if None in (mb, mn, sb, sn):
        return None
    df = len(base) + len(new) - 2
    se = math.sqrt(sb ** 2 / len(base) + sn ** 2 / len(new))
    if se == 0:
        differ = mb != mn
        return Significance(significant=differ, p=0.0 if differ else 1.0, t=math.inf if differ else 0.0, df=df)
    t = abs(mb - mn) / se
    p = float(2.0 * sst.t.sf(t, df))
    return Significance(significant=p < alpha, p=p, t=t, df=df)


@dataclass
class Paired:
    ratio: float  # geometric mean of new / base over the runs that have both
    significant: bool
    p: float
    n: int


def paired(pairs, alpha: float = ALPHA) -> Paired | None:
    """The test of per-run ratios (see the module text) over (base, new) pairs of one run each; pairs with a
    missing or non-positive value are left out. None for fewer than 2 pairs."""
    from scipy import stats as sst

    logs = [math.log(float(n) / float(b)) for b, n in pairs
            if b is not None and n is not None and float(b) > 0 and float(n) > 0]
    if len(logs) < 2:
        return None
    m = sum(logs) / len(logs)
    if max(logs) - min(logs) < 1e-12:
        differ = abs(m) > 1e-12
        return Paired(ratio=math.exp(m), significant=differ, p=0.0 if differ else 1.0, n=len(logs))
    p = float(sst.ttest_1samp(logs, 0.0).pvalue)
    return Paired(ratio=math.exp(m), significant=p < alpha, p=p, n=len(logs))
