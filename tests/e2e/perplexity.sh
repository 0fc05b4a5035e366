#!/usr/bin/env bash
# `loom perplexity` on stories260K-F32 against the reference engine's figure, and its bad input.
# usage: perplexity.sh LOOM_BIN SHARED_MODELS_DIR
# The reference figure (../shared/models/quant/README.md) came from
#   llama-perplexity -m quant/stories260K-F32.gguf -f text/stories.txt -c 128 -b 128 -t 2
# (llama.cpp c392e509): "15 chunks", "Final estimate: PPL = 4.7763 +/- 0.28528".
# Tolerance 0.1%: the reference keeps its KV cache in F16 and sums in another order, which moves the
# fourth decimal (Loom's F16 and BF16 files differ from its F32 one by 0.01%); a change of method
# (scoring the whole chunk, no BOS at each chunk, chunks that overlap) moves PPL by several percent.
set -u
bin=$1 models=$2
model=$models/quant/stories260K-F32.gguf text=$models/text/stories.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
"$bin" perplexity -m "$model" -f "$text" -c 128 -b 128 -t 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
grep "chunks" "$tmp/err"
chunks=$(grep -o '\[[0-9]*\]' "$tmp/out" | wc -l)
read -r ppl err < <(sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1 \2/p' "$tmp/out")
if [ $rc -ne 0 ] || [ "$chunks" != 15 ] || ! grep -q "over 15 chunks, n_ctx=128" "$tmp/err" ||
  ! awk -v p="${ppl:-0}" -v e="${err:-0}" 'BEGIN { exit !(p > 4.7763 * 0.999 && p < 4.7763 * 1.001 && e > 0.28528 * 0.99 && e < 0.28528 * 1.01) }'; then
  echo "FAIL: perplexity: exit $rc, $chunks chunks, PPL '${ppl:-}' +/- '${err:-}' (reference 4.7763 +/- 0.28528)"; cat "$tmp/err"; fails=$((fails + 1))
else
  echo "ok: PPL $ppl +/- $err over 15 chunks (reference 4.7763 +/- 0.28528)"
fi
# the running values end at the final estimate, and -b smaller than -c gives the same figure
last=$(grep -o '\[15\][0-9.]*' "$tmp/out" | sed 's/\[15\]//')
[ "$last" = "$ppl" ] || { echo "FAIL: [15] is '$last', the final estimate '$ppl'"; fails=$((fails + 1)); }
"$bin" perplexity -m "$model" -f - -c 128 -b 32 -t 1 <"$text" >"$tmp/out2" 2>/dev/null
ppl2=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/out2")
awk -v a="$ppl" -v b="${ppl2:-0}" 'BEGIN { d = a - b; exit !(d < 0.0005 && d > -0.0005) }' &&
  echo "ok: -b 32 -t 1 from standard input: $ppl2" || { echo "FAIL: -b 32 -t 1 -f -: '$ppl2' against $ppl"; fails=$((fails + 1)); }
# offloaded to a sim device, the same figure (results do not depend on the split)
LOOM_SIM_DEVICES=1 "$bin" perplexity -m "$model" -f "$text" -c 128 -ngl 3 -t 2 >"$tmp/out3" 2>/dev/null
ppl3=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/out3")
awk -v a="$ppl" -v b="${ppl3:-0}" 'BEGIN { d = a - b; exit !(d < 0.0005 && d > -0.0005) }' &&
  echo "ok: -ngl 3 on sim0: $ppl3" || { echo "FAIL: -ngl 3 on sim0: '$ppl3' against $ppl"; fails=$((fails + 1)); }
# -ngl auto: on sim0 the fit's choice is printed and the figure is the same; on the CPU alone nothing
# is said about a device (the fit's probe is not the user's -ngl)
LOOM_SIM_DEVICES=1 "$bin" perplexity -m "$model" -f "$text" -c 128 -ngl auto -t 2 >"$tmp/out4" 2>"$tmp/err4"
ppl4=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/out4")
grep -q "^-ngl auto: [0-9]* of [0-9]* layers on sim0" "$tmp/err4" && awk -v a="$ppl" -v b="${ppl4:-0}" 'BEGIN { d = a - b; exit !(d < 0.0005 && d > -0.0005) }' &&
  echo "ok: -ngl auto on sim0: $ppl4" || { echo "FAIL: -ngl auto on sim0: '$ppl4' against $ppl: $(cat "$tmp/err4")"; fails=$((fails + 1)); }
"$bin" perplexity -m "$model" -f "$text" -c 128 -ngl auto -t 2 >"$tmp/out4" 2>"$tmp/err4"
ppl4=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/out4")
[ "$ppl4" = "$ppl" ] && ! grep -qi "warning\|device" "$tmp/err4" &&
  echo "ok: -ngl auto on the CPU alone" || { echo "FAIL: -ngl auto on the CPU: '$ppl4': $(cat "$tmp/err4")"; fails=$((fails + 1)); }
# a context past the training context (128 in stories260K-llamacpp.gguf) is warned about, as run does
"$bin" perplexity -m "$models/stories260K-llamacpp.gguf" -f "$text" -c 200 -t 2 >/dev/null 2>"$tmp/err5"
grep -q "^warning: the context of 200 tokens is larger than the model's training context of 128" "$tmp/err5" &&
  echo "ok: -c 200 warned" || { echo "FAIL: no warning for -c 200 past 128: $(cat "$tmp/err5")"; fails=$((fails + 1)); }
! grep -q "^warning" "$tmp/err" || { echo "FAIL: a warning for -c 128 of 2048: $(cat "$tmp/err")"; fails=$((fails + 1)); }
. "$(dirname "$0")/lib.sh"
head -c 300 "$text" >"$tmp/short.txt"
expect_fail "no -f" "no text given" "$bin" perplexity -m "$model" -c 128
expect_fail "no -m" "no model given" "$bin" perplexity -f "$text"
expect_fail "text shorter than 2 * n_ctx" "needs at least 256" "$bin" perplexity -m "$model" -f "$tmp/short.txt" -c 128
expect_fail "an empty text (BOS alone)" "the text is 1 token;" "$bin" perplexity -m "$model" -f - -c 128 </dev/null
expect_fail "-c too small" "invalid value '2' for -c" "$bin" perplexity -m "$model" -f "$text" -c 2
expect_fail "missing text file" "none.txt" "$bin" perplexity -m "$model" -f "$tmp/none.txt"
expect_fail "missing model" "none.gguf" "$bin" perplexity -m "$tmp/none.gguf" -f "$text"
expect_fail "unknown option" "unknown option '--bogus'" "$bin" perplexity -m "$model" -f "$text" --bogus
# a bare -fa is on, as llama-perplexity's -fa switch (tests/e2e/odd-input.sh); a bad value is one line
expect_fail "-fa with a bad value" "invalid value 'yes' for --flash-attn" "$bin" perplexity -m "$model" -f "$text" -fa yes
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all perplexity checks passed"
