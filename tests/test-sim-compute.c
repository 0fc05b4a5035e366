/* test-sim-compute.c -- graph compute on the sim: the graph runs on host addresses and every tensor's
 * address and buffer are back as they were afterwards (after success and after errors); tensors the
 * device cannot read (CPU memory without host access, another sim's memory) and ops it claims not to
 * support are refused before anything runs; and, for the ops the CPU kernels implement, the sim's
 * results equal the CPU backend's bit for bit (ops the kernels do not implement yet are reported as
 * skipped, visibly). */
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_n_errors;

static void quiet_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) g_n_errors++;
    if (getenv("LOOM_DEBUG")) fprintf(stderr, "[log] %s\n", text);
}

/* ---------------------------------------------------------------- addresses are restored */

enum { MAX_SNAP = 64 };
struct snapshot {
    int n;
    struct loom_tensor * t[MAX_SNAP];
    void * data[MAX_SNAP];
    loom_backend_buffer_t buffer[MAX_SNAP];
};

static void snap(struct snapshot * s, struct loom_context ** ctxs, int n_ctx) {
    s->n = 0;
    for (int c = 0; c < n_ctx; c++) {
        for (struct loom_tensor * t = loom_get_first_tensor(ctxs[c]); t && s->n < MAX_SNAP; t = loom_get_next_tensor(ctxs[c], t)) {
            s->t[s->n] = t;
            s->data[s->n] = t->data;
            s->buffer[s->n++] = t->buffer;
        }
    }
}

static bool unchanged(const struct snapshot * s) {
    for (int i = 0; i < s->n; i++) {
        if (s->t[i]->data != s->data[i] || s->t[i]->buffer != s->buffer[i]) return false;
    }
    return true;
}

/* A graph of views only (which any kernel set runs) over a base in 'buft', plus a view made in
 * another context after allocation, so that a view's base reaches the graph only through it. */
static void test_view_graph(const char * label, loom_backend_dev_t dev, loom_backend_buffer_type_t buft, enum loom_status want) {
    struct loom_context * ca = test_meta_ctx(4, 64), * cg = test_meta_ctx(16, 64);
    struct loom_tensor * a = loom_new_tensor_3d(ca, LOOM_TYPE_F32, 8, 4, 2);
    loom_set_name(a, "a");
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ca, buft, NULL);
    CHECK(buf != NULL, "%s: alloc", label);
    if (!buf) return;
    struct loom_tensor * r = loom_reshape_2d(cg, a, 32, 2);
    struct loom_tensor * p = loom_permute(cg, r, 1, 0, 2, 3);
    struct loom_tensor * v = loom_view_1d(cg, a, 16, 16 * sizeof(float));
    struct loom_tensor * t = loom_transpose(cg, v);
    struct loom_cgraph * g = loom_new_graph_custom(cg, 64);
    loom_build_forward_expand(g, p);
    loom_build_forward_expand(g, t);
    struct loom_context * ctxs[2] = {ca, cg};
    struct snapshot s;
    snap(&s, ctxs, 2);
    loom_backend_t be = loom_backend_dev_init(dev, NULL);
    struct loom_sim_stats st0 = {0}, st1 = {0};
    if (loom_sim_device_is_sim(dev)) loom_sim_get_stats(dev, &st0);
    g_n_errors = 0;
    enum loom_status st = loom_backend_graph_compute(be, g);
    CHECK(st == want, "%s: view graph: %s, expected %s", label, loom_status_str(st), loom_status_str(want));
    CHECK(want == LOOM_OK || g_n_errors >= 1, "%s: the refusal is logged", label);
    CHECK(unchanged(&s), "%s: addresses or buffers not restored", label);
    if (loom_sim_device_is_sim(dev)) {
        loom_sim_get_stats(dev, &st1);
        CHECK(st1.n_graph_computes - st0.n_graph_computes == (want == LOOM_OK ? 1u : 0u), "%s: kernels reached %llu times",
              label, (unsigned long long)(st1.n_graph_computes - st0.n_graph_computes));
    }
    loom_backend_free(be);
    loom_backend_buffer_free(buf);
    loom_free(cg);
    loom_free(ca);
}

