#!/usr/bin/env bash
# Unusual input a llama.cpp user may give: a corrupt block_count to `loom quantize` (no undefined
# behaviour in its layer rules), escapes in `loom tokenize -p` (the reference's ids), the KV cache
# flags of `loom perplexity` and a comma list of models for `loom bench -m`; perplexity --chunks, a
# bare -fa, bench rows that fail among others, bench's model labels (general.file_type), --check-tensors,
# and an inf weight without it.
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
# perplexity scores every token, so its batches are never cut into micro-batches: it has no -ub
expect_fail "perplexity -ub" "unknown option" "$bin" perplexity -m "$models/quant/kq/kq-F32.gguf" -f "$tmp/text.txt" -ub 8

# bench -m takes a comma list, as llama-bench splits every parameter: one row per model
kq="$models/quant/kq/kq-Q8_0.gguf"
"$bin" bench -m "$model,$kq" -p 4 -n 0 -r 1 -t 1 -o csv >"$tmp/out" 2>"$tmp/err" </dev/null
files=$(tail -n +2 "$tmp/out" | cut -d, -f1 | tr '\n' ' ')
[ "$files" = "\"$model\" \"$kq\" " ] && ok "bench -m A,B: $files" || fail "bench -m A,B: rows of '$files': $(head -2 "$tmp/err")"
# the model column names general.file_type as llama-bench does (its label for the fixtures): Q4_K_M is
# 15, "Q4_K - Medium"; a file without the key (the llama.cpp conversion of stories260K) the type of its weights
"$bin" bench -m "$model,$models/quant/kq/kq-Q4_K_M.gguf,$models/quant/kq/kq-F32.gguf" -p 4 -n 0 -r 1 -t 1 -o csv >"$tmp/out" 2>"$tmp/err" </dev/null
labels=$(tail -n +2 "$tmp/out" | cut -d, -f2 | tr '\n' ' ')
[ "$labels" = '"llama 293K F32" "llama 2M Q4_K - Medium" "llama 2M all F32" ' ] && ok "bench labels: $labels" || fail "bench labels: '$labels': $(head -2 "$tmp/err")"
expect_fail "bench -m with an empty name" "invalid list of models" "$bin" bench -m "$model,,$kq" -p 4 -n 0 -r 1
# a list longer than the bench takes names the limit (16 values a parameter)
expect_fail "bench -p with 17 values" "-p takes at most 16 values" "$bin" bench -m "$model" -p 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17 -n 0 -r 1
expect_fail "bench -fa with 17 values" "-fa takes at most 16 values" "$bin" bench -m "$model" -p 4 -n 0 -r 1 -fa 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0

# perplexity --chunks N scores at most N chunks, as llama-perplexity's (the reference on this model
# and text, -c 128 --chunks 2: [1]3.5008,[2]3.6293, PPL 3.6293); 0, a negative N or more chunks than
# the text holds: all 15; a value that is not a whole integer is one error line
text=$models/text/stories.txt
chunks() { "$bin" perplexity -m "$model" -f "$text" -c 128 -t 1 "$@" 2>/dev/null | grep -o '\[[0-9]*\]' | tail -1; }
[ "$(chunks --chunks 2)" = "[2]" ] && [ "$(chunks --chunks 0)" = "[15]" ] && [ "$(chunks --chunks -1)" = "[15]" ] &&
  [ "$(chunks --chunks 99999)" = "[15]" ] && ok "perplexity --chunks 2, 0, -1, 99999" ||
  fail "perplexity --chunks: 2 -> $(chunks --chunks 2), 0 -> $(chunks --chunks 0), 99999 -> $(chunks --chunks 99999)"
for v in abc 2x -x ''; do
  expect_fail "perplexity --chunks '$v'" "invalid value '$v' for --chunks" "$bin" perplexity -m "$model" -f "$text" -c 128 --chunks "$v"
done
expect_fail "perplexity --chunks without a value" "option '--chunks' needs a value" "$bin" perplexity -m "$model" -f "$text" --chunks

