/* cuda-attn.cu -- FLASH_ATTN_EXT: softmax(q K^T * scale + mask) V in one pass over the KV cells with
 * an online softmax (Milakov & Gimelshein 2018; Dao et al. 2022, "FlashAttention").
 *
 * A query column is one query of one head; the heads that share a KV head (grouped-query
 * attention) are adjacent columns of that KV head (column c: query c / group, head hk * group +
 * c % group), so a block reads each K and V row once for all of them.
 *
 * Two kernels compute the attention:
 *  - lc_fa_vec_kernel, for few columns per KV head (token generation) and every KV type: a block
 *    takes up to NCOL columns and one span ("split") of the KV cells; groups of lanes walk cells of
 *    the span, each lane holding 8 consecutive values of a row (F16: one 16-byte load; Q8_0 / Q4_0:
 *    two 8-byte loads around its codes, the block scale shared by shuffle, the codes turned into
 *    floats by byte permutes and the scale applied once per dot product and once per weight), the
 *    next rows loaded while the current ones are used, and keep a running maximum, sum and weighted values per column; the
 *    groups are merged by shuffles, the warps in shared memory. When the cells are
 *    split over several blocks (flash-decoding: Dao et al. 2023), each block leaves its partial
 *    maximum, sum and values in scratch and lc_fa_merge_kernel combines the spans in span order
 *    (a thread per span for the maxima and sums, then each value's spans read together), so the
 *    result depends only on the shapes.
 *  - lc_fa_mma_kernel, for many columns with F16 K and V: tiles of 64 columns by 64 cells, q K^T and
 *    P V on the tensor cores (mma.sync m16n8k16, F32 accumulation) with the scores, probabilities and
 *    output in registers (FlashAttention-2's layout: Dao 2023); K and V tiles double-buffered with
 *    cp.async. q and the probabilities are rounded to F16 for the products, as the unfused path's
 *    cuBLAS products round them.
 *
 * The scores of masked cells (-inf in the mask) are set to -inf by selection, whatever K holds
 * there. The decode kernel also leaves their V rows out by selection; the tensor-core kernel
 * multiplies them by a weight of 0, so V must be finite in cells the mask hides (a llama KV cache
 * is cleared at creation; cells past n_kv are zeros in the tile). A column whose every cell is
 * masked gets zeros. */
#include "cuda-attn.cuh"
#include "cuda-quant-dot.cuh"

enum {
    FA_WARPS = 4,         /* warps per block of both kernels */
    FA_WARPS_ONE = 16,    /* the vector kernel's warps for one column and one split (a short cache, FA_ONE_KV cells at most) */
    FA_ONE_KV = 256,
    FA_MAX_D = 256,       /* longest K and V rows */
    FA_MIN_SPAN = 64,     /* fewest KV cells a split takes */
    FA_MAX_SPLITS = 128,
    FA_TILE_Q = 64,       /* columns of a tensor-core block */
    FA_TILE_KV = 64,      /* KV cells per tensor-core tile */
};

/* Block types read by the kernels (src/quant/quant-blocks.h). */
#define FA_QK 32
#define FA_Q8_0_BYTES 34 /* F16 scale, 32 int8 */
#define FA_Q4_0_BYTES 18 /* F16 scale, 16 bytes of 4-bit codes: low nibbles values 0..15, high 16..31 */

/* What both kernels take. */
struct lc_fa_args {
    struct lc_tensor q, k, v, m, d;
    int has_mask;
    float scale;
    int D, Dv, group, n_cols, n_cblk, Hk;
    int64_t n_kv;
    int n_splits;
    int64_t span;        /* KV cells per split */
    int lpr;             /* vector kernel: lanes per K/V row (8 values each; a power of 2) */
    float * part;        /* partial results (n_splits > 1) */
    int vec_k, vec_v;    /* rows aligned for vector loads */
    int krb, vrb;        /* vector kernel: bytes of a K / V row, prefetched into L2 before the wait */
    char * q8;           /* vector kernel, one split, one column of one sequence: also the result's 8-bit runs
                          * (lc_a8 records of the [Dv * H] column) for the product after; NULL: not */
};

/* The rows of cells t0 .. t1 - 1 ('rb' bytes each, 'nb1' apart from 'base') prefetched into L2 by
 * the block: the cache's cells before this step's are there before the previous kernel ends. */
__device__ __forceinline__ void fa_prefetch_rows(const char * base, int64_t nb1, int rb, int64_t t0, int64_t t1) {
    const int lines = (rb + 127) / 128 + 1; /* a row may straddle one more line than it fills */
    for (int64_t i = threadIdx.x; i < (t1 - t0) * lines; i += blockDim.x) {
        const int l = (int)(i % lines), off = l * 128 < rb ? l * 128 : rb - 1;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (t0 + i / lines) * nb1 + off));
    }
}

/* Column c of KV head hk -> query iq and head h. */
__device__ __forceinline__ void fa_col(const struct lc_fa_args & a, int hk, int c, int & iq, int & h) {
    iq = c / a.group;
    h = hk * a.group + c % a.group;
}

/* EPL consecutive values from element e0 (a multiple of EPL) of a row of type 'type'; 'vec': the
 * row and e0 allow one aligned vector load (float rows: 16 bytes per 4, 16-bit rows 8 bytes). */
template <int EPL>
__device__ __forceinline__ void fa_load_row(const char * row, int type, int e0, bool vec, float * out) {
    if (type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16) {
        if (vec) {
#pragma unroll
            for (int i = 0; i < EPL; i += 4) {
                const uint2 u = *(const uint2 *)(row + (int64_t)(e0 + i) * 2);
                if (type == LOOM_TYPE_F16) {
                    const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
                    out[i] = a.x, out[i + 1] = a.y, out[i + 2] = b.x, out[i + 3] = b.y;
                } else {
                    const float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x);
                    const float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
                    out[i] = a.x, out[i + 1] = a.y, out[i + 2] = b.x, out[i + 3] = b.y;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < EPL; i++) out[i] = lc_load(row + (int64_t)(e0 + i) * 2, type);
        }
    } else if (type == LOOM_TYPE_F32) {
        if (vec) {
#pragma unroll
            for (int i = 0; i < EPL; i += 4) {
                const float4 f = *(const float4 *)(row + (int64_t)(e0 + i) * 4);
                out[i] = f.x, out[i + 1] = f.y, out[i + 2] = f.z, out[i + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < EPL; i++) out[i] = *(const float *)(row + (int64_t)(e0 + i) * 4);
        }
    } else if (type == LOOM_TYPE_Q8_0) {
        const char * blk = row + (int64_t)(e0 / FA_QK) * FA_Q8_0_BYTES;
        const float d = __half2float(*(const __half *)blk);
        const int8_t * qs = (const int8_t *)(blk + 2) + e0 % FA_QK;
#pragma unroll
        for (int i = 0; i < EPL; i++) out[i] = d * (float)qs[i];
    } else { /* Q4_0 */
        const char * blk = row + (int64_t)(e0 / FA_QK) * FA_Q4_0_BYTES;
        const float d = __half2float(*(const __half *)blk);
        const uint8_t * qs = (const uint8_t *)(blk + 2);
        const int j0 = e0 % FA_QK;
#pragma unroll
        for (int i = 0; i < EPL; i++) {
            const int j = j0 + i;
            const int code = j < FA_QK / 2 ? qs[j] & 15 : qs[j - FA_QK / 2] >> 4;
            out[i] = d * (float)(code - 8);
        }
    }
}

/* Mask value of cell t for query iq of head h (0 without a mask). */
__device__ __forceinline__ float fa_mask(const struct lc_fa_args & a, const char * mrow, int64_t t) {
    return a.has_mask ? lc_load(mrow + t * a.m.nb[0], a.m.type) : 0.0f;
}

__device__ __forceinline__ const char * fa_mask_row(const struct lc_fa_args & a, int iq, int h, int b) {
    return a.m.data + (int64_t)iq * a.m.nb[1] + (int64_t)(h % a.m.ne[2]) * a.m.nb[2] + (int64_t)(b % a.m.ne[3]) * a.m.nb[3];
}

/* Where column c's result row goes (F32 [Dv, H, n_q, B]). */
__device__ __forceinline__ float * fa_out_row(const struct lc_fa_args & a, int iq, int h, int b) {
    return (float *)(a.d.data + (int64_t)h * a.d.nb[1] + (int64_t)iq * a.d.nb[2] + (int64_t)b * a.d.nb[3]);
}

/* ---------------------------------------------------------------- few columns: split KV cells */

/* The 8 consecutive K or V values of a row that one lane holds, loaded ahead and converted at use:
 * any type (KV < 0) converted at load; F16 kept as 16 raw bytes; Q8_0 / Q4_0 kept as the 16 raw
 * bytes around the lane's 8 codes (below). get() gives the values without the row's block scale,
 * scale() that scale (1 for float types); scale() exchanges registers across the lanes of a quad,
 * so every lane of the warp calls it together. */
template <int KV> struct fa_raw {
    float f[8];
    __device__ __forceinline__ void load(const char * row, int type, int e0, bool vec) { fa_load_row<8>(row, type, e0, vec, f); }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < 8; i++) f[i] = 0.0f;
    }
    __device__ __forceinline__ void get(float * out, int e0) const {
        (void)e0;
#pragma unroll
        for (int i = 0; i < 8; i++) out[i] = f[i];
    }
    __device__ __forceinline__ float scale(int e0) const { return (void)e0, 1.0f; }
};

