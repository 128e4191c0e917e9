for d in /sys/devices/system/node/node[0-9]*; do echo "$(basename $d) $(cat $d/cpulist)"; done
ip addr add 127.0.0.2/8 dev lo 2>/dev/null; netserver -D -L 127.0.0.1 -p 12865 >/dev/null 2>&1 & sleep 1
for i in 1 2 3; do
  netperf -H 127.0.0.1 -p 12865 -l 3 -t TCP_RR -P 0 -- -r 64,64 >/dev/null & NP=$!
  sleep 1
  echo "== run $i: netperf $NP"; scx_locality explain $NP
  for p in $(pgrep -x netserver); do echo "== run $i: netserver $p"; scx_locality explain $p | sed -n '1,12p;/last decisions/,$p'; done
  wait $NP
done
