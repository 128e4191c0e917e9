#!/bin/sh
# CPU hotplug under load: CYCLES offline/online cycles of random CPUs (never CPU 0) while every CPU is busy.
# usage: hotplug.sh CYCLES
cycles=${1:-100}
n=$(nproc)
stress-ng --cpu "$n" --fork 2 --timeout 3600s --quiet &
load=$!
i=0
while [ $i -lt "$cycles" ]; do
    cpu=$(( $(od -An -N2 -tu2 /dev/urandom) % (n - 1) + 1 ))
    echo 0 > /sys/devices/system/cpu/cpu$cpu/online || { echo "offline cpu$cpu failed"; kill $load; exit 1; }
    sleep 0.05
    echo 1 > /sys/devices/system/cpu/cpu$cpu/online || { echo "online cpu$cpu failed"; kill $load; exit 1; }
    i=$((i + 1))
done
kill -INT $load; wait $load
echo "hotplug: $cycles cycles done; online: $(cat /sys/devices/system/cpu/online)"
[ "$(cat /sys/devices/system/cpu/online)" = "0-$((n - 1))" ]
