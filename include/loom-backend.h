/* loom-backend.h -- the backend layer: registry -> device -> backend (a stream) -> buffer type -> buffer,
 * tensor data access, events, and the scheduler that splits one graph over several devices.
 *
 * Everything that holds tensor data goes through this interface. A tensor's 'data' is an address
 * in its buffer's address space: for host buffer types (is_host) it is a host pointer; for device
 * buffer types it is not, and must only be passed back to the buffer's own functions.
 *
 * Views: a view's storage is always its base's. Every function here that reads or writes a
 * tensor resolves a view through 'view_src' + 'view_offs'; no backend keeps per-tensor tables.
 */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_backend_buffer_type * loom_backend_buffer_type_t;
typedef struct loom_backend_buffer * loom_backend_buffer_t;
typedef struct loom_backend * loom_backend_t;
typedef struct loom_backend_device * loom_backend_dev_t;
typedef struct loom_backend_event * loom_backend_event_t;

/* ================================================================ buffer types */

/* The buffer type's name ("CPU", "CUDA0", "CUDA_Host", "sim0"); never NULL. */
LOOM_API const char * loom_backend_buft_name(loom_backend_buffer_type_t buft);
/* Allocates a buffer of 'size' bytes (0 is allowed and gives a valid empty buffer). Returns NULL
 * with a logged reason (device name, MiB asked and free) when the device is out of memory or
 * 'size' exceeds the type's max_size. */
LOOM_API loom_backend_buffer_t loom_backend_buft_alloc_buffer(loom_backend_buffer_type_t buft, size_t size);
/* Alignment (bytes, a power of two) of every tensor address the type hands out. */
LOOM_API size_t loom_backend_buft_get_alignment(loom_backend_buffer_type_t buft);
/* Largest single buffer in bytes; SIZE_MAX when unlimited. */
LOOM_API size_t loom_backend_buft_get_max_size(loom_backend_buffer_type_t buft);
/* Bytes 'tensor' needs in a buffer of this type, padding included (>= loom_nbytes). */
LOOM_API size_t loom_backend_buft_get_alloc_size(loom_backend_buffer_type_t buft, const struct loom_tensor * tensor);
/* True when the memory is ordinary host memory the CPU may read and write directly. */
LOOM_API bool loom_backend_buft_is_host(loom_backend_buffer_type_t buft);
LOOM_API loom_backend_dev_t loom_backend_buft_get_device(loom_backend_buffer_type_t buft);

/* ================================================================ buffers */

enum loom_backend_buffer_usage {
    LOOM_BACKEND_BUFFER_USAGE_ANY = 0,
    LOOM_BACKEND_BUFFER_USAGE_WEIGHTS,  /* holds model weights: the scheduler runs consumers where they live */
    LOOM_BACKEND_BUFFER_USAGE_COMPUTE,  /* holds graph intermediates */
    LOOM_BACKEND_BUFFER_USAGE_COUNT
};

/* Frees the buffer (and, for a multi-buffer, every part). Wrapped host memory is never freed. NULL is a no-op. */
LOOM_API void loom_backend_buffer_free(loom_backend_buffer_t buffer);
/* Base address (in the buffer's address space); NULL for an empty buffer. */
LOOM_API void * loom_backend_buffer_get_base(loom_backend_buffer_t buffer);
LOOM_API size_t loom_backend_buffer_get_size(loom_backend_buffer_t buffer);  /* bytes */
LOOM_API loom_backend_buffer_type_t loom_backend_buffer_get_type(loom_backend_buffer_t buffer);
LOOM_API bool loom_backend_buffer_is_host(loom_backend_buffer_t buffer);
LOOM_API void loom_backend_buffer_set_usage(loom_backend_buffer_t buffer, enum loom_backend_buffer_usage usage);
LOOM_API enum loom_backend_buffer_usage loom_backend_buffer_get_usage(loom_backend_buffer_t buffer);
/* Sets every byte of the buffer to 'value'. */
LOOM_API enum loom_status loom_backend_buffer_clear(loom_backend_buffer_t buffer, uint8_t value);
/* True when the buffer is a multi-buffer (a set of buffers freed together). */
LOOM_API bool loom_backend_buffer_is_multi(loom_backend_buffer_t buffer);
/* Combines 'n' buffers (plain buffers, all of one buffer type) into one handle that frees them
 * together and forwards usage/clear to every part; its size is the sum of theirs. Takes ownership
 * of the parts on success. Returns NULL, freeing nothing, when n is 0, a part is NULL, a
 * multi-buffer or of another type (logged), or on allocation failure. */
