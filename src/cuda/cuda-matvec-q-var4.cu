/* cuda-matvec-q-var4.cu -- TEMPORARY (session 14): variant 4 of the one-column kernels of Q4_0, Q8_0 (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v4)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v4)
