/* test-gguf.c -- GGUF writer/reader round trip (every value type, tensors of several types, both
 * alignments, whole-file and streamed writes), getter conversions, and the writer's failure modes.
 * Output files go to <build>/gguf-roundtrip/ (they also seed the fuzzer). */
#include "test-util.h"

#include "loom-gguf.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_OUT "gguf-roundtrip"

/* ---------------------------------------------------------------- fixtures */

static const char * const STRS[] = {"", "hello", "\xe2\x96\x81the", "tab\there", ""};
static const size_t N_STRS = sizeof STRS / sizeof STRS[0];
static const char NUL_STR[] = {'a', '\0', 'b'}; /* a string value with a NUL inside */

struct tdesc {
    const char * name;
    enum loom_type type;
    int n_dims;
    int64_t ne[4];
    uint64_t bytes;   /* computed by hand from the GGUF block sizes */
    uint8_t * data;
};

static struct tdesc TENSORS[] = {
    {"token_embd.weight", LOOM_TYPE_F32, 2, {7, 3, 1, 1}, 7 * 3 * 4, NULL},
    {"f16.vec", LOOM_TYPE_F16, 1, {5, 1, 1, 1}, 10, NULL},
    {"blk.0.q8", LOOM_TYPE_Q8_0, 2, {64, 2, 1, 1}, 2 * 2 * 34, NULL},
    {"i8.cube", LOOM_TYPE_I8, 3, {3, 2, 2, 1}, 12, NULL},
    {"bf16.4d", LOOM_TYPE_BF16, 4, {2, 2, 2, 2}, 32, NULL},
    {"q4k", LOOM_TYPE_Q4_K, 1, {256, 1, 1, 1}, 144, NULL},
};
#define N_TENSORS (sizeof TENSORS / sizeof TENSORS[0])

/* Numeric arrays: 5 elements of each fixed-size type, bytes from a fixed pattern. */
#define ARR_N 5
static uint8_t arr_bytes[LOOM_GGUF_TYPE_COUNT][ARR_N * 8];

static void make_fixtures(void) {
    uint64_t seed = 42;
    for (size_t i = 0; i < N_TENSORS; i++) {
        TENSORS[i].data = malloc(TENSORS[i].bytes);
        for (uint64_t j = 0; j < TENSORS[i].bytes; j++) TENSORS[i].data[j] = (uint8_t)test_rand_u64(&seed);
    }
    for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++) {
        for (size_t j = 0; j < sizeof arr_bytes[t]; j++) {
            arr_bytes[t][j] = t == LOOM_GGUF_TYPE_BOOL ? (uint8_t)(j & 1) : (uint8_t)test_rand_u64(&seed);
        }
    }
}

static char * key_for_arr(int t) {
    static char buf[64];
    snprintf(buf, sizeof buf, "test.arr.%s", loom_gguf_type_name((enum loom_gguf_type)t));
    return buf;
}

/* Fills a writer with every kind of value and the tensors; tensor i gets its data pointer when
 * bit i of 'data_mask' is set (else it is streamed). */
#define ALL_DATA 0xffffu
static void fill(struct loom_gguf_writer * w, unsigned data_mask) {
    CHECK(loom_gguf_writer_set_str(w, "general.name", "first") == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_u8(w, "test.u8", 200) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_i8(w, "test.i8", -100) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_u16(w, "test.u16", 60000) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_i16(w, "test.i16", -30000) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_u32(w, "test.u32", 4000000000u) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_i32(w, "test.i32", -2000000000) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_u64(w, "test.u64", (1ull << 63) + 5) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_i64(w, "test.i64", INT64_MIN + 1) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_f32(w, "test.f32", -0.0f) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_f64(w, "test.f64", 3.141592653589793) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_bool(w, "test.bool", true) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_str(w, "test.empty", "") == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_str_n(w, "test.nul", NUL_STR, sizeof NUL_STR) == LOOM_OK, "set");
    for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++) {
        if (!loom_gguf_type_size((enum loom_gguf_type)t)) continue;
        CHECK(loom_gguf_writer_set_arr_data(w, key_for_arr(t), (enum loom_gguf_type)t, arr_bytes[t], ARR_N) == LOOM_OK,
              "set arr %d", t);
    }
    CHECK(loom_gguf_writer_set_arr_data(w, "test.arr.empty", LOOM_GGUF_TYPE_UINT32, NULL, 0) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_arr_str(w, "test.arr.str", STRS, NULL, N_STRS) == LOOM_OK, "set");
    const char * with_nul[] = {NUL_STR, "x"};
    const size_t lens[] = {sizeof NUL_STR, 1};
    CHECK(loom_gguf_writer_set_arr_str(w, "test.arr.str_nul", with_nul, lens, 2) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_arr_str(w, "test.arr.str_empty", NULL, NULL, 0) == LOOM_OK, "set");
    /* replacing keeps one entry, in the first position, with the new value and type */
    CHECK(loom_gguf_writer_set_u32(w, "general.name", 1) == LOOM_OK, "set");
    CHECK(loom_gguf_writer_set_str(w, "general.name", "tiny") == LOOM_OK, "replace");
    for (size_t i = 0; i < N_TENSORS; i++) {
        const struct tdesc * t = &TENSORS[i];
        CHECK(loom_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, (data_mask >> i) & 1 ? t->data : NULL) == LOOM_OK,
              "add %s", t->name);
        CHECK(loom_gguf_writer_tensor_size(w, (int64_t)i) == t->bytes, "size of %s", t->name);
    }
}

