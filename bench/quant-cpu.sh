#!/usr/bin/env bash
# quant-cpu.sh -- issue 16's CPU speed table: the reference engine and Loom side by side on 110m
# files in the field's formats, alternating (peer, loom, peer, loom) so that the VM's drifting speed
# falls on both. Files: loom gen-model --preset 110m --type f32 ... -o 110m-f32.gguf, then
# llama-quantize 110m-f32.gguf 110m-TYPE.gguf TYPE 2 for TYPE in Q8_0 Q4_0 Q4_K_M Q6_K.
# usage: LOOM=build/loom PEER=../shared/peers/llama.cpp-cpu/bin bench/quant-cpu.sh FILE... [-- bench args]
set -u
LOOM=${LOOM:-build/loom}
PEER=${PEER:-../shared/peers/llama.cpp-cpu/bin}
files=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do files+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(-t 2 -p 128,512 -n 128 -r 2)
uptime
for f in "${files[@]}"; do
  for round in 1 2; do
    echo "== $(basename "$f") round $round: reference"
    "$PEER/llama-bench" -m "$f" "${args[@]}" 2>/dev/null | grep -E "^\| .*(pp|tg)[0-9]"
    echo "== $(basename "$f") round $round: loom"
    "$LOOM" bench -m "$f" "${args[@]}" 2>/dev/null | grep -E "^\| .*(pp|tg)[0-9]"
  done
done
