/* backend-impl.h -- the vtables behind include/loom-backend.h; implemented by each device. */
#ifndef LOOM_BACKEND_IMPL_H
#define LOOM_BACKEND_IMPL_H

#include "loom-backend.h"
#include "core/loom-internal.h"

/* ---------------------------------------------------------------- buffer type */
struct loom_backend_buffer_type_i {
    const char * (*get_name)(loom_backend_buffer_type_t buft);
    /* NULL (logged) on failure. 'size' may be 0. */
    loom_backend_buffer_t (*alloc_buffer)(loom_backend_buffer_type_t buft, size_t size);
    size_t (*get_alignment)(loom_backend_buffer_type_t buft);
    /* (optional) defaults to SIZE_MAX */
    size_t (*get_max_size)(loom_backend_buffer_type_t buft);
    /* (optional) defaults to loom_nbytes(tensor) */
    size_t (*get_alloc_size)(loom_backend_buffer_type_t buft, const struct loom_tensor * tensor);
    /* (optional) defaults to false */
    bool (*is_host)(loom_backend_buffer_type_t buft);
};

struct loom_backend_buffer_type {
    struct loom_backend_buffer_type_i iface;
    loom_backend_dev_t device;
    void * context;
};

/* ---------------------------------------------------------------- buffer
 * Tensor arguments are never views here: the wrappers resolve views to their base and pass the
 * base with the offset adjusted, so implementations only see real storage. 'offset' is bytes
 * from tensor->data. */
struct loom_backend_buffer_i {
    /* (optional) frees the context and the memory (never wrapped caller memory) */
    void (*free_buffer)(loom_backend_buffer_t buffer);
    void * (*get_base)(loom_backend_buffer_t buffer);
    /* (optional) called after a tensor is placed; may fail (e.g. failure injection) */
    enum loom_status (*init_tensor)(loom_backend_buffer_t buffer, struct loom_tensor * tensor);
    enum loom_status (*memset_tensor)(loom_backend_buffer_t buffer, struct loom_tensor * tensor, uint8_t value, size_t offset, size_t size);
    enum loom_status (*set_tensor)(loom_backend_buffer_t buffer, struct loom_tensor * tensor, const void * data, size_t offset, size_t size);
    enum loom_status (*get_tensor)(loom_backend_buffer_t buffer, const struct loom_tensor * tensor, void * data, size_t offset, size_t size);
    /* (optional) copy loom_nbytes(src) bytes into 'dst' (which lives in this buffer) when it can
     * reach 'src' directly (same device family); returns false when not supported -- the caller
     * then stages through host memory. Both are flattened (loom_tensor_flatten): never views. */
    bool (*cpy_tensor)(loom_backend_buffer_t buffer, const struct loom_tensor * src, struct loom_tensor * dst);
    enum loom_status (*clear)(loom_backend_buffer_t buffer, uint8_t value);
};

struct loom_backend_buffer {
    struct loom_backend_buffer_i iface;
    loom_backend_buffer_type_t buft;
    void * context;
    size_t size;
    enum loom_backend_buffer_usage usage;
    /* start of the wrapped host span when made by loom_backend_dev_buffer_from_host_ptr, else NULL
     * (set by the generic wrapper; see loom_backend_buffer_host_ptr_addr) */
    const void * host_span;
};

/* Creates a buffer object (the implementation's memory lives in 'context'). NULL on OOM. */
/* (LOOM_API: the CUDA module, libloom-cuda.so, creates its buffers through it) */
LOOM_API loom_backend_buffer_t loom_backend_buffer_init(loom_backend_buffer_type_t buft, struct loom_backend_buffer_i iface,
                                               void * context, size_t size);

/* ---------------------------------------------------------------- backend (a stream) */
struct loom_backend_i {
    const char * (*get_name)(loom_backend_t backend);
    void (*free)(loom_backend_t backend);
    /* (optional) async copies; NULL means the wrappers copy synchronously. The wrappers check the
     * range and pass storage (never a view) that lives in a buffer of this backend's device;
     * anything else goes the synchronous way. */
    enum loom_status (*set_tensor_async)(loom_backend_t backend, struct loom_tensor * tensor, const void * data, size_t offset, size_t size);
    enum loom_status (*get_tensor_async)(loom_backend_t backend, const struct loom_tensor * tensor, void * data, size_t offset, size_t size);
    /* (optional) returns false when it cannot do this pair; the wrapper then copies synchronously.
     * Called on 'backend_dst' with flattened tensors; 'dst' lives on backend_dst's device. The copy
     * must come after the work queued on 'backend_src' so far (the scheduler also waits for it) and
     * before what is queued on 'backend_dst' after it. */
    bool (*cpy_tensor_async)(loom_backend_t backend_src, loom_backend_t backend_dst, const struct loom_tensor * src, struct loom_tensor * dst);
    /* (optional) defaults to a no-op */
    enum loom_status (*synchronize)(loom_backend_t backend);
    /* may return before the work completes when the device is asynchronous; the wrapper has checked
     * that every node and source lives in memory the device supports (supports_buft) */
    enum loom_status (*graph_compute)(loom_backend_t backend, struct loom_cgraph * graph);
    /* (optional) events; required when the device's caps.events is true */
    enum loom_status (*event_record)(loom_backend_t backend, loom_backend_event_t event);
    enum loom_status (*event_wait)(loom_backend_t backend, loom_backend_event_t event);
};

