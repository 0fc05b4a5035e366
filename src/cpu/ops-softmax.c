/* ops-softmax.c -- SOFT_MAX: softmax(x * scale + mask) per row, with the row maximum subtracted. */
#include "cpu/cpu-impl.h"

#include <math.h>

static bool soft_max_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * mask = dst->src[1];
    if (!a || a->type != LOOM_TYPE_F32 || dst->type != LOOM_TYPE_F32 || dst->nb[0] != 4 || !loom_are_same_shape(a, dst)) {
        return false;
    }
    if (mask) {
        if (mask->type != LOOM_TYPE_F32 && mask->type != LOOM_TYPE_F16) return false;
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || mask->ne[2] == 0 || mask->ne[3] == 0) return false;
        if (a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0) return false;
    }
    return true;
}

static void soft_max_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    *local = 2 * ((size_t)dst->ne[0] * sizeof(float) + 64);
}

static void soft_max_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * mask = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    const float scale = loom_get_op_param_f32(dst, 0);
    float * xbuf = (float *)p->local;
    float * mbuf = (float *)(p->local + (size_t)ne0 * sizeof(float) + 64);
    int64_t r0, r1, i1, i2, i3;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        const float * x = cpu_row_f32(p, a, i1, i2, i3, xbuf);
        const float * m = mask ? cpu_row_f32(p, mask, i1, i2 % mask->ne[2], i3 % mask->ne[3], mbuf) : NULL;
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        float max = -INFINITY;
        for (int64_t i = 0; i < ne0; i++) {
            d[i] = m ? x[i] * scale + m[i] : x[i] * scale;
            max = d[i] > max ? d[i] : max;
        }
        if (max == -INFINITY) { /* everything masked out */
            memset(d, 0, (size_t)ne0 * sizeof(float));
            continue;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < ne0; i++) {
            d[i] = expf(d[i] - max);
            sum += d[i];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < ne0; i++) d[i] *= inv;
    }
}

const struct cpu_op_impl cpu_op_soft_max = {
    .supports = soft_max_supports,
    .compute = soft_max_compute,
    .work_size = soft_max_work,
};
