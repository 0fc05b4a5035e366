/* cuda-matvec-q.cuh -- the matrix-vector kernels for quantized weights (products of at most
 * LC_MATVEC_Q_MAX_COLS columns, a few per launch: token generation, a decode step of several
 * sequences). A warp per pair of rows (SwiGLU: a row of each matrix; rotation: a pair); each lane
 * reads whole units of blocks (cuda-quant.cuh: lane l takes units l, l + 32, ... of the row, so a
 * warp's loads cover consecutive bytes). The types with integer dot products (lc_q8dot,
 * cuda-quant-dot.cuh) multiply the unit's codes by 8-bit activations that the launch's first
 * kernel quantized, or the attention before it wrote (lc_mv_args.q8_in; lc_matvec_q8_body); the
 * others decode the unit into F32 runs and multiply them by the F32 activations (lc_matvec_q_body).
 * The launch description, the epilogues, tails and pre-norm are those of the float kernels
 * (cuda-matvec.cuh, cuda-matvec-dev.cuh), so every fusion the planner makes applies to quantized
 * weights too. The kernels of each type are instantiated
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

/* Rows (SwiGLU: of each matrix) per warp and warps per block of the quantized kernels: two rows
 * keep rotation pairs in one warp; the kernels with a tail take LC_QTAIL_WARPS warps (the
 * planner's shape: a block of one run of 32 rows writes that run's 8-bit record, lc_mv_tail.q8). */
#define LC_QMV_ROWS 2
#define LC_QMV_WARPS 4
static_assert(LC_QMV_ROWS == LC_TAIL_ROWS && LC_QMV_ROWS * LC_QTAIL_WARPS == 32, "the tail's kernel shape");
template <int X> static __host__ __device__ constexpr int lc_qmv_warps() { return X == LC_MV_TAIL ? LC_QTAIL_WARPS : LC_QMV_WARPS; }

/* The activations a block stages in shared memory: column j's element e at float
 * j * lc_qmv_kp(K) + (e / 32) * 36 + e % 32 -- 4 floats of padding per 32, so that lanes reading
 * the runs of consecutive units (32 elements apart) hit different banks. */
static __host__ __device__ __forceinline__ int64_t lc_qmv_kp(int64_t K) { return K / 32 * 36; }
#define LC_QMV_SMEM_MAX (200 * 1024) /* bytes of staged activations at most; beyond, they are read from global memory */

/* Rows a warp of a quantized kernel takes (SwiGLU: of each matrix). */
static __device__ __forceinline__ int64_t lc_qmv_warp_rows(const struct lc_mv_args & p) { return p.a2 ? LC_QMV_ROWS / 2 : LC_QMV_ROWS; }

/* A quantized kernel's start (W warps a block): the next kernel may launch (lc_pdl_trigger);
 * row0 = the first row of this thread's warp; false: the block has no rows (a shorter product of
 * a several-product launch; a block with a tail still takes part in the tail). */
template <int W> static __device__ __forceinline__ bool lc_qmv_first_row(const struct lc_mv_args & p, bool tail, int64_t & row0) {
    lc_pdl_trigger();
    row0 = ((int64_t)blockIdx.x * W + threadIdx.x / 32) * lc_qmv_warp_rows(p);
    return tail || (int64_t)blockIdx.x * W * lc_qmv_warp_rows(p) < p.M;
}

/* Batch (i2, i3)'s start in a quantized kernel: the row pointers a[] of the warp whose first row
 * is 'row0' (lc_mv_rows), every 128-byte line of those rows prefetched into L2 (a unit is at most
 * 105 bytes apart from the next lane's), so that the loads after find their bytes in L2 instead of
 * waiting for DRAM one unit at a time, and the wait for the previous kernel (once: lc_mv_wait;
 * constant weights are prefetched before it). */
