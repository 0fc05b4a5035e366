/* gguf-writer.c -- the GGUF writer's metadata and tensor-info collection. */
#include "gguf-writer-impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct loom_gguf_writer * loom_gguf_writer_new(void) {
    struct loom_gguf_writer * w = calloc(1, sizeof *w);
    if (!w) {
        loom_log(LOOM_LOG_ERROR, "loom_gguf_writer_new: out of memory");
        return NULL;
    }
    w->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    w->state = WRITER_COLLECT;
    w->sig_slot = -1;
    return w;
}

void gguf_wkv_clear(struct wkv * kv) {
    if (kv->type == LOOM_GGUF_TYPE_ARRAY && kv->arr_type == LOOM_GGUF_TYPE_STRING) {
        struct wstr * s = kv->arr;
        for (uint64_t j = 0; j < kv->n; j++) free(s[j].data);
    }
    free(kv->arr);
    free(kv->str.data);
    kv->arr = NULL;
    kv->str.data = NULL;
    kv->n = 0;
}

static bool copy_bytes(struct wstr * out, const char * s, size_t len) {
    if (len == SIZE_MAX) return false;
    out->data = malloc(len + 1);
    if (!out->data) return false;
    if (len) memcpy(out->data, s, len);
    out->data[len] = '\0';
    out->len = len;
    return true;
}

static enum loom_status check_key(const struct loom_gguf_writer * w, const char * key) {
    if (!w || !key) return LOOM_ERR_INVALID_ARG;
    size_t len = strlen(key);
    if (len == 0 || len > LOOM_GGUF_MAX_KEY) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: key of %zu bytes (must be 1..%d)", len, LOOM_GGUF_MAX_KEY);
        return LOOM_ERR_INVALID_ARG;
    }
    if (w->state != WRITER_COLLECT) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: key '%s' set after the file was begun", key);
        return LOOM_ERR_INVALID_ARG;
    }
    return LOOM_OK;
}

static int64_t find_kv(const struct loom_gguf_writer * w, const char * key) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kv[i].key.data, key)) return (int64_t)i;
    }
    return -1;
}

/* Stores 'val' (whose allocations the writer takes over) under 'key', replacing an old value. */
static enum loom_status put(struct loom_gguf_writer * w, const char * key, struct wkv * val) {
    enum loom_status st = check_key(w, key);
    if (st == LOOM_OK && !strcmp(key, LOOM_GGUF_KEY_ALIGNMENT)) {
        uint32_t a = (uint32_t)val->scalar;
        if (val->type != LOOM_GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)) || a > LOOM_GGUF_MAX_ALIGNMENT) {
            loom_log(LOOM_LOG_ERROR, "gguf writer: '%s' must be a u32 power of two <= %u", key, LOOM_GGUF_MAX_ALIGNMENT);
            st = LOOM_ERR_INVALID_ARG;
        } else {
            w->alignment = a;
        }
    }
    if (st != LOOM_OK) {
        gguf_wkv_clear(val);
        return st;
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        struct wstr k = w->kv[i].key;
        gguf_wkv_clear(&w->kv[i]);
        w->kv[i] = *val;
        w->kv[i].key = k;
        return LOOM_OK;
    }
    if (!gguf_grow((void **)&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv) || !copy_bytes(&val->key, key, strlen(key))) {
        gguf_wkv_clear(val);
        return LOOM_ERR_OOM;
    }
    w->kv[w->n_kv++] = *val;
    return LOOM_OK;
}

static enum loom_status put_scalar(struct loom_gguf_writer * w, const char * key, enum loom_gguf_type type,
                                   const void * v) {
    struct wkv val = {.type = type, .arr_type = LOOM_GGUF_TYPE_COUNT};
    memcpy(&val.scalar, v, loom_gguf_type_size(type));
    return put(w, key, &val);
}

