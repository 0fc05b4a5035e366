/* vec-avx2.c -- the AVX2 kernel table (with FMA and F16C), for x86-64 CPUs without AVX-512.
 * Functions carry target attributes; vec.c picks this table only on a CPU that supports it. */
#include "cpu/vec.h"
#include "cpu/qdot-k.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define TMPL(name) name##_avx2

static inline __attribute__((always_inline)) TARGET float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Round to nearest even exactly as loom_fp32_to_bf16 does (NaN kept quiet). */
static inline __attribute__((always_inline)) TARGET void store_bf16_avx2(uint16_t * p, __m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40)), nan);
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}

/* v * 2^n in two exponent steps, each within the normal range, so 2^n may be subnormal or overflow. */
static inline __attribute__((always_inline)) TARGET __m256 scale2_avx2(__m256 v, __m256 n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(v, s1), s2);
}

typedef __m256 VF;
#define VLEN 8
#define VF_ZERO() _mm256_setzero_ps()
#define VF_LOADU(p) _mm256_loadu_ps(p)
#define VF_STOREU(p, v) _mm256_storeu_ps(p, v)
#define VF_SET1(x) _mm256_set1_ps(x)
#define VF_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VF_ADD(a, b) _mm256_add_ps(a, b)
#define VF_REDUCE(v) hsum_avx2(v)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_SUB(a, b) _mm256_sub_ps(a, b)
#define VF_DIV(a, b) _mm256_div_ps(a, b)
#define VF_MAX(a, b) _mm256_max_ps(a, b)
#define VF_MIN(a, b) _mm256_min_ps(a, b)
#define VF_ROUND(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VF_SCALE2(v, n) scale2_avx2(v, n)
#define VF_ZERO_LT(y, x, c) _mm256_and_ps(y, _mm256_cmp_ps(x, _mm256_set1_ps(c), _CMP_NLT_UQ))
#define VF_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VF_STORE_F16(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VF_LOAD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define VF_STORE_BF16(p, v) store_bf16_avx2((uint16_t *)(p), v)

/* 8 x 8 transpose of 32-bit lanes: pairs, quads, then the two 128-bit halves. */
static inline __attribute__((always_inline)) TARGET void transpose_avx2(__m256 * v) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) { /* s[4g + c]: column c of each 128-bit half, rows 4g..4g+3 */
        s[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        v[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
        v[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
    }
}
#define VF_TRANSPOSE(t) transpose_avx2(t)

#define GEMM_MRV 2
#define GEMM_NR 6
#define DOT_MR 4
#define DOT_NR 2

#include "cpu/vec-tmpl.h"

static const struct cpu_vec g_table = {
    .name = "AVX2 FMA F16C",
    .f16_to_f32 = f16_to_f32_avx2,
    .f32_to_f16 = f32_to_f16_avx2,
    .bf16_to_f32 = bf16_to_f32_avx2,
    .f32_to_bf16 = f32_to_bf16_avx2,
    .silu = silu_avx2,
    .gelu = gelu_avx2,
    .exp_sum = exp_sum_avx2,
    .dot = {[CPU_W_F32] = dot_f32_avx2, [CPU_W_F16] = dot_f16_avx2, [CPU_W_BF16] = dot_bf16_avx2},
    .qdot = {CPU_QDOT_LEGACY(avx2), CPU_QDOT_K_TABLE(avx2)},
    .dot_mr = DOT_MR,
    .dot_nr = DOT_NR,
    .dot_rows = {[CPU_W_F32] = dot_rows_f32_avx2, [CPU_W_F16] = dot_rows_f16_avx2, [CPU_W_BF16] = dot_rows_bf16_avx2},
    .qgemm = {CPU_QGEMM_LEGACY(avx2)},
    .quantize_q8_0x = lcpu_quantize_q8_0x_avx2,
    .qgemm_nr = 4,
    .mad = {[CPU_W_F32] = mad_f32_avx2, [CPU_W_F16] = mad_f16_avx2, [CPU_W_BF16] = mad_bf16_avx2},
    .pack = pack_avx2,
    .gemm_f32 = gemm_f32_avx2,
    .gemm_mr = GEMM_MR,
    .gemm_nr = GEMM_NR,
    .gemm_bf16 = NULL,
};

const struct cpu_vec * lcpu_vec_avx2(void) { return &g_table; }

#else

const struct cpu_vec * lcpu_vec_avx2(void) { return NULL; }

#endif
