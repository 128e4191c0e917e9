#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# One boot of the agent-cost measurement (docs/decisions.md, "The memory agent's idle cost"):
# 500 idle processes for 30 s, then memspan, then 15 s idle. Output in /tmp/scanruns/LABEL.out.
# usage: run.sh LABEL MACHINE BIN TIMEOUT
label=$1 machine=$2 bin=$3 timeout=$4
if [ "$machine" = numaq4 ]; then
  span='memspan -N 2 -S 128 -P 16 -r 45 -w 1 -s 1 & a=$!; memspan -N 2 -S 128 -P 16 -r 45 -w 1 -s 2 & b=$!; wait $a $b'
else
  span='memspan -N 2 -S 128 -P 8 -r 45 -w 1 -s 1 & a=$!; wait $a'
fi
cmd="for i in \$(seq 500); do sleep 1000 & done; sleep 30; echo @@span-start \$(cut -d' ' -f1 /proc/uptime); $span; echo @@span-end \$(cut -d' ' -f1 /proc/uptime); sleep 15"
echo "$cmd" > /tmp/scanruns/$label.cmd
cd /work/wt-scan
export LOCALITY_CACHE=/var/cache/locality LOCALITY_SCHED_BIN=$bin
/usr/bin/time -f "%e s wall" flock /tmp/lab.lock bin/lab run --machine $machine --no-build --sched "scx_locality:-v --stats 5 --memory=spread" --timeout $timeout -- "$cmd" > /tmp/scanruns/$label.out 2>&1
