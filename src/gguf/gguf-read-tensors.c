/* gguf-read-tensors.c -- parses the tensor-info records of a GGUF file. */
#include "gguf-impl.h"

#include <string.h>

/* Reads one record into 't'; 'i' is its index, 'at' its byte offset. */
static enum loom_status read_tensor_info(struct gguf_parser * p, struct gguf_tensor * t, uint64_t i, uint64_t at) {
    char what[GGUF_QUOTE_SIZE + 16];
    snprintf(what, sizeof what, "tensor #%llu", (unsigned long long)i);
    enum loom_status st = gguf_read_str(p, &t->name, LOOM_GGUF_MAX_TENSOR_NAME, what, at);
    if (st != LOOM_OK) return st;
    if (t->name.len == 0) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: empty tensor name", what, (unsigned long long)at);
    }
    char q[GGUF_QUOTE_SIZE];
    gguf_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q);
    snprintf(what, sizeof what, "tensor '%s'", q);
    if (memchr(t->name.data, '\0', t->name.len)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: name contains a NUL byte", what,
                         (unsigned long long)at);
    }
    uint32_t n_dims;
    if ((st = gguf_read_bytes(p, &n_dims, 4, what, at)) != LOOM_OK) return st;
    if (n_dims < 1 || n_dims > LOOM_MAX_DIMS) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: n_dims %u is not in 1..%d", what,
                         (unsigned long long)at, n_dims, LOOM_MAX_DIMS);
    }
    t->n_dims = (int)n_dims;
    for (int d = 0; d < LOOM_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if ((st = gguf_read_bytes(p, &ne, 8, what, at)) != LOOM_OK) return st;
        if (ne == 0) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                             "%s at byte %llu: ne[%u] is 0 (empty tensors are not supported)", what, (unsigned long long)at, d);
        }
        if (ne > INT64_MAX) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: ne[%u] = %llu is too large", what,
                             (unsigned long long)at, d, (unsigned long long)ne);
        }
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    if ((st = gguf_read_bytes(p, &type, 4, what, at)) != LOOM_OK) return st;
    if (!loom_type_is_known((int)type)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown tensor type id %u", what,
                         (unsigned long long)at, type);
    }
    t->type = (enum loom_type)type;
    return gguf_read_bytes(p, &t->offset, 8, what, at);
}

enum loom_status gguf_parse_tensor_infos(struct gguf_parser * p, uint64_t n_tensors) {
    struct loom_gguf * g = p->g;
    for (uint64_t i = 0; i < n_tensors; i++) {
        uint64_t at = p->src->pos;
        if (!gguf_grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors)) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor #%llu at byte %llu: out of memory",
                             (unsigned long long)i, (unsigned long long)at);
        }
        struct gguf_tensor * t = &g->tensors[g->n_tensors++];
        memset(t, 0, sizeof *t);
        t->info_offset = at;
        enum loom_status st = read_tensor_info(p, t, i, at);
        if (st != LOOM_OK) return st;
    }
    int64_t dup;
    if (!gguf_index_build(&g->tensor_index, g->n_tensors, gguf_tensor_name_of, g, &dup)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor infos: out of memory for the index");
    }
    if (dup >= 0) {
        const struct gguf_tensor * t = &g->tensors[dup];
        int64_t first = gguf_index_first(&g->tensor_index, t->name.data, (size_t)t->name.len);
        char q[GGUF_QUOTE_SIZE];
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "tensor '%s' at byte %llu: duplicate tensor name (first at byte %llu)",
                         gguf_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q),
                         (unsigned long long)t->info_offset, (unsigned long long)g->tensors[first].info_offset);
    }
    return LOOM_OK;
}
