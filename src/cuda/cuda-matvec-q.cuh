/* cuda-matvec-q.cuh -- the matrix-vector kernels for quantized weights (products of at most
 * LC_MATVEC_MAX_COLS columns: token generation). A warp per pair of rows (SwiGLU: a row of each
 * matrix; rotation: a pair) in a persistent grid; the warp copies its rows' bytes into a ring of
 * shared memory with coalesced 16-byte loads, each lane decodes whole units of blocks from there
 * (cuda-quant.cuh: lane l takes unit l of each stage of 32 units) in registers and multiplies
 * them by the F32 activations staged in shared memory, F32 sums. The launch description, the
 * epilogues, tails and pre-norm are those of the float kernels (cuda-matvec.cuh,
 * cuda-matvec-dev.cuh), so every fusion the planner makes applies to quantized weights too.
 * The kernels of each type are instantiated in a file of their own (cuda-matvec-q-*.cu, built in
 * parallel: LC_QMV_INSTANTIATE); cuda-matvec-q.cu chooses by type. */
#ifndef LOOM_CUDA_MATVEC_Q_CUH
#define LOOM_CUDA_MATVEC_Q_CUH

#include "cuda-matvec-dev.cuh"
#include "cuda-mulmat.cuh"
#include "cuda-quant.cuh"

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
 * keep rotation pairs in one warp, and a block's group of rows is the tail's (LC_TAIL_ROWS/WARPS:
 * the planner sizes RMS_PART's partial sums by it). */
#define LC_QMV_ROWS 2
#define LC_QMV_WARPS 4
static_assert(LC_QMV_ROWS == LC_TAIL_ROWS && LC_QMV_WARPS == LC_TAIL_WARPS, "the tail's kernel shape");

/* The activations a block stages in shared memory (weights of type Q): column j's element e at
 * float j * kp(K) + at(e / 32) + e % 32 -- 4 floats of padding per run of 32, and for units of R > 1
 * runs 4 more per unit, so that the lanes' 16-byte reads (lane l: runs R l .. R l + R - 1, 9 R + 1
 * 16-byte words apart, an odd number) hit different banks in each quarter warp. */
template <class Q> struct lc_qmv_act {
    static const int R = Q::UE / 32;
    static __host__ __device__ __forceinline__ int64_t kp(int64_t K) { return K / 32 * 36 + (R > 1 ? K / Q::UE * 4 : 0); }
    static __device__ __forceinline__ int64_t at(int64_t run) { return run * 36 + (R > 1 ? run / R * 4 : 0); }
};
static __host__ __device__ __forceinline__ int64_t lc_qmv_kp(int64_t K) { return K / 32 * 36; } /* EXPERIMENT C's layout */
#define LC_QMV_SMEM_MAX (220 * 1024) /* dynamic shared memory at most (staged activations and the ring); beyond, the activations are read from global memory */

/* The ring through which a warp streams its rows (type Q): a stage is 32 units of each row (a unit
 * a lane), SB bytes of the row, copied with coalesced 16-byte cp.async from the 16-byte aligned
 * address at or before the stage's start into a slot of SLOT bytes (the copy keeps the address's
 * alignment modulo 16, so the decoders read the slot as they would read global memory). STAGES
 * slots per row, STAGES - 1 stages in flight while one is decoded: about 2-7 KB per warp. */
template <class Q> struct lc_qmv_ring {
    static const int SB = 32 * Q::BS / Q::NU, SLOT = SB + 16;
    static const int STAGES = SB <= 800 ? 4 : SB <= 1800 ? 3 : 2;
    static const int WARP_BYTES = STAGES * LC_QMV_ROWS * SLOT;
    static const int BYTES = LC_QMV_WARPS * WARP_BYTES + 16; /* a block's ring; 16 bytes for lc_sld's last word */
    static_assert(SB % 16 == 0, "a stage keeps the rows' alignment modulo 16");
};

/* A 16-byte copy global -> shared of which only the first n (1..16) bytes are read, the rest
 * zero-filled (cp.async's source size): no byte past a row's end is read. */
static __device__ __forceinline__ void lc_cp_async16_n(char * smem, const char * g, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "r"(n) : "memory");
#else
    for (int i = 0; i < 16; i++) smem[i] = i < n ? g[i] : 0;
#endif
}

