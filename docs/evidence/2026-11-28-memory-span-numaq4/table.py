import json, sys, math, collections
import gzip, os


def read(path):
    """A results.json, or the results.json.gz it was stored as here."""
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        return gzip.open(path + '.gz', 'rt')
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)

from scipy import stats
d = json.load(read(sys.argv[1]))
vals = collections.defaultdict(lambda: collections.defaultdict(list))  # (bench,label) -> sched -> [figs per boot]
for r in d["runs"]:
    for s in r["steps"]:
        for c in s["cases"]:
            if c.get("figures"):
                vals[(s["bench"], c["label"])][s["sched"]].append(c["figures"])
for (b, l), per in vals.items():
    print(f"== {b} {l}")
    names = list(next(iter(per.values()))[0].keys())
    for n in names:
        row = []
        for sched, runs in per.items():
            row.append(f"{sched}: " + " ".join(f"{x.get(n, float('nan')):.3g}" for x in runs))
        line = f"  {n:20s} " + " | ".join(row)
        if n.startswith("ops") and "eevdf" in per and "scx_locality" in per:
            a = per["eevdf"]; bb = per["scx_locality"]
            rs = [math.log(y[n] / x[n]) for x, y in zip(a, bb) if x.get(n) and y.get(n)]
            if len(rs) > 1:
                t = stats.ttest_1samp(rs, 0)
                line += f"  ratio x{math.exp(sum(rs)/len(rs)):.2f} p {t.pvalue:.3f}"
        print(line)
