/* cuda-mulmat.cu -- matrix products. Few columns: a warp per row of 'a', 16-byte loads, F32
 * accumulation (memory-bound: each weight byte is read once). More columns: cuBLAS with F32
 * accumulation; F16/BF16 weights meet activations converted to their type (tensor cores). */
#include "cuda-mulmat.cuh"
#include "cuda-cpy.cuh"
#include "cuda-norm.cuh"
#include "cuda-softmax.cuh"

#include <string.h>

/* LOOM_CUDA_GEMM (an experiment, read when a backend is created): 0 cuBLAS writes the F32 result
 * (F32 accumulation); 1 an F16 result in scratch (F32 accumulation) converted to F32; 2 the same
 * with F16 accumulation (what llama.cpp does for F16 weights). */
static int g_gemm_mode;

void lc_mul_mat_set_gemm_mode(int mode) { g_gemm_mode = mode; }

/* LOOM_CUDA_MV (an experiment): the one-column kernel for fewer than 8192 rows: 0 one row per
 * warp and 4 loads in flight per thread, 1 the same with 8, 2 (the default: 10% faster token
 * generation than 0 on an H200, bench/cuda-notes.md) two rows per warp, 3 four rows per warp and 2
 * loads in flight. */
static int g_mv_mode = 2;

void lc_mul_mat_set_mv_mode(int mode) { g_mv_mode = mode; }

/* LOOM_CUDA_MV_STAGES: one-column products stream their weights straight into registers (0) or
 * through a per-thread ring of shared memory (cp.async), so more loads are in flight without
 * holding registers: 1 (the default) six stages of two 16-byte loads per row, three stages of
 * two for tall matrices (SwiGLU); 2 three stages of four (two for tall); 3 six stages of two
 * (one for tall). H200, 7B F16 tg128: 0 192-193, 2 196, 3 198-199 t/s (bench/cuda-notes.md). */
static int g_mv_stages = 1;

void lc_mul_mat_set_mv_stages(int on) { g_mv_stages = on; }

/* LOOM_CUDA_MV_PERSIST: one-column products staged through shared memory (no tail, K a multiple of
 * a stage) run as persistent kernels: 1 (the default) as many blocks as fit the device at once,
 * each warp streaming its row groups through one ring; 0 a block per row group; N > 1 at most N
 * blocks per product (so that tests give each warp many groups). H200, 7B F16 tg128: 215-217
 * against 208-211 t/s with 0 (bench/cuda-notes.md, session 7). */
static int g_mv_persist = 1;
#define LC_PERSIST_DEVS 16 /* devices whose occupancy each persistent kernel remembers */

void lc_mul_mat_set_mv_persist(int v) { g_mv_persist = v; }

/* ================================================================ matrix-vector kernels */

/* What the node after a matrix-vector product computes from its result, fused into the product's
 * kernel (lane 0 of each row's warp, right after writing the product's own element). */
enum { LC_EPI_NONE = 0, LC_EPI_ADD, LC_EPI_MUL, LC_EPI_SILU, LC_EPI_COPY, LC_EPI_ROPE };

struct lc_mv_epi {
    int kind;
    char * e;                        /* ADD/MUL/SILU: F32 result, the product's shape */
    int64_t e_nb[4];                 /* bytes */
    const char * o;                  /* ADD/MUL: the other F32 operand, the product's shape */
    int64_t o_nb[4];
    struct lc_scatter sc;            /* COPY; ROPE with has_sc: the copy of the rotated result */
    /* ROPE (normal mode) of the product viewed as [head_dim, n_head, N]: rows 2i and 2i + 1 are a
     * pair, both in one warp (ROWS even); e/e_nb is the rotated result, the product's layout */
    const char * pos;                /* I32 [N] */
    int64_t pos_nb0, head_dim;
    int n_dims, has_sc;
    double log2_base, freq_scale;
};

/* SwiGLU fused into one launch of the gate and up products (p.a2 set): each warp computes row i
 * of both, and writes gate, silu(gate), up and silu(gate) * up. */
struct lc_mv_glu {
    char * up;                       /* the up product's result (p.d holds the gate's) */
    int64_t up_nb[4];
    char * act;                      /* silu(gate) */
    int64_t act_nb[4];
    char * out;                      /* silu(gate) * up */
    int64_t out_nb[4];
};

/* RMS_PART (no arrival count, no last block): each row's result (the epilogue's) times the weight
 * row into u, and each block's sum of its rows' squares, for the pre-norm of the products after.
 * Otherwise a node computed from the product's result by the last block to finish (arrivals counted in
 * 'count', which that block resets): the RMS norm of the result (or of the epilogue's) with the
 * MUL by its weight (the residual -> the next layer's input; one column, one batch), computed
 * when the whole grid is done, so it may write anywhere the nodes one by one would; or the
 * softmax of each batch's row (KQ -> SOFT_MAX, one column), computed by the last block of that
 * batch while other batches may still run, so its result must lie apart from their operands. */
enum { LC_TAIL_NONE = 0, LC_TAIL_SOFT_MAX, LC_TAIL_RMS_NORM, LC_TAIL_RMS_PART };

struct lc_mv_tail {
    int kind;
    unsigned * count;                /* arrival counters: one per batch (SOFT_MAX) or one */
    const char * x;                  /* the rows' source: the product's result or the epilogue's */
    int64_t x_nb[4];                 /* bytes */
    const char * m;                  /* SOFT_MAX: the mask (NULL: none) */
    int64_t m_nb[4], m_ne2, m_ne3;
    int m_type;
    const char * w;                  /* RMS_NORM, RMS_PART: the MUL's weight row */
    float * u;                       /* RMS_PART: the result times w, [M] (a pre-norm's activations) */
    float * parts;                   /* RMS_PART: per block, the sum of the squared results of its rows */
    int64_t w_nb0;
    char * y;                        /* SOFT_MAX / RMS_NORM result */
    int64_t y_nb[4];
    char * z;                        /* RMS_NORM: the MUL's result */
    int64_t z_nb0;
    float f;                         /* SOFT_MAX scale, RMS_NORM epsilon */
};

/* The RMS norm of a layer's input h and the MUL by the norm's weight row g, finished inside the
 * products that read them ("pre-norm"): the kernel before them (the residual's product, tail
 * LC_TAIL_RMS_PART) wrote u = h * g and each of its blocks the sum of h^2 over its rows; the
 * products stream u as their activations (b = u: the same inner loop as without a norm), each warp
 * sums the partial sums after the wait for that kernel (in one fixed order, so every warp gets the
 * same scale) and scales its results by 1/sqrt(mean(h^2) + eps). No kernel and no last block computes
 * the norm before the products can start. The blocks of the launch's first product also write the
 * norm's result y = h * scale and the MUL's z = u * scale, a slice each. */
struct lc_mv_pre {
    const float * parts;             /* the sums of h^2, [nparts] */
    int nparts;                      /* at most LC_PRE_ASYNC_PARTS: copied into shared memory while the products run */
    const char * h;                  /* F32 [K], dense */
    char * y;                        /* the norm's result, F32 [K] dense; NULL: not written (a later result of the launch covers it) */
    char * z;                        /* the MUL's result; NULL: not written */
    float eps;
    int write;                       /* this product's blocks write y and z */
};

/* What a matrix-vector kernel computes besides the products (template argument X). */
enum { LC_MV_PLAIN = 0, LC_MV_TAIL, LC_MV_PRE };

struct lc_mv_args {
    const char * a;                  /* [K, M, ne2a, ne3a] rows dense */
    const char * a2;                 /* SwiGLU: the up matrix (a's shape and strides); NULL otherwise */
    const char * b;                  /* F32 [K, N, ne2, ne3] rows dense */
    char * d;                        /* F32 [M, N, ne2, ne3] */
    int64_t K, M, ne2, nbatch;
    int64_t a_nb1, a_nb2, a_nb3;     /* bytes */
    int64_t b_nb1, b_nb2, b_nb3;
    int64_t d_nb0, d_nb1, d_nb2, d_nb3;
    int64_t r2, r3;
    int vec;                         /* rows and columns 16-byte aligned: vector loads */
    int a_const;                     /* 'a' is a weight: its first loads may precede the wait for the previous kernel */
    /* in a several-product launch: the product's result (d) or the epilogue's (epi.e) is wholly
     * overwritten by a later product of the same launch, so it is not written at all */
    int skip_d, skip_e;
    struct lc_mv_epi epi;
    struct lc_mv_glu glu;
    struct lc_mv_tail tail;
    struct lc_mv_pre pre;            /* with X == LC_MV_PRE */
};

/* The fused node's element (row, j, i2, i3), given the product's value 'v' there; returns the
 * value written (v for a copy; v when skip_e leaves the element unwritten). */
