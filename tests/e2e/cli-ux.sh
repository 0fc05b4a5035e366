#!/usr/bin/env bash
# The command line as a user of the field's tools types it (a fresh user's defects): run's -n -2 and
# --repeat-last-n -1, tokenize's escapes and standard input, chat's exit status on Ctrl-C, the
# errno of a failed write, run -cnv -f, an empty system message, a chat reply longer than the
# context, OOM messages, the field's other spellings (--predict, --gpu-layers, -l, -sp) and bench's -fa default.
# usage: cli-ux.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
. "$(dirname "$0")/lib.sh"
e2e_start
gen() { "$bin" run -m "$model" --temp 0 "$@" 2>/dev/null; }

# 1. -n -2 (until the context is full: run never shifts it, so as -1) and --repeat-last-n -1 (the context)
"$bin" run -m "$model" -c 32 -n -2 --ignore-eos --temp 0 -p hi >"$tmp/a" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^(context full: 32 tokens)" "$tmp/err" && cmp -s "$tmp/a" <(gen -c 32 -n -1 --ignore-eos -p hi) &&
  ok "run -n -2 runs to the full context" || fail "run -n -2: $(tail -3 "$tmp/err")"
pen() { gen -c 128 -n 100 --ignore-eos --repeat-penalty 1.5 -p "Once upon a time" "$@"; }
all=$(pen --repeat-last-n -1)
[ -n "$all" ] && [ "$all" = "$(pen --repeat-last-n 128)" ] && [ "$all" != "$(pen --repeat-last-n 0)" ] &&
  ok "--repeat-last-n -1 is the context (128)" || fail "--repeat-last-n -1: '${all:0:80}'"
expect_fail "-n -3" "invalid value '-3' for -n" "$bin" run -m "$model" -n -3 -p hi
# chat: -n -2 ends a reply when the context is full, and the chat goes on (a shift makes room for the next turn)
printf 'Once upon a time\nThe cat\n' | "$bin" chat -m "$model" -c 64 -n -2 --ignore-eos --repeat-last-n -1 --context-shift --temp 0 -t 1 \
  --verbose-prompt >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^(context full: 64 tokens)" "$tmp/err" && [ "$(grep -c '^\[eval:' "$tmp/err")" -ge 2 ] &&
  ok "chat -n -2: the reply ends with the context, the chat goes on" || fail "chat -n -2: $(grep -v '^\[' "$tmp/err" | tail -3)"

# 7. a reply longer than the context with --context-shift drops its own older half and goes on
printf 'Once upon a time\nThe cat\n' | "$bin" chat -m "$model" -c 64 -n 150 --ignore-eos --context-shift --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
n_eval=$(sed -n 's/^eval time .* \/ *\([0-9]*\) runs.*/\1/p' "$tmp/err")
[ $rc -eq 0 ] && grep -q "^\[context shift: dropped [0-9]* tokens of the reply after the first " "$tmp/err" && [ "$n_eval" = 300 ] &&
  ok "a reply of 150 tokens in a context of 64: shifted within the reply, both replies whole ($n_eval tokens)" ||
  fail "a reply longer than the context: exit $rc, $n_eval tokens evaluated: $(grep -v '^\[' "$tmp/err" | tail -3)"

# 2. tokenize: escapes processed as run does (--no-escape: as written); -f - and --stdin read standard input
ids() { "$bin" tokenize -m "$model" --ids "$@"; }
printf 'a\nb\\x41\n' >"$tmp/t.txt"
want=$(ids -p "$(printf 'a\nbA')")
[ "$(ids -p 'a\nb\x41')" = "$want" ] && [ "$(ids -p 'a\nb\x41' --no-escape)" != "$want" ] &&
  ok "tokenize -p processes escapes ($want), not with --no-escape" || fail "tokenize escapes: $(ids -p 'a\nb\x41')"
f=$(ids -f "$tmp/t.txt")
[ -n "$f" ] && [ "$(ids -f - <"$tmp/t.txt")" = "$f" ] && [ "$(ids --stdin <"$tmp/t.txt")" = "$f" ] && [ "$f" = "$(ids -p 'a\nb\x41\n')" ] &&
  ok "tokenize -f - and --stdin read standard input as -f reads the file ($f)" || fail "tokenize -f -: '$(ids -f - <"$tmp/t.txt")' vs '$f'"
expect_fail "tokenize with two sources" "one of -p TEXT, -f FILE or --stdin" "$bin" tokenize -m "$model" -p hi --stdin

# 5. a failed write names its errno
for cmd in "run -h" "tokenize -h" "quantize -h"; do
  $bin $cmd >/dev/full 2>"$tmp/err"
  [ $? -eq 1 ] && grep -q "cannot write the output: No space left on device" "$tmp/err" && ok "$cmd >/dev/full: $(cat "$tmp/err")" ||
    fail "$cmd >/dev/full: $(cat "$tmp/err")"
done
echo hi | "$bin" chat -m "$model" -n 4 -t 1 >/dev/full 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "cannot write the output: No space left on device" "$tmp/err" && ok "chat >/dev/full" || fail "chat >/dev/full: $(cat "$tmp/err")"
"$bin" run -m "$model" -n 4 -p hi >/dev/full 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "cannot write the output: No space left on device" "$tmp/err" && ok "run >/dev/full" || fail "run >/dev/full: $(cat "$tmp/err")"