# a bare -fa (last, or before another option) is on, as the reference's llama-cli and
# llama-perplexity take their -fa switch; a value after it is still read (-fa off, -fa -1)
fa_run() { "$bin" run -m "$model" -p hi -n 2 --temp 0 -t 1 -v "$@" 2>&1 >/dev/null | sed -n 's/^flash attention: \([a-z]*\).*/\1/p'; }
[ "$(fa_run -fa)" = on ] && [ "$(fa_run -fa -n 2)" = on ] && [ "$(fa_run --flash-attn)" = on ] && [ "$(fa_run -fa off)" = off ] &&
  [ "$(fa_run -fa off -fa)" = on ] && [ "$(fa_run --flash-attn=off)" = off ] && ok "run: a bare -fa is on" ||
  fail "run -fa: bare $(fa_run -fa), before -n $(fa_run -fa -n 2), -fa off $(fa_run -fa off)"
echo hi | "$bin" chat -m "$model" -n 2 --temp 0 -t 1 -fa >/dev/null 2>"$tmp/err" && ok "chat: a bare -fa" || fail "chat -fa: $(cat "$tmp/err")"
[ "$(chunks --chunks 1 -fa)" = "[1]" ] && [ "$(chunks -fa --chunks 1)" = "[1]" ] && ok "perplexity: a bare -fa" ||
  fail "perplexity -fa: $("$bin" perplexity -m "$model" -f "$text" -c 128 --chunks 1 -fa 2>&1 | tail -1)"
expect_fail "run -fa with a bad value" "invalid value 'foo' for --flash-attn (on, off or auto" "$bin" run -m "$model" -p hi -fa foo
expect_fail "serve: a bare -fa is taken (the missing model is the error)" "cannot open model" "$bin" serve -m "$tmp/none.gguf" -fa
# llama-bench's -fa takes a value (0|1): a bare one is one line naming the values
expect_fail "bench: -fa last, without its value" "option '-fa' needs a value (on, off or auto; 1, 0 or -1" \
  "$bin" bench -m "$model" -p 4 -n 0 -r 1 -fa
expect_fail "bench: -fa before another option" "option '-fa' needs a value (on, off or auto; 1, 0 or -1; a comma list for several), not the option '-t'" \
  "$bin" bench -m "$model" -p 4 -n 0 -r 1 -fa -t 1

# bench: a configuration the model cannot run (a q4_0 K cache on 8-wide heads) is one line; the
# other rows are measured, and the exit status is 1 at the end (llama-bench's for a failed context)
"$bin" bench -m "$model" -p 4 -n 2 -r 1 -t 1 -fa 1 -ctk f16,q4_0,bf16 -o csv >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$? rows=$(tail -n +2 "$tmp/out" | cut -d, -f10 | tr '\n' ' ')
[ $rc = 1 ] && [ "$rows" = '"f16" "f16" "bf16" "bf16" ' ] && [ "$(wc -l <"$tmp/err")" = 1 ] &&
  grep -q "^loom bench: $model: -t 1 -b 512 -fa on -ctk q4_0 -ctv f16: KV cache type q4_0 for K needs heads of a multiple of 32 elements; this model's have 8 (skipped)$" "$tmp/err" &&
  ok "bench: the q4_0 row fails in one line, f16 and bf16 measured, exit 1" || fail "bench -ctk f16,q4_0,bf16: exit $rc, rows '$rows': $(cat "$tmp/err")"

