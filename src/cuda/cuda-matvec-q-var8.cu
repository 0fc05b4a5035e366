/* cuda-matvec-q-var8.cu -- TEMPORARY (session 13): variant 8 of the one-column quantized kernels
 * (shape lc_qmv_shape<2, 1, false, false, 2>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=8). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v8)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v8)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v8)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v8)