enum loom_status loom_gguf_writer_set_u8(struct loom_gguf_writer * w, const char * key, uint8_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT8, &v); }
enum loom_status loom_gguf_writer_set_i8(struct loom_gguf_writer * w, const char * key, int8_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT8, &v); }
enum loom_status loom_gguf_writer_set_u16(struct loom_gguf_writer * w, const char * key, uint16_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT16, &v); }
enum loom_status loom_gguf_writer_set_i16(struct loom_gguf_writer * w, const char * key, int16_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT16, &v); }
enum loom_status loom_gguf_writer_set_u32(struct loom_gguf_writer * w, const char * key, uint32_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT32, &v); }
enum loom_status loom_gguf_writer_set_i32(struct loom_gguf_writer * w, const char * key, int32_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT32, &v); }
enum loom_status loom_gguf_writer_set_u64(struct loom_gguf_writer * w, const char * key, uint64_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT64, &v); }
enum loom_status loom_gguf_writer_set_i64(struct loom_gguf_writer * w, const char * key, int64_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT64, &v); }
enum loom_status loom_gguf_writer_set_f32(struct loom_gguf_writer * w, const char * key, float v) { return put_scalar(w, key, LOOM_GGUF_TYPE_FLOAT32, &v); }
enum loom_status loom_gguf_writer_set_f64(struct loom_gguf_writer * w, const char * key, double v) { return put_scalar(w, key, LOOM_GGUF_TYPE_FLOAT64, &v); }

enum loom_status loom_gguf_writer_set_bool(struct loom_gguf_writer * w, const char * key, bool v) {
    uint8_t b = v ? 1 : 0;
    return put_scalar(w, key, LOOM_GGUF_TYPE_BOOL, &b);
}

enum loom_status loom_gguf_writer_set_str_n(struct loom_gguf_writer * w, const char * key, const char * s, size_t len) {
    if (!s && len) return LOOM_ERR_INVALID_ARG;
    struct wkv val = {.type = LOOM_GGUF_TYPE_STRING, .arr_type = LOOM_GGUF_TYPE_COUNT};
    if (!copy_bytes(&val.str, s ? s : "", len)) return LOOM_ERR_OOM;
    return put(w, key, &val);
}

enum loom_status loom_gguf_writer_set_str(struct loom_gguf_writer * w, const char * key, const char * s) {
    if (!s) return LOOM_ERR_INVALID_ARG;
    return loom_gguf_writer_set_str_n(w, key, s, strlen(s));
}

enum loom_status loom_gguf_writer_set_arr_data(struct loom_gguf_writer * w, const char * key, enum loom_gguf_type type,
                                               const void * data, size_t n) {
    size_t esize = loom_gguf_type_size(type);
    if (esize == 0 || (!data && n) || n > SIZE_MAX / esize) return LOOM_ERR_INVALID_ARG;
    if (type == LOOM_GGUF_TYPE_BOOL) {
        for (size_t j = 0; j < n; j++) {
            if (((const uint8_t *)data)[j] > 1) return LOOM_ERR_INVALID_ARG;
        }
    }
    struct wkv val = {.type = LOOM_GGUF_TYPE_ARRAY, .arr_type = type, .n = n};
    if (n) {
        val.arr = malloc(n * esize);
        if (!val.arr) return LOOM_ERR_OOM;
        memcpy(val.arr, data, n * esize);
    }
    return put(w, key, &val);
}

enum loom_status loom_gguf_writer_set_arr_str(struct loom_gguf_writer * w, const char * key, const char * const * strs,
                                              const size_t * lens, size_t n) {
    if ((!strs && n) || n > SIZE_MAX / sizeof(struct wstr)) return LOOM_ERR_INVALID_ARG;
    for (size_t j = 0; j < n; j++) {
        if (!strs[j] && (!lens || lens[j])) return LOOM_ERR_INVALID_ARG;
    }
    struct wkv val = {.type = LOOM_GGUF_TYPE_ARRAY, .arr_type = LOOM_GGUF_TYPE_STRING};
    if (n) {
        val.arr = calloc(n, sizeof(struct wstr));
        if (!val.arr) return LOOM_ERR_OOM;
    }
    struct wstr * out = val.arr;
    for (size_t j = 0; j < n; j++) {
        const char * s = strs[j] ? strs[j] : "";
        if (!copy_bytes(&out[j], s, lens ? lens[j] : strlen(s))) {
            val.n = j;
            gguf_wkv_clear(&val);
            return LOOM_ERR_OOM;
        }
    }
    val.n = n;
    return put(w, key, &val);
}

