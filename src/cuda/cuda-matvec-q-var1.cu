/* cuda-matvec-q-var1.cu -- TEMPORARY (session 13): variant 1 of the one-column quantized kernels
 * (shape lc_qmv_shape<1, 1, false, false>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=1). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v1)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v1)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v1)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v1)
