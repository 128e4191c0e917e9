#!/bin/sh
# A SCHED_FIFO busy loop on CPU 1 alongside normal load on every CPU: the normal tasks queued behind the hog
# must still run (elsewhere, or in the RT throttling gaps) and the scheduler must not be ejected for a stall.
# usage: fifo-hog.sh SECONDS
secs=${1:-20}
n=$(nproc)
chrt -f 50 taskset -c 1 sh -c "end=\$((\$(cut -d. -f1 /proc/uptime) + $secs)); while [ \$(cut -d. -f1 /proc/uptime) -lt \$end ]; do :; done" &
hog=$!
sleep 1
policy=$(chrt -p $hog)
echo "fifo-hog: $policy"
case "$policy" in *SCHED_FIFO*) ;; *) echo "fifo-hog: the hog is not SCHED_FIFO"; kill $hog; exit 1;; esac
stress-ng --cpu "$n" --switch 2 --timeout "${secs}s" --metrics-brief
rc=$?
wait $hog
exit $rc