template <class Q, int ROWS, bool PRE>
__device__ __forceinline__ void lc_qmv_start(const struct lc_mv_args & p, int64_t row0, int64_t i2, int64_t i3, int lane, const char * (&a)[ROWS],
                                             bool & waited, float & scale) {
    lc_mv_rows<ROWS>(p, row0, i2, i3, a);
    if (!waited && !p.a_const) lc_mv_wait<PRE>(p, waited, scale);
    for (int64_t u = lane; u < p.K / Q::UE; u += 32) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) asm volatile("prefetch.global.L2 [%0];" ::"l"(a[r] + (u / Q::NU) * Q::BS + (u % Q::NU) * Q::BS / Q::NU));
    }
    if (!waited) lc_mv_wait<PRE>(p, waited, scale);
}

/* Batch bt's end in a quantized kernel: the lanes' sums 'acc' summed over the warp, PRE: scaled
 * (and the norm's slice stored from the activations 'u'), written with what is fused
 * (lc_mv_finish), then the tail's arrival ('tail_sh': LC_MV_TAIL_SHARED bytes of shared memory)
 * and with p.tail.q8 the record of the block's run of u by its first warp ('u_sh': 32 floats of
 * shared memory; quantizing a run commutes with the pre-norm's positive scale, which the
 * products after apply to their sums, so the record is the one lc_a8_quant_kernel would write). */
template <int NC, int ROWS, int X>
__device__ __forceinline__ void lc_qmv_end(const struct lc_mv_args & p, int64_t row0, int64_t bt, int64_t i2, int64_t i3, int lane, float (&acc)[ROWS][NC],
                                           float scale, const char * u, float * tail_sh, float * u_sh) {
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int j = 0; j < NC; j++) acc[r][j] = lc_warp_sum(acc[r][j]);
    if (X == LC_MV_PRE) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
        if (p.pre.write && threadIdx.x < 32) lc_mv_pre_store(p, u, scale, (int64_t)lc_qmv_warps<X>() * lc_qmv_warp_rows(p), lane);
    }
    const float hsq = lc_mv_finish<NC, ROWS, X == LC_MV_TAIL>(p, row0, i2, i3, lane, acc, X == LC_MV_TAIL && p.tail.q8 ? u_sh : NULL);
    if (X == LC_MV_TAIL) {
        lc_mv_tail_arrive(p, bt, tail_sh, hsq); /* ends with a barrier: u_sh is whole */
        if (p.tail.q8 && threadIdx.x < 32) lc_a8_quant_run(u_sh[lane], lane, p.tail.q8 + (int64_t)blockIdx.x * LC_A8_RUN);
    }
}

/* The product, its epilogue and tail or pre-norm for weights of type Q (lc_q<TYPE>), NC columns.
 * Each block first copies the NC activation columns into shared memory (when they fit in
 * 'smem_b' bytes of dynamic shared memory, p.K * NC floats padded; 0: read from global memory),
 * so that the lanes' reads of whole units (32 elements apart from lane to lane) cost one
 * shared-memory wavefront per quarter warp instead of one cache line per lane. Rows past M are
 * clamped (read again, never written); every warp of a block with rows reaches the barriers. */
template <class Q, int NC, int X>
__device__ __forceinline__ void lc_matvec_q_body(const struct lc_mv_args & p, unsigned smem_b) {
    constexpr int ROWS = LC_QMV_ROWS;
    static_assert(X != LC_MV_PRE || NC == 1, "the pre-norm reads one column");
    int64_t row0;
    if (!lc_qmv_first_row<lc_qmv_warps<X>()>(p, X == LC_MV_TAIL, row0)) return;
    const int lane = threadIdx.x % 32;
    __shared__ float4 tail_sh[X == LC_MV_TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    __shared__ float u_sh[X == LC_MV_TAIL ? 32 : 1];
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
        lc_qmv_start<Q, ROWS, X == LC_MV_PRE>(p, row0, i2, i3, lane, a, waited, scale);
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3 + p.j0 * p.b_nb1;
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
        lc_qmv_end<NC, ROWS, X>(p, row0, bt, i2, i3, lane, acc, scale, b, (float *)tail_sh, u_sh);
    }
}

/* ------------------------------------------------------------------ 8-bit activations */

/* Quantizes the F32 activations b [K, N, ne2, ne3] (rows dense, K a multiple of 32) into lc_a8
 * runs at 'out': run r of column j, batch bt at ((bt * N + j) * K / 32 + r) * LC_A8_RUN bytes.
 * A warp per run: d = max|x| / 127, codes rounded to nearest (even). */