/* A graph that mixes tensors of two devices is refused, naming the stranger, and nothing changes. */
static void test_foreign_tensor(loom_backend_dev_t sim, loom_backend_buffer_type_t other, const char * label) {
    struct loom_context * ca = test_meta_ctx(4, 64), * cb = test_meta_ctx(4, 64), * cg = test_meta_ctx(8, 64);
    struct loom_tensor * a = loom_new_tensor_1d(ca, LOOM_TYPE_F32, 16);
    struct loom_tensor * b = loom_new_tensor_1d(cb, LOOM_TYPE_F32, 16);
    loom_backend_buffer_t ba = loom_backend_alloc_ctx_tensors_from_buft(ca, loom_backend_dev_buffer_type(sim), NULL);
    loom_backend_buffer_t bb = loom_backend_alloc_ctx_tensors_from_buft(cb, other, NULL);
    struct loom_tensor * n = loom_add(cg, a, b);
    loom_backend_buffer_t bg = loom_backend_alloc_ctx_tensors_from_buft(cg, loom_backend_dev_buffer_type(sim), NULL);
    struct loom_cgraph * g = loom_new_graph_custom(cg, 64);
    loom_build_forward_expand(g, n);
    struct loom_context * ctxs[3] = {ca, cb, cg};
    struct snapshot s;
    snap(&s, ctxs, 3);
    loom_backend_t be = loom_backend_dev_init(sim, NULL);
    g_n_errors = 0;
    CHECK(loom_backend_graph_compute(be, g) == LOOM_ERR_INVALID_ARG && g_n_errors >= 1, "%s: refused", label);
    CHECK(unchanged(&s), "%s: refusal changed tensors", label);
    loom_backend_free(be);
    loom_backend_buffer_free(bg);
    loom_backend_buffer_free(ba);
    loom_backend_buffer_free(bb);
    loom_free(cg);
    loom_free(cb);
    loom_free(ca);
}

/* A view made before its base was allocated, never initialised: refused (it would be read at a
 * NULL address by the CPU), accepted once loom_backend_view_init has run. */
static void test_stale_view(const char * label, loom_backend_dev_t dev, loom_backend_buffer_type_t buft) {
    struct loom_context * ca = test_meta_ctx(2, 64), * cg = test_meta_ctx(8, 64);
    struct loom_tensor * a = loom_new_tensor_2d(ca, LOOM_TYPE_F32, 8, 8);
    struct loom_tensor * v = loom_view_2d(cg, a, 4, 4, a->nb[1], 0);
    struct loom_tensor * t = loom_transpose(cg, v);
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ca, buft, NULL);
    struct loom_cgraph * g = loom_new_graph_custom(cg, 64);
    loom_build_forward_expand(g, t);
    loom_backend_t be = loom_backend_dev_init(dev, NULL);
    g_n_errors = 0;
    CHECK(loom_backend_graph_compute(be, g) == LOOM_ERR_INVALID_ARG && g_n_errors == 1, "%s: an uninitialised view is refused", label);
    CHECK(loom_backend_view_init(v) == LOOM_OK && loom_backend_view_init(t) == LOOM_OK, "%s: view_init", label);
    CHECK(loom_backend_graph_compute(be, g) == LOOM_OK, "%s: accepted once initialised", label);
    loom_backend_free(be);
    loom_backend_buffer_free(buf);
    loom_free(cg);
    loom_free(ca);
}

/* ---------------------------------------------------------------- values equal the CPU's */

struct model {
    struct loom_context * ctx;
    struct loom_tensor * w, * x, * ids, * kv, * out[6];
    int n_out;
    struct loom_cgraph * g;
};

/* A small transformer-like step: matmul with a transposed view, bias add, rms_norm, scale, soft_max,
 * silu, get_rows, and a copy into a view of a cache-like tensor. */
static void build(struct model * m) {
    m->ctx = test_meta_ctx(64, 64);
    struct loom_context * c = m->ctx;
    m->w = loom_new_tensor_2d(c, LOOM_TYPE_F32, 16, 12);
    m->x = loom_new_tensor_2d(c, LOOM_TYPE_F32, 16, 5);
    m->ids = loom_new_tensor_1d(c, LOOM_TYPE_I32, 3);
    m->kv = loom_new_tensor_2d(c, LOOM_TYPE_F32, 12, 8);
    struct loom_tensor * y = loom_mul_mat(c, m->w, m->x);                  /* [12, 5] */
    struct loom_tensor * bias = loom_view_1d(c, m->kv, 12, 0);
    y = loom_add(c, y, bias);
    struct loom_tensor * nrm = loom_scale(c, loom_rms_norm(c, y, 1e-5f), 0.5f);
    struct loom_tensor * sm = loom_soft_max(c, nrm);
    struct loom_tensor * act = loom_silu(c, sm);
    struct loom_tensor * rows = loom_get_rows(c, m->w, m->ids);            /* [16, 3] */
    struct loom_tensor * xt = loom_cont(c, loom_transpose(c, m->x));       /* [5, 16] */
    struct loom_tensor * slot = loom_view_2d(c, m->kv, 12, 5, m->kv->nb[1], 2 * m->kv->nb[1]);
    struct loom_tensor * stored = loom_cpy(c, act, slot);
    m->out[0] = act;
    m->out[1] = rows;
    m->out[2] = xt;
    m->out[3] = stored;
    m->out[4] = m->kv;
    m->n_out = 5;
    m->g = loom_new_graph_custom(c, 64);
    for (int i = 0; i < 4; i++) loom_build_forward_expand(m->g, m->out[i]);
}

