/* gguf-reader.c -- the GGUF reader: bounded reads from a file or a memory image, parsing of the
 * header, the key-value pairs and the tensor infos, validation against the file size, the name
 * index, opening and freeing a handle, and its error messages. */
#include "gguf-impl.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================
 * The reader's arena and a checked array-growing helper. */

#define ARENA_CHUNK (64 * 1024) /* bytes: the default chunk; larger requests get their own */

struct gguf_arena_chunk {
    struct gguf_arena_chunk * next;
    size_t size;   /* usable bytes after the header */
    size_t used;
    max_align_t data[]; /* aligned start of the usable bytes */
};

void * lgg_arena_alloc(struct gguf_arena * a, size_t size) {
    size_t need = (size + 7) & ~(size_t)7;
    if (need < size) return NULL;
    struct gguf_arena_chunk * c = a->head;
    if (!c || c->size - c->used < need) {
        size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (csize > SIZE_MAX - sizeof *c) return NULL;
        c = malloc(sizeof *c + csize);
        if (!c) return NULL;
        c->size = csize;
        c->used = 0;
        if (a->head && need > ARENA_CHUNK) {
            /* a big block: keep the current chunk first so its free space stays usable */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void * p = (char *)c->data + c->used;
    c->used += need;
    return p;
}

void lgg_arena_free(struct gguf_arena * a) {
    struct gguf_arena_chunk * c = a->head;
    while (c) {
        struct gguf_arena_chunk * next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

bool lgg_grow(void ** ptr, size_t * cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2) return false;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem) return false;
    void * p = realloc(*ptr, n * elem);
    if (!p) return false;
    *ptr = p;
    *cap = n;
    return true;
}

/* ================================================================
 * One-line error messages and safe quoting of names taken from files. */

enum loom_status lgg_fail(char * err, size_t err_size, enum loom_status st, const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (err && err_size) {
        snprintf(err, err_size, "%s", buf);
    } else {
        loom_log(LOOM_LOG_ERROR, "%s", buf);
    }
    return st;
}

const char * lgg_quote(const char * s, size_t len, size_t max_shown, char * out, size_t out_size) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (out_size < 8) {
        if (out_size) out[0] = '\0';
        return out;
    }
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        if (i >= max_shown || o + 8 >= out_size) {
            out[o++] = '.';
            out[o++] = '.';
            out[o++] = '.';
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return out;
}

/* ================================================================
 * Names and sizes of GGUF metadata value types, tensor geometry. */

static const struct {
    const char * name;
    size_t size; /* bytes; 0 for variable-size types */
} value_types[LOOM_GGUF_TYPE_COUNT] = {
    [LOOM_GGUF_TYPE_UINT8] = {"u8", 1},   [LOOM_GGUF_TYPE_INT8] = {"i8", 1},
    [LOOM_GGUF_TYPE_UINT16] = {"u16", 2}, [LOOM_GGUF_TYPE_INT16] = {"i16", 2},
    [LOOM_GGUF_TYPE_UINT32] = {"u32", 4}, [LOOM_GGUF_TYPE_INT32] = {"i32", 4},
    [LOOM_GGUF_TYPE_FLOAT32] = {"f32", 4}, [LOOM_GGUF_TYPE_BOOL] = {"bool", 1},
    [LOOM_GGUF_TYPE_STRING] = {"str", 0}, [LOOM_GGUF_TYPE_ARRAY] = {"arr", 0},
    [LOOM_GGUF_TYPE_UINT64] = {"u64", 8}, [LOOM_GGUF_TYPE_INT64] = {"i64", 8},
    [LOOM_GGUF_TYPE_FLOAT64] = {"f64", 8},
};
static_assert(sizeof value_types / sizeof value_types[0] == LOOM_GGUF_TYPE_COUNT, "one entry per value type");

const char * loom_gguf_type_name(enum loom_gguf_type type) {
    if ((int)type < 0 || type >= LOOM_GGUF_TYPE_COUNT) return "?";
    return value_types[type].name;
}

size_t loom_gguf_type_size(enum loom_gguf_type type) {
    if ((int)type < 0 || type >= LOOM_GGUF_TYPE_COUNT) return 0;
    return value_types[type].size;
}

bool lgg_tensor_geometry(enum loom_type type, int n_dims, const int64_t * ne, int64_t * nelements, uint64_t * size) {
    if (!loom_type_is_known((int)type) || n_dims < 1 || n_dims > LOOM_MAX_DIMS) return false;
    int64_t blck = loom_blck_size(type);
    if (ne[0] < 1 || ne[0] % blck != 0) return false;
    uint64_t n = 1;
    uint64_t bytes;
    if (!gguf_mul_ok((uint64_t)(ne[0] / blck), (uint64_t)loom_type_size(type), &bytes)) return false;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1) return false;
        if (!gguf_mul_ok(n, (uint64_t)ne[d], &n)) return false;
        if (d > 0 && !gguf_mul_ok(bytes, (uint64_t)ne[d], &bytes)) return false;
    }
    if (n > INT64_MAX || bytes > INT64_MAX) return false;
    *nelements = (int64_t)n;
    *size = bytes;
    return true;
}

