/* cuda-matvec-q-var2.cu -- TEMPORARY (session 14): variant 2 of the one-column kernels of Q4_0, Q8_0, Q4_K, Q6_K (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v2)
