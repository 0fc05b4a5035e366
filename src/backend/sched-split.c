/* sched-split.c -- the scheduler's second pass: splits, input copies, and the graph the allocator plans.
 *
 * A split is a run of compute nodes on one backend (view ops compute nothing and are skipped).
 * Each tensor a split reads from memory its backend cannot access gets a copy in the split
 * backend's compute buffer, made at the start of the split (one per split and tensor, so it is
 * always current). A copy has the source's type, shape and strides: for a strided or transposed
 * view the copy covers the view's whole byte extent (loom_nbytes) and is itself a view with the
 * same strides into that byte range, so the raw bytes copied give exactly the source's values.
 *
 * The allocator sees the graph with each split's copies placed just before its first node, as
 * op-NONE nodes whose src[0] is what they copy: a copy's memory is live from the split's start to
 * its last reader, and what it copies stays live until the copy is made. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

/* Grows array 'ptr' (capacity 'cap' elements) to hold 'need'; sets 'st' to LOOM_ERR_OOM on failure. */
#define SCHED_GROW(ptr, cap, need, st)                                           \
    do {                                                                         \
        if ((st) == LOOM_OK && (need) > (cap)) {                                 \
            int n_ = (cap) ? (cap) : 16;                                         \
            while (n_ < (need)) n_ *= 2;                                         \
            void * q_ = realloc((ptr), (size_t)n_ * sizeof *(ptr));              \
            if (q_) {                                                            \
                (ptr) = q_;                                                      \
                (cap) = n_;                                                      \
            } else {                                                             \
                (st) = LOOM_ERR_OOM;                                             \
            }                                                                    \
        }                                                                        \
    } while (0)

/* True when backend 'b' can read (and write) the memory of 't' in place. */
static bool can_access(loom_backend_sched_t s, int b, const struct loom_tensor * t) {
    const struct loom_tensor * base = sched_base(t);
    if (lsch_is_external(s, t)) {
        if (!base->buffer) return loom_backend_buft_is_host(s->bufts[b]); /* context-allocated host data */
        return loom_backend_supports_buft(s->backends[b], loom_backend_buffer_get_type(base->buffer));
    }
    int sb = lsch_storage_backend(s, base);
    return sb < 0 || sb == b || loom_backend_supports_buft(s->backends[b], s->bufts[sb]);
}

static enum loom_status form_splits(loom_backend_sched_t s, struct loom_cgraph * g) {
    s->n_splits = 0;
    enum loom_status st = LOOM_OK;
    SCHED_GROW(s->split_nodes, s->cap_split_nodes, g->n_nodes, st);
    SCHED_GROW(s->splits, s->cap_splits, g->n_nodes, st);
    if (st != LOOM_OK) return st;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * node = g->nodes[i];
        if (!sched_is_compute_node(node)) continue;
        int b = *sched_tb(s, node);
        if (lsch_is_external(s, node) && !can_access(s, b, node)) {
            loom_log(LOOM_LOG_ERROR, "scheduler: '%s' writes into memory %s cannot reach", lgal_describe(node).s,
                     loom_backend_name(s->backends[b]));
            return LOOM_ERR_UNSUPPORTED;
        }
        /* an ALL_REDUCE node is a split of its own: the communicator runs it, not the backend */
        const bool coll = node->op == LOOM_OP_ALL_REDUCE;
        if (s->n_splits == 0 || s->splits[s->n_splits - 1].backend != b || coll || s->splits[s->n_splits - 1].collective) {
            s->splits[s->n_splits++] = (struct sched_split){.backend = b, .first_node = n, .collective = coll};
        }
        s->split_nodes[n++] = node;
        s->splits[s->n_splits - 1].n_nodes++;
    }
    for (int k = 0; k < s->n_splits; k++) {
        struct sched_split * sp = &s->splits[k];
        sp->graph = (struct loom_cgraph){.size = sp->n_nodes, .n_nodes = sp->n_nodes, .nodes = s->split_nodes + sp->first_node};
    }
    return LOOM_OK;
}

static int find_or_add_input(loom_backend_sched_t s, int first, struct loom_tensor * src, enum loom_status * st) {
    for (int i = first; i < s->n_inputs; i++) {
        if (s->inputs[i].src == src) return i;
    }
    SCHED_GROW(s->inputs, s->cap_inputs, s->n_inputs + 1, *st);
    if (*st != LOOM_OK) return -1;
    s->inputs[s->n_inputs] = (struct sched_input){.src = src, .src_backend = lsch_storage_backend(s, src)};
    return s->n_inputs++;
}

static enum loom_status collect_inputs(loom_backend_sched_t s) {
    s->n_inputs = 0;
    s->n_rewires = 0;
    enum loom_status st = LOOM_OK;
    for (int k = 0; k < s->n_splits; k++) {
        struct sched_split * sp = &s->splits[k];
        sp->first_input = s->n_inputs;
        for (int i = 0; i < sp->n_nodes; i++) {
            struct loom_tensor * node = s->split_nodes[sp->first_node + i];
            for (int slot = 0; slot < LOOM_MAX_SRC; slot++) {
                struct loom_tensor * src = node->src[slot];
                if (!src) continue;
                const int sb = lsch_storage_backend(s, src);
                if (can_access(s, sp->backend, src)) { /* read in place: wait for its backend (weights never change) */
                    if (sb >= 0 && sb != sp->backend && !lsch_is_weight(src)) sp->deps |= 1u << sb;
                    continue;
                }
                if (sb >= 0 && sb != sp->backend) sp->copy_from |= 1u << sb;
                int in = find_or_add_input(s, sp->first_input, src, &st);
                SCHED_GROW(s->rewires, s->cap_rewires, s->n_rewires + 1, st);
                if (st != LOOM_OK) return st;
                s->rewires[s->n_rewires++] = (struct sched_rewire){.node = node, .slot = slot, .orig = src, .input = in};
            }
        }
        sp->n_inputs = s->n_inputs - sp->first_input;
    }
    return LOOM_OK;
}

