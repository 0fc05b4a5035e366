#!/usr/bin/env bash
# `loom run` as the field's users use it (issue 19's defects): multi-letter short options, -f and
# -f -, the default context, the memory check before the KV cache, an over-long prompt refused
# before tokenizing it, Ctrl-C, and the smaller items.
# usage: cli-run.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
. "$(dirname "$0")/lib.sh"
e2e_start
# rc 1 and one error line matching PATTERN, the last on stderr (load details may come before it)
expect_error() {
  local what=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne 1 ] || [ "$(grep -c '^loom ' "$tmp/err")" -ne 1 ] || ! tail -1 "$tmp/err" | grep -q -- "$want"; then
    fail "$what: exit $rc (want '$want'): $(tail -3 "$tmp/err")"
  else
    echo "ok: $what: $(tail -1 "$tmp/err")"
  fi
}

# 2. the field's multi-letter options are whole options, never clusters of one-letter ones
for opt in -np -sys -n5; do
  expect_fail "$opt" "unknown option '$opt'" "$bin" run -m "$model" "$opt" -n 5 -p hi
done
# the ones Loom has are whole options with their value (not -f a, -c tk)
"$bin" run -m "$model" -fa on -ctk f16 -ctv f16 -n 4 -c 64 --temp 0 -p hi >/dev/null 2>"$tmp/err" &&
  echo "ok: -fa on -ctk f16 -ctv f16 accepted" || { echo "FAIL: -fa on -ctk f16 -ctv f16: $(cat "$tmp/err")"; fails=$((fails + 1)); }
expect_fail "-ngl's value" "invalid value 'x' for -ngl" "$bin" run -m "$model" -ngl x -p hi
LOOM_SIM_DEVICES=1 "$bin" run -m "$model" -dev sim0 -ngl 2 -n 4 -c 64 --temp 0 -p hi >"$tmp/out" 2>"$tmp/err" &&
  grep -q "sim0 .*model buffer" "$tmp/err" && echo "ok: -dev sim0 -ngl 2" || fail "-dev sim0 -ngl 2: $(tail -2 "$tmp/err")"

# 3. -f drops one trailing newline (as the field reads a prompt file); -f - reads standard input
printf 'Once upon a time\n' >"$tmp/p.txt"
greedy() { "$bin" run -m "$model" -n 16 -c 128 --temp 0 --verbose-prompt "$@"; }
greedy -p "Once upon a time" >"$tmp/a" 2>"$tmp/a.err"
greedy -f "$tmp/p.txt" >"$tmp/b" 2>"$tmp/b.err"
greedy -f - <"$tmp/p.txt" >"$tmp/c" 2>"$tmp/c.err"
na=$(sed -n 's/^prompt: \([0-9]*\) tokens/\1/p' "$tmp/a.err") nb=$(sed -n 's/^prompt: \([0-9]*\) tokens/\1/p' "$tmp/b.err")
if [ -n "$na" ] && [ "$na" = "$nb" ] && cmp -s "$tmp/a" "$tmp/b" && cmp -s "$tmp/a" "$tmp/c"; then
  echo "ok: -f and -f - read the prompt as -p ($na tokens)"
else
  fail "-f: $nb tokens against $na for -p, or different text: $(head -c 200 "$tmp/b") / $(head -c 200 "$tmp/c")"
fi
printf 'Once upon a time\n\n' >"$tmp/p2.txt"
greedy -f "$tmp/p2.txt" >/dev/null 2>"$tmp/d.err"
nd=$(sed -n 's/^prompt: \([0-9]*\) tokens/\1/p' "$tmp/d.err")
[ "${nd:-0}" -gt "${na:-0}" ] && echo "ok: only one trailing newline is dropped ($nd tokens)" || fail "two newlines: $nd tokens"

# 4. the default context is 4096 (the model was trained on 512: a warning), and generation runs to -n
"$bin" run -m "$model" -n 600 --ignore-eos --temp 0 -p hi >"$tmp/out" 2>"$tmp/err"
rc=$?
total=$(sed -n 's/^total time .* \/ *\([0-9]*\) tokens$/\1/p' "$tmp/err")
if [ $rc -eq 0 ] && grep -q "KV cache: .*4096 cells" "$tmp/err" && grep -q "^warning: the context of 4096 tokens is larger than the model's training context of 512" "$tmp/err" &&
  [ "$total" = 603 ]; then
  echo "ok: default context 4096 with the warning; -n 600 generated all 600 tokens"
