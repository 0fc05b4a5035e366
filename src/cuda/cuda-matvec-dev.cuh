/* cuda-matvec-dev.cuh -- the device code every matrix-vector kernel family shares (the float
 * kernels of cuda-matvec.cu, the quantized ones of cuda-matvec-q.cu): the fused epilogues, the
 * rotation, the wait for the previous kernel and the pre-norm's scale, the last-block tails, the
 * weight-row pointers and the writing of a warp's results (docs/CUDA.md, "The fusions"). */
#ifndef LOOM_CUDA_MATVEC_DEV_CUH
#define LOOM_CUDA_MATVEC_DEV_CUH

#include "cuda-matvec.cuh"
#include "cuda-norm.cuh"
#include "cuda-softmax.cuh"

/* What a matrix-vector kernel computes besides the products (template argument X). */
enum { LC_MV_PLAIN = 0, LC_MV_TAIL, LC_MV_PRE };

/* The fused node's element (row, j, i2, i3), given the product's value 'v' there; returns the
 * value written (v for a copy; v when skip_e leaves the element unwritten). */
static __device__ __forceinline__ float lc_mv_epilogue(const struct lc_mv_args & p, int64_t row, int64_t j, int64_t i2, int64_t i3, float v) {
    const struct lc_mv_epi & e = p.epi;
    if (e.kind == LC_EPI_COPY) {
        lc_scatter_store(e.sc, row * p.d_nb0 + j * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3, v);
        return v;
    }
    if (p.skip_e) return v;
    float * out = (float *)(e.e + row * e.e_nb[0] + j * e.e_nb[1] + i2 * e.e_nb[2] + i3 * e.e_nb[3]);
    float r;
    if (e.kind == LC_EPI_SILU) {
        r = lc_silu(v);
    } else {
        const float x = *(const float *)(e.o + row * e.o_nb[0] + j * e.o_nb[1] + i2 * e.o_nb[2] + i3 * e.o_nb[3]);
        r = e.kind == LC_EPI_ADD ? v + x : v * x; /* both commute exactly: the operands' order does not matter */
    }
    *out = r;
    return r;
}


/* The product's rows 'row' and row + 1 (a rotation pair), column j: both written, rotated as
 * lc_rope_kernel rotates them (same arithmetic), the rotated pair written and copied on. */
static __device__ __forceinline__ void lc_mv_rope(const struct lc_mv_args & p, int64_t row, int64_t j, int64_t i2, int64_t i3, float x0, float x1) {
    const struct lc_mv_epi & e = p.epi;
    const int64_t o0 = row * p.d_nb0 + j * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    if (!p.skip_d) {
        *(float *)(p.d + o0) = x0;
        *(float *)(p.d + o0 + p.d_nb0) = x1;
    }
    const int64_t i0 = row % e.head_dim;
    float y0 = x0, y1 = x1;
    if (i0 < e.n_dims) {
        const int64_t q = i0 / 2;
        const double inv_freq = exp2(-(double)(2 * q) / (double)e.n_dims * e.log2_base);
        const int32_t ps = *(const int32_t *)(e.pos + j * e.pos_nb0);
        const double theta = (double)ps * e.freq_scale * inv_freq;
        const double twopi = 6.283185307179586476925;
        const float t = (float)(theta - twopi * rint(theta / twopi));
        float sn, cs;
        sincosf(t, &sn, &cs);
        y0 = x0 * cs - x1 * sn;
        y1 = x0 * sn + x1 * cs;
    }
    const int64_t r0 = row * e.e_nb[0] + j * e.e_nb[1] + i2 * e.e_nb[2] + i3 * e.e_nb[3];
    if (!p.skip_e) {
        *(float *)(e.e + r0) = y0;
        *(float *)(e.e + r0 + e.e_nb[0]) = y1;
    }
    if (e.has_sc) {
        lc_scatter_store(e.sc, o0, y0);
        lc_scatter_store(e.sc, o0 + p.d_nb0, y1);
    }
}


/* Asynchronous 16-byte copies global -> shared (cp.async, sm_80 on; bypassing L1), and their
 * groups: a thread waits for its own copies only, so no block barrier is needed. */
static __device__ __forceinline__ void lc_cp_async16(uint4 * smem, const uint4 * g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
#else
    *smem = *g;
#endif
}

static __device__ __forceinline__ void lc_cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void lc_cp_async_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* PRE: the partial sums a warp copies into its own LC_PRE_ASYNC_PARTS floats of (dynamic) shared
 * memory (lane l: float4 l, l + 32, ...), so that the scale needs no wait for memory at the end. */
#define LC_PRE_ASYNC_PARTS 512
#define LC_PRE_SMEM(warps) ((warps) * LC_PRE_ASYNC_PARTS * sizeof(float))

/* The dynamic shared memory a matrix-vector kernel of shape X takes, allowed for it on the
 * backend's device the first time ('*set': a bit per device id, one word per kernel): a kernel's
 * static and dynamic shared memory above 48 KiB need the attribute. */
