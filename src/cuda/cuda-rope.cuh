/* cuda-rope.cuh -- ROPE (normal and NeoX) on the CUDA device. */
#ifndef LOOM_CUDA_ROPE_CUH
#define LOOM_CUDA_ROPE_CUH

#include "cuda-common.cuh"

bool lc_rope_supported(const struct loom_tensor * op);
/* Queues the rotation of the first n_dims elements of each head of src[0] (F32 [head_dim,
 * n_head, n_tokens, ne3]) by pos[i2] * freq_scale * freq_base^(-2i/n_dims); the rest is copied. */
enum loom_status lc_rope(struct lc_backend * be, struct loom_tensor * dst);
/* When 'next' copies the result of 'rope' (a CPY, DUP or CONT; e.g. into the K cache) and the
 * memory allows it, queues both in one kernel (the rope's result is still written) and sets
 * '*fused'; otherwise queues nothing. */
enum loom_status lc_rope_fused(struct lc_backend * be, struct loom_tensor * rope, struct loom_tensor * next, bool * fused);

#endif
