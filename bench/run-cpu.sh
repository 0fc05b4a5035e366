#!/usr/bin/env bash
# CPU benchmark table for the README: generates the stories260K / 15m / 110m shapes (untied
# classifier, F32 and F16) with `loom gen-model`, runs `loom bench -t 2 -p 128,512 -n 128`, and
# records the machine. Output: bench/results-cpu.md (and the raw JSON beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODELS=${MODELS:-../shared/models}
OUT=${OUT:-bench/results-cpu.md}
GEN=${GEN:-$BUILD/bench-models}
REPS=${REPS:-3}
mkdir -p "$GEN"
loom=$BUILD/loom
for preset in 260k 15m 110m; do
  for type in f32 f16; do
    f=$GEN/$preset-$type.gguf
    [ -f "$f" ] || $loom gen-model --preset $preset --type $type --tokenizer "$MODELS/tokenizer.bin" -o "$f" 2>/dev/null \
      || $loom gen-model --preset $preset --type $type -o "$f"
  done
done
gcc -O2 -march=native -fopenmp bench/membw.c -o "$BUILD/membw"
{
  echo "# Loom CPU benchmark"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "- memory: $(free -g | awk '/Mem:/ {print $2}') GiB; $("$BUILD/membw" 1024 2)"
  echo "- command: loom bench -t 2 -p 128,512 -n 128 -r $REPS"
  echo
  $loom bench -t 2 -p 128,512 -n 128 -r "$REPS" $(for p in 260k 15m 110m; do for t in f32 f16; do echo -m "$GEN/$p-$t.gguf"; done; done)
} | tee "$OUT"
