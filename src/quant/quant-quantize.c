/* quant-quantize.c -- F32 -> the legacy block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and the block
 * driver every quantizer runs through.
 *
 * The legacy quantizers are the field's round-to-nearest schemes (GGUF spec / ggml block
 * definitions): one absolute-maximum or min/max scale per block of 32, the scale computed in F32
 * and stored as binary16, each value rounded against the unrounded scale. They are written to
 * give the same bytes as the reference engine's quantizer. */
#include "quant/quant-impl.h"

#include <float.h>
#include <math.h>

/* ---------------------------------------------------------------- the block driver */

static void rescale_half(uint8_t * p, int e) {
    loom_half h;
    memcpy(&h, p, 2);
    h = quant_fp16(ldexpf(loom_fp16_to_fp32(h), e));
    memcpy(p, &h, 2);
}

void lqu_run(const struct quant_codec * c, const float * x, void * y, int64_t n) {
    LOOM_ASSERT(n % c->blck == 0 && c->blck <= QK_K);
    uint8_t * out = y;
    float tmp[QK_K];
    for (int64_t b = 0; b < n / c->blck; b++, x += c->blck, out += c->size) {
        float amax = 0.f;
        bool finite = true;
        for (int j = 0; j < c->blck; j++) {
            const float a = fabsf(x[j]);
            if (!(a <= FLT_MAX)) finite = false; /* inf or NaN */
            if (a > amax) amax = a;
        }
        if (!finite) { /* the codes of zeros under NaN scales: every value of the block decodes to NaN */
            memset(tmp, 0, sizeof tmp);
            c->block(tmp, out);
            const loom_half nan_half = 0x7e00;
            for (int k = 0; k < c->n_half; k++) memcpy(out + c->half_off[k], &nan_half, 2);
            if (c->float_d) {
                const float nan_d = NAN;
                memcpy(out, &nan_d, 4);
            }
            continue;
        }
        if (amax == 0.f || (amax >= 0x1p-24f && amax <= 0x1p8f)) {
            c->block(x, out);
            continue;
        }
        const int e = ilogbf(amax);
        for (int j = 0; j < c->blck; j++) tmp[j] = ldexpf(x[j], -e);
        c->block(tmp, out);
        for (int k = 0; k < c->n_half; k++) rescale_half(out + c->half_off[k], e);
        if (c->float_d) {
            float d;
            memcpy(&d, out, 4);
            d = ldexpf(d, e);
            memcpy(out, &d, 4);
        }
    }
}

/* ---------------------------------------------------------------- legacy blocks */

static void min_max(const float * x, int n, float * mn, float * mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static inline float inverse(float d) { return d != 0.f ? 1.0f / d : 0.0f; }

/* Codes q[j] = (int8_t)(x[j] * id + bias), at most qmax: a block of a type with an offset (bias:
 * the offset plus 1/2, so that the cast rounds; x[j] * id >= -offset). */
static void codes_offset(const float * x, int n, float id, float bias, int qmax, uint8_t * q) {
    for (int j = 0; j < n; j++) {
        const int v = (int8_t)(x[j] * id + bias);
        q[j] = (uint8_t)(v < qmax ? v : qmax);
    }
}

/* Codes q[j] = round((x[j] - mn) * id), at most qmax: a block of a type with a minimum mn. */
static void codes_min(const float * x, int n, float mn, float id, int qmax, uint8_t * q) {
    for (int j = 0; j < n; j++) {
        const int v = (int8_t)((x[j] - mn) * id + 0.5f);
        q[j] = (uint8_t)(v < qmax ? v : qmax);
    }
}

/* Packs the low 4 bits of the codes q[0 .. n-1] two to a byte into qs (element j in the low half of
 * byte j, element j + n/2 in the high half); returns bit 4 of each code, element j's at bit j. */
static uint32_t pack_codes(const uint8_t * q, int n, uint8_t * qs) {
    uint32_t qh = 0;
    for (int j = 0; j < n / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | (q[j + n / 2] & 0xf) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + n / 2] >> 4) << (j + n / 2);
    }
    return qh;
}

/* A block of n <= 32 values of a type with an offset: d = max / -(qmax + 1) / 2 (max: the signed
 * absolute maximum) stored as binary16 at '*d', codes round(x / d) + (qmax + 1) / 2 at most qmax,
 * their low 4 bits packed into qs; returns their fifth bits (pack_codes). */
