/* cuda-attn.cuh -- FLASH_ATTN_EXT (fused attention with an online softmax) on the CUDA device. */
#ifndef LOOM_CUDA_ATTN_CUH
#define LOOM_CUDA_ATTN_CUH

#include "cuda-common.cuh"

/* True for what the kernels compute: q F32 [D, n_q, H, B]; K and V F32, F16, BF16, Q8_0 or Q4_0,
 * rows dense (nb0 the element or block size), any row strides; D and Dv multiples of 8 and at
 * most 256; mask absent, F32 or F16; the result F32 and contiguous. */
bool lc_flash_attn_supported(const struct loom_tensor * op);
/* Bytes of backend scratch the op's partial results take (0 when the KV cells are not split). */
size_t lc_flash_attn_scratch(const struct lc_backend * be, const struct loom_tensor * op);
/* Queues dst = softmax(q K^T * scale + mask) V (see loom_flash_attn_ext). Few queries per KV head
 * (token generation): the KV cells are split across blocks, each leaving a partial maximum, sum
 * and weighted values in scratch, merged by a second kernel (flash-decoding). Many queries with
 * F16 K and V of 64..128 values: tensor-core tiles (mma.sync; q and P rounded to F16) for q K^T
 * and P V. Errors:
 * LOOM_ERR_BACKEND when scratch is short or a launch fails. */
enum loom_status lc_flash_attn(struct lc_backend * be, struct loom_tensor * dst);

#endif
