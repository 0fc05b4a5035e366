/* cuda-quant.cuh -- the quantized weight types on the device: for each type, how a lane reads one
 * "unit" of a block (a whole block, or a fixed part of a super-block) into registers and decodes
 * it into runs of 32 F32 values. The matrix-vector kernels (cuda-matvec-q.cu) multiply the runs
 * by the activations; the dequantizer (cuda-dequant.cu) stores them. Block layouts:
 * src/quant/quant-blocks.h; the arithmetic is that of src/quant/quant-dequant.c (one product of
 * the folded scale and the code per element), so the values match the CPU's. */
#ifndef LOOM_CUDA_QUANT_CUH
#define LOOM_CUDA_QUANT_CUH

#include "cuda-common.cuh"

/* True for the quantized types the CUDA kernels read (matrix-vector products, dequantization). */
bool lc_is_quant_type(int type);
/* The address alignment (bytes) the kernels need for blocks of 'type': the largest power of two
 * up to 16 that divides the block size (rows of whole blocks keep it when the tensor has it). */
int lc_quant_align(int type);

/* ------------------------------------------------------------------ loads */

static __device__ __forceinline__ float lc_h2f(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)(h & 0xffff))); }
static __device__ __forceinline__ uint32_t lc_ld16(const char * p) { return __ldg((const unsigned short *)p); }
static __device__ __forceinline__ uint32_t lc_ld32(const char * p) { return __ldg((const unsigned int *)p); }
static __device__ __forceinline__ uint2 lc_ld64(const char * p) { return __ldg((const uint2 *)p); }
static __device__ __forceinline__ uint4 lc_ld128(const char * p) { return __ldg((const uint4 *)p); }
/* The same loads of shared memory (WS) or of global memory through the read-only cache. */
template <bool WS> static __device__ __forceinline__ uint32_t lc_ldw16(const char * p) { return WS ? *(const unsigned short *)p : lc_ld16(p); }
template <bool WS> static __device__ __forceinline__ uint32_t lc_ldw32(const char * p) { return WS ? *(const unsigned int *)p : lc_ld32(p); }
/* bytes 2..5 of the 8 bytes lo:hi (little-endian) */
static __device__ __forceinline__ uint32_t lc_mid16(uint32_t lo, uint32_t hi) { return __funnelshift_r(lo, hi, 16); }
/* byte i (compile-time after unrolling) of the little-endian words w */
#define LC_BYTE(w, i) (((w)[(i) >> 2] >> (8 * ((i) & 3))) & 0xffu)

/* Bytes [p, p + NB) of a 2-byte aligned address (NB even; WS: in shared memory, else global),
 * packed little-endian into w (the last word's high half is 0 when NB % 4 == 2), reading no byte
 * outside the range: 4-byte loads from the first 4-byte aligned address on, 2-byte loads at the
 * ends. No branch: the alignment picks addresses and shifts. */
template <int NB, bool WS = false> static __device__ __forceinline__ void lc_ld_b2(const char * p, uint32_t (&w)[(NB + 3) / 4]) {
    static_assert(NB % 2 == 0 && NB >= 4, "an even byte count");
    const bool mis = ((uintptr_t)p & 2) != 0;
    if (NB % 4 == 2) {
        const int n4 = (NB - 2) / 4;
        uint32_t W[n4 > 0 ? n4 : 1];
#pragma unroll
        for (int i = 0; i < n4; i++) W[i] = lc_ldw32<WS>(p + (mis ? 2 : 0) + 4 * i);
        const uint32_t h = lc_ldw16<WS>(mis ? p : p + NB - 2);
        if (mis) {
            w[0] = h | (W[0] << 16);
#pragma unroll
            for (int i = 1; i < n4; i++) w[i] = lc_mid16(W[i - 1], W[i]);
            w[n4] = W[n4 - 1] >> 16;
        } else {
#pragma unroll
            for (int i = 0; i < n4; i++) w[i] = W[i];
            w[n4] = h;
        }
    } else {
        const int n4 = NB / 4 - 1;
        uint32_t W[n4 > 0 ? n4 : 1];
#pragma unroll
        for (int i = 0; i < n4; i++) W[i] = lc_ldw32<WS>(p + (mis ? 2 : 0) + 4 * i);
        const uint32_t h1 = lc_ldw16<WS>(mis ? p : p + NB - 4), h2 = lc_ldw16<WS>(p + NB - 2);
        if (n4 == 0) {
            w[0] = h1 | (h2 << 16);
        } else if (mis) {
            w[0] = h1 | (W[0] << 16);
#pragma unroll
            for (int i = 1; i < n4; i++) w[i] = lc_mid16(W[i - 1], W[i]);
            w[n4] = (W[n4 - 1] >> 16) | (h2 << 16);
        } else {
#pragma unroll
            for (int i = 0; i < n4; i++) w[i] = W[i];
            w[n4] = h1 | (h2 << 16);
        }
    }
}

