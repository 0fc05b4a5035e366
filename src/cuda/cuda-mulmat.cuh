/* cuda-mulmat.cuh -- MUL_MAT on the CUDA device: own matrix-vector kernels for few columns
 * (token generation; cuda-matvec.cu, with the fusions cuda-mulmat-plan.cu plans), cuBLAS for
 * larger products (cuda-gemm.cu), batched with broadcast over dims 2 and 3. */
#ifndef LOOM_CUDA_MULMAT_CUH
#define LOOM_CUDA_MULMAT_CUH

#include "cuda-common.cuh"

/* Products with at most this many columns (b->ne[1]) use the matrix-vector kernels; from 5
 * columns on cuBLAS was faster on an H200 (bench/cuda-notes.md). Quantized weights: up to
 * LC_MATVEC_Q_MAX_COLS columns (a decode step of several sequences), in launches of a few
 * columns each, which read the blocks far fewer times than dequantizing them all to F16 for
 * cuBLAS costs (bench/results/cuda-quant.md). */
#define LC_MATVEC_MAX_COLS 4
#define LC_MATVEC_Q_MAX_COLS 16
/* The most columns a matrix-vector product of weights of 'type' takes. */
int lc_matvec_max_cols(int type);

bool lc_mul_mat_supported(const struct loom_tensor * op);
/* Bytes of backend scratch memory 'op' needs (converted or compacted operands, pointer arrays);
 * depends only on shapes, types and strides. */
size_t lc_mul_mat_scratch(const struct loom_tensor * op);
/* Queues dst[i, j, i2, i3] = sum_k a[k, i, i2/r2, i3/r3] * b[k, j, i2, i3] (F32 result). Uses
 * be->scratch, which must hold lc_mul_mat_scratch(dst) bytes. */
enum loom_status lc_mul_mat(struct lc_backend * be, struct loom_tensor * dst);
/* True when 'op' takes the matrix-vector kernels (no cuBLAS, no scratch). */
bool lc_mul_mat_is_matvec(const struct loom_tensor * op);
/* nodes[0 .. n-1]: compute nodes in graph order, from a MUL_MAT, or from an RMS_NORM of one F32
 * column followed by the MUL of its result by an F32 weight row that one-column products read (a
 * layer's input). Queues in one matrix-vector launch, where the pattern and the memory allow it
 * (every result still written, except one that a later result of the launch wholly overwrites):
 *  - the norm and the MUL as the products' pre-norm, when the launch before left what it needs
 *    (the residual product's tail, below): the products read the input times the weight row and
 *    scale their results;
 *  - SwiGLU -- gate = MUL_MAT(wg, x), act = SILU(gate), up = MUL_MAT(wu, x), out = MUL(act, up) --
 *    reading x once for both matrices; or
 *  - two or three one-column products of the same activations by weights (a layer's q, k and v),
 *    each with its epilogue; or
 *  - one product with an epilogue: ADD or MUL of its result and another F32 tensor of its shape,
 *    SILU of its result, a copy of a permutation of its result (CPY, DUP, CONT, SET_ROWS: the V
 *    cache store, the merge of the attention heads), or a normal-mode ROPE of its result viewed as
 *    [head_dim, n_head, N] (then also the copy of the rotated result that follows: the K cache
 *    store); then, without a pre-norm (one column, no rotation or copy), a tail: the softmax of
 *    the product's result (the attention scores) or the RMS_NORM of the result or of the
 *    ADD/MUL/SILU epilogue's with the MUL by a weight row that follows it, computed by the launch's
 *    last block -- or, when one-column products read that MUL's
 *    result, what their pre-norm needs: the result times the weight row and each block's sum of
 *    squares (the norm's nodes are then the next launch's).
 * Sets '*used' to the number of nodes queued: 0 when nothing applies (nothing queued). */
enum loom_status lc_mul_mat_group(struct lc_backend * be, struct loom_tensor * const * nodes, int n, int * used);


/* ---------------------------------------------------------------- between the MUL_MAT files */

/* True when the rows of 't' are dense (ne[0] elements of its type back to back). */
static inline bool lc_rows_dense(const struct loom_tensor * t) { return t->ne[0] == 1 || t->nb[0] == loom_type_size(t->type); }
/* One matrix-vector product d = a x b with nothing fused (cuda-mulmat-plan.cu); 'a_const': 'a' is
 * a weight, so its first loads may precede the wait for the previous kernel. */
enum loom_status lc_matvec_plain(struct lc_backend * be, const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d,
                                 bool a_const);
/* Scratch bytes of the cuBLAS product 'op' (cuda-gemm.cu; shapes, types and strides only). */
size_t lc_gemm_scratch(const struct loom_tensor * op);
/* Queues node 'dst' (device views a, b, d of its operands and result) through cuBLAS; errors:
 * LOOM_ERR_BACKEND when be->scratch is smaller than lc_gemm_scratch(dst), or a cuBLAS failure. */
enum loom_status lc_gemm(struct lc_backend * be, const struct loom_tensor * dst, const struct lc_tensor * a, const struct lc_tensor * b,
                         const struct lc_tensor * d);

#endif
