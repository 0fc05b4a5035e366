/* loom-cuda.h -- the CUDA device: device memory, pinned and zero-copy host memory, kernels, cuBLAS.
 *
 * Devices: one per GPU, registered ahead of the CPU as "CUDA0", "CUDA1", ... (the registry in
 * loom-backend.h); the description is the GPU's name and the memory figures come from
 * cudaMemGetInfo. A machine without a usable GPU (no driver, no device) registers none and logs
 * nothing. Capabilities: async copies, events, a pinned host buffer type, zero-copy wrapping of
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
 * Execution (read when a backend is created; "0" turns a switch off):
 *  - LOOM_CUDA_FUSE: neighbouring nodes run as one kernel where the memory allows it (rms_norm+mul,
 *    rope+copy, a matrix-vector product with the add/mul/silu/copy/rope that follows it, SwiGLU);
 *    every node's result is still written. On by default.
 *  - LOOM_CUDA_QKV (with fusion): consecutive one-column products of the same activations (a
 *    layer's q, k and v with their rotations and cache stores) in one launch; a result that a
 *    later product of that launch wholly overwrites (memory the allocator reused) is not written.
 *    On by default.
 *  - LOOM_CUDA_TAIL (with fusion): the RMS norm (and MUL by its weight) of a one-column product's
 *    residual sum, and the softmax of attention scores, computed by the product kernel's last
 *    block to finish instead of a kernel of their own. On by default.
 *  - LOOM_CUDA_PRENORM (with fusion): the RMS norm (and MUL by its weight) of a layer's input
 *    finished inside the one-column products that read it: the residual's product before them
 *    leaves the input times the weight row and its blocks' sums of squares; the products stream
 *    that and scale their results, so they need not wait for a norm. Preferred to the norm tail
 *    where both apply. On by default.
 *  - LOOM_CUDA_GRAPHS: token-generation splits (no cuBLAS products) are captured into CUDA graphs
 *    in chunks and updated in place from one compute to the next. On by default.
 *  - LOOM_CUDA_PDL: kernels are launched with programmatic dependent launch, so each starts
 *    while the previous one drains. On by default.
 *  - LOOM_CUDA_PROFILE=1: per-kernel-kind GPU times of each compute (queued behind gates, direct
 *    launches); =2: host times only. Logged (warning level) when the backend is freed.
 *  - LOOM_CUDA_MV_STAGES (0-3): how one-column products stream their weights (0: into registers;
 *    1, the default, and 2-3: through rings of shared memory, see cuda-mulmat.cu).
 *  - LOOM_CUDA_MV_PERSIST: one-column products without a last-block tail run on as many blocks
 *    as the device holds at once, each warp streaming several row groups through one ring (1, the
 *    default); 0: a block per row group; N > 1: at most N blocks per product (a test setting).
 *  - LOOM_CUDA_MV (0-3) and LOOM_CUDA_GEMM (0-2): kernel-shape and cuBLAS-output experiments.
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
