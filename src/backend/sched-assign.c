/* sched-assign.c -- the scheduler's first pass: which backend runs each node and holds each tensor.
 *
 * Rules, in order (the header's scheduler section): pinned nodes stay; a node that writes into
 * memory placed outside the scheduler runs where that memory lives; a node that uses a weight runs
 * where the weight lives when that device supports the op; then where other pre-placed sources
 * live; assignments spread to unassigned neighbours (down then up, first without the lowest-priority
 * backend so that it does not swallow the graph, then with all); what is left goes to the first
 * backend that supports it; an op a backend does not support falls to the next backend that does;
 * a node writing into a view runs where the view's base lives; sources without memory (leafs,
 * inputs) follow their first consumer. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

int lsch_backend_of_buffer(loom_backend_sched_t s, loom_backend_buffer_t buffer) {
    if (!buffer) return -1;
    loom_backend_buffer_type_t buft = loom_backend_buffer_get_type(buffer);
    for (int i = 0; i < s->n_backends; i++) {
        if (s->bufts[i] == buft) return i;
    }
    for (int i = 0; i < s->n_backends; i++) {
        if (loom_backend_get_default_buffer_type(s->backends[i]) == buft) return i;
    }
    return -1;
}

static bool owns(loom_backend_sched_t s, loom_backend_buffer_t buffer) {
    for (int i = 0; i < s->n_owns; i++) {
        if (s->owns[i].buffer == buffer) return s->owns[i].owned;
    }
    const bool owned = lgal_owns_buffer(s->galloc, buffer);
    if (s->n_owns < (int)(sizeof s->owns / sizeof s->owns[0])) {
        s->owns[s->n_owns].buffer = buffer;
        s->owns[s->n_owns].owned = owned;
        s->n_owns++;
    }
    return owned;
}

bool lsch_is_external(loom_backend_sched_t s, const struct loom_tensor * t) {
    const struct loom_tensor * b = sched_base(t);
    return b->data != NULL && !(b->buffer && owns(s, b->buffer));
}

int lsch_storage_backend(loom_backend_sched_t s, const struct loom_tensor * t) {
    const struct loom_tensor * b = sched_base(t);
    if (lsch_is_external(s, t)) return lsch_backend_of_buffer(s, b->buffer);
    int * id = sched_tb(s, b);
    return id ? *id : -1;
}

_Static_assert(SCHED_MAX_BACKENDS <= 16, "supports() keeps one bit per backend in 16");

/* loom_backend_supports_op, asked once per node and backend in a plan (the passes ask often). */
static bool supports(loom_backend_sched_t s, int b, const struct loom_tensor * node) {
    if (b < 0) return false;
    if (node->op == LOOM_OP_ALL_REDUCE) { /* run by the communicator, on its rank's backend only */
        const int rank = loom_get_op_param_i32(node, 1);
        return s->comm && rank < loom_backend_comm_n_ranks(s->comm) && s->rank_backend[rank] == b;
    }
    const size_t slot = sched_slot(s, node);
    if (slot == SIZE_MAX) return loom_backend_supports_op(s->backends[b], node);
    uint32_t * m = &s->sup[slot];
    if (!(*m & (1u << b))) {
        *m |= 1u << b;
        if (loom_backend_supports_op(s->backends[b], node)) *m |= 1u << (16 + b);
    }
    return (*m >> (16 + b)) & 1u;
}

static void table_insert(loom_backend_sched_t s, struct loom_tensor * t) { s->hs.keys[sched_probe(s, t)] = t; }

bool lsch_is_weight(const struct loom_tensor * t) {
    const struct loom_tensor * b = sched_base(t);
    if ((t->flags | b->flags) & LOOM_TENSOR_FLAG_WEIGHT) return true;
    return b->buffer && loom_backend_buffer_get_usage(b->buffer) == LOOM_BACKEND_BUFFER_USAGE_WEIGHTS;
}

static enum loom_status init_table(loom_backend_sched_t s, struct loom_cgraph * g) {
    size_t need = 16;
    while (need < 2 * ((size_t)g->n_nodes + (size_t)g->n_leafs)) need *= 2; /* at most half full */
    if (need > s->hs_cap) {
        struct loom_tensor ** keys = malloc(need * sizeof *keys);
        int * tb = malloc(need * sizeof *tb);
        uint32_t * sup = malloc(need * sizeof *sup);
        if (!keys || !tb || !sup) {
            free(keys);
            free(tb);
            free(sup);
            return LOOM_ERR_OOM;
        }
        free(s->hs.keys);
        free(s->tb);
        free(s->sup);
        s->hs.keys = keys;
        s->tb = tb;
        s->sup = sup;
        s->hs_cap = need;
    }
    s->hs.size = need;
    memset(s->hs.keys, 0, need * sizeof *s->hs.keys);
    memset(s->sup, 0, need * sizeof *s->sup);
    for (size_t i = 0; i < need; i++) s->tb[i] = -1;
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) table_insert(s, i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes]);
    return LOOM_OK;
}

