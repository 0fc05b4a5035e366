/* gguf-access.c -- the GGUF reader's accessors: metadata by index and by key (typed getters with
 * defaults, strict getters, arrays) and tensor infos by index and by name. */
#include "gguf-impl.h"

#include <stdio.h>
#include <string.h>

/* ================================================================
 * Metadata access by index, and key lookup. */

static const struct gguf_kv * kv_at(const struct loom_gguf * g, int64_t i) {
    LOOM_ASSERT(g && i >= 0 && (uint64_t)i < g->n_kv);
    return &g->kv[i];
}

int64_t loom_gguf_n_kv(const struct loom_gguf * g) { return (int64_t)g->n_kv; }

int64_t loom_gguf_find_key(const struct loom_gguf * g, const char * key) {
    if (!g || !key) return -1;
    return lgg_index_find(&g->key_index, key, strlen(key));
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

/* ================================================================
 * Typed metadata getters by key name: with defaults, strict, and array checks. */

/* Outcome of a lookup: the value, or why there is none. */
enum lookup { FOUND, MISSING, MISMATCH };

struct conv {
    enum lookup res;
    const struct gguf_kv * kv;
    char why[GGUF_QUOTE_SIZE + 128]; /* "key 'x' at byte N: ..." when not FOUND */
};

static const struct gguf_kv * find(const struct loom_gguf * g, const char * key, struct conv * c) {
    int64_t i = loom_gguf_find_key(g, key);
    char q[GGUF_QUOTE_SIZE];
    if (i < 0) {
        c->res = MISSING;
        snprintf(c->why, sizeof c->why, "key '%s' is missing", key ? lgg_quote(key, strlen(key), GGUF_QUOTE_SHOWN, q, sizeof q) : "(null)");
        return NULL;
    }
    c->res = FOUND;
    c->kv = &g->kv[i];
    return c->kv;
}

static void mismatch(struct conv * c, const char * fmt, const char * a, const char * b) {
    char q[GGUF_QUOTE_SIZE], detail[128];
    snprintf(detail, sizeof detail, fmt, a, b);
    c->res = MISMATCH;
    snprintf(c->why, sizeof c->why, "key '%s' at byte %llu: %s",
             lgg_quote(c->kv->key.data, c->kv->key.len, GGUF_QUOTE_SHOWN, q, sizeof q),
             (unsigned long long)c->kv->offset, detail);
}

/* Sign and magnitude of an integer value; false for other types. */
static bool int_value(const struct gguf_kv * kv, bool * neg, uint64_t * mag) {
    int64_t s;
    switch (kv->type) {
    case LOOM_GGUF_TYPE_UINT8: *neg = false; *mag = kv->scalar.u8; return true;
    case LOOM_GGUF_TYPE_UINT16: *neg = false; *mag = kv->scalar.u16; return true;
    case LOOM_GGUF_TYPE_UINT32: *neg = false; *mag = kv->scalar.u32; return true;
    case LOOM_GGUF_TYPE_UINT64: *neg = false; *mag = kv->scalar.u64; return true;
    case LOOM_GGUF_TYPE_INT8: s = kv->scalar.i8; break;
    case LOOM_GGUF_TYPE_INT16: s = kv->scalar.i16; break;
    case LOOM_GGUF_TYPE_INT32: s = kv->scalar.i32; break;
    case LOOM_GGUF_TYPE_INT64: s = kv->scalar.i64; break;
    default: return false;
    }
    *neg = s < 0;
    *mag = *neg ? 0 - (uint64_t)s : (uint64_t)s;
    return true;
}

/* Converts key 'key' to an integer in [lo, hi] ('tname' names the target type). */
static void get_int(const struct loom_gguf * g, const char * key, int64_t lo, uint64_t hi, const char * tname,
                    struct conv * c, int64_t * sv, uint64_t * uv) {
    const struct gguf_kv * kv = find(g, key, c);
    if (!kv) return;
    bool neg;
    uint64_t mag;
    if (!int_value(kv, &neg, &mag)) {
        mismatch(c, "has type %s, expected an integer (%s)", loom_gguf_type_name(kv->type), tname);
        return;
    }
    bool fits = neg ? mag <= 0 - (uint64_t)lo && lo < 0 : mag <= hi;
    if (!fits) {
        char v[32];
        snprintf(v, sizeof v, "%s%llu", neg ? "-" : "", (unsigned long long)mag);
        mismatch(c, "value %s does not fit %s", v, tname);
        return;
    }
    *uv = mag;
    *sv = neg ? (int64_t)(0 - mag) : (int64_t)mag; /* two's complement: exact for mag <= 2^63 */
}

static void get_float(const struct loom_gguf * g, const char * key, struct conv * c, double * v) {
    const struct gguf_kv * kv = find(g, key, c);
    if (!kv) return;
    if (kv->type == LOOM_GGUF_TYPE_FLOAT32) {
        *v = kv->scalar.f32;
    } else if (kv->type == LOOM_GGUF_TYPE_FLOAT64) {
        *v = kv->scalar.f64;
    } else {
        mismatch(c, "has type %s, expected %s", loom_gguf_type_name(kv->type), "f32 or f64");
    }
}

static void get_bool(const struct loom_gguf * g, const char * key, struct conv * c, bool * v) {
    const struct gguf_kv * kv = find(g, key, c);
    if (!kv) return;
    if (kv->type == LOOM_GGUF_TYPE_BOOL) {
        *v = kv->scalar.b != 0;
    } else {
        mismatch(c, "has type %s, expected %s", loom_gguf_type_name(kv->type), "bool");
    }
}

static void get_str(const struct loom_gguf * g, const char * key, struct conv * c, const char ** v, size_t * len) {
    const struct gguf_kv * kv = find(g, key, c);
    if (!kv) return;
    if (kv->type == LOOM_GGUF_TYPE_STRING) {
        *v = kv->str.data;
        *len = (size_t)kv->str.len;
    } else {
        mismatch(c, "has type %s, expected %s", loom_gguf_type_name(kv->type), "str");
    }
}

/* For the getters with defaults: true when the value is usable; a mismatch is logged. */
static bool usable(const struct conv * c) {
    if (c->res == MISMATCH) loom_log(LOOM_LOG_WARN, "%s; using the default", c->why);
    return c->res == FOUND;
}

/* For the strict getters. */
static enum loom_status report(const struct conv * c, char * err, size_t err_size) {
    if (c->res == FOUND) return LOOM_OK;
    return lgg_fail(err, err_size, LOOM_ERR_FORMAT, "%s", c->why);
}

#define INT_GETTERS(T, NAME, LO, HI, FIELD)                                                                         \
    T loom_gguf_get_##NAME(const struct loom_gguf * g, const char * key, T def) {                                 \
        struct conv c;                                                                                             \
        int64_t sv = 0;                                                                                            \
        uint64_t uv = 0;                                                                                           \
        get_int(g, key, LO, HI, #NAME, &c, &sv, &uv);                                                              \
        return usable(&c) ? (T)FIELD : def;                                                                        \
    }                                                                                                              \
    enum loom_status loom_gguf_read_##NAME(const struct loom_gguf * g, const char * key, T * out, char * err,     \
                                           size_t err_size) {                                                     \
        struct conv c;                                                                                             \
        int64_t sv = 0;                                                                                            \
        uint64_t uv = 0;                                                                                           \
        get_int(g, key, LO, HI, #NAME, &c, &sv, &uv);                                                              \
        if (c.res == FOUND) *out = (T)FIELD;                                                                       \
        return report(&c, err, err_size);                                                                          \
    }

INT_GETTERS(uint32_t, u32, 0, UINT32_MAX, uv)
INT_GETTERS(int32_t, i32, INT32_MIN, INT32_MAX, sv)
INT_GETTERS(uint64_t, u64, 0, UINT64_MAX, uv)
INT_GETTERS(int64_t, i64, INT64_MIN, INT64_MAX, sv)

float loom_gguf_get_f32(const struct loom_gguf * g, const char * key, float def) {
    struct conv c;
    double v = 0;
    get_float(g, key, &c, &v);
    return usable(&c) ? (float)v : def;
}

double loom_gguf_get_f64(const struct loom_gguf * g, const char * key, double def) {
    struct conv c;
    double v = 0;
    get_float(g, key, &c, &v);
    return usable(&c) ? v : def;
}

bool loom_gguf_get_bool(const struct loom_gguf * g, const char * key, bool def) {
    struct conv c;
    bool v = false;
    get_bool(g, key, &c, &v);
    return usable(&c) ? v : def;
}

const char * loom_gguf_get_str(const struct loom_gguf * g, const char * key, const char * def, size_t * len) {
    struct conv c;
    const char * v = NULL;
    size_t n = 0;
    get_str(g, key, &c, &v, &n);
    if (!usable(&c)) {
        v = def;
        n = def ? strlen(def) : 0;
    }
    if (len) *len = n;
    return v;
}

enum loom_status loom_gguf_read_f32(const struct loom_gguf * g, const char * key, float * out, char * err, size_t err_size) {
    struct conv c;
    double v = 0;
    get_float(g, key, &c, &v);
    if (c.res == FOUND) *out = (float)v;
    return report(&c, err, err_size);
}

enum loom_status loom_gguf_read_bool(const struct loom_gguf * g, const char * key, bool * out, char * err, size_t err_size) {
    struct conv c;
    bool v = false;
    get_bool(g, key, &c, &v);
    if (c.res == FOUND) *out = v;
    return report(&c, err, err_size);
}

enum loom_status loom_gguf_read_str(const struct loom_gguf * g, const char * key, const char ** out, size_t * len,
                                    char * err, size_t err_size) {
    struct conv c;
    const char * v = NULL;
    size_t n = 0;
    get_str(g, key, &c, &v, &n);
    if (c.res == FOUND) {
        *out = v;
        if (len) *len = n;
    }
    return report(&c, err, err_size);
}

/* ================================================================
 * Array metadata by key name, and the "must be T[n]" expectation check. */

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
    lgg_quote(key ? key : "(null)", key ? strlen(key) : 6, GGUF_QUOTE_SHOWN, q, sizeof q);
    char want[48];
    if (n == LOOM_GGUF_ANY_N) {
        snprintf(want, sizeof want, "%s[]", loom_gguf_type_name(elem_type));
    } else {
        snprintf(want, sizeof want, "%s[%llu]", loom_gguf_type_name(elem_type), (unsigned long long)n);
    }
    int64_t i = loom_gguf_find_key(g, key);
    if (i < 0) return lgg_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' is missing (expected %s)", q, want);
    const struct gguf_kv * kv = &g->kv[i];
    if (kv->type != LOOM_GGUF_TYPE_ARRAY) {
        return lgg_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: expected %s, found %s", q,
                         (unsigned long long)kv->offset, want, loom_gguf_type_name(kv->type));
    }
    if (kv->arr_type != elem_type || (n != LOOM_GGUF_ANY_N && kv->n != n)) {
        return lgg_fail(err, err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: expected %s, found %s[%llu]", q,
                         (unsigned long long)kv->offset, want, loom_gguf_type_name(kv->arr_type), (unsigned long long)kv->n);
    }
    return LOOM_OK;
}

/* ================================================================
 * Tensor-info access and lookup by name. */

static const struct gguf_tensor * tensor_at(const struct loom_gguf * g, int64_t i) {
    LOOM_ASSERT(g && i >= 0 && (uint64_t)i < g->n_tensors);
    return &g->tensors[i];
}

int64_t loom_gguf_n_tensors(const struct loom_gguf * g) { return (int64_t)g->n_tensors; }

int64_t loom_gguf_find_tensor(const struct loom_gguf * g, const char * name) {
    if (!g || !name) return -1;
    return lgg_index_find(&g->tensor_index, name, strlen(name));
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
