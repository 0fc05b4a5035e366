/* qdot-legacy-tmpl.h -- the integer block dot products of the 32-element weight types (Q8_0, Q4_0,
 * Q5_0, Q5_1, IQ4_NL) with Q8_0 activation columns, written once for 256-bit vectors and
 * included by qdot-legacy-avx2.c (vpmaddubsw + vpmaddwd) and qdot-legacy-avx512.c (vpdpbusd).
 *
 * The includer defines TARGET (the function target attribute), QL(name) (the ISA suffix) and
 * QL_VNNI (1: vpdpbusd on 256-bit vectors, AVX512-VNNI + VL; 0: AVX2 only).
 *
 * Per block of 32, each weight row is decoded into 32 bytes 'u' that the unsigned x signed byte
 * product takes as its unsigned operand, with an offset o such that the weight code is u - o:
 *   Q4_0: nibble, o = 8;  Q5_0: nibble | fifth bit << 4, o = 16;  Q5_1: the code, o = 0, and the
 *   minimum m enters as m * da * sum(a);  Q8_0 / IQ4_NL with vpdpbusd: code + 128, o = 128.
 * The block's integer sum is then sum(u * a) - o * sum(a), and o * sum(a) (and sum(a) for the
 * minimum) is computed once per column and block, shared by every row of the tile. Without VNNI,
 * Q8_0 and IQ4_NL codes reach +-127 and vpmaddubsw would saturate on u = code + 128, so those two
 * take the sign trick instead: |w| as the unsigned operand, a carrying w's sign.
 * Each (row, column) pair keeps eight F32 lane sums, one block at a time in block order, reduced
 * in one fixed order at the end, so a result depends on k alone (not on the tile shape). */

#define QL_AI static inline __attribute__((always_inline)) TARGET

enum ql_type { QL_Q8_0, QL_Q4_0, QL_Q5_0, QL_Q5_1, QL_IQ4_NL };

#define QL_MR 4 /* most rows per tile */
/* Rows per tile of type T, measured on 110m-sized rows streamed from memory (K = 768, 32000 rows,
 * one column, one thread, GB/s of weights, 4-row tiles with the prefetch below against 1-row):
 * Q4_0 16.3 / 12.9, Q5_0 15.4 / 12.1, Q5_1 12.4 / 10.6, IQ4_NL 14.9 / 12.2, Q8_0 14.2 / 21.8.
 * Q8_0's rows are twice as long, and 4 interleaved row streams even with the prefetch lose to one
 * sequential stream (without the prefetch, 4-row tiles streamed Q8_0 at 6.2 GB/s: the hardware
 * prefetcher does not follow the interleaved rows -- the 3x slowdown measured before). */
#define QL_TILE_MR(T) ((T) == QL_Q8_0 ? 1 : 4)
#define QL_PF_TILES 2
#define QL_NR 4 /* columns per tile (the tables' dot_nr is at most this) */

/* Bytes per weight block. */
#define QL_BLOCK(T)                                                                          \
    ((T) == QL_Q8_0 ? sizeof(struct block_q8_0) : (T) == QL_Q4_0 ? sizeof(struct block_q4_0) \
     : (T) == QL_Q5_0 ? sizeof(struct block_q5_0) : (T) == QL_Q5_1 ? sizeof(struct block_q5_1)            \
     : sizeof(struct block_iq4_nl))
/* The offset o of the unsigned operand (0 for the sign-trick types). */
#define QL_SIGNTRICK(T) (!QL_VNNI && ((T) == QL_Q8_0 || (T) == QL_IQ4_NL))
#define QL_OFF(T) ((T) == QL_Q4_0 ? 8 : (T) == QL_Q5_0 ? 16 : ((T) == QL_Q8_0 || (T) == QL_IQ4_NL) && QL_VNNI ? 128 : 0)
#define QL_MIN(T) ((T) == QL_Q5_1)

