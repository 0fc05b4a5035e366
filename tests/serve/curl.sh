#!/usr/bin/env bash
# `loom serve` over raw HTTP with curl: every endpoint, every error status, greedy output equal to
# `loom run --temp 0`, a client disconnecting mid-stream freeing the slot, a full queue, SIGTERM.
# usage: curl.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
command -v curl >/dev/null && command -v node >/dev/null || { echo "skipped: curl and node are needed"; exit 77; }
tmp=$(mktemp -d)
srv_pid= bg=
trap '[ -n "$bg" ] && kill "$bg" 2>/dev/null; [ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
. "$(dirname "$0")/lib.sh"
key=sekrit
# req NAME WANT_STATUS CURL_ARGS...: the body goes to $tmp/NAME
req() {
  local name=$1 want=$2; shift 2
  local got
  got=$(curl -s -m 20 -o "$tmp/$name" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "$name: HTTP $got, want $want: $(head -c 300 "$tmp/$name")"
}
# an error body: {"error":{"code":STATUS,"message":...,"type":...}}
err_ok() {
  local name=$1 code=$2
  [ "$(json "$tmp/$name" 'j.error.code')" = "$code" ] && [ -n "$(json "$tmp/$name" 'j.error.message')" ] && [ -n "$(json "$tmp/$name" 'j.error.type')" ] ||
    fail "$name: not an error object with code $code: $(head -c 300 "$tmp/$name")"
}
auth=(-H "Authorization: Bearer $key")

start_server "$tmp/log" -m "$model" -c 256 --metrics --api-key "$key" --alias stories
grep -q "^loom serve: model loaded (.*, 1 slot of 256 tokens)$" "$tmp/log" || fail "the load line: $(cat "$tmp/log")"

# health needs no key; everything else does
req health 200 "$url/health"
[ "$(json "$tmp/health" '[j.status, j.slots_idle, j.slots_processing]')" = '["ok",1,0]' ] || fail "health body: $(cat "$tmp/health")"
req nokey 401 "$url/v1/models"; err_ok nokey 401
req badkey 401 -H "Authorization: Bearer nope" "$url/v1/models"; err_ok badkey 401
# the scheme's name is case-insensitive (RFC 9110), the key is not
req lowbearer 200 -H "Authorization: bearer $key" "$url/v1/models"
req upbearer 200 -H "Authorization: BEARER  $key" "$url/v1/models"
req casekey 401 -H "Authorization: Bearer ${key^^}" "$url/v1/models"; err_ok casekey 401
req nospace 401 -H "Authorization: Bearer$key" "$url/v1/models"; err_ok nospace 401
req models 200 "${auth[@]}" "$url/v1/models"
# /props and /slots: the fields llama-server's clients read
req props 200 "${auth[@]}" "$url/props"
[ "$(json "$tmp/props" '[j.default_generation_settings.n_ctx, j.total_slots, j.model_path, j.model_alias, j.chat_template, j.default_generation_settings.params.temperature, j.default_generation_settings.params.top_k]')" = "[256,1,\"$model\",\"stories\",\"\",0.8,40]" ] ||
  fail "/props: $(cat "$tmp/props")"
[ "$(json "$tmp/props" '[j.bos_token, j.eos_token]')" = '["<s>","</s>"]' ] || fail "/props tokens: $(cat "$tmp/props")"
req slots 200 "${auth[@]}" "$url/slots"
[ "$(json "$tmp/slots" 'j')" = '[{"id":0,"n_ctx":256,"is_processing":false}]' ] || fail "/slots: $(cat "$tmp/slots")"
req propsnokey 401 "$url/props"; err_ok propsnokey 401
req propspost 405 "${auth[@]}" "$url/props" -d '{}'; err_ok propspost 405
# every JSON answer carries the one Content-Type, llama-server's
for u in /health /v1/models /v1/nothing /metrics; do
  ct=$(curl -s -m 10 -o /dev/null -w '%{content_type}' "${auth[@]}" "$url$u" -X GET)
  [ "$ct" = "application/json; charset=utf-8" ] || [ $u = /metrics ] || fail "GET $u: Content-Type '$ct'"
done
for u in /tokenize /completion; do
  ct=$(curl -s -m 10 -o /dev/null -w '%{content_type}' "${auth[@]}" "$url$u" -d '{"content":"x","prompt":"x","n_predict":1}')
  [ "$ct" = "application/json; charset=utf-8" ] || fail "POST $u: Content-Type '$ct'"
done
ct=$(curl -s -m 10 -o /dev/null -w '%{content_type}' "$url/v1/models")
[ "$ct" = "application/json; charset=utf-8" ] || fail "a 401: Content-Type '$ct'"
[ "$(json "$tmp/models" 'j.data[0].id')" = stories ] || fail "models: $(cat "$tmp/models")"
req page 200 "$url/"
grep -q '/v1/chat/completions' "$tmp/page" || fail "the page at / does not call the chat endpoint"
# HEAD of the key-free endpoints: 200 without a key and without a body; another method there: 405
# (not 401), with Allow
for u in / /health; do
  n=${u//\//_}
  req "post$n" 405 -D "$tmp/post$n.h" "$url$u" -d '{}'; err_ok "post$n" 405
  grep -qi '^Allow: GET, HEAD' "$tmp/post$n.h" || fail "POST $u: no Allow: GET, HEAD: $(cat "$tmp/post$n.h")"
done
# (raw bytes: the whole answer up to the server's close, to see that no body follows the head)
node -e '
const u = new URL(process.argv[1]);
const one = (path) => new Promise((res) => {
  const s = require("net").connect(+u.port, u.hostname, () => s.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
  let out = ""; s.on("data", (d) => out += d); s.on("close", () => res(out)); s.on("error", () => res(out)); s.setTimeout(10000, () => s.destroy());
});
(async () => {
  for (const p of ["/", "/health"]) {
    const out = await one(p), i = out.indexOf("\r\n\r\n");
    if (!out.startsWith("HTTP/1.1 200") || i < 0 || i + 4 !== out.length) console.log(`HEAD ${p}: ${JSON.stringify(out.slice(0, 400))}`);
  }
})();' "$url" >"$tmp/head"
[ -s "$tmp/head" ] && fail "HEAD without a key: $(cat "$tmp/head")"
req headmodels 401 -I "$url/v1/models"
req headmodelsk 200 -I "${auth[@]}" "$url/v1/models"

# greedy /completion and /v1/completions equal loom run --temp 0
prompt="Once upon a time"
"$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 1 -c 256 --no-display-prompt >"$tmp/ref" 2>"$tmp/referr" || fail "loom run: $(cat "$tmp/referr")"
req native 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$prompt\",\"n_predict\":40,\"temperature\":0}"
json "$tmp/native" 'j.content + "\n"' >"$tmp/native.txt"
cmp -s "$tmp/native.txt" "$tmp/ref" || fail "/completion differs from loom run: $(cat "$tmp/native.txt") vs $(cat "$tmp/ref")"
[ "$(json "$tmp/native" 'j.tokens_predicted')" = 40 ] || fail "/completion tokens_predicted: $(cat "$tmp/native")"
req oai 200 "${auth[@]}" "$url/v1/completions" -d "{\"prompt\":\"$prompt\",\"max_tokens\":40,\"temperature\":0}"
json "$tmp/oai" 'j.choices[0].text + "\n"' >"$tmp/oai.txt"
cmp -s "$tmp/oai.txt" "$tmp/ref" || fail "/v1/completions differs from loom run"
[ "$(json "$tmp/oai" '[j.object, j.choices[0].finish_reason, j.usage.completion_tokens, j.usage.total_tokens == j.usage.prompt_tokens + 40]')" = '["text_completion","length",40,true]' ] ||
  fail "/v1/completions fields: $(cat "$tmp/oai")"

# the native stream's pieces add up to the same text; the OpenAI stream ends with [DONE]
req nstream 200 "${auth[@]}" -N "$url/completion" -d "{\"prompt\":\"$prompt\",\"n_predict\":40,\"temperature\":0,\"stream\":true}"
sed -n 's/^data: //p' "$tmp/nstream" | node -e 'let s = ""; require("readline").createInterface({input: process.stdin}).on("line", l => { s += JSON.parse(l).content; }).on("close", () => process.stdout.write(s + "\n"));' >"$tmp/nstream.txt"
cmp -s "$tmp/nstream.txt" "$tmp/ref" || fail "the /completion stream differs from loom run: $(cat "$tmp/nstream.txt")"
req cstream 200 "${auth[@]}" -N "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true}'
[ "$(tail -n 2 "$tmp/cstream" | head -n 1)" = "data: [DONE]" ] || fail "the chat stream does not end with data: [DONE]: $(tail -c 200 "$tmp/cstream")"
grep -q '"object":"chat.completion.chunk"' "$tmp/cstream" && grep -q '"delta":{"role":"assistant"' "$tmp/cstream" || fail "no chat.completion.chunk with a delta"

# stop strings cut the text before them
first_word=$(head -c 12 "$tmp/ref" | tr -d '\n')
req stop 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$prompt\",\"n_predict\":40,\"temperature\":0,\"stop\":[\"Lily\"]}"
want=$(sed 's/Lily.*//' "$tmp/ref" | head -n 1)
[ "$(json "$tmp/stop" 'j.content')" = "$want" ] && [ "$(json "$tmp/stop" 'j.stop_type')" = word ] || fail "stop: $(cat "$tmp/stop") (want '$want')"

# tokenize / detokenize round trip
req tok 200 "${auth[@]}" "$url/tokenize" -d "{\"content\":\"$prompt\"}"
toks=$(json "$tmp/tok" 'j.tokens')
[ "$toks" != "[]" ] || fail "tokenize: $(cat "$tmp/tok")"
req detok 200 "${auth[@]}" "$url/detokenize" -d "{\"tokens\":$toks}"
[ "$(json "$tmp/detok" 'j.content')" = "$prompt" ] || fail "detokenize: $(cat "$tmp/detok")"
req detokbad 400 "${auth[@]}" "$url/detokenize" -d '{"tokens":[1,99999]}'; err_ok detokbad 400
# byte tokens (<0xFF> <0xFE> <0xC3> in this vocabulary) that form no UTF-8 character come back as
# U+FFFD each (the incomplete C3 at the end too), and the body is valid UTF-8; C3 A9 is one "é"
utf8_json() { # FILE: the 'content' of a body that must be valid UTF-8, as \u escapes
  node -e 'const s = new TextDecoder("utf-8", {fatal: true}).decode(require("fs").readFileSync(process.argv[1]));
    process.stdout.write(JSON.stringify(JSON.parse(s).content).replace(/[^\x20-\x7e]/g, c => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));' "$1" 2>&1
}
req detokbytes 200 "${auth[@]}" "$url/detokenize" -d '{"tokens":[258,257,198]}'
[ "$(utf8_json "$tmp/detokbytes")" = '"\ufffd\ufffd\ufffd"' ] || fail "invalid UTF-8 from /detokenize: $(od -c "$tmp/detokbytes" | head -3)"
req detokok 200 "${auth[@]}" "$url/detokenize" -d '{"tokens":[198,172]}'
[ "$(utf8_json "$tmp/detokok")" = '"\u00e9"' ] || fail "byte tokens C3 A9 are not one character: $(cat "$tmp/detokok")"
# a body that is not UTF-8 is refused (its strings would be sent back: stop strings cut the text)
req enotutf8 400 "${auth[@]}" "$url/completion" --data-binary $'{"prompt":"Once\xff","n_predict":2}'; err_ok enotutf8 400

# /tokenize: add_special puts BOS (1) first; with_pieces gives each id with its text, the pieces
# joined are the content (" Once" has its leading space, SentencePiece's prefix)
req toksp 200 "${auth[@]}" "$url/tokenize" -d "{\"content\":\"$prompt\",\"add_special\":true}"
[ "$(json "$tmp/toksp" 'JSON.stringify(j.tokens)')" = "$(node -e 'console.log(JSON.stringify([1].concat(JSON.parse(process.argv[1]))))' "$toks")" ] ||
  fail "add_special: $(cat "$tmp/toksp") vs $toks"
req tokpc 200 "${auth[@]}" "$url/tokenize" -d "{\"content\":\"$prompt\",\"with_pieces\":true}"
[ "$(json "$tmp/tokpc" 'JSON.stringify(j.tokens.map(t => t.id))')" = "$toks" ] && [ "$(json "$tmp/tokpc" 'j.tokens.map(t => t.piece).join("")')" = " $prompt" ] ||
  fail "with_pieces: $(cat "$tmp/tokpc")"

# a prompt of token ids (taken as they are: BOS is not added) gives the text of the same prompt as
# a string; a mixed array tokenizes each string in place (BOS only before a first string); an id
# outside the vocabulary, a fraction, another type or several prompts: 400 naming 'prompt'
bos_toks=$(json "$tmp/toksp" 'JSON.stringify(j.tokens)')
req ptoks 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":$bos_toks,\"n_predict\":40,\"temperature\":0}"
json "$tmp/ptoks" 'j.content + "\n"' >"$tmp/ptoks.txt"
cmp -s "$tmp/ptoks.txt" "$tmp/ref" && [ "$(json "$tmp/ptoks" 'j.tokens_evaluated')" = "$(json "$tmp/toksp" 'j.tokens.length')" ] ||
  fail "a token-array prompt: $(head -c 300 "$tmp/ptoks")"
req ptokso 200 "${auth[@]}" "$url/v1/completions" -d "{\"prompt\":$bos_toks,\"max_tokens\":40,\"temperature\":0}"
json "$tmp/ptokso" 'j.choices[0].text + "\n"' >"$tmp/ptokso.txt"
cmp -s "$tmp/ptokso.txt" "$tmp/ref" || fail "a token-array prompt on /v1/completions: $(head -c 300 "$tmp/ptokso")"
req pnobos 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":$toks,\"n_predict\":1,\"temperature\":0}"
[ "$(json "$tmp/pnobos" 'j.tokens_evaluated')" = "$(json "$tmp/tok" 'j.tokens.length')" ] || fail "a token-array prompt got a BOS: $(cat "$tmp/pnobos")"
# [text, id, text]: BOS, the text's tokens, the id, the second text's tokens without BOS
req tokdot 200 "${auth[@]}" "$url/tokenize" -d '{"content":" The end."}'
mixed_want=$(node -e 'const a = JSON.parse(process.argv[1]), b = JSON.parse(process.argv[2]); console.log(JSON.stringify(a.concat([13], b)))' "$bos_toks" "$(json "$tmp/tokdot" 'JSON.stringify(j.tokens)')")
req pmixed 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":[\"$prompt\",13,\" The end.\"],\"n_predict\":12,\"temperature\":0}"
req pmixedt 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":$mixed_want,\"n_predict\":12,\"temperature\":0}"
[ "$(json "$tmp/pmixed" '[j.content, j.tokens_evaluated]')" = "$(json "$tmp/pmixedt" '[j.content, j.tokens_evaluated]')" ] ||
  fail "a mixed prompt: $(head -c 200 "$tmp/pmixed") vs the tokens $mixed_want: $(head -c 200 "$tmp/pmixedt")"
for bad in '[1,99999]' '[1,2.5]' '[-1]' '[]' '[[1,2]]' '[1,true]' '["a","b"]' '{"a":1}'; do
  req eptok 400 "${auth[@]}" "$url/completion" -d "{\"prompt\":$bad}"; err_ok eptok 400
  case "$(json "$tmp/eptok" 'j.error.message')" in *"'prompt'"*) ;; *) fail "the message for the prompt $bad does not name it: $(cat "$tmp/eptok")" ;; esac
done

# the sampler's fields: max_tokens on /completion too; penalties as loom run's flags give them; a
# logit_bias (OpenAI's map form and the native array form) bans the greedy token or forces another
req nmax 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$prompt\",\"max_tokens\":7,\"temperature\":0}"
[ "$(json "$tmp/nmax" 'j.tokens_predicted')" = 7 ] || fail "/completion max_tokens 7: $(cat "$tmp/nmax")"
pen=(--repeat-penalty 1.3 --presence-penalty 0.5 --frequency-penalty 0.5)
"$bin" run -m "$model" -p "$prompt" -n 40 --temp 0 -t 1 -c 256 --no-display-prompt "${pen[@]}" >"$tmp/refpen" 2>"$tmp/referr" || fail "loom run: $(cat "$tmp/referr")"
cmp -s "$tmp/refpen" "$tmp/ref" && fail "the penalties do not change loom run's greedy text"
req npen 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$prompt\",\"n_predict\":40,\"temperature\":0,\"repeat_penalty\":1.3,\"presence_penalty\":0.5,\"frequency_penalty\":0.5}"
json "$tmp/npen" 'j.content + "\n"' >"$tmp/npen.txt"
cmp -s "$tmp/npen.txt" "$tmp/refpen" || fail "penalties: /completion differs from loom run: $(cat "$tmp/npen.txt") vs $(cat "$tmp/refpen")"
# next_tok FILE EXPR: the first generated token: the prompt's tokens, then those of the text EXPR in FILE
n_ptok=$(node -e 'console.log(JSON.parse(process.argv[1]).length)' "$toks")
next_tok() {
  req nexttok 200 "${auth[@]}" "$url/tokenize" -d "{\"content\":$(json "$1" "JSON.stringify(\"$prompt\" + $2)")}"
  json "$tmp/nexttok" "j.tokens[$n_ptok]"
}
t0=$(next_tok "$tmp/native" j.content)
req force 200 "${auth[@]}" "$url/tokenize" -d '{"content":" dragon"}'
tf=$(json "$tmp/force" 'j.tokens[0]')
for form in "{\"$t0\":-100}" "[[$t0,false]]"; do
  req ban 200 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$prompt\",\"n_predict\":1,\"temperature\":0,\"logit_bias\":$form}"
  tb=$(next_tok "$tmp/ban" j.content)
  [ -n "$tb" ] && [ "$tb" != "$t0" ] || fail "logit_bias $form: token $t0 still sampled: $(cat "$tmp/ban")"
