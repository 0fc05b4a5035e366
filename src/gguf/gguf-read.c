/* gguf-read.c -- parses a GGUF header and its key-value pairs from a bounded byte source. */
#include "gguf-impl.h"

#include <stdlib.h>
#include <string.h>

/* Smallest encodings, to reject counts that promise more than the file holds before allocating. */
#define MIN_KV_BYTES 14     /* u64 key length, 1 key byte, u32 type, 1 value byte */
#define MIN_TENSOR_BYTES 33 /* u64 name length, 1 name byte, u32 n_dims, 1 x u64 ne, u32 type, u64 offset */

enum loom_status gguf_read_bytes(struct gguf_parser * p, void * dst, uint64_t n, const char * what, uint64_t at) {
    uint64_t pos = p->src->pos;
    enum loom_status st = gguf_source_read(p->src, dst, n);
    if (st == LOOM_ERR_FORMAT) {
        return gguf_fail(p->err, p->err_size, st,
                         "%s at byte %llu: truncated: %llu bytes needed at byte %llu, file ends at byte %llu", what,
                         (unsigned long long)at, (unsigned long long)n, (unsigned long long)pos,
                         (unsigned long long)p->src->size);
    }
    if (st != LOOM_OK) {
        return gguf_fail(p->err, p->err_size, st, "%s at byte %llu: read failed at byte %llu: %s", what,
                         (unsigned long long)at, (unsigned long long)pos, strerror(p->src->err_no));
    }
    return LOOM_OK;
}

static enum loom_status read_u32(struct gguf_parser * p, uint32_t * v, const char * what, uint64_t at) {
    return gguf_read_bytes(p, v, 4, what, at);
}

static enum loom_status read_u64(struct gguf_parser * p, uint64_t * v, const char * what, uint64_t at) {
    return gguf_read_bytes(p, v, 8, what, at);
}

enum loom_status gguf_read_str(struct gguf_parser * p, struct gguf_str * out, uint64_t max_len, const char * what,
                               uint64_t at) {
    uint64_t len;
    enum loom_status st = read_u64(p, &len, what, at);
    if (st != LOOM_OK) return st;
    if (len > max_len) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: string length %llu exceeds the limit of %llu",
                         what, (unsigned long long)at, (unsigned long long)len, (unsigned long long)max_len);
    }
    if (len > gguf_source_remaining(p->src)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "%s at byte %llu: string of %llu bytes at byte %llu extends past end of file (%llu bytes)", what,
                         (unsigned long long)at, (unsigned long long)len, (unsigned long long)p->src->pos,
                         (unsigned long long)p->src->size);
    }
    char * data = len < SIZE_MAX ? gguf_arena_alloc(&p->g->arena, (size_t)len + 1) : NULL;
    if (!data) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory for a string of %llu bytes",
                         what, (unsigned long long)at, (unsigned long long)len);
    }
    st = gguf_read_bytes(p, data, len, what, at);
    if (st != LOOM_OK) return st;
    data[len] = '\0';
    out->len = len;
    out->data = data;
    return LOOM_OK;
}

