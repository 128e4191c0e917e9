#!/bin/sh
# Start/stop cycles of scx_locality under load, then kill -9 of its agent: the system must keep running and
# sched_ext must go back to "disabled" every time.
# usage: start-stop.sh CYCLES [SCHED_ARGS...]
cycles=${1:-20}; shift
n=$(nproc)
state() { cat /sys/kernel/sched_ext/state; }
wait_state() {  # wait_state WANT TENTHS
    i=0
    while [ "$(state)" != "$1" ] && [ $i -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done
    [ "$(state)" = "$1" ]
}
stress-ng --cpu "$n" --fork 2 --switch 2 --timeout 3600s --quiet &
load=$!
c=0
while [ $c -lt "$cycles" ]; do
    scx_locality "$@" > /tmp/ss.log 2>&1 &
    pid=$!
    wait_state enabled 600 || { echo "cycle $c: never enabled"; cat /tmp/ss.log; kill $load; exit 1; }
    sleep 0.5
    kill -INT $pid; wait $pid; rc=$?
    [ $rc -eq 0 ] || { echo "cycle $c: agent exited $rc"; cat /tmp/ss.log; kill $load; exit 1; }
    wait_state disabled 300 || { echo "cycle $c: still $(state) after stop"; kill $load; exit 1; }
    c=$((c + 1))
    echo "start-stop: cycle $c/$cycles clean at $(cut -d' ' -f1 /proc/uptime) s"
done
echo "start-stop: $cycles clean cycles"
scx_locality "$@" > /tmp/ss.log 2>&1 &
pid=$!
wait_state enabled 600 || { echo "kill -9: never enabled"; kill $load; exit 1; }
sleep 1
kill -KILL $pid
wait_state disabled 300 || { echo "kill -9: state stuck at $(state)"; kill $load; exit 1; }
kill -0 $load 2>/dev/null || { echo "kill -9: the load died with the scheduler"; exit 1; }
echo "kill -9: sched_ext back to disabled; load still running"
kill -INT $load; wait $load
exit 0
