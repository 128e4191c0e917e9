#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Guest side of lab/tests/test_service_lab.py, run as the job's command in the "systemd" image flavour (the
# host's systemd is PID 1): installs services/ as the README says, then checks, waiting on states with timeouts:
#   enable    systemctl enable --now -> enabled (hooked onto multi-user.target) and started
#   start     ... -> sched_ext enabled, ops "locality..."; the statistics socket answers --monitor
#   quiet     no journal line of the unit while it runs QUIET_S s (memlocal makes it migrate pages meanwhile)
#   stop      systemctl stop -> exit 0, Result=success, sched_ext disabled; the agent did migrate pages
#   boot      multi-user.target started again, as a boot would -> the enabled unit comes up
#   crash     kill -9 of its main PID -> restarted no sooner than RestartSec, enabled again, enable_seq higher
#   bad-flag  a bad flag in /etc/default/scx_locality -> failed at once with exit 2 and never restarted
#   limit     sched_ext held by another scheduler -> BURST tries (exit 5), then the start limit and no more
# Prints "svc-check NAME ok|FAIL DETAIL" per check and "svc: KEY VALUE" figures. The first failed check ends the
# script (exit 1) after showing the unit's status and journal: the later checks build on the earlier ones.
# Usage: service-check.sh RESTART_SEC START_LIMIT_BURST QUIET_S   (the first two from the unit file)
RESTART_SEC=$1
BURST=$2
QUIET_S=$3
UNIT=scx_locality
SCX=/sys/kernel/sched_ext
DEFAULTS=/etc/default/scx_locality
export SYSTEMD_COLORS=0 SYSTEMD_URLIFY=0 SYSTEMD_PAGER=
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# awk_true EXPR: an awk comparison as an exit status
awk_true() { awk "BEGIN { exit !($1) }"; }
fig() { echo "svc: $*"; }
check() {  # check NAME CONDITION_STATUS DETAIL
    if [ "$2" = 0 ]; then
        echo "svc-check $1 ok $3"
        return
    fi
    echo "svc-check $1 FAIL $3"
    systemctl status --no-pager $UNIT
    show_journal 40
    exit 1
}
prop() { systemctl show -P "$1" $UNIT; }
# wait_until TIMEOUT_S CMD...: run CMD every 0.1 s until it succeeds (0) or TIMEOUT_S have passed (1)
wait_until() {
    limit=$(awk -v a="$(now)" -v t="$1" 'BEGIN { print a + t }')
    shift
    until "$@"; do
        awk_true "$(now) >= $limit" && return 1
        sleep 0.1
    done
}
sched_on() {
    [ "$(cat $SCX/state 2>/dev/null)" = enabled ] || return 1
    case "$(cat $SCX/root/ops 2>/dev/null)" in locality*) return 0 ;; esac
    return 1
}
sched_off() { [ "$(cat $SCX/state 2>/dev/null)" = disabled ]; }
sched_desc() { echo "state=$(cat $SCX/state) ops=$(cat $SCX/root/ops 2>/dev/null) seq=$(cat $SCX/enable_seq)"; }
unit_desc() {
    echo "active=$(prop ActiveState)/$(prop SubState) result=$(prop Result) main=$(prop ExecMainCode):$(prop ExecMainStatus) restarts=$(prop NRestarts)"
}
# The unit's journal: its own output and PID 1's messages about it, one line per message.
journal() { journalctl -q --no-pager -o cat -u $UNIT; }
# Lines counted per event leave out PID 1's warnings about the unit file (systemd 252 and the keys of 254+),
# which come when the unit is loaded (enable, daemon-reload), not when it starts or stops; "load" shows them.
jlines() { journal | grep -vc "Unknown key"; }
jhas() { journal | grep -q -- "$1"; }
# jsettle: the journal's line count once it has not changed for 1 s (journald writes a moment after the fact)
jsettle() {
    a=$(jlines)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 1
        b=$(jlines)
        [ "$a" = "$b" ] && break
        a=$b
    done
    echo "$a"
}
show_journal() { echo "--- journal of $UNIT (last $1 lines)"; journal | tail -n "$1"; echo "---"; }
t_all=$(now)

