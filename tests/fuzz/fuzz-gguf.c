/* fuzz-gguf.c -- libFuzzer target: the GGUF reader on arbitrary bytes, then every getter. */
#include "loom-gguf.h"

#include <stdlib.h>
#include <string.h>

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
    loom_gguf_free(g);
    return 0;
}