/* The float value of code q - off (q < 2^23; off: 0, 4, 8, 16, 32) without an integer-to-float
 * conversion (a slow instruction): q in the mantissa of 2^23, minus 2^23 + off, exactly. */
static __device__ __forceinline__ float lc_code(uint32_t q, float off) { return __int_as_float(0x4B000000u | q) - (8388608.0f + off); }
/* The value of the signed byte in the low 8 bits of u, the same way. */
static __device__ __forceinline__ float lc_s8(uint32_t u) { return __int_as_float(0x4B000000u | ((u ^ 0x80u) & 0xffu)) - 8388736.0f; }

/* The IQ4_NL code book (src/quant/quant-tables.c) as packed signed bytes, looked up without
 * memory: value of 4-bit index n. */
static __device__ __forceinline__ float lc_iq4nl(uint32_t n) {
    const uint32_t t0 = 0xbfad9881u, t1 = 0xf6eaddcfu, t2 = 0x26190d01u, t3 = 0x71594535u; /* -127 -104 -83 -65 | -49 -35 -22 -10 | 1 13 25 38 | 53 69 89 113 */
    const uint32_t lo = n & 8 ? t2 : t0, hi = n & 8 ? t3 : t1;
    return lc_s8(__byte_perm(lo, hi, n & 7));
}

/* The 6-bit scale and minimum of sub-block s (0..7) of a Q4_K / Q5_K block from its 12 scale
 * bytes (words sc[0..2]); s may be a run-time value. */
static __device__ __forceinline__ void lc_k4_scale_min(const uint32_t * sc, int s, int & d, int & m) {
    const uint32_t b0 = (sc[0] >> (8 * (s & 3))) & 0xff, b1 = (sc[1] >> (8 * (s & 3))) & 0xff, b2 = (sc[2] >> (8 * (s & 3))) & 0xff;
    if (s < 4) { /* bytes s and s + 4 */
        d = b0 & 63;
        m = b1 & 63;
    } else { /* byte s + 4 (= 8 + s % 4) with the top bits of bytes s - 4 and s */
        d = (b2 & 0x0f) | (b0 >> 6) << 4;
        m = (b2 >> 4) | (b1 >> 6) << 4;
    }
}

/* The 32 values of a run whose codes are the nibbles of 16 bytes q (words q[0..3]), the layout
 * of the legacy blocks and IQ4_NL / IQ4_XS: element j (j < 16) is the low nibble of byte j, element
 * j + 16 its high nibble; x[e] = v(code, e) (v adds a fifth bit, the scale, the offset). */
template <class V> static __device__ __forceinline__ void lc_nibble_run(const uint32_t * q, float (&x)[32], V && v) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const uint32_t b = LC_BYTE(q, j);
        x[j] = v(b & 0x0f, j);
        x[j + 16] = v(b >> 4, j + 16);
    }
}

/* ------------------------------------------------------------------ the types */

/* lc_q<TYPE>: QK elements per block of BS bytes, read in NU units of UE elements;
 * unit(blk, u, f) loads unit u (0 .. NU - 1) of the block at 'blk' and calls f(e0, x) for each of
 * its runs x of 32 consecutive elements, e0 the run's first element within the block. */
template <int TYPE> struct lc_q;

/* The blocks of 32 elements whose 16 code bytes follow a half-precision scale d (IQ4 / Q4_0 /
 * Q5_0: 2-byte aligned) or the scale and a half-precision minimum m (Q4_1 / Q5_1: 4-byte
 * aligned); H5: a fifth bit per element in the 4 bytes qh before the codes. lc_legacy_load
 * reads one block of NB bytes: d, m (0 without MIN), qh (0 without H5) and the code bytes q. */
