#!/usr/bin/env bash
# Bad input to `loom run`, `info`, `tokenize`, `bench`, `test-ops` and `help`: exactly one line on stderr, exit status 1, never a crash.
# usage: bad-input.sh LOOM_BIN MODEL
set -u
bin=$1 model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_fail() {
  local what=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 1 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL: $what: exit $rc, $lines stderr lines:"; head -5 "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok: $what: $(cat "$tmp/err")"
  fi
}
printf 'not a gguf file at all' >"$tmp/text.gguf"
head -c 100 "$model" >"$tmp/truncated.gguf"
long=$(for i in $(seq 1 300); do printf 'Once upon a time '; done)
expect_fail "missing model" "$bin" run -m "$tmp/none.gguf" -p hi
expect_fail "no model flag" "$bin" run -p hi
expect_fail "not a GGUF" "$bin" run -m "$tmp/text.gguf" -p hi
expect_fail "truncated GGUF" "$bin" run -m "$tmp/truncated.gguf" -p hi
expect_fail "unknown flag" "$bin" run -m "$model" --bogus
expect_fail "chat -f missing file" "$bin" chat -m "$model" -f "$tmp/none.txt"
expect_fail "chat -f a directory" "$bin" chat -m "$model" -f "$tmp"
expect_fail "run -cnv -f missing file" "$bin" run -m "$model" -cnv -f "$tmp/none.txt"
expect_fail "bad number" "$bin" run -m "$model" -n abc
expect_fail "negative threads" "$bin" run -m "$model" -t -3
expect_fail "missing value" "$bin" run -m "$model" -n
expect_fail "prompt longer than context" "$bin" run -m "$model" -c 64 -p "$long"
expect_fail "prompt file longer than context" bash -c "printf '%s' '$long' >'$tmp/p.txt'; exec '$bin' run -m '$model' -c 64 -f '$tmp/p.txt'"
expect_fail "missing prompt file" "$bin" run -m "$model" -f "$tmp/none.txt"
expect_fail "unknown device" "$bin" run -m "$model" -ngl 1 --device nosuch -p hi
expect_fail "unknown command" "$bin" frobnicate
expect_fail "abbreviated option" "$bin" run -m "$model" --te 0 -p hi
expect_fail "abbreviated option as the last argument" "$bin" run -m "$model" -p hi --cache
grep -q "unknown option '--cache'" "$tmp/err" || { echo "FAIL: abbreviated last option named as needing a value: $(cat "$tmp/err")"; fails=$((fails + 1)); }
expect_fail "a value for an option that takes none" "$bin" run -m "$model" --no-mmap=1 -p hi
grep -q "'--no-mmap' takes no value" "$tmp/err" || { echo "FAIL: --no-mmap=1 not named as taking no value: $(cat "$tmp/err")"; fails=$((fails + 1)); }
expect_fail "unknown device without -ngl" "$bin" run -m "$model" --device nosuch -p hi
expect_fail "CPU as offload device" "$bin" run -m "$model" --device CPU -ngl 1 -p hi
expect_fail "stray argument" "$bin" run -m "$model" -p hi extra
expect_fail "prompt file is a directory" "$bin" run -m "$model" -f "$tmp"
expect_fail "gen-model stray argument" "$bin" gen-model --preset 260k -o "$tmp/never.gguf" extra
grep -q "unexpected argument 'extra'" "$tmp/err" || { echo "FAIL: gen-model stray argument: $(cat "$tmp/err")"; fails=$((fails + 1)); }
expect_fail "tokenize stray argument" "$bin" tokenize -m "$model" -p hi extra
expect_fail "tokenize abbreviation" "$bin" tokenize -m "$model" -p hi -n 3
# control characters in a prompt: tokenize keeps one line per token, the pieces escaped
"$bin" tokenize -m "$model" -p "$(printf 'a\tb\001c\nd')" >"$tmp/out" 2>"$tmp/err"
n_ids=$("$bin" tokenize -m "$model" -p "$(printf 'a\tb\001c\nd')" --ids | tr -cd ',' | wc -c)
if [ "$(wc -l <"$tmp/out")" -ne $((n_ids + 1)) ] || ! grep -q "'\\\\t'" "$tmp/out" || ! grep -q "'\\\\x01'" "$tmp/out" ||
  ! grep -q "'\\\\n'" "$tmp/out"; then
  echo "FAIL: tokenize of control characters:"; cat -A "$tmp/out" | head -12; fails=$((fails + 1))
else
  echo "ok: tokenize of control characters: $(tr '\n' ' ' <"$tmp/out")"
