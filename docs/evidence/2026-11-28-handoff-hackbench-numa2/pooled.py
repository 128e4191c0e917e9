import json, math, sys, collections
import gzip, os


def read(path):
    """A results.json, or the results.json.gz it was stored as here."""
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        return gzip.open(path + '.gz', 'rt')
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)

from scipy import stats
# pooled paired test over several results.json: args: pairs of file:label_new:label_base ...
figs = ["requests","wakeup-p50","wakeup-p90","wakeup-p99","wakeup-p99.9","transactions","time"]
rat = collections.defaultdict(list)
for spec in sys.argv[1:]:
    f, new, base = spec.split("@")
    d = json.load(read(f))
    for r in d["runs"]:
        per = collections.defaultdict(dict)
        for s in r["steps"]:
            for c in s["cases"]:
                if c.get("figures"): per[(s["bench"], c["label"])][s["sched"]] = c["figures"]
        for key, sc in per.items():
            if new in sc and base in sc:
                for n in figs:
                    a, b = sc[new].get(n), sc[base].get(n)
                    if a and b: rat[(key, n)].append(math.log(a / b))
for (key, n), rs in sorted(rat.items()):
    if len(rs) < 2: continue
    t = stats.ttest_1samp(rs, 0)
    print(f"{key[0]} {key[1]} {n}: n={len(rs)} x{math.exp(sum(rs)/len(rs)):.2f} p {t.pvalue:.3f}")
