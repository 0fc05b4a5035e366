#!/usr/bin/env bash
# Unusual input a llama.cpp user may give: a corrupt block_count to `loom quantize` (no undefined
# behaviour in its layer rules), escapes in `loom tokenize -p` (the reference's ids), the KV cache
# flags of `loom perplexity` and a comma list of models for `loom bench -m`.
# usage: odd-input.sh LOOM_BIN MODELS (the shared models folder)
set -u
bin=$1 models=$2 model=$2/stories260K-llamacpp.gguf
. "$(dirname "$0")/lib.sh"
e2e_start

# block_count 2^31 (a u32 beyond int's range): quantize uses it only in its layer rules; under the
# sanitizers the rules' arithmetic must not overflow
cp "$model" "$tmp/bc.gguf"
off=$(grep -obUa 'llama\.block_count' "$tmp/bc.gguf" | head -1 | cut -d: -f1)
printf '\000\000\000\200' | dd of="$tmp/bc.gguf" bs=1 seek=$((off + 17 + 4)) conv=notrunc status=none
"$bin" quantize "$tmp/bc.gguf" "$tmp/bc-q.gguf" Q4_K_M 1 >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -gt 1 ] || grep -q 'runtime error' "$tmp/err"; then fail "quantize with block_count 2^31: exit $rc: $(head -3 "$tmp/err")"
else ok "quantize with block_count 2^31: exit $rc"; fi

# escapes as the reference's -e reads them: \n \r \t \\ \' \" and \xHH with two hex digits; any
# other backslash (\a, \0, \?, \x4 at the end) is kept. The ids are llama-tokenize's on this model:
#   llama-tokenize -m stories260K-llamacpp.gguf -p 'TEXT' --ids --log-disable
check_ids() {
  local got
  got=$("$bin" tokenize -m "$model" -p "$1" --ids 2>&1)
  [ "$got" = "$2" ] && ok "tokenize escapes '$1': $got" || fail "tokenize escapes '$1': $got, the reference's $2"
}
check_ids 'a\x4' '[1, 261, 500, 444, 484]'
check_ids '\0b' '[1, 410, 500, 477, 430]'
check_ids 'x\r\n\t\a' '[1, 410, 444, 16, 13, 12, 500, 412]'
check_ids "\\'\\\"\\?" '[1, 410, 439, 436, 500, 450]'
check_ids 'a\x41b' '[1, 261, 447, 430]'
check_ids 'a\xZZ\u00e9\q\' '[1, 261, 500, 444, 469, 469, 500, 425, 477, 477, 411, 483, 500, 456, 500]'

# perplexity takes the KV cache flags as llama-perplexity does: a Q8_0 cache (64-wide heads) moves
# the figure, by less than 1%; a quantized V without flash attention is the library's one line
head -c 3000 "$models/text/stories.txt" >"$tmp/text.txt"
ppl() { "$bin" perplexity -m "$models/quant/kq/kq-F32.gguf" -f "$tmp/text.txt" -c 64 -t 1 "$@" 2>/dev/null | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
base=$(ppl) q8=$(ppl -ctk q8_0 -ctv q8_0 -fa on)
if [ -n "$base" ] && [ -n "$q8" ] && awk -v a="$base" -v b="$q8" 'BEGIN { d = (b - a) / a; exit !(a != b && d < 0.01 && d > -0.01) }'; then
  ok "perplexity -ctk q8_0 -ctv q8_0: $q8 against $base with f16"
else fail "perplexity -ctk q8_0 -ctv q8_0: '$q8' against '$base' with f16"; fi
expect_fail "perplexity quantized V without flash attention" "needs flash attention" \
  "$bin" perplexity -m "$models/quant/kq/kq-F32.gguf" -f "$tmp/text.txt" -c 64 -ctv q8_0 -fa off

# bench -m takes a comma list, as llama-bench splits every parameter: one row per model
kq="$models/quant/kq/kq-Q8_0.gguf"
"$bin" bench -m "$model,$kq" -p 4 -n 0 -r 1 -t 1 -o csv >"$tmp/out" 2>"$tmp/err" </dev/null
files=$(tail -n +2 "$tmp/out" | cut -d, -f1 | tr '\n' ' ')
[ "$files" = "\"$model\" \"$kq\" " ] && ok "bench -m A,B: $files" || fail "bench -m A,B: rows of '$files': $(head -2 "$tmp/err")"
expect_fail "bench -m with an empty name" "invalid list of models" "$bin" bench -m "$model,,$kq" -p 4 -n 0 -r 1

[ "$fails" = 0 ]
