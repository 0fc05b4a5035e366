/* quant-kernels.c -- times the CPU integer kernels of one quantized weight type on one thread
 * (thread CPU time, best of 20 or ITERS, so that other load on the machine counts less): the one-column
 * kernel (qdot) over rows streamed from memory (or, with ROWS = 2000, from L2), and the integer GEMM (column quantizer + panel
 * packer + micro-kernel) against the F32 GEMM micro-kernel alone on packed panels (the F32 path
 * without its dequantization and packing: a lower bound of that path's time).
 * build: gcc -O2 -Isrc -Iinclude bench/quant-kernels.c BUILD/libloom.a -lm -lpthread -fopenmp -o /tmp/quant-kernels
 * usage: /tmp/quant-kernels TYPE [avx2|avx512 [ROWS [ITERS]]]   (TYPE: the GGUF type number, e.g. 2 = Q4_0, 8 = Q8_0) */
#include "cpu/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Random blocks with small finite F16 scales in each block's first two bytes. */
static uint8_t * make_rows(int type, int64_t k, int64_t m, size_t * ldw) {
    *ldw = loom_row_size(type, k);
    uint8_t * w = malloc(*ldw * (size_t)m);
    for (size_t i = 0; i < *ldw * (size_t)m; i++) w[i] = (uint8_t)rand();
    const size_t bs = loom_type_size(type);
    const uint16_t h = loom_fp32_to_fp16(0.01f);
    for (int64_t r = 0; r < m; r++)
        for (int64_t b = 0; b < k / 32; b++) memcpy(w + (size_t)r * *ldw + (size_t)b * bs, &h, 2);
    return w;
}

int main(int argc, char ** argv) {
    const int type = argc > 1 ? atoi(argv[1]) : LOOM_TYPE_Q4_0;
    const struct cpu_vec * v = argc > 2 && !strcmp(argv[2], "avx2") ? lcpu_vec_avx2() : lcpu_vec_avx512(false, false);
    if (!v || type < 0 || type >= LOOM_TYPE_COUNT) return 1;
    const int64_t K = 768; /* the 110m model's rows */
    float * x = malloc((size_t)K * 512 * 4);
    for (int64_t i = 0; i < K * 512; i++) x[i] = (float)(rand() % 2000 - 1000) / 1000.0f;

    if (v->qdot[type].dot) { /* one column, 32000 rows (the output matrix) streamed from memory */
        const int64_t M = argc > 3 ? atoll(argv[3]) : 32000;
        size_t ldw;
        uint8_t * w = make_rows(type, K, M, &ldw), a[4096];
        float * c = malloc((size_t)M * 4);
        v->qdot[type].quantize(x, a, K);
        double best = 1e9;
        for (int it = 0; it < (argc > 4 ? atoi(argv[4]) : 20); it++) {
            const double t0 = now();
            const int rows = v->qdot[type].rows ? v->qdot[type].rows : v->dot_mr;
            for (int64_t i = 0; i < M; i += rows) {
                const int mr = (int)(M - i < rows ? M - i : rows);
                v->qdot[type].dot(K, w + (size_t)i * ldw, ldw, mr, a, 0, 1, (uint8_t *)(c + i), 0);
            }
            const double t = now() - t0;
            if (t < best) best = t;
        }
        printf("%s type %d qdot, %lld x %lld, 1 column: %.3f ms, %.1f GB/s of weights\n", v->name, type, (long long)M, (long long)K,
               best * 1e3, (double)ldw * (double)M / best * 1e-9);
        free(w);
        free(c);
    }
    if (v->qgemm[type].gemm) { /* 768 x 768 weights, 128 columns, in L2 */
        const int64_t M = 768, N = 128, nb = K / 32;
        size_t ldw;
        uint8_t * w = make_rows(type, K, M, &ldw);
        const size_t lda = (size_t)nb * sizeof(struct cpu_q8_0x), group = (size_t)nb * CPU_QGEMM_BLOCK;
        uint8_t * a = malloc(lda * N), * panel = malloc(group * (M / 8));
        float * c = malloc((size_t)M * N * 4);
        double best = 1e9, bestf = 1e9;
        for (int it = 0; it < 20; it++) {
            const double t0 = now();
            for (int64_t j = 0; j < N; j++) v->quantize_q8_0x(x + j * K, a + j * lda, K);
            for (int64_t g = 0; g < M / 8; g++) v->qgemm[type].pack(w + (size_t)g * 8 * ldw, ldw, 8, K, panel + g * group);
            for (int64_t i0 = 0; i0 < M; i0 += 64)
                for (int64_t j = 0; j < N; j += v->qgemm_nr)
                    for (int64_t g = i0 / 8; g < (i0 + 64) / 8; g++)
                        v->qgemm[type].gemm(K, panel + g * group, a + j * lda, lda, v->qgemm_nr, (uint8_t *)(c + j * M + g * 8), M * 4, 8);
            const double t = now() - t0;
            if (t < best) best = t;
        }
        float * pf = malloc((size_t)K * M * 4);
        for (int64_t i = 0; i < K * M; i++) pf[i] = 0.01f;
        for (int it = 0; it < 20; it++) {
            const double t0 = now();
            for (int64_t j = 0; j < N; j += v->gemm_nr) {
                const int nr = (int)(N - j < v->gemm_nr ? N - j : v->gemm_nr);
                for (int64_t i = 0; i + v->gemm_mr <= M; i += v->gemm_mr)
                    v->gemm_f32(K, pf + (size_t)i * K, (const uint8_t *)(x + j * K), K * 4, nr, (uint8_t *)(c + j * M + i), M * 4,
                                v->gemm_mr, false);
            }
            const double t = now() - t0;
            if (t < bestf) bestf = t;
        }
        const double macs = (double)K * M * N;
        printf("%s type %d qgemm %lld x %lld x %lld: %.3f ms (%.0f GMAC/s); F32 GEMM micro-kernel alone: %.3f ms (%.0f GMAC/s)\n", v->name,
               type, (long long)M, (long long)K, (long long)N, best * 1e3, macs / best * 1e-9, bestf * 1e3, macs / bestf * 1e-9);
        free(w);
        free(a);
        free(panel);
        free(c);
        free(pf);
    }
    free(x);
    return 0;
}
