/* qdot-k-avx2.c -- the AVX2 integer kernels of the super-block weight types against Q8_K columns
 * (qdot-k.h). Codes are unpacked to unsigned bytes and multiplied with the signed column bytes by
 * vpmaddubsw (pairs into int16, which cannot overflow: codes <= 63, |q| <= 127), the sub-block scales
 * applied by vpmaddwd into int32; an offset (Q3_K, Q6_K) or minimum (Q2_K, Q4_K, Q5_K) is taken off
 * through the columns' 16-element block sums. Each super-block's exact integer sum is converted once
 * and accumulated in F32 lanes in super-block order, so a result depends only on 'k'. The AVX-512
 * table uses these too: 256-bit integer ops are as fast there on Zen 4 (vec-avx512.c). */
#include "cpu/qdot-k.h"
#include "quant/quant-blocks.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline)) TARGET
#define QK_SFX avx2
#include "cpu/qdot-k-x86.h"

TARGET void lcpu_quantize_q8_K_avx2(const float * x, void * y, int64_t k) {
    struct block_q8_K * b = y;
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        __m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* |x| > FLT_MAX or NaN */
            mx = _mm256_max_ps(a, mx);
        }
        if (_mm256_movemask_ps(bad)) { /* a NaN or an infinity: d = NaN, codes and sums 0 (vec.h) */
            memset(&b[i], 0, sizeof b[i]);
            b[i].d = NAN;
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        b[i].d = amax / 127.0f;
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m256 lim = _mm256_set1_ps(127.0f);
        for (int s = 0; s < QK_K / 32; s++) {
            __m256i n[4];
            for (int q = 0; q < 4; q++) {
                const __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * s + 8 * q), id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                n[q] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(v, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim)));
            }
            /* packs interleave 128-bit lanes: 0 1 2 3 | 4 5 6 7 -> back in element order */
            const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * s), _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            /* the two 16-element sums: lanes of n[0] + n[1] (elements 0..15), n[2] + n[3] (16..31) */
            __m256i t = _mm256_hadd_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3]));
            t = _mm256_hadd_epi32(t, t);
            const __m128i s2 = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            b[i].bsums[2 * s] = (int16_t)_mm_cvtsi128_si32(s2);
            b[i].bsums[2 * s + 1] = (int16_t)_mm_extract_epi32(s2, 1);
        }
    }
}

/* Each sb_* adds one super-block's products of weight block 'w' with column block 'a' to 'acc'. */
INLINE __m256 sb_q4_K(const struct block_q4_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    uint32_t sc[2], m[2];
    k4_scales(w->scales, sc, m);
    const __m256i scw = k4_scale_words(sc);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i q = loadu(w->qs + 32 * c);
        const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), loadu(a->qs + 64 * c));
        const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), loadu(a->qs + 64 * c + 32));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, pick_words(scw, 2 * c, 2 * c)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, pick_words(scw, 2 * c + 1, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
    return _mm256_fnmadd_ps(k4_min_sum(m, a), _mm256_set1_ps(a->d * h2f(w->dmin)), acc);
}

INLINE __m256 sb_q5_K(const struct block_q5_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    uint32_t sc[2], m[2];
    k4_scales(w->scales, sc, m);
    const __m256i scw = k4_scale_words(sc);
    const __m256i qh = loadu(w->qh);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i q = loadu(w->qs + 32 * c);
        const __m256i cl = _mm256_or_si256(_mm256_and_si256(q, m4), bit_to(qh, 2 * c, 0x10));
        const __m256i ch = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), bit_to(qh, 2 * c + 1, 0x10));
        const __m256i lo = _mm256_maddubs_epi16(cl, loadu(a->qs + 64 * c));
        const __m256i hi = _mm256_maddubs_epi16(ch, loadu(a->qs + 64 * c + 32));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, pick_words(scw, 2 * c, 2 * c)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, pick_words(scw, 2 * c + 1, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
    return _mm256_fnmadd_ps(k4_min_sum(m, a), _mm256_set1_ps(a->d * h2f(w->dmin)), acc);
}

