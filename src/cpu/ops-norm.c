/* ops-norm.c -- RMS_NORM: x / sqrt(mean(x^2) + eps) over each row (Zhang & Sennrich 2019). */
#include "cpu/cpu-impl.h"

#include <math.h>

static bool rms_norm_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0];
    return a && a->type == LOOM_TYPE_F32 && dst->type == LOOM_TYPE_F32 && dst->nb[0] == 4 && loom_are_same_shape(a, dst);
}

static void rms_norm_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    *local = (size_t)dst->ne[0] * sizeof(float);
}

/* Sum of squares in 16 independent float lanes (so the compiler can vectorize without
 * reassociating), the lanes combined in double. */
static double sum_squares(const float * x, int64_t n) {
    enum { L = 16 };
    float acc[L] = {0};
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        for (int l = 0; l < L; l++) acc[l] += x[i + l] * x[i + l];
    }
    double s = 0.0;
    for (int l = 0; l < L; l++) s += acc[l];
    for (; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

static void rms_norm_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    const float eps = loom_get_op_param_f32(dst, 0);
    int64_t r0, r1, i1, i2, i3;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        const float * x = lcpu_row_f32(p, a, i1, i2, i3, (float *)p->local);
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        const float scale = (float)(1.0 / sqrt(sum_squares(x, ne0) / (double)ne0 + (double)eps));
        for (int64_t i = 0; i < ne0; i++) d[i] = x[i] * scale;
    }
}

const struct lcpu_op_impl lcpu_op_rms_norm = {
    .supports = rms_norm_supports,
    .compute = rms_norm_compute,
    .work_size = rms_norm_work,
};
