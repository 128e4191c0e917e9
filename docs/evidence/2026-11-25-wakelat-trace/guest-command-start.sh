T=/sys/kernel/tracing; mount -t tracefs nodev $T 2>/dev/null
echo 16384 > $T/buffer_size_kb
for e in sched_wakeup_new sched_migrate_task sched_process_exec; do echo 1 > $T/events/sched/$e/enable; done
echo > $T/trace; echo 1 > $T/tracing_on
wakelat -m 2 -t 2 -r 4 -w 1 -c 256 | grep requests_per_s
echo 0 > $T/tracing_on
echo BEGIN-TRACE; grep -v "comm=locsample\|kworker\|ksoftirq\|rcu_\|migration/" $T/trace | grep "wakelat" | head -300; echo END-TRACE
