/* cuda-quant-dot.cuh -- integer dot products of quantized weight units with 8-bit activations:
 * the activation columns quantized per run of 32 (lc_a8 records, written by the matrix-vector
 * launch's first kernel, cuda-matvec-q.cu), the weight codes unpacked to bytes in registers and
 * multiplied by the activation codes with __dp4a (four int8 products and their sum per
 * instruction); the block's scales are applied once per run (or half run) to the integer sums.
 * This is the field's "q8_1" scheme (the activation scale and its code sum per 32, so that a
 * block's offset or minimum costs one product per block); lc_q8dot<TYPE> exists for the types
 * that have it (the others keep the F32 kernels of cuda-matvec-q.cuh). */
#ifndef LOOM_CUDA_QUANT_DOT_CUH
#define LOOM_CUDA_QUANT_DOT_CUH

#include "cuda-quant.cuh"

#include <float.h>

/* One run of 32 activations x quantized: 32 int8 codes q (x ~ d * q), then 16 bytes: float d =
 * max|x| / 127, int (sum of q[0..15]) & 0xffff | (sum of q[16..31]) << 16, float d * (sum of
 * all 32 q), 0. 48 bytes, 16-byte aligned. */
#define LC_A8_RUN 48

/* Writes the lc_a8 record of one run of 32 activations at 'run' (16-byte aligned): lane l of the
 * calling warp holds element l in 'x'. d = max|x| / 127, codes rounded to nearest (even); a run
 * holding a NaN or an infinity gets d = NaN and codes 0, so that its products are NaN (fmaxf alone
 * would skip a NaN and give d = 0: a silently zero product). Both writers of these records
 * (lc_a8_quant_kernel and the attention of one token, cuda-attn.cu) call this, so the records agree
 * bit for bit. */
static __device__ __forceinline__ void lc_a8_quant_run(float x, int lane, char * run) {
    float amax = fabsf(x);
    const bool bad = __any_sync(0xffffffffu, !(amax <= FLT_MAX));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = bad ? __int_as_float(0x7fc00000) : amax / 127.0f, id = !bad && amax > 0.0f ? 127.0f / amax : 0.0f;
    const int q = bad ? 0 : __float2int_rn(x * id);
    int h = q; /* the sum over this lane's half warp */
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) h += __shfl_xor_sync(0xffffffffu, h, o);
    const int lo = __shfl_sync(0xffffffffu, h, 0), hi = __shfl_sync(0xffffffffu, h, 16);
    run[lane] = (char)(signed char)q;
    if (lane == 0) *(int4 *)(run + 32) = make_int4(__float_as_int(d), (lo & 0xffff) | (hi << 16), __float_as_int(d * (float)(lo + hi)), 0);
}

struct lc_a8 {
    int4 q0, q1;                     /* codes 0..15, 16..31 */
    float d, s;                      /* the scale; d * (sum of the codes) */
    int slo, shi;                    /* the sums of codes 0..15 and 16..31 */
};

/* The run at p: SH, shared memory (16-byte aligned), else global. */
template <bool SH> static __device__ __forceinline__ struct lc_a8 lc_a8_load(const char * p) {
    int4 m;
    struct lc_a8 a;
    if (SH) {
        a.q0 = ((const int4 *)p)[0];
        a.q1 = ((const int4 *)p)[1];
        m = ((const int4 *)p)[2];
    } else {
        a.q0 = __ldg((const int4 *)p);
        a.q1 = __ldg((const int4 *)p + 1);
        m = __ldg((const int4 *)p + 2);
    }
    a.d = __int_as_float(m.x);
    a.s = __int_as_float(m.z);
    a.slo = (int)(short)(m.y & 0xffff);
    a.shi = m.y >> 16;
    return a;
}

/* The sum of the products of the byte codes in words w[0..7] (elements 4i .. 4i + 3 in w[i]) and the
 * run's activation codes: of all 32 (lc_dp8), of elements 0..15 (lc_dp4lo) or 16..31 (lc_dp4hi). */
