/* gguf-kv.c -- metadata access by index, and key lookup. */
#include "gguf-impl.h"

#include <string.h>

static const struct gguf_kv * kv_at(const struct loom_gguf * g, int64_t i) {
    LOOM_ASSERT(g && i >= 0 && (uint64_t)i < g->n_kv);
    return &g->kv[i];
}

int64_t loom_gguf_n_kv(const struct loom_gguf * g) { return (int64_t)g->n_kv; }

int64_t loom_gguf_find_key(const struct loom_gguf * g, const char * key) {
    if (!g || !key) return -1;
    return gguf_index_find(&g->key_index, key, strlen(key));
}

const char * loom_gguf_kv_key(const struct loom_gguf * g, int64_t i) { return kv_at(g, i)->key.data; }
enum loom_gguf_type loom_gguf_kv_type(const struct loom_gguf * g, int64_t i) { return kv_at(g, i)->type; }
uint64_t loom_gguf_kv_offset(const struct loom_gguf * g, int64_t i) { return kv_at(g, i)->offset; }

const void * loom_gguf_kv_data(const struct loom_gguf * g, int64_t i) {
    const struct gguf_kv * kv = kv_at(g, i);
    return loom_gguf_type_size(kv->type) ? (const void *)&kv->scalar : NULL;
}

const char * loom_gguf_kv_str(const struct loom_gguf * g, int64_t i, size_t * len) {
    const struct gguf_kv * kv = kv_at(g, i);
    bool is_str = kv->type == LOOM_GGUF_TYPE_STRING;
    if (len) *len = is_str ? (size_t)kv->str.len : 0;
    return is_str ? kv->str.data : NULL;
}

enum loom_gguf_type loom_gguf_kv_arr_type(const struct loom_gguf * g, int64_t i) {
    const struct gguf_kv * kv = kv_at(g, i);
    return kv->type == LOOM_GGUF_TYPE_ARRAY ? kv->arr_type : LOOM_GGUF_TYPE_COUNT;
}

uint64_t loom_gguf_kv_arr_n(const struct loom_gguf * g, int64_t i) {
    const struct gguf_kv * kv = kv_at(g, i);
    return kv->type == LOOM_GGUF_TYPE_ARRAY ? kv->n : 0;
}

const void * loom_gguf_kv_arr_data(const struct loom_gguf * g, int64_t i) {
    const struct gguf_kv * kv = kv_at(g, i);
    if (kv->type != LOOM_GGUF_TYPE_ARRAY || kv->arr_type == LOOM_GGUF_TYPE_STRING) return NULL;
    return kv->arr;
}

const char * loom_gguf_kv_arr_str(const struct loom_gguf * g, int64_t i, uint64_t j, size_t * len) {
    const struct gguf_kv * kv = kv_at(g, i);
    if (len) *len = 0;
    if (kv->type != LOOM_GGUF_TYPE_ARRAY || kv->arr_type != LOOM_GGUF_TYPE_STRING || j >= kv->n) return NULL;
    const struct gguf_str * s = &((const struct gguf_str *)kv->arr)[j];
    if (len) *len = (size_t)s->len;
    return s->data;
}