static uint32_t block_offset(const float * x, int n, int qmax, loom_half * d, uint8_t * qs) {
    const float half = (float)((qmax + 1) / 2);
    float amax;
    const float s = quant_signed_absmax(n, x, &amax) / -half;
    *d = quant_fp16(s);
    uint8_t q[32];
    codes_offset(x, n, inverse(s), half + 0.5f, qmax, q);
    return pack_codes(q, n, qs);
}

/* A block of n <= 32 values of a type with a minimum: d = (max - min) / qmax and m = min stored as
 * binary16 at '*d' and '*m', codes round((x - min) / d) at most qmax, their low 4 bits packed into
 * qs; returns their fifth bits (pack_codes). */
static uint32_t block_min(const float * x, int n, int qmax, loom_half * d, loom_half * m, uint8_t * qs) {
    float mn, mx;
    min_max(x, n, &mn, &mx);
    const float s = (mx - mn) / (float)qmax;
    *d = quant_fp16(s);
    *m = quant_fp16(mn);
    uint8_t q[32];
    codes_min(x, n, mn, inverse(s), qmax, q);
    return pack_codes(q, n, qs);
}

/* q4_0: d = max / -8 maps the extreme value to code 0; codes 0..15, x = (q - 8) d */
static void block_q4_0(const float * x, void * out) {
    struct block_q4_0 * y = out;
    (void)block_offset(x, QK4_0, 15, &y->d, y->qs);
}

/* q4_1: d = (max - min) / 15, m = min; codes 0..15, x = q d + m */
static void block_q4_1(const float * x, void * out) {
    struct block_q4_1 * y = out;
    (void)block_min(x, QK4_1, 15, &y->d, &y->m, y->qs);
}

/* q5_0: d = max / -16; codes 0..31, x = (q - 16) d; bit 4 of element j goes to bit j of qh */
static void block_q5_0(const float * x, void * out) {
    struct block_q5_0 * y = out;
    const uint32_t qh = block_offset(x, QK5_0, 31, &y->d, y->qs);
    memcpy(y->qh, &qh, 4);
}

/* q5_1: d = (max - min) / 31, m = min; codes 0..31, x = q d + m; qh as q5_0's */
static void block_q5_1(const float * x, void * out) {
    struct block_q5_1 * y = out;
    const uint32_t qh = block_min(x, QK5_1, 31, &y->d, &y->m, y->qs);
    memcpy(y->qh, &qh, 4);
}

/* q8_0: d = absmax / 127, q = round(x / d) (half away from zero) */
static void block_q8_0(const float * x, void * out) {
    struct block_q8_0 * y = out;
    float amax = 0.f;
    for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.f;
    const float id = inverse(d);
    y->d = quant_fp16(d);
    for (int j = 0; j < QK8_0; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
}

#define HALF_AT(type, field) offsetof(struct type, field)

static const struct quant_codec codec_q4_0 = {QK4_0, sizeof(struct block_q4_0), block_q4_0, 1, {HALF_AT(block_q4_0, d)}, false};
static const struct quant_codec codec_q4_1 = {QK4_1, sizeof(struct block_q4_1), block_q4_1, 2,
                                              {HALF_AT(block_q4_1, d), HALF_AT(block_q4_1, m)}, false};
static const struct quant_codec codec_q5_0 = {QK5_0, sizeof(struct block_q5_0), block_q5_0, 1, {HALF_AT(block_q5_0, d)}, false};
static const struct quant_codec codec_q5_1 = {QK5_1, sizeof(struct block_q5_1), block_q5_1, 2,
                                              {HALF_AT(block_q5_1, d), HALF_AT(block_q5_1, m)}, false};
static const struct quant_codec codec_q8_0 = {QK8_0, sizeof(struct block_q8_0), block_q8_0, 1, {HALF_AT(block_q8_0, d)}, false};

void loom_quantize_row_q4_0(const float * x, void * y, int64_t n) { lqu_run(&codec_q4_0, x, y, n); }
void loom_quantize_row_q4_1(const float * x, void * y, int64_t n) { lqu_run(&codec_q4_1, x, y, n); }
void loom_quantize_row_q5_0(const float * x, void * y, int64_t n) { lqu_run(&codec_q5_0, x, y, n); }
void loom_quantize_row_q5_1(const float * x, void * y, int64_t n) { lqu_run(&codec_q5_1, x, y, n); }
void loom_quantize_row_q8_0(const float * x, void * y, int64_t n) { lqu_run(&codec_q8_0, x, y, n); }
