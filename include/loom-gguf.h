/* loom-gguf.h -- GGUF files: a validating reader (every file is hostile) and a streaming writer.
 *
 * Format (GGUF spec, versions 2 and 3; all integers little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x (string key | u32 value type | value)
 *   n_tensors x (string name | u32 n_dims | n_dims x u64 ne | u32 type | u64 offset)
 *   zero padding to 'general.alignment' (u32, default 32) | data section
 * A string is a u64 byte length followed by that many bytes (no NUL). An array is a u32 element
 * type, a u64 count and the elements. A tensor's offset is relative to the data section.
 *
 * What the reader accepts (anything else is an error, never a crash or an abort):
 *  - versions 2 and 3 (1 and big-endian files are LOOM_ERR_UNSUPPORTED);
 *  - keys of 1..65535 bytes without NUL bytes, each key once;
 *  - values of the 13 types below; arrays of any scalar type or of strings; arrays of arrays are
 *    rejected (LOOM_ERR_UNSUPPORTED): no known model uses them; BOOL bytes must be 0 or 1;
 *  - 'general.alignment', when present, of type u32, a power of two, at most 1 MiB;
 *  - tensor names of 1..63 bytes (they must fit 'loom_tensor.name') without NUL bytes, unique;
 *  - 1..4 dimensions, each >= 1 (empty tensors are rejected: no model needs one, and a zero-byte
 *    tensor would make offset and overlap checks ambiguous), element count <= INT64_MAX,
 *    ne[0] a multiple of the type's block length, a type id 'loom_type_is_known' accepts;
 *  - tensor data aligned, inside the file and not overlapping another tensor's data.
 * Strings values may contain NUL bytes (they are returned with their length, and stored with a
 * terminating NUL after the last byte).
 *
 * Errors are returned as 'enum loom_status' with a one-line message in a caller buffer naming the
 * key or tensor and the byte offset, e.g.
 *   "tensor 'blk.0.attn_q.weight' at byte 1234: data [4096, 8192) extends past end of file (5678 bytes)".
 * The reader does not log errors when it has a buffer to report them in.
 *
 * Requires a little-endian host (checked at compile time).
 */
#ifndef LOOM_GGUF_H
#define LOOM_GGUF_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_GGUF_MAGIC "GGUF"
#define LOOM_GGUF_DEFAULT_ALIGNMENT 32
#define LOOM_GGUF_MAX_ALIGNMENT (1u << 20)  /* bytes */
#define LOOM_GGUF_MAX_KEY 65535             /* bytes of a key */
#define LOOM_GGUF_MAX_TENSOR_NAME (LOOM_MAX_NAME - 1) /* bytes of a tensor name */
#define LOOM_GGUF_KEY_ALIGNMENT "general.alignment"
#define LOOM_GGUF_ANY_N UINT64_MAX          /* 'loom_gguf_expect_arr': any element count */

/* Value types of metadata (the GGUF spec's ids). */
enum loom_gguf_type {
    LOOM_GGUF_TYPE_UINT8 = 0,
    LOOM_GGUF_TYPE_INT8 = 1,
    LOOM_GGUF_TYPE_UINT16 = 2,
    LOOM_GGUF_TYPE_INT16 = 3,
    LOOM_GGUF_TYPE_UINT32 = 4,
    LOOM_GGUF_TYPE_INT32 = 5,
    LOOM_GGUF_TYPE_FLOAT32 = 6,
    LOOM_GGUF_TYPE_BOOL = 7,
    LOOM_GGUF_TYPE_STRING = 8,
    LOOM_GGUF_TYPE_ARRAY = 9,
    LOOM_GGUF_TYPE_UINT64 = 10,
    LOOM_GGUF_TYPE_INT64 = 11,
    LOOM_GGUF_TYPE_FLOAT64 = 12,
    LOOM_GGUF_TYPE_COUNT
};