static __device__ __forceinline__ int lc_dp8(const uint32_t * w, const struct lc_a8 & a) {
    int s = __dp4a((int)w[0], a.q0.x, 0);
    s = __dp4a((int)w[1], a.q0.y, s);
    s = __dp4a((int)w[2], a.q0.z, s);
    s = __dp4a((int)w[3], a.q0.w, s);
    s = __dp4a((int)w[4], a.q1.x, s);
    s = __dp4a((int)w[5], a.q1.y, s);
    s = __dp4a((int)w[6], a.q1.z, s);
    return __dp4a((int)w[7], a.q1.w, s);
}
static __device__ __forceinline__ int lc_dp4lo(const uint32_t * w, const struct lc_a8 & a) {
    int s = __dp4a((int)w[0], a.q0.x, 0);
    s = __dp4a((int)w[1], a.q0.y, s);
    s = __dp4a((int)w[2], a.q0.z, s);
    return __dp4a((int)w[3], a.q0.w, s);
}
static __device__ __forceinline__ int lc_dp4hi(const uint32_t * w, const struct lc_a8 & a) {
    int s = __dp4a((int)w[4], a.q1.x, 0);
    s = __dp4a((int)w[5], a.q1.y, s);
    s = __dp4a((int)w[6], a.q1.z, s);
    return __dp4a((int)w[7], a.q1.w, s);
}

/* Bits 0..3 of x, each moved to bit 4 of its own byte (byte k gets bit k). */
static __device__ __forceinline__ uint32_t lc_bits_to_b4(uint32_t x) { return (((x & 0x0fu) * 0x00204081u) & 0x01010101u) << 4; }

/* lc_q8dot<TYPE>::dot<SH, NC>(blk, u, act, acc): acc[j] += the dot product of unit u of the block
 * at 'blk' (the units of lc_q<TYPE>) with column j's activations, whose runs for the unit are at
 * act[j], act[j] + LC_A8_RUN, ... (SH: in shared memory). */
template <int TYPE> struct lc_q8dot;

/* The types with lc_q8dot (a compile-time list: lc_q8dot_on<TYPE>::value; at run time lc_q8dot_type). */
template <int TYPE> struct lc_q8dot_on {
    static const bool value = TYPE == LOOM_TYPE_Q4_0 || TYPE == LOOM_TYPE_Q4_1 || TYPE == LOOM_TYPE_Q5_0 || TYPE == LOOM_TYPE_Q5_1 ||
                              TYPE == LOOM_TYPE_Q8_0 || TYPE == LOOM_TYPE_Q4_K || TYPE == LOOM_TYPE_Q5_K || TYPE == LOOM_TYPE_Q6_K;
};

/* The legacy blocks (lc_q_legacy's layout): codes c of 4 (H5: 5) bits; value (c - OFF) * d, or
 * with MIN c * d + m. */
template <int NB, bool MIN, bool H5, int OFF> struct lc_q8dot_legacy {
    template <bool SH, int NC> static __device__ __forceinline__ void dot(const char * blk, int, const char * const (&act)[NC], float (&acc)[NC]) {
        uint32_t q[4], qh;
        float d, m;
        lc_legacy_load<NB, MIN, H5>(blk, d, m, qh, q);
        uint32_t c[8]; /* the codes of elements 4i .. 4i + 3 in c[i] */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            c[i] = q[i] & 0x0f0f0f0fu;
            c[i + 4] = (q[i] >> 4) & 0x0f0f0f0fu;
            if (H5) {
                c[i] |= lc_bits_to_b4(qh >> (4 * i));
                c[i + 4] |= lc_bits_to_b4(qh >> (16 + 4 * i));
            }
        }
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const struct lc_a8 a = lc_a8_load<SH>(act[j]);
            const float sumi = (float)lc_dp8(c, a);
            acc[j] += MIN ? d * a.d * sumi + m * a.s : d * (a.d * sumi - (float)OFF * a.s);
        }
    }
};
template <> struct lc_q8dot<LOOM_TYPE_Q4_0> : lc_q8dot_legacy<18, false, false, 8> {};
template <> struct lc_q8dot<LOOM_TYPE_Q4_1> : lc_q8dot_legacy<20, true, false, 0> {};
template <> struct lc_q8dot<LOOM_TYPE_Q5_0> : lc_q8dot_legacy<22, false, true, 16> {};
template <> struct lc_q8dot<LOOM_TYPE_Q5_1> : lc_q8dot_legacy<24, true, true, 0> {};

template <> struct lc_q8dot<LOOM_TYPE_Q8_0> {
    template <bool SH, int NC> static __device__ __forceinline__ void dot(const char * blk, int, const char * const (&act)[NC], float (&acc)[NC]) {
        uint32_t w[9], c[8];
        lc_ld_b2<34>(blk, w);
        const float d = lc_h2f(w[0]);
#pragma unroll
        for (int i = 0; i < 8; i++) c[i] = lc_mid16(w[i], w[i + 1]);
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const struct lc_a8 a = lc_a8_load<SH>(act[j]);
            acc[j] += d * a.d * (float)lc_dp8(c, a);
        }
    }
};

/* Q4_K / Q5_K (H5): unit c is sub-blocks 2c (low nibbles of qs[32c ..]) and 2c + 1 (high);
 * value d * sc * code - dmin * m per sub-block */
