/* test-rgraph.h -- random graphs for the allocator and scheduler property tests.
 *
 * A graph is generated from a seed: random ops from the core set (add, mul, scale, silu, gelu,
 * rms_norm, soft_max with and without mask, mul_mat with weights and between activations, get_rows,
 * cpy to F32/F16, cont, dup, reshape, transposes and strided views), random small shapes, inputs
 * flagged INPUT and a few nodes flagged OUTPUT. Weights are placed in one of several buffer types
 * chosen by a second seed, so the same structure can be built with different placements. Values of
 * weights and inputs depend only on the seed and their index.
 *
 * Header-only (static functions) so that each test program can include it. */
#ifndef LOOM_TEST_RGRAPH_H
#define LOOM_TEST_RGRAPH_H

#include "backend/backend-impl.h"
#include "loom-cpu.h"
#include "test-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TU static __attribute__((unused))

#define RG_MAX_PLACES 4
#define RG_MAX_POOL 512
#define RG_MAX_IO 128

enum rg_input_kind { RG_IN_F32, RG_IN_MASK, RG_IN_IDS };

struct rgraph {
    struct loom_context * ctx;                   /* graph tensors (no_alloc) */
    struct loom_context * wctx[RG_MAX_PLACES];   /* weights per place (no_alloc) */
    loom_backend_buffer_t wbuf[RG_MAX_PLACES];
    loom_backend_buffer_type_t places[RG_MAX_PLACES];
    int n_places;
    struct loom_cgraph * graph;
    struct loom_tensor * inputs[RG_MAX_IO];
    int input_kind[RG_MAX_IO];
    int input_range[RG_MAX_IO];                  /* ids: values in [0, range) */
    int n_inputs;
    struct loom_tensor * outputs[RG_MAX_IO];
    int n_outputs;
    struct loom_tensor * weights[RG_MAX_IO * 2];
    int n_weights;

    /* generation state */
    uint64_t rng, place_rng;
    struct loom_tensor * pool[RG_MAX_POOL];
    bool contig[RG_MAX_POOL];
    int n_pool;
};

TU int64_t rg_dim(struct rgraph * rg) {
    static const int64_t dims[] = {4, 8, 16, 32};
    return dims[test_rand_range(&rg->rng, 0, 3)];
}

TU void rg_push(struct rgraph * rg, struct loom_tensor * t, bool contig) {
    if (rg->n_pool < RG_MAX_POOL) {
        rg->pool[rg->n_pool] = t;
        rg->contig[rg->n_pool++] = contig;
    }
}

/* A recent pool entry (often the last: chains), optionally contiguous only. */
TU struct loom_tensor * rg_pick(struct rgraph * rg, bool need_contig) {
    for (int tries = 0; tries < 32; tries++) {
        int back = test_rand_uniform(&rg->rng) < 0.5 ? 0 : (int)test_rand_range(&rg->rng, 0, rg->n_pool < 12 ? rg->n_pool - 1 : 11);
        int i = rg->n_pool - 1 - back;
        if (i >= 0 && (!need_contig || rg->contig[i])) return rg->pool[i];
    }
    for (int i = rg->n_pool - 1; i >= 0; i--) {
        if (!need_contig || rg->contig[i]) return rg->pool[i];
    }
    return NULL;
}

/* A pool entry with ne0 == 'ne0' (and contiguous when asked), or NULL. */
TU struct loom_tensor * rg_find(struct rgraph * rg, int64_t ne0, int64_t ne1, bool need_contig) {
    int start = (int)test_rand_range(&rg->rng, 0, rg->n_pool - 1);
    for (int k = 0; k < rg->n_pool; k++) {
        int i = (start + k) % rg->n_pool;
        struct loom_tensor * t = rg->pool[i];
        if (t->ne[0] == ne0 && (ne1 < 0 || t->ne[1] == ne1) && (!need_contig || rg->contig[i])) return t;
    }
    return NULL;
}