/* Short name of a value type: "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str",
 * "arr", "u64", "i64", "f64"; "?" for an unknown id. */
LOOM_API const char * loom_gguf_type_name(enum loom_gguf_type type);
/* Bytes of one value of a fixed-size type (1, 2, 4 or 8); 0 for STRING, ARRAY and unknown ids. */
LOOM_API size_t loom_gguf_type_size(enum loom_gguf_type type);

/* ================================================================ reader */

struct loom_gguf;

/* Opens the GGUF file at 'path' and reads its header, metadata and tensor infos (with pread;
 * tensor data is neither read nor mapped), validating everything against the file's real size.
 * On success stores a new handle in '*out' (free it with 'loom_gguf_free') and returns LOOM_OK.
 * On failure '*out' is NULL and 'err' (when not NULL; 'err_size' bytes, always NUL-terminated)
 * holds a one-line message (for a file that opens, it begins with the quoted path); with 'err'
 * NULL the message is logged at ERROR level. Returns
 *  LOOM_ERR_INVALID_ARG  'path' or 'out' NULL;
 *  LOOM_ERR_IO           the file cannot be opened, is not a regular file, or a read fails;
 *  LOOM_ERR_FORMAT       the file is malformed (truncated, bad magic, a rule above broken);
 *  LOOM_ERR_UNSUPPORTED  version 1, a version above 3, a big-endian file, arrays of arrays;
 *  LOOM_ERR_OOM          memory for the metadata cannot be allocated. */
LOOM_API enum loom_status loom_gguf_open(const char * path, struct loom_gguf ** out, char * err, size_t err_size);

/* As 'loom_gguf_open', for a file image of 'size' bytes at 'data' (tests, fuzzers). Nothing is
 * read outside [data, data + size); the handle copies what it keeps ('data' may be freed after). */
LOOM_API enum loom_status loom_gguf_open_memory(const void * data, size_t size, struct loom_gguf ** out,
                                       char * err, size_t err_size);

/* Frees a handle (NULL is allowed). Pointers returned by the getters die with it. */
LOOM_API void loom_gguf_free(struct loom_gguf * g);

/* The file's format version: 2 or 3. */
LOOM_API uint32_t loom_gguf_version(const struct loom_gguf * g);
/* Bytes in the file (or memory image) at open. */
LOOM_API uint64_t loom_gguf_file_size(const struct loom_gguf * g);
/* Alignment of tensor data in bytes: 'general.alignment' or 32. */
LOOM_API uint32_t loom_gguf_alignment(const struct loom_gguf * g);
/* Absolute byte offset of the data section in the file (a multiple of the alignment). With no
 * tensors it may equal or exceed the file size (the file may end before the padding). */
LOOM_API uint64_t loom_gguf_data_offset(const struct loom_gguf * g);

/* ---------------------------------------------------------------- metadata by index
 * Keys are numbered 0..n_kv-1 in file order. An index out of range is a programming error
 * (LOOM_ASSERT). */

/* Number of key-value pairs. */
LOOM_API int64_t loom_gguf_n_kv(const struct loom_gguf * g);
/* Index of 'key' (binary search in a sorted index, O(log n)), or -1 when absent. */
LOOM_API int64_t loom_gguf_find_key(const struct loom_gguf * g, const char * key);
/* Key i's name: NUL-terminated, 1..65535 bytes, no NULs inside. */
LOOM_API const char * loom_gguf_kv_key(const struct loom_gguf * g, int64_t i);
/* Key i's value type (ARRAY for arrays; see 'loom_gguf_kv_arr_type'). */
LOOM_API enum loom_gguf_type loom_gguf_kv_type(const struct loom_gguf * g, int64_t i);
/* Byte offset in the file where key i's record (its key length) starts. */
LOOM_API uint64_t loom_gguf_kv_offset(const struct loom_gguf * g, int64_t i);
/* Pointer to a scalar value of a fixed-size type (host order; 'loom_gguf_type_size' bytes),
 * or NULL when the value is a string or an array. */
