/* cuda-softmax.cuh -- SOFT_MAX (with optional mask and scale) on the CUDA device. */
#ifndef LOOM_CUDA_SOFTMAX_CUH
#define LOOM_CUDA_SOFTMAX_CUH

#include "cuda-common.cuh"

/* One row of SOFT_MAX: y = softmax(x * scale + m) over n F32 entries (m, of type m_type, may be
 * NULL: no mask). */
struct lc_sm_row {
    const char * x;
    int64_t x_nb0;                   /* bytes */
    const char * m;
    int64_t m_nb0;
    int m_type;
    char * y;
    int64_t y_nb0;
    int64_t n;
    float scale;
};

/* v[k] = x * scale + m at entries t + (base + k) * nt of row r, k < C (-inf past the row). Every
 * load is unconditional (indices past the row clamped to its last entry), so that all C of them
 * are in flight at once: a load under a branch waits for the one before it. */
template <int C>
__device__ __forceinline__ void lc_sm_load(float * v, const struct lc_sm_row & r, int64_t t, int64_t nt, int64_t base) {
    const int64_t n = r.n;
#pragma unroll
    for (int k = 0; k < C; k++) {
        const int64_t i = t + (base + k) * nt;
        v[k] = __ldcg((const float *)(r.x + (i < n ? i : n - 1) * r.x_nb0)) * r.scale;
    }
    if (r.m && r.m_type == LOOM_TYPE_F32) {
#pragma unroll
        for (int k = 0; k < C; k++) {
            const int64_t i = t + (base + k) * nt;
            v[k] += *(const float *)(r.m + (i < n ? i : n - 1) * r.m_nb0);
        }
    } else if (r.m) {
#pragma unroll
        for (int k = 0; k < C; k++) {
            const int64_t i = t + (base + k) * nt;
            v[k] += lc_load(r.m + (i < n ? i : n - 1) * r.m_nb0, r.m_type);
        }
    }
#pragma unroll
    for (int k = 0; k < C; k++) {
        if (t + (base + k) * nt >= n) v[k] = -INFINITY;
    }
}

/* Row 'r' by 'nt' threads (t = 0 .. nt - 1): one warp (WARP, nt 32: no block barrier) or the whole
 * block (nt = blockDim.x). Rows of up to CACHED * nt entries take one read and one write (the row
 * kept in registers); longer rows three passes, CACHED entries per thread at a time. The row
 * maximum is subtracted first; a row whose entries are all -inf gives zeros. x is read through L2
 * (other blocks of the kernel may have written it); y may coincide with x element for element.
 * 'shared' (32 floats) is unused with WARP. */
template <int CACHED, bool WARP>
__device__ __forceinline__ void lc_soft_max_row(const struct lc_sm_row & r, int t, int nt, float * shared) {
    const int64_t n = r.n;
    float v[CACHED];
    if (n <= (int64_t)CACHED * nt) {
        lc_sm_load<CACHED>(v, r, t, nt, 0);
        float mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < CACHED; k++) mx = fmaxf(mx, v[k]);
        mx = WARP ? lc_warp_max(mx) : lc_block_max(mx, shared);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < CACHED; k++) {
            v[k] = mx == -INFINITY || v[k] == -INFINITY ? 0.0f : __expf(v[k] - mx);
            sum += v[k];
        }
        sum = WARP ? lc_warp_sum(sum) : lc_block_sum(sum, shared);
        const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum;
