/* cuda-absent.c -- built when the CUDA backend is not: the registry then lists no CUDA device. */
#include "backend/backend-impl.h"

size_t loom_cuda_register_devices(loom_backend_dev_t * devs, size_t max) {
    (void)devs;
    (void)max;
    return 0;
}
