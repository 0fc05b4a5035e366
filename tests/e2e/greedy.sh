#!/usr/bin/env bash
# Greedy generation must reproduce the reference text byte for byte.
# usage: greedy.sh LOOM_BIN MODEL REFERENCE (prompt|noprompt) [extra loom run flags...]
set -u
bin=$1 model=$2 ref=$3 mode=$4
shift 4
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
if [ "$mode" = prompt ]; then
  "$bin" run -m "$model" -p "Once upon a time" -n 252 --temp 0 -c 512 "$@" >"$out" 2>"$err"
else
  "$bin" run -m "$model" -n 256 --temp 0 -c 512 "$@" >"$out" 2>"$err"
fi
rc=$?
if [ $rc -ne 0 ]; then
  echo "loom run exited with $rc:"; cat "$err"; exit 1
fi
if ! cmp -s "$out" "$ref"; then
  echo "output differs from the reference ($*):"
  diff <(fold -w 80 "$ref") <(fold -w 80 "$out") | head -20
  exit 1
fi
grep -E "prompt eval time|eval time" "$err"
echo "identical to the reference ($mode $*)"