fi
# bytes that are not UTF-8 and C1 controls (0x9b is a terminal's CSI) are escaped too
"$bin" tokenize -m "$model" -p "$(printf 'a\377\233')" >"$tmp/out" 2>"$tmp/err"
if grep -qF "'\\xff'" "$tmp/out" && grep -qF "'\\x9b'" "$tmp/out" && ! LC_ALL=C grep -q "$(printf '\233')" "$tmp/out"; then
  echo "ok: tokenize of bytes that are not UTF-8: $(tr '\n' ' ' <"$tmp/out")"
else
  echo "FAIL: tokenize of bytes that are not UTF-8:"; cat -A "$tmp/out" | head -8; fails=$((fails + 1))
fi
expect_fail "bench nothing to measure" "$bin" bench -m "$model" -p 0 -n 0
expect_fail "bench bad list" "$bin" bench -m "$model" -p 128,,512
expect_fail "bench missing model" "$bin" bench -m "$tmp/none.gguf" -p 8 -n 0 -r 1
# the JSON rows carry the fields llama-bench's readers use, one sample per timed run
"$bin" bench -m "$model" -p 8 -n 0 -r 3 -t 1 -o json >"$tmp/bench.json" 2>/dev/null
missing=$(for k in model_filename model_type model_size model_n_params n_threads n_gpu_layers n_batch n_ubatch type_k type_v flash_attn use_mmap n_prompt n_gen n_depth avg_ns stddev_ns avg_ts stddev_ts samples_ns samples_ts; do
  grep -q "\"$k\": " "$tmp/bench.json" || printf '%s ' "$k"; done)
samples=$(grep -o '"samples_ns": \[[^]]*\]' "$tmp/bench.json" | tr -cd ',' | wc -c)
[ -z "$missing" ] && [ "$samples" = 2 ] && echo "ok: bench -o json fields and 3 samples" ||
  { echo "FAIL: bench -o json: missing '$missing', $samples commas in samples_ns"; fails=$((fails + 1)); }
# -pg, -d, -fa, -ctk and -ctv: one row per combination, named as the field's tool names them
rows=$("$bin" bench -m "$model" -p 8 -n 0 -pg 4,2 -d 0,16 -fa 0,1 -ctk f16 -ctv f16,bf16 -r 1 -t 1 2>/dev/null)
n=$(grep -c "^| llama" <<<"$rows") pg=$(grep -c "| pp4+tg2 @ d16 |" <<<"$rows") fa=$(grep -c "| 1 | f16 | bf16 | pp8 |" <<<"$rows")
[ "$n" = 16 ] && [ "$pg" = 4 ] && [ "$fa" = 1 ] && echo "ok: bench -pg -d -fa -ctk -ctv rows" ||
  { echo "FAIL: bench -pg -d -fa -ctk -ctv: $n rows, $pg pp4+tg2 @ d16, $fa fa-1 bf16 pp8:"; echo "$rows"; fails=$((fails + 1)); }
# -mmp is a list like the others: a row per value, an mmap column (as llama-bench spells it) where
# it is not the default 1 alone, use_mmap in the JSON and CSV rows
rows=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -mmp 0,1 2>/dev/null)
[ "$(grep -c '^| model .* | type_v | mmap | test |' <<<"$rows")" = 1 ] && [ "$(grep -c '| f16 | 0 | pp8 |' <<<"$rows")" = 1 ] &&
  [ "$(grep -c '| f16 | 1 | pp8 |' <<<"$rows")" = 1 ] && echo "ok: bench -mmp 0,1 rows" || { echo "FAIL: bench -mmp 0,1:"; echo "$rows"; fails=$((fails + 1)); }
"$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 2>/dev/null | grep -q mmap && { echo "FAIL: an mmap column without -mmp"; fails=$((fails + 1)); }
m=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -mmp 1,0 -o json 2>/dev/null | grep -o '"use_mmap": [a-z]*' | tr '\n' ' ')
c=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -mmp 0 -o csv 2>/dev/null | awk -F, 'NR == 1 { for (k = 1; k <= NF; k++) if ($k == "use_mmap") i = k } NR > 1 { print i ? $i : "none" }')
[ "$m" = '"use_mmap": true "use_mmap": false ' ] && [ "$c" = 0 ] && echo "ok: bench use_mmap in json and csv" ||
  { echo "FAIL: bench use_mmap: json '$m', csv '$c'"; fails=$((fails + 1)); }
