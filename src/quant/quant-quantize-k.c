/* quant-quantize-k.c -- F32 -> the K-quants (Q2_K .. Q6_K, Q8_K) and the non-linear IQ4_NL / IQ4_XS.
 *
 * The scale searches are the field's (k-quants, ggml PR 1684 by I. Kawrakow; IQ4_NL PR 5590), run
 * without an importance matrix, as the reference engine's quantizer does when given none:
 * - Q4_K / Q5_K / Q2_K: per sub-block, a weighted least-squares fit of scale and minimum over a
 *   sweep of candidate inverse scales ('fit_scale_min'); the sub-block scales and minimums are
 *   then quantized to 6 (4 for Q2_K) bits against a super-block scale, and the values re-rounded
 *   against the scales as stored.
 * - Q6_K: per sub-block, symmetric scales tried around the absolute maximum, the one with the
 *   largest weighted projection kept ('fit_scale_sym'); Q3_K: a symmetric start refined by
 *   coordinate descent on the weighted error ('fit_scale_q3').
 * - IQ4_NL / IQ4_XS: each value takes the nearest entry of the 16-value table; the block scale is
 *   the best of 15 candidates around the absolute maximum, by weighted projection.
 * Everything is computed in F32 in the field's order of operations, so the bytes match the
 * reference engine's for ordinary weights. */
#include "quant/quant-impl.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The signed absolute maximum '*max' of x[0 .. n) that a symmetric fit starts from; false, with the
 * n codes in L zero (a zero scale), when every value is below GROUP_MAX_EPS in magnitude. */
static bool sym_max(int n, const float * x, void * L, float * max) {
    float amax;
    *max = quant_signed_absmax(n, x, &amax);
    if (!(amax < GROUP_MAX_EPS)) return true;
    memset(L, 0, (size_t)n);
    return false;
}

/* The codes l = round(iscale * x[i]) clamped to -nmax .. nmax-1 of a symmetric fit and their
 * weighted sums (weights x^2): '*sumlx' = sum w x l, '*suml2' = sum w l^2; the codes go to L
 * unless it is NULL. */
static void sym_codes(int n, int nmax, const float * x, float iscale, int8_t * L, float * sumlx, float * suml2) {
    float slx = 0.f, sl2 = 0.f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Symmetric scale for 'n' values with codes -nmax .. nmax-1 (stored as L + nmax), weights x^2:
 * tries inverse scales -(nmax + 0.1 k) / max for k in -9..9, keeps the largest sumlx^2 / suml2
 * (the least-squares gain), returns the least-squares scale. */
static float fit_scale_sym(int n, int nmax, const float * x, uint8_t * L) {
    float max;
    if (!sym_max(n, x, L, &max)) return 0.f;
    float iscale = -nmax / max;
    float sumlx, suml2;
    sym_codes(n, nmax, x, iscale, (int8_t *)L, &sumlx, &suml2);
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(((int8_t *)L)[i] + nmax);
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sym_codes(n, nmax, x, iscale, NULL, &sumlx, &suml2);
        if (suml2 > 0.f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (uint8_t)(nmax + clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's sub-block scale: codes -nmax .. nmax-1 from the absolute maximum, then up to five sweeps
 * that move single codes where that raises the weighted gain sumlx^2 / suml2 (weights x^2). */
static float fit_scale_q3(int n, int nmax, const float * x, int8_t * L) {
    float max;
    if (!sym_max(n, x, L, &max)) return 0.f;
    float sumlx, suml2;
    sym_codes(n, nmax, x, -nmax / max, L, &sumlx, &suml2);
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0.f) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int new_l = clampi(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0.f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.f ? sumlx / suml2 : 0.f;
}

/* Asymmetric fit x ~ scale * L - min with codes 0..nmax and weights 'w': starts from the min/max
 * grid, then for nstep + 1 inverse scales (rmin + rdelta k + nmax) / (max - min) solves the 2x2
 * weighted least-squares system for scale and min (min clamped to <= 0 as a value, i.e. the
 * offset is never positive) and keeps the lowest weighted error (absolute with 'use_mad', else
 * squared). Stores the minimum as a positive '*the_min'. */
static float fit_scale_min(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * the_min,
                           uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0.f) min = 0.f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0.f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
        L[i] = (uint8_t)l;
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_mad += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.f) {
                this_min = 0.f;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0.f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                mad += weights[i] * diff;
            }
            if (mad < best_mad) {
                memcpy(L, Laux, (size_t)n);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ---------------------------------------------------------------- Q2_K */

static void block_q2_K(const float * x, void * out) {
    struct block_q2_K * y = out;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < QK_K / 16; j++) {
        for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
        scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.f) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < QK_K / 16; j++) y->scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
        y->d = quant_fp16(max_scale / q4scale);
    } else {
        memset(y->scales, 0, sizeof y->scales);
        y->d = quant_fp16(0.f);
    }
    if (max_min > 0.f) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < QK_K / 16; j++) y->scales[j] |= (uint8_t)(quant_nearest_int(iscale * mins[j]) << 4);
        y->dmin = quant_fp16(max_min / q4scale);
    } else {
        y->dmin = quant_fp16(0.f);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = loom_fp16_to_fp32(y->d) * (y->scales[j] & 0xf);
        if (d == 0.f) continue;
        const float dm = loom_fp16_to_fp32(y->dmin) * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (uint8_t)clampi(quant_nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
    }
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            y->qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
        }
    }
}

