/* cuda-gemm.cu -- matrix products of more than LC_MATVEC_MAX_COLS columns through cuBLAS, F32
 * accumulation: F16/BF16 weights meet activations converted to their type (tensor cores), batched
 * products with broadcast over dims 2 and 3 as strided or pointer-array batches. */
#include "cuda-mulmat.cuh"
#include "cuda-cpy.cuh"
#include "cuda-dequant.cuh"

#include <string.h>

/* How one product is laid out for cuBLAS; computed from metadata alone, so the scratch pass
 * and the compute agree. */
struct lc_mm_plan {
    bool copy_a;        /* 'a' compacted into scratch (same type; a quantized 'a' dequantized to F16) */
    int ta;             /* the type cuBLAS reads 'a' in */
    bool conv_b;        /* 'b' compacted/converted into scratch, of type tb */
    int tb;
    int64_t lda, sa2, sa3;   /* elements */
    int64_t ldb, sb2, sb3;
    size_t off_b, off_ptr, total; /* scratch layout, bytes */
};

static size_t pad256(size_t x) { return (x + 255) & ~(size_t)255; }


static bool blas_ok(const struct loom_tensor * t, int64_t k) {
    const size_t es = loom_type_size(t->type);
    if (!lc_rows_dense(t)) return false;
    for (int i = 1; i < 4; i++) {
        if (t->nb[i] % es != 0) return false;
    }
    const int64_t ld = (int64_t)(t->nb[1] / es);
    return ld >= k && ld <= INT32_MAX;
}

static struct lc_mm_plan lc_mm_plan_for(const struct loom_tensor * dst) {
    const struct loom_tensor *a = dst->src[0], *b = dst->src[1];
    struct lc_mm_plan p;
    memset(&p, 0, sizeof p);
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const bool quant = loom_blck_size(a->type) != 1;
    p.ta = quant ? LOOM_TYPE_F16 : a->type;
    const size_t es_a = loom_type_size((enum loom_type)p.ta);
    p.copy_a = quant || !blas_ok(a, K);
    if (p.copy_a) {
        p.lda = K;
        p.sa2 = K * M;
        p.sa3 = K * M * a->ne[2];
    } else {
        p.lda = (int64_t)(a->nb[1] / es_a);
        p.sa2 = (int64_t)(a->nb[2] / es_a);
        p.sa3 = (int64_t)(a->nb[3] / es_a);
    }
    p.tb = p.ta;
    p.conv_b = p.ta != LOOM_TYPE_F32 || !blas_ok(b, K);
    if (p.conv_b) {
        p.ldb = K;
        p.sb2 = K * N;
        p.sb3 = K * N * b->ne[2];
    } else {
        p.ldb = (int64_t)(b->nb[1] / 4);
        p.sb2 = (int64_t)(b->nb[2] / 4);
        p.sb3 = (int64_t)(b->nb[3] / 4);
    }
    size_t size_a = p.copy_a ? pad256((size_t)loom_nelements(a) * es_a) : 0;
    size_t size_b = p.conv_b ? pad256((size_t)loom_nelements(b) * loom_type_size((enum loom_type)p.tb)) : 0;
    size_t size_ptr = pad256(3 * sizeof(void *) * (size_t)(b->ne[2] * b->ne[3]));
    p.off_b = size_a;
    p.off_ptr = size_a + size_b;
    p.total = size_a + size_b + size_ptr;
    return p;
}

size_t lc_gemm_scratch(const struct loom_tensor * op) { return lc_mm_plan_for(op).total; }

/* Fills the pointer arrays of a batched product: batch t = (i2, i3) reads a at (i2/r2, i3/r3). */
__global__ void lc_mm_ptrs_kernel(const void ** pa, const void ** pb, void ** pc, const char * a, const char * b, char * c,
                                  int64_t ne2, int64_t nbatch, int64_t r2, int64_t r3, int64_t sa2, int64_t sa3, int64_t sb2,
                                  int64_t sb3, int64_t sc2, int64_t sc3) {
    lc_pdl_trigger();
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nbatch) return;
    const int64_t i2 = t % ne2, i3 = t / ne2;
    pa[t] = a + (i2 / r2) * sa2 + (i3 / r3) * sa3;
    pb[t] = b + i2 * sb2 + i3 * sb3;
    pc[t] = c + i2 * sc2 + i3 * sc3;
}