enum loom_status loom_gguf_writer_copy_kv(struct loom_gguf_writer * w, const struct loom_gguf * g, int64_t i) {
    if (!w || !g || i < 0 || i >= loom_gguf_n_kv(g)) return LOOM_ERR_INVALID_ARG;
    if (g->has_file_id) {
        enum loom_status st = gguf_writer_protect_id(w, g->dev, g->ino);
        if (st != LOOM_OK) return st;
    }
    const struct gguf_kv * kv = &g->kv[i];
    const char * key = kv->key.data;
    switch (kv->type) {
    case LOOM_GGUF_TYPE_STRING:
        return loom_gguf_writer_set_str_n(w, key, kv->str.data, (size_t)kv->str.len);
    case LOOM_GGUF_TYPE_ARRAY:
        if (kv->arr_type != LOOM_GGUF_TYPE_STRING) {
            return loom_gguf_writer_set_arr_data(w, key, kv->arr_type, kv->arr, (size_t)kv->n);
        } else {
            const struct gguf_str * s = kv->arr;
            size_t n = (size_t)kv->n;
            const char ** ptrs = malloc((n ? n : 1) * sizeof *ptrs);
            size_t * lens = malloc((n ? n : 1) * sizeof *lens);
            enum loom_status st = LOOM_ERR_OOM;
            if (ptrs && lens) {
                for (size_t j = 0; j < n; j++) {
                    ptrs[j] = s[j].data;
                    lens[j] = (size_t)s[j].len;
                }
                st = loom_gguf_writer_set_arr_str(w, key, ptrs, lens, n);
            }
            free(ptrs);
            free(lens);
            return st;
        }
    default:
        return put_scalar(w, key, kv->type, &kv->scalar);
    }
}

void loom_gguf_writer_remove_key(struct loom_gguf_writer * w, const char * key) {
    if (!w || !key || w->state != WRITER_COLLECT) return;
    int64_t i = find_kv(w, key);
    if (i < 0) return;
    gguf_wkv_clear(&w->kv[i]);
    free(w->kv[i].key.data);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!strcmp(key, LOOM_GGUF_KEY_ALIGNMENT)) w->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
}

enum loom_status loom_gguf_writer_set_alignment(struct loom_gguf_writer * w, uint32_t alignment) {
    if (!w || alignment == 0 || (alignment & (alignment - 1)) || alignment > LOOM_GGUF_MAX_ALIGNMENT) {
        return LOOM_ERR_INVALID_ARG;
    }
    if (alignment == LOOM_GGUF_DEFAULT_ALIGNMENT) {
        if (w->state != WRITER_COLLECT) return LOOM_ERR_INVALID_ARG;
        loom_gguf_writer_remove_key(w, LOOM_GGUF_KEY_ALIGNMENT);
        return LOOM_OK;
    }
    return loom_gguf_writer_set_u32(w, LOOM_GGUF_KEY_ALIGNMENT, alignment);
}

int64_t loom_gguf_writer_n_kv(const struct loom_gguf_writer * w) { return (int64_t)w->n_kv; }
int64_t loom_gguf_writer_n_tensors(const struct loom_gguf_writer * w) { return (int64_t)w->n_tensors; }

enum loom_status gguf_writer_protect_id(struct loom_gguf_writer * w, dev_t dev, ino_t ino) {
    for (size_t i = 0; i < w->n_protect; i++) {
        if (w->protect[i].dev == dev && w->protect[i].ino == ino) return LOOM_OK;
    }
    if (!gguf_grow((void **)&w->protect, &w->cap_protect, w->n_protect + 1, sizeof *w->protect)) return LOOM_ERR_OOM;
    w->protect[w->n_protect++] = (struct file_id){dev, ino};
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_protect(struct loom_gguf_writer * w, const char * path) {
    if (!w || !path) return LOOM_ERR_INVALID_ARG;
    struct stat sb;
    if (stat(path, &sb) != 0) return LOOM_OK; /* nothing there to replace */
    return gguf_writer_protect_id(w, sb.st_dev, sb.st_ino);
}