/* The product, its epilogue and tail or pre-norm for weights of type Q (lc_q<TYPE>), NC columns.
 * Block x computes the groups of rows (LC_QMV_WARPS * LC_QMV_ROWS rows; SwiGLU: half as many of
 * each matrix) x, x + gridDim.x, ... one after another (a persistent grid; one group per block
 * for the tails that count arrivals), warp w the rows 2w, 2w + 1 of a group. Each warp streams its
 * rows' bytes through its ring (lc_qmv_ring: coalesced loads, the next group's first stages in
 * flight while a group is finished), lane l decodes unit l of each stage from shared memory and
 * multiplies it by the F32 activations, F32 sums. The block first copies the NC activation
 * columns into shared memory ('act_b' bytes at the start of the dynamic shared memory, p.K * NC
 * floats padded; 0: read from global memory). Rows past M are clamped (read again, never
 * written); every warp of a block has the same number of stages and reaches the barriers. */
template <class Q, int NC, int X>
__device__ __forceinline__ void lc_matvec_q_body(const struct lc_mv_args & p, unsigned act_b) {
    constexpr bool TAIL = X == LC_MV_TAIL, PRE = X == LC_MV_PRE;
    constexpr int ROWS = LC_QMV_ROWS, WARPS = LC_QMV_WARPS;
    typedef lc_qmv_ring<Q> R;
    constexpr int S = R::STAGES;
    static_assert(!PRE || NC == 1, "the pre-norm reads one column");
    lc_pdl_trigger();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t rpw = p.a2 ? ROWS / 2 : ROWS, rpb = rpw * WARPS; /* rows of the result per warp and per group */
    const int64_t ngroups = (p.M + rpb - 1) / rpb;
    if ((int64_t)blockIdx.x >= ngroups) return; /* the whole block (a shorter product of a launch) */
    const int mine = (int)((ngroups - 1 - blockIdx.x) / gridDim.x + 1);
    __shared__ float4 tail_sh[TAIL ? LC_MV_TAIL_SHARED / 16 : 1];
    extern __shared__ float4 lc_qmv_dyn[];
    float * sb = (float *)lc_qmv_dyn;
    char * ring = (char *)lc_qmv_dyn + act_b + warp * R::WARP_BYTES;
    const bool staged = act_b > 0;
    const int nunits = (int)(p.K / Q::UE), nstage = (nunits + 31) / 32, total = mine * nstage;
    const int64_t kp = lc_qmv_act<Q>::kp(p.K), rowb = p.K / Q::QK * Q::BS;
    const bool bal = staged || (((uintptr_t)p.b | (uintptr_t)p.b_nb1) & 15) == 0;
    bool waited = false;
    float scale = 1.0f;
    for (int64_t bt = blockIdx.y; bt < p.nbatch; bt += gridDim.y) {
        const int64_t i2 = bt % p.ne2, i3 = bt / p.ne2;
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3;
        /* the first row of this warp in the block's group number g (0 .. mine - 1), and the
         * warp's row r there (rows past M clamped; SwiGLU: the second of a2) */
        auto first_row = [&](int g) { return (((int64_t)blockIdx.x + (int64_t)g * gridDim.x) * WARPS + warp) * rpw; };
        const int64_t boff = (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
        auto row_ptr = [&](int g, int r) {
            const int64_t want = first_row(g) + (p.a2 ? 0 : r), row = want < p.M ? want : p.M - 1;
            return (p.a2 && r ? p.a2 : p.a) + boff + row * p.a_nb1;
        };
        int ig = 0, is = 0; /* the group and stage issued next */
        auto issue = [&](int slot) {
            const int64_t done = (int64_t)is * R::SB, left = rowb - done;
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                const char * st = row_ptr(ig, r) + done;
                const int off = (int)((uintptr_t)st & 15), n = off + (int)(left < R::SB ? left : R::SB);
                const char * g = st - off;
                char * dst = ring + (slot * ROWS + r) * R::SLOT;
                for (int c = 16 * lane; c < n; c += 16 * 32) lc_cp_async16_n(dst + c, g + c, n - c < 16 ? n - c : 16);
            }
            lc_cp_async_commit();
            if (++is == nstage) {
                is = 0;
                ig++;
            }
        };
        int issued = 0;
        if (!waited && !p.a_const) lc_mv_wait<PRE>(p, waited, scale);
#pragma unroll
        for (int s = 0; s < S - 1; s++) { /* constant weights: before the wait for the previous kernel */
            if (issued < total) issue(issued++);
            else lc_cp_async_commit(); /* an empty group keeps the count */
        }
        if (!waited) lc_mv_wait<PRE>(p, waited, scale);
        if (staged) {
            __syncthreads(); /* the previous batch's reads are done */
#pragma unroll
            for (int j = 0; j < NC; j++) {
                const char * bj = b + j * p.b_nb1;
                float * sj = sb + j * kp;
                if ((((uintptr_t)bj) & 15) == 0) { /* UN loads in flight per thread */
                    constexpr int UN = 8, NT = 32 * WARPS;
                    const int n4 = (int)(p.K / 4);
                    for (int i0 = 0; i0 < n4; i0 += UN * NT) {
                        float4 v[UN];
#pragma unroll
                        for (int k = 0; k < UN; k++) {
                            const int i = i0 + k * NT + threadIdx.x;
                            if (i < n4) v[k] = __ldg((const float4 *)bj + i);
                        }
#pragma unroll
                        for (int k = 0; k < UN; k++) {
                            const int i = i0 + k * NT + threadIdx.x;
                            if (i < n4) *(float4 *)(sj + lc_qmv_act<Q>::at(i / 8) + 4 * (i % 8)) = v[k];
                        }
                    }
                } else {
                    for (int64_t e = threadIdx.x; e < p.K; e += blockDim.x) sj[lc_qmv_act<Q>::at(e / 32) + e % 32] = __ldg((const float *)bj + e);
                }
            }
            __syncthreads();
        }
        float acc[ROWS][NC];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int j = 0; j < NC; j++) acc[r][j] = 0.0f;
        int dg = 0, ds = 0; /* the group and stage decoded */
        int off[ROWS]; /* the rows' alignment modulo 16 (their stages' offsets in the slots) */
#pragma unroll
        for (int r = 0; r < ROWS; r++) off[r] = (int)((uintptr_t)row_ptr(0, r) & 15);
        for (int i = 0; i < total; i++) {
            lc_cp_async_wait<S - 2>(); /* stage i has landed (this lane's copies) */
            __syncwarp();              /* ... and every lane's; stage i - 1's slot is read */
            if (issued < total) issue(issued++ % S);
            else lc_cp_async_commit();
            const char * slot = ring + (i % S) * ROWS * R::SLOT;
            const int u = ds * 32 + lane;
            if (u < nunits) {
                const int64_t blk = u / Q::NU;
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    Q::template unit<lc_sld>(slot + r * R::SLOT + off[r] + (lane / Q::NU) * Q::BS, u % Q::NU, [&](int e0, const float (&x)[32]) {
                        const int64_t run = (blk * Q::QK + e0) / 32;
#pragma unroll
                        for (int j = 0; j < NC; j++) {
                            const float * bj = staged ? sb + j * kp + lc_qmv_act<Q>::at(run) : (const float *)(b + j * p.b_nb1) + run * 32;
                            acc[r][j] += lc_dot32(x, bj, bal, staged);
                        }
                    });
                }
            }
            if (++ds < nstage) continue;
            /* group dg is summed */
#pragma unroll
            for (int r = 0; r < ROWS; r++)
#pragma unroll
                for (int j = 0; j < NC; j++) acc[r][j] = lc_warp_sum(acc[r][j]);
            if (PRE) {
#pragma unroll
                for (int r = 0; r < ROWS; r++) acc[r][0] *= scale;
            }
            const float hsq = lc_mv_finish<NC, ROWS, TAIL>(p, first_row(dg), i2, i3, lane, acc);
            if (TAIL) lc_mv_tail_arrive(p, bt, (float *)tail_sh, hsq, (int64_t)blockIdx.x + (int64_t)dg * gridDim.x);
#pragma unroll
            for (int r = 0; r < ROWS; r++)
#pragma unroll
                for (int j = 0; j < NC; j++) acc[r][j] = 0.0f;
            ds = 0;
            if (++dg < mine) {
#pragma unroll
                for (int r = 0; r < ROWS; r++) off[r] = (int)((uintptr_t)row_ptr(dg, r) & 15);
            }
        }
        lc_cp_async_wait<0>();
        __syncwarp(); /* the ring is free for the next batch */
        if (PRE && p.pre.write && threadIdx.x < 32) lc_mv_pre_store(p, b, scale, rpb, lane);
    }
}