LOOM_API loom_backend_buffer_t loom_backend_multi_buffer_new(loom_backend_buffer_t * buffers, size_t n);
LOOM_API size_t loom_backend_multi_buffer_count(loom_backend_buffer_t buffer);  /* 1 for a plain buffer */
LOOM_API loom_backend_buffer_t loom_backend_multi_buffer_get(loom_backend_buffer_t buffer, size_t i);

/* Places a non-view 'tensor' at address 'addr' inside 'buffer' (addr from get_base + offset) and
 * lets the buffer initialise it. Errors: LOOM_ERR_INVALID_ARG when the tensor already has data
 * or [addr, addr + alloc_size) does not lie inside the buffer; the buffer's own init status. */
LOOM_API enum loom_status loom_backend_tensor_alloc(loom_backend_buffer_t buffer, struct loom_tensor * tensor, void * addr);
/* For a buffer made by loom_backend_dev_buffer_from_host_ptr: the address of the wrapped host byte
 * 'p' in the buffer's address space, to pass to loom_backend_tensor_alloc. It is 'p' itself on a
 * host device; a discrete device that reads host memory may hand out other addresses. Returns
 * NULL when 'p' is outside the wrapped (page-aligned) span or the buffer wraps no host memory. */
LOOM_API void * loom_backend_buffer_host_ptr_addr(loom_backend_buffer_t buffer, const void * p);
/* Gives a view the buffer and address of its base ('view_src' + 'view_offs'); the base must be
 * allocated. Needed for a view made before its base was allocated (views made afterwards, and
 * views in the context passed to loom_backend_alloc_ctx_tensors*, get them automatically).
 * Errors: LOOM_ERR_INVALID_ARG when 'tensor' is not a view, the base has no buffer or the view's
 * extent leaves it; the buffer's own init status (the view is then left as it was). */
LOOM_API enum loom_status loom_backend_view_init(struct loom_tensor * tensor);

/* ================================================================ tensor data
 * 'offset' and 'size' are bytes relative to the tensor's own data (for a view: from its first
 * element, within the base's storage). offset + size must not exceed loom_nbytes(tensor):
 * otherwise LOOM_ERR_INVALID_ARG and nothing is touched. The tensor (or its base) must have a
 * buffer. These copy raw bytes; for a non-contiguous tensor the bytes between elements are
 * included. They complete before returning. */

/* Host -> tensor, tensor -> host, fill with a byte value: errors LOOM_ERR_INVALID_ARG as above,
 * or the device's status (LOOM_ERR_BACKEND) when the copy fails. */
LOOM_API enum loom_status loom_backend_tensor_set(struct loom_tensor * tensor, const void * data, size_t offset, size_t size);
LOOM_API enum loom_status loom_backend_tensor_get(const struct loom_tensor * tensor, void * data, size_t offset, size_t size);
LOOM_API enum loom_status loom_backend_tensor_memset(struct loom_tensor * tensor, uint8_t value, size_t offset, size_t size);
/* Copies all loom_nbytes(src) bytes of 'src' into 'dst' (equal nbytes required), across any two
 * buffers: directly when the buffers allow, else staged through host memory. */
LOOM_API enum loom_status loom_backend_tensor_copy(const struct loom_tensor * src, struct loom_tensor * dst);

/* ================================================================ devices */

enum loom_backend_dev_type {
    LOOM_BACKEND_DEV_TYPE_CPU = 0,
    LOOM_BACKEND_DEV_TYPE_GPU,    /* a discrete device with its own memory */
    LOOM_BACKEND_DEV_TYPE_ACCEL,  /* an accelerator that works on host memory */
    LOOM_BACKEND_DEV_TYPE_COUNT
};

struct loom_backend_dev_caps {
    bool async;                 /* async set/get/copy on a backend's stream */
    bool host_buffer;           /* offers a pinned host buffer type */
    bool buffer_from_host_ptr;  /* can wrap caller-owned host memory zero-copy */
    bool events;                /* record/wait/synchronize events */
};

