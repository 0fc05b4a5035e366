/* cuda-module.h -- the interface between the library and the CUDA backend module
 * (libloom-cuda.so), which the library loads with dlopen the first time the device registry is used
 * on a machine with an NVIDIA driver: a program that never uses a GPU does not load the CUDA runtime
 * or cuBLAS. The module calls back into the library's loom_* functions, which the program exports
 * (libloom.so exports them; a program linked with libloom.a is linked with --export-dynamic, and
 * cuda-module.c keeps every function the module calls in it). */
#ifndef LOOM_CUDA_MODULE_H
#define LOOM_CUDA_MODULE_H

#include "loom-cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LC_MODULE_API 3                  /* bumped when struct lc_module_api changes */
#define LC_MODULE_FILE "libloom-cuda.so"
#define LC_MODULE_ENTRY "lc_module_api"  /* const struct lc_module_api * lc_module_api(int version) */

/* What the module offers: its devices and the loom-cuda.h functions that need its internals. */
struct lc_module_api {
    int version;                                                              /* LC_MODULE_API */
    size_t (*register_devices)(loom_backend_dev_t * devs, size_t max);        /* the GPUs, at most 'max' */
    bool (*dev_is_cuda)(loom_backend_dev_t dev);
    bool (*backend_is_cuda)(loom_backend_t backend);
    enum loom_status (*set_max_buffer_size)(loom_backend_dev_t dev, size_t bytes);
    void (*get_stats)(loom_backend_t backend, struct loom_cuda_stats * stats); /* a CUDA backend's counts */
    /* fills 'comm' (comm-impl.h: iface and context; n and backends already set) with an NCCL
     * communicator over its CUDA backends; LOOM_ERR_UNSUPPORTED (logged) when the module was built
     * without NCCL, LOOM_ERR_BACKEND when NCCL fails */
    enum loom_status (*comm_init)(struct loom_backend_comm * comm);
};

typedef const struct lc_module_api * (*lc_module_entry_fn)(int version);

#ifdef __cplusplus
}
#endif

#endif
