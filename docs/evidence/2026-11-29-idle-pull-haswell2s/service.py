# SPDX-License-Identifier: GPL-2.0-only
# Per boot, at half load: the workers' service time (request_p50_us), wake-up p50 and requests/s of scx_locality
# against eevdf, read from the raw wakelat outputs of each run folder; geometric mean ratios and a t-test of their logs.
# Usage: python service.py results.json [results.json ...]  (the run folders named there must still exist)
import json,sys,os,math,re
from scipy import stats
rs=[];ws=[];qs=[]
for f in sys.argv[1:]:
  d=json.load(open(f)); base=os.path.dirname(f)
  for r in d['runs']:
    got={}
    for s in r['steps']:
      if s['bench']!='wakelat' or s['sched'] not in ('eevdf','scx_locality'): continue
      for c in s['cases']:
        if c['label']!='half': continue
        p=os.path.join(base,c['files']['out'])
        if not os.path.exists(p): p=os.path.join(r['run_dir'],os.path.basename(c['files']['out']))
        if not os.path.exists(p): continue
        t=open(p).read()
        g=lambda k: float(re.search(k+r':\s*([0-9.]+)',t).group(1))
        got[s['sched']]=(g('request_p50_us'),g('wakeup_p50_us'),g('requests_per_s'))
    if len(got)==2:
      e,l=got['eevdf'],got['scx_locality']
      print(f"{os.path.basename(base)[:30]} run {r['run']}: svc {e[0]:.0f}/{l[0]:.0f} wake {e[1]:.0f}/{l[1]:.0f} req {e[2]:.0f}/{l[2]:.0f}")
      rs.append(math.log(l[0]/e[0])); ws.append(math.log(l[1]/e[1])); qs.append(math.log(l[2]/e[2]))
for n,x in (('service p50',rs),('wakeup p50',ws),('requests',qs)):
  print(n, f"x{math.exp(sum(x)/len(x)):.2f} p {stats.ttest_1samp(x,0).pvalue:.3f} n {len(x)}")
