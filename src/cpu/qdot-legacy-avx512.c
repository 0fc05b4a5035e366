/* qdot-legacy-avx512.c -- the AVX512-VNNI integer dot products of the 32-element weight types Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL
 * with Q8_0 columns (vpdpbusd on 256-bit vectors, AVX512-VL; qdot-legacy-tmpl.h). 256-bit, not
 * 512-bit: Zen 4 splits 512-bit operations in two halves, and one block of 32 bytes fills a
 * 256-bit register. The AVX-512 table takes these only where the CPU has AVX512-VNNI
 * (vec-avx512.c), else the AVX2 versions. */
#include "cpu/vec.h"
#include "quant/quant-blocks.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QL(name) ql_##name##_vnni
#define QL_VNNI 1

#include "cpu/qdot-legacy-tmpl.h"
#define QG_NR 8
#include "cpu/qgemm-legacy-tmpl.h"

QL_DEFINE_QUANTIZE(lcpu_quantize_q8_0_vnni)
QL_DEFINE(QL_Q8_0, lcpu_qdot_q8_0_vnni)
QL_DEFINE(QL_Q4_0, lcpu_qdot_q4_0_vnni)
QL_DEFINE(QL_Q5_0, lcpu_qdot_q5_0_vnni)
QL_DEFINE(QL_Q5_1, lcpu_qdot_q5_1_vnni)
QL_DEFINE(QL_IQ4_NL, lcpu_qdot_iq4_nl_vnni)

QG_DEFINE_QUANTIZE(lcpu_quantize_q8_0x_vnni)
QG_DEFINE(QL_Q8_0, lcpu_qpack_q8_0_vnni, lcpu_qgemm_q8_0_vnni)
QG_DEFINE(QL_Q4_0, lcpu_qpack_q4_0_vnni, lcpu_qgemm_q4_0_vnni)
QG_DEFINE(QL_Q5_0, lcpu_qpack_q5_0_vnni, lcpu_qgemm_q5_0_vnni)
QG_DEFINE(QL_Q5_1, lcpu_qpack_q5_1_vnni, lcpu_qgemm_q5_1_vnni)
QG_DEFINE(QL_IQ4_NL, lcpu_qpack_iq4_nl_vnni, lcpu_qgemm_iq4_nl_vnni)

#endif