/* ---------------------------------------------------------------- checks on the read side */

static uint64_t le64(const uint8_t * p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void check_kvs(const struct loom_gguf * g) {
    CHECK(loom_gguf_find_key(g, "general.name") == 0, "replaced key keeps its position");
    size_t len;
    CHECK(!strcmp(loom_gguf_get_str(g, "general.name", "", &len), "tiny") && len == 4, "general.name");
    const uint8_t * p;
#define SCALAR(key, T, v)                                                                   \
    do {                                                                                   \
        int64_t i = loom_gguf_find_key(g, key);                                            \
        T want = v;                                                                        \
        CHECK(i >= 0 && (p = loom_gguf_kv_data(g, i)) && !memcmp(p, &want, sizeof want), key); \
    } while (0)
    SCALAR("test.u8", uint8_t, 200);
    SCALAR("test.i8", int8_t, -100);
    SCALAR("test.u16", uint16_t, 60000);
    SCALAR("test.i16", int16_t, -30000);
    SCALAR("test.u32", uint32_t, 4000000000u);
    SCALAR("test.i32", int32_t, -2000000000);
    SCALAR("test.u64", uint64_t, (1ull << 63) + 5);
    SCALAR("test.i64", int64_t, INT64_MIN + 1);
    SCALAR("test.f32", float, -0.0f); /* bit-exact: the sign of zero survives */
    SCALAR("test.f64", double, 3.141592653589793);
    SCALAR("test.bool", uint8_t, 1);
#undef SCALAR
    CHECK(loom_gguf_kv_type(g, loom_gguf_find_key(g, "test.i16")) == LOOM_GGUF_TYPE_INT16, "type kept");
    const char * s = loom_gguf_get_str(g, "test.empty", "x", &len);
    CHECK(s && len == 0 && s[0] == '\0', "empty string");
    s = loom_gguf_get_str(g, "test.nul", NULL, &len);
    CHECK(s && len == 3 && !memcmp(s, NUL_STR, 3) && s[3] == '\0', "string with NUL");
    for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++) {
        size_t es = loom_gguf_type_size((enum loom_gguf_type)t);
        if (!es) continue;
        const char * key = key_for_arr(t);
        CHECK(loom_gguf_get_arr_type(g, key) == (enum loom_gguf_type)t && loom_gguf_get_arr_n(g, key) == ARR_N, "%s", key);
        const void * d = loom_gguf_get_arr_data(g, key);
        CHECK(d && !memcmp(d, arr_bytes[t], ARR_N * es), "%s data", key);
        CHECK(loom_gguf_expect_arr(g, key, (enum loom_gguf_type)t, ARR_N, NULL, 0) == LOOM_OK, "%s expect", key);
    }
    CHECK(loom_gguf_get_arr_type(g, "test.arr.empty") == LOOM_GGUF_TYPE_UINT32 && loom_gguf_get_arr_n(g, "test.arr.empty") == 0,
          "empty array");
    CHECK(loom_gguf_get_arr_n(g, "test.arr.str") == N_STRS, "str array count");
    for (size_t j = 0; j < N_STRS; j++) {
        s = loom_gguf_get_arr_str(g, "test.arr.str", j, &len);
        CHECK(s && len == strlen(STRS[j]) && !strcmp(s, STRS[j]), "str[%zu]", j);
    }
    CHECK(loom_gguf_get_arr_str(g, "test.arr.str", N_STRS, &len) == NULL && len == 0, "past the end");
    s = loom_gguf_get_arr_str(g, "test.arr.str_nul", 0, &len);
    CHECK(s && len == 3 && !memcmp(s, NUL_STR, 3), "str array element with NUL");
    CHECK(loom_gguf_get_arr_type(g, "test.arr.str_empty") == LOOM_GGUF_TYPE_STRING &&
              loom_gguf_get_arr_n(g, "test.arr.str_empty") == 0, "empty string array");
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) {
        CHECK(loom_gguf_find_key(g, loom_gguf_kv_key(g, i)) == i, "find_key(%s)", loom_gguf_kv_key(g, i));
    }
}

