#!/usr/bin/env bash
# `loom serve` driven by the official `openai` npm client (installed by `make test` into the build
# folder; skipped, with status 77, where npm could not fetch it).
# usage: openai.sh LOOM_BIN MODEL NPM_PREFIX
set -u
bin=$1 model=$2 prefix=$3
pkg=$prefix/node_modules/openai
if ! command -v node >/dev/null || [ ! -f "$pkg/package.json" ]; then
  echo "skipped: the openai npm package is not in $prefix (make test installs it; npm may have been offline)"
  exit 77
fi
tmp=$(mktemp -d)
srv_pid=
trap '[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
. "$(dirname "$0")/lib.sh"
prompt="Once upon a time"
n=40
"$bin" run -m "$model" -p "$prompt" -n $n --temp 0 -t 1 -c 256 --no-display-prompt >"$tmp/ref" 2>"$tmp/referr" || { echo "FAIL: loom run: $(cat "$tmp/referr")"; exit 1; }
start_server "$tmp/log" -m "$model" -c 256 --api-key k3y --alias stories
node "$(dirname "$0")/openai-client.cjs" "$pkg" "$url" k3y "$tmp/ref" "$prompt" $n || fail "the openai client checks"
stop_server
# -np 4: concurrent requests and a cancelled stream (a slot's context of 8192 holds the long stream)
start_server "$tmp/log4" -m "$model" -c 32768 -np 4 --api-key k3y --alias stories --metrics
node "$(dirname "$0")/openai-parallel.cjs" "$pkg" "$url" k3y || { fail "the parallel openai client checks"; cat "$tmp/log4"; }
stop_server
[ $fails -eq 0 ] || { cat "$tmp/log"; exit 1; }
