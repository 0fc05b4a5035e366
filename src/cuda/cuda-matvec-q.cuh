/* cuda-matvec-q.cuh -- the matrix-vector kernels for quantized weights (products of at most
 * LC_MATVEC_Q_MAX_COLS columns, a few per launch: token generation, a decode step of several
 * sequences). A warp per pair of rows (SwiGLU: a row of each matrix; rotation: a pair); each lane
 * reads whole units of blocks (cuda-quant.cuh: lane l takes units l, l + 32, ... of the row, so a
 * warp's loads cover consecutive bytes). The types with integer dot products (lc_q8dot,
 * cuda-quant-dot.cuh) multiply the unit's codes by 8-bit activations that the launch's first
 * kernel quantized (lc_matvec_q8_body); the others decode the unit into F32 runs and multiply them
 * by the F32 activations (lc_matvec_q_body). The launch description, the epilogues, tails and
 * pre-norm are those of the float kernels (cuda-matvec.cuh, cuda-matvec-dev.cuh), so every fusion
 * the planner makes applies to quantized weights too. The kernels of each type are instantiated
 * in a file of their own (cuda-matvec-q-*.cu, built in parallel: LC_QMV_INSTANTIATE);
 * cuda-matvec-q.cu chooses by type. */
#ifndef LOOM_CUDA_MATVEC_Q_CUH
#define LOOM_CUDA_MATVEC_Q_CUH

#include "cuda-matvec-dev.cuh"
#include "cuda-mulmat.cuh"
#include "cuda-quant-dot.cuh"

/* sum over the 32 elements x of x[l] * b[l]; 'shared': b is in shared memory (16-byte aligned),
 * else in global memory, 'bal': 16-byte aligned (vector loads) */
static __device__ __forceinline__ float lc_dot32(const float (&x)[32], const float * b, bool bal, bool shared) {
    float s0 = 0.0f, s1 = 0.0f;
    if (shared) {
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
            const float4 u = ((const float4 *)b)[i], v = ((const float4 *)b)[i + 1];
            s0 += x[4 * i] * u.x + x[4 * i + 1] * u.y + x[4 * i + 2] * u.z + x[4 * i + 3] * u.w;
            s1 += x[4 * i + 4] * v.x + x[4 * i + 5] * v.y + x[4 * i + 6] * v.z + x[4 * i + 7] * v.w;
        }
    } else if (bal) {
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
            const float4 u = __ldg((const float4 *)b + i), v = __ldg((const float4 *)b + i + 1);
            s0 += x[4 * i] * u.x + x[4 * i + 1] * u.y + x[4 * i + 2] * u.z + x[4 * i + 3] * u.w;
            s1 += x[4 * i + 4] * v.x + x[4 * i + 5] * v.y + x[4 * i + 6] * v.z + x[4 * i + 7] * v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; i += 2) {
            s0 += x[i] * __ldg(b + i);
            s1 += x[i + 1] * __ldg(b + i + 1);
        }
    }
    return s0 + s1;
}

/* Rows (SwiGLU: of each matrix) per warp and warps per block of every quantized kernel: two rows
 * keep rotation pairs in one warp, and the tail's shape is the planner's (LC_TAIL_ROWS/WARPS). */
#define LC_QMV_ROWS 2
#define LC_QMV_WARPS 4
static_assert(LC_QMV_ROWS == LC_TAIL_ROWS && LC_QMV_WARPS == LC_TAIL_WARPS, "the tail's kernel shape");

/* The activations a block stages in shared memory: column j's element e at float
 * j * lc_qmv_kp(K) + (e / 32) * 36 + e % 32 -- 4 floats of padding per 32, so that lanes reading
 * the runs of consecutive units (32 elements apart) hit different banks. */
static __host__ __device__ __forceinline__ int64_t lc_qmv_kp(int64_t K) { return K / 32 * 36; }
#define LC_QMV_SMEM_MAX (200 * 1024) /* bytes of staged activations at most; beyond, they are read from global memory */

/* The product, its epilogue and tail or pre-norm for weights of type Q (lc_q<TYPE>), NC columns.
 * Each block first copies the NC activation columns into shared memory (when they fit in
 * 'smem_b' bytes of dynamic shared memory, p.K * NC floats padded; 0: read from global memory),
 * so that the lanes' reads of whole units (32 elements apart from lane to lane) cost one
 * shared-memory wavefront per quarter warp instead of one cache line per lane. Rows past M are
 * clamped (read again, never written); every warp of a block with rows reaches the barriers. */