template <int NB, bool MIN, bool H5> static __device__ __forceinline__ void lc_legacy_load(const char * blk, float & d, float & m, uint32_t & qh,
                                                                                       uint32_t (&q)[4]) {
    constexpr int W = (NB + 3) / 4;
    uint32_t w[W];
    m = 0.0f;
    qh = 0;
    if (MIN) { /* d, m [, qh], qs: whole words */
#pragma unroll
        for (int i = 0; i < W; i++) w[i] = lc_ld32(blk + 4 * i);
        d = lc_h2f(w[0]);
        m = lc_h2f(w[0] >> 16);
        if (H5) qh = w[1];
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = w[i + (H5 ? 2 : 1)];
    } else { /* d [, qh], qs: at a 2-byte offset */
        lc_ld_b2<NB>(blk, w);
        d = lc_h2f(w[0]);
        if (H5) qh = lc_mid16(w[0], w[1]);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = lc_mid16(w[i + (H5 ? 1 : 0)], w[i + (H5 ? 2 : 1)]);
    }
}

template <int NB, bool MIN, bool H5, class V> struct lc_q_legacy {
    static const int QK = 32, BS = NB, UE = 32, NU = 1;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int, F && f) {
        uint32_t q[4], qh;
        float d, m;
        lc_legacy_load<NB, MIN, H5>(blk, d, m, qh, q);
        float x[32];
        lc_nibble_run(q, x, [&](uint32_t c, int e) { return V::value(H5 ? c | ((qh >> e) & 1) << 4 : c, d, m); });
        f(0, x);
    }
};

/* the value of a code with the block's scale d and minimum m, per type */
struct lc_v_q4_0 { static __device__ __forceinline__ float value(uint32_t c, float d, float) { return lc_code(c, 8.0f) * d; } };
struct lc_v_q5_0 { static __device__ __forceinline__ float value(uint32_t c, float d, float) { return lc_code(c, 16.0f) * d; } };
struct lc_v_min { static __device__ __forceinline__ float value(uint32_t c, float d, float m) { return lc_code(c, 0.0f) * d + m; } };
struct lc_v_iq4 { static __device__ __forceinline__ float value(uint32_t c, float d, float) { return d * lc_iq4nl(c); } };

template <> struct lc_q<LOOM_TYPE_Q4_0> : lc_q_legacy<18, false, false, lc_v_q4_0> {};
template <> struct lc_q<LOOM_TYPE_IQ4_NL> : lc_q_legacy<18, false, false, lc_v_iq4> {};
template <> struct lc_q<LOOM_TYPE_Q4_1> : lc_q_legacy<20, true, false, lc_v_min> {};
template <> struct lc_q<LOOM_TYPE_Q5_0> : lc_q_legacy<22, false, true, lc_v_q5_0> {};
template <> struct lc_q<LOOM_TYPE_Q5_1> : lc_q_legacy<24, true, true, lc_v_min> {};

template <> struct lc_q<LOOM_TYPE_Q8_0> {
    static const int QK = 32, BS = 34, UE = 32, NU = 1;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int, F && f) {
        uint32_t w[9];
        lc_ld_b2<34>(blk, w);
        const float d = lc_h2f(w[0]);
        uint32_t q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = lc_mid16(w[i], w[i + 1]);
        float x[32];
#pragma unroll
        for (int j = 0; j < 32; j++) x[j] = lc_s8(LC_BYTE(q, j)) * d;
        f(0, x);
    }
};

/* Q8_K: unit u is elements 32u .. 32u + 31 */
template <> struct lc_q<LOOM_TYPE_Q8_K> {
    static const int QK = 256, BS = 292, UE = 32, NU = 8;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int u, F && f) {
        const float d = __uint_as_float(lc_ld32(blk));
        uint32_t q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = lc_ld32(blk + 4 + 32 * u + 4 * i);
        float x[32];
#pragma unroll
        for (int j = 0; j < 32; j++) x[j] = d * lc_s8(LC_BYTE(q, j));
        f(32 * u, x);
    }
};

/* Q4_K and (H5) Q5_K: unit c is sub-blocks 2c and 2c + 1 (the low and high nibbles of
 * qs[32c .. 32c + 31]); Q5_K's fifth bit of element 32 s + l is bit s of qh[l] */
