/* test-alloc.c -- the graph allocator alone: reuse, inputs, outputs, max_size chunks, failures,
 * plan reuse, and random graphs (overlap checker + values equal to a run without any reuse). */
#include "backend/galloc-impl.h"
#include "loom-alloc.h"
#include "test-ref.h"
#include "test-rgraph.h"

#include <stdarg.h>

static loom_backend_dev_t g_host; /* a sim device with host memory, alignment 64: computes the graphs */
static loom_backend_t g_host_backend;

static struct loom_context * new_ctx(size_t n_tensors) {
    struct loom_init_params p = {.mem_size = n_tensors * loom_tensor_overhead() + loom_graph_overhead(1024), .no_alloc = true};
    return loom_init(p);
}

/* ---------------------------------------------------------------- log capture */

static char g_last_error[1024];
static void capture_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level >= LOOM_LOG_ERROR) snprintf(g_last_error, sizeof g_last_error, "%s", text);
}

/* ---------------------------------------------------------------- the free list itself */

static struct lgal_slot arena_take(struct lgal_arena * a, size_t size) {
    struct lgal_slot s = {0};
    CHECK(lgal_arena_alloc(a, size, &s) == LOOM_OK, "alloc %zu", size);
    return s;
}

static void test_freelist(void) {
    struct lgal_arena a;
    lgal_arena_init(&a, 64, SIZE_MAX);
    struct lgal_slot x = arena_take(&a, 100), y = arena_take(&a, 200), z = arena_take(&a, 50);
    CHECK(x.offset == 0 && y.offset == 128 && z.offset == 384 && a.chunks[0].high == 448, "aligned, packed");
    lgal_arena_free(&a, &x);
    lgal_arena_free(&a, &z);
    lgal_arena_free(&a, &y); /* joins both neighbours */
    CHECK(a.chunks[0].n_blocks == 1 && a.chunks[0].blocks[0].offset == 0, "coalesced into one block");
    lgal_arena_release(&a);

    lgal_arena_init(&a, 64, SIZE_MAX);
    struct lgal_slot s1 = arena_take(&a, 128), s2 = arena_take(&a, 64), s3 = arena_take(&a, 256), s4 = arena_take(&a, 64);
    struct lgal_slot s5 = arena_take(&a, 64);
    (void)s3;
    (void)s5;
    lgal_arena_free(&a, &s2);
    lgal_arena_free(&a, &s4);
    lgal_arena_free(&a, &s1); /* holes: [0, 192) and [448, 512) */
    struct lgal_slot f = arena_take(&a, 60);
    CHECK(f.offset == 448, "best fit picks the smallest hole: %zu", f.offset);
    struct lgal_slot g = arena_take(&a, 150);
    CHECK(g.offset == 0 && a.chunks[0].high == 576, "a hole before growing: %zu", g.offset);
    lgal_arena_release(&a);

    lgal_arena_init(&a, 64, 1000); /* chunks of at most 1000 bytes */
    struct lgal_slot c1 = arena_take(&a, 600), c2 = arena_take(&a, 600), c3 = arena_take(&a, 300), c4 = arena_take(&a, 380);
    CHECK(c1.chunk == 0 && c2.chunk == 1 && c3.chunk == 0 && c3.offset == 640 && c4.chunk == 2, "spread over chunks");
    CHECK(c3.size == 320 && a.chunks[0].high <= 1000, "padding clipped at max_size");
    struct lgal_slot c5 = arena_take(&a, 1000);
    CHECK(c5.chunk == 3 && c5.size == 1000, "a tensor of exactly max_size fits a chunk of its own");
    lgal_arena_release(&a);
}

/* ---------------------------------------------------------------- reuse on long chains */

