#!/usr/bin/env bash
# One device-machine session for prompt speed on CUDA (issue 23): two prebuilt trees side by side
# (BASE: the commit before, NEW: this one; each a folder with loom, test-cuda and libloom-cuda.so),
# the fused-attention test-ops cases and their --perf figures on both, the 7B F16 benchmarks
# alternating BASE and NEW (pp512 with its spread over -r 5, pp2048, -pg 4000,64, tg128 at depth
# 0 and 4096, -fa 0 and 1), a per-kernel profile of pp2048, and NEW's correctness gates (full
# test-ops, test-cuda, greedy stories260K, compute-sanitizer). Logs go to $OUT.
# usage: BASE=dir NEW=dir [VARIANTS="name=dir ..."] bench/gpu-pp.sh MODELS_DIR [steps...]
#   VARIANTS: more trees measured beside NEW (op tests, --perf, the -fa 1 benchmarks, memcheck)
#   TREES: the trees the benchmarks run (default "base new" and the variants)
#   steps: gen fa bench profile fagates gates (default: all, in that order)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-gen fa bench profile fagates gates}
DEST=${OUT:-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
M7=/tmp/7b-f16.gguf
T0=$(date +%s)
log() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/pp-base /tmp/pp-new && cp "$BASE"/* /tmp/pp-base/ && cp "$NEW"/* /tmp/pp-new/
VARS=""
for v in ${VARIANTS:-}; do mkdir -p /tmp/pp-${v%%=*} && cp "${v#*=}"/* /tmp/pp-${v%%=*}/ && VARS="$VARS ${v%%=*}"; done
# each tree's loom loads the libloom-cuda.so beside it
need7b() { if [ -n "${GEN:-}" ]; then wait $GEN; GEN=; log "7B generated: $(tail -1 "$DEST/gen.log")"; fi; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nproc
for s in $steps; do
  case $s in
  gen) # in the background, while the op tests run
    [ -f $M7 ] || { /tmp/pp-new/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 > "$DEST/gen.log" 2>&1 & GEN=$!; } ;;
  fa)
    for w in new $VARS; do
      timeout 60 /tmp/pp-$w/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT -v > "$DEST/fa-$w.log" 2>&1; log "$w test-ops -o FLASH_ATTN_EXT rc=$?"
      grep -vE "^  ok" "$DEST/fa-$w.log" | cut -c1-220 | head -20
      grep -E "^  ok.*f16\[" "$DEST/fa-$w.log" | awk '{for(i=1;i<=NF;i++) if($i=="nmse") print $(i+1)}' | sort -g | tail -3 | tr '\n' ' '; echo "(largest NMSE of the F16 K/V cases)"
    done
    for w in ${TREES:-base new $VARS}; do
      timeout 60 /tmp/pp-$w/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT --perf > "$DEST/fa-perf-$w.log" 2>&1
      log "$w --perf rc=$?"; grep -E "GB/s" "$DEST/fa-perf-$w.log" | cut -c1-220 | tail -2
    done ;;
  bench)
    need7b
    for w in ${TREES:-base new $VARS}; do
      fa=0,1; [ $w = base ] || [ $w = new ] || fa=1
      log "$w: pp512 pp2048 pg4000,64 (-fa $fa; -r 5), tg128 at depth 0 and 4096 (-fa 1)"
      timeout 120 /tmp/pp-$w/loom bench -m $M7 -p 512,2048 -n 0 -pg 4000,64 -fa $fa -ngl 99 -r 5 2>&1 | grep -E "pp|pg" | tee -a "$DEST/bench-$w.md"
      timeout 90 /tmp/pp-$w/loom bench -m $M7 -p 0 -n 128 -d 0,4096 -fa 1 -ngl 99 -r 2 2>&1 | grep -E "tg" | tee -a "$DEST/bench-$w.md"
    done
    for w in ${SPREAD_TREES-base new base new}; do
      log "$w: pp512 spread (-fa 1, -r 5)"
      timeout 60 /tmp/pp-$w/loom bench -m $M7 -p 512 -n 0 -fa 1 -ngl 99 -r 5 2>&1 | grep -E "pp512" | tee -a "$DEST/bench-$w.md"
    done ;;
  profile)
    need7b
    for fa in ${PROFILE_FA:-1 0}; do
      LOOM_CUDA_PARAMS=profile=1 timeout 60 /tmp/pp-new/loom bench -m $M7 -p 2048 -n 0 -fa $fa -ngl 99 -r 1 > "$DEST/profile-pp2048-fa$fa.log" 2>&1
      log "NEW profile pp2048 -fa $fa"; grep -vE "^\| (---|model)" "$DEST/profile-pp2048-fa$fa.log" | cut -c1-170 | head -24
    done ;;
  gates)
    # test-ops, test-cuda and the greedy texts side by side (one GPU holds them all), then memcheck
    B=/tmp/pp-new
    ( timeout 200 $B/loom test-ops -b CUDA0 > "$DEST/test-ops.log" 2>&1; echo "rc=$?" >> "$DEST/test-ops.log" ) &
    ( timeout 200 $B/test-cuda > "$DEST/test-cuda.log" 2>&1; echo "rc=$?" >> "$DEST/test-cuda.log" ) &
    $B/loom convert-llama2c --model "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" -o /tmp/s260.gguf 2>/dev/null
    bash bench/greedy-grid.sh $B/loom "$MODELS" /tmp/pp-e2e "0 3 99" "-fa on" "-fa off" > /tmp/pp-e2e.txt 2>&1
    wait
    head -n -1 /tmp/pp-e2e.txt | head -20
    log "NEW e2e greedy: $(tail -1 /tmp/pp-e2e.txt)"
    log "NEW test-ops -b CUDA0: $(tail -1 "$DEST/test-ops.log")"; grep -E "FAIL|passed" "$DEST/test-ops.log" | head -12
    log "NEW test-cuda: $(tail -1 "$DEST/test-cuda.log")"
    grep -E "op cases|memory tests|all checks|check\(s\) failed" "$DEST/test-cuda.log"; grep "check failed" "$DEST/test-cuda.log" | cut -c1-250 | head -20
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom run -m /tmp/s260.gguf -p "Once upon a time" -n 24 --temp 0 -ngl 99 -fa on > "$DEST/memcheck.log" 2>&1
    log "NEW compute-sanitizer memcheck rc=$?"; grep -E "ERROR SUMMARY" "$DEST/memcheck.log"; grep -m3 -A6 "Invalid" "$DEST/memcheck.log" ;;
  fagates)
    B=/tmp/pp-new
    # the tensor-core prefill kernel under memcheck (stories260K's heads of 8 never reach it)
    for w in new $VARS; do
      timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/pp-$w/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT > "$DEST/memcheck-fa-$w.log" 2>&1
      log "$w compute-sanitizer memcheck test-ops FLASH_ATTN_EXT rc=$?"; grep -E "ERROR SUMMARY|passed" "$DEST/memcheck-fa-$w.log"; grep -m3 -A6 "Invalid" "$DEST/memcheck-fa-$w.log"
    done
    # a model whose heads (64 values, 32 heads on 4 KV heads) take the prefill kernel: perplexity on CUDA0 vs the CPU
    $B/loom gen-model --preset 1b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o /tmp/1b-f16.gguf > /dev/null 2>&1
    for ngl in 99 0; do
      timeout 60 $B/loom perplexity -m /tmp/1b-f16.gguf -f "$MODELS"/text/stories.txt -c 256 -ngl $ngl 2>&1 | grep -iE "final|estimate" | tail -1 | sed "s/^/-ngl $ngl: /"
    done ;;
  esac
done
log "done"
