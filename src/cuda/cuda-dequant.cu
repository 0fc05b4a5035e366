/* cuda-dequant.cu -- quantized tensors on the device outside the matrix-vector kernels:
 * dequantization to F16 (the weights of a cuBLAS product, into scratch) or F32 (CPY / DUP / CONT
 * from a quantized tensor, GET_ROWS from a quantized table), and quantization of F32 to Q8_0 and
 * Q4_0 (CPY, SET_ROWS: a quantized KV cache). Decoding: cuda-quant.cuh; the quantizers follow
 * src/quant/quant-quantize.c (round to nearest against the unrounded scale). */
#include "cuda-dequant.cuh"
#include "cuda-quant.cuh"

#include <string.h>

bool lc_is_quant_type(int type) {
    switch (type) {
    case LOOM_TYPE_Q4_0: case LOOM_TYPE_Q4_1: case LOOM_TYPE_Q5_0: case LOOM_TYPE_Q5_1: case LOOM_TYPE_Q8_0:
    case LOOM_TYPE_Q2_K: case LOOM_TYPE_Q3_K: case LOOM_TYPE_Q4_K: case LOOM_TYPE_Q5_K: case LOOM_TYPE_Q6_K:
    case LOOM_TYPE_Q8_K: case LOOM_TYPE_IQ4_NL: case LOOM_TYPE_IQ4_XS: return true;
    default: return false;
    }
}

int lc_quant_align(int type) {
    const size_t bs = loom_type_size((enum loom_type)type);
    int a = 16;
    while (a > 1 && bs % (size_t)a != 0) a /= 2;
    return a;
}

bool lc_quant_strides_ok(const struct loom_tensor * t) {
    if (!lc_is_quant_type(t->type) || t->ne[0] % loom_blck_size(t->type) != 0 || t->nb[0] != loom_type_size(t->type)) return false;
    const size_t al = (size_t)lc_quant_align(t->type);
    for (int i = 1; i < LOOM_MAX_DIMS; i++) {
        if (t->ne[i] > 1 && t->nb[i] % al != 0) return false;
    }
    return true;
}

static __device__ __forceinline__ void lc_store_f(char * p, float v, float *) { *(float *)p = v; }
static __device__ __forceinline__ void lc_store_f(char * p, float v, __half *) { *(__half *)p = __float2half_rn(v); }

/* Thread t: unit t % nunits of row t / nunits of s (quantized), written converted to OT at the
 * same place of d (same shape; any strides). 'ids' set (GET_ROWS): row (i, i2, i3) of d reads
 * row ids[i, i2, i3] of s at (i2, i3); an id outside s gives zeros and raises *err. */
template <class Q, typename OT>
__global__ void lc_dequant_kernel(struct lc_tensor s, struct lc_tensor d, struct lc_tensor ids, int * err) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t nunits = d.ne[0] / Q::UE, nrows = d.ne[1] * d.ne[2] * d.ne[3];
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nunits * nrows; t += stride) {
        const int64_t u = t % nunits, r = t / nunits;
        char * drow = d.data + lc_row_offset(d, r);
        int64_t so;
        if (ids.data) {
            const int64_t i = r % d.ne[1], i23 = r / d.ne[1], i2 = i23 % d.ne[2], i3 = i23 / d.ne[2];
            const int32_t id = *(const int32_t *)(ids.data + i * ids.nb[0] + i2 * ids.nb[1] + i3 * ids.nb[2]);
            if (id < 0 || id >= s.ne[1]) {
                if (u == 0) atomicCAS(err, 0, LC_ERR_GET_ROWS);
                for (int64_t k = u * Q::UE; k < (u + 1) * Q::UE; k++) lc_store_f(drow + k * d.nb[0], 0.0f, (OT *)NULL);
                continue;
            }
            so = (int64_t)id * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
        } else {
            so = lc_row_offset(s, r);
        }
        const int64_t blk = u / Q::NU;
        Q::unit(s.data + so + blk * Q::BS, (int)(u % Q::NU), [&](int e0, const float (&x)[32]) {
            char * o = drow + (blk * Q::QK + e0) * d.nb[0];
            if (sizeof(OT) == 2 && d.nb[0] == 2 && ((uintptr_t)o & 15) == 0) { /* dense F16: four 16-byte stores */
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint4 v;
                    __half2 * h = (__half2 *)&v;
#pragma unroll
                    for (int k = 0; k < 4; k++) h[k] = __floats2half2_rn(x[8 * i + 2 * k], x[8 * i + 2 * k + 1]);
                    ((uint4 *)o)[i] = v;
                }
                return;
            }
#pragma unroll
            for (int l = 0; l < 32; l++) lc_store_f(o + l * d.nb[0], x[l], (OT *)NULL);
        });
    }
}

