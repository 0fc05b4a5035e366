#!/usr/bin/env bash
# `loom gen-model` refuses impossible sizes before writing anything: above the 1 TiB cap, above
# the free space of the output's filesystem; and a bad size value names its option.
# Each refusal is one stderr line and exit status 1, and leaves no file.
# usage: gen-model-size.sh LOOM_BIN
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_fail() {  # WHAT PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  "$bin" gen-model "$@" -o "$tmp/out.gguf" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pattern" "$tmp/err"; then
    echo "FAIL: $what: exit $rc, $lines stderr lines (want one matching '$pattern'):"; head -5 "$tmp/err"; fails=$((fails + 1))
  elif [ -n "$(ls -A "$tmp" | grep -v '^out$' | grep -v '^err$')" ]; then
    echo "FAIL: $what: left files: $(ls "$tmp")"; fails=$((fails + 1))
  else
    echo "ok: $what: $(cat "$tmp/err")"
  fi
}
# 1000 layers of 1e6 x 1e6 f32: 4 TB per matrix, about 28 PB in all
expect_fail "petabytes" "exceeds the limit of 1024 GiB" --dim 1000000 --hidden 1000000 --layers 1000 --heads 8 --vocab 300 --ctx 128
expect_fail "just above 1 TiB" "exceeds the limit" --dim 16384 --hidden 16384 --layers 160 --heads 128 --vocab 300 --ctx 128
# 120 layers of 16384 x 16384: 901998320320 bytes (840.1 GiB), under the cap; more than the free
# space of most test machines -- checked against what df says
avail=$(df -B1 --output=avail "$tmp" | tail -1 | tr -d ' ')
if [ "$avail" -lt 900000000000 ]; then
  expect_fail "above the free space" "model needs 840.1 GiB (901998320320 bytes) but the output's filesystem has" \
    --dim 16384 --hidden 16384 --layers 120 --heads 128 --vocab 300 --ctx 128
else
  echo "skipped the free-space case: $avail bytes free"
fi
expect_fail "zero --dim" "invalid value '0' for --dim" --dim 0 --hidden 64 --layers 1 --heads 8 --vocab 300 --ctx 128
expect_fail "zero --ctx" "for --ctx" --dim 64 --hidden 64 --layers 1 --heads 8 --vocab 300 --ctx 0
expect_fail "huge --layers" "for --layers" --dim 64 --hidden 64 --layers 99999999999 --heads 8 --vocab 300 --ctx 128
expect_fail "bad --kv-heads" "for --kv-heads" --dim 64 --hidden 64 --layers 1 --heads 8 --kv-heads x --vocab 300 --ctx 128
[ $fails -eq 0 ] && echo "impossible sizes rejected cleanly" || exit 1