struct loom_backend {
    struct loom_backend_i iface;
    loom_backend_dev_t device;
    void * context;
};

/* ---------------------------------------------------------------- device */
struct loom_backend_device_i {
    const char * (*get_name)(loom_backend_dev_t dev);
    const char * (*get_description)(loom_backend_dev_t dev);
    void (*get_memory)(loom_backend_dev_t dev, size_t * free, size_t * total);
    enum loom_backend_dev_type (*get_type)(loom_backend_dev_t dev);
    void (*get_caps)(loom_backend_dev_t dev, struct loom_backend_dev_caps * caps);
    loom_backend_t (*init_backend)(loom_backend_dev_t dev, const char * params);
    loom_backend_buffer_type_t (*get_buffer_type)(loom_backend_dev_t dev);
    /* (optional) pinned host memory */
    loom_backend_buffer_type_t (*get_host_buffer_type)(loom_backend_dev_t dev);
    /* (optional) wraps one page-aligned span [ptr, ptr + size) that is <= the buffer type's max_size;
     * the generic wrapper does the page alignment and the overlapping chunking. The address a host
     * byte gets must not depend on the chunk: addr(p) = p + a fixed offset (0 for host devices), so
     * that overlapping chunks agree and the whole span maps linearly from the first chunk's base. */
    loom_backend_buffer_t (*buffer_from_host_ptr)(loom_backend_dev_t dev, void * ptr, size_t size);
    bool (*supports_op)(loom_backend_dev_t dev, const struct loom_tensor * op);
    bool (*supports_buft)(loom_backend_dev_t dev, loom_backend_buffer_type_t buft);
    /* (optional) events */
    loom_backend_event_t (*event_new)(loom_backend_dev_t dev);
    void (*event_free)(loom_backend_dev_t dev, loom_backend_event_t event);
    enum loom_status (*event_synchronize)(loom_backend_dev_t dev, loom_backend_event_t event);
};

struct loom_backend_device {
    struct loom_backend_device_i iface;
    void * context;
};

struct loom_backend_event {
    loom_backend_dev_t device;
    void * context;
};

/* ---------------------------------------------------------------- helpers for implementations */

/* The storage a tensor uses: its base when it is a view. 'offs' receives the view's byte offset
 * from the base's data (0 for a non-view). */
static inline struct loom_tensor * loom_tensor_storage(const struct loom_tensor * t, size_t * offs) {
    if (t->view_src) {
        *offs = t->view_offs;
        return t->view_src;
    }
    *offs = 0;
    return (struct loom_tensor *)t;
}

/* A copy of 't' that names its storage directly: for a view, the base's buffer and the view's
 * own address (base data + 'view_offs'), with 'view_src' cleared, so that an implementation that
 * is handed it sees no view. Meaningful only while the base is allocated. */
static inline struct loom_tensor loom_tensor_flatten(const struct loom_tensor * t) {
    struct loom_tensor f = *t;
    if (t->view_src) {
        f.buffer = t->view_src->buffer;
        f.data = t->view_src->data ? (uint8_t *)t->view_src->data + t->view_offs : NULL;
        f.view_src = NULL;
        f.view_offs = 0;
    }
    return f;
}

/* Checks that bytes [offset, offset + size) of 't' exist and that its storage is allocated; on
 * success '*base' is the storage (the base for a view) and '*base_offs' the bytes from its data.
 * Logs (prefixed with 'what') and returns LOOM_ERR_INVALID_ARG otherwise. */
enum loom_status loom_tensor_resolve_range(const struct loom_tensor * t, size_t offset, size_t size, const char * what,
                                           struct loom_tensor ** base, size_t * base_offs);

/* Bytes per page of host memory (sysconf), cached. */
size_t loom_page_size(void);

/* The registry's built-in device lists; each returns the number of devices it added to 'devs'
 * (at most 'max'). Absent backends provide a stub that returns 0. */
size_t loom_cuda_register_devices(loom_backend_dev_t * devs, size_t max);
loom_backend_dev_t loom_cpu_device(void);

#endif
