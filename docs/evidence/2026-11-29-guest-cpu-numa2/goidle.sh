snap() { awk '/^cpu/ {s+=$3; g+=$4; t+=$5; tl+=$6; rt+=$7; rd+=$8; pc+=$9} END {print s, g, t, tl, rt, rd, pc}' /proc/schedstat; }
grep -E "^(RES|CAL|IWI)" /proc/interrupts | awk '{s=0; for(i=2;i<=9;i++) s+=$i; print $1, s}' > /tmp/i0
a=$(snap); s0=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
wakelat -m 2 -t 4 -r 8 -w 1 -c 256 | grep -E "p50|requests_per"
b=$(snap); s1=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
echo "schedstat before: $a"; echo "schedstat after: $b"; echo "stat before: $s0"; echo "stat after: $s1"
grep -E "^(RES|CAL|IWI)" /proc/interrupts | awk '{s=0; for(i=2;i<=9;i++) s+=$i; print $1, s}' > /tmp/i1; paste /tmp/i0 /tmp/i1