__device__ __forceinline__ float lc_mv_epilogue(const struct lc_mv_args & p, int64_t row, int64_t j, int64_t i2, int64_t i3, float v) {
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


/* Eight (F16/BF16) or four (F32) elements of 'a' in one 16-byte vector, times the matching
 * elements of each column of 'b', added to acc. */
template <typename T> struct lc_mv_vec;

template <> struct lc_mv_vec<float> {
    static const int n = 4;
    static __device__ __forceinline__ void to_float(const uint4 & v, float * f) {
        f[0] = __uint_as_float(v.x);
        f[1] = __uint_as_float(v.y);
        f[2] = __uint_as_float(v.z);
        f[3] = __uint_as_float(v.w);
    }
    static __device__ __forceinline__ float one(const char * p) { return *(const float *)p; }
};

template <> struct lc_mv_vec<__half> {
    static const int n = 8;
    static __device__ __forceinline__ void to_float(const uint4 & v, float * f) {
        const __half2 * h = (const __half2 *)&v;
        for (int i = 0; i < 4; i++) {
            float2 t = __half22float2(h[i]);
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    static __device__ __forceinline__ float one(const char * p) { return __half2float(*(const __half *)p); }
};

template <> struct lc_mv_vec<__nv_bfloat16> {
    static const int n = 8;
    static __device__ __forceinline__ void to_float(const uint4 & v, float * f) {
        const __nv_bfloat162 * h = (const __nv_bfloat162 *)&v;
        for (int i = 0; i < 4; i++) {
            float2 t = __bfloat1622float2(h[i]);
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    static __device__ __forceinline__ float one(const char * p) { return __bfloat162float(*(const __nv_bfloat16 *)p); }
};

/* A 16-byte load of weights that bypasses L1 (they are read once), so that the activation
 * columns every warp re-reads stay in L1. */
__device__ __forceinline__ uint4 lc_ld_stream(const uint4 * p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

/* acc[r][j] += the ROWS weight vectors 'x' (each V elements at element k) times column j of b:
 * each activation value is loaded once and used for every row. */
template <typename T, int NC, int ROWS>
__device__ __forceinline__ void lc_mv_accum(const uint4 * x, const char * b, int64_t b_nb1, int64_t k, float (*acc)[NC]) {
    const int V = lc_mv_vec<T>::n;
    float f[ROWS][V];
#pragma unroll
    for (int r = 0; r < ROWS; r++) lc_mv_vec<T>::to_float(x[r], f[r]);
#pragma unroll
    for (int j = 0; j < NC; j++) {
        const float4 * bp = (const float4 *)(b + j * b_nb1 + k * 4);
#pragma unroll
        for (int q = 0; q < V / 4; q++) {
            const float4 bv = bp[q];
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                acc[r][j] += f[r][4 * q] * bv.x + f[r][4 * q + 1] * bv.y + f[r][4 * q + 2] * bv.z + f[r][4 * q + 3] * bv.w;
        }
    }
}

/* The product's rows 'row' and row + 1 (a rotation pair), column j: both written, rotated as
 * lc_rope_kernel rotates them (same arithmetic), the rotated pair written and copied on. */
__device__ __forceinline__ void lc_mv_rope(const struct lc_mv_args & p, int64_t row, int64_t j, int64_t i2, int64_t i3, float x0, float x1) {
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

/* Loads UNROLL 16-byte vectors of each of the ROWS weight rows, starting at vector 'v'. */
template <int ROWS, int UNROLL>
__device__ __forceinline__ void lc_mv_load(uint4 (*x)[ROWS], const char * const * a, int64_t v) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int r = 0; r < ROWS; r++) x[u][r] = lc_ld_stream((const uint4 *)a[r] + v + 32 * u);
}

/* Asynchronous 16-byte copies global -> shared (cp.async, sm_80 on; bypassing L1), and their
 * groups: a thread waits for its own copies only, so no block barrier is needed. */
__device__ __forceinline__ void lc_cp_async16(uint4 * smem, const uint4 * g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
#else
    *smem = *g;
#endif
}

__device__ __forceinline__ void lc_cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void lc_cp_async_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* Stage 'j' of this thread's weight vectors (UNROLL per row, from vector 'v') into ring slot 's'. */
template <int ROWS, int UNROLL, int NT>
__device__ __forceinline__ void lc_mv_issue(uint4 * my, int s, const char * const * a, int64_t v) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int r = 0; r < ROWS; r++) lc_cp_async16(my + ((s * UNROLL + u) * ROWS + r) * NT, (const uint4 *)a[r] + v + 32 * u);
    lc_cp_async_commit();
}

/* PRE: the partial sums a warp copies into its own LC_PRE_ASYNC_PARTS floats of (dynamic) shared
 * memory (lane l: float4 l, l + 32, ...), so that the scale needs no wait for memory at the end. */
#define LC_PRE_ASYNC_PARTS 512
#define LC_PRE_SMEM(warps) ((warps) * LC_PRE_ASYNC_PARTS * sizeof(float))

/* The dynamic shared memory a matrix-vector kernel of shape X takes, allowed for it on the
 * backend's device the first time ('*set': a bit per device id, one word per kernel): a kernel's
 * static and dynamic shared memory above 48 KiB need the attribute. */
static size_t lc_mv_smem(const struct lc_backend * be, const void * func, int x, int warps, unsigned * set) {
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
__device__ __forceinline__ float lc_mv_pre_scale(const struct lc_mv_args & p, const float * parts) {
    float s = 0.0f;
    for (int i = threadIdx.x % 32; i < p.pre.nparts; i += 32) s += parts[i];
    return rsqrtf(lc_warp_sum(s) / (float)p.K + p.pre.eps);
}

/* The wait for the previous kernel (whose results this one reads). PRE: then the scale, or with
 * 'sm' (this warp's LC_PRE_ASYNC_PARTS floats of shared memory) the partial sums' copy into it,
 * started in a cp.async group of its own (scale = -1: read once this thread's copies are done). */
template <bool PRE>
__device__ __forceinline__ void lc_mv_wait(const struct lc_mv_args & p, bool & waited, float & scale, float * sm = NULL) {
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

/* The full stages of a warp's rows (32 * UNROLL vectors per row each) through a ring of STAGES
 * slots in shared memory ('ring': STAGES * UNROLL * ROWS * 32 * WARPS vectors): STAGES - 1 stages in flight while one is summed, so each thread has
 * (STAGES - 1) * ROWS * UNROLL 16-byte loads outstanding without holding them in registers.
 * Constant weights start before the wait for the previous kernel. Returns the first vector
 * (of this lane) left for the caller. */
template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES, bool PRE>
__device__ __forceinline__ int64_t lc_mv_staged(const struct lc_mv_args & p, uint4 * ring, const char * const * a, const char * b,
                                                int64_t nvec, int lane, bool & waited, float (*acc)[NC], float & scale, float * pre_sm) {
    const int NT = 32 * WARPS, V = lc_mv_vec<T>::n;
    uint4 * my = ring + threadIdx.x;
    const int64_t nstage = nvec / (32 * UNROLL);
    if (!waited && !p.a_const) lc_mv_wait<PRE>(p, waited, scale, pre_sm);
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nstage) lc_mv_issue<ROWS, UNROLL, NT>(my, s, a, lane + 32 * UNROLL * (int64_t)s);
        else lc_cp_async_commit(); /* an empty group keeps the count */
    }
    if (!waited) lc_mv_wait<PRE>(p, waited, scale, pre_sm);
    for (int64_t j = 0; j < nstage; j++) {
        lc_cp_async_wait<STAGES - 2>(); /* stage j has landed */
        const int s = (int)(j % STAGES);
        uint4 x[UNROLL][ROWS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < ROWS; r++) x[u][r] = my[((s * UNROLL + u) * ROWS + r) * NT];
        const int64_t jn = j + STAGES - 1; /* into the slot stage j - 1 used */
        if (jn < nstage) lc_mv_issue<ROWS, UNROLL, NT>(my, (int)(jn % STAGES), a, lane + 32 * UNROLL * jn);
        else lc_cp_async_commit();
        const int64_t v = lane + 32 * UNROLL * j;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) lc_mv_accum<T, NC, ROWS>(x[u], b, p.b_nb1, (v + 32 * u) * V, acc);
    }
    lc_cp_async_wait<0>();
    return lane + 32 * UNROLL * nstage;
}

/* After a block has written its rows of batch 'bt': count its arrival; the last block to arrive
 * computes the tail (comment of lc_mv_tail). Every thread of the block calls it; 'shared' is
 * LC_MV_TAIL_SHARED bytes of shared memory. */
#define LC_MV_TAIL_SHARED 256 /* bytes of shared memory the tail uses: 32 floats for reductions, a flag */
#define LC_TAIL_ROWS 2          /* the kernel shape of products with a tail: rows per warp, */
#define LC_TAIL_WARPS 4         /* warps per block */
__device__ __forceinline__ void lc_mv_tail_arrive(const struct lc_mv_args & p, int64_t bt, float * shared, float hsq) {
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
__device__ __forceinline__ void lc_mv_rows(const struct lc_mv_args & p, int64_t row0, int64_t i2, int64_t i3, const char ** a) {
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
 * ROWS/2 of each matrix), batch (i2, i3) -- by lane 0: the product's own, then the epilogue's,
 * the rotation's or SwiGLU's nodes in the order the unfused nodes write. RMS_PART: also u = result
 * * weight row; returns the sum of the rows' squared results (0 otherwise). */
template <int NC, int ROWS, bool TAIL>
__device__ __forceinline__ float lc_mv_finish(const struct lc_mv_args & p, int64_t row0, int64_t i2, int64_t i3, int lane, float (*acc)[NC]) {
    const bool dual = p.a2 != NULL;
    const int HALF = ROWS > 1 ? ROWS / 2 : 1;
    float hsq = 0.0f; /* RMS_PART: the sum of this warp's rows' squared results */
    if (lane == 0 && p.epi.kind == LC_EPI_ROPE) {
#pragma unroll
        for (int r = 0; r + 1 < ROWS; r += 2) {
            if (row0 + r >= p.M) break;
#pragma unroll
            for (int j = 0; j < NC; j++) lc_mv_rope(p, row0 + r, j, i2, i3, acc[r][j], acc[r + 1][j]);
        }
    } else if (lane == 0 && dual) {
        const struct lc_mv_glu & g = p.glu;
#pragma unroll
        for (int h = 0; h < HALF; h++) {
            const int64_t row = row0 + h;
            if (row >= p.M) break;
#pragma unroll
            for (int j = 0; j < NC; j++) { /* in the order the unfused nodes write */
                const float gate = acc[h][j], up = acc[h + HALF < ROWS ? h + HALF : h][j];
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
                if (!p.skip_d) *(float *)(d + j * p.d_nb1) = acc[r][j];
                float h = acc[r][j];
                if (p.epi.kind != LC_EPI_NONE) h = lc_mv_epilogue(p, row0 + r, j, i2, i3, acc[r][j]);
                if (TAIL && p.tail.kind == LC_TAIL_RMS_PART) {
                    hsq += h * h;
                    p.tail.u[row0 + r] = h * *(const float *)(p.tail.w + (row0 + r) * p.tail.w_nb0);
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
__device__ __forceinline__ void lc_mv_pre_store(const struct lc_mv_args & p, const char * u, float scale, int64_t rows_per_block, int lane) {
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

/* Each warp computes ROWS consecutive rows of the result (WARPS warps per block; SwiGLU: ROWS/2
 * rows of each matrix); every thread keeps ROWS * UNROLL independent 16-byte weight loads in
 * flight. Rows past M are clamped (read again, never written). Launched programmatically (lc_launch), a kernel with constant weights
 * issues its first weight loads before waiting for the previous kernel, so the DRAM pipeline
 * fills while that one drains. */
template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES, int X = LC_MV_PLAIN>
__device__ __forceinline__ void lc_matvec_body(const struct lc_mv_args & p) {
    constexpr bool TAIL = X == LC_MV_TAIL, PRE = X == LC_MV_PRE;
    static_assert(!PRE || NC == 1, "the pre-norm reads one column");
    lc_pdl_trigger();
    const int lane = threadIdx.x % 32;
    const bool dual = p.a2 != NULL; /* ROWS even: rows row0 .. row0 + HALF - 1 of a, then the same of a2 */
    const int HALF = ROWS > 1 ? ROWS / 2 : 1;
    const int64_t row0 = ((int64_t)blockIdx.x * WARPS + threadIdx.x / 32) * (dual ? HALF : ROWS);
    if (row0 >= p.M && !TAIL) return; /* with a tail every warp reaches its barriers (rows clamped, never written) */
    const int V = lc_mv_vec<T>::n;
    /* the staging ring; after the products, the tail's scratch (LC_MV_TAIL_SHARED bytes) */
    const int RING_STAGES = STAGES > 1 ? STAGES : 2, RING = STAGES > 0 ? RING_STAGES * UNROLL * ROWS * 32 * WARPS : 0;
    __shared__ uint4 ring[RING > LC_MV_TAIL_SHARED / 16 ? RING : TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    extern __shared__ float4 lc_mv_dyn[]; /* PRE: each warp's copy of the partial sums (LC_PRE_SMEM bytes per block) */
    float * pre_sm = PRE && p.pre.nparts <= LC_PRE_ASYNC_PARTS ? (float *)(lc_mv_dyn + (threadIdx.x / 32) * (LC_PRE_ASYNC_PARTS / 4)) : NULL;
    bool waited = false;
    for (int64_t bt = blockIdx.y; bt < p.nbatch; bt += gridDim.y) {
        const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
        const char * a[ROWS];
        lc_mv_rows<ROWS>(p, row0, i2, i3, a);
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3;
        float acc[ROWS][NC];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = 0.0f;
        float scale = 1.0f; /* PRE: 1/rms(h), known once the previous kernel is done */
        int64_t k_tail = 0;
        if (p.vec) {
            const int64_t nvec = p.K / V;
            int64_t v = lane;
            if (STAGES > 0) v = lc_mv_staged<T, NC, ROWS, UNROLL, WARPS, RING_STAGES, PRE>(p, ring, a, b, nvec, lane, waited, acc, scale, pre_sm);
            if (!waited && v + 32 * (UNROLL - 1) < nvec) { /* the first step, around the wait */
                uint4 x[UNROLL][ROWS];
                if (p.a_const) lc_mv_load<ROWS, UNROLL>(x, a, v);
                lc_mv_wait<PRE>(p, waited, scale);
                if (!p.a_const) lc_mv_load<ROWS, UNROLL>(x, a, v);
#pragma unroll
                for (int u = 0; u < UNROLL; u++) lc_mv_accum<T, NC, ROWS>(x[u], b, p.b_nb1, (v + 32 * u) * V, acc);
                v += 32 * UNROLL;
            }
            if (!waited) lc_mv_wait<PRE>(p, waited, scale);
            for (; v + 32 * (UNROLL - 1) < nvec; v += 32 * UNROLL) {
                uint4 x[UNROLL][ROWS];
                lc_mv_load<ROWS, UNROLL>(x, a, v);
#pragma unroll
                for (int u = 0; u < UNROLL; u++) lc_mv_accum<T, NC, ROWS>(x[u], b, p.b_nb1, (v + 32 * u) * V, acc);
            }
            for (; v < nvec; v += 32) {
                uint4 x[ROWS];
#pragma unroll
                for (int r = 0; r < ROWS; r++) x[r] = lc_ld_stream((const uint4 *)a[r] + v);
                lc_mv_accum<T, NC, ROWS>(x, b, p.b_nb1, v * V, acc);
            }
            k_tail = nvec * V;
        }
        if (!waited) lc_mv_wait<PRE>(p, waited, scale);
        for (int64_t k = k_tail + lane; k < p.K; k += 32) {
#pragma unroll
            for (int j = 0; j < NC; j++) {
                const float bv = *(const float *)(b + j * p.b_nb1 + k * 4);
#pragma unroll
                for (int r = 0; r < ROWS; r++) acc[r][j] += lc_mv_vec<T>::one(a[r] + k * (int64_t)sizeof(T)) * bv;
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = lc_warp_sum(acc[r][j]);
        if (PRE) {
            if (scale < 0.0f) { /* every lane's copies are done (lc_mv_staged's last wait); the warp's barrier shows them to all */
                __syncwarp();
                scale = lc_mv_pre_scale(p, pre_sm);
            }
#pragma unroll
            for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
            if (p.pre.write && threadIdx.x < 32) lc_mv_pre_store(p, b, scale, (int64_t)WARPS * (dual ? HALF : ROWS), lane);
        }
        const float hsq = lc_mv_finish<NC, ROWS, TAIL>(p, row0, i2, i3, lane, acc);
        if (TAIL) lc_mv_tail_arrive(p, bt, (float *)ring, hsq);
    }
}

/* The persistent form of lc_matvec_body (LOOM_CUDA_MV_PERSIST; one column, one batch, no tail, K
 * a multiple of a stage, STAGES >= 2): a grid no larger than fits the device at once, each warp
 * computing the row groups warp, warp + (warps in the grid), ... one after the other through one
 * ring of stages that runs on across its groups: the loads of the next group are in flight while
 * a group's sums are reduced and written, and no block starts or drains its pipeline per group. */
/* Where a persistent warp's loads stand: the rows of its group 'group' (the warp's group number
 * g0 + group * stride) and the stage of them issued next. */
template <int ROWS> struct lc_mv_cursor {
    const char * a[ROWS];
    int64_t group, stage;
};

/* Issues the cursor's stage into ring slot 'slot' and moves the cursor on (to the next group's
 * rows after the last of 'nstage' stages). */
template <int ROWS, int UNROLL, int NT>
__device__ __forceinline__ void lc_mv_issue_next(const struct lc_mv_args & p, uint4 * my, int slot, struct lc_mv_cursor<ROWS> & c, int64_t nstage,
                                                 int64_t g0, int64_t stride, int64_t rpw, int lane) {
    lc_mv_issue<ROWS, UNROLL, NT>(my, slot, c.a, lane + 32 * UNROLL * c.stage);
    if (++c.stage == nstage) {
        c.stage = 0;
        lc_mv_rows<ROWS>(p, (g0 + ++c.group * stride) * rpw, 0, 0, c.a);
    }
}

template <typename T, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
__device__ __forceinline__ void lc_matvec_persist_body(const struct lc_mv_args & p) {
    constexpr bool PRE = X == LC_MV_PRE;
    static_assert(X != LC_MV_TAIL && STAGES >= 2, "no tail; a ring of at least two stages");
    lc_pdl_trigger();
    const int lane = threadIdx.x % 32, NT = 32 * WARPS;
    const int64_t rpw = p.a2 ? (ROWS > 1 ? ROWS / 2 : 1) : ROWS; /* rows of the result per group */
    const int64_t ngroups = (p.M + rpw - 1) / rpw, stride = (int64_t)gridDim.x * WARPS, g0 = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int64_t mine = g0 < ngroups ? (ngroups - 1 - g0) / stride + 1 : 0;
    const int64_t nstage = p.K / lc_mv_vec<T>::n / (32 * UNROLL), total = mine * nstage;
    __shared__ uint4 ring[STAGES * UNROLL * ROWS * NT];
    extern __shared__ float4 lc_mv_dyn[];
    float * pre_sm = PRE && p.pre.nparts <= LC_PRE_ASYNC_PARTS ? (float *)(lc_mv_dyn + (threadIdx.x / 32) * (LC_PRE_ASYNC_PARTS / 4)) : NULL;
    uint4 * my = ring + threadIdx.x;
    struct lc_mv_cursor<ROWS> next; /* the stages are issued in order */
    next.group = next.stage = 0;
    lc_mv_rows<ROWS>(p, g0 * rpw, 0, 0, next.a);
    bool waited = false;
    float scale = 1.0f;
    if (!p.a_const) lc_mv_wait<PRE>(p, waited, scale, pre_sm);
    int64_t issued = 0;
    for (; issued < STAGES - 1; issued++) {
        if (issued >= total) {
            lc_cp_async_commit(); /* an empty group keeps the count */
            continue;
        }
        lc_mv_issue_next<ROWS, UNROLL, NT>(p, my, (int)issued, next, nstage, g0, stride, rpw, lane);
    }
    if (!waited) lc_mv_wait<PRE>(p, waited, scale, pre_sm);
    float acc[ROWS][1];
#pragma unroll
    for (int r = 0; r < ROWS; r++) acc[r][0] = 0.0f;
    int64_t g = 0, s = 0; /* the group and stage being summed */
    for (int64_t i = 0; i < total; i++) {
        lc_cp_async_wait<STAGES - 2>(); /* stage i has landed */
        const int slot = (int)(i % STAGES);
        uint4 x[UNROLL][ROWS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < ROWS; r++) x[u][r] = my[((slot * UNROLL + u) * ROWS + r) * NT];
        if (issued < total) lc_mv_issue_next<ROWS, UNROLL, NT>(p, my, (int)(issued % STAGES), next, nstage, g0, stride, rpw, lane); /* into the slot stage i - 1 used */
        else lc_cp_async_commit();
        issued++;
        const int64_t v = lane + 32 * UNROLL * s;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) lc_mv_accum<T, 1, ROWS>(x[u], p.b, p.b_nb1, (v + 32 * u) * lc_mv_vec<T>::n, acc);
        if (++s < nstage) continue;
        /* the group's sums are complete */
#pragma unroll
        for (int r = 0; r < ROWS; r++) acc[r][0] = lc_warp_sum(acc[r][0]);
        if (PRE) {
            if (scale < 0.0f) { /* the partial sums' copy (committed before stage STAGES - 1) has landed once STAGES - 1 stages were waited for */
                if (nstage < STAGES - 1) lc_cp_async_wait<0>();
                __syncwarp();
                scale = lc_mv_pre_scale(p, pre_sm);
            }
#pragma unroll
            for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
        }
        (void)lc_mv_finish<1, ROWS, false>(p, (g0 + g * stride) * rpw, 0, 0, lane, acc);
#pragma unroll
        for (int r = 0; r < ROWS; r++) acc[r][0] = 0.0f;
        s = 0;
        g++;
    }
    lc_cp_async_wait<0>();
    if (PRE && p.pre.write && threadIdx.x < 32 && mine > 0) lc_mv_pre_store(p, p.b, scale, (int64_t)WARPS * rpw, lane);
}

template <typename T, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
__global__ void __launch_bounds__(32 * WARPS) lc_matvec_persist_kernel(const __grid_constant__ struct lc_mv_args p) {
    lc_matvec_persist_body<T, ROWS, UNROLL, WARPS, STAGES, X>(p);
}

/* With a tail, at most 128 registers (four blocks per SM): the tail's loads, all in flight at
 * once, would otherwise take more. */
template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
__global__ void __launch_bounds__(32 * WARPS, X == LC_MV_TAIL ? 4 : 1) lc_matvec_kernel(const __grid_constant__ struct lc_mv_args p) {
    lc_matvec_body<T, NC, ROWS, UNROLL, WARPS, STAGES, X>(p);
}

/* Several one-column products of the same activations, one per blockIdx.z (each with its own
 * weights, result and epilogue), in one launch: a layer's q, k and v products, which one by one
 * are too short to keep the memory system busy from start to end. */
#define LC_MV_MAX_SEG 3
struct lc_mv_multi {
    struct lc_mv_args s[LC_MV_MAX_SEG];
};

template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
__global__ void __launch_bounds__(32 * WARPS) lc_matvec_multi_kernel(const __grid_constant__ struct lc_mv_multi m) {
    lc_matvec_body<T, NC, ROWS, UNROLL, WARPS, STAGES, X>(m.s[blockIdx.z]);
}

template <typename T, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
__global__ void __launch_bounds__(32 * WARPS) lc_matvec_persist_multi_kernel(const __grid_constant__ struct lc_mv_multi m) {
    lc_matvec_persist_body<T, ROWS, UNROLL, WARPS, STAGES, X>(m.s[blockIdx.z]);
}

/* Kernel shapes that have a persistent form: one column, a ring of at least two stages, no tail. */
#define LC_PERSIST_SHAPE(NC, STAGES, X) ((NC) == 1 && (STAGES) >= 2 && (X) != LC_MV_TAIL)

/* True when the persistent kernel (lc_matvec_persist_body) may compute product 'p' with stages of
 * UNROLL vectors (its kernel shape passing LC_PERSIST_SHAPE). */
template <typename T, int UNROLL>
static bool lc_persist_ok(const struct lc_mv_args & p) {
    const int V = lc_mv_vec<T>::n;
    return g_mv_persist && p.tail.kind == LC_TAIL_NONE && p.nbatch == 1 && p.vec && p.K % V == 0 && (p.K / V) % (32 * UNROLL) == 0;
}

/* Blocks per product of a persistent launch of 'f' (WARPS warps, 'smem' dynamic bytes) for
 * 'groups' row groups in each of 'nseg' products: no more than fit the device at once (its blocks
 * per multiprocessor are asked once per kernel and device, '*occ'), nor than LOOM_CUDA_MV_PERSIST
 * when that is above 1, and spread so that every warp but the last has the same number of groups. */
static unsigned lc_persist_blocks(const struct lc_backend * be, const void * f, int warps, size_t smem, int64_t groups, int nseg, int * occ) {
    const int id = be->dev->id >= 0 && be->dev->id < LC_PERSIST_DEVS ? be->dev->id : 0;
    if (occ[id] <= 0 && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[id], f, 32 * warps, smem) != cudaSuccess || occ[id] <= 0)) {
        (void)cudaGetLastError();
        occ[id] = 1;
    }
    int64_t slots = (int64_t)occ[id] * be->dev->sm_count / nseg;
    if (g_mv_persist > 1 && slots > g_mv_persist) slots = g_mv_persist;
    if (slots < 1) slots = 1;
    const int64_t per_warp = (groups + slots * warps - 1) / (slots * warps);
    return (unsigned)((groups + per_warp * warps - 1) / (per_warp * warps));
}

/* What a persistent kernel remembers per device (one static per kernel instantiation): whether its
 * shared-memory attribute is set (a bit per device) and its blocks per multiprocessor. */
struct lc_persist_state {
    unsigned smem_set;
    int occ[LC_PERSIST_DEVS];
};

/* Launches persistent kernel 'f' of shape X (WARPS warps) over 'nseg' products (blockIdx.z) of at
 * most 'groups' row groups each, on the grid lc_persist_blocks chooses. */
static void lc_persist_launch(const struct lc_backend * be, const void * f, int x, int warps, int64_t groups, int nseg, void ** args,
                              struct lc_persist_state * ps) {
    const size_t smem = lc_mv_smem(be, f, x, warps, &ps->smem_set);
    const unsigned blocks = lc_persist_blocks(be, f, warps, smem, groups, nseg, ps->occ);
    lc_launch(be, f, dim3(blocks, 1, (unsigned)nseg), dim3(32 * warps, 1, 1), args, smem);
}

template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES, int X>
static void lc_matvec_launch_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    int64_t blocks = 0, groups = 0;
    bool persist = LC_PERSIST_SHAPE(NC, STAGES, X);
    for (int i = 0; i < n; i++) {
        const int64_t b = (m.s[i].M + ROWS * WARPS - 1) / (ROWS * WARPS), g = (m.s[i].M + ROWS - 1) / ROWS;
        blocks = b > blocks ? b : blocks;
        groups = g > groups ? g : groups;
        persist = persist && lc_persist_ok<T, UNROLL>(m.s[i]);
    }
    void * args[] = {(void *)&m};
    if constexpr (LC_PERSIST_SHAPE(NC, STAGES, X)) {
        if (persist) {
            static struct lc_persist_state ps;
            lc_persist_launch(be, (const void *)lc_matvec_persist_multi_kernel<T, ROWS, UNROLL, WARPS, STAGES, X>, X, WARPS, groups, n, args, &ps);
            return;
        }
    }
    const void * f = (const void *)lc_matvec_multi_kernel<T, NC, ROWS, UNROLL, WARPS, STAGES, X>;
    static unsigned smem_set; /* devices this kernel's shared-memory attribute is set for */
    lc_launch(be, f, dim3((unsigned)blocks, 1, (unsigned)n), dim3(32 * WARPS, 1, 1), args, lc_mv_smem(be, f, X, WARPS, &smem_set));
}

/* lc_matvec_launch_multi for the weights' element type 'type' (F32, F16 or BF16), one column. */
template <int ROWS, int UNROLL, int WARPS, int STAGES, int X = LC_MV_PLAIN>
static void lc_matvec_launch_multi_typed(const struct lc_backend * be, const struct lc_mv_multi & m, int n, int type) {
    if (type == LOOM_TYPE_F32) lc_matvec_launch_multi<float, 1, ROWS, UNROLL, WARPS, STAGES, X>(be, m, n);
    else if (type == LOOM_TYPE_F16) lc_matvec_launch_multi<__half, 1, ROWS, UNROLL, WARPS, STAGES, X>(be, m, n);
    else lc_matvec_launch_multi<__nv_bfloat16, 1, ROWS, UNROLL, WARPS, STAGES, X>(be, m, n);
}

template <typename T, int NC, int ROWS, int UNROLL, int WARPS, int STAGES = 0, int X = LC_MV_PLAIN>
static void lc_matvec_launch(const struct lc_backend * be, const struct lc_mv_args & p) {
    const int64_t rows_per_group = p.a2 ? ROWS / 2 : ROWS, rows_per_block = rows_per_group * WARPS;
    dim3 grid((unsigned)((p.M + rows_per_block - 1) / rows_per_block), (unsigned)(p.nbatch < 65535 ? p.nbatch : 65535), 1);
    void * args[] = {(void *)&p};
    if constexpr (LC_PERSIST_SHAPE(NC, STAGES, X)) {
        if (lc_persist_ok<T, UNROLL>(p)) { /* one batch: grid.y is 1 */
            static struct lc_persist_state ps;
            lc_persist_launch(be, (const void *)lc_matvec_persist_kernel<T, ROWS, UNROLL, WARPS, STAGES, X>, X, WARPS,
                              (p.M + rows_per_group - 1) / rows_per_group, 1, args, &ps);
            return;
        }
    }
    const void * f = (const void *)lc_matvec_kernel<T, NC, ROWS, UNROLL, WARPS, STAGES, X>;
    static unsigned smem_set; /* devices this kernel's shared-memory attribute is set for */
    lc_launch(be, f, grid, dim3(32 * WARPS, 1, 1), args, lc_mv_smem(be, f, X, WARPS, &smem_set));
}

/* One column, two rows per warp (four for tall matrices): straight into registers or staged
 * through shared memory in one of the measured ring shapes (LOOM_CUDA_MV_STAGES). */
template <typename T>
static void lc_matvec_one_col(const struct lc_backend * be, const struct lc_mv_args & p) {
    const bool tall = p.M >= 8192;
    if (p.tail.kind != LC_TAIL_NONE) { /* one shape: the tall one's registers would not leave room for the tail's */
        lc_matvec_launch<T, 1, LC_TAIL_ROWS, 2, LC_TAIL_WARPS, 6, LC_MV_TAIL>(be, p);
        return;
    }
    if (p.pre.parts) { /* the default staging's shapes (pre_norm_pattern requires it) */
        if (tall) lc_matvec_launch<T, 1, 4, 2, 4, 3, LC_MV_PRE>(be, p);
        else lc_matvec_launch<T, 1, 2, 2, 4, 6, LC_MV_PRE>(be, p);
        return;
    }
    switch (g_mv_stages) {
    case 0:
        if (tall) lc_matvec_launch<T, 1, 4, 2, 4>(be, p);
        else lc_matvec_launch<T, 1, 2, 4, 4>(be, p);
        break;
    case 2:
        if (tall) lc_matvec_launch<T, 1, 4, 2, 4, 3>(be, p);
        else lc_matvec_launch<T, 1, 2, 4, 4, 3>(be, p);
        break;
    case 3:
        if (tall) lc_matvec_launch<T, 1, 4, 1, 4, 6>(be, p);
        else lc_matvec_launch<T, 1, 2, 2, 4, 6>(be, p);
        break;
    default:
        if (tall) lc_matvec_launch<T, 1, 4, 2, 4, 3>(be, p);
        else lc_matvec_launch<T, 1, 2, 2, 4, 6>(be, p);
        break;
    }
}

/* Kernel shapes measured on an H200 (bench/cuda-notes.md): one row per warp for one or two
 * columns (4 rows per warp for tall matrices, which then fit one wave), two rows per warp for
 * three or four columns (each activation load serves both rows). */
template <typename T>
static void lc_matvec_dispatch(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    if (p.a2 || p.epi.kind == LC_EPI_ROPE) { /* SwiGLU (gate and up) or rotation pairs: two rows per warp */
        switch (ncols) {
        case 1: lc_matvec_one_col<T>(be, p); break;
        case 2: lc_matvec_launch<T, 2, 2, 4, 4>(be, p); break;
        case 3: lc_matvec_launch<T, 3, 2, 4, 4>(be, p); break;
        default: lc_matvec_launch<T, 4, 2, 4, 4>(be, p); break;
        }
        return;
    }
    switch (ncols) {
    case 1:
        if (g_mv_stages || p.M >= 8192 || p.tail.kind != LC_TAIL_NONE || p.pre.parts) lc_matvec_one_col<T>(be, p);
        else if (g_mv_mode == 1) lc_matvec_launch<T, 1, 1, 8, 4>(be, p);
        else if (g_mv_mode == 2) lc_matvec_launch<T, 1, 2, 4, 4>(be, p);
        else if (g_mv_mode == 3) lc_matvec_launch<T, 1, 4, 2, 4>(be, p);
        else lc_matvec_launch<T, 1, 1, 4, 4>(be, p);
        break;
    case 2: lc_matvec_launch<T, 2, 1, 4, 4>(be, p); break;
    case 3: lc_matvec_launch<T, 3, 2, 4, 4>(be, p); break;
    default: lc_matvec_launch<T, 4, 2, 4, 4>(be, p); break;
    }
}

static bool rows_dense(const struct loom_tensor * t) { return t->ne[0] == 1 || t->nb[0] == loom_type_size(t->type); }

static bool aligned16(int64_t v) { return v % 16 == 0; }

/* The kernel arguments of one product a x b -> d with its epilogue (and SwiGLU's second matrix). */
static void lc_matvec_args(const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, const struct lc_mv_epi * epi,
                           bool a_const, const char * a2, const struct lc_mv_glu * glu, struct lc_mv_args & p) {
    p.epi = *epi;
    memset(&p.tail, 0, sizeof p.tail);
    memset(&p.pre, 0, sizeof p.pre);
    p.skip_d = p.skip_e = 0;
    p.a2 = a2;
    if (glu) p.glu = *glu;
    else memset(&p.glu, 0, sizeof p.glu);
    p.a_const = a_const;
    p.a = a->data;
    p.b = b->data;
    p.d = d->data;
    p.K = a->ne[0];
    p.M = a->ne[1];
    p.ne2 = b->ne[2];
    p.nbatch = b->ne[2] * b->ne[3];
    p.a_nb1 = a->nb[1];
    p.a_nb2 = a->nb[2];
    p.a_nb3 = a->nb[3];
    p.b_nb1 = b->nb[1];
    p.b_nb2 = b->nb[2];
    p.b_nb3 = b->nb[3];
    p.d_nb0 = d->nb[0];
    p.d_nb1 = d->nb[1];
    p.d_nb2 = d->nb[2];
    p.d_nb3 = d->nb[3];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    bool vec = aligned16((int64_t)(uintptr_t)a->data) && aligned16((int64_t)(uintptr_t)b->data);
    for (int i = 1; i < 4; i++) {
        vec = vec && (a->ne[i] == 1 || aligned16(a->nb[i])) && (b->ne[i] == 1 || aligned16(b->nb[i]));
    }
    if (a2) vec = vec && aligned16((int64_t)(uintptr_t)a2);
    p.vec = vec;
}

/* A pre-norm (lc_mv_pre) as planned for a launch: the norm's source h and weight row g (read),
 * the norm's and the MUL's results y and z (written). */
struct lc_pre_plan {
    const struct loom_tensor * mul;  /* the MUL node (the products' activations) */
    struct lc_tensor h, g, y, z;
    const float * u;                 /* the activations the products read: h * g, dense */
    struct lc_mv_pre pre;
};

/* Makes product 'p' (planned with the MUL's result as its activations) read u instead; 'first':
 * its blocks write y and z. */
static void pre_norm_apply(const struct lc_pre_plan * pl, bool first, struct lc_mv_args & p) {
    p.pre = pl->pre;
    p.pre.write = first;
    p.b = (const char *)pl->u;
    p.b_nb1 = p.b_nb2 = p.b_nb3 = pl->h.ne[0] * (int64_t)sizeof(float);
    p.vec = p.vec && aligned16((int64_t)(uintptr_t)pl->u);
}

static enum loom_status lc_matvec(struct lc_backend * be, const struct lc_tensor * a, const struct lc_tensor * b,
                                  const struct lc_tensor * d, const struct lc_mv_epi * epi, bool a_const, const char * a2,
                                  const struct lc_mv_glu * glu, const struct lc_mv_tail * tail = NULL, const struct lc_pre_plan * pre = NULL) {
    struct lc_mv_args p;
    lc_matvec_args(a, b, d, epi, a_const, a2, glu, p);
    if (tail) p.tail = *tail;
    if (pre) pre_norm_apply(pre, true, p);
    const int ncols = (int)b->ne[1];
    if (a->type == LOOM_TYPE_F32) lc_matvec_dispatch<float>(be, p, ncols);
    else if (a->type == LOOM_TYPE_F16) lc_matvec_dispatch<__half>(be, p, ncols);
    else lc_matvec_dispatch<__nv_bfloat16>(be, p, ncols);
    return LC_CHECK_LAUNCH("lc_matvec_kernel");
}

/* ================================================================ cuBLAS path */

/* How one product is laid out for cuBLAS; computed from metadata alone, so the scratch pass
 * and the compute agree. */
struct lc_mm_plan {
    bool matvec;
    bool copy_a;        /* 'a' compacted into scratch (same type) */
    bool conv_b;        /* 'b' compacted/converted into scratch, of type tb */
    int tb;
    int64_t lda, sa2, sa3;   /* elements */
    int64_t ldb, sb2, sb3;
    bool half_c;        /* LOOM_CUDA_GEMM=1/2: an F16 result in scratch, converted into dst */
    size_t off_b, off_ptr, off_c, total; /* scratch layout, bytes */
};

static size_t pad256(size_t x) { return (x + 255) & ~(size_t)255; }


static bool blas_ok(const struct loom_tensor * t, int64_t k) {
    const size_t es = loom_type_size(t->type);
    if (!rows_dense(t)) return false;
    for (int i = 1; i < 4; i++) {
        if (t->nb[i] % es != 0) return false;
    }
    const int64_t ld = (int64_t)(t->nb[1] / es);
    return ld >= k && ld <= INT32_MAX;
}

static struct lc_mm_plan lc_mm_plan_for(const struct loom_tensor * dst) {
    const struct loom_tensor *a = dst->src[0], *b = dst->src[1];
    struct lc_mm_plan p;
    memset(&p, 0, sizeof p);
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    p.matvec = N <= LC_MATVEC_MAX_COLS && rows_dense(a) && rows_dense(b);
    if (p.matvec) return p;
    const size_t es_a = loom_type_size(a->type);
    p.copy_a = !blas_ok(a, K);
    if (p.copy_a) {
        p.lda = K;
        p.sa2 = K * M;
        p.sa3 = K * M * a->ne[2];
    } else {
        p.lda = (int64_t)(a->nb[1] / es_a);
        p.sa2 = (int64_t)(a->nb[2] / es_a);
        p.sa3 = (int64_t)(a->nb[3] / es_a);
    }
    p.tb = a->type;
    p.conv_b = a->type != LOOM_TYPE_F32 || !blas_ok(b, K);
    if (p.conv_b) {
        p.ldb = K;
        p.sb2 = K * N;
        p.sb3 = K * N * b->ne[2];
    } else {
        p.ldb = (int64_t)(b->nb[1] / 4);
        p.sb2 = (int64_t)(b->nb[2] / 4);
        p.sb3 = (int64_t)(b->nb[3] / 4);
    }
    size_t size_a = p.copy_a ? pad256((size_t)loom_nelements(a) * es_a) : 0;
    size_t size_b = p.conv_b ? pad256((size_t)loom_nelements(b) * loom_type_size((enum loom_type)p.tb)) : 0;
    size_t size_ptr = pad256(3 * sizeof(void *) * (size_t)(b->ne[2] * b->ne[3]));
    p.half_c = g_gemm_mode != 0 && a->type == LOOM_TYPE_F16 && b->ne[2] * b->ne[3] == 1;
    size_t size_c = p.half_c ? pad256((size_t)(M * N) * 2) : 0;
    p.off_b = size_a;
    p.off_ptr = size_a + size_b;
    p.off_c = size_a + size_b + size_ptr;
    p.total = size_a + size_b + size_ptr + size_c;
    return p;
}

size_t lc_mul_mat_scratch(const struct loom_tensor * op) {
    struct lc_mm_plan p = lc_mm_plan_for(op);
    return p.matvec ? 0 : p.total;
}

/* Fills the pointer arrays of a batched product: batch t = (i2, i3) reads a at (i2/r2, i3/r3). */
__global__ void lc_mm_ptrs_kernel(const void ** pa, const void ** pb, void ** pc, const char * a, const char * b, char * c,
                                  int64_t ne2, int64_t nbatch, int64_t r2, int64_t r3, int64_t sa2, int64_t sa3, int64_t sb2,
                                  int64_t sb3, int64_t sc2, int64_t sc3) {
    lc_pdl_trigger();
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nbatch) return;
    const int64_t i2 = t % ne2, i3 = t / ne2;
    pa[t] = a + (i2 / r2) * sa2 + (i3 / r3) * sa3;
    pb[t] = b + i2 * sb2 + i3 * sb3;
    pc[t] = c + i2 * sc2 + i3 * sc3;
}

static cudaDataType_t lc_cuda_type(int type) {
    return type == LOOM_TYPE_F32 ? CUDA_R_32F : type == LOOM_TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static enum loom_status lc_gemm(struct lc_backend * be, const struct lc_mm_plan * p, const struct lc_tensor * a,
                                const struct lc_tensor * b, const struct lc_tensor * d, const struct loom_tensor * b_node) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t ne2 = b->ne[2], ne3 = b->ne[3], r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];
    const char * A = a->data;
    const char * B = b->data;
    if (p->copy_a) {
        be->conv.src = NULL; /* overwritten */
        struct lc_tensor ac = lc_tensor_contiguous(be->scratch, a->type, a->ne);
        enum loom_status st = lc_copy(be, a, &ac);
        if (st != LOOM_OK) return st;
        A = ac.data;
    }
    if (p->conv_b) {
        struct lc_tensor bc = lc_tensor_contiguous(be->scratch + p->off_b, p->tb, b->ne);
        const struct lc_conv_cache * c = &be->conv;
        /* products of one activation (Q, K and V; gate and up) convert it once */
        if (!(c->src == b_node && c->data == b->data && c->type == p->tb && c->off == p->off_b)) {
            be->conv.src = NULL;
            enum loom_status st = lc_copy(be, b, &bc);
            if (st != LOOM_OK) return st;
            be->conv.src = b_node;
            be->conv.data = b->data;
            lc_extent(b, &be->conv.lo, &be->conv.hi);
            be->conv.type = p->tb;
            be->conv.off = p->off_b;
        }
        B = bc.data;
    }
    const cudaDataType_t ta = lc_cuda_type(a->type), tb = lc_cuda_type(p->tb);
    const int64_t es_a = (int64_t)loom_type_size((enum loom_type)a->type), es_b = (int64_t)loom_type_size((enum loom_type)p->tb);
    const int64_t ldc = d->nb[1] / 4, sc2 = d->nb[2] / 4, sc3 = d->nb[3] / 4;
    const float alpha = 1.0f, beta = 0.0f;
    const int64_t nbatch = ne2 * ne3;
    if (nbatch == 1 && p->half_c) {
        char * C = be->scratch + p->off_c;
        enum loom_status st;
        if (g_gemm_mode == 2) {
            const __half ha = __float2half(1.0f), hb = __float2half(0.0f);
            st = LC_CHECK_CUBLAS(cublasGemmEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &ha, A, ta, (int)p->lda, B, tb,
                                              (int)p->ldb, &hb, C, CUDA_R_16F, (int)M, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
        } else {
            st = LC_CHECK_CUBLAS(cublasGemmEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, A, ta, (int)p->lda, B,
                                              tb, (int)p->ldb, &beta, C, CUDA_R_16F, (int)M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
        if (st != LOOM_OK) return st;
        const int64_t ne[4] = {M, N, 1, 1};
        struct lc_tensor c = lc_tensor_contiguous(C, LOOM_TYPE_F16, ne);
        return lc_copy(be, &c, d);
    }
    if (nbatch == 1) {
        return LC_CHECK_CUBLAS(cublasGemmEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, A, ta, (int)p->lda,
                                            B, tb, (int)p->ldb, &beta, d->data, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
    }
    /* one uniform stride over the flattened batch (i2 fastest) when it exists */
    int64_t sa = 0, sb = 0, sc = 0;
    bool strided;
    const bool a_bcast = a->ne[2] == 1 && a->ne[3] == 1;
    if (ne3 == 1) {
        sa = a_bcast ? 0 : p->sa2;
        sb = p->sb2;
        sc = sc2;
        strided = r2 == 1 || a_bcast;
    } else if (ne2 == 1) {
        sa = a_bcast ? 0 : p->sa3;
        sb = p->sb3;
        sc = sc3;
        strided = r3 == 1 || a_bcast;
    } else {
        sa = a_bcast ? 0 : p->sa2;
        sb = p->sb2;
        sc = sc2;
        strided = (a_bcast || (r2 == 1 && r3 == 1 && p->sa3 == p->sa2 * ne2)) && p->sb3 == p->sb2 * ne2 && sc3 == sc2 * ne2;
    }
    if (strided && nbatch <= INT32_MAX) {
        return LC_CHECK_CUBLAS(cublasGemmStridedBatchedEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, A, ta,
                                                          (int)p->lda, sa, B, tb, (int)p->ldb, sb, &beta, d->data, CUDA_R_32F,
                                                          (int)ldc, sc, (int)nbatch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    /* general broadcast (grouped-query attention): arrays of pointers built on the device */
    if (be->conv.src && p->off_ptr < be->conv.off + (size_t)(be->conv.hi - be->conv.lo)) be->conv.src = NULL;
    void ** ptrs = (void **)(be->scratch + p->off_ptr);
    const void ** pa = (const void **)ptrs;
    const void ** pb = (const void **)(ptrs + nbatch);
    void ** pc = ptrs + 2 * nbatch;
    lc_mm_ptrs_kernel<<<(unsigned)((nbatch + 255) / 256), 256, 0, be->stream>>>(pa, pb, pc, A, B, d->data, ne2, nbatch, r2, r3,
                                                                               p->sa2 * es_a, p->sa3 * es_a, p->sb2 * es_b,
                                                                               p->sb3 * es_b, sc2 * 4, sc3 * 4);
    enum loom_status st = LC_CHECK_LAUNCH("lc_mm_ptrs_kernel");
    if (st != LOOM_OK) return st;
    return LC_CHECK_CUBLAS(cublasGemmBatchedEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, pa, ta,
                                               (int)p->lda, pb, tb, (int)p->ldb, &beta, pc, CUDA_R_32F, (int)ldc, (int)nbatch,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ================================================================ entry points */

bool lc_mul_mat_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *b = op->src[1];
    if (!a || !b || !lc_is_float_type(a->type) || b->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32) return false;
    if (a->ne[0] != b->ne[0] || a->ne[0] == 0 || a->ne[2] == 0 || a->ne[3] == 0) return false;
    if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    if (op->ne[0] != a->ne[1] || op->ne[1] != b->ne[1] || op->ne[2] != b->ne[2] || op->ne[3] != b->ne[3]) return false;
    if (!lc_strides_ok(a) || !lc_strides_ok(b) || !lc_strides_ok(op)) return false;
    /* cuBLAS takes int sizes; the result must have dense rows (ldc = nb1 / 4) */
    if (a->ne[0] > INT32_MAX || a->ne[1] > INT32_MAX || b->ne[1] > INT32_MAX) return false;
    if (op->nb[0] != 4 || op->nb[1] / 4 > INT32_MAX || (op->ne[1] > 1 && op->nb[1] / 4 < (size_t)op->ne[0])) return false;
    return true;
}

bool lc_mul_mat_is_matvec(const struct loom_tensor * op) { return lc_mm_plan_for(op).matvec; }

enum loom_status lc_mul_mat(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, b, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &b, &d);
    if (st != LOOM_OK) return st;
    struct lc_mm_plan p = lc_mm_plan_for(dst);
    if (p.matvec) {
        struct lc_mv_epi none;
        memset(&none, 0, sizeof none);
        return lc_matvec(be, &a, &b, &d, &none, lc_is_weight(dst->src[0]), NULL, NULL);
    }
    if (p.total > be->scratch_size) {
        loom_log(LOOM_LOG_ERROR, "%s: mul_mat '%s' needs %zu bytes of scratch, the backend has %zu", be->dev->name, dst->name,
                 p.total, be->scratch_size);
        return LOOM_ERR_BACKEND;
    }
    return lc_gemm(be, &p, &a, &b, &d, dst->src[1]);
}

static void copy_strides(int64_t * out, const struct lc_tensor * t) {
    for (int k = 0; k < 4; k++) out[k] = t->nb[k];
}

/* The epilogue that computes 'next' from the product 'mm' (device views a, b, d), or false. The
 * fused node's result must not overlap what other warps read (the operands) and may coincide
 * with the product or its other operand only element for element. */
static bool epilogue_for(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * next,
                         const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, struct lc_mv_epi * epi) {
    memset(epi, 0, sizeof *epi);
    struct lc_tensor e, o;
    switch (next->op) {
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: {
        const int slot = next->src[0] == mm ? 0 : next->src[1] == mm ? 1 : -1;
        if (slot < 0 || next->src[0] == next->src[1]) return false;
        const struct loom_tensor * other = next->src[1 - slot];
        if (other->type != LOOM_TYPE_F32 || next->type != LOOM_TYPE_F32 || !loom_are_same_shape(other, mm) || !loom_are_same_shape(next, mm)) {
            return false;
        }
        if (lc_tensor_of(be, other, false, &o) != LOOM_OK || lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        if (lc_overlap_of(&o, d) != LC_DISJOINT || lc_overlap_of(&e, &o) == LC_PARTIAL) return false;
        epi->kind = next->op == LOOM_OP_ADD ? LC_EPI_ADD : LC_EPI_MUL;
        epi->o = o.data;
        copy_strides(epi->o_nb, &o);
        break;
    }
    case LOOM_OP_SILU:
        if (next->src[0] != mm || next->type != LOOM_TYPE_F32 || !loom_are_same_shape(next, mm)) return false;
        if (lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        epi->kind = LC_EPI_SILU;
        break;
    case LOOM_OP_CPY:
    case LOOM_OP_DUP:
    case LOOM_OP_CONT:
    case LOOM_OP_SET_ROWS:
        if (!lc_scatter_for(be, next, d, &epi->sc) || lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        epi->kind = LC_EPI_COPY;
        break;
    default: return false;
    }
    if (lc_overlap_of(&e, a) != LC_DISJOINT || lc_overlap_of(&e, b) != LC_DISJOINT || lc_overlap_of(&e, d) == LC_PARTIAL) return false;
    if (epi->kind == LC_EPI_COPY && lc_overlap_of(&e, d) != LC_DISJOINT) return false;
    epi->e = e.data;
    copy_strides(epi->e_nb, &e);
    return true;
}

/* The rotation of 'rope' fused into the product 'mm' (its source is the product, reshaped to
 * [head_dim, n_head, N]), with the copy 'cpy' of its result when that is given and fits; false
 * when it does not apply. */
static bool rope_epilogue_for(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * rope,
                              const struct loom_tensor * cpy, const struct lc_tensor * a, const struct lc_tensor * b,
                              const struct lc_tensor * d, struct lc_mv_epi * epi, bool * with_copy) {
    memset(epi, 0, sizeof *epi);
    *with_copy = false;
    if (rope->op != LOOM_OP_ROPE || loom_get_op_param_i32(rope, 1) != LOOM_ROPE_NORMAL) return false;
    const struct loom_tensor *x = rope->src[0], *pos = rope->src[1];
    const int n_dims = loom_get_op_param_i32(rope, 0);
    /* the rope reads the product itself: same bytes, [head_dim, n_head, N] over [M, N] */
    if (!x || x->view_src != mm || x->view_offs != 0 || x->ne[0] * x->ne[1] != mm->ne[0] || x->ne[2] != mm->ne[1] || x->ne[3] != 1 ||
        mm->ne[2] != 1 || mm->ne[3] != 1 || x->ne[0] % 2 != 0 || !loom_is_contiguous(x) || rope->type != LOOM_TYPE_F32) {
        return false;
    }
    struct lc_tensor e, tp;
    if (lc_tensor_of(be, rope, true, &e) != LOOM_OK || lc_tensor_of(be, pos, false, &tp) != LOOM_OK || !lc_is_contiguous(&e)) return false;
    if (lc_overlap_of(&e, a) != LC_DISJOINT || lc_overlap_of(&e, b) != LC_DISJOINT || lc_overlap_of(&e, &tp) != LC_DISJOINT ||
        lc_overlap_of(d, &tp) != LC_DISJOINT) {
        return false;
    }
    /* the rotated result may replace the product in place (one lane writes both pairs) */
    struct lc_tensor e2 = lc_tensor_contiguous(e.data, LOOM_TYPE_F32, d->ne);
    if (lc_overlap_of(&e2, d) == LC_PARTIAL) return false;
    epi->kind = LC_EPI_ROPE;
    epi->e = e2.data;
    copy_strides(epi->e_nb, &e2);
    epi->pos = tp.data;
    epi->pos_nb0 = tp.nb[0];
    epi->head_dim = x->ne[0];
    epi->n_dims = n_dims;
    epi->log2_base = log2((double)loom_get_op_param_f32(rope, 2));
    epi->freq_scale = (double)loom_get_op_param_f32(rope, 3);
    struct lc_tensor c;
    if (cpy && lc_reads_result_of(cpy, rope) && lc_scatter_for(be, cpy, &e, &epi->sc) && lc_tensor_of(be, cpy, true, &c) == LOOM_OK &&
        lc_overlap_of(&c, a) == LC_DISJOINT && lc_overlap_of(&c, b) == LC_DISJOINT && lc_overlap_of(&c, d) == LC_DISJOINT &&
        lc_overlap_of(&c, &tp) == LC_DISJOINT) {
        /* the scatter maps the rotated result's offsets, which are the product's */
        epi->has_sc = 1;
        *with_copy = true;
    }
    return true;
}

/* The epilogue of product 'mm' from the nodes after it (next, next2: NULL when absent), as
 * lc_mul_mat_fused chooses it; '*fused' nodes covered (0: none). False when 'mm' cannot take the
 * matrix-vector kernels or its tensors are not on this device. */
static bool matvec_plan(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * next,
                        const struct loom_tensor * next2, struct lc_tensor * a, struct lc_tensor * b, struct lc_tensor * d,
                        struct lc_mv_epi * epi, int * fused) {
    *fused = 0;
    memset(epi, 0, sizeof *epi);
    if (!lc_mm_plan_for(mm).matvec) return false;
    if (lc_tensor_of(be, mm->src[0], false, a) != LOOM_OK || lc_tensor_of(be, mm->src[1], false, b) != LOOM_OK ||
        lc_tensor_of(be, mm, true, d) != LOOM_OK || !lc_is_contiguous(d)) {
        return false;
    }
    bool with_copy = false;
    if (next && rope_epilogue_for(be, mm, next, next2, a, b, d, epi, &with_copy)) {
        *fused = with_copy ? 2 : 1;
    } else if (next && epilogue_for(be, mm, next, a, b, d, epi)) {
        *fused = 1;
    } else {
        memset(epi, 0, sizeof *epi);
    }
    return true;
}

/* True when contiguous 'inner' lies wholly inside contiguous 'outer' (the later write covers it). */
static bool covered_by(const struct lc_tensor * inner, const struct lc_tensor * outer) {
    if (!lc_is_contiguous(inner) || !lc_is_contiguous(outer)) return false;
    char *ilo, *ihi, *olo, *ohi;
    lc_extent(inner, &ilo, &ihi);
    lc_extent(outer, &olo, &ohi);
    return olo <= ilo && ihi <= ohi;
}

/* True when 'norm' is the RMS_NORM of one F32 column and 'mul' the MUL of its result by an F32
 * weight row of its shape (a layer's normalised input). */
static bool norm_mul_pattern(const struct loom_tensor * norm, const struct loom_tensor * mul) {
    if (!mul || norm->op != LOOM_OP_RMS_NORM || !lc_rms_norm_supported(norm) || loom_nelements(norm) != norm->ne[0]) return false;
    if (mul->op != LOOM_OP_MUL || mul->src[0] != norm || mul->src[1] == norm || mul->type != LOOM_TYPE_F32 ||
        !loom_are_same_shape(mul, norm)) {
        return false;
    }
    return mul->src[1]->type == LOOM_TYPE_F32 && loom_are_same_shape(mul->src[1], norm);
}

/* The RMS_NORM 'norm' of one F32 column and the MUL 'mul' of its result by an F32 weight row, when
 * the product 'mm' after them reads the MUL's result: the pattern of a pre-norm, its tensors in
 * 'pl', or false (also under LOOM_CUDA_PRENORM=0 and for staging shapes other than the default). */
static bool pre_norm_pattern(const struct lc_backend * be, const struct loom_tensor * norm, const struct loom_tensor * mul,
                             const struct loom_tensor * mm, struct lc_pre_plan * pl) {
    if (!be->prenorm || g_mv_stages != 1 || !norm_mul_pattern(norm, mul) || norm->ne[0] > LC_PRE_MAX_K) return false;
    const struct loom_tensor * wt = mul->src[1];
    if (mm->op != LOOM_OP_MUL_MAT || mm->src[1] != mul || !lc_mm_plan_for(mm).matvec) return false;
    if (lc_tensor_of(be, norm->src[0], false, &pl->h) != LOOM_OK || lc_tensor_of(be, wt, false, &pl->g) != LOOM_OK ||
        lc_tensor_of(be, norm, true, &pl->y) != LOOM_OK || lc_tensor_of(be, mul, true, &pl->z) != LOOM_OK) {
        return false;
    }
    if (!lc_is_contiguous(&pl->h) || !lc_is_contiguous(&pl->g) || !lc_is_contiguous(&pl->y) || !lc_is_contiguous(&pl->z)) return false;
    /* y and z are written while blocks read h; z may replace y element for element */
    if (lc_overlap_of(&pl->y, &pl->h) != LC_DISJOINT || lc_overlap_of(&pl->z, &pl->h) != LC_DISJOINT ||
        lc_overlap_of(&pl->y, &pl->z) == LC_PARTIAL) {
        return false;
    }
    pl->mul = mul;
    pl->u = NULL;
    memset(&pl->pre, 0, sizeof pl->pre);
    pl->pre.h = pl->h.data;
    pl->pre.y = pl->y.data;
    pl->pre.z = pl->z.data;
    pl->pre.eps = loom_get_op_param_f32(norm, 0);
    return true;
}

/* The pre-norm of the launch from 'norm' on (norm, mul, the first product mm), when the launch
 * queued before it left u and the partial sums for this norm (be->pre_avail), or false. */
static bool pre_norm_plan(const struct lc_backend * be, const struct loom_tensor * norm, const struct loom_tensor * mul,
                          const struct loom_tensor * mm, struct lc_pre_plan * pl) {
    const struct lc_pre_handoff * ho = &be->pre_avail;
    if (!ho->valid || !pre_norm_pattern(be, norm, mul, mm, pl)) return false;
    if (ho->h != pl->h.data || ho->g != pl->g.data || ho->K != pl->h.ne[0]) return false;
    pl->u = be->pre_u;
    pl->pre.parts = be->pre_parts;
    pl->pre.nparts = ho->nparts;
    return true;
}

/* The tail that prepares the pre-norm of the products after this launch: 'src' (the product's
 * result or its epilogue's, M rows of one column) is the source of RMS_NORM 'norm', whose MUL
 * 'mul' the product 'mm' reads. Sets the tail and what the launch leaves for the next one. */
static bool rms_part_tail_for(struct lc_backend * be, const struct loom_tensor * src, const struct loom_tensor * norm,
                              const struct loom_tensor * mul, const struct loom_tensor * mm, struct lc_mv_tail * t,
                              struct lc_pre_handoff * ho) {
    struct lc_pre_plan pl;
    if (norm->src[0] != src || !pre_norm_pattern(be, norm, mul, mm, &pl)) return false;
    /* the next launch could not take it (pre_norm_fits): a norm tail serves better */
    struct lc_tensor next;
    if (lc_tensor_of(be, mm, true, &next) != LOOM_OK || lc_overlap_of(&next, &pl.h) != LC_DISJOINT) return false;
    const int64_t M = pl.h.ne[0], nparts = (M + LC_TAIL_ROWS * LC_TAIL_WARPS - 1) / (LC_TAIL_ROWS * LC_TAIL_WARPS);
    if (nparts > LC_PRE_MAX_PARTS) return false;
    memset(t, 0, sizeof *t);
    t->kind = LC_TAIL_RMS_PART;
    t->w = pl.g.data;
    t->w_nb0 = sizeof(float);
    t->u = be->pre_u;
    t->parts = be->pre_parts;
    ho->valid = true;
    ho->h = pl.h.data;
    ho->g = pl.g.data;
    ho->K = M;
    ho->nparts = (int)nparts;
    return true;
}

/* Whether a launch of the nodes nodes[0 .. n-1] (products and what is fused into them) may carry
 * the pre-norm 'pl': their results apart from h, which blocks read to the end; y and z
 * apart from the nodes' other operands, and from their results or wholly inside one (then left
 * unwritten: the later result is what the nodes one by one leave there; clears pl->pre.y / z). */
static bool pre_norm_fits(const struct lc_backend * be, struct lc_pre_plan * pl, struct loom_tensor * const * nodes, int n) {
#define PRE_NO(why, t)                                                                                                         \
    do {                                                                                                                       \
        loom_log(LOOM_LOG_DEBUG, "pre-norm refused: %s ('%s' %s, launch from '%s')", why, (t)->name, loom_op_name((t)->op),   \
                 nodes[0]->name);                                                                                              \
        return false;                                                                                                          \
    } while (0)
    for (int k = 0; k < n; k++) {
        struct lc_tensor out;
        if (lc_tensor_of(be, nodes[k], true, &out) != LOOM_OK) PRE_NO("out tensor", nodes[k]);
        if (lc_overlap_of(&out, &pl->h) != LC_DISJOINT) PRE_NO("a result over the norm's source", nodes[k]);
        if (pl->pre.y && lc_overlap_of(&pl->y, &out) != LC_DISJOINT) {
            if (!covered_by(&pl->y, &out)) PRE_NO("the norm's result partly under a result", nodes[k]);
            pl->pre.y = NULL;
        }
        if (pl->pre.z && lc_overlap_of(&pl->z, &out) != LC_DISJOINT) {
            if (!covered_by(&pl->z, &out)) PRE_NO("the MUL's result partly under a result", nodes[k]);
            pl->pre.z = NULL;
        }
    }
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < LOOM_MAX_SRC; j++) {
            const struct loom_tensor * src = nodes[k]->src[j];
            if (!src) continue;
            bool internal = false; /* a result of the launch, or a view of one: checked above */
            for (int i = 0; i < n; i++) internal = internal || src == nodes[i] || src->view_src == nodes[i];
            /* a product's activations (the MUL's result) are read as h and g instead */
            if (internal || (src == pl->mul && nodes[k]->op == LOOM_OP_MUL_MAT && j == 1)) continue;
            struct lc_tensor in;
            if (lc_tensor_of(be, src, false, &in) != LOOM_OK) PRE_NO("an operand not on the device", src);
            if ((pl->pre.y && lc_overlap_of(&pl->y, &in) != LC_DISJOINT) || (pl->pre.z && lc_overlap_of(&pl->z, &in) != LC_DISJOINT)) {
                PRE_NO("the norm's or MUL's result over an operand", src);
            }
        }
    }
    return true;
#undef PRE_NO
}

static enum loom_status lc_mul_mat_multi(struct lc_backend * be, struct loom_tensor * const * nodes, int n, const struct lc_pre_plan * pp,
                                         int * used) {
    *used = 0;
    struct lc_mv_multi m;
    /* per segment: results (0 the product, 1 the first fused node's, 2 the rotated copy), inputs */
    struct lc_tensor outs[LC_MV_MAX_SEG][3], ins[LC_MV_MAX_SEG][4];
    int n_out[LC_MV_MAX_SEG], nseg = 0, at = 0;
    const struct loom_tensor * x = nodes[0]->src[1];
    while (nseg < LC_MV_MAX_SEG && at < n) {
        const struct loom_tensor * mm = nodes[at];
        if (mm->op != LOOM_OP_MUL_MAT || mm->src[1] != x || mm->src[0]->type != nodes[0]->src[0]->type || !lc_is_weight(mm->src[0]) ||
            mm->ne[1] != 1 || mm->ne[2] != 1 || mm->ne[3] != 1 || mm->ne[0] % 2 != 0 || mm->ne[0] >= 8192) {
            break;
        }
        struct lc_tensor a, b, d;
        struct lc_mv_epi epi;
        int f = 0;
        if (!matvec_plan(be, mm, at + 1 < n ? nodes[at + 1] : NULL, at + 2 < n ? nodes[at + 2] : NULL, &a, &b, &d, &epi, &f)) break;
        n_out[nseg] = 0;
        for (int k = 0; k <= f; k++) {
            if (lc_tensor_of(be, nodes[at + k], true, &outs[nseg][n_out[nseg]++]) != LOOM_OK) return LOOM_OK;
        }
        ins[nseg][0] = a;
        ins[nseg][1] = b;
        ins[nseg][2] = b; /* the positions, for a rotation */
        ins[nseg][3] = b; /* the other operand of an ADD or MUL */
        if (epi.kind == LC_EPI_ROPE && lc_tensor_of(be, nodes[at + 1]->src[1], false, &ins[nseg][2]) != LOOM_OK) return LOOM_OK;
        if ((epi.kind == LC_EPI_ADD || epi.kind == LC_EPI_MUL) &&
            lc_tensor_of(be, nodes[at + 1]->src[nodes[at + 1]->src[0] == mm ? 1 : 0], false, &ins[nseg][3]) != LOOM_OK) {
            return LOOM_OK;
        }
        lc_matvec_args(&a, &b, &d, &epi, true, NULL, NULL, m.s[nseg]);
        if (m.s[nseg].vec != m.s[0].vec || m.s[nseg].K != m.s[0].K) break;
        nseg++;
        at += 1 + f;
    }
    if (nseg < 2) return LOOM_OK;
    for (int s1 = 0; s1 < nseg; s1++) {
        for (int s2 = 0; s2 < nseg; s2++) {
            if (s1 == s2) continue;
            for (int o = 0; o < n_out[s1]; o++) {
                /* nothing one segment writes may be read by another */
                for (int k = 0; k < 4; k++) {
                    if (lc_overlap_of(&outs[s1][o], &ins[s2][k]) != LC_DISJOINT) return LOOM_OK;
                }
                if (s2 < s1) continue;
                /* results of an earlier segment that a later one overwrites (the allocator reuses the
                 * memory of a product once its rotation or store has read it) are left unwritten, so the
                 * memory ends as the nodes one by one would leave it; any other overlap: no launch */
                for (int o2 = 0; o2 < n_out[s2]; o2++) {
                    if (lc_overlap_of(&outs[s1][o], &outs[s2][o2]) == LC_DISJOINT) continue;
                    const bool skippable = o == 0 || (o == 1 && m.s[s1].epi.kind != LC_EPI_COPY);
                    if (!skippable || !covered_by(&outs[s1][o], &outs[s2][o2])) return LOOM_OK;
                    if (o == 0) m.s[s1].skip_d = 1;
                    else m.s[s1].skip_e = 1;
                }
            }
        }
    }
    /* rotation pairs need two rows per warp: every segment takes that shape */
    const int type = nodes[0]->src[0]->type;
    if (pp) { /* the segments read h and g; the first one's blocks write the norm's results */
        struct lc_pre_plan pl = *pp;
        if (!pre_norm_fits(be, &pl, nodes, at)) return LOOM_OK;
        for (int sg = 0; sg < nseg; sg++) pre_norm_apply(&pl, sg == 0, m.s[sg]);
        lc_matvec_launch_multi_typed<2, 2, 4, 6, LC_MV_PRE>(be, m, nseg, type);
        *used = at;
        return LC_CHECK_LAUNCH("lc_matvec_multi_kernel");
    }
    /* the small-matrix shape of lc_matvec_one_col for the chosen staging */
    if (g_mv_stages == 1 || g_mv_stages == 3) lc_matvec_launch_multi_typed<2, 2, 4, 6>(be, m, nseg, type);
    else if (g_mv_stages) lc_matvec_launch_multi_typed<2, 4, 4, 3>(be, m, nseg, type);
    else lc_matvec_launch_multi_typed<2, 4, 4, 0>(be, m, nseg, type);
    *used = at;
    return LC_CHECK_LAUNCH("lc_matvec_multi_kernel");
}

/* The softmax 'sm' of the product's result d (a, b: its operands) as the launch's tail, or false
 * (also when the softmax's result overlaps what other batches' blocks may still read). */
static bool soft_max_tail_for(struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * sm,
                              const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, struct lc_mv_tail * t) {
    if (sm->op != LOOM_OP_SOFT_MAX || sm->src[0] != mm || !lc_soft_max_supported(sm)) return false;
    if (mm->ne[1] != 1 || mm->ne[2] * mm->ne[3] > LC_TAIL_COUNTERS) return false;
    struct lc_tensor y, m;
    if (lc_tensor_of(be, sm, true, &y) != LOOM_OK) return false;
    if (sm->src[1] && lc_tensor_of(be, sm->src[1], false, &m) != LOOM_OK) return false;
    /* each row is read whole before it is written: the result may replace the product in place */
    if (lc_overlap_of(&y, d) == LC_PARTIAL) return false;
    if (sm->src[1] && (lc_overlap_of(&y, &m) != LC_DISJOINT || lc_overlap_of(&m, d) != LC_DISJOINT)) return false;
    if (lc_overlap_of(&y, a) != LC_DISJOINT || lc_overlap_of(&y, b) != LC_DISJOINT) return false;
    t->kind = LC_TAIL_SOFT_MAX;
    t->count = be->tail_count;
    t->x = d->data;
    copy_strides(t->x_nb, d);
    t->m = sm->src[1] ? m.data : NULL;
    if (sm->src[1]) {
        copy_strides(t->m_nb, &m);
        t->m_ne2 = m.ne[2];
        t->m_ne3 = m.ne[3];
        t->m_type = m.type;
    }
    t->y = y.data;
    copy_strides(t->y_nb, &y);
    t->f = loom_get_op_param_f32(sm, 0);
    return true;
}

/* RMS_NORM 'norm' of 'src' (the product's result or its epilogue's, one column) and MUL 'mul' of
 * the norm by an F32 weight row, as the launch's tail, or false. */
static bool rms_norm_tail_for(struct lc_backend * be, const struct loom_tensor * src, const struct loom_tensor * norm,
                              const struct loom_tensor * mul, struct lc_mv_tail * t) {
    if (!norm_mul_pattern(norm, mul) || norm->src[0] != src) return false;
    const struct loom_tensor * wt = mul->src[1];
    struct lc_tensor x, y, w, z;
    if (lc_tensor_of(be, src, false, &x) != LOOM_OK || lc_tensor_of(be, norm, true, &y) != LOOM_OK ||
        lc_tensor_of(be, wt, false, &w) != LOOM_OK || lc_tensor_of(be, mul, true, &z) != LOOM_OK) {
        return false;
    }
    /* as lc_rms_norm_fused: each element read and written by one thread; the weight read by all */
    if (lc_overlap_of(&y, &x) == LC_PARTIAL || lc_overlap_of(&z, &x) == LC_PARTIAL || lc_overlap_of(&z, &y) == LC_PARTIAL ||
        lc_overlap_of(&z, &w) != LC_DISJOINT || lc_overlap_of(&y, &w) != LC_DISJOINT) {
        return false;
    }
    t->kind = LC_TAIL_RMS_NORM;
    t->count = be->tail_count;
    t->x = x.data;
    copy_strides(t->x_nb, &x);
    t->w = w.data;
    t->w_nb0 = w.nb[0];
    t->y = y.data;
    copy_strides(t->y_nb, &y);
    t->z = z.data;
    t->z_nb0 = z.nb[0];
    t->f = loom_get_op_param_f32(norm, 0);
    return true;
}

/* A product with its epilogue and tail (comment of lc_mul_mat_group) or, with a pre-norm 'pp', with
 * its epilogue; '*used' = nodes queued (0: none, the product is the caller's). */
static enum loom_status lc_mul_mat_fused(struct lc_backend * be, struct loom_tensor * const * nodes, int n, const struct lc_pre_plan * pp,
                                         int * used) {
    struct lc_tensor a, b, d;
    struct lc_mv_epi epi;
    struct loom_tensor * mm = nodes[0];
    int fused = 0;
    *used = 0;
    /* nothing fuses (or a tensor is not on this device: the unfused path reports it) */
    if (!matvec_plan(be, mm, n > 1 ? nodes[1] : NULL, n > 2 ? nodes[2] : NULL, &a, &b, &d, &epi, &fused)) return LOOM_OK;
    struct lc_mv_tail tail;
    memset(&tail, 0, sizeof tail);
    const int at = 1 + fused; /* the first node after the epilogue's */
    struct lc_pre_handoff ho;  /* what this launch leaves for the next one's pre-norm */
    ho.valid = false;
    if (!pp && at < n && epi.kind != LC_EPI_ROPE && epi.kind != LC_EPI_COPY) {
        if (be->tail && fused == 0 && soft_max_tail_for(be, mm, nodes[at], &a, &b, &d, &tail)) {
            fused += 1;
        } else if (at + 2 < n && rms_part_tail_for(be, nodes[at - 1], nodes[at], nodes[at + 1], nodes[at + 2], &tail, &ho)) {
            /* the norm's nodes are the next launch's */
        } else if (be->tail && rms_norm_tail_for(be, nodes[at - 1], nodes[at], at + 1 < n ? nodes[at + 1] : NULL, &tail)) {
            fused += 2;
        }
    }
    struct lc_pre_plan pl;
    if (pp) {
        pl = *pp;
        if (!pre_norm_fits(be, &pl, nodes, 1 + fused)) return LOOM_OK;
    } else if (fused == 0 && tail.kind == LC_TAIL_NONE) {
        return LOOM_OK;
    }
    *used = 1 + fused;
    if (ho.valid) be->pre_next = ho;
    return lc_matvec(be, &a, &b, &d, &epi, lc_is_weight(mm->src[0]), NULL, NULL, tail.kind != LC_TAIL_NONE ? &tail : NULL, pp ? &pl : NULL);
}

/* SwiGLU of four consecutive nodes -- gate = MUL_MAT(wg, x), act = SILU(gate), up = MUL_MAT(wu, x),
 * out = MUL(act, up) -- in one matrix-vector launch that reads x once for both matrices (all
 * four results written); sets '*fused' when it applies, otherwise queues nothing. */
static enum loom_status lc_mul_mat_glu(struct lc_backend * be, struct loom_tensor * gate, struct loom_tensor * act, struct loom_tensor * up,
                                       struct loom_tensor * out, const struct lc_pre_plan * pp, bool * fused) {
    *fused = false;
    if (act->op != LOOM_OP_SILU || act->src[0] != gate || up->op != LOOM_OP_MUL_MAT || out->op != LOOM_OP_MUL) return LOOM_OK;
    if (!((out->src[0] == act && out->src[1] == up) || (out->src[0] == up && out->src[1] == act))) return LOOM_OK;
    const struct loom_tensor *wg = gate->src[0], *wu = up->src[0];
    if (up->src[1] != gate->src[1] || wg->type != wu->type || !loom_are_same_shape(wg, wu)) return LOOM_OK;
    for (int k = 1; k < 4; k++) {
        if (wg->nb[k] != wu->nb[k]) return LOOM_OK;
    }
    if (act->type != LOOM_TYPE_F32 || out->type != LOOM_TYPE_F32 || !loom_are_same_shape(act, gate) || !loom_are_same_shape(out, gate)) {
        return LOOM_OK;
    }
    if (!lc_mm_plan_for(gate).matvec || !lc_mm_plan_for(up).matvec) return LOOM_OK;
    struct lc_tensor a, a2, b, d, du, s, e;
    if (lc_tensor_of(be, wg, false, &a) != LOOM_OK || lc_tensor_of(be, wu, false, &a2) != LOOM_OK ||
        lc_tensor_of(be, gate->src[1], false, &b) != LOOM_OK || lc_tensor_of(be, gate, true, &d) != LOOM_OK ||
        lc_tensor_of(be, up, true, &du) != LOOM_OK || lc_tensor_of(be, act, true, &s) != LOOM_OK ||
        lc_tensor_of(be, out, true, &e) != LOOM_OK) {
        return LOOM_OK;
    }
    if (!lc_is_contiguous(&d) || !lc_is_contiguous(&du)) return LOOM_OK;
    /* results: apart from what every warp reads; among themselves apart or element for element
     * (written in the unfused order, so the memory ends as it would), except that silu(gate) must
     * survive the up product's result for the product that reads both */
    const struct lc_tensor * outs[4] = {&d, &s, &du, &e};
    for (int x = 0; x < 4; x++) {
        if (lc_overlap_of(outs[x], &a) != LC_DISJOINT || lc_overlap_of(outs[x], &a2) != LC_DISJOINT ||
            lc_overlap_of(outs[x], &b) != LC_DISJOINT) {
            return LOOM_OK;
        }
        for (int y = x + 1; y < 4; y++) {
            if (lc_overlap_of(outs[x], outs[y]) == LC_PARTIAL) return LOOM_OK;
        }
    }
    if (lc_overlap_of(&s, &du) != LC_DISJOINT) return LOOM_OK;
    struct lc_mv_glu glu;
    glu.up = du.data;
    glu.act = s.data;
    glu.out = e.data;
    copy_strides(glu.up_nb, &du);
    copy_strides(glu.act_nb, &s);
    copy_strides(glu.out_nb, &e);
    struct lc_pre_plan pl;
    if (pp) {
        pl = *pp;
        struct loom_tensor * nodes[4] = {gate, act, up, out};
        if (!pre_norm_fits(be, &pl, nodes, 4)) return LOOM_OK;
    }
    struct lc_mv_epi none;
    memset(&none, 0, sizeof none);
    *fused = true;
    return lc_matvec(be, &a, &b, &d, &none, lc_is_weight(wg) && lc_is_weight(wu), a2.data, &glu, NULL, pp ? &pl : NULL);
}

enum loom_status lc_mul_mat_group(struct lc_backend * be, struct loom_tensor * const * nodes, int n, int * used) {
    *used = 0;
    struct lc_pre_plan pl;
    const struct lc_pre_plan * pp = NULL;
    int at = 0; /* the first product */
    if (nodes[0]->op == LOOM_OP_RMS_NORM) {
        if (n < 3 || !pre_norm_plan(be, nodes[0], nodes[1], nodes[2], &pl)) return LOOM_OK;
        pp = &pl;
        at = 2;
    }
    struct loom_tensor * const * mm = nodes + at;
    const int m = n - at;
    int k = 0;
    enum loom_status st = LOOM_OK;
    if (m > 3) {
        bool f = false;
        st = lc_mul_mat_glu(be, mm[0], mm[1], mm[2], mm[3], pp, &f);
        if (f) k = 4;
    }
    if (st == LOOM_OK && k == 0 && be->multi && m > 2) st = lc_mul_mat_multi(be, mm, m, pp, &k);
    if (st == LOOM_OK && k == 0) st = lc_mul_mat_fused(be, mm, m, pp, &k);
    if (k > 0) *used = at + k;
    return st;
}
