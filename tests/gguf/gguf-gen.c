/* gguf-gen.c -- GGUF byte images built by hand from the spec, and the malformed-file table. */
#include "gguf-gen.h"

#include "loom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- bytes */

void gen_bytes(struct gen_buf * b, const void * p, size_t n) {
    if (b->size + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->size + n) cap *= 2;
        b->data = realloc(b->data, cap);
        if (!b->data) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->size, p, n);
    b->size += n;
}

/* Little-endian encoders written byte by byte so the images do not depend on the host. */
void gen_u8(struct gen_buf * b, uint8_t v) { gen_bytes(b, &v, 1); }
void gen_u32(struct gen_buf * b, uint32_t v) {
    for (int i = 0; i < 4; i++) gen_u8(b, (uint8_t)(v >> (8 * i)));
}
void gen_u64(struct gen_buf * b, uint64_t v) {
    for (int i = 0; i < 8; i++) gen_u8(b, (uint8_t)(v >> (8 * i)));
}
void gen_str(struct gen_buf * b, const char * s) {
    gen_u64(b, strlen(s));
    gen_bytes(b, s, strlen(s));
}
void gen_zeros(struct gen_buf * b, size_t n) {
    for (size_t i = 0; i < n; i++) gen_u8(b, 0);
}
void gen_free(struct gen_buf * b) {
    free(b->data);
    b->data = NULL;
    b->size = b->cap = 0;
}

/* ---------------------------------------------------------------- a file as a spec */

#define AUTO 0x5a5a5a5a5a5a5a5aull /* a field computed from the rest */
#define MAX_T 8

struct tinfo {
    const char * name;
    size_t name_len;            /* 0: strlen(name) */
    uint64_t name_len_field;    /* AUTO: the real length */
    uint32_t n_dims;
    uint64_t ne[8];
    uint32_t type;
    uint64_t offset;
};

struct spec {
    char magic[4];
    uint32_t version;
    uint64_t n_tensors, n_kv;   /* AUTO: the real counts */
    struct gen_buf kvs;
    uint64_t kv_count;
    struct tinfo t[MAX_T];
    int nt;
    uint32_t align;             /* padding used before the data section */
    uint64_t data_size;         /* AUTO: up to the end of the last tensor, padded */
    size_t truncate;            /* SIZE_MAX: keep everything */
};

/* Bytes of a tensor of the types the cases use (independent of Loom's traits table). */
static uint64_t tensor_bytes(const struct tinfo * t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < 8; d++) n *= t->ne[d];
    switch (t->type) {
    case 0: return n * 4;           /* f32 */
    case 1: return n * 2;           /* f16 */
    case 8: return n / 32 * 34;     /* q8_0 */
    case 24: return n;              /* i8 */
    default: return 0;
    }
}

static void kv_key(struct spec * s, const char * key, uint32_t type) {
    gen_str(&s->kvs, key);
    gen_u32(&s->kvs, type);
    s->kv_count++;
}
static void kv_u32(struct spec * s, const char * key, uint32_t v) { kv_key(s, key, 4); gen_u32(&s->kvs, v); }
static void kv_string(struct spec * s, const char * key, const char * v) { kv_key(s, key, 8); gen_str(&s->kvs, v); }

static void base_spec(struct spec * s) {
    memset(s, 0, sizeof *s);
    memcpy(s->magic, "GGUF", 4);
    s->version = 3;
    s->n_tensors = s->n_kv = AUTO;
    s->align = 32;
    s->data_size = AUTO;
    s->truncate = SIZE_MAX;
    kv_string(s, "general.architecture", "llama");
    kv_u32(s, "llama.block_count", 5);
    kv_key(s, "tokenizer.ggml.tokens", 9);
    gen_u32(&s->kvs, 8);
    gen_u64(&s->kvs, 3);
    gen_str(&s->kvs, "a");
    gen_str(&s->kvs, "bb");
    gen_str(&s->kvs, "");
    kv_key(s, "tokenizer.ggml.scores", 9);
    gen_u32(&s->kvs, 6);
    gen_u64(&s->kvs, 3);
    gen_zeros(&s->kvs, 12);
    s->t[0] = (struct tinfo){.name = "tok", .n_dims = 2, .ne = {4, 3}, .type = 0, .offset = 0, .name_len_field = AUTO};
    s->t[1] = (struct tinfo){.name = "norm", .n_dims = 1, .ne = {4}, .type = 0, .offset = 64, .name_len_field = AUTO};
    s->t[2] = (struct tinfo){.name = "q", .n_dims = 2, .ne = {32, 2}, .type = 8, .offset = 96, .name_len_field = AUTO};
    s->nt = 3;
}