template <> struct fa_raw<LOOM_TYPE_F16> {
    uint4 u;
    __device__ __forceinline__ void load(const char * row, int type, int e0, bool vec) {
        (void)type;
        const char * p = row + (int64_t)e0 * 2;
        if (vec) {
            u = *(const uint4 *)p;
        } else {
            const __half * h = (const __half *)p;
            __half2 x[4];
#pragma unroll
            for (int i = 0; i < 4; i++) x[i] = __halves2half2(h[2 * i], h[2 * i + 1]);
            u = make_uint4(*(const uint32_t *)&x[0], *(const uint32_t *)&x[1], *(const uint32_t *)&x[2], *(const uint32_t *)&x[3]);
        }
    }
    __device__ __forceinline__ void zero() { u = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ void get(float * out, int e0) const {
        (void)e0;
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(*(const __half2 *)&w[i]);
            out[2 * i] = f.x;
            out[2 * i + 1] = f.y;
        }
    }
    __device__ __forceinline__ float scale(int e0) const { return (void)e0, 1.0f; }
};

/* Q8_0 and Q4_0 rows on 8-byte boundaries. The lane holding elements e0 .. e0 + 7 (a quarter of a
 * block: part s = e0 % 32 / 8 of block e0 / 32) needs 8 bytes of codes at byte 'o' of the row: Q8_0
 * the 8 codes themselves (o = 34 * block + 2 + 8 s), Q4_0 the 8 bytes whose low (s < 2) or high
 * nibbles hold them (o = 18 * block + 2 + 8 (s % 2)). Bytes o - 2 .. o + 7 lie in the two aligned
 * 8-byte words from (o - 2) & ~7 (o - 2 is even), inside the row: two 8-byte loads, where a lane
 * reading the codes byte by byte made 9. For the first lane of each quad (s = 0) bytes o - 2, o - 1
 * are the block's F16 scale; the other three lanes of the block take it from that lane. */
template <int KV> __device__ __forceinline__ int fa_q_codes_at(int e0) {
    const int blk = e0 / FA_QK, s = e0 % FA_QK / 8;
    return KV == LOOM_TYPE_Q8_0 ? blk * FA_Q8_0_BYTES + 2 + 8 * s : blk * FA_Q4_0_BYTES + 2 + 8 * (s & 1);
}

/* Bytes 'h2' (the 16-bit step from the window's start: 0 .. 3, as (o - 2) % 8 / 2) of the window
 * w[0..3]: the 16 bits there, and the 8 bytes after them as two words. */
__device__ __forceinline__ void fa_q_window(const uint4 & u, int h2, uint32_t & half, uint32_t & lo, uint32_t & hi) {
    const bool q = h2 >= 2; /* the window's words from 1 on */
    const uint32_t w0 = q ? u.y : u.x, w1 = q ? u.z : u.y, w2 = q ? u.w : u.z;
    const bool odd = h2 & 1;
    half = odd ? w0 >> 16 : w0 & 0xffffu;
    const unsigned sh = odd ? 32u : 16u;
    lo = __funnelshift_rc(w0, w1, sh);
    hi = __funnelshift_rc(w1, w2, sh);
}

/* Byte i of 'x' (0 .. 255) as a float, exactly: the byte as the low mantissa bits of 2^23. */
__device__ __forceinline__ float fa_byte_f(uint32_t x, int i, float bias) {
    return __int_as_float((int)__byte_perm(x, 0x4B000000u, 0x7650u | (unsigned)i)) - bias;
}

template <int KV> struct fa_raw_q {
    uint4 u;
    __device__ __forceinline__ void load(const char * row, int type, int e0, bool vec) {
        (void)type, (void)vec;
        const int w = (fa_q_codes_at<KV>(e0) - 2) & ~7;
        const uint2 a = *(const uint2 *)(row + w), b = *(const uint2 *)(row + w + 8);
        u = make_uint4(a.x, a.y, b.x, b.y);
    }
    __device__ __forceinline__ void zero() { u = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ void get(float * out, int e0) const {
        uint32_t half, lo, hi;
        fa_q_window(u, (fa_q_codes_at<KV>(e0) - 2) % 8 / 2, half, lo, hi);
        if (KV == LOOM_TYPE_Q8_0) { /* signed codes: flip the sign bits, take 128 off */
            lo ^= 0x80808080u;
            hi ^= 0x80808080u;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                out[i] = fa_byte_f(lo, i, 8388736.0f);
                out[4 + i] = fa_byte_f(hi, i, 8388736.0f);
            }
        } else { /* 4-bit codes 0..15 stand for -8..7 */
            const unsigned sh = e0 % FA_QK >= 16 ? 4u : 0u;
            lo = (lo >> sh) & 0x0f0f0f0fu;
            hi = (hi >> sh) & 0x0f0f0f0fu;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                out[i] = fa_byte_f(lo, i, 8388616.0f);
                out[4 + i] = fa_byte_f(hi, i, 8388616.0f);
            }
        }
    }
    __device__ __forceinline__ float scale(int e0) const {
        uint32_t half, lo, hi;
        fa_q_window(u, (fa_q_codes_at<KV>(e0) - 2) % 8 / 2, half, lo, hi);
        half = __shfl_sync(0xffffffffu, half, (threadIdx.x % 32) & ~3);
        return __half2float(__ushort_as_half((unsigned short)half));
    }
};

template <> struct fa_raw<LOOM_TYPE_Q8_0> : fa_raw_q<LOOM_TYPE_Q8_0> {};
template <> struct fa_raw<LOOM_TYPE_Q4_0> : fa_raw_q<LOOM_TYPE_Q4_0> {};

/* Loads the K and V values and the mask values of this lane's U cells from 'cell' on, 'step' apart
 * (cells at or past t1 read cell t1 - 1 and are masked). */
