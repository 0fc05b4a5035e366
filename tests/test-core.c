/* test-core.c -- tensor core: shapes, strides, views, graphs, type conversion. */
#include "test-util.h"

#include <math.h>
#include <string.h>

static void test_fp16(void) {
    /* every half value round-trips through float exactly */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = loom_fp16_to_fp32((uint16_t)h);
        uint16_t back = loom_fp32_to_fp16(f);
        if (isnan(f)) {
            CHECK((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "nan %04x", h);
        } else {
            CHECK(back == h, "fp16 %04x -> %g -> %04x", h, f, back);
        }
    }
    /* rounding: nearest even, overflow to inf, underflow to zero */
    CHECK(loom_fp32_to_fp16(65520.0f) == 0x7c00, "65520 rounds to inf");
    CHECK(loom_fp32_to_fp16(65519.0f) == 0x7bff, "65519 rounds to max");
    CHECK(loom_fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3c00, "tie to even (down)");
    CHECK(loom_fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3c02, "tie to even (up)");
    CHECK(loom_fp32_to_fp16(1e-9f) == 0, "underflow");
    CHECK(loom_fp16_to_fp32(0x0001) == ldexpf(1.0f, -24), "smallest subnormal");
    CHECK(loom_fp32_to_fp16(ldexpf(1.0f, -25)) == 0, "half the smallest subnormal ties to zero");
    CHECK(loom_fp32_to_fp16(ldexpf(3.0f, -26)) == 1, "three quarters rounds up");
    /* bf16 */
    CHECK(loom_bf16_to_fp32(loom_fp32_to_bf16(1.5f)) == 1.5f, "bf16 exact");
    CHECK(loom_fp32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3f80, "bf16 tie to even");
    CHECK(isnan(loom_bf16_to_fp32(loom_fp32_to_bf16(NAN))), "bf16 nan");
}

static void test_views(void) {
    struct loom_init_params p = {.mem_size = 1 << 20, .mem_buffer = NULL, .no_alloc = false};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * a = loom_new_tensor_3d(ctx, LOOM_TYPE_F32, 5, 4, 3);
    CHECK(a->nb[0] == 4 && a->nb[1] == 20 && a->nb[2] == 80 && a->nb[3] == 240, "strides");
    CHECK(loom_nbytes(a) == 240 && loom_is_contiguous(a), "nbytes");
    struct loom_tensor * v = loom_view_2d(ctx, a, 2, 3, a->nb[1], a->nb[1]);
    struct loom_tensor * vv = loom_view_1d(ctx, v, 2, v->nb[1]);
    CHECK(vv->view_src == a && vv->view_offs == 2 * a->nb[1], "chains of views collapse to the base");
    CHECK(vv->data == (char *)a->data + 40, "view data");
    CHECK(!loom_is_contiguous(v), "strided view is not contiguous");
    struct loom_tensor * t = loom_transpose(ctx, a);
    CHECK(t->ne[0] == 4 && t->ne[1] == 5 && t->nb[0] == 20 && t->nb[1] == 4, "transpose");
    CHECK(loom_is_transposed(t) && loom_nbytes(t) == 240, "transposed extent");
    struct loom_tensor * pm = loom_permute(ctx, a, 2, 0, 1, 3);
    CHECK(pm->ne[2] == 5 && pm->ne[0] == 4 && pm->ne[1] == 3, "permute shape");
    CHECK(pm->nb[2] == 4 && pm->nb[0] == 20 && pm->nb[1] == 80, "permute strides");
    struct loom_tensor * r = loom_reshape_2d(ctx, a, 20, 3);
    CHECK(r->ne[0] == 20 && r->nb[1] == 80 && r->data == a->data, "reshape");
    loom_free(ctx);
}

static void test_graph(void) {
    struct loom_init_params p = {.mem_size = 4 << 20, .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * x = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 8);
    struct loom_tensor * w = loom_new_tensor_2d(ctx, LOOM_TYPE_F16, 8, 4);
    struct loom_tensor * y = loom_mul_mat(ctx, w, x);
    struct loom_tensor * z = loom_add(ctx, y, y);
    struct loom_tensor * s = loom_silu(ctx, z);
    struct loom_cgraph * g = loom_new_graph(ctx);
    loom_build_forward_expand(g, s);
    loom_build_forward_expand(g, s);
    CHECK(g->n_nodes == 3 && g->n_leafs == 2, "nodes %d leafs %d", g->n_nodes, g->n_leafs);
    CHECK(g->nodes[0] == y && g->nodes[1] == z && g->nodes[2] == s, "topological order");
    CHECK(y->ne[0] == 4 && y->ne[1] == 1, "mul_mat shape");
    loom_free(ctx);
}

int main(void) {
    test_fp16();
    test_views();
    test_graph();
    return test_finish("test-core");
}
