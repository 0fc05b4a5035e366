/* cuda-matvec-q-var7.cu -- TEMPORARY (session 13): variant 7 of the one-column quantized kernels
 * (shape lc_qmv_shape<1, 0, false, false, 2>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=7). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v7)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v7)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v7)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v7)
