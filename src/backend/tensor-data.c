/* tensor-data.c -- reading, writing and copying tensor bytes through their buffers (views resolved). */
#include "backend-impl.h"

#include <stdlib.h>
#include <string.h>

enum loom_status loom_tensor_resolve_range(const struct loom_tensor * t, size_t offset, size_t size, const char * what,
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
    /* a view's extent was checked against its base when it was made; a tensor edited since then
     * must still not reach past its base's storage */
    size_t have = loom_nbytes(b);
    if (b != t && n && (offs > have || n > have - offs)) {
        loom_log(LOOM_LOG_ERROR, "%s: view '%s': bytes [%zu, %zu) outside its base '%s' (%zu bytes)", what, t->name, offs,
                 offs + n, b->name, have);
        return LOOM_ERR_INVALID_ARG;
    }
    *base = b;
    *base_offs = offs + offset;
    return LOOM_OK;
}

enum loom_status loom_backend_tensor_set(struct loom_tensor * tensor, const void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = loom_tensor_resolve_range(tensor, offset, size, "tensor_set", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.set_tensor(base->buffer, base, data, offs, size);
}

enum loom_status loom_backend_tensor_get(const struct loom_tensor * tensor, void * data, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = loom_tensor_resolve_range(tensor, offset, size, "tensor_get", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.get_tensor(base->buffer, base, data, offs, size);
}

enum loom_status loom_backend_tensor_memset(struct loom_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    struct loom_tensor * base;
    size_t offs;
    enum loom_status st = loom_tensor_resolve_range(tensor, offset, size, "tensor_memset", &base, &offs);
    if (st != LOOM_OK || size == 0) return st;
    return base->buffer->iface.memset_tensor(base->buffer, base, value, offs, size);
}

/* Copies through a host bounce buffer: for two devices that cannot reach each other. */
static enum loom_status copy_staged(const struct loom_tensor * src, struct loom_tensor * dst, size_t n) {
    void * tmp = malloc(n);
    if (!tmp) {
        loom_log(LOOM_LOG_ERROR, "tensor_copy: cannot allocate %zu bytes of staging memory", n);
        return LOOM_ERR_OOM;
    }
    enum loom_status st = loom_backend_tensor_get(src, tmp, 0, n);
    if (st == LOOM_OK) st = loom_backend_tensor_set(dst, tmp, 0, n);
    free(tmp);
    return st;
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
    enum loom_status st = loom_tensor_resolve_range(src, 0, n, "tensor_copy", &sb, &so);
    if (st == LOOM_OK) st = loom_tensor_resolve_range(dst, 0, n, "tensor_copy", &db, &dofs);
    if (st != LOOM_OK) return st;
    /* addresses come from the storage: a view's own 'data' may predate its base's allocation */
    uint8_t * saddr = (uint8_t *)sb->data + so;
    uint8_t * daddr = (uint8_t *)db->data + dofs;
    bool src_host = loom_backend_buffer_is_host(sb->buffer), dst_host = loom_backend_buffer_is_host(db->buffer);
    if (src_host && dst_host) {
        memmove(daddr, saddr, n);
        return LOOM_OK;
    }
    if (src_host) return loom_backend_tensor_set(dst, saddr, 0, n);
    if (dst_host) return loom_backend_tensor_get(src, daddr, 0, n);
    if (db->buffer->iface.cpy_tensor) {
        struct loom_tensor s = loom_tensor_flatten(src), d = loom_tensor_flatten(dst);
        if (db->buffer->iface.cpy_tensor(db->buffer, &s, &d)) return LOOM_OK;
    }
    return copy_staged(src, dst, n);
}
