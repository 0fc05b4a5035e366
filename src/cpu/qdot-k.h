/* qdot-k.h -- the integer kernels for the 256-element super-block weight types (Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_XS) against Q8_K activation columns: the column quantizer, the portable kernels
 * (qdot-k-scalar.c), the AVX2 ones (qdot-k-avx2.c) and AVX512-VNNI ones for Q4_K and Q6_K
 * (qdot-k-vnni.c), with the table entries of each ISA. */
#ifndef LOOM_CPU_QDOT_K_H
#define LOOM_CPU_QDOT_K_H

#include "cpu/vec.h"

/* Quantizes 'k' F32 values (a multiple of 256) into Q8_K super-blocks at 'y': per 256 values,
 * d = max|x| / 127 (F32), q = x / d rounded to nearest (halves to even), and bsums[i] the
 * sum of q over elements 16 i .. 16 i + 15; an all-zero super-block gets d = 0, q = 0. The portable
 * version (qdot-k-scalar.c) and the AVX2 one (qdot-k-avx2.c, for the AVX2 and AVX-512 tables) round
 * alike (the F32 product x * (127 / max|x|), to nearest even), so the columns are the same bit for
 * bit whatever the ISA or thread count. */
void lcpu_quantize_q8_K(const float * x, void * y, int64_t k);
void lcpu_quantize_q8_K_avx2(const float * x, void * y, int64_t k);

/* lcpu_qdot_fn kernels (vec.h): weight rows of the named type, columns of Q8_K, 'k' a multiple of 256. */
#define CPU_QDOT_K_DECL(wt, isa)                                                                                    \
    void lcpu_qdot_##wt##_q8_K_##isa(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, \
                                    int nr, uint8_t * c, size_t ldc)
CPU_QDOT_K_DECL(q2_K, scalar);
CPU_QDOT_K_DECL(q3_K, scalar);
CPU_QDOT_K_DECL(q4_K, scalar);
CPU_QDOT_K_DECL(q5_K, scalar);
CPU_QDOT_K_DECL(q6_K, scalar);
CPU_QDOT_K_DECL(iq4_xs, scalar);
CPU_QDOT_K_DECL(q2_K, avx2);
CPU_QDOT_K_DECL(q3_K, avx2);
CPU_QDOT_K_DECL(q4_K, avx2);
CPU_QDOT_K_DECL(q5_K, avx2);
CPU_QDOT_K_DECL(q6_K, avx2);
CPU_QDOT_K_DECL(iq4_xs, avx2);
CPU_QDOT_K_DECL(q4_K, vnni);
CPU_QDOT_K_DECL(q6_K, vnni);

#define CPU_QDOT_K_QUANTIZE_scalar lcpu_quantize_q8_K
#define CPU_QDOT_K_QUANTIZE_avx2 lcpu_quantize_q8_K_avx2
#define CPU_QDOT_K_QUANTIZE_vnni lcpu_quantize_q8_K_avx2
#define CPU_QDOT_K_ENTRY(T, wt, isa) [LOOM_TYPE_##T] = {LOOM_TYPE_Q8_K, CPU_QDOT_K_QUANTIZE_##isa, lcpu_qdot_##wt##_q8_K_##isa}
#define CPU_QDOT_K_TABLE(isa)                                                                            \
    CPU_QDOT_K_ENTRY(Q2_K, q2_K, isa), CPU_QDOT_K_ENTRY(Q3_K, q3_K, isa), CPU_QDOT_K_ENTRY(Q4_K, q4_K, isa), \
        CPU_QDOT_K_ENTRY(Q5_K, q5_K, isa), CPU_QDOT_K_ENTRY(Q6_K, q6_K, isa),                              \
        CPU_QDOT_K_ENTRY(IQ4_XS, iq4_xs, isa)
/* The AVX512-VNNI kernels (qdot-k-vnni.c), which replace their AVX2 ones where the CPU has VNNI. */
#define CPU_QDOT_K_VNNI CPU_QDOT_K_ENTRY(Q4_K, q4_K, vnni), CPU_QDOT_K_ENTRY(Q6_K, q6_K, vnni)

/* The tile loop every kernel shares: result (j, r) is the row-column dot 'rowdot' of weight row r
 * and column j over k / 256 super-blocks. */
#define CPU_QDOT_K_TILE(rowdot, wblock)                                                                   \
    for (int j = 0; j < nr; j++) {                                                                         \
        for (int r = 0; r < mr; r++) {                                                                     \
            const float v = rowdot((const wblock *)(w + r * ldw), (const struct block_q8_K *)(a + j * lda), k / QK_K); \
            memcpy(c + j * ldc + (size_t)r * 4, &v, 4);                                                    \
        }                                                                                                  \
    }

#endif
