/* cuda-norm.cuh -- RMS_NORM on the CUDA device. */
#ifndef LOOM_CUDA_NORM_CUH
#define LOOM_CUDA_NORM_CUH

#include "cuda-common.cuh"

/* y = v * scale and z = y * g for four elements (z NULL: y only). */
__device__ __forceinline__ void lc_rms_norm_put4(float4 * y, float4 * z, float4 v, float4 g, float scale) {
    const float4 t = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
    *y = t;
    if (z) *z = make_float4(t.x * g.x, t.y * g.y, t.z * g.z, t.w * g.w);
}

/* One row by the whole block (any blockDim.x, a multiple of 32): y = x / rms(x) over n F32
 * elements ('*_nb0' bytes apart) and, when z is not NULL, z = y * w. x is read twice, through L2
 * (it may have been written by other blocks of the same kernel); y and z may coincide with x
 * element for element. Dense 16-byte aligned rows go four elements per load, four loads of each
 * thread in flight at once (indices past the row clamped, so that no load waits behind a branch);
 * the code stays short, as a kernel's last block runs it once with a cold instruction cache.
 * 'shared' holds 32 floats. */
__device__ __forceinline__ void lc_rms_norm_row(const char * x, int64_t x_nb0, char * y, int64_t y_nb0, const char * w, int64_t w_nb0,
                                                char * z, int64_t z_nb0, int64_t n, float eps, float * shared) {
    const bool has_mul = z != NULL;
    const bool vec = n % 4 == 0 && x_nb0 == 4 && y_nb0 == 4 && (!has_mul || (w_nb0 == 4 && z_nb0 == 4)) &&
                     ((uintptr_t)x | (uintptr_t)y | (has_mul ? (uintptr_t)w | (uintptr_t)z : 0)) % 16 == 0;
    const int64_t nt = blockDim.x;
    float s = 0.0f;
    if (vec && n < ((int64_t)1 << 31)) { /* 32-bit indices: fewer instructions */
        const float4 *x4 = (const float4 *)x, *w4 = (const float4 *)w;
        const int nv = (int)(n / 4), nt4 = (int)nt;
        for (int i0 = threadIdx.x; i0 < nv; i0 += 4 * nt4) {
            float4 v[4];
#pragma unroll
            for (int k = 0; k < 4; k++) v[k] = __ldcg(x4 + (i0 + k * nt4 < nv ? i0 + k * nt4 : nv - 1));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                if (i0 + k * nt4 < nv) s += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
            }
        }
        s = lc_block_sum(s, shared);
        const float scale = rsqrtf(s / (float)n + eps);
        for (int i0 = threadIdx.x; i0 < nv; i0 += 4 * nt4) {
            float4 v[4], g[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int i = i0 + k * nt4 < nv ? i0 + k * nt4 : nv - 1;
                v[k] = __ldcg(x4 + i);
                g[k] = has_mul ? w4[i] : v[k];
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int i = i0 + k * nt4;
                if (i < nv) lc_rms_norm_put4((float4 *)y + i, has_mul ? (float4 *)z + i : NULL, v[k], g[k], scale);
            }
        }
        return;
    }
    for (int64_t i = threadIdx.x; i < n; i += nt) {
        const float v = __ldcg((const float *)(x + i * x_nb0));
        s += v * v;
    }
    s = lc_block_sum(s, shared);
    const float scale = rsqrtf(s / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += nt) {
        const float t = __ldcg((const float *)(x + i * x_nb0)) * scale;
        *(float *)(y + i * y_nb0) = t;
        if (has_mul) *(float *)(z + i * z_nb0) = t * *(const float *)(w + i * w_nb0);
    }
}

bool lc_rms_norm_supported(const struct loom_tensor * op);
/* Queues dst = x / sqrt(mean(x^2) + eps) per row over ne0 (F32, any strides). */
enum loom_status lc_rms_norm(struct lc_backend * be, struct loom_tensor * dst);
/* When 'next' is MUL(norm, w) with w an F32 row broadcast over the rows (w->ne[0] == ne0) and the
 * memory allows it, queues both in one kernel (norm's result is still written) and sets
 * '*fused'; otherwise queues nothing. */
enum loom_status lc_rms_norm_fused(struct lc_backend * be, struct loom_tensor * norm, struct loom_tensor * next, bool * fused);

#endif