static void test_chain_reuse(void) {
    struct loom_context * ctx = new_ctx(200);
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 8); /* 1 KiB */
    loom_set_input(x);
    struct loom_tensor * t = x;
    for (int i = 0; i < 64; i++) t = (i % 2) ? loom_soft_max(ctx, t) : loom_rms_norm(ctx, t, 1e-5f);
    loom_set_output(t);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 1024);
    loom_build_forward_expand(g, t);

    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK, "alloc chain");
    CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "check chain");
    size_t planned = loom_gallocr_get_buffer_size(ga, 0), naive = loom_gallocr_get_naive_size(ga, 0);
    CHECK(naive == 65 * 1024, "naive %zu", naive);
    CHECK(planned <= 3 * 1024, "planned %zu: input + two live tensors at most", planned);
    loom_gallocr_free(ga);
    loom_free(ctx);

    /* element-wise chain: runs in place */
    ctx = new_ctx(200);
    x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 8);
    loom_set_input(x);
    t = loom_silu(ctx, x);
    for (int i = 0; i < 64; i++) t = (i % 3) ? loom_scale(ctx, t, 1.01f) : loom_gelu(ctx, t);
    struct loom_tensor * last = loom_add(ctx, t, x);
    struct loom_cgraph * g2 = loom_new_graph_custom(ctx, 1024);
    loom_build_forward_expand(g2, last);
    ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g2) == LOOM_OK, "alloc in-place chain");
    CHECK(loom_gallocr_check(ga, g2) == LOOM_OK, "check in-place chain");
    CHECK(loom_gallocr_get_buffer_size(ga, 0) == 2 * 1024, "in place: %zu bytes", loom_gallocr_get_buffer_size(ga, 0));
    CHECK(last->data == g2->nodes[0]->data, "the chain shares one block");
    CHECK(x->data != last->data, "the input is never overwritten in place");
    loom_gallocr_free(ga);
    loom_free(ctx);
}

/* The checker is not vacuous: planted overlaps are caught. */
static void test_checker_catches(void) {
    struct loom_context * ctx = new_ctx(100);
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 8);
    struct loom_tensor * y = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 8);
    loom_set_input(x);
    loom_set_input(y);
    struct loom_tensor * a = loom_soft_max(ctx, x);
    struct loom_tensor * b = loom_soft_max(ctx, a);
    struct loom_tensor * c = loom_add(ctx, b, y);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 64);
    loom_build_forward_expand(g, c);
    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK && loom_gallocr_check(ga, g) == LOOM_OK, "clean plan passes");
    loom_log_set(capture_log, NULL);
    void * saved = b->data;
    b->data = a->data; /* soft_max writing over its own source: not element-wise */
    CHECK(loom_gallocr_check(ga, g) != LOOM_OK, "overwriting a source that is still read is caught");
    b->data = saved;
    saved = y->data;
    y->data = x->data; /* two inputs sharing bytes */
    CHECK(loom_gallocr_check(ga, g) != LOOM_OK, "overlapping inputs are caught");
    y->data = saved;
    saved = c->data;
    c->data = (uint8_t *)c->data + 4; /* misaligned */
    CHECK(loom_gallocr_check(ga, g) != LOOM_OK, "misalignment is caught");
    c->data = saved;
    loom_log_set(NULL, NULL);
    CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "restored plan passes");
    loom_gallocr_free(ga);
    loom_free(ctx);
}

/* ---------------------------------------------------------------- inputs and outputs */

static bool disjoint(const struct loom_tensor * a, const struct loom_tensor * b) {
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    return a0 + loom_nbytes(a) <= b0 || b0 + loom_nbytes(b) <= a0;
}

