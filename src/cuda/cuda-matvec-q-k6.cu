/* cuda-matvec-q-k6.cu -- the matrix-vector kernels of Q6_K weights (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_INSTANTIATE(LOOM_TYPE_Q6_K)
