/* cuda-absent.c -- built when the CUDA backend is not: the registry then lists no CUDA device,
 * and the loom-cuda.h functions report that there is none. */
#include "backend/backend-impl.h"
#include "loom-cuda.h"
#include "backend/comm-impl.h"

size_t loom_cuda_register_devices(loom_backend_dev_t * devs, size_t max) {
    (void)devs;
    (void)max;
    return 0;
}

size_t loom_cuda_device_count(void) { return 0; }
bool loom_backend_dev_is_cuda(loom_backend_dev_t dev) { (void)dev; return false; }
bool loom_backend_is_cuda(loom_backend_t backend) { (void)backend; return false; }

enum loom_status loom_cuda_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes) {
    (void)dev;
    (void)bytes;
    loom_log(LOOM_LOG_ERROR, "loom_cuda_set_max_buffer_size: Loom was built without CUDA");
    return LOOM_ERR_UNSUPPORTED;
}

enum loom_status loom_cuda_get_stats(loom_backend_t backend, struct loom_cuda_stats * stats) {
    (void)backend;
    (void)stats;
    loom_log(LOOM_LOG_ERROR, "loom_cuda_get_stats: Loom was built without CUDA");
    return LOOM_ERR_UNSUPPORTED;
}

loom_backend_comm_t loom_cuda_comm_new(loom_backend_t * backends, int n) {
    (void)backends;
    (void)n;
    loom_log(LOOM_LOG_ERROR, "all-reduce over CUDA devices: Loom was built without CUDA");
    return NULL;
}