template <int NCOL, int KV, int U>
__device__ __forceinline__ void fa_fetch(const struct lc_fa_args & a, const char * kbase, const char * vbase, int ktype, int vtype,
                                         bool kon, bool von, int e0, int64_t cell, int64_t step, int64_t t1,
                                         const char * const (&mrow)[NCOL], fa_raw<KV> (&kr)[U], fa_raw<KV> (&vr)[U],
                                         float (&mv)[NCOL][U]) {
#pragma unroll
    for (int j = 0; j < U; j++) {
        const int64_t t = cell + (int64_t)j * step;
        const bool in = t < t1;
        const int64_t tc = in ? t : t1 - 1;
        if (kon) kr[j].load(kbase + tc * a.k.nb[1], ktype, e0, a.vec_k);
        else kr[j].zero();
        if (von) vr[j].load(vbase + tc * a.v.nb[1], vtype, e0, a.vec_v);
        else vr[j].zero();
#pragma unroll
        for (int c = 0; c < NCOL; c++) mv[c][j] = in ? fa_mask(a, mrow[c], tc) : -INFINITY;
    }
}

/* grid (n_splits, Hk * B, n_cblk), W warps. A K/V row is held by a group of a.lpr lanes
 * (8 values each), so a warp reads 32 / lpr rows at once; each lane group keeps its own running
 * maximum, sum and values, merged across the warp and then across the warps at the end. The next
 * cells' rows are loaded while the current ones are used. KV: LOOM_TYPE_F16 when K and V are both
 * F16 (the default cache), LOOM_TYPE_Q8_0 / LOOM_TYPE_Q4_0 when both are of that type with rows of
 * whole 8-byte words on 8-byte boundaries (fa_raw_q), -1 for any types (read by type). */
template <int NCOL, int KV, int W>
__global__ void __launch_bounds__(W * 32) lc_fa_vec_kernel(struct lc_fa_args a) {
    lc_pdl_trigger();
    {
        const int hk = blockIdx.y % a.Hk, b = blockIdx.y / a.Hk;
        const int64_t t0 = (int64_t)blockIdx.x * a.span, t1 = t0 + a.span < a.n_kv ? t0 + a.span : a.n_kv;
        fa_prefetch_rows(a.k.data + (int64_t)hk * a.k.nb[2] + (int64_t)b * a.k.nb[3], a.k.nb[1], a.krb, t0, t1);
        fa_prefetch_rows(a.v.data + (int64_t)hk * a.v.nb[2] + (int64_t)b * a.v.nb[3], a.v.nb[1], a.vrb, t0, t1);
    }
    lc_pdl_wait();
    constexpr int E = 8;
    constexpr int U = NCOL >= 8 && KV < 0 ? 1 : NCOL >= 4 || KV < 0 ? 2 : 4; /* cells per lane group in flight */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int lpr = a.lpr, rpw = 32 / lpr, sub = lane % lpr, grp = lane / lpr;
    const int split = blockIdx.x, hk = blockIdx.y % a.Hk, b = blockIdx.y / a.Hk, cblk = blockIdx.z;
    const int c0 = cblk * NCOL;
    const int nc = a.n_cols - c0 < NCOL ? a.n_cols - c0 : NCOL;
    const int e0 = sub * E;
    const bool kon = e0 < a.D, von = e0 < a.Dv;
    const int ktype = KV >= 0 ? KV : a.k.type, vtype = KV >= 0 ? KV : a.v.type;

    float qr[NCOL][E];
    const char * mrow[NCOL];
#pragma unroll
    for (int c = 0; c < NCOL; c++) {
        int iq, h;
        fa_col(a, hk, c0 + (c < nc ? c : 0), iq, h);
        mrow[c] = fa_mask_row(a, iq, h, b);
        const char * qrow = a.q.data + (int64_t)iq * a.q.nb[1] + (int64_t)h * a.q.nb[2] + (int64_t)b * a.q.nb[3];
#pragma unroll
        for (int i = 0; i < E; i++) qr[c][i] = kon && c < nc ? *(const float *)(qrow + (int64_t)(e0 + i) * a.q.nb[0]) * a.scale : 0.0f;
    }
    float mx[NCOL], sum[NCOL], acc[NCOL][E];
#pragma unroll
    for (int c = 0; c < NCOL; c++) {
        mx[c] = -INFINITY;
        sum[c] = 0.0f;
#pragma unroll
        for (int i = 0; i < E; i++) acc[c][i] = 0.0f;
    }
    const char * kbase = a.k.data + (int64_t)hk * a.k.nb[2] + (int64_t)b * a.k.nb[3];
    const char * vbase = a.v.data + (int64_t)hk * a.v.nb[2] + (int64_t)b * a.v.nb[3];
    const int64_t t0 = (int64_t)split * a.span;
    const int64_t t1 = t0 + a.span < a.n_kv ? t0 + a.span : a.n_kv;
    const int64_t step = (int64_t)W * rpw, round = step * U; /* between a group's cells; per pass */
    fa_raw<KV> kn[U], vn[U];
    float mn[NCOL][U];
    /* the warp's first cell of the pass is wb; this group's are wb + grp + j * step */
    const int64_t w0 = t0 + (int64_t)warp * rpw;
    if (w0 < t1) fa_fetch<NCOL, KV, U>(a, kbase, vbase, ktype, vtype, kon, von, e0, w0 + grp, step, t1, mrow, kn, vn, mn);
    for (int64_t wb = w0; wb < t1; wb += round) {
        fa_raw<KV> kc[U], vc[U];
        float mv[NCOL][U];
#pragma unroll
        for (int j = 0; j < U; j++) {
            kc[j] = kn[j];
            vc[j] = vn[j];
#pragma unroll
            for (int c = 0; c < NCOL; c++) mv[c][j] = mn[c][j];
        }
        if (wb + round < t1) fa_fetch<NCOL, KV, U>(a, kbase, vbase, ktype, vtype, kon, von, e0, wb + round + grp, step, t1, mrow, kn, vn, mn);
        float s[NCOL][U], vs[U];
#pragma unroll
        for (int j = 0; j < U; j++) {
            float kf[E];
            kc[j].get(kf, e0);
            const float ks = kc[j].scale(e0); /* the row's block scale (1 for float rows) */
#pragma unroll
            for (int c = 0; c < NCOL; c++) {
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < E; i++) dot = fmaf(qr[c][i], kf[i], dot);
                s[c][j] = dot * ks;
            }
            vs[j] = vc[j].scale(e0); /* here, where the whole warp runs */
        }
        /* the group's dot products: a butterfly over its lanes (uniform across the warp) */
        for (int o = lpr / 2; o > 0; o >>= 1) {
#pragma unroll
            for (int c = 0; c < NCOL; c++) {
#pragma unroll
                for (int j = 0; j < U; j++) s[c][j] += __shfl_xor_sync(0xffffffffu, s[c][j], o);
            }
        }
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            float tmax = -INFINITY;
#pragma unroll
            for (int j = 0; j < U; j++) {
                s[c][j] = mv[c][j] == -INFINITY ? -INFINITY : s[c][j] + mv[c][j];
                tmax = fmaxf(tmax, s[c][j]);
            }
            const float mnew = fmaxf(mx[c], tmax);
            if (mnew != -INFINITY) { /* else every cell so far is masked */
                const float alpha = __expf(mx[c] - mnew); /* 0 when mx was -inf */
                mx[c] = mnew;
                float p[U], ps = 0.0f;
#pragma unroll
                for (int j = 0; j < U; j++) {
                    p[j] = s[c][j] == -INFINITY ? 0.0f : __expf(s[c][j] - mnew);
                    ps += p[j];
                }
                sum[c] = sum[c] * alpha + ps;
#pragma unroll
                for (int i = 0; i < E; i++) acc[c][i] *= alpha;
#pragma unroll
                for (int j = 0; j < U; j++) {
                    float vf[E];
                    vc[j].get(vf, e0);
                    const float pj = p[j] * vs[j];
#pragma unroll
                    for (int i = 0; i < E; i++) {
                        const float pv = pj * vf[i];
                        acc[c][i] += p[j] > 0.0f ? pv : 0.0f; /* 0 * garbage of a masked cell stays out */
                    }
                }
            }
        }
    }
    /* merge the lane groups of the warp (group g with g ^ (o / lpr)) */
    for (int o = lpr; o < 32; o <<= 1) {
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            const float mo = __shfl_xor_sync(0xffffffffu, mx[c], o), so = __shfl_xor_sync(0xffffffffu, sum[c], o);
            const float M = fmaxf(mx[c], mo);
            const float f = mx[c] == -INFINITY ? 0.0f : __expf(mx[c] - M), g = mo == -INFINITY ? 0.0f : __expf(mo - M);
            sum[c] = sum[c] * f + so * g;
#pragma unroll
            for (int i = 0; i < E; i++) {
                const float ao = __shfl_xor_sync(0xffffffffu, acc[c][i], o);
                acc[c][i] = acc[c][i] * f + ao * g;
            }
            mx[c] = M;
        }
    }

    /* merge the warps: shared [warp][col] maxima and sums, values [warp][col][Dv] */
    __shared__ float s_mx[W][NCOL], s_sum[W][NCOL];
    __shared__ float s_acc[W][NCOL][FA_MAX_D];
    if (lane < lpr) {
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            if (lane == 0) {
                s_mx[warp][c] = mx[c];
                s_sum[warp][c] = sum[c];
            }
#pragma unroll
            for (int i = 0; i < E; i++) s_acc[warp][c][e0 + i] = acc[c][i];
        }
    }
    __syncthreads();
    const int nsplit = a.n_splits;
    for (int idx = threadIdx.x; idx < nc * a.Dv; idx += blockDim.x) {
        const int c = idx / a.Dv, e = idx % a.Dv;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; w++) M = fmaxf(M, s_mx[w][c]);
        float L = 0.0f, A = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < W; w++) {
                if (s_mx[w][c] == -INFINITY) continue;
                const float f = __expf(s_mx[w][c] - M);
                L += s_sum[w][c] * f;
                A += s_acc[w][c][e] * f;
            }
        }
        if (nsplit == 1) {
            int iq, h;
            fa_col(a, hk, c0 + c, iq, h);
            const float o = L > 0.0f ? A / L : 0.0f;
            fa_out_row(a, iq, h, b)[e] = o;
            /* a warp holds 32 consecutive elements of one row (Dv % 32 == 0): a run of the column */
            if (a.q8) lc_a8_quant_run(o, lane, a.q8 + ((int64_t)h * a.Dv + e - lane) / 32 * LC_A8_RUN);
        } else {
            const int64_t item = ((int64_t)blockIdx.y * a.n_cblk + cblk) * nsplit + split;
            float * pc = a.part + (item * NCOL + c) * (int64_t)(a.Dv + 2);
            if (e == 0) {
                pc[0] = M;
                pc[1] = L;
            }
            pc[2 + e] = A;
        }
    }
}