static void check_tensors(const struct loom_gguf * g, const uint8_t * file, size_t size, uint32_t align) {
    CHECK(loom_gguf_n_tensors(g) == (int64_t)N_TENSORS, "n_tensors");
    CHECK(loom_gguf_alignment(g) == align && loom_gguf_data_offset(g) % align == 0, "alignment %u", align);
    uint64_t expect_off = 0;
    for (size_t i = 0; i < N_TENSORS; i++) {
        const struct tdesc * t = &TENSORS[i];
        int64_t k = loom_gguf_find_tensor(g, t->name);
        CHECK(k == (int64_t)i, "find %s", t->name);
        if (k < 0) continue;
        CHECK(loom_gguf_tensor_type(g, k) == t->type && loom_gguf_tensor_n_dims(g, k) == t->n_dims, "%s type/dims", t->name);
        CHECK(!memcmp(loom_gguf_tensor_ne(g, k), t->ne, sizeof t->ne), "%s shape", t->name);
        CHECK(loom_gguf_tensor_size(g, k) == t->bytes, "%s bytes", t->name);
        uint64_t off = loom_gguf_tensor_offset(g, k);
        CHECK(off == expect_off && off % align == 0, "%s offset %llu, expected %llu", t->name, (unsigned long long)off,
              (unsigned long long)expect_off);
        uint64_t abs = loom_gguf_data_offset(g) + off;
        CHECK(abs + t->bytes <= size && !memcmp(file + abs, t->data, t->bytes), "%s data", t->name);
        /* padding after the data is zeros */
        uint64_t pad_end = abs + (t->bytes + align - 1) / align * align;
        for (uint64_t b = abs + t->bytes; b < pad_end && b < size; b++) CHECK(file[b] == 0, "%s padding byte %llu", t->name, (unsigned long long)b);
        expect_off = (off + t->bytes + align - 1) / align * align;
    }
    CHECK(size == loom_gguf_data_offset(g) + expect_off, "file size %zu", size);
    CHECK(loom_gguf_find_tensor(g, "missing") == -1, "missing tensor");
}

/* Opens 'path' both ways and checks everything, including the raw header bytes. */
static void check_file(const char * path, uint32_t align) {
    size_t size = 0;
    uint8_t * file = test_read_file(path, &size);
    CHECK(file && size > 24, "read %s", path);
    if (!file) return;
    CHECK(!memcmp(file, "GGUF", 4) && file[4] == 3 && !file[5] && !file[6] && !file[7], "magic and version 3");
    CHECK(le64(file + 8) == N_TENSORS, "raw n_tensors");
    struct loom_gguf * g = NULL;
    char err[512];
    CHECK(loom_gguf_open(path, &g, err, sizeof err) == LOOM_OK, "open %s: %s", path, err);
    if (g) {
        CHECK(le64(file + 16) == (uint64_t)loom_gguf_n_kv(g), "raw n_kv");
        CHECK(loom_gguf_version(g) == 3 && loom_gguf_file_size(g) == size, "version, size");
        bool has_align_key = loom_gguf_find_key(g, "general.alignment") >= 0;
        CHECK(has_align_key == (align != 32), "general.alignment written only when not 32");
        check_kvs(g);
        check_tensors(g, file, size, align);
        /* zeros from the end of the last tensor info to the data section */
        int64_t last = loom_gguf_n_tensors(g) - 1;
        uint64_t end = loom_gguf_tensor_info_offset(g, last) + 8 + strlen(loom_gguf_tensor_name(g, last)) + 4 +
                       8 * (uint64_t)loom_gguf_tensor_n_dims(g, last) + 4 + 8;
        CHECK(loom_gguf_data_offset(g) - end < align, "data section starts at the next aligned byte");
        for (uint64_t b = end; b < loom_gguf_data_offset(g); b++) CHECK(file[b] == 0, "header padding byte %llu", (unsigned long long)b);
        loom_gguf_free(g);
    }
    CHECK(loom_gguf_open_memory(file, size, &g, err, sizeof err) == LOOM_OK, "open_memory: %s", err);
    loom_gguf_free(g);
    free(file);
}

