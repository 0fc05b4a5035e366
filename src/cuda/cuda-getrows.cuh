/* cuda-getrows.cuh -- GET_ROWS on the CUDA device. */
#ifndef LOOM_CUDA_GETROWS_CUH
#define LOOM_CUDA_GETROWS_CUH

#include "cuda-common.cuh"

bool lc_get_rows_supported(const struct loom_tensor * op);
/* Queues dst[:, i, i2, i3] = a[:, ids[i, i2, i3], i2, i3] as F32. An id outside the table gives a
 * zero row and raises the backend's error flag (reported at synchronize). */
enum loom_status lc_get_rows(struct lc_backend * be, struct loom_tensor * dst);

#endif