/* sum over each group of four bytes of u[i] * s[i] (u unsigned, s signed) -> eight int32 lanes. */
QL_AI __m256i QL(dot_us)(__m256i u, __m256i s) {
#if QL_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* As dot_us, added to 'acc'. */
QL_AI __m256i QL(dot_us_acc)(__m256i acc, __m256i u, __m256i s) {
#if QL_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, QL(dot_us)(u, s));
#endif
}

/* The 32 nibbles of 16 bytes in element order: low nibbles (elements 0..15), then high. */
QL_AI __m256i QL(nibbles)(const uint8_t * qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* 0x10 in byte j where bit j of the little-endian 32-bit qh is set, else 0. */
QL_AI __m256i QL(fifth_bits)(const uint8_t * qh) {
    int32_t h;
    memcpy(&h, qh, 4);
    /* byte j takes qh byte j / 8, then tests its bit j % 8 */
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(h), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

/* The IQ4_NL values as the kernel's operand: signed for the sign trick, else shifted by 128. */
QL_AI __m256i QL(iq4nl_table)(void) {
    __m128i t = _mm_loadu_si128((const __m128i *)loom_kvalues_iq4nl);
    if (QL_VNNI) t = _mm_xor_si128(t, _mm_set1_epi8((char)0x80));
    return _mm256_set_m128i(t, t);
}

/* Decodes one weight block: the operand bytes, the scale and (Q5_1) the minimum. */
QL_AI __m256i QL(decode)(const enum ql_type T, const uint8_t * blk, __m256i tbl, float * d, float * m) {
    uint16_t h;
    memcpy(&h, blk, 2);
    *d = _cvtsh_ss(h);
    if (QL_MIN(T)) {
        memcpy(&h, blk + 2, 2);
        *m = _cvtsh_ss(h);
    }
    switch (T) {
    case QL_Q8_0: {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return QL_VNNI ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
    case QL_Q4_0: return QL(nibbles)(blk + 2);
    case QL_Q5_0: return _mm256_or_si256(QL(nibbles)(blk + 6), QL(fifth_bits)(blk + 2));
    case QL_Q5_1: return _mm256_or_si256(QL(nibbles)(blk + 8), QL(fifth_bits)(blk + 4));
    case QL_IQ4_NL: return _mm256_shuffle_epi8(tbl, QL(nibbles)(blk + 2));
    }
    return _mm256_setzero_si256();
}

QL_AI float QL(hsum)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* F32 -> Q8_0 columns as the field's SIMD quantizer rounds them (so that the integer sums are the
 * field's): per block d = max|x| / 127 (F16), q = x * (127 / max|x|) rounded to nearest even
 * (lcpu_quantize_q8_0, the portable one, divides by d and rounds halves away from zero: one
 * q may differ by one step). */
QL_AI void QL(quantize_q8_0)(const float * x, void * y, int64_t k) {
    struct block_q8_0 * out = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < k / 32; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int q = 0; q < 4; q++) {
            v[q] = _mm256_loadu_ps(x + 8 * q);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[q]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        out[i].d = (uint16_t)_cvtss_sh(amax / 127.0f, 0);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i n[4];
        for (int q = 0; q < 4; q++)
            n[q] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[q], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs interleave 128-bit lanes: 0 1 2 3 | 4 5 6 7 -> put them back in element order */
        const __m256i p16a = _mm256_packs_epi32(n[0], n[1]), p16b = _mm256_packs_epi32(n[2], n[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        _mm256_storeu_si256((__m256i *)out[i].qs, _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

/* An MR x NR tile over 'nb' blocks (MR, NR compile-time after inlining). */
QL_AI void QL(tile)(const enum ql_type T, const int MR, const int NR, int64_t nb, const uint8_t * w, size_t ldw,
                    const uint8_t * a, size_t lda, uint8_t * c, size_t ldc) {
    const size_t wb = QL_BLOCK(T);
    const __m256i tbl = T == QL_IQ4_NL ? QL(iq4nl_table)() : _mm256_setzero_si256();
    __m256 acc[QL_NR][QL_MR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) acc[j][r] = _mm256_setzero_ps();
    }
    /* the rows QL_PF_TILES tiles on (the next calls' rows, contiguous in the matrix), a few lines
     * per block: the hardware prefetcher does not follow MR interleaved row streams */
    const uint8_t * pf = w + (size_t)(QL_PF_TILES * MR) * ldw;
    const int64_t pf_lines = ((int64_t)MR * (int64_t)ldw + 63) / 64, pf_step = (pf_lines + nb - 1) / nb;
    for (int64_t b = 0; b < nb; b++) {
        if (MR > 1)
            for (int64_t l = b * pf_step; l < (b + 1) * pf_step && l < pf_lines; l++) __builtin_prefetch(pf + l * 64, 0, 3);
        __m256i u[QL_MR], sg[QL_MR];
        float d[QL_MR], m[QL_MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            u[r] = QL(decode)(T, w + r * ldw + b * wb, tbl, &d[r], &m[r]);
            if (QL_SIGNTRICK(T)) {
                sg[r] = u[r];
                u[r] = _mm256_sign_epi8(u[r], u[r]);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const struct block_q8_0 * ab = (const struct block_q8_0 *)(a + j * lda) + b;
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const float da = _cvtsh_ss(ab->d);
            /* -o * sum(a) per lane: the start of every row's integer sum */
            __m256i base = _mm256_setzero_si256();
            if (QL_OFF(T)) base = _mm256_sub_epi32(base, QL(dot_us)(_mm256_set1_epi8((char)QL_OFF(T)), av));
            __m256 asum = _mm256_setzero_ps();
            if (QL_MIN(T)) asum = _mm256_cvtepi32_ps(QL(dot_us)(_mm256_set1_epi8(1), av));
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++) {
                const __m256i s = QL_SIGNTRICK(T) ? _mm256_sign_epi8(av, sg[r]) : av;
                const __m256i isum = QL(dot_us_acc)(base, u[r], s);
                acc[j][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d[r] * da), acc[j][r]);
                if (QL_MIN(T)) acc[j][r] = _mm256_fmadd_ps(asum, _mm256_set1_ps(m[r] * da), acc[j][r]);
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            const float v = QL(hsum)(acc[j][r]);
            memcpy(c + j * ldc + (size_t)r * 4, &v, 4);
        }
    }
}

/* The MR rows at w against nr (1..QL_NR) columns. */
QL_AI void QL(cols)(const enum ql_type T, const int MR, int64_t nb, const uint8_t * w, size_t ldw, const uint8_t * a,
                    size_t lda, int nr, uint8_t * c, size_t ldc) {
    switch (nr) {
    case 1: QL(tile)(T, MR, 1, nb, w, ldw, a, lda, c, ldc); return;
    case 2: QL(tile)(T, MR, 2, nb, w, ldw, a, lda, c, ldc); return;
    case 3: QL(tile)(T, MR, 3, nb, w, ldw, a, lda, c, ldc); return;
    default: QL(tile)(T, MR, 4, nb, w, ldw, a, lda, c, ldc); return;
    }
}

/* The lcpu_qdot_fn of weight type T: whole tiles of QL_TILE_MR(T) rows, then the row tail one by one. */
QL_AI void QL(qdot)(const enum ql_type T, int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a,
                    size_t lda, int nr, uint8_t * c, size_t ldc) {
    const int64_t nb = k / 32;
    for (int j0 = 0; j0 < nr; j0 += QL_NR) {
        const int n = nr - j0 < QL_NR ? nr - j0 : QL_NR;
        int r = 0;
        for (; r + QL_TILE_MR(T) <= mr; r += QL_TILE_MR(T)) QL(cols)(T, QL_TILE_MR(T), nb, w + r * ldw, ldw, a + j0 * lda, lda, n, c + j0 * ldc + r * 4, ldc);
        for (; r < mr; r++) QL(cols)(T, 1, nb, w + r * ldw, ldw, a + j0 * lda, lda, n, c + j0 * ldc + r * 4, ldc);
    }
}

#define QL_DEFINE_QUANTIZE(name) \
    TARGET void name(const float * x, void * y, int64_t k) { QL(quantize_q8_0)(x, y, k); }

#define QL_DEFINE(T, name)                                                                                          \
    TARGET void name(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, uint8_t * c, \
                     size_t ldc) {                                                                                   \
        QL(qdot)(T, k, w, ldw, mr, a, lda, nr, c, ldc);                                                             \
    }
