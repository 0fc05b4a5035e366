/* vec-avx2.c -- placeholder (SIMD kernels follow). */
#include "cpu/vec.h"
const struct cpu_vec * cpu_vec_avx2(void) { return NULL; }
