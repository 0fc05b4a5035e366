#!/usr/bin/env bash
# One device-machine session for fused attention (FLASH_ATTN_EXT) on CUDA: the op's test-ops cases
# on CUDA0 (and its --perf cases), greedy stories260K with -fa on/off at -ngl 99, compute-sanitizer
# on a -fa on decode, and the 7B F16 benchmarks of issue 23 (depth, pp, prompt + generation,
# first-token latency). Logs go to $OUT.
# usage: [PREBUILT=dir] bench/gpu-attn.sh MODELS_DIR [steps...]
#   steps: build testops e2e sanitize latency bench7b pp (default: all but pp, in that order)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-build testops e2e sanitize latency bench7b}
DEST=${OUT:-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
B=/tmp/b-attn
M7=/tmp/7b-f16.gguf
log() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
gen7b() { [ -f $M7 ] || $B/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 2>&1 | tail -1; }
for s in $steps; do
  t0=$(date +%s)
  case $s in
  build)
    if [ -n "${PREBUILT:-}" ] && LD_LIBRARY_PATH=$PREBUILT:${LD_LIBRARY_PATH:-} "$PREBUILT/loom" --help > /dev/null 2>&1 &&
       ! LD_LIBRARY_PATH=$PREBUILT:${LD_LIBRARY_PATH:-} ldd "$PREBUILT/libloom-cuda.so" | grep -q "not found"; then
      mkdir -p $B && cp "$PREBUILT"/* $B/ && log "using prebuilt binaries from $PREBUILT"
      export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
    else
      cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_SHARED_MODELS="$MODELS" -DCMAKE_CUDA_ARCHITECTURES=90 > "$DEST/build.log" 2>&1 &&
        cmake --build $B -j16 --target loom loom-cuda >> "$DEST/build.log" 2>&1 || { tail -30 "$DEST/build.log"; exit 1; }
    fi ;;
  testops)
    timeout 120 $B/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT -v > "$DEST/test-ops.log" 2>&1; log "test-ops -b CUDA0 -o FLASH_ATTN_EXT rc=$?"
    grep -vE "^  ok" "$DEST/test-ops.log" | cut -c1-220 | head -24
    timeout 60 $B/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT --perf > "$DEST/test-ops-perf.log" 2>&1; log "--perf rc=$?"
    grep -E "GB/s|passed" "$DEST/test-ops-perf.log" | cut -c1-220 | tail -4 ;;
  e2e)
    $B/loom convert-llama2c --model "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" -o /tmp/s260.gguf 2>/dev/null
    n=0; bad=0
    for m in /tmp/s260.gguf "$MODELS/stories260K-llamacpp.gguf"; do
      for fa in on off; do
        for mode in prompt noprompt; do
          n=$((n+1))
          if ! bash tests/e2e/greedy.sh $B/loom "$m" "$MODELS/stories260K-greedy.txt" $mode -t 2 -ngl 99 -fa $fa > /tmp/e2e-$n.log 2>&1; then
            bad=$((bad+1)); echo "FAIL: $m -fa $fa $mode"; head -12 /tmp/e2e-$n.log
          fi
        done
      done
    done
    log "e2e greedy -ngl 99: $((n-bad)) identical, $bad different (of $n)"
    $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 64 --temp 0 -ngl 99 -fa on 2>&1 | grep -iE "flash|eval time" | head -4 ;;
  sanitize)
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 24 --temp 0 -ngl 99 -fa on > "$DEST/memcheck.log" 2>&1
    log "compute-sanitizer memcheck -fa on rc=$?"; grep -E "ERROR SUMMARY" "$DEST/memcheck.log"; grep -m3 -A6 "Invalid" "$DEST/memcheck.log" ;;
  latency)
    gen7b
    for v in "" "LOOM_CUDA_PARAMS=graphs=0"; do
      log "loom run 5-token prompt ${v:-(default)}"
      env $v $B/loom run -m $M7 -p "Once upon a time there" -n 4 --temp 0 -ngl 99 -fa on 2>&1 >/dev/null | grep -E "load time|prompt eval|eval time"
    done ;;
  bench7b)
    gen7b
    timeout 150 $B/loom bench -m $M7 -p 512,2048 -n 128 -fa 0,1 -ngl 99 -r 3 2>&1 | tee "$DEST/bench7b.md"
    timeout 90 $B/loom bench -m $M7 -p 0 -n 128 -d 4096 -fa 0,1 -ngl 99 -r 2 2>&1 | tee -a "$DEST/bench7b.md"
    timeout 90 $B/loom bench -m $M7 -p 0 -n 0 -pg 4000,64 -fa 0,1 -ngl 99 -r 2 2>&1 | tee -a "$DEST/bench7b.md"
    for i in 1 2; do timeout 60 $B/loom bench -m $M7 -p 512 -n 0 -fa 1 -ngl 99 -r 10 2>&1 | grep pp512 | tee -a "$DEST/bench7b.md"; done ;;
  pp)
    # prompt processing only (the prefill kernel), and the pp512 spread against the CPU thread count
    gen7b
    timeout 60 $B/loom bench -m $M7 -p 512,2048 -n 0 -fa 1 -ngl 99 -r 3 2>&1 | grep -E "pp" | tee -a "$DEST/pp.md"
    timeout 40 $B/loom bench -m $M7 -p 0 -n 0 -pg 4000,64 -fa 1 -ngl 99 -r 2 2>&1 | grep -E "pg|pp4000" | tee -a "$DEST/pp.md"
    for t in 16 1 16 1; do
      nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
      timeout 30 $B/loom bench -m $M7 -p 512 -n 0 -fa 0 -ngl 99 -r 10 -t $t 2>&1 | grep pp512 | tee -a "$DEST/pp.md"
    done ;;
  esac
  log "$s: $(( $(date +%s) - t0 )) s"
done
