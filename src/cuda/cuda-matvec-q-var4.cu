/* cuda-matvec-q-var4.cu -- TEMPORARY (session 13): variant 4 of the one-column quantized kernels
 * (shape lc_qmv_shape<2, 1, true, false>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=4). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_0, lc_qmv_v4)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q8_0, lc_qmv_v4)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q4_K, lc_qmv_v4)
LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v4)