/* grid (n_cblk * ncol, Hk * B), FA_MAX_SPLITS threads: one column's spans combined in span order,
 * each scaled by exp(its maximum - the overall maximum). Thread s reads span s's maximum and sum
 * and leaves its weight in shared memory; each thread then reads its values of every span 16 at a
 * time, so the partials cost a few round trips to L2, not one or two per span (the merge sits
 * between the attention and the next product of every layer). */
__global__ void __launch_bounds__(FA_MAX_SPLITS) lc_fa_merge_kernel(struct lc_fa_args a, int ncol) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int cblk = blockIdx.x / ncol, c = blockIdx.x % ncol;
    const int hk = blockIdx.y % a.Hk, b = blockIdx.y / a.Hk;
    if (cblk * ncol + c >= a.n_cols) return;
    const int64_t item0 = ((int64_t)blockIdx.y * a.n_cblk + cblk) * a.n_splits;
    const int64_t pf = a.Dv + 2;
    const float * p0 = a.part + (item0 * ncol + c) * pf;
    const int64_t stride = (int64_t)ncol * pf; /* from one split to the next */
    const int ns = a.n_splits, t = threadIdx.x, lane = t % 32, warp = t / 32;
    constexpr int NW = FA_MAX_SPLITS / 32;
    static_assert(FA_MAX_SPLITS % 32 == 0, "whole warps, a thread per span");
    __shared__ float s_w[FA_MAX_SPLITS], s_red[NW];
    const float ms = t < ns ? p0[t * stride] : -INFINITY, ls = t < ns ? p0[t * stride + 1] : 0.0f;
    float M = ms;
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if (lane == 0) s_red[warp] = M;
    __syncthreads();
    M = s_red[0];
#pragma unroll
    for (int w = 1; w < NW; w++) M = fmaxf(M, s_red[w]);
    const float wt = ms == -INFINITY ? 0.0f : __expf(ms - M); /* every span masked: all 0 */
    s_w[t] = wt;
    float L = ls * wt;
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    __syncthreads(); /* every thread has read the maxima */
    if (lane == 0) s_red[warp] = L;
    __syncthreads();
    L = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; w++) L += s_red[w];
    int iq, h;
    fa_col(a, hk, cblk * ncol + c, iq, h);
    float * out = fa_out_row(a, iq, h, b);
    for (int e = t; e < a.Dv; e += FA_MAX_SPLITS) {
        float A = 0.0f;
        for (int s0 = 0; s0 < ns; s0 += 16) {
            float v[16];
#pragma unroll
            for (int j = 0; j < 16; j++) v[j] = s0 + j < ns ? p0[(s0 + j) * stride + 2 + e] : 0.0f;
#pragma unroll
            for (int j = 0; j < 16; j++) A += s0 + j < ns ? s_w[s0 + j] * v[j] : 0.0f;
        }
        out[e] = L > 0.0f ? A / L : 0.0f;
    }
}

/* ---------------------------------------------------------------- many columns: tensor cores */

/* The PTX the tensor-core kernel is made of (PTX ISA: cp.async, ldmatrix, mma.m16n8k16). */
__device__ __forceinline__ uint32_t fa_smem(const void * p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared without a register stop; 'in' false fills the 16 bytes with zeros. */
__device__ __forceinline__ void fa_cp16(void * dst, const void * src, bool in) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem(dst)), "l"(src), "r"(in ? 16 : 0) : "memory");
}
__device__ __forceinline__ void fa_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void fa_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* Four 8x8 matrices of halves from shared memory; lane l gives the address of row l % 8 of matrix
 * l / 8 and receives, per matrix, the pair (row l / 4, columns 2 (l % 4) ..) -- or, transposed, the
 * pair (rows 2 (l % 4) .., column l / 4). Two matrices: lanes 0..15 give the addresses. */
__device__ __forceinline__ void fa_ldsm4(uint32_t (&r)[4], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p))
                 : "memory");
}
__device__ __forceinline__ void fa_ldsm2(uint32_t (&r)[4], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(fa_smem(p)) : "memory");
}
__device__ __forceinline__ void fa_ldsm4_t(uint32_t (&r)[4], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p))
                 : "memory");
}