static void test_inputs_disjoint(void) {
    struct loom_context * ctx = new_ctx(100);
    struct loom_tensor * in[6];
    struct loom_tensor * acc = NULL;
    for (int i = 0; i < 6; i++) {
        in[i] = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 16, 1 + i);
        loom_set_input(in[i]);
        struct loom_tensor * r = loom_soft_max(ctx, loom_mul_mat(ctx, in[i], in[i]));  /* [1+i, 1+i] */
        struct loom_tensor * s = loom_rms_norm(ctx, loom_cont_2d(ctx, r, (1 + i) * (1 + i), 1), 1e-5f);
        acc = acc ? loom_add(ctx, loom_cont_2d(ctx, loom_mul_mat(ctx, s, s), 1, 1), acc) : loom_cont_2d(ctx, loom_mul_mat(ctx, s, s), 1, 1);
    }
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 1024);
    loom_build_forward_expand(g, acc);
    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK, "alloc");
    for (int i = 0; i < 6; i++) {
        for (int j = i + 1; j < 6; j++) CHECK(disjoint(in[i], in[j]), "inputs %d and %d overlap", i, j);
    }
    CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "check");
    loom_gallocr_free(ga);
    loom_free(ctx);
}

static void test_outputs_survive(void) {
    struct loom_context * ctx = new_ctx(100);
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 16, 4);
    loom_set_input(x);
    struct loom_tensor * mid = loom_silu(ctx, x);
    loom_set_output(mid);
    struct loom_tensor * t = mid;
    for (int i = 0; i < 20; i++) t = (i % 2) ? loom_scale(ctx, t, 2.0f) : loom_soft_max(ctx, t);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 1024);
    loom_build_forward_expand(g, t);
    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK, "alloc");
    CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "check");
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] != mid) CHECK(disjoint(mid, g->nodes[i]), "output overlaps node %d", i);
    }
    float xv[64], mv[64];
    for (int i = 0; i < 64; i++) xv[i] = (float)i / 16.0f - 2.0f;
    loom_backend_tensor_set(x, xv, 0, sizeof xv);
    CHECK(loom_backend_graph_compute(g_host_backend, g) == LOOM_OK, "compute");
    loom_backend_tensor_get(mid, mv, 0, sizeof mv);
    /* the kernels' exp is a SIMD approximation: compare within a few ulps, not bit for bit */
    const struct test_view src[LOOM_MAX_SRC] = {{x, (const uint8_t *)xv}};
    for (int64_t r = 0; r < mid->ne[1]; r++) {
        double want[16];
        test_ref_row(mid, src, r, 0, 0, want);
        for (int i = 0; i < 16; i++) {
            const float w = (float)want[i];
            CHECK(fabsf(mv[r * 16 + i] - w) <= 1e-6f * fmaxf(1.0f, fabsf(w)), "output value %d after compute", (int)r * 16 + i);
        }
    }
    loom_gallocr_free(ga);
    loom_free(ctx);
}

/* ---------------------------------------------------------------- max_size */

/* 'n' inputs of 'bytes' each, all live until one final sum. */
static struct loom_cgraph * wide_graph(struct loom_context * ctx, int n, int64_t ne0) {
    struct loom_tensor * acc = NULL;
    for (int i = 0; i < n; i++) {
        struct loom_tensor * a = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, ne0);
        loom_format_name(a, "wide%d", i);
        struct loom_tensor * s = loom_silu(ctx, a);
        acc = acc ? loom_add(ctx, acc, s) : s;
    }
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 1024);
    loom_build_forward_expand(g, acc);
    return g;
}

