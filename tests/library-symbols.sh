#!/usr/bin/env bash
# library-symbols.sh -- every global symbol that libloom.a defines is the public API (loom_*) or an
# internal name with its subsystem's marker (an 'l' and a short subsystem name: lgg_ the GGUF
# reader and writer, lcpu_ the CPU backend, lgal_ the graph allocator, lsch_ the scheduler, lqu_
# the quantizers), so that a program linking Loom statically with another library (ggml's gguf_*,
# anyone's cpu_* or sched_*) gets no clash. Names the compiler or a sanitizer makes (__*) are not
# Loom's. Lists every offender and fails on any. A new subsystem adds its marker here.
# usage: library-symbols.sh LIBLOOM_A
set -u
lib=$1
syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)
[ -n "$syms" ] || { echo "FAIL: no symbols in $lib"; exit 1; }
bad=$(echo "$syms" | grep -Ev '^(loom_|lgg_|lcpu_|lgal_|lsch_|lqu_|__)')
if [ -n "$bad" ]; then
  echo "FAIL: $(echo "$bad" | wc -l) global symbol(s) of $lib without the loom_ prefix or an internal marker (make them static, or give them their subsystem's marker):"
  echo "$bad"
  exit 1
fi
echo "$(echo "$syms" | grep -c '^loom_') loom_* and $(echo "$syms" | grep -Evc '^(loom_|__)') internal symbols, all named by the rule"
