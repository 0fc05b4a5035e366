/* device.c -- generic wrappers for devices, backends and events. */
#include "backend-impl.h"

#include <stdint.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- devices */

const char * loom_backend_dev_name(loom_backend_dev_t dev) { return dev->iface.get_name(dev); }
const char * loom_backend_dev_description(loom_backend_dev_t dev) { return dev->iface.get_description(dev); }
void loom_backend_dev_memory(loom_backend_dev_t dev, size_t * free, size_t * total) { dev->iface.get_memory(dev, free, total); }
enum loom_backend_dev_type loom_backend_dev_type(loom_backend_dev_t dev) { return dev->iface.get_type(dev); }

void loom_backend_dev_get_props(loom_backend_dev_t dev, struct loom_backend_dev_props * props) {
    props->name = loom_backend_dev_name(dev);
    props->description = loom_backend_dev_description(dev);
    loom_backend_dev_memory(dev, &props->memory_free, &props->memory_total);
    props->type = loom_backend_dev_type(dev);
    props->caps = (struct loom_backend_dev_caps){0};
    dev->iface.get_caps(dev, &props->caps);
}

loom_backend_t loom_backend_dev_init(loom_backend_dev_t dev, const char * params) { return dev->iface.init_backend(dev, params); }
loom_backend_buffer_type_t loom_backend_dev_buffer_type(loom_backend_dev_t dev) { return dev->iface.get_buffer_type(dev); }

loom_backend_buffer_type_t loom_backend_dev_host_buffer_type(loom_backend_dev_t dev) {
    return dev->iface.get_host_buffer_type ? dev->iface.get_host_buffer_type(dev) : NULL;
}

bool loom_backend_dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) { return dev->iface.supports_op(dev, op); }
bool loom_backend_dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft) { return dev->iface.supports_buft(dev, buft); }

/* Zero-copy wrapping: the page-aligned span enclosing [ptr, ptr + size) is wrapped; when it is
 * larger than the buffer type's max_size it is cut into chunks of at most max_size that overlap
 * by 'max_tensor_size' bytes, so that every tensor of at most that size lies wholly in one chunk. */
loom_backend_buffer_t loom_backend_dev_buffer_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size) {
    if (!dev->iface.buffer_from_host_ptr) return NULL;
    size_t page = loom_page_size();
    uintptr_t start = (uintptr_t)ptr & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)ptr + size + page - 1) & ~(uintptr_t)(page - 1);
    size_t span = end - start;
    size_t max = loom_backend_buft_get_max_size(loom_backend_dev_buffer_type(dev));
    if (span <= max) return dev->iface.buffer_from_host_ptr(dev, (void *)start, span);

    if (max_tensor_size + page >= max) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot wrap host memory: a tensor of %zu bytes does not fit the maximum buffer size %zu",
                 loom_backend_dev_name(dev), max_tensor_size, max);
        return NULL;
    }
    size_t chunk = max & ~(page - 1);
    size_t step = (chunk - max_tensor_size) & ~(page - 1); /* chunks overlap by >= max_tensor_size */
    size_t n = 0;
    for (size_t off = 0;; off += step) {
        n++;
        if (off + chunk >= span) break;
    }
    loom_backend_buffer_t * parts = calloc(n, sizeof *parts);
    if (!parts) return NULL;
    size_t i = 0;
    for (size_t off = 0; i < n; off += step, i++) {
        size_t len = span - off < chunk ? span - off : chunk;
        parts[i] = dev->iface.buffer_from_host_ptr(dev, (void *)(start + off), len);
        if (!parts[i]) {
            for (size_t j = 0; j < i; j++) loom_backend_buffer_free(parts[j]);
            free(parts);
            return NULL;
        }
    }
    loom_backend_buffer_t multi = loom_backend_multi_buffer_new(parts, n);
    if (!multi) {
        for (size_t j = 0; j < n; j++) loom_backend_buffer_free(parts[j]);
    }
    free(parts);
    return multi;
}

/* ---------------------------------------------------------------- backends */

const char * loom_backend_name(loom_backend_t backend) { return backend->iface.get_name(backend); }

void loom_backend_free(loom_backend_t backend) {
    if (backend) backend->iface.free(backend);
}

