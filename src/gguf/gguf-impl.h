/* gguf-impl.h -- the GGUF reader's and writer's private structures and shared helpers. */
#ifndef LOOM_GGUF_IMPL_H
#define LOOM_GGUF_IMPL_H

#include "loom-gguf.h"

#include <stdio.h>
#include <sys/types.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Loom's GGUF code assumes a little-endian host"
#endif

/* ---------------------------------------------------------------- memory (gguf-mem.c) */

/* Chunked bump allocator: everything a reader keeps lives here and is freed at once. */
struct gguf_arena_chunk;
struct gguf_arena {
    struct gguf_arena_chunk * head;
};

/* 'size' bytes aligned to 8, or NULL when out of memory. */
void * lgg_arena_alloc(struct gguf_arena * a, size_t size);
void lgg_arena_free(struct gguf_arena * a);

/* Grows '*ptr' (an array of 'elem' bytes per element, '*cap' elements) to hold at least 'need'
 * elements, doubling; returns false when out of memory or the size overflows. */
bool lgg_grow(void ** ptr, size_t * cap, size_t need, size_t elem);

/* ---------------------------------------------------------------- name index (gguf-index.c) */

struct gguf_index_entry {
    const char * name;  /* not owned */
    size_t len;         /* bytes */
    int64_t id;
};

/* Names sorted by bytes (ties by id). */
struct gguf_index {
    struct gguf_index_entry * entries;
    size_t n;
};

/* 'names_of(ctx, id, &len)' gives name 'id' (0 <= id < n). */
typedef const char * (*gguf_name_fn)(const void * ctx, int64_t id, size_t * len);
/* Indexes names 0..n-1. Returns false when out of memory. '*dup' is the lowest id whose name an
 * earlier id already has, or -1 when all names are distinct. */
bool lgg_index_build(struct gguf_index * ix, size_t n, gguf_name_fn names_of, const void * ctx, int64_t * dup);
/* The id of a name (binary search), or -1; with duplicates, any of them. */
int64_t lgg_index_find(const struct gguf_index * ix, const char * s, size_t len);
/* The lowest id with this name, or -1. */
int64_t lgg_index_first(const struct gguf_index * ix, const char * s, size_t len);
void lgg_index_free(struct gguf_index * ix);

/* ---------------------------------------------------------------- the reader's handle */

struct gguf_str {
    uint64_t len;  /* bytes, without the terminating NUL that follows them */
    char * data;
};

struct gguf_kv {
    struct gguf_str key;
    uint64_t offset;              /* bytes: where the record starts in the file */
    enum loom_gguf_type type;
    enum loom_gguf_type arr_type; /* element type of an ARRAY; LOOM_GGUF_TYPE_COUNT otherwise */
    uint64_t n;                   /* elements of an ARRAY */
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        uint8_t b;
    } scalar;
    struct gguf_str str;          /* a STRING value */
    void * arr;                   /* ARRAY: n elements (struct gguf_str for strings); malloc'ed */
};

struct gguf_tensor {
    struct gguf_str name;
    uint64_t info_offset;         /* bytes: where the info record starts in the file */
    enum loom_type type;
    int n_dims;
    int64_t ne[LOOM_MAX_DIMS];    /* elements; past n_dims 1 */
    uint64_t offset;              /* bytes from the data section */
    uint64_t size;                /* bytes */
};

struct loom_gguf {
    uint32_t version;
    uint64_t file_size;           /* bytes */
    uint32_t alignment;           /* bytes */
    uint64_t data_offset;         /* bytes from the start of the file */

    struct gguf_kv * kv;
    size_t n_kv, cap_kv;
    struct gguf_tensor * tensors;
    size_t n_tensors, cap_tensors;
    struct gguf_index key_index;
    struct gguf_index tensor_index;
    struct gguf_arena arena;      /* keys, names and string bytes */

    bool has_file_id;             /* opened from a file: its identity (see the writer's 'protect') */
    dev_t dev;
    ino_t ino;
};

const char * lgg_kv_name_of(const void * g, int64_t id, size_t * len);
const char * lgg_tensor_name_of(const void * g, int64_t id, size_t * len);

/* ---------------------------------------------------------------- byte source (gguf-source.c) */

