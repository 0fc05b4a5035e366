/* test-sched-model.c -- a llama graph of stories260K's shape (dim 64, 5 layers, 8 heads / 4 kv heads,
 * ff 172, vocab 512, context 256) through the scheduler: planned vs naive compute memory for a
 * 256-token batch, and a split over two discrete sim devices + the CPU (weights and KV cache per
 * layer on different devices, the cache written through CPY views) giving the CPU-only logits. */
#include "loom-alloc.h"
#include "loom-cpu.h"
#include "test-util.h"

#include <math.h>
#include <string.h>

#define DIM 64
#define N_LAYER 5
#define N_HEAD 8
#define N_KV_HEAD 4
#define HEAD_DIM (DIM / N_HEAD)
#define KV_DIM (HEAD_DIM * N_KV_HEAD)
#define FF 172
#define VOCAB 512
#define N_CTX 256

struct layer {
    struct loom_tensor * attn_norm, * wq, * wk, * wv, * wo, * ffn_norm, * w1, * w2, * w3;
    struct loom_tensor * k_cache, * v_cache; /* F16 [KV_DIM * N_CTX] */
};

struct model {
    struct loom_context * wctx[3];
    loom_backend_buffer_t wbuf[3];
    struct loom_tensor * tok_embd, * output_norm, * output;
    struct layer layers[N_LAYER];
};

static struct loom_tensor * weight(struct model * m, int place, enum loom_type type, int64_t ne0, int64_t ne1, const char * name, int l) {
    struct loom_tensor * t = ne1 ? loom_new_tensor_2d(m->wctx[place], type, ne0, ne1) : loom_new_tensor_1d(m->wctx[place], type, ne0);
    if (l >= 0) loom_format_name(t, "blk.%d.%s", l, name); else loom_set_name(t, name);
    if (strstr(name, "cache") == NULL) loom_set_weight(t);
    return t;
}

static void fill(struct loom_tensor * t, uint64_t seed, float scale) {
    int64_t n = loom_nelements(t);
    size_t es = loom_type_size(t->type);
    uint8_t * buf = malloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) test_store_value(t->type, buf + (size_t)i * es, scale * (float)(test_rand_uniform(&seed) - 0.5));
    CHECK(loom_backend_tensor_set(t, buf, 0, (size_t)n * es) == LOOM_OK, "fill %s", t->name);
    free(buf);
}

