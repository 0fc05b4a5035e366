/* test-qdot.c -- the integer dot kernels of every CPU table (scalar, AVX2, AVX-512 where the CPU
 * has them) against a double-precision sum of the dequantized blocks: random weight blocks (every
 * code byte, scales and minimums of both signs), columns quantized by the table's own quantizer,
 * every tile shape mr x nr up to the entry's rows per call x dot_nr, row lengths of 1 to 9 blocks
 * and one longer than the legacy kernels prepare at once, padded strides, and guard words
 * around each result that must stay untouched. The kernels sum in integers per block, so the only
 * difference from the reference is F32 rounding. The integer GEMM kernels (qgemm: panel packer,
 * 8-row micro-kernel, cpu_q8_0x column quantizer) get the same check for every row count 1..8 and
 * column count 1..qgemm_nr, and their columns must hold the Q8_0 quantizer's codes and scale. A
 * column block holding a NaN or an infinity must make every product NaN. */
#include "test-util.h"

#include "cpu/vec.h"
#include "quant/quant-blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}

static float rnd_uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 8) / 16777216.0f; }

/* Random blocks of type t for 'k' elements: random bytes, then every F16 scale field set to a
 * finite value (the legacy types keep d, and m for Q4_1 / Q5_1, in their first 2 or 4 bytes). */
static void fill_blocks(enum loom_type t, uint8_t * row, int64_t k) {
    const size_t bs = loom_type_size(t);
    const int64_t nb = k / loom_blck_size(t);
    for (size_t i = 0; i < (size_t)nb * bs; i++) row[i] = (uint8_t)rnd();
    const bool has_m = t == LOOM_TYPE_Q4_1 || t == LOOM_TYPE_Q5_1;
    for (int64_t b = 0; b < nb; b++) {
        const uint16_t d = loom_fp32_to_fp16(rnd_uniform(-0.05f, 0.05f));
        memcpy(row + b * bs, &d, 2);
        if (has_m) {
            const uint16_t m = loom_fp32_to_fp16(rnd_uniform(-0.2f, 0.2f));
            memcpy(row + b * bs + 2, &m, 2);
        }
    }
}

enum { MAXK = 288, MAXR = 8, MAXC = 8, GUARD = 0x7fc00bad };
/* The one-column kernels: a long row (more blocks than the legacy kernels prepare of a column at
 * once, with a short last group) and up to QROWS rows per call. */
enum { LONGK = 8192 + 96, QROWS = 32 };

/* Checks the tile 'c' (n_words words) that a kernel wrote: nr columns of mr F32 results, column j
 * at c + 1 + j (mr + 2) between two guard words, GUARD words after the last column; result [j][r]
 * against the double sum over k of wf[r * ld + i] * af[j * ld + i], plus extra[j][r] unless 'extra' is NULL,
 * within 2e-6 of the sum of the products' magnitudes. 'what' and 'type' name the case in messages.
 * Returns the results checked. */
static int check_tile(const uint32_t * c, size_t n_words, int mr, int nr, int64_t k, const float * wf, const float * af, int64_t ld,
                      double extra[][MAXR], const char * what, const char * type) {
    int checked = 0;
    for (int j = 0; j < nr; j++) {
        const uint32_t * cj = c + 1 + j * (mr + 2);
        CHECK(cj[-1] == GUARD && cj[mr] == GUARD, "%s %s k=%lld %dx%d: wrote outside column %d", what, type, (long long)k, mr, nr, j);
        for (int r = 0; r < mr; r++) {
            double ref = extra ? extra[j][r] : 0.0, mag = 0.0;
            for (int64_t i = 0; i < k; i++) {
                ref += (double)wf[r * ld + i] * af[j * ld + i];
                mag += fabs((double)wf[r * ld + i] * af[j * ld + i]);
            }
            float got;
            memcpy(&got, &cj[r], 4);
            CHECK(fabs(got - ref) <= 2e-6 * mag + 1e-30, "%s %s k=%lld %dx%d [%d][%d]: %.9g, expected %.9g", what, type, (long long)k, mr,
                  nr, j, r, got, ref);
            checked++;
        }
    }
    for (size_t i = (size_t)nr * (mr + 2); i < n_words; i++) CHECK(c[i] == GUARD, "%s %s: wrote past the tile", what, type);
    return checked;
}