done
req forced 200 "${auth[@]}" "$url/v1/completions" -d "{\"prompt\":\"$prompt\",\"max_tokens\":1,\"temperature\":0,\"logit_bias\":{\"$tf\":100}}"
[ "$(next_tok "$tmp/forced" 'j.choices[0].text')" = "$tf" ] || fail "logit_bias {$tf: 100}: $(cat "$tmp/forced")"
for bad in '"frequency_penalty":"x"' '"presence_penalty":[1]' '"repeat_penalty":0' '"logit_bias":{"abc":1}' '"logit_bias":[[1]]' '"logit_bias":{"99999":1}'; do
  req epen 400 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"x\",$bad}"; err_ok epen 400
  f=${bad%%\":*}; f=${f#\"}
  case "$(json "$tmp/epen" 'j.error.message')" in *"'$f'"*) ;; *) fail "the message for $bad does not name $f: $(cat "$tmp/epen")" ;; esac
done

# counts and seeds are integers: a fraction is refused, naming the field
for f in max_tokens seed top_k; do
  req "efrac_$f" 400 "${auth[@]}" "$url/v1/completions" -d "{\"prompt\":\"x\",\"$f\":2.5}"; err_ok "efrac_$f" 400
  case "$(json "$tmp/efrac_$f" 'j.error.message')" in *"'$f'"*) ;; *) fail "the message for $f 2.5 does not name it: $(cat "$tmp/efrac_$f")" ;; esac
