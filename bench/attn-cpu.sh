#!/usr/bin/env bash
# Token generation after 1000 tokens in the KV cache on the CPU, Loom against the reference engine,
# both with flash attention, in alternating rounds (this VM's speed changes from minute to minute).
# The reference build here has no -d, so both run llama-bench's -pg 1000,128 and pp1000, and tg128
# at depth 1000 is 128 tokens over the difference of the two times; Loom's own -d 1000 -n 128 is
# printed beside it (the same quantity measured directly), and Loom unfused (-fa 0) for scale.
# usage: bench/attn-cpu.sh [MODEL.gguf]   (env: LOOM, PEER, ROUNDS, REPS, THREADS)
set -eu
MODEL=${1:-/tmp/110m-f16.gguf}
LOOM=${LOOM:-build/loom}
PEER=${PEER:-../shared/peers/llama.cpp-cpu/bin/llama-bench}
ROUNDS=${ROUNDS:-3} REPS=${REPS:-3} THREADS=${THREADS:-2}

# the column named $1 of a CSV with a header line (quotes dropped), one value per row
col() { awk -F, -v want="$1" 'NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); if (h == want) c = i }; next }
                              { v = $c; gsub(/"/, "", v); print v }'; }
# tg t/s from the pp1000 and pp1000+tg128 rows' mean times (ns)
tg_from() { local a b; read -r a b <<<"$(col avg_ns <"$1" | paste -sd' ')"; awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", 128e9 / (b - a) }'; }

echo "# tg128 at depth 1000, $(basename "$MODEL"), -t $THREADS, flash attention on both; $(date -u +%FT%TZ)"
echo "| round | reference (pg - pp) | Loom (pg - pp) | Loom -d 1000 | Loom -fa 0 -d 1000 | ratio (pg - pp) |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
  "$PEER" -m "$MODEL" -t "$THREADS" -p 1000 -n 0 -pg 1000,128 -fa 1 -r "$REPS" -o csv >"$tmp/peer.csv" 2>/dev/null
  "$LOOM" bench -m "$MODEL" -t "$THREADS" -p 1000 -n 0 -pg 1000,128 -fa 1 -r "$REPS" -o csv >"$tmp/loom.csv" 2>/dev/null
  "$LOOM" bench -m "$MODEL" -t "$THREADS" -p 0 -n 128 -d 1000 -fa 1,0 -r "$REPS" -o csv >"$tmp/depth.csv" 2>/dev/null
  peer=$(tg_from "$tmp/peer.csv") loom=$(tg_from "$tmp/loom.csv")
  read -r fa1 fa0 <<<"$(col avg_ts <"$tmp/depth.csv" | paste -sd' ')"
  printf '| %d | %s | %s | %.2f | %.2f | %s |\n' "$r" "$peer" "$loom" "$fa1" "$fa0" \
    "$(awk -v a="$loom" -v b="$peer" 'BEGIN { printf "%.2f", a / b }')"
done
