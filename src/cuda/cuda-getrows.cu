/* cuda-getrows.cu -- row gathers (embedding lookups) and scatters (KV cache stores) with
 * bounds-checked ids. */
#include "cuda-getrows.cuh"
#include "cuda-dequant.cuh"

__global__ void lc_get_rows_kernel(struct lc_tensor a, struct lc_tensor ids, struct lc_tensor d, int * err) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) return;
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows; r += (int64_t)gridDim.y * blockDim.y) {
        const int64_t i = r % d.ne[1], i23 = r / d.ne[1];
        const int64_t i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
        const int32_t id = *(const int32_t *)(ids.data + i * ids.nb[0] + i2 * ids.nb[1] + i3 * ids.nb[2]);
        float v = 0.0f;
        if (id >= 0 && id < a.ne[1]) {
            v = lc_load(a.data + i0 * a.nb[0] + id * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3], a.type);
        } else if (i0 == 0) {
            atomicCAS(err, 0, LC_ERR_GET_ROWS); /* the first bad id is reported at synchronize */
        }
        *(float *)(d.data + i0 * d.nb[0] + i * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = v;
    }
}

bool lc_get_rows_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *ids = op->src[1];
    if (a && loom_blck_size(a->type) != 1) return lc_get_rows_quant_supported(op);
    return a && ids && lc_is_float_type(a->type) && ids->type == LOOM_TYPE_I32 && op->type == LOOM_TYPE_F32 &&
           op->ne[0] == a->ne[0] && op->ne[1] == ids->ne[0] && op->ne[2] == a->ne[2] && op->ne[3] == a->ne[3] &&
           ids->ne[1] == a->ne[2] && ids->ne[2] == a->ne[3] && lc_strides_ok(a) && lc_strides_ok(ids) && lc_strides_ok(op);
}

enum loom_status lc_get_rows(struct lc_backend * be, struct loom_tensor * dst) {
    if (loom_blck_size(dst->src[0]->type) != 1) return lc_get_rows_quant(be, dst);
    struct lc_tensor a, ids, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &ids, &d);
    if (st != LOOM_OK) return st;
    struct lc_rows_launch l = lc_rows_launch_for(d.ne[0], lc_nrows(&d));
    int * err = be->err_dev;
    void * args[] = {&a, &ids, &d, &err};
    lc_launch(be, (const void *)lc_get_rows_kernel, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_get_rows_kernel");
}

/* Element i0 (W = 1) or elements i0 .. i0 + 3 (W = 4: dense rows of whole 16-byte runs, one
 * 16-byte load, one 16- or 8-byte store) of row r of b stored into row 'id' of d. */
template <int W> static __device__ __forceinline__ void lc_set_rows_put(const struct lc_tensor & b, const struct lc_tensor & d, int64_t i0, int64_t r,
                                                                        int64_t id) {
    char * p = d.data + i0 * d.nb[0] + id * d.nb[1];
    if (W == 1) {
        lc_store(p, d.type, lc_load(b.data + i0 * b.nb[0] + r * b.nb[1], b.type));
        return;
    }
    const float4 v = *(const float4 *)(b.data + i0 * 4 + r * b.nb[1]);
    if (d.type == LOOM_TYPE_F32) {
        *(float4 *)p = v;
    } else if (d.type == LOOM_TYPE_F16) {
        const __half2 h0 = __floats2half2_rn(v.x, v.y), h1 = __floats2half2_rn(v.z, v.w);
        *(uint2 *)p = make_uint2(*(const uint32_t *)&h0, *(const uint32_t *)&h1);
    } else {
        const __nv_bfloat162 h0 = __floats2bfloat162_rn(v.x, v.y), h1 = __floats2bfloat162_rn(v.z, v.w);
        *(uint2 *)p = make_uint2(*(const uint32_t *)&h0, *(const uint32_t *)&h1);
    }
}

/* Rows of b stored into the rows of d that ids names; a thread per W elements of a row. */
template <int W> __global__ void lc_set_rows_kernel(struct lc_tensor b, struct lc_tensor ids, struct lc_tensor d, int * err) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i0 >= b.ne[0]) return;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < b.ne[1]; r += (int64_t)gridDim.y * blockDim.y) {
        const int32_t id = *(const int32_t *)(ids.data + r * ids.nb[0]);
        if (id < 0 || id >= d.ne[1]) {
            if (i0 == 0) atomicCAS(err, 0, LC_ERR_SET_ROWS);
            continue;
        }
        lc_set_rows_put<W>(b, d, i0, r, id);
    }
}

bool lc_set_rows_supported(const struct loom_tensor * op) {
    const struct loom_tensor *b = op->src[0], *ids = op->src[1];
    if (loom_blck_size(op->type) != 1) return lc_set_rows_quant_supported(op);
    return b && ids && b->type == LOOM_TYPE_F32 && ids->type == LOOM_TYPE_I32 && lc_is_float_type(op->type) && op->ne[2] == 1 &&
           op->ne[3] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && b->ne[0] == op->ne[0] && ids->ne[0] == b->ne[1] &&
           lc_strides_ok(b) && lc_strides_ok(ids) && lc_strides_ok(op);
}

enum loom_status lc_set_rows(struct lc_backend * be, struct loom_tensor * dst) {
    if (loom_blck_size(dst->type) != 1) return lc_set_rows_quant(be, dst);
    struct lc_tensor b, ids, d;
    enum loom_status st = lc_operands_of(be, dst, &b, &ids, &d);
    if (st != LOOM_OK) return st;
    const int64_t es = (int64_t)loom_type_size((enum loom_type)d.type);
    const bool vec = b.ne[0] % 4 == 0 && b.nb[0] == 4 && d.nb[0] == es && (((uintptr_t)b.data | (uintptr_t)b.nb[1]) % 16) == 0 &&
                     (((uintptr_t)d.data | (uintptr_t)d.nb[1]) % (uintptr_t)(4 * es)) == 0;
    struct lc_rows_launch l = lc_rows_launch_for(vec ? b.ne[0] / 4 : b.ne[0], b.ne[1]);
    int * err = be->err_dev;
    void * args[] = {&b, &ids, &d, &err};
    lc_launch(be, vec ? (const void *)lc_set_rows_kernel<4> : (const void *)lc_set_rows_kernel<1>, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_set_rows_kernel");
}
