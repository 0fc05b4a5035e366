/* qgemm-legacy-tmpl.h -- the integer GEMM of the 32-element weight types (many columns): a panel
 * packer that decodes 8 weight rows into row-interleaved bytes, and an 8-row x QG_NR-column
 * micro-kernel against columns in the cpu_q8_0x layout (vec.h). Included after qdot-legacy-tmpl.h
 * (whose decode, dot_us and quantizer it uses) by qdot-legacy-avx2.c and qdot-legacy-avx512.c.
 *
 * Panel of 8 rows, per block of 32 elements (CPU_QGEMM_BLOCK bytes): d[8] and m[8] (F32: each
 * row's scale and minimum, zeros for rows past the matrix), then 8 vectors of 32 bytes, vector t
 * holding elements 4t .. 4t+3 of rows 0..7 (row r in bytes 4r .. 4r+3) as decode's unsigned
 * operand. One vpdpbusd of vector t with the column's four bytes 4t .. 4t+3 broadcast adds four
 * products to each row's lane, so a block takes 8 byte products per column for all 8 rows, and the
 * 8 lanes of the sum are the 8 rows' results: no horizontal sums. The offset o of the unsigned
 * operand comes off as o * s (the column block's code sum, stored with the column); the minimum
 * of Q5_1 enters as m times the column's F16-rounded scaled sum, as the field's Q8_1 columns
 * carry it. Sign-trick types (AVX2 Q8_0 / IQ4_NL) keep signed codes
 * in the panel; the kernel takes |w| and moves w's sign onto the column bytes.
 * Each result is summed block by block in block order (the integer sum of a block is exact), so
 * it depends on k alone, not on the tile or the thread count. */

#define QG_NR_MAX 8

/* The 8x8 transpose of 32-bit words: out[t] word r = in[r] word t. */
QL_AI void QL(transpose8)(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0..3 (h = 0) and 4..7 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* Packs n_rows (1..8) rows of 'k' elements (row r at w + r*ldw) into one 8-row panel. */
QL_AI void QL(qpack)(const enum ql_type T, const uint8_t * w, size_t ldw, int n_rows, int64_t k, uint8_t * panel) {
    const size_t wb = QL_BLOCK(T);
    const __m256i tbl = T == QL_IQ4_NL ? QL(iq4nl_table)() : _mm256_setzero_si256();
    for (int64_t b = 0; b < k / 32; b++, panel += CPU_QGEMM_BLOCK) {
        __m256i v[8];
        float d[8] = {0}, m[8] = {0};
        for (int r = 0; r < 8; r++)
            v[r] = r < n_rows ? QL(decode)(T, w + r * ldw + b * wb, tbl, &d[r], &m[r]) : _mm256_setzero_si256();
        if (!QL_MIN(T))
            for (int r = 0; r < 8; r++) m[r] = 0.0f;
        QL(transpose8)(v);
        memcpy(panel, d, 32);
        memcpy(panel + 32, m, 32);
        for (int t = 0; t < 8; t++) _mm256_storeu_si256((__m256i *)(panel + 64 + 32 * t), v[t]);
    }
}

/* The 8-row panel against NR columns over nb blocks; rows 0 .. mr-1 stored. */
QL_AI void QL(qgemm_tile)(const enum ql_type T, const int NR, int64_t nb, const uint8_t * panel, const uint8_t * a, size_t lda,
                          uint8_t * c, size_t ldc, int mr) {
    __m256 acc[QG_NR_MAX];
#pragma GCC unroll 8
    for (int j = 0; j < NR; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, panel += CPU_QGEMM_BLOCK) {
        const __m256 dw = _mm256_loadu_ps((const float *)panel);
        const __m256 mw = QL_MIN(T) ? _mm256_loadu_ps((const float *)(panel + 32)) : _mm256_setzero_ps();
        const struct cpu_q8_0x * ab[QG_NR_MAX];
        __m256i isum[QG_NR_MAX];
#pragma GCC unroll 8
        for (int j = 0; j < NR; j++) {
            ab[j] = (const struct cpu_q8_0x *)(a + j * lda) + b;
            isum[j] = QL_OFF(T) ? _mm256_set1_epi32(-QL_OFF(T) * ab[j]->s) : _mm256_setzero_si256();
        }
        /* t outside, columns inside: NR independent sums in flight, not one chain per column */
#pragma GCC unroll 8
        for (int t = 0; t < 8; t += 2) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(panel + 64 + 32 * t));
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(panel + 96 + 32 * t));
            const __m256i u0 = QL_SIGNTRICK(T) ? _mm256_sign_epi8(w0, w0) : w0;
            const __m256i u1 = QL_SIGNTRICK(T) ? _mm256_sign_epi8(w1, w1) : w1;
#pragma GCC unroll 8
            for (int j = 0; j < NR; j++) {
                int32_t q0, q1;
                memcpy(&q0, ab[j]->qs + 4 * t, 4);
                memcpy(&q1, ab[j]->qs + 4 * t + 4, 4);
                __m256i s0 = _mm256_set1_epi32(q0), s1 = _mm256_set1_epi32(q1);
#if QL_VNNI
                isum[j] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(isum[j], u0, s0), u1, s1);
#else
                if (QL_SIGNTRICK(T)) { /* |w| * a: pairs of up to 128 * 127 fill int16, widen each product */
                    s0 = _mm256_sign_epi8(s0, w0);
                    s1 = _mm256_sign_epi8(s1, w1);
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_set1_epi16(1)));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_set1_epi16(1)));
                } else { /* codes <= 31: two pair sums (<= 2 * 31 * 127 * 2) still fit int16 */
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
                }
