/* cuda-getrows.cuh -- GET_ROWS and SET_ROWS on the CUDA device. */
#ifndef LOOM_CUDA_GETROWS_CUH
#define LOOM_CUDA_GETROWS_CUH

#include "cuda-common.cuh"

bool lc_get_rows_supported(const struct loom_tensor * op);
/* Queues dst[:, i, i2, i3] = a[:, ids[i, i2, i3], i2, i3] as F32. An id outside the table gives a
 * zero row and raises the backend's error flag (reported at synchronize). */
enum loom_status lc_get_rows(struct lc_backend * be, struct loom_tensor * dst);

bool lc_set_rows_supported(const struct loom_tensor * op);
/* Queues dst[:, ids[i]] = rows[:, i] (rows = dst->src[0], ids = dst->src[1]), converted to dst's
 * type. An id outside dst writes nothing and raises the backend's error flag. */
enum loom_status lc_set_rows(struct lc_backend * be, struct loom_tensor * dst);

#endif
