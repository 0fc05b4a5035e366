/* quant-impl.h -- the quantizers' shared machinery: rounding helpers and the per-block driver that
 * keeps scales finite on hostile input. */
#ifndef LOOM_QUANT_IMPL_H
#define LOOM_QUANT_IMPL_H

#include "loom.h"
#include "quant/quant-blocks.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Round to the nearest integer, ties to even, for |f| < 2^22: adding 1.5 * 2^23 leaves the
 * rounded integer in the low mantissa bits (the field's quantizers round this way). */
static inline int quant_nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* binary16 of 'f', saturated to +-65504 where it would round to infinity (a scale stays finite). */
static inline loom_half quant_fp16(float f) {
    if (f > 65504.f) f = 65504.f;
    if (f < -65504.f) f = -65504.f;
    return loom_fp32_to_fp16(f);
}

/* The value of the largest magnitude among x[0 .. n) (the first of equal ones; 0 when all are 0),
 * its magnitude in '*amax'. */
static inline float quant_signed_absmax(int n, const float * x, float * amax) {
    float max = 0.f, m = 0.f;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a > m) {
            m = a;
            max = x[i];
        }
    }
    *amax = m;
    return max;
}

/* Quantizes one block of 'blck' floats at 'x' into 'y' (the block's struct). */
typedef void (*quant_block_fn)(const float * x, void * y);

/* How a type's blocks are quantized: the block function and where its scales are stored, so the
 * driver can rescale them after quantizing a block brought into a safe range. */
struct quant_codec {
    int blck;               /* elements per block */
    size_t size;            /* bytes per block */
    quant_block_fn block;
    uint8_t n_half;         /* binary16 scales in the block (d, m / dmin) ... */
    uint8_t half_off[2];    /* ... at these byte offsets */
    bool float_d;           /* the scale is a float at offset 0 (Q8_K) */
};

/* Quantizes 'n' floats (a multiple of 'c->blck') into consecutive blocks at 'y'. A block whose
 * largest magnitude lies outside [2^-24, 2^8] is scaled by a power of two into that range first
 * (exact), quantized, and its scales multiplied back (saturating, flushing to zero), so the
 * quants never see overflowing products and every scale is finite. A block holding NaN or inf
 * gets the codes of a block of zeros under NaN scales, so all its values decode to NaN: a non-finite value is never
 * made finite (a quantized KV cache; callers that must refuse such input check it first). */
void lqu_run(const struct quant_codec * c, const float * x, void * y, int64_t n);

/* The per-type entry points of the from_float column (src/core/types.c): 'n' floats, a multiple
 * of the type's block length, into n / blck_size blocks. */
void loom_quantize_row_q4_0(const float * x, void * y, int64_t n);
void loom_quantize_row_q4_1(const float * x, void * y, int64_t n);
void loom_quantize_row_q5_0(const float * x, void * y, int64_t n);
void loom_quantize_row_q5_1(const float * x, void * y, int64_t n);
void loom_quantize_row_q8_0(const float * x, void * y, int64_t n);
void loom_quantize_row_q2_K(const float * x, void * y, int64_t n);
void loom_quantize_row_q3_K(const float * x, void * y, int64_t n);
void loom_quantize_row_q4_K(const float * x, void * y, int64_t n);
void loom_quantize_row_q5_K(const float * x, void * y, int64_t n);
void loom_quantize_row_q6_K(const float * x, void * y, int64_t n);
void loom_quantize_row_q8_K(const float * x, void * y, int64_t n);
void loom_quantize_row_iq4_nl(const float * x, void * y, int64_t n);
void loom_quantize_row_iq4_xs(const float * x, void * y, int64_t n);

#endif
