/* loom-cuda.h -- the CUDA device: device memory, pinned and zero-copy host memory, kernels, cuBLAS. */
#ifndef LOOM_CUDA_H
#define LOOM_CUDA_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (section owned by the CUDA work; when Loom is built without CUDA, the registry simply lists
 * no CUDA device and nothing here is needed by other code.) */

#ifdef __cplusplus
}
#endif

#endif
