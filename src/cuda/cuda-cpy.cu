/* cuda-cpy.cu -- strided copies with type conversion: one thread per destination element. */
#include "cuda-cpy.cuh"
#include "cuda-dequant.cuh"

/* 'same_shape': source and destination share ne, so one row offset serves both; otherwise the
 * flat index of each destination element is decomposed along the source's shape. */
__global__ void lc_cpy_kernel(struct lc_tensor s, struct lc_tensor d, int same_shape) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) return;
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows; r += (int64_t)gridDim.y * blockDim.y) {
        int64_t so;
        if (same_shape) {
            so = i0 * s.nb[0] + lc_row_offset(s, r);
        } else {
            int64_t k = r * d.ne[0] + i0;
            const int64_t j0 = k % s.ne[0];
            k /= s.ne[0];
            const int64_t j1 = k % s.ne[1];
            k /= s.ne[1];
            const int64_t j2 = k % s.ne[2];
            const int64_t j3 = k / s.ne[2];
            so = j0 * s.nb[0] + j1 * s.nb[1] + j2 * s.nb[2] + j3 * s.nb[3];
        }
        char * dp = d.data + i0 * d.nb[0] + lc_row_offset(d, r);
        if (s.type == LOOM_TYPE_I32) {
            *(int32_t *)dp = *(const int32_t *)(s.data + so);
        } else if (s.type == d.type && s.type != LOOM_TYPE_F32) {
            *(uint16_t *)dp = *(const uint16_t *)(s.data + so); /* F16/BF16 to itself: bits */
        } else {
            lc_store(dp, d.type, lc_load(s.data + so, s.type));
        }
    }
}

/* Both contiguous: element i to element i, converted as lc_cpy_kernel converts (I32 as is, F16 and
 * BF16 to themselves as bits, the rest through float), with no index arithmetic. */
__global__ void lc_cpy_flat_kernel(const char * s, int st, char * d, int dt, int64_t n) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t es_s = st == LOOM_TYPE_F32 || st == LOOM_TYPE_I32 ? 4 : 2, es_d = dt == LOOM_TYPE_F32 || dt == LOOM_TYPE_I32 ? 4 : 2;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (st == LOOM_TYPE_I32) {
            ((int32_t *)d)[i] = ((const int32_t *)s)[i];
        } else if (st == dt && st != LOOM_TYPE_F32) {
            ((uint16_t *)d)[i] = ((const uint16_t *)s)[i];
        } else {
            lc_store(d + i * es_d, dt, lc_load(s + i * es_s, st));
        }
    }
}

/* A copy that swaps the two fastest dimensions (the source is dense along ne1, the destination
 * along ne0; e.g. the V cache store of a batch): 32x32 tiles through shared memory, so that both
 * the reads and the writes are coalesced. F32 sources only (the value path of lc_cpy_kernel). */
__global__ void lc_cpy_transpose_kernel(struct lc_tensor s, struct lc_tensor d) {
    lc_pdl_trigger();
    lc_pdl_wait();
    __shared__ float tile[32][33];
    const int64_t n23 = d.ne[2] * d.ne[3];
    const int64_t i0 = (int64_t)blockIdx.x * 32;
    for (int64_t i1 = (int64_t)blockIdx.y * 32; i1 < d.ne[1]; i1 += (int64_t)gridDim.y * 32) {
        for (int64_t r = blockIdx.z; r < n23; r += gridDim.z) {
            const int64_t i2 = r % d.ne[2], i3 = r / d.ne[2];
            const char * sp = s.data + i2 * s.nb[2] + i3 * s.nb[3];
            char * dp = d.data + i2 * d.nb[2] + i3 * d.nb[3];
            __syncthreads(); /* the previous tile has been written out */
            for (int k = threadIdx.y; k < 32; k += blockDim.y) {
                const int64_t j0 = i0 + k, j1 = i1 + threadIdx.x;
                if (j0 < d.ne[0] && j1 < d.ne[1]) tile[k][threadIdx.x] = *(const float *)(sp + j0 * s.nb[0] + j1 * s.nb[1]);
            }
            __syncthreads();
            for (int k = threadIdx.y; k < 32; k += blockDim.y) {
                const int64_t j0 = i0 + threadIdx.x, j1 = i1 + k;
                if (j0 < d.ne[0] && j1 < d.ne[1]) lc_store(dp + j0 * d.nb[0] + j1 * d.nb[1], d.type, tile[threadIdx.x][k]);
            }
        }
    }
}

