#!/usr/bin/env bash
# `loom chat` driven through a pipe: the exact tokens each turn evaluates (the template applied,
# the history never evaluated again: each turn starts where the last one ended), the stop at the end
# of the turn, context shift, /exit, and `loom run -cnv`. The expected token ids come from
# `loom tokenize` of the text each format prescribes, written out here by hand.
# usage: chat.sh LOOM_BIN STORIES260K.gguf SHARED_MODELS_DIR
set -u
bin=$1 stories=$2 models=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the ids of TEXT (template markers parsed as the chat parses them), space-separated; extra flags after
ids() { "$bin" tokenize -m "$1" -p "$2" --ids --parse-special "${@:3}" | tr -d '[],'; }
# the Nth "[eval: ...]" line's ids and position
eval_ids() { grep '^\[eval:' "$1" | sed -n "${2}p" | sed 's/.*position [0-9]*: *//; s/\]$//'; }
eval_pos() { grep '^\[eval:' "$1" | sed -n "${2}p" | sed 's/.*at position \([0-9]*\):.*/\1/'; }
count() { set -- $1; echo $#; }

# ---- stories260K (no template in the file: ChatML, with a warning), a system message, two turns
printf 'Once upon a time\nThe cat sat\n' |
  "$bin" chat -m "$stories" -sys "Tell a story." -n 24 --temp 0 -t 1 -c 256 --verbose-prompt >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "chat exited with $rc: $(head -3 "$tmp/err")"
grep -q "the model has no chat template; using ChatML" "$tmp/err" || fail "no warning about the missing template"
want1=$(ids "$stories" $'<|im_start|>system\nTell a story.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n')
want2=$(ids "$stories" $'<|im_end|>\n<|im_start|>user\nThe cat sat<|im_end|>\n<|im_start|>assistant\n' --no-bos)
got1=$(eval_ids "$tmp/err" 1) got2=$(eval_ids "$tmp/err" 2)
[ "$got1" = "$want1" ] || fail "turn 1 evaluated '$got1', want '$want1'"
[ "$got2" = "$want2" ] || fail "turn 2 evaluated '$got2', want '$want2'"
n1=$(count "$want1")
# no end of turn in 24 tokens for this model: turn 2 starts after turn 1's prompt and 24 reply tokens
[ "$(eval_pos "$tmp/err" 1)" = 0 ] || fail "turn 1 at position $(eval_pos "$tmp/err" 1)"
[ "$(eval_pos "$tmp/err" 2)" = $((n1 + 24)) ] || fail "turn 2 at position $(eval_pos "$tmp/err" 2), want $((n1 + 24)) (history evaluated again?)"
[ "$(grep -c '^\[eval:' "$tmp/err")" = 2 ] || fail "$(grep -c '^\[eval:' "$tmp/err") evaluations for two turns"
grep -q "prompt eval time" "$tmp/err" || fail "no timings at the end"
echo "stories260K: two turns, ChatML, $n1 + $(count "$want2") tokens evaluated"

# the same through loom run -cnv (-p is the system message there)
printf 'Once upon a time\nThe cat sat\n' |
  "$bin" run -cnv -m "$stories" -p "Tell a story." -n 24 --temp 0 -t 1 -c 256 --verbose-prompt >"$tmp/out2" 2>"$tmp/err2"
cmp -s "$tmp/out" "$tmp/out2" && [ "$(eval_ids "$tmp/err2" 2)" = "$want2" ] || fail "loom run -cnv differs from loom chat"

# /exit ends the chat: the lines after it are not read as turns
printf 'Once upon a time\n/exit\nThe cat sat\n' | "$bin" chat -m "$stories" -n 4 --temp 0 -t 1 -c 256 --verbose-prompt >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(grep -c '^\[eval:' "$tmp/err")" = 1 ] || fail "/exit did not end the chat"

# ---- the end of the turn: a random-weight llama model whose file carries a Llama-2 template, and
# whose greedy reply to "hi" (seed 9) ends with EOS after a few tokens
tmpl='{% for message in messages %}{% if message["role"] == "user" %}{{ bos_token + "[INST] " + message["content"] + " [/INST]" }}{% else %}{{ message["content"] + eos_token }}{% endif %}{% endfor %}'
"$bin" gen-model --dim 64 --hidden 128 --layers 2 --heads 4 --vocab 300 --ctx 256 --seed 9 --chat-template "$tmpl" -o "$tmp/r.gguf" 2>"$tmp/err" ||
  fail "gen-model: $(cat "$tmp/err")"
printf 'hi\nhow are you\n' | "$bin" chat -m "$tmp/r.gguf" -n 40 --temp 0 -t 1 --verbose-prompt -v >"$tmp/out" 2>"$tmp/err"
grep -q "chat template: llama2 " "$tmp/err" || fail "the file's template was not recognized as llama2: $(grep 'chat template' "$tmp/err")"
want1=$(ids "$tmp/r.gguf" "[INST] hi [/INST]")
[ "$(eval_ids "$tmp/err" 1)" = "$want1" ] || fail "llama2 turn 1 evaluated '$(eval_ids "$tmp/err" 1)', want '$want1'"
n1=$(count "$want1")
p2=$(eval_pos "$tmp/err" 2)
k=$((p2 - n1 - 1)) # reply tokens before the EOS, which is evaluated too
if [ "$k" -lt 1 ] || [ "$k" -ge 40 ]; then
  fail "the reply did not stop at EOS before -n 40 (turn 2 at $p2)"
else
  # the EOS closes the turn in the cache: turn 2 sends only the next [INST], not "</s>" again
  want2=$(ids "$tmp/r.gguf" "[INST] how are you [/INST]" --no-bos)
  [ "$(eval_ids "$tmp/err" 2)" = "$want2" ] || fail "llama2 turn 2 evaluated '$(eval_ids "$tmp/err" 2)', want '$want2'"
  # the same reply cut at k tokens by -n: the same text, and no EOS in the cache
  head -1 "$tmp/out" >"$tmp/reply-eos"
  printf 'hi\nhow are you\n' | "$bin" chat -m "$tmp/r.gguf" -n "$k" --temp 0 -t 1 --verbose-prompt >"$tmp/out" 2>"$tmp/err"
  head -1 "$tmp/out" | cmp -s - "$tmp/reply-eos" || fail "the reply cut by -n $k differs from the one that stopped at EOS"
  [ "$(eval_pos "$tmp/err" 2)" = $((n1 + k)) ] || fail "with -n $k turn 2 is at $(eval_pos "$tmp/err" 2), want $((n1 + k))"
  want2=$(ids "$tmp/r.gguf" "</s>[INST] how are you [/INST]" --no-bos)
  [ "$(eval_ids "$tmp/err" 2)" = "$want2" ] || fail "a reply cut by -n is not closed by the next turn: '$(eval_ids "$tmp/err" 2)'"
  echo "end of turn: the reply stopped at EOS after $k tokens"
fi

# ---- Llama-3- and Qwen2-shaped random-weight models with the shared vocabularies and their
# templates: the header / ChatML markers are special tokens, BOS first; a reply cut by -n leaves the
# turn's closing marker to the next turn
l3='{% for message in messages %}{{ '"'"'<|start_header_id|>'"'"' + message['"'"'role'"'"'] + '"'"'<|end_header_id|>\n\n'"'"' + message['"'"'content'"'"'] | trim + '"'"'<|eot_id|>'"'"' }}{% endfor %}'
q2='{% for message in messages %}{{'"'"'<|im_start|>'"'"' + message['"'"'role'"'"'] + '"'"'\n'"'"' + message['"'"'content'"'"'] + '"'"'<|im_end|>'"'"' + '"'"'\n'"'"'}}{% endfor %}'
for shape in llama3 qwen2; do
  if [ $shape = llama3 ]; then
    vocab=$models/vocab/ggml-vocab-llama-bpe.gguf arch=llama tmpl=$l3
    t1=$'<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'
    t2=$'<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhow are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'
  else
    vocab=$models/vocab/ggml-vocab-qwen2.gguf arch=qwen2 tmpl=$q2
    t1=$'<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n'
    t2=$'<|im_end|>\n<|im_start|>user\nhow are you<|im_end|>\n<|im_start|>assistant\n'
  fi
  [ -f "$vocab" ] || { fail "no $vocab"; continue; }
  "$bin" gen-model --arch $arch --dim 64 --hidden 128 --layers 1 --heads 4 --kv-heads 2 --ctx 256 --tied --rope-freq-base 500000 \
    --vocab-from "$vocab" --chat-template "$tmpl" -o "$tmp/$shape.gguf" 2>"$tmp/err" || { fail "gen-model $shape: $(cat "$tmp/err")"; continue; }
  printf 'hi\nhow are you\n' | "$bin" chat -m "$tmp/$shape.gguf" -sys "Be brief." -n 6 --temp 0 -t 1 --verbose-prompt -v >"$tmp/out" 2>"$tmp/err"
  [ $? -eq 0 ] || fail "$shape chat: $(grep 'loom chat' "$tmp/err")"
  want=$([ $shape = llama3 ] && echo llama3 || echo chatml)
  grep -q "chat template: $want " "$tmp/err" || fail "$shape: the file's template was not recognized as $want: $(grep 'chat template' "$tmp/err")"
  want1=$(ids "$tmp/$shape.gguf" "$t1") want2=$(ids "$tmp/$shape.gguf" "$t2" --no-bos)
  [ "$(eval_ids "$tmp/err" 1)" = "$want1" ] || fail "$shape turn 1 evaluated '$(eval_ids "$tmp/err" 1)', want '$want1'"
  n1=$(count "$want1")
  p2=$(eval_pos "$tmp/err" 2)
  if [ "$p2" = $((n1 + 6)) ]; then
    [ "$(eval_ids "$tmp/err" 2)" = "$want2" ] || fail "$shape turn 2 evaluated '$(eval_ids "$tmp/err" 2)', want '$want2'"
  else
    fail "$shape turn 2 at position $p2, want $((n1 + 6)) (six reply tokens, no end of turn for this seed)"
  fi
  echo "$shape: turns of $n1 and $(count "$want2") tokens, special markers parsed"
done

# ---- context shift: 128 cells hold one turn of stories260K (46 + 24) but not two
for i in 1 2 3 4 5; do echo "Once upon a time"; done >"$tmp/five"
"$bin" chat -m "$stories" -n 24 --temp 0 -t 1 -c 128 --context-shift --verbose-prompt <"$tmp/five" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "chat with --context-shift exited with $rc: $(grep -v '^\[' "$tmp/err" | head -3)"
[ "$(grep -c '^\[eval:' "$tmp/err")" -ge 5 ] || fail "$(grep -c '^\[eval:' "$tmp/err") evaluations for five turns with --context-shift"
shifts=$(grep -c '^\[context shift: dropped' "$tmp/err")
[ "$shifts" -ge 3 ] || fail "$shifts context shifts for five turns in 128 cells"
# the first shift drops turn 1 whole, keeping BOS (--keep 0 keeps BOS): 46 + 24 - 1 tokens
first=$(ids "$stories" $'<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n')
grep -q "^\[context shift: dropped $(($(count "$first") + 24 - 1)) tokens after the first 1," "$tmp/err" ||
  fail "the first shift: $(grep -m1 '^\[context shift' "$tmp/err")"
echo "context shift: $shifts shifts over five turns"
# without it: a clear message after the first reply, status 1
"$bin" chat -m "$stories" -n 24 --temp 0 -t 1 -c 128 <"$tmp/five" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "the context is full (128 tokens); --context-shift" "$tmp/err" ||
  fail "a full context without --context-shift: status $rc, $(grep 'loom chat' "$tmp/err")"
# a message that cannot fit even in an empty context: refused, no loop
printf '%s\n' "$(printf 'Once upon a time %.0s' $(seq 1 40))" | "$bin" chat -m "$stories" -n 4 --temp 0 -t 1 -c 64 --context-shift >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "do not fit the context of 64" "$tmp/err" || fail "an oversized message: status $rc, $(grep 'loom chat' "$tmp/err")"

# run's options are chat's (one parser): each is accepted by chat and run -cnv (-h after them exits 0
# only when every option before it was taken), and listed in both helps
shared=(-sm layer -ts 1 -mg 0 -dev none -ctk f16 -ctv f16 --cache-type f16 -fa off -ub 64 -b 128 --presence-penalty 0.5
  --frequency-penalty 0.5 --logit-bias 13+1 --ignore-eos --mlock --no-mmap --temp -1 --top-k 5 --top-p 0.9 --min-p 0.1
  --repeat-penalty 1.1 --repeat-last-n 8 -s 3 -ngl auto --fit-margin 512 -t 1 -c 64 -n 4 --verbose-prompt -v)
for cmd in chat "run -cnv"; do
  $bin $cmd -m "$stories" "${shared[@]}" -h >"$tmp/help" 2>"$tmp/err" || fail "$cmd refused one of run's options: $(cat "$tmp/err")"
  for opt in -sm -ts -mg -dev -ctk -ctv --cache-type -fa -ub --presence-penalty --frequency-penalty --logit-bias --ignore-eos --mlock -ngl --fit-margin; do
    grep -q -- "$opt" "$tmp/help" || fail "$cmd -h does not list $opt"
  done
done
"$bin" run -h >"$tmp/help"
for opt in -sm -ts -mg -ub -ctk -ctv -fa -dev; do grep -q -- "^ *$opt, " "$tmp/help" || fail "run -h does not list $opt"; done
# and they act: --temp -1 is greedy as --temp 0 is; a +inf bias on a token makes every reply token
# that one (the reply is no longer the greedy one, which is no repetition of one token)
printf 'Once upon a time\n' | "$bin" chat -m "$stories" -n 12 --temp 0 -t 1 -c 256 >"$tmp/g0" 2>"$tmp/err" || fail "chat --temp 0: $(cat "$tmp/err")"
printf 'Once upon a time\n' | "$bin" chat -m "$stories" -n 12 --temp -1 -t 1 -c 256 >"$tmp/g1" 2>"$tmp/err" || fail "chat --temp -1: $(cat "$tmp/err")"
cmp -s "$tmp/g0" "$tmp/g1" || fail "chat --temp -1 is not greedy: '$(cat "$tmp/g1")' vs '$(cat "$tmp/g0")'"
first=$("$bin" tokenize -m "$stories" -p "$(head -1 "$tmp/g0")" --ids --no-bos | tr -d '[],' | awk '{print $1}')
printf 'Once upon a time\n' | "$bin" chat -m "$stories" -n 12 --temp 0 -t 1 -c 256 --logit-bias "$first+inf" >"$tmp/g2" 2>"$tmp/err" ||
  fail "chat --logit-bias: $(cat "$tmp/err")"
[ -n "$first" ] && ! cmp -s "$tmp/g0" "$tmp/g2" || fail "chat --logit-bias $first+inf did not change the reply '$(cat "$tmp/g0")'"
"$bin" chat -m "$stories" --logit-bias 99999+1 </dev/null >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "chat --logit-bias with a token out of range: $(cat "$tmp/err")"

# an error is the last line: no timings after it
echo hi | "$bin" chat -m "$stories" -t 1 -c 4 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(grep -v '^warning' "$tmp/err")" = "loom chat: 43 tokens do not fit the context of 4 (0 kept); use a larger -c" ] ||
  fail "chat -c 4: not one error line: $(cat "$tmp/err")"

# bad flags: one line, status 1
"$bin" chat -m "$stories" --chat-template nosuch </dev/null >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "unknown chat template 'nosuch' (known: chatml" "$tmp/err" || fail "unknown --chat-template: $(cat "$tmp/err")"

[ $fails -eq 0 ] || exit 1
echo "chat: all checks passed"
