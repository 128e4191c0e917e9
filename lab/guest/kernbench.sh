#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# kernbench.sh JOBS [TREE]: build the configured tree TREE (default /usr/src/kernbench, the "kernbench" image
# extra, lab/kernbench.py) with make -j JOBS in a fresh copy under $TMPDIR (default /tmp), so that every run
# compiles everything, and print "kernbench: elapsed SECONDS s" (the make alone, from /proc/uptime, 10 ms
# resolution; the copy is left out). On a failed build: the end of make's output and make's exit status.
jobs=$1
tree=${2:-/usr/src/kernbench}
[ -n "$jobs" ] && [ "$jobs" -ge 1 ] 2>/dev/null || { echo "usage: kernbench.sh JOBS [TREE]" >&2; exit 2; }
[ -f "$tree/build/Makefile" ] || { echo "kernbench.sh: $tree/build/Makefile is missing" >&2; exit 2; }
work=${TMPDIR:-/tmp}/kernbench.$$
trap 'rm -rf "$work"' EXIT
rm -rf "$work"
cp -a "$tree" "$work" || exit 1
cd "$work/build" || exit 1
t0=$(cut -d' ' -f1 /proc/uptime)
make -j "$jobs" > "$work/make.log" 2>&1
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
if [ $rc -ne 0 ]; then
    tail -n 20 "$work/make.log"
    echo "kernbench: make -j $jobs failed with exit status $rc"
    exit $rc
fi
echo "kernbench: make -j $jobs: $(find . -name '*.o' | wc -l) objects"
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "kernbench: elapsed %.2f s\n", b - a }'