template <class Q, int NC, int X>
__device__ __forceinline__ void lc_matvec_q_body(const struct lc_mv_args & p, unsigned smem_b) {
    constexpr bool TAIL = X == LC_MV_TAIL, PRE = X == LC_MV_PRE;
    constexpr int ROWS = LC_QMV_ROWS, WARPS = LC_QMV_WARPS;
    static_assert(!PRE || NC == 1, "the pre-norm reads one column");
    lc_pdl_trigger();
    const int lane = threadIdx.x % 32;
    const bool dual = p.a2 != NULL;
    const int HALF = ROWS / 2;
    if ((int64_t)blockIdx.x * WARPS * (dual ? HALF : ROWS) >= p.M && !TAIL) return; /* the whole block (a shorter product of a launch) */
    const int64_t row0 = ((int64_t)blockIdx.x * WARPS + threadIdx.x / 32) * (dual ? HALF : ROWS);
    __shared__ float4 tail_sh[TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    extern __shared__ float4 lc_qmv_dyn[];
    float * sb = (float *)lc_qmv_dyn;
    const bool staged = smem_b > 0;
    const int64_t nunits = p.K / Q::UE, kp = lc_qmv_kp(p.K);
    const bool bal = staged || (((uintptr_t)p.b | (uintptr_t)p.b_nb1) & 15) == 0;
    bool waited = false;
    float scale = 1.0f;
    for (int64_t bt = blockIdx.y; bt < p.nbatch; bt += gridDim.y) {
        const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
        const char * a[ROWS];
        lc_mv_rows<ROWS>(p, row0, i2, i3, a);
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3 + p.j0 * p.b_nb1;
        /* the warp's rows into L2 first: every 128-byte line of them gets a prefetch (a unit is
         * at most 105 bytes apart from the next lane's), so the loads below find their bytes in
         * L2 instead of waiting for DRAM one unit at a time; constant weights before the wait */
        if (!waited && !p.a_const) lc_mv_wait<PRE>(p, waited, scale);
        for (int64_t u = lane; u < nunits; u += 32) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) asm volatile("prefetch.global.L2 [%0];" ::"l"(a[r] + (u / Q::NU) * Q::BS + (u % Q::NU) * Q::BS / Q::NU));
        }
        if (!waited) lc_mv_wait<PRE>(p, waited, scale);
        if (staged) {
            __syncthreads(); /* the previous batch's reads are done */
#pragma unroll
            for (int j = 0; j < NC; j++) {
                const char * bj = b + j * p.b_nb1;
                float * sj = sb + j * kp;
                if ((((uintptr_t)bj) & 15) == 0) {
                    for (int64_t i = threadIdx.x; i < p.K / 4; i += blockDim.x) ((float4 *)sj)[(i / 8) * 9 + i % 8] = __ldg((const float4 *)bj + i);
                } else {
                    for (int64_t e = threadIdx.x; e < p.K; e += blockDim.x) sj[(e / 32) * 36 + e % 32] = __ldg((const float *)bj + e);
                }
            }
            __syncthreads();
        }
        float acc[ROWS][NC];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = 0.0f;
#pragma unroll 4
        for (int64_t u = lane; u < nunits; u += 32) {
            const int64_t blk = u / Q::NU;
            const int sub = (int)(u % Q::NU);
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                Q::unit(a[r] + blk * Q::BS, sub, [&](int e0, const float (&x)[32]) {
                    const int64_t run = (blk * Q::QK + e0) / 32;
#pragma unroll
                    for (int j = 0; j < NC; j++) {
                        const float * bj = staged ? sb + j * kp + run * 36 : (const float *)(b + j * p.b_nb1) + run * 32;
                        acc[r][j] += lc_dot32(x, bj, bal, staged);
                    }
                });
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = lc_warp_sum(acc[r][j]);
        if (PRE) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
            if (p.pre.write && threadIdx.x < 32) lc_mv_pre_store(p, b, scale, (int64_t)WARPS * (dual ? HALF : ROWS), lane);
        }
        const float hsq = lc_mv_finish<NC, ROWS, TAIL>(p, row0, i2, i3, lane, acc);
        if (TAIL) lc_mv_tail_arrive(p, bt, (float *)tail_sh, hsq);
    }
}

template <class Q, int NC, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_kernel(const __grid_constant__ struct lc_mv_args p, unsigned smem_b) {
    lc_matvec_q_body<Q, NC, X>(p, smem_b);
}

template <class Q, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_multi_kernel(const __grid_constant__ struct lc_mv_multi m, unsigned smem_b) {
    lc_matvec_q_body<Q, 1, X>(m.s[blockIdx.z], smem_b);
}

/* ------------------------------------------------------------------ 8-bit activations */