struct loom_backend_dev_props {
    const char * name;          /* registry name: "CPU", "CUDA0", "sim0" */
    const char * description;   /* e.g. the processor or GPU model */
    size_t memory_free;         /* bytes */
    size_t memory_total;        /* bytes */
    enum loom_backend_dev_type type;
    struct loom_backend_dev_caps caps;
};

/* Registry name ("CPU", "CUDA0", "sim0"), description, memory (bytes), type and capabilities. */
LOOM_API const char * loom_backend_dev_name(loom_backend_dev_t dev);
LOOM_API const char * loom_backend_dev_description(loom_backend_dev_t dev);
LOOM_API void loom_backend_dev_memory(loom_backend_dev_t dev, size_t * free, size_t * total);  /* bytes */
LOOM_API enum loom_backend_dev_type loom_backend_dev_type(loom_backend_dev_t dev);
LOOM_API void loom_backend_dev_get_props(loom_backend_dev_t dev, struct loom_backend_dev_props * props);
/* Creates a backend (a stream of work) on the device; 'params' is device-specific, may be NULL.
 * Returns NULL with a logged reason on failure. */
LOOM_API loom_backend_t loom_backend_dev_init(loom_backend_dev_t dev, const char * params);
/* The device's default (device-memory) buffer type. */
LOOM_API loom_backend_buffer_type_t loom_backend_dev_buffer_type(loom_backend_dev_t dev);
/* A pinned host buffer type for fast transfers, or NULL when the device has none. */
LOOM_API loom_backend_buffer_type_t loom_backend_dev_host_buffer_type(loom_backend_dev_t dev);
/* Wraps caller-owned host memory [ptr, ptr + size) as a buffer the device can read in place,
 * without copying. 'ptr' need not be page-aligned: the enclosing page-aligned span is wrapped.
 * When that span exceeds the device buffer type's max_size it is cut into chunks of at most
 * max_size that overlap by at least 'max_tensor_size' bytes (the largest tensor that will be
 * placed in it), and one multi-buffer is returned: every tensor of at most 'max_tensor_size'
 * bytes then lies wholly inside one chunk, and loom_backend_tensor_alloc picks that chunk.
 * Tensors are placed at the address of their host bytes, loom_backend_buffer_host_ptr_addr
 * (on a host device that is the host pointer itself). The buffer never frees the memory, and
 * writes to it only through set/memset/clear calls. Returns NULL (logged) when the device cannot
 * wrap host memory (caps.buffer_from_host_ptr false), 'ptr' is NULL or the range wraps around,
 * 'max_tensor_size' leaves no room for overlapping chunks under max_size, or the wrap fails. */
LOOM_API loom_backend_buffer_t loom_backend_dev_buffer_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size);
/* True when the device can compute 'op' (its type, shape and source layouts) with the sources
 * where they are. Never claims support it cannot deliver. */
LOOM_API bool loom_backend_dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op);
/* True when the device can read tensors that live in buffers of type 'buft'. */
LOOM_API bool loom_backend_dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft);

/* ================================================================ registry
 * Devices in priority order: GPUs (CUDA), then devices registered at run time
 * (loom_backend_register_device; the command line registers sim devices so), then the CPU, always
 * last and always present. */

/* Number of registered devices (at least 1: the CPU). */
LOOM_API size_t loom_backend_dev_count(void);
LOOM_API loom_backend_dev_t loom_backend_dev_get(size_t index);   /* NULL when out of range */
LOOM_API loom_backend_dev_t loom_backend_dev_by_name(const char * name);  /* case-insensitive; NULL when absent */
LOOM_API loom_backend_dev_t loom_backend_dev_by_type(enum loom_backend_dev_type type);  /* first of that type */
/* Registers an extra device ahead of the CPU (used by tests and the sim). The registry does not
 * take ownership. Returns LOOM_ERR_INVALID_ARG when a device of that name is already registered. */
LOOM_API enum loom_status loom_backend_register_device(loom_backend_dev_t dev);
/* Removes a device registered with loom_backend_register_device. */
LOOM_API void loom_backend_unregister_device(loom_backend_dev_t dev);
/* loom_backend_dev_init of the device named 'name'; NULL (logged) when absent or failing. */
LOOM_API loom_backend_t loom_backend_init_by_name(const char * name, const char * params);

