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
 * minimum) is computed once per call and column block, shared by every row of the call. Without
 * VNNI, Q8_0 and IQ4_NL codes reach +-127 and vpmaddubsw would saturate on u = code + 128, so those
 * two take the sign trick instead: |w| as the unsigned operand, a carrying w's sign.
 * The one-column kernel (below) sums each group of eight blocks exactly in integers and keeps
 * eight F32 lane sums per row, one group at a time in group order, reduced in one fixed order at
 * the end, so a result depends on k alone (not on the rows per call or the thread count). */

#define QL_AI static inline __attribute__((always_inline)) TARGET

enum ql_type { QL_Q8_0, QL_Q4_0, QL_Q5_0, QL_Q5_1, QL_IQ4_NL };


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

/* 0x10 in byte j where bit j of h is set, else 0. */
QL_AI __m256i QL(fifth_bits32)(uint32_t h) {
    /* byte j takes h's byte j / 8, then tests its bit j % 8 */
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int32_t)h), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
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
    case QL_Q5_0:
    case QL_Q5_1: {
        uint32_t qh;
        memcpy(&qh, blk + (T == QL_Q5_0 ? 2 : 4), 4);
        return _mm256_or_si256(QL(nibbles)(blk + (T == QL_Q5_0 ? 6 : 8)), QL(fifth_bits32)(qh));
    }
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
 * q may differ by one step); a block holding a NaN or an infinity gets d = NaN, q = 0. */
QL_AI void QL(quantize_q8_0)(const float * x, void * y, int64_t k) {
    struct block_q8_0 * out = y;
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    for (int64_t i = 0; i < k / 32; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (int q = 0; q < 4; q++) {
            v[q] = _mm256_loadu_ps(x + 8 * q);
            const __m256 a = _mm256_andnot_ps(sign, v[q]);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* |x| > FLT_MAX or NaN */
            mx = _mm256_max_ps(mx, a);
        }
        if (_mm256_movemask_ps(bad)) { /* a NaN or an infinity: d = NaN, codes 0 (vec.h) */
            out[i].d = (uint16_t)_cvtss_sh(NAN, 0);
            memset(out[i].qs, 0, sizeof out[i].qs);
            continue;
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

/* ---- the one-column kernel, eight blocks at a time
 * Per group of eight blocks, each pair of blocks (2q, 2q+1) is decoded into two vectors in the
 * pair layout: 'lo' holds elements 0..15 of block 2q then elements 0..15 of block 2q+1, 'hi'
 * elements 16..31 of both. The column's bytes are rearranged the same way once per call (struct
 * ql_group), so one chained byte product per pair leaves block 2q's partial sums in the low
 * 128-bit half and block 2q+1's in the high half, and three horizontal adds fold the four pairs
 * into one vector whose lanes are the eight blocks' exact integer sums (lanes in block order
 * 0 2 4 6 1 3 5 7). The scales are then applied eight blocks at a time: one conversion and one
 * multiply-add per group instead of one per block. Blocks past k (a last group of fewer than
 * eight) are zeros on both sides, so they add nothing. */

#define QL_GROUP 8      /* blocks per group */
#define QL_CHUNK 32     /* groups of the column prepared at a time (k <= 8192 in one pass) */
#define QL_ROWS 8       /* rows whose sums are kept while a long column is prepared chunk by chunk */

/* One group of the column, prepared for every row of the call. */
struct ql_group {
    __m256i a[QL_GROUP];  /* pairs q = 0..3: a[2q] = the 'lo' bytes, a[2q + 1] the 'hi' bytes */
    __m256i off;          /* o * the code sums of the eight blocks, in the lane order above */
    __m256 da;            /* the column blocks' scales, same lanes */
    __m256 asum;          /* the code sums as F32 (Q5_1's minimum) */
};

/* The nibbles of two 16-byte code arrays in the pair layout. */
QL_AI void QL(nibbles_pair)(const uint8_t * q0, const uint8_t * q1, __m256i * lo, __m256i * hi) {
    const __m256i x = _mm256_loadu2_m128i((const __m128i *)q1, (const __m128i *)q0), m = _mm256_set1_epi8(0x0f);
    *lo = _mm256_and_si256(x, m);
    *hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
}

/* Decodes blocks b0 and b1 (the unsigned operand, as decode) into the pair layout. */
QL_AI void QL(decode_pair)(const enum ql_type T, const uint8_t * b0, const uint8_t * b1, __m256i tbl, __m256i * lo, __m256i * hi) {
    switch (T) {
    case QL_Q8_0: {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(b0 + 2)), x1 = _mm256_loadu_si256((const __m256i *)(b1 + 2));
        *lo = _mm256_permute2x128_si256(x0, x1, 0x20);
        *hi = _mm256_permute2x128_si256(x0, x1, 0x31);
        if (QL_VNNI) {
            *lo = _mm256_xor_si256(*lo, _mm256_set1_epi8((char)0x80));
            *hi = _mm256_xor_si256(*hi, _mm256_set1_epi8((char)0x80));
        }
        return;
    }
    case QL_Q4_0: QL(nibbles_pair)(b0 + 2, b1 + 2, lo, hi); return;
    case QL_Q5_0:
    case QL_Q5_1: {
        const size_t qh = T == QL_Q5_0 ? 2 : 4;
        QL(nibbles_pair)(b0 + qh + 4, b1 + qh + 4, lo, hi);
        uint32_t h0, h1;
        memcpy(&h0, b0 + qh, 4);
        memcpy(&h1, b1 + qh, 4);
        *lo = _mm256_or_si256(*lo, QL(fifth_bits32)((h0 & 0xffffu) | h1 << 16));
        *hi = _mm256_or_si256(*hi, QL(fifth_bits32)(h0 >> 16 | (h1 & 0xffff0000u)));
        return;
    }
    case QL_IQ4_NL:
        QL(nibbles_pair)(b0 + 2, b1 + 2, lo, hi);
        *lo = _mm256_shuffle_epi8(tbl, *lo);
        *hi = _mm256_shuffle_epi8(tbl, *hi);
        return;
    }
}

/* sum(lo * alo) + sum(hi * ahi) per group of four bytes (unsigned x signed; the unsigned bytes at
 * most 31 without VNNI, so that the 16-bit pair sums of both cannot overflow). */
QL_AI __m256i QL(dot_pair_us)(__m256i lo, __m256i hi, __m256i alo, __m256i ahi) {
#if QL_VNNI
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, alo), hi, ahi);
#else
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi)), _mm256_set1_epi16(1));
#endif
}