/* Layer l's weights and KV cache go to place_of[l]; embeddings and output to place_of[N_LAYER]. */
static void model_init(struct model * m, loom_backend_buffer_type_t * bufts, const int * place_of) {
    memset(m, 0, sizeof *m);
    for (int p = 0; p < 3; p++) {
        struct loom_init_params ip = {.mem_size = 16 * N_LAYER * loom_tensor_overhead(), .no_alloc = true};
        m->wctx[p] = loom_init(ip);
    }
    int io = place_of[N_LAYER];
    m->tok_embd = weight(m, io, LOOM_TYPE_F32, DIM, VOCAB, "token_embd.weight", -1);
    m->output_norm = weight(m, io, LOOM_TYPE_F32, DIM, 0, "output_norm.weight", -1);
    m->output = weight(m, io, LOOM_TYPE_F32, DIM, VOCAB, "output.weight", -1);
    for (int l = 0; l < N_LAYER; l++) {
        struct layer * L = &m->layers[l];
        int p = place_of[l];
        L->attn_norm = weight(m, p, LOOM_TYPE_F32, DIM, 0, "attn_norm.weight", l);
        L->wq = weight(m, p, LOOM_TYPE_F32, DIM, DIM, "attn_q.weight", l);
        L->wk = weight(m, p, LOOM_TYPE_F32, DIM, KV_DIM, "attn_k.weight", l);
        L->wv = weight(m, p, LOOM_TYPE_F32, DIM, KV_DIM, "attn_v.weight", l);
        L->wo = weight(m, p, LOOM_TYPE_F32, DIM, DIM, "attn_output.weight", l);
        L->ffn_norm = weight(m, p, LOOM_TYPE_F32, DIM, 0, "ffn_norm.weight", l);
        L->w1 = weight(m, p, LOOM_TYPE_F32, DIM, FF, "ffn_gate.weight", l);
        L->w2 = weight(m, p, LOOM_TYPE_F32, FF, DIM, "ffn_down.weight", l);
        L->w3 = weight(m, p, LOOM_TYPE_F32, DIM, FF, "ffn_up.weight", l);
        L->k_cache = weight(m, p, LOOM_TYPE_F16, KV_DIM * N_CTX, 0, "k_cache", l);
        L->v_cache = weight(m, p, LOOM_TYPE_F16, KV_DIM * N_CTX, 0, "v_cache", l);
    }
    for (int p = 0; p < 3; p++) {
        if (!loom_get_first_tensor(m->wctx[p])) continue;
        enum loom_status st;
        m->wbuf[p] = loom_backend_alloc_ctx_tensors_from_buft(m->wctx[p], bufts[p], &st);
        CHECK(m->wbuf[p] != NULL, "weights on place %d: %s", p, loom_status_str(st));
        loom_backend_buffer_set_usage(m->wbuf[p], LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    for (int p = 0; p < 3; p++) { /* values depend on the tensor's name only, not on its placement */
        for (struct loom_tensor * t = loom_get_first_tensor(m->wctx[p]); t; t = loom_get_next_tensor(m->wctx[p], t)) {
            uint64_t seed = 1469598103934665603ull;
            for (const char * c = t->name; *c; c++) seed = (seed ^ (uint8_t)*c) * 1099511628211ull;
            if (!strstr(t->name, "cache")) fill(t, seed, strstr(t->name, "norm") ? 2.0f : 0.5f);
        }
    }
}

static void model_free(struct model * m) {
    for (int p = 0; p < 3; p++) {
        loom_backend_buffer_free(m->wbuf[p]);
        loom_free(m->wctx[p]);
    }
}

struct step {
    struct loom_context * ctx;
    struct loom_cgraph * g;
    struct loom_tensor * tokens, * pos, * mask, * logits;
};

static struct loom_tensor * attention(struct step * st, struct layer * L, struct loom_tensor * cur, int64_t n) {
    struct loom_context * ctx = st->ctx;
    struct loom_tensor * q = loom_reshape_3d(ctx, loom_mul_mat(ctx, L->wq, cur), HEAD_DIM, N_HEAD, n);
    struct loom_tensor * k = loom_reshape_3d(ctx, loom_mul_mat(ctx, L->wk, cur), HEAD_DIM, N_KV_HEAD, n);
    struct loom_tensor * v = loom_mul_mat(ctx, L->wv, cur);
    q = loom_rope(ctx, q, st->pos, HEAD_DIM, LOOM_ROPE_NORMAL, 10000.0f, 1.0f);
    k = loom_rope(ctx, k, st->pos, HEAD_DIM, LOOM_ROPE_NORMAL, 10000.0f, 1.0f);
    /* write this step's keys and values into the cache; the reads below come later in the graph */
    loom_build_forward_expand(st->g, loom_cpy(ctx, k, loom_view_1d(ctx, L->k_cache, KV_DIM * n, 0)));
    loom_build_forward_expand(st->g, loom_cpy(ctx, v, loom_view_1d(ctx, L->v_cache, KV_DIM * n, 0)));
    size_t es = loom_type_size(LOOM_TYPE_F16);
    struct loom_tensor * K = loom_view_3d(ctx, L->k_cache, HEAD_DIM, N_KV_HEAD, n, HEAD_DIM * es, KV_DIM * es, 0);
    struct loom_tensor * V = loom_view_3d(ctx, L->v_cache, HEAD_DIM, N_KV_HEAD, n, HEAD_DIM * es, KV_DIM * es, 0);
    struct loom_tensor * kq = loom_mul_mat(ctx, loom_permute(ctx, K, 0, 2, 1, 3), loom_permute(ctx, q, 0, 2, 1, 3)); /* [n, n, heads] */
    kq = loom_soft_max_ext(ctx, kq, st->mask, 1.0f / sqrtf((float)HEAD_DIM));
    struct loom_tensor * vt = loom_cont(ctx, loom_permute(ctx, V, 1, 2, 0, 3));  /* [n, head_dim, kv heads] */
    struct loom_tensor * kqv = loom_mul_mat(ctx, vt, kq);                           /* [head_dim, n, heads] */
    struct loom_tensor * o = loom_cont_2d(ctx, loom_permute(ctx, kqv, 0, 2, 1, 3), DIM, n);
    return loom_mul_mat(ctx, L->wo, o);
}

static struct step step_build(struct model * m, int64_t n) {
    struct step st;
    struct loom_init_params ip = {.mem_size = 64 * N_LAYER * loom_tensor_overhead() + loom_graph_overhead(2048), .no_alloc = true};
    st.ctx = loom_init(ip);
    st.g = loom_new_graph_custom(st.ctx, 2048);
    st.tokens = loom_new_tensor_1d(st.ctx, LOOM_TYPE_I32, n);
    st.pos = loom_new_tensor_1d(st.ctx, LOOM_TYPE_I32, n);
    st.mask = loom_new_tensor_2d(st.ctx, LOOM_TYPE_F32, n, n);
    loom_set_input(st.tokens);
    loom_set_input(st.pos);
    loom_set_input(st.mask);
    struct loom_tensor * x = loom_get_rows(st.ctx, m->tok_embd, st.tokens);
    for (int l = 0; l < N_LAYER; l++) {
        struct layer * L = &m->layers[l];
        struct loom_tensor * cur = loom_mul(st.ctx, loom_rms_norm(st.ctx, x, 1e-5f), L->attn_norm);
        x = loom_add(st.ctx, x, attention(&st, L, cur, n));
        cur = loom_mul(st.ctx, loom_rms_norm(st.ctx, x, 1e-5f), L->ffn_norm);
        struct loom_tensor * gate = loom_silu(st.ctx, loom_mul_mat(st.ctx, L->w1, cur));
        struct loom_tensor * up = loom_mul_mat(st.ctx, L->w3, cur);
        x = loom_add(st.ctx, x, loom_mul_mat(st.ctx, L->w2, loom_mul(st.ctx, gate, up)));
    }
    x = loom_mul(st.ctx, loom_rms_norm(st.ctx, x, 1e-5f), m->output_norm);
    st.logits = loom_mul_mat(st.ctx, m->output, x);
    loom_set_output(st.logits);
    loom_build_forward_expand(st.g, st.logits);
    return st;
}

static void step_inputs(struct step * st, int64_t n) {
    int32_t * ids = malloc((size_t)n * sizeof *ids);
    float * mask = malloc((size_t)(n * n) * sizeof *mask);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % VOCAB);
    CHECK(loom_backend_tensor_set(st->tokens, ids, 0, (size_t)n * sizeof *ids) == LOOM_OK, "tokens");
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)i;
    CHECK(loom_backend_tensor_set(st->pos, ids, 0, (size_t)n * sizeof *ids) == LOOM_OK, "pos");
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) mask[i * n + j] = j <= i ? 0.0f : -INFINITY;
    }
    CHECK(loom_backend_tensor_set(st->mask, mask, 0, (size_t)(n * n) * sizeof *mask) == LOOM_OK, "mask");
    free(ids);
    free(mask);
}

