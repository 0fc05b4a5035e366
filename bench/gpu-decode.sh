#!/usr/bin/env bash
# One device-machine session for the decode attention kernel (issue 23: 7B F16 tg128 at depth 4096
# against depth 0): two prebuilt trees side by side (BASE: main, NEW: the branch; each a folder
# with loom, test-cuda and libloom-cuda.so) and NEW's variants (environment settings), NEW's
# correctness gates (the fused op's test-ops cases and compute-sanitizer on them for NEW and each
# variant, test-cuda, greedy stories260K, compute-sanitizer on a fused decode) while the 7B F16 is
# generated, then the 7B benchmarks alternating the trees, an ncu reading of the decode kernel at
# depth 4096 and the per-kernel profile there. Logs go to $OUT/logs.tgz.
# usage: BASE=dir NEW=dir [VARIANTS="name:ENV=V ..."] [TG_TREES=...] [PP_TREES=...] [NCU_TREES=...]
#        [PROFILE_TREES=...] bench/gpu-decode.sh MODELS_DIR [steps...]
#   a tree is base, new or a variant's name; steps: gates bench pp ncu profile (default: all)
set -u
MODELS=$(cd "$1" && pwd); shift
steps=${*:-gates bench pp ncu profile}
OUTD=${OUT:-gpu-out}; mkdir -p "$OUTD"; OUTD=$(cd "$OUTD" && pwd)
DEST=/tmp/declogs; mkdir -p $DEST # one archive comes back (the tool returns at most 8 files)
trap 'tar -czf "$OUTD/logs.tgz" -C /tmp declogs 2>/dev/null' EXIT
M7=/tmp/7b-f16.gguf
T0=$(date +%s)
log() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
# run NAME SECONDS PROGRAM ARGS...: PROGRAM (loom or test-cuda) of tree NAME with its variant's
# environment, stopped after SECONDS
run() {
  local w=$1 t=$2 p=$3 e=; shift 3
  case $w in
  base) timeout $t "$BASE/$p" "$@" ;;
  new) timeout $t "$NEW/$p" "$@" ;;
  *) for v in ${VARIANTS:-}; do [ "${v%%:*}" = "$w" ] && e=${v#*:}; done; env $e timeout $t "$NEW/$p" "$@" ;;
  esac
}
VNAMES=""; for v in ${VARIANTS:-}; do VNAMES="$VNAMES ${v%%:*}"; done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
[ -f $M7 ] || { "$NEW/loom" gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 > "$DEST/gen.log" 2>&1 & GEN=$!; }
need7b() { if [ -n "${GEN:-}" ]; then wait $GEN; GEN=; log "7B generated: $(tail -1 "$DEST/gen.log")"; fi; }
TG="-p 0 -n 128 -d 0,4096 -fa 1 -ngl 99 -r 2"
for s in $steps; do
  case $s in
  gates)
    W=""
    for w in new $VNAMES; do
      run $w 60 loom test-ops -b CUDA0 -o FLASH_ATTN_EXT -v > "$DEST/fa-$w.log" 2>&1; log "$w test-ops -o FLASH_ATTN_EXT rc=$?"
      grep -vE "^  ok" "$DEST/fa-$w.log" | cut -c1-220 | head -8
      ( e=; for v in ${VARIANTS:-}; do [ "${v%%:*}" = "$w" ] && e=${v#*:}; done
        env $e timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$NEW/loom" test-ops -b CUDA0 -o FLASH_ATTN_EXT > "$DEST/memcheck-fa-$w.log" 2>&1
        echo "rc=$?" >> "$DEST/memcheck-fa-$w.log" ) & W="$W $!"
    done
    ( timeout 150 "$NEW/test-cuda" > "$DEST/test-cuda.log" 2>&1; echo "rc=$?" >> "$DEST/test-cuda.log" ) & W="$W $!"
    "$NEW/loom" convert-llama2c --model "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" -o /tmp/s260.gguf 2>/dev/null
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$NEW/loom" run -m /tmp/s260.gguf -p "Once upon a time" -n 24 --temp 0 \
      -ngl 99 -fa on > "$DEST/memcheck-run.log" 2>&1; log "memcheck loom run -fa on rc=$?: $(grep "ERROR SUMMARY" "$DEST/memcheck-run.log")"
    JOBS=8 bash bench/greedy-grid.sh "$NEW/loom" "$MODELS" /tmp/dec-e2e "0 3 99" "-fa on" "-fa off" > "$DEST/greedy.log" 2>&1
    wait $W
    head -n -1 "$DEST/greedy.log" | head -20
    log "NEW e2e greedy: $(tail -1 "$DEST/greedy.log")"
    log "NEW test-cuda: $(tail -1 "$DEST/test-cuda.log")"; grep -E "op cases|all checks|check\(s\) failed" "$DEST/test-cuda.log"
    grep "check failed" "$DEST/test-cuda.log" | cut -c1-200 | head -8
    for w in new $VNAMES; do
      log "$w memcheck test-ops FLASH_ATTN_EXT: $(tail -1 "$DEST/memcheck-fa-$w.log") $(grep "ERROR SUMMARY" "$DEST/memcheck-fa-$w.log") $(grep -E passed "$DEST/memcheck-fa-$w.log")"
    done ;;
  bench)
    need7b
    for w in ${TG_TREES:-base new $VNAMES base new $VNAMES}; do
      log "$w: tg128 at depth 0 and 4096 (-fa 1)"
      run $w 60 loom bench -m $M7 $TG 2>&1 | grep -E "tg" | tee -a "$DEST/bench-$w.md"
    done ;;
  pp)
    need7b
    for w in ${PP_TREES:-base new}; do
      log "$w: pp512 pp2048 pg4000,64 (-fa 1, -r 3)"
      run $w 90 loom bench -m $M7 -p 512,2048 -n 0 -pg 4000,64 -fa 1 -ngl 99 -r 3 2>&1 | grep -E "pp|pg" | tee -a "$DEST/bench-$w.md"
    done ;;
  ncu)
    need7b
    for w in ${NCU_TREES:-base new}; do
      ( e=; d=$NEW; [ $w = base ] && d=$BASE; for v in ${VARIANTS:-}; do [ "${v%%:*}" = "$w" ] && e=${v#*:}; done
        env $e LOOM_CUDA_PARAMS=graphs=0 timeout 90 ncu --clock-control none -k regex:"lc_fa_(vec|ring|merge)" --launch-skip 300 --launch-count 2 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed \
        "$d/loom" bench -m $M7 -p 0 -n 16 -d 4096 -fa 1 -ngl 99 -r 1 > "$DEST/ncu-$w.log" 2>&1 )
      log "$w ncu rc=$?"; grep -E "lc_fa_|duration|dram__|warps_active|grid_size|registers|sm__throughput" "$DEST/ncu-$w.log" | cut -c1-140 | head -16
    done ;;
  profile)
    need7b
    for w in ${PROFILE_TREES:-base new}; do
      LOOM_CUDA_PARAMS=profile=1 run $w 60 loom bench -m $M7 -p 0 -n 32 -d 4096 -fa 1 -ngl 99 -r 1 > "$DEST/profile-$w.log" 2>&1
      log "$w profile=1, tg32 at depth 4096"; grep -E "GPU .* ms per compute|FLASH" "$DEST/profile-$w.log" | cut -c1-150 | head -3
    done ;;
  esac
done
log "done"
