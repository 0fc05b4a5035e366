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

#endif
