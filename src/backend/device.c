/* device.c -- generic wrappers for devices, backends and events. */
#include "backend-impl.h"
#include "loom-cpu.h"

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

/* Frees parts [0, n) of a wrap that could not be completed. */
static void free_parts(loom_backend_buffer_t * parts, size_t n) {
    for (size_t i = 0; i < n; i++) loom_backend_buffer_free(parts[i]);
    free(parts);
}

/* Zero-copy wrapping: the page-aligned span enclosing [ptr, ptr + size) is wrapped; when it is
 * larger than the buffer type's max_size it is cut into chunks of at most max_size that start
 * 'step' bytes apart, step <= chunk - max_tensor_size. A tensor of at most max_tensor_size bytes
 * starting at span offset a then lies wholly in chunk floor(a / step) (a - i*step < step, so it
 * ends before i*step + chunk), or in the last chunk, which reaches the end of the span. */
loom_backend_buffer_t loom_backend_dev_buffer_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size) {
    const char * name = loom_backend_dev_name(dev);
    if (!dev->iface.buffer_from_host_ptr) {
        loom_log(LOOM_LOG_ERROR, "%s: the device cannot wrap host memory", name);
        return NULL;
    }
    size_t page = loom_page_size();
    uintptr_t p = (uintptr_t)ptr;
    if (!ptr || size > UINTPTR_MAX - p || p + size > UINTPTR_MAX - (page - 1)) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot wrap host memory: bad range (%p, %zu bytes)", name, ptr, size);
        return NULL;
    }
    uintptr_t start = p & ~(uintptr_t)(page - 1);
    uintptr_t end = (p + size + page - 1) & ~(uintptr_t)(page - 1);
    size_t span = end - start;
    size_t max = loom_backend_buft_get_max_size(loom_backend_dev_buffer_type(dev));
    if (span <= max) {
        loom_backend_buffer_t b = dev->iface.buffer_from_host_ptr(dev, (void *)start, span);
        if (b) b->host_span = (const void *)start;
        return b;
    }

    size_t chunk = max & ~(page - 1);
    size_t step = chunk > max_tensor_size ? (chunk - max_tensor_size) & ~(page - 1) : 0;
    if (step == 0) {
        loom_log(LOOM_LOG_ERROR,
                 "%s: cannot wrap %.2f MiB of host memory: tensors of up to %zu bytes need chunks that overlap by that much, "
                 "which does not leave a page to advance under the maximum buffer size of %zu bytes",
                 name, span / 1048576.0, max_tensor_size, max);
        return NULL;
    }
    size_t n = 1 + (span > chunk ? (span - chunk + step - 1) / step : 0);
    loom_backend_buffer_t * parts = calloc(n, sizeof *parts);
    if (!parts) return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t off = i * step;
        size_t len = span - off < chunk ? span - off : chunk;
        parts[i] = dev->iface.buffer_from_host_ptr(dev, (void *)(start + off), len);
        if (!parts[i]) {
            free_parts(parts, i);
            return NULL;
        }
        parts[i]->host_span = (const void *)(start + off);
    }
    loom_backend_buffer_t multi = loom_backend_multi_buffer_new(parts, n);
    if (!multi) {
        free_parts(parts, n);
        return NULL;
    }
    free(parts);
    multi->size = span; /* the parts overlap: the multi-buffer spans the wrapped memory once */
    multi->host_span = (const void *)start;
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

/* True when the async slots of 'backend' may be handed the storage 'base': it lives on the
 * backend's own device (anything else goes through the synchronous path). */
static bool on_device(loom_backend_t backend, const struct loom_tensor * base) {
    return loom_backend_buft_get_device(base->buffer->buft) == backend->device;
}