enum loom_status lc_copy(struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d) {
    const int64_t n = lc_nelements(d);
    if (n == 0) return LOOM_OK;
    bool same_shape = true;
    for (int i = 0; i < 4; i++) same_shape = same_shape && s->ne[i] == d->ne[i];
    const int64_t es_d = (int64_t)loom_type_size((enum loom_type)d->type);
    if (same_shape && s->type == LOOM_TYPE_F32 && lc_is_float_type(d->type) && s->nb[1] == 4 && s->nb[0] != 4 && d->nb[0] == es_d &&
        d->ne[0] >= 32 && d->ne[1] >= 32) {
        const int64_t n23 = d->ne[2] * d->ne[3];
        dim3 grid((unsigned)((d->ne[0] + 31) / 32), (unsigned)((d->ne[1] + 31) / 32 < 65535 ? (d->ne[1] + 31) / 32 : 65535),
                  (unsigned)(n23 < 65535 ? n23 : 65535));
        struct lc_tensor ts = *s, td = *d;
        void * args[] = {&ts, &td};
        lc_launch(be, (const void *)lc_cpy_transpose_kernel, grid, dim3(32, 8, 1), args);
        return LC_CHECK_LAUNCH("lc_cpy_transpose_kernel");
    }
    /* while a CUDA graph is captured, copies stay kernels (memcpy nodes update less freely) */
    if (s->type == d->type && lc_is_contiguous(s) && lc_is_contiguous(d) && !be->capturing) {
        be->memcpy_queued = true;
        be->pdl_prev = false;
        return LC_CHECK(cudaMemcpyAsync(d->data, s->data, (size_t)n * loom_type_size((enum loom_type)d->type),
                                        cudaMemcpyDeviceToDevice, be->stream));
    }
    struct lc_tensor ss = *s, dd = *d;
    bool same = true;
    for (int i = 0; i < 4; i++) same = same && ss.ne[i] == dd.ne[i];
    if (lc_is_contiguous(&ss) && lc_is_contiguous(&dd)) { /* both dense */
        const char * ps = ss.data;
        char * pd = dd.data;
        int st = ss.type, dt = dd.type;
        int64_t cnt = n;
        void * args[] = {&ps, &st, &pd, &dt, &cnt};
        lc_launch(be, (const void *)lc_cpy_flat_kernel, dim3(lc_flat_blocks(n)), dim3(256), args);
        return LC_CHECK_LAUNCH("lc_cpy_flat_kernel");
    }
    if (!same && lc_is_contiguous(&ss)) { /* a dense source reads as one row of any shape */
        const int64_t ne[4] = {n, 1, 1, 1};
        ss = lc_tensor_contiguous(ss.data, ss.type, ne);
    }
    struct lc_rows_launch l = lc_rows_launch_for(dd.ne[0], lc_nrows(&dd));
    int same_i = same ? 1 : 0;
    void * args[] = {&ss, &dd, &same_i};
    lc_launch(be, (const void *)lc_cpy_kernel, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_cpy_kernel");
}

bool lc_cpy_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    if (!a || loom_nelements(a) != loom_nelements(op)) return false;
    if (loom_blck_size(a->type) != 1 || loom_blck_size(op->type) != 1) return lc_cpy_quant_supported(op);
    bool types = (lc_is_float_type(a->type) && lc_is_float_type(op->type)) || (a->type == LOOM_TYPE_I32 && op->type == LOOM_TYPE_I32);
    if (op->op != LOOM_OP_CPY && a->type != op->type) return false;
    return types && lc_strides_ok(a) && lc_strides_ok(op);
}

enum loom_status lc_cpy(struct lc_backend * be, struct loom_tensor * dst) {
    if (loom_blck_size(dst->type) != 1 || loom_blck_size(dst->src[0]->type) != 1) return lc_cpy_quant(be, dst);
    struct lc_tensor s, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &s);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    return lc_copy(be, &s, &d);
}