static void build(const struct spec * s, struct gen_buf * b) {
    gen_bytes(b, s->magic, 4);
    gen_u32(b, s->version);
    gen_u64(b, s->n_tensors == AUTO ? (uint64_t)s->nt : s->n_tensors);
    gen_u64(b, s->n_kv == AUTO ? s->kv_count : s->n_kv);
    gen_bytes(b, s->kvs.data, s->kvs.size);
    uint64_t data_end = 0;
    for (int i = 0; i < s->nt; i++) {
        const struct tinfo * t = &s->t[i];
        size_t len = t->name_len ? t->name_len : strlen(t->name);
        gen_u64(b, t->name_len_field == AUTO ? len : t->name_len_field);
        gen_bytes(b, t->name, len);
        gen_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 8; d++) gen_u64(b, t->ne[d]);
        gen_u32(b, t->type);
        gen_u64(b, t->offset);
        uint64_t end = t->offset + tensor_bytes(t);
        if (end > data_end && end < (1u << 20)) data_end = end;
    }
    gen_zeros(b, (s->align - b->size % s->align) % s->align);
    uint64_t data = s->data_size != AUTO ? s->data_size : (data_end + s->align - 1) / s->align * s->align;
    for (uint64_t i = 0; i < data; i++) gen_u8(b, (uint8_t)(i * 7 + 1));
    if (s->truncate < b->size) b->size = s->truncate;
}

/* ---------------------------------------------------------------- the table */

struct list {
    struct gen_case * c;
    size_t n, cap;
};

static void add(struct list * l, const char * name, bool valid, int status, const char * expect, struct spec * s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->c = realloc(l->c, l->cap * sizeof *l->c);
        if (!l->c) abort();
    }
    struct gen_case * c = &l->c[l->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->valid = valid;
    c->status = status;
    c->expect = expect;
    build(s, &c->file);
    gen_free(&s->kvs);
}

#define GOOD(name) add(&l, name, true, LOOM_OK, NULL, &s)
#define BAD(name, st, expect) add(&l, name, false, st, expect, &s)
#define FMT LOOM_ERR_FORMAT
#define UNS LOOM_ERR_UNSUPPORTED

/* Offset of the first tensor info in the base file (where the kv section ends). */
static size_t base_infos_offset(void) {
    struct spec s;
    base_spec(&s);
    size_t off = 24 + s.kvs.size;
    gen_free(&s.kvs);
    return off;
}

static void header_cases(struct list * lp) {
    struct list l = *lp;
    struct spec s;
    base_spec(&s); s.truncate = 0; BAD("empty-file", FMT, "truncated");
    base_spec(&s); s.truncate = 3; BAD("trunc-magic", FMT, "truncated");
    base_spec(&s); memcpy(s.magic, "GGUX", 4); BAD("bad-magic", FMT, "bad magic");
    base_spec(&s); memcpy(s.magic, "FUGG", 4); BAD("reversed-magic", FMT, "bad magic");
    base_spec(&s); s.version = 0x03000000; BAD("big-endian-v3", UNS, "big-endian");
    base_spec(&s); s.version = 0x02000000; BAD("big-endian-v2", UNS, "big-endian");
    base_spec(&s); s.version = 1; BAD("version-1", UNS, "version 1");
    base_spec(&s); s.version = 4; BAD("version-4", UNS, "version 4");
    base_spec(&s); s.version = 0; BAD("version-0", UNS, "version 0");
    base_spec(&s); s.truncate = 6; BAD("trunc-version", FMT, "truncated");
    base_spec(&s); s.truncate = 12; BAD("trunc-n-tensors", FMT, "truncated");
    base_spec(&s); s.truncate = 20; BAD("trunc-n-kv", FMT, "truncated");
    base_spec(&s); s.n_kv = UINT64_MAX; BAD("n-kv-huge", FMT, "cannot fit");
    base_spec(&s); s.n_tensors = UINT64_MAX; BAD("n-tensors-huge", FMT, "cannot fit");
    base_spec(&s); s.n_tensors = UINT64_MAX / 33 + 1; BAD("n-tensors-mul-overflow", FMT, "cannot fit");
    base_spec(&s); s.n_kv = 5; BAD("n-kv-one-too-many", FMT, NULL);
    base_spec(&s); s.n_tensors = 4; BAD("n-tensors-one-too-many", FMT, NULL);
    *lp = l;
}

