/* test-ops-ref.c -- the independent reference for every op test (test-ref.h): naive loops in
 * double precision over the sources' host images, honouring every stride; and the error bound of
 * each op. */
#include "test-ref.h"
#include "core/loom-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double test_view_get(const struct test_view * v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct loom_tensor * t = v->t;
    if (!v->image) return NAN;
    size_t offs = t->view_offs + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
    const uint8_t * p = v->image + offs;
    uint16_t h;
    float f;
    int32_t i;
    const int64_t blck = loom_blck_size(t->type);
    if (blck > 1) { /* the element's block, dequantized */
        float x[256];
        const loom_to_float_fn to_float = loom_type_get_traits(t->type)->to_float;
        if (!to_float || blck > 256) return NAN;
        to_float(v->image + offs - (size_t)i0 * t->nb[0] + (size_t)(i0 / blck) * t->nb[0], x, blck);
        return x[i0 % blck];
    }
    switch (t->type) {
    case LOOM_TYPE_F32: memcpy(&f, p, 4); return f;
    case LOOM_TYPE_F16: memcpy(&h, p, 2); return loom_fp16_to_fp32(h);
    case LOOM_TYPE_BF16: memcpy(&h, p, 2); return loom_bf16_to_fp32(h);
    case LOOM_TYPE_I32: memcpy(&i, p, 4); return i;
    default: return NAN;
    }
}

/* The value a float result type can hold closest to 'x' (what a correct copy must produce). */
static double round_to(enum loom_type type, double x) {
    switch (type) {
    case LOOM_TYPE_F32: return (float)x;
    case LOOM_TYPE_F16: return loom_fp16_to_fp32(loom_fp32_to_fp16((float)x));
    case LOOM_TYPE_BF16: return loom_bf16_to_fp32(loom_fp32_to_bf16((float)x));
    default: return x;
    }
}

/* Row (i1, i2, i3) of a source as doubles; a quantized row (dense blocks) is dequantized whole. */
static void view_row(const struct test_view * v, int64_t i1, int64_t i2, int64_t i3, double * out) {
    const struct loom_tensor * t = v->t;
    const loom_to_float_fn to_float = loom_type_get_traits(t->type)->to_float;
    if (loom_blck_size(t->type) > 1 && to_float) {
        float * x = malloc((size_t)t->ne[0] * sizeof *x);
        LOOM_ASSERT(x);
        to_float(v->image + t->view_offs + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3], x, t->ne[0]);
        for (int64_t k = 0; k < t->ne[0]; k++) out[k] = x[k];
        free(x);
        return;
    }
    for (int64_t k = 0; k < t->ne[0]; k++) out[k] = test_view_get(v, k, i1, i2, i3);
}

static void ref_mul_mat(const struct test_view * src, int64_t ne0, int64_t j, int64_t i2, int64_t i3, double * out) {
    const struct loom_tensor * a = src[0].t, * b = src[1].t;
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    double * arow = malloc((size_t)a->ne[0] * 2 * sizeof *arow);
    LOOM_ASSERT(arow);
    double * bcol = arow + a->ne[0];
    view_row(&src[1], j, i2, i3, bcol);
    for (int64_t i = 0; i < ne0; i++) {
        view_row(&src[0], i, i2 / r2, i3 / r3, arow);
        double s = 0.0;
        for (int64_t k = 0; k < a->ne[0]; k++) s += arow[k] * bcol[k];
        out[i] = s;
    }
    free(arow);
}

/* The rotation angle's frequency and the magnitude factor of pair 'i', written from the YaRN
 * paper's definitions (Peng et al. 2023, 3.2-3.4): a pair that turns r = L / lambda_i times over the
 * original context L keeps its frequency when r > beta_fast, is fully interpolated (times s = the
 * frequency scale) when r < beta_slow, and mixes linearly between, over pair indices rounded out to
 * whole pairs; the attention temperature is 1 + 0.1 ln(1/s). */