static inline size_t lc_mv_smem(const struct lc_backend * be, const void * func, int x, int warps, unsigned * set) {
    if (x != LC_MV_PRE) return 0;
    const unsigned bit = be->dev->id < 32 ? 1u << be->dev->id : 0;
    if (!(*set & bit)) {
        (void)cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)LC_PRE_SMEM(warps));
        *set |= bit;
    }
    return LC_PRE_SMEM(warps);
}

/* PRE: 1/sqrt(mean(h^2) + eps) from the partial sums 'parts' (global or this warp's shared copy),
 * summed in one fixed order, so every warp gets the same scale. */
static __device__ __forceinline__ float lc_mv_pre_scale(const struct lc_mv_args & p, const float * parts) {
    float s = 0.0f;
    for (int i = threadIdx.x % 32; i < p.pre.nparts; i += 32) s += parts[i];
    return rsqrtf(lc_warp_sum(s) / (float)p.K + p.pre.eps);
}

/* The wait for the previous kernel (whose results this one reads). PRE: then the scale, or with
 * 'sm' (this warp's LC_PRE_ASYNC_PARTS floats of shared memory) the partial sums' copy into it,
 * started in a cp.async group of its own (scale = -1: read once this thread's copies are done). */
template <bool PRE>
static __device__ __forceinline__ void lc_mv_wait(const struct lc_mv_args & p, bool & waited, float & scale, float * sm = NULL) {
    lc_pdl_wait();
    waited = true;
    if (!PRE) return;
    if (!sm) {
        scale = lc_mv_pre_scale(p, p.pre.parts);
        return;
    }
    for (int i = threadIdx.x % 32; 4 * i < p.pre.nparts; i += 32) lc_cp_async16((uint4 *)sm + i, (const uint4 *)p.pre.parts + i);
    lc_cp_async_commit();
    scale = -1.0f;
}

/* After a block has written its rows of batch 'bt': count its arrival; the last block to arrive
 * computes the tail (comment of lc_mv_tail). Every thread of the block calls it; 'shared' is
 * LC_MV_TAIL_SHARED bytes of shared memory. */
#define LC_MV_TAIL_SHARED 256 /* bytes of shared memory the tail uses: 32 floats for reductions, a flag */
static __device__ __forceinline__ void lc_mv_tail_arrive(const struct lc_mv_args & p, int64_t bt, float * shared, float hsq) {
    const struct lc_mv_tail & t = p.tail;
    unsigned & last = *(unsigned *)(shared + 32);
    __syncthreads(); /* every warp of the block has written (and is done with the staging ring) */
    if (t.kind == LC_TAIL_RMS_PART) { /* the block's sum of squares, its warps in order */
        if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = hsq;
        __syncthreads();
        if (threadIdx.x == 0) {
            float s = 0.0f;
            for (int w = 0; w < (int)(blockDim.x / 32); w++) s += shared[w];
            t.parts[blockIdx.x] = s;
        }
        __syncthreads();
        return;
    }
    if (threadIdx.x == 0) {
        __threadfence(); /* the block's writes are visible before its arrival */
        unsigned * c = t.count + bt;
        const unsigned want = t.kind == LC_TAIL_SOFT_MAX ? gridDim.x : gridDim.x * gridDim.y;
        last = atomicAdd(c, 1u) == want - 1;
        if (last) *c = 0; /* every other block has arrived: ready for the next launch */
        __threadfence();
    }
    __syncthreads();
    const bool is_last = last;
    __syncthreads(); /* the flag is read before the ring is used again (a next batch) */
    if (!is_last) return;
    if (t.kind == LC_TAIL_RMS_NORM) {
        lc_rms_norm_row(t.x, t.x_nb[0], t.y, t.y_nb[0], t.w, t.w_nb0, t.z, t.z_nb0, p.M, t.f, shared);
        __syncthreads();
        return;
    }
    /* SOFT_MAX: the batch's row (one column), by the whole block */
    const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
    struct lc_sm_row row;
    row.x = t.x + i2 * t.x_nb[2] + i3 * t.x_nb[3];
    row.x_nb0 = t.x_nb[0];
    row.m = t.m ? t.m + (i2 % t.m_ne2) * t.m_nb[2] + (i3 % t.m_ne3) * t.m_nb[3] : NULL;
    row.m_nb0 = t.m_nb[0];
    row.m_type = t.m_type;
    row.y = t.y + i2 * t.y_nb[2] + i3 * t.y_nb[3];
    row.y_nb0 = t.y_nb[0];
    row.n = p.M;
    row.scale = t.f;
    if (!lc_soft_max_row_vec<2>(row, shared)) lc_soft_max_row<8, false>(row, threadIdx.x, blockDim.x, shared);
    __syncthreads();
}

/* Weight row pointers of the warp whose first row is 'row0' (SwiGLU: ROWS/2 rows of a, then the
 * same of a2), batch (i2, i3); rows past M are clamped (read again, never written). */
template <int ROWS>
static __device__ __forceinline__ void lc_mv_rows(const struct lc_mv_args & p, int64_t row0, int64_t i2, int64_t i3, const char ** a) {
    const bool dual = p.a2 != NULL;
    const int HALF = ROWS > 1 ? ROWS / 2 : 1;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int64_t want = dual ? row0 + r % HALF : row0 + r;
        const int64_t row = want < p.M ? want : p.M - 1;
        a[r] = (dual && r >= HALF ? p.a2 : p.a) + row * p.a_nb1 + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    }
}