static void kv_cases(struct list * lp) {
    struct list l = *lp;
    struct spec s;
    base_spec(&s); gen_u64(&s.kvs, UINT64_MAX); s.kv_count++; BAD("key-len-huge", FMT, "string length");
    base_spec(&s); gen_u64(&s.kvs, 65536); gen_zeros(&s.kvs, 65536); s.kv_count++; BAD("key-len-65536", FMT, "exceeds the limit");
    base_spec(&s); gen_u64(&s.kvs, 1000); gen_bytes(&s.kvs, "abc", 3); s.kv_count++; s.nt = 0; s.data_size = 0;
    BAD("key-past-eof", FMT, "past end of file");
    base_spec(&s); kv_u32(&s, "", 1); BAD("key-empty", FMT, "empty key");
    base_spec(&s); gen_u64(&s.kvs, 3); gen_bytes(&s.kvs, "a\0b", 3); gen_u32(&s.kvs, 4); gen_u32(&s.kvs, 1); s.kv_count++;
    BAD("key-with-nul", FMT, "NUL");
    base_spec(&s); kv_u32(&s, "llama.block_count", 6); BAD("duplicate-key", FMT, "duplicate key");
    base_spec(&s); kv_string(&s, "general.architecture", "llama"); BAD("duplicate-key-same-value", FMT, "duplicate key");
    base_spec(&s); kv_key(&s, "x.unknown", 13); gen_u32(&s.kvs, 0); BAD("value-type-13", FMT, "unknown value type 13");
    base_spec(&s); kv_key(&s, "x.unknown", 0xffffffffu); gen_u32(&s.kvs, 0); BAD("value-type-max", FMT, "unknown value type");
    base_spec(&s); kv_key(&s, "x.s", 8); gen_u64(&s.kvs, UINT64_MAX); BAD("string-len-huge", FMT, "past end of file");
    base_spec(&s); kv_key(&s, "x.s", 8); gen_u64(&s.kvs, (uint64_t)1 << 40); BAD("string-len-1tb", FMT, "past end of file");
    base_spec(&s); kv_key(&s, "x.b", 7); gen_u8(&s.kvs, 2); BAD("bool-2", FMT, "bool value 2");
    base_spec(&s); kv_key(&s, "x.b", 9); gen_u32(&s.kvs, 7); gen_u64(&s.kvs, 3); gen_u8(&s.kvs, 0); gen_u8(&s.kvs, 1); gen_u8(&s.kvs, 255);
    BAD("bool-array-255", FMT, "bool element 2");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 4); gen_u64(&s.kvs, UINT64_MAX); BAD("array-u32-count-huge", FMT, "cannot fit");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 12); gen_u64(&s.kvs, UINT64_MAX / 8 + 1); BAD("array-f64-count-overflow", FMT, "cannot fit");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 8); gen_u64(&s.kvs, UINT64_MAX); BAD("array-str-count-huge", FMT, "cannot fit");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 8); gen_u64(&s.kvs, 3); gen_str(&s.kvs, "ok"); gen_u64(&s.kvs, UINT64_MAX);
    BAD("array-str-elem-len-huge", FMT, "past end of file");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 13); gen_u64(&s.kvs, 0); BAD("array-elem-type-13", FMT, "unknown array element type");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 9); gen_u64(&s.kvs, 1); gen_u32(&s.kvs, 4); gen_u64(&s.kvs, 1); gen_u32(&s.kvs, 7);
    BAD("nested-array", UNS, "arrays of arrays");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 9); gen_u64(&s.kvs, UINT64_MAX);
    BAD("nested-array-count-huge", UNS, "arrays of arrays");
    base_spec(&s); kv_key(&s, "x.a", 9); gen_u32(&s.kvs, 9); gen_u64(&s.kvs, 0); BAD("nested-array-empty", UNS, "arrays of arrays");
    base_spec(&s); kv_u32(&s, "general.alignment", 0); BAD("alignment-0", FMT, "not a power of two");
    base_spec(&s); kv_u32(&s, "general.alignment", 3); BAD("alignment-3", FMT, "not a power of two");
    base_spec(&s); kv_u32(&s, "general.alignment", 48); BAD("alignment-48", FMT, "not a power of two");
    base_spec(&s); kv_u32(&s, "general.alignment", 1u << 31); BAD("alignment-2g", FMT, "exceeds the limit");
    base_spec(&s); kv_u32(&s, "general.alignment", 1u << 21); BAD("alignment-2m", FMT, "exceeds the limit");
    base_spec(&s); kv_key(&s, "general.alignment", 10); gen_u64(&s.kvs, 32); BAD("alignment-u64", FMT, "expected u32");
    base_spec(&s); kv_key(&s, "general.alignment", 5); gen_u32(&s.kvs, 32); BAD("alignment-i32", FMT, "expected u32");
    base_spec(&s); kv_string(&s, "general.alignment", "32"); BAD("alignment-string", FMT, "expected u32");
    base_spec(&s); kv_key(&s, "general.alignment", 9); gen_u32(&s.kvs, 4); gen_u64(&s.kvs, 1); gen_u32(&s.kvs, 32);
    BAD("alignment-array", FMT, "expected u32");
    *lp = l;
}

