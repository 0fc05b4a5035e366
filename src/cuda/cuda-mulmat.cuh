/* cuda-mulmat.cuh -- MUL_MAT on the CUDA device: own matrix-vector kernels for few columns
 * (token generation), cuBLAS for larger products, batched with broadcast over dims 2 and 3. */
#ifndef LOOM_CUDA_MULMAT_CUH
#define LOOM_CUDA_MULMAT_CUH

#include "cuda-common.cuh"

/* Products with at most this many columns (b->ne[1]) use the matrix-vector kernels; from 5
 * columns on cuBLAS was faster on an H200 (bench/cuda-notes.md). */
#define LC_MATVEC_MAX_COLS 4

bool lc_mul_mat_supported(const struct loom_tensor * op);
/* Bytes of backend scratch memory 'op' needs (converted or compacted operands, pointer arrays);
 * depends only on shapes, types and strides. */
size_t lc_mul_mat_scratch(const struct loom_tensor * op);
/* Queues dst[i, j, i2, i3] = sum_k a[k, i, i2/r2, i3/r3] * b[k, j, i2, i3] (F32 result). Uses
 * be->scratch, which must hold lc_mul_mat_scratch(dst) bytes. */
enum loom_status lc_mul_mat(struct lc_backend * be, struct loom_tensor * dst);
/* True when 'op' takes the matrix-vector kernels (no cuBLAS, no scratch). */
bool lc_mul_mat_is_matvec(const struct loom_tensor * op);
/* When 'mm' takes the matrix-vector kernels and 'next' is ADD or MUL of its result and another
 * F32 tensor of its shape, SILU of its result, or a copy of a permutation of its result (CPY, DUP,
 * CONT: the V cache store, the merge of the attention heads), and the memory allows it, queues
 * both in one kernel (the product is still written) and sets '*fused'; otherwise queues nothing. */
enum loom_status lc_mul_mat_fused(struct lc_backend * be, struct loom_tensor * mm, struct loom_tensor * next, bool * fused);

#endif
