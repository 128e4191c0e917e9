import sys, collections
snaps = {}; thr = collections.defaultdict(dict)
for line in open(sys.argv[1], errors="replace"):
    f = line.split()
    if not f: continue
    if f[0] == "@@snap": snaps[f[1]] = float(f[2])
    elif f[0] == "@@thr": thr[f[1]][f[2]] = thr[f[1]].get(f[2], 0) + int(f[3])
for a, b in [("idle0", "idle1"), ("span0", "span1"), ("span1", "after1")]:
    if a not in snaps or b not in snaps: continue
    dt = snaps[b] - snaps[a]
    per = {k: (thr[b].get(k, 0) - thr[a].get(k, 0)) / 1e9 / dt * 100 for k in thr[b]}
    tot = sum(per.values())
    print(f"{a}->{b} ({dt:.1f} s): agent {tot:.2f}% of a CPU; " + ", ".join(f"{k} {v:.2f}%" for k, v in sorted(per.items()) if v > 0.005))
