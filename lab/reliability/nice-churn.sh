#!/bin/sh
# Nice changes under load: every worker's nice value is changed at random, many times a second.
# usage: nice-churn.sh SECONDS
secs=${1:-20}
n=$(nproc)
stress-ng --cpu "$n" --switch 2 --timeout "${secs}s" --quiet &
load=$!
end=$(( $(cut -d. -f1 /proc/uptime) + secs - 1 ))
changes=0
while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
    for pid in $(pgrep stress-ng); do
        renice -n $(( $(od -An -N1 -tu1 /dev/urandom) % 40 - 20 )) -p $pid > /dev/null 2>&1 && changes=$((changes + 1))
    done
    sleep 0.1
done
wait $load
rc=$?
echo "nice-churn: $changes nice changes"
[ $changes -gt 0 ] && exit $rc
exit 1