/* ---------------------------------------------------------------- Q3_K */

static void block_q3_K(const float * x, void * out) {
    struct block_q3_K * y = out;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int j = 0; j < QK_K / 16; j++) scales[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
    float amax;
    const float max_scale = quant_signed_absmax(QK_K / 16, scales, &amax);
    memset(y->scales, 0, sizeof y->scales);
    if (max_scale != 0.f) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; j++) {
            int l = clampi(quant_nearest_int(iscale * scales[j]), -32, 31) + 32;
            if (j < 8) {
                y->scales[j] = (uint8_t)(l & 0xf);
            } else {
                y->scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
            }
            l >>= 4;
            y->scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
        }
        y->d = quant_fp16(1 / iscale);
    } else {
        y->d = quant_fp16(0.f);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        int sc = j < 8 ? y->scales[j] & 0xf : y->scales[j - 8] >> 4;
        sc = (sc | ((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        const float d = loom_fp16_to_fp32(y->d) * sc;
        if (d == 0.f) continue;
        for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (int8_t)(clampi(quant_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
    memset(y->hmask, 0, sizeof y->hmask);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK_K; j++) {
        if (L[j] > 3) {
            y->hmask[m] |= hm;
            L[j] -= 4;
        }
        if (++m == QK_K / 8) {
            m = 0;
            hm <<= 1;
        }
    }
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            y->qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
        }
    }
}

/* ---------------------------------------------------------------- Q4_K / Q5_K */

/* The 6-bit scale and minimum of sub-block j (0..7) in the 12 packed bytes 'q': the first four
 * pairs sit in the low 6 bits of bytes 0..3 / 4..7; the last four take their low 4 bits from the
 * nibbles of bytes 8..11 and their high 2 bits from the top bits of bytes 0..7. */
static void scale_min_k4(int j, const uint8_t * q, int * sc, int * m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Fits the 8 sub-blocks of 32 (codes 0..nmax), packs the 6-bit scales / minimums and the two
 * super-block scales, and re-rounds the codes into L against the stored scales. */
static void fit_k4(const float * x, int nmax, float rmin, int nstep, uint8_t * L, loom_half * dd, loom_half * dmin,
                   uint8_t * packed) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0.f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.f ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0.f ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        int ls = quant_nearest_int(inv_scale * scales[j]);
        int lm = quant_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            packed[j] = (uint8_t)ls;
            packed[j + 4] = (uint8_t)lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dd = quant_fp16(max_scale / 63.f);
    *dmin = quant_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        int sc, m;
        scale_min_k4(j, packed, &sc, &m);
        const float d = loom_fp16_to_fp32(*dd) * sc;
        if (d == 0.f) continue;
        const float dm = loom_fp16_to_fp32(*dmin) * m;
        for (int ii = 0; ii < 32; ii++) L[32 * j + ii] = (uint8_t)clampi(quant_nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
    }
}

static void block_q4_K(const float * x, void * out) {
    struct block_q4_K * y = out;
    uint8_t L[QK_K];
    fit_k4(x, 15, -1.f, 20, L, &y->d, &y->dmin, y->scales);
    uint8_t * q = y->qs;
    for (int j = 0; j < QK_K; j += 64, q += 32) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

static void block_q5_K(const float * x, void * out) {
    struct block_q5_K * y = out;
    uint8_t L[QK_K];
    fit_k4(x, 31, -0.5f, 15, L, &y->d, &y->dmin, y->scales);
    memset(y->qh, 0, sizeof y->qh);
    uint8_t * ql = y->qs;
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                y->qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                y->qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
    }
}

/* ---------------------------------------------------------------- Q6_K */

static void block_q6_K(const float * x, void * out) {
    struct block_q6_K * y = out;
    uint8_t L[QK_K];
    float scales[QK_K / 16];
    for (int ib = 0; ib < QK_K / 16; ib++) scales[ib] = fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
    float max_abs_scale;
    const float max_scale = quant_signed_absmax(QK_K / 16, scales, &max_abs_scale);
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = quant_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ib++) {
        const int s = quant_nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(s < 127 ? s : 127);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = loom_fp16_to_fp32(y->d) * y->scales[j];
        if (d == 0.f) continue;
        for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (uint8_t)(clampi(quant_nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    uint8_t * ql = y->ql;
    uint8_t * qh = y->qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const uint8_t * p = L + j + l;
            ql[l] = (uint8_t)((p[0] & 0xf) | (p[64] & 0xf) << 4);
            ql[l + 32] = (uint8_t)((p[32] & 0xf) | (p[96] & 0xf) << 4);
            qh[l] = (uint8_t)(p[0] >> 4 | (p[32] >> 4) << 2 | (p[64] >> 4) << 4 | (p[96] >> 4) << 6);
        }
    }
}

/* ---------------------------------------------------------------- Q8_K */

/* d = max / -127 of the signed extreme (codes -127..127 plus -128 never produced), with the sums
 * of each 16 codes. */
static void block_q8_K(const float * x, void * out) {
    struct block_q8_K * y = out;
    float amax;
    const float max = quant_signed_absmax(QK_K, x, &amax);
    if (amax == 0.f) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; j++) {
        const int v = quant_nearest_int(iscale * x[j]);
        y->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        int sum = 0;
        for (int ii = 0; ii < 16; ii++) sum += y->qs[16 * j + ii];
        y->bsums[j] = (int16_t)sum;
    }
    y->d = 1 / iscale;
}

/* ---------------------------------------------------------------- IQ4_NL / IQ4_XS */

/* Index of the table entry nearest to 'x' (the table is sorted ascending; ties go up). */
static int best_index_iq4(float x) {
    const int8_t * val = loom_kvalues_iq4nl;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* The scale of one block of 32 against the table, weights x^2, L the chosen indices. */
static float fit_scale_iq4(const float * xb, uint8_t * L) {
    const int ntry = 7;
    const int8_t * values = loom_kvalues_iq4nl;
    float weight[32];
    for (int j = 0; j < 32; j++) weight[j] = xb[j] * xb[j];
    float amax;
    const float max = quant_signed_absmax(32, xb, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, 32);
        return 0.f;
    }
    float d = -max / values[0];
    float id = 1 / d;
    float sumqx = 0.f, sumq2 = 0.f;
    for (int j = 0; j < 32; j++) {
        const int l = best_index_iq4(id * xb[j]);
        L[j] = (uint8_t)l;
        const float q = values[l], w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0.f;
        for (int j = 0; j < 32; j++) {
            const int l = best_index_iq4(id * xb[j]);
            const float q = values[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0.f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack_nibbles_32(const uint8_t * L, uint8_t * q4) {
    for (int j = 0; j < 16; j++) q4[j] = (uint8_t)(L[j] | L[16 + j] << 4);
}

static void block_iq4_nl(const float * x, void * out) {
    struct block_iq4_nl * y = out;
    uint8_t L[32];
    const float d = fit_scale_iq4(x, L);
    y->d = quant_fp16(d);
    const float id = d != 0.f ? 1 / d : 0.f;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_index_iq4(id * x[j]);
    pack_nibbles_32(L, y->qs);
}

static void block_iq4_xs(const float * x, void * out) {
    struct block_iq4_xs * y = out;
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    for (int ib = 0; ib < QK_K / 32; ib++) scales[ib] = fit_scale_iq4(x + 32 * ib, L + 32 * ib);
    float amax_scale;
    const float max_scale = quant_signed_absmax(QK_K / 32, scales, &amax_scale);
    memset(y, 0, sizeof *y);
    const float d = -max_scale / 32;
    y->d = quant_fp16(d);
    const float id = d != 0.f ? 1 / d : 0.f;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int l = clampi(quant_nearest_int(id * scales[ib]), -32, 31);
        const float dl = d * l;
        const float idl = dl != 0.f ? 1 / dl : 0.f;
        for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)best_index_iq4(idl * x[32 * ib + j]);
        l += 32;
        y->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
        y->scales_h |= (uint16_t)((l >> 4) << 2 * (ib % 8));
    }
    for (int i = 0; i < QK_K / 32; i++) pack_nibbles_32(L + 32 * i, y->qs + 16 * i);
}

#define HALF_AT(type, field) offsetof(struct type, field)

static const struct quant_codec codec_q2_K = {QK_K, sizeof(struct block_q2_K), block_q2_K, 2,
                                              {HALF_AT(block_q2_K, d), HALF_AT(block_q2_K, dmin)}, false};
static const struct quant_codec codec_q3_K = {QK_K, sizeof(struct block_q3_K), block_q3_K, 1, {HALF_AT(block_q3_K, d)}, false};
static const struct quant_codec codec_q4_K = {QK_K, sizeof(struct block_q4_K), block_q4_K, 2,
                                              {HALF_AT(block_q4_K, d), HALF_AT(block_q4_K, dmin)}, false};
static const struct quant_codec codec_q5_K = {QK_K, sizeof(struct block_q5_K), block_q5_K, 2,
                                              {HALF_AT(block_q5_K, d), HALF_AT(block_q5_K, dmin)}, false};
static const struct quant_codec codec_q6_K = {QK_K, sizeof(struct block_q6_K), block_q6_K, 1, {HALF_AT(block_q6_K, d)}, false};
static const struct quant_codec codec_q8_K = {QK_K, sizeof(struct block_q8_K), block_q8_K, 0, {0}, true};
static const struct quant_codec codec_iq4_nl = {QK4_NL, sizeof(struct block_iq4_nl), block_iq4_nl, 1,
                                                {HALF_AT(block_iq4_nl, d)}, false};
static const struct quant_codec codec_iq4_xs = {QK_K, sizeof(struct block_iq4_xs), block_iq4_xs, 1,
                                                {HALF_AT(block_iq4_xs, d)}, false};

void loom_quantize_row_q2_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q2_K, x, y, n); }
void loom_quantize_row_q3_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q3_K, x, y, n); }
void loom_quantize_row_q4_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q4_K, x, y, n); }
void loom_quantize_row_q5_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q5_K, x, y, n); }
void loom_quantize_row_q6_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q6_K, x, y, n); }
void loom_quantize_row_q8_K(const float * x, void * y, int64_t n) { lqu_run(&codec_q8_K, x, y, n); }
void loom_quantize_row_iq4_nl(const float * x, void * y, int64_t n) { lqu_run(&codec_iq4_nl, x, y, n); }
void loom_quantize_row_iq4_xs(const float * x, void * y, int64_t n) { lqu_run(&codec_iq4_xs, x, y, n); }