/* One kernel of table 'v' at row length k: every tile shape up to the entry's rows x dot_nr. */
static int check_dot(const struct cpu_vec * v, const char * name, int t, int64_t k) {
    const struct cpu_qdot * q = &v->qdot[t];
    const struct loom_type_traits * wt = loom_type_get_traits((enum loom_type)t);
    const struct loom_type_traits * at = loom_type_get_traits(q->act_type);
    const int rows = q->rows ? q->rows : v->dot_mr;
    CHECK(rows >= 1 && rows <= QROWS && v->dot_nr <= MAXC, "%s %s: %d rows per call", name, wt->name, rows);
    int checked = 0;
    /* padded strides, keeping the 2-byte alignment of the F16 scales that every row of a tensor has */
    const size_t ldw = loom_row_size((enum loom_type)t, k) + 6, lda = loom_row_size(q->act_type, k) + 10;
    uint8_t * w = malloc(ldw * QROWS), * a = malloc(lda * MAXC);
    float * x = malloc((size_t)k * 4), * wf = malloc((size_t)k * QROWS * 4), * af = malloc((size_t)k * MAXC * 4);
    for (int r = 0; r < rows; r++) {
        fill_blocks((enum loom_type)t, w + r * ldw, k);
        wt->to_float(w + r * ldw, wf + r * k, k);
    }
    for (int j = 0; j < v->dot_nr; j++) {
        for (int64_t i = 0; i < k; i++) x[i] = rnd_uniform(-1.0f, 1.0f) * (i % 7 == 3 ? 4.0f : 1.0f);
        q->quantize(x, a + j * lda, k);
        at->to_float(a + j * lda, af + j * k, k);
    }
    for (int mr = 1; mr <= rows; mr++) {
        for (int nr = 1; nr <= v->dot_nr; nr++) {
            const size_t ldc = (size_t)(mr + 2) * 4; /* a guard word after each column's results */
            uint32_t c[MAXC * (QROWS + 2)];
            for (size_t i = 0; i < sizeof c / 4; i++) c[i] = GUARD;
            q->dot(k, w, ldw, mr, a, lda, nr, (uint8_t *)(c + 1), ldc);
            checked += check_tile(c, sizeof c / 4, mr, nr, k, wf, af, k, NULL, name, wt->name);
        }
    }
    free(w);
    free(a);
    free(x);
    free(wf);
    free(af);
    return checked;
}

/* Non-finite columns (vec.h): in a column of four Q8_0 blocks, block 1 holding a NaN, block 2 a
 * +inf and block 3 a -inf, those blocks get d = NaN and codes 0 while block 0 is as quantized
 * alone; every kernel's product with the column is NaN (a skipped NaN would give d = 0: a zero). */