TU struct loom_tensor * rg_input(struct rgraph * rg, enum loom_type type, int64_t ne0, int64_t ne1, int kind, int range) {
    struct loom_tensor * t = loom_new_tensor_2d(rg->ctx, type, ne0, ne1);
    loom_format_name(t, "in%d", rg->n_inputs);
    loom_set_input(t);
    if (rg->n_inputs < RG_MAX_IO) {
        rg->inputs[rg->n_inputs] = t;
        rg->input_kind[rg->n_inputs] = kind;
        rg->input_range[rg->n_inputs++] = range;
    }
    return t;
}

TU struct loom_tensor * rg_weight(struct rgraph * rg, enum loom_type type, int64_t ne0, int64_t ne1) {
    int p = rg->place_rng ? (int)test_rand_range(&rg->place_rng, 0, rg->n_places - 1) : 0;
    struct loom_tensor * w = loom_new_tensor_2d(rg->wctx[p], type, ne0, ne1);
    loom_format_name(w, "w%d", rg->n_weights);
    loom_set_weight(w);
    if (rg->n_weights < RG_MAX_IO * 2) rg->weights[rg->n_weights++] = w;
    return w;
}

TU void rg_op_unary(struct rgraph * rg) {
    struct loom_tensor * x = rg_pick(rg, true), * r;
    switch (test_rand_range(&rg->rng, 0, 5)) {
    case 0: r = loom_scale(rg->ctx, x, 0.5f + (float)test_rand_uniform(&rg->rng)); break;
    case 1: r = loom_silu(rg->ctx, x); break;
    case 2: r = loom_gelu(rg->ctx, x); break;
    case 3: r = loom_rms_norm(rg->ctx, x, 1e-5f); break;
    case 4: r = loom_soft_max(rg->ctx, x); break;
    default: {
        struct loom_tensor * mask = rg_input(rg, LOOM_TYPE_F32, x->ne[0], x->ne[1], RG_IN_MASK, 0);
        r = loom_soft_max_ext(rg->ctx, x, mask, 0.25f);
    }
    }
    rg_push(rg, r, true);
}

TU void rg_op_binary(struct rgraph * rg) {
    struct loom_tensor * x = rg_pick(rg, true), * y = NULL;
    double u = test_rand_uniform(&rg->rng);
    if (u < 0.4) y = rg_find(rg, x->ne[0], x->ne[1], true);
    if (!y && u < 0.7) y = rg_weight(rg, LOOM_TYPE_F32, x->ne[0], 1);
    if (!y) y = rg_input(rg, LOOM_TYPE_F32, x->ne[0], x->ne[1], RG_IN_F32, 0);
    bool add = test_rand_uniform(&rg->rng) < 0.5;
    rg_push(rg, add ? loom_add(rg->ctx, x, y) : loom_mul(rg->ctx, x, y), true);
}

TU void rg_op_mul_mat(struct rgraph * rg) {
    struct loom_tensor * x = rg_pick(rg, false);
    if (test_rand_uniform(&rg->rng) < 0.6) {
        enum loom_type wt = test_rand_uniform(&rg->rng) < 0.25 ? LOOM_TYPE_F16 : LOOM_TYPE_F32;
        struct loom_tensor * w = rg_weight(rg, wt, x->ne[0], rg_dim(rg));
        rg_push(rg, loom_mul_mat(rg->ctx, w, x), true);
        return;
    }
    struct loom_tensor * y = rg_find(rg, x->ne[0], -1, false);
    rg_push(rg, loom_mul_mat(rg->ctx, y ? y : x, x), true);
}

TU void rg_op_view(struct rgraph * rg) {
    struct loom_tensor * x = rg_pick(rg, true);
    switch (test_rand_range(&rg->rng, 0, 3)) {
    case 0:
        rg_push(rg, loom_transpose(rg->ctx, x), false);
        return;
    case 1: /* every other column */
        if (x->ne[1] >= 2) {
            size_t off = test_rand_uniform(&rg->rng) < 0.5 ? 0 : x->nb[1];
            rg_push(rg, loom_view_2d(rg->ctx, x, x->ne[0], x->ne[1] / 2, 2 * x->nb[1], off), false);
            return;
        }
        /* fall through */
    case 2: /* the upper half of each column: strided rows */
        if (x->ne[0] >= 4) {
            rg_push(rg, loom_view_2d(rg->ctx, x, x->ne[0] / 2, x->ne[1], x->nb[1], (size_t)(x->ne[0] / 2) * x->nb[0]), false);
            return;
        }
        /* fall through */
    default:
        if (loom_is_contiguous(x)) rg_push(rg, loom_reshape_2d(rg->ctx, x, x->ne[1], x->ne[0]), true);
    }
}

