#!/usr/bin/env bash
# Prompt batches of >= 32 tokens run their CPU layers' matrix products on the offload device
# (weights copied over as split inputs). The output must equal the CPU-only run, and the plan
# must show the extra splits (compared with LOOM_SCHED_OFFLOAD_BATCH=0).
# usage: offload-batch.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt=$(for i in $(seq 1 12); do printf 'Once upon a time there was a llama. '; done)
"$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 2 >"$tmp/cpu" 2>/dev/null || { echo "CPU run failed"; exit 1; }
for ob in 0 32; do
  LOOM_SCHED_OFFLOAD_BATCH=$ob LOOM_SIM_DEVICES=1 LOOM_DEBUG=1 "$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 2 -ngl 2 -v \
    >"$tmp/sim$ob" 2>"$tmp/err$ob" || { echo "sim run failed ($ob)"; cat "$tmp/err$ob"; exit 1; }
  cmp -s "$tmp/cpu" "$tmp/sim$ob" || { echo "output with offload batch $ob differs from the CPU"; exit 1; }
done
# the last compute-buffer line is the prompt's batch (the context's warm-up batch on a GPU is logged before it)
splits() { grep "compute buffer" "$1" | tail -1 | sed 's/.*; \([0-9]*\) splits.*/\1/'; }
s0=$(splits "$tmp/err0") s32=$(splits "$tmp/err32")
echo "splits: $s0 without batch offload, $s32 with"
[ "$s32" -gt "$s0" ] || { echo "expected the large batch's matrix products to move to sim0"; exit 1; }
echo "identical output with and without batch offload"