/* The highest-priority backend among the sources of 'node' that live in pre-placed memory and
 * pass 'want' (weights first, then any), that supports the op; -1 when none. */
static int from_sources(loom_backend_sched_t s, const struct loom_tensor * node, bool weights) {
    int best = -1;
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        const struct loom_tensor * src = node->src[k];
        if (!src || !lsch_is_external(s, src) || (weights && !lsch_is_weight(src))) continue;
        int b = lsch_backend_of_buffer(s, sched_base(src)->buffer);
        if (b >= 0 && (best < 0 || b < best) && supports(s, b, node)) best = b;
    }
    return best;
}

static int pinned(loom_backend_sched_t s, const struct loom_tensor * node) {
    for (int i = 0; i < s->n_pins; i++) {
        if (s->pins[i].node == node) return s->pins[i].backend;
    }
    return -1;
}

/* Would backend 'b' run 'node' if the pre-placed sources it cannot read were copied to it (as a
 * split's inputs are)? Asked with those sources presented as not yet placed. */
static bool supports_with_copies(loom_backend_sched_t s, int b, const struct loom_tensor * node) {
    struct loom_tensor probe = *node, srcs[LOOM_MAX_SRC];
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        if (!node->src[k]) continue;
        srcs[k] = *node->src[k];
        if (lsch_is_external(s, node->src[k])) {
            srcs[k].buffer = NULL;
            srcs[k].data = NULL;
            srcs[k].view_src = NULL;
        }
        probe.src[k] = &srcs[k];
    }
    return loom_backend_supports_op(s->backends[b], &probe);
}

/* A matrix product of many columns whose weight lives with the last backend (the CPU) runs on the
 * first GPU instead, its weight copied over as a split input: for a batch of at least
 * 'offload_min_batch' columns moving the weight costs far less than the host computing the
 * product (the field's rule for prompt processing with partial offload). Returns 'b' otherwise. */
static int offload_large_batch(loom_backend_sched_t s, const struct loom_tensor * n, int b) {
    if (n->op != LOOM_OP_MUL_MAT || b != s->n_backends - 1 || s->offload_min_batch <= 0) return b;
    if (n->src[1]->ne[1] * n->src[1]->ne[2] * n->src[1]->ne[3] < s->offload_min_batch) return b;
    if (!lsch_is_weight(n->src[0])) return b;
    for (int k = 0; k < s->n_backends - 1; k++) {
        if (loom_backend_dev_type(loom_backend_get_device(s->backends[k])) != LOOM_BACKEND_DEV_TYPE_GPU) continue;
        if (supports_with_copies(s, k, n)) return k;
    }
    return b;
}

static void pass_anchors(loom_backend_sched_t s, struct loom_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (!sched_is_compute_node(n)) continue;
        int b = pinned(s, n);
        if (b < 0 && lsch_is_external(s, n)) {
            int own = lsch_backend_of_buffer(s, sched_base(n)->buffer);
            if (supports(s, own, n)) b = own;
        }
        if (b < 0) {
            b = from_sources(s, n, true);
            if (b >= 0) b = offload_large_batch(s, n, b);
        }
        if (b < 0) b = from_sources(s, n, false);
        *sched_tb(s, n) = b;
    }
}

/* Spreads assignments to unassigned compute nodes, in node order ('up' false) or reverse. With
 * 'skip_last', the lowest-priority backend does not spread. */
static void pass_expand(loom_backend_sched_t s, struct loom_cgraph * g, bool up, bool skip_last) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        struct loom_tensor * n = g->nodes[up ? g->n_nodes - 1 - k : k];
        if (!sched_is_compute_node(n)) continue;
        int * b = sched_tb(s, n);
        if (*b >= 0) {
            cur = skip_last && *b == s->n_backends - 1 ? -1 : *b;
        } else if (cur >= 0 && supports(s, cur, n)) {
            *b = cur;
        }
    }
}