__global__ void lc_a8_quant_kernel(const char * b, int64_t K, int64_t N, int64_t ne2, int64_t nruns, int64_t b_nb1, int64_t b_nb2,
                                   int64_t b_nb3, char * out);

/* The staged activations of one column in shared memory: unit u (UE elements, UE / 32 runs back
 * to back) at u * lc_a8_ustride(UE) bytes -- 16 bytes of padding after units of an even number of
 * runs, so that the lanes' 16-byte reads of consecutive units fall in distinct banks. */
static __host__ __device__ __forceinline__ int lc_a8_ustride(int ue) { return ue / 32 * LC_A8_RUN + (ue / 32 % 2 == 0 ? 16 : 0); }
#define LC_QMV8_SMEM_MAX (47 * 1024) /* bytes of staged 8-bit activations at most (under the 48 KiB a launch gets without opting in); beyond, they are read from global memory */

/* Dynamic shared memory of a q8 launch of 'nc' staged columns of K, units of 'ue' elements (0:
 * the columns do not fit; the kernel reads the runs from global memory). */
static inline unsigned lc_qmv8_smem(int ue, int64_t K, int nc) {
    const int64_t bytes = K / ue * lc_a8_ustride(ue) * nc;
    return bytes <= LC_QMV8_SMEM_MAX ? (unsigned)bytes : 0;
}

/* The units lane, lane + 32, ... of the warp's rows a[] times NC columns of 8-bit activations at
 * 'act' (SH: staged in shared memory, columns 'cs' bytes apart, units lc_a8_ustride apart; else
 * global, columns p.q8_nb1 apart, units UE / 32 runs apart). */
