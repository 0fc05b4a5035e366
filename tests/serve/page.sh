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
curl -s -m 20 "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":256,"temperature":0}' >"$tmp/ref.json"
want=$(json "$tmp/ref.json" 'j.choices[0].message.content.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/\u00a0/g, "&nbsp;")')
[ -n "$want" ] || fail "no reference reply: $(cat "$tmp/ref.json")"
chrome() { timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" --virtual-time-budget=10000 "$@" 2>>"$tmp/chrome.err"; }
chrome --dump-dom "$url/?q=Hi&temp=0" >"$tmp/dom.html"
grep -q 'data-done="yes"' "$tmp/dom.html" || fail "the page did not finish the reply: $(grep -o '<div id="status">[^<]*' "$tmp/dom.html") $(tail -3 "$tmp/chrome.err")"
node -e 'const fs = require("fs"); const dom = fs.readFileSync(process.argv[1], "utf8"); process.exit(dom.includes(process.argv[2]) ? 0 : 1)' "$tmp/dom.html" "$want" ||
  fail "the page's reply is not the greedy reply '$want': $(grep -o 'class="msg assistant">.\{0,200\}' "$tmp/dom.html")"
rm -f "$shot"
chrome --window-size=900,700 --screenshot="$shot" "$url/?q=Hi&temp=0" >/dev/null
[ "$(head -c 8 "$shot" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG screenshot at $shot"
stop_server
[ $fails -eq 0 ] || exit 1
echo "the chat page streamed the greedy reply; screenshot: $shot"
