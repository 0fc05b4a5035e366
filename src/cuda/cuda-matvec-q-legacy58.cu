/* cuda-matvec-q-legacy58.cu -- the matrix-vector kernels of Q5_0, Q5_1, Q8_0 weights (cuda-matvec-q.cuh). */
#include "cuda-matvec-q.cuh"

LC_QMV_INSTANTIATE(LOOM_TYPE_Q5_0)
LC_QMV_INSTANTIATE(LOOM_TYPE_Q5_1)
LC_QMV_INSTANTIATE(LOOM_TYPE_Q8_0)