/* Reads a file (pread) or a memory image through a small buffer; never past 'size'. */
struct gguf_source {
    int fd;                       /* -1 for memory */
    const uint8_t * mem;
    uint64_t size;                /* bytes in the file or image */
    uint64_t pos;                 /* next byte to read */
    uint8_t * buf;                /* file mode: bytes [buf_off, buf_off + buf_len) of the file */
    uint64_t buf_off;
    size_t buf_len;
    int err_no;                   /* errno of a failed read */
};

void lgg_source_init_memory(struct gguf_source * s, const void * data, size_t size);
/* Takes 'fd' (not closed by 'lgg_source_done'); false when out of memory for the buffer. */
bool lgg_source_init_fd(struct gguf_source * s, int fd, uint64_t size);
void lgg_source_done(struct gguf_source * s);
static inline uint64_t gguf_source_remaining(const struct gguf_source * s) { return s->size - s->pos; }
/* Copies the next 'n' bytes to 'dst'. Returns LOOM_OK, LOOM_ERR_FORMAT when fewer than 'n'
 * bytes remain (nothing is consumed), or LOOM_ERR_IO when the read fails. */
enum loom_status lgg_source_read(struct gguf_source * s, void * dst, uint64_t n);

/* ---------------------------------------------------------------- messages (gguf-error.c) */

/* Formats a one-line message into 'err' (when not NULL) or logs it at ERROR level; returns 'st'. */
enum loom_status lgg_fail(char * err, size_t err_size, enum loom_status st, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Writes a printable form of (s, len) into 'out' for messages: control bytes, quotes, backslashes
 * and bytes >= 0x7f as \xNN; cut with "..." after 'max_shown' input bytes or when 'out' is full.
 * Returns 'out'. */
const char * lgg_quote(const char * s, size_t len, size_t max_shown, char * out, size_t out_size);
#define GGUF_QUOTE_SIZE 256 /* bytes: enough for GGUF_QUOTE_SHOWN input bytes escaped */
#define GGUF_QUOTE_SHOWN 60

/* ---------------------------------------------------------------- parsing (gguf-read*.c) */

struct gguf_parser {
    struct gguf_source * src;
    struct loom_gguf * g;
    char * err;
    size_t err_size;
};

/* Reads the header, key-value pairs and tensor infos into p->g; sets alignment, data_offset. */
enum loom_status lgg_parse_header(struct gguf_parser * p);
enum loom_status lgg_parse_kvs(struct gguf_parser * p, uint64_t n_kv);
enum loom_status lgg_parse_tensor_infos(struct gguf_parser * p, uint64_t n_tensors);
/* Reads 'n' bytes for 'what' (an item starting at byte 'at'); reports truncation (LOOM_ERR_FORMAT)
 * or a failed read (LOOM_ERR_IO). */
enum loom_status lgg_read_bytes(struct gguf_parser * p, void * dst, uint64_t n, const char * what, uint64_t at);
/* Reads a string (u64 length + bytes) into the arena; 'max_len' caps the length; 'what' names
 * the item for messages (e.g. "key 'x'"), 'at' is the item's byte offset. */
enum loom_status lgg_read_str(struct gguf_parser * p, struct gguf_str * out, uint64_t max_len, const char * what,
                               uint64_t at);
/* Checks 'general.alignment', tensor shapes, sizes, offsets and overlaps (gguf-validate.c). */
enum loom_status lgg_validate_alignment(struct gguf_parser * p);
enum loom_status lgg_validate_tensors(struct gguf_parser * p);

/* Element count and byte size of a shape; false on overflow (either above INT64_MAX) or when
 * ne[0] is not a multiple of the block length of a known 'type'. */
bool lgg_tensor_geometry(enum loom_type type, int n_dims, const int64_t * ne, int64_t * nelements, uint64_t * size);

/* Checked arithmetic. */
static inline bool gguf_add_ok(uint64_t a, uint64_t b, uint64_t * r) { return !__builtin_add_overflow(a, b, r); }
static inline bool gguf_mul_ok(uint64_t a, uint64_t b, uint64_t * r) { return !__builtin_mul_overflow(a, b, r); }

#endif /* LOOM_GGUF_IMPL_H */
