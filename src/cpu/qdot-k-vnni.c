/* qdot-k-vnni.c -- the AVX512-VNNI kernels of the Q4_K and Q6_K weight types against Q8_K columns
 * (qdot-k.h), for the AVX-512 table on CPUs with VNNI (256-bit vectors, AVX512-VL: Zen 4 splits
 * 512-bit operations in two). Where the AVX2 kernels (qdot-k-avx2.c) weight each 32-byte product by
 * its sub-block scales in int16 (vpmaddubsw, a scale shuffle, vpmaddwd, an add: four operations),
 * these take one vpdpbusd per 32 bytes, fold the super-block's eight products into one vector of
 * exact sub-block sums with horizontal adds, and apply the scales there with one or two 32-bit
 * multiplies. Each super-block's integer sum is converted once and accumulated in F32 lanes in
 * super-block order, so a result depends only on 'k'. */
#include "cpu/qdot-k.h"
#include "quant/quant-blocks.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline)) TARGET
#define QK_SFX vnni
#include "cpu/qdot-k-x86.h"

INLINE __m256i dot_us(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

/* Four products (8 lanes each: lanes 0-3 from their low 16 bytes, 4-7 from the high 16) -> one
 * vector holding, in lanes 0-3, the low-half sums of v[0..3] and in lanes 4-7 their high-half sums. */
INLINE __m256i fold4(const __m256i * v) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
}

/* Q4_K: eight 32-element sub-blocks, one product each; the fold gives each sub-block's whole sum,
 * times its 6-bit scale; the minimums come off through the column's block sums. */
INLINE __m256 sb_q4_K(const struct block_q4_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    uint32_t sc[2], m[2];
    k4_scales(w->scales, sc, m);
    __m256i v[8];
    for (int c = 0; c < 4; c++) {
        const __m256i q = loadu(w->qs + 32 * c);
        v[2 * c] = dot_us(_mm256_and_si256(q, m4), loadu(a->qs + 64 * c));
        v[2 * c + 1] = dot_us(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), loadu(a->qs + 64 * c + 32));
    }
    const __m256i lo = fold4(v), hi = fold4(v + 4);
    const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
    const __m256i scv = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(sums, scv)), _mm256_set1_ps(a->d * h2f(w->d)), acc);
    return _mm256_fnmadd_ps(k4_min_sum(m, a), _mm256_set1_ps(a->d * h2f(w->dmin)), acc);
}

/* Q6_K: per half, the four 32-element planes' codes 0..63 from ql nibbles and qh bit pairs, one
 * product each (two 16-element sub-blocks); the folds give the sixteen sub-block sums in lanes
 * ordered 0 2 4 6 1 3 5 7 (+8 for the second half), multiplied by the scales picked in that order;
 * the offset 32 comes off as 32 * sum(scale * block sum). */
INLINE __m256 sb_q6_K(const struct block_q6_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)w->scales);
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), loadu(a->bsums));
    const __m128i scp = _mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    __m256i v[8];
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = loadu(w->ql + 64 * h), l1 = loadu(w->ql + 64 * h + 32), hb = loadu(w->qh + 32 * h);
        const __m256i hb2 = _mm256_srli_epi16(hb, 2);
        __m256i code[4];
        code[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
        code[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(hb2, m3), 4));
        code[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        code[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hb2, m30));
        for (int p = 0; p < 4; p++) v[4 * h + p] = dot_us(code[p], loadu(a->qs + 128 * h + 32 * p));
    }
    const __m256i s0 = _mm256_cvtepi8_epi32(scp), s1 = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(scp, scp));
    __m256i isum = _mm256_add_epi32(_mm256_mullo_epi32(fold4(v), s0), _mm256_mullo_epi32(fold4(v + 4), s1));
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
}

QDOT_K_ROWS(q4_K, struct block_q4_K)
QDOT_K_ROWS(q6_K, struct block_q6_K)

#endif
