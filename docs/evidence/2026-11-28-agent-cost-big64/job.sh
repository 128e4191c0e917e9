a=$(pgrep -o -x scx_locality)
snap() { echo "@@snap $1 $(cut -d' ' -f1 /proc/uptime)"; for t in /proc/$a/task/*; do echo "@@thr $1 $(cat $t/comm) $(cut -d' ' -f1 $t/schedstat)"; done; }
echo "@@agent $a"
for i in $(seq 500); do sleep 1000 & done
sleep 15; snap idle0; sleep 30; snap idle1
memspan -N 2 -S 128 -P 8 -r 45 -w 1 -s 1 & m=$!
snap span0; wait $m; snap span1; sleep 15; snap after1
