/* ops-copy.c -- DUP, CPY and CONT: copying values between any two layouts, converting F32/F16/BF16,
 * and F32 to / from the quantized block types (through the traits table's from_float / to_float). */
#include "cpu/cpu-impl.h"

static bool copyable(enum loom_type from, enum loom_type to) {
    if (cpu_is_float_type(from) && cpu_is_float_type(to)) return true;
    return from == LOOM_TYPE_I32 && to == LOOM_TYPE_I32;
}

static bool is_block_type(enum loom_type t) { return loom_blck_size(t) > 1; }

/* Rows of a block type are whole blocks one after another (nb[0] is one block's size). */
static bool dense_blocks(const struct loom_tensor * t) { return t->nb[0] == loom_type_size(t->type); }

/* F32 -> a quantized type with a quantizer, a quantized type with a dequantizer -> F32, or a
 * quantized type to itself (bytes copied); the quantized side in dense rows, and the shapes equal
 * unless both sides are contiguous. */
static bool quant_copyable(const struct loom_tensor * src, const struct loom_tensor * dst) {
    const struct loom_type_traits * st = loom_type_get_traits(src->type), * dt = loom_type_get_traits(dst->type);
    bool ok;
    if (src->type == dst->type) {
        ok = true;
    } else if (src->type == LOOM_TYPE_F32) {
        ok = dt->from_float != NULL;
    } else {
        ok = dst->type == LOOM_TYPE_F32 && st->to_float != NULL;
    }
    if (!ok) return false;
    if (is_block_type(src->type) && !dense_blocks(src)) return false;
    if (is_block_type(dst->type) && !dense_blocks(dst)) return false;
    return loom_are_same_shape(src, dst) || (loom_is_contiguous(src) && loom_is_contiguous(dst));
}

static bool copy_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * src = dst->src[0];
    if (!src || loom_nelements(src) != loom_nelements(dst)) return false;
    if (dst->op != LOOM_OP_CPY && src->type != dst->type) return false;
    if (is_block_type(src->type) || is_block_type(dst->type)) return quant_copyable(src, dst);
    return copyable(src->type, dst->type);
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
            lcpu_convert(p->vec, src->type, s, dst->type, d, ne0);
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
            lcpu_convert(p->vec, src->type, (const uint8_t *)src->data + e0 * (int64_t)loom_type_size(src->type), dst->type,
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

/* One row of 'ne0' elements between F32 and a block type (or a block type and itself); 'buf' holds
 * ne0 floats for a strided F32 side. */
static void quant_row(const struct cpu_params * p, const struct loom_tensor * src, const uint8_t * s,
                      struct loom_tensor * dst, uint8_t * d, int64_t ne0, float * buf) {
    if (src->type == dst->type) {
        memcpy(d, s, loom_row_size(src->type, ne0));
    } else if (src->type == LOOM_TYPE_F32) {
        const float * x = (const float *)s;
        if (src->nb[0] != 4) {
            lcpu_to_f32(p->vec, LOOM_TYPE_F32, s, src->nb[0], buf, ne0);
            x = buf;
        }
        loom_type_get_traits(dst->type)->from_float(x, d, ne0);
    } else if (dst->nb[0] == 4) {
        loom_type_get_traits(src->type)->to_float(s, (float *)d, ne0);
    } else {
        loom_type_get_traits(src->type)->to_float(s, buf, ne0);
        lcpu_from_f32(p->vec, buf, LOOM_TYPE_F32, d, dst->nb[0], ne0);
    }
}

/* F32 <-> block types: row by row for equal shapes, else (both contiguous) in runs of whole blocks,
 * which quantize the same as rows since every block is coded on its own. */
static void copy_quant(const struct cpu_params * p, const struct loom_tensor * src, struct loom_tensor * dst) {
    if (loom_are_same_shape(src, dst)) {
        int64_t r0, r1;
        cpu_split(loom_nrows(dst), p, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            int64_t i1, i2, i3;
            cpu_row_coords(dst, r, &i1, &i2, &i3);
            quant_row(p, src, cpu_elem(src, 0, i1, i2, i3), dst, cpu_elem(dst, 0, i1, i2, i3), dst->ne[0], (float *)p->local);
        }
        return;
    }
    const enum loom_type qt = is_block_type(dst->type) ? dst->type : src->type;
    const int64_t blck = loom_blck_size(qt);
    int64_t b0, b1;
    cpu_split(loom_nelements(dst) / blck, p, &b0, &b1);
    if (b1 <= b0) return;
    const uint8_t * s = (const uint8_t *)src->data + (size_t)b0 * loom_row_size(src->type, blck);
    uint8_t * d = (uint8_t *)dst->data + (size_t)b0 * loom_row_size(dst->type, blck);
    const int64_t n = (b1 - b0) * blck;
    if (src->type == dst->type) {
        memcpy(d, s, loom_row_size(qt, n));
    } else if (src->type == LOOM_TYPE_F32) {
        loom_type_get_traits(dst->type)->from_float((const float *)s, d, n);
    } else {
        loom_type_get_traits(src->type)->to_float(s, (float *)d, n);
    }
}

static void copy_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    *local = is_block_type(dst->type) || is_block_type(dst->src[0]->type) ? (size_t)dst->ne[0] * sizeof(float) : 0;
}

static void copy_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * src = dst->src[0];
    if (is_block_type(src->type) || is_block_type(dst->type)) {
        copy_quant(p, src, dst);
    } else if (loom_are_same_shape(src, dst)) {
        copy_same_shape(p, src, dst);
    } else {
        copy_reshaped(p, src, dst);
    }
}

const struct lcpu_op_impl lcpu_op_copy = {
    .supports = copy_supports,
    .compute = copy_compute,
    .work_size = copy_work,
};