/* ================================================================
 * Bounded, buffered reads from a file descriptor (pread) or a memory image. */

#define SOURCE_BUF (64 * 1024) /* bytes */

void lgg_source_init_memory(struct gguf_source * s, const void * data, size_t size) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->mem = data;
    s->size = size;
}

bool lgg_source_init_fd(struct gguf_source * s, int fd, uint64_t size) {
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->size = size;
    s->buf = malloc(SOURCE_BUF);
    return s->buf != NULL;
}

void lgg_source_done(struct gguf_source * s) {
    free(s->buf);
    s->buf = NULL;
}

/* Reads exactly 'n' bytes at file offset 'off' (the caller checked the range). */
static enum loom_status pread_full(struct gguf_source * s, void * dst, uint64_t n, uint64_t off) {
    uint8_t * d = dst;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(s->fd, d, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s->err_no = r < 0 ? errno : EIO; /* 0: the file shrank under us */
            return LOOM_ERR_IO;
        }
        d += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return LOOM_OK;
}

enum loom_status lgg_source_read(struct gguf_source * s, void * dst, uint64_t n) {
    if (n > s->size - s->pos) return LOOM_ERR_FORMAT;
    if (n == 0) return LOOM_OK;
    if (s->mem) {
        memcpy(dst, s->mem + s->pos, (size_t)n);
        s->pos += n;
        return LOOM_OK;
    }
    uint8_t * d = dst;
    while (n > 0) {
        if (s->pos >= s->buf_off && s->pos < s->buf_off + s->buf_len) {
            size_t at = (size_t)(s->pos - s->buf_off);
            size_t take = s->buf_len - at;
            if (take > n) take = (size_t)n;
            memcpy(d, s->buf + at, take);
            d += take;
            s->pos += take;
            n -= take;
            continue;
        }
        if (n >= SOURCE_BUF) { /* large: straight into the destination */
            enum loom_status st = pread_full(s, d, n, s->pos);
            if (st != LOOM_OK) return st;
            s->pos += n;
            return LOOM_OK;
        }
        uint64_t fill = s->size - s->pos;
        if (fill > SOURCE_BUF) fill = SOURCE_BUF;
        enum loom_status st = pread_full(s, s->buf, fill, s->pos);
        if (st != LOOM_OK) return st;
        s->buf_off = s->pos;
        s->buf_len = (size_t)fill;
    }
    return LOOM_OK;
}

/* ================================================================
 * Sorted name index (keys, tensor names): O(n log n) to build, O(log n) lookups, whatever the
 * names. A sorted index rather than a hash table because the names come from hostile files:
 * crafted collisions cannot make it quadratic. */

