#!/usr/bin/env bash
# check-install.sh -- installs the build into a prefix inside it, then builds the consumer program
# against that prefix with CMake (find_package(loom): loom::loom and loom::loom_static) and with
# pkg-config (--cflags --libs loom, and --static with libloom.a), and runs each.
# usage: check-install.sh BUILD_DIR SOURCE_DIR
set -u
B=$1 S=$2 P=$1/install-test
fail=0
rm -rf "$P" "$B/consumer-cmake" "$B/consumer-pc"
cmake --install "$B" --prefix "$P" > "$B/install-test.log" 2>&1 || { cat "$B/install-test.log"; echo "FAIL: cmake --install"; exit 1; }
lib=$(dirname "$(find "$P" -name loom.pc | head -1)")/..
for f in include/loom.h include/loom-backend.h "$lib/libloom.a" "$lib/libloom.so" "$lib/libloom.so.0" "$lib/libloom.so.0.1.0" \
         "$lib/cmake/loom/loom-config.cmake" "$lib/cmake/loom/loom-targets.cmake" "$lib/pkgconfig/loom.pc" bin/loom; do
  case $f in /*) p=$f ;; *) p=$P/$f ;; esac
  [ -e "$p" ] || { echo "FAIL: not installed: $f"; fail=1; }
done
# every public header, one per subsystem: installed, compiling on its own, included by consumer.c
for h in "$S"/include/*.h; do
  [ -e "$P/include/$(basename "$h")" ] || { echo "FAIL: not installed: include/$(basename "$h")"; fail=1; }
  grep -q "#include \"$(basename "$h")\"" "$S/tests/install/consumer.c" || { echo "FAIL: consumer.c does not include $(basename "$h")"; fail=1; }
  printf '#include "%s"\nint main(void) { return 0; }\n' "$(basename "$h")" | cc -fsyntax-only -Wall -Werror -I"$P/include" -x c - ||
    { echo "FAIL: include/$(basename "$h") does not compile on its own"; fail=1; }
done
if [ -e "$B/libloom-cuda.so" ] && [ ! -e "$lib/libloom-cuda.so" ]; then echo "FAIL: not installed: the CUDA module"; fail=1; fi
# the shared library exports the API only
if nm -D --defined-only "$lib/libloom.so" | awk '{print $3}' | grep -v '^loom_' | grep -q .; then
  echo "FAIL: libloom.so exports symbols outside loom_*:"; nm -D --defined-only "$lib/libloom.so" | awk '{print $3}' | grep -v '^loom_' | head; fail=1
fi
if cmake -S "$S/tests/install" -B "$B/consumer-cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release > "$B/consumer-cmake.log" 2>&1 &&
   cmake --build "$B/consumer-cmake" >> "$B/consumer-cmake.log" 2>&1; then
  for exe in consumer consumer-static; do
    "$B/consumer-cmake/$exe" | grep -q "loom consumer: ok (f16)" || { echo "FAIL: find_package consumer $exe"; fail=1; }
  done
else
  cat "$B/consumer-cmake.log"; echo "FAIL: the find_package consumer does not build"; fail=1
fi
export PKG_CONFIG_PATH="$lib/pkgconfig"
if cc -o "$B/consumer-pc" "$S/tests/install/consumer.c" $(pkg-config --cflags --libs loom) 2> "$B/consumer-pc.log"; then
  LD_LIBRARY_PATH="$lib" "$B/consumer-pc" | grep -q "loom consumer: ok (f16)" || { echo "FAIL: pkg-config consumer"; fail=1; }
else
  cat "$B/consumer-pc.log"; echo "FAIL: the pkg-config consumer does not build"; fail=1
fi
# static: all of libloom.a (--whole-archive: every object's needs, the tokenizer's regex library too,
# not only the consumer's), with what `pkg-config --static` adds for it (Libs.private, Requires.private)
if cc -o "$B/consumer-pc-static" "$S/tests/install/consumer.c" $(pkg-config --cflags loom) \
      $(pkg-config --static --libs loom | sed "s|-lloom\b|-Wl,--whole-archive $lib/libloom.a -Wl,--no-whole-archive|") 2> "$B/consumer-pc-static.log"; then
  ldd "$B/consumer-pc-static" | grep -q libloom && { echo "FAIL: the static pkg-config consumer links libloom.so"; fail=1; }
  "$B/consumer-pc-static" | grep -q "loom consumer: ok (f16)" || { echo "FAIL: static pkg-config consumer"; fail=1; }
else
  cat "$B/consumer-pc-static.log"; echo "FAIL: the static pkg-config consumer does not build (pkg-config --static --libs loom)"; fail=1
fi
[ $fail = 0 ] && echo "install: headers, libloom.a, libloom.so.0.1.0, CMake package and loom.pc work for a consumer"
exit $fail
