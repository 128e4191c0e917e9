T=/sys/kernel/tracing; mount -t tracefs nodev $T 2>/dev/null
echo 16384 > $T/buffer_size_kb
for e in sched_waking sched_wakeup sched_switch; do echo 1 > $T/events/sched/$e/enable; done
echo 0 > $T/tracing_on; echo > $T/trace
wakelat -m 2 -t 2 -r 4 -w 1 -c 256 > /tmp/wl.txt &
sleep 3; echo 1 > $T/tracing_on; sleep 1; echo 0 > $T/tracing_on; wait
cat /tmp/wl.txt
echo BEGIN-TRACE; cat $T/trace | gzip -c | base64; echo END-TRACE