static bool cpu_runs_all(const struct model * m) {
    for (int i = 0; i < m->g->n_nodes; i++) {
        if (!loom_cpu_supports_op(m->g->nodes[i])) return false;
    }
    return true;
}

/* Allocates the model on 'buft', sets deterministic inputs, computes on 'be'; outputs into 'res'. */
static enum loom_status run_model(loom_backend_t be, loom_backend_buffer_type_t buft, uint8_t ** res, size_t * sizes) {
    struct model m;
    build(&m);
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(m.ctx, buft, NULL);
    uint64_t rng = 4242;
    struct loom_tensor * in[3] = {m.w, m.x, m.kv};
    for (int i = 0; i < 3; i++) {
        int64_t n = loom_nelements(in[i]);
        float * v = malloc((size_t)n * sizeof(float));
        for (int64_t k = 0; k < n; k++) v[k] = (float)test_rand_normal(&rng);
        loom_backend_tensor_set(in[i], v, 0, (size_t)n * sizeof(float));
        free(v);
    }
    int32_t ids[3] = {11, 0, 5};
    loom_backend_tensor_set(m.ids, ids, 0, sizeof ids);
    enum loom_status st = loom_backend_graph_compute(be, m.g);
    for (int i = 0; i < m.n_out; i++) {
        sizes[i] = loom_nbytes(m.out[i]);
        res[i] = malloc(sizes[i]);
        loom_backend_tensor_get(m.out[i], res[i], 0, sizes[i]);
    }
    loom_backend_buffer_free(buf);
    loom_free(m.ctx);
    return st;
}

static void test_values(void) {
    struct model probe;
    build(&probe);
    bool all = cpu_runs_all(&probe);
    loom_free(probe.ctx);
    if (!all) {
        fprintf(stderr, "test-sim-compute: skipped part: the CPU kernels do not implement these ops yet (value comparison)\n");
        return;
    }
    loom_backend_t cpu = loom_backend_cpu_init();
    loom_backend_dev_t sim = loom_sim_device_new("sim-values", NULL);
    loom_backend_t be = loom_backend_dev_init(sim, NULL);
    loom_backend_cpu_set_n_threads(cpu, 3);
    uint8_t * rc[6], * rs[6];
    size_t nc[6], ns[6];
    enum loom_status a = run_model(cpu, loom_backend_cpu_buffer_type(), rc, nc);
    enum loom_status b = run_model(be, loom_backend_dev_buffer_type(sim), rs, ns);
    CHECK(a == LOOM_OK && b == LOOM_OK, "compute: cpu %s, sim %s", loom_status_str(a), loom_status_str(b));
    for (int i = 0; i < 5; i++) {
        CHECK(nc[i] == ns[i] && memcmp(rc[i], rs[i], nc[i]) == 0, "output %d differs between the CPU and the sim", i);
        free(rc[i]);
        free(rs[i]);
    }
    loom_backend_free(be);
    loom_backend_free(cpu);
    loom_sim_device_free(sim);
}

/* ---------------------------------------------------------------- errors from the kernels */