static void test_max_size_chunks(void) {
    struct loom_sim_params p = loom_sim_default_params();
    p.alignment = 256;
    p.max_buffer_size = 2560;
    loom_backend_dev_t d = test_sim_new("chunky", p);
    struct loom_context * ctx = new_ctx(100);
    struct loom_cgraph * g = wide_graph(ctx, 8, 256); /* 1 KiB each */
    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(d));
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK, "alloc");
    CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "check (includes: no tensor straddles a chunk)");
    int n = loom_gallocr_get_n_chunks(ga, 0);
    CHECK(n >= 4, "8 live KiB over 2.5 KiB buffers: %d chunks", n);
    for (int c = 0; c < n; c++) {
        loom_backend_buffer_t b = loom_gallocr_get_buffer(ga, 0, c);
        CHECK(b && loom_backend_buffer_get_size(b) <= 2560, "chunk %d within max_size", c);
    }
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        struct loom_tensor * t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        uintptr_t base = (uintptr_t)loom_backend_buffer_get_base(t->buffer);
        CHECK((uintptr_t)t->data + loom_nbytes(t) <= base + loom_backend_buffer_get_size(t->buffer), "'%s' inside its chunk", t->name);
    }
    loom_gallocr_free(ga);
    CHECK(test_sim_live_buffers(d) == 0, "all chunks freed");
    loom_free(ctx);

    /* one tensor larger than max_size: a clear error naming it */
    ctx = new_ctx(100);
    g = wide_graph(ctx, 2, 1024); /* 4 KiB each */
    ga = loom_gallocr_new(loom_backend_dev_buffer_type(d));
    loom_log_set(capture_log, NULL);
    g_last_error[0] = 0;
    CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_ERR_TOO_LARGE, "too large");
    loom_log_set(NULL, NULL);
    CHECK(strstr(g_last_error, "wide") != NULL, "error names the tensor: %s", g_last_error);
    CHECK(test_sim_live_buffers(d) == 0, "nothing allocated");
    for (int i = 0; i < g->n_leafs; i++) CHECK(!g->leafs[i]->data, "no tensor left placed");
    loom_gallocr_free(ga);
    loom_free(ctx);
    loom_sim_device_free(d);
}

static void test_failure_injection(void) {
    for (int fail_at = 1; fail_at <= 6; fail_at++) {
        struct loom_sim_params p = loom_sim_default_params();
        p.alignment = 256;
        p.max_buffer_size = 2560;
        p.fail_alloc_at = (uint64_t)fail_at;
        loom_backend_dev_t d = test_sim_new("failing", p);
        struct loom_context * ctx = new_ctx(100);
        struct loom_cgraph * g = wide_graph(ctx, 8, 256);
        loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(d));
        loom_log_set(capture_log, NULL);
        enum loom_status st = loom_gallocr_alloc_graph(ga, g);
        loom_log_set(NULL, NULL);
        int chunks_needed = (int)test_sim_alloc_calls(d) - 1;
        if (fail_at <= chunks_needed + 1 && st != LOOM_OK) {
            CHECK(st == LOOM_ERR_OOM, "fail at %d: OOM, got %s", fail_at, loom_status_str(st));
            CHECK(test_sim_live_buffers(d) == 0, "fail at %d: %d buffers leaked", fail_at, (int)test_sim_live_buffers(d));
            CHECK(loom_gallocr_get_buffer_size(ga, 0) == 0, "no buffers held");
            for (int i = 0; i < g->n_nodes; i++) CHECK(!g->nodes[i]->data, "no tensor left placed");
            /* the allocator recovers */
            CHECK(loom_gallocr_alloc_graph(ga, g) == LOOM_OK, "retry after failure");
            CHECK(loom_gallocr_check(ga, g) == LOOM_OK, "check after retry");
        } else {
            CHECK(st == LOOM_OK, "fail at %d beyond the allocations made", fail_at);
        }
        loom_gallocr_free(ga);
        CHECK(test_sim_live_buffers(d) == 0, "freed");
        loom_free(ctx);
        loom_sim_device_free(d);
    }
}

/* ---------------------------------------------------------------- plan reuse */

static struct loom_cgraph * mlp(struct loom_context * ctx, int64_t n_tokens) {
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, n_tokens);
    loom_set_input(x);
    struct loom_tensor * w = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 64);
    loom_set_input(w);
    struct loom_tensor * h = loom_silu(ctx, loom_mul_mat(ctx, w, loom_rms_norm(ctx, x, 1e-5f)));
    struct loom_tensor * y = loom_soft_max(ctx, loom_mul_mat(ctx, h, h));
    loom_set_output(y);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 256);
    loom_build_forward_expand(g, y);
    return g;
}

