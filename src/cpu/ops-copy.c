/* ops-copy.c -- DUP, CPY and CONT: copying values between any two layouts, converting F32/F16/BF16. */
#include "cpu/cpu-impl.h"

static bool copyable(enum loom_type from, enum loom_type to) {
    if (cpu_is_float_type(from) && cpu_is_float_type(to)) return true;
    return from == LOOM_TYPE_I32 && to == LOOM_TYPE_I32;
}

static bool copy_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * src = dst->src[0];
    if (!src || !copyable(src->type, dst->type) || loom_nelements(src) != loom_nelements(dst)) return false;
    if (dst->op != LOOM_OP_CPY && src->type != dst->type) return false;
    return true;
}

/* One element, converting through float unless the types match (then the bytes are copied as-is). */
static inline void copy_elem(enum loom_type st, const uint8_t * s, enum loom_type dt, uint8_t * d) {
    if (st == dt) {
        memcpy(d, s, loom_type_size(st));
    } else {
        cpu_store_f32(dt, d, cpu_load_f32(st, s));
    }
}

/* Same shape: row by row, dense rows through the (SIMD) converters. */
static void copy_same_shape(const struct cpu_params * p, const struct loom_tensor * src, struct loom_tensor * dst) {
    const int64_t ne0 = dst->ne[0];
    const bool dense = src->nb[0] == loom_type_size(src->type) && dst->nb[0] == loom_type_size(dst->type);
    int64_t r0, r1;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        const uint8_t * s = cpu_elem(src, 0, i1, i2, i3);
        uint8_t * d = cpu_elem(dst, 0, i1, i2, i3);
        if (dense) {
            cpu_convert(p->vec, src->type, s, dst->type, d, ne0);
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0++) copy_elem(src->type, s + i0 * src->nb[0], dst->type, d + i0 * dst->nb[0]);
        }
    }
}

/* Different shapes, equal counts: elements in row-major (ne0 fastest) order on both sides. */
static void copy_reshaped(const struct cpu_params * p, const struct loom_tensor * src, struct loom_tensor * dst) {
    if (loom_is_contiguous(src) && loom_is_contiguous(dst)) {
        int64_t e0, e1;
        cpu_split(loom_nelements(dst), p, &e0, &e1);
        if (e1 > e0) {
            cpu_convert(p->vec, src->type, (const uint8_t *)src->data + e0 * (int64_t)loom_type_size(src->type), dst->type,
                        (uint8_t *)dst->data + e0 * (int64_t)loom_type_size(dst->type), e1 - e0);
        }
        return;
    }
    const int64_t dne0 = dst->ne[0];
    int64_t r0, r1;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    if (r0 >= r1) return;
    /* the source coordinates of this thread's first element */
    int64_t lin = r0 * dne0, s[4];
    for (int d = 0; d < 4; d++) {
        s[d] = lin % src->ne[d];
        lin /= src->ne[d];
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        uint8_t * d = cpu_elem(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dne0; i0++) {
            copy_elem(src->type, cpu_elem(src, s[0], s[1], s[2], s[3]), dst->type, d + i0 * dst->nb[0]);
            for (int k = 0; k < 4 && ++s[k] == src->ne[k]; k++) s[k] = 0;
        }
    }
}

static void copy_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * src = dst->src[0];
    if (loom_are_same_shape(src, dst)) {
        copy_same_shape(p, src, dst);
    } else {
        copy_reshaped(p, src, dst);
    }
}

const struct cpu_op_impl cpu_op_copy = {
    .supports = copy_supports,
    .compute = copy_compute,
};
