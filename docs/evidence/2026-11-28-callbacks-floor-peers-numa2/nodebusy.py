import sys, json, os, collections
import gzip, os


def read(path):
    """A results.json, or the results.json.gz it was stored as here."""
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        return gzip.open(path + '.gz', 'rt')
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
from lab.samples import parse_cpustat
d = json.load(read(sys.argv[1] + '/results.json'))
acc = collections.defaultdict(list)
for ri, r in enumerate(d['runs']):
    for s in r['steps']:
        if s['bench'] != 'wakelat': continue
        for ci, c in enumerate(s['cases']):
            f = f"{sys.argv[1]}/raw/run{ri+1}/s{s['step']}c{ci}.cpu"
            if not os.path.exists(f): continue
            st = parse_cpustat(open(f).read())
            busy = {}
            for cpu, rows in st.items():
                b = rows[-1][1] - rows[0][1]; t = rows[-1][2] - rows[0][2]
                busy[cpu] = b / t if t else 0
            n0 = sum(busy.get(i, 0) for i in range(4)) / 4; n1 = sum(busy.get(i, 0) for i in range(4, 8)) / 4
            acc[(s['sched'], c['label'])].append((round(n0, 2), round(n1, 2)))
for k, v in acc.items(): print(k, v)