enum loom_status gguf_parse_header(struct gguf_parser * p) {
    char magic[4];
    enum loom_status st = gguf_read_bytes(p, magic, 4, "header", 0);
    if (st != LOOM_OK) return st;
    if (memcmp(magic, LOOM_GGUF_MAGIC, 4) != 0) {
        char q[GGUF_QUOTE_SIZE];
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "header at byte 0: bad magic '%s', expected 'GGUF'",
                         gguf_quote(magic, 4, 4, q, sizeof q));
    }
    uint32_t version;
    st = read_u32(p, &version, "header", 0);
    if (st != LOOM_OK) return st;
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped >= 1 && swapped <= 3) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED,
                             "header at byte 4: big-endian GGUF not supported (version field reads 0x%08x)", version);
        }
        return gguf_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED,
                         "header at byte 4: GGUF version %u is not supported (only 2 and 3)", version);
    }
    p->g->version = version;
    uint64_t n_tensors, n_kv;
    if ((st = read_u64(p, &n_tensors, "header", 0)) != LOOM_OK) return st;
    if ((st = read_u64(p, &n_kv, "header", 0)) != LOOM_OK) return st;
    uint64_t rem = gguf_source_remaining(p->src);
    uint64_t kv_bytes, tensor_bytes, total;
    if (!gguf_mul_ok(n_kv, MIN_KV_BYTES, &kv_bytes) || !gguf_mul_ok(n_tensors, MIN_TENSOR_BYTES, &tensor_bytes) ||
        !gguf_add_ok(kv_bytes, tensor_bytes, &total) || total > rem) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "header at byte 8: %llu tensors and %llu keys cannot fit in the %llu bytes after the header",
                         (unsigned long long)n_tensors, (unsigned long long)n_kv, (unsigned long long)rem);
    }
    if ((st = gguf_parse_kvs(p, n_kv)) != LOOM_OK) return st;
    if ((st = gguf_validate_alignment(p)) != LOOM_OK) return st;
    if ((st = gguf_parse_tensor_infos(p, n_tensors)) != LOOM_OK) return st;
    uint64_t end = p->src->pos;
    if (end > UINT64_MAX - p->g->alignment) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "header: data offset overflows");
    }
    p->g->data_offset = (end + p->g->alignment - 1) / p->g->alignment * p->g->alignment;
    return gguf_validate_tensors(p);
}

/* Reads the elements of an array value (its type and count already read). */
static enum loom_status read_array(struct gguf_parser * p, struct gguf_kv * kv, const char * what, uint64_t at) {
    uint64_t rem = gguf_source_remaining(p->src);
    if (kv->arr_type == LOOM_GGUF_TYPE_STRING) {
        if (kv->n > rem / 8) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                             "%s at byte %llu: array of %llu strings cannot fit in the %llu bytes that remain", what,
                             (unsigned long long)at, (unsigned long long)kv->n, (unsigned long long)rem);
        }
        /* grow while reading, so memory follows what the file really holds */
        uint64_t n = kv->n;
        size_t cap = 0;
        kv->n = 0;
        for (uint64_t j = 0; j < n; j++) {
            if (!gguf_grow(&kv->arr, &cap, (size_t)j + 1, sizeof(struct gguf_str))) {
                return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory", what,
                                 (unsigned long long)at);
            }
            struct gguf_str * strs = kv->arr;
            enum loom_status st = gguf_read_str(p, &strs[j], UINT64_MAX, what, at);
            if (st != LOOM_OK) return st;
            kv->n = j + 1;
        }
        return LOOM_OK;
    }
    size_t esize = loom_gguf_type_size(kv->arr_type);
    if (kv->n > rem / esize) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "%s at byte %llu: array of %llu %s cannot fit in the %llu bytes that remain", what,
                         (unsigned long long)at, (unsigned long long)kv->n, loom_gguf_type_name(kv->arr_type),
                         (unsigned long long)rem);
    }
    if (kv->n == 0) return LOOM_OK;
    uint64_t bytes = kv->n * esize;
    kv->arr = bytes < SIZE_MAX ? malloc((size_t)bytes) : NULL;
    if (!kv->arr) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory for %llu bytes", what,
                         (unsigned long long)at, (unsigned long long)bytes);
    }
    enum loom_status st = gguf_read_bytes(p, kv->arr, bytes, what, at);
    if (st != LOOM_OK) return st;
    if (kv->arr_type == LOOM_GGUF_TYPE_BOOL) {
        const uint8_t * b = kv->arr;
        for (uint64_t j = 0; j < kv->n; j++) {
            if (b[j] > 1) {
                return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                                 "%s at byte %llu: bool element %llu is %u, not 0 or 1", what, (unsigned long long)at,
                                 (unsigned long long)j, b[j]);
            }
        }
    }
    return LOOM_OK;
}

