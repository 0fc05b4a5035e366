#!/usr/bin/env bash
# One device-machine session for the CUDA backend end to end: build (or use binaries carried in
# PREBUILT), the CUDA tests, greedy stories260K on CUDA0 for every -ngl (mmap, --no-mmap,
# zero-copy host weights), compute-sanitizer on a short run, the 7B F16 benchmark, the
# profile breakdowns (LOOM_CUDA_PARAMS=profile=1|2) and the CUDA-graph / fusion on-off variants. Logs go to $OUT.
# usage: [B=build-dir] [PREBUILT=dir] [CMAKE_FLAGS=...] bench/gpu-e2e.sh MODELS_DIR [steps...]
#   (bench/gpu-quant.sh runs the build and testcuda steps through this script)
#   steps: build test testcuda testops e2e sanitize bench7b profile variants ngl16
#   (default: build test e2e sanitize bench7b)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-build test e2e sanitize bench7b}
DEST=${OUT:-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
B=${B:-build-gpu}
M7=/tmp/7b-f16.gguf
log() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
gen7b() { [ -f $M7 ] || $B/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 2>&1 | tail -1; }
for s in $steps; do
  t0=$(date +%s)
  case $s in
  build)
    if [ -n "${PREBUILT:-}" ] && "$PREBUILT/loom" --help > /dev/null 2>&1 && ! ldd "$PREBUILT/test-cuda" | grep -q "not found"; then
      mkdir -p $B && cp "$PREBUILT"/* $B/ && log "using prebuilt binaries from $PREBUILT"
    else
      cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR=ON -DLOOM_SHARED_MODELS="$MODELS" ${CMAKE_FLAGS:-} > "$DEST/build.log" 2>&1 &&
        cmake --build $B -j16 >> "$DEST/build.log" 2>&1 || { tail -30 "$DEST/build.log"; exit 1; }
    fi ;;
  test)
    (cd $B && ctest -j8 --output-on-failure > "$DEST/ctest.log" 2>&1); log "ctest rc=$?"; tail -4 "$DEST/ctest.log"
    grep -E "Failed|\*\*\*" "$DEST/ctest.log" | head ;;
  testcuda)
    timeout 150 $B/test-cuda > "$DEST/test-cuda.log" 2>&1; log "test-cuda rc=$?"
    grep -E "op cases|memory tests|all checks|check\(s\) failed" "$DEST/test-cuda.log"; grep "check failed" "$DEST/test-cuda.log" | cut -c1-250 | head -30 ;;
  testops)
    timeout 100 $B/loom test-ops -b CUDA0 > "$DEST/test-ops.log" 2>&1; log "loom test-ops -b CUDA0 rc=$?"
    grep -E "FAIL|passed" "$DEST/test-ops.log" | head -20 ;;
  e2e)
    $B/loom convert-llama2c --model "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" -o /tmp/s260.gguf 2>/dev/null
    bash bench/greedy-grid.sh $B/loom "$MODELS" /tmp/e2e "0 1 2 3 4 5" "" "--no-mmap" "--no-host-copy" > /tmp/e2e.txt 2>&1
    head -n -1 /tmp/e2e.txt
    log "e2e greedy on CUDA0: $(tail -1 /tmp/e2e.txt)"
    $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 252 --temp 0 -c 512 -ngl 5 2>&1 >/dev/null | tail -3 ;;
  sanitize)
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 24 --temp 0 -ngl 5 > "$DEST/memcheck.log" 2>&1
    log "compute-sanitizer memcheck rc=$?"; grep -E "ERROR SUMMARY" "$DEST/memcheck.log" ;;
  bench7b)
    gen7b
    $B/loom bench -m $M7 -p 512 -n 128 -ngl 99 -r 3 2>&1 | tee "$DEST/bench7b.md" ;;
  profile)
    gen7b
    LOOM_CUDA_PARAMS=profile=1 $B/loom bench -m $M7 -p 512 -n 32 -ngl 99 -r 2 > "$DEST/profile1.log" 2>&1; log "profile=1 (kernels)"
    grep -vE "^\| (---|model)" "$DEST/profile1.log" | cut -c1-170
    for g in 1 0; do
      LOOM_CUDA_PARAMS=graphs=$g,profile=2 $B/loom bench -m $M7 -p 0 -n 64 -ngl 99 -r 1 > "$DEST/profile2-g$g.log" 2>&1
      log "profile=2 (host) graphs=$g"; grep -E "profile|tg" "$DEST/profile2-g$g.log" | cut -c1-330
    done ;;
  variants)
    # VARIANTS: 'ENV=V ...|bench flags' entries separated by ';'
    gen7b
    IFS=';' read -ra vs <<< "${VARIANTS:-LOOM_CUDA_PARAMS=graphs=0|-p 0;LOOM_CUDA_PARAMS=fuse=0|-p 0;LOOM_CUDA_PARAMS=graphs=0,fuse=0|-p 512}"
    for v in "${vs[@]}"; do
      e=${v%|*}; p=${v#*|}
      log "$e ($p)"; env $e $B/loom bench -m $M7 -n 128 $p -ngl 99 -r 2 2>&1 | grep -E "pp|tg" | tee -a "$DEST/variants.md"
    done ;;
  load)
    # load time and speed: uploading (pinned staging), --no-mmap, and zero-copy host weights
    gen7b
    for extra in "" "--no-mmap" "--no-host-copy"; do
      log "loom run -ngl 99 $extra"
      $B/loom run -m $M7 -p "Once upon a time" -n 8 --temp 0 -ngl 99 $extra 2>&1 >/dev/null | grep -E "buffer size|load time|eval time"
    done
    log "host memory after load (RSS) with upload vs zero-copy"
    for extra in "" "--no-host-copy"; do
      /usr/bin/time -f "max RSS %M KiB ($extra)" $B/loom run -m $M7 -p hi -n 1 --temp 0 -ngl 99 $extra 2>&1 >/dev/null | grep "max RSS"
    done ;;
  ngl16)
    gen7b
    $B/loom bench -m $M7 -p 512 -n 32 -ngl 16 -t 16 -r 2 2>&1 | tee -a "$DEST/bench7b.md" ;;
  esac
  log "$s: $(( $(date +%s) - t0 )) s"
done
