/* gguf-types.c -- names and sizes of GGUF metadata value types, tensor geometry. */
#include "gguf-impl.h"

#include <assert.h>

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

bool gguf_tensor_geometry(enum loom_type type, int n_dims, const int64_t * ne, int64_t * nelements, uint64_t * size) {
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
