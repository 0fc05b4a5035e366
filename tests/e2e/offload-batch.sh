#!/usr/bin/env bash
# Prompt batches of >= 32 tokens run their CPU layers' matrix products on the offload device
# (weights copied over as split inputs): the command line's output with LOOM_SCHED_OFFLOAD_BATCH=0
# and =32 must equal the CPU-only run. (That the extra splits happen, test-multi-device counts
# through the scheduler's accessors.)
# usage: offload-batch.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt=$(for i in $(seq 1 12); do printf 'Once upon a time there was a llama. '; done)
"$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 2 >"$tmp/cpu" 2>/dev/null || { echo "CPU run failed"; exit 1; }
for ob in 0 32; do
  LOOM_SCHED_OFFLOAD_BATCH=$ob LOOM_SIM_DEVICES=1 "$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 2 -ngl 2 \
    >"$tmp/sim$ob" 2>"$tmp/err$ob" || { echo "sim run failed ($ob)"; cat "$tmp/err$ob"; exit 1; }
  cmp -s "$tmp/cpu" "$tmp/sim$ob" || { echo "output with offload batch $ob differs from the CPU"; exit 1; }
done
echo "identical output with and without batch offload"
