#!/usr/bin/env bash
# The multi-GPU runs of issue 20, for a machine of two or more GPUs (device kinds nvidia-h200-x2 and
# up): 7B F16 -sm row tg128 against one GPU, -sm layer pp512 against one GPU (target >= 1.6x each),
# greedy stories260K identical on 1 and 2 GPUs with -sm layer (and row), and a Llama-2-70B-shaped
# F16 model (8192 / 28672 / 80 layers / 64 heads / 8 KV heads, ~138 GB, which no single H200 holds)
# with both modes, pp512 and tg128. NVLink multicast (NVLS) stays off. Logs and a summary go to $OUT.
# usage: bench/multi-gpu.sh BUILD_DIR MODELS_DIR [steps...]
#   steps: info greedy bench7b bench70b (default: all). bench70b needs ~140 GB free disk for the
#   model file (not on nvidia-h200-x2, whose disk is 128 GiB: run it on x4 or x8, or set M70 to a
#   path with room).
set -u
B=$(cd "$1" && pwd); MODELS=$(cd "$2" && pwd); shift 2
steps=${*:-info greedy bench7b bench70b}
DEST=${OUT:-multi-gpu-out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
export NCCL_NVLS_ENABLE=0
M7=${M7:-/tmp/7b-f16.gguf}
M70=${M70:-/tmp/70b-shape-f16.gguf}
S260=$MODELS/stories260K-llamacpp.gguf
log() { echo "== $*" | tee -a "$DEST/summary.md"; }
n_gpu=$(nvidia-smi -L | wc -l)
[ "$n_gpu" -ge 2 ] || { echo "multi-gpu.sh: $n_gpu GPU(s); this needs two or more"; exit 1; }
DEV2=CUDA0,CUDA1
for s in $steps; do
  case $s in
  info)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$DEST/gpus.txt"
    nvidia-smi topo -m > "$DEST/topo.txt" 2>&1
    "$B/loom" --list-devices | tee -a "$DEST/summary.md" ;;
  greedy)
    # the same 64 greedy tokens on one GPU, two GPUs by layers, and two GPUs by rows
    for v in "-sm none" "-sm layer -dev $DEV2" "-sm row -dev $DEV2" "-sm layer -dev $DEV2 -ub 2"; do
      "$B/loom" run -m "$S260" -p "Once upon a time" -n 64 --temp 0 -ngl 99 $v --no-display-prompt 2> "$DEST/greedy-err.txt" > "$DEST/greedy.txt" ||
        { log "greedy $v: failed: $(tail -1 "$DEST/greedy-err.txt")"; continue; }
      log "greedy $v: $(md5sum < "$DEST/greedy.txt" | cut -c1-12) $(head -c 60 "$DEST/greedy.txt")"
    done ;;
  bench7b)
    [ -f "$M7" ] || "$B/loom" gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o "$M7" 2>&1 | tail -1
    # alternating one GPU and two, three rounds, in one sitting
    for round in 1 2 3; do
      for v in "-sm none" "-sm row -dev $DEV2"; do
        log "7B F16 tg128 $v (round $round)"
        "$B/loom" bench -m "$M7" -ngl 99 -p 0 -n 128 -r 3 $v 2>&1 | tee -a "$DEST/summary.md"
      done
      for v in "-sm none" "-sm layer -dev $DEV2" "-sm layer -dev $DEV2 -ub 128" "-sm layer -dev $DEV2 -ub 64"; do
        log "7B F16 pp512 $v (round $round)"
        "$B/loom" bench -m "$M7" -ngl 99 -p 512 -n 0 -r 3 $v 2>&1 | tee -a "$DEST/summary.md"
      done
    done ;;
  bench70b)
    if [ ! -f "$M70" ]; then
      avail=$(df -B1G --output=avail "$(dirname "$M70")" | tail -1)
      [ "$avail" -ge 145 ] || { log "bench70b: ${avail} GiB free at $(dirname "$M70"), the model needs ~140: skipped"; continue; }
      "$B/loom" gen-model --dim 8192 --hidden 28672 --layers 80 --heads 64 --kv-heads 8 --vocab 32000 --ctx 4096 --type f16 \
        --tokenizer "$MODELS/tokenizer.bin" -o "$M70" 2>&1 | tail -1
    fi
    ngpu_list=$(seq -s, 0 $((n_gpu - 1)) | sed 's/\([0-9]\+\)/CUDA\1/g')
    for v in "-sm layer -dev $ngpu_list" "-sm row -dev $ngpu_list"; do
      log "70B-shaped F16 pp512 + tg128 $v"
      "$B/loom" bench -m "$M70" -ngl 99 -p 512 -n 128 -r 2 $v 2>&1 | tee -a "$DEST/summary.md"
    done ;;
  *) echo "multi-gpu.sh: unknown step '$s'"; exit 1 ;;
  esac
done
