/* test-qdot-k.c -- the super-block integer kernels (src/cpu/qdot-k.h): the Q8_K column quantizer's
 * properties, and every table's kernel for Q2_K..Q6_K and IQ4_XS against a double-precision sum of
 * the dequantized weights times the dequantized columns, on random blocks; tiles of every size
 * (1..dot_mr rows, 1..dot_nr columns) must give each result bit for bit as a 1 x 1 tile does; a
 * column holding a NaN or an infinity must make the products NaN. */
#include "cpu/qdot-k.h"
#include "quant/quant-blocks.h"
#include "quant/quant.h"
#include "test-util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static uint32_t g_rng = 12345;
static uint32_t rnd(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}
static float rndf(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; } /* [-1, 1] */

/* A quantizer: |q| <= 127, the largest |x| maps to 127, |x - d q| <= d / 2, bsums are the sums;
 * an all-zero block gives d = 0; a block whose largest |x| is 127 (so q = x / 1, no rounding in the
 * product) puts halves on the nearest even code. Every table's quantizer must give the portable
 * one's blocks bit for bit. */
static void check_quantizer(lcpu_quantize_act_fn quantize, const char * name) {
    enum { NB = 4 };
    float x[NB * QK_K];
    for (int i = 0; i < NB * QK_K; i++) x[i] = rndf() * (i < QK_K ? 1.0f : 1e-3f);
    for (int i = 2 * QK_K; i < 3 * QK_K; i++) x[i] = 0.0f;
    x[17] = -3.5f; /* the block's largest magnitude, negative */
    for (int i = 3 * QK_K; i < 4 * QK_K; i++) x[i] = (float)((i - 3 * QK_K) % 200 - 100) + 0.5f; /* ties: -99.5 .. 99.5 */
    x[3 * QK_K + 5] = 127.0f;
    struct block_q8_K b[NB], ref[NB];
    quantize(x, b, NB * QK_K);
    lcpu_quantize_q8_K(x, ref, NB * QK_K);
    CHECK(!memcmp(b, ref, sizeof b), "%s: the portable quantizer's blocks bit for bit", name);
    CHECK(b[0].qs[17] == -127, "%s: the largest |x| maps to -127 (got %d)", name, b[0].qs[17]);
    CHECK(b[2].d == 0.0f, "%s: an all-zero block has d = 0", name);
    CHECK(b[3].d == 1.0f && b[3].qs[0] == -100 && b[3].qs[1] == -98 && b[3].qs[2] == -98 && b[3].qs[3] == -96,
          "%s: halves to the nearest even code (%d %d %d %d)", name, b[3].qs[0], b[3].qs[1], b[3].qs[2], b[3].qs[3]);
    for (int i = 0; i < NB; i++) {
        for (int s = 0; s < QK_K / 16; s++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += b[i].qs[16 * s + j];
            CHECK(sum == b[i].bsums[s], "%s: bsums[%d] of block %d: %d, sum %d", name, s, i, b[i].bsums[s], sum);
        }
        for (int j = 0; j < QK_K; j++) {
            const float v = x[i * QK_K + j], q = b[i].qs[j];
            CHECK(q >= -127 && q <= 127, "q in range");
            CHECK(fabs((double)v - (double)b[i].d * q) <= 0.5 * b[i].d * (1 + 1e-5) + 1e-30, "%s: block %d element %d: %g against %g", name,
                  i, j, (double)v, (double)b[i].d * q);
        }
    }
}

/* Non-finite columns (vec.h): of three super-blocks, the second holding a NaN and the third an
 * infinity get d = NaN with codes and sums 0, the first is as quantized alone. */
static void check_nonfinite(lcpu_quantize_act_fn quantize, const char * name) {
    enum { NB = 3 };
    float x[NB * QK_K];
    for (int i = 0; i < NB * QK_K; i++) x[i] = rndf();
    x[QK_K + 100] = NAN;
    x[2 * QK_K + 255] = -INFINITY;
    struct block_q8_K b[NB], alone;
    quantize(x, b, NB * QK_K);
    quantize(x, &alone, QK_K);
    CHECK(!memcmp(&b[0], &alone, sizeof alone), "%s: a finite super-block is quantized as alone", name);
    for (int i = 1; i < NB; i++) {
        struct block_q8_K zero;
        memset(&zero, 0, sizeof zero);
        CHECK(isnan(b[i].d) && !memcmp(b[i].qs, zero.qs, sizeof zero.qs) && !memcmp(b[i].bsums, zero.bsums, sizeof zero.bsums),
              "%s: non-finite super-block %d has d = NaN (%g), codes and sums 0", name, i, (double)b[i].d);
    }
}

struct ktype {
    enum loom_type type;
    const char * name;
    size_t bsize;
    size_t d_off, dmin_off; /* byte offsets of the F16 scales in a block (dmin: 0 = none) */
    void (*dequant)(const void *, float *, int64_t);
};

static void fill_block(const struct ktype * t, uint8_t * blk) {
    for (size_t i = 0; i < t->bsize; i++) blk[i] = (uint8_t)rnd();
    const uint16_t d = loom_fp32_to_fp16(0.001f + (float)(rnd() % 1000) * 1e-5f);
    memcpy(blk + t->d_off, &d, 2);
    if (t->dmin_off) {
        const uint16_t m = loom_fp32_to_fp16(0.0005f + (float)(rnd() % 1000) * 1e-5f);
        memcpy(blk + t->dmin_off, &m, 2);
    }
}

