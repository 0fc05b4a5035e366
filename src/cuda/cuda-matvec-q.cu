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

bool lc_q8dot_type(int type) {
    switch (type) {
    case LOOM_TYPE_Q4_0: return lc_q8dot_on<LOOM_TYPE_Q4_0>::value;
    case LOOM_TYPE_Q4_1: return lc_q8dot_on<LOOM_TYPE_Q4_1>::value;
    case LOOM_TYPE_Q5_0: return lc_q8dot_on<LOOM_TYPE_Q5_0>::value;
    case LOOM_TYPE_Q5_1: return lc_q8dot_on<LOOM_TYPE_Q5_1>::value;
    case LOOM_TYPE_Q8_0: return lc_q8dot_on<LOOM_TYPE_Q8_0>::value;
    case LOOM_TYPE_Q4_K: return lc_q8dot_on<LOOM_TYPE_Q4_K>::value;
    case LOOM_TYPE_Q5_K: return lc_q8dot_on<LOOM_TYPE_Q5_K>::value;
    case LOOM_TYPE_Q6_K: return lc_q8dot_on<LOOM_TYPE_Q6_K>::value;
    default: return false;
    }
}

size_t lc_matvec_q_act_bytes(int type, int64_t K, int64_t ncols, int64_t nbatch) {
    if (!lc_q8dot_type(type) || K % 32 != 0) return 0;
    return (size_t)(K / 32) * LC_A8_RUN * (size_t)ncols * (size_t)nbatch;
}

__global__ void lc_a8_quant_kernel(const char * b, int64_t K, int64_t N, int64_t ne2, int64_t nruns, int64_t b_nb1, int64_t b_nb2,
                                   int64_t b_nb3, char * out) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int lane = threadIdx.x % 32;
    const int64_t per_col = K / 32, warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < nruns; w += warps) {
        const int64_t r = w % per_col, j = (w / per_col) % N, bt = w / (per_col * N);
        const float x = *(const float *)(b + (bt % ne2) * b_nb2 + (bt / ne2) * b_nb3 + j * b_nb1 + (r * 32 + lane) * 4);
        lc_a8_quant_run(x, lane, out + w * LC_A8_RUN);
    }
}

/* Queues the quantization of the activations of 'p' (ncols columns) into be->act8 and sets p's
 * q8 fields -- or, when the launch before wrote them (p.q8_in, one column), only the fields;
 * LOOM_ERR_BACKEND when act8 is too small (prepare() reserves it). */
static enum loom_status lc_a8_queue(const struct lc_backend * be, struct lc_mv_args & p, int ncols) {
    if (p.q8_in && ncols == 1 && p.nbatch == 1) {
        p.q8 = p.q8_in;
        p.q8_nb1 = p.q8_nb2 = p.q8_nb3 = p.K / 32 * LC_A8_RUN;
        return LOOM_OK;
    }
    const int64_t nruns = p.K / 32 * ncols * p.nbatch;
    const size_t need = (size_t)nruns * LC_A8_RUN;
    if (need > be->act8_size) {
        loom_log(LOOM_LOG_ERROR, "%s: a quantized product needs %zu bytes of 8-bit activations, the backend has %zu", be->dev->name, need,
                 be->act8_size);
        return LOOM_ERR_BACKEND;
    }
    const unsigned threads = 256, wpb = threads / 32;
    int64_t blocks = (nruns + wpb - 1) / wpb;
    if (blocks > 65535) blocks = 65535;
    const char * b = p.b;
    int64_t K = p.K, N = ncols, ne2 = p.ne2, nb1 = p.b_nb1, nb2 = p.b_nb2, nb3 = p.b_nb3;
    char * out = be->act8;
    void * args[] = {&b, &K, &N, &ne2, (void *)&nruns, &nb1, &nb2, &nb3, &out};
    lc_launch(be, (const void *)lc_a8_quant_kernel, dim3((unsigned)blocks, 1, 1), dim3(threads, 1, 1), args, 0);
    p.q8 = be->act8;
    p.q8_nb1 = p.K / 32 * LC_A8_RUN;
    p.q8_nb2 = p.q8_nb1 * ncols;
    p.q8_nb3 = p.q8_nb2 * p.ne2;
    return LC_CHECK_LAUNCH("lc_a8_quant_kernel");
}

/* More columns than one launch takes: launches of at most LC_MATVEC_MAX_COLS columns each (p.j0
 * the first; the activations are quantized once for all of them). Two launches of 4 columns
 * took less time than one of 8 on an H200 (7B Q4_K_M, 8-token step 15.8 against 17.2 ms:
 * bench/serve-np-notes.md): the 8-column kernel needs 255 registers a thread, two blocks a
 * multiprocessor, and its integer dot products, not the weights' bytes, bound it. */
enum loom_status lc_matvec_q_queue(const struct lc_backend * be, const struct lc_mv_args & p, int ncols) {
    struct lc_mv_args g = p;
    const bool q8 = lc_q8dot_type(p.type);
    if (q8) {
        const enum loom_status st = lc_a8_queue(be, g, ncols);
        if (st != LOOM_OK) return st;
    }
    for (int j0 = 0; j0 < ncols; ) {
        const int left = ncols - j0;
        const int nc = left < LC_MATVEC_MAX_COLS ? left : LC_MATVEC_MAX_COLS;
        g.j0 = j0;
#define LC_CASE(T) case T: lc_qmv_one_t<T>(be, g, nc); break;
        switch (p.type) {
        LC_QMV_TYPES(LC_CASE)
        default: return LOOM_ERR_UNSUPPORTED;
        }
#undef LC_CASE
        const enum loom_status st = LC_CHECK_LAUNCH("lc_qmv_kernel");
        if (st != LOOM_OK) return st;
        j0 += nc;
    }
    return LOOM_OK;
}

enum loom_status lc_matvec_q_queue_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n) {
    struct lc_mv_multi g = m;
    if (lc_q8dot_type(m.s[0].type)) { /* the segments read the same activations: quantized once */
        const enum loom_status st = lc_a8_queue(be, g.s[0], 1);
        if (st != LOOM_OK) return st;
        for (int i = 1; i < n; i++) {
            g.s[i].q8 = g.s[0].q8;
            g.s[i].q8_nb1 = g.s[0].q8_nb1;
            g.s[i].q8_nb2 = g.s[0].q8_nb2;
            g.s[i].q8_nb3 = g.s[0].q8_nb3;
        }
    }
#define LC_CASE(T) case T: lc_qmv_multi_t<T>(be, g, n); break;
    switch (m.s[0].type) {
    LC_QMV_TYPES(LC_CASE)
    default: return LOOM_ERR_UNSUPPORTED;
    }
#undef LC_CASE
    return LC_CHECK_LAUNCH("lc_qmv_multi_kernel");
}
