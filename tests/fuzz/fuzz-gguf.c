/* fuzz-gguf.c -- libFuzzer target: the GGUF reader on arbitrary bytes, then every getter. */
#include "loom-gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

/* The fuzzer treats an abort as a finding: invariants the reader promises are checked here. */
#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

static void exercise_kv(const struct loom_gguf * g, struct loom_gguf_writer * w, int64_t i) {
    const char * key = loom_gguf_kv_key(g, i);
    REQUIRE(loom_gguf_find_key(g, key) == i);
    (void)loom_gguf_get_u32(g, key, 7);
    (void)loom_gguf_get_i32(g, key, 7);
    (void)loom_gguf_get_u64(g, key, 7);
    (void)loom_gguf_get_i64(g, key, 7);
    (void)loom_gguf_get_f32(g, key, 7);
    (void)loom_gguf_get_f64(g, key, 7);
    (void)loom_gguf_get_bool(g, key, false);
    size_t len = 0;
    const char * s = loom_gguf_get_str(g, key, "d", &len);
    REQUIRE(s && s[len] == '\0');
    char err[256];
    uint32_t u32;
    int32_t i32;
    const char * str;
    (void)loom_gguf_read_u32(g, key, &u32, err, sizeof err);
    (void)loom_gguf_read_i32(g, key, &i32, err, sizeof err);
    (void)loom_gguf_read_str(g, key, &str, &len, err, sizeof err);
    enum loom_gguf_type et = loom_gguf_get_arr_type(g, key);
    uint64_t n = loom_gguf_get_arr_n(g, key);
    (void)loom_gguf_expect_arr(g, key, LOOM_GGUF_TYPE_FLOAT32, n, err, sizeof err);
    (void)loom_gguf_expect_arr(g, key, LOOM_GGUF_TYPE_STRING, LOOM_GGUF_ANY_N, err, sizeof err);
    if (et == LOOM_GGUF_TYPE_STRING) {
        for (uint64_t j = 0; j < n && j < 64; j++) {
            s = loom_gguf_get_arr_str(g, key, j, &len);
            REQUIRE(s && s[len] == '\0');
        }
        REQUIRE(loom_gguf_get_arr_str(g, key, n, &len) == NULL);
    } else if (et != LOOM_GGUF_TYPE_COUNT && n > 0) {
        const uint8_t * d = loom_gguf_get_arr_data(g, key);
        REQUIRE(d != NULL);
        volatile uint8_t sink = d[0] ^ d[n * loom_gguf_type_size(et) - 1];
        (void)sink;
    }
    (void)loom_gguf_writer_copy_kv(w, g, i);
}

static void exercise_tensor(const struct loom_gguf * g, struct loom_gguf_writer * w, size_t size, int64_t i) {
    const char * name = loom_gguf_tensor_name(g, i);
    REQUIRE(loom_gguf_find_tensor(g, name) == i);
    uint64_t off = loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i);
    uint64_t bytes = loom_gguf_tensor_size(g, i);
    REQUIRE(off <= size && bytes <= size - off);
    REQUIRE(loom_gguf_tensor_offset(g, i) % loom_gguf_alignment(g) == 0);
    REQUIRE(loom_gguf_tensor_nelements(g, i) > 0);
    enum loom_status st = loom_gguf_writer_add_tensor(w, name, loom_gguf_tensor_type(g, i), loom_gguf_tensor_n_dims(g, i),
                                                      loom_gguf_tensor_ne(g, i), NULL);
    REQUIRE(st == LOOM_OK);
    REQUIRE(loom_gguf_writer_tensor_size(w, i) == bytes);
}