/* The launch over every unit of d's rows (d.ne[0] a whole number of s's blocks). */
struct lc_deq_launch {
    const struct lc_backend * be;
    struct lc_tensor s, d, ids;
    int * err;
    template <class Q> void run() {
        const int64_t n = d.ne[0] / Q::UE * d.ne[1] * d.ne[2] * d.ne[3];
        const void * f = d.type == LOOM_TYPE_F16 ? (const void *)lc_dequant_kernel<Q, __half> : (const void *)lc_dequant_kernel<Q, float>;
        void * args[] = {&s, &d, &ids, &err};
        lc_launch(be, f, dim3(lc_flat_blocks(n)), dim3(256), args);
    }
};

static enum loom_status lc_dequant_run(const struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d,
                                       const struct lc_tensor * ids, int * err) {
    if (lc_nelements(d) == 0) return LOOM_OK;
    struct lc_deq_launch l;
    l.be = be;
    l.s = *s;
    l.d = *d;
    if (ids) l.ids = *ids;
    else memset(&l.ids, 0, sizeof l.ids);
    l.err = err;
    if (!lc_quant_dispatch(s->type, l)) return LOOM_ERR_UNSUPPORTED;
    return LC_CHECK_LAUNCH("lc_dequant_kernel");
}

enum loom_status lc_dequant(const struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d) {
    return lc_dequant_run(be, s, d, NULL, NULL);
}

/* ---------------------------------------------------------------- F32 -> Q8_0 / Q4_0 */

/* The 32 F32 values of a block (source stride 'snb0' bytes) into v, as the CPU's block driver
 * (src/quant/quant-quantize.c) hands them to a quantizer: a block with a NaN or infinite value as
 * zeros, returning LC_BLOCK_NONFINITE (its scale is then written as NaN, so the block decodes to
 * NaN as the CPU's does); one whose largest magnitude lies outside [2^-24, 2^8] scaled by 2^-e
 * (e its exponent, returned; 0 otherwise), its half scale multiplied back by 2^e afterwards
 * (lc_put_scale). */
#define LC_BLOCK_NONFINITE 1000
static __device__ __forceinline__ int lc_block_in(const char * x, int64_t snb0, float (&v)[32]) {
    float amax = 0.0f;
    bool finite = true;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        v[j] = *(const float *)(x + j * snb0);
        const float a = fabsf(v[j]);
        finite = finite && a <= 3.402823466e38f;
        amax = a > amax ? a : amax;
    }
    if (!finite) {
#pragma unroll
        for (int j = 0; j < 32; j++) v[j] = 0.0f;
        return LC_BLOCK_NONFINITE;
    }
    if (amax == 0.0f || (amax >= 0x1p-24f && amax <= 0x1p8f)) return 0;
    const int e = ilogbf(amax);
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = ldexpf(v[j], -e);
    return e;
}

/* F32 -> binary16 as the CPU quantizers store scales: clamped to the largest finite half. */
static __device__ __forceinline__ __half lc_scale_half(float f) { return __float2half_rn(fminf(fmaxf(f, -65504.0f), 65504.0f)); }

/* The block's half scale d (of values scaled by 2^-e) at blk[0..1], times 2^e; a quiet NaN for a
 * non-finite block (e = LC_BLOCK_NONFINITE). */
static __device__ __forceinline__ void lc_put_scale(char * blk, float d, int e) {
    __half hd = lc_scale_half(d);
    if (e != 0) hd = lc_scale_half(ldexpf(__half2float(hd), e));
    const unsigned short u = e == LC_BLOCK_NONFINITE ? 0x7e00 : __half_as_ushort(hd);
    blk[0] = (char)(u & 0xff);
    blk[1] = (char)(u >> 8);
}

/* Q8_0: d = absmax / 127, q = round(x / d) (half away from zero) */
static __device__ void lc_quantize_q8_0(const char * x, int64_t snb0, char * blk) {
    float v[32];
    const int e = lc_block_in(x, snb0, v);
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
    const float d = __fdiv_rn(amax, 127.0f), id = d != 0.0f ? __frcp_rn(d) : 0.0f;
    lc_put_scale(blk, d, e);
#pragma unroll
    for (int j = 0; j < 32; j++) blk[2 + j] = (char)(int8_t)roundf(__fmul_rn(v[j], id));
}

