/* cuda-mulmat.cu -- MUL_MAT on the CUDA device: what the device supports, and the choice between
 * the matrix-vector kernels (few columns: cuda-matvec.cu, planned by cuda-mulmat-plan.cu) and
 * cuBLAS (cuda-gemm.cu). */
#include "cuda-mulmat.cuh"
#include "cuda-matvec.cuh"
#include "cuda-dequant.cuh"
#include "cuda-quant.cuh"

bool lc_mul_mat_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *b = op->src[1];
    if (!a || !b || b->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32) return false;
    const bool quant = lc_matvec_q_supported(a->type); /* matrix-vector kernels of cuda-matvec-q.cu; dequantized to F16 for cuBLAS */
    if (!lc_is_float_type(a->type) && !quant) return false;
    if (a->ne[0] != b->ne[0] || a->ne[0] == 0 || a->ne[2] == 0 || a->ne[3] == 0) return false;
    if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    if (op->ne[0] != a->ne[1] || op->ne[1] != b->ne[1] || op->ne[2] != b->ne[2] || op->ne[3] != b->ne[3]) return false;
    if (!(quant ? lc_quant_strides_ok(a) : lc_strides_ok(a)) || !lc_strides_ok(b) || !lc_strides_ok(op)) return false;
    /* cuBLAS takes int sizes; the result must have dense rows (ldc = nb1 / 4) */
    if (a->ne[0] > INT32_MAX || a->ne[1] > INT32_MAX || b->ne[1] > INT32_MAX) return false;
    if (op->nb[0] != 4 || op->nb[1] / 4 > INT32_MAX || (op->ne[1] > 1 && op->nb[1] / 4 < (size_t)op->ne[0])) return false;
    return true;
}

int lc_matvec_max_cols(int type) { return lc_is_quant_type(type) ? LC_MATVEC_Q_MAX_COLS : LC_MATVEC_MAX_COLS; }

bool lc_mul_mat_is_matvec(const struct loom_tensor * op) {
    return op->src[1]->ne[1] <= lc_matvec_max_cols(op->src[0]->type) && lc_rows_dense(op->src[0]) && lc_rows_dense(op->src[1]);
}

size_t lc_mul_mat_scratch(const struct loom_tensor * op) { return lc_mul_mat_is_matvec(op) ? 0 : lc_gemm_scratch(op); }

enum loom_status lc_mul_mat(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, b, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &b, &d);
    if (st != LOOM_OK) return st;
    if (lc_mul_mat_is_matvec(dst)) return lc_matvec_plain(be, &a, &b, &d, lc_is_weight(dst->src[0]));
    return lc_gemm(be, dst, &a, &b, &d);
}
