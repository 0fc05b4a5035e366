/* multi-buffer.c -- a set of buffers behind one handle, freed together. */
#include "backend-impl.h"

#include <stdlib.h>
#include <string.h>

struct multi_buffer {
    size_t n;
    loom_backend_buffer_t * parts;
};

static void multi_free(loom_backend_buffer_t buffer) {
    struct multi_buffer * m = buffer->context;
    for (size_t i = 0; i < m->n; i++) loom_backend_buffer_free(m->parts[i]);
    free(m->parts);
    free(m);
}

static void * multi_get_base(loom_backend_buffer_t buffer) {
    struct multi_buffer * m = buffer->context;
    return m->n ? loom_backend_buffer_get_base(m->parts[0]) : NULL;
}

static enum loom_status multi_clear(loom_backend_buffer_t buffer, uint8_t value) {
    struct multi_buffer * m = buffer->context;
    for (size_t i = 0; i < m->n; i++) {
        enum loom_status st = loom_backend_buffer_clear(m->parts[i], value);
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

/* Tensors never point at the multi-buffer itself (tensor_alloc picks a part), so the data slots
 * are never reached; they are filled so that a misuse fails cleanly instead of crashing. */
static enum loom_status multi_set(loom_backend_buffer_t b, struct loom_tensor * t, const void * d, size_t o, size_t s) {
    (void)b; (void)t; (void)d; (void)o; (void)s;
    return LOOM_ERR_INVALID_ARG;
}
static enum loom_status multi_get(loom_backend_buffer_t b, const struct loom_tensor * t, void * d, size_t o, size_t s) {
    (void)b; (void)t; (void)d; (void)o; (void)s;
    return LOOM_ERR_INVALID_ARG;
}
static enum loom_status multi_memset(loom_backend_buffer_t b, struct loom_tensor * t, uint8_t v, size_t o, size_t s) {
    (void)b; (void)t; (void)v; (void)o; (void)s;
    return LOOM_ERR_INVALID_ARG;
}

static const struct loom_backend_buffer_i multi_iface = {
    .free_buffer = multi_free,
    .get_base = multi_get_base,
    .init_tensor = NULL,
    .memset_tensor = multi_memset,
    .set_tensor = multi_set,
    .get_tensor = multi_get,
    .cpy_tensor = NULL,
    .clear = multi_clear,
};

loom_backend_buffer_t loom_backend_multi_buffer_new(loom_backend_buffer_t * buffers, size_t n) {
    if (n == 0 || !buffers) return NULL;
    /* one level, one type: tensor_alloc looks one level down, and the handle reports one type */
    for (size_t i = 0; i < n; i++) {
        if (!buffers[i] || loom_backend_buffer_is_multi(buffers[i]) || buffers[i]->buft != buffers[0]->buft) {
            loom_log(LOOM_LOG_ERROR, "multi_buffer_new: part %zu is missing, a multi-buffer, or of another buffer type", i);
            return NULL;
        }
    }
    struct multi_buffer * m = calloc(1, sizeof *m);
    loom_backend_buffer_t * parts = calloc(n, sizeof *parts);
    if (!m || !parts) {
        free(m);
        free(parts);
        return NULL;
    }
    memcpy(parts, buffers, n * sizeof *parts);
    m->n = n;
    m->parts = parts;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += buffers[i]->size;
    loom_backend_buffer_t b = loom_backend_buffer_init(buffers[0]->buft, multi_iface, m, total);
    if (!b) {
        free(parts);
        free(m);
    }
    return b;
}

bool loom_backend_buffer_is_multi(loom_backend_buffer_t buffer) { return buffer->iface.free_buffer == multi_free; }

size_t loom_backend_multi_buffer_count(loom_backend_buffer_t buffer) {
    return loom_backend_buffer_is_multi(buffer) ? ((struct multi_buffer *)buffer->context)->n : 1;
}

loom_backend_buffer_t loom_backend_multi_buffer_get(loom_backend_buffer_t buffer, size_t i) {
    if (!loom_backend_buffer_is_multi(buffer)) return i == 0 ? buffer : NULL;
    struct multi_buffer * m = buffer->context;
    return i < m->n ? m->parts[i] : NULL;
}

void loom_backend_buffer_set_usage(loom_backend_buffer_t buffer, enum loom_backend_buffer_usage usage) {
    buffer->usage = usage;
    if (loom_backend_buffer_is_multi(buffer)) {
        struct multi_buffer * m = buffer->context;
        for (size_t i = 0; i < m->n; i++) loom_backend_buffer_set_usage(m->parts[i], usage);
    }
}