static void check_nonfinite(const struct cpu_vec * v, const char * name) {
    enum { K = 128 };
    float x[K];
    for (int i = 0; i < K; i++) x[i] = rnd_uniform(-1.0f, 1.0f);
    x[32 + 7] = NAN;
    x[64 + 31] = INFINITY;
    x[96] = -INFINITY;
    const lcpu_quantize_act_fn quantize = v->qdot[LOOM_TYPE_Q8_0].quantize;
    struct block_q8_0 a[K / 32], alone;
    quantize(x, a, K);
    quantize(x, &alone, 32);
    CHECK(!memcmp(&a[0], &alone, sizeof alone) && !isnan(loom_fp16_to_fp32(a[0].d)), "%s: a finite block is quantized as alone", name);
    for (int b = 1; b < K / 32; b++) {
        bool zero = true;
        for (int i = 0; i < 32; i++) zero &= a[b].qs[i] == 0;
        CHECK(isnan(loom_fp16_to_fp32(a[b].d)) && zero, "%s: non-finite block %d has d = NaN (%g) and codes 0", name, b,
              (double)loom_fp16_to_fp32(a[b].d));
    }
    for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
        const struct cpu_qdot * q = &v->qdot[t];
        if (!q->dot || q->act_type != LOOM_TYPE_Q8_0) continue;
        uint8_t w[K / 32 * 64];
        fill_blocks((enum loom_type)t, w, K);
        float c = 0.0f;
        q->dot(K, w, sizeof w, 1, (const uint8_t *)a, sizeof a, 1, (uint8_t *)&c, 4);
        CHECK(isnan(c), "%s %s: the product with a non-finite column is NaN (got %g)", name, loom_type_name((enum loom_type)t), (double)c);
    }
    if (v->quantize_q8_0x) {
        struct cpu_q8_0x ax[K / 32];
        v->quantize_q8_0x(x, ax, K);
        CHECK(!isnan(ax[0].d) && !isnan(ax[0].ds), "%s: q8_0x finite block", name);
        for (int b = 1; b < K / 32; b++)
            CHECK(isnan(ax[b].d) && isnan(ax[b].ds) && ax[b].s == 0, "%s: q8_0x non-finite block %d: d and ds NaN, code sum 0", name, b);
        for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
            const struct cpu_qgemm * q = &v->qgemm[t];
            if (!q->gemm) continue;
            uint8_t w[K / 32 * 64], * panel = malloc((size_t)(K / 32) * CPU_QGEMM_BLOCK);
            fill_blocks((enum loom_type)t, w, K);
            q->pack(w, sizeof w, 1, K, panel);
            float c = 0.0f;
            q->gemm(K, panel, (const uint8_t *)ax, sizeof ax, 1, (uint8_t *)&c, 4, 1);
            CHECK(isnan(c), "%s %s qgemm: the product with a non-finite column is NaN (got %g)", name, loom_type_name((enum loom_type)t),
                  (double)c);
            free(panel);
        }
    }
}

static int check_table(const struct cpu_vec * v, const char * name) {
    int checked = 0;
    check_nonfinite(v, name);
    for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
        const struct cpu_qdot * q = &v->qdot[t];
        if (!q->dot || q->act_type != LOOM_TYPE_Q8_0) continue; /* the super-block kernels are test-qdot-k's */
        const struct loom_type_traits * wt = loom_type_get_traits((enum loom_type)t);
        const struct loom_type_traits * at = loom_type_get_traits(q->act_type);
        CHECK(wt->to_float && at->to_float, "%s %s: dequantizers", name, wt->name);
        const int64_t blk = loom_blck_size(q->act_type) > loom_blck_size((enum loom_type)t) ? loom_blck_size(q->act_type)
                                                                                            : loom_blck_size((enum loom_type)t);
        /* 1, 2, 3, 4, 7 blocks, 8 (one whole group of the legacy kernels), 9, then the long row */
        for (int64_t k = blk; k <= MAXK; k += blk * (k < 4 * blk ? 1 : k < 7 * blk ? 3 : 1)) checked += check_dot(v, name, t, k);
        checked += check_dot(v, name, t, LONGK);
    }
    printf("%s: %d results checked\n", name, checked);
    return checked;
}

