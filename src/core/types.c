/* types.c -- the type-traits table (GGUF type ids) and F16/BF16 conversion. */
#include "loom.h"
#include "quant/quant-impl.h"
#include "quant/quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* IEEE 754 binary16 <-> binary32, bit-exact, round to nearest even. */
float loom_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t loom_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into the exponent: correct */
    return (uint16_t)(sign | h);
}

float loom_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t loom_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static void f32_to_float(const void * src, float * dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void f32_from_float(const float * src, void * dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void f16_to_float(const void * src, float * dst, int64_t n) {
    const uint16_t * s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = loom_fp16_to_fp32(s[i]);
}
static void f16_from_float(const float * src, void * dst, int64_t n) {
    uint16_t * d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = loom_fp32_to_fp16(src[i]);
}
static void bf16_to_float(const void * src, float * dst, int64_t n) {
    const uint16_t * s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = loom_bf16_to_fp32(s[i]);
}
static void bf16_from_float(const float * src, void * dst, int64_t n) {
    uint16_t * d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = loom_fp32_to_bf16(src[i]);
}

/* Block lengths and sizes as the GGUF spec defines them for each ggml type. */
static const struct loom_type_traits type_traits[LOOM_TYPE_COUNT] = {
    [LOOM_TYPE_F32] = {"f32", 1, 4, f32_to_float, f32_from_float},
    [LOOM_TYPE_F16] = {"f16", 1, 2, f16_to_float, f16_from_float},
    [LOOM_TYPE_Q4_0] = {"q4_0", 32, 18, loom_dequant_q4_0, loom_quantize_row_q4_0},
    [LOOM_TYPE_Q4_1] = {"q4_1", 32, 20, loom_dequant_q4_1, loom_quantize_row_q4_1},
    [LOOM_TYPE_Q5_0] = {"q5_0", 32, 22, loom_dequant_q5_0, loom_quantize_row_q5_0},
    [LOOM_TYPE_Q5_1] = {"q5_1", 32, 24, loom_dequant_q5_1, loom_quantize_row_q5_1},
    [LOOM_TYPE_Q8_0] = {"q8_0", 32, 34, loom_dequant_q8_0, loom_quantize_row_q8_0},
    [LOOM_TYPE_Q8_1] = {"q8_1", 32, 36, NULL, NULL},
    [LOOM_TYPE_Q2_K] = {"q2_K", 256, 84, loom_dequant_q2_K, loom_quantize_row_q2_K},
    [LOOM_TYPE_Q3_K] = {"q3_K", 256, 110, loom_dequant_q3_K, loom_quantize_row_q3_K},
    [LOOM_TYPE_Q4_K] = {"q4_K", 256, 144, loom_dequant_q4_K, loom_quantize_row_q4_K},
    [LOOM_TYPE_Q5_K] = {"q5_K", 256, 176, loom_dequant_q5_K, loom_quantize_row_q5_K},
    [LOOM_TYPE_Q6_K] = {"q6_K", 256, 210, loom_dequant_q6_K, loom_quantize_row_q6_K},
    [LOOM_TYPE_Q8_K] = {"q8_K", 256, 292, loom_dequant_q8_K, loom_quantize_row_q8_K},
    [LOOM_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, NULL, NULL},
    [LOOM_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, NULL, NULL},
    [LOOM_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, NULL, NULL},
    [LOOM_TYPE_IQ1_S] = {"iq1_s", 256, 50, NULL, NULL},
    [LOOM_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, loom_dequant_iq4_nl, loom_quantize_row_iq4_nl},
    [LOOM_TYPE_IQ3_S] = {"iq3_s", 256, 110, NULL, NULL},
    [LOOM_TYPE_IQ2_S] = {"iq2_s", 256, 82, NULL, NULL},
    [LOOM_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, loom_dequant_iq4_xs, loom_quantize_row_iq4_xs},
    [LOOM_TYPE_I8] = {"i8", 1, 1, NULL, NULL},
    [LOOM_TYPE_I16] = {"i16", 1, 2, NULL, NULL},
    [LOOM_TYPE_I32] = {"i32", 1, 4, NULL, NULL},
    [LOOM_TYPE_I64] = {"i64", 1, 8, NULL, NULL},
    [LOOM_TYPE_F64] = {"f64", 1, 8, NULL, NULL},
    [LOOM_TYPE_IQ1_M] = {"iq1_m", 256, 56, NULL, NULL},
    [LOOM_TYPE_BF16] = {"bf16", 1, 2, bf16_to_float, bf16_from_float},
    [LOOM_TYPE_TQ1_0] = {"tq1_0", 256, 54, NULL, NULL},
    [LOOM_TYPE_TQ2_0] = {"tq2_0", 256, 66, NULL, NULL},
    [LOOM_TYPE_MXFP4] = {"mxfp4", 32, 17, NULL, NULL},
};
static_assert(sizeof type_traits / sizeof type_traits[0] == LOOM_TYPE_COUNT, "one traits entry per type id");

static const struct loom_type_traits unknown_traits = {NULL, 0, 0, NULL, NULL};

const struct loom_type_traits * loom_type_get_traits(enum loom_type type) {
    if ((int)type < 0 || type >= LOOM_TYPE_COUNT || type_traits[type].blck_size == 0) return &unknown_traits;
    return &type_traits[type];
}

bool loom_type_is_known(int type) {
    return type >= 0 && type < LOOM_TYPE_COUNT && type_traits[type].blck_size != 0;
}

const char * loom_type_name(enum loom_type type) {
    const char * n = loom_type_get_traits(type)->name;
    return n ? n : "?";
}

int64_t loom_blck_size(enum loom_type type) { return loom_type_get_traits(type)->blck_size; }
size_t loom_type_size(enum loom_type type) { return loom_type_get_traits(type)->type_size; }

size_t loom_row_size(enum loom_type type, int64_t ne0) {
    const struct loom_type_traits * tt = loom_type_get_traits(type);
    LOOM_ASSERT(tt->blck_size > 0 && ne0 % tt->blck_size == 0);
    return tt->type_size * (size_t)(ne0 / tt->blck_size);
}