template <class Q, int NC, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_kernel(const __grid_constant__ struct lc_mv_args p, unsigned act_b) {
    lc_matvec_q_body<Q, NC, X>(p, act_b);
}

template <class Q, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_multi_kernel(const __grid_constant__ struct lc_mv_multi m, unsigned act_b) {
    lc_matvec_q_body<Q, 1, X>(m.s[blockIdx.z], act_b);
}

/* EXPERIMENT (temporary, removed after the measurement): LOOM_QMV_EXP=B one group a block,
 * C the previous kernel (main's body). */
static inline int lc_qmv_exp(void) {
    static int v = -1;
    if (v < 0) {
        const char * e = getenv("LOOM_QMV_EXP");
        v = e && e[0] == 'B' ? 1 : e && e[0] == 'C' ? 2 : 0;
    }
    return v;
}
template <class Q, int NC, int X>
__device__ __forceinline__ void lc_matvec_q_old_body(const struct lc_mv_args & p, unsigned smem_b) {
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
        const char * b = p.b + i2 * p.b_nb2 + i3 * p.b_nb3;
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
        if (TAIL) lc_mv_tail_arrive(p, bt, (float *)tail_sh, hsq, blockIdx.x);
    }
}

template <class Q, int NC, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_old_kernel(const __grid_constant__ struct lc_mv_args p, unsigned smem_b) {
    lc_matvec_q_old_body<Q, NC, X>(p, smem_b);
}

