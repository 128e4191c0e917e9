#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Analyse a tracefs sched trace: where did each wake-up land and how long until the wakee ran."""
import re, sys, statistics, collections

LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
KV = re.compile(r'(\w+)=(\S+)')

def node(cpu, per=4):
    return cpu // per

def main(path, comm='wakelat'):
    cur = {}            # cpu -> pid running
    idle_since = {}     # cpu -> ts it went idle (None if busy)
    pending = {}        # wakee pid -> (ts waking, waker cpu, target cpu, target idle?, waker pid)
    res = []
    cnt = collections.Counter()
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if not m:
            continue
        _, pid, cpu, ts, ev, rest = m.groups()
        cpu = int(cpu); ts = float(ts); pid = int(pid)
        if ev == 'sched_switch':
            a, b = rest.split(' ==> ')
            kv = dict(KV.findall(b))
            nxt = int(kv['next_pid'])
            cur[cpu] = nxt
            if nxt == 0:
                idle_since[cpu] = ts
            else:
                idle_since[cpu] = None
            if nxt in pending:
                w = pending.pop(nxt)
                res.append(dict(lat=(ts - w[0]) * 1e6, waker_cpu=w[1], target=w[2], ran=cpu,
                                tidle=w[3], same=w[1] == cpu, node_same=node(w[1]) == node(cpu)))
        elif ev == 'sched_waking':
            kv = dict(KV.findall(rest))
            if kv.get('comm') != comm:
                continue
            wp = int(kv['pid'])
            pending[wp] = (ts, cpu, None, None, pid)
        elif ev == 'sched_wakeup':
            kv = dict(KV.findall(rest))
            wp = int(kv['pid'])
            if wp in pending:
                t = int(kv['target_cpu'])
                w = pending[wp]
                pending[wp] = (w[0], w[1], t, idle_since.get(t) is not None or cur.get(t) == 0, w[4])
    if not res:
        print('no wakeups'); return
    lat = sorted(r['lat'] for r in res)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    print(f'wakeups {len(res)}  p50 {q(.5):.0f}  p90 {q(.9):.0f}  p99 {q(.99):.0f} us')
    for key, f in [('target idle', lambda r: r['tidle']), ('target busy', lambda r: not r['tidle']),
                   ('ran on waker cpu', lambda r: r['same']), ('ran on waker node', lambda r: r['node_same']),
                   ('ran other node', lambda r: not r['node_same'])]:
        sub = sorted(r['lat'] for r in res if f(r))
        if sub:
            print(f'  {key:18s} {len(sub)/len(res)*100:5.1f}%  p50 {sub[len(sub)//2]:.0f}  p90 {sub[int(.9*len(sub))]:.0f} us')
    c = collections.Counter(r['ran'] for r in res)
    print('  ran on cpu:', dict(sorted(c.items())))

if __name__ == '__main__':
    main(*sys.argv[1:])
