/* qdot-legacy-avx2.c -- the AVX2 integer dot products of the 32-element weight types Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL with Q8_0
 * columns (vpmaddubsw + vpmaddwd; qdot-legacy-tmpl.h), for the AVX2 table and for AVX-512 CPUs
 * without VNNI. */
#include "cpu/vec.h"
#include "quant/quant-blocks.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define QL(name) ql_##name##_avx2
#define QL_VNNI 0

#include "cpu/qdot-legacy-tmpl.h"
#define QG_NR 4
#include "cpu/qgemm-legacy-tmpl.h"

QL_DEFINE_QUANTIZE(lcpu_quantize_q8_0_avx2)
QL_DEFINE(QL_Q8_0, lcpu_qdot_q8_0_avx2)
QL_DEFINE(QL_Q4_0, lcpu_qdot_q4_0_avx2)
QL_DEFINE(QL_Q5_0, lcpu_qdot_q5_0_avx2)
QL_DEFINE(QL_Q5_1, lcpu_qdot_q5_1_avx2)
QL_DEFINE(QL_IQ4_NL, lcpu_qdot_iq4_nl_avx2)

QG_DEFINE_QUANTIZE(lcpu_quantize_q8_0x_avx2)
QG_DEFINE(QL_Q8_0, lcpu_qpack_q8_0_avx2, lcpu_qgemm_q8_0_avx2)
QG_DEFINE(QL_Q4_0, lcpu_qpack_q4_0_avx2, lcpu_qgemm_q4_0_avx2)
QG_DEFINE(QL_Q5_0, lcpu_qpack_q5_0_avx2, lcpu_qgemm_q5_0_avx2)
QG_DEFINE(QL_Q5_1, lcpu_qpack_q5_1_avx2, lcpu_qgemm_q5_1_avx2)
QG_DEFINE(QL_IQ4_NL, lcpu_qpack_iq4_nl_avx2, lcpu_qgemm_iq4_nl_avx2)

#endif