static void tensor_cases(struct list * lp) {
    struct list l = *lp;
    struct spec s;
    base_spec(&s); s.t[1].name = ""; BAD("tensor-name-empty", FMT, "empty tensor name");
    base_spec(&s); s.t[1].name = "0123456789012345678901234567890123456789012345678901234567890123";
    BAD("tensor-name-64", FMT, "exceeds the limit of 63");
    base_spec(&s); s.t[1].name = "no\0rm"; s.t[1].name_len = 5; BAD("tensor-name-nul", FMT, "NUL");
    base_spec(&s); s.t[1].name_len_field = UINT64_MAX; BAD("tensor-name-len-huge", FMT, "string length");
    base_spec(&s); s.t[2].name = "tok"; BAD("duplicate-tensor", FMT, "duplicate tensor name");
    base_spec(&s); s.t[1].n_dims = 0; BAD("n-dims-0", FMT, "n_dims 0");
    base_spec(&s); s.t[1].n_dims = 5; s.t[1].ne[1] = s.t[1].ne[2] = s.t[1].ne[3] = s.t[1].ne[4] = 1; BAD("n-dims-5", FMT, "n_dims 5");
    base_spec(&s); s.t[1].n_dims = 0xffffffffu; BAD("n-dims-huge", FMT, "is not in 1..4");
    base_spec(&s); s.t[0].ne[1] = 0; BAD("dim-0", FMT, "ne[1] is 0");
    base_spec(&s); s.t[0].ne[0] = (uint64_t)INT64_MAX + 1; BAD("dim-above-int64", FMT, "too large");
    base_spec(&s); s.t[0].n_dims = 3; s.t[0].ne[0] = 1ull << 32; s.t[0].ne[1] = 1ull << 32; s.t[0].ne[2] = 1ull << 32;
    BAD("dim-product-overflow", FMT, "overflows");
    base_spec(&s); s.t[0].n_dims = 1; s.t[0].ne[0] = 1ull << 62; BAD("byte-size-overflow", FMT, "overflows");
    base_spec(&s); s.t[0].n_dims = 4; s.t[0].ne[0] = 1ull << 20; s.t[0].ne[1] = 1ull << 20; s.t[0].ne[2] = 1ull << 20; s.t[0].ne[3] = 1ull << 4;
    BAD("nelements-int64-overflow", FMT, "overflows");
    base_spec(&s); s.t[2].ne[0] = 33; BAD("ne0-not-block-multiple", FMT, "not a multiple of the block length");
    base_spec(&s); s.t[1].type = 4; BAD("type-retired-4", FMT, "unknown tensor type id 4");
    base_spec(&s); s.t[1].type = 40; BAD("type-40", FMT, "unknown tensor type id 40");
    base_spec(&s); s.t[1].type = 0xffffffffu; BAD("type-max", FMT, "unknown tensor type id");
    base_spec(&s); s.t[1].offset = 68; BAD("offset-misaligned", FMT, "not a multiple of the alignment");
    base_spec(&s); s.t[1].offset = 0; BAD("overlap-same-offset", FMT, "overlaps");
    base_spec(&s); s.t[0].offset = 32; BAD("overlap-partial", FMT, "overlaps");
    base_spec(&s); s.t[2].offset = 1ull << 40; BAD("data-past-eof", FMT, "past end of file");
    base_spec(&s); s.t[2].offset = UINT64_MAX - 31; BAD("offset-overflow", FMT, "past end of file");
    base_spec(&s); s.data_size = 160; BAD("data-truncated", FMT, "past end of file");
    base_spec(&s); s.data_size = 0; BAD("data-missing", FMT, "past end of file");
    base_spec(&s); kv_u32(&s, "general.alignment", 64); BAD("offset-misaligned-64", FMT, "not a multiple of the alignment 64");
    *lp = l;
}

