/* loom-cuda.h -- the CUDA device: device memory, pinned and zero-copy host memory, kernels, cuBLAS.
 *
 * Devices: one per GPU, registered ahead of the CPU as "CUDA0", "CUDA1", ... (the registry in
 * loom-backend.h); the description is the GPU's name and the memory figures come from
 * cudaMemGetInfo. A machine without a usable GPU (no driver, no device) registers none and logs
 * nothing. The backend is a module, libloom-cuda.so, loaded (dlopen) when the registry is first used
 * on a machine with an NVIDIA driver, from beside the program or libloom.so or from the install's
 * library folder; without it there are no CUDA devices (a warning says where it was looked for). Capabilities: async copies, events, a pinned host buffer type, zero-copy wrapping of
 * host memory.
 *
 * Buffer types:
 *  - "CUDA<n>": device memory (cudaMalloc), tensor addresses aligned to 256 bytes; tensor->data
 *    is a device address. The largest single buffer is unlimited unless the environment variable
 *    LOOM_CUDA_MAX_BUFFER_MB (read when the devices are registered) or
 *    loom_cuda_set_max_buffer_size says otherwise. Running out of memory returns NULL with a
 *    logged error naming the device, the MiB asked for and the MiB free.
 *  - "CUDA<n>_Host": pinned host memory (is_host: the CPU reads and writes it directly, and every
 *    CUDA device reads it over the bus), for fast transfers.
 *  - loom_backend_dev_buffer_from_host_ptr wraps caller memory (e.g. a read-only mmap of a model
 *    file) with cudaHostRegister, read-only where the driver supports it; kernels read it in place.
 *    Such buffers report the "CUDA<n>_Host" type; tensor->data keeps its host address.
 *
 * Backends: each is one CUDA stream with its own cuBLAS handle. graph_compute queues every node
 * without waiting for the device; loom_backend_synchronize waits and reports errors (a CUDA
 * failure is LOOM_ERR_BACKEND with a logged message naming the failing call). Ops: everything in
 * loom.h for F32/F16/BF16 with arbitrary strides (loom_backend_dev_supports_op answers exactly).
 *
 * Execution: neighbouring nodes run as one kernel where the pattern and the memory allow it
 * (docs/CUDA.md lists the fusions and their rules; every node's result is still written, except one
 * that a later node of the same launch wholly overwrites); token-generation splits (no cuBLAS
 * products) are captured into CUDA graphs in chunks and updated in place from one compute to the
 * next; kernels are launched with programmatic dependent launch, so each starts while the previous
 * one drains.
 *
 * Backend parameters ('params' of loom_backend_dev_init): comma-separated key=value items, for
 * debugging and tests; NULL takes them from the environment variable LOOM_CUDA_PARAMS (unset: the
 * defaults). An unknown key or a value out of range makes the init fail (NULL, logged).
 *  - graphs=0: launch kernels directly, never through CUDA graphs (default 1);
 *  - fuse=0: one kernel per node, no fusion of any kind (default 1);
 *  - profile=1: per-kernel-kind GPU times of each compute (launches queued behind gates, no CUDA
 *    graphs); profile=2: host times only; logged (warning level) when the backend is freed
 *    (default 0);
 *  - mv_blocks=N: at most N blocks per persistent matrix-vector product, so that each warp
 *    streams many row groups (tests; default 0: as many blocks as the device holds at once).
 *
 * When Loom is built without CUDA these functions exist too: they report no devices and return
 * LOOM_ERR_UNSUPPORTED or false.
 */
#ifndef LOOM_CUDA_H
#define LOOM_CUDA_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices in the registry (registering them on first use); 0 without a GPU. */
LOOM_API size_t loom_cuda_device_count(void);
/* True when 'dev' is a CUDA device (NULL gives false). */
LOOM_API bool loom_backend_dev_is_cuda(loom_backend_dev_t dev);
/* True when 'backend' runs on a CUDA device (NULL gives false). */
LOOM_API bool loom_backend_is_cuda(loom_backend_t backend);
/* Sets the largest single buffer (bytes) of the device buffer type of 'dev'; 0 means unlimited.
 * Overrides LOOM_CUDA_MAX_BUFFER_MB; affects buffers allocated afterwards (and the chunking of
 * host memory wrapped afterwards). Errors: LOOM_ERR_INVALID_ARG when 'dev' is not a CUDA
 * device; LOOM_ERR_UNSUPPORTED when Loom was built without CUDA. */
LOOM_API enum loom_status loom_cuda_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes);

/* The fusions of the CUDA backend (docs/CUDA.md, "The fusions"), as loom_cuda_get_stats counts
 * them: per kind, the launches that carry it (one launch may carry several, e.g. a pre-norm and
 * SwiGLU). */
enum loom_cuda_fusion {
    LOOM_CUDA_FUSION_NORM_MUL,      /* RMS_NORM and the MUL of its result by an F32 row in one kernel */
    LOOM_CUDA_FUSION_ROPE_COPY,     /* ROPE and the copy of its result (a cache store) in one kernel */
    LOOM_CUDA_FUSION_EPILOGUE,      /* a product's ADD, MUL, SILU, copy or rotation in the product's kernel */
    LOOM_CUDA_FUSION_SWIGLU,        /* MUL_MAT, SILU, MUL_MAT, MUL of one activation in one kernel */
    LOOM_CUDA_FUSION_MULTI,         /* two or three products of one activation (a layer's q, k and v) */
    LOOM_CUDA_FUSION_TAIL_NORM,     /* RMS_NORM and MUL of the product's result in the launch's last block */
    LOOM_CUDA_FUSION_TAIL_SOFT_MAX, /* SOFT_MAX of the product's result in the launch's last block */
    LOOM_CUDA_FUSION_TAIL_PRE_NORM, /* the last block prepares the next launch's pre-norm */
    LOOM_CUDA_FUSION_PRE_NORM,      /* the products finish the RMS_NORM and MUL of their input */
    LOOM_CUDA_FUSION_COUNT
};

/* What a CUDA backend's graph computes launched, summed since the backend was created. Counted as
 * each launch is planned (no device work, no waiting), so the figures hold as soon as
 * graph_compute returns; a compute that replays captured CUDA graphs counts what their capture
 * counted. A launch group is a node and the nodes fused into it (cuBLAS may queue several
 * kernels for one). */
struct loom_cuda_stats {
    int64_t computes;                         /* graph_compute calls that queued work */
    int64_t nodes;                            /* compute nodes queued (views and empty nodes compute nothing) */
    int64_t launches;                         /* launch groups */
    int64_t led[LOOM_OP_COUNT];               /* launch groups by the op of their first node */
    int64_t fusions[LOOM_CUDA_FUSION_COUNT];  /* launch groups carrying each fusion */
};

/* Copies the counts of 'backend' into '*stats' (for tests and tools: which fusions a graph got).
 * Errors: LOOM_ERR_INVALID_ARG when 'backend' is not a CUDA backend or 'stats' is NULL;
 * LOOM_ERR_UNSUPPORTED when Loom was built without CUDA. */
LOOM_API enum loom_status loom_cuda_get_stats(loom_backend_t backend, struct loom_cuda_stats * stats);

#ifdef __cplusplus
}
#endif

#endif