static int cmp_names(const char * a, size_t alen, const char * b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static int cmp_entries(const void * pa, const void * pb) {
    const struct gguf_index_entry * a = pa;
    const struct gguf_index_entry * b = pb;
    int c = cmp_names(a->name, a->len, b->name, b->len);
    if (c) return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

bool lgg_index_build(struct gguf_index * ix, size_t n, gguf_name_fn names_of, const void * ctx, int64_t * dup) {
    *dup = -1;
    free(ix->entries);
    ix->entries = NULL;
    ix->n = 0;
    if (n == 0) return true;
    ix->entries = malloc(n * sizeof *ix->entries);
    if (!ix->entries) return false;
    for (size_t i = 0; i < n; i++) {
        struct gguf_index_entry * e = &ix->entries[i];
        e->id = (int64_t)i;
        e->name = names_of(ctx, e->id, &e->len);
    }
    ix->n = n;
    qsort(ix->entries, n, sizeof *ix->entries, cmp_entries);
    /* equal names are adjacent, in id order: report the duplicate that comes first in the file */
    for (size_t i = 1; i < n; i++) {
        const struct gguf_index_entry * a = &ix->entries[i - 1];
        const struct gguf_index_entry * b = &ix->entries[i];
        if (!cmp_names(a->name, a->len, b->name, b->len) && (*dup < 0 || b->id < *dup)) *dup = b->id;
    }
    return true;
}

int64_t lgg_index_find(const struct gguf_index * ix, const char * s, size_t len) {
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct gguf_index_entry * e = &ix->entries[mid];
        int c = cmp_names(e->name, e->len, s, len);
        if (c == 0) return e->id;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int64_t lgg_index_first(const struct gguf_index * ix, const char * s, size_t len) {
    /* lower bound: with duplicates the lowest id sorts first */
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_names(ix->entries[mid].name, ix->entries[mid].len, s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < ix->n && !cmp_names(ix->entries[lo].name, ix->entries[lo].len, s, len)) return ix->entries[lo].id;
    return -1;
}

void lgg_index_free(struct gguf_index * ix) {
    free(ix->entries);
    ix->entries = NULL;
    ix->n = 0;
}

/* ================================================================
 * Parses a GGUF header and its key-value pairs from a bounded byte source. */

/* Smallest encodings, to reject counts that promise more than the file holds before allocating. */
#define MIN_KV_BYTES 14     /* u64 key length, 1 key byte, u32 type, 1 value byte */
#define MIN_TENSOR_BYTES 33 /* u64 name length, 1 name byte, u32 n_dims, 1 x u64 ne, u32 type, u64 offset */

enum loom_status lgg_read_bytes(struct gguf_parser * p, void * dst, uint64_t n, const char * what, uint64_t at) {
    uint64_t pos = p->src->pos;
    enum loom_status st = lgg_source_read(p->src, dst, n);
    if (st == LOOM_ERR_FORMAT) {
        return lgg_fail(p->err, p->err_size, st,
                         "%s at byte %llu: truncated: %llu bytes needed at byte %llu, file ends at byte %llu", what,
                         (unsigned long long)at, (unsigned long long)n, (unsigned long long)pos,
                         (unsigned long long)p->src->size);
    }
    if (st != LOOM_OK) {
        return lgg_fail(p->err, p->err_size, st, "%s at byte %llu: read failed at byte %llu: %s", what,
                         (unsigned long long)at, (unsigned long long)pos, strerror(p->src->err_no));
    }
    return LOOM_OK;
}

static enum loom_status read_u32(struct gguf_parser * p, uint32_t * v, const char * what, uint64_t at) {
    return lgg_read_bytes(p, v, 4, what, at);
}

static enum loom_status read_u64(struct gguf_parser * p, uint64_t * v, const char * what, uint64_t at) {
    return lgg_read_bytes(p, v, 8, what, at);
}

enum loom_status lgg_read_str(struct gguf_parser * p, struct gguf_str * out, uint64_t max_len, const char * what,
                               uint64_t at) {
    uint64_t len;
    enum loom_status st = read_u64(p, &len, what, at);
    if (st != LOOM_OK) return st;
    if (len > max_len) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: string length %llu exceeds the limit of %llu",
                         what, (unsigned long long)at, (unsigned long long)len, (unsigned long long)max_len);
    }
    if (len > gguf_source_remaining(p->src)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "%s at byte %llu: string of %llu bytes at byte %llu extends past end of file (%llu bytes)", what,
                         (unsigned long long)at, (unsigned long long)len, (unsigned long long)p->src->pos,
                         (unsigned long long)p->src->size);
    }
    char * data = len < SIZE_MAX ? lgg_arena_alloc(&p->g->arena, (size_t)len + 1) : NULL;
    if (!data) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory for a string of %llu bytes",
                         what, (unsigned long long)at, (unsigned long long)len);
    }
    st = lgg_read_bytes(p, data, len, what, at);
    if (st != LOOM_OK) return st;
    data[len] = '\0';
    out->len = len;
    out->data = data;
    return LOOM_OK;
}

