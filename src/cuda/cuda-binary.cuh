/* cuda-binary.cuh -- ADD and MUL with broadcasting on the CUDA device. */
#ifndef LOOM_CUDA_BINARY_CUH
#define LOOM_CUDA_BINARY_CUH

#include "cuda-common.cuh"

/* True when 'op' (ADD/MUL: a F32/F16/BF16, b F32 broadcast to a, result F32) can run here. */
bool lc_binary_supported(const struct loom_tensor * op);
/* Queues dst = a (+ or *) b, b repeated along every dimension where it is smaller. */
enum loom_status lc_binary(struct lc_backend * be, struct loom_tensor * dst);

#endif
