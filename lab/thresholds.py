# SPDX-License-Identifier: GPL-2.0-only
"""The bars of the mechanism tests, derived from recorded on/off distributions.

A mechanism's lab test runs its workload in one boot for `rounds` rounds with default flags and as many with the
mechanism's off switch, and reads one figure per round from outside the scheduler (the lab's sampler, /proc,
numa_maps). A round *reaches the bar* when its figure is at or beyond `bar`. The test passes when

    on_reached >= need   and   on_reached - off_reached >= gap

so it asks an absolute bar of the default and a gap to the off switch, judged by one yardstick.

Where `bar`, `rounds`, `need` and `gap` come from: `python -m lab.thresholds calibrate NAME --boots N` runs the
test's own measuring function (the one the test calls) in N boots and appends every round's figure to
docs/test-calibration/NAME.json. From it, with s of n default rounds reaching the bar and t of m off rounds:

- p_on, the chance a default round reaches the bar, is taken at the lower end of its one-sided 95%
  Clopper-Pearson interval (beta.ppf(0.05, s, n - s + 1)); p_off, the chance an off round does, at the upper end
  (beta.ppf(0.95, t + 1, m - t));
- the false-failure rate is exact over the two binomials: 1 - sum over a, b of Bin(a; rounds, p_on) *
  Bin(b; rounds, p_off) for the (a, b) that pass; or, when larger, the mean over the calibration boots of that
  sum at each boot's own on and off rates (a test run is one boot: a boot whose off side reaches the bar in
  most rounds fails it however rare such rounds are pooled);
- the escape rate (the test passing with the mechanism off, so both sides drawn from the off distribution) is
  the same sum with p_off on both sides, p_off at its point estimate t / m; or, when larger, the mean over the
  calibration boots of that sum at each boot's own off rate. The off rate can differ from boot to boot (a pair
  beside a busy task: 0 to 2 of 6 rounds in most boots, 5 of 5 in one); a test run is one boot, and its escape
  is the mixture over boots, which the pooled rate understates.

`check()` refuses a bar with fewer than MIN_BOOTS calibration boots, a false-failure rate above 1/200 or an
escape rate above 1/20; the test calls `judge()`, which checks first and then applies the verdict. Rounds of one
boot are treated as independent draws; calibrating over many boots and pooling their rounds is what keeps a bad
boot from hiding. A flaky test gets more rounds or a better workload from this file, never a looser bar by hand.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import paths

CALIBRATION_DIR = paths.REPO / "docs" / "test-calibration"
MIN_BOOTS = 10
MAX_FALSE_FAILURE = 1 / 200
MAX_ESCAPE = 1 / 20
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Bar:
    name: str  # the calibration file's stem
    figure: str  # what one round measures, for messages and the calibration file
    bar: float
    higher: bool  # True: a round reaches the bar when figure >= bar; False: when figure <= bar
    rounds: int  # rounds per scheduler in one boot of the test
    need: int  # default rounds that must reach the bar
    gap: int  # default rounds reaching it minus off rounds reaching it, at least

    def reached(self, figures) -> int:
        return sum(1 for x in figures if (x >= self.bar if self.higher else x <= self.bar))

    def passes(self, on_reached: int, off_reached: int) -> bool:
        return on_reached >= self.need and on_reached - off_reached >= self.gap

    def pass_probability(self, p_on: float, p_off: float) -> float:
        from scipy.stats import binom
        k = self.rounds
        return sum(binom.pmf(a, k, p_on) * binom.pmf(b, k, p_off)
                   for a in range(k + 1) for b in range(k + 1) if self.passes(a, b))

    def false_failure(self, p_on: float, p_off: float) -> float:
        return 1.0 - self.pass_probability(p_on, p_off)

    def escape(self, p_off: float) -> float:
        return self.pass_probability(p_off, p_off)


def on_rate_low(reached: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Lower end of the one-sided Clopper-Pearson interval of a success rate (0 with no data or no success)."""
    from scipy.stats import beta
    if n == 0 or reached == 0:
        return 0.0
    return float(beta.ppf(1 - confidence, reached, n - reached + 1))


