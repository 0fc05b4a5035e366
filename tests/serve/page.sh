#!/usr/bin/env bash
# The chat page at / in headless Chromium: /?q=Hi&temp=0 sends one message on load; the streamed
# reply in the page must be the greedy reply of /v1/chat/completions; a screenshot is kept.
# Skipped (77) without Chromium (Debian's chromium package).
# usage: page.sh LOOM_BIN MODEL SCREENSHOT.png
set -u
bin=$1 model=$2 shot=$3
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] && command -v node >/dev/null || { echo "skipped: chromium (and node) are needed"; exit 77; }
tmp=$(mktemp -d)
srv_pid=
trap '[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
. "$(dirname "$0")/lib.sh"
start_server "$tmp/log" -m "$model" -c 256
curl -s -m 20 "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":32,"temperature":0}' >"$tmp/ref.json"
want=$(json "$tmp/ref.json" 'j.choices[0].message.content')
[ -n "$want" ] || fail "no reference reply: $(cat "$tmp/ref.json")"
rm -f "$shot"
node --experimental-websocket "$(dirname "$0")/page-cdp.cjs" "$browser" "$tmp/profile" "$url/?q=Hi&temp=0&n=32" "$shot" >"$tmp/got" 2>"$tmp/cdp.err" ||
  fail "Chromium: $(grep -v dbus "$tmp/cdp.err" | tail -3)"
[ "$(cat "$tmp/got")" = "$want" ] || fail "the page's reply '$(cat "$tmp/got")' is not the greedy reply '$want'"
[ "$(head -c 8 "$shot" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG screenshot at $shot"
stop_server
[ $fails -eq 0 ] || exit 1
echo "the chat page streamed the greedy reply; screenshot: $shot"
