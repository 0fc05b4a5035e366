/* cuda-matvec-q-var6.cu -- TEMPORARY (session 13): variant 6 of the one-column quantized kernels
 * (shape lc_qmv_shape<2, 1, true, true>, cuda-matvec-q.cuh; chosen by LOOM_CUDA_PARAMS qmv=6). */
#include "cuda-matvec-q.cuh"

LC_QMV_VAR_INSTANTIATE(LOOM_TYPE_Q6_K, lc_qmv_v6)
