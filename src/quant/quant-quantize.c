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
        if (!finite) {
            memset(tmp, 0, sizeof tmp);
            c->block(tmp, out);
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

/* The element of largest magnitude (the first one on ties), with its sign. */
static float signed_absmax(const float * x, int n) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    return max;
}

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

/* q4_0: d = max / -8 maps the extreme value to code 0; codes 0..15, x = (q - 8) d */
static void block_q4_0(const float * x, void * out) {
    struct block_q4_0 * y = out;
    const float d = signed_absmax(x, QK4_0) / -8.f;
    const float id = inverse(d);
    y->d = quant_fp16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        const float v0 = x[j] * id, v1 = x[j + QK4_0 / 2] * id;
        const int q0 = (int8_t)(v0 + 8.5f), q1 = (int8_t)(v1 + 8.5f);
        y->qs[j] = (uint8_t)((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
    }
}

/* q4_1: d = (max - min) / 15, m = min; codes 0..15, x = q d + m */
static void block_q4_1(const float * x, void * out) {
    struct block_q4_1 * y = out;
    float mn, mx;
    min_max(x, QK4_1, &mn, &mx);
    const float d = (mx - mn) / 15.f;
    const float id = inverse(d);
    y->d = quant_fp16(d);
    y->m = quant_fp16(mn);
    for (int j = 0; j < QK4_1 / 2; j++) {
        const float v0 = (x[j] - mn) * id, v1 = (x[j + QK4_1 / 2] - mn) * id;
        const int q0 = (int8_t)(v0 + 0.5f), q1 = (int8_t)(v1 + 0.5f);
        y->qs[j] = (uint8_t)((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
    }
}

/* q5_0: d = max / -16; codes 0..31, x = (q - 16) d; bit 4 of element j goes to bit j of qh */
static void block_q5_0(const float * x, void * out) {
    struct block_q5_0 * y = out;
    const float d = signed_absmax(x, QK5_0) / -16.f;
    const float id = inverse(d);
    y->d = quant_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; j++) {
        const float v0 = x[j] * id, v1 = x[j + QK5_0 / 2] * id;
        int q0 = (int8_t)(v0 + 16.5f), q1 = (int8_t)(v1 + 16.5f);
        q0 = q0 < 31 ? q0 : 31;
        q1 = q1 < 31 ? q1 : 31;
        y->qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
        qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK5_0 / 2);
    }
    memcpy(y->qh, &qh, 4);
}

/* q5_1: d = (max - min) / 31, m = min; codes 0..31 */
static void block_q5_1(const float * x, void * out) {
    struct block_q5_1 * y = out;
    float mn, mx;
    min_max(x, QK5_1, &mn, &mx);
    const float d = (mx - mn) / 31.f;
    const float id = inverse(d);
    y->d = quant_fp16(d);
    y->m = quant_fp16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; j++) {
        const float v0 = (x[j] - mn) * id, v1 = (x[j + QK5_1 / 2] - mn) * id;
        int q0 = (uint8_t)(v0 + 0.5f), q1 = (uint8_t)(v1 + 0.5f);
        q0 = q0 < 31 ? q0 : 31;
        q1 = q1 < 31 ? q1 : 31;
        y->qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
        qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK5_1 / 2);
    }
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
