# SPDX-License-Identifier: GPL-2.0-only
# Functions for lab jobs (sourced by /lab/job). Records for the host go to ttyS1, one per line, starting
# with "@@"; the host (lab/run.py) parses them. Everything a person should see goes to the console.
# `bin/lab bench --host` sources this file on the host itself (lab/host.py): it sets LAB_CTL to a records
# file, LAB_TMP to its temporary folder and LAB_SYS to the sysfs to read (a fake one in its tests).

LAB_CTL=${LAB_CTL:-/dev/ttyS1}
LAB_TMP=${LAB_TMP:-/tmp}
LAB_SYS=${LAB_SYS:-/sys}
# Appended (>>), so that a records file is never truncated; the same as > on the guest's serial port.
lab_rec() { echo "@@$*" >> "$LAB_CTL"; }

# One canonical text form of the topology, compared byte for byte with what the host expects.
lab_topology() {
    for n in $(ls -d /sys/devices/system/node/node[0-9]* | sed 's/.*node//' | sort -n); do
        echo "node $n $(cat /sys/devices/system/node/node$n/cpulist) $(cat /sys/devices/system/node/node$n/distance)"
    done
    for c in /sys/devices/system/cpu/cpu[0-9]*; do
        for idx in $c/cache/index[0-9]*; do
            [ "$(cat $idx/level 2>/dev/null)" = 3 ] && echo "llc $(cat $idx/shared_cpu_list)"
        done
    done | sort -u
    for c in /sys/devices/system/cpu/cpu[0-9]*; do
        echo "smt $(cat $c/topology/thread_siblings_list)"
    done | sort -u
}

lab_check_topology() {
    lab_topology > "$LAB_TMP/topology.actual"
    while read -r line; do lab_rec "topo $line"; done < "$LAB_TMP/topology.actual"
    if cmp -s "$LAB_TMP/topology.actual" /lab/topology.expected; then
        lab_rec "topology ok"
        return 0
    fi
    lab_rec "topology mismatch"
    return 1
}

lab_sched_state() { cat "$LAB_SYS/kernel/sched_ext/state" 2>/dev/null || echo missing; }
lab_sched_ops() { cat "$LAB_SYS/kernel/sched_ext/root/ops" 2>/dev/null; }

# lab_sched_start OPS TIMEOUT_S CMD...: start a sched_ext scheduler in the background and wait until the
# kernel says it is enabled with that ops name. Sets LAB_SCHED_PID.
lab_sched_start() {
    ops="$1"; timeout="$2"; shift 2
    if [ ! -d "$LAB_SYS/kernel/sched_ext" ]; then
        lab_rec "sched-start fail no-sched-ext"; return 1
    fi
    if [ "$(lab_sched_state)" != disabled ]; then
        lab_rec "sched-start fail busy $(lab_sched_ops)"; return 1
    fi
    "$@" > "$LAB_TMP/sched.log" 2>&1 &
    LAB_SCHED_PID=$!
    t0=$(cut -d' ' -f1 /proc/uptime)
    i=0
    while [ $i -lt $((timeout * 10)) ]; do
        # crates.io builds of published schedulers register "NAME_VERSION_TARGET" as their ops name.
        cur_ops=$(lab_sched_ops)
        if [ "$(lab_sched_state)" = enabled ] && { [ "$cur_ops" = "$ops" ] || [ "${cur_ops%%_*}" = "$ops" ]; }; then
            lab_rec "sched-start ok $ops $t0 $(cut -d' ' -f1 /proc/uptime)"
            return 0
        fi
        if ! kill -0 $LAB_SCHED_PID 2>/dev/null; then
            wait $LAB_SCHED_PID; rc=$?
            lab_rec "sched-start fail exited $rc"
            cat "$LAB_TMP/sched.log"
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    lab_rec "sched-start fail timeout state=$(lab_sched_state) ops=$(lab_sched_ops)"
    kill -INT $LAB_SCHED_PID 2>/dev/null
    return 1
}

# lab_sched_stop: SIGINT the scheduler, wait for it and for the kernel to read "disabled" again.
lab_sched_stop() {
    [ -n "$LAB_SCHED_PID" ] || return 0
    if kill -0 $LAB_SCHED_PID 2>/dev/null; then alive=1; else alive=0; fi
    kill -INT $LAB_SCHED_PID 2>/dev/null
    i=0
    while kill -0 $LAB_SCHED_PID 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $LAB_SCHED_PID 2>/dev/null; then
        kill -KILL $LAB_SCHED_PID 2>/dev/null
        lab_rec "sched-stop killed"
        i=0
        while kill -0 $LAB_SCHED_PID 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    fi
    if kill -0 $LAB_SCHED_PID 2>/dev/null; then
        # Not even SIGKILL ends it: it is stuck in the kernel. Waiting would hang the whole job, so record it,
        # show where it sleeps (its threads' kernel stacks on the console, every blocked task in dmesg) and
        # go on; the steps after this one will find sched_ext busy.
        echo "lab: scheduler pid $LAB_SCHED_PID is stuck in the kernel; its threads' stacks:"
        for t in /proc/$LAB_SCHED_PID/task/*; do
            echo "== ${t##*/} $(cat $t/comm 2>/dev/null) state $(cut -d' ' -f3 $t/stat 2>/dev/null)"
            cat $t/stack 2>/dev/null
        done
        echo w > /proc/sysrq-trigger 2>/dev/null
        lab_rec "sched-stop rc=-1 alive_at_stop=$alive stuck=1 state=$(lab_sched_state)"
        LAB_SCHED_PID=
        return 0
    fi
    wait $LAB_SCHED_PID; rc=$?
    i=0
    while [ "$(lab_sched_state)" != disabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    lab_rec "sched-stop rc=$rc alive_at_stop=$alive state=$(lab_sched_state)"
    # The job sends the log once, as sched-<step>.log (lab/run.py job_script).
    LAB_SCHED_PID=
}

# lab_put_file NAME PATH: send a guest file to the host's run folder (base64 over ttyS1).
lab_put_file() {
    [ -f "$2" ] || return 0
    lab_rec "file-begin $1"
    base64 "$2" >> "$LAB_CTL"
    lab_rec "file-end $1"
}

lab_finish() {
    dmesg > "$LAB_TMP/kernel.log"
    lab_put_file kernel.log "$LAB_TMP/kernel.log"
    lab_rec "done"
}