/* Quantizes the F32 activations b [K, N, ne2, ne3] (rows dense, K a multiple of 32) into lc_a8
 * runs at 'out': run r of column j, batch bt at ((bt * N + j) * K / 32 + r) * LC_A8_RUN bytes.
 * A warp per run: d = max|x| / 127, codes rounded to nearest (even). */
__global__ void lc_a8_quant_kernel(const char * b, int64_t K, int64_t N, int64_t ne2, int64_t nruns, int64_t b_nb1, int64_t b_nb2,
                                   int64_t b_nb3, char * out);

/* The staged activations of one column in shared memory: unit u (Q::UE elements, UE / 32 runs
 * back to back) at u * lc_a8_ustride<Q>() bytes -- 16 bytes of padding after units of an even
 * number of runs, so that the lanes' 16-byte reads of consecutive units fall in distinct banks. */
template <class Q> static __host__ __device__ __forceinline__ int lc_a8_ustride() {
    return Q::UE / 32 * LC_A8_RUN + (Q::UE / 32 % 2 == 0 ? 16 : 0);
}
#define LC_QMV8_SMEM_MAX (47 * 1024) /* bytes of staged 8-bit activations at most (under the 48 KiB a launch gets without opting in); beyond, they are read from global memory */

/* The units lane, lane + 32, ... of the warp's rows a[] times NC columns of 8-bit activations at
 * 'act' (SH: staged in shared memory, columns 'cs' bytes apart, units lc_a8_ustride apart; else
 * global, columns p.q8_nb1 apart, units UE / 32 runs apart). */
template <int T, int NC, int ROWS, bool SH>
__device__ __forceinline__ void lc_qmv8_rows(const char * const (&a)[ROWS], const char * act, int64_t cs, int64_t nunits, int lane,
                                             float (&acc)[ROWS][NC]) {
    typedef lc_q<T> Q;
    const int64_t us = SH ? lc_a8_ustride<Q>() : Q::UE / 32 * LC_A8_RUN;
#pragma unroll 2
    for (int64_t u = lane; u < nunits; u += 32) {
        const int64_t blk = u / Q::NU;
        const int sub = (int)(u % Q::NU);
        const char * ac[NC];
#pragma unroll
        for (int j = 0; j < NC; j++) ac[j] = act + j * cs + u * us;
#pragma unroll
        for (int r = 0; r < ROWS; r++) lc_q8dot<T>::template dot<SH, NC>(a[r] + blk * Q::BS, sub, ac, acc[r]);
    }
}

/* lc_matvec_q_body for the types with integer dot products (lc_q8dot): the activations are
 * p.q8's 8-bit runs (the launch's first kernel wrote them); each block stages its NC columns in
 * shared memory when they fit in 'smem_b' bytes (0: read from global memory). */