# --- install, as the README says (the binary is in the image already, at /usr/local/bin/scx_locality;
# busybox has no install(1): cp and chmod do the same)
mkdir -p /etc/systemd/system /etc/default
cp /lab/services/scx_locality.service /etc/systemd/system/scx_locality.service
cp /lab/services/scx_locality.default $DEFAULTS
chmod 0644 /etc/systemd/system/scx_locality.service $DEFAULTS
fig systemd "$(systemctl --version | head -n 1)"
# multi-user.target is active (default.target wants it), so once enabled the unit stays loaded: its exit status
# and restart count can be read after a stop. (An inactive unit nothing refers to is unloaded at once, and
# systemd 252 logs its unknown keys again each time it is loaded anew.)
systemctl daemon-reload
j0=$(jsettle)
t0=$(now)
systemctl enable --now $UNIT 2>&1 | sed 's/^/svc: enable-says /'
[ "$(systemctl is-enabled $UNIT)" = enabled ] && [ -L /etc/systemd/system/multi-user.target.wants/scx_locality.service ]
check enable $? "is-enabled=$(systemctl is-enabled $UNIT)"
# what systemd made of the unit file: keys it does not know are logged by PID 1 when it loads the unit
journalctl -q --no-pager -o cat _PID=1 | grep 'scx_locality.service:' | sort | uniq -c | sed 's/^ */svc: pid1-says /'
fig restart_usec "$(prop RestartUSec)"
fig start_limit "$(prop StartLimitBurst) in $(prop StartLimitIntervalUSec)"
[ "$(prop LoadState)" = loaded ]
check load $? "LoadState=$(prop LoadState) ExecStart=$(prop ExecStart | cut -c1-120)"

# --- start (by enable --now)
wait_until 90 sched_on
check start $? "after $(since "$t0") s: $(sched_desc); $(unit_desc)"
fig start_s "$(since "$t0")"
wait_until 30 jhas "scx_locality: attached"
check attached-line $? "$(journal | grep -m1 'scx_locality: attached' | cut -c1-160)"
j1=$(jsettle)
fig journal_start_lines $((j1 - j0))
show_journal $((j1 - j0))
# the statistics socket (RuntimeDirectory=scx under ProtectSystem=strict) answers a monitor
wait_until 20 test -S /run/scx/root/stats
check stats-socket $? "$(ls -l /run/scx/root/stats 2>&1)"
# (half-second reports, as the peers accept: at least two must come)
scx_locality --monitor 0.5 > /tmp/monitor.log 2>&1 &
monitor=$!
wait_until 30 sh -c "[ \$(grep -c '^\[scx_locality\]' /tmp/monitor.log) -ge 2 ]"
ok=$?
kill -INT $monitor
wait $monitor
check monitor $ok "$(grep -c '^\[scx_locality\]' /tmp/monitor.log) reports: $(head -n 2 /tmp/monitor.log | tr '\n' ' ' | cut -c1-160)"

# the kernel shows the version --version prints: "0.1.0-gSHA x86_64-..." -> "locality_0.1.0_gSHA_x86_64_..."
want="locality_$(scx_locality --version | cut -d' ' -f2- | tr -c 'A-Za-z0-9._\n' '_')"
[ "$(cat /sys/kernel/sched_ext/root/ops)" = "$want" ]
check ops-name $? "ops=$(cat /sys/kernel/sched_ext/root/ops) version=$(scx_locality --version)"

# --- quiet: QUIET_S s of running, with pages to migrate, add no journal line
memlocal -n 32 -f 1 -c 0 -s "$QUIET_S" -p 5000 > /tmp/memlocal.log 2>&1
j2=$(jsettle)
fig journal_lines_while_running "$((j2 - j1)) in ${QUIET_S}+ s"
[ "$j2" = "$j1" ]
check quiet $? "$((j2 - j1)) new lines while running"
[ "$j2" = "$j1" ] || show_journal $((j2 - j1))
fig memlocal_final_local "$(grep memlocal_final_local /tmp/memlocal.log | cut -d' ' -f2)"

# --- stop
t0=$(now)
systemctl stop $UNIT
rc=$?
wait_until 30 sched_off
off=$?
fig stop_s "$(since "$t0")"
[ $rc = 0 ] && [ $off = 0 ] && [ "$(prop ExecMainCode)" = 1 ] && [ "$(prop ExecMainStatus)" = 0 ] &&
    [ "$(prop Result)" = success ] && [ "$(prop ActiveState)" = inactive ] && jhas "Deactivated successfully"