expect_fail "bench -mmp 2" "$bin" bench -m "$model" -p 8 -n 0 -mmp 0,2
# a thread count given twice (or twice after lowering to the CPUs) is measured once
rows=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1,1 2>/dev/null | grep -c "pp8")
[ "$rows" = 1 ] && echo "ok: bench -t 1,1 measures once" || { echo "FAIL: bench -t 1,1 gave $rows rows"; fails=$((fails + 1)); }
# a list option given again adds to its list (as the field's bench does): 3 tests (pp8, pp4, tg2)
# in each of the 2 x 2 x 2 configurations of -b, -fa and -ctk; -o jsonl: one whole object a line
"$bin" bench -m "$model" -p 8 -p 4 -n 0 -n 2 -b 256 -b 64 -fa 0 -fa on -ctk f16 -ctk bf16 -r 1 -t 1 -o jsonl >"$tmp/b.jsonl" 2>"$tmp/err"
objs=$(grep -c '^{"model_filename": .*\]}$' "$tmp/b.jsonl")
confs=$(grep -o '"n_batch": [0-9]*, "n_ubatch": 0, "type_k": "[a-z0-9]*", "type_v": "f16", "flash_attn": [a-z]*' "$tmp/b.jsonl" | sort -u | wc -l)
tests=$(grep -o '"n_prompt": [0-9]*, "n_gen": [0-9]*' "$tmp/b.jsonl" | sort | uniq -c | awk '{ printf "%s:%s%s ", $1, $3, $5 }')
[ "$(wc -l <"$tmp/b.jsonl")" = 24 ] && [ "$objs" = 24 ] && [ "$confs" = 8 ] && [ "$tests" = "8:0,2 8:4,0 8:8,0 " ] &&
  echo "ok: bench list options given twice add up (-o jsonl)" ||
  { echo "FAIL: bench repeated list options: $objs objects, $confs configurations, tests '$tests':"; head -3 "$tmp/b.jsonl" "$tmp/err"; fails=$((fails + 1)); }
expect_fail "bench too many values in all" "$bin" bench -m "$model" -p 1,2,3,4,5,6,7,8 -p 1,2,3,4,5,6,7,8 -p 9
expect_fail "bench -o sql" "$bin" bench -m "$model" -p 8 -n 0 -o sql
grep -q "sql is not supported" "$tmp/err" || { echo "FAIL: bench -o sql: $(cat "$tmp/err")"; fails=$((fails + 1)); }
# -ngl auto is shown with the count it chose (none without a device), not as a second -ngl N row
rows=$("$bin" bench -m "$model" -p 8 -n 0 -r 1 -t 1 -ngl 0 -ngl auto -d 0 -d 4 2>"$tmp/err")
n0=$(grep -c '^| llama .* | 1 | 0 | 0 | f16 | f16 | pp8' <<<"$rows") na=$(grep -c '^| llama .* | 1 | auto ([0-9]*) | 0 | f16 | f16 | pp8' <<<"$rows")
[ "$n0" = 2 ] && [ "$na" = 2 ] && grep -q 'pp8 @ d4' <<<"$rows" && echo "ok: bench -ngl 0 -ngl auto rows" ||
  { echo "FAIL: bench -ngl 0 -ngl auto: $n0 rows of 0, $na of auto:"; echo "$rows"; cat "$tmp/err"; fails=$((fails + 1)); }
mkfifo "$tmp/fifo.gguf"
expect_fail "model is a FIFO (must not block)" timeout 20 "$bin" run -m "$tmp/fifo.gguf" -p hi
expect_fail "info on a FIFO" timeout 20 "$bin" info "$tmp/fifo.gguf"
expect_fail "info with two files" "$bin" info "$model" -m "$model"
expect_fail "info --json with a value" "$bin" info --json=1 "$model"
grep -q "'--json' takes no value" "$tmp/err" || { echo "FAIL: info --json=1: $(cat "$tmp/err")"; fails=$((fails + 1)); }
"$bin" info -m "$model" --json >"$tmp/info-m.json" 2>/dev/null && "$bin" info "$model" --json >"$tmp/info.json" 2>/dev/null &&
  cmp -s "$tmp/info-m.json" "$tmp/info.json" && echo "ok: info -m FILE as info FILE" ||
  { echo "FAIL: info -m FILE differs from info FILE"; fails=$((fails + 1)); }