template <int T, int NC, int X>
__device__ __forceinline__ void lc_matvec_q8_body(const struct lc_mv_args & p, unsigned smem_b) {
    typedef lc_q<T> Q;
    constexpr bool TAIL = X == LC_MV_TAIL, PRE = X == LC_MV_PRE;
    constexpr int ROWS = LC_QMV_ROWS, WARPS = LC_QMV_WARPS, RPU = Q::UE / 32;
    static_assert(!PRE || NC == 1, "the pre-norm reads one column");
    lc_pdl_trigger();
    const int lane = threadIdx.x % 32;
    const bool dual = p.a2 != NULL;
    const int HALF = ROWS / 2;
    if ((int64_t)blockIdx.x * WARPS * (dual ? HALF : ROWS) >= p.M && !TAIL) return; /* the whole block (a shorter product of a launch) */
    const int64_t row0 = ((int64_t)blockIdx.x * WARPS + threadIdx.x / 32) * (dual ? HALF : ROWS);
    __shared__ float4 tail_sh[TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    extern __shared__ float4 lc_qmv_dyn[];
    char * sb = (char *)lc_qmv_dyn;
    const bool staged = smem_b > 0;
    const int64_t nunits = p.K / Q::UE, cs = nunits * lc_a8_ustride<Q>();
    bool waited = false;
    float scale = 1.0f;
    for (int64_t bt = blockIdx.y; bt < p.nbatch; bt += gridDim.y) {
        const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
        const char * a[ROWS];
        lc_mv_rows<ROWS>(p, row0, i2, i3, a);
        const char * q8 = p.q8 + i2 * p.q8_nb2 + i3 * p.q8_nb3 + p.j0 * p.q8_nb1;
        /* the warp's rows into L2 first (lc_matvec_q_body) */
        if (!waited && !p.a_const) lc_mv_wait<PRE>(p, waited, scale);
        for (int64_t u = lane; u < nunits; u += 32) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) asm volatile("prefetch.global.L2 [%0];" ::"l"(a[r] + (u / Q::NU) * Q::BS + (u % Q::NU) * Q::BS / Q::NU));
        }
        if (!waited) lc_mv_wait<PRE>(p, waited, scale);
        float acc[ROWS][NC];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = 0.0f;
        if (staged) {
            __syncthreads(); /* the previous batch's reads are done */
            const int64_t n16 = nunits * RPU * (LC_A8_RUN / 16); /* 16-byte pieces per column */
#pragma unroll
            for (int j = 0; j < NC; j++) {
                const int4 * src = (const int4 *)(q8 + j * p.q8_nb1);
                for (int64_t i = threadIdx.x; i < n16; i += blockDim.x) {
                    const int64_t run = i / (LC_A8_RUN / 16);
                    *(int4 *)(sb + j * cs + (run / RPU) * lc_a8_ustride<Q>() + (run % RPU) * LC_A8_RUN + (i % (LC_A8_RUN / 16)) * 16) = __ldg(src + i);
                }
            }
            __syncthreads();
            lc_qmv8_rows<T, NC, ROWS, true>(a, sb, cs, nunits, lane, acc);
        } else {
            lc_qmv8_rows<T, NC, ROWS, false>(a, q8, p.q8_nb1, nunits, lane, acc);
        }
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = lc_warp_sum(acc[r][j]);
        if (PRE) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
            if (p.pre.write && threadIdx.x < 32) lc_mv_pre_store(p, p.b, scale, (int64_t)WARPS * (dual ? HALF : ROWS), lane);
        }
        const float hsq = lc_mv_finish<NC, ROWS, TAIL>(p, row0, i2, i3, lane, acc);
        if (TAIL) lc_mv_tail_arrive(p, bt, (float *)tail_sh, hsq);
    }
}

template <int T, int NC, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q8_kernel(const __grid_constant__ struct lc_mv_args p, unsigned smem_b) {
    lc_matvec_q8_body<T, NC, X>(p, smem_b);
}

template <int T, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q8_multi_kernel(const __grid_constant__ struct lc_mv_multi m, unsigned smem_b) {
    lc_matvec_q8_body<T, 1, X>(m.s[blockIdx.z], smem_b);
}

/* Dynamic shared memory of a q8 launch of 'nc' columns of K (0: read from global memory). */
template <class Q> static inline unsigned lc_qmv8_smem(int64_t K, int nc) {
    const int64_t bytes = K / Q::UE * lc_a8_ustride<Q>() * nc;
    return bytes <= LC_QMV8_SMEM_MAX ? (unsigned)bytes : 0;
}

/* Dynamic shared memory of a launch whose products have K = 'K' and 'nc' columns (0: the
 * activations stay in global memory), allowed for kernel 'f' on the backend's device once
 * ('set': the bytes allowed so far, per device id). */