template <class Q, int X>
__global__ void __launch_bounds__(32 * LC_QMV_WARPS) lc_matvec_q_old_multi_kernel(const __grid_constant__ struct lc_mv_multi m, unsigned smem_b) {
    lc_matvec_q_old_body<Q, 1, X>(m.s[blockIdx.z], smem_b);
}

/* What a kernel remembers per device (one static per instantiation): the dynamic shared memory
 * allowed for it so far, and its blocks per multiprocessor for the last two sizes asked. */
struct lc_qmv_state {
    unsigned allowed[16];
    unsigned occ_smem[16][2];
    int occ[16][2];
};

/* Dynamic shared memory of a launch of kernel 'f' (ring of 'ring' bytes) whose products stage
 * 'kp' floats per column (lc_qmv_act) and have 'nc' columns, allowed for it on the backend's device; *act_b: the staged
 * activations' bytes (0: they stay in global memory). Returns 0 when not even the ring fits. */
static inline unsigned lc_qmv_smem(const struct lc_backend * be, const void * f, int64_t kp, int nc, unsigned ring, unsigned * act_b,
                                   struct lc_qmv_state * st) {
    const int64_t act = kp * nc * 4;
    *act_b = act + ring <= LC_QMV_SMEM_MAX ? (unsigned)act : 0;
    const unsigned bytes = *act_b + ring;
    const int id = be->dev->id >= 0 && be->dev->id < 16 ? be->dev->id : 0;
    if (bytes > 48 * 1024 && bytes > st->allowed[id]) {
        if (cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            *act_b = 0;
            return ring;
        }
        st->allowed[id] = bytes;
    }
    return bytes;
}

