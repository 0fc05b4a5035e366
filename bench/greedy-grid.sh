#!/usr/bin/env bash
# The greedy stories260K grid the device-machine scripts check a tree with: tests/e2e/greedy.sh on
# the converted model and on the reference engine's file, for each -ngl, each set of extra
# `loom run` flags, with and without a prompt, JOBS runs at a time. Prints the failing runs (and
# the start of the first two logs) and last one line "N identical, M different (of T)".
# usage: [JOBS=8] [S260=/tmp/s260.gguf] bench/greedy-grid.sh LOOM MODELS_DIR LOG_DIR "NGL ..." [FLAGS ...]
#   S260: stories260K.bin converted by `loom convert-llama2c` (made here when it is not there)
#   FLAGS: one word per variant, its flags split at spaces ("-fa on" "-fa off"; "" for none);
#   default: one variant without extra flags. LOG_DIR is emptied first.
set -u
loom=$1 models=$2 logs=$3 ngls=$4; shift 4
[ $# -gt 0 ] || set -- ""
greedy=$(dirname "$0")/../tests/e2e/greedy.sh
s260=${S260:-/tmp/s260.gguf}
[ -f "$s260" ] || "$loom" convert-llama2c --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" -o "$s260" 2>/dev/null
rm -rf "$logs"; mkdir -p "$logs"; n=0
for m in "$s260" "$models/stories260K-llamacpp.gguf"; do
  for ngl in $ngls; do
    for extra in "$@"; do
      for mode in prompt noprompt; do
        n=$((n+1))
        ( if bash "$greedy" "$loom" "$m" "$models/stories260K-greedy.txt" $mode -t 2 -ngl $ngl $extra > "$logs/$n.log" 2>&1; then
            echo ok > "$logs/$n.res"; else echo "FAIL: $m ngl $ngl $extra $mode" > "$logs/$n.res"; fi ) &
        while [ "$(jobs -r | wc -l)" -ge "${JOBS:-8}" ]; do sleep 0.1; done
      done
    done
  done
done
wait
grep -h FAIL "$logs"/*.res | head
for f in $(grep -l FAIL "$logs"/*.res | head -2); do head -12 "${f%.res}.log"; done
echo "$(grep -l '^ok' "$logs"/*.res | wc -l) identical, $(grep -h FAIL "$logs"/*.res | wc -l) different (of $n)"
