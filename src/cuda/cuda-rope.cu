/* cuda-rope.cu -- rotary position embedding (Su et al. 2021, RoFormer): one thread per element of
 * a row, rows strided. Angles are formed in double precision and reduced to [-pi, pi] before the
 * float sine and cosine, so long positions keep full float accuracy. A copy of the result that
 * follows (the K cache store) can be fused in. */
#include "cuda-rope.cuh"

#include <string.h>

__global__ void lc_rope_kernel(struct lc_tensor a, struct lc_tensor pos, struct lc_tensor d, int n_dims, int neox,
                               double log2_base, double freq_scale, struct lc_scatter sc, int has_sc) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) return;
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    const int half = n_dims / 2;
    /* pair p holds elements (j0, j1); this thread writes the first or the second */
    int64_t p, j0, j1;
    if (neox) {
        p = i0 % half;
        j0 = p;
        j1 = p + half;
    } else {
        p = i0 / 2;
        j0 = 2 * p;
        j1 = 2 * p + 1;
    }
    /* the same for every row this thread visits */
    const double inv_freq = i0 < n_dims ? exp2(-(double)(2 * p) / (double)n_dims * log2_base) : 0.0;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows; r += (int64_t)gridDim.y * blockDim.y) {
        const int64_t i1 = r % d.ne[1], i23 = r / d.ne[1];
        const int64_t i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
        const char * x = a.data + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
        const int64_t o = i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        float out;
        if (i0 >= n_dims) {
            out = *(const float *)(x + i0 * a.nb[0]);
        } else {
            const int32_t ps = *(const int32_t *)(pos.data + i2 * pos.nb[0]);
            const double theta = (double)ps * freq_scale * inv_freq;
            const double twopi = 6.283185307179586476925;
            const float t = (float)(theta - twopi * rint(theta / twopi));
            float s, c;
            sincosf(t, &s, &c);
            const float x0 = *(const float *)(x + j0 * a.nb[0]), x1 = *(const float *)(x + j1 * a.nb[0]);
            out = i0 == j0 ? x0 * c - x1 * s : x0 * s + x1 * c;
        }
        *(float *)(d.data + o) = out;
        if (has_sc) lc_scatter_store(sc, o, out);
    }
}

bool lc_rope_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *pos = op->src[1];
    if (!a || !pos || a->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32 || pos->type != LOOM_TYPE_I32) return false;
    if (!loom_are_same_shape(a, op) || loom_nelements(pos) != a->ne[2] || pos->ne[0] != a->ne[2]) return false;
    const int n_dims = loom_get_op_param_i32(op, 0), mode = loom_get_op_param_i32(op, 1);
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) return false;
    if (mode != LOOM_ROPE_NORMAL && mode != LOOM_ROPE_NEOX) return false;
    /* frequency factors and YaRN are computed on the CPU (the scheduler keeps such a rope there) */
    if (!loom_rope_is_plain(op)) return false;
    return lc_strides_ok(a) && lc_strides_ok(pos) && lc_strides_ok(op);
}

static enum loom_status launch(struct lc_backend * be, struct loom_tensor * dst, const struct lc_tensor * a, const struct lc_tensor * pos,
                               const struct lc_tensor * d, const struct lc_scatter * sc, int has_sc) {
    const int n_dims = loom_get_op_param_i32(dst, 0), mode = loom_get_op_param_i32(dst, 1);
    const float base = loom_get_op_param_f32(dst, 2), scale = loom_get_op_param_f32(dst, 3);
    struct lc_rows_launch l = lc_rows_launch_for(d->ne[0], lc_nrows(d));
    if (l.grid.y > 1024) l.grid.y = 1024; /* several rows per thread share the frequency */
    struct lc_tensor ta = *a, tp = *pos, td = *d;
    struct lc_scatter tsc = *sc;
    int nd = n_dims, neox = mode == LOOM_ROPE_NEOX, hs = has_sc;
    double lb = log2((double)base), fs = (double)scale;
    void * args[] = {&ta, &tp, &td, &nd, &neox, &lb, &fs, &tsc, &hs};
    lc_launch(be, (const void *)lc_rope_kernel, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_rope_kernel");
}

enum loom_status lc_rope(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, pos, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &pos, &d);
    if (st != LOOM_OK) return st;
    struct lc_scatter none;
    memset(&none, 0, sizeof none);
    return launch(be, dst, &a, &pos, &d, &none, 0);
}

enum loom_status lc_rope_fused(struct lc_backend * be, struct loom_tensor * rope, struct loom_tensor * next, bool * fused) {
    *fused = false;
    if (!lc_reads_result_of(next, rope)) return LOOM_OK;
    struct lc_tensor a, pos, d, e;
    if (lc_tensor_of(be, rope->src[0], false, &a) != LOOM_OK || lc_tensor_of(be, rope->src[1], false, &pos) != LOOM_OK ||
        lc_tensor_of(be, rope, true, &d) != LOOM_OK) {
        return LOOM_OK;
    }
    struct lc_scatter sc;
    if (!lc_scatter_for(be, next, &d, &sc) || lc_tensor_of(be, next, true, &e) != LOOM_OK) return LOOM_OK;
    /* other threads read the pairs of 'a' and the positions */
    if (lc_overlap_of(&e, &a) != LC_DISJOINT || lc_overlap_of(&e, &pos) != LC_DISJOINT) return LOOM_OK;
    *fused = true;
    return launch(be, rope, &a, &pos, &d, &sc, 1);
}
