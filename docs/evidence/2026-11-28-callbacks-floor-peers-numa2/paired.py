import json, sys, math, collections
import gzip, os


def read(path):
    """A results.json, or the results.json.gz it was stored as here."""
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        return gzip.open(path + '.gz', 'rt')
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)

from scipy import stats
d = json.load(read(sys.argv[1]))
base = sys.argv[2]
figs = sys.argv[3].split(",") if len(sys.argv) > 3 else None
vals = collections.defaultdict(lambda: collections.defaultdict(dict))
for ri, r in enumerate(d["runs"]):
    for s in r["steps"]:
        for c in s["cases"]:
            if c.get("figures"):
                vals[(s["bench"], c["label"])][s["sched"]][ri] = c["figures"]
for (b, l), per in vals.items():
    print(f"== {b} {l}")
    names = figs or list(next(iter(next(iter(per.values())).values())).keys())
    for n in names:
        out = []
        for sched, runs in per.items():
            xs = [runs[k].get(n) for k in sorted(runs)]
            m = sum(x for x in xs if x) / max(1, len([x for x in xs if x]))
            cell = f"{sched}: {m:.4g}"
            if sched != base and base in per:
                rs = [math.log(runs[k][n] / per[base][k][n]) for k in runs if k in per[base] and runs[k].get(n) and per[base][k].get(n)]
                if len(rs) >= 2:
                    t = stats.ttest_1samp(rs, 0)
                    cell += f" (x{math.exp(sum(rs)/len(rs)):.2f} p {t.pvalue:.3f})"
            out.append(cell)
        print(f"  {n}: " + " | ".join(out))