/* Blocks along x for 'groups' groups of rows in each of 'nseg' products (blockIdx.z): one group a
 * block when 'persist' is false, else no more than fit the device at once (its blocks per
 * multiprocessor for 'smem' asked once per size), nor than the backend's mv_blocks option when
 * that is set (tests), spread so that every block but the last has the same number of groups. */
static inline unsigned lc_qmv_grid(const struct lc_backend * be, const void * f, unsigned smem, int64_t groups, int nseg, bool persist,
                                   struct lc_qmv_state * st) {
    if (!persist) return (unsigned)groups;
    const int id = be->dev->id >= 0 && be->dev->id < 16 ? be->dev->id : 0;
    int k = st->occ_smem[id][0] == smem ? 0 : st->occ_smem[id][1] == smem ? 1 : -1, occ = 0;
    if (k >= 0) {
        occ = st->occ[id][k];
    } else {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, 32 * LC_QMV_WARPS, smem) != cudaSuccess || occ <= 0) {
            (void)cudaGetLastError();
            occ = 1;
        }
        st->occ_smem[id][1] = st->occ_smem[id][0], st->occ[id][1] = st->occ[id][0];
        st->occ_smem[id][0] = smem, st->occ[id][0] = occ;
    }
    int64_t slots = (int64_t)occ * be->dev->sm_count / nseg;
    if (be->opts.mv_blocks > 0 && slots > be->opts.mv_blocks) slots = be->opts.mv_blocks;
    if (slots < 1) slots = 1;
    const int64_t per = (groups + slots - 1) / slots;
    return (unsigned)((groups + per - 1) / per);
}

/* Groups of rows of product p (LC_QMV_WARPS warps of LC_QMV_ROWS rows; SwiGLU: half of them of each matrix). */
static inline int64_t lc_qmv_groups(const struct lc_mv_args & p) {
    const int64_t per = (p.a2 ? LC_QMV_ROWS / 2 : LC_QMV_ROWS) * LC_QMV_WARPS;
    return (p.M + per - 1) / per;
}

