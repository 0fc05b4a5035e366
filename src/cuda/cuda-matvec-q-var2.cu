/* cuda-matvec-q-var2.cu -- TEMPORARY (session 13): variant 2 of the one-column quantized kernels
 * (shape lc_qmv_shape<2, 1, false, false>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=2). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v2)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v2)
