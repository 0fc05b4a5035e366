/* cuda-matvec-q-var3.cu -- TEMPORARY (session 13): variant 3 of the one-column quantized kernels
 * (shape lc_qmv_shape<1, 0, true, false>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=3). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v3)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v3)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v3)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v3)