else
  fail "default context: exit $rc, $total tokens (want 3 + 600): $(grep -v '^ ' "$tmp/err" | head -5)"
fi
"$bin" run -m "$model" -c 32 -n 100 --temp 0 -p hi >/dev/null 2>"$tmp/err"
grep -q "^warning: the prompt (3 tokens) and -n 100 exceed the context of 32: generation stops after 30 tokens" "$tmp/err" &&
  echo "ok: prompt + -n over the context is warned at start" || fail "no warning for -n past the context: $(head -3 "$tmp/err")"

# 5. a KV cache larger than the free memory is refused before it is allocated, naming the sizes, in
# one line (the loading details wait until the context exists)
expect_fail "KV cache over a sim device's memory" "cannot allocate the KV cache (40000 cells, f32) on sim0: 48.83 MiB asked, .* MiB free of 32.00 MiB" \
  env LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=32 "$bin" run -m "$model" -c 40000 -ngl 99 --cache-type f32 -n 4 -p hi
# the hint names the command's own flags (bench has no -c); the row's line ends "(skipped)"
expect_fail "bench: KV cache over a sim device's memory" "cannot allocate the KV cache (80100 cells, f16) on sim0: .*(use a smaller -p, -n or -d) (skipped)$" \
  env LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=32 "$bin" bench -m "$model" -p 100 -d 80000 -n 0 -r 1 -ngl 99
# 8 layers x 512 x 2 (K and V) x 4 bytes x 2^24 cells = 512 GiB: more than this machine's memory
"$bin" gen-model --dim 512 --hidden 64 --layers 8 --heads 8 --kv-heads 8 --vocab 259 --ctx 512 --type f16 -o "$tmp/wide.gguf" >/dev/null 2>&1
expect_fail "KV cache over the host's memory" "cannot allocate the KV cache (16777216 cells, f32) on CPU: 524288.00 MiB asked, .* MiB free.*(use a smaller -c)$" \
  "$bin" run -m "$tmp/wide.gguf" -c 16777216 --cache-type f32 -n 4 -p hi
# the memory breakdown at exit: on sim0 (100 MiB) the weights (18 MiB) and the KV cache,
# 2 (K, V) x 8 layers x 512 x 4 bytes x 1024 cells = 32 MiB; total = free + self + unaccounted
LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=100 "$bin" run -m "$tmp/wide.gguf" -c 1024 -ngl 99 --cache-type f32 -n 4 -p hi >/dev/null 2>"$tmp/err"
row=$(grep "^  - sim0 " "$tmp/err")
read -r m_total m_free m_self m_model m_context m_compute m_unacc < <(echo "$row" | tr -d '=+()|' | awk '{ print $3, $4, $5, $6, $7, $8, $9 }')
if grep -q "^memory breakdown \[MiB\]" "$tmp/err" && [ "${m_total:-}" = 100 ] && [ "${m_model:-}" = 18 ] && [ "${m_context:-}" = 32 ] &&
  [ $((m_free + m_self + m_unacc)) = "$m_total" ] && [ $((m_model + m_context + m_compute)) = "$m_self" ]; then
  echo "ok: memory breakdown: $row"
else
  fail "memory breakdown: '$row'"; grep -A3 "^memory breakdown" "$tmp/err"
