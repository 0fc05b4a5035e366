/* ops-rope.c -- ROPE: rotary position embedding (Su et al. 2021, RoFormer), normal and NeoX pairing,
 * with per-pair frequency factors and YaRN (Peng et al. 2023); the formulas are loom_rope_ext's. */
#include "cpu/cpu-impl.h"

#include <math.h>

static bool rope_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    const int n_dims = loom_get_op_param_i32(dst, 0);
    const int mode = loom_get_op_param_i32(dst, 1);
    return a && pos && a->type == LOOM_TYPE_F32 && pos->type == LOOM_TYPE_I32 && dst->type == LOOM_TYPE_F32 &&
           dst->nb[0] == 4 && loom_are_same_shape(a, dst) && loom_nelements(pos) == a->ne[2] && n_dims > 0 &&
           n_dims % 2 == 0 && n_dims <= a->ne[0] && (mode == LOOM_ROPE_NORMAL || mode == LOOM_ROPE_NEOX) &&
           (!ff || (ff->type == LOOM_TYPE_F32 && ff->ne[0] >= n_dims / 2));
}

static void rope_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    *shared = 0;
    /* one converted row, cos/sin of each pair (floats), the frequency of each pair (doubles) */
    const size_t n_dims = (size_t)loom_get_op_param_i32(dst, 0);
    *local = (size_t)dst->ne[0] * sizeof(float) + 64 + loom_pad(n_dims * sizeof(float), 64) + n_dims / 2 * sizeof(double);
}

/* Element 'i' (in row-major order) of an I32 tensor of any shape and strides. */
static int32_t i32_at(const struct loom_tensor * t, int64_t i) {
    int64_t c[4];
    for (int d = 0; d < 4; d++) {
        c[d] = i % t->ne[d];
        i /= t->ne[d];
    }
    int32_t v;
    memcpy(&v, cpu_elem(t, c[0], c[1], c[2], c[3]), 4);
    return v;
}

static void rope_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    const int64_t ne0 = dst->ne[0];
    const int n_dims = loom_get_op_param_i32(dst, 0);
    const bool neox = loom_get_op_param_i32(dst, 1) == LOOM_ROPE_NEOX;
    const double freq_base = loom_get_op_param_f32(dst, 2);
    const double freq_scale = loom_get_op_param_f32(dst, 3);
    const int half = n_dims / 2;
    float * xbuf = (float *)p->local;
    float * cs = (float *)(p->local + (size_t)ne0 * sizeof(float) + 64); /* cos, sin interleaved per pair */
    double * freq = (double *)(p->local + (size_t)ne0 * sizeof(float) + 64 + loom_pad((size_t)n_dims * sizeof(float), 64));
    const struct loom_rope_ext_params ext = loom_rope_get_ext_params(dst);
    /* YaRN's ramp runs over the pairs between the one that turns beta_fast times over the original
     * context and the one that turns beta_slow times */
    double lo = 0, hi = 0;
    if (ext.ext_factor != 0.0f) {
        const double two_pi = 6.283185307179586476925;
        const double d_fast = n_dims * log(ext.n_ctx_orig / (ext.beta_fast * two_pi)) / (2 * log(freq_base));
        const double d_slow = n_dims * log(ext.n_ctx_orig / (ext.beta_slow * two_pi)) / (2 * log(freq_base));
        lo = fmax(0.0, floor(d_fast));
        hi = fmin((double)(n_dims - 1), ceil(d_slow));
    }
    const double mscale = (double)ext.attn_factor * (ext.ext_factor != 0.0f ? 1.0 + 0.1 * log(1.0 / freq_scale) : 1.0);
    for (int i = 0; i < half; i++) {
        double f = pow(freq_base, -2.0 * i / n_dims);
        if (ff) f /= (double)*(const float *)cpu_elem(ff, i, 0, 0, 0);
        double mix = freq_scale; /* the angle's factor: interpolated, or mixed with the extrapolated one */
        if (ext.ext_factor != 0.0f) {
            const double y = ((double)i - lo) / fmax(0.001, hi - lo);
            const double r = (1.0 - fmin(1.0, fmax(0.0, y))) * (double)ext.ext_factor;
            mix = freq_scale * (1.0 - r) + r;
        }
        freq[i] = f * mix;
    }

    int64_t r0, r1, i1, i2, i3, cached = -1;
    cpu_split(loom_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_row_coords(dst, r, &i1, &i2, &i3);
        if (i2 != cached) { /* angles depend on the token only */
            const double t = (double)i32_at(pos, i2);
            for (int i = 0; i < half; i++) {
                const double theta = t * freq[i];
                cs[2 * i] = (float)(cos(theta) * mscale);
                cs[2 * i + 1] = (float)(sin(theta) * mscale);
            }
            cached = i2;
        }
        const float * x = lcpu_row_f32(p, a, i1, i2, i3, xbuf);
        float * d = (float *)cpu_elem(dst, 0, i1, i2, i3);
        const int64_t stride = neox ? 1 : 2;    /* distance between the first elements of two pairs */
        const int64_t offs = neox ? half : 1;   /* distance between a pair's two elements */
        for (int i = 0; i < half; i++) {
            const float x0 = x[i * stride], x1 = x[i * stride + offs];
            const float c = cs[2 * i], s = cs[2 * i + 1];
            d[i * stride] = x0 * c - x1 * s;
            d[i * stride + offs] = x0 * s + x1 * c;
        }
        for (int64_t i = n_dims; i < ne0; i++) d[i] = x[i];
    }
}

const struct lcpu_op_impl lcpu_op_rope = {
    .supports = rope_supports,
    .compute = rope_compute,
    .work_size = rope_work,
};
