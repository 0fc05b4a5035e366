/* test-sched.c -- the scheduler: random graphs over two discrete sim devices and the CPU give
 * the CPU-only result bitwise (with the overlap checker on and planned <= naive memory); strided and
 * transposed views crossing devices; assignment rules; allocation failures leak nothing; lifecycle
 * (same graph many times, a different graph re-plans). */
#include "loom-alloc.h"
#include "test-rgraph.h"

static loom_backend_dev_t g_sim0, g_sim1; /* discrete sim devices */
static loom_backend_dev_t g_host;         /* a host-memory sim device: computes the references */
static loom_backend_t b_sim0, b_sim1, b_cpu;
static loom_backend_t b_ref; /* computes references: the host-memory sim device, with the CPU kernels on one thread */
static loom_backend_buffer_type_t g_cpu_buft;

static struct loom_context * new_ctx(size_t n_tensors) {
    struct loom_init_params p = {.mem_size = n_tensors * loom_tensor_overhead() + loom_graph_overhead(1024), .no_alloc = true};
    return loom_init(p);
}

/* ---------------------------------------------------------------- log capture */

static char g_log[8192];
static void capture_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level >= LOOM_LOG_INFO && strlen(g_log) + strlen(text) + 2 < sizeof g_log) {
        strcat(g_log, text);
        strcat(g_log, "\n");
    }
}

/* ---------------------------------------------------------------- reference: CPU only, no reuse */

static uint8_t * reference(uint64_t seed, int n_ops, size_t * size) {
    struct rgraph * rg = rg_build(seed, n_ops, &g_cpu_buft, 1, 0);
    CHECK(rg_alloc_weights(rg, seed) == LOOM_OK, "reference weights");
    enum loom_status st;
    loom_backend_buffer_t all = loom_backend_alloc_ctx_tensors_from_buft(rg->ctx, g_cpu_buft, &st);
    rg_set_inputs(rg, seed);
    CHECK(all && loom_backend_graph_compute(b_ref, rg->graph) == LOOM_OK, "reference compute (seed %llu)", (unsigned long long)seed);
    uint8_t * out = rg_read_outputs(rg, size);
    loom_backend_buffer_free(all);
    rg_free(rg);
    return out;
}

static int live_sim_buffers(void) {
    return (int)(test_sim_live_buffers(g_sim0) + test_sim_live_buffers(g_sim1) + test_sim_live_buffers(g_host));
}

/* ---------------------------------------------------------------- random graphs */

struct totals {
    int graphs, nodes, splits, copies, multi_split;
    size_t planned, naive, copy_bytes;
};

static void random_one(int gi, uint64_t * rng, struct totals * tot) {
    uint64_t seed = 5000 + (uint64_t)gi;
    int n_ops = (int)test_rand_range(rng, 5, 80);
    size_t ref_size;
    uint8_t * ref = reference(seed, n_ops, &ref_size);

    /* a random set of devices (the CPU always last) and max sizes */
    loom_backend_t backends[3];
    loom_backend_buffer_type_t places[3];
    int n = 0, pick = (int)test_rand_range(rng, 0, 3);
    if (pick != 1) { backends[n] = b_sim0; places[n++] = loom_backend_dev_buffer_type(g_sim0); }
    if (pick != 0) { backends[n] = b_sim1; places[n++] = loom_backend_dev_buffer_type(g_sim1); }
    backends[n] = b_cpu;
    places[n++] = g_cpu_buft;
    loom_sim_set_max_buffer_size(g_sim0, test_rand_uniform(rng) < 0.5 ? 0 : (size_t)test_rand_range(rng, 4096 + 256, 16384));
    loom_sim_set_max_buffer_size(g_sim1, test_rand_uniform(rng) < 0.5 ? 0 : (size_t)test_rand_range(rng, 4096 + 256, 16384));

    struct rgraph * rg = rg_build(seed, n_ops, places, n, test_rand_u64(rng) | 1);
    CHECK(rg_alloc_weights(rg, seed) == LOOM_OK, "weights");
    loom_backend_sched_t s = loom_backend_sched_new(backends, NULL, n, 2048);
    if (test_rand_uniform(rng) < 0.3) { /* pin a random compute node to a random backend */
        struct loom_tensor * node = rg->graph->nodes[test_rand_range(rng, 0, rg->graph->n_nodes - 1)];
        loom_backend_sched_set_tensor_backend(s, node, backends[test_rand_range(rng, 0, n - 1)]);
    }
    enum loom_status st = loom_backend_sched_alloc_graph(s, rg->graph);
    CHECK(st == LOOM_OK, "graph %d (seed %llu): alloc: %s", gi, (unsigned long long)seed, loom_status_str(st));
    for (int rep = 0; rep < 2 && st == LOOM_OK; rep++) {
        rg_set_inputs(rg, seed); /* inputs are consumed: their memory is reused once read */
        st = loom_backend_sched_graph_compute(s, rg->graph);
        CHECK(st == LOOM_OK, "graph %d: compute %d: %s", gi, rep, loom_status_str(st));
        size_t size;
        uint8_t * out = rg_read_outputs(rg, &size);
        CHECK(size == ref_size && memcmp(out, ref, size) == 0, "graph %d (seed %llu, %d splits) compute %d: differs from CPU-only", gi,
              (unsigned long long)seed, loom_backend_sched_get_n_splits(s), rep);
        free(out);
    }
    for (int b = 0; b < n; b++) {
        size_t planned = loom_backend_sched_get_buffer_size(s, backends[b]), naive = loom_backend_sched_get_naive_size(s, backends[b]);
        CHECK(planned <= naive, "graph %d on %s: planned %zu > naive %zu", gi, loom_backend_name(backends[b]), planned, naive);
        tot->planned += planned;
        tot->naive += naive;
    }
    tot->graphs++;
    tot->nodes += rg->graph->n_nodes;
    tot->splits += loom_backend_sched_get_n_splits(s);
    tot->multi_split += loom_backend_sched_get_n_splits(s) > 1;
    tot->copies += loom_backend_sched_get_n_copies(s);
    tot->copy_bytes += loom_backend_sched_get_copy_bytes(s);
    loom_backend_sched_free(s);
    rg_free(rg);
    free(ref);
    CHECK(live_sim_buffers() == 0, "graph %d: %d buffers leaked", gi, live_sim_buffers());
}

