/* cuda-norm.cu -- RMS normalisation (Zhang & Sennrich 2019): one block per row, optionally fused
 * with the MUL by a weight vector that follows it in LLaMA-style graphs. */
#include "cuda-norm.cuh"

/* y = x / rms(x); with 'has_mul' also z = y * w (w broadcast over rows, w->ne[0] == ne0). At most
 * LC_RMS_THREADS threads. */
#define LC_RMS_THREADS 512
__global__ void __launch_bounds__(LC_RMS_THREADS) lc_rms_norm_kernel(struct lc_tensor a, struct lc_tensor d, float eps, struct lc_tensor w, struct lc_tensor z,
                                   int has_mul) {
    lc_pdl_trigger();
    lc_pdl_wait();
    __shared__ float shared[32];
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char * wr = NULL;
        char * zr = NULL;
        if (has_mul) {
            const int64_t i1 = r % d.ne[1], i23 = r / d.ne[1], i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
            wr = w.data + (i1 % w.ne[1]) * w.nb[1] + (i2 % w.ne[2]) * w.nb[2] + (i3 % w.ne[3]) * w.nb[3];
            zr = z.data + lc_row_offset(z, r);
        }
        lc_rms_norm_row(a.data + lc_row_offset(a, r), a.nb[0], d.data + lc_row_offset(d, r), d.nb[0], wr, w.nb[0], zr, z.nb[0], a.ne[0], eps,
                        shared);
    }
}

bool lc_rms_norm_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    return a && a->type == LOOM_TYPE_F32 && op->type == LOOM_TYPE_F32 && loom_are_same_shape(a, op) && lc_strides_ok(a) &&
           lc_strides_ok(op);
}

static void launch(struct lc_backend * be, const struct lc_tensor * a, const struct lc_tensor * d, float eps, const struct lc_tensor * w,
                   const struct lc_tensor * z, int has_mul) {
    const int64_t nrows = lc_nrows(d);
    const unsigned threads = d->ne[0] <= 512 ? 32 : d->ne[0] <= 4096 ? 256 : LC_RMS_THREADS;
    const unsigned blocks = (unsigned)(nrows < 1048576 ? nrows : 1048576);
    struct lc_tensor ta = *a, td = *d, tw = *w, tz = *z;
    float e = eps;
    int hm = has_mul;
    void * args[] = {&ta, &td, &e, &tw, &tz, &hm};
    lc_launch(be, (const void *)lc_rms_norm_kernel, dim3(blocks), dim3(threads), args);
}

enum loom_status lc_rms_norm(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &a);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    launch(be, &a, &d, loom_get_op_param_f32(dst, 0), &d, &d, 0);
    return LC_CHECK_LAUNCH("lc_rms_norm_kernel");
}

enum loom_status lc_rms_norm_fused(struct lc_backend * be, struct loom_tensor * norm, struct loom_tensor * next, bool * fused) {
    *fused = false;
    if (next->op != LOOM_OP_MUL || next->src[0] != norm || next->src[1] == norm || next->type != LOOM_TYPE_F32) return LOOM_OK;
    const struct loom_tensor * wt = next->src[1];
    if (!wt || wt->type != LOOM_TYPE_F32 || !loom_are_same_shape(next, norm) || !loom_can_repeat(wt, norm) || wt->ne[0] != norm->ne[0]) {
        return LOOM_OK;
    }
    struct lc_tensor a, d, w, z;
    if (lc_tensor_of(be, norm->src[0], false, &a) != LOOM_OK || lc_tensor_of(be, norm, true, &d) != LOOM_OK ||
        lc_tensor_of(be, wt, false, &w) != LOOM_OK || lc_tensor_of(be, next, true, &z) != LOOM_OK) {
        return LOOM_OK; /* the unfused path reports it */
    }
    /* each element is read and written by one thread: only exact aliasing is safe; 'w' is read by every row */
    if (lc_overlap_of(&z, &a) == LC_PARTIAL || lc_overlap_of(&z, &d) == LC_PARTIAL || lc_overlap_of(&z, &w) != LC_DISJOINT ||
        lc_overlap_of(&d, &w) != LC_DISJOINT) {
        return LOOM_OK;
    }
    *fused = true;
    launch(be, &a, &d, loom_get_op_param_f32(norm, 0), &w, &z, 1);
    return LC_CHECK_LAUNCH("lc_rms_norm_kernel");
}
