#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""CPU time of the wakelat threads in a tracefs sched_switch trace."""
import re,sys,collections
LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
KV = re.compile(r'(\w+)=(\S+)')
for path in sys.argv[1:]:
    run={} ; tot=collections.Counter(); names={}
    t0=t1=None
    for line in open(path, errors='replace'):
        m=LINE.match(line)
        if not m: continue
        _,pid,cpu,ts,ev,rest=m.groups(); ts=float(ts); cpu=int(cpu)
        t0 = ts if t0 is None else t0; t1=ts
        if ev!='sched_switch': continue
        a,b=rest.split(' ==> ')
        pa=dict(KV.findall(a)); nb=dict(KV.findall(b))
        if cpu in run:
            pid0,st=run[cpu]; tot[pid0]+=ts-st
        run[cpu]=(int(nb['next_pid']),ts); names[int(nb['next_pid'])]=nb['next_comm']
    span=t1-t0
    wl=sum(v for p,v in tot.items() if names.get(p)=='wakelat')
    print(path, f"span {span:.2f}s wakelat cpus {wl/span:.2f}", sorted(((round(v/span,2),p) for p,v in tot.items() if names.get(p)=='wakelat'),reverse=True))
