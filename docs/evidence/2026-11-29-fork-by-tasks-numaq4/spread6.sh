for r in 1 2 3 4 5 6; do
sleep 2; pids=''; i=0; while [ $i -lt 4 ]; do numajob -m 4 -p 1000000000 -i $i & pids="$pids $!"; i=$((i + 1)); done; sleep 1
ns=''; for p in $pids; do c=$(cut -d' ' -f39 /proc/$p/stat); n=$(ls -d /sys/devices/system/cpu/cpu$c/node* | sed 's/.*node//'); ns="$ns $n"; done; echo "spread-round: $r $ns"
kill $pids; wait
done
