/* quant-blocks.h -- the GGUF block layouts of Loom's quantized weight types.
 *
 * Each struct is one block exactly as it is stored in a GGUF file (little-endian, no padding):
 * the sizes are checked below against the traits table (src/core/types.c). Facts from the GGUF
 * specification and the field's block definitions; the field's names are kept for the members
 * (d: scale, m / dmin: minimum, qs: low bits, qh: high bits, scales: sub-block scales).
 *
 * Element order: a block holds 'blck_size' consecutive elements of a row. For the 4-bit legacy
 * types element j (j < 16) is the low nibble of qs[j] and element j + 16 its high nibble; the
 * 5-bit ones take bit j of qh (read as a little-endian uint32) as the fifth bit of element j.
 * The K-quant layouts (sub-blocks, 6-bit packed scales) are described where they are decoded
 * (quant-dequant.c). */
#ifndef LOOM_QUANT_BLOCKS_H
#define LOOM_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256          /* super-block length of the K-quants and IQ4_XS */
#define QK4_NL 32
#define K_SCALE_SIZE 12   /* bytes of packed 6-bit scales and minimums in Q4_K / Q5_K (Q3_K: scales) */

typedef uint16_t loom_half; /* IEEE binary16 bits */

/* x = (q - 8) * d */
struct block_q4_0 {
    loom_half d;
    uint8_t qs[QK4_0 / 2];
};
/* x = q * d + m */
struct block_q4_1 {
    loom_half d, m;
    uint8_t qs[QK4_1 / 2];
};
/* x = (q - 16) * d, q = nibble | fifth bit << 4 */
struct block_q5_0 {
    loom_half d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
/* x = q * d + m */
struct block_q5_1 {
    loom_half d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
/* x = q * d */
struct block_q8_0 {
    loom_half d;
    int8_t qs[QK8_0];
};
/* x = q * d; s = d * sum(q) (an activation type) */
struct block_q8_1 {
    loom_half d, s;
    int8_t qs[QK8_1];
};
/* 16 sub-blocks of 16: scales[i] low nibble the scale, high nibble the minimum (4 bits each, times
 * d / dmin); 2-bit quants: x = d * sc * q - dmin * m */
struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    loom_half d, dmin;
};
/* 16 sub-blocks of 16: 6-bit signed scales (offset 32) packed in 12 bytes; 2 low bits in qs, the
 * third bit in hmask (set: no subtraction of 4); x = d * (sc - 32) * (q - 4 * !hbit) */
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    loom_half d;
};
/* 8 sub-blocks of 32: 6-bit scales and minimums packed in 12 bytes; x = d * sc * q - dmin * m */
struct block_q4_K {
    loom_half d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};
/* as Q4_K with a fifth bit per element in qh */
struct block_q5_K {
    loom_half d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
/* 16 sub-blocks of 16 with signed 8-bit scales; 6-bit quants (4 low bits in ql, 2 high in qh):
 * x = d * sc * (q - 32) */
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    loom_half d;
};
/* an activation type: x = q * d; bsums[i] = sum of qs[16 i .. 16 i + 15] */
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};
/* x = d * kvalues_iq4nl[q] (the 16-value non-linear table) */
struct block_iq4_nl {
    loom_half d;
    uint8_t qs[QK4_NL / 2];
};
/* 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 high in scales_h, offset 32):
 * x = d * (sc - 32) * kvalues_iq4nl[q] */
struct block_iq4_xs {
    loom_half d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};

static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block");
static_assert(sizeof(struct block_q4_1) == 20, "q4_1 block");
static_assert(sizeof(struct block_q5_0) == 22, "q5_0 block");
static_assert(sizeof(struct block_q5_1) == 24, "q5_1 block");
static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block");
static_assert(sizeof(struct block_q8_1) == 36, "q8_1 block");
static_assert(sizeof(struct block_q2_K) == 84, "q2_K block");
static_assert(sizeof(struct block_q3_K) == 110, "q3_K block");
static_assert(sizeof(struct block_q4_K) == 144, "q4_K block");
static_assert(sizeof(struct block_q5_K) == 176, "q5_K block");
static_assert(sizeof(struct block_q6_K) == 210, "q6_K block");
static_assert(sizeof(struct block_q8_K) == 292, "q8_K block");
static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl block");
static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs block");

/* The 16 values of the non-linear 4-bit types IQ4_NL and IQ4_XS (GGUF spec). */
extern const int8_t loom_kvalues_iq4nl[16];

#endif