check stop $? "rc=$rc $(sched_desc); $(unit_desc)"
wait_until 20 jhas "scx_locality-final-stats"
j3=$(jsettle)
fig journal_stop_lines $((j3 - j2))
show_journal $((j3 - j2)) | cut -c1-200
migrated=$(journal | grep -o '"memory_pages_migrated":[0-9]*' | tail -n 1 | cut -d: -f2)
[ "${migrated:-0}" -gt 0 ]
check migrated $? "memory_pages_migrated=${migrated:-none} (move_pages under the unit's hardening)"

# --- boot: enabled, so started with multi-user.target (started again here, as a boot would)
systemctl reset-failed $UNIT
systemctl start multi-user.target
wait_until 90 sched_on
check boot-start $? "$(sched_desc); $(unit_desc)"

# --- crash: kill -9 -> restarted after the back-off
seq0=$(cat $SCX/enable_seq)
pid0=$(prop MainPID)
nr0=$(prop NRestarts)
kill -9 "$pid0"
t_kill=$(now)
new_main() { p=$(prop MainPID); [ "$p" != 0 ] && [ "$p" != "$pid0" ]; }
wait_until $((${RESTART_SEC%.*} + 60)) new_main
delay=$(since "$t_kill")
wait_until 90 sched_on
on=$?
seq1=$(cat $SCX/enable_seq)
nr1=$(prop NRestarts)
fig restart_delay_s "$delay"
[ $on = 0 ] && [ "$seq1" -gt "$seq0" ] && [ "$nr1" -gt "$nr0" ] && awk_true "$delay >= $RESTART_SEC - 0.3"
check crash $? "killed pid $pid0; new pid $(prop MainPID) after $delay s (RestartSec $RESTART_SEC); enable_seq $seq0 -> $seq1; NRestarts $nr0 -> $nr1; $(sched_desc)"
systemctl stop $UNIT
wait_until 30 sched_off
check crash-stop $? "$(sched_desc); $(unit_desc)"

# --- bad flag: failed at once, exit 2, no restart
systemctl reset-failed $UNIT
sed -i 's/^SCX_LOCALITY_FLAGS=.*/SCX_LOCALITY_FLAGS="--slice-us=0"/' $DEFAULTS
j4=$(journal | wc -l)
systemctl start $UNIT
is_failed() { [ "$(prop ActiveState)" = failed ]; }
wait_until 30 is_failed
nr0=$(prop NRestarts)
sleep "$(awk -v r="$RESTART_SEC" 'BEGIN { print r + 1 }')"  # a restart, if one were due, would be under way now
[ "$(prop ActiveState)" = failed ] && [ "$(prop ExecMainStatus)" = 2 ] && [ "$(prop NRestarts)" = "$nr0" ] &&
    sched_off
check bad-flag $? "$(unit_desc); $(journal | tail -n +$((j4 + 1)) | grep -m1 'scx_locality: error' | cut -c1-140)"
cp /lab/services/scx_locality.default $DEFAULTS
systemctl reset-failed $UNIT

# --- start limit: another scheduler holds sched_ext, so every try exits 5; BURST tries, then no more
/usr/local/bin/scx_locality > /tmp/manual.log 2>&1 &
manual=$!
wait_until 90 sched_on
check limit-setup $? "a scx_locality outside the unit: $(sched_desc)"
j5=$(journal | wc -l)
t0=$(now)
systemctl start $UNIT
# systemd 252 logs "Start request repeated too quickly" and leaves Result= at the last try's (exit-code)
limit_hit() {
    [ "$(prop ActiveState)" = failed ] &&
        journal | tail -n +$((j5 + 1)) | grep -q "Start request repeated too quickly"
}
wait_until $((BURST * (${RESTART_SEC%.*} + 2) + 60)) limit_hit
hit=$?
fig start_limit_hit_after_s "$(since "$t0")"
tries() { journal | tail -n +$((j5 + 1)) | grep -c 'another sched_ext scheduler is loaded'; }
jsettle > /dev/null
n1=$(tries)
sleep "$(awk -v r="$RESTART_SEC" 'BEGIN { print 2 * r + 1 }')"  # no try after the limit
n2=$(tries)
fig start_limit_tries "$n1"
[ $hit = 0 ] && [ "$n1" = "$BURST" ] && [ "$n2" = "$n1" ] && limit_hit
check limit $? "tries $n1 then $n2 (burst $BURST); $(unit_desc)"
kill -INT $manual
wait $manual
mrc=$?
wait_until 30 sched_off
check limit-cleanup $? "the outside instance exited $mrc; $(sched_desc)"
systemctl reset-failed $UNIT

fig total_s "$(since "$t_all")"
