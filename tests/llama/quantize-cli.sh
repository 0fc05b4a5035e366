#!/usr/bin/env bash
# `loom quantize`: a model quantized to Q4_K_M runs with `loom run`; bad arguments (unknown type,
# missing input, output == input, a bad thread count, too few arguments) give one error line and
# exit 1 without touching the input or leaving an output.
# usage: quantize-cli.sh LOOM_BIN
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$bin" gen-model --preset 260k --type f32 -o "$tmp/m.gguf" >/dev/null 2>"$tmp/err" || fail "gen-model: $(cat "$tmp/err")"
"$bin" quantize "$tmp/m.gguf" "$tmp/q.gguf" q4_k_m 2 >/dev/null 2>"$tmp/err" || fail "quantize: $(cat "$tmp/err")"
# (the preset is taken in any case, and named as the field spells it)
grep -q "^wrote $tmp/q.gguf (Q4_K_M): " "$tmp/err" || fail "no summary line naming Q4_K_M: $(cat "$tmp/err")"
"$bin" info "$tmp/q.gguf" >"$tmp/info" 2>&1 || fail "info: $(head -3 "$tmp/info")"
grep -q "general.file_type .*= 15" "$tmp/info" || fail "general.file_type is not 15 (Q4_K_M)"
"$bin" run -m "$tmp/q.gguf" -p "hello" -n 4 --temp 0 >"$tmp/out" 2>"$tmp/err" || fail "run on the Q4_K_M file: $(head -3 "$tmp/err")"
echo "ok: quantized to Q4_K_M, runs"
sum=$(md5sum <"$tmp/m.gguf")
expect_error() { # expect_error WHAT PATTERN ARGS...
  local what=$1 pat=$2
  shift 2
  "$bin" quantize "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "$what: exit status $rc"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$what: not one error line: $(cat "$tmp/err")"
  grep -q "$pat" "$tmp/err" || fail "$what: message '$(cat "$tmp/err")' lacks '$pat'"
  echo "ok: $what: $(cat "$tmp/err")"
}
expect_error "unknown type" "unknown type 'Q4_K_X'" "$tmp/m.gguf" "$tmp/o.gguf" Q4_K_X
expect_error "missing input" "nothere.gguf" "$tmp/nothere.gguf" "$tmp/o.gguf" Q8_0
expect_error "output == input" "m.gguf" "$tmp/m.gguf" "$tmp/m.gguf" Q8_0
expect_error "bad thread count" "NTHREADS" "$tmp/m.gguf" "$tmp/o.gguf" Q8_0 zero
expect_error "too few arguments" "need IN.gguf OUT.gguf TYPE" "$tmp/m.gguf" "$tmp/o.gguf"
# options before the file names, as llama-quantize takes them; an unknown one or one after the names is refused
expect_error "unknown option" "unknown option '--x'" --x "$tmp/m.gguf" "$tmp/o.gguf" Q4_0
expect_error "an option after the file names" "option '--pure' after the file names" "$tmp/m.gguf" "$tmp/o.gguf" Q4_0 --pure
expect_error "unknown tensor type" "unknown tensor type 'q9' for --output-tensor-type (one of q4_0, .*, f32)$" \
  --output-tensor-type q9 "$tmp/m.gguf" "$tmp/o.gguf" Q4_0
# a type option without its value takes IN (with or without NTHREADS after TYPE) or the next option: named as such
for opt in --output-tensor-type --token-embedding-type; do
  expect_error "$opt IN OUT TYPE" "^loom quantize: $opt needs its value, a tensor type (one of q4_0, .*, f32), not the file '$tmp/m.gguf'$" \
    $opt "$tmp/m.gguf" "$tmp/o.gguf" Q4_0
  expect_error "$opt IN OUT TYPE NTHREADS" "quantize: $opt needs its value, a tensor type .*, not the file '$tmp/m.gguf'$" $opt "$tmp/m.gguf" "$tmp/o.gguf" Q4_0 2
  expect_error "$opt --pure IN OUT TYPE" "quantize: $opt needs its value, a tensor type .*, not the option '--pure'$" $opt --pure "$tmp/m.gguf" "$tmp/o.gguf" Q4_0
  expect_error "$opt last" "option '$opt' needs a value" $opt
