/* cuda-unary.cu -- element-wise SCALE, SILU, GELU: one thread per element, rows strided. */
#include "cuda-unary.cuh"

enum { UNARY_SCALE, UNARY_SILU, UNARY_GELU };

__global__ void lc_unary_kernel(struct lc_tensor a, struct lc_tensor d, int op, float s) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) return;
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows; r += (int64_t)gridDim.y * blockDim.y) {
        float x = lc_load(a.data + lc_row_offset(a, r) + i0 * a.nb[0], a.type);
        float y;
        if (op == UNARY_SCALE) {
            y = x * s;
        } else if (op == UNARY_SILU) {
            y = lc_silu(x);
        } else {
            y = lc_gelu(x);
        }
        lc_store(d.data + lc_row_offset(d, r) + i0 * d.nb[0], d.type, y);
    }
}

__device__ __forceinline__ float unary_apply(float x, int op, float s) {
    return op == UNARY_SCALE ? x * s : op == UNARY_SILU ? lc_silu(x) : lc_gelu(x);
}

/* Both contiguous (F32): no index arithmetic; 'vec' (both 16-byte aligned): four elements per
 * 16-byte load and store, the last n % 4 one by one. Same arithmetic as lc_unary_kernel. */
__global__ void lc_unary_flat_kernel(const float * a, float * d, int64_t n, int op, float s, int vec) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t from = 0;
    if (vec) {
        const int64_t n4 = n / 4;
        for (int64_t i = i0; i < n4; i += stride) {
            const float4 x = ((const float4 *)a)[i];
            ((float4 *)d)[i] = make_float4(unary_apply(x.x, op, s), unary_apply(x.y, op, s), unary_apply(x.z, op, s), unary_apply(x.w, op, s));
        }
        from = n4 * 4;
    }
    for (int64_t i = from + i0; i < n; i += stride) d[i] = unary_apply(a[i], op, s);
}

bool lc_unary_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    return a && a->type == LOOM_TYPE_F32 && op->type == LOOM_TYPE_F32 && loom_are_same_shape(a, op) && lc_strides_ok(a) &&
           lc_strides_ok(op);
}

/* Views both as one row when both are contiguous (a launch of full blocks). */
static void flatten_pair(struct lc_tensor * a, struct lc_tensor * d) {
    if (!lc_is_contiguous(a) || !lc_is_contiguous(d)) return;
    const int64_t ne[4] = {lc_nelements(d), 1, 1, 1};
    *a = lc_tensor_contiguous(a->data, a->type, ne);
    *d = lc_tensor_contiguous(d->data, d->type, ne);
}

enum loom_status lc_unary(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &a);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    int op = dst->op == LOOM_OP_SCALE ? UNARY_SCALE : dst->op == LOOM_OP_SILU ? UNARY_SILU : UNARY_GELU;
    float s = op == UNARY_SCALE ? loom_get_op_param_f32(dst, 0) : 0.0f;
    if (lc_is_contiguous(&a) && lc_is_contiguous(&d) && a.type == LOOM_TYPE_F32 && d.type == LOOM_TYPE_F32) {
        const float * pa = (const float *)a.data;
        float * pd = (float *)d.data;
        int64_t n = lc_nelements(&d);
        int vec = (uintptr_t)pa % 16 == 0 && (uintptr_t)pd % 16 == 0;
        void * args[] = {&pa, &pd, &n, &op, &s, &vec};
        lc_launch(be, (const void *)lc_unary_flat_kernel, dim3(lc_flat_blocks(vec ? (n + 3) / 4 : n)), dim3(256), args);
        return LC_CHECK_LAUNCH("lc_unary_flat_kernel");
    }
    flatten_pair(&a, &d);
    struct lc_rows_launch l = lc_rows_launch_for(d.ne[0], lc_nrows(&d));
    void * args[] = {&a, &d, &op, &s};
    lc_launch(be, (const void *)lc_unary_kernel, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_unary_kernel");
}