#endif
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < NR; j++) {
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(ab[j]->d)), acc[j]);
            if (QL_MIN(T)) acc[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ab[j]->ds), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NR; j++) {
        if (mr == 8) {
            _mm256_storeu_ps((float *)(c + j * ldc), acc[j]);
        } else {
            float v[8];
            _mm256_storeu_ps(v, acc[j]);
            memcpy(c + j * ldc, v, (size_t)mr * 4);
        }
    }
}

/* lcpu_qgemm_fn of type T: nr (1..QG_NR) columns. */
QL_AI void QL(qgemm)(const enum ql_type T, int64_t k, const void * panel, const uint8_t * a, size_t lda, int nr, uint8_t * c,
                     size_t ldc, int mr) {
    const int64_t nb = k / 32;
    switch (nr) {
    case QG_NR: QL(qgemm_tile)(T, QG_NR, nb, panel, a, lda, c, ldc, mr); return;
    case 1: QL(qgemm_tile)(T, 1, nb, panel, a, lda, c, ldc, mr); return;
    case 2: QL(qgemm_tile)(T, 2, nb, panel, a, lda, c, ldc, mr); return;
    case 3: QL(qgemm_tile)(T, 3, nb, panel, a, lda, c, ldc, mr); return;
#if QG_NR > 4
    case 4: QL(qgemm_tile)(T, 4, nb, panel, a, lda, c, ldc, mr); return;
    case 5: QL(qgemm_tile)(T, 5, nb, panel, a, lda, c, ldc, mr); return;
    case 6: QL(qgemm_tile)(T, 6, nb, panel, a, lda, c, ldc, mr); return;
    case 7: QL(qgemm_tile)(T, 7, nb, panel, a, lda, c, ldc, mr); return;
#endif
    }
}

/* F32 -> cpu_q8_0x columns: the same codes and (F16-rounded) scale as quantize_q8_0, with the
 * block's code sum and the field's Q8_1 sum (max|x| / 127 * sum, to F16). */
QL_AI void QL(quantize_q8_0x)(const float * x, void * y, int64_t k) {
    struct cpu_q8_0x * out = y;
    for (int64_t i = 0; i < k / 32; i++) {
        struct block_q8_0 blk;
        QL(quantize_q8_0)(x + 32 * i, &blk, 32);
        out[i].d = _cvtsh_ss(blk.d);
        const __m256i q = _mm256_loadu_si256((const __m256i *)blk.qs);
        const __m256i s8 = QL(dot_us)(_mm256_set1_epi8(1), q);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        out[i].s = _mm_cvtsi128_si32(s4);
        float amax = 0.0f;
        for (int e = 0; e < 32; e++) amax = fabsf(x[32 * i + e]) > amax ? fabsf(x[32 * i + e]) : amax;
        /* a non-finite block (d = NaN) keeps a NaN sum */
        out[i].ds = isnan(out[i].d) ? out[i].d : _cvtsh_ss((uint16_t)_cvtss_sh(amax / 127.0f * (float)out[i].s, 0));
        memcpy(out[i].qs, blk.qs, 32);
    }
}

#define QG_DEFINE_QUANTIZE(name) \
    TARGET void name(const float * x, void * y, int64_t k) { QL(quantize_q8_0x)(x, y, k); }

#define QG_DEFINE(T, pack_name, gemm_name)                                                                         \
    TARGET void pack_name(const uint8_t * w, size_t ldw, int n_rows, int64_t k, void * panel) {                     \
        QL(qpack)(T, w, ldw, n_rows, k, panel);                                                                     \
    }                                                                                                               \
    TARGET void gemm_name(int64_t k, const void * panel, const uint8_t * a, size_t lda, int nr, uint8_t * c, size_t ldc, \
                          int mr) {                                                                                 \
        QL(qgemm)(T, k, panel, a, lda, nr, c, ldc, mr);                                                             \
    }