# --check-tensors: a NaN or inf in an F32, F16 or BF16 weight refuses the model in one line naming
# the tensor (mapped and read); without it the model loads as before. Tiny random models, one value
# overwritten at the tensor's place (loom info --json: data_offset + the tensor's offset).
at() { # FILE TENSOR: the tensor's first byte in the file
  local j
  j=$("$bin" info --json "$1")
  echo $(($(sed -n 's/^  "data_offset": \([0-9]*\),$/\1/p' <<<"$j") + $(grep -o "\"name\": \"$2\", [^}]*" <<<"$j" | sed 's/.*"offset": \([0-9]*\).*/\1/')))
}
check() { # TYPE TENSOR ELEMENT BYTES(printf) WHAT
  local f=$tmp/bad-$1.gguf size=2
  [ "$1" = f32 ] && size=4
  "$bin" gen-model --dim 64 --hidden 128 --layers 2 --heads 2 --vocab 300 --ctx 128 --type "$1" -o "$f" >/dev/null 2>&1 || { fail "gen-model --type $1"; return; }
  printf "$4" | dd of="$f" bs=1 seek=$(($(at "$f" "$2") + $3 * size)) conv=notrunc status=none
  expect_fail "--check-tensors, $5 in $2 ($1)" "^loom run: $f: tensor '$2' ($1) has invalid data: element $3 is $5$" \
    "$bin" run -m "$f" -p hi -n 2 -t 1 --check-tensors
  expect_fail "--check-tensors --no-mmap ($1)" "tensor '$2' ($1) has invalid data" "$bin" run -m "$f" -p hi -n 2 -t 1 --check-tensors --no-mmap
  "$bin" run -m "$f" -p hi -n 2 -t 1 >/dev/null 2>"$tmp/err" </dev/null
  grep -q "invalid data" "$tmp/err" && fail "without --check-tensors ($1): $(cat "$tmp/err")" || ok "without --check-tensors ($1) the model loads"
}
check f32 blk.0.attn_norm.weight 3 '\x00\x00\x80\xff' -inf
check f16 blk.1.ffn_down.weight 5 '\x00\x7e' NaN
check bf16 output.weight 7 '\x80\x7f' inf
expect_fail "perplexity --check-tensors" "^loom perplexity: $tmp/bad-f16.gguf: tensor 'blk.1.ffn_down.weight' (f16) has invalid data: element 5 is NaN$" \
  "$bin" perplexity -m "$tmp/bad-f16.gguf" -f "$text" -c 64 --check-tensors
expect_fail "chat --check-tensors" "tensor 'output.weight' (bf16) has invalid data" "$bin" chat -m "$tmp/bad-bf16.gguf" --check-tensors
"$bin" run -m "$model" -p hi -n 2 -t 1 --check-tensors >/dev/null 2>"$tmp/err" && ok "--check-tensors passes a sound model" ||
  fail "--check-tensors on a sound model: $(cat "$tmp/err")"

# without --check-tensors, an inf weight in a quantized model's F16 tensor makes every logit NaN:
# the 8-bit activation blocks carry the NaN (vec.h, "non-finite columns") instead of a zero scale
# that wrote "<unk>" tokens and a perplexity of exactly the vocabulary size, with exit 0
q="$tmp/inf-q4_0.gguf"
cp "$models/quant/stories260K-Q4_0.gguf" "$q"
printf '\x00\x7c' | dd of="$q" bs=1 seek=$(($(at "$q" blk.1.ffn_down.weight) + 2)) conv=notrunc status=none
fails_at_logits() { # WHAT WANT CMD...: exit 1, the message among the load's lines, no text written
  local what=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  [ $rc = 1 ] && grep -qF -- "$want" "$tmp/err" && ! grep -q '⁇' "$tmp/out" && ok "$what" ||
    fail "$what: exit $rc, stdout '$(head -c 200 "$tmp/out")', stderr: $(tail -2 "$tmp/err")"
}
fails_at_logits "an inf weight, run: all logits NaN" "loom run: sampler: all 512 logits are -inf or NaN; nothing to sample (NaN or infinite weights? --check-tensors finds them)" \
  "$bin" run -m "$q" -p "Once upon a time" -n 8 --temp 0 -t 1
fails_at_logits "an inf weight, perplexity: no figure" "loom perplexity: the model's logits are NaN or infinite: no perplexity" \
  "$bin" perplexity -m "$q" -f "$text" -c 128 -t 1
expect_fail "an inf weight, --check-tensors names it" "tensor 'blk.1.ffn_down.weight' (f16) has invalid data: element 1 is inf" \
  "$bin" run -m "$q" -p hi -n 2 -t 1 --check-tensors

[ "$fails" = 0 ]