/* Writes the warp's results from its (warp-summed, scaled) sums 'acc' -- rows row0 .. (SwiGLU:
 * ROWS/2 of each matrix), columns p.j0 .. p.j0 + NC - 1, batch (i2, i3) -- by lane 0: the product's own, then the epilogue's,
 * the rotation's or SwiGLU's nodes in the order the unfused nodes write. RMS_PART: also u = result
 * * weight row (and with 'u_sh', 32 floats of shared memory, u of row i at u_sh[i % 32]: the run
 * of a block of 32 rows); returns the sum of the rows' squared results (0 otherwise). */
template <int NC, int ROWS, bool TAIL>
static __device__ __forceinline__ float lc_mv_finish(const struct lc_mv_args & p, int64_t row0, int64_t i2, int64_t i3, int lane, float (*acc)[NC],
                                                     float * u_sh = NULL) {
    const bool dual = p.a2 != NULL;
    const int HALF = ROWS > 1 ? ROWS / 2 : 1;
    float hsq = 0.0f; /* RMS_PART: the sum of this warp's rows' squared results */
    if (lane == 0 && p.epi.kind == LC_EPI_ROPE) {
#pragma unroll
        for (int r = 0; r + 1 < ROWS; r += 2) {
            if (row0 + r >= p.M) break;
#pragma unroll
            for (int j = 0; j < NC; j++) lc_mv_rope(p, row0 + r, p.j0 + j, i2, i3, acc[r][j], acc[r + 1][j]);
        }
    } else if (lane == 0 && dual) {
        const struct lc_mv_glu & g = p.glu;
#pragma unroll
        for (int h = 0; h < HALF; h++) {
            const int64_t row = row0 + h;
            if (row >= p.M) break;
#pragma unroll
            for (int jl = 0; jl < NC; jl++) { /* in the order the unfused nodes write */
                const float gate = acc[h][jl], up = acc[h + HALF < ROWS ? h + HALF : h][jl];
                const int64_t j = p.j0 + jl;
                *(float *)(p.d + row * p.d_nb0 + j * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3) = gate;
                const float act = lc_silu(gate);
                *(float *)(g.act + row * g.act_nb[0] + j * g.act_nb[1] + i2 * g.act_nb[2] + i3 * g.act_nb[3]) = act;
                *(float *)(g.up + row * g.up_nb[0] + j * g.up_nb[1] + i2 * g.up_nb[2] + i3 * g.up_nb[3]) = up;
                *(float *)(g.out + row * g.out_nb[0] + j * g.out_nb[1] + i2 * g.out_nb[2] + i3 * g.out_nb[3]) = act * up;
            }
        }
    } else if (lane == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            if (row0 + r >= p.M) break;
            char * d = p.d + (row0 + r) * p.d_nb0 + i2 * p.d_nb2 + i3 * p.d_nb3;
#pragma unroll
            for (int j = 0; j < NC; j++) {
                if (!p.skip_d) *(float *)(d + (p.j0 + j) * p.d_nb1) = acc[r][j];
                float h = acc[r][j];
                if (p.epi.kind != LC_EPI_NONE) h = lc_mv_epilogue(p, row0 + r, p.j0 + j, i2, i3, acc[r][j]);
                if (TAIL && p.tail.kind == LC_TAIL_RMS_PART) {
                    hsq += h * h;
                    const float u = h * *(const float *)(p.tail.w + (row0 + r) * p.tail.w_nb0);
                    p.tail.u[row0 + r] = u;
                    if (u_sh) u_sh[(row0 + r) % 32] = u;
                }
            }
        }
    }
    return hsq;
}

/* PRE: block blockIdx.x's slice of the norm's result y = h * scale and the MUL's z = u * scale, by
 * its first warp ('u': the activations the products read). The first (at most 128) blocks of the
 * product (M rows, 'rows_per_block' each, or fewer blocks than that in a persistent grid) share the K elements: blocks of the first wave, whose
 * loads at the end overlap the later blocks' products. */
static __device__ __forceinline__ void lc_mv_pre_store(const struct lc_mv_args & p, const char * u, float scale, int64_t rows_per_block, int lane) {
    int64_t nblk = (p.M + rows_per_block - 1) / rows_per_block;
    if (nblk > gridDim.x) nblk = gridDim.x; /* a persistent grid: each block has rows */
    const int64_t nw = nblk < 128 ? nblk : 128, chunk = (p.K + nw - 1) / nw;
    if (blockIdx.x >= nw) return;
    const int64_t lo = (int64_t)blockIdx.x * chunk, hi = lo + chunk < p.K ? lo + chunk : p.K;
    for (int64_t k = lo + lane; k < hi; k += 32) {
        if (p.pre.y) ((float *)p.pre.y)[k] = ((const float *)p.pre.h)[k] * scale;
        if (p.pre.z) ((float *)p.pre.z)[k] = ((const float *)u)[k] * scale;
    }
}

#endif