/* c += a b for a 16x16 F16 tile a (row-major fragment: rows l / 4 and l / 4 + 8, columns 2 (l % 4)
 * .. and + 8) and a 16x8 tile b (b0: rows 2 (l % 4) .., b1: those + 8, column l / 4); c is 16x8 F32,
 * c[0..1] row l / 4, c[2..3] row l / 4 + 8, columns 2 (l % 4) ... */
__device__ __forceinline__ void fa_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t fa_pack_h2(float x, float y) {
    const __half2 h = __floats2half2_rn(x, y);
    return *(const uint32_t *)&h;
}

/* Shared memory of lc_fa_mma_kernel for rows of D values: K and V tiles of FA_TILE_KV rows, two
 * stages each (the next live tile loads while this one is used), and with MS > 0 the mask tile of
 * the block's columns as it is in memory (MS bytes per value: F16 or F32), two stages; q is staged
 * in K's second stage. */
template <int D, int MS> struct fa_mma_layout {
    static constexpr int LDK = D + 8; /* halves per row: 16-byte rows that ldmatrix reads without bank conflicts */
    static constexpr int LDM = FA_TILE_KV + (MS == 4 ? 4 : 8); /* values per mask row (16-byte rows, a quad's rows spread over the banks) */
    static constexpr size_t TILE_BYTES = (size_t)FA_TILE_KV * LDK * 2;
    static constexpr size_t MASK_BYTES = (size_t)FA_TILE_Q * LDM * (MS > 0 ? MS : 1);
    static constexpr size_t BYTES = 4 * TILE_BYTES + (MS > 0 ? 2 * MASK_BYTES : 0);
};

enum { FA_SCAN = 8 }; /* tiles whose liveness one mask scan decides */

/* grid (n_cblk, Hk * B), FA_WARPS warps; warp w owns columns c0 + 16w .. c0 + 16w + 15 (FlashAttention-2's
 * split: each warp its own rows, no exchange between warps). Per tile of FA_TILE_KV cells: the scores
 * S = q K^T (16 x 64 per warp) stay in the mma accumulators, the online softmax works on them in
 * registers (a row lives in the 4 lanes of a quad), and S's fragments, rounded to F16, are the A
 * operand of P V; the output (16 x D per warp) stays in accumulators to the end. q and P are rounded
 * to F16 (the unfused path's products round them the same way), K and V are F16 already. Tiles
 * every column of the block masks out are skipped without loading K and V (a causal prompt's upper
 * triangle), decided FA_SCAN tiles at a time. MS = 2 or 4 (an F16 or F32 mask whose rows start
 * on 16-byte boundaries, n_kv a multiple of the 16 / MS values of a 16-byte run): the liveness from
 * 16-byte loads, and the mask tile staged in shared memory by cp.async with K and V; MS = 0: each
 * lane reads its mask values one by one. */
