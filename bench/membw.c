/* membw.c -- streaming-read memory bandwidth: how fast can this machine read a buffer much larger
 * than its caches (the bound for token generation, which reads every weight once per token)?
 * usage: membw [MiB] [threads]   (default 1024 MiB, all cores) */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char ** argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    int threads = argc > 2 ? atoi(argv[2]) : omp_get_max_threads();
    size_t n = mib * 1048576 / sizeof(float);
    /* 2 MiB-aligned and, where the kernel allows, in transparent huge pages (as Loom's CPU
     * buffers): the figure is then the memory's, not the TLB's */
    float * a = aligned_alloc(2 << 20, (n * sizeof(float) + (2 << 20) - 1) / (2 << 20) * (2 << 20));
    if (!a) return 1;
#ifdef MADV_HUGEPAGE
    madvise(a, n * sizeof(float), MADV_HUGEPAGE);
#endif
#pragma omp parallel for num_threads(threads)
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 1023);
    double best = 0, sum_all = 0;
    for (int rep = 0; rep < 7; rep++) {
        double t0 = now(), total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total)
        for (size_t i = 0; i < n; i += 64) {
            __m256 s0 = _mm256_load_ps(a + i), s1 = _mm256_load_ps(a + i + 8), s2 = _mm256_load_ps(a + i + 16),
                   s3 = _mm256_load_ps(a + i + 24), s4 = _mm256_load_ps(a + i + 32), s5 = _mm256_load_ps(a + i + 40),
                   s6 = _mm256_load_ps(a + i + 48), s7 = _mm256_load_ps(a + i + 56);
            __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                                     _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
            float v[8];
            _mm256_storeu_ps(v, s);
            total += v[0];
        }
        double dt = now() - t0, gbs = n * sizeof(float) / dt / 1e9;
        sum_all += total;
        if (gbs > best) best = gbs;
    }
    printf("streaming read: %.1f GB/s (best of 7, %zu MiB, %d threads; checksum %g)\n", best, mib, threads, sum_all);
    free(a);
    return 0;
}
