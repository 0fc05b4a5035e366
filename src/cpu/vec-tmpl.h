/* vec-tmpl.h -- SIMD kernels written once over a small vector vocabulary; included by
 * vec-avx2.c and vec-avx512.c, which define before including it:
 *   TMPL(name)      the instantiation's name for 'name' (e.g. name##_avx512)
 *   TARGET          the function target attribute of the instruction set
 *   VF, VLEN        the float vector type and its lane count
 *   VF_ZERO() VF_LOADU(p) VF_STOREU(p, v) VF_SET1(x) VF_FMA(a, b, c) (= a*b + c) VF_ADD(a, b)
 *   VF_REDUCE(v)    sum of the lanes (a fixed order)
 *   VF_LOAD_F16(p) VF_STORE_F16(p, v) VF_LOAD_BF16(p) VF_STORE_BF16(p, v)  VLEN halves <-> VF
 *   VF_MUL VF_SUB VF_DIV VF_MAX(a, b) VF_MIN(a, b)  (MAX/MIN return b when either is NaN)
 *   VF_ROUND(v)     to the nearest integer;  VF_SCALE2(v, n)  v * 2^n for integral n in [-150, 128]
 *   VF_ZERO_LT(y, x, c)  y with lanes where x < c set to 0
 *   VF_TRANSPOSE(t)  transposes VLEN vectors t[0..VLEN-1] in place (t[j] becomes column j)
 *   GEMM_MRV, GEMM_NR   the GEMM micro-tile: GEMM_MRV vectors of weight rows x GEMM_NR columns
 *   DOT_MR, DOT_NR      the largest dot-product tile (rows x columns)
 * Kernels follow the contracts in vec.h. Every loop over a tile dimension has a bound that is a
 * compile-time constant after inlining, so the accumulators live in registers. */

#define GEMM_MR (GEMM_MRV * VLEN)
#define ALWAYS_INLINE static inline __attribute__((always_inline)) TARGET

/* ---------------------------------------------------------------- conversions */

/* The last n < VLEN halves of a row through one vector conversion of a zero-padded copy (exact, as
 * the element-wise conversion is; short rows -- 8-element heads -- would otherwise convert one by one). */
ALWAYS_INLINE void TMPL(halves_tail)(const bool bf16, const uint16_t * x, float * y, int64_t n) {
    uint16_t t[VLEN] = {0};
    float o[VLEN];
    memcpy(t, x, (size_t)n * sizeof *t);
    VF_STOREU(o, bf16 ? VF_LOAD_BF16(t) : VF_LOAD_F16(t));
    memcpy(y, o, (size_t)n * sizeof *o);
}

TARGET static void TMPL(f16_to_f32)(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + VLEN <= n; i += VLEN) VF_STOREU(y + i, VF_LOAD_F16(x + i));
    if (i < n) TMPL(halves_tail)(false, x + i, y + i, n - i);
}

TARGET static void TMPL(f32_to_f16)(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + VLEN <= n; i += VLEN) VF_STORE_F16(y + i, VF_LOADU(x + i));
    for (; i < n; i++) y[i] = loom_fp32_to_fp16(x[i]);
}

TARGET static void TMPL(bf16_to_f32)(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + VLEN <= n; i += VLEN) VF_STOREU(y + i, VF_LOAD_BF16(x + i));
    if (i < n) TMPL(halves_tail)(true, x + i, y + i, n - i);
}

TARGET static void TMPL(f32_to_bf16)(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + VLEN <= n; i += VLEN) VF_STORE_BF16(y + i, VF_LOADU(x + i));
    for (; i < n; i++) y[i] = loom_fp32_to_bf16(x[i]);
}

/* ---------------------------------------------------------------- exp and friends */

/* exp(x), about 1 ulp: n = round(x / ln2), r = x - n ln2 (in two parts), a degree-7 polynomial for
 * exp(r) on [-ln2/2, ln2/2] (Cephes expf coefficients), scaled by 2^n. Underflow gives 0,
 * overflow inf, NaN stays NaN. */