/* One pair's products with the column: the sign-trick types move the weight's sign onto the column. */
QL_AI __m256i QL(dot_pair)(const enum ql_type T, __m256i lo, __m256i hi, __m256i alo, __m256i ahi) {
    if (!QL_SIGNTRICK(T)) return QL(dot_pair_us)(lo, hi, alo, ahi);
    return _mm256_add_epi32(QL(dot_us)(_mm256_sign_epi8(lo, lo), _mm256_sign_epi8(alo, lo)),
                            QL(dot_us)(_mm256_sign_epi8(hi, hi), _mm256_sign_epi8(ahi, hi)));
}

/* Four pairs' partial sums -> the eight block sums, lanes 0 2 4 6 1 3 5 7. */
QL_AI __m256i QL(fold)(const __m256i p[4]) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
}

/* The eight F16 values at p + i * stride (i = 0..7) as F32, lanes in the fold's order; those of
 * i >= n are 0. */
QL_AI __m256 QL(scales8)(const uint8_t * p, size_t stride, int n) {
    uint64_t h[8];
    for (int i = 0; i < 8; i++) {
        uint16_t v = 0;
        if (i < n) memcpy(&v, p + (size_t)i * stride, 2);
        h[i] = v;
        /* keeps the assembly in general registers (idle here) instead of vector shuffles */
        __asm__("" : "+r"(h[i]));
    }
    const uint64_t even = h[0] | h[2] << 16 | h[4] << 32 | h[6] << 48, odd = h[1] | h[3] << 16 | h[5] << 32 | h[7] << 48;
    return _mm256_cvtph_ps(_mm_set_epi64x((int64_t)odd, (int64_t)even));
}

/* Prepares groups [g0, g1) of the column at 'a' (nb Q8_0 blocks) into 'gr'. */
QL_AI void QL(prepare)(const enum ql_type T, const uint8_t * a, int64_t nb, int64_t g0, int64_t g1, struct ql_group * gr) {
    const size_t ab = sizeof(struct block_q8_0);
    for (int64_t g = g0; g < g1; g++, gr++) {
        struct block_q8_0 pad[QL_GROUP];
        const uint8_t * src = a + (size_t)g * QL_GROUP * ab;
        if ((g + 1) * QL_GROUP > nb) { /* the last, short group: zero blocks after the column's end */
            memset(pad, 0, sizeof pad);
            memcpy(pad, src, (size_t)(nb - g * QL_GROUP) * ab);
            src = (const uint8_t *)pad;
        }
        __m256i off[4], sum[4];
        for (int q = 0; q < 4; q++) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(src + (2 * q) * ab + 2));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(src + (2 * q + 1) * ab + 2));
            gr->a[2 * q] = _mm256_permute2x128_si256(x0, x1, 0x20);
            gr->a[2 * q + 1] = _mm256_permute2x128_si256(x0, x1, 0x31);
            if (QL_OFF(T)) {
                const __m256i o = _mm256_set1_epi8((char)QL_OFF(T));
                off[q] = QL(dot_pair_us)(o, o, gr->a[2 * q], gr->a[2 * q + 1]);
            }
            if (QL_MIN(T)) {
                const __m256i one = _mm256_set1_epi8(1);
                sum[q] = QL(dot_pair_us)(one, one, gr->a[2 * q], gr->a[2 * q + 1]);
            }
        }
        gr->off = QL_OFF(T) ? QL(fold)(off) : _mm256_setzero_si256();
        gr->asum = QL_MIN(T) ? _mm256_cvtepi32_ps(QL(fold)(sum)) : _mm256_setzero_ps();
        gr->da = QL(scales8)(src, ab, QL_GROUP);
    }
}

