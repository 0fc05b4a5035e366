#!/usr/bin/env bash
# `loom gen-model` without --tokenizer writes a byte-level vocabulary that still spells spaces as
# spaces: the prompt's echo (and the pieces of its tokens) read back as the text that was given.
# usage: gen-model-vocab.sh LOOM_BIN
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" gen-model --preset 260k --type f32 -o "$tmp/m.gguf" >/dev/null 2>"$tmp/err" || { echo "FAIL: gen-model: $(cat "$tmp/err")"; exit 1; }
prompt="hello big world"
"$bin" run -m "$tmp/m.gguf" -p "$prompt" -n 1 --temp 0 >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: run: $(head -3 "$tmp/err")"; exit 1; }
case "$(cat "$tmp/out")" in
  "$prompt"*) echo "ok: the prompt's echo is '$prompt'" ;;
  *) echo "FAIL: the prompt's echo is not '$prompt': $(head -c 80 "$tmp/out" | od -c | head -3)"; exit 1 ;;
esac
# "a b": <s>, the marker, a, the marker, b -- five tokens (nine when each marker is three bytes)
ids=$("$bin" tokenize -m "$tmp/m.gguf" -p "a b" --ids)
n=$(echo "$ids" | tr -cd ',' | wc -c)
[ "$n" -eq 4 ] || { echo "FAIL: 'a b' gave $((n + 1)) tokens: $ids"; exit 1; }
echo "byte-level vocabulary keeps spaces"