/* ================================================================ backends */

/* The backend's name (its device's). */
LOOM_API const char * loom_backend_name(loom_backend_t backend);
LOOM_API void loom_backend_free(loom_backend_t backend);   /* NULL is a no-op */
LOOM_API loom_backend_dev_t loom_backend_get_device(loom_backend_t backend);
LOOM_API loom_backend_buffer_type_t loom_backend_get_default_buffer_type(loom_backend_t backend);
LOOM_API loom_backend_buffer_t loom_backend_alloc_buffer(loom_backend_t backend, size_t size);
LOOM_API bool loom_backend_supports_op(loom_backend_t backend, const struct loom_tensor * op);
LOOM_API bool loom_backend_supports_buft(loom_backend_t backend, loom_backend_buffer_type_t buft);

/* Queue a copy on the backend's stream; without async support, or for a tensor that lives on
 * another device, these complete synchronously. The host memory must stay valid until
 * loom_backend_synchronize. Same range rules as above. */
LOOM_API enum loom_status loom_backend_tensor_set_async(loom_backend_t backend, struct loom_tensor * tensor, const void * data, size_t offset, size_t size);
LOOM_API enum loom_status loom_backend_tensor_get_async(loom_backend_t backend, const struct loom_tensor * tensor, void * data, size_t offset, size_t size);
/* Copies 'src' (living where 'backend_src' can read) into 'dst' (on 'backend_dst'), queued on the
 * destination stream after 'backend_src' work when both support it, else synchronously. */
LOOM_API enum loom_status loom_backend_tensor_copy_async(loom_backend_t backend_src, loom_backend_t backend_dst,
                                                const struct loom_tensor * src, struct loom_tensor * dst);
/* Waits until all queued work on the stream has completed; returns the first error it reported. */
LOOM_API enum loom_status loom_backend_synchronize(loom_backend_t backend);
/* Computes every node of 'graph' in order. All tensors (nodes, sources, views) must already have
 * data in buffers this backend can read (loom_backend_supports_buft; context memory counts as host
 * memory), and every view must address its base's storage (loom_backend_view_init): otherwise
 * LOOM_ERR_INVALID_ARG naming the tensor, and nothing is computed. Returns
 * LOOM_ERR_UNSUPPORTED naming the node when an op is not supported; the device's status on
 * failure. Completes before returning. */
LOOM_API enum loom_status loom_backend_graph_compute(loom_backend_t backend, struct loom_cgraph * graph);
/* As loom_backend_graph_compute, but may return before the work is done (see synchronize). */
LOOM_API enum loom_status loom_backend_graph_compute_async(loom_backend_t backend, struct loom_cgraph * graph);

/* Events: markers in a stream. Devices without events (caps.events false) return NULL from
 * event_new; the functions below accept that NULL: record synchronizes the backend (so the work
 * is done), wait and synchronize then return LOOM_OK at once. */
LOOM_API loom_backend_event_t loom_backend_event_new(loom_backend_dev_t dev);
LOOM_API void loom_backend_event_free(loom_backend_event_t event);
LOOM_API enum loom_status loom_backend_event_record(loom_backend_event_t event, loom_backend_t backend);
/* Makes 'backend' wait (on its stream, not the host) until 'event' has completed. */
LOOM_API enum loom_status loom_backend_event_wait(loom_backend_t backend, loom_backend_event_t event);
/* Blocks the host until 'event' has completed. */
LOOM_API enum loom_status loom_backend_event_synchronize(loom_backend_event_t event);

/* ================================================================ placing a context's tensors */

/* Places every tensor of 'ctx' that has no data yet in buffers of type 'buft', in creation order,
 * each at an offset aligned to the type's alignment and taking loom_backend_buft_get_alloc_size
 * bytes; views in 'ctx' are then initialised from their base (which may live in another context).
 * Tensors go into one buffer while they fit under the type's max_size; then another is opened, so
 * no tensor straddles two buffers. Returns one handle over the set (a multi-buffer when more than
 * one was needed), or NULL with LOOM_OK when there was nothing to allocate.
 * Errors (NULL, logged, 'status' set when non-NULL; every tensor is left as it was and nothing is
 * leaked): LOOM_ERR_TOO_LARGE when one tensor alone exceeds max_size (names the tensor, its size
 * and the limit); LOOM_ERR_OOM when a buffer cannot be allocated; LOOM_ERR_INVALID_ARG when a view's
 * base has no storage; a buffer's init_tensor status. */
