/* qdot-scalar.c -- the portable integer kernels for quantized weights (vec.h, "quantized weights"):
 * the activation quantizer and the block dot products, in plain C for every table. */
#include "cpu/vec.h"
#include "quant/quant-blocks.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Q8_0 activations as the field quantizes them: per block of 32, d = max|x| / 127 (stored as F16)
 * and q = x / d rounded to nearest (halves away from zero); an all-zero block gets d = 0, q = 0.
 * A block holding a NaN or an infinity gets d = NaN and q = 0 (vec.h, "non-finite columns"). */
void lcpu_quantize_q8_0(const float * x, void * y, int64_t k) {
    struct block_q8_0 * b = y;
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < QK8_0; j++) {
            const float a = fabsf(x[j]);
            finite &= a <= FLT_MAX;
            amax = fmaxf(amax, a);
        }
        if (!finite) {
            b[i].d = loom_fp32_to_fp16(NAN);
            memset(b[i].qs, 0, sizeof b[i].qs);
            continue;
        }
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = loom_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* sum_i w[i] a[i] over 'nb' Q8_0 blocks: per block the integer sum times both scales, in block order. */
static inline float dot_q8_0_q8_0(const struct block_q8_0 * w, const struct block_q8_0 * a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int32_t s = 0;
        for (int j = 0; j < QK8_0; j++) s += (int32_t)w[i].qs[j] * (int32_t)a[i].qs[j];
        sum += (float)s * (loom_fp16_to_fp32(w[i].d) * loom_fp16_to_fp32(a[i].d));
    }
    return sum;
}

void lcpu_qdot_q8_0_q8_0(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, uint8_t * c,
                        size_t ldc) {
    for (int j = 0; j < nr; j++) {
        for (int r = 0; r < mr; r++) {
            const float v = dot_q8_0_q8_0((const struct block_q8_0 *)(w + r * ldw), (const struct block_q8_0 *)(a + j * lda), k / QK8_0);
            memcpy(c + j * ldc + (size_t)r * 4, &v, 4);
        }
    }
}