done
[ ! -e "$tmp/o.gguf" ] || fail "an output was left"
# the type of each tensor in 'loom info' (name -> type)
types() { "$bin" info "$1" | awk '$2 ~ /\.weight$/ { print $2, $3 }'; }
# --pure: every 2-d weight in the preset's type (the mix puts output.weight, rows of 64, in Q8_0),
# but ffn_down, whose rows of 172 do not fit 32-blocks: F16
"$bin" quantize --pure "$tmp/m.gguf" "$tmp/p.gguf" Q4_0 2>"$tmp/err" || fail "--pure: $(cat "$tmp/err")"
types "$tmp/p.gguf" | grep -v norm | grep -v "ffn_down.weight f16$" | grep -vq " q4_0$" &&
  fail "--pure left a weight not in q4_0: $(types "$tmp/p.gguf" | grep -v norm | grep -v q4_0)"
"$bin" quantize "$tmp/m.gguf" "$tmp/q40.gguf" Q4_0 2>/dev/null
types "$tmp/q40.gguf" | grep -q "^output.weight q8_0$" || fail "the Q4_0 mix: output.weight is not q8_0"
echo "ok: --pure puts every weight in Q4_0"
# --leave-output-tensor, --output-tensor-type, --token-embedding-type
"$bin" quantize --leave-output-tensor "$tmp/m.gguf" "$tmp/l.gguf" Q4_0 2>/dev/null && types "$tmp/l.gguf" | grep -q "^output.weight f32$" ||
  fail "--leave-output-tensor: $(types "$tmp/l.gguf" | grep output)"
"$bin" quantize --output-tensor-type F16 --token-embedding-type q8_0 "$tmp/m.gguf" "$tmp/t.gguf" Q4_0 2>/dev/null &&
  types "$tmp/t.gguf" | grep -q "^output.weight f16$" && types "$tmp/t.gguf" | grep -q "^token_embd.weight q8_0$" &&
  types "$tmp/t.gguf" | grep -q "^blk.0.attn_q.weight q4_0$" || fail "--output-tensor-type / --token-embedding-type: $(types "$tmp/t.gguf" | head -4)"
echo "ok: --leave-output-tensor, --output-tensor-type, --token-embedding-type"
# the field's aliases and numbers: Q4_K and 15 are Q4_K_M (the same bytes), 7 is Q8_0
for alias in Q4_K 15; do
  "$bin" quantize "$tmp/m.gguf" "$tmp/a.gguf" $alias 2>"$tmp/err" && cmp -s "$tmp/a.gguf" "$tmp/q.gguf" && grep -q "(Q4_K_M)" "$tmp/err" ||
    fail "$alias is not Q4_K_M: $(cat "$tmp/err")"
done
"$bin" quantize "$tmp/m.gguf" "$tmp/a.gguf" 7 2>"$tmp/err" && grep -q "(Q8_0)" "$tmp/err" && "$bin" info "$tmp/a.gguf" | grep -q "general.file_type .*= 7" ||
  fail "7 is not Q8_0: $(cat "$tmp/err")"
expect_error "an unknown number" "unknown type '99'" "$tmp/m.gguf" "$tmp/o.gguf" 99
echo "ok: Q4_K and 15 are Q4_K_M, 7 is Q8_0"
# a quantized input: refused, or with --allow-requantize quantized again (Q8_0 to Q4_0: every weight q4_0 but output.weight)
expect_error "a quantized input" "already quantized" "$tmp/a.gguf" "$tmp/o.gguf" Q4_0
"$bin" quantize --allow-requantize "$tmp/a.gguf" "$tmp/r.gguf" Q4_0 2>"$tmp/err" && types "$tmp/r.gguf" | grep -q "^blk.0.attn_q.weight q4_0$" &&
  "$bin" run -m "$tmp/r.gguf" -p hello -n 4 --temp 0 >/dev/null 2>&1 || fail "--allow-requantize: $(cat "$tmp/err")"
echo "ok: --allow-requantize"
[ "$(md5sum <"$tmp/m.gguf")" = "$sum" ] || fail "the input changed"
ls "$tmp" | grep -q tmp && fail "a temporary file was left: $(ls "$tmp")"
echo "bad arguments refused"
