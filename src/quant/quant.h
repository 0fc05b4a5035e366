/* quant.h -- the quantized weight types' codecs: dequantization to F32 and the block-scale check. */
#ifndef LOOM_QUANT_H
#define LOOM_QUANT_H

#include "loom.h"

/* Dequantization (the traits table's to_float): 'n' elements (a multiple of the type's block
 * length) from the blocks at 'src' (aligned as the block struct: 2 bytes, 4 for Q8_K) into 'dst'. Layouts: quant-blocks.h (GGUF
 * spec). Every element is computed in F32 exactly as the field's reference dequantizers do
 * (products of the F16 scales and the integer codes, in the same order). */
void loom_dequant_q4_0(const void * src, float * dst, int64_t n);
void loom_dequant_q4_1(const void * src, float * dst, int64_t n);
void loom_dequant_q5_0(const void * src, float * dst, int64_t n);
void loom_dequant_q5_1(const void * src, float * dst, int64_t n);
void loom_dequant_q8_0(const void * src, float * dst, int64_t n);
void loom_dequant_q2_K(const void * src, float * dst, int64_t n);
void loom_dequant_q3_K(const void * src, float * dst, int64_t n);
void loom_dequant_q4_K(const void * src, float * dst, int64_t n);
void loom_dequant_q5_K(const void * src, float * dst, int64_t n);
void loom_dequant_q6_K(const void * src, float * dst, int64_t n);
void loom_dequant_q8_K(const void * src, float * dst, int64_t n);
void loom_dequant_iq4_nl(const void * src, float * dst, int64_t n);
void loom_dequant_iq4_xs(const void * src, float * dst, int64_t n);

/* The byte offsets in one block of 'type' of its F16 scale fields (d, and the minimum m / dmin where
 * the type has one) into 'off'; returns their count, 0 for a type without F16 block scales (Q8_K
 * keeps an F32 d at offset 0; the float types have none). */
int loom_quant_half_scales(enum loom_type type, size_t off[2]);

/* Checks the scales of 'n_blocks' consecutive blocks of quantized 'type' at 'src': returns the
 * index of the first block whose scale (or minimum) is NaN or infinite, or -1 when all are
 * finite (also for a type without blocks). A non-finite scale would turn every product with the
 * block into NaN, so the model loader refuses such files (quant-check.c). */
int64_t loom_quant_find_bad_scale(enum loom_type type, const void * src, int64_t n_blocks);
/* Checks 'n' consecutive elements of an F32, F16 or BF16 tensor at 'src': returns the index of the
 * first NaN or infinite one, or -1 when all are finite (also for any other type). The model loader
 * runs it on every float weight when asked to ('check_tensors', the field's --check-tensors). */
int64_t loom_find_nonfinite(enum loom_type type, const void * src, int64_t n);

#endif