/* Builds, allocates (and computes when 'out' is given) one step of 'n' tokens. */
static void run_step(struct model * m, loom_backend_t * backends, int n_backends, int64_t n, float * out, const char * label) {
    struct step st = step_build(m, n);
    loom_backend_sched_t s = loom_backend_sched_new(backends, NULL, n_backends, 2048);
    CHECK(loom_backend_sched_alloc_graph(s, st.g) == LOOM_OK, "%s: alloc", label);
    size_t planned = 0, naive = 0;
    for (int b = 0; b < n_backends; b++) {
        size_t p = loom_backend_sched_get_buffer_size(s, backends[b]), q = loom_backend_sched_get_naive_size(s, backends[b]);
        CHECK(p <= q, "%s: planned <= naive on %s", label, loom_backend_name(backends[b]));
        planned += p;
        naive += q;
        if (q) fprintf(stderr, "  %-28s %-6s planned %8zu bytes, naive %9zu bytes\n", label, loom_backend_name(backends[b]), p, q);
    }
    fprintf(stderr, "  %-28s %d nodes, %d splits, %d copies (%zu bytes/compute); planned %zu vs naive %zu bytes (%.1f%%)\n", label,
            st.g->n_nodes, loom_backend_sched_get_n_splits(s), loom_backend_sched_get_n_copies(s), loom_backend_sched_get_copy_bytes(s),
            planned, naive, 100.0 * (double)planned / (double)(naive ? naive : 1));
    CHECK(planned * 2 < naive, "%s: lifetime reuse at least halves the memory", label);
    if (out) {
        step_inputs(&st, n);
        CHECK(loom_backend_sched_graph_compute(s, st.g) == LOOM_OK, "%s: compute", label);
        CHECK(loom_backend_tensor_get(st.logits, out, 0, loom_nbytes(st.logits)) == LOOM_OK, "%s: logits", label);
    }
    loom_backend_sched_free(s);
    loom_free(st.ctx);
}