template <bool H5> struct lc_q8dot_k45 {
    template <bool SH, int NC> static __device__ __forceinline__ void dot(const char * blk, int cu, const char * const (&act)[NC], float (&acc)[NC]) {
        const int QS = H5 ? 48 : 16;
        const uint4 h = lc_ld128(blk);
        const uint4 q0 = lc_ld128(blk + QS + 32 * cu), q1 = lc_ld128(blk + QS + 16 + 32 * cu);
        const uint32_t sc[3] = {h.y, h.z, h.w}, q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        uint32_t lo[8], hi[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            lo[i] = q[i] & 0x0f0f0f0fu;
            hi[i] = (q[i] >> 4) & 0x0f0f0f0fu;
        }
        if (H5) { /* the fifth bit of element 32 s + l: bit s of qh[l] */
            const uint4 h0 = lc_ld128(blk + 16), h1 = lc_ld128(blk + 32);
            const uint32_t qh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
            for (int i = 0; i < 8; i++) {
                lo[i] |= ((qh[i] >> (2 * cu)) & 0x01010101u) << 4;
                hi[i] |= ((qh[i] >> (2 * cu + 1)) & 0x01010101u) << 4;
            }
        }
        int is0, im0, is1, im1;
        lc_k4_scale_min(sc, 2 * cu, is0, im0);
        lc_k4_scale_min(sc, 2 * cu + 1, is1, im1);
        const float d = lc_h2f(h.x), dmin = lc_h2f(h.x >> 16);
        const float d0 = d * lc_code((uint32_t)is0, 0.0f), d1 = d * lc_code((uint32_t)is1, 0.0f);
        const float m0 = dmin * lc_code((uint32_t)im0, 0.0f), m1 = dmin * lc_code((uint32_t)im1, 0.0f);
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const struct lc_a8 a = lc_a8_load<SH>(act[j]), b = lc_a8_load<SH>(act[j] + LC_A8_RUN);
            acc[j] += d0 * a.d * (float)lc_dp8(lo, a) + d1 * b.d * (float)lc_dp8(hi, b) - (m0 * a.s + m1 * b.s);
        }
    }
};
template <> struct lc_q8dot<LOOM_TYPE_Q4_K> : lc_q8dot_k45<false> {};
template <> struct lc_q8dot<LOOM_TYPE_Q5_K> : lc_q8dot_k45<true> {};

/* Q6_K: unit h is the half of 128 elements (4 runs; a signed 8-bit scale per 16 elements); code
 * of element 32 p + l: low 4 bits from ql[l + 32 (p % 2)] (nibble p / 2), high 2 bits from bits
 * 2p of qh[l]; value d * scale * (code - 32). WS: the block is in shared memory (the kernels'
 * staged weights, lc_qmv8_rows_ws). */
template <> struct lc_q8dot<LOOM_TYPE_Q6_K> {
    template <bool SH, int NC, bool WS = false>
    static __device__ __forceinline__ void dot(const char * blk, int h, const char * const (&act)[NC], float (&acc)[NC]) {
        uint32_t ql[16], qh[8], sc[2];
        lc_ld_b2<64, WS>(blk + 64 * h, ql);
        lc_ld_b2<32, WS>(blk + 128 + 32 * h, qh);
        lc_ld_b2<8, WS>(blk + 192 + 8 * h, sc);
        const float d = lc_h2f(lc_ldw16<WS>(blk + 208));
        int isum[NC];
        float part[NC];
#pragma unroll
        for (int j = 0; j < NC; j++) part[j] = 0.0f;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint32_t c[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t l4 = (ql[i + 8 * (p % 2)] >> (4 * (p / 2))) & 0x0f0f0f0fu;
                const uint32_t h2 = 2 * p <= 4 ? qh[i] << (4 - 2 * p) : qh[i] >> (2 * p - 4);
                c[i] = l4 | (h2 & 0x30303030u);
            }
            const int s0 = (int)(int8_t)LC_BYTE(sc, 2 * p), s1 = (int)(int8_t)LC_BYTE(sc, 2 * p + 1);
#pragma unroll
            for (int j = 0; j < NC; j++) {
                const struct lc_a8 a = lc_a8_load<SH>(act[j] + p * LC_A8_RUN);
                isum[j] = s0 * (lc_dp4lo(c, a) - 32 * a.slo) + s1 * (lc_dp4hi(c, a) - 32 * a.shi);
                part[j] += a.d * (float)isum[j];
            }
        }
#pragma unroll
        for (int j = 0; j < NC; j++) acc[j] += d * part[j];
    }
};

#endif