static void ref_rope_freq(const struct loom_tensor * dst, const struct test_view * src, int i, double * freq, double * mag) {
    const int n_dims = loom_get_op_param_i32(dst, 0);
    const struct loom_rope_ext_params e = loom_rope_get_ext_params(dst);
    const double base = loom_get_op_param_f32(dst, 2), s = loom_get_op_param_f32(dst, 3), ext = e.ext_factor;
    const double theta = pow(base, -2.0 * i / n_dims) / (dst->src[2] ? test_view_get(&src[2], i, 0, 0, 0) : 1.0);
    *freq = s * theta;
    *mag = e.attn_factor;
    if (ext == 0.0) return;
    /* the (fractional) pair index at which the rotation count over L equals b: L * base^(-2d/n) / (2 pi) = b */
    const double L = e.n_ctx_orig;
    const double d_fast = n_dims / 2.0 * log(L / (2 * M_PI * e.beta_fast)) / log(base);
    const double d_slow = n_dims / 2.0 * log(L / (2 * M_PI * e.beta_slow)) / log(base);
    const double lo = d_fast > 0 ? floor(d_fast) : 0, hi = ceil(d_slow) < n_dims - 1 ? ceil(d_slow) : n_dims - 1;
    double gamma; /* 1: keep the frequency, 0: interpolate */
    if (i <= lo) {
        gamma = 1;
    } else if (i >= hi) {
        gamma = 0;
    } else {
        gamma = 1 - (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
    }
    gamma *= ext;
    *freq = theta * ((1 - gamma) * s + gamma);
    *mag *= 1 + 0.1 * log(1 / s);
}

static void ref_rope(const struct loom_tensor * dst, const struct test_view * src, int64_t ne0, int64_t i1, int64_t i2,
                     int64_t i3, double * out) {
    const int n_dims = loom_get_op_param_i32(dst, 0);
    const bool neox = loom_get_op_param_i32(dst, 1) == LOOM_ROPE_NEOX;
    const double pos = test_view_get(&src[1], i2, 0, 0, 0);
    for (int64_t i = 0; i < ne0; i++) out[i] = test_view_get(&src[0], i, i1, i2, i3);
    for (int i = 0; i < n_dims / 2; i++) {
        double freq, mag;
        ref_rope_freq(dst, src, i, &freq, &mag);
        const double theta = pos * freq;
        const int64_t e0 = neox ? i : 2 * i, e1 = neox ? i + n_dims / 2 : 2 * i + 1;
        const double x0 = test_view_get(&src[0], e0, i1, i2, i3), x1 = test_view_get(&src[0], e1, i1, i2, i3);
        out[e0] = mag * (x0 * cos(theta) - x1 * sin(theta));
        out[e1] = mag * (x0 * sin(theta) + x1 * cos(theta));
    }
}

static void ref_soft_max(const struct loom_tensor * dst, const struct test_view * src, int64_t ne0, int64_t i1, int64_t i2,
                         int64_t i3, double * out) {
    const struct loom_tensor * m = dst->src[1];
    double max = -INFINITY;
    for (int64_t i = 0; i < ne0; i++) {
        out[i] = test_view_get(&src[0], i, i1, i2, i3) * (double)loom_get_op_param_f32(dst, 0);
        if (m) out[i] += test_view_get(&src[1], i, i1, i2 % m->ne[2], i3 % m->ne[3]);
        if (out[i] > max) max = out[i];
    }
    if (max == -INFINITY) {
        for (int64_t i = 0; i < ne0; i++) out[i] = 0.0;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < ne0; i++) {
        out[i] = exp(out[i] - max);
        sum += out[i];
    }
    for (int64_t i = 0; i < ne0; i++) out[i] /= sum;
}

/* Row (h, iq, b) of FLASH_ATTN_EXT: the scores of every cell, their softmax, the weighted values. */
static void ref_flash_attn(const struct loom_tensor * dst, const struct test_view * src, int64_t h, int64_t iq, int64_t b,
                           double * out) {
    const struct loom_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * m = dst->src[3];
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1], hk = h / (q->ne[2] / k->ne[2]);
    double max = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < Dv; i++) out[i] = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t j = 0; j < n_kv; j++) {
            double s = 0.0;
            for (int64_t d = 0; d < D; d++) s += test_view_get(&src[0], d, iq, h, b) * test_view_get(&src[1], d, j, hk, b);
            s *= (double)loom_get_op_param_f32(dst, 0);
            if (m) s += test_view_get(&src[3], j, iq, h % m->ne[2], b % m->ne[3]);
            if (pass == 0) {
                if (s > max) max = s;
            } else if (max != -INFINITY && s != -INFINITY) {
                const double p = exp(s - max);
                sum += p;
                for (int64_t i = 0; i < Dv; i++) out[i] += p * test_view_get(&src[2], i, j, hk, b);
            }
        }
    }
    for (int64_t i = 0; i < Dv; i++) out[i] = sum > 0 ? out[i] / sum : 0.0;
}

/* SET_ROWS into a block type: row 'from' of the rows (src[0]) quantized by the type's from_float, then decoded. */
static void ref_set_row_blocks(enum loom_type type, const struct test_view * src, int64_t from, int64_t ne0, double * out) {
    const struct loom_type_traits * tt = loom_type_get_traits(type);
    float * x = malloc((size_t)ne0 * sizeof *x);
    uint8_t * q = malloc(loom_row_size(type, ne0));
    if (!x || !q || !tt->from_float || !tt->to_float) {
        for (int64_t i = 0; i < ne0; i++) out[i] = NAN;
    } else {
        for (int64_t i = 0; i < ne0; i++) x[i] = (float)test_view_get(&src[0], i, from, 0, 0);
        tt->from_float(x, q, ne0);
        tt->to_float(q, x, ne0);
        for (int64_t i = 0; i < ne0; i++) out[i] = x[i];
    }
    free(x);
    free(q);
}