static void test_random_graphs(int n_graphs) {
    uint64_t rng = 777;
    struct totals tot = {0};
    for (int gi = 0; gi < n_graphs; gi++) random_one(gi, &rng, &tot);
    fprintf(stderr, "random graphs: %d graphs, %d nodes, %d splits (%d graphs split), %d copies (%zu bytes); "
            "planned %zu vs naive %zu bytes\n", tot.graphs, tot.nodes, tot.splits, tot.multi_split, tot.copies, tot.copy_bytes, tot.planned, tot.naive);
    CHECK(tot.multi_split > n_graphs / 2, "most graphs were split over several devices (%d)", tot.multi_split);
    CHECK(tot.copies > 0, "copies happened");
}

/* ---------------------------------------------------------------- non-contiguous views across devices */

struct nc_graph {
    struct loom_context * ctx;
    struct loom_cgraph * g;
    struct loom_tensor * x, * y, * out[4];
};

static struct nc_graph nc_build(void) {
    struct nc_graph r;
    r.ctx = new_ctx(64);
    r.x = loom_new_tensor_2d(r.ctx, LOOM_TYPE_F32, 8, 6);
    loom_set_input(r.x);
    r.y = loom_scale(r.ctx, r.x, 1.5f);                                              /* [8, 6] */
    struct loom_tensor * t = loom_transpose(r.ctx, r.y);                             /* [6, 8], nb0 > nb1 */
    struct loom_tensor * v = loom_view_2d(r.ctx, r.y, 8, 3, 2 * r.y->nb[1], r.y->nb[1]); /* odd columns */
    struct loom_tensor * h = loom_view_2d(r.ctx, r.y, 4, 6, r.y->nb[1], 4 * sizeof(float)); /* upper halves */
    r.out[0] = loom_mul_mat(r.ctx, t, t);  /* [8, 8] */
    r.out[1] = loom_mul_mat(r.ctx, v, v);  /* [3, 3] */
    r.out[2] = loom_cont(r.ctx, t);        /* [6, 8] */
    r.out[3] = loom_cont(r.ctx, h);        /* [4, 6] */
    r.g = loom_new_graph_custom(r.ctx, 64);
    for (int i = 0; i < 4; i++) {
        loom_set_output(r.out[i]);
        loom_build_forward_expand(r.g, r.out[i]);
    }
    return r;
}

static void nc_read(struct nc_graph * r, float * buf) {
    for (int i = 0; i < 4; i++) {
        size_t n = loom_nbytes(r->out[i]);
        CHECK(loom_backend_tensor_get(r->out[i], buf, 0, n) == LOOM_OK, "read");
        buf += n / sizeof(float);
    }
}