TU void rg_op_copy(struct rgraph * rg) {
    struct loom_tensor * x = rg_pick(rg, false);
    switch (test_rand_range(&rg->rng, 0, 3)) {
    case 0:
        rg_push(rg, loom_cont(rg->ctx, x), true);
        return;
    case 1:
        rg_push(rg, loom_dup(rg->ctx, x), true);
        return;
    case 2: {
        struct loom_tensor * b = loom_new_tensor_2d(rg->ctx, LOOM_TYPE_F32, x->ne[0], x->ne[1]);
        loom_format_name(b, "cpy_dst%d", rg->n_pool);
        rg_push(rg, loom_cpy(rg->ctx, x, b), true);
        return;
    }
    default: { /* to F16, then used as the matrix of a product */
        struct loom_tensor * b = loom_new_tensor_2d(rg->ctx, LOOM_TYPE_F16, x->ne[0], x->ne[1]);
        struct loom_tensor * h = loom_cpy(rg->ctx, x, b);
        struct loom_tensor * y = rg_find(rg, x->ne[0], -1, false);
        if (!y) y = rg_input(rg, LOOM_TYPE_F32, x->ne[0], 3, RG_IN_F32, 0);
        rg_push(rg, loom_mul_mat(rg->ctx, h, y), true);
    }
    }
}

TU void rg_op_get_rows(struct rgraph * rg) {
    struct loom_tensor * a;
    if (test_rand_uniform(&rg->rng) < 0.5) {
        a = rg_weight(rg, LOOM_TYPE_F32, rg_dim(rg), 16);
    } else {
        a = rg_pick(rg, true);
    }
    struct loom_tensor * ids = rg_input(rg, LOOM_TYPE_I32, test_rand_range(&rg->rng, 1, 6), 1, RG_IN_IDS, (int)a->ne[1]);
    rg_push(rg, loom_get_rows(rg->ctx, a, ids), true);
}

TU void rg_step(struct rgraph * rg) {
    double u = test_rand_uniform(&rg->rng);
    if (u < 0.25) rg_op_unary(rg);
    else if (u < 0.45) rg_op_binary(rg);
    else if (u < 0.65) rg_op_mul_mat(rg);
    else if (u < 0.78) rg_op_view(rg);
    else if (u < 0.92) rg_op_copy(rg);
    else rg_op_get_rows(rg);
    loom_format_name(rg->pool[rg->n_pool - 1], "n%d", rg->n_pool - 1);
}

/* Builds a random graph of about 'n_ops' ops. Weights go to places[i] with i drawn from 'place_seed'
 * (all in places[0] when it is 0). Nothing is allocated yet except the weights (rg_alloc_weights). */