LOOM_API const void * loom_gguf_kv_data(const struct loom_gguf * g, int64_t i);
/* A STRING value: its bytes (NUL-terminated; may contain NULs) and in '*len' (optional) their
 * count. NULL (and *len 0) when the value is not a string. */
LOOM_API const char * loom_gguf_kv_str(const struct loom_gguf * g, int64_t i, size_t * len);
/* An ARRAY value's element type, or LOOM_GGUF_TYPE_COUNT when the value is not an array. */
LOOM_API enum loom_gguf_type loom_gguf_kv_arr_type(const struct loom_gguf * g, int64_t i);
/* An ARRAY value's element count; 0 when the value is not an array. */
LOOM_API uint64_t loom_gguf_kv_arr_n(const struct loom_gguf * g, int64_t i);
/* A numeric/BOOL array's elements, contiguous in host order; NULL for arrays of strings, empty
 * arrays and non-arrays. */
LOOM_API const void * loom_gguf_kv_arr_data(const struct loom_gguf * g, int64_t i);
/* Element j of an array of strings (NUL-terminated; may contain NULs), its length in '*len'
 * (optional); NULL when the value is not an array of strings or j is out of range. */
LOOM_API const char * loom_gguf_kv_arr_str(const struct loom_gguf * g, int64_t i, uint64_t j, size_t * len);

/* ---------------------------------------------------------------- metadata by name
 * Getters with defaults: return 'def' when the key is absent; when it is present with a type
 * that does not convert (or a value that does not fit) they also return 'def' and log a WARN.
 * Integer getters accept any integer type (u8..u64, i8..i64) whose value fits the result;
 * float getters accept F32 and F64; 'get_bool' accepts BOOL only. */

LOOM_API uint32_t loom_gguf_get_u32(const struct loom_gguf * g, const char * key, uint32_t def);
LOOM_API int32_t loom_gguf_get_i32(const struct loom_gguf * g, const char * key, int32_t def);
LOOM_API uint64_t loom_gguf_get_u64(const struct loom_gguf * g, const char * key, uint64_t def);
LOOM_API int64_t loom_gguf_get_i64(const struct loom_gguf * g, const char * key, int64_t def);
LOOM_API float loom_gguf_get_f32(const struct loom_gguf * g, const char * key, float def);
LOOM_API double loom_gguf_get_f64(const struct loom_gguf * g, const char * key, double def);
LOOM_API bool loom_gguf_get_bool(const struct loom_gguf * g, const char * key, bool def);
/* A STRING value (NUL-terminated, may contain NULs; its length in '*len', optional), or 'def'
 * (and *len = strlen(def), 0 for NULL) when absent or not a string. */
LOOM_API const char * loom_gguf_get_str(const struct loom_gguf * g, const char * key, const char * def, size_t * len);

/* Strict getters for required keys: store the value in '*out' and return LOOM_OK, or return
 * LOOM_ERR_FORMAT with a message in 'err' (key name and byte offset) when the key is missing,
 * has a type that does not convert, or a value that does not fit. '*out' is unchanged on error. */