enum loom_status lgg_parse_header(struct gguf_parser * p) {
    char magic[4];
    enum loom_status st = lgg_read_bytes(p, magic, 4, "header", 0);
    if (st != LOOM_OK) return st;
    if (memcmp(magic, LOOM_GGUF_MAGIC, 4) != 0) {
        char q[GGUF_QUOTE_SIZE];
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "header at byte 0: bad magic '%s', expected 'GGUF'",
                         lgg_quote(magic, 4, 4, q, sizeof q));
    }
    uint32_t version;
    st = read_u32(p, &version, "header", 0);
    if (st != LOOM_OK) return st;
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped >= 1 && swapped <= 3) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED,
                             "header at byte 4: big-endian GGUF not supported (version field reads 0x%08x)", version);
        }
        return lgg_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED,
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
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "header at byte 8: %llu tensors and %llu keys cannot fit in the %llu bytes after the header",
                         (unsigned long long)n_tensors, (unsigned long long)n_kv, (unsigned long long)rem);
    }
    if ((st = lgg_parse_kvs(p, n_kv)) != LOOM_OK) return st;
    if ((st = lgg_validate_alignment(p)) != LOOM_OK) return st;
    if ((st = lgg_parse_tensor_infos(p, n_tensors)) != LOOM_OK) return st;
    uint64_t end = p->src->pos;
    if (end > UINT64_MAX - p->g->alignment) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "header: data offset overflows");
    }
    p->g->data_offset = (end + p->g->alignment - 1) / p->g->alignment * p->g->alignment;
    return lgg_validate_tensors(p);
}