static void check_kernels(const struct cpu_vec * vec, const struct ktype * t) {
    enum { M = 5, N = 5, NB = 3, K = NB * QK_K };
    const struct cpu_qdot * qd = &vec->qdot[t->type];
    CHECK(qd->dot != NULL && qd->act_type == LOOM_TYPE_Q8_K, "%s: %s has an integer kernel", vec->name, t->name);
    if (!qd->dot) return;
    const size_t ldw = NB * t->bsize, lda = NB * sizeof(struct block_q8_K);
    uint8_t * w = malloc(M * ldw), * a = malloc(N * lda);
    float * wf = malloc(sizeof(float) * M * K), * af = malloc(sizeof(float) * N * K), * x = malloc(sizeof(float) * K);
    for (int r = 0; r < M; r++) {
        for (int i = 0; i < NB; i++) fill_block(t, w + r * ldw + i * t->bsize);
        t->dequant(w + r * ldw, wf + r * K, K);
    }
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < K; i++) x[i] = rndf();
        qd->quantize(x, a + j * lda, K);
        const struct block_q8_K * b = (const struct block_q8_K *)(a + j * lda);
        for (int i = 0; i < K; i++) af[j * K + i] = b[i / QK_K].d * (float)b[i / QK_K].qs[i % QK_K];
    }
    float one[N][M];
    for (int j = 0; j < N; j++) {
        for (int r = 0; r < M; r++) {
            qd->dot(K, w + r * ldw, ldw, 1, a + j * lda, lda, 1, (uint8_t *)&one[j][r], 0);
            double ref = 0.0, mag = 0.0;
            for (int i = 0; i < K; i++) {
                ref += (double)wf[r * K + i] * af[j * K + i];
                mag += fabs((double)wf[r * K + i] * af[j * K + i]);
            }
            CHECK(fabs(one[j][r] - ref) <= 1e-5 * mag + 1e-9, "%s %s row %d column %d: %.9g against %.9g", vec->name, t->name, r, j,
                  (double)one[j][r], ref);
        }
    }
    /* a column whose second super-block is non-finite: every product NaN */
    for (int i = 0; i < K; i++) x[i] = rndf();
    x[QK_K + 3] = INFINITY;
    struct block_q8_K nf[NB];
    qd->quantize(x, nf, K);
    float bad = 0.0f;
    qd->dot(K, w, ldw, 1, (const uint8_t *)nf, lda, 1, (uint8_t *)&bad, 0);
    CHECK(isnan(bad), "%s %s: the product with a non-finite column is NaN (got %g)", vec->name, t->name, (double)bad);
    for (int mr = 1; mr <= vec->dot_mr; mr++) {
        for (int nr = 1; nr <= vec->dot_nr; nr++) {
            for (int r0 = 0; r0 + mr <= M; r0 += mr) {
                for (int j0 = 0; j0 + nr <= N; j0 += nr) {
                    float c[N][M];
                    qd->dot(K, w + r0 * ldw, ldw, mr, a + j0 * lda, lda, nr, (uint8_t *)&c[0][0], sizeof c[0]);
                    for (int j = 0; j < nr; j++)
                        for (int r = 0; r < mr; r++)
                            CHECK(memcmp(&c[j][r], &one[j0 + j][r0 + r], 4) == 0, "%s %s tile %dx%d at (%d, %d): not bit for bit", vec->name,
                                  t->name, mr, nr, r0 + r, j0 + j);
                }
            }
        }
    }
    free(w);
    free(a);
    free(wf);
    free(af);
    free(x);
}

int main(void) {
    const struct ktype types[] = {
        {LOOM_TYPE_Q2_K, "Q2_K", sizeof(struct block_q2_K), offsetof(struct block_q2_K, d), offsetof(struct block_q2_K, dmin), loom_dequant_q2_K},
        {LOOM_TYPE_Q3_K, "Q3_K", sizeof(struct block_q3_K), offsetof(struct block_q3_K, d), 0, loom_dequant_q3_K},
        {LOOM_TYPE_Q4_K, "Q4_K", sizeof(struct block_q4_K), offsetof(struct block_q4_K, d), offsetof(struct block_q4_K, dmin), loom_dequant_q4_K},
        {LOOM_TYPE_Q5_K, "Q5_K", sizeof(struct block_q5_K), offsetof(struct block_q5_K, d), offsetof(struct block_q5_K, dmin), loom_dequant_q5_K},
        {LOOM_TYPE_Q6_K, "Q6_K", sizeof(struct block_q6_K), offsetof(struct block_q6_K, d), 0, loom_dequant_q6_K},
        {LOOM_TYPE_IQ4_XS, "IQ4_XS", sizeof(struct block_iq4_xs), offsetof(struct block_iq4_xs, d), 0, loom_dequant_iq4_xs},
    };
    const struct cpu_vec * tables[3] = {lcpu_vec_scalar(), NULL, NULL};
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    unsigned ca, cb, cc, cd; /* F16C by CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c" */
    const bool f16c = __get_cpuid(1, &ca, &cb, &cc, &cd) && (cc & (1u << 29));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) tables[1] = lcpu_vec_avx2();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        tables[2] = lcpu_vec_avx512(false, false);
#endif
    for (int v = 0; v < 3; v++) {
        if (!tables[v]) continue;
        check_quantizer(tables[v]->qdot[LOOM_TYPE_Q6_K].quantize, tables[v]->name);
        check_nonfinite(tables[v]->qdot[LOOM_TYPE_Q6_K].quantize, tables[v]->name);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) check_kernels(tables[v], &types[t]);
    }
    return test_finish("test-qdot-k");
}