ALWAYS_INLINE VF TMPL(vexp)(VF x) {
    x = VF_MIN(VF_SET1(88.8f), VF_MAX(VF_SET1(-104.0f), x));
    const VF n = VF_ROUND(VF_MUL(x, VF_SET1(1.44269504088896341f)));
    VF r = VF_FMA(n, VF_SET1(-0.693359375f), x);
    r = VF_FMA(n, VF_SET1(2.12194440e-4f), r);
    VF p = VF_SET1(1.9875691500e-4f);
    p = VF_FMA(p, r, VF_SET1(1.3981999507e-3f));
    p = VF_FMA(p, r, VF_SET1(8.3334519073e-3f));
    p = VF_FMA(p, r, VF_SET1(4.1665795894e-2f));
    p = VF_FMA(p, r, VF_SET1(1.6666665459e-1f));
    p = VF_FMA(p, r, VF_SET1(5.0000001201e-1f));
    p = VF_FMA(p, VF_MUL(r, r), VF_ADD(r, VF_SET1(1.0f)));
    return VF_ZERO_LT(VF_SCALE2(p, n), x, -103.9f);
}

TARGET static void TMPL(silu)(const float * x, float * y, int64_t n) {
    int64_t i = 0;
    const VF one = VF_SET1(1.0f);
    for (; i + VLEN <= n; i += VLEN) {
        const VF v = VF_LOADU(x + i);
        VF_STOREU(y + i, VF_DIV(v, VF_ADD(one, TMPL(vexp)(VF_SUB(VF_ZERO(), v)))));
    }
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

TARGET static void TMPL(gelu)(const float * x, float * y, int64_t n) {
    const float c = -2.0f * 0.7978845608028654f;
    int64_t i = 0;
    const VF one = VF_SET1(1.0f);
    for (; i + VLEN <= n; i += VLEN) {
        const VF v = VF_LOADU(x + i);
        const VF u = VF_MUL(VF_SET1(c), VF_FMA(VF_MUL(VF_SET1(0.044715f), v), VF_MUL(v, v), v));
        VF_STOREU(y + i, VF_DIV(v, VF_ADD(one, TMPL(vexp)(u))));
    }
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(c * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

TARGET static double TMPL(exp_sum)(float * x, int64_t n, float max) {
    VF acc = VF_ZERO();
    const VF m = VF_SET1(max);
    int64_t i = 0;
    for (; i + VLEN <= n; i += VLEN) {
        const VF e = TMPL(vexp)(VF_SUB(VF_LOADU(x + i), m));
        VF_STOREU(x + i, e);
        acc = VF_ADD(acc, e);
    }
    double s = VF_REDUCE(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        s += x[i];
    }
    return s;
}

/* ---------------------------------------------------------------- dot products (few columns) */

ALWAYS_INLINE VF TMPL(wload)(const enum cpu_wtype wt, const uint8_t * row, int64_t k) {
    switch (wt) {
    case CPU_W_F16: return VF_LOAD_F16((const uint16_t *)row + k);
    case CPU_W_BF16: return VF_LOAD_BF16((const uint16_t *)row + k);
    default: return VF_LOADU((const float *)row + k);
    }
}

ALWAYS_INLINE float TMPL(wscalar)(const enum cpu_wtype wt, const uint8_t * row, int64_t k) {
    uint16_t h;
    float f;
    switch (wt) {
    case CPU_W_F16: memcpy(&h, row + 2 * k, 2); return loom_fp16_to_fp32(h);
    case CPU_W_BF16: memcpy(&h, row + 2 * k, 2); return loom_bf16_to_fp32(h);
    default: memcpy(&f, row + 4 * k, 4); return f;
    }
}

/* One accumulator per (row, column): lanes summed in k order, then reduced, then the tail. */
ALWAYS_INLINE void TMPL(dot_tile)(const enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, const int mr,
                                  const uint8_t * b, size_t ldb, const int nr, uint8_t * c, size_t ldc) {
    VF acc[DOT_MR][DOT_NR];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int j = 0; j < nr; j++) acc[r][j] = VF_ZERO();
    int64_t i = 0;
    const size_t wsize = wt == CPU_W_F32 ? 4 : 2;
    for (; i + VLEN <= k; i += VLEN) {
        VF bv[DOT_NR];
#pragma GCC unroll 8
        for (int j = 0; j < nr; j++) bv[j] = VF_LOADU((const float *)(b + j * ldb) + i);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            /* the same place two blocks of rows ahead: short rows give the hardware prefetcher little run-up,
             * so each stream is fetched ahead of its pass (a hint: never faults). Into L2 (prefetcht1), not L1:
             * weights fetched into L1 evict the columns every row of the tile reads again (110m F16, 4
             * columns, one thread: 12-13 ms a step against 22-24; bench/serve-np-notes.md) */
            __builtin_prefetch(w + (r + 2 * mr) * ldw + (size_t)i * wsize, 0, 2);
            const VF a = TMPL(wload)(wt, w + r * ldw, i);
#pragma GCC unroll 8
            for (int j = 0; j < nr; j++) acc[r][j] = VF_FMA(a, bv[j], acc[r][j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) {
        const float * bj = (const float *)(b + j * ldb);
        float * cj = (float *)(c + j * ldc);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            float s = VF_REDUCE(acc[r][j]);
            for (int64_t t = i; t < k; t++) s += TMPL(wscalar)(wt, w + r * ldw, t) * bj[t];
            cj[r] = s;
        }
    }
}

#define DOT_CASE(MR_, NR_) \
    case (MR_) * 16 + (NR_): TMPL(dot_tile)(wt, k, w, ldw, MR_, b, ldb, NR_, c, ldc); return;

/* One column (token generation): rows one after another, each summed with four accumulators over
 * k, so that the weights are read as one sequential stream -- what the hardware prefetchers follow
 * best -- instead of several short interleaved ones. */
ALWAYS_INLINE void TMPL(dot_rows_1)(const enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, int mr,
                                    const float * b, float * c) {
    for (int r = 0; r < mr; r++) {
        const uint8_t * row = w + r * ldw;
        VF a0 = VF_ZERO(), a1 = VF_ZERO(), a2 = VF_ZERO(), a3 = VF_ZERO();
        int64_t i = 0;
        for (; i + 4 * VLEN <= k; i += 4 * VLEN) {
            a0 = VF_FMA(TMPL(wload)(wt, row, i), VF_LOADU(b + i), a0);
            a1 = VF_FMA(TMPL(wload)(wt, row, i + VLEN), VF_LOADU(b + i + VLEN), a1);
            a2 = VF_FMA(TMPL(wload)(wt, row, i + 2 * VLEN), VF_LOADU(b + i + 2 * VLEN), a2);
            a3 = VF_FMA(TMPL(wload)(wt, row, i + 3 * VLEN), VF_LOADU(b + i + 3 * VLEN), a3);
        }
        for (; i + VLEN <= k; i += VLEN) a0 = VF_FMA(TMPL(wload)(wt, row, i), VF_LOADU(b + i), a0);
        float s = VF_REDUCE(VF_ADD(VF_ADD(a0, a1), VF_ADD(a2, a3)));
        for (; i < k; i++) s += TMPL(wscalar)(wt, row, i) * b[i];
        c[r] = s;
    }
}

ALWAYS_INLINE void TMPL(dot_any)(const enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, int mr,
                                 const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc) {
    if (nr == 1) {
        TMPL(dot_rows_1)(wt, k, w, ldw, mr, (const float *)b, (float *)c);
        return;
    }
    switch (mr * 16 + nr) {
        DOT_CASE(1, 1) DOT_CASE(2, 1) DOT_CASE(3, 1) DOT_CASE(4, 1)
        DOT_CASE(1, 2) DOT_CASE(2, 2) DOT_CASE(3, 2) DOT_CASE(4, 2)
#if DOT_NR >= 4
        DOT_CASE(1, 3) DOT_CASE(2, 3) DOT_CASE(3, 3) DOT_CASE(4, 3)
        DOT_CASE(1, 4) DOT_CASE(2, 4) DOT_CASE(3, 4) DOT_CASE(4, 4)
#endif
    default: LOOM_ABORT("dot tile %dx%d", mr, nr);
    }
}
#undef DOT_CASE

TARGET static void TMPL(dot_f32)(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr,
                                 uint8_t * c, size_t ldc) {
    TMPL(dot_any)(CPU_W_F32, k, w, ldw, mr, b, ldb, nr, c, ldc);
}
TARGET static void TMPL(dot_f16)(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr,
                                 uint8_t * c, size_t ldc) {
    TMPL(dot_any)(CPU_W_F16, k, w, ldw, mr, b, ldb, nr, c, ldc);
}
TARGET static void TMPL(dot_bf16)(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr,
                                  uint8_t * c, size_t ldc) {
    TMPL(dot_any)(CPU_W_BF16, k, w, ldw, mr, b, ldb, nr, c, ldc);
}

/* cpu_dot_rows_fn: VLEN rows at a time, one accumulator per row (VLEN independent chains), the
 * accumulators transposed so that one vector sum gives the VLEN results; the last n % VLEN rows
 * one by one, each as lane r of such a group would sum it (the same bits whatever 'n'). */
ALWAYS_INLINE void TMPL(dot_rows_impl)(const enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, int n,
                                       const float * b, float * c) {
    int r0 = 0;
    for (; r0 + VLEN <= n; r0 += VLEN) {
        const uint8_t * rows = w + (size_t)r0 * ldw;
        VF t[VLEN];
#pragma GCC unroll 16
        for (int r = 0; r < VLEN; r++) t[r] = VF_ZERO();
        for (int64_t i = 0; i < k; i += VLEN) {
            const VF q = VF_LOADU(b + i);
#pragma GCC unroll 16
            for (int r = 0; r < VLEN; r++) t[r] = VF_FMA(TMPL(wload)(wt, rows + (size_t)r * ldw, i), q, t[r]);
        }
        VF_TRANSPOSE(t);
        VF sum = t[0];
#pragma GCC unroll 16
        for (int j = 1; j < VLEN; j++) sum = VF_ADD(sum, t[j]);
        VF_STOREU(c + r0, sum);
    }
    for (; r0 < n; r0++) {
        const uint8_t * row = w + (size_t)r0 * ldw;
        VF a = VF_ZERO();
        for (int64_t i = 0; i < k; i += VLEN) a = VF_FMA(TMPL(wload)(wt, row, i), VF_LOADU(b + i), a);
        float lane[VLEN];
        VF_STOREU(lane, a);
        float s = lane[0];
        for (int j = 1; j < VLEN; j++) s += lane[j];
        c[r0] = s;
    }
}

TARGET static void TMPL(dot_rows_f32)(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) {
    TMPL(dot_rows_impl)(CPU_W_F32, k, w, ldw, n, b, c);
}
TARGET static void TMPL(dot_rows_f16)(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) {
    TMPL(dot_rows_impl)(CPU_W_F16, k, w, ldw, n, b, c);
}
TARGET static void TMPL(dot_rows_bf16)(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) {
    TMPL(dot_rows_impl)(CPU_W_BF16, k, w, ldw, n, b, c);
}

/* ---------------------------------------------------------------- weighted row sums */

/* y[i] += sum_r a[r] * x_r[i] for i < n: blocks of four vectors of 'y' stay in registers while
 * every row is added, rows in order (the same order in the scalar tail). */
ALWAYS_INLINE void TMPL(mad_impl)(const enum cpu_wtype wt, int64_t n, const uint8_t * x, size_t ldx, int nrows,
                                  const float * a, float * y) {
    int64_t i = 0;
    for (; i + 4 * VLEN <= n; i += 4 * VLEN) {
        VF y0 = VF_LOADU(y + i), y1 = VF_LOADU(y + i + VLEN), y2 = VF_LOADU(y + i + 2 * VLEN), y3 = VF_LOADU(y + i + 3 * VLEN);
        for (int r = 0; r < nrows; r++) {
            const uint8_t * row = x + r * ldx;
            const VF ar = VF_SET1(a[r]);
            y0 = VF_FMA(TMPL(wload)(wt, row, i), ar, y0);
            y1 = VF_FMA(TMPL(wload)(wt, row, i + VLEN), ar, y1);
            y2 = VF_FMA(TMPL(wload)(wt, row, i + 2 * VLEN), ar, y2);
            y3 = VF_FMA(TMPL(wload)(wt, row, i + 3 * VLEN), ar, y3);
        }
        VF_STOREU(y + i, y0);
        VF_STOREU(y + i + VLEN, y1);
        VF_STOREU(y + i + 2 * VLEN, y2);
        VF_STOREU(y + i + 3 * VLEN, y3);
    }
    for (; i + VLEN <= n; i += VLEN) {
        VF y0 = VF_LOADU(y + i);
        for (int r = 0; r < nrows; r++) y0 = VF_FMA(TMPL(wload)(wt, x + r * ldx, i), VF_SET1(a[r]), y0);
        VF_STOREU(y + i, y0);
    }
    for (; i < n; i++) {
        float s = y[i];
        for (int r = 0; r < nrows; r++) s = fmaf(TMPL(wscalar)(wt, x + r * ldx, i), a[r], s);
        y[i] = s;
    }
}

TARGET static void TMPL(mad_f32)(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) {
    TMPL(mad_impl)(CPU_W_F32, n, x, ldx, nrows, a, y);
}
TARGET static void TMPL(mad_f16)(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) {
    TMPL(mad_impl)(CPU_W_F16, n, x, ldx, nrows, a, y);
}
TARGET static void TMPL(mad_bf16)(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) {
    TMPL(mad_impl)(CPU_W_BF16, n, x, ldx, nrows, a, y);
}

/* ---------------------------------------------------------------- GEMM panels */

/* VLEN rows at a time: VLEN x VLEN blocks loaded (converted to F32), transposed in registers. */
ALWAYS_INLINE void TMPL(pack_impl)(const enum cpu_wtype wt, const uint8_t * const * rows, int n_rows, int64_t n,
                                   float * panel, int mr) {
    for (int v = 0; v < mr; v += VLEN) {
        const int here = n_rows - v < 0 ? 0 : n_rows - v < VLEN ? n_rows - v : VLEN;
        int64_t k = 0;
        for (; k + VLEN <= n; k += VLEN) {
            VF t[VLEN];
#pragma GCC unroll 16
            for (int r = 0; r < VLEN; r++) t[r] = r < here ? TMPL(wload)(wt, rows[v + r], k) : VF_ZERO();
            VF_TRANSPOSE(t);
#pragma GCC unroll 16
            for (int c = 0; c < VLEN; c++) VF_STOREU(panel + (k + c) * mr + v, t[c]);
        }
        for (; k < n; k++) {
            for (int r = 0; r < VLEN; r++) panel[k * mr + v + r] = r < here ? TMPL(wscalar)(wt, rows[v + r], k) : 0.0f;
        }
    }
}

TARGET static void TMPL(pack)(const uint8_t * const * rows, int n_rows, enum cpu_wtype wt, int64_t n, void * panel, int mr) {
    switch (wt) {
    case CPU_W_F16: TMPL(pack_impl)(CPU_W_F16, rows, n_rows, n, panel, mr); break;
    case CPU_W_BF16: TMPL(pack_impl)(CPU_W_BF16, rows, n_rows, n, panel, mr); break;
    default: TMPL(pack_impl)(CPU_W_F32, rows, n_rows, n, panel, mr); break;
    }
}

/* ---------------------------------------------------------------- GEMM micro-kernel (many columns) */

/* Outer products: for each k, GEMM_MRV vectors of the packed panel times a broadcast of each
 * column's k-th value; each lane accumulates one result in k order. */
ALWAYS_INLINE void TMPL(gemm_tile)(int64_t kc, const float * ap, const uint8_t * b, size_t ldb, const int nr, uint8_t * c,
                                   size_t ldc, int mr, bool accumulate) {
    VF acc[GEMM_NR][GEMM_MRV];
    const float * bp[GEMM_NR];
#pragma GCC unroll 16
    for (int j = 0; j < nr; j++) {
        bp[j] = (const float *)(b + j * ldb);
#pragma GCC unroll 8
        for (int v = 0; v < GEMM_MRV; v++) acc[j][v] = VF_ZERO();
    }
    for (int64_t k = 0; k < kc; k++) {
        VF a[GEMM_MRV];
#pragma GCC unroll 8
        for (int v = 0; v < GEMM_MRV; v++) a[v] = VF_LOADU(ap + k * GEMM_MR + v * VLEN);
#pragma GCC unroll 16
        for (int j = 0; j < nr; j++) {
            const VF bj = VF_SET1(bp[j][k]);
#pragma GCC unroll 8
            for (int v = 0; v < GEMM_MRV; v++) acc[j][v] = VF_FMA(a[v], bj, acc[j][v]);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nr; j++) {
        float * cj = (float *)(c + j * ldc);
        if (mr == GEMM_MR) {
#pragma GCC unroll 8
            for (int v = 0; v < GEMM_MRV; v++) {
                VF x = acc[j][v];
                if (accumulate) x = VF_ADD(x, VF_LOADU(cj + v * VLEN));
                VF_STOREU(cj + v * VLEN, x);
            }
        } else {
            float tmp[GEMM_MR];
#pragma GCC unroll 8
            for (int v = 0; v < GEMM_MRV; v++) VF_STOREU(tmp + v * VLEN, acc[j][v]);
            for (int r = 0; r < mr; r++) cj[r] = accumulate ? cj[r] + tmp[r] : tmp[r];
        }
    }
}

#define GEMM_CASE(NR_) \
    case NR_: TMPL(gemm_tile)(kc, ap, b, ldb, NR_, c, ldc, mr, accumulate); return;

TARGET static void TMPL(gemm_f32)(int64_t kc, const void * ap_, const uint8_t * b, size_t ldb, int nr, uint8_t * c,
                                  size_t ldc, int mr, bool accumulate) {
    const float * ap = ap_;
    switch (nr) {
        GEMM_CASE(1) GEMM_CASE(2) GEMM_CASE(3) GEMM_CASE(4) GEMM_CASE(5) GEMM_CASE(6)
#if GEMM_NR >= 8
        GEMM_CASE(7) GEMM_CASE(8)
#endif
    default: LOOM_ABORT("gemm tile with %d columns", nr);
    }
}
#undef GEMM_CASE