/* Reads the elements of an array value (its type and count already read). */
static enum loom_status read_array(struct gguf_parser * p, struct gguf_kv * kv, const char * what, uint64_t at) {
    uint64_t rem = gguf_source_remaining(p->src);
    if (kv->arr_type == LOOM_GGUF_TYPE_STRING) {
        if (kv->n > rem / 8) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                             "%s at byte %llu: array of %llu strings cannot fit in the %llu bytes that remain", what,
                             (unsigned long long)at, (unsigned long long)kv->n, (unsigned long long)rem);
        }
        /* grow while reading, so memory follows what the file really holds */
        uint64_t n = kv->n;
        size_t cap = 0;
        kv->n = 0;
        for (uint64_t j = 0; j < n; j++) {
            if (!lgg_grow(&kv->arr, &cap, (size_t)j + 1, sizeof(struct gguf_str))) {
                return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory", what,
                                 (unsigned long long)at);
            }
            struct gguf_str * strs = kv->arr;
            enum loom_status st = lgg_read_str(p, &strs[j], UINT64_MAX, what, at);
            if (st != LOOM_OK) return st;
            kv->n = j + 1;
        }
        return LOOM_OK;
    }
    size_t esize = loom_gguf_type_size(kv->arr_type);
    if (kv->n > rem / esize) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "%s at byte %llu: array of %llu %s cannot fit in the %llu bytes that remain", what,
                         (unsigned long long)at, (unsigned long long)kv->n, loom_gguf_type_name(kv->arr_type),
                         (unsigned long long)rem);
    }
    if (kv->n == 0) return LOOM_OK;
    uint64_t bytes = kv->n * esize;
    kv->arr = bytes < SIZE_MAX ? malloc((size_t)bytes) : NULL;
    if (!kv->arr) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory for %llu bytes", what,
                         (unsigned long long)at, (unsigned long long)bytes);
    }
    enum loom_status st = lgg_read_bytes(p, kv->arr, bytes, what, at);
    if (st != LOOM_OK) return st;
    if (kv->arr_type == LOOM_GGUF_TYPE_BOOL) {
        const uint8_t * b = kv->arr;
        for (uint64_t j = 0; j < kv->n; j++) {
            if (b[j] > 1) {
                return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
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
        return lgg_read_str(p, &kv->str, UINT64_MAX, what, at);
    case LOOM_GGUF_TYPE_ARRAY: {
        uint32_t et;
        enum loom_status st = read_u32(p, &et, what, at);
        if (st != LOOM_OK) return st;
        if (et == LOOM_GGUF_TYPE_ARRAY) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_UNSUPPORTED, "%s at byte %llu: arrays of arrays are not supported",
                             what, (unsigned long long)at);
        }
        if (et >= LOOM_GGUF_TYPE_COUNT) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown array element type %u", what,
                             (unsigned long long)at, et);
        }
        kv->arr_type = (enum loom_gguf_type)et;
        if ((st = read_u64(p, &kv->n, what, at)) != LOOM_OK) return st;
        return read_array(p, kv, what, at);
    }
    default: {
        enum loom_status st = lgg_read_bytes(p, &kv->scalar, loom_gguf_type_size(kv->type), what, at);
        if (st != LOOM_OK) return st;
        if (kv->type == LOOM_GGUF_TYPE_BOOL && kv->scalar.b > 1) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: bool value %u is not 0 or 1", what,
                             (unsigned long long)at, kv->scalar.b);
        }
        return LOOM_OK;
    }
    }
}

enum loom_status lgg_parse_kvs(struct gguf_parser * p, uint64_t n_kv) {
    struct loom_gguf * g = p->g;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t at = p->src->pos;
        char what[GGUF_QUOTE_SIZE + 16];
        snprintf(what, sizeof what, "key #%llu", (unsigned long long)i);
        if (!lgg_grow((void **)&g->kv, &g->cap_kv, g->n_kv + 1, sizeof *g->kv)) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "%s at byte %llu: out of memory", what, (unsigned long long)at);
        }
        struct gguf_kv * kv = &g->kv[g->n_kv++];
        memset(kv, 0, sizeof *kv);
        kv->offset = at;
        kv->arr_type = LOOM_GGUF_TYPE_COUNT;
        enum loom_status st = lgg_read_str(p, &kv->key, LOOM_GGUF_MAX_KEY, what, at);
        if (st != LOOM_OK) return st;
        if (kv->key.len == 0) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: empty key", what, (unsigned long long)at);
        }
        char q[GGUF_QUOTE_SIZE];
        lgg_quote(kv->key.data, kv->key.len, GGUF_QUOTE_SHOWN, q, sizeof q);
        if (memchr(kv->key.data, '\0', kv->key.len)) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: key contains a NUL byte", q,
                             (unsigned long long)at);
        }
        snprintf(what, sizeof what, "key '%s'", q);
        uint32_t type;
        if ((st = read_u32(p, &type, what, at)) != LOOM_OK) return st;
        if (type >= LOOM_GGUF_TYPE_COUNT) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown value type %u", what,
                             (unsigned long long)at, type);
        }
        kv->type = (enum loom_gguf_type)type;
        if ((st = read_value(p, kv, what, at)) != LOOM_OK) return st;
    }
    int64_t dup;
    if (!lgg_index_build(&g->key_index, g->n_kv, lgg_kv_name_of, g, &dup)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "keys: out of memory for the index");
    }
    if (dup >= 0) {
        const struct gguf_kv * kv = &g->kv[dup];
        int64_t first = lgg_index_first(&g->key_index, kv->key.data, (size_t)kv->key.len);
        char q[GGUF_QUOTE_SIZE];
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: duplicate key (first at byte %llu)",
                         lgg_quote(kv->key.data, kv->key.len, GGUF_QUOTE_SHOWN, q, sizeof q),
                         (unsigned long long)kv->offset, (unsigned long long)g->kv[first].offset);
    }
    return LOOM_OK;
}