static void test_noncontiguous_views(void) {
    float xv[48], ref[64 + 9 + 48 + 24], got[64 + 9 + 48 + 24];
    for (int i = 0; i < 48; i++) xv[i] = (float)(i * 7 % 11) - 5.0f;

    struct nc_graph r = nc_build();
    loom_backend_sched_t s = loom_backend_sched_new(&b_cpu, NULL, 1, 64);
    CHECK(loom_backend_sched_alloc_graph(s, r.g) == LOOM_OK, "cpu alloc");
    loom_backend_tensor_set(r.x, xv, 0, sizeof xv);
    CHECK(loom_backend_sched_graph_compute(s, r.g) == LOOM_OK, "cpu compute");
    nc_read(&r, ref);
    loom_backend_sched_free(s);
    loom_free(r.ctx);

    r = nc_build();
    loom_backend_t bs[3] = {b_sim0, b_sim1, b_cpu};
    s = loom_backend_sched_new(bs, NULL, 3, 64);
    loom_backend_sched_set_tensor_backend(s, r.y, b_cpu);
    loom_backend_sched_set_tensor_backend(s, r.out[0], b_sim0);
    loom_backend_sched_set_tensor_backend(s, r.out[1], b_sim1);
    loom_backend_sched_set_tensor_backend(s, r.out[2], b_sim0);
    loom_backend_sched_set_tensor_backend(s, r.out[3], b_sim1);
    CHECK(loom_backend_sched_alloc_graph(s, r.g) == LOOM_OK, "mixed alloc");
    CHECK(loom_backend_sched_get_tensor_backend(s, r.out[0]) == b_sim0, "pin kept");
    CHECK(loom_backend_sched_get_n_splits(s) >= 3, "splits: %d", loom_backend_sched_get_n_splits(s));
    /* transposed view (read by 2 nodes on sim0: one copy), odd columns and upper halves on sim1 */
    CHECK(loom_backend_sched_get_n_copies(s) >= 3, "copies: %d", loom_backend_sched_get_n_copies(s));
    loom_backend_tensor_set(r.x, xv, 0, sizeof xv);
    CHECK(loom_backend_sched_graph_compute(s, r.g) == LOOM_OK, "mixed compute");
    nc_read(&r, got);
    CHECK(memcmp(ref, got, sizeof ref) == 0, "strided and transposed views across devices give the CPU result");
    loom_backend_sched_free(s);
    loom_free(r.ctx);
    CHECK(live_sim_buffers() == 0, "nothing leaked");
}

/* ---------------------------------------------------------------- context-allocated host data */

/* A weight whose data lives in a context (host memory, no buffer): read in place by a host backend,
 * uploaded to a discrete one. */
static void test_context_data(void) {
    struct loom_init_params hp = {.mem_size = 4 * loom_tensor_overhead() + 16 * 8 * 4 + 256, .no_alloc = false};
    struct loom_context * hctx = loom_init(hp);
    struct loom_tensor * w = loom_new_tensor_2d(hctx, LOOM_TYPE_F32, 16, 8);
    for (int i = 0; i < 128; i++) ((float *)w->data)[i] = (float)(i % 9) * 0.25f - 1.0f;
    struct loom_context * ctx = new_ctx(32);
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 16, 4);
    loom_set_input(x);
    struct loom_tensor * h0 = loom_mul_mat(ctx, w, x), * h1 = loom_mul_mat(ctx, w, x);
    loom_set_output(h0);
    loom_set_output(h1);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 32);
    loom_build_forward_expand(g, h0);
    loom_build_forward_expand(g, h1);
    loom_backend_t bs[2] = {b_sim0, b_cpu};
    loom_backend_sched_t s = loom_backend_sched_new(bs, NULL, 2, 32);
    loom_backend_sched_set_tensor_backend(s, h0, b_sim0);
    loom_backend_sched_set_tensor_backend(s, h1, b_cpu);
    CHECK(loom_backend_sched_alloc_graph(s, g) == LOOM_OK, "alloc");
    CHECK(loom_backend_sched_get_n_copies(s) >= 1, "uploaded to sim0");
    float xv[64], r0[32], r1[32];
    for (int i = 0; i < 64; i++) xv[i] = (float)(i % 5) - 2.0f;
    loom_backend_tensor_set(x, xv, 0, sizeof xv);
    CHECK(loom_backend_sched_graph_compute(s, g) == LOOM_OK, "compute");
    loom_backend_tensor_get(h0, r0, 0, sizeof r0);
    loom_backend_tensor_get(h1, r1, 0, sizeof r1);
    CHECK(memcmp(r0, r1, sizeof r0) == 0, "same product on sim0 (uploaded) and the CPU (in place)");
    double want = 0;
    for (int k = 0; k < 16; k++) want += (double)((float *)w->data)[16 * 2 + k] * xv[16 * 3 + k];
    CHECK(fabs(r1[3 * 8 + 2] - want) < 1e-4, "value %f vs %f", r1[3 * 8 + 2], want);
    loom_backend_sched_free(s);
    loom_free(ctx);
    loom_free(hctx);
}

