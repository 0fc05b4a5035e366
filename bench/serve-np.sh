#!/usr/bin/env bash
# serve-np.sh -- `loom serve` with -np 1, 2 and 4 slots, as many concurrent clients as slots: the
# aggregate generated tokens/s (all clients' tokens over the wall time of the round), and per
# client its tokens/s and the time its prompt took (the server's prompt_ms: the time to first token,
# as no request waits for a slot). The three servers run side by side and the rounds alternate
# (np 1, 2, 4, np 1, 2, 4, ...), as the machine's speed drifts. A benchmark, not a test.
# usage: bench/serve-np.sh LOOM_BIN MODEL [N_PREDICT=128] [ROUNDS=3] [THREADS=2]
# e.g.   loom gen-model --preset 110m --type f16 --tokenizer /work/shared/models/tokenizer.bin -o /tmp/np-110m.gguf
#        bench/serve-np.sh build/loom /tmp/np-110m.gguf 128 3 2
set -u
bin=$1 model=$2 n=${3:-128} rounds=${4:-3} threads=${5:-2}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
declare -A url
for np in 1 2 4; do
  "$bin" serve -m "$model" --port 0 -t "$threads" -np $np -c $((np * 512)) 2>"$tmp/log$np" &
  pids+=($!)
done
for np in 1 2 4; do
  for i in $(seq 300); do
    u=$(grep -so 'http://127.0.0.1:[0-9]*' "$tmp/log$np" | head -1)
    [ -n "$u" ] && curl -s -m 2 "$u/health" | grep -q '"ok"' && break
    sleep 0.1
  done
  url[$np]=$u
done
prompts=("Once upon a time" "The little dog ran" "Lily and Ben went to the park" "One day, a bird")
# round NP: NP clients at once; prints "aggregate t/s, mean client t/s, mean prompt ms"
round() {
  local np=$1 c t0 t1 cl=()
  t0=$(date +%s.%N)
  for c in $(seq 0 $((np - 1))); do
    curl -s "${url[$np]}/completion" -d "{\"prompt\":\"${prompts[$c]}\",\"n_predict\":$n,\"ignore_eos\":true,\"temperature\":0}" >"$tmp/r$np-$c" &
    cl+=($!)
  done
  wait "${cl[@]}"
  t1=$(date +%s.%N)
  node -e '
    const fs = require("fs"); const [dir, np, dt] = [process.argv[1], +process.argv[2], +process.argv[3]];
    let tok = 0, tps = 0, pms = 0;
    for (let c = 0; c < np; c++) { const j = JSON.parse(fs.readFileSync(`${dir}/r${np}-${c}`, "utf8"));
      tok += j.tokens_predicted; tps += j.timings.predicted_per_second; pms += j.timings.prompt_ms; }
    console.log(`${(tok / dt).toFixed(1)} ${(tps / np).toFixed(1)} ${(pms / np).toFixed(1)}`);' "$tmp" "$np" "$(echo "$t1 - $t0" | bc)"
}
round 1 >/dev/null; round 2 >/dev/null; round 4 >/dev/null # warm-up
printf '%-6s %-8s %-16s %-18s %-14s\n' round "-np" "aggregate t/s" "per client t/s" "prompt ms"
for r in $(seq "$rounds"); do
  for np in 1 2 4; do
    read -r agg per pms < <(round $np)
    printf '%-6s %-8s %-16s %-18s %-14s\n' "$r" "$np" "$agg" "$per" "$pms"
  done
done
