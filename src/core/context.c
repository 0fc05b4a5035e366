/* context.c -- the arena that holds tensor metadata, graphs and (optionally) tensor data. */
#include "core-impl.h"

#include <stdlib.h>
#include <string.h>

struct loom_object {
    struct loom_object * next;  /* next tensor object in creation order */
    struct loom_tensor tensor;
};

struct loom_context {
    uint8_t * mem;
    size_t mem_size;
    size_t used;
    bool owns_mem;
    bool no_alloc;
    struct loom_object * first;
    struct loom_object * last;
};

size_t loom_tensor_overhead(void) { return loom_pad(sizeof(struct loom_object), LOOM_MEM_ALIGN); }

struct loom_context * loom_init(struct loom_init_params params) {
    struct loom_context * ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        loom_log(LOOM_LOG_ERROR, "loom_init: cannot allocate a context");
        return NULL;
    }
    ctx->mem_size = params.mem_size ? params.mem_size : LOOM_MEM_ALIGN;
    ctx->no_alloc = params.no_alloc;
    if (params.mem_buffer) {
        ctx->mem = params.mem_buffer;
    } else {
        ctx->mem = aligned_alloc(LOOM_MEM_ALIGN, loom_pad(ctx->mem_size, LOOM_MEM_ALIGN));
        ctx->owns_mem = true;
        if (!ctx->mem) {
            loom_log(LOOM_LOG_ERROR, "loom_init: cannot allocate an arena of %zu bytes", ctx->mem_size);
            free(ctx);
            return NULL;
        }
    }
    /* the arena may start unaligned when the caller provides it */
    size_t skew = (size_t)(-(uintptr_t)ctx->mem) & (LOOM_MEM_ALIGN - 1);
    ctx->used = skew;
    return ctx;
}

void loom_free(struct loom_context * ctx) {
    if (!ctx) return;
    if (ctx->owns_mem) free(ctx->mem);
    free(ctx);
}

bool loom_get_no_alloc(const struct loom_context * ctx) { return ctx->no_alloc; }
void loom_set_no_alloc(struct loom_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }
size_t loom_used_mem(const struct loom_context * ctx) { return ctx->used; }

void * loom_ctx_alloc(struct loom_context * ctx, size_t size) {
    size_t need = loom_pad(size, LOOM_MEM_ALIGN);
    if (need < size || ctx->used > ctx->mem_size || need > ctx->mem_size - ctx->used) {
        LOOM_ABORT("context arena full: need %zu bytes, %zu of %zu used", need, ctx->used, ctx->mem_size);
    }
    void * p = ctx->mem + ctx->used;
    ctx->used += need;
    return p;
}

static size_t checked_nbytes(enum loom_type type, const int64_t * ne) {
    size_t bytes = loom_row_size(type, ne[0]);
    for (int i = 1; i < LOOM_MAX_DIMS; i++) {
        LOOM_ASSERT(ne[i] >= 0);
        if (ne[i] && bytes > SIZE_MAX / (size_t)ne[i]) LOOM_ABORT("tensor size overflows");
        bytes *= (size_t)ne[i];
    }
    return bytes;
}

struct loom_tensor * loom_new_tensor_impl(struct loom_context * ctx, enum loom_type type, int n_dims,
                                          const int64_t * ne_in, struct loom_tensor * view_src, size_t view_offs) {
    LOOM_ASSERT(loom_type_is_known(type));
    LOOM_ASSERT(n_dims >= 1 && n_dims <= LOOM_MAX_DIMS);
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    int64_t ne[LOOM_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) ne[i] = ne_in[i];
    size_t data_size = checked_nbytes(type, ne);

    struct loom_object * obj = loom_ctx_alloc(ctx, sizeof *obj);
    memset(obj, 0, sizeof *obj);
    struct loom_tensor * t = &obj->tensor;
    t->type = type;
    for (int i = 0; i < LOOM_MAX_DIMS; i++) t->ne[i] = ne[i];
    t->nb[0] = loom_type_size(type);
    t->nb[1] = t->nb[0] * (size_t)(ne[0] / loom_blck_size(type));
    for (int i = 2; i < LOOM_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)ne[i - 1];

    if (view_src) {
        t->view_src = view_src;
        t->view_offs = view_offs;
        t->buffer = view_src->buffer;
        t->data = view_src->data ? (uint8_t *)view_src->data + view_offs : NULL;
    } else if (!ctx->no_alloc) {
        t->data = loom_ctx_alloc(ctx, data_size ? data_size : 1);
    }

    if (ctx->last) ctx->last->next = obj; else ctx->first = obj;
    ctx->last = obj;
    return t;
}

struct loom_tensor * loom_get_first_tensor(const struct loom_context * ctx) {
    return ctx->first ? &ctx->first->tensor : NULL;
}

struct loom_tensor * loom_get_next_tensor(const struct loom_context * ctx, struct loom_tensor * t) {
    (void)ctx;
    struct loom_object * obj = (struct loom_object *)((uint8_t *)t - offsetof(struct loom_object, tensor));
    return obj->next ? &obj->next->tensor : NULL;
}

struct loom_tensor * loom_get_tensor(const struct loom_context * ctx, const char * name) {
    for (struct loom_object * o = ctx->first; o; o = o->next) {
        if (strcmp(o->tensor.name, name) == 0) return &o->tensor;
    }
    return NULL;
}
