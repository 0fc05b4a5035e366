/* vec-avx512.c -- placeholder (SIMD kernels follow). */
#include "cpu/vec.h"
const struct cpu_vec * cpu_vec_avx512(bool with_bf16) { (void)with_bf16; return NULL; }
