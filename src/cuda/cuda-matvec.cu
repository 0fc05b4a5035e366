/* cuda-matvec.cu -- the matrix-vector kernels (products of at most LC_MATVEC_MAX_COLS columns:
 * token generation): a warp per row group of the weights, 16-byte loads streamed through a
 * per-thread ring of shared memory, F32 accumulation (memory-bound: each weight byte is read
 * once), with the fused epilogues, tails and pre-norm that the launch description asks for
 * (cuda-matvec.cuh; docs/CUDA.md). The launchers choose the kernel shape and the persistent form. */
#include "cuda-matvec-dev.cuh"
#include "cuda-mulmat.cuh"
#include "cuda-quant.cuh"


#define LC_PERSIST_DEVS 16 /* devices whose occupancy each persistent kernel remembers */


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

/* Loads UNROLL 16-byte vectors of each of the ROWS weight rows, starting at vector 'v'. */
template <int ROWS, int UNROLL>
__device__ __forceinline__ void lc_mv_load(uint4 (*x)[ROWS], const char * const * a, int64_t v) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int r = 0; r < ROWS; r++) x[u][r] = lc_ld_stream((const uint4 *)a[r] + v + 32 * u);
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

/* The persistent form of lc_matvec_body (one column, one batch, no tail, K
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
    return p.tail.kind == LC_TAIL_NONE && p.nbatch == 1 && p.vec && p.K % V == 0 && (p.K / V) % (32 * UNROLL) == 0;
}

/* Blocks per product of a persistent launch of 'f' (WARPS warps, 'smem' dynamic bytes) for
 * 'groups' row groups in each of 'nseg' products: no more than fit the device at once (its blocks
 * per multiprocessor are asked once per kernel and device, '*occ'), nor than the backend's
 * mv_blocks option when that is set (tests), and spread so that every warp but the last has the same number of groups. */
static unsigned lc_persist_blocks(const struct lc_backend * be, const void * f, int warps, size_t smem, int64_t groups, int nseg, int * occ) {
    const int id = be->dev->id >= 0 && be->dev->id < LC_PERSIST_DEVS ? be->dev->id : 0;
    if (occ[id] <= 0 && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[id], f, 32 * warps, smem) != cudaSuccess || occ[id] <= 0)) {
        (void)cudaGetLastError();
        occ[id] = 1;
    }
    int64_t slots = (int64_t)occ[id] * be->dev->sm_count / nseg;
    if (be->opts.mv_blocks > 0 && slots > be->opts.mv_blocks) slots = be->opts.mv_blocks;
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

/* One column, two rows per warp in six stages of two 16-byte loads per row (four rows per warp in
 * three stages for tall matrices: SwiGLU), staged through shared memory; products with a tail in
 * one shape of their own. */
template <typename T>
static void lc_matvec_one_col(const struct lc_backend * be, const struct lc_mv_args & p) {
    const bool tall = p.M >= 8192;
    if (p.tail.kind != LC_TAIL_NONE) { /* one shape: the tall one's registers would not leave room for the tail's */
        lc_matvec_launch<T, 1, LC_TAIL_ROWS, 2, LC_TAIL_WARPS, 6, LC_MV_TAIL>(be, p);
        return;
    }
    if (p.pre.parts) { /* the same shapes, scaled by the pre-norm */
        if (tall) lc_matvec_launch<T, 1, 4, 2, 4, 3, LC_MV_PRE>(be, p);
        else lc_matvec_launch<T, 1, 2, 2, 4, 6, LC_MV_PRE>(be, p);
        return;
    }
    if (tall) lc_matvec_launch<T, 1, 4, 2, 4, 3>(be, p);
    else lc_matvec_launch<T, 1, 2, 2, 4, 6>(be, p);
}

/* Kernel shapes measured on an H200 (bench/cuda-notes.md): one column as lc_matvec_one_col; one
 * row per warp for two columns, two rows per warp for three or four (each activation load serves
 * both rows), straight into registers. */
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
    case 1: lc_matvec_one_col<T>(be, p); break;
    case 2: lc_matvec_launch<T, 2, 1, 4, 4>(be, p); break;
    case 3: lc_matvec_launch<T, 3, 2, 4, 4>(be, p); break;
    default: lc_matvec_launch<T, 4, 2, 4, 4>(be, p); break;
    }
}

int64_t lc_matvec_tail_rows(int type) { return LC_TAIL_ROWS * (lc_is_quant_type(type) ? LC_QTAIL_WARPS : LC_TAIL_WARPS); }

enum loom_status lc_matvec_queue(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    if (lc_is_quant_type(p.type)) return lc_matvec_q_queue(be, p, ncols);
    if (p.type == LOOM_TYPE_F32) lc_matvec_dispatch<float>(be, p, ncols);
    else if (p.type == LOOM_TYPE_F16) lc_matvec_dispatch<__half>(be, p, ncols);
    else lc_matvec_dispatch<__nv_bfloat16>(be, p, ncols);
    return LC_CHECK_LAUNCH("lc_matvec_kernel");
}

enum loom_status lc_matvec_queue_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    if (lc_is_quant_type(m.s[0].type)) return lc_matvec_q_queue_multi(be, m, n);
    /* two rows per warp (rotation pairs need them): the small-matrix shape of lc_matvec_one_col */
    if (m.s[0].pre.parts) lc_matvec_launch_multi_typed<2, 2, 4, 6, LC_MV_PRE>(be, m, n, m.s[0].type);
    else lc_matvec_launch_multi_typed<2, 2, 4, 6>(be, m, n, m.s[0].type);
    return LC_CHECK_LAUNCH("lc_matvec_multi_kernel");
}