template <int D, int MS>
__global__ void __launch_bounds__(FA_WARPS * 32) lc_fa_mma_kernel(struct lc_fa_args a) {
    lc_pdl_trigger();
    lc_pdl_wait();
    using L = fa_mma_layout<D, MS>;
    constexpr int LDK = L::LDK, LDM = L::LDM;
    constexpr int KS = D / 16;         /* k-steps of q K^T */
    constexpr int NT = FA_TILE_KV / 8; /* 8-cell column tiles of S */
    constexpr int DT = D / 8;          /* 8-value column tiles of the output (even for 64..128) */
    extern __shared__ __align__(128) char smem[];
    __half * const Kb0 = (__half *)smem;
    __half * const Vb0 = (__half *)(smem + 2 * L::TILE_BYTES);
    char * const Mb0 = smem + 4 * L::TILE_BYTES; /* MS > 0 only */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gid = lane / 4, tig = lane % 4;
    const int hk = blockIdx.y % a.Hk, b = blockIdx.y / a.Hk;
    const int c0 = (a.n_cblk - 1 - (int)blockIdx.x) * FA_TILE_Q; /* the last queries (longest rows of a causal prompt) first */
    const char * kbase = a.k.data + (int64_t)hk * a.k.nb[2] + (int64_t)b * a.k.nb[3];
    const char * vbase = a.v.data + (int64_t)hk * a.v.nb[2] + (int64_t)b * a.v.nb[3];
    const bool vec = a.vec_k && a.vec_v;

    /* MS > 0: this thread's 16-byte mask runs of a tile (VPC values each, CPR per row): rows
     * threadIdx.x / CPR + RSTEP k, cells mch .. mch + VPC - 1 */
    constexpr int VPC = MS > 0 ? 16 / MS : 8, CPR = FA_TILE_KV / VPC, RSTEP = FA_WARPS * 32 / CPR;
    constexpr int MR = MS > 0 ? FA_TILE_Q / RSTEP : 1;
    const char * mst[MR];
    bool mst_on[MR];
    const int mch = ((int)threadIdx.x % CPR) * VPC;
#pragma unroll
    for (int k = 0; k < MR; k++) {
        const int col = c0 + (int)threadIdx.x / CPR + RSTEP * k;
        int qi = 0, qh = 0;
        mst_on[k] = MS > 0 && col < a.n_cols;
        if (mst_on[k]) fa_col(a, hk, col, qi, qh);
        mst[k] = fa_mask_row(a, qi, qh, b);
    }

    /* K and V rows t0 .. t0 + 63 into stage s (cells past n_kv: zeros), and with MS > 0 the mask
     * tile, as one cp.async group */
    auto load_tile = [&](int64_t t0, int s) {
        if (MS > 0) {
            char * Ms = Mb0 + (size_t)s * L::MASK_BYTES;
#pragma unroll
            for (int k = 0; k < MR; k++) {
                const bool in = mst_on[k] && t0 + mch < a.n_kv;
                fa_cp16(Ms + ((size_t)((int)threadIdx.x / CPR + RSTEP * k) * LDM + mch) * MS, in ? mst[k] + (t0 + mch) * MS : a.m.data, in);
            }
        }
        constexpr int V8 = D / 8;
        __half * Ks = Kb0 + (size_t)s * FA_TILE_KV * LDK;
        __half * Vs = Vb0 + (size_t)s * FA_TILE_KV * LDK;
        for (int idx = threadIdx.x; idx < FA_TILE_KV * V8; idx += FA_WARPS * 32) {
            const int t = idx / V8, e = (idx % V8) * 8;
            const bool in = t0 + t < a.n_kv;
            const int64_t tc = in ? t0 + t : a.n_kv - 1;
            const char * ks = kbase + tc * a.k.nb[1] + (int64_t)e * 2;
            const char * vs = vbase + tc * a.v.nb[1] + (int64_t)e * 2;
            if (vec) {
                fa_cp16(Ks + t * LDK + e, ks, in);
                fa_cp16(Vs + t * LDK + e, vs, in);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    Ks[t * LDK + e + i] = in ? ((const __half *)ks)[i] : __float2half(0.0f);
                    Vs[t * LDK + e + i] = in ? ((const __half *)vs)[i] : __float2half(0.0f);
                }
            }
        }
        fa_cp_commit();
    };

    /* this lane's two rows: r = 16 warp + gid and r + 8 */
    const char * mrow[2];
    bool on[2];
    int iq[2], hh[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const int col = c0 + warp * 16 + gid + rr * 8;
        on[rr] = col < a.n_cols;
        iq[rr] = hh[rr] = 0;
        if (on[rr]) fa_col(a, hk, col, iq[rr], hh[rr]);
        mrow[rr] = fa_mask_row(a, iq[rr], hh[rr], b);
    }
    /* mask value of cell t for row rr: -inf past n_kv and for rows past the columns */
    auto mask_at = [&](int rr, int64_t t) -> float {
        if (!on[rr] || t >= a.n_kv) return -INFINITY;
        return a.has_mask ? fa_mask(a, mrow[rr], t) : 0.0f;
    };

    /* the first live tile at or after t (n_kv when none); the liveness of FA_SCAN tiles at a time
     * (each thread reads its own cells of them, then one vote per tile), kept for the next calls */
    int64_t scan0 = -1;
    unsigned scan_bits = 0;
    auto next_live = [&](int64_t t) -> int64_t {
        for (; t < a.n_kv; t += FA_TILE_KV) {
            if (!a.has_mask) return t;
            if (scan0 < 0 || t < scan0 || t >= scan0 + FA_SCAN * FA_TILE_KV) {
                scan0 = t;
                unsigned bits = 0;
                if (MS > 0) { /* every 16-byte load of the window in flight at once; -inf is 0xfc00 (F16), 0xff800000 (F32) */
#pragma unroll
                    for (int i = 0; i < FA_SCAN; i++) {
                        bool live = false;
#pragma unroll
                        for (int k = 0; k < MR; k++) {
                            const int64_t cell = t + (int64_t)i * FA_TILE_KV + mch;
                            if (mst_on[k] && cell < a.n_kv) {
                                const uint4 u = *(const uint4 *)(mst[k] + cell * MS);
                                const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                                for (int e = 0; e < 4; e++) {
                                    if (MS == 2) live |= (w[e] & 0xffffu) != 0xfc00u || (w[e] >> 16) != 0xfc00u;
                                    else live |= w[e] != 0xff800000u;
                                }
                            }
                        }
                        bits |= (unsigned)live << i;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < FA_SCAN; i++) {
                        /* this lane's 32 cells of the tile in groups of 8 loads in flight, until one is live */
                        bool live = false;
#pragma unroll
                        for (int n = 0; n < NT; n += 2) {
                            if (live) break;
#pragma unroll
                            for (int u = 0; u < 8; u++) {
                                const int64_t cell = t + (int64_t)i * FA_TILE_KV + (n + u / 4) * 8 + tig * 2 + u % 2;
                                live |= mask_at((u / 2) % 2, cell) != -INFINITY;
                            }
                        }
                        bits |= (unsigned)live << i;
                    }
                }
                scan_bits = 0;
#pragma unroll
                for (int i = 0; i < FA_SCAN; i++) scan_bits |= (unsigned)__syncthreads_or((bits >> i) & 1) << i;
            }
            if ((scan_bits >> ((t - scan0) / FA_TILE_KV)) & 1) return t;
        }
        return a.n_kv;
    };

    int64_t t = next_live(0);
    if (t < a.n_kv) load_tile(t, 0);

    /* q of the block's columns, rounded to F16, staged in K's second stage, then into A fragments */
    {
        __half * Qs = Kb0 + (size_t)FA_TILE_KV * LDK;
        for (int idx = threadIdx.x; idx < FA_TILE_Q * (D / 2); idx += FA_WARPS * 32) {
            const int r = idx / (D / 2), e = (idx % (D / 2)) * 2;
            float x0 = 0.0f, x1 = 0.0f;
            if (c0 + r < a.n_cols) {
                int qi, qh;
                fa_col(a, hk, c0 + r, qi, qh);
                const char * qrow = a.q.data + (int64_t)qi * a.q.nb[1] + (int64_t)qh * a.q.nb[2] + (int64_t)b * a.q.nb[3];
                x0 = *(const float *)(qrow + (int64_t)e * a.q.nb[0]);
                x1 = *(const float *)(qrow + (int64_t)(e + 1) * a.q.nb[0]);
            }
            *(__half2 *)(Qs + r * LDK + e) = __floats2half2_rn(x0, x1);
        }
        __syncthreads();
    }
    uint32_t qf[KS][4];
    {
        const __half * Qs = Kb0 + (size_t)FA_TILE_KV * LDK;
        const int row = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8, cofs = (lane / 16) * 8;
#pragma unroll
        for (int k = 0; k < KS; k++) fa_ldsm4(qf[k], Qs + row * LDK + k * 16 + cofs);
    }
    __syncthreads(); /* every warp has its q before stage 1 is loaded */

    float o[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    int s = 0;
    while (t < a.n_kv) {
        const int64_t tn = next_live(t + FA_TILE_KV);
        if (tn < a.n_kv) {
            load_tile(tn, s ^ 1);
            fa_cp_wait<1>();
        } else {
            fa_cp_wait<0>();
        }
        __syncthreads(); /* tile t is in stage s for every thread */
        const __half * Ks = Kb0 + (size_t)s * FA_TILE_KV * LDK;
        const __half * Vs = Vb0 + (size_t)s * FA_TILE_KV * LDK;
        const char * Ms = Mb0 + (size_t)s * L::MASK_BYTES;

        /* S = q K^T: B fragments from K rows (cells) read as 8x8 matrices, two k-steps per load */
        float sc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) {
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
            const __half * kr = Ks + (n * 8 + lane % 8) * LDK;
#pragma unroll
            for (int k = 0; k < KS; k += 2) {
                uint32_t kb[4];
                if (k + 1 < KS) {
                    fa_ldsm4(kb, kr + k * 16 + (lane / 8) * 8);
                    fa_mma(sc[n], qf[k], kb[0], kb[1]);
                    fa_mma(sc[n], qf[k + 1], kb[2], kb[3]);
                } else {
                    fa_ldsm2(kb, kr + k * 16 + ((lane / 8) % 2) * 8);
                    fa_mma(sc[n], qf[k], kb[0], kb[1]);
                }
            }
        }

        /* online softmax of rows gid (sc[.][0..1]) and gid + 8 (sc[.][2..3]); cells n * 8 + 2 tig + j */
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            float tmax = -INFINITY;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                float2 m2 = make_float2(0.0f, 0.0f);
                const size_t mo = ((size_t)(warp * 16 + gid + rr * 8) * LDM + n * 8 + tig * 2) * (MS > 0 ? MS : 1);
                if (MS == 2) m2 = __half22float2(*(const __half2 *)(Ms + mo));
                if (MS == 4) m2 = *(const float2 *)(Ms + mo);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const int64_t cell = t + n * 8 + tig * 2 + j;
                    const float mv = MS == 0 ? mask_at(rr, cell) : on[rr] && cell < a.n_kv ? (j ? m2.y : m2.x) : -INFINITY;
                    const float x = sc[n][rr * 2 + j] * a.scale;
                    sc[n][rr * 2 + j] = mv == -INFINITY ? -INFINITY : x + mv;
                    tmax = fmaxf(tmax, sc[n][rr * 2 + j]);
                }
            }
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
            const float mnew = fmaxf(mx[rr], tmax);
            const float alpha = mnew == -INFINITY ? 1.0f : __expf(mx[rr] - mnew); /* 0 when mx was -inf */
            mx[rr] = mnew;
            float ps = 0.0f;
#pragma unroll
            for (int n = 0; n < NT; n++) {
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float x = sc[n][rr * 2 + j];
                    const float p = x == -INFINITY ? 0.0f : __expf(x - mnew);
                    sc[n][rr * 2 + j] = p;
                    ps += p;
                }
            }
            l[rr] = l[rr] * alpha + ps; /* this lane's part of the row sum: the quad adds them at the end */
#pragma unroll
            for (int d = 0; d < DT; d++) {
                o[d][rr * 2] *= alpha;
                o[d][rr * 2 + 1] *= alpha;
            }
        }

        /* O += P V: P's A fragments are S's accumulators of two adjacent column tiles; V's B
         * fragments from V rows (cells) read transposed, two output tiles per load */