/* Key i of 'a' and key i of 'b' have the same name, type and value bytes. */
static void same_kv(const struct loom_gguf * a, const struct loom_gguf * b, int64_t i) {
    REQUIRE(!strcmp(loom_gguf_kv_key(a, i), loom_gguf_kv_key(b, i)));
    enum loom_gguf_type t = loom_gguf_kv_type(a, i);
    REQUIRE(loom_gguf_kv_type(b, i) == t);
    size_t la, lb;
    if (t == LOOM_GGUF_TYPE_STRING) {
        const char * sa = loom_gguf_kv_str(a, i, &la);
        const char * sb = loom_gguf_kv_str(b, i, &lb);
        REQUIRE(la == lb && !memcmp(sa, sb, la));
    } else if (t == LOOM_GGUF_TYPE_ARRAY) {
        enum loom_gguf_type et = loom_gguf_kv_arr_type(a, i);
        uint64_t n = loom_gguf_kv_arr_n(a, i);
        REQUIRE(loom_gguf_kv_arr_type(b, i) == et && loom_gguf_kv_arr_n(b, i) == n);
        if (et == LOOM_GGUF_TYPE_STRING) {
            for (uint64_t j = 0; j < n; j++) {
                const char * sa = loom_gguf_kv_arr_str(a, i, j, &la);
                const char * sb = loom_gguf_kv_arr_str(b, i, j, &lb);
                REQUIRE(la == lb && !memcmp(sa, sb, la));
            }
        } else if (n) {
            REQUIRE(!memcmp(loom_gguf_kv_arr_data(a, i), loom_gguf_kv_arr_data(b, i), n * loom_gguf_type_size(et)));
        }
    } else {
        REQUIRE(!memcmp(loom_gguf_kv_data(a, i), loom_gguf_kv_data(b, i), loom_gguf_type_size(t)));
    }
}

/* Writes what 'g' holds (metadata and tensor data from 'data') to a file, reads it back, and
 * requires the same content: reader -> writer -> reader is the identity. */
static void round_trip(const struct loom_gguf * g, const uint8_t * data) {
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    REQUIRE(w != NULL);
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) REQUIRE(loom_gguf_writer_copy_kv(w, g, i) == LOOM_OK);
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const uint8_t * td = data + loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i);
        REQUIRE(loom_gguf_writer_add_tensor(w, loom_gguf_tensor_name(g, i), loom_gguf_tensor_type(g, i),
                                            loom_gguf_tensor_n_dims(g, i), loom_gguf_tensor_ne(g, i), td) == LOOM_OK);
    }
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/fuzz-gguf-%d.gguf", (int)getpid());
    REQUIRE(loom_gguf_writer_write_file(w, path, err, sizeof err) == LOOM_OK);
    loom_gguf_writer_free(w);
    struct loom_gguf * b = NULL;
    REQUIRE(loom_gguf_open(path, &b, err, sizeof err) == LOOM_OK);
    REQUIRE(loom_gguf_n_kv(b) == loom_gguf_n_kv(g) && loom_gguf_n_tensors(b) == loom_gguf_n_tensors(g));
    REQUIRE(loom_gguf_alignment(b) == loom_gguf_alignment(g));
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) same_kv(g, b, i);
    FILE * f = fopen(path, "rb");
    REQUIRE(f != NULL);
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        REQUIRE(!strcmp(loom_gguf_tensor_name(g, i), loom_gguf_tensor_name(b, i)));
        REQUIRE(loom_gguf_tensor_size(g, i) == loom_gguf_tensor_size(b, i));
        REQUIRE(!memcmp(loom_gguf_tensor_ne(g, i), loom_gguf_tensor_ne(b, i), 4 * sizeof(int64_t)));
        size_t n = (size_t)loom_gguf_tensor_size(b, i);
        uint8_t * buf = malloc(n);
        REQUIRE(buf && fseek(f, (long)(loom_gguf_data_offset(b) + loom_gguf_tensor_offset(b, i)), SEEK_SET) == 0);
        REQUIRE(fread(buf, 1, n, f) == n);
        REQUIRE(!memcmp(buf, data + loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i), n));
        free(buf);
    }
    fclose(f);
    loom_gguf_free(b);
    unlink(path);
}

static void quiet(enum loom_log_level level, const char * text, void * user) {
    (void)level, (void)text, (void)user;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    loom_log_set(quiet, NULL);
    struct loom_gguf * g = NULL;
    char err[512];
    enum loom_status st = loom_gguf_open_memory(data, size, &g, err, sizeof err);
    if (st != LOOM_OK) {
        REQUIRE(g == NULL && strchr(err, '\n') == NULL && err[0] != '\0');
        return 0;
    }
    REQUIRE(loom_gguf_version(g) == 2 || loom_gguf_version(g) == 3);
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    REQUIRE(w != NULL);
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) exercise_kv(g, w, i);
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) exercise_tensor(g, w, size, i);
    REQUIRE(loom_gguf_find_key(g, "no.such.key") < 0 || loom_gguf_n_kv(g) > 0);
    loom_gguf_writer_free(w);
    round_trip(g, data);
    loom_gguf_free(g);
    return 0;
}
