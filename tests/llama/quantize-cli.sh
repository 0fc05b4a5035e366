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
[ ! -e "$tmp/o.gguf" ] || fail "an output was left"
[ "$(md5sum <"$tmp/m.gguf")" = "$sum" ] || fail "the input changed"
ls "$tmp" | grep -q tmp && fail "a temporary file was left: $(ls "$tmp")"
echo "bad arguments refused"