expect_fail "test-ops stray argument" "$bin" test-ops extra
expect_fail "test-ops unknown option" "$bin" test-ops --bogus
expect_fail "test-ops bad thread count" "$bin" test-ops -t 0
expect_fail "leading space in a number" "$bin" run -m "$model" -n ' 5'
expect_fail "help for an unknown command" "$bin" help nosuch
expect_fail "output to a full device" bash -c "exec '$bin' test-ops -o SCALE >/dev/full"
expect_fail "subcommand help to a full device" bash -c "exec '$bin' run -h >/dev/full"
# bench flushes each result row: the first failed flush's reason is the one reported
expect_fail "bench rows to a full device" bash -c "exec '$bin' bench -m '$model' -p 8 -n 4 -r 1 >/dev/full"
grep -q "No space left" "$tmp/err" || { echo "FAIL: bench to /dev/full names another reason: $(cat "$tmp/err")"; fails=$((fails + 1)); }
expect_fail "repeat-last-n past the sampler's limit" "$bin" run -m "$model" -p hi --repeat-last-n 2000000
# a block count the file cannot hold (201326597 layers): refused at once, nothing sized by it
cp "$model" "$tmp/layers.gguf"
at=$(grep -obUa 'llama.block_count' "$tmp/layers.gguf" | head -1 | cut -d: -f1)
printf '\x05\x00\x00\x0c' | dd of="$tmp/layers.gguf" bs=1 seek=$((at + 17 + 4)) conv=notrunc status=none
expect_fail "huge block count" timeout 20 "$bin" run -m "$tmp/layers.gguf" -p hi
# a norm weight stored as F16 (the tensor info's type field after the name, n_dims and one dimension)
cp "$model" "$tmp/norm16.gguf"
at=$(grep -obUa 'output_norm.weight' "$tmp/norm16.gguf" | head -1 | cut -d: -f1)
printf '\x01' | dd of="$tmp/norm16.gguf" bs=1 seek=$((at + 18 + 4 + 8)) conv=notrunc status=none
expect_fail "F16 norm weight" timeout 20 "$bin" run -m "$tmp/norm16.gguf" -p hi -n 4
expect_fail "F16 norm weight (bench)" timeout 20 "$bin" bench -m "$tmp/norm16.gguf" -p 8 -n 2 -r 1
# a later model that cannot load: its error line names it, the rows already printed stay a whole
# JSON array (or CSV file, or one object a line), exit status 1
for fmt in json:3 csv:2 jsonl:1; do
  expect_fail "bench -o ${fmt%:*}, the second model unloadable" timeout 20 "$bin" bench -m "$model" -m "$tmp/norm16.gguf" -p 8 -n 0 -r 1 -t 1 -o ${fmt%:*}
  grep -q "^loom bench: $tmp/norm16.gguf: -ngl [0-9a-z]* -mmp [01]: .*norm weights.* (skipped)$" "$tmp/err" ||
    { echo "FAIL: the unloadable model's line is not 'FILE: -ngl N -mmp M: reason (skipped)': $(cat "$tmp/err")"; fails=$((fails + 1)); }
  case ${fmt%:*} in
  json) [ "$(sed -n '1p;$p' "$tmp/out" | tr '\n' ' ')" = "[ ] " ] && grep -q '^  {"model_filename": .*\]}$' "$tmp/out" ;;
  csv) grep -q '^model_filename,' "$tmp/out" && [ "$(grep -c '^"' "$tmp/out")" = 1 ] ;;
  jsonl) grep -q '^{"model_filename": .*\]}$' "$tmp/out" ;;
  esac && [ "$(wc -l <"$tmp/out")" = "${fmt#*:}" ] || { echo "FAIL: bench -o ${fmt%:*} after a failed load:"; cat "$tmp/out"; fails=$((fails + 1)); }