#pragma unroll
        for (int kk = 0; kk < FA_TILE_KV / 16; kk++) {
            const uint32_t pa[4] = {fa_pack_h2(sc[2 * kk][0], sc[2 * kk][1]), fa_pack_h2(sc[2 * kk][2], sc[2 * kk][3]),
                                    fa_pack_h2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), fa_pack_h2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
            const __half * vr = Vs + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LDK + (lane / 16) * 8;
#pragma unroll
            for (int d = 0; d < DT; d += 2) {
                uint32_t vb[4];
                fa_ldsm4_t(vb, vr + d * 8);
                fa_mma(o[d], pa, vb[0], vb[1]);
                fa_mma(o[d + 1], pa, vb[2], vb[3]);
            }
        }
        t = tn;
        s ^= 1;
        __syncthreads(); /* every warp is done with stage s ^ 1 before the next load into it */
    }

#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float sum = l[rr];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (!on[rr]) continue;
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float * out = fa_out_row(a, iq[rr], hh[rr], b);
#pragma unroll
        for (int d = 0; d < DT; d++) *(float2 *)(out + d * 8 + tig * 2) = make_float2(o[d][rr * 2] * inv, o[d][rr * 2 + 1] * inv);
    }
}

/* ---------------------------------------------------------------- host side */

static bool fa_kv_type_ok(const struct loom_tensor * t) {
    switch (t->type) {
    case LOOM_TYPE_F32:
    case LOOM_TYPE_F16:
    case LOOM_TYPE_BF16: return t->nb[0] == loom_type_size(t->type) && lc_strides_ok(t);
    case LOOM_TYPE_Q8_0:
    case LOOM_TYPE_Q4_0: /* rows of whole blocks, each block on a 2-byte boundary (its F16 scale) */
        return t->ne[0] % FA_QK == 0 && t->nb[0] == loom_type_size(t->type) && t->nb[1] % 2 == 0 && t->nb[2] % 2 == 0 &&
               t->nb[3] % 2 == 0;
    default: return false;
    }
}

bool lc_flash_attn_supported(const struct loom_tensor * op) {
    const struct loom_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *m = op->src[3];
    if (!q || !k || !v || q->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32 || !loom_is_contiguous(op)) return false;
    if (!fa_kv_type_ok(k) || !fa_kv_type_ok(v) || !lc_strides_ok(q)) return false;
    if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3]) return false;
    if (k->ne[2] <= 0 || q->ne[2] % k->ne[2] != 0) return false;
    if (q->ne[0] % 8 != 0 || q->ne[0] > FA_MAX_D || v->ne[0] % 8 != 0 || v->ne[0] > FA_MAX_D) return false; /* 8 values per lane */
    if (op->ne[0] != v->ne[0] || op->ne[1] != q->ne[2] || op->ne[2] != q->ne[1] || op->ne[3] != q->ne[3]) return false;
    if (m) {
        if (m->type != LOOM_TYPE_F32 && m->type != LOOM_TYPE_F16) return false;
        if (m->ne[0] != k->ne[1] || m->ne[1] < q->ne[1] || m->ne[2] <= 0 || m->ne[3] <= 0) return false;
        if (q->ne[2] % m->ne[2] != 0 || q->ne[3] % m->ne[3] != 0 || !lc_strides_ok(m)) return false;
    }
    const int64_t n_cols = q->ne[1] * (q->ne[2] / k->ne[2]);
    return (n_cols + 7) / 8 <= 65535 && k->ne[2] * q->ne[3] <= 65535;
}

/* How a node is computed: the kernel, its column blocks and KV splits (shapes only, and the SM count). */
struct fa_plan {
    bool mma;
    int lpr, ncol;       /* vector kernel: lanes per K/V row, columns per block */
    int warps;           /* vector kernel: warps per block */
    int n_cols, n_cblk, n_splits;
    int64_t span;
};

static bool fa_use_mma(const struct loom_tensor * op, int64_t n_cols) {
    const struct loom_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2];
    const int64_t D = q->ne[0];
    return n_cols > 8 && k->type == LOOM_TYPE_F16 && v->type == LOOM_TYPE_F16 && v->ne[0] == D &&
           (D == 64 || D == 80 || D == 96 || D == 128);
}

static struct fa_plan fa_plan_of(const struct loom_tensor * op, int sm_count) {
    const struct loom_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2];
    struct fa_plan p = {};
    const int64_t group = q->ne[2] / k->ne[2], n_kv = k->ne[1];
    p.n_cols = (int)(q->ne[1] * group);
    p.mma = fa_use_mma(op, p.n_cols);
    p.n_splits = 1;
    p.span = n_kv;
    if (p.mma) {
        p.n_cblk = (p.n_cols + FA_TILE_Q - 1) / FA_TILE_Q;
        return p;
    }
    const int64_t lanes = (q->ne[0] > v->ne[0] ? q->ne[0] : v->ne[0]) / 8;
    p.lpr = 1;
    while (p.lpr < lanes) p.lpr *= 2;
    p.ncol = p.n_cols <= 1 ? 1 : p.n_cols <= 2 ? 2 : p.n_cols <= 4 ? 4 : 8;
    p.n_cblk = (p.n_cols + p.ncol - 1) / p.ncol;
    p.warps = FA_WARPS;
    /* one column, a short cache: no split and no merge kernel, the block's 16 warps walk the cells
     * (7B tg128 on an H200 +1-5% over 4 warps with splits: bench/results/cuda-quant.md, session 17) */
    if (p.ncol == 1 && n_kv <= FA_ONE_KV) {
        p.warps = FA_WARPS_ONE;
        return p;
    }
    /* split the cells until the grid holds ~4 blocks per SM, each span at least FA_MIN_SPAN cells */
    const int64_t base = k->ne[2] * q->ne[3] * p.n_cblk;
    const int64_t want = (4 * (int64_t)sm_count + base - 1) / base;
    int64_t splits = n_kv / FA_MIN_SPAN;
    if (splits > want) splits = want;
    if (splits > FA_MAX_SPLITS) splits = FA_MAX_SPLITS;
    if (splits > 1) {
        const int64_t step = 16; /* spans of whole 16-cell steps */
        int64_t span = (n_kv + splits - 1) / splits;
        span = (span + step - 1) / step * step;
        p.span = span;
        p.n_splits = (int)((n_kv + span - 1) / span);
    }
    return p;
}

static size_t fa_scratch_of(const struct loom_tensor * op, const struct fa_plan * p) {
    if (p->n_splits <= 1) return 0;
    const struct loom_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2];
    return (size_t)k->ne[2] * (size_t)q->ne[3] * (size_t)p->n_cblk * (size_t)p->n_splits * (size_t)p->ncol * (size_t)(v->ne[0] + 2) *
           sizeof(float);
}

size_t lc_flash_attn_scratch(const struct lc_backend * be, const struct loom_tensor * op) {
    const struct fa_plan p = fa_plan_of(op, be->dev->sm_count);
    return fa_scratch_of(op, &p);
}

/* The bytes of one row of K or V (ne[0] elements of its type). */
static int64_t fa_row_bytes(const struct loom_tensor * t) {
    return t->ne[0] / loom_blck_size(t->type) * (int64_t)loom_type_size(t->type);
}

/* Whether every row of 't' (from its base) starts on an 'align'-byte boundary. */
static bool fa_rows_aligned(const struct lc_tensor * t, int64_t align) {
    return (uintptr_t)t->data % align == 0 && t->nb[1] % align == 0 && t->nb[2] % align == 0 && t->nb[3] % align == 0;
}

