for d in /sys/devices/system/node/node[0-9]*; do echo "$(basename $d) $(cat $d/cpulist)"; done
for round in alone stress; do
  if [ $round = stress ]; then stress-ng --affinity $(nproc) --affinity-rand --aggressive -t 10 >/dev/null 2>&1; fi
  hackbench -p -T -g 1 -f 1 -l 1500000 >/dev/null 2>&1 & HB=$!
  for i in 1 2 3 4; do sleep 3; echo "== $round t=$((i*3))"; scx_locality explain $HB | sed -n '/threads:/,/process:/p;/last decisions/,$p'; done
  wait $HB
done
echo "== stats"; timeout 2 scx_locality --monitor 1 | grep -i "xnode" | head -3
