#!/usr/bin/env bash
# An interrupted `loom gen-model` leaves nothing behind: SIGINT, SIGTERM or SIGHUP during the
# write removes the writer's temporary file, the process still dies of the signal, and the final
# file never appears.
# usage: writer-signal.sh LOOM_BIN
set -u
set -m # job control: background jobs keep SIGINT at its default instead of ignoring it
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# about 2 GB of f32 weights: several seconds of writing, interrupted well before the end
shape=(--dim 2048 --hidden 5632 --layers 8 --heads 16 --vocab 32000 --ctx 128)
for sig in INT TERM HUP; do
  out=$tmp/model-$sig.gguf
  "$bin" gen-model "${shape[@]}" -o "$out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 1 200); do  # wait for the temporary file to grow (at most 10 s)
    tmpf=$(ls "$tmp" | grep "model-$sig.gguf.tmp." | head -1)
    [ -n "$tmpf" ] && [ "$(stat -c %s "$tmp/$tmpf" 2>/dev/null || echo 0)" -gt 1000000 ] && break
    sleep 0.05
  done
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  left=$(ls "$tmp" | grep '\.tmp\.' || true)
  if [ $rc -ne $want ]; then
    echo "FAIL: SIG$sig: exit status $rc, want $want (died of the signal)"; fails=$((fails + 1))
  elif [ -n "$left" ]; then
    echo "FAIL: SIG$sig: temporary file left: $left"; fails=$((fails + 1))
  elif [ -e "$out" ]; then
    echo "FAIL: SIG$sig: the final file exists"; fails=$((fails + 1))
  else
    echo "ok: SIG$sig removed the temporary file"
  fi
  rm -f "$tmp"/*.gguf*
done
[ $fails -eq 0 ] && echo "interrupted writes leave nothing" || exit 1