def off_rate_high(reached: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Upper end of the one-sided Clopper-Pearson interval of a success rate (1 with no data or all successes)."""
    from scipy.stats import beta
    if n == 0 or reached == n:
        return 1.0
    return float(beta.ppf(confidence, reached + 1, n - reached))


def calibration_path(name: str) -> Path:
    return CALIBRATION_DIR / f"{name}.json"


def load(name: str) -> dict:
    p = calibration_path(name)
    if not p.exists():
        return {"name": name, "boots": []}
    return json.loads(p.read_text())


@dataclass
class Assessment:
    boots: int
    on_rounds: int
    on_reached: int
    off_rounds: int
    off_reached: int
    p_on: float
    p_off: float
    false_failure: float
    escape: float

    def line(self) -> str:
        return (f"{self.boots} boots: default {self.on_reached}/{self.on_rounds} rounds reach the bar (p_on >= "
                f"{self.p_on:.3f}), off {self.off_reached}/{self.off_rounds} (p_off <= {self.p_off:.3f}); "
                f"false failure {self.false_failure:.2e} (at most {MAX_FALSE_FAILURE:.3g}), escape "
                f"{self.escape:.2e} (at most {MAX_ESCAPE:.3g})")


def assess(bar: Bar, calibration: dict) -> Assessment:
    """The rates of a bar under its recorded boots (each {"on": [figures], "off": [figures]})."""
    on = [x for b in calibration["boots"] for x in b["on"]]
    off = [x for b in calibration["boots"] for x in b["off"]]
    s, t = bar.reached(on), bar.reached(off)
    p_on, p_off = on_rate_low(s, len(on)), off_rate_high(t, len(off))
    return Assessment(boots=len(calibration["boots"]), on_rounds=len(on), on_reached=s, off_rounds=len(off),
                      off_reached=t, p_on=p_on, p_off=p_off, false_failure=false_failure(bar, calibration, p_on, p_off),
                      escape=escape(bar, calibration))


def false_failure(bar: Bar, calibration: dict, p_on: float, p_off: float) -> float:
    """The bar's false-failure rate under @calibration: at the pooled rates' ends @p_on and @p_off, or the mean
    over boots of the rate at each boot's own on and off rates when that is larger (a boot whose off side reaches
    the bar in most rounds fails the test whatever the pooled rates say)."""
    by_boot = [bar.false_failure(bar.reached(b["on"]) / len(b["on"]), bar.reached(b["off"]) / len(b["off"]))
               for b in calibration["boots"] if b["on"] and b["off"]]
    mixed = sum(by_boot) / len(by_boot) if by_boot else 0.0
    return max(bar.false_failure(p_on, p_off), mixed)


def escape(bar: Bar, calibration: dict) -> float:
    """The bar's escape rate under @calibration: at the pooled off rate, or the mean over boots of the rate at
    each boot's own off rate when that is larger (1 with no off rounds)."""
    off = [x for b in calibration["boots"] for x in b["off"]]
    if not off:
        return 1.0
    by_boot = [bar.escape(bar.reached(b["off"]) / len(b["off"])) for b in calibration["boots"] if b["off"]]
    return max(bar.escape(bar.reached(off) / len(off)), sum(by_boot) / len(by_boot))


def problems(bar: Bar, a: Assessment) -> list[str]:
    out = []
    if a.boots < MIN_BOOTS:
        out.append(f"{bar.name}: {a.boots} calibration boots, at least {MIN_BOOTS} needed "
                   f"(python -m lab.thresholds calibrate {bar.name} --boots {MIN_BOOTS - a.boots})")
    if a.false_failure > MAX_FALSE_FAILURE:
        out.append(f"{bar.name}: false failure {a.false_failure:.2e} > {MAX_FALSE_FAILURE:.3g}: more rounds or "
                   "a better workload")
    if a.escape > MAX_ESCAPE:
        out.append(f"{bar.name}: escape {a.escape:.2e} > {MAX_ESCAPE:.3g}: the off switch reaches the bar too "
                   "often for this test to catch it")
    return out


def design(bar: Bar, calibration: dict, max_rounds: int = 12) -> Bar | None:
    """The bar with the fewest rounds (then the smallest need, then the largest gap) whose false-failure and
    escape rates meet the limits under @calibration's recorded rounds; None if none does within @max_rounds.
    `bar` and `higher` stay as they are: the figure's bar is what the mechanism is for, not a tuning knob."""
    from dataclasses import replace
    probe = assess(replace(bar, rounds=1, need=1, gap=0), calibration)
    p_on, p_off = probe.p_on, probe.p_off
    for rounds in range(1, max_rounds + 1):
        for need in range(1, rounds + 1):
            for gap in range(need, 0, -1):
                b = replace(bar, rounds=rounds, need=need, gap=gap)
                if (false_failure(b, calibration, p_on, p_off) <= MAX_FALSE_FAILURE
                        and escape(b, calibration) <= MAX_ESCAPE):
                    return b
    return None


