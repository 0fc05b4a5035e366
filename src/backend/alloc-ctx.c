/* alloc-ctx.c -- places all tensors of a context in buffers of one type, splitting at max_size. */
#include "backend-impl.h"

#include <stdlib.h>

static bool needs_alloc(const struct loom_tensor * t) { return !t->data && !t->buffer && !t->view_src; }

/* A view this call initialises: not yet given storage, and its base lives (or will live) in a
 * buffer. A view of context memory already has its data; one whose base has no storage at all is
 * an error reported by loom_backend_view_init. */
static bool needs_view_init(const struct loom_tensor * t) {
    return t->view_src && !t->buffer && !(t->view_src->data && !t->view_src->buffer);
}

/* The packing rule, shared by the planning and placing passes so they cannot disagree: tensors go
 * in creation order at offsets aligned to 'align'; a tensor that would end past 'max' opens the
 * next buffer. Each tensor takes at least one byte, so that empty tensors get distinct addresses. */
struct packer {
    size_t align, max;
    size_t n_bufs;  /* buffers opened so far */
    size_t end;     /* bytes used in the current buffer */
};

/* Returns the offset of a tensor of 'need' bytes (<= max) in buffer n_bufs - 1. */
static size_t pack(struct packer * p, size_t need) {
    size_t off = loom_pad(p->end, p->align);
    if (p->n_bufs == 0 || off < p->end || off > p->max || need > p->max - off) {
        p->n_bufs++;
        off = 0;
    }
    p->end = off + need;
    return off;
}

static size_t need_bytes(loom_backend_buffer_type_t buft, const struct loom_tensor * t) {
    size_t sz = loom_backend_buft_get_alloc_size(buft, t);
    return sz ? sz : 1;
}

static enum loom_status finish(enum loom_status * out, enum loom_status st) {
    if (out) *out = st;
    return st;
}

/* Puts back every tensor this call gave storage to and frees the buffers. */
static void undo(struct loom_tensor ** touched, size_t n_touched, loom_backend_buffer_t * bufs, size_t n_bufs) {
    for (size_t i = 0; i < n_touched; i++) {
        touched[i]->buffer = NULL;
        touched[i]->data = NULL;
    }
    for (size_t i = 0; i < n_bufs; i++) loom_backend_buffer_free(bufs[i]);
}

/* Allocates the buffers the plan asks for; returns how many it got before a failure. */
static size_t alloc_buffers(loom_backend_buffer_type_t buft, const size_t * sizes, size_t n, loom_backend_buffer_t * bufs) {
    for (size_t i = 0; i < n; i++) {
        bufs[i] = loom_backend_buft_alloc_buffer(buft, sizes[i]);
        if (!bufs[i]) return i;
    }
    return n;
}

loom_backend_buffer_t loom_backend_alloc_ctx_tensors_from_buft(struct loom_context * ctx, loom_backend_buffer_type_t buft,
                                                               enum loom_status * status) {
    finish(status, LOOM_OK);
    struct packer pk = {.align = loom_backend_buft_get_alignment(buft), .max = loom_backend_buft_get_max_size(buft)};

    /* pass 1: check sizes and count buffers and tensors */
    size_t n_touch = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if (needs_view_init(t)) n_touch++;
        if (!needs_alloc(t)) continue;
        size_t need = need_bytes(buft, t);
        if (need > pk.max) {
            loom_log(LOOM_LOG_ERROR, "tensor '%s' needs %zu bytes, more than the largest buffer of %s (%zu bytes)", t->name,
                     need, loom_backend_buft_name(buft), pk.max);
            finish(status, LOOM_ERR_TOO_LARGE);
            return NULL;
        }
        pack(&pk, need);
        n_touch++;
    }
    size_t n_bufs = pk.n_bufs;
    if (n_touch == 0) return NULL;

    size_t * sizes = calloc(n_bufs ? n_bufs : 1, sizeof *sizes);
    loom_backend_buffer_t * bufs = calloc(n_bufs ? n_bufs : 1, sizeof *bufs);
    struct loom_tensor ** touched = calloc(n_touch, sizeof *touched);
    if (!sizes || !bufs || !touched) {
        free(sizes);
        free(bufs);
        free(touched);
        loom_log(LOOM_LOG_ERROR, "alloc_ctx_tensors: out of host memory");
        finish(status, LOOM_ERR_OOM);
        return NULL;
    }

    /* pass 2: the size of each buffer */
    pk.n_bufs = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if (!needs_alloc(t)) continue;
        size_t off = pack(&pk, need_bytes(buft, t));
        sizes[pk.n_bufs - 1] = off + need_bytes(buft, t);
    }

    /* pass 3: allocate, place the tensors, then initialise the views */
    enum loom_status st = LOOM_OK;
    size_t n_alloc = alloc_buffers(buft, sizes, n_bufs, bufs), n_touched = 0;
    if (n_alloc < n_bufs) st = LOOM_ERR_OOM;
    pk.n_bufs = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t && st == LOOM_OK; t = loom_get_next_tensor(ctx, t)) {
        if (!needs_alloc(t)) continue;
        size_t off = pack(&pk, need_bytes(buft, t));
        uint8_t * base = loom_backend_buffer_get_base(bufs[pk.n_bufs - 1]);
        st = loom_backend_tensor_alloc(bufs[pk.n_bufs - 1], t, base + off);
        if (st == LOOM_OK) touched[n_touched++] = t;
    }
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t && st == LOOM_OK; t = loom_get_next_tensor(ctx, t)) {
        if (!needs_view_init(t)) continue;
        st = loom_backend_view_init(t);
        if (st == LOOM_OK) touched[n_touched++] = t;
    }

    loom_backend_buffer_t result = NULL;
    if (st == LOOM_OK && n_bufs > 0) {
        result = n_bufs == 1 ? bufs[0] : loom_backend_multi_buffer_new(bufs, n_bufs);
        if (!result) {
            loom_log(LOOM_LOG_ERROR, "alloc_ctx_tensors: out of host memory");
            st = LOOM_ERR_OOM;
        }
    }
    if (st != LOOM_OK) undo(touched, n_touched, bufs, n_alloc);
    finish(status, st);
    free(sizes);
    free(bufs);
    free(touched);
    return result;
}

loom_backend_buffer_t loom_backend_alloc_ctx_tensors(struct loom_context * ctx, loom_backend_t backend, enum loom_status * status) {
    return loom_backend_alloc_ctx_tensors_from_buft(ctx, loom_backend_get_default_buffer_type(backend), status);
}
