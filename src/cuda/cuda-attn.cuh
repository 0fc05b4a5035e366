/* cuda-attn.cuh -- the attention of one token (token generation) in one kernel. */
#ifndef LOOM_CUDA_ATTN_CUH
#define LOOM_CUDA_ATTN_CUH

#include "cuda-common.cuh"

/* When the nodes kq, sm, kqv (and cont, which may be NULL) are the attention of one query
 * token as src/llama/graph.c builds it --
 *   kq   = MUL_MAT(K, Q)          K [head_dim, n_kv, n_head_kv] F32/F16, Q F32 [head_dim, 1, n_head]
 *   sm   = SOFT_MAX(kq, mask, s)  mask F32 [n_kv, >= 1] or none
 *   kqv  = MUL_MAT(V, sm)         V [n_kv, head_dim, n_head_kv] (positions contiguous), K's type
 *   cont = CONT of a permutation of kqv (the merged heads), optional
 * -- queues one kernel (a block per query head, GQA by n_head / n_head_kv) that computes all of
 * them and writes every node's result, and sets '*fused' to the number of nodes after kq it covers
 * (2 or 3). Otherwise leaves '*fused' 0 and queues nothing. */
enum loom_status lc_attn_fused(struct lc_backend * be, struct loom_tensor * kq, struct loom_tensor * sm, struct loom_tensor * kqv,
                               struct loom_tensor * cont, int * fused);

#endif