static inline unsigned lc_qmv_smem(const struct lc_backend * be, const void * f, int64_t K, int nc, unsigned * set) {
    const int64_t bytes = lc_qmv_kp(K) * nc * 4;
    if (bytes > LC_QMV_SMEM_MAX) return 0;
    const int id = be->dev->id >= 0 && be->dev->id < 16 ? be->dev->id : 0;
    if (bytes > 48 * 1024 && (unsigned)bytes > set[id]) {
        if (cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        set[id] = (unsigned)bytes;
    }
    return (unsigned)bytes;
}

/* Blocks along x for M rows (SwiGLU: M rows of each matrix). */
static inline unsigned lc_qmv_blocks(const struct lc_mv_args & p) {
    const int64_t per_block = (p.a2 ? LC_QMV_ROWS / 2 : LC_QMV_ROWS) * LC_QMV_WARPS;
    return (unsigned)((p.M + per_block - 1) / per_block);
}

struct lc_qmv_one {
    const struct lc_backend * be;
    const struct lc_mv_args * p;
    int ncols;
    template <class Q> void run() {
        const void * f;
        if (p->tail.kind != LC_TAIL_NONE) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_TAIL>;
        else if (p->pre.parts) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_PRE>;
        else if (ncols == 1) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_PLAIN>;
        else if (ncols == 2) f = (const void *)lc_matvec_q_kernel<Q, 2, LC_MV_PLAIN>;
        else if (ncols == 3) f = (const void *)lc_matvec_q_kernel<Q, 3, LC_MV_PLAIN>;
        else f = (const void *)lc_matvec_q_kernel<Q, 4, LC_MV_PLAIN>;
        dim3 grid(lc_qmv_blocks(*p), (unsigned)(p->nbatch < 65535 ? p->nbatch : 65535), 1);
        static unsigned set[16];
        unsigned smem = lc_qmv_smem(be, f, p->K, p->tail.kind != LC_TAIL_NONE || p->pre.parts ? 1 : ncols, set);
        void * args[] = {(void *)p, &smem};
        lc_launch(be, f, grid, dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
    }
};

struct lc_qmv_multi {
    const struct lc_backend * be;
    const struct lc_mv_multi * m;
    int n;
    template <class Q> void run() {
        const void * f = m->s[0].pre.parts ? (const void *)lc_matvec_q_multi_kernel<Q, LC_MV_PRE> : (const void *)lc_matvec_q_multi_kernel<Q, LC_MV_PLAIN>;
        unsigned blocks = 0;
        for (int i = 0; i < n; i++) {
            const unsigned b = lc_qmv_blocks(m->s[i]);
            blocks = b > blocks ? b : blocks;
        }
        static unsigned set[16];
        unsigned smem = lc_qmv_smem(be, f, m->s[0].K, 1, set);
        void * args[] = {(void *)m, &smem};
        lc_launch(be, f, dim3(blocks, 1, (unsigned)n), dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
    }
};

/* The launches of the types with integer dot products (p.q8 set by the caller). */
template <int T> static void lc_qmv8_one(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    const void * f;
    int nc = ncols;
    if (p.tail.kind != LC_TAIL_NONE) f = (const void *)lc_matvec_q8_kernel<T, 1, LC_MV_TAIL>, nc = 1;
    else if (p.pre.parts) f = (const void *)lc_matvec_q8_kernel<T, 1, LC_MV_PRE>, nc = 1;
    else if (ncols == 1) f = (const void *)lc_matvec_q8_kernel<T, 1, LC_MV_PLAIN>;
    else if (ncols == 2) f = (const void *)lc_matvec_q8_kernel<T, 2, LC_MV_PLAIN>;
    else if (ncols == 3) f = (const void *)lc_matvec_q8_kernel<T, 3, LC_MV_PLAIN>;
    else f = (const void *)lc_matvec_q8_kernel<T, 4, LC_MV_PLAIN>;
    dim3 grid(lc_qmv_blocks(p), (unsigned)(p.nbatch < 65535 ? p.nbatch : 65535), 1);
    unsigned smem = lc_qmv8_smem<lc_q<T>>(p.K, nc);
    void * args[] = {(void *)&p, &smem};
    lc_launch(be, f, grid, dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
}

template <int T> static void lc_qmv8_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    const void * f = m.s[0].pre.parts ? (const void *)lc_matvec_q8_multi_kernel<T, LC_MV_PRE> : (const void *)lc_matvec_q8_multi_kernel<T, LC_MV_PLAIN>;
    unsigned blocks = 0;
    for (int i = 0; i < n; i++) {
        const unsigned b = lc_qmv_blocks(m.s[i]);
        blocks = b > blocks ? b : blocks;
    }
    unsigned smem = lc_qmv8_smem<lc_q<T>>(m.s[0].K, 1);
    void * args[] = {(void *)&m, &smem};
    lc_launch(be, f, dim3(blocks, 1, (unsigned)n), dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
}

template <bool Q8> struct lc_qmv_pick;
template <> struct lc_qmv_pick<true> {
    template <int T> static void one(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) { lc_qmv8_one<T>(be, p, ncols); }
    template <int T> static void multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) { lc_qmv8_multi<T>(be, m, n); }
};
template <> struct lc_qmv_pick<false> {
    template <int T> static void one(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
        struct lc_qmv_one f = {be, &p, ncols};
        f.run<lc_q<T>>();
    }
    template <int T> static void multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
        struct lc_qmv_multi f = {be, &m, n};
        f.run<lc_q<T>>();
    }
};

/* Queue one product (at most LC_MATVEC_MAX_COLS columns) / a several-product launch with weights of type T (cuda-matvec-q.cu's
 * dispatch); instantiated by LC_QMV_INSTANTIATE in the type's file, declared extern elsewhere. */
template <int T> void lc_qmv_one_t(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    lc_qmv_pick<lc_q8dot_on<T>::value>::template one<T>(be, p, ncols);
}
template <int T> void lc_qmv_multi_t(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    lc_qmv_pick<lc_q8dot_on<T>::value>::template multi<T>(be, m, n);
}

#define LC_QMV_INSTANTIATE(T)                                                                          \
    template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);
#define LC_QMV_EXTERN(T)                                                                                      \
    extern template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    extern template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);

#endif