def check(bar: Bar) -> Assessment:
    a = assess(bar, load(bar.name))
    bad = problems(bar, a)
    assert not bad, "; ".join(bad) + " | " + a.line()
    return a


def judge(bar: Bar, on: list[float], off: list[float]) -> None:
    """The test's verdict on one boot's rounds, after checking the bar against its calibration."""
    a = check(bar)
    assert len(on) == len(off) == bar.rounds, (bar.rounds, on, off)
    s, t = bar.reached(on), bar.reached(off)
    assert bar.passes(s, t), (f"{bar.figure}: default {on} ({s} reach {bar.bar}, need {bar.need}), off {off} "
                              f"({t}; gap {s - t}, need {bar.gap}) | calibration: {a.line()}")


# The measuring functions of the tests, by bar name: a test module registers its own with @measures(BAR), so the
# calibration runs the code the test runs.
MEASURES: dict[str, tuple[Bar, Callable[[Path], tuple[list[float], list[float]]]]] = {}


def measures(bar: Bar):
    def register(fn):
        MEASURES[bar.name] = (bar, fn)
        return fn
    return register


def import_lab_tests() -> None:
    """Import every lab test module so that their @measures register. They are not a package: like pytest, put
    their folder on sys.path and import them by file name (under pytest this finds the modules it imported)."""
    folder = paths.REPO / "lab" / "tests"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    for p in sorted(folder.glob("test_*_lab.py")):
        importlib.import_module(p.stem)


def registered() -> dict:
    """The bars the lab tests register, by name (from the lab.thresholds module the tests import, which is not
    this one when this file runs as __main__)."""
    import_lab_tests()
    return importlib.import_module("lab.thresholds").MEASURES


def _commit() -> str:
    r = subprocess.run(["git", "-C", str(paths.REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    return r.stdout.strip() or "unknown"


def record(bar: Bar, on: list[float], off: list[float], when: str | None = None, commit: str | None = None) -> Path:
    """Append one boot's rounds to the bar's calibration file (written whole through a temporary file)."""
    cal = load(bar.name)
    cal.update(name=bar.name, figure=bar.figure)
    cal["boots"].append({"on": on, "off": off, "commit": commit or _commit(),
                         "date": when or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
    p = calibration_path(bar.name)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(cal, indent=1) + "\n")
    tmp.replace(p)
    return p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.thresholds", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate", help="run a test's measuring function in N boots and record every round")
    c.add_argument("name")
    c.add_argument("--boots", type=int, default=MIN_BOOTS)
    sub.add_parser("show", help="every registered bar against its calibration")
    d = sub.add_parser("design", help="the fewest rounds, and their need and gap, that a calibration allows")
    d.add_argument("name")
    args = ap.parse_args(argv)
    reg = registered()
    if args.cmd == "show":
        if not reg:
            print("thresholds: no lab test registers a bar")
        bad = 0
        for name, (bar, _) in sorted(reg.items()):
            a = assess(bar, load(name))
            issues = problems(bar, a)
            bad += bool(issues)
            print(f"{name}: {bar.figure} {'>=' if bar.higher else '<='} {bar.bar}, {bar.rounds} rounds, need "
                  f"{bar.need}, gap {bar.gap}: {a.line()}" + "".join(f"\n  {i}" for i in issues))
        return 1 if bad else 0
    if args.cmd == "design" and args.name in reg:
        bar = reg[args.name][0]
        cal = load(args.name)
        b = design(bar, cal)
        if b is None:
            print(f"{args.name}: no design within 12 rounds meets the limits: a better workload is needed")
            return 1
        print(f"{args.name}: rounds={b.rounds}, need={b.need}, gap={b.gap} | {assess(b, cal).line()}")
        return 0
    if args.name not in reg:
        print(f"thresholds: no test measures {args.name!r}; known: {', '.join(sorted(reg)) or 'none'}",
              file=sys.stderr)
        return 2
    bar, fn = reg[args.name]
    for i in range(args.boots):
        with tempfile.TemporaryDirectory() as tmp:
            on, off = fn(Path(tmp))
        p = record(bar, on, off)
        print(f"calibrate {bar.name} [{i + 1}/{args.boots}]: default {on}, off {off} -> {p}", flush=True)
    print(assess(bar, load(bar.name)).line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