/* The copy of 'in->src' on backend 'b' for split 'k'. */
static void make_copy(loom_backend_sched_t s, struct sched_input * in, int b, int k) {
    struct loom_tensor * src = in->src;
    struct loom_tensor * c = loom_new_tensor(s->ctx, src->type, LOOM_MAX_DIMS, src->ne);
    loom_format_name(c, "%s#%s#%d", lgal_describe(src).s, loom_backend_name(s->backends[b]), k);
    in->copy = in->base = c;
    if (!loom_is_contiguous(src)) {
        struct loom_tensor * bytes = loom_new_tensor_1d(s->ctx, LOOM_TYPE_I8, (int64_t)loom_nbytes(src));
        loom_format_name(bytes, "%s#%s#%d (bytes)", lgal_describe(src).s, loom_backend_name(s->backends[b]), k);
        memcpy(c->nb, src->nb, sizeof c->nb);
        c->view_src = bytes;
        c->view_offs = 0;
        c->op = LOOM_OP_VIEW;
        c->src[0] = bytes;
        in->base = bytes;
    }
    in->base->src[0] = src; /* for the allocator: the copy reads 'src' when the split starts */
}

static enum loom_status make_copies(loom_backend_sched_t s) {
    loom_free(s->ctx);
    s->ctx = NULL;
    struct loom_init_params p = {.mem_size = (size_t)(2 * s->n_inputs + 1) * loom_tensor_overhead(), .no_alloc = true};
    s->ctx = loom_init(p);
    if (!s->ctx) return LOOM_ERR_OOM;
    for (int k = 0; k < s->n_splits; k++) {
        const struct sched_split * sp = &s->splits[k];
        for (int i = 0; i < sp->n_inputs; i++) make_copy(s, &s->inputs[sp->first_input + i], sp->backend, k);
    }
    for (int r = 0; r < s->n_rewires; r++) s->rewires[r].copy = s->inputs[s->rewires[r].input].copy;
    return LOOM_OK;
}

static void emit(loom_backend_sched_t s, struct loom_tensor * t, int id) {
    s->node_ids[s->gcopy.n_nodes] = id < 0 ? 0 : id;
    s->gcopy.nodes[s->gcopy.n_nodes++] = t;
}

static enum loom_status build_gcopy(loom_backend_sched_t s, struct loom_cgraph * g) {
    int n = g->n_nodes + 2 * s->n_inputs;
    enum loom_status st = LOOM_OK;
    SCHED_GROW(s->gcopy.nodes, s->cap_gcopy_nodes, n, st);
    SCHED_GROW(s->node_ids, s->cap_node_ids, n, st);
    SCHED_GROW(s->leaf_ids, s->cap_gcopy_leafs, g->n_leafs, st);
    if (st != LOOM_OK) return st;
    s->gcopy.n_nodes = 0;
    int k = 0, c = 0; /* next split, compute nodes emitted */
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * t = g->nodes[i];
        if (sched_is_compute_node(t)) {
            for (; k < s->n_splits && s->splits[k].first_node == c; k++) {
                const struct sched_split * sp = &s->splits[k];
                for (int j = 0; j < sp->n_inputs; j++) {
                    struct sched_input * in = &s->inputs[sp->first_input + j];
                    emit(s, in->base, sp->backend);
                    if (in->copy != in->base) emit(s, in->copy, sp->backend);
                }
            }
            c++;
        }
        emit(s, t, lsch_storage_backend(s, t));
    }
    for (int j = 0; j < g->n_leafs; j++) {
        int id = lsch_storage_backend(s, g->leafs[j]);
        s->leaf_ids[j] = id < 0 ? 0 : id;
    }
    s->gcopy.size = s->cap_gcopy_nodes;
    s->gcopy.leafs = g->leafs;
    s->gcopy.n_leafs = g->n_leafs;
    s->gcopy.visited = (struct loom_hash_set){0, NULL};
    return LOOM_OK;
}

enum loom_status lsch_split_graph(loom_backend_sched_t s, struct loom_cgraph * g) {
    enum loom_status st = form_splits(s, g);
    if (st == LOOM_OK) st = collect_inputs(s);
    if (st == LOOM_OK) st = make_copies(s);
    if (st == LOOM_OK) st = build_gcopy(s, g);
    return st;
}

void lsch_apply_rewires(loom_backend_sched_t s) {
    for (int r = 0; r < s->n_rewires; r++) s->rewires[r].node->src[s->rewires[r].slot] = s->rewires[r].copy;
}

void lsch_undo_rewires(loom_backend_sched_t s) {
    for (int r = s->n_rewires - 1; r >= 0; r--) s->rewires[r].node->src[s->rewires[r].slot] = s->rewires[r].orig;
}
