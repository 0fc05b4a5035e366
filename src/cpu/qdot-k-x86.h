/* qdot-k-x86.h -- what the x86 super-block kernels share (qdot-k-avx2.c, qdot-k-vnni.c): F16 and
 * load helpers, the Q4_K / Q5_K scale unpacking, the horizontal sum and the row loop. The includer
 * defines TARGET and INLINE (its function target), and QK_SFX (the kernels' ISA suffix). */
#ifndef LOOM_CPU_QDOT_K_X86_H
#define LOOM_CPU_QDOT_K_X86_H

#include <immintrin.h>
#include <string.h>

INLINE float h2f(loom_half h) { return _cvtsh_ss(h); }

INLINE __m256i loadu(const void * p) { return _mm256_loadu_si256((const __m256i *)p); }

/* A vector of int16 holding word 'lo' of 's' (8 words, both lanes alike) in the low 128-bit lane and
 * word 'hi' in the high lane: the scales of two 16-element sub-blocks for one 32-byte product. */
INLINE __m256i pick_words(__m256i s, int lo, int hi) {
    const __m128i cl = _mm_set1_epi16((short)(2 * lo | (2 * lo + 1) << 8));
    const __m128i ch = _mm_set1_epi16((short)(2 * hi | (2 * hi + 1) << 8));
    return _mm256_shuffle_epi8(s, _mm256_set_m128i(ch, cl));
}

/* The bytes whose bit 'bit' is set become 'val', the others 0. */
INLINE __m256i bit_to(__m256i x, int bit, int val) {
    const __m256i m = _mm256_set1_epi8((char)(1 << bit));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(x, m), m), _mm256_set1_epi8((char)val));
}

/* The 6-bit scales (sc) and minimums (m) of a Q4_K / Q5_K block, one byte per sub-block. */
INLINE void k4_scales(const uint8_t * q, uint32_t sc[2], uint32_t m[2]) {
    uint32_t u[3];
    memcpy(u, q, 12);
    sc[0] = u[0] & 0x3f3f3f3f;
    m[0] = u[1] & 0x3f3f3f3f;
    sc[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4;
    m[1] = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4;
}

/* The minimums of a Q4_K / Q5_K block times the column's block sums, as 8 F32 lanes: lane l holds
 * (bsums[2l] + bsums[2l + 1]) times the minimum of sub-block l (exact integers). */
INLINE __m256 k4_min_sum(const uint32_t m[2], const struct block_q8_K * a) {
    const __m128i m8 = _mm_set_epi32(0, 0, (int)m[1], (int)m[0]);
    const __m256i mv = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* each minimum twice */
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(mv, loadu(a->bsums)));
}

/* The scales of a Q4_K / Q5_K block as 8 int16 in each 128-bit lane. */
INLINE __m256i k4_scale_words(const uint32_t sc[2]) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0])));
}

/* The sum of the 8 lanes of 'v', in one fixed order. */
INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One row against one column at a time, super-block by super-block into 8 F32 lanes. (Four rows
 * interleaved per column measured 4-5x slower: the unrolled rows spill.) */
#define QDOT_K_DECL_(wt, isa) CPU_QDOT_K_DECL(wt, isa) /* (expands QK_SFX before the paste) */
#define QDOT_K_ROWS(wt, wblock)                                                                    \
    TARGET QDOT_K_DECL_(wt, QK_SFX) {                                                              \
        for (int j = 0; j < nr; j++) {                                                             \
            const struct block_q8_K * y = (const struct block_q8_K *)(a + j * lda);                \
            for (int r = 0; r < mr; r++) {                                                         \
                const wblock * x = (const wblock *)(w + (size_t)r * ldw);                          \
                __m256 acc = _mm256_setzero_ps();                                                  \
                for (int64_t i = 0; i < k / QK_K; i++) acc = sb_##wt(&x[i], &y[i], acc);           \
                const float v = hsum_ps(acc);                                                      \
                memcpy(c + j * ldc + (size_t)r * 4, &v, 4);                                        \
            }                                                                                      \
        }                                                                                          \
    }
#endif