loom_backend_dev_t loom_backend_get_device(loom_backend_t backend) { return backend->device; }
loom_backend_buffer_type_t loom_backend_get_default_buffer_type(loom_backend_t backend) { return loom_backend_dev_buffer_type(backend->device); }
loom_backend_buffer_t loom_backend_alloc_buffer(loom_backend_t backend, size_t size) {
    return loom_backend_buft_alloc_buffer(loom_backend_get_default_buffer_type(backend), size);
}
bool loom_backend_supports_op(loom_backend_t backend, const struct loom_tensor * op) { return loom_backend_dev_supports_op(backend->device, op); }
bool loom_backend_supports_buft(loom_backend_t backend, loom_backend_buffer_type_t buft) { return loom_backend_dev_supports_buft(backend->device, buft); }

enum loom_status loom_backend_tensor_set_async(loom_backend_t backend, struct loom_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (!backend->iface.set_tensor_async) return loom_backend_tensor_set(tensor, data, offset, size);
    size_t n = loom_nbytes(tensor);
    if (offset > n || size > n - offset || !(tensor->view_src ? tensor->view_src->buffer : tensor->buffer)) {
        loom_log(LOOM_LOG_ERROR, "tensor_set_async: tensor '%s': bad range or no buffer", tensor->name);
        return LOOM_ERR_INVALID_ARG;
    }
    if (size == 0) return LOOM_OK;
    size_t offs;
    struct loom_tensor * base = loom_tensor_storage(tensor, &offs);
    return backend->iface.set_tensor_async(backend, base, data, offs + offset, size);
}

enum loom_status loom_backend_tensor_get_async(loom_backend_t backend, const struct loom_tensor * tensor, void * data, size_t offset, size_t size) {
    if (!backend->iface.get_tensor_async) return loom_backend_tensor_get(tensor, data, offset, size);
    size_t n = loom_nbytes(tensor);
    if (offset > n || size > n - offset || !(tensor->view_src ? tensor->view_src->buffer : tensor->buffer)) {
        loom_log(LOOM_LOG_ERROR, "tensor_get_async: tensor '%s': bad range or no buffer", tensor->name);
        return LOOM_ERR_INVALID_ARG;
    }
    if (size == 0) return LOOM_OK;
    size_t offs;
    struct loom_tensor * base = loom_tensor_storage(tensor, &offs);
    return backend->iface.get_tensor_async(backend, base, data, offs + offset, size);
}

enum loom_status loom_backend_tensor_copy_async(loom_backend_t backend_src, loom_backend_t backend_dst,
                                                const struct loom_tensor * src, struct loom_tensor * dst) {
    if (loom_nbytes(src) != loom_nbytes(dst)) {
        loom_log(LOOM_LOG_ERROR, "tensor_copy_async: '%s' and '%s' differ in size", src->name, dst->name);
        return LOOM_ERR_INVALID_ARG;
    }
    if (src == dst) return LOOM_OK;
    if (backend_dst->iface.cpy_tensor_async && backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst)) return LOOM_OK;
    /* synchronous fallback: finish what both streams have queued, then copy */
    enum loom_status st = loom_backend_synchronize(backend_src);
    if (st == LOOM_OK) st = loom_backend_synchronize(backend_dst);
    if (st == LOOM_OK) st = loom_backend_tensor_copy(src, dst);
    return st;
}

enum loom_status loom_backend_synchronize(loom_backend_t backend) {
    return backend->iface.synchronize ? backend->iface.synchronize(backend) : LOOM_OK;
}

enum loom_status loom_backend_graph_compute_async(loom_backend_t backend, struct loom_cgraph * graph) {
    return backend->iface.graph_compute(backend, graph);
}

enum loom_status loom_backend_graph_compute(loom_backend_t backend, struct loom_cgraph * graph) {
    enum loom_status st = loom_backend_graph_compute_async(backend, graph);
    enum loom_status st2 = loom_backend_synchronize(backend);
    return st != LOOM_OK ? st : st2;
}

/* ---------------------------------------------------------------- events */

loom_backend_event_t loom_backend_event_new(loom_backend_dev_t dev) {
    return dev && dev->iface.event_new ? dev->iface.event_new(dev) : NULL;
}

void loom_backend_event_free(loom_backend_event_t event) {
    if (event) event->device->iface.event_free(event->device, event);
}

enum loom_status loom_backend_event_record(loom_backend_event_t event, loom_backend_t backend) {
    if (!backend->iface.event_record) return loom_backend_synchronize(backend);
    return backend->iface.event_record(backend, event);
}

enum loom_status loom_backend_event_wait(loom_backend_t backend, loom_backend_event_t event) {
    if (!backend->iface.event_wait) return loom_backend_event_synchronize(event);
    return backend->iface.event_wait(backend, event);
}

enum loom_status loom_backend_event_synchronize(loom_backend_event_t event) {
    return event->device->iface.event_synchronize(event->device, event);
}
