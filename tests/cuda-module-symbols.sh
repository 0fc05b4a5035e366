#!/usr/bin/env bash
# cuda-module-symbols.sh -- the CUDA module (libloom-cuda.so) resolves its loom_* references against
# the program that loads it: each must be defined and exported by a program linked with libloom.a
# (here the command line) and by libloom.so, or dlopen fails on a machine with a GPU.
# usage: cuda-module-symbols.sh MODULE PROGRAM SHARED_LIBRARY
set -u
mod=$1; shift
need=$(nm -D --undefined-only "$mod" | awk '{print $2}' | grep '^loom_' | sort -u)
[ -n "$need" ] || { echo "FAIL: the module references no loom_* function (not the module?)"; exit 1; }
fail=0
for obj in "$@"; do
  have=$(nm -D --defined-only "$obj" | awk '{print $3}' | sort -u)
  missing=$(comm -23 <(echo "$need") <(echo "$have"))
  if [ -n "$missing" ]; then
    echo "FAIL: $obj does not export what the module needs (add them to g_module_needs in src/cuda/cuda-module.c):"; echo "$missing"; fail=1
  fi
done
[ $fail = 0 ] && echo "the module's $(echo "$need" | wc -l) loom_* references are exported by: $*"
exit $fail