#pragma unroll
        for (int k = 0; k < CACHED; k++) {
            const int64_t i = t + (int64_t)k * nt;
            if (i < n) *(float *)(r.y + i * r.y_nb0) = v[k] * inv;
        }
        return;
    }
    const int64_t steps = (n + nt - 1) / nt; /* entries per thread, rounded up */
    float mx = -INFINITY;
    for (int64_t b = 0; b < steps; b += CACHED) {
        lc_sm_load<CACHED>(v, r, t, nt, b);
#pragma unroll
        for (int k = 0; k < CACHED; k++) mx = fmaxf(mx, v[k]);
    }
    mx = WARP ? lc_warp_max(mx) : lc_block_max(mx, shared);
    float sum = 0.0f;
    for (int64_t b = 0; b < steps; b += CACHED) {
        lc_sm_load<CACHED>(v, r, t, nt, b);
#pragma unroll
        for (int k = 0; k < CACHED; k++) {
            const int64_t i = t + (b + k) * nt;
            const float e = mx == -INFINITY ? 0.0f : __expf(v[k] - mx);
            if (i < n) {
                *(float *)(r.y + i * r.y_nb0) = e;
                sum += e;
            }
        }
    }
    sum = WARP ? lc_warp_sum(sum) : lc_block_sum(sum, shared);
    const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum;
    /* each thread rescales exactly the entries it wrote, CACHED loads in flight */
    for (int64_t b = 0; b < steps; b += CACHED) {
#pragma unroll
        for (int k = 0; k < CACHED; k++) {
            const int64_t i = t + (b + k) * nt;
            v[k] = *(const float *)(r.y + (i < n ? i : n - 1) * r.y_nb0);
        }
#pragma unroll
        for (int k = 0; k < CACHED; k++) {
            const int64_t i = t + (b + k) * nt;
            if (i < n) *(float *)(r.y + i * r.y_nb0) = v[k] * inv;
        }
    }
}

/* lc_soft_max_row for the whole block over a dense, 16-byte aligned row of at most 4 * V4 *
 * blockDim.x entries (a multiple of 4; mask absent or dense F32), kept in registers, four entries
 * per load: short code, as a kernel's last block runs it once with a cold instruction cache.
 * False (nothing done) when the row does not qualify. */
template <int V4> __device__ __forceinline__ bool lc_soft_max_row_vec(const struct lc_sm_row & r, float * shared) {
    const int nt = blockDim.x, t = threadIdx.x;
    const bool mask_ok = !r.m || (r.m_type == LOOM_TYPE_F32 && r.m_nb0 == 4 && (uintptr_t)r.m % 16 == 0);
    if (r.n % 4 != 0 || r.n > (int64_t)4 * V4 * nt || r.x_nb0 != 4 || r.y_nb0 != 4 || !mask_ok || ((uintptr_t)r.x | (uintptr_t)r.y) % 16 != 0) {
        return false;
    }
    const int nv = (int)(r.n / 4);
    const float4 *x4 = (const float4 *)r.x, *m4 = (const float4 *)r.m;
    float4 v[V4];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < V4; k++) {
        const int i = t + k * nt, ic = i < nv ? i : nv - 1;
        float4 a = __ldcg(x4 + ic);
        a = make_float4(a.x * r.scale, a.y * r.scale, a.z * r.scale, a.w * r.scale);
        if (m4) {
            const float4 b = m4[ic];
            a = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        }
        if (i >= nv) a = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        v[k] = a;
        mx = fmaxf(mx, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    mx = lc_block_max(mx, shared);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < V4; k++) {
        float4 & a = v[k];
        a.x = mx == -INFINITY ? 0.0f : __expf(a.x - mx);
        a.y = mx == -INFINITY ? 0.0f : __expf(a.y - mx);
        a.z = mx == -INFINITY ? 0.0f : __expf(a.z - mx);
        a.w = mx == -INFINITY ? 0.0f : __expf(a.w - mx);
        sum += (a.x + a.y) + (a.z + a.w);
    }
    sum = lc_block_sum(sum, shared);
    const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum;
#pragma unroll
    for (int k = 0; k < V4; k++) {
        const int i = t + k * nt;
        if (i < nv) ((float4 *)r.y)[i] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
    }
    return true;
}

bool lc_soft_max_supported(const struct loom_tensor * op);
/* Queues dst = softmax(a * scale + mask) per row over ne0; the mask (F32/F16) row used for
 * (i1, i2, i3) is mask[:, i1, i2 % m2, i3 % m3]. A row whose values are all -inf gives zeros. */
enum loom_status lc_soft_max(struct lc_backend * be, struct loom_tensor * dst);

#endif