/* ================================================================
 * Parses the tensor-info records of a GGUF file. */

/* Reads one record into 't'; 'i' is its index, 'at' its byte offset. */
static enum loom_status read_tensor_info(struct gguf_parser * p, struct gguf_tensor * t, uint64_t i, uint64_t at) {
    char what[GGUF_QUOTE_SIZE + 16];
    snprintf(what, sizeof what, "tensor #%llu", (unsigned long long)i);
    enum loom_status st = lgg_read_str(p, &t->name, LOOM_GGUF_MAX_TENSOR_NAME, what, at);
    if (st != LOOM_OK) return st;
    if (t->name.len == 0) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: empty tensor name", what, (unsigned long long)at);
    }
    char q[GGUF_QUOTE_SIZE];
    lgg_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q);
    snprintf(what, sizeof what, "tensor '%s'", q);
    if (memchr(t->name.data, '\0', t->name.len)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: name contains a NUL byte", what,
                         (unsigned long long)at);
    }
    uint32_t n_dims;
    if ((st = lgg_read_bytes(p, &n_dims, 4, what, at)) != LOOM_OK) return st;
    if (n_dims < 1 || n_dims > LOOM_MAX_DIMS) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: n_dims %u is not in 1..%d", what,
                         (unsigned long long)at, n_dims, LOOM_MAX_DIMS);
    }
    t->n_dims = (int)n_dims;
    for (int d = 0; d < LOOM_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if ((st = lgg_read_bytes(p, &ne, 8, what, at)) != LOOM_OK) return st;
        if (ne == 0) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                             "%s at byte %llu: ne[%u] is 0 (empty tensors are not supported)", what, (unsigned long long)at, d);
        }
        if (ne > INT64_MAX) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: ne[%u] = %llu is too large", what,
                             (unsigned long long)at, d, (unsigned long long)ne);
        }
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    if ((st = lgg_read_bytes(p, &type, 4, what, at)) != LOOM_OK) return st;
    if (!loom_type_is_known((int)type)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "%s at byte %llu: unknown tensor type id %u", what,
                         (unsigned long long)at, type);
    }
    t->type = (enum loom_type)type;
    return lgg_read_bytes(p, &t->offset, 8, what, at);
}

enum loom_status lgg_parse_tensor_infos(struct gguf_parser * p, uint64_t n_tensors) {
    struct loom_gguf * g = p->g;
    for (uint64_t i = 0; i < n_tensors; i++) {
        uint64_t at = p->src->pos;
        if (!lgg_grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors)) {
            return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor #%llu at byte %llu: out of memory",
                             (unsigned long long)i, (unsigned long long)at);
        }
        struct gguf_tensor * t = &g->tensors[g->n_tensors++];
        memset(t, 0, sizeof *t);
        t->info_offset = at;
        enum loom_status st = read_tensor_info(p, t, i, at);
        if (st != LOOM_OK) return st;
    }
    int64_t dup;
    if (!lgg_index_build(&g->tensor_index, g->n_tensors, lgg_tensor_name_of, g, &dup)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor infos: out of memory for the index");
    }
    if (dup >= 0) {
        const struct gguf_tensor * t = &g->tensors[dup];
        int64_t first = lgg_index_first(&g->tensor_index, t->name.data, (size_t)t->name.len);
        char q[GGUF_QUOTE_SIZE];
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "tensor '%s' at byte %llu: duplicate tensor name (first at byte %llu)",
                         lgg_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q),
                         (unsigned long long)t->info_offset, (unsigned long long)g->tensors[first].info_offset);
    }
    return LOOM_OK;
}

