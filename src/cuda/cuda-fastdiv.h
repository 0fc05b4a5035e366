/* cuda-fastdiv.h -- division of 32-bit unsigned integers by a divisor known before the launch, as
 * one high multiply, an add and a shift (Granlund & Montgomery 1994, "Division by invariant integers
 * using multiplication", section 4): the element-wise kernels split flat indices into tensor
 * indices with it instead of 64-bit divisions, which cost tens of instructions each. Plain C with
 * host and device qualifiers under nvcc, so that the CPU tests check it exhaustively on the host. */
#ifndef LOOM_CUDA_FASTDIV_H
#define LOOM_CUDA_FASTDIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define LC_FD_FN static __host__ __device__ __forceinline__
#else
#define LC_FD_FN static inline
#endif

/* n / d == (mulhi(n, mul) + n) >> shift for every 32-bit n, with d the divisor (kept for the
 * remainder). */
struct lc_fastdiv {
    uint32_t d, mul, shift;
};

/* The constants for divisor d (1 <= d < 2^32): shift = ceil(log2 d), mul = floor(2^32 (2^shift -
 * d) / d) + 1 (d = 0 gives a divisor of 1: the caller's dimensions are never 0). */
LC_FD_FN struct lc_fastdiv lc_fastdiv_make(uint32_t d) {
    struct lc_fastdiv f;
    if (d == 0) d = 1;
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d) l++;
    f.d = d;
    f.shift = l;
    f.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
    return f;
}

/* The high 32 bits of the 64-bit product a b. */
LC_FD_FN uint32_t lc_mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

/* n / f.d, any 32-bit n (the sum is formed in 64 bits: it can pass 2^32). */
LC_FD_FN uint32_t lc_fastdiv_q(uint32_t n, struct lc_fastdiv f) { return (uint32_t)(((uint64_t)lc_mulhi32(n, f.mul) + n) >> f.shift); }

/* n / f.d into *q, and the remainder returned. */
LC_FD_FN uint32_t lc_fastdiv_qr(uint32_t n, struct lc_fastdiv f, uint32_t * q) {
    *q = lc_fastdiv_q(n, f);
    return n - *q * f.d;
}

#undef LC_FD_FN
#endif
