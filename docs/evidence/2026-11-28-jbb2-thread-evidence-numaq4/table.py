import json, sys, math, collections
import gzip, os


def read(path):
    """A results.json, or the results.json.gz it was stored as here."""
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        return gzip.open(path + '.gz', 'rt')
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)

from scipy import stats
d = json.load(read(sys.argv[1]))
vals = collections.defaultdict(lambda: collections.defaultdict(list))
for r in d["runs"]:
    for s in r["steps"]:
        for c in s["cases"]:
            if c.get("figures"):
                vals[(s["bench"], c["label"])][s["sched"]].append(c["figures"])
def paired(per, n, a, b):
    if a not in per or b not in per: return ""
    rs = [math.log(y[n] / x[n]) for x, y in zip(per[a], per[b]) if x.get(n) and y.get(n) and x[n] > 0 and y[n] > 0]
    if len(rs) < 2: return ""
    t = stats.ttest_1samp(rs, 0)
    return f" {b} vs {a}: x{math.exp(sum(rs)/len(rs)):.2f} p {t.pvalue:.3f};"
for (b, l), per in vals.items():
    print(f"== {b} {l}")
    names = list(next(iter(per.values()))[0].keys())
    for n in names:
        row = [f"{sched}: " + " ".join(f"{x.get(n, float('nan')):.3g}" for x in runs) for sched, runs in per.items()]
        line = f"  {n:20s} " + " | ".join(row)
        if n.startswith("ops") or n.startswith("migrated"):
            line += paired(per, n, "eevdf", "scx_locality") + paired(per, n, "scx_locality_baseline", "scx_locality")
        print(line)