/* Q6_K: per half, the four 32-element planes' codes 0..63 from ql nibbles and qh bit pairs; the
 * offset 32 comes off as 32 * sum(scale * block sum). */
INLINE __m256 sb_q6_K(const struct block_q6_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(a->bsums)), 5));
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = loadu(w->ql + 64 * h), l1 = loadu(w->ql + 64 * h + 32), hb = loadu(w->qh + 32 * h);
        const __m256i scw = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(w->scales + 8 * h))));
        const __m256i hb2 = _mm256_srli_epi16(hb, 2);
        __m256i code[4];
        code[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
        code[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(hb2, m3), 4));
        code[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        code[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hb2, m30));
        for (int p = 0; p < 4; p++) {
            const __m256i prod = _mm256_maddubs_epi16(code[p], loadu(a->qs + 128 * h + 32 * p));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, pick_words(scw, 2 * p, 2 * p + 1)));
        }
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
}

/* Q3_K: codes + 4 (0..7) from the 2-bit planes and the hmask bit; the 4 comes off through the block sums. */
INLINE __m256 sb_q3_K(const struct block_q3_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m3 = _mm256_set1_epi8(0x03);
    int8_t sc[16];
    const uint8_t * s = w->scales;
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
        sc[j] = (int8_t)((lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(a->bsums)), 2));
    const __m256i hm = loadu(w->hmask);
    for (int h = 0; h < 2; h++) {
        const __m256i q = loadu(w->qs + 32 * h);
        const __m256i sch = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8 * h))));
        for (int p = 0; p < 4; p++) {
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3), bit_to(hm, 4 * h + p, 4));
            const __m256i prod = _mm256_maddubs_epi16(u, loadu(a->qs + 128 * h + 32 * p));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, pick_words(sch, 2 * p, 2 * p + 1)));
        }
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
}

INLINE __m256 sb_q2_K(const struct block_q2_K * w, const struct block_q8_K * a, __m256 acc) {
    const __m256i m3 = _mm256_set1_epi8(0x03);
    const __m128i sb = _mm_loadu_si128((const __m128i *)w->scales);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f)));
    const __m256 imin = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, loadu(a->bsums)));
    const __m128i scb = _mm_and_si128(sb, _mm_set1_epi8(0x0f));
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = loadu(w->qs + 32 * h);
        const __m256i sch = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h ? _mm_srli_si128(scb, 8) : scb));
        for (int p = 0; p < 4; p++) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3);
            const __m256i prod = _mm256_maddubs_epi16(u, loadu(a->qs + 128 * h + 32 * p));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, pick_words(sch, 2 * p, 2 * p + 1)));
        }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
    return _mm256_fnmadd_ps(imin, _mm256_set1_ps(a->d * h2f(w->dmin)), acc);
}

/* IQ4_XS: the code book looked up by vpshufb; signed x signed products through vpsignb (the column
 * takes the code's sign, the code its absolute value; |code| <= 127). */
INLINE __m256 sb_iq4_xs(const struct block_iq4_xs * w, const struct block_q8_K * a, __m256 acc) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)loom_kvalues_iq4nl), m4 = _mm_set1_epi8(0x0f);
    __m256i isum = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const int ls = ((w->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((w->scales_h >> (2 * s)) & 3) << 4;
        const __m128i q = _mm_loadu_si128((const __m128i *)(w->qs + 16 * s));
        const __m256i v = _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(q, m4)));
        const __m256i prod = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(loadu(a->qs + 32 * s), v));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, _mm256_set1_epi16((short)(ls - 32))));
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d * h2f(w->d)), acc);
}

QDOT_K_ROWS(q4_K, struct block_q4_K)
QDOT_K_ROWS(q5_K, struct block_q5_K)
QDOT_K_ROWS(q6_K, struct block_q6_K)
QDOT_K_ROWS(q3_K, struct block_q3_K)
QDOT_K_ROWS(q2_K, struct block_q2_K)
QDOT_K_ROWS(iq4_xs, struct block_iq4_xs)

#endif