done
# integer bounds are written as integers; the seed's are loom run's
req ebig 400 "${auth[@]}" "$url/completion" -d '{"prompt":"x","max_tokens":2e9}'
case "$(json "$tmp/ebig" 'j.error.message')" in *"'max_tokens' must be an integer in [-1, 1073741824]") ;; *) fail "max_tokens 2e9: $(cat "$tmp/ebig")" ;; esac
req eseed 400 "${auth[@]}" "$url/completion" -d '{"prompt":"x","seed":-2}'
case "$(json "$tmp/eseed" 'j.error.message')" in *"'seed' must be an integer in [-1, 18446744073709551614]") ;; *) fail "seed -2: $(cat "$tmp/eseed")" ;; esac
"$bin" run -m "$model" -p x -n 1 --seed 18446744073709551615 2>&1 | grep -q "0..18446744073709551614" || fail "loom run's --seed bound is not the server's"
req efrac_chat 400 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":1.5}'
err_ok efrac_chat 400
# OpenAI's content parts: the text parts, concatenated, are the message (the greedy reply equals the
# one to the same text as a string); another part type is refused
req cparts 200 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":[{"type":"text","text":"Tell me"},{"type":"text","text":" a story."}]}],"max_tokens":12,"temperature":0}'
req cstring 200 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":12,"temperature":0}'
[ "$(json "$tmp/cparts" '[j.choices[0].message.content, j.usage.prompt_tokens]')" = "$(json "$tmp/cstring" '[j.choices[0].message.content, j.usage.prompt_tokens]')" ] ||
  fail "content parts: $(cat "$tmp/cparts") vs $(cat "$tmp/cstring")"
