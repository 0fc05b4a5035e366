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

/* The largest value (-inf for an empty or all -inf row), in 16 independent lanes so that the
 * compiler can vectorize it. */
static float row_max(const float * x, int64_t n) {
    enum { L = 16 };
    float lane[L];
    for (int l = 0; l < L; l++) lane[l] = -INFINITY;
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        for (int l = 0; l < L; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    }
    float max = -INFINITY;
    for (int l = 0; l < L; l++) max = lane[l] > max ? lane[l] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
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
        const float * x = lcpu_row_f32(p, a, i1, i2, i3, xbuf);
        const float * m = mask ? lcpu_row_f32(p, mask, i1, i2 % mask->ne[2], i3 % mask->ne[3], mbuf) : NULL;
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        if (m) {
            for (int64_t i = 0; i < ne0; i++) d[i] = x[i] * scale + m[i];
        } else {
            for (int64_t i = 0; i < ne0; i++) d[i] = x[i] * scale;
        }
        const float max = row_max(d, ne0);
        if (max == -INFINITY) { /* everything masked out */
            memset(d, 0, (size_t)ne0 * sizeof(float));
            continue;
        }
        const double sum = p->vec->exp_sum(d, ne0, max);
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < ne0; i++) d[i] *= inv;
    }
}

const struct lcpu_op_impl lcpu_op_soft_max = {
    .supports = soft_max_supports,
    .compute = soft_max_compute,
    .work_size = soft_max_work,
};
