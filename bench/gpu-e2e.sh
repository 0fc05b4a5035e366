#!/usr/bin/env bash
# One device-machine session for the CUDA backend end to end: build, the whole test suite with a
# GPU present, greedy stories260K on CUDA0 for every -ngl (mmap, --no-mmap, zero-copy host
# weights), compute-sanitizer on a short run, and the 7B F16 benchmark. Logs go to $OUT.
# usage: bench/gpu-e2e.sh MODELS_DIR [steps...]   steps: build test e2e sanitize bench7b (default: all)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-build test e2e sanitize bench7b}
DEST=${OUT:-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
B=build-gpu
log() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for s in $steps; do
  t0=$(date +%s)
  case $s in
  build)
    cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_OPENBLAS=OFF -DLOOM_SHARED_MODELS="$MODELS" > "$DEST/build.log" 2>&1 &&
      cmake --build $B -j16 >> "$DEST/build.log" 2>&1 || { tail -30 "$DEST/build.log"; exit 1; } ;;
  test)
    (cd $B && ctest -j8 --output-on-failure > "$DEST/ctest.log" 2>&1); log "ctest rc=$?"; tail -4 "$DEST/ctest.log"
    grep -E "Failed|\*\*\*" "$DEST/ctest.log" | head ;;
  e2e)
    $B/loom convert-llama2c --model "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" -o /tmp/s260.gguf 2>/dev/null
    ok=0; bad=0
    for m in /tmp/s260.gguf "$MODELS/stories260K-llamacpp.gguf"; do
      for ngl in 0 1 2 3 4 5; do
        for extra in "" "--no-mmap" "--no-host-copy"; do
          for mode in prompt noprompt; do
            if bash tests/e2e/greedy.sh $B/loom "$m" "$MODELS/stories260K-greedy.txt" $mode -t 4 -ngl $ngl $extra > "$DEST/e2e-last.log" 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); echo "FAIL: $m ngl $ngl $extra $mode"; head -12 "$DEST/e2e-last.log"; fi
          done
        done
      done
    done
    log "e2e greedy on CUDA0: $ok identical, $bad different"
    $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 252 --temp 0 -c 512 -ngl 5 2>&1 >/dev/null | tail -6 ;;
  sanitize)
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 24 --temp 0 -ngl 5 > "$DEST/memcheck.log" 2>&1
    log "compute-sanitizer memcheck rc=$?"; grep -E "ERROR SUMMARY" "$DEST/memcheck.log" ;;
  bench7b)
    $B/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o /tmp/7b-f16.gguf 2>&1 | tail -1
    $B/loom bench -m /tmp/7b-f16.gguf -p 512 -n 128 -ngl 99 -r 3 2>&1 | tee "$DEST/bench7b.md"
    $B/loom run -m /tmp/7b-f16.gguf -p "Once upon a time" -n 32 --temp 0 -ngl 99 2>&1 >/dev/null | grep -E "buffer|load time|eval time"
    $B/loom run -m /tmp/7b-f16.gguf -p "Once upon a time" -n 4 --temp 0 -ngl 99 --no-host-copy 2>&1 >/dev/null | grep -E "buffer|load time|eval time"
    $B/loom bench -m /tmp/7b-f16.gguf -p 512 -n 32 -ngl 16 -t 16 -r 2 2>&1 | tee -a "$DEST/bench7b.md" ;;
  esac
  log "$s: $(( $(date +%s) - t0 )) s"
done