fi
# -ngl auto on a sim device of 70 MiB, -c 1024, --fit-margin 4 (F32 cache, unfused attention, whose
# compute buffers are the larger): each layer holds 4 x 512 x 512 +
# 3 x 512 x 64 F16 weights and two F32 norms of 512 (2297856 bytes) and a KV cache of
# 2 x 512 x 1024 x 4 bytes (4194304); the layers that fit are those whose sum stays within the
# free memory less the margin kept (the larger of 4 MiB and 1/16 of the device) and the compute
# buffers the dry run measured; the text is the CPU's
LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=70 "$bin" run -m "$tmp/wide.gguf" -c 1024 -ngl auto --cache-type f32 -fa off --fit-margin 4 -n 8 --temp 0 -p hi >"$tmp/out" 2>"$tmp/err"
rc=$?
line=$(grep "^-ngl auto: " "$tmp/err")
read -r n_fit compute free < <(echo "$line" | sed -n 's/^-ngl auto: \([0-9]*\) of 8 layers on sim0 .*compute \([0-9.]*\) MiB; \([0-9.]*\) MiB free.*/\1 \2 \3/p')
want=$(awk -v c="${compute:-0}" -v f="${free:-0}" 'BEGIN { kept = 70 / 16 > 4 ? 70 / 16 : 4; n = int((f - kept - c) * 1048576 / (2297856 + 4194304)); print (n > 8 ? 8 : n) }')
"$bin" run -m "$tmp/wide.gguf" -c 1024 -ngl 0 -n 8 --temp 0 -p hi >"$tmp/cpu" 2>/dev/null
if [ $rc -eq 0 ] && [ -n "${n_fit:-}" ] && [ "$n_fit" = "$want" ] && [ "$n_fit" -gt 0 ] && [ "$n_fit" -lt 8 ] && cmp -s "$tmp/out" "$tmp/cpu" &&
  grep -q "^  - sim0 " "$tmp/err"; then
  echo "ok: -ngl auto placed $n_fit of 8 layers (by the sizes: $want): $line"
else
  fail "-ngl auto: exit $rc, '${n_fit:-}' layers, want '$want': $line $(tail -2 "$tmp/err")"
fi
# -ngl auto without a device: 0 layers, and no word about -ngl (the fit's probe asks for a layer to
# see the devices; that is not the user's -ngl); -ngl 3 without one is warned about
"$bin" run -m "$model" -ngl auto -n 4 -c 64 --temp 0 -p hi >/dev/null 2>"$tmp/err" && ! grep -q -- "-ngl" "$tmp/err" &&
  echo "ok: -ngl auto on the CPU alone, no warning" || fail "-ngl auto without a device: $(cat "$tmp/err")"
"$bin" run -m "$model" -ngl 3 -n 4 -c 64 --temp 0 -p hi >/dev/null 2>"$tmp/err" && grep -q -- "-ngl 3 asked, but there is no device" "$tmp/err" ||
  fail "-ngl 3 without a device: $(cat "$tmp/err")"
# bench and serve take -ngl auto too (bench in its list; a row per value, labelled by the layers placed)
rows=$(LOOM_SIM_DEVICES=1 "$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -ngl auto,0 2>"$tmp/err" | grep -c "pp8")
[ "$rows" = 2 ] && grep -q "^-ngl auto: [0-9]* of [0-9]* layers on sim0" "$tmp/err" && echo "ok: bench -ngl auto,0" ||
  fail "bench -ngl auto,0: $rows rows: $(cat "$tmp/err")"
# without -ngl, a GPU-type device means auto; -dev none means none
LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=70 "$bin" run -m "$tmp/wide.gguf" -c 1024 --cache-type f32 -fa off --fit-margin 4 -n 2 -p hi >/dev/null 2>"$tmp/err" &&
  grep -q "^-ngl auto: $n_fit of 8 layers on sim0" "$tmp/err" && echo "ok: -ngl auto is the default with a GPU-type device" ||
  fail "default -ngl with a device: $(grep -- '-ngl' "$tmp/err")"
LOOM_SIM_DEVICES=1 "$bin" run -m "$tmp/wide.gguf" -c 1024 -dev none -n 2 -p hi >/dev/null 2>"$tmp/err" &&
  ! grep -q "sim0" "$tmp/err" && echo "ok: -dev none offloads nothing" || fail "-dev none: $(grep sim0 "$tmp/err")"
rm -f "$tmp/wide.gguf"

# compute buffers too large for the device: the error names them, the device, MiB asked and free;
# the prompt already printed ends with a newline, so the error line is not glued to it
long=$(for _ in $(seq 1 100); do printf 'Once upon a time '; done)
expect_error "compute buffer over a sim device's memory" "cannot allocate the compute buffer (sim0, chunk 0): [0-9.]* MiB asked, [0-9.]* MiB free of 8.00 MiB on sim0" \
  env LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=8 "$bin" run -m "$model" -c 512 -ngl 5 --cache-type f32 -fa off -p "$long" -n 4
[ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] && [ -s "$tmp/out" ] && echo "ok: the text before an error ends with a newline" ||
  fail "the text before the error does not end with a newline: $(tail -c 20 "$tmp/out" | od -c | head -2)"

# 6. a prompt that cannot fit is refused before it is tokenized (the bound from its length)
head -c 2000000 /dev/zero | tr '\0' 'a' >"$tmp/big.txt"
expect_fail "a 2 MB prompt file" "the prompt is at least [0-9]* tokens (2000000 bytes), longer than the context of 4096" \
  "$bin" run -m "$model" -f "$tmp/big.txt"

# 7. Ctrl-C stops generation, prints the timings, exits 130
"$bin" run -m "$model" -c 30000 --ignore-eos --temp 0 -p Once >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 300); do [ "$(wc -c <"$tmp/out")" -gt 100 ] && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
pid=
if [ $rc -eq 130 ] && grep -q "^(interrupted)" "$tmp/err" && grep -q "^eval time " "$tmp/err" && grep -q "^total time " "$tmp/err"; then
  echo "ok: SIGINT: exit 130 with the timings: $(grep '^eval time' "$tmp/err")"
