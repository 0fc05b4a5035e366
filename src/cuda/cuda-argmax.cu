/* cuda-argmax.cu -- per-row argmax: one block per row, (value, index) pairs reduced by warps. */
#include "cuda-argmax.cuh"

/* True when candidate (v, i) beats (bv, bi); bi < 0 means "nothing yet". */
__device__ __forceinline__ bool lc_am_better(float v, int64_t i, float bv, int64_t bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    return v > bv || (v == bv && i < bi);
}

__global__ void lc_argmax_kernel(struct lc_tensor a, struct lc_tensor d) {
    lc_pdl_trigger();
    lc_pdl_wait();
    __shared__ float sv[32];
    __shared__ int64_t si[32];
    for (int64_t r = blockIdx.x; r < a.ne[1]; r += gridDim.x) {
        const char * x = a.data + r * a.nb[1];
        float bv = -INFINITY;
        int64_t bi = -1;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            const float v = *(const float *)(x + i * a.nb[0]);
            if (v != v) continue; /* NaN */
            if (lc_am_better(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (lc_am_better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
        __syncthreads();
        if (lane == 0) {
            sv[warp] = bv;
            si[warp] = bi;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nwarps; w++) {
                if (lc_am_better(sv[w], si[w], bv, bi)) {
                    bv = sv[w];
                    bi = si[w];
                }
            }
            *(int32_t *)(d.data + r * d.nb[0]) = bi < 0 ? 0 : (int32_t)bi;
        }
    }
}

bool lc_argmax_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    return a && a->type == LOOM_TYPE_F32 && op->type == LOOM_TYPE_I32 && a->ne[2] == 1 && a->ne[3] == 1 &&
           op->ne[0] == a->ne[1] && a->ne[0] <= INT32_MAX && lc_strides_ok(a) && lc_strides_ok(op);
}

enum loom_status lc_argmax(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &a);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    const unsigned threads = a.ne[0] <= 1024 ? 32 : 1024;
    const unsigned blocks = (unsigned)(a.ne[1] < 1048576 ? a.ne[1] : 1048576);
    void * args[] = {&a, &d};
    lc_launch(be, (const void *)lc_argmax_kernel, dim3(blocks), dim3(threads), args);
    return LC_CHECK_LAUNCH("lc_argmax_kernel");
}