req cimage 400 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
err_ok cimage 400
req erole 400 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"wizard","content":"Hi"}]}'; err_ok erole 400
case "$(json "$tmp/erole" 'j.error.message')" in *"'wizard'"*) ;; *) fail "the unknown role is not named: $(cat "$tmp/erole")" ;; esac
# OpenAI's developer role is the system role; a tool's result is written as the template writes a
# role name (this model has no template: ChatML); the prompt is the text formatted by hand
# chat_count NAME MESSAGES TEXT: the chat request's prompt tokens equal TEXT's (BOS, markers parsed)
chat_count() {
  req "$1" 200 "${auth[@]}" "$url/v1/chat/completions" -d "{\"messages\":$2,\"max_tokens\":6,\"temperature\":0}"
  req "$1.tok" 200 "${auth[@]}" "$url/tokenize" -d "{\"content\":$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$3"),\"add_special\":true,\"parse_special\":true}"
  [ "$(json "$tmp/$1" 'j.usage.prompt_tokens')" = "$(json "$tmp/$1.tok" 'j.tokens.length')" ] ||
    fail "$1: $(json "$tmp/$1" 'j.usage.prompt_tokens') prompt tokens, want $(json "$tmp/$1.tok" 'j.tokens.length'): those of $3"
}
# chatml ROLE CONTENT ...: 'ct' gets the turns in ChatML, then the assistant's opening
chatml() {
  ct=
  while [ $# -gt 0 ]; do ct+="<|im_start|>$1"$'\n'"$2<|im_end|>"$'\n'; shift 2; done
  ct+="<|im_start|>assistant"$'\n'
}
chatml system 'Be brief.' user Hi
chat_count rdev '[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]' "$ct"
chat_count rsys '[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]' "$ct"
[ "$(json "$tmp/rdev" 'j.choices[0].message.content')" = "$(json "$tmp/rsys" 'j.choices[0].message.content')" ] || fail "developer and system replies differ"
chatml user '2+2?' assistant '' tool 4
chat_count rtool '[{"role":"user","content":"2+2?"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"c1","content":"4"}]' "$ct"
# a known endpoint asked with another method: 405, the error JSON and Allow
req e405 405 "${auth[@]}" -D "$tmp/e405.h" "$url/v1/completions"; err_ok e405 405
grep -qi '^Allow: POST' "$tmp/e405.h" || fail "405 without Allow: POST: $(cat "$tmp/e405.h")"
req e405get 405 "${auth[@]}" -D "$tmp/e405get.h" "$url/v1/models" -d '{}'; err_ok e405get 405
grep -qi '^Allow: GET' "$tmp/e405get.h" || fail "405 without Allow: GET: $(cat "$tmp/e405get.h")"

# errors
req e404 404 "${auth[@]}" "$url/v1/nothing"; err_ok e404 404
req emal 400 "${auth[@]}" "$url/v1/completions" -d '{"prompt": "x",'; err_ok emal 400
req etype 400 "${auth[@]}" "$url/v1/completions" -d '{"prompt":"x","temperature":"hot"}'; err_ok etype 400
req emsgs 400 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":"hi"}'; err_ok emsgs 400
req earr 400 "${auth[@]}" "$url/completion" -d '[1,2]'; err_ok earr 400
req en2 400 "${auth[@]}" "$url/v1/completions" -d '{"prompt":"x","n":2}'; err_ok en2 400
head -c 2000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
req e413 413 "${auth[@]}" "$url/completion" --data-binary @"$tmp/big"; err_ok e413 413
# a Content-Length past the limit is refused before the body comes (none is sent here: a server
# waiting for it would leave curl to its -m limit, status 000)
req e413early 413 -m 10 -H "Expect:" -H "Content-Length: 5000000" "${auth[@]}" "$url/completion" --data-binary ''; err_ok e413early 413
# a malformed Content-Length gets one answer, the JSON error (libmicrohttpd alone repeats its header
# block and sends HTML); one past 64 bits is too large (413) like any other past the limit; raw
# bytes over a socket (curl would mend the header), one node for all cases
node -e '
const u = new URL(process.argv[1]);
const one = (cl) => new Promise((res) => {
  const s = require("net").connect(+u.port, u.hostname, () => s.write(`POST /completion HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\n{}`));
  let out = ""; s.on("data", (d) => out += d); s.on("close", () => res(out)); s.on("error", () => res(out)); s.setTimeout(10000, () => s.destroy());
});
(async () => {
  const huge = /^the request body is larger than 1048576 bytes$/;
  for (const [cl, want, msg] of [["abc", 400, /./], ["-5", 400, /./], ["12, 13", 400, /./], ["1 2", 400, /./],
                                 ["99999999999999999999999", 413, huge], ["9223372036854775808", 413, huge], ["18446744073709551616", 413, huge]]) {
    const out = await one(cl), i = out.indexOf("\r\n\r\n");
    let ok = (out.match(/HTTP\/1\.1 /g) || []).length === 1 && out.startsWith(`HTTP/1.1 ${want}`) && i > 0;
    try { const e = JSON.parse(out.slice(i + 4)).error; ok = ok && e.code === want && msg.test(e.message) && e.type; } catch (x) { ok = false; }
    if (!ok) console.log(`Content-Length "${cl}": ${JSON.stringify(out.slice(0, 400))}`);
  }
})();' "$url" >"$tmp/badcl"
[ -s "$tmp/badcl" ] && fail "malformed Content-Length: $(cat "$tmp/badcl")"
# a NUL in a JSON string (\u0000) is refused, not cut off there; an escaped backslash before u0000 is text
req enul 400 "${auth[@]}" "$url/completion" -d '{"prompt":"Once\u0000 upon a time","n_predict":2}'; err_ok enul 400
case "$(json "$tmp/enul" 'j.error.message')" in *NUL*) ;; *) fail "the NUL message: $(cat "$tmp/enul")" ;; esac
req enulkey 400 "${auth[@]}" "$url/completion" -d '{"prompt":"Once","n_predict":2,"stop":["a\u0000b"]}'; err_ok enulkey 400
req bslash 200 "${auth[@]}" "$url/tokenize" -d '{"content":"a\\u0000b"}'
req bslashd 200 "${auth[@]}" "$url/detokenize" -d "{\"tokens\":$(json "$tmp/bslash" 'j.tokens')}"
[ "$(json "$tmp/bslashd" 'j.content')" = 'a\u0000b' ] || fail "an escaped backslash before u0000: $(cat "$tmp/bslashd")"
long=$(printf 'Once upon a time %.0s' $(seq 100))
req elong 400 "${auth[@]}" "$url/completion" -d "{\"prompt\":\"$long\"}"; err_ok elong 400
n_long=$(curl -s "${auth[@]}" "$url/tokenize" -d "{\"content\":\"$long\"}" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).tokens.length + 1))')
msg=$(json "$tmp/elong" 'j.error.message')
case "$msg" in *"$n_long tokens"*256*) ;; *) fail "the too-long message does not name $n_long and 256: $msg" ;; esac
req egarbage 400 "${auth[@]}" "$url/completion" --data-binary $'\xff\xfe\x00\x01'; err_ok egarbage 400