/* ---------------------------------------------------------------- writes */

static bool exists(const char * path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}


static void test_whole_file(uint32_t align, const char * path) {
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    fill(w, ALL_DATA);
    CHECK(loom_gguf_writer_set_alignment(w, align) == LOOM_OK, "alignment %u", align);
    char err[512];
    unlink(path);
    uint64_t predicted = 0;
    CHECK(loom_gguf_writer_file_size(w, &predicted) == LOOM_OK, "file_size");
    CHECK(loom_gguf_writer_write_file(w, path, err, sizeof err) == LOOM_OK, "write %s: %s", path, err);
    loom_gguf_writer_free(w);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (uint64_t)sb.st_size == predicted, "file_size predicted %llu bytes, wrote %lld",
          (unsigned long long)predicted, (long long)sb.st_size);
    check_file(path, align);
}

/* Streams the data of the tensors not in 'data_mask' in 'piece'-byte writes that straddle tensor
 * boundaries; the writer writes the others from their pointers when their turn comes. */
static void test_streamed(uint32_t align, unsigned data_mask, size_t piece, const char * path) {
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    fill(w, data_mask);
    CHECK(loom_gguf_writer_set_alignment(w, align) == LOOM_OK, "alignment");
    char err[512];
    unlink(path);
    uint64_t predicted = 0;
    CHECK(loom_gguf_writer_file_size(w, &predicted) == LOOM_OK, "file_size");
    CHECK(loom_gguf_writer_begin(w, path, err, sizeof err) == LOOM_OK, "begin: %s", err);
    uint64_t late = 0;
    CHECK(loom_gguf_writer_file_size(w, &late) == LOOM_ERR_INVALID_ARG, "no file_size after begin");
    CHECK(!exists(path) && test_dir_has_temp(DIR_OUT), "nothing under the final name before finish");
    size_t total = 0;
    for (size_t i = 0; i < N_TENSORS; i++) total += TENSORS[i].bytes;
    uint8_t * all = malloc(total);
    size_t at = 0;
    for (size_t i = 0; i < N_TENSORS; i++) {
        if ((data_mask >> i) & 1) continue;
        memcpy(all + at, TENSORS[i].data, TENSORS[i].bytes);
        at += TENSORS[i].bytes;
    }
    for (size_t off = 0; off < at; off += piece) {
        size_t n = at - off < piece ? at - off : piece;
        CHECK(loom_gguf_writer_write_data(w, all + off, n, err, sizeof err) == LOOM_OK, "write_data: %s", err);
    }
    CHECK(loom_gguf_writer_set_u32(w, "late.key", 1) == LOOM_ERR_INVALID_ARG, "no keys after begin");
    CHECK(loom_gguf_writer_finish(w, err, sizeof err) == LOOM_OK, "finish: %s", err);
    CHECK(!test_dir_has_temp(DIR_OUT), "temporary file renamed");
    free(all);
    loom_gguf_writer_free(w);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (uint64_t)sb.st_size == predicted, "file_size predicted %llu bytes, wrote %lld",
          (unsigned long long)predicted, (long long)sb.st_size);
    check_file(path, align);
}

