/* cuda-argmax.cuh -- ARGMAX on the CUDA device. */
#ifndef LOOM_CUDA_ARGMAX_CUH
#define LOOM_CUDA_ARGMAX_CUH

#include "cuda-common.cuh"

bool lc_argmax_supported(const struct loom_tensor * op);
/* Queues dst[i1] = index of the largest a[:, i1] (I32; ties to the lowest index, NaN ignored,
 * 0 for a row of only NaN). */
enum loom_status lc_argmax(struct lc_backend * be, struct loom_tensor * dst);

#endif
