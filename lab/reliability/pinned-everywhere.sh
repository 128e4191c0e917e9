#!/bin/sh
# A task pinned to each CPU, on every CPU at once, plus unpinned load: no pinned task may be left in a queue
# that no allowed CPU reads. Each pinned worker must finish its fixed amount of work.
# usage: pinned-everywhere.sh BOGO_OPS
ops=${1:-2000}
n=$(nproc)
pids=""
for c in $(seq 0 $((n - 1))); do
    taskset -c $c stress-ng --cpu 1 --cpu-ops "$ops" --quiet &
    pids="$pids $!"
done
stress-ng --cpu "$n" --cpu-ops "$((ops * 2))" --quiet &
pids="$pids $!"
rc=0
for p in $pids; do wait $p || rc=1; done
echo "pinned-everywhere: $n pinned workers and the unpinned load finished (rc=$rc)"
exit $rc