# cache_prompt: a follow-up that extends the last conversation evaluates only the new tokens, and
# gives the text that evaluating it all gives
msgs='[{"role":"user","content":"Tell me a story."}]'
req c1 200 "${auth[@]}" "$url/v1/chat/completions" -d "{\"messages\":$msgs,\"max_tokens\":20,\"temperature\":0,\"cache_prompt\":true}"
r1=$(json "$tmp/c1" 'JSON.stringify(j.choices[0].message.content)')
msgs2="[{\"role\":\"user\",\"content\":\"Tell me a story.\"},{\"role\":\"assistant\",\"content\":$r1},{\"role\":\"user\",\"content\":\"More!\"}]"
curl -s "${auth[@]}" "$url/metrics" >"$tmp/m0"
req c2 200 "${auth[@]}" "$url/v1/chat/completions" -d "{\"messages\":$msgs2,\"max_tokens\":20,\"temperature\":0,\"cache_prompt\":true}"
curl -s "${auth[@]}" "$url/metrics" >"$tmp/m1"
req c3 200 "${auth[@]}" "$url/v1/chat/completions" -d "{\"messages\":$msgs2,\"max_tokens\":20,\"temperature\":0}"
p2=$(json "$tmp/c2" 'j.usage.prompt_tokens')
cached=$(json "$tmp/c2" 'j.timings.cache_n')
evald=$(( $(sed -n 's/^loom:prompt_tokens_total //p' "$tmp/m1") - $(sed -n 's/^loom:prompt_tokens_total //p' "$tmp/m0") ))
[ "$cached" -gt 0 ] && [ $((cached + evald)) -eq "$p2" ] && [ "$(json "$tmp/c2" 'j.timings.prompt_n')" -eq "$evald" ] ||
  fail "cache_prompt: $cached cached + $evald evaluated (metrics) for a prompt of $p2 tokens"
