/* cuda-cpy.cuh -- CPY, DUP and CONT on the CUDA device: copies with any strides and shapes of
 * equal element count, converting between F32, F16 and BF16 (I32 to I32 raw). */
#ifndef LOOM_CUDA_CPY_CUH
#define LOOM_CUDA_CPY_CUH

#include "cuda-common.cuh"

bool lc_cpy_supported(const struct loom_tensor * op);
/* Queues the copy of src[0] into 'dst' (CPY writes through the view of its destination). */
enum loom_status lc_cpy(struct lc_backend * be, struct loom_tensor * dst);
/* Queues a copy of every element of 's' into 'd' (equal element counts, element k of one in
 * ne order goes to element k of the other), converting float types. Used by other ops to make
 * contiguous or converted operands in scratch memory. */
enum loom_status lc_copy(struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d);

#endif