/* ================================================================
 * Checks a parsed file's alignment and tensor geometry against the file size. */

enum loom_status lgg_validate_alignment(struct gguf_parser * p) {
    struct loom_gguf * g = p->g;
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = loom_gguf_find_key(g, LOOM_GGUF_KEY_ALIGNMENT);
    if (i < 0) return LOOM_OK;
    const struct gguf_kv * kv = &g->kv[i];
    if (kv->type != LOOM_GGUF_TYPE_UINT32) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: has type %s, expected u32",
                         LOOM_GGUF_KEY_ALIGNMENT, (unsigned long long)kv->offset, loom_gguf_type_name(kv->type));
    }
    uint32_t a = kv->scalar.u32;
    if (a == 0 || (a & (a - 1)) != 0) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: alignment %u is not a power of two",
                         LOOM_GGUF_KEY_ALIGNMENT, (unsigned long long)kv->offset, a);
    }
    if (a > LOOM_GGUF_MAX_ALIGNMENT) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT, "key '%s' at byte %llu: alignment %u exceeds the limit of %u",
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
    lgg_quote(t->name.data, t->name.len, GGUF_QUOTE_SHOWN, q, sizeof q);
    unsigned long long at = (unsigned long long)t->info_offset;
    int64_t blck = loom_blck_size(t->type);
    if (t->ne[0] % blck != 0) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: ne[0] = %lld is not a multiple of the block length %lld of type %s", q,
                         at, (long long)t->ne[0], (long long)blck, loom_type_name(t->type));
    }
    int64_t nel;
    if (!lgg_tensor_geometry(t->type, t->n_dims, t->ne, &nel, &t->size)) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: shape [%lld, %lld, %lld, %lld] of type %s overflows", q, at,
                         (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                         loom_type_name(t->type));
    }
    if (t->offset % g->alignment != 0) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: data offset %llu is not a multiple of the alignment %u", q, at,
                         (unsigned long long)t->offset, g->alignment);
    }
    uint64_t start, end;
    if (!gguf_add_ok(g->data_offset, t->offset, &start) || !gguf_add_ok(start, t->size, &end) || end > g->file_size) {
        return lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                         "tensor '%s' at byte %llu: data [%llu, +%llu) at data offset %llu extends past end of file (%llu bytes)",
                         q, at, (unsigned long long)t->offset, (unsigned long long)t->size,
                         (unsigned long long)g->data_offset, (unsigned long long)g->file_size);
    }
    return LOOM_OK;
}

enum loom_status lgg_validate_tensors(struct gguf_parser * p) {
    struct loom_gguf * g = p->g;
    for (size_t i = 0; i < g->n_tensors; i++) {
        enum loom_status st = check_tensor(p, &g->tensors[i]);
        if (st != LOOM_OK) return st;
    }
    if (g->n_tensors < 2) return LOOM_OK;
    struct span * order = malloc(g->n_tensors * sizeof *order);
    if (!order) return lgg_fail(p->err, p->err_size, LOOM_ERR_OOM, "tensor infos: out of memory");
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
            st = lgg_fail(p->err, p->err_size, LOOM_ERR_FORMAT,
                           "tensor '%s' at byte %llu: data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                           lgg_quote(b->name.data, b->name.len, GGUF_QUOTE_SHOWN, qb, sizeof qb),
                           (unsigned long long)b->info_offset, (unsigned long long)b->offset,
                           (unsigned long long)(b->offset + b->size),
                           lgg_quote(a->name.data, a->name.len, GGUF_QUOTE_SHOWN, qa, sizeof qa),
                           (unsigned long long)a->offset, (unsigned long long)(a->offset + a->size));
            break;
        }
    }
    free(order);
    return st;
}