[ "$(json "$tmp/c2" 'j.choices[0].message.content')" = "$(json "$tmp/c3" 'j.choices[0].message.content')" ] || fail "cache_prompt changed the reply"
[ "$(json "$tmp/c3" 'j.timings.cache_n')" = 0 ] || fail "a request without cache_prompt used the cache"

# more clients holding connections at once than the server takes (240): those past it get a 503 at
# once (the error JSON), the others wait; once they leave, the server serves again
node -e '
const u = new URL(process.argv[1]), n = 300, socks = [], outs = new Array(n).fill("");
for (let i = 0; i < n; i++) {
  const s = require("net").connect(+u.port, u.hostname, () => s.write("GET /health HTTP/1.1\r\nHost: x\r\n"));
  s.on("data", (d) => outs[i] += d); s.on("error", () => {}); socks.push(s);
}
setTimeout(() => {
  let busy = 0, bad = 0;
  for (const o of outs) {
    if (!o) continue;
    const i = o.indexOf("\r\n\r\n");
    try { if (o.startsWith("HTTP/1.1 503") && JSON.parse(o.slice(i + 4)).error.code === 503) { busy++; continue; } } catch (x) {}
    bad++;
  }
  console.log(`${busy} ${bad}`);
  for (const s of socks) s.destroy();
}, 3000);' "$url" >"$tmp/conns"
read -r n_busy n_bad <"$tmp/conns"
[ "${n_busy:-0}" -ge 60 ] && [ "${n_bad:-1}" = 0 ] || fail "300 connections held: $n_busy answered 503 (want >= 60), $n_bad other answers"
back=
for i in $(seq 50); do curl -s -m 2 "$url/health" | grep -q '"ok"' && { back=1; break; }; sleep 0.1; done
[ -n "$back" ] || fail "the server did not serve again after 300 connections held at once"

# a port in use: the one line, before the model is loaded
timeout 20 "$bin" serve -m "$model" --port "${url##*:}" -t 1 2>"$tmp/inuse"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/inuse")" = 1 ] && grep -q "^loom serve: cannot listen on 127.0.0.1 port ${url##*:}: Address already in use$" "$tmp/inuse" ||
  fail "a port in use: exit $rc: $(cat "$tmp/inuse")"

# metrics count what was done
req metrics 200 "${auth[@]}" "$url/metrics"
grep -q '^loom:tokens_predicted_total [1-9]' "$tmp/metrics" && grep -q '^loom:prompt_tokens_total [1-9]' "$tmp/metrics" &&
  grep -q '^loom:requests_processing 0' "$tmp/metrics" && grep -q '^loom:requests_deferred 0' "$tmp/metrics" || fail "metrics: $(cat "$tmp/metrics")"
stop_server

# one slot, no queue: a long stream holds the slot (503 for the next request); the client going
# away frees it; SIGTERM during a stream still exits 0
start_server "$tmp/log2" -m "$model" -c 32768 --queue-max 0 --metrics -ngl auto
# (a slot's context past the training context of 128 is warned about, as run does; -ngl auto without a device says nothing)
grep -q "^loom serve: warning: the context of 32768 tokens is larger than the model's training context of 128" "$tmp/log2" ||
  fail "no warning for -c 32768: $(cat "$tmp/log2")"
