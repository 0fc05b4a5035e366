/* gguf-validate.c -- checks a parsed file's alignment and tensor geometry against the file size. */
#include "gguf-impl.h"

#include <stdlib.h>
#include <string.h>

enum loom_status gguf_validate_alignment(struct gguf_parser * p) {
    struct loom_gguf * g = p->g;
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = loom_gguf_find_key(g, LOOM_GGUF_KEY_ALIGNMENT);
    if (i < 0) return LOOM_OK;
    const struct gguf_kv * kv = &g->kv[i];
    if (kv->type != LOOM_GGUF_TYPE_UINT32) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: has type %s, expected u32",
                         LOOM_GGUF_KEY_ALIGNMENT, (unsigned long long)kv->offset, loom_gguf_type_name(kv->type));
    }
    uint32_t a = kv->scalar.u32;
    if (a == 0 || (a & (a - 1)) != 0) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: alignment %u is not a power of two",
                         LOOM_GGUF_KEY_ALIGNMENT, (unsigned long long)kv->offset, a);
    }
    if (a > LOOM_GGUF_MAX_ALIGNMENT) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: alignment %u exceeds the limit of %u",
                         LOOM_GGUF_KEY_ALIGNMENT, (unsigned long long)kv->offset, a, LOOM_GGUF_MAX_ALIGNMENT);
    }
    g->alignment = a;
    return LOOM_OK;
}

/* A tensor's data range, for the overlap check. */
struct span {
    uint64_t offset, size; /* bytes from the data section */
    size_t idx;
};

static int by_offset(const void * a, const void * b) {
    const struct span * sa = a;
    const struct span * sb = b;
    if (sa->offset != sb->offset) return sa->offset < sb->offset ? -1 : 1;
    return sa->idx < sb->idx ? -1 : sa->idx > sb->idx;
}

/* Shape, size, alignment and bounds of one tensor. */
static enum loom_status check_tensor(struct gguf_parser * p, struct gguf_tensor * t) {
    struct loom_gguf * g = p->g;
    char q[GGUF_QUOTE_SIZE];
    gguf_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q);
    unsigned long long at = (unsigned long long)t->info_offset;
    int64_t blck = loom_blck_size(t->type);
    if (t->ne[0] % blck != 0) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: ne[0] = %lld is not a multiple of the block length %lld of type %s", q,
                         at, (long long)t->ne[0], (long long)blck, loom_type_name(t->type));
    }
    int64_t nel;
    if (!gguf_tensor_geometry(t->type, t->n_dims, t->ne, &nel, &t->size)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: shape [%lld, %lld, %lld, %lld] of type %s overflows", q, at,
                         (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                         loom_type_name(t->type));
    }
    if (t->offset % g->alignment != 0) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: data offset %llu is not a multiple of the alignment %u", q, at,
                         (unsigned long long)t->offset, g->alignment);
    }
    uint64_t start, end;
    if (!gguf_add_ok(g->data_offset, t->offset, &start) || !gguf_add_ok(start, t->size, &end) || end > g->file_size) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: data [%llu, +%llu) at data offset %llu extends past end of file (%llu bytes)",
                         q, at, (unsigned long long)t->offset, (unsigned long long)t->size,
                         (unsigned long long)g->data_offset, (unsigned long long)g->file_size);
    }
    return LOOM_OK;
}

enum loom_status gguf_validate_tensors(struct gguf_parser * p) {
    struct loom_gguf * g = p->g;
    for (size_t i = 0; i < g->n_tensors; i++) {
        enum loom_status st = check_tensor(p, &g->tensors[i]);
        if (st != LOOM_OK) return st;
    }
    if (g->n_tensors < 2) return LOOM_OK;
    struct span * order = malloc(g->n_tensors * sizeof *order);
    if (!order) return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor infos: out of memory");
    for (size_t i = 0; i < g->n_tensors; i++) {
        order[i] = (struct span){g->tensors[i].offset, g->tensors[i].size, i};
    }
    qsort(order, g->n_tensors, sizeof *order, by_offset);
    enum loom_status st = LOOM_OK;
    for (size_t k = 1; k < g->n_tensors; k++) {
        const struct gguf_tensor * a = &g->tensors[order[k - 1].idx];
        const struct gguf_tensor * b = &g->tensors[order[k].idx];
        if (a->offset + a->size > b->offset) { /* no overflow: both end inside the file */
            char qa[GGUF_QUOTE_SIZE], qb[GGUF_QUOTE_SIZE];
            st = gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                           "tensor '%s' at byte %llu: data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                           gguf_quote(b->name.data, b->name.len, GGUF_QUOTE_SHOWN, qb, sizeof qb),
                           (unsigned long long)b->info_offset, (unsigned long long)b->offset,
                           (unsigned long long)(b->offset + b->size),
                           gguf_quote(a->name.data, a->name.len, GGUF_QUOTE_SHOWN, qa, sizeof qa),
                           (unsigned long long)a->offset, (unsigned long long)(a->offset + a->size));
            break;
        }
    }
    free(order);
    return st;
}