static void test_writer_failures(void) {
    char err[512];
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    fill(w, ALL_DATA);
    /* a folder that does not exist: an error, nothing created */
    CHECK(loom_gguf_writer_write_file(w, DIR_OUT "/no/such/dir/x.gguf", err, sizeof err) == LOOM_ERR_IO, "bad dir");
    CHECK(strchr(err, '\n') == NULL && err[0], "one-line message");
    loom_gguf_writer_free(w);

    /* an unfinished stream leaves nothing behind */
    const char * path = DIR_OUT "/unfinished.gguf";
    unlink(path);
    w = loom_gguf_writer_new();
    fill(w, 0);
    CHECK(loom_gguf_writer_begin(w, path, err, sizeof err) == LOOM_OK, "begin: %s", err);
    CHECK(loom_gguf_writer_write_data(w, TENSORS[0].data, 10, err, sizeof err) == LOOM_OK, "partial data");
    loom_gguf_writer_free(w);
    CHECK(!exists(path) && !test_dir_has_temp(DIR_OUT), "abandoned stream leaves no file");

    /* finishing with data missing fails and leaves nothing */
    w = loom_gguf_writer_new();
    fill(w, 0);
    CHECK(loom_gguf_writer_begin(w, path, err, sizeof err) == LOOM_OK, "begin");
    CHECK(loom_gguf_writer_finish(w, err, sizeof err) == LOOM_ERR_INVALID_ARG, "finish without data");
    CHECK(strstr(err, "token_embd.weight") != NULL, "names the tensor: %s", err);
    CHECK(loom_gguf_writer_write_data(w, "x", 1, err, sizeof err) == LOOM_ERR_INVALID_ARG, "failed writer stays failed");
    loom_gguf_writer_free(w);
    CHECK(!exists(path) && !test_dir_has_temp(DIR_OUT), "failed finish leaves no file");

    /* too much data */
    w = loom_gguf_writer_new();
    int64_t ne[1] = {4};
    CHECK(loom_gguf_writer_add_tensor(w, "t", LOOM_TYPE_F32, 1, ne, NULL) == LOOM_OK, "add");
    CHECK(loom_gguf_writer_begin(w, path, err, sizeof err) == LOOM_OK, "begin");
    uint8_t buf[20] = {0};
    CHECK(loom_gguf_writer_write_data(w, buf, 20, err, sizeof err) == LOOM_ERR_INVALID_ARG, "more data than tensors");
    loom_gguf_writer_free(w);
    CHECK(!exists(path) && !test_dir_has_temp(DIR_OUT), "overrun leaves no file");

    /* write_file with a tensor lacking data: refused before anything is created */
    w = loom_gguf_writer_new();
    CHECK(loom_gguf_writer_add_tensor(w, "t", LOOM_TYPE_F32, 1, ne, NULL) == LOOM_OK, "add");
    CHECK(loom_gguf_writer_write_file(w, path, err, sizeof err) == LOOM_ERR_INVALID_ARG, "no data");
    loom_gguf_writer_free(w);
    CHECK(!exists(path), "nothing written");

    /* argument checks */
    w = loom_gguf_writer_new();
    int64_t bad_ne[2] = {33, 1};
    CHECK(loom_gguf_writer_add_tensor(w, "q", LOOM_TYPE_Q8_0, 2, bad_ne, NULL) == LOOM_ERR_INVALID_ARG, "block multiple");
    CHECK(loom_gguf_writer_add_tensor(w, "z", LOOM_TYPE_F32, 1, (int64_t[]){0}, NULL) == LOOM_ERR_INVALID_ARG, "empty");
    CHECK(loom_gguf_writer_add_tensor(w, "u", (enum loom_type)4, 1, ne, NULL) == LOOM_ERR_INVALID_ARG, "unknown type");
    CHECK(loom_gguf_writer_add_tensor(w, "d", LOOM_TYPE_F32, 5, ne, NULL) == LOOM_ERR_INVALID_ARG, "n_dims 5");
    CHECK(loom_gguf_writer_add_tensor(w, "", LOOM_TYPE_F32, 1, ne, NULL) == LOOM_ERR_INVALID_ARG, "empty name");
    char long_name[80];
    memset(long_name, 'n', 64);
    long_name[64] = '\0';
    CHECK(loom_gguf_writer_add_tensor(w, long_name, LOOM_TYPE_F32, 1, ne, NULL) == LOOM_ERR_INVALID_ARG, "64-byte name");
    long_name[63] = '\0';
    CHECK(loom_gguf_writer_add_tensor(w, long_name, LOOM_TYPE_F32, 1, ne, NULL) == LOOM_OK, "63-byte name");
    CHECK(loom_gguf_writer_add_tensor(w, long_name, LOOM_TYPE_F32, 1, ne, NULL) == LOOM_ERR_INVALID_ARG, "duplicate");
    CHECK(loom_gguf_writer_set_u32(w, "", 1) == LOOM_ERR_INVALID_ARG, "empty key");
    CHECK(loom_gguf_writer_set_u32(w, "general.alignment", 48) == LOOM_ERR_INVALID_ARG, "alignment 48");
    CHECK(loom_gguf_writer_set_u64(w, "general.alignment", 64) == LOOM_ERR_INVALID_ARG, "alignment as u64");
    CHECK(loom_gguf_writer_set_alignment(w, 0) == LOOM_ERR_INVALID_ARG, "alignment 0");
    CHECK(loom_gguf_writer_set_alignment(w, 1u << 21) == LOOM_ERR_INVALID_ARG, "alignment 2 MiB");
    CHECK(loom_gguf_writer_n_kv(w) == 0, "failed sets add nothing");
    uint8_t bools[2] = {1, 2};
    CHECK(loom_gguf_writer_set_arr_data(w, "b", LOOM_GGUF_TYPE_BOOL, bools, 2) == LOOM_ERR_INVALID_ARG, "bool 2");
    CHECK(loom_gguf_writer_set_arr_data(w, "s", LOOM_GGUF_TYPE_STRING, bools, 2) == LOOM_ERR_INVALID_ARG, "str as data");
    CHECK(loom_gguf_writer_set_alignment(w, 64) == LOOM_OK && loom_gguf_writer_n_kv(w) == 1, "alignment key");
    CHECK(loom_gguf_writer_set_alignment(w, 32) == LOOM_OK && loom_gguf_writer_n_kv(w) == 0, "default removes it");
    loom_gguf_writer_free(w);
}

