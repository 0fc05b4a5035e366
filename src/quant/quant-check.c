/* quant-check.c -- finding NaN or infinite values in tensor data: quantized blocks' scales, and the
 * elements of F32, F16 and BF16 tensors. */
#include "quant/quant.h"
#include "quant/quant-blocks.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

int loom_quant_half_scales(enum loom_type type, size_t off[2]) {
    switch (type) {
    case LOOM_TYPE_Q4_0: case LOOM_TYPE_Q5_0: case LOOM_TYPE_Q8_0: case LOOM_TYPE_IQ4_NL: case LOOM_TYPE_IQ4_XS:
        off[0] = 0;
        return 1;
    case LOOM_TYPE_Q4_1: case LOOM_TYPE_Q5_1: case LOOM_TYPE_Q4_K: case LOOM_TYPE_Q5_K:
        off[0] = 0, off[1] = 2;
        return 2;
    case LOOM_TYPE_Q2_K:
        off[0] = offsetof(struct block_q2_K, d), off[1] = offsetof(struct block_q2_K, dmin);
        return 2;
    case LOOM_TYPE_Q3_K: off[0] = offsetof(struct block_q3_K, d); return 1;
    case LOOM_TYPE_Q6_K: off[0] = offsetof(struct block_q6_K, d); return 1;
    default: return 0;
    }
}

int64_t loom_quant_find_bad_scale(enum loom_type type, const void * src, int64_t n_blocks) {
    const uint8_t * p = src;
    const size_t bs = loom_type_size(type);
    if (type == LOOM_TYPE_Q8_K) {
        for (int64_t i = 0; i < n_blocks; i++) {
            float d;
            memcpy(&d, p + (size_t)i * bs, 4);
            if (!isfinite(d)) return i;
        }
        return -1;
    }
    size_t off[2];
    const int n_off = loom_quant_half_scales(type, off);
    for (int64_t i = 0; i < n_blocks && n_off; i++) {
        for (int k = 0; k < n_off; k++) {
            uint16_t h;
            memcpy(&h, p + (size_t)i * bs + off[k], 2);
            if ((h & 0x7c00) == 0x7c00) return i; /* exponent all ones: inf or NaN */
        }
    }
    return -1;
}

int64_t loom_find_nonfinite(enum loom_type type, const void * src, int64_t n) {
    const uint8_t * p = src;
    switch (type) {
    case LOOM_TYPE_F32:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + (size_t)i * 4, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return i; /* exponent all ones: inf or NaN */
        }
        return -1;
    case LOOM_TYPE_F16:
    case LOOM_TYPE_BF16: {
        const uint16_t mask = type == LOOM_TYPE_F16 ? 0x7c00 : 0x7f80;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + (size_t)i * 2, 2);
            if ((h & mask) == mask) return i;
        }
        return -1;
    }
    default: return -1;
    }
}
