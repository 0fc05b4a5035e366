/* loom-cpu.h -- the CPU device: host buffers, zero-copy wrapping of host memory, multithreaded compute. */
#ifndef LOOM_CPU_H
#define LOOM_CPU_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend on the CPU device (same as loom_backend_dev_init(loom_backend_dev_by_name("CPU"), NULL)). */
LOOM_API loom_backend_t loom_backend_cpu_init(void);
LOOM_API bool loom_backend_is_cpu(loom_backend_t backend);
/* Threads used by graph_compute (>= 1); default: the number of online processors. */
LOOM_API void loom_backend_cpu_set_n_threads(loom_backend_t backend, int n_threads);
LOOM_API int loom_backend_cpu_get_n_threads(loom_backend_t backend);
/* Host memory aligned to 64 bytes; is_host. */
LOOM_API loom_backend_buffer_type_t loom_backend_cpu_buffer_type(void);
/* Wraps caller-owned host memory without copying (never freed by the buffer). */
LOOM_API loom_backend_buffer_t loom_backend_cpu_buffer_from_ptr(void * ptr, size_t size);
/* Asks the kernel to back the 2 MiB-aligned part of [addr, addr + size) with transparent huge
 * pages (madvise MADV_HUGEPAGE): for memory streamed once per token (weights, KV cache), where
 * 4 KiB pages cost a TLB miss every 4 KiB. A hint: pages already present keep their size (a file
 * mapping is backed by what the page cache holds; anonymous memory should be advised before it is
 * first written), and the memory works the same without it. CPU buffers of 2 MiB or more start
 * 2 MiB-aligned, so all of one can be advised. Returns the bytes advised: 0 where the range holds
 * no aligned 2 MiB or the kernel has no transparent huge pages. */
LOOM_API size_t loom_cpu_advise_huge_pages(void * addr, size_t size);

/* Computes 'graph' directly on host data (tensors of a context created with no_alloc = false, or
 * in host buffers) with 'n_threads' threads (< 1 counts as 1).
 *
 * Threading: one run of a persistent worker team for the whole graph (its threads sleep between
 * graphs; a call made while another thread's graph holds the team runs on the calling thread
 * alone); every node is split among the threads by output rows (MUL_MAT: by blocks of weight
 * rows, in whole micro-tiles) and followed by one barrier. No sum is ever split between threads
 * and every result element is computed by code that depends only on the node's shapes, so results
 * are bitwise identical for any thread count. View ops (VIEW, RESHAPE, PERMUTE, TRANSPOSE) and
 * empty results are no-ops. Scratch memory (converted activations, packed weight panels, converted
 * rows) is sized for the largest node and allocated once per call (a cached buffer is reused
 * across calls).
 *
 * Errors (logged, naming the node; nothing is computed): LOOM_ERR_UNSUPPORTED for an op/type/layout
 * combination the CPU does not implement (see loom_cpu_supports_op); LOOM_ERR_INVALID_ARG when a
 * tensor has no data or lives in a buffer that is not host memory; LOOM_ERR_OOM when the scratch
 * memory cannot be allocated. */
LOOM_API enum loom_status loom_cpu_graph_compute(struct loom_cgraph * graph, int n_threads);
/* True when the CPU kernels implement 'op' with its sources' types and layouts: every op of loom.h
 * with the types documented there (F32/F16/BF16, I32 ids/positions, I32->I32 copies), sources of
 * any strides (transposed, permuted, strided views), results with dense rows (any strides for CPY).
 * Views and NONE are always supported (they need no work). */
LOOM_API bool loom_cpu_supports_op(const struct loom_tensor * op);

/* Kernel paths. SIMD kernels (AVX-512 with F16C/FMA, plus AVX512-BF16 vdpbf16ps for BF16 weights;
 * AVX2/FMA/F16C as the fallback) are compiled with function target attributes, so every x86-64
 * build contains them whatever its -march, and one is selected at run time by
 * __builtin_cpu_supports/CPUID on first use. The portable scalar path is always available:
 * loom_cpu_set_scalar(true) forces it. The environment variable LOOM_CPU_ISA=avx2|avx512|scalar
 * names the table instead (tests run every path; avx512 named also keeps one-column products on
 * the 512-bit kernels, which AMD processors otherwise leave for the AVX2 ones); another value is
 * ignored with a warning. Not thread-safe against a concurrent graph compute. */
LOOM_API void loom_cpu_set_scalar(bool scalar);
LOOM_API bool loom_cpu_get_scalar(void);
/* A short constant description of the kernels in use: "AVX512 FMA F16C BF16", "AVX2 FMA F16C",
 * "scalar". */
LOOM_API const char * loom_cpu_features(void);

#ifdef __cplusplus
}
#endif

#endif
