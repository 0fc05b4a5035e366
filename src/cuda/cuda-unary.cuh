/* cuda-unary.cuh -- SCALE, SILU and GELU on the CUDA device (F32, any strides). */
#ifndef LOOM_CUDA_UNARY_CUH
#define LOOM_CUDA_UNARY_CUH

#include "cuda-common.cuh"

/* True when 'op' (SCALE/SILU/GELU) has the types and layouts the kernels handle. */
bool lc_unary_supported(const struct loom_tensor * op);
/* Queues dst = f(src[0]) on the backend's stream. */
enum loom_status lc_unary(struct lc_backend * be, struct loom_tensor * dst);

#endif
