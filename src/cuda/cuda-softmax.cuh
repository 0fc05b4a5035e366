/* cuda-softmax.cuh -- SOFT_MAX (with optional mask and scale) on the CUDA device. */
#ifndef LOOM_CUDA_SOFTMAX_CUH
#define LOOM_CUDA_SOFTMAX_CUH

#include "cuda-common.cuh"

bool lc_soft_max_supported(const struct loom_tensor * op);
/* Queues dst = softmax(a * scale + mask) per row over ne0; the mask (F32/F16) row used for
 * (i1, i2, i3) is mask[:, i1, i2 % m2, i3 % m3]. A row whose values are all -inf gives zeros. */
enum loom_status lc_soft_max(struct lc_backend * be, struct loom_tensor * dst);

#endif