template <bool H5> struct lc_q_k45 {
    static const int QK = 256, BS = H5 ? 176 : 144, UE = 64, NU = 4;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int c, F && f) {
        const int QS = H5 ? 48 : 16; /* after d, dmin, scales[12] (and qh[32]) */
        const uint4 h = lc_ld128(blk);
        const uint4 q0 = lc_ld128(blk + QS + 32 * c), q1 = lc_ld128(blk + QS + 16 + 32 * c);
        const uint32_t sc[3] = {h.y, h.z, h.w}, q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        uint32_t qh[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (H5) {
            const uint4 h0 = lc_ld128(blk + 16), h1 = lc_ld128(blk + 32);
            qh[0] = h0.x, qh[1] = h0.y, qh[2] = h0.z, qh[3] = h0.w, qh[4] = h1.x, qh[5] = h1.y, qh[6] = h1.z, qh[7] = h1.w;
        }
        const float d = lc_h2f(h.x), dmin = lc_h2f(h.x >> 16);
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
            const int s = 2 * c + hi;
            int is, im;
            lc_k4_scale_min(sc, s, is, im);
            const float dl = d * (float)is, ml = dmin * (float)im;
            float x[32];
#pragma unroll
            for (int l = 0; l < 32; l++) {
                uint32_t code = (LC_BYTE(q, l) >> (4 * hi)) & 0x0f;
                if (H5) code |= ((LC_BYTE(qh, l) >> s) & 1) << 4;
                x[l] = dl * lc_code(code, 0.0f) - ml;
            }
            f(32 * s, x);
        }
    }
};
template <> struct lc_q<LOOM_TYPE_Q4_K> : lc_q_k45<false> {};
template <> struct lc_q<LOOM_TYPE_Q5_K> : lc_q_k45<true> {};

/* IQ4_XS: unit s is sub-block s (an IQ4_NL block's codes at qs[16 s]) */
template <> struct lc_q<LOOM_TYPE_IQ4_XS> {
    static const int QK = 256, BS = 136, UE = 32, NU = 8;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int s, F && f) {
        const uint2 h = lc_ld64(blk); /* d, scales_h, scales_l[4] */
        const uint2 q0 = lc_ld64(blk + 8 + 16 * s), q1 = lc_ld64(blk + 16 + 16 * s);
        const uint32_t q[4] = {q0.x, q0.y, q1.x, q1.y};
        const int ls = (int)(((h.y >> (8 * (s / 2) + 4 * (s % 2))) & 0x0f) | ((h.x >> (16 + 2 * s)) & 3) << 4);
        const float dl = lc_h2f(h.x) * (float)(ls - 32);
        float x[32];
        lc_nibble_run(q, x, [&](uint32_t c, int) { return lc_v_iq4::value(c, dl, 0.0f); });
        f(32 * s, x);
    }
};

/* Q2_K: unit h is the half of 128 elements (four 2-bit planes of qs[32h .. 32h + 31]) */
template <> struct lc_q<LOOM_TYPE_Q2_K> {
    static const int QK = 256, BS = 84, UE = 128, NU = 2;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int h, F && f) {
        const uint32_t sc[2] = {lc_ld32(blk + 8 * h), lc_ld32(blk + 8 * h + 4)};
        uint32_t q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = lc_ld32(blk + 16 + 32 * h + 4 * i);
        const uint32_t dd = lc_ld32(blk + 80);
        const float d = lc_h2f(dd), dmin = lc_h2f(dd >> 16);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float x[32];
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const uint32_t s = LC_BYTE(sc, 2 * p + half);
                const float dl = d * (float)(s & 0x0f), ml = dmin * (float)(s >> 4);
#pragma unroll
                for (int l = 16 * half; l < 16 * half + 16; l++) x[l] = dl * lc_code((LC_BYTE(q, l) >> (2 * p)) & 3, 0.0f) - ml;
            }
            f(128 * h + 32 * p, x);
        }
    }
};

