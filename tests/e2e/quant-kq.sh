#!/usr/bin/env bash
# A kq fixture (random weights, real K-quant / i-quant blocks) must load and run in `loom run`, and
# print the same greedy text mapped with 1 thread, read with 2, and with two layers on a
# simulated device (the kernels and the summation order do not depend on any of these).
# usage: quant-kq.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
run=("$bin" run -m "$model" -p "Once upon a time" -n 24 --temp 0)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
a=$("${run[@]}" -t 1 2>"$err") || { echo "FAIL -t 1:"; cat "$err"; exit 1; }
b=$("${run[@]}" -t 2 --no-mmap 2>"$err") || { echo "FAIL -t 2 --no-mmap:"; cat "$err"; exit 1; }
c=$(LOOM_SIM_DEVICES=1 "${run[@]}" -t 2 -ngl 2 2>"$err") || { echo "FAIL -ngl 2:"; cat "$err"; exit 1; }
grep -q "sim0" "$err" || { echo "FAIL: nothing was placed on sim0"; cat "$err"; exit 1; }
[ -n "$a" ] || { echo "FAIL: no text"; exit 1; }
[ "$a" = "$b" ] || { echo "FAIL: -t 1 and -t 2 --no-mmap differ:"; echo "$a"; echo "$b"; exit 1; }
[ "$a" = "$c" ] || { echo "FAIL: the CPU and -ngl 2 differ:"; echo "$a"; echo "$c"; exit 1; }
echo "ok: the same text in every mode: $a"
