/* cuda-norm.cu -- RMS normalisation (Zhang & Sennrich 2019): one block per row. */
#include "cuda-norm.cuh"

__global__ void lc_rms_norm_kernel(struct lc_tensor a, struct lc_tensor d, float eps) {
    __shared__ float shared[32];
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char * x = a.data + lc_row_offset(a, r);
        char * y = d.data + lc_row_offset(d, r);
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            const float v = *(const float *)(x + i * a.nb[0]);
            s += v * v;
        }
        s = lc_block_sum(s, shared);
        const float scale = rsqrtf(s / (float)a.ne[0] + eps);
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            *(float *)(y + i * d.nb[0]) = *(const float *)(x + i * a.nb[0]) * scale;
        }
    }
}

bool lc_rms_norm_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    return a && a->type == LOOM_TYPE_F32 && op->type == LOOM_TYPE_F32 && loom_are_same_shape(a, op) && lc_strides_ok(a) &&
           lc_strides_ok(op);
}

enum loom_status lc_rms_norm(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &a);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    const int64_t nrows = lc_nrows(&d);
    const unsigned threads = d.ne[0] <= 256 ? 32 : d.ne[0] <= 2048 ? 256 : 1024;
    const unsigned blocks = (unsigned)(nrows < 1048576 ? nrows : 1048576);
    lc_rms_norm_kernel<<<blocks, threads, 0, be->stream>>>(a, d, loom_get_op_param_f32(dst, 0));
    return LC_CHECK_LAUNCH("lc_rms_norm_kernel");
}
