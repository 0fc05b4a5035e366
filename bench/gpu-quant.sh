#!/usr/bin/env bash
# One device-machine session for quantized weights on CUDA (issue 22): the quantized cases of
# `loom test-ops -b CUDA0`, every quant fixture's greedy text (64 tokens) on CUDA0 (-ngl 99 and a
# partial -ngl) against the CPU's, perplexity on CUDA0 against the CPU's, compute-sanitizer on a
# quantized decode, and the 7B benchmarks (loom gen-model + loom quantize). Logs go to $OUT.
# usage: [B=build-dir] [PREBUILT=dir] [CMAKE_FLAGS=...] bench/gpu-quant.sh MODELS_DIR [steps...]
#   PREBUILT: loom, test-cuda and libloom-cuda.so built elsewhere (step build then copies them)
#   steps: build testcuda testops e2e ppl sanitize sanitize-ops bench7b profile (default: all but
#   sanitize-ops and profile)
#   TYPES: the 7B formats to benchmark (default "Q4_0 Q4_K_M Q8_0 Q6_K")
#   BASE: a second build (e.g. of main) that bench7b runs alternately with B (before/after
#   figures of one sitting); ROUNDS: how many times bench7b runs each (default 1); PP: the prompt
#   length of bench7b (default 512); FIXTURES: the files of e2e, names under MODELS_DIR/quant
#   (default: every quant fixture); SANITIZE: the files of sanitize (default: four fixtures)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-build testcuda testops e2e ppl sanitize bench7b}
DEST=${OUT:-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
B=${B:-/tmp/b-cuda-quant}
M7=/tmp/7b-f16.gguf
log() { echo "== $*"; }
fixtures() { if [ -n "${FIXTURES:-}" ]; then for f in $FIXTURES; do echo "$MODELS/quant/$f"; done; else ls "$MODELS"/quant/stories260K-*.gguf "$MODELS"/quant/kq/*.gguf; fi; }
gen7b() { [ -f $M7 ] || $B/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 2>&1 | tail -1; }
for s in $steps; do
  t0=$(date +%s)
  case $s in
  build | testcuda) # as bench/gpu-e2e.sh does them (the build for the H200 only)
    B=$B OUT=$DEST CMAKE_FLAGS="-DCMAKE_CUDA_ARCHITECTURES=90 ${CMAKE_FLAGS:-}" bash bench/gpu-e2e.sh "$MODELS" $s || exit 1 ;;
  testops)
    timeout 150 $B/loom test-ops -b CUDA0 > "$DEST/test-ops.log" 2>&1; log "loom test-ops -b CUDA0 rc=$?"
    grep -E "FAIL|passed|^mul_mat|^get_rows|^cpy|^dup|^set_rows" "$DEST/test-ops.log" | head -40 ;;
  e2e)
    # greedy text, 64 tokens: the CPU's, then CUDA0 with every layer and with one layer
    n=0; same=0; diff=0
    for m in $(fixtures); do
      $B/loom run -m "$m" -p "Once upon a time" -n 64 --temp 0 -ngl 0 > /tmp/cpu.txt 2> /tmp/cpu.err || { echo "CPU FAIL $m"; tail -2 /tmp/cpu.err; }
      for ngl in 99 1; do
        n=$((n+1))
        if ! $B/loom run -m "$m" -p "Once upon a time" -n 64 --temp 0 -ngl $ngl > /tmp/gpu.txt 2> /tmp/gpu.err; then
          echo "FAIL (exit) $(basename $m) -ngl $ngl"; tail -3 /tmp/gpu.err; diff=$((diff+1)); continue
        fi
        if cmp -s /tmp/cpu.txt /tmp/gpu.txt; then same=$((same+1)); else
          diff=$((diff+1)); echo "DIFF $(basename $m) -ngl $ngl"; echo " cpu: $(head -c 300 /tmp/cpu.txt)"; echo " gpu: $(head -c 300 /tmp/gpu.txt)"; fi
      done
    done
    log "greedy 64 tokens, CUDA0 vs CPU: $same identical, $diff different (of $n)" ;;
  ppl)
    # CUDA0 only: the CPU's figures come from the same command without -ngl (any machine)
    for m in $(fixtures); do
      echo "$(basename $m): CUDA0 $($B/loom perplexity -m "$m" -f "$MODELS/text/stories.txt" -c 128 -b 128 -ngl 99 2>&1 | grep -o "PPL = [0-9.]*" | tail -1)"
    done | tee "$DEST/ppl.log" ;;
  sanitize)
    for m in ${SANITIZE:-"$MODELS/quant/stories260K-Q4_0.gguf" "$MODELS/quant/stories260K-Q4_K_M.gguf" "$MODELS/quant/kq/kq-Q4_K_M.gguf" "$MODELS/quant/kq/kq-Q3_K_M.gguf"}; do
      timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom run -m "$m" -p "Once upon a time" -n 8 --temp 0 -ngl 99 > "$DEST/memcheck-$(basename $m).log" 2>&1
      log "memcheck $(basename $m) rc=$?"; grep -E "ERROR SUMMARY" "$DEST/memcheck-$(basename $m).log"
    done ;;
  sanitize-ops)
    # every MUL_MAT / GET_ROWS / CPY case (rows of 96, 3200, 11008, 14336 included) under memcheck
    for op in MUL_MAT GET_ROWS CPY; do
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom test-ops -b CUDA0 -o $op > "$DEST/memcheck-ops-$op.log" 2>&1
      log "memcheck test-ops $op rc=$?"; grep -E "ERROR SUMMARY|passed" "$DEST/memcheck-ops-$op.log"
    done ;;
  bench7b)
    gen7b
    for t in ${TYPES:-Q4_0 Q4_K_M Q8_0 Q6_K}; do
      q=/tmp/7b-$t.gguf
      [ -f $q ] || $B/loom quantize $M7 $q $t 16 > /dev/null 2>&1 || { echo "quantize $t failed"; continue; }
      log "$t: $(stat -c %s $q) bytes"
      for r in $(seq ${ROUNDS:-1}); do
        for bin in $B ${BASE:-}; do
          log "$t with $bin (round $r)"
          $bin/loom bench -m $q -p ${PP:-512} -n 128 -ngl 99 -r 3 2>&1 | grep -E "pp|tg|model" | tee -a "$DEST/bench7b.md"
        done
      done
    done ;;
  profile)
    # per-kernel breakdown of token generation, and where the weights live
    for t in ${TYPES:-Q4_K_M}; do
      q=/tmp/7b-$t.gguf
      $B/loom run -m $q -p "Once upon a time" -n 8 --temp 0 -ngl 99 2>&1 >/dev/null | grep -E "buffer size|eval time"
      LOOM_CUDA_PARAMS=profile=1 $B/loom bench -m $q -p 0 -n 16 -ngl 99 -r 1 > "$DEST/profile1-$t.log" 2>&1; log "profile=1 $t"
      grep -vE "^\| (---|model)" "$DEST/profile1-$t.log" | cut -c1-170 | head -45
    done ;;
  esac
  log "$s: $(( $(date +%s) - t0 )) s"
done
