#!/usr/bin/env bash
# Tokenizer speed, Loom against the reference engine, alternating runs on one machine:
# `loom tokenize -m VOCAB -f TEXT --ids --parse-special` against
# `llama-tokenize -m VOCAB -f TEXT --ids --log-disable --no-escape` (the reference parses special
# tokens by default; --no-escape keeps it from reading "\n" in the text as a newline, so that both
# tokenize the same bytes -- the ids are compared). Each run is timed whole (loading the vocabulary
# included; wall and user+system CPU seconds) on the 1 MB text and on a one-byte text; the
# difference is the tokenizing itself. Medians over RUNS rounds of the four runs.
# usage: bench/tokenize-bench.sh LOOM_BIN [VOCAB.gguf] [RUNS]
set -eu
loom=$1
here=$(cd "$(dirname "$0")" && pwd)
vocab=${2:-$here/../../shared/models/vocab/ggml-vocab-llama-bpe.gguf}
runs=${3:-7}
ref=${REF_TOKENIZE:-$here/../../shared/peers/llama.cpp-cpu/bin/llama-tokenize}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/make-mixed-text.py" "$tmp/mixed.txt"
printf 'a' > "$tmp/one.txt"
"$loom" tokenize -m "$vocab" -f "$tmp/mixed.txt" --ids --parse-special > "$tmp/loom.ids"
"$ref" -m "$vocab" -f "$tmp/mixed.txt" --ids --log-disable --no-escape > "$tmp/ref.ids"
cmp -s "$tmp/loom.ids" "$tmp/ref.ids" || { echo "the ids differ"; exit 1; }
echo "$(wc -c < "$tmp/mixed.txt") bytes, $(tr -cd ',' < "$tmp/ref.ids" | wc -c) + 1 tokens, the same ids from both"
t() { # "wall cpu" seconds of one command (cpu: user + system)
  local TIMEFORMAT='%3R %3U %3S' r
  r=$( { time "$@" > /dev/null 2>&1; } 2>&1 )
  echo "$r" | awk '{ printf "%.3f %.3f", $1, $2 + $3 }'
}
printf '%-4s %17s %17s %17s %17s\n' run "loom-1MB wall/cpu" "ref-1MB wall/cpu" "loom-1B wall/cpu" "ref-1B wall/cpu"
for i in $(seq "$runs"); do
  a=$(t "$loom" tokenize -m "$vocab" -f "$tmp/mixed.txt" --ids --parse-special)
  b=$(t "$ref" -m "$vocab" -f "$tmp/mixed.txt" --ids --log-disable --no-escape)
  c=$(t "$loom" tokenize -m "$vocab" -f "$tmp/one.txt" --ids --parse-special)
  d=$(t "$ref" -m "$vocab" -f "$tmp/one.txt" --ids --log-disable --no-escape)
  echo "$i $a $b $c $d"
done | tee "$tmp/times"
python3 - "$tmp/times" <<'PY'
import statistics, sys
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1]) if l.split()[0].isdigit()]
m = [statistics.median(c) for c in zip(*rows)]  # loom wall, cpu, ref wall, cpu, loom-1B wall, cpu, ref-1B wall, cpu
for k, what in ((0, "wall"), (1, "cpu")):
    lw, rw, l1, r1 = m[k], m[2 + k], m[4 + k], m[6 + k]
    print("median %s s: whole runs loom %.3f ref %.3f (ref/loom %.2f); tokenizing only (1 MB run - 1 B run) loom %.3f ref %.3f (ref/loom %.2f)"
          % (what, lw, rw, rw / lw, lw - l1, rw - r1, (rw - r1) / max(lw - l1, 1e-9)))
PY
