/* cuda-norm.cuh -- RMS_NORM on the CUDA device. */
#ifndef LOOM_CUDA_NORM_CUH
#define LOOM_CUDA_NORM_CUH

#include "cuda-common.cuh"

bool lc_rms_norm_supported(const struct loom_tensor * op);
/* Queues dst = x / sqrt(mean(x^2) + eps) per row over ne0 (F32, any strides). */
enum loom_status lc_rms_norm(struct lc_backend * be, struct loom_tensor * dst);
/* When 'next' is MUL(norm, w) with w an F32 row broadcast over the rows (w->ne[0] == ne0) and the
 * memory allows it, queues both in one kernel (norm's result is still written) and sets
 * '*fused'; otherwise queues nothing. */
enum loom_status lc_rms_norm_fused(struct lc_backend * be, struct loom_tensor * norm, struct loom_tensor * next, bool * fused);

#endif
