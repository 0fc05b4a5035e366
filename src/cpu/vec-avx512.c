/* vec-avx512.c -- the AVX-512 kernel table (with F16C/FMA, and AVX512-BF16 vdpbf16ps for BF16
 * weights where the CPU has it). Functions carry target attributes, so any x86-64 build has them;
 * vec.c picks this table only on a CPU that supports it. */
#include "cpu/vec.h"
#include "cpu/qdot-k.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define TMPL(name) name##_avx512

typedef __m512 VF;
#define VLEN 16
#define VF_ZERO() _mm512_setzero_ps()
#define VF_LOADU(p) _mm512_loadu_ps(p)
#define VF_STOREU(p, v) _mm512_storeu_ps(p, v)
#define VF_SET1(x) _mm512_set1_ps(x)
#define VF_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VF_ADD(a, b) _mm512_add_ps(a, b)
#define VF_REDUCE(v) _mm512_reduce_add_ps(v)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_SUB(a, b) _mm512_sub_ps(a, b)
#define VF_DIV(a, b) _mm512_div_ps(a, b)
#define VF_MAX(a, b) _mm512_max_ps(a, b)
#define VF_MIN(a, b) _mm512_min_ps(a, b)
#define VF_ROUND(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VF_SCALE2(v, n) _mm512_scalef_ps(v, n)
#define VF_ZERO_LT(y, x, c) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(c), _CMP_NLT_UQ), y)
#define VF_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VF_STORE_F16(p, v) \
    _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VF_LOAD_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define VF_STORE_BF16(p, v) store_bf16_avx512((uint16_t *)(p), v)

/* Round to nearest even exactly as loom_fp32_to_bf16 does (NaN kept quiet); not vcvtneps2bf16,
 * which flushes subnormals and would differ from the scalar path. */
static inline __attribute__((always_inline)) TARGET void store_bf16_avx512(uint16_t * p, __m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

/* 16 x 16 transpose of 32-bit lanes: pairs, quads, then 128-bit lanes twice. */
static inline __attribute__((always_inline)) TARGET void transpose_avx512(__m512 * v) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(v[i]);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* r[4i + c]: column c of each 128-bit lane, rows 4i..4i+3 */
        r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int h = 0; h < 2; h++) { /* rows 8h..8h+7 */
        for (int c = 0; c < 4; c++) {
            t[8 * h + c] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + 4 + c], 0x88);
            t[8 * h + 4 + c] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + 4 + c], 0xdd);
        }
    }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
    }
    for (int i = 0; i < 16; i++) v[i] = _mm512_castsi512_ps(r[i]);
}
#define VF_TRANSPOSE(t) transpose_avx512(t)

#define GEMM_MRV 3
#define GEMM_NR 8
#define DOT_MR 4
#define DOT_NR 4

#include "cpu/vec-tmpl.h"

/* ---------------------------------------------------------------- BF16 x BF16 GEMM (vdpbf16ps) */

#define BF_MRV 3
#define BF_NR 8
#define BF_MR (BF_MRV * 16)

/* As gemm_tile, over pairs of k: each 32-bit lane of the panel holds (w[r][k], w[r][k+1]) and
 * each column's pair is broadcast; vdpbf16ps adds both products to the lane's F32 sum. */
