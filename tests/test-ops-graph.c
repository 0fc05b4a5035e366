/* test-ops-graph.c -- the CPU executor on whole graphs: a small transformer-like chain computed
 * with 1, 2 and 3 threads (bitwise equal) and with the scalar kernels (close); unsupported ops
 * are refused before anything runs; empty tensors and views need no work. */
#include "loom-cpu.h"
#include "test-util.h"

#include <math.h>
#include <string.h>

struct chain {
    struct loom_context * ctx;
    struct loom_cgraph * graph;
    struct loom_tensor * out;    /* F32 [64, 5] */
    struct loom_tensor * best;   /* I32 [5] */
};

static void fill_f32(struct loom_tensor * t, uint64_t * rng) {
    float * d = t->data;
    for (int64_t i = 0; i < loom_nelements(t); i++) d[i] = (float)(2.0 * test_rand_uniform(rng) - 1.0);
}

static void fill_half(struct loom_tensor * t, uint64_t * rng) {
    uint16_t * d = t->data;
    for (int64_t i = 0; i < loom_nelements(t); i++) {
        float v = (float)(test_rand_normal(rng) * 0.2);
        d[i] = t->type == LOOM_TYPE_F16 ? loom_fp32_to_fp16(v) : loom_fp32_to_bf16(v);
    }
}

static struct chain build_chain(void) {
    struct chain c;
    struct loom_init_params p = {.mem_size = 16u << 20, .mem_buffer = NULL, .no_alloc = false};
    c.ctx = loom_init(p);
    uint64_t rng = 42;
    struct loom_tensor * x = loom_new_tensor_2d(c.ctx, LOOM_TYPE_F32, 64, 5);
    struct loom_tensor * g = loom_new_tensor_1d(c.ctx, LOOM_TYPE_F32, 64);
    struct loom_tensor * w1 = loom_new_tensor_2d(c.ctx, LOOM_TYPE_F16, 64, 96);
    struct loom_tensor * w2 = loom_new_tensor_2d(c.ctx, LOOM_TYPE_BF16, 96, 64);
    struct loom_tensor * pos = loom_new_tensor_1d(c.ctx, LOOM_TYPE_I32, 5);
    fill_f32(x, &rng);
    fill_f32(g, &rng);
    fill_half(w1, &rng);
    fill_half(w2, &rng);
    for (int i = 0; i < 5; i++) ((int32_t *)pos->data)[i] = 3 * i + 1;

    struct loom_tensor * h = loom_mul(c.ctx, loom_rms_norm(c.ctx, x, 1e-5f), g);
    struct loom_tensor * q = loom_mul_mat(c.ctx, w1, h);                                   /* [96, 5] */
    struct loom_tensor * r = loom_rope(c.ctx, loom_reshape_3d(c.ctx, q, 32, 3, 5), pos, 32, LOOM_ROPE_NEOX, 10000.0f, 1.0f);
    struct loom_tensor * t = loom_permute(c.ctx, r, 0, 2, 1, 3);                          /* [32, 5, 3] view */
    struct loom_tensor * s = loom_silu(c.ctx, loom_cont_2d(c.ctx, t, 96, 5));
    struct loom_tensor * o = loom_add(c.ctx, loom_mul_mat(c.ctx, w2, s), x);               /* [64, 5] */
    c.out = loom_soft_max_ext(c.ctx, loom_gelu(c.ctx, o), NULL, 0.5f);
    c.best = loom_argmax(c.ctx, c.out);
    c.graph = loom_new_graph(c.ctx);
    loom_build_forward_expand(c.graph, c.out);
    loom_build_forward_expand(c.graph, c.best);
    return c;
}

static void test_chain(void) {
    struct chain c = build_chain();
    const size_t n = loom_nbytes(c.out);
    float * ref = malloc(n);
    int32_t ref_best[5];
    CHECK(loom_cpu_graph_compute(c.graph, 1) == LOOM_OK, "compute, 1 thread");
    memcpy(ref, c.out->data, n);
    memcpy(ref_best, c.best->data, sizeof ref_best);
    for (int threads = 2; threads <= 3; threads++) {
        memset(c.out->data, 0, n);
        CHECK(loom_cpu_graph_compute(c.graph, threads) == LOOM_OK, "compute, %d threads", threads);
        CHECK(memcmp(ref, c.out->data, n) == 0, "%d threads give the 1-thread result bit for bit", threads);
        CHECK(memcmp(ref_best, c.best->data, sizeof ref_best) == 0, "argmax with %d threads", threads);
    }
    /* rows of a softmax sum to 1 */
    for (int j = 0; j < 5; j++) {
        double s = 0.0;
        for (int i = 0; i < 64; i++) s += ref[j * 64 + i];
        CHECK(fabs(s - 1.0) < 1e-5, "row %d sums to %g", j, s);
    }
    /* the portable kernels agree closely (the SIMD BF16 product rounds its columns to BF16) */
    loom_cpu_set_scalar(true);
    CHECK(loom_cpu_get_scalar(), "scalar forced");
    CHECK(loom_cpu_graph_compute(c.graph, 2) == LOOM_OK, "compute, scalar kernels");
    loom_cpu_set_scalar(false);
    double err = 0.0, norm = 0.0;
    for (int64_t i = 0; i < loom_nelements(c.out); i++) {
        double d = (double)((float *)c.out->data)[i] - ref[i];
        err += d * d;
        norm += (double)ref[i] * ref[i];
    }
    CHECK(err / norm < 1e-5, "scalar vs SIMD NMSE %g", err / norm);
    printf("kernels: %s\n", loom_cpu_features());
    free(ref);
    loom_free(c.ctx);
}

static void test_refusals(void) {
    struct loom_init_params p = {.mem_size = 1u << 20, .mem_buffer = NULL, .no_alloc = false};
    struct loom_context * ctx = loom_init(p);
    /* a weight of a type the CPU does not compute with yet (a 2-bit i-quant): it says so before
     * computing anything */
    struct loom_tensor * wq = loom_new_tensor_2d(ctx, LOOM_TYPE_IQ2_XXS, 256, 4);
    struct loom_tensor * b = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 256, 2);
    memset(b->data, 0, loom_nbytes(b));
    struct loom_tensor * before = loom_scale(ctx, b, 2.0f);
    struct loom_tensor * mm = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 4, 2);
    mm->op = LOOM_OP_MUL_MAT;
    mm->src[0] = wq;
    mm->src[1] = before;
    CHECK(!loom_cpu_supports_op(mm), "IQ2_XXS mul_mat not claimed");
    CHECK(loom_cpu_supports_op(before), "scale claimed");
    struct loom_cgraph * g = loom_new_graph(ctx);
    loom_build_forward_expand(g, mm);
    ((float *)before->data)[0] = 123.0f;
    CHECK(loom_cpu_graph_compute(g, 2) == LOOM_ERR_UNSUPPORTED, "unsupported op refused");
    CHECK(((float *)before->data)[0] == 123.0f, "nothing computed before the refusal");

    /* empty tensors and views are no-ops */
    struct loom_tensor * e = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 0, 4);
    struct loom_tensor * es = loom_silu(ctx, loom_transpose(ctx, e));
    struct loom_cgraph * g2 = loom_new_graph(ctx);
    loom_build_forward_expand(g2, es);
    CHECK(loom_cpu_graph_compute(g2, 2) == LOOM_OK, "empty graph computes");
    loom_free(ctx);
}

int main(void) {
    test_chain();
    test_refusals();
    return test_finish("test-ops-graph");
}
