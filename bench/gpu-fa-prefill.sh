#!/usr/bin/env bash
# One device call for the prompt (tensor-core) attention kernel: builds this tree and a base tree
# side by side, makes the 7B F16 model, benches pp512 / pp2048 / pp4000+tg64 alternating base and
# this tree's variants, the per-kernel profile of pp2048 for each, then the correctness runs
# (test-ops FLASH_ATTN_EXT for each variant, test-ops whole, test-cuda, memcheck and racecheck on
# the FLASH_ATTN_EXT cases, greedy stories260K, 7B greedy text of this tree against base's).
# usage (on the device, from this tree's root): BASE=DIR MODELS=DIR [VARIANTS="ENV=V ..."] bench/gpu-fa-prefill.sh
#   VARIANTS: environment settings of this tree's binary to bench beside base, one word each
#   ("X=0" for none). Logs: $OUT/log.txt (all steps), build-*.log, prof.txt, tests.txt.
set -u
T0=$(date +%s)
el() { echo "[$(($(date +%s) - T0)) s] $*"; }
M7=/tmp/7b-f16.gguf A=/tmp/b-base B=/tmp/b-new
VARIANTS=${VARIANTS:-X=0}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
(cmake -S "$BASE" -B $A -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DLOOM_SHARED_MODELS="$MODELS" >"$OUT/build-base.log" 2>&1 &&
  cmake --build $A -j16 --target loom >>"$OUT/build-base.log" 2>&1 &&
  $A/loom gen-model --preset 7b --type f16 --tokenizer "$MODELS/tokenizer.bin" -o $M7 >/dev/null 2>&1) &
bp=$!
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLOOM_SHARED_MODELS="$MODELS" >"$OUT/build-new.log" 2>&1 &&
  cmake --build $B -j16 --target loom test-cuda >>"$OUT/build-new.log" 2>&1 || { tail -30 "$OUT/build-new.log"; exit 1; }
el "new built"
wait $bp || { tail -30 "$OUT/build-base.log"; exit 1; }
el "base built, 7B made"

pp() { # BIN ENV
  echo "== $1 $2"
  env "$2" "$1/loom" bench -m $M7 -p 512,2048 -n 0 -pg 4000,64 -fa 1 -ngl 99 -r 3 2>&1 | grep -E "\| (pp|pg)"
}
for r in 1 2; do
  pp $A X=0
  for v in $VARIANTS; do pp $B "$v"; done
done
el "pp A/B done"
for x in "$A|X=0" $(for v in $VARIANTS; do echo "$B|$v"; done); do
  echo "== profile ${x%%|*} ${x#*|}" >>"$OUT/prof.txt"
  env "${x#*|}" LOOM_CUDA_PARAMS=profile=1 "${x%%|*}/loom" bench -m $M7 -p 2048 -n 0 -fa 1 -ngl 99 -r 1 >>"$OUT/prof.txt" 2>&1
done
grep -E "== profile|GPU .* ms per compute|FLASH|MUL_MAT|ADD " "$OUT/prof.txt" | cut -c1-160
el "profiles done"

# correctness (this tree, its default settings unless named)
{
  for v in $VARIANTS; do
    echo "== test-ops FLASH_ATTN_EXT $v"
    env "$v" timeout 60 $B/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT 2>&1 | grep -E "FAIL|passed"
  done
} >"$OUT/tests.txt" 2>&1
(timeout 120 $B/loom test-ops -b CUDA0 >/tmp/to.log 2>&1; echo "== test-ops whole rc=$?"; grep -E "FAIL|passed" /tmp/to.log | head -20) 2>&1 | cat >>"$OUT/tests.txt" &
(timeout 120 $B/test-cuda >/tmp/tc.log 2>&1; echo "== test-cuda rc=$?"; grep -E "op cases|all checks|check\(s\) failed|check failed" /tmp/tc.log | cut -c1-200 | head -20) 2>&1 | cat >>"$OUT/tests.txt" &
(timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT >/tmp/mc.log 2>&1
  echo "== memcheck FA test-ops rc=$?"; grep -E "ERROR SUMMARY|passed" /tmp/mc.log) 2>&1 | cat >>"$OUT/tests.txt" &
(timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/loom test-ops -b CUDA0 -o FLASH_ATTN_EXT >/tmp/rc.log 2>&1
  echo "== racecheck FA test-ops rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|passed" /tmp/rc.log | head -5) 2>&1 | cat >>"$OUT/tests.txt" &
(bash bench/greedy-grid.sh $B/loom "$MODELS" /tmp/e2e "0 99" "-fa on" "-fa off" >/tmp/e2e.txt 2>&1; echo "== greedy stories260K: $(tail -1 /tmp/e2e.txt)"
  head -c 6000 "$MODELS/text/stories.txt" >/tmp/prompt.txt
  for x in $A $B; do $x/loom run -m $M7 -f /tmp/prompt.txt -n 24 --temp 0 -c 4096 -ngl 99 -fa on 2>/dev/null | md5sum >/tmp/g7-$(basename $x); done
  cmp -s /tmp/g7-b-base /tmp/g7-b-new && echo "== 7B greedy (-fa on, ~1500-token prompt): new = base" || echo "== 7B greedy: new DIFFERS from base") 2>&1 | cat >>"$OUT/tests.txt" &
wait
cat "$OUT/tests.txt"
el "tests done"