/* ================================================================
 * Opening (file or memory image) and freeing a GGUF reader handle. */

const char * lgg_kv_name_of(const void * g, int64_t id, size_t * len) {
    const struct gguf_str * s = &((const struct loom_gguf *)g)->kv[id].key;
    *len = (size_t)s->len;
    return s->data;
}

const char * lgg_tensor_name_of(const void * g, int64_t id, size_t * len) {
    const struct gguf_str * s = &((const struct loom_gguf *)g)->tensors[id].name;
    *len = (size_t)s->len;
    return s->data;
}

void loom_gguf_free(struct loom_gguf * g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr);
    free(g->kv);
    free(g->tensors);
    lgg_index_free(&g->key_index);
    lgg_index_free(&g->tensor_index);
    lgg_arena_free(&g->arena);
    free(g);
}

/* Parses everything from 'src' into a new handle. */
static enum loom_status parse(struct gguf_source * src, struct loom_gguf ** out, char * err, size_t err_size) {
    struct loom_gguf * g = calloc(1, sizeof *g);
    if (!g) return lgg_fail(err, err_size, LOOM_ERR_OOM, "out of memory");
    g->file_size = src->size;
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    struct gguf_parser p = {src, g, err, err_size};
    enum loom_status st = lgg_parse_header(&p);
    if (st != LOOM_OK) {
        loom_gguf_free(g);
        return st;
    }
    *out = g;
    return LOOM_OK;
}

enum loom_status loom_gguf_open_memory(const void * data, size_t size, struct loom_gguf ** out, char * err,
                                       size_t err_size) {
    if (!out || (!data && size)) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "loom_gguf_open_memory: NULL argument");
    *out = NULL;
    struct gguf_source src;
    lgg_source_init_memory(&src, data, size);
    return parse(&src, out, err, err_size);
}

enum loom_status loom_gguf_open(const char * path, struct loom_gguf ** out, char * err, size_t err_size) {
    if (!path || !out) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "loom_gguf_open: NULL argument");
    *out = NULL;
    char q[GGUF_QUOTE_SIZE * 4];
    lgg_quote(path, strlen(path), GGUF_QUOTE_SIZE, q, sizeof q);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block: it is refused below */
    if (fd < 0) return lgg_fail(err, err_size, LOOM_ERR_IO, "cannot open '%s': %s", q, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lgg_fail(err, err_size, LOOM_ERR_IO, "cannot stat '%s': %s", q, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lgg_fail(err, err_size, LOOM_ERR_IO, "'%s' is not a regular file", q);
    }
    struct gguf_source src;
    if (!lgg_source_init_fd(&src, fd, (uint64_t)sb.st_size)) {
        close(fd);
        return lgg_fail(err, err_size, LOOM_ERR_OOM, "out of memory");
    }
    char perr[1024] = "malformed";
    enum loom_status st = parse(&src, out, perr, sizeof perr);
    lgg_source_done(&src);
    close(fd);
    if (st != LOOM_OK) return lgg_fail(err, err_size, st, "'%s': %s", q, perr); /* the message names the file */
    (*out)->has_file_id = true;
    (*out)->dev = sb.st_dev;
    (*out)->ino = sb.st_ino;
    return st;
}

uint32_t loom_gguf_version(const struct loom_gguf * g) { return g->version; }
uint64_t loom_gguf_file_size(const struct loom_gguf * g) { return g->file_size; }
uint32_t loom_gguf_alignment(const struct loom_gguf * g) { return g->alignment; }
uint64_t loom_gguf_data_offset(const struct loom_gguf * g) { return g->data_offset; }
