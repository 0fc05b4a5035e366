/* cuda-matvec-q-legacy4.cu -- the matrix-vector kernels of Q4_0, Q4_1, IQ4_NL weights (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_INSTANTIATE(LOOM_TYPE_Q4_0)
LC_QMV_INSTANTIATE(LOOM_TYPE_Q4_1)
LC_QMV_INSTANTIATE(LOOM_TYPE_IQ4_NL)