LOOM_API loom_backend_buffer_t loom_backend_alloc_ctx_tensors_from_buft(struct loom_context * ctx, loom_backend_buffer_type_t buft,
                                                               enum loom_status * status);
LOOM_API loom_backend_buffer_t loom_backend_alloc_ctx_tensors(struct loom_context * ctx, loom_backend_t backend, enum loom_status * status);

/* ================================================================ scheduler
 * Splits one graph over several backends. Backends are given in priority order, the CPU last
 * (it can run anything). Assignment rules, in order: a node the user pinned stays; a node that
 * uses a weight runs where the weight's buffer lives if that device supports the op; a node whose
 * source already lives on a backend follows it when supported; the assignment spreads to
 * neighbouring nodes; an op a backend does not support falls to the next backend that does.
 * A matrix product of at least 32 columns (env LOOM_SCHED_OFFLOAD_BATCH; 0 = off) whose weight
 * lives with the CPU runs on the first GPU-type backend, the weight copied over as a split input
 * (prompt processing with partial offload). A new split starts where the backend changes; each split input living elsewhere gets a copy on
 * the split's backend (sized by the view's real byte extent). Results equal a CPU-only run.
 *
 * Lifecycle: reserve (optional, with the largest graph) -> for each step: alloc_graph -> set inputs
 * -> graph_compute. Computing a graph other than the one last allocated re-plans it first; the same
 * graph can be computed any number of times.
 *
 * Memory: each backend's intermediates are placed by a graph allocator (loom-alloc.h) in that
 * backend's compute buffer, by lifetime. Inputs are freed after their last use like any other
 * intermediate, so set them before every compute. A graph's tensors keep their memory until the
 * scheduler allocates another graph: read outputs first. "Another graph" is detected from the graph
 * pointer and a signature of its nodes (ops, shapes, strides, sources, flags, pre-placed memory).
 * Errors of alloc_graph/reserve/graph_compute (logged): LOOM_ERR_UNSUPPORTED when no backend can run
 * a node or a node writes into memory its backend cannot reach; LOOM_ERR_TOO_LARGE when a tensor
 * exceeds a buffer type's max_size; LOOM_ERR_OOM (nothing leaked, no tensor of the graph left
 * pointing into freed memory); graph_compute also returns the backends' failures.
 * The design (splits, copies of split inputs, assignment spreading) follows ggml's
 * ggml_backend_sched; the code is Loom's own (src/backend/sched*.c). */

typedef struct loom_backend_sched * loom_backend_sched_t;

/* 'bufts' may be NULL (each backend's default buffer type). 'graph_size' is the largest number
 * of nodes a graph will have (a hint: tables grow as needed). Returns NULL (logged) when a backend
 * cannot use its buffer type, on more than 16 backends, or out of host memory. */
LOOM_API loom_backend_sched_t loom_backend_sched_new(loom_backend_t * backends, loom_backend_buffer_type_t * bufts,
                                            int n_backends, size_t graph_size);
