#!/bin/sh
# stress-ng --aggressive with CPU, fork, affinity (pinning and affinity changes) and context-switch stressors.
# usage: stress-mix.sh SECONDS
secs=${1:-20}
n=$(nproc)
exec stress-ng --aggressive --cpu "$n" --fork 4 --affinity "$n" --affinity-rand --switch 4 --yield 2 \
    --timeout "${secs}s" --metrics-brief