/* Q3_K: unit h as Q2_K's, the third bit of element 128 h + 32 p + l at bit 4 h + p of hmask[l] */
template <> struct lc_q<LOOM_TYPE_Q3_K> {
    static const int QK = 256, BS = 110, UE = 128, NU = 2;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int h, F && f) {
        uint32_t hm[8], q[8], sc[3];
        lc_ld_b2<32>(blk, hm);
        lc_ld_b2<32>(blk + 32 + 32 * h, q);
        lc_ld_b2<12>(blk + 96, sc);
        const float d = lc_h2f(lc_ld16(blk + 108));
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float x[32];
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int t = 2 * p + half; /* the sub-block is 8 h + t */
                const uint32_t lo = h ? LC_BYTE(sc, t) >> 4 : LC_BYTE(sc, t) & 0x0f;
                const uint32_t hi = (LC_BYTE(sc, 8 + t % 4) >> (2 * (2 * h + t / 4))) & 3;
                const float dl = d * (float)((int)(lo | hi << 4) - 32);
#pragma unroll
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const uint32_t code = ((LC_BYTE(q, l) >> (2 * p)) & 3) | ((LC_BYTE(hm, l) >> (4 * h + p)) & 1) << 2; /* hbit clear: minus 4 */
                    x[l] = dl * lc_code(code, 4.0f);
                }
            }
            f(128 * h + 32 * p, x);
        }
    }
};

/* Q6_K: unit h is the half of 128 elements (ql[64h ..], qh[32h ..], scales[8h ..]) */
template <> struct lc_q<LOOM_TYPE_Q6_K> {
    static const int QK = 256, BS = 210, UE = 128, NU = 2;
    template <class F> static __device__ __forceinline__ void unit(const char * blk, int h, F && f) {
        uint32_t ql[16], qh[8], sc[2];
        lc_ld_b2<64>(blk + 64 * h, ql);
        lc_ld_b2<32>(blk + 128 + 32 * h, qh);
        lc_ld_b2<8>(blk + 192 + 8 * h, sc);
        const float d = lc_h2f(lc_ld16(blk + 208));
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float x[32];
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const float ds = d * (float)(int8_t)LC_BYTE(sc, 2 * p + half);
#pragma unroll
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const uint32_t code = ((LC_BYTE(ql, l + 32 * (p % 2)) >> (p < 2 ? 0 : 4)) & 0x0f) | ((LC_BYTE(qh, l) >> (2 * p)) & 3) << 4;
                    x[l] = ds * lc_code(code, 32.0f);
                }
            }
            f(128 * h + 32 * p, x);
        }
    }
};

/* Calls F::template run<lc_q<T>>() for the quantized type 'type' (one of lc_is_quant_type's);
 * returns false for any other type. */
template <class F> static inline bool lc_quant_dispatch(int type, F && f) {
    switch (type) {
    case LOOM_TYPE_Q4_0: f.template run<lc_q<LOOM_TYPE_Q4_0>>(); return true;
    case LOOM_TYPE_Q4_1: f.template run<lc_q<LOOM_TYPE_Q4_1>>(); return true;
    case LOOM_TYPE_Q5_0: f.template run<lc_q<LOOM_TYPE_Q5_0>>(); return true;
    case LOOM_TYPE_Q5_1: f.template run<lc_q<LOOM_TYPE_Q5_1>>(); return true;
    case LOOM_TYPE_Q8_0: f.template run<lc_q<LOOM_TYPE_Q8_0>>(); return true;
    case LOOM_TYPE_Q2_K: f.template run<lc_q<LOOM_TYPE_Q2_K>>(); return true;
    case LOOM_TYPE_Q3_K: f.template run<lc_q<LOOM_TYPE_Q3_K>>(); return true;
    case LOOM_TYPE_Q4_K: f.template run<lc_q<LOOM_TYPE_Q4_K>>(); return true;
    case LOOM_TYPE_Q5_K: f.template run<lc_q<LOOM_TYPE_Q5_K>>(); return true;
    case LOOM_TYPE_Q6_K: f.template run<lc_q<LOOM_TYPE_Q6_K>>(); return true;
    case LOOM_TYPE_Q8_K: f.template run<lc_q<LOOM_TYPE_Q8_K>>(); return true;
    case LOOM_TYPE_IQ4_NL: f.template run<lc_q<LOOM_TYPE_IQ4_NL>>(); return true;
    case LOOM_TYPE_IQ4_XS: f.template run<lc_q<LOOM_TYPE_IQ4_XS>>(); return true;
    default: return false;
    }
}

#endif
