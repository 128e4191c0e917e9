#!/bin/sh
# cgroup v2 moves and cpuset changes while loaded: workers hop between two cgroups whose cpusets keep changing.
# usage: cgroup-moves.sh SECONDS
secs=${1:-20}
n=$(nproc)
cg=/sys/fs/cgroup
echo "+cpuset +cpu" > $cg/cgroup.subtree_control
mkdir -p $cg/a $cg/b
half=$((n / 2))
echo "0-$((half - 1))" > $cg/a/cpuset.cpus
echo "$half-$((n - 1))" > $cg/b/cpuset.cpus
stress-ng --cpu "$n" --switch 2 --timeout "${secs}s" --quiet &
load=$!
end=$(( $(cut -d. -f1 /proc/uptime) + secs - 1 ))
flip=0
moves=0
while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
    for pid in $(pgrep stress-ng); do
        if [ $(( (pid + flip) % 2 )) -eq 0 ]; then dest=a; else dest=b; fi
        echo $pid > $cg/$dest/cgroup.procs 2>/dev/null && moves=$((moves + 1))
    done
    if [ $flip -eq 0 ]; then echo "0-$((n - 1))" > $cg/a/cpuset.cpus; flip=1
    else echo "0-$((half - 1))" > $cg/a/cpuset.cpus; flip=0; fi
    echo "$(( $(od -An -N1 -tu1 /dev/urandom) % 50 + 50 ))" > $cg/b/cpu.weight
    sleep 0.2
done
wait $load
rc=$?
echo "cgroup-moves: $moves moves"
# A run that moved nothing tested nothing.
[ $moves -gt 0 ] && exit $rc
exit 1
