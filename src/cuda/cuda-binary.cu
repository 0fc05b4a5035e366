/* cuda-binary.cu -- element-wise ADD and MUL, 'b' broadcast (index modulo its extent). */
#include "cuda-binary.cuh"

__global__ void lc_binary_kernel(struct lc_tensor a, struct lc_tensor b, struct lc_tensor d, int is_mul) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) return;
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3];
    const int64_t b0 = (i0 % b.ne[0]) * b.nb[0];
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows; r += (int64_t)gridDim.y * blockDim.y) {
        const int64_t i1 = r % d.ne[1], i23 = r / d.ne[1];
        const int64_t i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
        float x = lc_load(a.data + i0 * a.nb[0] + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3], a.type);
        float y = *(const float *)(b.data + b0 + (i1 % b.ne[1]) * b.nb[1] + (i2 % b.ne[2]) * b.nb[2] + (i3 % b.ne[3]) * b.nb[3]);
        *(float *)(d.data + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = is_mul ? x * y : x + y;
    }
}

/* All three F32, contiguous, of one shape: no index arithmetic (the general kernel's 64-bit
 * divisions make it ALU-bound at ~0.7 TB/s on an H200); 'vec' (all three 16-byte aligned): four
 * elements per 16-byte load and store, the last n % 4 one by one. Same arithmetic as
 * lc_binary_kernel. */
__global__ void lc_binary_flat_kernel(const float * a, const float * b, float * d, int64_t n, int is_mul, int vec) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t from = 0;
    if (vec) {
        const int64_t n4 = n / 4;
        for (int64_t i = i0; i < n4; i += stride) {
            const float4 x = ((const float4 *)a)[i], y = ((const float4 *)b)[i];
            ((float4 *)d)[i] = is_mul ? make_float4(x.x * y.x, x.y * y.y, x.z * y.z, x.w * y.w)
                                      : make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
        from = n4 * 4;
    }
    for (int64_t i = from + i0; i < n; i += stride) {
        const float x = a[i], y = b[i];
        d[i] = is_mul ? x * y : x + y;
    }
}

bool lc_binary_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *b = op->src[1];
    return a && b && lc_is_float_type(a->type) && b->type == LOOM_TYPE_F32 && op->type == LOOM_TYPE_F32 &&
           loom_are_same_shape(a, op) && loom_can_repeat(b, a) && lc_strides_ok(a) && lc_strides_ok(b) && lc_strides_ok(op);
}

enum loom_status lc_binary(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, b, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &b, &d);
    if (st != LOOM_OK) return st;
    /* the common case, all contiguous and the same shape: one flat row */
    bool same = true;
    for (int i = 0; i < 4; i++) same = same && a.ne[i] == b.ne[i];
    int is_mul = dst->op == LOOM_OP_MUL;
    if (same && lc_is_contiguous(&a) && lc_is_contiguous(&b) && lc_is_contiguous(&d)) {
        int64_t n = lc_nelements(&d);
        if (a.type == LOOM_TYPE_F32) {
            const float * pa = (const float *)a.data;
            const float * pb = (const float *)b.data;
            float * pd = (float *)d.data;
            int vec = (uintptr_t)pa % 16 == 0 && (uintptr_t)pb % 16 == 0 && (uintptr_t)pd % 16 == 0;
            void * args[] = {&pa, &pb, &pd, &n, &is_mul, &vec};
            lc_launch(be, (const void *)lc_binary_flat_kernel, dim3(lc_flat_blocks(vec ? (n + 3) / 4 : n)), dim3(256), args);
            return LC_CHECK_LAUNCH("lc_binary_flat_kernel");
        }
        const int64_t ne[4] = {n, 1, 1, 1};
        a = lc_tensor_contiguous(a.data, a.type, ne);
        b = lc_tensor_contiguous(b.data, b.type, ne);
        d = lc_tensor_contiguous(d.data, d.type, ne);
    }
    struct lc_rows_launch l = lc_rows_launch_for(d.ne[0], lc_nrows(&d));
    void * args[] = {&a, &b, &d, &is_mul};
    lc_launch(be, (const void *)lc_binary_kernel, l.grid, l.block, args);
    return LC_CHECK_LAUNCH("lc_binary_kernel");
}
