/* gguf-get-arr.c -- array metadata by key name, and the "must be T[n]" expectation check. */
#include "gguf-impl.h"

#include <stdio.h>
#include <string.h>

enum loom_gguf_type loom_gguf_get_arr_type(const struct loom_gguf * g, const char * key) {
    int64_t i = loom_gguf_find_key(g, key);
    return i < 0 ? LOOM_GGUF_TYPE_COUNT : loom_gguf_kv_arr_type(g, i);
}

uint64_t loom_gguf_get_arr_n(const struct loom_gguf * g, const char * key) {
    int64_t i = loom_gguf_find_key(g, key);
    return i < 0 ? 0 : loom_gguf_kv_arr_n(g, i);
}

const void * loom_gguf_get_arr_data(const struct loom_gguf * g, const char * key) {
    int64_t i = loom_gguf_find_key(g, key);
    return i < 0 ? NULL : loom_gguf_kv_arr_data(g, i);
}

const char * loom_gguf_get_arr_str(const struct loom_gguf * g, const char * key, uint64_t i, size_t * len) {
    int64_t k = loom_gguf_find_key(g, key);
    if (k < 0) {
        if (len) *len = 0;
        return NULL;
    }
    return loom_gguf_kv_arr_str(g, k, i, len);
}

enum loom_status loom_gguf_expect_arr(const struct loom_gguf * g, const char * key, enum loom_gguf_type elem_type,
                                      uint64_t n, char * err, size_t err_size) {
    char q[GGUF_QUOTE_SIZE];
    gguf_quote(key ? key : "(null)", key ? strlen(key) : 6, GGUF_QUOTE_SHOWN, q, sizeof q);
    char want[48];
    if (n == LOOM_GGUF_ANY_N) {
        snprintf(want, sizeof want, "%s[]", loom_gguf_type_name(elem_type));
    } else {
        snprintf(want, sizeof want, "%s[%llu]", loom_gguf_type_name(elem_type), (unsigned long long)n);
    }
    int64_t i = loom_gguf_find_key(g, key);
    if (i < 0) return gguf_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' is missing (expected %s)", q, want);
    const struct gguf_kv * kv = &g->kv[i];
    if (kv->type != LOOM_GGUF_TYPE_ARRAY) {
        return gguf_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: expected %s, found %s", q,
                         (unsigned long long)kv->offset, want, loom_gguf_type_name(kv->type));
    }
    if (kv->arr_type != elem_type || (n != LOOM_GGUF_ANY_N && kv->n != n)) {
        return gguf_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: expected %s, found %s[%llu]", q,
                         (unsigned long long)kv->offset, want, loom_gguf_type_name(kv->arr_type), (unsigned long long)kv->n);
    }
    return LOOM_OK;
}
