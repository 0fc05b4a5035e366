#!/usr/bin/env bash
# Load time of a >= 400 MB model: mmap (zero-copy) against --no-mmap (read into buffers).
# Generates the 110m F32 shape (512 MiB) once, then runs `loom run -n 1` REPS times each way and
# prints the "load time" lines. The first run of each warms the page cache; cold-cache figures
# need a cache drop (echo 3 > /proc/sys/vm/drop_caches) before each run, where permitted.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REPS=${REPS:-5}
model=${MODEL:-$BUILD/bench-models/110m-f32.gguf}
mkdir -p "$(dirname "$model")"
[ -f "$model" ] || "$BUILD/loom" gen-model --preset 110m --type f32 -o "$model"
echo "model: $model ($(du -m "$model" | cut -f1) MiB)"
for mode in mmap no-mmap; do
  flag=""; [ $mode = no-mmap ] && flag=--no-mmap
  for i in $(seq 0 "$REPS"); do
    t=$("$BUILD/loom" run -m "$model" -p x -n 1 -t 2 $flag 2>&1 >/dev/null | awk '/^load time/ {print $4}')
    [ "$i" -gt 0 ] && echo "$mode load time: $t ms"
  done
done
