/* cuda-matvec-q-k23.cu -- the matrix-vector kernels of Q2_K, Q3_K weights (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_INSTANTIATE(LOOM_TYPE_Q2_K)
LC_QMV_INSTANTIATE(LOOM_TYPE_Q3_K)