TU struct rgraph * rg_build(uint64_t seed, int n_ops, loom_backend_buffer_type_t * places, int n_places, uint64_t place_seed) {
    struct rgraph * rg = calloc(1, sizeof *rg);
    rg->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    rg->place_rng = place_seed;
    rg->n_places = n_places;
    size_t mem = (size_t)(n_ops * 8 + 64) * loom_tensor_overhead() + loom_graph_overhead(2048);
    struct loom_init_params ip = {.mem_size = mem, .no_alloc = true};
    rg->ctx = loom_init(ip);
    for (int p = 0; p < n_places; p++) {
        rg->places[p] = places[p];
        struct loom_init_params wp = {.mem_size = (size_t)(n_ops * 2 + 8) * loom_tensor_overhead(), .no_alloc = true};
        rg->wctx[p] = loom_init(wp);
    }
    rg_push(rg, rg_input(rg, LOOM_TYPE_F32, rg_dim(rg), test_rand_range(&rg->rng, 1, 8), RG_IN_F32, 0), true);
    for (int i = 0; i < n_ops; i++) rg_step(rg);
    rg->graph = loom_new_graph_custom(rg->ctx, 2048);
    for (int i = 0; i < rg->n_pool; i++) {
        struct loom_tensor * t = rg->pool[i];
        bool last = i == rg->n_pool - 1;
        if (t->view_src || t->op == LOOM_OP_NONE || (!last && test_rand_uniform(&rg->rng) > 0.12)) continue;
        loom_set_output(t);
        if (rg->n_outputs < RG_MAX_IO) rg->outputs[rg->n_outputs++] = t;
    }
    /* the last few non-view results are outputs too, so the whole chain stays reachable */
    for (int i = rg->n_pool - 1; i >= 0 && rg->n_outputs < 3; i--) {
        struct loom_tensor * t = rg->pool[i];
        if (t->view_src || t->op == LOOM_OP_NONE || (t->flags & LOOM_TENSOR_FLAG_OUTPUT)) continue;
        loom_set_output(t);
        rg->outputs[rg->n_outputs++] = t;
    }
    for (int i = 0; i < rg->n_outputs; i++) loom_build_forward_expand(rg->graph, rg->outputs[i]);
    return rg;
}

TU void rg_fill(uint64_t seed, struct loom_tensor * t, int kind, int range) {
    uint64_t s = seed;
    int64_t n = loom_nelements(t);
    size_t es = loom_type_size(t->type);
    uint8_t * buf = malloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(test_rand_uniform(&s) - 0.5);
        if (kind == RG_IN_MASK) v = test_rand_uniform(&s) < 0.3 ? -INFINITY : 0.0f;
        if (kind == RG_IN_IDS) v = (float)test_rand_range(&s, 0, range - 1);
        test_store_value(t->type, buf + (size_t)i * es, v);
    }
    CHECK(loom_backend_tensor_set(t, buf, 0, (size_t)n * es) == LOOM_OK, "set '%s'", t->name);
    free(buf);
}

/* Places the weights (each place's context in buffers of its type) and fills them. */
TU enum loom_status rg_alloc_weights(struct rgraph * rg, uint64_t seed) {
    for (int p = 0; p < rg->n_places; p++) {
        enum loom_status st;
        rg->wbuf[p] = loom_backend_alloc_ctx_tensors_from_buft(rg->wctx[p], rg->places[p], &st);
        if (st != LOOM_OK) return st;
        if (rg->wbuf[p]) loom_backend_buffer_set_usage(rg->wbuf[p], LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    for (int i = 0; i < rg->n_weights; i++) rg_fill(seed * 1000003u + (uint64_t)i + 7, rg->weights[i], RG_IN_F32, 0);
    return LOOM_OK;
}

TU void rg_set_inputs(struct rgraph * rg, uint64_t seed) {
    for (int i = 0; i < rg->n_inputs; i++) {
        if (!loom_hash_set_contains(&rg->graph->visited, rg->inputs[i])) continue; /* not reachable */
        rg_fill(seed * 7919u + (uint64_t)i + 3, rg->inputs[i], rg->input_kind[i], rg->input_range[i]);
    }
}

/* Reads every output into one malloc'ed byte string ('*size' bytes). */
TU uint8_t * rg_read_outputs(struct rgraph * rg, size_t * size) {
    size_t total = 0;
    for (int i = 0; i < rg->n_outputs; i++) total += loom_nbytes(rg->outputs[i]);
    uint8_t * out = malloc(total ? total : 1), * p = out;
    for (int i = 0; i < rg->n_outputs; i++) {
        size_t n = loom_nbytes(rg->outputs[i]);
        CHECK(loom_backend_tensor_get(rg->outputs[i], p, 0, n) == LOOM_OK, "get output '%s'", rg->outputs[i]->name);
        p += n;
    }
    *size = total;
    return out;
}

TU void rg_free(struct rgraph * rg) {
    if (!rg) return;
    for (int p = 0; p < rg->n_places; p++) {
        loom_backend_buffer_free(rg->wbuf[p]);
        loom_free(rg->wctx[p]);
    }
    loom_free(rg->ctx);
    free(rg);
}

#endif
