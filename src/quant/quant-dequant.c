/* quant-dequant.c -- dequantization of every computable quantized type to F32 (the traits
 * table's to_float). Block layouts: quant-blocks.h; facts from the GGUF specification and the
 * field's block definitions. The arithmetic follows the reference dequantizers (one F32 product
 * of scale and code per element, the sub-block scale folded into the block scale first), so the
 * values are bit-identical to what the field computes. */
#include "quant/quant.h"
#include "quant/quant-blocks.h"

#include <string.h>

/* binary16 -> binary32, inline (once per block): the half's exponent and mantissa moved into a
 * float's fields and rebiased by a multiplication with 2^112, which is exact and also turns
 * subnormal halves into their (normal) float values; inf and NaN take the library's conversion. */
static inline float h2f(loom_half h) {
    if ((h & 0x7c00) == 0x7c00) return loom_fp16_to_fp32(h);
    const uint32_t bits = (uint32_t)(h & 0x7fff) << 13;
    float f;
    memcpy(&f, &bits, 4);
    f *= 0x1p112f;
    return h & 0x8000 ? -f : f;
}

void loom_dequant_q4_0(const void * src, float * dst, int64_t n) {
    const struct block_q4_0 * b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void loom_dequant_q4_1(const void * src, float * dst, int64_t n) {
    const struct block_q4_1 * b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0x0f) * d + m;
            dst[j + QK4_1 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* The 5-bit code of element j (0..31) of a Q5 block: low nibble from qs, bit j of qh on top. */
static inline int q5_code(const uint8_t * qs, uint32_t qh, int j) {
    const int nib = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return nib | (int)((qh >> j) & 1) << 4;
}

void loom_dequant_q5_0(const void * src, float * dst, int64_t n) {
    const struct block_q5_0 * b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        const float d = h2f(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK5_0; j++) dst[j] = (float)(q5_code(b[i].qs, qh, j) - 16) * d;
    }
}

void loom_dequant_q5_1(const void * src, float * dst, int64_t n) {
    const struct block_q5_1 * b = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK5_1; j++) dst[j] = (float)q5_code(b[i].qs, qh, j) * d + m;
    }
}

void loom_dequant_q8_0(const void * src, float * dst, int64_t n) {
    const struct block_q8_0 * b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

/* Q2_K: 16 sub-blocks of 16. The 64 bytes of qs hold four 2-bit planes per half: element
 * 128 h + 32 p + l (h < 2 the half, p < 4 the plane, l < 32) is bits 2p..2p+1 of qs[32 h + l];
 * its sub-block is (128 h + 32 p + l) / 16. */
void loom_dequant_q2_K(const void * src, float * dst, int64_t n) {
    const struct block_q2_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                for (int half = 0; half < 2; half++) { /* 16 elements of one sub-block */
                    const int sb = 8 * h + 2 * p + half;
                    const float dl = d * (float)(b[i].scales[sb] & 0x0f), ml = dmin * (float)(b[i].scales[sb] >> 4);
                    const uint8_t * q = b[i].qs + 32 * h + 16 * half;
                    float * y = dst + 16 * sb;
                    for (int l = 0; l < 16; l++) y[l] = dl * (float)((q[l] >> (2 * p)) & 3) - ml;
                }
            }
        }
    }
}

/* The 6-bit scale of sub-block s (0..15) of a Q3_K block: the low four bits are the low (s < 8)
 * or high (s >= 8) nibble of scales[s % 8]; the top two bits are the pair at bits 2 (s / 4) and
 * 2 (s / 4) + 1 of scales[8 + s % 4]. */
static inline int q3k_scale(const uint8_t * sc, int s) {
    const int lo = s < 8 ? sc[s] & 0x0f : sc[s - 8] >> 4;
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

/* Q3_K: 2-bit planes as in Q2_K; the third bit of element 128 h + 32 p + l is bit 4 h + p of
 * hmask[l]: set, the code is q; clear, q - 4. Scales are signed 6-bit (offset 32). */
void loom_dequant_q3_K(const void * src, float * dst, int64_t n) {
    const struct block_q3_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = h2f(b[i].d);
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * p + half;
                    const float dl = d * (float)(q3k_scale(b[i].scales, sb) - 32);
                    const uint8_t * q = b[i].qs + 32 * h + 16 * half, * hm = b[i].hmask + 16 * half;
                    float * y = dst + 16 * sb;
                    for (int l = 0; l < 16; l++) {
                        const int code = ((q[l] >> (2 * p)) & 3) - ((hm[l] >> (4 * h + p)) & 1 ? 0 : 4);
                        y[l] = dl * (float)code;
                    }
                }
            }
        }
    }
}

