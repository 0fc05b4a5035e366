/* alloc-ctx.c -- places all tensors of a context in buffers of one type, splitting at max_size. */
#include "backend-impl.h"

#include <stdlib.h>

static bool needs_alloc(const struct loom_tensor * t) { return !t->data && !t->view_src; }

/* Bytes a tensor takes in the buffer: its padded allocation size, at least one alignment unit
 * (so that empty tensors still get a distinct valid address). */
static size_t slot_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t, size_t align) {
    size_t sz = loom_backend_buft_get_alloc_size(buft, t);
    return loom_pad(sz ? sz : 1, align);
}

/* Frees the buffers and detaches every tensor that was placed in them. */
static void undo(struct loom_context * ctx, loom_backend_buffer_t * bufs, size_t n) {
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        for (size_t i = 0; i < n; i++) {
            if (t->buffer && (t->buffer == bufs[i] || (t->view_src && t->view_src->buffer == bufs[i]))) {
                t->buffer = NULL;
                t->data = NULL;
            }
        }
    }
    for (size_t i = 0; i < n; i++) loom_backend_buffer_free(bufs[i]);
}

static enum loom_status fail(enum loom_status * out, enum loom_status st) {
    if (out) *out = st;
    return st;
}

loom_backend_buffer_t loom_backend_alloc_ctx_tensors_from_buft(struct loom_context * ctx, loom_backend_buffer_type_t buft,
                                                               enum loom_status * status) {
    if (status) *status = LOOM_OK;
    size_t align = loom_backend_buft_get_alignment(buft);
    size_t max = loom_backend_buft_get_max_size(buft);

    /* pass 1: how many buffers, and their sizes */
    size_t n_bufs = 0, cur = 0, n_tensors = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if (!needs_alloc(t)) continue;
        size_t sz = slot_size(buft, t, align);
        if (sz > max) {
            loom_log(LOOM_LOG_ERROR, "tensor '%s' needs %zu bytes, more than the largest buffer of %s (%zu bytes)", t->name, sz,
                     loom_backend_buft_name(buft), max);
            fail(status, LOOM_ERR_TOO_LARGE);
            return NULL;
        }
        if (n_tensors == 0 || cur + sz > max) {
            n_bufs++;
            cur = 0;
        }
        cur += sz;
        n_tensors++;
    }
    if (n_tensors == 0) {
        /* nothing new to place; views of already-placed tensors still get initialised */
        for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
            if (t->view_src && !t->buffer && t->view_src->buffer) loom_backend_view_init(t);
        }
        return NULL;
    }

    loom_backend_buffer_t * bufs = calloc(n_bufs, sizeof *bufs);
    if (!bufs) {
        fail(status, LOOM_ERR_OOM);
        return NULL;
    }
    /* pass 2: allocate each buffer when it is opened, then place its tensors */
    struct loom_tensor * first = loom_get_first_tensor(ctx);
    size_t b = 0;
    enum loom_status st = LOOM_OK;
    for (struct loom_tensor * t = first; t && st == LOOM_OK;) {
        /* gather one buffer's worth */
        size_t size = 0;
        struct loom_tensor * end = t;
        for (; end; end = loom_get_next_tensor(ctx, end)) {
            if (!needs_alloc(end)) continue;
            size_t sz = slot_size(buft, end, align);
            if (size > 0 && size + sz > max) break;
            size += sz;
        }
        bufs[b] = loom_backend_buft_alloc_buffer(buft, size);
        if (!bufs[b]) {
            st = LOOM_ERR_OOM;
            break;
        }
        uint8_t * base = loom_backend_buffer_get_base(bufs[b]);
        size_t offs = 0;
        b++;
        for (; t != end; t = loom_get_next_tensor(ctx, t)) {
            if (!needs_alloc(t)) continue;
            size_t sz = slot_size(buft, t, align);
            st = loom_backend_tensor_alloc(bufs[b - 1], t, base + offs);
            if (st != LOOM_OK) break;
            offs += sz;
        }
    }
    for (struct loom_tensor * t = first; t && st == LOOM_OK; t = loom_get_next_tensor(ctx, t)) {
        if (t->view_src && !t->buffer) st = loom_backend_view_init(t);
    }
    if (st != LOOM_OK) {
        undo(ctx, bufs, b);
        free(bufs);
        fail(status, st);
        return NULL;
    }
    loom_backend_buffer_t result = n_bufs == 1 ? bufs[0] : loom_backend_multi_buffer_new(bufs, n_bufs);
    if (!result) {
        undo(ctx, bufs, b);
        fail(status, LOOM_ERR_OOM);
    }
    free(bufs);
    return result;
}

loom_backend_buffer_t loom_backend_alloc_ctx_tensors(struct loom_context * ctx, loom_backend_t backend, enum loom_status * status) {
    return loom_backend_alloc_ctx_tensors_from_buft(ctx, loom_backend_get_default_buffer_type(backend), status);
}