# 6. run -cnv names run in its messages and takes -f as the system message; an empty one is none
expect_fail "run -cnv with an unknown option" "^loom run: unknown option '-x'" "$bin" run -cnv -m "$model" -x
printf 'Tell a story.\n' >"$tmp/sys.txt"
first_eval() { grep -m1 '^\[eval:' "$1"; }
echo hi | "$bin" run -cnv -m "$model" -f "$tmp/sys.txt" -n 2 -t 1 --verbose-prompt >/dev/null 2>"$tmp/e1"
echo hi | "$bin" chat -m "$model" -sys "Tell a story." -n 2 -t 1 --verbose-prompt >/dev/null 2>"$tmp/e2"
[ -n "$(first_eval "$tmp/e1")" ] && [ "$(first_eval "$tmp/e1")" = "$(first_eval "$tmp/e2")" ] && ok "run -cnv -f FILE is the system message" ||
  fail "run -cnv -f: '$(first_eval "$tmp/e1")' vs '$(first_eval "$tmp/e2")'"
expect_fail "chat -f with -sys" "not both" "$bin" chat -m "$model" -f "$tmp/sys.txt" -sys x
echo hi | "$bin" chat -m "$model" -sys "" -n 2 -t 1 --verbose-prompt >/dev/null 2>"$tmp/e1"
echo hi | "$bin" chat -m "$model" -n 2 -t 1 --verbose-prompt >/dev/null 2>"$tmp/e2"
[ -n "$(first_eval "$tmp/e1")" ] && [ "$(first_eval "$tmp/e1")" = "$(first_eval "$tmp/e2")" ] && ok "chat -sys '' sends no system turn" ||
  fail "chat -sys '': '$(first_eval "$tmp/e1")' vs '$(first_eval "$tmp/e2")'"

# 4. Ctrl-C in a chat: the first stops the reply, the second (at the prompt) ends the chat with 130 and the timings
mkfifo "$tmp/in"
"$bin" chat -m "$model" -c 4096 --ignore-eos -t 1 <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in" # held open: the chat waits at its prompt after the reply, not at the end of the input
printf 'Once upon a time\n' >&3
for _ in $(seq 300); do [ "$(wc -c <"$tmp/out")" -gt 100 ] && break; sleep 0.1; done
kill -INT "$pid"
sleep 0.5
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
exec 3>&-
[ $rc -eq 130 ] && grep -q "^(interrupted)" "$tmp/err" && grep -q "^eval time " "$tmp/err" && ok "chat on Ctrl-C: exit 130 with the timings" ||
  fail "chat on Ctrl-C: exit $rc: $(tail -3 "$tmp/err")"

# 8. out of memory under an address-space limit (not under the sanitizers, whose shadow memory needs more)
if [ -z "${LOOM_TEST_SANITIZE:-}" ]; then
  expect_fail "gen-model under ulimit -v" "^loom gen-model: out of memory" bash -c "ulimit -v 100000; exec \"\$0\" gen-model --preset 110m -o \"\$1\"" "$bin" "$tmp/x.gguf"
  expect_fail "a buffer under ulimit -v names the limit" "cannot allocate a buffer of [0-9.]* MiB (the process's address space is limited to 390.62 MiB: ulimit -v)" \
    bash -c "ulimit -v 400000; exec \"\$0\" run -m \"\$1\" -c 1000000 --cache-type f32 -p hi -n 2" "$bin" "$model"
fi

# 9. the field's other spellings
[ "$(gen -c 64 --predict 5 -p hi)" = "$(gen -c 64 -n 5 -p hi)" ] && ok "--predict is -n" || fail "--predict"
[ "$(gen -c 64 -n 5 -p hi --gpu-layers 0 -l 13+inf)" = "$(gen -c 64 -n 5 -p hi -ngl 0 --logit-bias 13+inf)" ] && ok "--gpu-layers, -l" || fail "--gpu-layers / -l"
case "$(gen -c 64 -n 2 -p hi -sp)" in "<s>"*) ok "-sp prints BOS as <s>" ;; *) fail "-sp: '$(gen -c 64 -n 2 -p hi -sp)'" ;; esac
expect_fail "-ngl x names auto" "invalid value 'x' for -ngl (expected auto or an integer" "$bin" run -m "$model" -ngl x -p hi

# 10. bench's -fa default is off, as llama-bench's (0), unlike run's auto: the row, -h and the README say so
readme=$(dirname "$0")/../../README.md
row=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 2>/dev/null | grep "pp8")
help=$("$bin" bench -h | grep -A1 -- "-fa, --flash-attn")
[ "$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $8); print $8 }')" = 0 ] && grep -q "default off, as llama-bench's" <<<"$help" &&
  grep -q "without \`-fa\` the default is \`off\` (0), as \`llama-bench\`'s" "$readme" && ! grep -q "(\`-fa auto\`, the default)" "$readme" &&
  ok "bench -fa defaults to off: its row, -h and the README agree" || fail "bench -fa default: row '$row', help '$help'"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all command-line checks passed"