LOOM_API void loom_backend_sched_free(loom_backend_sched_t sched);
/* Plans compute memory for 'graph' (typically the largest one) and allocates the buffers. */
LOOM_API enum loom_status loom_backend_sched_reserve(loom_backend_sched_t sched, struct loom_cgraph * graph);
/* Assigns, splits and allocates 'graph'; afterwards inputs can be set with loom_backend_tensor_set. */
LOOM_API enum loom_status loom_backend_sched_alloc_graph(loom_backend_sched_t sched, struct loom_cgraph * graph);
/* Computes 'graph' (allocating it first when it is not the graph last allocated) and waits. */
LOOM_API enum loom_status loom_backend_sched_graph_compute(loom_backend_sched_t sched, struct loom_cgraph * graph);
/* Forgets the last graph's assignment (pins are kept until reset too). */
LOOM_API void loom_backend_sched_reset(loom_backend_sched_t sched);
/* Pins 'node' to 'backend' for the next alloc_graph. */
LOOM_API void loom_backend_sched_set_tensor_backend(loom_backend_sched_t sched, struct loom_tensor * node, loom_backend_t backend);
LOOM_API loom_backend_t loom_backend_sched_get_tensor_backend(loom_backend_sched_t sched, struct loom_tensor * node);
LOOM_API int loom_backend_sched_get_n_backends(loom_backend_sched_t sched);
LOOM_API loom_backend_t loom_backend_sched_get_backend(loom_backend_sched_t sched, int i);
LOOM_API int loom_backend_sched_get_n_splits(loom_backend_sched_t sched);   /* of the last graph */
/* Graphs planned so far (assigned, split and placed anew; a compute that replays the last plan adds none). */
LOOM_API int64_t loom_backend_sched_get_n_plans(loom_backend_sched_t sched);
LOOM_API int loom_backend_sched_get_n_copies(loom_backend_sched_t sched);   /* inputs copied per compute */
LOOM_API size_t loom_backend_sched_get_copy_bytes(loom_backend_sched_t sched);  /* bytes copied per compute */
/* Bytes of the compute buffer planned for 'backend'. */
LOOM_API size_t loom_backend_sched_get_buffer_size(loom_backend_sched_t sched, loom_backend_t backend);
/* Sum of all intermediate tensors' sizes on 'backend' without reuse (the naive plan), bytes. */
LOOM_API size_t loom_backend_sched_get_naive_size(loom_backend_sched_t sched, loom_backend_t backend);

/* ================================================================ collectives
 * A communicator joins n backends (ranks 0..n-1) for an all-reduce: every rank holds an F32 tensor
 * of the same shape and gets the element-wise sum of all of them. Two implementations:
 *   NCCL     every backend a CUDA backend and the CUDA module built with NCCL (ncclAllReduce,
 *            queued on each backend's stream inside one group; NVLink / PCIe peer paths are NCCL's);
 *   host     any other backends (sim devices in tests): each rank's stream is synchronized, the
 *            partial sums are copied to host memory, added in F32 in rank order, and copied back.
 * CUDA backends without NCCL get no communicator: Loom has no collective of its own for GPUs.
 * The scheduler runs LOOM_OP_ALL_REDUCE nodes through the communicator set on it. */
typedef struct loom_backend_comm * loom_backend_comm_t;

/* A communicator over backends[0..n) (2..16, each at most once). Returns NULL (logged) for CUDA
 * backends when the CUDA module has no NCCL ("-sm row on CUDA devices needs NCCL"), for a mix of
 * CUDA and other backends, a bad count, or when NCCL fails to set up. */
LOOM_API loom_backend_comm_t loom_backend_comm_new(loom_backend_t * backends, int n);
LOOM_API void loom_backend_comm_free(loom_backend_comm_t comm);   /* NULL is a no-op */
/* "NCCL" or "host". */
LOOM_API const char * loom_backend_comm_name(loom_backend_comm_t comm);
LOOM_API int loom_backend_comm_n_ranks(loom_backend_comm_t comm);
/* dst[r] = sum over ranks of src[r], for F32 tensors of equal shape, contiguous, src[r] and dst[r]
 * in memory of rank r's device (src[r] == dst[r] is allowed: in place). NCCL queues the operation
 * on the ranks' streams (it is complete after loom_backend_synchronize of each); the host one is
 * complete on return. Errors (logged): LOOM_ERR_INVALID_ARG (types, shapes, strides), the copies' or
 * NCCL's failures (LOOM_ERR_BACKEND). */
LOOM_API enum loom_status loom_backend_comm_all_reduce(loom_backend_comm_t comm, struct loom_tensor * const * src, struct loom_tensor * const * dst);
/* The scheduler runs each LOOM_OP_ALL_REDUCE node of rank r (loom_all_reduce) on backend r of
 * 'comm', all ranks of one node group at once; 'comm' must outlive the scheduler's use of it.
 * Its backends must be among the scheduler's. */
LOOM_API void loom_backend_sched_set_comm(loom_backend_sched_t sched, loom_backend_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_BACKEND_H */
