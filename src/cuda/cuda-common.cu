/* cuda-common.cu -- error reporting, tensor descriptors and launch shapes shared by the CUDA backend. */
#include "cuda-common.cuh"
#include "cuda-quant.cuh"

enum loom_status lc_check(cudaError_t err, const char * call, const char * where) {
    if (err == cudaSuccess) return LOOM_OK;
    (void)cudaGetLastError(); /* clear a non-sticky error */
    loom_log(LOOM_LOG_ERROR, "CUDA error in %s: %s failed: %s (%s)", where, call, cudaGetErrorString(err), cudaGetErrorName(err));
    return LOOM_ERR_BACKEND;
}

enum loom_status lc_check_cublas(cublasStatus_t st, const char * call, const char * where) {
    if (st == CUBLAS_STATUS_SUCCESS) return LOOM_OK;
    loom_log(LOOM_LOG_ERROR, "cuBLAS error in %s: %s failed: %s (%d)", where, call, cublasGetStatusString(st), (int)st);
    return LOOM_ERR_BACKEND;
}

bool lc_is_weight(const struct loom_tensor * t) {
    const struct loom_tensor * b = t->view_src ? t->view_src : t;
    if ((t->flags | b->flags) & LOOM_TENSOR_FLAG_WEIGHT) return true;
    return b->buffer && loom_backend_buffer_get_usage(b->buffer) == LOOM_BACKEND_BUFFER_USAGE_WEIGHTS;
}

bool lc_is_float_type(int type) { return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16; }

bool lc_strides_ok(const struct loom_tensor * t) {
    if (loom_blck_size(t->type) != 1) return false;
    size_t es = loom_type_size(t->type);
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (t->ne[i] > 1 && t->nb[i] % es != 0) return false;
    }
    return true;
}

bool lc_is_contiguous(const struct lc_tensor * t) {
    int64_t next = (int64_t)loom_type_size((enum loom_type)t->type);
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] != 1 && t->nb[i] != next) return false;
        next *= t->ne[i];
    }
    return true;
}

struct lc_tensor lc_tensor_contiguous(void * data, int type, const int64_t * ne) {
    struct lc_tensor t;
    t.data = (char *)data;
    t.type = type;
    int64_t nb = (int64_t)loom_type_size((enum loom_type)type);
    for (int i = 0; i < 4; i++) {
        t.ne[i] = ne[i];
        t.nb[i] = nb;
        nb *= ne[i];
    }
    return t;
}

enum loom_status lc_tensor_of(const struct lc_backend * be, const struct loom_tensor * t, bool write, struct lc_tensor * out) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    loom_backend_buffer_t buffer = t->buffer ? t->buffer : base->buffer;
    char * data = (char *)t->data;
    if (!data && base->data) data = (char *)base->data + offs;
    if (!buffer || !data) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' has no data", be->dev->name, t->name);
        return LOOM_ERR_INVALID_ARG;
    }
    struct lc_buffer * b = lc_buffer_of(buffer);
    if (!b || (b->kind == LC_BUFFER_DEVICE && b->dev != be->dev)) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' lives in buffer type %s, which this device cannot read", be->dev->name,
                 t->name, loom_backend_buft_name(buffer->buft));
        return LOOM_ERR_UNSUPPORTED;
    }
    if (write && b->read_only) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' lives in read-only mapped host memory and cannot be written", be->dev->name,
                 t->name);
        return LOOM_ERR_UNSUPPORTED;
    }
    /* quantized blocks: the alignment their kernels read them with (cuda-quant.cuh) */
    size_t es = loom_blck_size(t->type) != 1 ? (size_t)lc_quant_align(t->type) : loom_type_size(t->type);
    if (es == 0 || ((uintptr_t)data + (uintptr_t)b->delta) % es != 0) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' is not aligned to its element size", be->dev->name, t->name);
        return LOOM_ERR_UNSUPPORTED;
    }
    out->data = data + b->delta;
    out->type = (int)t->type;
    for (int i = 0; i < 4; i++) {
        out->ne[i] = t->ne[i];
        out->nb[i] = (int64_t)t->nb[i];
    }
    return LOOM_OK;
}

enum loom_status lc_operands_of(const struct lc_backend * be, const struct loom_tensor * dst, struct lc_tensor * s0, struct lc_tensor * s1,
                                struct lc_tensor * d) {
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, s0);
    if (st == LOOM_OK && dst->src[1]) st = lc_tensor_of(be, dst->src[1], false, s1);
    if (st == LOOM_OK && !dst->src[1]) *s1 = *s0;
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, d);
    return st;
}

struct lc_rows_launch lc_rows_launch_for(int64_t ne0, int64_t nrows) {
    struct lc_rows_launch l;
    unsigned bx = 32;
    while (bx < 256 && (int64_t)bx < ne0) bx *= 2;
    unsigned by = 256 / bx;
    int64_t gx = (ne0 + bx - 1) / bx;
    int64_t gy = (nrows + by - 1) / by;
    if (gy > 65535) gy = 65535;
    if (gy < 1) gy = 1;
    l.block = dim3(bx, by, 1);
    l.grid = dim3((unsigned)gx, (unsigned)gy, 1);
    return l;
}

