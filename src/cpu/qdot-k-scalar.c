/* qdot-k-scalar.c -- the Q8_K column quantizer and the portable integer kernels of the super-block
 * weight types (qdot-k.h): per 256-element super-block an exact integer sum per sub-block, weighted
 * by the sub-block scales, then scaled once by the two super-block scales. */
#include "cpu/qdot-k.h"
#include "quant/quant-blocks.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

void lcpu_quantize_q8_K(const float * x, void * y, int64_t k) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding and taking it off rounds |v| < 2^22 to nearest, ties to even */
    struct block_q8_K * b = y;
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < QK_K; j++) {
            const float v = fabsf(x[j]);
            finite &= v <= FLT_MAX;
            amax = v > amax ? v : amax;
        }
        if (!finite) { /* a NaN or an infinity: d = NaN, codes and sums 0 (vec.h, "non-finite columns") */
            memset(&b[i], 0, sizeof b[i]);
            b[i].d = NAN;
            continue;
        }
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = d;
        for (int j = 0; j < QK_K; j++) {
            /* the product rounded to F32 first (volatile: no fused multiply-add under -march=native),
             * as the SIMD quantizer rounds it */
            volatile float p = x[j] * id;
            float v = p + magic;
            v -= magic;
            b[i].qs[j] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
        for (int s = 0; s < QK_K / 16; s++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += b[i].qs[16 * s + j];
            b[i].bsums[s] = (int16_t)sum;
        }
    }
}

/* The 6-bit scales and minimums of the 8 sub-blocks of a Q4_K / Q5_K block (quant-dequant.c
 * describes the packing). */
static void k4_scales(const uint8_t * q, int sc[8], int m[8]) {
    for (int s = 0; s < 4; s++) {
        sc[s] = q[s] & 63;
        m[s] = q[s + 4] & 63;
        sc[s + 4] = (q[s + 8] & 0x0f) | (q[s] >> 6) << 4;
        m[s + 4] = (q[s + 8] >> 4) | (q[s + 4] >> 6) << 4;
    }
}

/* The pair sum of the Q8_K block sums covering sub-block s of 32. */
static inline int bsum32(const struct block_q8_K * a, int s) { return a->bsums[2 * s] + a->bsums[2 * s + 1]; }

/* One Q4_K super-block (qh NULL) or Q5_K super-block (qh: the fifth bits) against 'a': the
 * sub-block sums weighted by the scales minus those weighted by the minimums, scaled by d and dmin. */
static inline float dot_k45_block(const uint8_t * scales, const uint8_t * qs, const uint8_t * qh, loom_half d, loom_half dmin,
                                  const struct block_q8_K * a) {
    int sc[8], m[8], isum = 0, imin = 0;
    k4_scales(scales, sc, m);
    for (int s = 0; s < 8; s++) {
        const uint8_t * q = qs + 32 * (s / 2);
        const int8_t * y = a->qs + 32 * s;
        const int shift = 4 * (s % 2);
        int t = 0;
        for (int l = 0; l < 32; l++) t += (((q[l] >> shift) & 0x0f) | (qh ? ((qh[l] >> s) & 1) << 4 : 0)) * y[l];
        isum += sc[s] * t;
        imin += m[s] * bsum32(a, s);
    }
    return a->d * (loom_fp16_to_fp32(d) * (float)isum - loom_fp16_to_fp32(dmin) * (float)imin);
}

static float dot_q4_K(const struct block_q4_K * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) sum += dot_k45_block(w[i].scales, w[i].qs, NULL, w[i].d, w[i].dmin, &a[i]);
    return sum;
}

static float dot_q5_K(const struct block_q5_K * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) sum += dot_k45_block(w[i].scales, w[i].qs, w[i].qh, w[i].d, w[i].dmin, &a[i]);
    return sum;
}

