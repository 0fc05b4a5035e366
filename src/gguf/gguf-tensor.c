/* gguf-tensor.c -- tensor-info access and lookup by name. */
#include "gguf-impl.h"

#include <string.h>

static const struct gguf_tensor * tensor_at(const struct loom_gguf * g, int64_t i) {
    LOOM_ASSERT(g && i >= 0 && (uint64_t)i < g->n_tensors);
    return &g->tensors[i];
}

int64_t loom_gguf_n_tensors(const struct loom_gguf * g) { return (int64_t)g->n_tensors; }

int64_t loom_gguf_find_tensor(const struct loom_gguf * g, const char * name) {
    if (!g || !name) return -1;
    return gguf_index_find(&g->tensor_index, name, strlen(name));
}

const char * loom_gguf_tensor_name(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->name.data; }
enum loom_type loom_gguf_tensor_type(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->type; }
int loom_gguf_tensor_n_dims(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->n_dims; }
const int64_t * loom_gguf_tensor_ne(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->ne; }
uint64_t loom_gguf_tensor_offset(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->offset; }
uint64_t loom_gguf_tensor_size(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->size; }
uint64_t loom_gguf_tensor_info_offset(const struct loom_gguf * g, int64_t i) { return tensor_at(g, i)->info_offset; }

int64_t loom_gguf_tensor_nelements(const struct loom_gguf * g, int64_t i) {
    const struct gguf_tensor * t = tensor_at(g, i);
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* validated not to overflow at open */
}