void lc_extent(const struct lc_tensor * t, char ** lo, char ** hi) {
    *lo = *hi = t->data;
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] == 0) return;
    }
    int64_t last = (int64_t)loom_type_size((enum loom_type)t->type);
    for (int i = 0; i < 4; i++) last += (t->ne[i] - 1) * t->nb[i];
    *hi = t->data + last;
}

enum lc_overlap lc_overlap_of(const struct lc_tensor * a, const struct lc_tensor * b) {
    char *alo, *ahi, *blo, *bhi;
    lc_extent(a, &alo, &ahi);
    lc_extent(b, &blo, &bhi);
    if (ahi <= blo || bhi <= alo) return LC_DISJOINT;
    bool same = a->data == b->data && a->type == b->type;
    for (int i = 0; i < 4 && same; i++) same = a->ne[i] == b->ne[i] && (a->ne[i] == 1 || a->nb[i] == b->nb[i]);
    return same ? LC_SAME : LC_PARTIAL;
}

bool lc_scatter_for(const struct lc_backend * be, const struct loom_tensor * cpy, const struct lc_tensor * prod, struct lc_scatter * s) {
    const bool set_rows = cpy->op == LOOM_OP_SET_ROWS;
    if (cpy->op != LOOM_OP_CPY && cpy->op != LOOM_OP_DUP && cpy->op != LOOM_OP_CONT && !set_rows) return false;
    const struct loom_tensor * v = cpy->src[0];
    struct lc_tensor ids;
    s->rows_dim = -1;
    if (set_rows) {
        if (lc_tensor_of(be, cpy->src[1], false, &ids) != LOOM_OK) return false;
        s->rows_dim = 1;
        s->rows = ids.data;
        s->rows_nb = ids.nb[0];
        s->rows_max = cpy->ne[1];
        s->err = be->err_dev;
    }
    if (!v || v->type != LOOM_TYPE_F32 || prod->type != LOOM_TYPE_F32 || !lc_is_contiguous(prod)) return false;
    struct lc_tensor vt, e;
    if (lc_tensor_of(be, v, false, &vt) != LOOM_OK || lc_tensor_of(be, cpy, true, &e) != LOOM_OK) return false;
    if (vt.data != prod->data || lc_nelements(&vt) != lc_nelements(prod) || !lc_is_float_type(e.type)) return false;
    /* a dense permutation: its dims (of more than one element) ordered by stride step through
     * the bytes of 'prod' in mixed radix */
    int order[4], n = 0;
    for (int k = 0; k < 4; k++) {
        if (vt.ne[k] > 1) order[n++] = k;
    }
    for (int x = 1; x < n; x++) {
        for (int y = x; y > 0 && vt.nb[order[y]] < vt.nb[order[y - 1]]; y--) {
            int t = order[y];
            order[y] = order[y - 1];
            order[y - 1] = t;
        }
    }
    int64_t want = 4;
    for (int x = 0; x < n; x++) {
        if (vt.nb[order[x]] != want) return false;
        want *= vt.ne[order[x]];
    }
    bool same_shape = true;
    for (int k = 0; k < 4; k++) same_shape = same_shape && (vt.ne[k] == e.ne[k] || (set_rows && k == 1));
    int64_t step = (int64_t)loom_type_size((enum loom_type)e.type);
    for (int k = 0; k < 4; k++) {
        s->sne[k] = vt.ne[k] > 1 ? vt.ne[k] : 1;
        s->snb[k] = vt.ne[k] > 1 ? vt.nb[k] : 1;
        if (set_rows && !same_shape) return false;
        if (same_shape) {
            s->dnb[k] = e.nb[k];
        } else {
            /* a contiguous destination of another shape: the copy goes in flat element order */
            s->dnb[k] = step;
            step *= vt.ne[k];
        }
    }
    if (!same_shape && !lc_is_contiguous(&e)) return false;
    if (lc_overlap_of(&e, prod) != LC_DISJOINT) return false;
    if (set_rows && lc_overlap_of(&ids, prod) != LC_DISJOINT) return false;
    s->data = e.data;
    s->type = e.type;
    /* the division-free form (lc_scatter_store) over the dims in stride order */
    s->nfd = -1;
    s->prow = -1;
    if (lc_nelements(prod) < ((int64_t)1 << 32)) {
        s->nfd = n;
        if (set_rows) s->prow = LC_SCATTER_ROW0;
        for (int x = 0; x < n; x++) {
            s->fd[x] = lc_fastdiv_make((uint32_t)vt.ne[order[x]]);
            s->pdnb[x] = s->dnb[order[x]];
            if (set_rows && order[x] == s->rows_dim) s->prow = x;
        }
    }
    return true;
}

void lc_launch(const struct lc_backend * be, const void * func, dim3 grid, dim3 block, void ** args, size_t smem) {
    if (!be->pdl_prev) {
        (void)cudaLaunchKernel(func, grid, block, args, smem, be->stream);
        return;
    }
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = be->stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    (void)cudaLaunchKernelExC(&cfg, func, args);
}
