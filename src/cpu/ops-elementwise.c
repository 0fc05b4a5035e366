/* ops-elementwise.c -- ADD and MUL (with broadcasting), SCALE, SILU and GELU, over any source strides. */
#include "cpu/cpu-impl.h"

/* The result is an F32 tensor with dense rows, shaped like its first source. */
static bool dst_ok(const struct loom_tensor * dst) {
    return dst->type == LOOM_TYPE_F32 && dst->nb[0] == 4 && dst->src[0] && loom_are_same_shape(dst, dst->src[0]);
}

static size_t row_bytes(const struct loom_tensor * dst) { return (size_t)dst->ne[0] * sizeof(float) + 64; }

/* ---------------------------------------------------------------- ADD, MUL */

static bool binary_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    return dst_ok(dst) && b && cpu_is_float_type(a->type) && b->type == LOOM_TYPE_F32 && loom_can_repeat(b, a);
}

static void binary_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    *local = 2 * row_bytes(dst);
}

static void binary_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    const int64_t ne0 = dst->ne[0], bne0 = b->ne[0];
    float * xbuf = (float *)p->local;
    float * ybuf = (float *)(p->local + row_bytes(dst));
    const bool add = dst->op == LOOM_OP_ADD;
    int64_t r0, r1, i1, i2, i3;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        const float * x = lcpu_row_f32(p, a, i1, i2, i3, xbuf);
        const float * y = lcpu_row_f32(p, b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3], ybuf);
        if (bne0 != ne0) { /* repeat b's row along dimension 0 */
            if (y != ybuf) memcpy(ybuf, y, (size_t)bne0 * 4);
            for (int64_t i = bne0; i < ne0; i++) ybuf[i] = ybuf[i - bne0];
            y = ybuf;
        }
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        if (add) {
            for (int64_t i = 0; i < ne0; i++) d[i] = x[i] + y[i];
        } else {
            for (int64_t i = 0; i < ne0; i++) d[i] = x[i] * y[i];
        }
    }
}

const struct lcpu_op_impl lcpu_op_binary = {
    .supports = binary_supports,
    .compute = binary_compute,
    .work_size = binary_work,
};

/* ---------------------------------------------------------------- SCALE, SILU, GELU */

static bool unary_supports(const struct loom_tensor * dst) { return dst_ok(dst) && dst->src[0]->type == LOOM_TYPE_F32; }

static void unary_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    *local = row_bytes(dst);
}

static void unary_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    const float s = loom_get_op_param_f32(dst, 0);
    const enum loom_op op = dst->op;
    int64_t r0, r1, i1, i2, i3;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        const float * x = lcpu_row_f32(p, a, i1, i2, i3, (float *)p->local);
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        switch (op) {
        case LOOM_OP_SCALE: for (int64_t i = 0; i < ne0; i++) d[i] = x[i] * s; break;
        case LOOM_OP_SILU: p->vec->silu(x, d, ne0); break;
        default: p->vec->gelu(x, d, ne0); break;
        }
    }
}

const struct lcpu_op_impl lcpu_op_unary = {
    .supports = unary_supports,
    .compute = unary_compute,
    .work_size = unary_work,
};