static inline __attribute__((always_inline)) TARGET_BF16 void gemm_bf16_tile(int64_t kc, const uint32_t * ap,
                                                                             const uint8_t * b, size_t ldb, const int nr,
                                                                             uint8_t * c, size_t ldc, int mr,
                                                                             bool accumulate) {
    __m512 acc[BF_NR][BF_MRV];
    const uint8_t * bp[BF_NR];
#pragma GCC unroll 16
    for (int j = 0; j < nr; j++) {
        bp[j] = b + j * ldb;
#pragma GCC unroll 8
        for (int v = 0; v < BF_MRV; v++) acc[j][v] = _mm512_setzero_ps();
    }
    const int64_t kp = (kc + 1) / 2;
    for (int64_t k = 0; k < kp; k++) {
        __m512i a[BF_MRV];
#pragma GCC unroll 8
        for (int v = 0; v < BF_MRV; v++) a[v] = _mm512_loadu_si512(ap + k * BF_MR + v * 16);
#pragma GCC unroll 16
        for (int j = 0; j < nr; j++) {
            int32_t pair;
            memcpy(&pair, bp[j] + 4 * k, 4);
            const __m512i bj = _mm512_set1_epi32(pair);
#pragma GCC unroll 8
            for (int v = 0; v < BF_MRV; v++) acc[j][v] = _mm512_dpbf16_ps(acc[j][v], (__m512bh)a[v], (__m512bh)bj);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nr; j++) {
        float * cj = (float *)(c + j * ldc);
        if (mr == BF_MR) {
#pragma GCC unroll 8
            for (int v = 0; v < BF_MRV; v++) {
                __m512 x = acc[j][v];
                if (accumulate) x = _mm512_add_ps(x, _mm512_loadu_ps(cj + v * 16));
                _mm512_storeu_ps(cj + v * 16, x);
            }
        } else {
            float tmp[BF_MR];
#pragma GCC unroll 8
            for (int v = 0; v < BF_MRV; v++) _mm512_storeu_ps(tmp + v * 16, acc[j][v]);
            for (int r = 0; r < mr; r++) cj[r] = accumulate ? cj[r] + tmp[r] : tmp[r];
        }
    }
}

#define BF_CASE(NR_) \
    case NR_: gemm_bf16_tile(kc, ap, b, ldb, NR_, c, ldc, mr, accumulate); return;

TARGET_BF16 static void gemm_bf16_avx512(int64_t kc, const void * ap_, const uint8_t * b, size_t ldb, int nr, uint8_t * c,
                                         size_t ldc, int mr, bool accumulate) {
    const uint32_t * ap = ap_;
    switch (nr) {
        BF_CASE(1) BF_CASE(2) BF_CASE(3) BF_CASE(4) BF_CASE(5) BF_CASE(6) BF_CASE(7) BF_CASE(8)
    default: LOOM_ABORT("bf16 gemm tile with %d columns", nr);
    }
}
#undef BF_CASE

/* One-column products (token generation) on AMD processors take the AVX2 table's row kernels:
 * Zen 4 runs 512-bit operations as two 256-bit halves, and there the 256-bit row loop (a shorter
 * reduction per row, half-width F16 conversions) gave more tokens per second in every pair of
 * alternating runs on one machine (bench/cpu-notes.md).
 * NULL: the 512-bit kernels for every product (other processors, or LOOM_CPU_ISA=avx512 asked for
 * them by name). */
static const struct cpu_vec * g_rows_1;

static inline __attribute__((always_inline)) void dot_table(enum cpu_wtype wt, cpu_dot_fn wide, int64_t k, const uint8_t * w, size_t ldw,
                                                            int mr, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc) {
    if (nr == 1 && g_rows_1) g_rows_1->dot[wt](k, w, ldw, mr, b, ldb, nr, c, ldc);
    else wide(k, w, ldw, mr, b, ldb, nr, c, ldc);
}

#define DOT_TABLE(name, wt)                                                                                              \
    static void name##_table(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr, \
                             uint8_t * c, size_t ldc) {                                                                   \
        dot_table(wt, name##_avx512, k, w, ldw, mr, b, ldb, nr, c, ldc);                                                \
    }
DOT_TABLE(dot_f32, CPU_W_F32)
DOT_TABLE(dot_f16, CPU_W_F16)
DOT_TABLE(dot_bf16, CPU_W_BF16)
#undef DOT_TABLE

static struct cpu_vec g_table = {
    .f16_to_f32 = f16_to_f32_avx512,
    .f32_to_f16 = f32_to_f16_avx512,
    .bf16_to_f32 = bf16_to_f32_avx512,
    .f32_to_bf16 = f32_to_bf16_avx512,
    .silu = silu_avx512,
    .gelu = gelu_avx512,
    .exp_sum = exp_sum_avx512,
    .dot = {[CPU_W_F32] = dot_f32_table, [CPU_W_F16] = dot_f16_table, [CPU_W_BF16] = dot_bf16_table},
    .qdot = {CPU_QDOT_LEGACY(avx2), CPU_QDOT_K_TABLE(avx2)}, /* 256-bit integer kernels (qdot-*-avx2.c; VNNI ones set below) */
    .dot_mr = DOT_MR,
    .dot_nr = DOT_NR,
    .dot_rows = {[CPU_W_F32] = dot_rows_f32_avx512, [CPU_W_F16] = dot_rows_f16_avx512, [CPU_W_BF16] = dot_rows_bf16_avx512},
    .qgemm = {CPU_QGEMM_LEGACY(avx2)}, /* VNNI ones set below */
    .quantize_q8_0x = lcpu_quantize_q8_0x_avx2,
    .qgemm_nr = 4,
    .mad = {[CPU_W_F32] = mad_f32_avx512, [CPU_W_F16] = mad_f16_avx512, [CPU_W_BF16] = mad_bf16_avx512},
    .pack = pack_avx512,
    .gemm_f32 = gemm_f32_avx512,
    .gemm_mr = GEMM_MR,
    .gemm_nr = GEMM_NR,
};
static struct cpu_vec g_table_bf16;

const struct cpu_vec * lcpu_vec_avx512(bool with_bf16, bool wide_rows) {
    g_rows_1 = __builtin_cpu_is("amd") && !wide_rows ? lcpu_vec_avx2() : NULL;
    g_table.name = g_rows_1 ? "AVX512 FMA F16C (one-column products: AVX2)" : "AVX512 FMA F16C";
    if (__builtin_cpu_supports("avx512vnni")) {
        const struct cpu_qdot vnni[LOOM_TYPE_COUNT] = {CPU_QDOT_LEGACY(vnni), CPU_QDOT_K_VNNI};
        for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
            if (vnni[t].dot) g_table.qdot[t] = vnni[t];
        }
        const struct cpu_qgemm vnni_gemm[LOOM_TYPE_COUNT] = {CPU_QGEMM_LEGACY(vnni)};
        for (int t = 0; t < LOOM_TYPE_COUNT; t++) {
            if (vnni_gemm[t].gemm) g_table.qgemm[t] = vnni_gemm[t];
        }
        g_table.quantize_q8_0x = lcpu_quantize_q8_0x_vnni;
        g_table.qgemm_nr = 8; /* 32 vector registers: 8 code vectors and 8 column sums stay in registers */
    }
    g_table_bf16 = g_table;
    g_table_bf16.name = g_rows_1 ? "AVX512 FMA F16C BF16 (one-column products: AVX2)" : "AVX512 FMA F16C BF16";
    g_table_bf16.gemm_bf16 = gemm_bf16_avx512;
    g_table_bf16.gemm_bf16_mr = BF_MR;
    g_table_bf16.gemm_bf16_nr = BF_NR;
    return with_bf16 ? &g_table_bf16 : &g_table;
}

#else

const struct cpu_vec * lcpu_vec_avx512(bool with_bf16, bool wide_rows) {
    (void)with_bf16;
    (void)wide_rows;
    return NULL;
}

#endif