/* A writer that copied metadata from a file must not replace that file. */
static void test_protect(const char * input) {
    struct loom_gguf * g = NULL;
    char err[512];
    CHECK(loom_gguf_open(input, &g, err, sizeof err) == LOOM_OK, "open: %s", err);
    if (!g) return;
    size_t before = 0;
    uint8_t * orig = test_read_file(input, &before);
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) CHECK(loom_gguf_writer_copy_kv(w, g, i) == LOOM_OK, "copy %lld", (long long)i);
    CHECK(loom_gguf_writer_n_kv(w) == loom_gguf_n_kv(g), "all keys copied");
    CHECK(loom_gguf_writer_write_file(w, input, err, sizeof err) == LOOM_ERR_INVALID_ARG, "must refuse to replace the input");
    size_t after = 0;
    uint8_t * now = test_read_file(input, &after);
    CHECK(orig && now && before == after && !memcmp(orig, now, before), "input unchanged");
    /* the copy written elsewhere round-trips the metadata */
    const char * copy = DIR_OUT "/copy.gguf";
    CHECK(loom_gguf_writer_write_file(w, copy, err, sizeof err) == LOOM_OK, "write copy: %s", err);
    struct loom_gguf * c = NULL;
    CHECK(loom_gguf_open(copy, &c, err, sizeof err) == LOOM_OK, "open copy: %s", err);
    if (c) {
        check_kvs(c);
        loom_gguf_free(c);
    }
    free(orig);
    free(now);
    loom_gguf_writer_free(w);
    loom_gguf_free(g);
    /* protect() by path */
    w = loom_gguf_writer_new();
    CHECK(loom_gguf_writer_protect(w, copy) == LOOM_OK, "protect");
    CHECK(loom_gguf_writer_write_file(w, copy, err, sizeof err) == LOOM_ERR_INVALID_ARG, "protected path");
    loom_gguf_writer_free(w);
}

/* Only a missing path or a writable regular file may be replaced; anything else is refused and
 * left as it was. The odd files live in their own folder (not DIR_OUT, which seeds the fuzzer). */