/* An unsupported assignment moves to the next backend (in priority order, wrapping) that supports
 * the op. A node left unassigned -- expansion stopped at it because its neighbours' backend cannot
 * run it -- is treated as if it had that neighbour's backend (the previous compute node's); with no
 * neighbour, it goes to the first backend that supports it. */
static enum loom_status pass_fallback(loom_backend_sched_t s, struct loom_cgraph * g) {
    int prev = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (!sched_is_compute_node(n)) continue;
        int * b = sched_tb(s, n);
        if (*b < 0 && supports(s, prev, n)) *b = prev;
        if (!supports(s, *b, n)) {
            int from = *b >= 0 ? *b : prev, found = -1;
            for (int k = 0; k < s->n_backends && found < 0; k++) {
                int c = from < 0 ? k : (from + 1 + k) % s->n_backends;
                if (supports(s, c, n)) found = c;
            }
            if (found < 0) {
                loom_log(LOOM_LOG_ERROR, "scheduler: no backend supports %s node '%s'", loom_op_name(n->op), lgal_describe(n).s);
                return LOOM_ERR_UNSUPPORTED;
            }
            if (from >= 0) {
                loom_log(LOOM_LOG_DEBUG, "scheduler: %s cannot run %s '%s'; moved to %s", loom_backend_name(s->backends[from]),
                         loom_op_name(n->op), lgal_describe(n).s, loom_backend_name(s->backends[found]));
            }
            *b = found;
        }
        prev = *b;
    }
    return LOOM_OK;
}

/* A node that writes into a view (CPY) runs where the view's base lives; a base without a place
 * yet goes with the node. */
static enum loom_status pass_view_writers(loom_backend_sched_t s, struct loom_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (!sched_is_compute_node(n) || !n->view_src || lsch_is_external(s, n)) continue;
        int * nb = sched_tb(s, n), * bb = sched_tb(s, n->view_src);
        if (!bb) {
            loom_log(LOOM_LOG_ERROR, "scheduler: the base '%s' of '%s' is not in the graph", lgal_describe(n->view_src).s,
                     lgal_describe(n).s);
            return LOOM_ERR_INVALID_ARG;
        }
        if (*bb < 0) {
            *bb = *nb;
        } else if (*bb != *nb) {
            if (!supports(s, *bb, n)) {
                loom_log(LOOM_LOG_ERROR, "scheduler: '%s' writes into '%s' on %s, which cannot run %s", lgal_describe(n).s,
                         lgal_describe(n->view_src).s, loom_backend_name(s->backends[*bb]), loom_op_name(n->op));
                return LOOM_ERR_UNSUPPORTED;
            }
            *nb = *bb;
        }
    }
    return LOOM_OK;
}

/* Tensors without a place (leafs, inputs, bases only views read) go where their first consumer
 * runs; views take their base's backend. */
static void pass_sources(loom_backend_sched_t s, struct loom_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (!sched_is_compute_node(n)) continue;
        int b = *sched_tb(s, n);
        for (int k = 0; k < LOOM_MAX_SRC; k++) {
            if (!n->src[k] || lsch_is_external(s, n->src[k])) continue;
            int * sb = sched_tb(s, sched_base(n->src[k]));
            if (sb && *sb < 0) *sb = b;
        }
    }
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        struct loom_tensor * t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        int * tb = sched_tb(s, t);
        if (t->view_src) {
            int b = lsch_storage_backend(s, t->view_src);
            if (b < 0 && !lsch_is_external(s, t->view_src)) { /* a base only views use: the last backend */
                int * bb = sched_tb(s, t->view_src);
                if (bb) *bb = b = s->n_backends - 1;
            }
            if (!sched_is_compute_node(t)) *tb = b;
        } else if (*tb < 0) {
            *tb = lsch_is_external(s, t) ? lsch_backend_of_buffer(s, t->buffer) : s->n_backends - 1;
        }
    }
}

enum loom_status lsch_assign(loom_backend_sched_t s, struct loom_cgraph * g) {
    enum loom_status st = init_table(s, g);
    if (st != LOOM_OK) return st;
    pass_anchors(s, g);
    pass_expand(s, g, false, true);
    pass_expand(s, g, true, true);
    pass_expand(s, g, false, false);
    pass_expand(s, g, true, false);
    st = pass_fallback(s, g);
    if (st == LOOM_OK) st = pass_view_writers(s, g);
    if (st == LOOM_OK) pass_sources(s, g);
    return st;
}