/* Q6_K: codes 0..63 (offset 32 taken off through the block sums). */
static float dot_q6_K(const struct block_q6_K * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                const uint8_t * lo = w[i].ql + 64 * h + 32 * (p % 2), * hi = w[i].qh + 32 * h;
                const int lshift = p < 2 ? 0 : 4;
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * p + half;
                    const int8_t * y = a[i].qs + 16 * sb;
                    int t = 0;
                    for (int l = 0; l < 16; l++) {
                        const int e = 16 * half + l;
                        t += (((lo[e] >> lshift) & 0x0f) | ((hi[e] >> (2 * p)) & 3) << 4) * y[l];
                    }
                    isum += w[i].scales[sb] * (t - 32 * a[i].bsums[sb]);
                }
            }
        }
        sum += a[i].d * loom_fp16_to_fp32(w[i].d) * (float)isum;
    }
    return sum;
}

/* The signed 6-bit scale (offset 32 removed) of sub-block s of a Q3_K block. */
static inline int q3k_scale(const uint8_t * sc, int s) {
    const int lo = s < 8 ? sc[s] & 0x0f : sc[s - 8] >> 4;
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static float dot_q3_K(const struct block_q3_K * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * p + half;
                    const uint8_t * q = w[i].qs + 32 * h + 16 * half, * hm = w[i].hmask + 16 * half;
                    const int8_t * y = a[i].qs + 16 * sb;
                    int t = 0;
                    for (int l = 0; l < 16; l++) {
                        t += (((q[l] >> (2 * p)) & 3) - ((hm[l] >> (4 * h + p)) & 1 ? 0 : 4)) * y[l];
                    }
                    isum += q3k_scale(w[i].scales, sb) * t;
                }
            }
        }
        sum += a[i].d * loom_fp16_to_fp32(w[i].d) * (float)isum;
    }
    return sum;
}

static float dot_q2_K(const struct block_q2_K * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0, imin = 0;
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * p + half;
                    const uint8_t * q = w[i].qs + 32 * h + 16 * half;
                    const int8_t * y = a[i].qs + 16 * sb;
                    int t = 0;
                    for (int l = 0; l < 16; l++) t += ((q[l] >> (2 * p)) & 3) * y[l];
                    isum += (w[i].scales[sb] & 0x0f) * t;
                    imin += (w[i].scales[sb] >> 4) * a[i].bsums[sb];
                }
            }
        }
        sum += a[i].d * (loom_fp16_to_fp32(w[i].d) * (float)isum - loom_fp16_to_fp32(w[i].dmin) * (float)imin);
    }
    return sum;
}

static float dot_iq4_xs(const struct block_iq4_xs * w, const struct block_q8_K * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int s = 0; s < 8; s++) {
            const int ls = ((w[i].scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((w[i].scales_h >> (2 * s)) & 3) << 4;
            const uint8_t * q = w[i].qs + 16 * s;
            const int8_t * y = a[i].qs + 32 * s;
            int t = 0;
            for (int j = 0; j < 16; j++) {
                t += loom_kvalues_iq4nl[q[j] & 0x0f] * y[j] + loom_kvalues_iq4nl[q[j] >> 4] * y[j + 16];
            }
            isum += (ls - 32) * t;
        }
        sum += a[i].d * loom_fp16_to_fp32(w[i].d) * (float)isum;
    }
    return sum;
}

CPU_QDOT_K_DECL(q4_K, scalar) { CPU_QDOT_K_TILE(dot_q4_K, struct block_q4_K) }
CPU_QDOT_K_DECL(q5_K, scalar) { CPU_QDOT_K_TILE(dot_q5_K, struct block_q5_K) }
CPU_QDOT_K_DECL(q6_K, scalar) { CPU_QDOT_K_TILE(dot_q6_K, struct block_q6_K) }
CPU_QDOT_K_DECL(q3_K, scalar) { CPU_QDOT_K_TILE(dot_q3_K, struct block_q3_K) }
CPU_QDOT_K_DECL(q2_K, scalar) { CPU_QDOT_K_TILE(dot_q2_K, struct block_q2_K) }
CPU_QDOT_K_DECL(iq4_xs, scalar) { CPU_QDOT_K_TILE(dot_iq4_xs, struct block_iq4_xs) }
