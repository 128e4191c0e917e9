#!/bin/sh
# Bad input to scx_locality inside a guest (no scheduler loaded at start): each case must give exactly one line
# on stderr and its documented exit code (README, "Exit codes"). Prints "case NAME: rc=N lines=L: <line>" per
# case; the test on the host reads those.
check() {  # check NAME WANT_RC CMD...
    name=$1; want=$2; shift 2
    "$@" > /tmp/bi.out 2> /tmp/bi.err
    rc=$?
    # only our own line counts: libbpf warnings are not printed for these early failures
    lines=$(grep -c . /tmp/bi.err)
    echo "case $name: rc=$rc lines=$lines: $(head -n 1 /tmp/bi.err)"
    [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ]
}
fail=0
printf '{"llcs": ["0-1", ' > /tmp/truncated.json
printf '{"llcs": ["0-99"]}' > /tmp/badcpu.json
check override-truncated 6 scx_locality --topology-override /tmp/truncated.json || fail=1
check override-unknown-cpu 6 scx_locality --topology-override /tmp/badcpu.json || fail=1
check override-missing 6 scx_locality --topology-override /nonexistent.json || fail=1
check slice-range 2 scx_locality --slice-us 5 || fail=1
check numa-mode 2 scx_locality --numa-balance=sideways || fail=1
check not-root 3 /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups scx_locality || fail=1
# sched_ext already in use: a first instance runs, the second must refuse
scx_locality > /tmp/first.log 2>&1 &
first=$!
i=0
while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
check busy 5 scx_locality || fail=1
kill -INT $first; wait $first
echo "first instance exited $?"
exit $fail
