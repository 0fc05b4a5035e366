/* cuda-matvec-q-k45.cu -- the matrix-vector kernels of Q4_K, Q5_K, IQ4_XS weights (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_INSTANTIATE(LOOM_TYPE_Q4_K)
LC_QMV_INSTANTIATE(LOOM_TYPE_Q5_K)
LC_QMV_INSTANTIATE(LOOM_TYPE_IQ4_XS)