static cudaDataType_t lc_cuda_type(int type) {
    return type == LOOM_TYPE_F32 ? CUDA_R_32F : type == LOOM_TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static enum loom_status lc_gemm_run(struct lc_backend * be, const struct lc_mm_plan * p, const struct lc_tensor * a,
                                    const struct lc_tensor * b, const struct lc_tensor * d, const struct loom_tensor * b_node) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t ne2 = b->ne[2], ne3 = b->ne[3], r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];
    const char * A = a->data;
    const char * B = b->data;
    if (p->copy_a) {
        be->conv.src = NULL; /* overwritten */
        struct lc_tensor ac = lc_tensor_contiguous(be->scratch, p->ta, a->ne);
        enum loom_status st = p->ta != a->type ? lc_dequant(be, a, &ac) : lc_copy(be, a, &ac);
        if (st != LOOM_OK) return st;
        A = ac.data;
    }
    if (p->conv_b) {
        struct lc_tensor bc = lc_tensor_contiguous(be->scratch + p->off_b, p->tb, b->ne);
        const struct lc_conv_cache * c = &be->conv;
        /* products of one activation (Q, K and V; gate and up) convert it once */
        if (!(c->src == b_node && c->data == b->data && c->type == p->tb && c->off == p->off_b)) {
            be->conv.src = NULL;
            enum loom_status st = lc_copy(be, b, &bc);
            if (st != LOOM_OK) return st;
            be->conv.src = b_node;
            be->conv.data = b->data;
            lc_extent(b, &be->conv.lo, &be->conv.hi);
            be->conv.type = p->tb;
            be->conv.off = p->off_b;
        }
        B = bc.data;
    }
    const cudaDataType_t ta = lc_cuda_type(p->ta), tb = lc_cuda_type(p->tb);
    const int64_t es_a = (int64_t)loom_type_size((enum loom_type)p->ta), es_b = (int64_t)loom_type_size((enum loom_type)p->tb);
    const int64_t ldc = d->nb[1] / 4, sc2 = d->nb[2] / 4, sc3 = d->nb[3] / 4;
    const float alpha = 1.0f, beta = 0.0f;
    const int64_t nbatch = ne2 * ne3;
    if (nbatch == 1) {
        return LC_CHECK_CUBLAS(cublasGemmEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, A, ta, (int)p->lda,
                                            B, tb, (int)p->ldb, &beta, d->data, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
    }
    /* one uniform stride over the flattened batch (i2 fastest) when it exists */
    int64_t sa = 0, sb = 0, sc = 0;
    bool strided;
    const bool a_bcast = a->ne[2] == 1 && a->ne[3] == 1;
    if (ne3 == 1) {
        sa = a_bcast ? 0 : p->sa2;
        sb = p->sb2;
        sc = sc2;
        strided = r2 == 1 || a_bcast;
    } else if (ne2 == 1) {
        sa = a_bcast ? 0 : p->sa3;
        sb = p->sb3;
        sc = sc3;
        strided = r3 == 1 || a_bcast;
    } else {
        sa = a_bcast ? 0 : p->sa2;
        sb = p->sb2;
        sc = sc2;
        strided = (a_bcast || (r2 == 1 && r3 == 1 && p->sa3 == p->sa2 * ne2)) && p->sb3 == p->sb2 * ne2 && sc3 == sc2 * ne2;
    }
    if (strided && nbatch <= INT32_MAX) {
        return LC_CHECK_CUBLAS(cublasGemmStridedBatchedEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, A, ta,
                                                          (int)p->lda, sa, B, tb, (int)p->ldb, sb, &beta, d->data, CUDA_R_32F,
                                                          (int)ldc, sc, (int)nbatch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    /* general broadcast (grouped-query attention): arrays of pointers built on the device */
    if (be->conv.src && p->off_ptr < be->conv.off + (size_t)(be->conv.hi - be->conv.lo)) be->conv.src = NULL;
    void ** ptrs = (void **)(be->scratch + p->off_ptr);
    const void ** pa = (const void **)ptrs;
    const void ** pb = (const void **)(ptrs + nbatch);
    void ** pc = ptrs + 2 * nbatch;
    lc_mm_ptrs_kernel<<<(unsigned)((nbatch + 255) / 256), 256, 0, be->stream>>>(pa, pb, pc, A, B, d->data, ne2, nbatch, r2, r3,
                                                                               p->sa2 * es_a, p->sa3 * es_a, p->sb2 * es_b,
                                                                               p->sb3 * es_b, sc2 * 4, sc3 * 4);
    enum loom_status st = LC_CHECK_LAUNCH("lc_mm_ptrs_kernel");
    if (st != LOOM_OK) return st;
    return LC_CHECK_CUBLAS(cublasGemmBatchedEx(be->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, pa, ta,
                                               (int)p->lda, pb, tb, (int)p->ldb, &beta, pc, CUDA_R_32F, (int)ldc, (int)nbatch,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

enum loom_status lc_gemm(struct lc_backend * be, const struct loom_tensor * dst, const struct lc_tensor * a, const struct lc_tensor * b,
                         const struct lc_tensor * d) {
    struct lc_mm_plan p = lc_mm_plan_for(dst);
    if (p.total > be->scratch_size) {
        loom_log(LOOM_LOG_ERROR, "%s: mul_mat '%s' needs %zu bytes of scratch, the backend has %zu", be->dev->name, dst->name,
                 p.total, be->scratch_size);
        return LOOM_ERR_BACKEND;
    }
    return lc_gemm_run(be, &p, a, b, d, dst->src[1]);
}
