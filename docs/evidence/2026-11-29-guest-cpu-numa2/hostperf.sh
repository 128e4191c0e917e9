#!/bin/bash
# $1 sched, $2 out
cd /work/main
export LOCALITY_CACHE=/var/cache/locality LOCALITY_SCHED_BIN=/tmp/bins/main-5ce07b9
bin/lab run --machine numa2 --no-build --sched $1 -- 'sleep 3; wakelat -m 2 -t 4 -r 12 -w 1 -c 256 | grep -E "p50|requests_per"' > $2.lab 2>&1 &
L=$!
for i in $(seq 1 60); do P=$(pgrep -f "qemu-system-x86_64 -accel tcg" | head -1); [ -n "$P" ] && break; sleep 0.5; done
# wait until the scheduler is in and wakelat runs: watch for the lab's console
sleep 10
sleep 8
echo "qemu pid $P"; perf record -q -F 499 -p $P -o $2.data -- sleep 6 2>&1 | tail -2
wait $L
perf report -i $2.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40 > $2.txt; perf report -i $2.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -8 >> $2.txt
grep -E "p50|requests" $2.lab