/* Q4_0: d = max / -8 (max: the value of largest magnitude, the first on ties), codes 0..15 */
static __device__ void lc_quantize_q4_0(const char * x, int64_t snb0, char * blk) {
    float v[32];
    const int e = lc_block_in(x, snb0, v);
    float amax = 0.0f, mx = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        if (fabsf(v[j]) > amax) {
            amax = fabsf(v[j]);
            mx = v[j];
        }
    }
    const float d = __fdiv_rn(mx, -8.0f), id = d != 0.0f ? __frcp_rn(d) : 0.0f;
    lc_put_scale(blk, d, e);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int q0 = (int8_t)__fadd_rn(__fmul_rn(v[j], id), 8.5f), q1 = (int8_t)__fadd_rn(__fmul_rn(v[j + 16], id), 8.5f);
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        blk[2 + j] = (char)(q0 | q1 << 4);
    }
}

/* Thread t: block t % nblk of row t / nblk of d (quantized, d.type), from the same elements of s
 * (F32, same shape, any strides). 'ids' set (SET_ROWS): row r of s goes to row ids[r] of d. */
__global__ void lc_quantize_kernel(struct lc_tensor s, struct lc_tensor d, struct lc_tensor ids, int * err) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t nblk = s.ne[0] / 32, nrows = s.ne[1] * s.ne[2] * s.ne[3];
    const int64_t bs = d.type == LOOM_TYPE_Q8_0 ? 34 : 18;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nblk * nrows; t += stride) {
        const int64_t k = t % nblk, r = t / nblk;
        int64_t dof;
        if (ids.data) {
            const int32_t id = *(const int32_t *)(ids.data + r * ids.nb[0]);
            if (id < 0 || id >= d.ne[1]) {
                if (k == 0) atomicCAS(err, 0, LC_ERR_SET_ROWS);
                continue;
            }
            dof = (int64_t)id * d.nb[1];
        } else {
            dof = lc_row_offset(d, r);
        }
        const char * x = s.data + lc_row_offset(s, r) + 32 * k * s.nb[0];
        char * blk = d.data + dof + k * bs;
        if (d.type == LOOM_TYPE_Q8_0) lc_quantize_q8_0(x, s.nb[0], blk);
        else lc_quantize_q4_0(x, s.nb[0], blk);
    }
}

static enum loom_status lc_quantize_run(const struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d,
                                        const struct lc_tensor * ids, int * err) {
    const int64_t n = lc_nelements(s) / 32;
    if (n == 0) return LOOM_OK;
    struct lc_tensor ts = *s, td = *d, ti;
    if (ids) ti = *ids;
    else memset(&ti, 0, sizeof ti);
    void * args[] = {&ts, &td, &ti, &err};
    lc_launch(be, (const void *)lc_quantize_kernel, dim3(lc_flat_blocks(n)), dim3(128), args);
    return LC_CHECK_LAUNCH("lc_quantize_kernel");
}

/* ---------------------------------------------------------------- the ops */

static bool lc_is_kv_quant(int type) { return type == LOOM_TYPE_Q8_0 || type == LOOM_TYPE_Q4_0; }

/* The quantized tensor 't' as one row of ne elements (contiguous), or unchanged. */
static struct lc_tensor lc_flat_row(const struct lc_tensor * t, int64_t n) {
    struct lc_tensor r = *t;
    const int64_t bs = (int64_t)loom_type_size((enum loom_type)t->type), qk = loom_blck_size((enum loom_type)t->type);
    r.ne[0] = n;
    r.ne[1] = r.ne[2] = r.ne[3] = 1;
    r.nb[0] = bs;
    r.nb[1] = r.nb[2] = r.nb[3] = n / qk * bs;
    return r;
}

static struct lc_tensor lc_flat_f32(const struct lc_tensor * t, int64_t n) {
    const int64_t ne[4] = {n, 1, 1, 1};
    return lc_tensor_contiguous(t->data, t->type, ne);
}

