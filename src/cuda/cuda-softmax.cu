/* cuda-softmax.cu -- numerically safe softmax (row maximum subtracted): one block per row, a
 * single warp (no block barriers) for rows of up to 1024 entries. */
#include "cuda-softmax.cuh"

__device__ __forceinline__ float lc_sm_value(const char * x, const struct lc_tensor & a, const char * m,
                                             const struct lc_tensor & mask, int64_t i, float scale) {
    float v = *(const float *)(x + i * a.nb[0]) * scale;
    if (m) v += lc_load(m + i * mask.nb[0], mask.type);
    return v;
}

/* CACHED: values each thread keeps in registers (rows of up to CACHED * blockDim.x entries take
 * one read and one write; longer rows three passes). 32 with one warp per block, 8 with more. */
template <int CACHED>
__global__ void __launch_bounds__(CACHED >= 32 ? 32 : 1024)
    lc_soft_max_kernel(struct lc_tensor a, struct lc_tensor mask, int has_mask, struct lc_tensor d, float scale) {
    lc_pdl_trigger();
    lc_pdl_wait();
    __shared__ float shared[32];
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    const int64_t n = a.ne[0];
    const bool cached = n <= (int64_t)CACHED * blockDim.x;
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % d.ne[1], i23 = r / d.ne[1];
        const int64_t i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
        const char * x = a.data + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
        const char * m = has_mask ? mask.data + i1 * mask.nb[1] + (i2 % mask.ne[2]) * mask.nb[2] + (i3 % mask.ne[3]) * mask.nb[3] : NULL;
        char * y = d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];

        if (cached) { /* one read and one write per element: the row stays in registers */
            float v[CACHED];
            float mx = -INFINITY;
#pragma unroll
            for (int k = 0; k < CACHED; k++) {
                const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
                v[k] = i < n ? lc_sm_value(x, a, m, mask, i, scale) : -INFINITY;
                mx = fmaxf(mx, v[k]);
            }
            mx = lc_block_max(mx, shared);
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < CACHED; k++) {
                const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
                if (i < n) {
                    v[k] = mx == -INFINITY ? 0.0f : __expf(v[k] - mx);
                    sum += v[k];
                }
            }
            sum = lc_block_sum(sum, shared);
            const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum; /* every entry masked out: zeros */
#pragma unroll
            for (int k = 0; k < CACHED; k++) {
                const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
                if (i < n) *(float *)(y + i * d.nb[0]) = v[k] * inv;
            }
            continue;
        }

        float mx = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, lc_sm_value(x, a, m, mask, i, scale));
        mx = lc_block_max(mx, shared);
        if (mx == -INFINITY) { /* every entry masked out */
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) *(float *)(y + i * d.nb[0]) = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = __expf(lc_sm_value(x, a, m, mask, i, scale) - mx);
            *(float *)(y + i * d.nb[0]) = e;
            sum += e;
        }
        sum = lc_block_sum(sum, shared);
        const float inv = 1.0f / sum;
        /* each thread rescales exactly the entries it wrote */
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) *(float *)(y + i * d.nb[0]) *= inv;
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
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &a);
    if (st == LOOM_OK && dst->src[1]) st = lc_tensor_of(be, dst->src[1], false, &m);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    if (!dst->src[1]) m = a; /* unused */
    const int64_t nrows = lc_nrows(&d);
    const bool warp = d.ne[0] <= 1024; /* one warp per row: its reductions need no barrier */
    const unsigned threads = warp ? 32 : d.ne[0] <= 2048 ? 256 : 1024;
    const unsigned blocks = (unsigned)(nrows < 1048576 ? nrows : 1048576);
    int has_mask = dst->src[1] != NULL;
    float scale = loom_get_op_param_f32(dst, 0);
    void * args[] = {&a, &m, &has_mask, &d, &scale};
    lc_launch(be, warp ? (const void *)lc_soft_max_kernel<32> : (const void *)lc_soft_max_kernel<8>, dim3(blocks), dim3(threads), args);
    return LC_CHECK_LAUNCH("lc_soft_max_kernel");
}
