/* loom-cpu.h -- the CPU device: host buffers, zero-copy wrapping of host memory, multithreaded compute. */
#ifndef LOOM_CPU_H
#define LOOM_CPU_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend on the CPU device (same as loom_backend_dev_init(loom_backend_dev_by_name("CPU"), NULL)). */
loom_backend_t loom_backend_cpu_init(void);
bool loom_backend_is_cpu(loom_backend_t backend);
/* Threads used by graph_compute (>= 1); default: the number of online processors. */
void loom_backend_cpu_set_n_threads(loom_backend_t backend, int n_threads);
int loom_backend_cpu_get_n_threads(loom_backend_t backend);
/* Host memory aligned to 64 bytes; is_host. */
loom_backend_buffer_type_t loom_backend_cpu_buffer_type(void);
/* Wraps caller-owned host memory without copying (never freed by the buffer). */
loom_backend_buffer_t loom_backend_cpu_buffer_from_ptr(void * ptr, size_t size);

/* Computes 'graph' directly on host data (tensors of a context created with no_alloc = false, or
 * in host buffers) with 'n_threads' threads (OpenMP). Work is split by rows, so results are
 * bitwise identical for any thread count. Returns LOOM_ERR_UNSUPPORTED (logged, naming the node)
 * for an op/type combination the CPU does not implement. */
enum loom_status loom_cpu_graph_compute(struct loom_cgraph * graph, int n_threads);
/* True when the CPU kernels implement 'op' with its sources' types and layouts. */
bool loom_cpu_supports_op(const struct loom_tensor * op);

/* Kernel paths. The SIMD path (AVX2/FMA, AVX-512 where the build enables it) is chosen at run
 * time when the CPU has it; LOOM_CPU_SCALAR=1 in the environment, or this call, forces the
 * portable scalar path (tests run both). */
void loom_cpu_set_scalar(bool scalar);
bool loom_cpu_get_scalar(void);
/* A short description of the SIMD features in use, e.g. "AVX512 FMA F16C". */
const char * loom_cpu_features(void);

#ifdef __cplusplus
}
#endif

#endif
