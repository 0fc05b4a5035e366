/* gguf-writer-tensor.c -- tensor infos collected by the GGUF writer. */
#include "gguf-writer-impl.h"

#include <string.h>

enum loom_status loom_gguf_writer_add_tensor(struct loom_gguf_writer * w, const char * name, enum loom_type type,
                                             int n_dims, const int64_t * ne, const void * data) {
    if (!w || !name || !ne || w->state != WRITER_COLLECT) return LOOM_ERR_INVALID_ARG;
    size_t len = strlen(name);
    if (len == 0 || len > LOOM_GGUF_MAX_TENSOR_NAME) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor name of %zu bytes (must be 1..%d)", len, LOOM_GGUF_MAX_TENSOR_NAME);
        return LOOM_ERR_INVALID_ARG;
    }
    if (n_dims < 1 || n_dims > LOOM_MAX_DIMS) { /* before reading 'ne' */
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor '%s': n_dims %d is not in 1..%d", name, n_dims, LOOM_MAX_DIMS);
        return LOOM_ERR_INVALID_ARG;
    }
    struct wtensor t = {.type = type, .n_dims = n_dims, .data = data, .name_len = len};
    memcpy(t.name, name, len + 1);
    for (int d = 0; d < LOOM_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    int64_t nel;
    if (!gguf_tensor_geometry(type, n_dims, t.ne, &nel, &t.size)) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor '%s': bad type %d or shape", name, (int)type);
        return LOOM_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!strcmp(w->tensors[i].name, name)) {
            loom_log(LOOM_LOG_ERROR, "gguf writer: duplicate tensor name '%s'", name);
            return LOOM_ERR_INVALID_ARG;
        }
    }
    if (!gguf_grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors + 1, sizeof *w->tensors)) return LOOM_ERR_OOM;
    w->tensors[w->n_tensors++] = t;
    return LOOM_OK;
}

uint64_t loom_gguf_writer_tensor_size(const struct loom_gguf_writer * w, int64_t i) {
    LOOM_ASSERT(w && i >= 0 && (size_t)i < w->n_tensors);
    return w->tensors[i].size;
}
