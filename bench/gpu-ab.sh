#!/usr/bin/env bash
# gpu-ab.sh -- token generation of two builds on one GPU, alternating (the lent H200s differ by up to
# 10% from one loan to the next, so a change is only measured against the code before it on the same
# machine): `loom bench -m MODEL -p 0 -n 128 -ngl 99 -r 2`, ROUNDS rounds of A then B.
# usage: bench/gpu-ab.sh LOOM_A LOOM_B MODEL [ROUNDS]   (prints one tg128 line per run, then both lists)
set -u
A=$1; B=$2; M=$3; R=${4:-2}
la=""; lb=""
for i in $(seq "$R"); do
  for w in A B; do
    bin=$A; [ $w = B ] && bin=$B
    t=$("$bin" bench -m "$M" -p 0 -n 128 -ngl 99 -r 2 2>/dev/null | grep tg128 | awk -F'|' '{print $(NF-1)}' | xargs)
    echo "round $i $w: tg128 $t"
    if [ $w = A ]; then la="$la $t;"; else lb="$lb $t;"; fi
  done
done
echo "A ($A):$la"
echo "B ($B):$lb"
