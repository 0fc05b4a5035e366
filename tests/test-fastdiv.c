/* test-fastdiv.c -- the CUDA kernels' division by invariant integers (src/cuda/cuda-fastdiv.h),
 * checked on the host against the C operators: every divisor below 4096 with edge and random
 * dividends, then random 32-bit divisors, powers of two and their neighbours. */
#include "cuda/cuda-fastdiv.h"
#include "test-util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static int bad;
static void check(uint32_t n, uint32_t d) {
    const struct lc_fastdiv f = lc_fastdiv_make(d);
    uint32_t q;
    const uint32_t r = lc_fastdiv_qr(n, f, &q);
    if (q != n / d || r != n % d) bad++;
    if (bad > 0 && bad < 8 && (q != n / d || r != n % d)) CHECK(false, "n %u / d %u: got %u rem %u, want %u rem %u", n, d, q, r, n / d, n % d);
}

int main(void) {
    for (uint32_t d = 1; d < 4096; d++) {
        for (uint32_t k = 0; k < 40; k++) {
            check(0xffffffffu - k, d);
            check(d * k, d);
            if (d * k > 0) check(d * k - 1, d);
        }
        for (int i = 0; i < 400; i++) check(next32(), d);
    }
    for (int s = 0; s < 32; s++) {
        const uint32_t p = (uint32_t)1 << s;
        for (int i = 0; i < 200; i++) {
            const uint32_t n = i == 0 ? 0xffffffffu : next32();
            check(n, p);
            if (p > 1) check(n, p - 1);
            if (p < 0x80000000u) check(n, p + 1);
        }
    }
    check(0xffffffffu, 0xffffffffu);
    check(0xfffffffeu, 0xffffffffu);
    for (int i = 0; i < 200000; i++) {
        const uint32_t d = next32();
        if (d) check(next32(), d);
    }
    CHECK(bad == 0, "%d wrong quotients", bad);
    return test_finish("test-fastdiv");
}
