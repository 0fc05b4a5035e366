#!/usr/bin/env bash
# gpu-check-ab.sh -- one device call that checks a branch against the commit before it. Carried in a
# folder beside it (.devcarry/, ignored by git): house.tar (git archive of the branch), main.tar (of the
# base commit), models/ (stories260K.bin, tok512.bin, tokenizer.bin, stories260K-greedy.txt,
# stories260K-llamacpp.gguf). Then: the branch's build + test-cuda + test-ops + greedy e2e + memcheck; main (27f840e)
# and house tg128 alternating on the 7B F16 model. Logs under $OUT.
# usage: [CARRY=dir] bench/gpu-check-ab.sh   (run from anywhere; OUT names the log folder)
set -u
C=${CARRY:-$(cd "$(dirname "$0")" && pwd)}
MOD=$C/models
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
rm -rf /tmp/h /tmp/m; mkdir -p /tmp/h /tmp/m
tar xf "$C/house.tar" -C /tmp/h && tar xf "$C/main.tar" -C /tmp/m
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
( cd /tmp/m && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_SHARED_MODELS=$MOD > $OUT/main-build.log 2>&1 &&
  cmake --build build-gpu -j6 --target loom-cli >> $OUT/main-build.log 2>&1; echo "main build rc=$?" > /tmp/main-build.rc ) &
cd /tmp/h
bash bench/gpu-e2e.sh $MOD build 2>&1 | tail -5
el "house built"
[ -x build-gpu/loom ] || { tail -30 $OUT/build.log; exit 1; }
( build-gpu/loom gen-model --preset 7b --type f16 --tokenizer $MOD/tokenizer.bin -o /tmp/7b-f16.gguf > /tmp/gen.log 2>&1; echo "gen rc=$?" >> /tmp/gen.log ) &
GEN=$!
bash bench/gpu-e2e.sh $MOD testcuda testops e2e 2>&1 | grep -v '^== .*: [0-9]* s$' | tail -40
el "tests done"
wait $GEN; tail -2 /tmp/gen.log; wait; cat /tmp/main-build.rc
el "7b ready"
bash bench/gpu-ab.sh /tmp/m/build-gpu/loom /tmp/h/build-gpu/loom /tmp/7b-f16.gguf 2 2>&1 | tee $OUT/ab.log
el "ab done"
bash bench/gpu-e2e.sh $MOD sanitize 2>&1 | tail -3
# start-up: the CUDA module is loaded only when the registry is used
for b in /tmp/m/build-gpu/loom /tmp/h/build-gpu/loom; do
  for i in 1 2 3; do /usr/bin/time -f "$b --version: %e s, max RSS %M KiB" $b --version 2>&1 >/dev/null; done
done
LOOM_DEBUG=1 /tmp/h/build-gpu/loom test-ops -b CUDA0 -o SCALE 2>&1 | grep -E "CUDA module|passed" | head -3
el "end"