/* Copies: the element at the same row-major position of the source. */
static void ref_copy(const struct loom_tensor * dst, const struct test_view * src, int64_t i1, int64_t i2, int64_t i3,
                     double * out) {
    const struct loom_tensor * s = src[0].t;
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
        int64_t lin = ((i3 * dst->ne[2] + i2) * dst->ne[1] + i1) * dst->ne[0] + i0, c[4];
        for (int d = 0; d < 4; d++) {
            c[d] = lin % s->ne[d];
            lin /= s->ne[d];
        }
        out[i0] = round_to(dst->type, test_view_get(&src[0], c[0], c[1], c[2], c[3]));
    }
}

static void ref_argmax(const struct test_view * src, int64_t n, double * out) {
    const struct loom_tensor * a = src[0].t;
    for (int64_t r = 0; r < n; r++) {
        int64_t best = 0;
        double bv = NAN;
        for (int64_t i = 0; i < a->ne[0]; i++) {
            double v = test_view_get(&src[0], i, r, 0, 0);
            if (isnan(v)) continue;
            if (isnan(bv) || v > bv) {
                bv = v;
                best = i;
            }
        }
        out[r] = (double)best;
    }
}

bool test_ref_row(const struct loom_tensor * dst, const struct test_view * src, int64_t i1, int64_t i2, int64_t i3,
                  double * out) {
    const int64_t ne0 = dst->ne[0];
    switch (dst->op) {
    case LOOM_OP_GET_ROWS: {
        const double id = test_view_get(&src[1], i1, i2, i3, 0);
        if (id >= 0 && id < src[0].t->ne[1]) view_row(&src[0], (int64_t)id, i2, i3, out);
        else for (int64_t i = 0; i < ne0; i++) out[i] = 0.0;
        break;
    }
    case LOOM_OP_MUL_MAT: ref_mul_mat(src, ne0, i1, i2, i3, out); break;
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: {
        const struct loom_tensor * b = src[1].t;
        for (int64_t i = 0; i < ne0; i++) {
            const double x = test_view_get(&src[0], i, i1, i2, i3);
            const double y = test_view_get(&src[1], i % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
            out[i] = dst->op == LOOM_OP_ADD ? x + y : x * y;
        }
        break;
    }
    case LOOM_OP_SCALE:
        for (int64_t i = 0; i < ne0; i++) out[i] = test_view_get(&src[0], i, i1, i2, i3) * (double)loom_get_op_param_f32(dst, 0);
        break;
    case LOOM_OP_SILU:
        for (int64_t i = 0; i < ne0; i++) {
            const double x = test_view_get(&src[0], i, i1, i2, i3);
            out[i] = x / (1.0 + exp(-x));
        }
        break;
    case LOOM_OP_GELU:
        for (int64_t i = 0; i < ne0; i++) {
            const double x = test_view_get(&src[0], i, i1, i2, i3);
            out[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        }
        break;
    case LOOM_OP_RMS_NORM: {
        double ss = 0.0;
        for (int64_t i = 0; i < ne0; i++) {
            const double x = test_view_get(&src[0], i, i1, i2, i3);
            ss += x * x;
        }
        const double scale = 1.0 / sqrt(ss / (double)ne0 + (double)loom_get_op_param_f32(dst, 0));
        for (int64_t i = 0; i < ne0; i++) out[i] = test_view_get(&src[0], i, i1, i2, i3) * scale;
        break;
    }
    case LOOM_OP_ROPE: ref_rope(dst, src, ne0, i1, i2, i3, out); break;
    case LOOM_OP_SOFT_MAX: ref_soft_max(dst, src, ne0, i1, i2, i3, out); break;
    case LOOM_OP_DUP:
    case LOOM_OP_CPY:
    case LOOM_OP_CONT: ref_copy(dst, src, i1, i2, i3, out); break;
    case LOOM_OP_ARGMAX: ref_argmax(src, ne0, out); break;
    case LOOM_OP_FLASH_ATTN_EXT: ref_flash_attn(dst, src, i1, i2, i3, out); break;
    case LOOM_OP_SET_ROWS: { /* the row some id (src[1]) names, else the destination's own values (src[2]) */
        int64_t from = -1;
        for (int64_t i = 0; i < dst->src[1]->ne[0]; i++) {
            if ((int64_t)test_view_get(&src[1], i, 0, 0, 0) == i1) from = i;
        }
        if (from >= 0 && loom_blck_size(dst->type) > 1) {
            /* a block type stores what its quantizer makes of the row (the quantizers are held to
             * the reference engine's bytes by test-quantize) */
            ref_set_row_blocks(dst->type, src, from, ne0, out);
            break;
        }
        for (int64_t i = 0; i < ne0; i++) {
            out[i] = from >= 0 ? round_to(dst->type, test_view_get(&src[0], i, from, 0, 0)) : test_view_get(&src[2], i, i1, 0, 0);
        }
        break;
    }
    default:
        for (int64_t i = 0; i < ne0; i++) out[i] = NAN;
        return false;
    }
    return true;
}

/* Bits per value of a block type (0 for the others). */
static int value_bits(enum loom_type t) {
    switch (t) {
    case LOOM_TYPE_Q2_K: return 2;
    case LOOM_TYPE_Q3_K: return 3;
    case LOOM_TYPE_Q4_0: case LOOM_TYPE_Q4_1: case LOOM_TYPE_Q4_K: case LOOM_TYPE_IQ4_NL: case LOOM_TYPE_IQ4_XS: return 4;
    case LOOM_TYPE_Q5_0: case LOOM_TYPE_Q5_1: case LOOM_TYPE_Q5_K: return 5;
    case LOOM_TYPE_Q6_K: return 6;
    case LOOM_TYPE_Q8_0: case LOOM_TYPE_Q8_K: return 8;
    default: return 0;
    }
}

/* Bounds on NMSE = sum((x - r)^2) / sum(r^2):
 *  - copies (DUP, CPY, CONT, SET_ROWS) and GET_ROWS: 0 -- values move unchanged or rounded exactly as the
 *    reference rounds them (round to nearest even); a block type's values are its decoded blocks;
 *  - CPY from F32 into a block type of b bits per value: (1.5 / (2^b - 1))^2 -- a b-bit grid over the
 *    block's range of uniform values in [-1, 1] leaves a relative RMS error of 1 / (2^b - 1), with
 *    room for the stored scales' rounding (the reference row is the unquantized source);
 *  - element-wise ops, row ops (norm, rope, softmax): 1e-7 -- float rounding of each
 *    result (~6e-8 relative) and float transcendental functions stay far below it;
 *  - MUL_MAT with F32 weights: 1e-8 -- float sums of up to 4097 products;
 *  - FLASH_ATTN_EXT: 1e-9 -- float scores (sums of up to 128 products, scaled), float exp, and the
 *    running sums rescaled at every tile and merged across chunks (quantized K and V are
 *    dequantized exactly, as the reference reads them); with F16 K and V, 1e-6 -- a device may
 *    round q and the probabilities to F16 for its tensor-core products, as the unfused path's F16
 *    products round their F32 operand (2^-12 relative each: NMSE ~5e-8 on these cases' data,
 *    computed for head sizes 64..128 and 31..257 cells);
 *  - MUL_MAT with quantized weights: 1e-3 -- the reference multiplies the dequantized weights; a
 *    kernel may round the columns to 8 bits per block first (Q8_0 / Q8_K, as the field's integer
 *    dot products do: each column value off by up to half a step of max|x|/127, NMSE ~1e-5
 *    typical, but the long-row cases have 4 results, whose random block scales put single cases
 *    near 6e-4), while the F32 path (rows dequantized exactly) stays near 1e-13; that the integer
 *    kernels add the same products as the dequantized weights is test-qdot's check (F32 rounding);
 *  - MUL_MAT with F16/BF16 weights: 5e-4 -- a device may round the F32 columns to the weights'
 *    type (BF16 keeps 8 bits: ~1e-6 typical) before multiplying. */
double test_ref_threshold(const struct loom_tensor * dst) {
    const enum loom_type t0 = dst->src[0] ? dst->src[0]->type : dst->type;
    switch (dst->op) {
    case LOOM_OP_MUL_MAT: return t0 == LOOM_TYPE_F32 ? 1e-8 : loom_blck_size(t0) > 1 ? 1e-3 : 5e-4;
    case LOOM_OP_FLASH_ATTN_EXT:
        return dst->src[1] && dst->src[2] && dst->src[1]->type == LOOM_TYPE_F16 && dst->src[2]->type == LOOM_TYPE_F16 ? 1e-6 : 1e-9;
    case LOOM_OP_CPY:
        if (value_bits(dst->type) > 0 && t0 != dst->type) {
            const double step = 1.5 / ((1 << value_bits(dst->type)) - 1);
            return step * step;
        }
        return 0.0;
    case LOOM_OP_DUP:
    case LOOM_OP_CONT:
    case LOOM_OP_SET_ROWS:
    case LOOM_OP_GET_ROWS: return 0.0;
    default: break;
    }
    return 1e-7;
}
