/* tensor-data.c -- reading, writing and copying tensor bytes through their buffers (views resolved). */
#include "backend-impl.h"

#include <stdlib.h>
#include <string.h>

/* Checks the range and resolves the storage; on success '*base' and '*base_offs' address the bytes. */
static enum loom_status resolve(const struct loom_tensor * t, size_t offset, size_t size, const char * what,
                                struct loom_tensor ** base, size_t * base_offs) {
    size_t offs;
    struct loom_tensor * b = loom_tensor_storage(t, &offs);
    if (!b->buffer || !b->data) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' has no buffer", what, t->name);
        return LOOM_ERR_INVALID_ARG;
    }
    size_t n = loom_nbytes(t);
    if (offset > n || size > n - offset) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s': bytes [%zu, %zu) outside its %zu bytes", what, t->name, offset,
                 offset + size, n);
        return LOOM_ERR_INVALID_ARG;
    }
    *base = b;
    *base_offs = offs + offset;
    return LOOM_OK;
}

enum loom_status loom_backend_tensor_set(struct loom_tensor * tensor, const void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = resolve(tensor, offset, size, "tensor_set", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.set_tensor(base->buffer, base, data, offs, size);
}

enum loom_status loom_backend_tensor_get(const struct loom_tensor * tensor, void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = resolve(tensor, offset, size, "tensor_get", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.get_tensor(base->buffer, base, data, offs, size);
}

enum loom_status loom_backend_tensor_memset(struct loom_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = resolve(tensor, offset, size, "tensor_memset", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.memset_tensor(base->buffer, base, value, offs, size);
}

enum loom_status loom_backend_tensor_copy(const struct loom_tensor * src, struct loom_tensor * dst) {
    size_t n = loom_nbytes(src);
    if (n != loom_nbytes(dst)) {
        loom_log(LOOM_LOG_ERROR, "tensor_copy: '%s' has %zu bytes, '%s' has %zu", src->name, n, dst->name, loom_nbytes(dst));
        return LOOM_ERR_INVALID_ARG;
    }
    if (n == 0 || src == dst) return LOOM_OK;
    struct loom_tensor *sb, *db;
    size_t so, dofs;
    enum loom_status st = resolve(src, 0, n, "tensor_copy", &sb, &so);
    if (st == LOOM_OK) st = resolve(dst, 0, n, "tensor_copy", &db, &dofs);
    if (st != LOOM_OK) return st;
    if (loom_backend_buffer_is_host(sb->buffer) && loom_backend_buffer_is_host(db->buffer)) {
        memmove(dst->data, src->data, n);
        return LOOM_OK;
    }
    if (loom_backend_buffer_is_host(sb->buffer)) return loom_backend_tensor_set(dst, src->data, 0, n);
    if (loom_backend_buffer_is_host(db->buffer)) return loom_backend_tensor_get(src, dst->data, 0, n);
    if (db->buffer->iface.cpy_tensor && db->buffer->iface.cpy_tensor(db->buffer, src, dst)) return LOOM_OK;
    /* stage through host memory */
    void * tmp = malloc(n);
    if (!tmp) {
        loom_log(LOOM_LOG_ERROR, "tensor_copy: cannot allocate %zu bytes of staging memory", n);
        return LOOM_ERR_OOM;
    }
    st = loom_backend_tensor_get(src, tmp, 0, n);
    if (st == LOOM_OK) st = loom_backend_tensor_set(dst, tmp, 0, n);
    free(tmp);
    return st;
}