static void test_plan_reuse(void) {
    struct loom_context * c1 = new_ctx(64), * c2 = new_ctx(64), * c3 = new_ctx(64);
    struct loom_cgraph * g1 = mlp(c1, 8), * g2 = mlp(c2, 8), * g3 = mlp(c3, 24);
    loom_gallocr_t ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_alloc_graph(ga, g1) == LOOM_OK && loom_gallocr_get_n_plans(ga) == 1, "first plan");
    void * addr[64];
    for (int i = 0; i < g1->n_nodes; i++) addr[i] = g1->nodes[i]->data;
    CHECK(loom_gallocr_alloc_graph(ga, g1) == LOOM_OK && loom_gallocr_get_n_plans(ga) == 1, "same graph again: no re-plan");
    for (int i = 0; i < g1->n_nodes; i++) CHECK(g1->nodes[i]->data == addr[i], "same addresses %d", i);
    CHECK(loom_gallocr_alloc_graph(ga, g2) == LOOM_OK && loom_gallocr_get_n_plans(ga) == 1, "same shape, other tensors: plan reused");
    for (int i = 0; i < g2->n_nodes; i++) CHECK(g2->nodes[i]->data == addr[i], "reused plan, same offsets %d", i);
    size_t small = loom_gallocr_get_buffer_size(ga, 0);
    CHECK(loom_gallocr_alloc_graph(ga, g3) == LOOM_OK && loom_gallocr_get_n_plans(ga) == 2, "larger graph: re-planned");
    CHECK(loom_gallocr_get_buffer_size(ga, 0) > small, "and the buffer grew");
    CHECK(loom_gallocr_check(ga, g3) == LOOM_OK, "check g3");
    size_t big = loom_gallocr_get_buffer_size(ga, 0);
    CHECK(loom_gallocr_alloc_graph(ga, g1) == LOOM_OK && loom_gallocr_get_n_plans(ga) == 3, "back to g1: re-planned");
    CHECK(loom_gallocr_get_buffer_size(ga, 0) == big, "buffers only grow");
    CHECK(loom_gallocr_check(ga, g1) == LOOM_OK, "check g1");
    loom_gallocr_free(ga);

    /* the graphs above point into the freed allocator's buffers: build fresh ones */
    loom_free(c2);
    loom_free(c3);
    c2 = new_ctx(64);
    c3 = new_ctx(64);
    g2 = mlp(c2, 8);
    g3 = mlp(c3, 24);
    ga = loom_gallocr_new(loom_backend_dev_buffer_type(g_host));
    CHECK(loom_gallocr_reserve(ga, g3) == LOOM_OK, "reserve with the largest");
    for (int i = 0; i < g3->n_nodes; i++) CHECK(!g3->nodes[i]->data, "reserve places nothing");
    big = loom_gallocr_get_buffer_size(ga, 0);
    CHECK(loom_gallocr_alloc_graph(ga, g2) == LOOM_OK && loom_gallocr_get_buffer_size(ga, 0) == big, "smaller graph fits the reservation");
    loom_gallocr_free(ga);
    loom_free(c1);
    loom_free(c2);
    loom_free(c3);
}

/* ---------------------------------------------------------------- random graphs */

/* Outputs with every tensor in its own memory (no reuse at all): the reference. */
static uint8_t * run_without_reuse(uint64_t seed, int n_ops, size_t * size) {
    loom_backend_buffer_type_t place = loom_backend_dev_buffer_type(g_host);
    struct rgraph * rg = rg_build(seed, n_ops, &place, 1, 0);
    CHECK(rg_alloc_weights(rg, seed) == LOOM_OK, "weights");
    enum loom_status st;
    loom_backend_buffer_t all = loom_backend_alloc_ctx_tensors_from_buft(rg->ctx, loom_backend_dev_buffer_type(g_host), &st);
    CHECK(all != NULL, "reference alloc");
    rg_set_inputs(rg, seed);
    CHECK(loom_backend_graph_compute(g_host_backend, rg->graph) == LOOM_OK, "reference compute (seed %llu)", (unsigned long long)seed);
    uint8_t * out = rg_read_outputs(rg, size);
    loom_backend_buffer_free(all);
    rg_free(rg);
    return out;
}

