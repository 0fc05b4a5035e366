/* cuda-mulmat.cuh -- MUL_MAT on the CUDA device: own matrix-vector kernels for few columns
 * (token generation), cuBLAS for larger products, batched with broadcast over dims 2 and 3. */
#ifndef LOOM_CUDA_MULMAT_CUH
#define LOOM_CUDA_MULMAT_CUH

#include "cuda-common.cuh"

/* Products with at most this many columns (b->ne[1]) use the matrix-vector kernels; from 5
 * columns on cuBLAS was faster on an H200 (bench/cuda-notes.md). */
#define LC_MATVEC_MAX_COLS 4

bool lc_mul_mat_supported(const struct loom_tensor * op);
/* LOOM_CUDA_GEMM: how cuBLAS products of F16 weights write their result (see cuda-mulmat.cu). */
void lc_mul_mat_set_gemm_mode(int mode);
/* LOOM_CUDA_MV: which one-column matrix-vector kernel shape (see cuda-mulmat.cu). */
void lc_mul_mat_set_mv_mode(int mode);
/* LOOM_CUDA_MV_STAGES: 0 turns off the shared-memory staging of one-column products. */
void lc_mul_mat_set_mv_stages(int on);
/* LOOM_CUDA_MV_PERSIST: 0 a block per row group; 1 persistent one-column kernels; N > 1 at most N blocks (see cuda-mulmat.cu). */
void lc_mul_mat_set_mv_persist(int v);
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
 *    scale their results (LOOM_CUDA_PRENORM=0 turns it off);
 *  - SwiGLU -- gate = MUL_MAT(wg, x), act = SILU(gate), up = MUL_MAT(wu, x), out = MUL(act, up) --
 *    reading x once for both matrices; or
 *  - two or three one-column products of the same activations by weights (a layer's q, k and v),
 *    each with its epilogue (LOOM_CUDA_QKV=0 turns it off); or
 *  - one product with an epilogue: ADD or MUL of its result and another F32 tensor of its shape,
 *    SILU of its result, a copy of a permutation of its result (CPY, DUP, CONT, SET_ROWS: the V
 *    cache store, the merge of the attention heads), or a normal-mode ROPE of its result viewed as
 *    [head_dim, n_head, N] (then also the copy of the rotated result that follows: the K cache
 *    store); then, without a pre-norm (one column, no rotation or copy), a tail: the softmax of
 *    the product's result (the attention scores) or the RMS_NORM of the result or of the
 *    ADD/MUL/SILU epilogue's with the MUL by a weight row that follows it, computed by the launch's
 *    last block (LOOM_CUDA_TAIL=0 turns these off) -- or, when one-column products read that MUL's
 *    result, what their pre-norm needs: the result times the weight row and each block's sum of
 *    squares (the norm's nodes are then the next launch's).
 * Sets '*used' to the number of nodes queued: 0 when nothing applies (nothing queued). */
enum loom_status lc_mul_mat_group(struct lc_backend * be, struct loom_tensor * const * nodes, int n, int * used);

#endif
