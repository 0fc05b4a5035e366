/* cuda-softmax.cu -- numerically safe softmax (row maximum subtracted): one block per row, a
 * single warp (no block barriers) for rows of up to 1024 entries. The row itself
 * (lc_soft_max_row) is also computed by matrix-vector kernels that fuse the softmax of their result. */
#include "cuda-softmax.cuh"

/* One row per block; WARP: blocks of one warp (rows of up to 32 * 32 entries in registers). */
template <bool WARP>
__global__ void __launch_bounds__(WARP ? 32 : 1024)
    lc_soft_max_kernel(struct lc_tensor a, struct lc_tensor mask, int has_mask, struct lc_tensor d, float scale) {
    lc_pdl_trigger();
    lc_pdl_wait();
    __shared__ float shared[32];
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % d.ne[1], i23 = r / d.ne[1];
        const int64_t i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
        struct lc_sm_row row;
        row.x = a.data + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
        row.x_nb0 = a.nb[0];
        row.m = has_mask ? mask.data + i1 * mask.nb[1] + (i2 % mask.ne[2]) * mask.nb[2] + (i3 % mask.ne[3]) * mask.nb[3] : NULL;
        row.m_nb0 = mask.nb[0];
        row.m_type = mask.type;
        row.y = d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        row.y_nb0 = d.nb[0];
        row.n = a.ne[0];
        row.scale = scale;
        if (WARP) lc_soft_max_row<32, true>(row, threadIdx.x, 32, shared);
        else lc_soft_max_row<8, false>(row, threadIdx.x, blockDim.x, shared);
    }
}

bool lc_soft_max_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *mask = op->src[1];
    if (!a || a->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32 || !loom_are_same_shape(a, op)) return false;
    if (!lc_strides_ok(a) || !lc_strides_ok(op)) return false;
    if (mask) {
        if (mask->type != LOOM_TYPE_F32 && mask->type != LOOM_TYPE_F16) return false;
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || mask->ne[2] == 0 || mask->ne[3] == 0) return false;
        if (a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0 || !lc_strides_ok(mask)) return false;
    }
    return true;
}

enum loom_status lc_soft_max(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, m, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &m, &d); /* no mask: 'm' is 'a', unused */
    if (st != LOOM_OK) return st;
    const int64_t nrows = lc_nrows(&d);
    const bool warp = d.ne[0] <= 1024; /* one warp per row: its reductions need no barrier */
    const unsigned threads = warp ? 32 : d.ne[0] <= 2048 ? 256 : 1024;
    const unsigned blocks = (unsigned)(nrows < 1048576 ? nrows : 1048576);
    int has_mask = dst->src[1] != NULL;
    float scale = loom_get_op_param_f32(dst, 0);
    void * args[] = {&a, &m, &has_mask, &d, &scale};
    lc_launch(be, warp ? (const void *)lc_soft_max_kernel<true> : (const void *)lc_soft_max_kernel<false>, dim3(blocks), dim3(threads), args);
    return LC_CHECK_LAUNCH("lc_soft_max_kernel");
}