bool lc_cpy_quant_supported(const struct loom_tensor * op) {
    const struct loom_tensor * a = op->src[0];
    if (!a || loom_nelements(a) != loom_nelements(op)) return false;
    if (!loom_are_same_shape(a, op) && !(loom_is_contiguous(a) && loom_is_contiguous(op))) return false;
    if (lc_is_quant_type(a->type) && a->type == op->type) return lc_quant_strides_ok(a) && lc_quant_strides_ok(op); /* bytes */
    if (op->op != LOOM_OP_CPY) return false;
    if (lc_is_quant_type(a->type) && (op->type == LOOM_TYPE_F32 || op->type == LOOM_TYPE_F16)) return lc_quant_strides_ok(a) && lc_strides_ok(op);
    return a->type == LOOM_TYPE_F32 && lc_is_kv_quant(op->type) && lc_strides_ok(a) && lc_quant_strides_ok(op);
}

/* Thread t: 16-bit word t % nw of row t / nw (rows of 2 * nw bytes) from s to d. */
__global__ void lc_copy_rows16_kernel(struct lc_tensor s, struct lc_tensor d, int64_t nw) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int64_t nrows = d.ne[1] * d.ne[2] * d.ne[3], stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nw * nrows; t += stride) {
        const int64_t w = t % nw, r = t / nw;
        *(uint16_t *)(d.data + lc_row_offset(d, r) + 2 * w) = *(const uint16_t *)(s.data + lc_row_offset(s, r) + 2 * w);
    }
}

enum loom_status lc_cpy_quant(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor s, d;
    enum loom_status st = lc_tensor_of(be, dst->src[0], false, &s);
    if (st == LOOM_OK) st = lc_tensor_of(be, dst, true, &d);
    if (st != LOOM_OK) return st;
    bool same = true;
    for (int i = 0; i < 4; i++) same = same && s.ne[i] == d.ne[i];
    const int64_t n = lc_nelements(&d);
    if (n == 0) return LOOM_OK;
    if (s.type == d.type) { /* DUP / CONT / CPY of a quantized tensor to its type: the blocks' bytes */
        if (!same) {
            s = lc_flat_row(&s, n);
            d = lc_flat_row(&d, n);
        }
        int64_t nw = d.ne[0] / loom_blck_size((enum loom_type)d.type) * (int64_t)loom_type_size((enum loom_type)d.type) / 2;
        const int64_t total = nw * d.ne[1] * d.ne[2] * d.ne[3];
        void * args[] = {&s, &d, &nw};
        lc_launch(be, (const void *)lc_copy_rows16_kernel, dim3(lc_flat_blocks(total)), dim3(256), args);
        return LC_CHECK_LAUNCH("lc_copy_rows16_kernel");
    }
    if (lc_is_quant_type(s.type)) {
        if (!same) {
            s = lc_flat_row(&s, n);
            d = lc_flat_f32(&d, n);
        }
        return lc_dequant_run(be, &s, &d, NULL, NULL);
    }
    if (!same) {
        s = lc_flat_f32(&s, n);
        d = lc_flat_row(&d, n);
    }
    return lc_quantize_run(be, &s, &d, NULL, NULL);
}

bool lc_get_rows_quant_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *ids = op->src[1];
    return a && ids && lc_is_quant_type(a->type) && ids->type == LOOM_TYPE_I32 && op->type == LOOM_TYPE_F32 && op->ne[0] == a->ne[0] &&
           op->ne[1] == ids->ne[0] && op->ne[2] == a->ne[2] && op->ne[3] == a->ne[3] && ids->ne[1] == a->ne[2] && ids->ne[2] == a->ne[3] &&
           lc_quant_strides_ok(a) && lc_strides_ok(ids) && lc_strides_ok(op);
}

enum loom_status lc_get_rows_quant(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, ids, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &ids, &d);
    if (st != LOOM_OK) return st;
    return lc_dequant_run(be, &a, &d, &ids, be->err_dev);
}

bool lc_set_rows_quant_supported(const struct loom_tensor * op) {
    const struct loom_tensor *b = op->src[0], *ids = op->src[1];
    return b && ids && b->type == LOOM_TYPE_F32 && ids->type == LOOM_TYPE_I32 && lc_is_kv_quant(op->type) && op->ne[2] == 1 && op->ne[3] == 1 &&
           b->ne[2] == 1 && b->ne[3] == 1 && b->ne[0] == op->ne[0] && ids->ne[0] == b->ne[1] && lc_strides_ok(b) && lc_strides_ok(ids) &&
           lc_quant_strides_ok(op);
}

enum loom_status lc_set_rows_quant(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor b, ids, d;
    enum loom_status st = lc_operands_of(be, dst, &b, &ids, &d);
    if (st != LOOM_OK) return st;
    return lc_quantize_run(be, &b, &d, &ids, be->err_dev);
}