/* kv: LOOM_TYPE_F16, LOOM_TYPE_Q8_0 or LOOM_TYPE_Q4_0 for the kernels of one K and V type, -1 for any types. */
template <int NCOL, int W = FA_WARPS> static const void * fa_vec_kernel_for(int kv) {
    switch (kv) {
    case LOOM_TYPE_F16: return (const void *)lc_fa_vec_kernel<NCOL, LOOM_TYPE_F16, W>;
    case LOOM_TYPE_Q8_0: return (const void *)lc_fa_vec_kernel<NCOL, LOOM_TYPE_Q8_0, W>;
    case LOOM_TYPE_Q4_0: return (const void *)lc_fa_vec_kernel<NCOL, LOOM_TYPE_Q4_0, W>;
    default: return (const void *)lc_fa_vec_kernel<NCOL, -1, W>;
    }
}

static const void * fa_vec_kernel_ncol(int ncol, int kv, int warps) {
    switch (ncol) {
    case 1: return warps == FA_WARPS_ONE ? fa_vec_kernel_for<1, FA_WARPS_ONE>(kv) : fa_vec_kernel_for<1>(kv);
    case 2: return fa_vec_kernel_for<2>(kv);
    case 4: return fa_vec_kernel_for<4>(kv);
    default: return fa_vec_kernel_for<8>(kv);
    }
}

template <int D, int MS> static enum loom_status fa_launch_mma(struct lc_backend * be, struct lc_fa_args * a, dim3 grid) {
    const size_t smem = fa_mma_layout<D, MS>::BYTES;
    static uint32_t raised; /* devices (bit per CUDA ordinal < 32) whose dynamic shared memory limit is raised for this kernel */
    const uint32_t bit = be->dev->id < 32 ? 1u << be->dev->id : 0u;
    if (!(raised & bit)) {
        LC_TRY(cudaFuncSetAttribute((const void *)lc_fa_mma_kernel<D, MS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        raised |= bit;
    }
    void * args[] = {a};
    lc_launch(be, (const void *)lc_fa_mma_kernel<D, MS>, grid, dim3(FA_WARPS * 32), args, smem);
    return LC_CHECK_LAUNCH("lc_fa_mma_kernel");
}

template <int D> static enum loom_status fa_launch_mma_d(struct lc_backend * be, struct lc_fa_args * a, dim3 grid, int ms) {
    return ms == 2 ? fa_launch_mma<D, 2>(be, a, grid) : ms == 4 ? fa_launch_mma<D, 4>(be, a, grid) : fa_launch_mma<D, 0>(be, a, grid);
}

enum loom_status lc_flash_attn(struct lc_backend * be, struct loom_tensor * dst) {
    const struct loom_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    struct lc_fa_args a = {};
    enum loom_status st = lc_tensor_of(be, q, false, &a.q);
    if (st == LOOM_OK) st = lc_tensor_of(be, k, false, &a.k);
    if (st == LOOM_OK) st = lc_tensor_of(be, v, false, &a.v);
    if (st == LOOM_OK && m) st = lc_tensor_of(be, m, false, &a.m);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &a.d);
    if (st != LOOM_OK) return st;
    if (!m) a.m = a.q; /* present but unused */
    const struct fa_plan p = fa_plan_of(dst, be->dev->sm_count);
    a.has_mask = m != NULL;
    a.scale = loom_get_op_param_f32(dst, 0);
    a.D = (int)q->ne[0];
    a.Dv = (int)v->ne[0];
    a.Hk = (int)k->ne[2];
    a.group = (int)(q->ne[2] / k->ne[2]);
    a.n_cols = p.n_cols;
    a.n_cblk = p.n_cblk;
    a.n_kv = k->ne[1];
    a.n_splits = p.n_splits;
    a.span = p.span;
    const dim3 grid_bh((unsigned)p.n_cblk, (unsigned)(k->ne[2] * q->ne[3]));
    if (p.mma) {
        a.vec_k = fa_rows_aligned(&a.k, 16);
        a.vec_v = fa_rows_aligned(&a.v, 16);
        /* a mask of whole 16-byte runs (F16 or F32, dense rows on 16-byte boundaries): staged with K and V */
        int ms = m && (m->type == LOOM_TYPE_F16 || m->type == LOOM_TYPE_F32) ? (int)loom_type_size(m->type) : 0;
        if (ms && !(a.m.nb[0] == ms && fa_rows_aligned(&a.m, 16) && a.n_kv % (16 / ms) == 0)) ms = 0;
        switch (a.D) {
        case 64: return fa_launch_mma_d<64>(be, &a, grid_bh, ms);
        case 80: return fa_launch_mma_d<80>(be, &a, grid_bh, ms);
        case 96: return fa_launch_mma_d<96>(be, &a, grid_bh, ms);
        default: return fa_launch_mma_d<128>(be, &a, grid_bh, ms);
        }
    }
    /* 16-byte loads (8 halves, or 4 floats twice) where every row allows them */
    a.vec_k = lc_is_float_type(k->type) && fa_rows_aligned(&a.k, 16);
    a.vec_v = lc_is_float_type(v->type) && fa_rows_aligned(&a.v, 16);
    const size_t need = fa_scratch_of(dst, &p);
    if (need > 0) {
        if (need > be->scratch_size) {
            loom_log(LOOM_LOG_ERROR, "%s: flash_attn_ext '%s' needs %zu bytes of scratch, the backend has %zu", be->dev->name, dst->name,
                     need, be->scratch_size);
            return LOOM_ERR_BACKEND;
        }
        a.part = (float *)be->scratch;
        be->conv.src = NULL; /* a product's converted operand there is gone */
    }
    /* one K and V type: F16, or Q8_0 / Q4_0 with every row on an 8-byte boundary (two 8-byte loads a lane) */
    int kv = -1;
    if (k->type == v->type && k->type == LOOM_TYPE_F16) kv = LOOM_TYPE_F16;
    if (k->type == v->type && (k->type == LOOM_TYPE_Q8_0 || k->type == LOOM_TYPE_Q4_0) && fa_rows_aligned(&a.k, 8) && fa_rows_aligned(&a.v, 8) &&
        fa_row_bytes(k) % 8 == 0 && fa_row_bytes(v) % 8 == 0) {
        kv = k->type;
    }
    const void * fn = fa_vec_kernel_ncol(p.ncol, kv, p.warps);
    a.lpr = p.lpr;
    a.krb = (int)fa_row_bytes(k);
    a.vrb = (int)fa_row_bytes(v);
    /* one token of one sequence, one split: the result's 8-bit runs for a quantized product after */
    a.q8 = NULL;
    if (p.n_splits == 1 && be->opts.fuse && q->ne[1] == 1 && q->ne[3] == 1 && a.Dv % 32 == 0 && lc_is_contiguous(&a.d) &&
        (int64_t)a.Dv * dst->ne[1] <= LC_PRE_MAX_K) {
        a.q8 = lc_q8_free(be);
        lc_q8_leave(be, a.d.data, (int64_t)a.Dv * dst->ne[1], a.q8);
    }
    void * args[] = {&a};
    lc_launch(be, fn, dim3((unsigned)p.n_splits, (unsigned)(k->ne[2] * q->ne[3]), (unsigned)p.n_cblk), dim3(p.warps * 32), args);
    st = LC_CHECK_LAUNCH("lc_fa_vec_kernel");
    if (st != LOOM_OK || p.n_splits == 1) return st;
    int ncol = p.ncol;
    void * margs[] = {&a, &ncol};
    lc_launch(be, (const void *)lc_fa_merge_kernel, dim3((unsigned)(p.n_cblk * p.ncol), (unsigned)(k->ne[2] * q->ne[3])), dim3(FA_MAX_SPLITS),
              margs);
    return LC_CHECK_LAUNCH("lc_fa_merge_kernel");
}