template <int T, int NC, int ROWS, bool SH>
__device__ __forceinline__ void lc_qmv8_rows(const char * const (&a)[ROWS], const char * act, int64_t cs, int64_t nunits, int lane,
                                             float (&acc)[ROWS][NC]) {
    typedef lc_q<T> Q;
    const int64_t us = SH ? lc_a8_ustride(Q::UE) : Q::UE / 32 * LC_A8_RUN;
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

/* Q6_K's weights staged in shared memory. A lane's unit of a Q6_K row is 105 bytes from the next
 * lane's, so each of the unit's ~30 loads of 2-4 bytes from global memory touches ~26 sectors (the
 * products were bound by L1 requests: bench/results/cuda-quant.md, session 20). Instead the warp
 * copies LC_WS_BLOCKS blocks of each of its two rows at a time (a chunk) with 16-byte cp.async
 * copies (lanes on consecutive bytes) into LC_WS_ROW bytes of shared memory a row, and its lanes
 * read their units there: lanes 0..15 the first row's, 16..31 the second's. Each row has two
 * buffers: the copy of the next chunk runs while the lanes decode this one, so that a warp
 * always has bytes in flight -- which the tails' blocks of 16 warps, one a multiprocessor, need
 * (one buffer: the 4-warp kernels +8-15%, the tails 5-7.5% slower than unstaged; two: the tails
 * 5% faster too; bench/results/cuda-quant.md, sessions 21 and 22). */
#define LC_WS_BLOCKS 8
#define LC_WS_ROW 1696 /* LC_WS_BLOCKS * 210 bytes, after the first one's offset in its 16-byte line (< 16), rounded up to 16 */
static_assert(LC_WS_ROW % 16 == 0 && LC_WS_ROW >= LC_WS_BLOCKS * 210 + 14, "a chunk of blocks and its offset");
/* Bytes of staged weights a block of 'warps' warps takes for type T (0: the lanes read their
 * units from global memory): two buffers of each of a warp's two rows. */
template <int T> static __host__ __device__ constexpr unsigned lc_qmv_ws_bytes(int warps) {
    return T == LOOM_TYPE_Q6_K ? (unsigned)(warps * LC_QMV_ROWS * 2 * LC_WS_ROW) : 0u;
}

/* The end halves of a chunk that lc_ws_issue2 loaded into registers, stored by lc_ws_land. */
struct lc_ws_end {
    unsigned short h;
    char * dst;
    bool on;
};

/* Begins the copy of bytes [g[r], g[r] + n) (2-byte aligned, n even, 32 <= n <= LC_WS_BLOCKS *
 * 210) of global memory to s[r] + g[r] % 16, s[r] .. (16-byte aligned shared memory), r = 0, 1,
 * by the warp's 32 lanes: cp.async of the 16-byte lines inside each range (through L2, into
 * shared memory without registers), 2-byte loads of the ends; no byte outside the ranges is read.
 * lc_ws_land completes it. */
static __device__ __forceinline__ struct lc_ws_end lc_ws_issue2(const char * const (&g)[2], int n, char * const (&s)[2], int lane) {
    constexpr int MAXP = (2 * LC_WS_BLOCKS * 210 / 16 + 31) / 32; /* 16-byte pieces a lane at most */
    uintptr_t lo[2], base[2];
    int np[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uintptr_t g0 = (uintptr_t)g[r];
        lo[r] = (g0 + 15) & ~(uintptr_t)15;
        base[r] = g0 & ~(uintptr_t)15;
        np[r] = (int)((((g0 + n) & ~(uintptr_t)15) - lo[r]) / 16);
    }
#pragma unroll
    for (int k = 0; k < MAXP; k++) {
        const int i = lane + 32 * k, r = i >= np[0], ir = r ? i - np[0] : i;
        if (i < np[0] + np[1]) {
            const unsigned dst = (unsigned)__cvta_generic_to_shared((r ? s[1] : s[0]) + ((r ? lo[1] - base[1] : lo[0] - base[0]) + 16 * ir));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"((const uint4 *)(r ? lo[1] : lo[0]) + ir) : "memory");
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    /* the ends: lanes 8r .. 8r + 7 the halves before lo[r], 16 + 8r .. the halves after the lines */
    const bool er = (lane >> 3) & 1, tail = lane >> 4;
    const uintptr_t g0 = (uintptr_t)(er ? g[1] : g[0]), lr = er ? lo[1] : lo[0], br = er ? base[1] : base[0];
    const uintptr_t hp = (tail ? lr + 16 * (uintptr_t)(er ? np[1] : np[0]) : g0) + 2 * (lane & 7);
    struct lc_ws_end e;
    e.on = tail ? hp < g0 + n : hp < lr;
    e.h = e.on ? __ldg((const unsigned short *)hp) : 0;
    e.dst = (er ? s[1] : s[0]) + (hp - br);
    return e;
}

/* This lane's part of the chunk lc_ws_issue2 began, in shared memory (after a __syncwarp: the warp's). */
static __device__ __forceinline__ void lc_ws_land(const struct lc_ws_end & e) {
    if (e.on) *(unsigned short *)e.dst = e.h;
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* lc_qmv8_rows for Q6_K through staged weights ('ws': the warp's 4 * LC_WS_ROW bytes of shared
 * memory, chunk c of row r in buffer c % 2 at (2 * (c % 2) + r) * LC_WS_ROW): lane l takes unit
 * l % 16 of each chunk of the row l / 16. */
template <int NC, int ROWS, bool SH>
__device__ __forceinline__ void lc_qmv8_rows_ws(const char * const (&a)[ROWS], const char * act, int64_t cs, int64_t nunits, int lane,
                                                float (&acc)[ROWS][NC], char * ws) {
    typedef lc_q<LOOM_TYPE_Q6_K> Q;
    static_assert(ROWS == 2 && Q::NU == 2, "a half warp a row, two units a block");
    const int64_t us = SH ? lc_a8_ustride(Q::UE) : Q::UE / 32 * LC_A8_RUN, nblk = nunits / Q::NU;
    const int r = lane >> 4, l = lane & 15;
    float t[NC];
#pragma unroll
    for (int j = 0; j < NC; j++) t[j] = 0.0f;
    /* the blocks of the chunk from block b on; its copy into buffer 'buf' begun */
    const auto blocks = [&](int64_t b) { return nblk - b < LC_WS_BLOCKS ? (int)(nblk - b) : LC_WS_BLOCKS; };
    const auto issue = [&](int64_t b, int buf) {
        const char * const g[2] = {a[0] + b * Q::BS, a[1] + b * Q::BS};
        char * const s[2] = {ws + 2 * buf * LC_WS_ROW, ws + (2 * buf + 1) * LC_WS_ROW};
        return lc_ws_issue2(g, blocks(b) * Q::BS, s, lane);
    };
    lc_ws_land(issue(0, 0));
    __syncwarp();
    int buf = 0;
    for (int64_t b0 = 0; b0 < nblk; b0 += LC_WS_BLOCKS, buf ^= 1) {
        const int nb = blocks(b0);
        const bool more = b0 + LC_WS_BLOCKS < nblk;
        struct lc_ws_end e;
        e.on = false;
        if (more) e = issue(b0 + LC_WS_BLOCKS, buf ^ 1); /* into the buffer whose reads the last __syncwarp ended */
        if (l < nb * Q::NU) {
            const int64_t u = b0 * Q::NU + l;
            const char * ac[NC];
#pragma unroll
            for (int j = 0; j < NC; j++) ac[j] = act + j * cs + u * us;
            const char * blk = ws + (2 * buf + r) * LC_WS_ROW + ((uintptr_t)(a[r] + b0 * Q::BS) & 15) + (l / 2) * Q::BS;
            lc_q8dot<LOOM_TYPE_Q6_K>::template dot<SH, NC, true>(blk, l % 2, ac, t);
        }
        if (more) lc_ws_land(e);
        __syncwarp(); /* the next chunk in place for every lane; this one's buffer free */
    }
#pragma unroll
    for (int j = 0; j < NC; j++) {
        acc[0][j] += r ? 0.0f : t[j];
        acc[1][j] += r ? t[j] : 0.0f;
    }
}

/* The rows' products of type T: WS, through staged weights (Q6_K), else the lanes' loads of global memory. */
template <int T, int NC, int ROWS, bool SH, bool WS>
__device__ __forceinline__ void lc_qmv8_rows_t(const char * const (&a)[ROWS], const char * act, int64_t cs, int64_t nunits, int lane,
                                               float (&acc)[ROWS][NC], char * ws) {
    if constexpr (WS) lc_qmv8_rows_ws<NC, ROWS, SH>(a, act, cs, nunits, lane, acc, ws);
    else lc_qmv8_rows<T, NC, ROWS, SH>(a, act, cs, nunits, lane, acc);
}

/* lc_matvec_q_body for the types with integer dot products (lc_q8dot): the activations are
 * p.q8's 8-bit runs (the launch's first kernel wrote them). Dynamic shared memory ('smem_b'
 * bytes): first the staged weights of the types that have them (lc_qmv_ws_bytes), then, when
 * smem_b leaves room, the block's NC activation columns (else they are read from global memory).
 * WSON false: no staged weights (a tail on a device whose blocks cannot have them: lc_qmv_ws_fits). */
template <int T, int NC, int X, bool WSON>
__device__ __forceinline__ void lc_matvec_q8_body(const struct lc_mv_args & p, unsigned smem_b) {
    typedef lc_q<T> Q;
    constexpr int ROWS = LC_QMV_ROWS, RPU = Q::UE / 32;
    static_assert(X != LC_MV_PRE || NC == 1, "the pre-norm reads one column");
    int64_t row0;
    if (!lc_qmv_first_row<lc_qmv_warps<X>()>(p, X == LC_MV_TAIL, row0)) return;
    const int lane = threadIdx.x % 32;
    __shared__ float4 tail_sh[X == LC_MV_TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    __shared__ float u_sh[X == LC_MV_TAIL ? 32 : 1];
    extern __shared__ float4 lc_qmv_dyn[];
    constexpr unsigned wsb = WSON ? lc_qmv_ws_bytes<T>(lc_qmv_warps<X>()) : 0;
    char * ws = (char *)lc_qmv_dyn + (threadIdx.x / 32) * (wsb / lc_qmv_warps<X>());
    char * sb = (char *)lc_qmv_dyn + wsb;
    const bool staged = smem_b > wsb;
    const int64_t nunits = p.K / Q::UE, cs = nunits * lc_a8_ustride(Q::UE);
    bool waited = false;
    float scale = 1.0f;
    for (int64_t bt = blockIdx.y; bt < p.nbatch; bt += gridDim.y) {
        const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
        const char * a[ROWS];
        lc_qmv_start<Q, ROWS, X == LC_MV_PRE>(p, row0, i2, i3, lane, a, waited, scale);
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3 + p.j0 * p.b_nb1;
        const char * q8 = p.q8 + i2 * p.q8_nb2 + i3 * p.q8_nb3 + p.j0 * p.q8_nb1;
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
                    *(int4 *)(sb + j * cs + (run / RPU) * lc_a8_ustride(Q::UE) + (run % RPU) * LC_A8_RUN + (i % (LC_A8_RUN / 16)) * 16) = __ldg(src + i);
                }
            }
            __syncthreads();
            lc_qmv8_rows_t<T, NC, ROWS, true, (wsb > 0)>(a, sb, cs, nunits, lane, acc, ws);
        } else {
            lc_qmv8_rows_t<T, NC, ROWS, false, (wsb > 0)>(a, q8, p.q8_nb1, nunits, lane, acc, ws);
        }
        lc_qmv_end<NC, ROWS, X>(p, row0, bt, i2, i3, lane, acc, scale, b, (float *)tail_sh, u_sh);
    }
}

/* ------------------------------------------------------------------ the launches */

/* What one kernel was allowed and refused of dynamic shared memory beyond the 48 KiB every launch
 * gets, per device id (lc_smem_allow; 0: not asked yet). */
struct lc_smem_set {
    unsigned ok[16], no[16];
};

/* True when kernel 'f' may take 'bytes' of dynamic shared memory on the backend's device. Beyond 48
 * KiB the device is asked once: 'set' keeps the most it allowed and the least it refused, so a
 * launch after a refusal asks nothing (a tail's staged weights on a device of 99 KiB a block). */
static inline bool lc_smem_allow(const struct lc_backend * be, const void * f, unsigned bytes, struct lc_smem_set * set) {
    const int id = be->dev->id >= 0 && be->dev->id < 16 ? be->dev->id : 0;
    if (bytes <= 48 * 1024 || bytes <= set->ok[id]) return true;
    if (set->no[id] && bytes >= set->no[id]) return false;
    if (cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        set->no[id] = bytes;
        return false;
    }
    set->ok[id] = bytes;
    return true;
}

/* Dynamic shared memory of an F32-activation launch whose products have K = 'K' and 'nc' columns
 * (0: the activations stay in global memory), allowed for kernel 'f' on the backend's device
 * (lc_smem_allow's 'set'). */
static inline unsigned lc_qmv_smem(const struct lc_backend * be, const void * f, int64_t K, int nc, struct lc_smem_set * set) {
    const int64_t bytes = lc_qmv_kp(K) * nc * 4;
    return bytes <= LC_QMV_SMEM_MAX && lc_smem_allow(be, f, (unsigned)bytes, set) ? (unsigned)bytes : 0;
}

/* The two kernel families: F32 activations for weights of type Q (lc_qmv_f32<lc_q<T>>), 8-bit
 * activations and integer dot products for type T (lc_qmv_i8<T>, the lc_q8dot types); 'body'
 * computes NC columns (at most LC_MATVEC_MAX_COLS), 'smem' sizes the dynamic shared memory of a
 * launch of blocks of 'warps' warps. */
template <class Q> struct lc_qmv_f32 {
    static const int TYPE = -1; /* no register cap (lc_qmv_min_blocks) */
    template <int NC, int X, bool> static __device__ __forceinline__ void body(const struct lc_mv_args & p, unsigned smem_b) { lc_matvec_q_body<Q, NC, X>(p, smem_b); }
    static unsigned smem(const struct lc_backend * be, const void * f, int64_t K, int nc, int, struct lc_smem_set * set, bool) { return lc_qmv_smem(be, f, K, nc, set); }
};
template <int T> struct lc_qmv_i8 {
    static const int TYPE = T;
    template <int NC, int X, bool WSON> static __device__ __forceinline__ void body(const struct lc_mv_args & p, unsigned smem_b) {
        lc_matvec_q8_body<T, NC, X, WSON>(p, smem_b);
    }
    /* one column of the legacy blocks (whole 32-element units) reads its runs from global memory:
     * faster than staging them (7B tg128 Q4_0 +0-4%, Q8_0 +2-3% on an H200; the K-quants lose 2-3%:
     * bench/results/cuda-quant.md, session 15) */
    static unsigned smem(const struct lc_backend * be, const void * f, int64_t K, int nc, int warps, struct lc_smem_set * set, bool wson) {
        const bool legacy = T == LOOM_TYPE_Q4_0 || T == LOOM_TYPE_Q4_1 || T == LOOM_TYPE_Q5_0 || T == LOOM_TYPE_Q5_1 || T == LOOM_TYPE_Q8_0;
        const unsigned act = legacy && nc == 1 ? 0 : lc_qmv8_smem(lc_q<T>::UE, K, nc), ws = wson ? lc_qmv_ws_bytes<T>(warps) : 0;
        if (ws == 0 || lc_smem_allow(be, f, ws + act, set)) return ws + act;
        return ws; /* the activations from global memory (lc_qmv_ws_fits allowed the staged weights) */
    }
};
template <bool C, class A, class B> struct lc_qmv_if { typedef A type; };
template <class A, class B> struct lc_qmv_if<false, A, B> { typedef B type; };
template <int T> struct lc_qmv_family { typedef typename lc_qmv_if<lc_q8dot_on<T>::value, lc_qmv_i8<T>, lc_qmv_f32<lc_q<T>>>::type type; };

/* The blocks a multiprocessor that __launch_bounds__ asks for, for the kernels of family B (its
 * TYPE) with 'nc' columns: the one-column kernels of Q4_K are capped at 80 registers a thread (6
 * blocks of 4 warps), those of Q6_K at 128 (4 blocks); left to itself the compiler took 96-128
 * and 128-168 (3-5 blocks), and the capped kernels stream faster (measured on an H200:
 * bench/cuda-notes.md, session 13). The other types and the kernels of several columns keep the
 * compiler's choice (1: no cap). */
static constexpr int lc_qmv_min_blocks(int type, int nc) {
    return nc != 1 ? 0 : type == LOOM_TYPE_Q4_K ? 6 : type == LOOM_TYPE_Q6_K ? 4 : 0;
}

template <class B, int NC, int X, bool WSON = true>
__global__ void __launch_bounds__(32 * lc_qmv_warps<X>(), X == LC_MV_TAIL ? 1 : lc_qmv_min_blocks(B::TYPE, NC)) lc_qmv_kernel(const __grid_constant__ struct lc_mv_args p, unsigned smem_b) {
    B::template body<NC, X, WSON>(p, smem_b);
}

template <class B, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS, lc_qmv_min_blocks(B::TYPE, 1)) lc_qmv_multi_kernel(const __grid_constant__ struct lc_mv_multi m, unsigned smem_b) {
    B::template body<1, X, true>(m.s[blockIdx.z], smem_b);
}

/* Warps per block of the kernel that computes 'p' (lc_qmv_warps of its shape). */
static inline int lc_qmv_block_warps(const struct lc_mv_args & p) { return p.tail.kind != LC_TAIL_NONE ? LC_QTAIL_WARPS : LC_QMV_WARPS; }

/* Blocks along x for M rows (SwiGLU: M rows of each matrix). */
static inline unsigned lc_qmv_blocks(const struct lc_mv_args & p) {
    const int64_t per_block = (p.a2 ? LC_QMV_ROWS / 2 : LC_QMV_ROWS) * lc_qmv_block_warps(p);
    return (unsigned)((p.M + per_block - 1) / per_block);
}

/* Whether kernel f of family B, blocks of 'warps' warps, may have its staged weights
 * (lc_qmv_ws_bytes; 'set' as lc_smem_allow's): a tail's 106 KiB are more than the blocks of some
 * devices may take (99 KiB on compute capability 8.6 and 8.9). */
template <class B> static bool lc_qmv_ws_fits(const struct lc_backend * be, const void * f, int warps, struct lc_smem_set * set) {
    const unsigned ws = lc_qmv_ws_bytes<B::TYPE>(warps);
    return ws == 0 || lc_smem_allow(be, f, ws, set);
}

/* Queues kernel f of family B (blocks of 'warps' warps; nc staged columns of K; 'set': f's, as
 * lc_smem_allow's; wson: f has staged weights) on 'grid',
 * with 'desc' its launch description. */
template <class B>
static void lc_qmv_go(const struct lc_backend * be, const void * f, dim3 grid, int warps, int64_t K, int nc, struct lc_smem_set * set, const void * desc,
                      bool wson = true) {
    unsigned smem = B::smem(be, f, K, nc, warps, set, wson);
    void * args[] = {(void *)desc, &smem};
    lc_launch(be, f, grid, dim3(32 * warps, 1, 1), args, smem);
}

/* One product of 'ncols' columns (1 .. LC_MATVEC_MAX_COLS; a tail or pre-norm: 1). */
template <class B> static void lc_qmv_one(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    static struct lc_smem_set set[7]; /* per kernel below */
    const void * f;
    int k, nc = ncols;
    bool wson = true;
    if (p.tail.kind != LC_TAIL_NONE) {
        f = (const void *)lc_qmv_kernel<B, 1, LC_MV_TAIL>, k = 0, nc = 1;
        if constexpr (lc_qmv_ws_bytes<B::TYPE>(LC_QTAIL_WARPS) > 0) {
            if (!lc_qmv_ws_fits<B>(be, f, LC_QTAIL_WARPS, &set[0])) f = (const void *)lc_qmv_kernel<B, 1, LC_MV_TAIL, false>, k = 6, wson = false;
        }
    } else if (p.pre.parts) f = (const void *)lc_qmv_kernel<B, 1, LC_MV_PRE>, k = 1, nc = 1;
    else if (ncols == 1) f = (const void *)lc_qmv_kernel<B, 1, LC_MV_PLAIN>, k = 2;
    else if (ncols == 2) f = (const void *)lc_qmv_kernel<B, 2, LC_MV_PLAIN>, k = 3;
    else if (ncols == 3) f = (const void *)lc_qmv_kernel<B, 3, LC_MV_PLAIN>, k = 4;
    else f = (const void *)lc_qmv_kernel<B, 4, LC_MV_PLAIN>, k = 5, nc = 4;
    lc_qmv_go<B>(be, f, dim3(lc_qmv_blocks(p), (unsigned)(p.nbatch < 65535 ? p.nbatch : 65535), 1), lc_qmv_block_warps(p), p.K, nc, &set[k], &p, wson);
}

/* The n one-column products of 'm' in one launch (blockIdx.z: the product). */
template <class B> static void lc_qmv_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    static struct lc_smem_set set[2];
    const bool pre = m.s[0].pre.parts != NULL;
    const void * f = pre ? (const void *)lc_qmv_multi_kernel<B, LC_MV_PRE> : (const void *)lc_qmv_multi_kernel<B, LC_MV_PLAIN>;
    unsigned blocks = 0;
    for (int i = 0; i < n; i++) {
        const unsigned b = lc_qmv_blocks(m.s[i]);
        blocks = b > blocks ? b : blocks;
    }
    lc_qmv_go<B>(be, f, dim3(blocks, 1, (unsigned)n), LC_QMV_WARPS, m.s[0].K, 1, &set[pre], &m);
}

/* Queue one product (at most LC_MATVEC_MAX_COLS columns) / a several-product launch with
 * weights of type T (cuda-matvec-q.cu's dispatch); instantiated by LC_QMV_INSTANTIATE in the type's file, declared extern elsewhere. */
template <int T> void lc_qmv_one_t(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    lc_qmv_one<typename lc_qmv_family<T>::type>(be, p, ncols);
}
template <int T> void lc_qmv_multi_t(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    lc_qmv_multi<typename lc_qmv_family<T>::type>(be, m, n);
}

#define LC_QMV_INSTANTIATE(T)                                                                          \
    template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);
#define LC_QMV_EXTERN(T)                                                                                      \
    extern template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    extern template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);

#endif