enum loom_status loom_backend_tensor_set_async(loom_backend_t backend, struct loom_tensor * tensor, const void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = loom_tensor_resolve_range(tensor, offset, size, "tensor_set_async", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    if (!backend->iface.set_tensor_async || !on_device(backend, base)) {
        return base->buffer->iface.set_tensor(base->buffer, base, data, offs, size);
    }
    return backend->iface.set_tensor_async(backend, base, data, offs, size);
}

enum loom_status loom_backend_tensor_get_async(loom_backend_t backend, const struct loom_tensor * tensor, void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = loom_tensor_resolve_range(tensor, offset, size, "tensor_get_async", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    if (!backend->iface.get_tensor_async || !on_device(backend, base)) {
        return base->buffer->iface.get_tensor(base->buffer, base, data, offs, size);
    }
    return backend->iface.get_tensor_async(backend, base, data, offs, size);
}

enum loom_status loom_backend_tensor_copy_async(loom_backend_t backend_src, loom_backend_t backend_dst,
                                                const struct loom_tensor * src, struct loom_tensor * dst) {
    size_t n = loom_nbytes(src);
    if (n != loom_nbytes(dst)) {
        loom_log(LOOM_LOG_ERROR, "tensor_copy_async: '%s' has %zu bytes, '%s' has %zu", src->name, n, dst->name, loom_nbytes(dst));
        return LOOM_ERR_INVALID_ARG;
    }
    if (n == 0 || src == dst) return LOOM_OK;
    struct loom_tensor *sb, *db;
    size_t so, dofs;
    enum loom_status st = loom_tensor_resolve_range(src, 0, n, "tensor_copy_async", &sb, &so);
    if (st == LOOM_OK) st = loom_tensor_resolve_range(dst, 0, n, "tensor_copy_async", &db, &dofs);
    if (st != LOOM_OK) return st;
    if (backend_dst->iface.cpy_tensor_async && on_device(backend_dst, db)) {
        struct loom_tensor s = loom_tensor_flatten(src), d = loom_tensor_flatten(dst);
        if (backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, &s, &d)) return LOOM_OK;
    }
    /* synchronous fallback: finish what both streams have queued, then copy */
    st = loom_backend_synchronize(backend_src);
    if (st == LOOM_OK) st = loom_backend_synchronize(backend_dst);
    if (st == LOOM_OK) st = loom_backend_tensor_copy(src, dst);
    return st;
}

enum loom_status loom_backend_synchronize(loom_backend_t backend) {
    return backend->iface.synchronize ? backend->iface.synchronize(backend) : LOOM_OK;
}

/* Whether 'dev' can read the storage of 't': memory in a buffer of a type it supports, or context
 * memory (host memory, readable when the device supports the CPU's host buffer type). Logs why not. */
static bool readable(loom_backend_dev_t dev, const struct loom_tensor * t, const struct loom_tensor * node) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    if (t != base && base->data && (t->buffer != base->buffer || t->data != (void *)((uint8_t *)base->data + offs))) {
        loom_log(LOOM_LOG_ERROR, "%s: view '%s' (of node '%s') does not address its base's storage: loom_backend_view_init it",
                 loom_backend_dev_name(dev), t->name, node->name);
        return false;
    }
    if (base->buffer) {
        if (loom_backend_dev_supports_buft(dev, base->buffer->buft)) return true;
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' (of node '%s') lives in a %s buffer, which the device cannot read",
                 loom_backend_dev_name(dev), t->name, node->name, loom_backend_buft_name(base->buffer->buft));
        return false;
    }
    if (!base->data) {
        if (loom_nbytes(t) == 0) return true;
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' (of node '%s') has no data", loom_backend_dev_name(dev), t->name, node->name);
        return false;
    }
    if (loom_backend_dev_supports_buft(dev, loom_backend_cpu_buffer_type())) return true;
    loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' (of node '%s') lives in host (context) memory, which the device cannot read",
             loom_backend_dev_name(dev), t->name, node->name);
    return false;
}

enum loom_status loom_backend_graph_compute_async(loom_backend_t backend, struct loom_cgraph * graph) {
    /* a tensor the device cannot read would be dereferenced at a meaningless address: refuse it */
    for (int i = 0; i < graph->n_nodes; i++) {
        const struct loom_tensor * node = graph->nodes[i];
        if (!readable(backend->device, node, node)) return LOOM_ERR_INVALID_ARG;
        for (int j = 0; j < LOOM_MAX_SRC; j++) {
            if (node->src[j] && !readable(backend->device, node->src[j], node)) return LOOM_ERR_INVALID_ARG;
        }
    }
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
    if (!event) return loom_backend_synchronize(backend); /* a device without events: the caller's NULL */
    if (!backend->iface.event_record) return loom_backend_synchronize(backend);
    return backend->iface.event_record(backend, event);
}

enum loom_status loom_backend_event_wait(loom_backend_t backend, loom_backend_event_t event) {
    if (!event) return LOOM_OK; /* recording it synchronized the recording backend */
    if (!backend->iface.event_wait) return loom_backend_event_synchronize(event);
    return backend->iface.event_wait(backend, event);
}

enum loom_status loom_backend_event_synchronize(loom_backend_event_t event) {
    if (!event) return LOOM_OK;
    return event->device->iface.event_synchronize(event->device, event);
}