struct lc_qmv_one {
    const struct lc_backend * be;
    const struct lc_mv_args * p;
    int ncols;
    template <class Q> void run() {
        const void * f;
        static struct lc_qmv_state st[6];
        int k;
        if (p->tail.kind != LC_TAIL_NONE) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_TAIL>, k = 0;
        else if (p->pre.parts) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_PRE>, k = 1;
        else if (ncols == 1) f = (const void *)lc_matvec_q_kernel<Q, 1, LC_MV_PLAIN>, k = 2;
        else if (ncols == 2) f = (const void *)lc_matvec_q_kernel<Q, 2, LC_MV_PLAIN>, k = 3;
        else if (ncols == 3) f = (const void *)lc_matvec_q_kernel<Q, 3, LC_MV_PLAIN>, k = 4;
        else f = (const void *)lc_matvec_q_kernel<Q, 4, LC_MV_PLAIN>, k = 5;
        unsigned act_b;
        if (lc_qmv_exp() == 2 && k <= 2) {
            static struct lc_qmv_state so[3];
            const void * fo = k == 0 ? (const void *)lc_matvec_q_old_kernel<Q, 1, LC_MV_TAIL> : k == 1 ? (const void *)lc_matvec_q_old_kernel<Q, 1, LC_MV_PRE> : (const void *)lc_matvec_q_old_kernel<Q, 1, LC_MV_PLAIN>;
            const unsigned sm = lc_qmv_smem(be, fo, lc_qmv_kp(p->K), 1, 0, &act_b, &so[k]);
            dim3 grid((unsigned)lc_qmv_groups(*p), (unsigned)(p->nbatch < 65535 ? p->nbatch : 65535), 1);
            void * args[] = {(void *)p, &act_b};
            lc_launch(be, fo, grid, dim3(32 * LC_QMV_WARPS, 1, 1), args, sm);
            return;
        }
        const unsigned smem = lc_qmv_smem(be, f, lc_qmv_act<Q>::kp(p->K), k <= 2 ? 1 : ncols, lc_qmv_ring<Q>::BYTES, &act_b, &st[k]);
        /* the tails that count the blocks' arrivals take one group a block */
        const bool persist = (p->tail.kind == LC_TAIL_NONE || p->tail.kind == LC_TAIL_RMS_PART) && lc_qmv_exp() == 0;
        dim3 grid(lc_qmv_grid(be, f, smem, lc_qmv_groups(*p), 1, persist, &st[k]), (unsigned)(p->nbatch < 65535 ? p->nbatch : 65535), 1);
        void * args[] = {(void *)p, &act_b};
        lc_launch(be, f, grid, dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
    }
};

struct lc_qmv_multi {
    const struct lc_backend * be;
    const struct lc_mv_multi * m;
    int n;
    template <class Q> void run() {
        static struct lc_qmv_state st[2];
        const int k = m->s[0].pre.parts ? 1 : 0;
        const void * f = k ? (const void *)lc_matvec_q_multi_kernel<Q, LC_MV_PRE> : (const void *)lc_matvec_q_multi_kernel<Q, LC_MV_PLAIN>;
        int64_t groups = 0;
        for (int i = 0; i < n; i++) {
            const int64_t g = lc_qmv_groups(m->s[i]);
            groups = g > groups ? g : groups;
        }
        unsigned act_b;
        if (lc_qmv_exp() == 2) {
            static struct lc_qmv_state so[2];
            const void * fo = k ? (const void *)lc_matvec_q_old_multi_kernel<Q, LC_MV_PRE> : (const void *)lc_matvec_q_old_multi_kernel<Q, LC_MV_PLAIN>;
            const unsigned sm = lc_qmv_smem(be, fo, lc_qmv_kp(m->s[0].K), 1, 0, &act_b, &so[k]);
            void * args[] = {(void *)m, &act_b};
            lc_launch(be, fo, dim3((unsigned)groups, 1, (unsigned)n), dim3(32 * LC_QMV_WARPS, 1, 1), args, sm);
            return;
        }
        const unsigned smem = lc_qmv_smem(be, f, lc_qmv_act<Q>::kp(m->s[0].K), 1, lc_qmv_ring<Q>::BYTES, &act_b, &st[k]);
        void * args[] = {(void *)m, &act_b};
        lc_launch(be, f, dim3(lc_qmv_grid(be, f, smem, groups, n, lc_qmv_exp() == 0, &st[k]), 1, (unsigned)n), dim3(32 * LC_QMV_WARPS, 1, 1), args, smem);
    }
};

/* Queue one product / a several-product launch with weights of type T (cuda-matvec-q.cu's
 * dispatch); instantiated by LC_QMV_INSTANTIATE in the type's file, declared extern elsewhere. */
template <int T> void lc_qmv_one_t(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    struct lc_qmv_one f = {be, &p, ncols};
    f.run<lc_q<T>>();
}
template <int T> void lc_qmv_multi_t(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    struct lc_qmv_multi f = {be, &m, n};
    f.run<lc_q<T>>();
}

#define LC_QMV_INSTANTIATE(T)                                                                          \
    template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);
#define LC_QMV_EXTERN(T)                                                                                      \
    extern template void lc_qmv_one_t<T>(const struct lc_backend * be, const struct lc_mv_args & p, int ncols); \
    extern template void lc_qmv_multi_t<T>(const struct lc_backend * be, const struct lc_mv_multi & m, int n);

#endif