grep -q -- "-ngl" "$tmp/log2" && fail "-ngl auto without a device: $(cat "$tmp/log2")"
long_req='{"prompt":"Once","n_predict":30000,"ignore_eos":true,"stream":true}'
# long_stream FILE: the long request streamed into FILE in the background (its pid in 'bg'), once
# it has sent something (10 s at most); false when it has not
long_stream() {
  curl -s -N "$url/completion" -d "$long_req" >"$1" &
  bg=$!
  local i
  for i in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
# slot_freed: true once the metrics show no request processing (10 s at most)
slot_freed() {
  local i
  for i in $(seq 100); do
    curl -s "$url/metrics" | grep -q '^loom:requests_processing 0' && return 0
    sleep 0.1
  done
  return 1
}
long_stream "$tmp/long" || fail "the long stream sent nothing"
req busy 503 "$url/completion" -d '{"prompt":"Once","n_predict":4}'; err_ok busy 503
req slotsbusy 200 "$url/slots"
[ "$(json "$tmp/slotsbusy" 'j')" = '[{"id":0,"n_ctx":32768,"is_processing":true}]' ] || fail "/slots while a stream runs: $(cat "$tmp/slotsbusy")"
[ "$(json "$tmp/busy" 'j.error.message')" = "the server is busy: every slot is busy and queueing is off (--queue-max 0)" ] ||
  fail "the 503 with --queue-max 0: $(cat "$tmp/busy")"
kill "$bg"; wait "$bg" 2>/dev/null; bg=
slot_freed || fail "the slot was not freed after the client disconnected"
req after 200 "$url/completion" -d '{"prompt":"Once","n_predict":4}'
# so does a client that gives up waiting for a whole (not streamed) answer
curl -s -m 1 "$url/completion" -d "${long_req/true,\"stream\":true/true}" >/dev/null
slot_freed || fail "the slot was not freed after a non-streaming client disconnected"
req after2 200 "$url/completion" -d '{"prompt":"Once","n_predict":4}'
stop_server

# SIGTERM while streams are open (-np 1): the one generating and those waiting for the slot (as in
# the prompt phase: no token yet) each end with their closing event -- finish_reason "length" (cut
# short, as llama-server says), stop_type "none" on /completion -- then [DONE] on the OpenAI ones,
# in a whole chunked body (curl exit 0); the server exits 0
start_server "$tmp/log3" -m "$model" -c 32768 --metrics -to 2
# (-to 2: a request whose body stops short of its Content-Length gets 408 once the connection has
# been silent 2 s; raw bytes over a socket, curl would not send a short body)
node -e '
const u = new URL(process.argv[1]);
const s = require("net").connect(+u.port, u.hostname, () => s.write("POST /completion HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":"));
let out = ""; s.on("data", (d) => out += d); s.on("error", () => {}); s.setTimeout(20000, () => s.destroy());
s.on("close", () => {
  const i = out.indexOf("\r\n\r\n");
  let ok = out.startsWith("HTTP/1.1 408") && /\r\nContent-Type: application\/json; charset=utf-8\r\n/.test(out);
  try { ok = ok && JSON.parse(out.slice(i + 4)).error.code === 408; } catch (x) { ok = false; }
  if (!ok) console.log(JSON.stringify(out.slice(0, 400)));
});' "$url" >"$tmp/short"
[ -s "$tmp/short" ] && fail "a body shorter than its Content-Length: $(cat "$tmp/short")"
"$bin" serve -m "$model" -to 0 2>"$tmp/to0" && fail "-to 0 accepted"
[ "$(wc -l <"$tmp/to0")" = 1 ] || fail "-to 0: $(cat "$tmp/to0")"
# stream_end FILE: every event parses; prints the closing event's finish_reason (the native
# stop_type), its completion tokens, whether a delta with the role came, the [DONE], and the prompt
# tokens evaluated (none for a request that never had the slot)
stream_end() {
  node -e 'const evs = require("fs").readFileSync(process.argv[1], "utf8").split("\n\n").filter(e => e);
    let done = false, role = false, last = null;
    for (const e of evs) {
      if (done || !e.startsWith("data: ")) { console.log("bad event " + JSON.stringify(e.slice(0, 80))); process.exit(); }
      if (e === "data: [DONE]") { done = true; continue; }
      last = JSON.parse(e.slice(6));
      if (last.choices && last.choices[0].delta && last.choices[0].delta.role === "assistant") role = true;
    }
    if (!last) { console.log("no event"); process.exit(); }
    const c = last.choices ? last.choices[0] : null;
    console.log([c ? c.finish_reason : last.stop_type, c ? last.usage.completion_tokens : last.tokens_predicted, role, done, last.timings.prompt_n].join(" "));' "$1" 2>&1
}
chat_long='{"messages":[{"role":"user","content":"Hi"}],"max_tokens":30000,"ignore_eos":true,"stream":true}'
curl -s -N "$url/v1/chat/completions" -d "$chat_long" >"$tmp/sig1" & sig1=$!
for i in $(seq 100); do [ -s "$tmp/sig1" ] && break; sleep 0.1; done
curl -s -N "$url/v1/chat/completions" -d "$chat_long" >"$tmp/sig2" & sig2=$!
curl -s -N "$url/completion" -d "$long_req" >"$tmp/sig3" & sig3=$!
queued=
for i in $(seq 300); do curl -s "$url/metrics" | grep -q '^loom:requests_deferred 2' && { queued=1; break; }; sleep 0.1; done
[ -n "$queued" ] || fail "the two streams did not wait for the slot: $(curl -s "$url/metrics" | grep requests_)"
sleep 0.05
stop_server
for k in 1 2 3; do
  eval "wait \$sig$k"; rc=$?
  [ $rc -eq 0 ] || fail "stream $k after SIGTERM: curl exit $rc: $(tail -c 300 "$tmp/sig$k")"
done
read -r why ntok role done _ < <(stream_end "$tmp/sig1")
[ "$why" = length ] && [ "$ntok" -gt 0 ] && [ "$role" = true ] && [ "$done" = true ] || fail "the generating chat stream after SIGTERM: $why $ntok $role $done: $(tail -c 300 "$tmp/sig1")"
[ "$(stream_end "$tmp/sig2")" = "length 0 true true 0" ] || fail "the waiting chat stream after SIGTERM: $(stream_end "$tmp/sig2"): $(tail -c 300 "$tmp/sig2")"
[ "$(stream_end "$tmp/sig3")" = "none 0 false false 0" ] || fail "the waiting /completion stream after SIGTERM: $(stream_end "$tmp/sig3"): $(tail -c 300 "$tmp/sig3")"

# a Llama 3 template that names the ipython role (Llama 3.1's) writes a tool's result in it
"$bin" gen-model --preset 260k -o "$tmp/l3.gguf" --chat-template \
  '{{ "<|start_header_id|>" + message["role"] + "<|end_header_id|>" }}{% if message["role"] == "ipython" %}{% endif %}' >/dev/null 2>&1 || fail "gen-model"
start_server "$tmp/log4" -m "$tmp/l3.gguf" -c 512 --api-key "$key" -np 2
req l3props 200 "${auth[@]}" "$url/props"
[ "$(json "$tmp/l3props" '[j.total_slots, j.default_generation_settings.n_ctx, j.chat_template.includes("ipython")]')" = '[2,256,true]' ] || fail "/props with -np 2: $(cat "$tmp/l3props")"
req l3slots 200 "${auth[@]}" "$url/slots"
[ "$(json "$tmp/l3slots" 'j.map(s => s.id)')" = '[0,1]' ] || fail "/slots with -np 2: $(cat "$tmp/l3slots")"
chat_count rl3 '[{"role":"user","content":"2+2?"},{"role":"tool","content":"4"}]' \
  "<|start_header_id|>user<|end_header_id|>

2+2?<|eot_id|><|start_header_id|>ipython<|end_header_id|>

4<|eot_id|><|start_header_id|>assistant<|end_header_id|>

"
stop_server

# an IPv6 literal in the URL printed is in brackets
{
  "$bin" serve -m "$model" --host ::1 --port 0 -t 1 2>"$tmp/v6" &
  v6pid=$!
  for i in $(seq 50); do grep -q listening "$tmp/v6" && break; kill -0 $v6pid 2>/dev/null || break; sleep 0.1; done
  if grep -q listening "$tmp/v6"; then
    u6=$(grep -o 'http://\[::1\]:[0-9]*' "$tmp/v6")
    [ -n "$u6" ] && curl -s -g -m 5 "$u6/health" | grep -q '"ok"' || fail "--host ::1: $(cat "$tmp/v6")"
  else
    grep -q "cannot listen" "$tmp/v6" || fail "--host ::1: $(cat "$tmp/v6")" # a machine without IPv6
  fi
  kill -TERM $v6pid 2>/dev/null; wait $v6pid 2>/dev/null
}

# bad flags: one line, exit 1
"$bin" serve -m "$model" -np 0 2>"$tmp/np" && fail "-np 0 accepted"
[ "$(wc -l <"$tmp/np")" = 1 ] || fail "-np 0: $(cat "$tmp/np")"
timeout 20 "$bin" serve -m "$model" --port 0 -c 8 -np 8 2>"$tmp/npc"
rc=$?
[ $rc -eq 1 ] && grep -q "leaves 1 token per slot" "$tmp/npc" && [ "$(wc -l <"$tmp/npc")" = 1 ] || fail "-c 8 -np 8: exit $rc, not one line: $(cat "$tmp/npc")"
# a KV cache that does not fit (a sim device of 32 MiB): the one line, naming -c, before any port is opened
timeout 20 env LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=32 "$bin" serve -m "$model" --port 0 -c 80000 -ngl 99 2>"$tmp/kvbig"
rc=$?
[ $rc -eq 1 ] && [ "$(grep -v '^loom serve: warning: ' "$tmp/kvbig" | grep -c '^loom serve')" = 1 ] && grep -q "^loom serve: cannot allocate the KV cache .*(use a smaller -c)$" "$tmp/kvbig" &&
  ! grep -q listening "$tmp/kvbig" || fail "a KV cache too large: exit $rc: $(cat "$tmp/kvbig")"
"$bin" serve -m "$tmp/none.gguf" 2>"$tmp/nomodel" && fail "a missing model accepted"
grep -q "cannot open model" "$tmp/nomodel" || fail "missing model: $(cat "$tmp/nomodel")"

echo "not a GGUF file" >"$tmp/bad.gguf"
timeout 20 "$bin" serve -m "$tmp/bad.gguf" --port 0 2>"$tmp/badmodel"
rc=$?
[ $rc -eq 1 ] && grep -q "bad magic" "$tmp/badmodel" && [ "$(wc -l <"$tmp/badmodel")" = 1 ] || fail "a malformed model: exit $rc, not one line: $(cat "$tmp/badmodel")"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "loom serve: all curl checks passed"
