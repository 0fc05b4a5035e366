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
size_t loom_cuda_device_count(void);
/* True when 'dev' is a CUDA device (NULL gives false). */
bool loom_backend_dev_is_cuda(loom_backend_dev_t dev);
/* True when 'backend' runs on a CUDA device (NULL gives false). */
bool loom_backend_is_cuda(loom_backend_t backend);
/* Sets the largest single buffer (bytes) of the device buffer type of 'dev'; 0 means unlimited.
 * Overrides LOOM_CUDA_MAX_BUFFER_MB; affects buffers allocated afterwards (and the chunking of
 * host memory wrapped afterwards). Errors: LOOM_ERR_INVALID_ARG when 'dev' is not a CUDA
 * device; LOOM_ERR_UNSUPPORTED when Loom was built without CUDA. */
enum loom_status loom_cuda_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