static enum loom_status read_value(struct gguf_parser * p, struct gguf_kv * kv, const char * what, uint64_t at) {
    switch (kv->type) {
    case LOOM_GGUF_TYPE_STRING:
        return gguf_read_str(p, &kv->str, UINT64_MAX, what, at);
    case LOOM_GGUF_TYPE_ARRAY: {
        uint32_t et;
        enum loom_status st = read_u32(p, &et, what, at);
        if (st != LOOM_OK) return st;
        if (et == LOOM_GGUF_TYPE_ARRAY) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED, "%s at byte %llu: arrays of arrays are not supported",
                             what, (unsigned long long)at);
        }
        if (et >= LOOM_GGUF_TYPE_COUNT) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown array element type %u", what,
                             (unsigned long long)at, et);
        }
        kv->arr_type = (enum loom_gguf_type)et;
        if ((st = read_u64(p, &kv->n, what, at)) != LOOM_OK) return st;
        return read_array(p, kv, what, at);
    }
    default: {
        enum loom_status st = gguf_read_bytes(p, &kv->scalar, loom_gguf_type_size(kv->type), what, at);
        if (st != LOOM_OK) return st;
        if (kv->type == LOOM_GGUF_TYPE_BOOL && kv->scalar.b > 1) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: bool value %u is not 0 or 1", what,
                             (unsigned long long)at, kv->scalar.b);
        }
        return LOOM_OK;
    }
    }
}

enum loom_status gguf_parse_kvs(struct gguf_parser * p, uint64_t n_kv) {
    struct loom_gguf * g = p->g;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t at = p->src->pos;
        char what[GGUF_QUOTE_SIZE + 16];
        snprintf(what, sizeof what, "key #%llu", (unsigned long long)i);
        if (!gguf_grow((void **)&g->kv, &g->cap_kv, g->n_kv + 1, sizeof *g->kv)) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory", what, (unsigned long long)at);
        }
        struct gguf_kv * kv = &g->kv[g->n_kv++];
        memset(kv, 0, sizeof *kv);
        kv->offset = at;
        kv->arr_type = LOOM_GGUF_TYPE_COUNT;
        enum loom_status st = gguf_read_str(p, &kv->key, LOOM_GGUF_MAX_KEY, what, at);
        if (st != LOOM_OK) return st;
        if (kv->key.len == 0) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: empty key", what, (unsigned long long)at);
        }
        char q[GGUF_QUOTE_SIZE];
        gguf_quote(kv->key.data, kv->key.len, GGUF_QUOTE_SHOWN, q, sizeof q);
        if (memchr(kv->key.data, '\0', kv->key.len)) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: key contains a NUL byte", q,
                             (unsigned long long)at);
        }
        snprintf(what, sizeof what, "key '%s'", q);
        uint32_t type;
        if ((st = read_u32(p, &type, what, at)) != LOOM_OK) return st;
        if (type >= LOOM_GGUF_TYPE_COUNT) {
            return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown value type %u", what,
                             (unsigned long long)at, type);
        }
        kv->type = (enum loom_gguf_type)type;
        if ((st = read_value(p, kv, what, at)) != LOOM_OK) return st;
    }
    int64_t dup;
    if (!gguf_index_build(&g->key_index, g->n_kv, gguf_kv_name_of, g, &dup)) {
        return gguf_fail(p->err, p->err_size, LOOM_ERR_OOM, "keys: out of memory for the index");
    }
    if (dup >= 0) {
        const struct gguf_kv * kv = &g->kv[dup];
        int64_t first = gguf_index_first(&g->key_index, kv->key.data, (size_t)kv->key.len);
        char q[GGUF_QUOTE_SIZE];
        return gguf_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: duplicate key (first at byte %llu)",
                         gguf_quote(kv->key.data, kv->key.len, GGUF_QUOTE_SHOWN, q, sizeof q),
                         (unsigned long long)kv->offset, (unsigned long long)g->kv[first].offset);
    }
    return LOOM_OK;
}