/* The integer GEMM entries of table 'v' (vec.h, "integer GEMM"). */
static int check_qgemm(const struct cpu_vec * v, const char * name) {
    int checked = 0;
    char what[64];
    snprintf(what, sizeof what, "%s qgemm", name);
    for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
        const struct cpu_qgemm * q = &v->qgemm[t];
        if (!q->gemm) continue;
        CHECK(q->pack && v->quantize_q8_0x && v->qgemm_nr >= 1 && v->qgemm_nr <= MAXC, "%s: qgemm entry %d complete", name, t);
        const struct loom_type_traits * wt = loom_type_get_traits((enum loom_type)t);
        const bool has_m = t == LOOM_TYPE_Q4_1 || t == LOOM_TYPE_Q5_1;
        for (int64_t k = 32; k <= MAXK; k += k < 128 ? 32 : 160) {
            const size_t ldw = loom_row_size((enum loom_type)t, k) + 6, lda = (size_t)(k / 32) * sizeof(struct cpu_q8_0x) + 8;
            uint8_t * w = malloc(ldw * MAXR), * a = malloc(lda * MAXC), * panel = malloc((size_t)(k / 32) * CPU_QGEMM_BLOCK);
            float x[MAXK], wf[MAXR][MAXK], af[MAXC][MAXK];
            for (int r = 0; r < MAXR; r++) {
                fill_blocks((enum loom_type)t, w + r * ldw, k);
                wt->to_float(w + r * ldw, wf[r], k);
            }
            for (int j = 0; j < v->qgemm_nr; j++) {
                for (int64_t i = 0; i < k; i++) x[i] = rnd_uniform(-1.0f, 1.0f) * (i % 7 == 3 ? 4.0f : 1.0f);
                if (j == 1) memset(x, 0, 32 * sizeof x[0]); /* an all-zero block */
                v->quantize_q8_0x(x, a + j * lda, k);
                const struct cpu_q8_0x * blk = (const struct cpu_q8_0x *)(a + j * lda);
                struct { uint16_t d; int8_t qs[32]; } __attribute__((packed)) ref[MAXK / 32];
                v->qdot[LOOM_TYPE_Q8_0].quantize(x, ref, k);
                for (int64_t b = 0; b < k / 32; b++) {
                    float amax = 0.0f;
                    for (int i = 0; i < 32; i++) amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
                    int32_t sum = 0;
                    for (int i = 0; i < 32; i++) {
                        sum += blk[b].qs[i];
                        af[j][b * 32 + i] = blk[b].d * blk[b].qs[i];
                    }
                    CHECK(blk[b].s == sum && blk[b].d == loom_fp16_to_fp32(ref[b].d) && !memcmp(blk[b].qs, ref[b].qs, 32),
                          "%s: q8_0x column %d block %lld: the Q8_0 quantizer's codes, scale and their sum", name, j, (long long)b);
                    CHECK(blk[b].ds == loom_fp16_to_fp32(loom_fp32_to_fp16(amax / 127.0f * (float)sum)), "%s: q8_0x column %d block %lld: ds",
                          name, j, (long long)b);
                }
            }
            /* the minimum meets the column's F16 sum ds, not d * s */
            double extra[MAXC][MAXR];
            for (int j = 0; has_m && j < v->qgemm_nr; j++) {
                const struct cpu_q8_0x * blk = (const struct cpu_q8_0x *)(a + j * lda);
                for (int r = 0; r < MAXR; r++) {
                    extra[j][r] = 0.0;
                    for (int64_t b = 0; b < k / 32; b++) {
                        uint16_t m;
                        memcpy(&m, w + r * ldw + b * loom_type_size((enum loom_type)t) + 2, 2);
                        extra[j][r] += (double)loom_fp16_to_fp32(m) * ((double)blk[b].ds - (double)blk[b].d * blk[b].s);
                    }
                }
            }
            for (int mr = 1; mr <= MAXR; mr++) {
                q->pack(w, ldw, mr, k, panel);
                for (int nr = 1; nr <= v->qgemm_nr; nr++) {
                    const size_t ldc = (size_t)(mr + 2) * 4;
                    uint32_t c[MAXC * (MAXR + 2)];
                    for (size_t i = 0; i < sizeof c / 4; i++) c[i] = GUARD;
                    q->gemm(k, panel, a, lda, nr, (uint8_t *)(c + 1), ldc, mr);
                    checked += check_tile(c, sizeof c / 4, mr, nr, k, wf[0], af[0], MAXK, has_m ? extra : NULL, what, wt->name);
                }
            }
            free(w);
            free(a);
            free(panel);
        }
    }
    printf("%s: %d integer GEMM results checked\n", name, checked);
    return checked;
}

int main(void) {
    check_table(lcpu_vec_scalar(), "scalar");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && lcpu_vec_avx2())
        CHECK(check_table(lcpu_vec_avx2(), "AVX2") > 0 && check_qgemm(lcpu_vec_avx2(), "AVX2") > 0, "AVX2 table has integer kernels");
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && lcpu_vec_avx512(false, false))
        CHECK(check_table(lcpu_vec_avx512(false, false), "AVX-512") > 0 && check_qgemm(lcpu_vec_avx512(false, false), "AVX-512") > 0,
              "AVX-512 table has integer kernels");
#endif
    return test_finish("test-qdot");
}
