#!/usr/bin/env bash
# library-symbols.sh -- every global symbol that libloom.a defines is the public API (loom_*) or an
# internal name with its subsystem's marker (an 'l' and a short subsystem name: lgg_ the GGUF
# reader and writer, lcpu_ the CPU backend, lgal_ the graph allocator, lsch_ the scheduler, lqu_
# the quantizers), so that a program linking Loom statically with another library (ggml's gguf_*,
# anyone's cpu_* or sched_*) gets no clash. Names the compiler or a sanitizer makes (__*) are not
# Loom's. Lists every offender and fails on any. A new subsystem adds its marker here.
# With the shared library and the include folder: every function libloom.so exports is declared
# LOOM_API in a public header or is one of the few internal ones the CUDA module calls (marked
# LOOM_API where they are declared), and every LOOM_API declaration of the headers is exported.
# usage: library-symbols.sh LIBLOOM_A [LIBLOOM_SO INCLUDE_DIR]
set -u
lib=$1 so=${2:-} inc=${3:-}
syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)
[ -n "$syms" ] || { echo "FAIL: no symbols in $lib"; exit 1; }
bad=$(echo "$syms" | grep -Ev '^(loom_|lgg_|lcpu_|lgal_|lsch_|lqu_|__)')
if [ -n "$bad" ]; then
  echo "FAIL: $(echo "$bad" | wc -l) global symbol(s) of $lib without the loom_ prefix or an internal marker (make them static, or give them their subsystem's marker):"
  echo "$bad"
  exit 1
fi
echo "$(echo "$syms" | grep -c '^loom_') loom_* and $(echo "$syms" | grep -Evc '^(loom_|__)') internal symbols, all named by the rule"
[ -n "$so" ] || exit 0
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sort -u)
declared=$(grep -ho 'LOOM_API[^(]*\bloom_[a-z0-9_]*(' "$inc"/*.h | grep -o 'loom_[a-z0-9_]*($' | tr -d '(' | sort -u)
module="loom_backend_buffer_init loom_env_str loom_env_uint" # internal, for the CUDA module
extra=$(comm -23 <(echo "$exported") <(printf '%s\n' $declared $module | sort -u))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$extra" ] || [ -n "$missing" ]; then
  [ -n "$extra" ] && { echo "FAIL: $so exports functions no public header declares LOOM_API:"; echo "$extra"; }
  [ -n "$missing" ] && { echo "FAIL: LOOM_API functions $so does not export (declared, never defined?):"; echo "$missing"; }
  exit 1
fi
echo "$so exports the $(echo "$declared" | wc -l) LOOM_API functions of the headers and the module's $(echo $module | wc -w)"
