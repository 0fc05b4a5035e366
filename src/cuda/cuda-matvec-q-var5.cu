/* cuda-matvec-q-var5.cu -- TEMPORARY (session 13): variant 5 of the one-column quantized kernels
 * (shape lc_qmv_shape<1, 1, false, true>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=5). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v5)
