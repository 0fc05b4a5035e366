#!/usr/bin/env bash
# `loom run --cache-type f32|f16|bf16` on the CPU: each generates text, with a KV cache of the size
# the model's shape gives (2 x layers x KV width x cells x element bytes); a BF16 cache on the
# simulated device (CPU kernels, the cache in its own memory) gives the CPU's text byte for byte.
# usage: cache-type.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
key() { "$bin" info "$model" | awk -v k="$1" '$1 == k { print $4 }'; }
n_layer=$(key llama.block_count) n_embd=$(key llama.embedding_length) n_head=$(key llama.attention.head_count)
n_head_kv=$(key llama.attention.head_count_kv)
n_head_kv=${n_head_kv:-$n_head}
n_ctx=256 prompt="Once upon a time"
for t in f32:4 f16:2 bf16:2; do
  ct=${t%:*} es=${t#*:}
  "$bin" run -m "$model" -p "$prompt" -n 32 --temp 0 -c $n_ctx -t 2 --cache-type "$ct" >"$tmp/$ct" 2>"$tmp/$ct.err" ||
    { fail "--cache-type $ct exited with $?:"; head -5 "$tmp/$ct.err"; continue; }
  mib=$(awk -v b=$((2 * n_layer * n_embd / n_head * n_head_kv * n_ctx * es)) 'BEGIN { printf "%.2f", b / 1048576 }')
  grep -q "KV cache: *$mib MiB on CPU ($ct, $n_ctx cells)" "$tmp/$ct.err" ||
    fail "--cache-type $ct: expected a $mib MiB $ct cache, got: $(grep 'KV cache' "$tmp/$ct.err")"
  text=$(cat "$tmp/$ct")
  [ "${text#"$prompt"}" != "$text" ] && [ ${#text} -gt $((${#prompt} + 32)) ] ||
    fail "--cache-type $ct: no text generated after the prompt: '$text'"
  echo "$ct: $(head -c 100 "$tmp/$ct")"
done
LOOM_SIM_DEVICES=1 "$bin" run -m "$model" -p "$prompt" -n 32 --temp 0 -c $n_ctx -t 2 --cache-type bf16 -ngl 99 \
  >"$tmp/sim" 2>"$tmp/sim.err" || { fail "bf16 cache on sim0 exited with $?:"; head -5 "$tmp/sim.err"; }
grep -q "KV cache: .* on sim0 (bf16, $n_ctx cells)" "$tmp/sim.err" || fail "no bf16 cache on sim0: $(grep 'KV cache' "$tmp/sim.err")"
cmp -s "$tmp/bf16" "$tmp/sim" || fail "bf16 cache: sim0's text differs from the CPU's"
[ $fails -eq 0 ] && echo "f32, f16 and bf16 KV caches generate text" || exit 1
