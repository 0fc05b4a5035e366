/* cuda-matvec-q.cu -- the quantized matrix-vector products' entry points: the launch for the
 * weights' type (kernels: cuda-matvec-q.cuh, instantiated per type in cuda-matvec-q-*.cu). */
#include "cuda-matvec-q.cuh"

/* the weight types with matrix-vector kernels (Q8_K is an activation type: no file holds it) */
#define LC_QMV_TYPES(X) X(LOOM_TYPE_Q4_0) X(LOOM_TYPE_Q4_1) X(LOOM_TYPE_Q5_0) X(LOOM_TYPE_Q5_1) X(LOOM_TYPE_Q8_0) \
    X(LOOM_TYPE_Q2_K) X(LOOM_TYPE_Q3_K) X(LOOM_TYPE_Q4_K) X(LOOM_TYPE_Q5_K) X(LOOM_TYPE_Q6_K) X(LOOM_TYPE_IQ4_NL) X(LOOM_TYPE_IQ4_XS)

LC_QMV_TYPES(LC_QMV_EXTERN)

bool lc_matvec_q_supported(int type) {
#define LC_CASE(T) case T:
    switch (type) {
    LC_QMV_TYPES(LC_CASE) return true;
    default: return false;
    }
#undef LC_CASE
}

/* More than LC_MATVEC_MAX_COLS columns: launches of at most that many each (p.j0 the first). */
enum loom_status lc_matvec_q_queue(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    for (int j0 = 0; j0 < ncols; j0 += LC_MATVEC_MAX_COLS) {
        struct lc_mv_args g = p;
        g.j0 = j0;
        const int nc = ncols - j0 < LC_MATVEC_MAX_COLS ? ncols - j0 : LC_MATVEC_MAX_COLS;
#define LC_CASE(T) case T: lc_qmv_one_t<T>(be, g, nc); break;
        switch (p.type) {
        LC_QMV_TYPES(LC_CASE)
        default: return LOOM_ERR_UNSUPPORTED;
        }
#undef LC_CASE
        const enum loom_status st = LC_CHECK_LAUNCH("lc_matvec_q_kernel");
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

enum loom_status lc_matvec_q_queue_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
#define LC_CASE(T) case T: lc_qmv_multi_t<T>(be, m, n); break;
    switch (m.s[0].type) {
    LC_QMV_TYPES(LC_CASE)
    default: return LOOM_ERR_UNSUPPORTED;
    }
#undef LC_CASE
    return LC_CHECK_LAUNCH("lc_matvec_q_multi_kernel");
}