else
  fail "SIGINT: exit $rc: $(tail -3 "$tmp/err")"
fi

# 8. the smaller items
for t in 0 -1; do
  "$bin" run -m "$model" -n 4 -c 64 --temp "$t" --top-p 2 -p hi >/dev/null 2>"$tmp/err" && ! grep -q "^seed:" "$tmp/err" &&
    echo "ok: --temp $t --top-p 2: greedy, no seed printed" || fail "--temp $t --top-p 2: $(head -3 "$tmp/err")"
done
"$bin" run -m "$model" -n 4 -c 64 -s 7 -p hi >/dev/null 2>"$tmp/err" && grep -q "^seed: 7$" "$tmp/err" &&
  echo "ok: sampling prints its seed" || fail "no seed printed when sampling"
expect_fail "--no-host-copy with --no-mmap" "--no-host-copy reads the weights in the mapped file" "$bin" run -m "$model" --no-host-copy --no-mmap -p hi
expect_fail "bench on a missing file names it once" "^loom bench: cannot open '$tmp/x.gguf'" "$bin" bench -m "$tmp/x.gguf" -p 8 -n 0
[ "$(grep -o "$tmp/x.gguf" "$tmp/err" | wc -l)" = 1 ] || fail "bench names the file twice: $(cat "$tmp/err")"
row=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -ngl 99 2>/dev/null | grep "pp8")
echo "$row" | grep -q "| CPU | *1 | *0 |" && echo "ok: bench -ngl 99 without a device labels its row ngl 0" || fail "bench -ngl 99 row: $row"
expect_fail "test-ops -o FOO lists the ops" "unknown op 'FOO' (ops: .*MUL_MAT" "$bin" test-ops -o FOO
# devices: --list-devices (and --json), -dev with a list
out=$(LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=64 "$bin" --list-devices)
echo "$out" | grep -q "^  sim0: .*(GPU, 64 MiB, 64 MiB free)$" && echo "$out" | grep -q "^  CPU: .*(CPU, [0-9]* MiB, [0-9]* MiB free)$" &&
  echo "ok: --list-devices: $(echo "$out" | tr '\n' ' ')" || fail "--list-devices: $out"
out=$(LOOM_SIM_DEVICES=1 LOOM_SIM_MEMORY_MB=64 "$bin" run --list-devices --json)
echo "$out" | grep -q '^  {"name": "sim0", "type": "GPU", "description": "[^"]*", "memory_free": 67108864, "memory_total": 67108864},$' &&
  [ "$(echo "$out" | head -1)" = "[" ] && [ "$(echo "$out" | tail -1)" = "]" ] && echo "ok: run --list-devices --json" || fail "--json: $out"