/* Cuts inside every section of the base file: its kv section is bytes 24..231 (the last key,
 * tokenizer.ggml.scores, spans 174..231), then three tensor infos. Cuts before byte 179 are caught
 * by the header's count check (4 keys and 3 tensors need at least 155 bytes). */
static void truncation_cases(struct list * lp) {
    struct list l = *lp;
    struct spec s;
    size_t infos = base_infos_offset();
    const size_t cuts[] = {30, 100, 180, 200, 209, 215, 225, infos - 1, infos + 4, infos + 12, infos + 20, infos + 30, infos + 40};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "trunc-at-%zu", cuts[i]);
        base_spec(&s);
        s.truncate = cuts[i];
        BAD(name, FMT, NULL);
    }
    *lp = l;
}

static void valid_cases(struct list * lp) {
    struct list l = *lp;
    struct spec s;
    base_spec(&s); GOOD("good-base");
    base_spec(&s); s.version = 2; GOOD("good-version-2");
    base_spec(&s); kv_u32(&s, "general.alignment", 64); s.align = 64; s.t[1].offset = 64; s.t[2].offset = 128; GOOD("good-alignment-64");
    base_spec(&s); kv_u32(&s, "general.alignment", 1); s.align = 1; s.t[1].offset = 48; s.t[2].offset = 64; GOOD("good-alignment-1");
    base_spec(&s); s.nt = 0; s.data_size = 0; GOOD("good-no-tensors");
    base_spec(&s); gen_free(&s.kvs); s.kv_count = 0; GOOD("good-no-kv");
    base_spec(&s); kv_string(&s, "x.empty", ""); kv_key(&s, "x.arr", 9); gen_u32(&s.kvs, 4); gen_u64(&s.kvs, 0); GOOD("good-empty-values");
    base_spec(&s); s.t[0].offset = 96; s.t[2].offset = 0; s.t[1].offset = 160; GOOD("good-tensors-out-of-order");
    /* one key of each of the 13 value types, little-endian by hand (test-gguf-corpus checks the values) */
    base_spec(&s);
    kv_key(&s, "t.u8", 0); gen_u8(&s.kvs, 0xfe);
    kv_key(&s, "t.i8", 1); gen_u8(&s.kvs, 0x80);                      /* -128 */
    kv_key(&s, "t.u16", 2); gen_u8(&s.kvs, 0x34); gen_u8(&s.kvs, 0x12); /* 0x1234 */
    kv_key(&s, "t.i16", 3); gen_u8(&s.kvs, 0xff); gen_u8(&s.kvs, 0xff); /* -1 */
    kv_key(&s, "t.u32", 4); gen_u32(&s.kvs, 0xdeadbeef);
    kv_key(&s, "t.i32", 5); gen_u32(&s.kvs, 0xfffffffe);                /* -2 */
    kv_key(&s, "t.f32", 6); gen_u32(&s.kvs, 0x3fc00000);                /* 1.5 */
    kv_key(&s, "t.bool", 7); gen_u8(&s.kvs, 1);
    kv_key(&s, "t.str", 8); gen_str(&s.kvs, "h\xc3\xa9");
    kv_key(&s, "t.arr", 9); gen_u32(&s.kvs, 3); gen_u64(&s.kvs, 2); gen_u8(&s.kvs, 0xfd); gen_u8(&s.kvs, 0xff); gen_u8(&s.kvs, 7); gen_u8(&s.kvs, 0);
    kv_key(&s, "t.u64", 10); gen_u64(&s.kvs, 0x0123456789abcdefull);
    kv_key(&s, "t.i64", 11); gen_u64(&s.kvs, 0xfffffffffffffffdull);  /* -3 */
    kv_key(&s, "t.f64", 12); gen_u64(&s.kvs, 0xc004000000000000ull);  /* -2.5 */
    GOOD("good-all-types");
    *lp = l;
}

size_t gen_cases(struct gen_case ** out) {
    struct list l = {0};
    valid_cases(&l);
    header_cases(&l);
    kv_cases(&l);
    tensor_cases(&l);
    truncation_cases(&l);
    *out = l.c;
    return l.n;
}

void gen_cases_free(struct gen_case * cases, size_t n) {
    for (size_t i = 0; i < n; i++) gen_free(&cases[i].file);
    free(cases);
}