/* run_step on a model made with 'place_of' (see model_init), freed after. */
static void run_placed(loom_backend_buffer_type_t * bufts, const int * place_of, loom_backend_t * backends, int n_backends, int64_t n,
                       float * out, const char * label) {
    struct model m;
    model_init(&m, bufts, place_of);
    run_step(&m, backends, n_backends, n, out, label);
    model_free(&m);
}

int main(void) {
    setenv("LOOM_ALLOC_CHECK", "1", 1);
    struct loom_sim_params p0 = loom_sim_default_params(), p1 = loom_sim_default_params();
    p0.alignment = 256;
    p0.max_buffer_size = 1 << 22;
    p0.events = true;
    p0.unsupported_ops[LOOM_OP_GELU] = true;
    p1.alignment = 128;
    p1.max_buffer_size = 3 << 20;
    p1.unsupported_ops[LOOM_OP_SOFT_MAX] = p1.unsupported_ops[LOOM_OP_GET_ROWS] = true;
    loom_backend_dev_t d0 = test_sim_new("tsim0", p0), d1 = test_sim_new("tsim1", p1);
    loom_backend_t b0 = loom_backend_dev_init(d0, NULL), b1 = loom_backend_dev_init(d1, NULL), bc = loom_backend_cpu_init();
    loom_backend_buffer_type_t bufts[3] = {loom_backend_dev_buffer_type(d0), loom_backend_dev_buffer_type(d1), loom_backend_cpu_buffer_type()};
    loom_backend_t all[3] = {b0, b1, bc};

    /* memory for a full 256-token batch (planned only) */
    fprintf(stderr, "stories260K-shaped graph, batch %d:\n", N_CTX);
    int on_cpu[N_LAYER + 1] = {2, 2, 2, 2, 2, 2}, spread[N_LAYER + 1] = {0, 0, 1, 1, 2, 2};
    run_placed(bufts, on_cpu, &bc, 1, N_CTX, NULL, "CPU only");
    run_placed(bufts, spread, all, 3, N_CTX, NULL, "sim0 | sim1 | CPU");

    /* logits of a 24-token step: CPU only vs spread over three devices */
    int64_t n = 24;
    float * ref = malloc(VOCAB * (size_t)n * sizeof *ref), * got = malloc(VOCAB * (size_t)n * sizeof *got);
    fprintf(stderr, "batch %lld, computed:\n", (long long)n);
    run_placed(bufts, on_cpu, &bc, 1, n, ref, "CPU only");
    run_placed(bufts, spread, all, 3, n, got, "sim0 | sim1 | CPU");
    CHECK(memcmp(ref, got, VOCAB * (size_t)n * sizeof *ref) == 0, "logits over three devices equal the CPU-only logits");
    bool finite = true;
    for (int64_t i = 0; i < VOCAB * n; i++) finite = finite && isfinite(ref[i]);
    CHECK(finite, "logits are finite");
    free(ref);
    free(got);
    CHECK(test_sim_live_buffers(d0) == 0 && test_sim_live_buffers(d1) == 0, "nothing leaked");

    loom_backend_free(b0);
    loom_backend_free(b1);
    loom_backend_free(bc);
    loom_sim_device_free(d0);
    loom_sim_device_free(d1);
    return test_finish("test-sched-model");
}