/* A non-view op: the kernels either run it or refuse it; either way the addresses come back. */
static void test_restore_after_kernels(loom_backend_dev_t sim) {
    struct loom_context * c = test_meta_ctx(8, 64);
    struct loom_tensor * a = loom_new_tensor_1d(c, LOOM_TYPE_F32, 32);
    struct loom_tensor * s = loom_scale(c, loom_view_1d(c, a, 16, 64), 3.0f);
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(c, loom_backend_dev_buffer_type(sim), NULL);
    struct loom_cgraph * g = loom_new_graph_custom(c, 64);
    loom_build_forward_expand(g, s);
    struct snapshot sn;
    snap(&sn, &c, 1);
    loom_backend_t be = loom_backend_dev_init(sim, NULL);
    float v[32];
    for (int i = 0; i < 32; i++) v[i] = (float)i;
    loom_backend_tensor_set(a, v, 0, sizeof v);
    enum loom_status st = loom_backend_graph_compute(be, g);
    bool supported = loom_cpu_supports_op(s);
    CHECK(st == (supported ? LOOM_OK : LOOM_ERR_UNSUPPORTED), "scale: %s", loom_status_str(st));
    CHECK(unchanged(&sn), "addresses restored after the kernels returned %s", loom_status_str(st));
    if (supported) {
        float r[16];
        loom_backend_tensor_get(s, r, 0, sizeof r);
        for (int i = 0; i < 16; i++) CHECK(r[i] == 3.0f * (float)(16 + i), "scale[%d] = %g", i, r[i]);
    }
    loom_backend_free(be);
    loom_backend_buffer_free(buf);
    loom_free(c);
}

int main(void) {
    loom_log_set(quiet_log, NULL);
    loom_backend_dev_t plain = loom_sim_device_new("sim-c0", NULL), other = loom_sim_device_new("sim-c1", NULL);
    struct loom_sim_params p = loom_sim_default_params();
    p.host_access = true;
    p.buffer_from_host_ptr = true;
    loom_backend_dev_t host = loom_sim_device_new("sim-host", &p);
    p = loom_sim_default_params();
    p.unsupported_ops[LOOM_OP_PERMUTE] = true;
    loom_backend_dev_t picky = loom_sim_device_new("sim-picky", &p);

    test_view_graph("sim on its memory", plain, loom_backend_dev_buffer_type(plain), LOOM_OK);
    test_view_graph("sim on CPU memory", plain, loom_backend_cpu_buffer_type(), LOOM_ERR_INVALID_ARG);
    test_view_graph("sim with host access on CPU memory", host, loom_backend_cpu_buffer_type(), LOOM_OK);
    test_view_graph("sim on another sim's memory", plain, loom_backend_dev_buffer_type(other), LOOM_ERR_INVALID_ARG);
    test_view_graph("CPU on sim memory", loom_backend_dev_by_name("CPU"), loom_backend_dev_buffer_type(plain), LOOM_ERR_INVALID_ARG);
    test_view_graph("sim refusing PERMUTE", picky, loom_backend_dev_buffer_type(picky), LOOM_ERR_UNSUPPORTED);
    test_foreign_tensor(plain, loom_backend_dev_buffer_type(other), "sim-c1 tensor in a sim-c0 graph");
    test_foreign_tensor(plain, loom_backend_cpu_buffer_type(), "CPU tensor in a sim-c0 graph");
    test_restore_after_kernels(plain);
    test_stale_view("sim", plain, loom_backend_dev_buffer_type(plain));
    test_stale_view("cpu", loom_backend_dev_by_name("CPU"), loom_backend_cpu_buffer_type());
    test_values();

    /* a graph over wrapped host memory */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t * mem = aligned_alloc(page, 4 * page);
    memset(mem, 0x3C, 4 * page);
    loom_backend_buffer_t wrapped = loom_backend_dev_buffer_from_host_ptr(host, mem + 100, 3 * page, page);
    CHECK(wrapped != NULL, "wrap");
    if (wrapped) {
        struct loom_context * c = test_meta_ctx(8, 64);
        struct loom_tensor * w = loom_new_tensor_2d(c, LOOM_TYPE_F32, 16, 16);
        CHECK(loom_backend_tensor_alloc(wrapped, w, loom_backend_buffer_host_ptr_addr(wrapped, mem + 100)) == LOOM_OK, "place");
        struct loom_tensor * tr = loom_transpose(c, w);
        struct loom_cgraph * g = loom_new_graph_custom(c, 64);
        loom_build_forward_expand(g, tr);
        struct snapshot sn;
        snap(&sn, &c, 1);
        loom_backend_t be = loom_backend_dev_init(host, NULL);
        CHECK(loom_backend_graph_compute(be, g) == LOOM_OK && unchanged(&sn), "graph on wrapped memory");
        loom_backend_free(be);
        loom_free(c);
        loom_backend_buffer_free(wrapped);
    }
    free(mem);

    loom_sim_device_free(plain);
    loom_sim_device_free(other);
    loom_sim_device_free(host);
    loom_sim_device_free(picky);
    loom_log_set(NULL, NULL);
    return test_finish("test-sim-compute");
}