/* The 6-bit scale and minimum of sub-block s (0..7) of a Q4_K / Q5_K block: for s < 4 the low six
 * bits of bytes s and s + 4; for s >= 4 the nibbles of byte s + 4 with the top two bits of bytes
 * s - 4 and s on top. */
static inline void k4_scale_min(const uint8_t * q, int s, int * sc, int * m) {
    if (s < 4) {
        *sc = q[s] & 63;
        *m = q[s + 4] & 63;
    } else {
        *sc = (q[s + 4] & 0x0f) | (q[s - 4] >> 6) << 4;
        *m = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
    }
}

/* One Q4_K / Q5_K super-block (both share the 6-bit scale and min packing and the nibble layout):
 * element 64 c + l (l < 32) is the low nibble of qs[32 c + l] and element 64 c + 32 + l its high
 * nibble; with 'qh' (Q5_K) the fifth bit of element 32 s + l (s the sub-block) is bit s of qh[l]. */
static inline __attribute__((always_inline)) void dequant_k4_block(loom_half d16, loom_half dmin16, const uint8_t * scales,
                                                                   const uint8_t * qs, const uint8_t * qh, float * dst) {
    const float d = h2f(d16), dmin = h2f(dmin16);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        k4_scale_min(scales, s, &sc, &m);
        const float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t * q = qs + 32 * (s / 2);
        const int shift = 4 * (s % 2);
        if (qh) {
            for (int l = 0; l < 32; l++) dst[32 * s + l] = dl * (float)(((q[l] >> shift) & 0x0f) | ((qh[l] >> s) & 1) << 4) - ml;
        } else {
            for (int l = 0; l < 32; l++) dst[32 * s + l] = dl * (float)((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

void loom_dequant_q4_K(const void * src, float * dst, int64_t n) {
    const struct block_q4_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) dequant_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, NULL, dst);
}

void loom_dequant_q5_K(const void * src, float * dst, int64_t n) {
    const struct block_q5_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) dequant_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, dst);
}

/* Q6_K: per half h (128 elements), element 128 h + 32 p + l (p < 4, l < 32) takes its low four
 * bits from ql[64 h + l + 32 (p % 2)] (low nibble for p < 2, high for p >= 2) and its top two
 * from bits 2p..2p+1 of qh[32 h + l]; code - 32 times the signed scale of sub-block e / 16. */
void loom_dequant_q6_K(const void * src, float * dst, int64_t n) {
    const struct block_q6_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = h2f(b[i].d);
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 4; p++) {
                const uint8_t * lo = b[i].ql + 64 * h + 32 * (p % 2), * hi = b[i].qh + 32 * h;
                const int lshift = p < 2 ? 0 : 4;
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * p + half;
                    const float ds = d * (float)b[i].scales[sb];
                    float * y = dst + 16 * sb;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int code = ((lo[l] >> lshift) & 0x0f) | ((hi[l] >> (2 * p)) & 3) << 4;
                        y[l - 16 * half] = ds * (float)(code - 32);
                    }
                }
            }
        }
    }
}

void loom_dequant_q8_K(const void * src, float * dst, int64_t n) {
    const struct block_q8_K * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d;
        memcpy(&d, &b[i].d, 4);
        for (int j = 0; j < QK_K; j++) dst[j] = d * (float)b[i].qs[j];
    }
}

void loom_dequant_iq4_nl(const void * src, float * dst, int64_t n) {
    const struct block_iq4_nl * b = src;
    for (int64_t i = 0; i < n / QK4_NL; i++, dst += QK4_NL) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            dst[j] = d * (float)loom_kvalues_iq4nl[b[i].qs[j] & 0x0f];
            dst[j + QK4_NL / 2] = d * (float)loom_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

/* IQ4_XS: 8 sub-blocks of 32, each laid out as an IQ4_NL block's codes (16 bytes); the 6-bit
 * scale of sub-block s is nibble s % 2 of scales_l[s / 2] with bits 2s..2s+1 of scales_h on top. */
void loom_dequant_iq4_xs(const void * src, float * dst, int64_t n) {
    const struct block_iq4_xs * b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = h2f(b[i].d);
        for (int s = 0; s < 8; s++) {
            const int ls = ((b[i].scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((b[i].scales_h >> (2 * s)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t * q = b[i].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                dst[32 * s + j] = dl * (float)loom_kvalues_iq4nl[q[j] & 0x0f];
                dst[32 * s + j + 16] = dl * (float)loom_kvalues_iq4nl[q[j] >> 4];
            }
        }
    }
}
