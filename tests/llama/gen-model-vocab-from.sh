#!/usr/bin/env bash
# `loom gen-model --vocab-from` makes a Llama-3-shaped model (the 128256-token vocabulary copied
# from the shared vocabulary GGUF): it tokenizes as the vocabulary file does, runs, and refuses a
# --vocab that disagrees and two vocabulary sources at once.
# usage: gen-model-vocab-from.sh LOOM_BIN MODELS_DIR
set -u
bin=$1
vocab=$2/vocab/ggml-vocab-llama-bpe.gguf
[ -r "$vocab" ] || { echo "skipped: $vocab is not here"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" gen-model --dim 64 --hidden 128 --layers 1 --heads 2 --ctx 64 --tied --vocab-from "$vocab" -o "$tmp/m.gguf" \
  >/dev/null 2>"$tmp/err" || { echo "FAIL: gen-model: $(cat "$tmp/err")"; exit 1; }
text='Hello <|eot_id|> 12345 日本語 🦙'
a=$("$bin" tokenize -m "$vocab" -p "$text" --ids --parse-special) || { echo "FAIL: tokenize on the vocabulary"; exit 1; }
b=$("$bin" tokenize -m "$tmp/m.gguf" -p "$text" --ids --parse-special) || { echo "FAIL: tokenize on the model"; exit 1; }
[ "$a" = "$b" ] || { echo "FAIL: the model tokenizes '$text' as $b, the vocabulary as $a"; exit 1; }
case "$b" in "[128000, 9906, 220, 128009, "*) ;; *) echo "FAIL: unexpected ids $b"; exit 1 ;; esac
"$bin" info "$tmp/m.gguf" | grep -q 'token_embd.weight .*\[64,128256\]' || { echo "FAIL: token_embd is not 64 x 128256"; exit 1; }
"$bin" run -m "$tmp/m.gguf" -p "Hello" -n 4 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: run: $(tail -3 "$tmp/err")"; exit 1; }
case "$(cat "$tmp/out")" in Hello*) ;; *) echo "FAIL: run wrote $(head -c 80 "$tmp/out")"; exit 1 ;; esac
if "$bin" gen-model --preset 260k --vocab 1000 --vocab-from "$vocab" -o "$tmp/x.gguf" 2>"$tmp/err"; then
  echo "FAIL: --vocab 1000 against a 128256-token vocabulary was accepted"; exit 1
fi
grep -q "128256 tokens" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
if "$bin" gen-model --preset 260k --tokenizer /dev/null --vocab-from "$vocab" -o "$tmp/x.gguf" 2>/dev/null; then
  echo "FAIL: two vocabulary sources were accepted"; exit 1
fi
[ ! -e "$tmp/x.gguf" ] || { echo "FAIL: a refused model left a file"; exit 1; }
echo "ok: a Llama-3-shaped model from --vocab-from"