static void test_random_graphs(int n_graphs) {
    struct loom_sim_params p2 = loom_sim_default_params();
    p2.host_memory = true;
    p2.alignment = 128;
    p2.alloc_extra = 40;
    loom_backend_dev_t d2 = test_sim_new("host2", p2);
    uint64_t rng = 12345;
    size_t total_planned = 0, total_naive = 0, total_nodes = 0;
    for (int gi = 0; gi < n_graphs; gi++) {
        uint64_t seed = 1000 + (uint64_t)gi;
        int n_ops = (int)test_rand_range(&rng, 5, 80);
        size_t ref_size;
        uint8_t * ref = run_without_reuse(seed, n_ops, &ref_size);

        loom_sim_set_max_buffer_size(d2, test_rand_uniform(&rng) < 0.5 ? 0 : (size_t)test_rand_range(&rng, 4096 + 128, 20000));
        loom_backend_buffer_type_t place = loom_backend_dev_buffer_type(g_host);
        struct rgraph * rg = rg_build(seed, n_ops, &place, 1, 0);
        CHECK(rg_alloc_weights(rg, seed) == LOOM_OK, "weights");
        loom_backend_buffer_type_t bufts[2] = {loom_backend_dev_buffer_type(g_host), loom_backend_dev_buffer_type(d2)};
        loom_gallocr_t ga = loom_gallocr_new_n(bufts, 2);
        int node_ids[2048], leaf_ids[2048];
        for (int i = 0; i < rg->graph->n_nodes; i++) node_ids[i] = (int)test_rand_range(&rng, 0, 1);
        for (int i = 0; i < rg->graph->n_leafs; i++) leaf_ids[i] = (int)test_rand_range(&rng, 0, 1);
        enum loom_status st = loom_gallocr_alloc_graph_n(ga, rg->graph, node_ids, leaf_ids);
        CHECK(st == LOOM_OK, "alloc random graph %d: %s", gi, loom_status_str(st));
        CHECK(loom_gallocr_check(ga, rg->graph) == LOOM_OK, "check random graph %d", gi);
        for (int b = 0; b < 2; b++) {
            size_t planned = loom_gallocr_get_buffer_size(ga, b), naive = loom_gallocr_get_naive_size(ga, b);
            CHECK(planned <= naive, "graph %d buffer %d: planned %zu > naive %zu", gi, b, planned, naive);
            total_planned += planned;
            total_naive += naive;
        }
        rg_set_inputs(rg, seed);
        total_nodes += (size_t)rg->graph->n_nodes;
        CHECK(loom_backend_graph_compute(g_host_backend, rg->graph) == LOOM_OK, "compute %d", gi);
        size_t size;
        uint8_t * out = rg_read_outputs(rg, &size);
        CHECK(size == ref_size && memcmp(out, ref, size) == 0, "graph %d (seed %llu): outputs differ from the run without reuse", gi,
              (unsigned long long)seed);
        free(out);
        free(ref);
        loom_gallocr_free(ga);
        rg_free(rg);
    }
    fprintf(stderr, "random graphs: %d graphs, %zu nodes, planned %zu bytes vs naive %zu bytes in total\n", n_graphs, total_nodes,
            total_planned, total_naive);
    CHECK(test_sim_live_buffers(d2) == 0 && test_sim_live_buffers(g_host) == 0, "no buffers leaked");
    loom_sim_device_free(d2);
}

int main(void) {
    struct loom_sim_params hp = loom_sim_default_params();
    hp.host_memory = true;
    hp.alignment = 64;
    g_host = test_sim_new("thost", hp);
    g_host_backend = loom_backend_dev_init(g_host, NULL);
    test_freelist();
    test_chain_reuse();
    test_checker_catches();
    test_inputs_disjoint();
    test_outputs_survive();
    test_max_size_chunks();
    test_failure_injection();
    test_plan_reuse();
    test_random_graphs(300);
    loom_backend_free(g_host_backend);
    loom_sim_device_free(g_host);
    return test_finish("test-alloc");
}