expect_fail "-dev naming a device twice" "listed twice" env LOOM_SIM_DEVICES=2 "$bin" run -m "$model" -dev sim0,sim0 -ngl 9 -p hi
expect_fail "-dev list with an unknown device" "no device named 'sim7'" env LOOM_SIM_DEVICES=2 "$bin" run -m "$model" -dev sim0,sim7 -ngl 9 -p hi
expect_fail "-dev list with the CPU" "is the host CPU" env LOOM_SIM_DEVICES=2 "$bin" run -m "$model" -dev sim0,CPU -ngl 9 -p hi
expect_fail "-sm bad" "invalid value 'rows' for -sm" "$bin" run -m "$model" -sm rows -p hi
expect_fail "-ts negative" "invalid value '1,-1' for -ts" "$bin" run -m "$model" -ts 1,-1 -p hi
expect_fail "-ts all zero" "invalid value '0,0' for -ts" "$bin" run -m "$model" -ts 0,0 -p hi
expect_fail "-ts trailing comma" "invalid value '1,' for -ts" "$bin" run -m "$model" -ts 1, -p hi
expect_fail "-mg out of range" "invalid value '99' for -mg" "$bin" run -m "$model" -mg 99 -p hi
expect_error "-mg beyond the devices" "main GPU 2 outside the 2 devices" env LOOM_SIM_DEVICES=2 "$bin" run -m "$model" -mg 2 -ngl 9 -p hi -n 1
expect_error "-ts share for a device that is not there" "tensor split gives a share to device 2" env LOOM_SIM_DEVICES=2 "$bin" run -m "$model" -ts 1,1,1 -ngl 9 -p hi -n 1
expect_fail "--json alone" "--json goes with --list-devices" "$bin" run -m "$model" --json

# generation controls: -r, --no-display-prompt, -e, --logit-bias, the penalties
gen() { "$bin" run -m "$model" -c 128 --temp 0 "$@" 2>/dev/null; }
full=$(gen -p "Once upon a time" -n 64)
stopped=$(gen -p "Once upon a time" -n 64 -r "park.")
case "$full" in "$stopped"*) prefix=1 ;; *) prefix=0 ;; esac
[ $prefix = 1 ] && [ "${stopped%park.}" != "$stopped" ] && [ ${#stopped} -lt ${#full} ] &&
  echo "ok: -r park. stops there: ...${stopped: -30}" || fail "-r: '$stopped'"
quiet=$(gen -p "Once upon a time" -n 64 --no-display-prompt)
[ "Once upon a time$quiet" = "$full" ] && echo "ok: --no-display-prompt prints the generated text alone" || fail "--no-display-prompt: '$quiet'"
[ "$(gen -p 'Once upon\x20a\ttime' -e -n 64)" = "$(gen -p "$(printf 'Once upon a\ttime')" -n 64)" ] &&
  [ "$(gen -p 'Once upon\x20a\ttime' -n 64)" = "$(gen -p "$(printf 'Once upon a\ttime')" -n 64)" ] &&
  [ "$(gen -p 'Once upon\x20a time' --no-escape -n 8)" != "$(gen -p 'Once upon a time' -n 8)" ] &&
  echo "ok: \\x20 and \\t are their bytes (-e, the default), not with --no-escape" || fail "-e"
printf 'Once upon\\x20a time\n' >"$tmp/esc.txt"
[ "$(gen -f "$tmp/esc.txt" -n 16)" = "$(gen -p 'Once upon a time' -n 16)" ] && echo "ok: escapes in -f too, as the field" || fail "-f escapes"
gen -n 4 >/dev/null && echo "ok: no prompt with escapes on" || fail "no prompt"
lily=$("$bin" tokenize -m "$model" -p " Lily" --ids 2>/dev/null | tr -d '[] ' | awk -F, '{ print $NF }')
forced=$(gen -p "Once upon a time" -n 4 --logit-bias "$lily+inf")
[ "$forced" = "Once upon a time Lily Lily Lily Lily" ] && echo "ok: --logit-bias $lily+inf forces ' Lily'" || fail "--logit-bias +inf: '$forced' (token $lily)"
banned=$(gen -p "Once upon a time" -n 64 --logit-bias "$lily-inf")
case "$full" in *Lily*) ;; *) fail "the unbiased text has no Lily: $full" ;; esac
[ "${banned#*Lily}" = "$banned" ] && echo "ok: --logit-bias $lily-inf: no Lily (${banned:0:60}...)" || fail "--logit-bias -inf: '$banned'"
[ "$(gen -p "Once upon a time" -n 64 --frequency-penalty 0.5 --presence-penalty 0.5)" != "$full" ] &&
  echo "ok: presence and frequency penalties change the greedy text" || fail "the penalties changed nothing"