/* Adds one group of weight blocks, the first n (1..8) at src (block i at src + i * wb), to 'acc'.
 * Pairs past n are skipped, and the second block of a last pair of one reads that block again:
 * its column block is zeros, so its products are 0, and its scale is taken as 0 (a scale read
 * there need not be finite). */
QL_AI __m256 QL(group)(const enum ql_type T, const uint8_t * src, int n, const struct ql_group * gr, __m256i tbl, __m256 acc) {
    const size_t wb = QL_BLOCK(T);
    const uint8_t * blk[QL_GROUP];
    for (int i = 0; i < QL_GROUP; i++) blk[i] = src + (size_t)(i < n ? i : n - 1) * wb;
    __m256i p[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        if (2 * q >= n) { /* no block of this pair */
            p[q] = _mm256_setzero_si256();
            continue;
        }
        __m256i lo, hi;
        QL(decode_pair)(T, blk[2 * q], blk[2 * q + 1], tbl, &lo, &hi);
        p[q] = QL(dot_pair)(T, lo, hi, gr->a[2 * q], gr->a[2 * q + 1]);
    }
    __m256i isum = QL(fold)(p);
    if (QL_OFF(T)) isum = _mm256_sub_epi32(isum, gr->off);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(QL(scales8)(src, wb, n), gr->da), acc);
    if (QL_MIN(T)) acc = _mm256_fmadd_ps(gr->asum, _mm256_mul_ps(QL(scales8)(src + 2, wb, n), gr->da), acc);
    return acc;
}

/* Adds groups [g0, g1) of one weight row (nb blocks at w) against the prepared column to 'acc'. */
QL_AI __m256 QL(row_groups)(const enum ql_type T, const uint8_t * w, int64_t nb, int64_t g0, int64_t g1,
                            const struct ql_group * gr, __m256 acc) {
    const size_t wb = QL_BLOCK(T);
    const __m256i tbl = T == QL_IQ4_NL ? QL(iq4nl_table)() : _mm256_setzero_si256();
    const int64_t full = nb / QL_GROUP < g1 ? nb / QL_GROUP : g1;
    int64_t g = g0;
    for (; g < full; g++, gr++) acc = QL(group)(T, w + (size_t)g * QL_GROUP * wb, QL_GROUP, gr, tbl, acc);
    if (g < g1) acc = QL(group)(T, w + (size_t)g * QL_GROUP * wb, (int)(nb - g * QL_GROUP), gr, tbl, acc); /* the short last group */
    return acc;
}

/* The lcpu_qdot_fn of weight type T: per column, the column is prepared (a chunk of groups at a
 * time when it is longer than QL_CHUNK groups, for QL_ROWS rows at a time) and every row is swept
 * against it. */
QL_AI void QL(qdot)(const enum ql_type T, int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a,
                    size_t lda, int nr, uint8_t * c, size_t ldc) {
    const int64_t nb = k / 32, ng = (nb + QL_GROUP - 1) / QL_GROUP;
    struct ql_group gr[QL_CHUNK];
    for (int j = 0; j < nr; j++) {
        const uint8_t * col = a + (size_t)j * lda;
        if (ng <= QL_CHUNK) { /* the whole column at once: one row at a time, its sum in registers */
            QL(prepare)(T, col, nb, 0, ng, gr);
            for (int r = 0; r < mr; r++) {
                const float v = QL(hsum)(QL(row_groups)(T, w + (size_t)r * ldw, nb, 0, ng, gr, _mm256_setzero_ps()));
                memcpy(c + (size_t)j * ldc + (size_t)r * 4, &v, 4);
            }
            continue;
        }
        for (int r0 = 0; r0 < mr; r0 += QL_ROWS) {
            const int rows = mr - r0 < QL_ROWS ? mr - r0 : QL_ROWS;
            __m256 acc[QL_ROWS];
            for (int r = 0; r < rows; r++) acc[r] = _mm256_setzero_ps();
            for (int64_t g0 = 0; g0 < ng; g0 += QL_CHUNK) {
                const int64_t g1 = ng - g0 < QL_CHUNK ? ng : g0 + QL_CHUNK;
                QL(prepare)(T, col, nb, g0, g1, gr);
                for (int r = 0; r < rows; r++) acc[r] = QL(row_groups)(T, w + (size_t)(r0 + r) * ldw, nb, g0, g1, gr, acc[r]);
            }
            for (int r = 0; r < rows; r++) {
                const float v = QL(hsum)(acc[r]);
                memcpy(c + (size_t)j * ldc + (size_t)(r0 + r) * 4, &v, 4);
            }
        }
    }
}

#define QL_DEFINE_QUANTIZE(name) \
    TARGET void name(const float * x, void * y, int64_t k) { QL(quantize_q8_0)(x, y, k); }

#define QL_DEFINE(T, name)                                                                                          \
    TARGET void name(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, uint8_t * c, \
                     size_t ldc) {                                                                                   \
        QL(qdot)(T, k, w, ldw, mr, a, lda, nr, c, ldc);                                                             \
    }