done
# a hyper-parameter key stored with another value type (f32 = 6, u32 = 4: the same 4 value bytes), in
# the type id after the key's name: refused with the key and the type found, never a default
retype() { # KEY TYPE_ID TYPE_NAME
  cp "$model" "$tmp/retyped.gguf"
  local at
  at=$(grep -obUa "$1" "$tmp/retyped.gguf" | head -1 | cut -d: -f1)
  [ -n "$at" ] || { echo "skipped: $1 of type $3: the model has no such key"; return; }
  printf "\\x0$2\\x00\\x00\\x00" | dd of="$tmp/retyped.gguf" bs=1 seek=$((at + ${#1})) conv=notrunc status=none
  expect_fail "$1 of type $3" timeout 20 "$bin" run -m "$tmp/retyped.gguf" -p hi -n 4
  grep -q "'$1'.*type $3" "$tmp/err" || { echo "FAIL: $1 of type $3 not named: $(cat "$tmp/err")"; fails=$((fails + 1)); }
}
retype llama.context_length 6 f32
# a training context of 2^24 in the file: without -c the run takes at most 4096 cells (not a cache of GiBs)
cp "$model" "$tmp/longctx.gguf"
at=$(grep -obUa llama.context_length "$tmp/longctx.gguf" | head -1 | cut -d: -f1)
printf '\x04\x00\x00\x00\x00\x00\x00\x01' | dd of="$tmp/longctx.gguf" bs=1 seek=$((at + 20)) conv=notrunc status=none
timeout 60 "$bin" run -m "$tmp/longctx.gguf" -p hi -n 4 >"$tmp/out" 2>"$tmp/err" </dev/null
if [ $? -ne 0 ] || ! grep -q "KV cache: .*(K f16, V f16, 4096 cells)" "$tmp/err"; then
  echo "FAIL: a 2^24 training context without -c:"; grep -v '^$' "$tmp/err" | head -5; fails=$((fails + 1))
else
  echo "ok: a 2^24 training context without -c: $(grep 'KV cache' "$tmp/err")"
fi
retype llama.attention.head_count_kv 6 f32
retype llama.rope.dimension_count 6 f32
retype llama.rope.freq_base 4 u32
expect_fail "seed that means random" "$bin" run -m "$model" -p hi -s 18446744073709551615
expect_fail "seed past 64 bits" "$bin" run -m "$model" -p hi --seed=18446744073709551616
expect_fail "KV cache type" "$bin" run -m "$model" -p hi --cache-type q8_0
expect_fail "KV cache K type" "$bin" run -m "$model" -p hi -ctk f64
expect_fail "KV cache V type" "$bin" run -m "$model" -p hi --cache-type-v=q5_1
expect_fail "flash attention mode" "$bin" run -m "$model" -p hi -fa yes
expect_fail "flash attention: a bare -fa then a value that is none" "$bin" run -m "$model" -p hi -fa 2
expect_fail "bench flash attention" "$bin" bench -m "$model" -p 8 -n 0 -fa 2
expect_fail "bench depth" "$bin" bench -m "$model" -p 8 -n 0 -d -1
expect_fail "bench prompt+generation" "$bin" bench -m "$model" -pg 8
expect_fail "bench cache type" "$bin" bench -m "$model" -p 8 -n 0 -ctv q8_0

# bad settings that are only warned about: exit status 0, one warning line naming the setting
expect_warning() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? n
  n=$(grep -c '^warning: ' "$tmp/err")
  if [ $rc -ne 0 ] || [ "$n" -ne 1 ] || ! grep -q "^warning: .*$pattern" "$tmp/err"; then
    echo "FAIL: $what: exit $rc, $n warning lines:"; head -5 "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok: $what: $(grep '^warning: ' "$tmp/err")"
  fi
}
# (--device without -ngl: -ngl auto, the default with a GPU-type device; see cli-run.sh)
expect_fail "missing model, device without -ngl (the error alone)" env LOOM_SIM_DEVICES=1 "$bin" run -m "$tmp/none.gguf" --device sim0 -p hi
expect_warning "device with -ngl 0" "--device sim0 has no effect" env LOOM_SIM_DEVICES=1 "$bin" run -m "$model" --device sim0 -ngl 0 -p hi -n 4 -c 512
expect_warning "--no-host-copy without -ngl" "--no-host-copy has no effect" "$bin" run -m "$model" --no-host-copy -p hi -n 4 -c 512
# --device none: nothing offloaded, whatever -ngl says (the KV cache and the weights stay on the CPU)
env LOOM_SIM_DEVICES=1 "$bin" run -m "$model" --device none -ngl 99 -p hi -n 4 >"$tmp/out" 2>"$tmp/err" </dev/null
if [ $? -ne 0 ] || grep -q sim0 "$tmp/err" || ! grep -q "KV cache: .* on CPU" "$tmp/err"; then
  echo "FAIL: --device none -ngl 99 offloaded or failed:"; head -5 "$tmp/err"; fails=$((fails + 1))
else
  echo "ok: --device none -ngl 99: $(grep 'KV cache' "$tmp/err")"
fi
# an unknown kernel choice keeps the best kernels (the same as no setting), with a warning
expect_warning "unknown LOOM_CPU_ISA" "LOOM_CPU_ISA=garbage ignored: expected avx512, avx2 or scalar" \
  env LOOM_CPU_ISA=garbage "$bin" test-ops -o SCALE
kernels=$(grep -o 'kernels: [^)]*' "$tmp/out")
env -u LOOM_CPU_ISA "$bin" test-ops -o SCALE 2>/dev/null | grep -q "$kernels" ||
  { echo "FAIL: LOOM_CPU_ISA=garbage changed the kernels ($kernels)"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "all bad inputs rejected cleanly" || exit 1