#define DIR_KINDS "gguf-output-kinds"
static void test_output_kinds(void) {
    char err[512];
    const char * fifo = DIR_KINDS "/fifo.gguf", * target = DIR_KINDS "/target.gguf", * link = DIR_KINDS "/link.gguf";
    const char * ro = DIR_KINDS "/readonly.gguf", * dir = DIR_KINDS "/dir.gguf", * plain = DIR_KINDS "/plain.gguf";
    unlink(fifo), unlink(link), unlink(target), unlink(plain), rmdir(dir);
    if (exists(ro)) chmod(ro, 0644), unlink(ro);
    mkdir(DIR_KINDS, 0755);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    FILE * f = fopen(target, "wb");
    if (f) fputs("target", f), fclose(f);
    f = fopen(ro, "wb");
    if (f) fputs("read-only", f), fclose(f);
    CHECK(chmod(ro, 0444) == 0, "chmod");
    CHECK(symlink("target.gguf", link) == 0, "symlink: %s", strerror(errno));
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    struct { const char * path, * says; } cases[] = {
        {fifo, "not a regular file"}, {link, "symbolic link"}, {ro, "read-only"}, {dir, "directory"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct loom_gguf_writer * w = loom_gguf_writer_new();
        fill(w, ALL_DATA);
        err[0] = 0;
        CHECK(loom_gguf_writer_write_file(w, cases[i].path, err, sizeof err) == LOOM_ERR_INVALID_ARG, "%s refused", cases[i].path);
        CHECK(strstr(err, cases[i].says) != NULL && !strchr(err, '\n'), "message for %s: %s", cases[i].path, err);
        loom_gguf_writer_free(w);
    }
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is still a FIFO");
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the symlink is still a symlink");
    size_t n = 0;
    uint8_t * t = test_read_file(target, &n);
    CHECK(t && n == 6 && !memcmp(t, "target", 6), "the link's target is unchanged");
    free(t);
    t = test_read_file(ro, &n);
    CHECK(t && n == 9 && !memcmp(t, "read-only", 9), "the read-only file is unchanged");
    free(t);
    CHECK(lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), "the directory is still a directory");
    /* a writable regular file is replaced */
    f = fopen(plain, "wb");
    if (f) fputs("old", f), fclose(f);
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    fill(w, ALL_DATA);
    CHECK(loom_gguf_writer_write_file(w, plain, err, sizeof err) == LOOM_OK, "replace a regular file: %s", err);
    loom_gguf_writer_free(w);
    CHECK(lstat(plain, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 3, "replaced");
    DIR * d = opendir(DIR_KINDS);
    struct dirent * e;
    while (d && (e = readdir(d)) != NULL) CHECK(strstr(e->d_name, ".tmp.") == NULL, "temporary file left: %s", e->d_name);
    if (d) closedir(d);
    unlink(fifo), unlink(link), unlink(target), unlink(plain), rmdir(dir);
    chmod(ro, 0644), unlink(ro), rmdir(DIR_KINDS);
}

/* ---------------------------------------------------------------- getters */

static void test_getters(const char * path) {
    struct loom_gguf * g = NULL;
    char err[512];
    CHECK(loom_gguf_open(path, &g, err, sizeof err) == LOOM_OK, "open: %s", err);
    if (!g) return;
    /* integer widths convert when the value fits */
    CHECK(loom_gguf_get_u32(g, "test.u8", 0) == 200, "u8 -> u32");
    CHECK(loom_gguf_get_i32(g, "test.i16", 0) == -30000, "i16 -> i32");
    CHECK(loom_gguf_get_u64(g, "test.u32", 0) == 4000000000u, "u32 -> u64");
    CHECK(loom_gguf_get_i64(g, "test.u32", 0) == 4000000000, "u32 -> i64");
    CHECK(loom_gguf_get_i32(g, "test.u32", 7) == 7, "u32 too large for i32 -> default");
    CHECK(loom_gguf_get_u32(g, "test.i8", 7) == 7, "negative -> u32 default");
    CHECK(loom_gguf_get_u64(g, "test.u64", 0) == (1ull << 63) + 5, "u64");
    CHECK(loom_gguf_get_i64(g, "test.u64", 7) == 7, "u64 above INT64_MAX -> default");
    CHECK(loom_gguf_get_i64(g, "test.i64", 0) == INT64_MIN + 1, "i64");
    CHECK(loom_gguf_get_u32(g, "test.f32", 7) == 7, "float is not an integer");
    CHECK(loom_gguf_get_u32(g, "no.such.key", 9) == 9, "absent -> default");
    CHECK(loom_gguf_get_f32(g, "test.f64", 0) == (float)3.141592653589793, "f64 -> f32");
    CHECK(signbit(loom_gguf_get_f64(g, "test.f32", 1)), "f32 -> f64 keeps -0");
    CHECK(loom_gguf_get_f32(g, "test.u32", 2.5f) == 2.5f, "integer is not a float");
    CHECK(loom_gguf_get_bool(g, "test.bool", false), "bool");
    CHECK(!loom_gguf_get_bool(g, "test.u8", false), "u8 is not a bool");
    size_t len = 99;
    CHECK(!strcmp(loom_gguf_get_str(g, "test.u8", "dflt", &len), "dflt") && len == 4, "not a string -> default");
    uint32_t u = 0;
    CHECK(loom_gguf_read_u32(g, "test.u16", &u, err, sizeof err) == LOOM_OK && u == 60000, "read_u32");
    u = 5;
    CHECK(loom_gguf_read_u32(g, "missing.key", &u, err, sizeof err) == LOOM_ERR_FORMAT && u == 5, "missing");
    CHECK(strstr(err, "missing.key") && strstr(err, "missing"), "message: %s", err);
    CHECK(loom_gguf_read_u32(g, "test.i32", &u, err, sizeof err) == LOOM_ERR_FORMAT, "negative");
    CHECK(strstr(err, "test.i32") && strstr(err, "at byte "), "message names key and offset: %s", err);
    int32_t i32 = 0;
    CHECK(loom_gguf_read_i32(g, "test.i8", &i32, err, sizeof err) == LOOM_OK && i32 == -100, "read_i32");
    int64_t i64 = 0;
    CHECK(loom_gguf_read_i64(g, "test.i32", &i64, err, sizeof err) == LOOM_OK && i64 == -2000000000, "read_i64");
    uint64_t u64 = 0;
    CHECK(loom_gguf_read_u64(g, "test.i64", &u64, err, sizeof err) == LOOM_ERR_FORMAT, "negative to u64");
    float f = 0;
    CHECK(loom_gguf_read_f32(g, "test.f64", &f, err, sizeof err) == LOOM_OK && f == (float)3.141592653589793, "read_f32");
    bool b = false;
    CHECK(loom_gguf_read_bool(g, "test.bool", &b, err, sizeof err) == LOOM_OK && b, "read_bool");
    const char * s = NULL;
    CHECK(loom_gguf_read_str(g, "general.name", &s, &len, err, sizeof err) == LOOM_OK && !strcmp(s, "tiny") && len == 4, "read_str");
    CHECK(loom_gguf_read_str(g, "test.u8", &s, &len, err, sizeof err) == LOOM_ERR_FORMAT, "read_str on u8");
    /* expectations */
    CHECK(loom_gguf_expect_arr(g, "test.arr.str", LOOM_GGUF_TYPE_STRING, N_STRS, err, sizeof err) == LOOM_OK, "expect str");
    CHECK(loom_gguf_expect_arr(g, "test.arr.str", LOOM_GGUF_TYPE_STRING, LOOM_GGUF_ANY_N, err, sizeof err) == LOOM_OK, "any n");
    CHECK(loom_gguf_expect_arr(g, "test.arr.f32", LOOM_GGUF_TYPE_FLOAT32, 6, err, sizeof err) == LOOM_ERR_FORMAT, "count");
    CHECK(strstr(err, "expected f32[6], found f32[5]") != NULL, "message: %s", err);
    CHECK(loom_gguf_expect_arr(g, "test.arr.i32", LOOM_GGUF_TYPE_FLOAT32, 5, err, sizeof err) == LOOM_ERR_FORMAT, "type");
    CHECK(strstr(err, "found i32[5]") != NULL, "message: %s", err);
    CHECK(loom_gguf_expect_arr(g, "test.u8", LOOM_GGUF_TYPE_FLOAT32, 5, err, sizeof err) == LOOM_ERR_FORMAT, "scalar");
    CHECK(loom_gguf_expect_arr(g, "nope", LOOM_GGUF_TYPE_FLOAT32, 5, err, sizeof err) == LOOM_ERR_FORMAT, "absent");
    /* index accessors on non-arrays */
    int64_t k = loom_gguf_find_key(g, "test.u8");
    CHECK(loom_gguf_kv_arr_type(g, k) == LOOM_GGUF_TYPE_COUNT && loom_gguf_kv_arr_n(g, k) == 0 &&
              loom_gguf_kv_arr_data(g, k) == NULL && loom_gguf_kv_str(g, k, &len) == NULL && len == 0,
          "non-array accessors");
    CHECK(loom_gguf_kv_data(g, loom_gguf_find_key(g, "general.name")) == NULL, "string has no scalar data");
    CHECK(loom_gguf_kv_offset(g, 0) == 24, "first key right after the header");
    CHECK(loom_gguf_tensor_info_offset(g, 0) > loom_gguf_kv_offset(g, loom_gguf_n_kv(g) - 1), "infos after keys");
    CHECK(loom_gguf_tensor_nelements(g, 4) == 16, "nelements");
    loom_gguf_free(g);
}

int main(void) {
    if (mkdir(DIR_OUT, 0755) != 0 && errno != EEXIST) return test_skip("cannot create the output folder");
    make_fixtures();
    test_whole_file(32, DIR_OUT "/roundtrip-32.gguf");
    test_whole_file(64, DIR_OUT "/roundtrip-64.gguf");
    test_whole_file(4096, DIR_OUT "/roundtrip-4096.gguf");
    test_streamed(32, 0, 7, DIR_OUT "/streamed-32.gguf");
    test_streamed(128, 0, 1000, DIR_OUT "/streamed-128.gguf");
    test_streamed(64, (1u << 1) | (1u << 4) | (1u << 5), 5, DIR_OUT "/mixed-64.gguf");
    test_streamed(32, 1u << 0, 3, DIR_OUT "/mixed-32.gguf");
    test_getters(DIR_OUT "/roundtrip-32.gguf");
    test_writer_failures();
    test_protect(DIR_OUT "/roundtrip-64.gguf");
    test_output_kinds();
    for (size_t i = 0; i < N_TENSORS; i++) free(TENSORS[i].data);
    return test_finish("test-gguf");
}
