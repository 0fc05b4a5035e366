#!/bin/bash
# cuda-gpu-run.sh -- one device-machine session: build, run the CUDA tests, the benchmark and
# the tests under compute-sanitizer; logs go to $OUT (or ./gpu-out). Run from the source root.
# Usage: bench/cuda-gpu-run.sh [test|testops|bench|ncu|sanitize]...   (default: test bench sanitize)
set -u
DEST=${OUT:-gpu-out}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
OUT=$(mktemp -d)   # every log; packed into $DEST/logs.tgz at the end (few files come back)
trap 'tar czf "$DEST/logs.tgz" -C "$OUT" .' EXIT
steps=${*:-test bench sanitize}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
t0=$(date +%s)
if ! { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR=ON > "$OUT/build.log" 2>&1 &&
       cmake --build build -j16 >> "$OUT/build.log" 2>&1; }; then
    tail -40 "$OUT/build.log"
    echo "BUILD FAILED"
    exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
for s in $steps; do
    case $s in
    test)
        t0=$(date +%s)
        (cd build && ctest --output-on-failure -E test-cuda > "$OUT/ctest.log" 2>&1; echo "ctest (others) rc=$?")
        timeout 300 build/test-cuda > "$OUT/test.log" 2>&1
        echo "test-cuda rc=$? ($(( $(date +%s) - t0 )) s); failures: $(grep -c 'check failed' "$OUT/test.log")"
        grep -E "^device:|OOM message|memory tests|op cases|all checks|check\(s\) failed" "$OUT/test.log"
        grep "check failed" "$OUT/test.log" | cut -c1-230 | head -60
        ;;
    testops)
        timeout 120 build/loom test-ops -b CUDA0 > "$OUT/test-ops.log" 2>&1
        echo "loom test-ops -b CUDA0: rc=$?"; grep -E "FAIL|passed|^op|^[A-Z_]+ +[0-9]" "$OUT/test-ops.log" | head -40
        timeout 200 build/loom test-ops -b CUDA0 --perf > "$OUT/test-ops-perf.log" 2>&1
        echo "loom test-ops -b CUDA0 --perf: rc=$?"; grep -E "FAIL|passed" "$OUT/test-ops-perf.log" | head
        ;;
    bench)
        timeout 200 build/bench-cuda-matvec 20 2>&1 | tee "$OUT/bench.log"
        ;;
    ncu)
        for v in 0; do
            timeout 120 ncu --clock-control none -k regex:lc_matvec_kernel --launch-skip 100 --launch-count 1 \
                --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_bytes.sum,l1tex__t_bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
                build/bench-cuda-matvec 3 mv > "$OUT/ncu$v.log" 2>&1
            echo "ncu variant $v rc=$?"; grep -E "lc_matvec|duration|throughput|bytes|warps_active" "$OUT/ncu$v.log" | head -12
        done
        ;;
    sanitize)
        t0=$(date +%s)
        # API errors are left out: the test provokes one on purpose (a 10 TiB cudaMalloc)
        for tool in memcheck racecheck; do
            timeout 280 compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 build/test-cuda > "$OUT/$tool.log" 2>&1
            echo "compute-sanitizer $tool rc=$? ($(( $(date +%s) - t0 )) s)"
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|check\(s\) failed|all checks" "$OUT/$tool.log" | head -20
        done
        ;;
    esac
done