expect_fail "a logit bias outside the vocabulary" "names token 99999, outside the vocabulary" "$bin" run -m "$model" -p hi --logit-bias 99999+1
expect_fail "a malformed logit bias" "invalid value '12x' for --logit-bias" "$bin" run -m "$model" -p hi --logit-bias 12x
# a line with a NUL byte is refused with one line, not cut there; only the next line is evaluated
printf 'a\x00b\nhi\n' | "$bin" chat -m "$model" -n 1 --verbose-prompt >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(grep -c 'NUL byte' "$tmp/err")" = 1 ] && [ "$(grep -c '^\[eval: ' "$tmp/err")" = 1 ] &&
  echo "ok: chat refuses a line with a NUL" || fail "chat with a NUL in a line: $(head -5 "$tmp/err")"
# --parse-special: "</s>" in the prompt is the EOS token (2), else its characters' tokens
"$bin" run -m "$model" -p "</s>" -n 1 --verbose-prompt --parse-special >/dev/null 2>"$tmp/err"
"$bin" run -m "$model" -p "</s>" -n 1 --verbose-prompt >/dev/null 2>"$tmp/err2"
grep -q "^prompt: 2 tokens" "$tmp/err" && grep -q "^ *2 -> '</s>'" "$tmp/err" && ! grep -q "^prompt: 2 tokens" "$tmp/err2" &&
  echo "ok: run --parse-special" || fail "run --parse-special: $(grep -A3 '^prompt' "$tmp/err") / $(grep '^prompt' "$tmp/err2")"
# one token is "1 token" (an empty prompt is BOS alone)
"$bin" run -m "$model" -p "" -n 1 --verbose-prompt >/dev/null 2>"$tmp/err"
grep -qx "prompt: 1 token" "$tmp/err" && echo "ok: prompt: 1 token" || fail "an empty prompt: $(grep '^prompt' "$tmp/err")"
# LOOM_N_THREADS is the default -t for every command, capped to the CPUs as -t is (the same warning)
ncpu=$(nproc)
n=$(LOOM_N_THREADS=1 "$bin" bench -m "$model" -p 8 -n 0 -r 1 -o json 2>/dev/null | grep -o '"n_threads": [0-9]*' | grep -o '[0-9]*$')
[ "$n" = 1 ] && echo "ok: bench takes LOOM_N_THREADS=1" || fail "bench with LOOM_N_THREADS=1 ran $n threads"
n=$(LOOM_N_THREADS=1000 "$bin" bench -m "$model" -p 8 -n 0 -r 1 -o json 2>"$tmp/err" | grep -o '"n_threads": [0-9]*' | grep -o '[0-9]*$')
[ "$n" = "$ncpu" ] && grep -q "LOOM_N_THREADS 1000 is more than the CPUs this process may use ($ncpu)" "$tmp/err" &&
  echo "ok: bench caps LOOM_N_THREADS=1000 to $ncpu" || fail "bench with LOOM_N_THREADS=1000: $n threads, $(cat "$tmp/err")"
for cmd in run chat; do
  echo hi | LOOM_N_THREADS=1000 "$bin" $cmd -m "$model" -p hi -n 1 >/dev/null 2>"$tmp/err"
  grep -q "$cmd: LOOM_N_THREADS 1000 is more than the CPUs this process may use ($ncpu): using $ncpu" "$tmp/err" &&
    echo "ok: $cmd caps LOOM_N_THREADS=1000 with a warning" || fail "$cmd with LOOM_N_THREADS=1000: $(cat "$tmp/err")"
done
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all loom run checks passed"
