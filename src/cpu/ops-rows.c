/* ops-rows.c -- per-row lookups and reductions: GET_ROWS (gather rows by id, from float or quantized
 * rows, into F32), SET_ROWS (scatter rows by id) and ARGMAX. */
#include "cpu/cpu-impl.h"

#include <math.h>

/* ---------------------------------------------------------------- GET_ROWS */

static bool get_rows_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * ids = dst->src[1];
    return a && ids && cpu_is_weight_readable(a) && ids->type == LOOM_TYPE_I32 && dst->type == LOOM_TYPE_F32 &&
           dst->nb[0] == 4 && ids->ne[3] == 1 && ids->ne[1] == a->ne[2] && ids->ne[2] == a->ne[3] &&
           dst->ne[0] == a->ne[0] && dst->ne[1] == ids->ne[0] && dst->ne[2] == a->ne[2] && dst->ne[3] == a->ne[3];
}

static void get_rows_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * ids = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    bool reported = false;
    int64_t r0, r1, i1, i2, i3;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        int32_t id;
        memcpy(&id, cpu_elem(ids, i1, i2, i3, 0), 4);
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        if (id < 0 || id >= a->ne[1]) {
            if (!reported) {
                loom_log(LOOM_LOG_ERROR, "GET_ROWS '%s': row id %d outside [0, %lld); the row is zeros", dst->name, (int)id,
                         (long long)a->ne[1]);
                reported = true;
            }
            memset(d, 0, (size_t)ne0 * sizeof(float));
            continue;
        }
        lcpu_to_f32(p->vec, a->type, cpu_elem(a, 0, id, i2, i3), a->nb[0], d, ne0);
    }
}

const struct lcpu_op_impl lcpu_op_get_rows = {
    .supports = get_rows_supports,
    .compute = get_rows_compute,
};

/* ---------------------------------------------------------------- SET_ROWS */

/* A block type SET_ROWS can write: one with a quantizer, into whole rows of blocks from dense F32 rows. */
static bool set_rows_block_ok(const struct loom_tensor * dst, const struct loom_tensor * b) {
    const struct loom_type_traits * tt = loom_type_get_traits(dst->type);
    return tt->blck_size > 1 && tt->from_float && dst->ne[0] % tt->blck_size == 0 && dst->nb[0] == tt->type_size &&
           b->nb[0] == sizeof(float);
}

static bool set_rows_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * b = dst->src[0], * ids = dst->src[1];
    return b && ids && b->type == LOOM_TYPE_F32 && ids->type == LOOM_TYPE_I32 &&
           (cpu_is_float_type(dst->type) || set_rows_block_ok(dst, b)) && dst->ne[2] == 1 && dst->ne[3] == 1 &&
           b->ne[2] == 1 && b->ne[3] == 1 && b->ne[0] == dst->ne[0] && ids->ne[0] == b->ne[1] &&
           loom_nelements(ids) == b->ne[1];
}

/* Block types (a quantized KV cache): the threads split the rows, each quantized whole. */
static void set_rows_blocks(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * b = dst->src[0], * ids = dst->src[1];
    const loom_from_float_fn from_float = loom_type_get_traits(dst->type)->from_float;
    int64_t r0, r1;
    cpu_split(b->ne[1], p, &r0, &r1);
    for (int64_t i = r0; i < r1; i++) {
        int32_t id;
        memcpy(&id, (const uint8_t *)ids->data + i * (int64_t)ids->nb[0], 4);
        if (id < 0 || id >= dst->ne[1]) {
            loom_log(LOOM_LOG_ERROR, "SET_ROWS '%s': row id %d outside [0, %lld); nothing written", dst->name, (int)id,
                     (long long)dst->ne[1]);
            continue;
        }
        from_float((const float *)cpu_elem(b, 0, i, 0, 0), cpu_elem(dst, 0, id, 0, 0), dst->ne[0]);
    }
}

/* The threads split the n x ne0 elements (one token's row is split too: token generation). */
static void set_rows_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * b = dst->src[0], * ids = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    if (!cpu_is_float_type(dst->type)) {
        set_rows_blocks(p, dst);
        return;
    }
    const bool dense = b->nb[0] == sizeof(float); /* source rows; the destination may have any stride */
    int64_t e0, e1;
    cpu_split(ne0 * b->ne[1], p, &e0, &e1);
    for (int64_t e = e0; e < e1;) {
        const int64_t i = e / ne0, j0 = e % ne0, j1 = e1 - i * ne0 < ne0 ? e1 - i * ne0 : ne0;
        e = i * ne0 + j1;
        int32_t id;
        memcpy(&id, (const uint8_t *)ids->data + i * (int64_t)ids->nb[0], 4);
        if (id < 0 || id >= dst->ne[1]) {
            if (j0 == 0) {
                loom_log(LOOM_LOG_ERROR, "SET_ROWS '%s': row id %d outside [0, %lld); nothing written", dst->name, (int)id,
                         (long long)dst->ne[1]);
            }
            continue;
        }
        const uint8_t * s = cpu_elem(b, j0, i, 0, 0);
        uint8_t * d = cpu_elem(dst, j0, id, 0, 0);
        if (dense) {
            lcpu_from_f32(p->vec, (const float *)s, dst->type, d, dst->nb[0], j1 - j0);
        } else {
            for (int64_t j = 0; j < j1 - j0; j++) {
                float v;
                memcpy(&v, s + j * (int64_t)b->nb[0], 4);
                cpu_store_f32(dst->type, d + j * (int64_t)dst->nb[0], v);
            }
        }
    }
}

const struct lcpu_op_impl lcpu_op_set_rows = {
    .supports = set_rows_supports,
    .compute = set_rows_compute,
};

/* ---------------------------------------------------------------- ARGMAX */

static bool argmax_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0];
    return a && a->type == LOOM_TYPE_F32 && dst->type == LOOM_TYPE_I32 && a->ne[2] == 1 && a->ne[3] == 1 &&
           dst->ne[0] == a->ne[1] && loom_nelements(dst) == a->ne[1];
}

static void argmax_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0];
    int64_t r0, r1;
    cpu_split(a->ne[1], p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t * row = cpu_elem(a, 0, r, 0, 0);
        int32_t best = 0;
        float best_v = NAN;
        for (int64_t i = 0; i < a->ne[0]; i++) {
            float v;
            memcpy(&v, row + i * (int64_t)a->nb[0], 4);
            if (isnan(v)) continue;
            if (isnan(best_v) || v > best_v) {
                best_v = v;
                best = (int32_t)i;
            }
        }
        memcpy(cpu_elem(dst, r, 0, 0, 0), &best, 4);
    }
}

const struct lcpu_op_impl lcpu_op_argmax = {
    .supports = argmax_supports,
    .compute = argmax_compute,
};