LOOM_API enum loom_status loom_gguf_read_u32(const struct loom_gguf * g, const char * key, uint32_t * out, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_read_i32(const struct loom_gguf * g, const char * key, int32_t * out, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_read_u64(const struct loom_gguf * g, const char * key, uint64_t * out, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_read_i64(const struct loom_gguf * g, const char * key, int64_t * out, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_read_f32(const struct loom_gguf * g, const char * key, float * out, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_read_bool(const struct loom_gguf * g, const char * key, bool * out, char * err, size_t err_size);
/* '*out' points into the handle (NUL-terminated); '*len' (optional) gets the byte count. */
LOOM_API enum loom_status loom_gguf_read_str(const struct loom_gguf * g, const char * key, const char ** out, size_t * len,
                                    char * err, size_t err_size);

/* Arrays by name: element type (LOOM_GGUF_TYPE_COUNT when absent or not an array), count (0),
 * numeric data (NULL), and string element i (NULL; '*len' optional). */
LOOM_API enum loom_gguf_type loom_gguf_get_arr_type(const struct loom_gguf * g, const char * key);
LOOM_API uint64_t loom_gguf_get_arr_n(const struct loom_gguf * g, const char * key);
LOOM_API const void * loom_gguf_get_arr_data(const struct loom_gguf * g, const char * key);
LOOM_API const char * loom_gguf_get_arr_str(const struct loom_gguf * g, const char * key, uint64_t i, size_t * len);

/* Checks that 'key' is an array of 'elem_type' with exactly 'n' elements ('LOOM_GGUF_ANY_N':
 * any count), e.g. "tokenizer.ggml.scores must be f32[n_vocab]". Returns LOOM_OK, or
 * LOOM_ERR_FORMAT with a message such as
 * "key 'tokenizer.ggml.scores' at byte 812: expected f32[512], found i32[511]". */
LOOM_API enum loom_status loom_gguf_expect_arr(const struct loom_gguf * g, const char * key, enum loom_gguf_type elem_type,
                                      uint64_t n, char * err, size_t err_size);

/* ---------------------------------------------------------------- tensor infos
 * Tensors are numbered 0..n_tensors-1 in file order; an index out of range is a programming
 * error (LOOM_ASSERT). Every returned geometry has been validated at open. */

/* Number of tensor infos. */
LOOM_API int64_t loom_gguf_n_tensors(const struct loom_gguf * g);
/* Index of the tensor named 'name' (binary search, O(log n)), or -1 when absent. */
LOOM_API int64_t loom_gguf_find_tensor(const struct loom_gguf * g, const char * name);
/* Tensor i's name: 1..63 bytes, NUL-terminated, no NULs inside. */
LOOM_API const char * loom_gguf_tensor_name(const struct loom_gguf * g, int64_t i);
/* Tensor i's element type: an id 'loom_type_is_known' accepts (Loom may not compute with it). */
LOOM_API enum loom_type loom_gguf_tensor_type(const struct loom_gguf * g, int64_t i);
/* Tensor i's number of dimensions as stored in the file: 1..4. */
LOOM_API int loom_gguf_tensor_n_dims(const struct loom_gguf * g, int64_t i);
/* The shape in ne order: LOOM_MAX_DIMS elements, dimensions past n_dims are 1. */
LOOM_API const int64_t * loom_gguf_tensor_ne(const struct loom_gguf * g, int64_t i);
/* Tensor i's element count (ne[0] * ne[1] * ne[2] * ne[3], at most INT64_MAX). */
LOOM_API int64_t loom_gguf_tensor_nelements(const struct loom_gguf * g, int64_t i);
/* Byte offset of the tensor's data relative to the data section (a multiple of the alignment);
 * the absolute file offset is loom_gguf_data_offset(g) + this. */
LOOM_API uint64_t loom_gguf_tensor_offset(const struct loom_gguf * g, int64_t i);
/* Bytes of the tensor's data (without padding). */
LOOM_API uint64_t loom_gguf_tensor_size(const struct loom_gguf * g, int64_t i);
/* Byte offset in the file where tensor i's info record starts. */
LOOM_API uint64_t loom_gguf_tensor_info_offset(const struct loom_gguf * g, int64_t i);

/* ================================================================ writer
 * Collects metadata and tensor infos, then writes the file in one pass: header, metadata, tensor
 * infos, zero padding, then each tensor's data followed by zero padding to the alignment. Tensor
 * data is either given with the tensor ('loom_gguf_writer_write_file') or streamed in order after
 * the header ('loom_gguf_writer_begin' / '_write_data' / '_finish'), so a model larger than memory
 * can be written. Output goes to a temporary file in the destination's folder that is renamed
 * to the final name only when everything was written; on failure it is removed. While it is
 * open, SIGINT, SIGTERM and SIGHUP (those still at their default action) remove it before the
 * process dies of the signal; the previous actions are restored when the file is finished or
 * abandoned.
 * Keys keep the order of their first setting; setting an existing key replaces its value. */

struct loom_gguf_writer;

/* A new empty writer (version 3, alignment 32), or NULL when out of memory (logged). */
LOOM_API struct loom_gguf_writer * loom_gguf_writer_new(void);
/* Frees the writer; an unfinished streamed file is removed. NULL is allowed. */
LOOM_API void loom_gguf_writer_free(struct loom_gguf_writer * w);

/* Setters: copy 'key' (1..65535 bytes, NUL-terminated) and the value. Return LOOM_OK,
 * LOOM_ERR_INVALID_ARG (empty or too long key; after '_begin'; for 'general.alignment': not a
 * u32 power of two <= LOOM_GGUF_MAX_ALIGNMENT), or LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_gguf_writer_set_u8(struct loom_gguf_writer * w, const char * key, uint8_t v);
LOOM_API enum loom_status loom_gguf_writer_set_i8(struct loom_gguf_writer * w, const char * key, int8_t v);
LOOM_API enum loom_status loom_gguf_writer_set_u16(struct loom_gguf_writer * w, const char * key, uint16_t v);
LOOM_API enum loom_status loom_gguf_writer_set_i16(struct loom_gguf_writer * w, const char * key, int16_t v);
LOOM_API enum loom_status loom_gguf_writer_set_u32(struct loom_gguf_writer * w, const char * key, uint32_t v);
LOOM_API enum loom_status loom_gguf_writer_set_i32(struct loom_gguf_writer * w, const char * key, int32_t v);
LOOM_API enum loom_status loom_gguf_writer_set_u64(struct loom_gguf_writer * w, const char * key, uint64_t v);
LOOM_API enum loom_status loom_gguf_writer_set_i64(struct loom_gguf_writer * w, const char * key, int64_t v);
LOOM_API enum loom_status loom_gguf_writer_set_f32(struct loom_gguf_writer * w, const char * key, float v);
LOOM_API enum loom_status loom_gguf_writer_set_f64(struct loom_gguf_writer * w, const char * key, double v);
LOOM_API enum loom_status loom_gguf_writer_set_bool(struct loom_gguf_writer * w, const char * key, bool v);
/* A NUL-terminated string value. */
LOOM_API enum loom_status loom_gguf_writer_set_str(struct loom_gguf_writer * w, const char * key, const char * s);
/* A string value of 'len' bytes (may contain NULs). */
LOOM_API enum loom_status loom_gguf_writer_set_str_n(struct loom_gguf_writer * w, const char * key, const char * s, size_t len);
/* An array of 'n' elements of a fixed-size 'type' (not STRING or ARRAY: LOOM_ERR_INVALID_ARG),
 * read from 'data' in host order (n * loom_gguf_type_size(type) bytes; NULL allowed when n is 0).
 * BOOL elements must be 0 or 1. */
LOOM_API enum loom_status loom_gguf_writer_set_arr_data(struct loom_gguf_writer * w, const char * key, enum loom_gguf_type type,
                                               const void * data, size_t n);
/* An array of 'n' NUL-terminated strings; with 'lens' (optional) string i has lens[i] bytes. */
LOOM_API enum loom_status loom_gguf_writer_set_arr_str(struct loom_gguf_writer * w, const char * key, const char * const * strs,
                                              const size_t * lens, size_t n);
/* Copies key i of 'g' (any type) into the writer, and remembers g's file as one the writer must
 * never replace (see '_begin'). */
LOOM_API enum loom_status loom_gguf_writer_copy_kv(struct loom_gguf_writer * w, const struct loom_gguf * g, int64_t i);
/* Removes 'key' if present (not an error when absent). */
LOOM_API void loom_gguf_writer_remove_key(struct loom_gguf_writer * w, const char * key);
/* Sets the alignment (a power of two <= LOOM_GGUF_MAX_ALIGNMENT, else LOOM_ERR_INVALID_ARG):
 * stored as 'general.alignment' (u32) unless it is the default 32, which removes the key. */
LOOM_API enum loom_status loom_gguf_writer_set_alignment(struct loom_gguf_writer * w, uint32_t alignment);

/* Number of keys and of tensor infos collected so far. */
LOOM_API int64_t loom_gguf_writer_n_kv(const struct loom_gguf_writer * w);
LOOM_API int64_t loom_gguf_writer_n_tensors(const struct loom_gguf_writer * w);

/* Adds a tensor info: 'name' (1..63 bytes, unique), a known 'type', 'n_dims' in 1..4 and 'ne'
 * (n_dims elements, each >= 1, ne[0] a multiple of the block length). 'data' points to the
 * tensor's bytes (loom_row_size(type, ne[0]) * ne[1] * ... bytes), kept by pointer until the file
 * is written, or is NULL when the data is streamed with '_write_data'. Returns LOOM_OK,
 * LOOM_ERR_INVALID_ARG (a rule above broken, a duplicate name, after '_begin'), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_gguf_writer_add_tensor(struct loom_gguf_writer * w, const char * name, enum loom_type type,
                                             int n_dims, const int64_t * ne, const void * data);
/* Bytes of tensor i's data (without padding). */
LOOM_API uint64_t loom_gguf_writer_tensor_size(const struct loom_gguf_writer * w, int64_t i);

/* The exact size in bytes of the file the writer would write now (header, metadata, tensor
 * infos, data and all padding) into '*size'. Returns LOOM_OK, or LOOM_ERR_INVALID_ARG when it
 * overflows 64 bits or after '_begin'. */
LOOM_API enum loom_status loom_gguf_writer_file_size(struct loom_gguf_writer * w, uint64_t * size);

/* Writes the whole file to 'path' (every tensor must have been given data). Returns LOOM_OK,
 * LOOM_ERR_INVALID_ARG (a tensor without data; 'path' is a file the writer must not replace:
 * a protected input, or anything but a writable regular file -- a symlink, directory, device,
 * FIFO, socket or read-only file; only such a file or a missing path is ever replaced),
 * LOOM_ERR_IO (create/write/rename failed; nothing is left under 'path' or its temporary name),
 * LOOM_ERR_OOM; with a one-line message in 'err' (optional). */
LOOM_API enum loom_status loom_gguf_writer_write_file(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size);

/* Streaming: '_begin' fixes the layout, creates the temporary file and writes everything up to
 * the data section. Then '_write_data' appends the next 'size' bytes of tensor data in tensor
 * order (a tensor's bytes may come in several calls; tensors given data at '_add_tensor' are
 * written automatically when their turn comes); padding is inserted by the writer. '_finish'
 * checks that all data was written, flushes, syncs and renames the file to 'path'.
 * Errors as for '_write_file'; '_write_data' returns LOOM_ERR_INVALID_ARG when 'size' exceeds
 * what remains of the tensors. After any error the writer is failed: later calls return the
 * same status and the temporary file is removed. */
LOOM_API enum loom_status loom_gguf_writer_begin(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size);
LOOM_API enum loom_status loom_gguf_writer_write_data(struct loom_gguf_writer * w, const void * data, size_t size, char * err,
                                             size_t err_size);
LOOM_API enum loom_status loom_gguf_writer_finish(struct loom_gguf_writer * w, char * err, size_t err_size);

/* Forbids the writer to replace the file at 'path' (when it exists, by identity, not by name):
 * '_begin' and '_write_file' then fail with LOOM_ERR_INVALID_ARG for an output that is that file.
 * Returns LOOM_OK, or LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_gguf_writer_protect(struct loom_gguf_writer * w, const char * path);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_GGUF_H */