/* ---------------------------------------------------------------- assignment rules */

struct asg {
    struct loom_tensor * ids, * x, * h, * a, * g, * o;
    struct loom_cgraph * graph;
};

static struct asg asg_build(struct loom_context * ctx, struct loom_tensor * w0, struct loom_tensor * emb) {
    struct asg r;
    r.ids = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, 4);
    loom_set_input(r.ids);
    r.x = loom_get_rows(ctx, emb, r.ids); /* sim1 has the weight but cannot: the next that can */
    r.h = loom_mul_mat(ctx, w0, r.x);     /* sim0 (weight) */
    r.a = loom_silu(ctx, r.h);            /* spreads down from sim0 */
    r.g = loom_gelu(ctx, r.a);            /* sim0 refuses GELU */
    r.o = loom_soft_max(ctx, r.g);
    loom_set_output(r.o);
    r.graph = loom_new_graph_custom(ctx, 64);
    loom_build_forward_expand(r.graph, r.o);
    return r;
}

static void test_assignment(void) {
    struct loom_context * wctx0 = new_ctx(8), * wctx1 = new_ctx(8), * ctx = new_ctx(128);
    struct loom_tensor * w0 = loom_new_tensor_2d(wctx0, LOOM_TYPE_F32, 16, 16); /* on sim0 */
    struct loom_tensor * emb = loom_new_tensor_2d(wctx1, LOOM_TYPE_F32, 16, 10); /* on sim1, which refuses GET_ROWS */
    loom_set_name(w0, "w0");
    loom_set_name(emb, "emb");
    loom_backend_buffer_t wb0 = loom_backend_alloc_ctx_tensors_from_buft(wctx0, loom_backend_dev_buffer_type(g_sim0), NULL);
    loom_backend_buffer_t wb1 = loom_backend_alloc_ctx_tensors_from_buft(wctx1, loom_backend_dev_buffer_type(g_sim1), NULL);
    loom_backend_buffer_set_usage(wb0, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    loom_backend_buffer_set_usage(wb1, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    rg_fill(1, w0, RG_IN_F32, 0);
    rg_fill(2, emb, RG_IN_F32, 0);

    /* a graph allocated by a scheduler points into its buffers until the next alloc: each
     * scheduler below gets its own copy of the graph */
    struct asg a1 = asg_build(ctx, w0, emb), a2 = asg_build(ctx, w0, emb), a3 = asg_build(ctx, w0, emb);
    loom_backend_t bs[3] = {b_sim0, b_sim1, b_cpu};
    g_log[0] = 0;
    loom_log_set(capture_log, NULL);
    setenv("LOOM_SCHED_DEBUG", "1", 1);
    loom_backend_sched_t sd = loom_backend_sched_new(bs, NULL, 3, 64);
    unsetenv("LOOM_SCHED_DEBUG");
    CHECK(loom_backend_sched_alloc_graph(sd, a1.graph) == LOOM_OK, "alloc (debug)");
    loom_log_set(NULL, NULL);
    CHECK(strstr(g_log, "split 0 on") && strstr(g_log, "MUL_MAT") && strstr(g_log, "copy '"),
          "debug log shows splits, nodes, copies:\n%s", g_log);

    loom_backend_sched_t s = loom_backend_sched_new(bs, NULL, 3, 64);
    CHECK(loom_backend_sched_alloc_graph(s, a2.graph) == LOOM_OK, "alloc");
    /* sim0 (the weight w0's device, spreading up and down): GET_ROWS (emb's device sim1 refuses it),
     * MUL_MAT, SILU; sim1: GELU (sim0 refuses it); sim0: SOFT_MAX. Three splits; copied in: emb to
     * sim0, the SILU to sim1, the GELU back to sim0 */
    CHECK(loom_backend_sched_get_n_splits(s) == 3 && loom_backend_sched_get_n_copies(s) == 3, "splits %d, copies %d",
          loom_backend_sched_get_n_splits(s), loom_backend_sched_get_n_copies(s));
    CHECK(loom_backend_sched_get_n_splits(sd) == loom_backend_sched_get_n_splits(s) &&
          loom_backend_sched_get_n_copies(sd) == loom_backend_sched_get_n_copies(s), "debug: the same splits and copies");
    CHECK(loom_backend_sched_get_tensor_backend(s, a2.h) == b_sim0, "weight pulls its consumer");
    CHECK(loom_backend_sched_get_tensor_backend(s, a2.a) == b_sim0, "assignment spreads down");
    CHECK(loom_backend_sched_get_tensor_backend(s, a2.x) != b_sim1, "unsupported op falls back");
    CHECK(loom_backend_sched_get_tensor_backend(s, a2.g) != b_sim0, "unsupported op falls back (gelu)");
    loom_backend_t xb = loom_backend_sched_get_tensor_backend(s, a2.x);
    CHECK(a2.ids->buffer && loom_backend_buffer_get_type(a2.ids->buffer) == loom_backend_get_default_buffer_type(xb),
          "the input lives where its first consumer runs");
    int32_t idv[4] = {3, 0, 9, 3};
    loom_backend_tensor_set(a2.ids, idv, 0, sizeof idv);
    CHECK(loom_backend_sched_graph_compute(s, a2.graph) == LOOM_OK, "compute");
    float got[64], ref[64];
    loom_backend_tensor_get(a2.o, got, 0, sizeof got);

    /* the same graph on the CPU alone (weights copied there) */
    loom_backend_sched_t sc = loom_backend_sched_new(&b_cpu, NULL, 1, 64);
    CHECK(loom_backend_sched_alloc_graph(sc, a3.graph) == LOOM_OK, "cpu alloc");
    CHECK(loom_backend_sched_get_n_copies(sc) == 2, "both weights copied to the CPU: %d", loom_backend_sched_get_n_copies(sc));
    CHECK(loom_backend_sched_get_copy_bytes(sc) == loom_nbytes(w0) + loom_nbytes(emb), "copy bytes");
    loom_backend_tensor_set(a3.ids, idv, 0, sizeof idv);
    CHECK(loom_backend_sched_graph_compute(sc, a3.graph) == LOOM_OK, "cpu compute");
    loom_backend_tensor_get(a3.o, ref, 0, sizeof ref);
    CHECK(memcmp(got, ref, sizeof got) == 0, "same result on the CPU alone");
    loom_backend_sched_free(sc);
    loom_backend_sched_free(sd);
    loom_backend_sched_free(s);
    loom_backend_buffer_free(wb0);
    loom_backend_buffer_free(wb1);
    loom_free(ctx);
    loom_free(wctx0);
    loom_free(wctx1);
}

/* ---------------------------------------------------------------- failures leak nothing */

struct wide {
    struct loom_tensor * x, * out;
    struct loom_cgraph * g;
};

/* Eight 4 KiB products on sim0 (weights there), all computed before eight silus pinned on sim1
 * read them: many live tensors on both devices, so small max sizes need several chunks. */
static struct wide wide_build(struct loom_context * ctx, struct loom_tensor ** w, loom_backend_sched_t s) {
    struct wide r;
    r.x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 32);
    loom_set_input(r.x);
    r.g = loom_new_graph_custom(ctx, 256);
    struct loom_tensor * y[8];
    for (int i = 0; i < 8; i++) {
        y[i] = loom_mul_mat(ctx, w[i], r.x);
        loom_build_forward_expand(r.g, y[i]);
    }
    struct loom_tensor * acc = NULL;
    for (int i = 0; i < 8; i++) {
        struct loom_tensor * z = loom_silu(ctx, y[i]);
        if (s) loom_backend_sched_set_tensor_backend(s, z, b_sim1);
        acc = acc ? loom_add(ctx, acc, z) : z;
    }
    r.out = loom_soft_max(ctx, acc);
    loom_set_output(r.out);
    loom_build_forward_expand(r.g, r.out);
    return r;
}

static void test_failure_injection(void) {
    struct loom_context * wctx = new_ctx(16);
    struct loom_tensor * w[8];
    for (int i = 0; i < 8; i++) w[i] = loom_new_tensor_2d(wctx, LOOM_TYPE_F32, 32, 32);
    loom_backend_buffer_t wb = loom_backend_alloc_ctx_tensors_from_buft(wctx, loom_backend_dev_buffer_type(g_sim0), NULL);
    loom_backend_buffer_set_usage(wb, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (int i = 0; i < 8; i++) rg_fill(100 + (uint64_t)i, w[i], RG_IN_F32, 0);
    float xv[1024], ref[1024], got[1024];
    for (int i = 0; i < 1024; i++) xv[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;

    struct loom_context * rctx = new_ctx(128);
    loom_backend_sched_t rs = loom_backend_sched_new(&b_cpu, NULL, 1, 256);
    struct wide r = wide_build(rctx, w, NULL);
    CHECK(loom_backend_sched_alloc_graph(rs, r.g) == LOOM_OK, "reference alloc");
    loom_backend_tensor_set(r.x, xv, 0, sizeof xv);
    CHECK(loom_backend_sched_graph_compute(rs, r.g) == LOOM_OK, "reference compute");
    loom_backend_tensor_get(r.out, ref, 0, sizeof ref);
    loom_backend_sched_free(rs);
    loom_free(rctx);

    loom_sim_set_max_buffer_size(g_sim0, 4096 + 1024); /* one product per chunk: failures mid-plan */
    loom_sim_set_max_buffer_size(g_sim1, 4096 + 1024);
    int weight_buffers = live_sim_buffers(), failures_seen = 0, needed = 0;
    for (int k = 1; k <= 20; k++) {
        loom_backend_t bs[3] = {b_sim0, b_sim1, b_cpu};
        loom_backend_sched_t s = loom_backend_sched_new(bs, NULL, 3, 256);
        struct loom_context * ctx = new_ctx(128);
        struct wide t = wide_build(ctx, w, s);
        loom_sim_reset_stats(g_sim0);
        loom_sim_reset_stats(g_sim1);
        loom_sim_set_fail_alloc(g_sim0, (uint64_t)k); /* sim0's k-th compute buffer fails, or sim1's (k - 9)-th */
        loom_sim_set_fail_alloc(g_sim1, k > 9 ? (uint64_t)k - 9 : 0);
        loom_log_set(capture_log, NULL);
        enum loom_status st = loom_backend_sched_alloc_graph(s, t.g);
        loom_log_set(NULL, NULL);
        if (k == 20) needed = (int)(test_sim_alloc_calls(g_sim0) + test_sim_alloc_calls(g_sim1));
        if (st != LOOM_OK) {
            failures_seen++;
            CHECK(st == LOOM_ERR_OOM, "k=%d: %s", k, loom_status_str(st));
            CHECK(live_sim_buffers() == weight_buffers, "k=%d: %d compute buffers leaked", k, live_sim_buffers() - weight_buffers);
            for (int i = 0; i < t.g->n_nodes; i++) CHECK(!t.g->nodes[i]->data, "k=%d: '%s' left placed", k, t.g->nodes[i]->name);
        }
        loom_sim_set_fail_alloc(g_sim0, 0);
        loom_sim_set_fail_alloc(g_sim1, 0);
        CHECK(loom_backend_sched_alloc_graph(s, t.g) == LOOM_OK, "k=%d: recovers", k);
        CHECK(loom_backend_sched_get_n_splits(s) == 3, "k=%d: sim0, sim1, cpu splits: %d", k, loom_backend_sched_get_n_splits(s));
        loom_backend_tensor_set(t.x, xv, 0, sizeof xv);
        CHECK(loom_backend_sched_graph_compute(s, t.g) == LOOM_OK, "k=%d: compute", k);
        loom_backend_tensor_get(t.out, got, 0, sizeof got);
        CHECK(memcmp(got, ref, sizeof got) == 0, "k=%d: result after recovery", k);
        loom_backend_sched_free(s);
        loom_free(ctx);
        CHECK(live_sim_buffers() == weight_buffers, "k=%d: freed", k);
    }
    loom_sim_set_max_buffer_size(g_sim0, 0);
    loom_sim_set_max_buffer_size(g_sim1, 0);
    CHECK(failures_seen >= 10, "injected failures hit the scheduler mid-plan (%d; %d buffers needed)", failures_seen, needed);
    loom_backend_buffer_free(wb);
    loom_free(wctx);
    CHECK(live_sim_buffers() == 0, "nothing leaked");
}

/* ---------------------------------------------------------------- lifecycle */

static struct loom_tensor * lc_build(struct loom_context * ctx, struct loom_cgraph * g, struct loom_tensor * w, int64_t n, bool variant,
                                     struct loom_tensor ** in) {
    *in = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 16, n);
    loom_set_input(*in);
    struct loom_tensor * h = loom_mul_mat(ctx, w, *in);
    h = variant ? loom_gelu(ctx, h) : loom_silu(ctx, h);
    struct loom_tensor * o = loom_soft_max(ctx, loom_mul_mat(ctx, h, h));
    loom_set_output(o);
    loom_build_forward_expand(g, o);
    return o;
}

/* Expected output of lc_build on the CPU alone, from a separate graph. */
static void lc_expect(struct loom_tensor * w_cpu, int64_t n, bool variant, const float * in, float * out) {
    struct loom_context * ctx = new_ctx(64);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 64);
    struct loom_tensor * x;
    struct loom_tensor * o = lc_build(ctx, g, w_cpu, n, variant, &x);
    loom_backend_sched_t s = loom_backend_sched_new(&b_cpu, NULL, 1, 64);
    CHECK(loom_backend_sched_alloc_graph(s, g) == LOOM_OK, "expect alloc");
    loom_backend_tensor_set(x, in, 0, loom_nbytes(x));
    CHECK(loom_backend_sched_graph_compute(s, g) == LOOM_OK, "expect compute");
    loom_backend_tensor_get(o, out, 0, loom_nbytes(o));
    loom_backend_sched_free(s);
    loom_free(ctx);
}

static void test_lifecycle(void) {
    struct loom_context * wctx = new_ctx(4), * wctx_cpu = new_ctx(4);
    struct loom_tensor * w = loom_new_tensor_2d(wctx, LOOM_TYPE_F32, 16, 16);
    struct loom_tensor * wc = loom_new_tensor_2d(wctx_cpu, LOOM_TYPE_F32, 16, 16);
    loom_backend_buffer_t wb = loom_backend_alloc_ctx_tensors_from_buft(wctx, loom_backend_dev_buffer_type(g_sim0), NULL);
    loom_backend_buffer_t wbc = loom_backend_alloc_ctx_tensors_from_buft(wctx_cpu, g_cpu_buft, NULL);
    rg_fill(5, w, RG_IN_F32, 0);
    rg_fill(5, wc, RG_IN_F32, 0);

    loom_backend_t bs[3] = {b_sim0, b_sim1, b_cpu};
    loom_backend_sched_t s = loom_backend_sched_new(bs, NULL, 3, 64);

    struct loom_context * c1 = new_ctx(64), * c2 = new_ctx(64);
    struct loom_cgraph * g1 = loom_new_graph_custom(c1, 64), * g2 = loom_new_graph_custom(c2, 64);
    struct loom_tensor * x1, * x2;
    struct loom_tensor * o1 = lc_build(c1, g1, w, 5, false, &x1);
    struct loom_tensor * o2 = lc_build(c2, g2, w, 9, true, &x2);
    float in[16 * 9], got[81], want[81];
    struct loom_sim_stats st0;
    uint64_t key1 = 0; /* the launch key of g1's split on sim0 */
    loom_sim_reset_stats(g_sim0);
    for (int rep = 0; rep < 3; rep++) { /* the same graph, new inputs each time: planned once */
        for (int i = 0; i < 16 * 9; i++) in[i] = (float)((i * (rep + 3)) % 13) / 13.0f - 0.5f;
        if (rep == 0) CHECK(loom_backend_sched_alloc_graph(s, g1) == LOOM_OK, "alloc g1");
        loom_backend_tensor_set(x1, in, 0, loom_nbytes(x1));
        CHECK(loom_backend_sched_graph_compute(s, g1) == LOOM_OK, "compute g1 #%d", rep);
        loom_backend_tensor_get(o1, got, 0, loom_nbytes(o1));
        lc_expect(wc, 5, false, in, want);
        CHECK(memcmp(got, want, loom_nbytes(o1)) == 0, "g1 #%d", rep);
        loom_sim_get_stats(g_sim0, &st0);
        if (rep == 0) key1 = st0.last_launch_key;
    }
    CHECK(loom_backend_sched_get_n_plans(s) == 1, "the same graph is planned once (%lld plans)", (long long)loom_backend_sched_get_n_plans(s));
    /* allocated before its first compute, so every compute knew the addresses: one key, repeated */
    CHECK(key1 != 0 && st0.last_launch_key == key1 && st0.n_keyed_repeats == 2, "g1's split on sim0: launch key %llx, then %llx, %llu repeats",
          (unsigned long long)key1, (unsigned long long)st0.last_launch_key, (unsigned long long)st0.n_keyed_repeats);

    /* a different graph: re-planned, and then g1 again: re-planned */
    loom_backend_tensor_set(x2, in, 0, loom_nbytes(x2));
    CHECK(loom_backend_sched_alloc_graph(s, g2) == LOOM_OK, "alloc g2");
    loom_backend_tensor_set(x2, in, 0, loom_nbytes(x2));
    CHECK(loom_backend_sched_graph_compute(s, g2) == LOOM_OK, "compute g2");
    loom_backend_tensor_get(o2, got, 0, loom_nbytes(o2));
    lc_expect(wc, 9, true, in, want);
    CHECK(memcmp(got, want, loom_nbytes(o2)) == 0, "g2");
    CHECK(loom_backend_sched_get_n_plans(s) == 2, "a different graph re-plans (%lld plans)", (long long)loom_backend_sched_get_n_plans(s));
    CHECK(loom_backend_sched_graph_compute(s, g1) == LOOM_OK, "compute g1 without alloc: re-plans first");
    CHECK(loom_backend_sched_get_n_plans(s) == 3, "g1 again re-plans (%lld plans)", (long long)loom_backend_sched_get_n_plans(s));
    /* allocated in that compute: its addresses were not the signature pass's, so no key */
    loom_sim_get_stats(g_sim0, &st0);
    CHECK(st0.last_launch_key == 0, "g1 allocated by its compute: launch key %llx, not 0", (unsigned long long)st0.last_launch_key);
    loom_backend_tensor_set(x1, in, 0, loom_nbytes(x1));
    CHECK(loom_backend_sched_graph_compute(s, g1) == LOOM_OK, "compute g1");
    loom_backend_tensor_get(o1, got, 0, loom_nbytes(o1));
    lc_expect(wc, 5, false, in, want);
    CHECK(memcmp(got, want, loom_nbytes(o1)) == 0, "g1 after g2");
    /* the same graph after another allocation: a new key (the copies may have moved) */
    loom_sim_get_stats(g_sim0, &st0);
    CHECK(st0.last_launch_key != 0 && st0.last_launch_key != key1, "g1 after g2: launch key %llx (before: %llx)",
          (unsigned long long)st0.last_launch_key, (unsigned long long)key1);

    /* the same cgraph object rebuilt with another shape: detected by the signature */
    loom_graph_clear(g1);
    o1 = lc_build(c1, g1, w, 7, true, &x1);
    loom_backend_tensor_set(x1, in, 0, 0); /* no memory yet: rejected, nothing written */
    CHECK(loom_backend_sched_graph_compute(s, g1) == LOOM_OK, "compute rebuilt g1");
    CHECK(loom_backend_sched_get_n_plans(s) == 4, "rebuilt graph in the same object re-plans (%lld plans)", (long long)loom_backend_sched_get_n_plans(s));
    loom_backend_tensor_set(x1, in, 0, loom_nbytes(x1));
    CHECK(loom_backend_sched_graph_compute(s, g1) == LOOM_OK, "compute rebuilt g1 with inputs");
    loom_backend_tensor_get(o1, got, 0, loom_nbytes(o1));
    lc_expect(wc, 7, true, in, want);
    CHECK(memcmp(got, want, loom_nbytes(o1)) == 0, "rebuilt g1");

    /* pins change the plan; reset forgets them */
    struct loom_tensor * mm = o1->src[0]; /* the second product: sim0 by spreading, sim1 when pinned */
    CHECK(loom_backend_sched_get_tensor_backend(s, mm) == b_sim0, "product on sim0");
    loom_backend_sched_set_tensor_backend(s, mm, b_sim1);
    CHECK(loom_backend_sched_alloc_graph(s, g1) == LOOM_OK && loom_backend_sched_get_n_plans(s) == 5, "a new pin re-plans");
    CHECK(loom_backend_sched_get_tensor_backend(s, mm) == b_sim1, "pinned");
    loom_backend_sched_reset(s);
    CHECK(loom_backend_sched_alloc_graph(s, g1) == LOOM_OK && loom_backend_sched_get_n_plans(s) == 6, "reset re-plans");
    CHECK(loom_backend_sched_get_tensor_backend(s, mm) == b_sim0, "pin forgotten");
    loom_log_set(NULL, NULL);

    loom_backend_sched_free(s);
    loom_free(c1);
    loom_free(c2);
    loom_backend_buffer_free(wb);
    loom_backend_buffer_free(wbc);
    loom_free(wctx);
    loom_free(wctx_cpu);
    CHECK(live_sim_buffers() == 0, "nothing leaked");
}

int main(void) {
    setenv("LOOM_ALLOC_CHECK", "1", 1); /* every allocation below is verified by the overlap checker */
    struct loom_sim_params p0 = loom_sim_default_params(), p1 = loom_sim_default_params(), ph = loom_sim_default_params();
    p0.alignment = 256;
    p0.events = true;
    p0.unsupported_ops[LOOM_OP_GELU] = true;
    p1.alignment = 128;
    p1.alloc_extra = 96;
    p1.unsupported_ops[LOOM_OP_SOFT_MAX] = p1.unsupported_ops[LOOM_OP_GET_ROWS] = true;
    ph.alignment = 64;
    ph.host_memory = true;
    g_sim0 = test_sim_new("tsim0", p0);
    g_sim1 = test_sim_new("tsim1", p1);
    g_host = test_sim_new("tcpu", ph);
    b_sim0 = loom_backend_dev_init(g_sim0, NULL);
    b_sim1 = loom_backend_dev_init(g_sim1, NULL);
    b_ref = loom_backend_dev_init(g_host, NULL);
    b_cpu = loom_backend_cpu_init();
    g_cpu_buft = loom_backend_cpu_buffer_type();

    test_assignment();
    test_context_data();
    test_noncontiguous_views();
    test_lifecycle();
    test_failure_injection();
    test_random_graphs(300);

    loom_backend_free(b_sim0);
    loom_backend_free(b_sim1);
    loom_backend_free(b_cpu);
    loom_backend_free(b_ref);
    loom_sim_device_free(g_sim0);
    loom_sim_device_free(g_sim1);
    loom_sim_device_free(g_host);
    return test_finish("test-sched");
}
