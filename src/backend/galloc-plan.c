/* galloc-plan.c -- the measuring pass: lifetimes, in-place reuse and offsets for one graph. */
#include "galloc-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- tensor index */

enum loom_status lgal_index_build(struct lgal_index * ix, const struct loom_cgraph * g) {
    size_t need = loom_hash_size((size_t)g->n_nodes + (size_t)g->n_leafs);
    if (need > ix->cap) {
        struct loom_tensor ** keys = malloc(need * sizeof *keys);
        int * idx = malloc(need * sizeof *idx);
        if (!keys || !idx) {
            free(keys);
            free(idx);
            return LOOM_ERR_OOM;
        }
        free(ix->set.keys);
        free(ix->idx);
        ix->set.keys = keys;
        ix->idx = idx;
        ix->cap = need;
    }
    ix->set.size = need;
    memset(ix->set.keys, 0, need * sizeof *ix->set.keys);
    for (int j = 0; j < g->n_leafs; j++) {
        loom_hash_set_insert(&ix->set, g->leafs[j]);
        ix->idx[loom_hash_set_find(&ix->set, g->leafs[j])] = -(j + 1);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        loom_hash_set_insert(&ix->set, g->nodes[i]);
        ix->idx[loom_hash_set_find(&ix->set, g->nodes[i])] = i;
    }
    return LOOM_OK;
}

int lgal_index_find(const struct lgal_index * ix, const struct loom_tensor * t) {
    size_t slot = loom_hash_set_find(&ix->set, t);
    return slot == SIZE_MAX ? INT32_MIN : ix->idx[slot];
}

void lgal_index_release(struct lgal_index * ix) {
    free(ix->set.keys);
    free(ix->idx);
    memset(ix, 0, sizeof *ix);
}

/* ---------------------------------------------------------------- helpers */

/* Only the first source: a kernel may write its result before it has read all of a second
 * source (e.g. dst = a, then dst += b), but never before reading the first element-wise. */
bool lgal_op_can_inplace(enum loom_op op, int src_slot) {
    if (src_slot != 0) return false;
    switch (op) {
    case LOOM_OP_ADD:
    case LOOM_OP_MUL:
    case LOOM_OP_SCALE:
    case LOOM_OP_SILU:
    case LOOM_OP_GELU:
        return true;
    default:
        return false;
    }
}

size_t lgal_tensor_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t, size_t align) {
    size_t sz = loom_backend_buft_get_alloc_size(buft, t);
    return loom_pad(sz ? sz : 1, align);
}

struct lgal_name lgal_describe(const struct loom_tensor * t) {
    struct lgal_name n;
    if (t->name[0]) {
        snprintf(n.s, sizeof n.s, "%s", t->name);
    } else {
        snprintf(n.s, sizeof n.s, "(%s %s [%lld %lld %lld %lld])", loom_op_name(t->op), loom_type_name(t->type), (long long)t->ne[0],
                 (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    }
    return n;
}

/* ---------------------------------------------------------------- planning state */

struct tinfo {
    int n_children;   /* consumers that have not run yet */
    int n_views;      /* views of this base not yet released */
    bool allocated;   /* holds a slot of this plan */
    bool handed_over; /* its slot now belongs to an in-place consumer */
    int buffer_id;
    struct lgal_slot slot;
};

struct planner {
    const struct loom_cgraph * g;
    const struct lgal_index * ix;
    struct tinfo * info;  /* per node, then per leaf: [n_nodes + j] */
    loom_backend_buffer_type_t * bufts;
    struct lgal_arena * arenas;
    int n_bufs;
    struct lgal_plan_out * out;
};

/* The planning record of 't', or NULL when 't' is not in the graph. */
static struct tinfo * info_of(struct planner * p, const struct loom_tensor * t) {
    int k = lgal_index_find(p->ix, t);
    if (k == INT32_MIN) return NULL;
    return k >= 0 ? &p->info[k] : &p->info[p->g->n_nodes + (-k - 1)];
}

static bool has_storage(const struct loom_tensor * t) {
    return t->view_src ? t->view_src->data != NULL : t->data != NULL;
}

/* True when 't' is a non-view tensor of the graph that this plan must place. */
static bool needs_alloc(const struct loom_tensor * t) { return !t->view_src && !t->data; }

static struct lgal_place * place_of(struct planner * p, const struct loom_tensor * t) {
    int k = lgal_index_find(p->ix, t);
    return k >= 0 ? &p->out->nodes[k] : &p->out->leafs[-k - 1];
}

static enum loom_status allocate(struct planner * p, struct loom_tensor * t, struct tinfo * ti) {
    loom_backend_buffer_type_t buft = p->bufts[ti->buffer_id];
    struct lgal_arena * a = &p->arenas[ti->buffer_id];
    size_t size = lgal_tensor_size(buft, t, a->alignment);
    size_t real = loom_backend_buft_get_alloc_size(buft, t);
    if ((real ? real : 1) > a->max_size) {
        loom_log(LOOM_LOG_ERROR, "graph allocator: tensor '%s' needs %zu bytes, more than the largest buffer of %s (%zu bytes)",
                 lgal_describe(t).s, real, loom_backend_buft_name(buft), a->max_size);
        return LOOM_ERR_TOO_LARGE;
    }
    enum loom_status st = lgal_arena_alloc(a, real ? real : 1, &ti->slot);
    if (st != LOOM_OK) return st;
    ti->allocated = true;
    p->out->naive[ti->buffer_id] += size;
    *place_of(p, t) = (struct lgal_place){.kind = GALLOC_KIND_ALLOC, .buffer_id = ti->buffer_id, .slot = ti->slot};
    return LOOM_OK;
}

/* The source whose memory 'node' may take over, or NULL. */
static struct loom_tensor * inplace_parent(struct planner * p, struct loom_tensor * node, struct tinfo * ni) {
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        struct loom_tensor * s = node->src[k];
        if (!s || !lgal_op_can_inplace(node->op, k)) continue;
        struct tinfo * si = info_of(p, s);
        if (!si || !si->allocated || si->handed_over || s->view_src) continue;
        if (si->n_children != 1 || si->n_views != 0) continue;
        if (s->flags & (LOOM_TENSOR_FLAG_INPUT | LOOM_TENSOR_FLAG_OUTPUT)) continue;
        if (si->buffer_id != ni->buffer_id || !loom_are_same_layout(s, node)) continue;
        size_t need = loom_backend_buft_get_alloc_size(p->bufts[ni->buffer_id], node);
        if (need > si->slot.size) continue;
        return s;
    }
    return NULL;
}

static enum loom_status allocate_node(struct planner * p, struct loom_tensor * node, struct tinfo * ni) {
    struct loom_tensor * parent = inplace_parent(p, node, ni);
    if (!parent) return allocate(p, node, ni);
    struct tinfo * pi = info_of(p, parent);
    pi->handed_over = true;
    ni->allocated = true;
    ni->slot = pi->slot;
    loom_backend_buffer_type_t buft = p->bufts[ni->buffer_id];
    p->out->naive[ni->buffer_id] += lgal_tensor_size(buft, node, p->arenas[ni->buffer_id].alignment);
    *place_of(p, node) = (struct lgal_place){.kind = GALLOC_KIND_ALLOC, .buffer_id = ni->buffer_id, .slot = ni->slot};
    return LOOM_OK;
}

/* Called when 't' has no consumers and no views left: its memory returns to the free list. */
static void release(struct planner * p, struct loom_tensor * t) {
    if (t->flags & LOOM_TENSOR_FLAG_OUTPUT) return;
    if (t->view_src) {
        struct tinfo * bi = info_of(p, t->view_src);
        if (!bi) return;
        LOOM_ASSERT(bi->n_views > 0);
        if (--bi->n_views == 0 && bi->n_children == 0) release(p, t->view_src);
        return;
    }
    struct tinfo * ti = info_of(p, t);
    if (ti && ti->allocated && !ti->handed_over) lgal_arena_free(&p->arenas[ti->buffer_id], &ti->slot);
}

/* ---------------------------------------------------------------- passes */

static enum loom_status check_sources(struct planner * p) {
    const struct loom_cgraph * g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        for (int k = 0; k <= LOOM_MAX_SRC; k++) {
            struct loom_tensor * s = k < LOOM_MAX_SRC ? n->src[k] : n->view_src;
            if (!s || has_storage(s)) continue;
            struct loom_tensor * base = s->view_src ? s->view_src : s;
            if (!info_of(p, s) || !info_of(p, base)) {
                loom_log(LOOM_LOG_ERROR, "graph allocator: '%s' (used by '%s') needs memory but is not in the graph",
                         lgal_describe(s).s, lgal_describe(n).s);
                return LOOM_ERR_INVALID_ARG;
            }
        }
    }
    return LOOM_OK;
}

static enum loom_status set_ids_and_counts(struct planner * p, const int * node_ids, const int * leaf_ids) {
    const struct loom_cgraph * g = p->g;
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        int id = i < g->n_nodes ? (node_ids ? node_ids[i] : 0) : (leaf_ids ? leaf_ids[i - g->n_nodes] : 0);
        if (id < 0 || id >= p->n_bufs) {
            loom_log(LOOM_LOG_ERROR, "graph allocator: buffer id %d out of range [0, %d)", id, p->n_bufs);
            return LOOM_ERR_INVALID_ARG;
        }
        p->info[i].buffer_id = id;
    }
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        struct loom_tensor * t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (i < g->n_nodes) {
            for (int k = 0; k < LOOM_MAX_SRC; k++) {
                struct tinfo * si = t->src[k] ? info_of(p, t->src[k]) : NULL;
                if (si) si->n_children++;
            }
        }
        struct tinfo * bi = t->view_src ? info_of(p, t->view_src) : NULL;
        if (bi) bi->n_views++;
    }
    return LOOM_OK;
}

/* Leafs and inputs: placed before any node runs. */
static enum loom_status place_inputs(struct planner * p) {
    const struct loom_cgraph * g = p->g;
    for (int j = 0; j < g->n_leafs; j++) {
        struct loom_tensor * t = g->leafs[j];
        if (!needs_alloc(t)) continue;
        enum loom_status st = allocate(p, t, &p->info[g->n_nodes + j]);
        if (st != LOOM_OK) return st;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * t = g->nodes[i];
        if (!(t->flags & LOOM_TENSOR_FLAG_INPUT) || !needs_alloc(t) || p->info[i].allocated) continue;
        enum loom_status st = allocate(p, t, &p->info[i]);
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

static enum loom_status place_nodes(struct planner * p) {
    const struct loom_cgraph * g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (needs_alloc(n) && !p->info[i].allocated) {
            enum loom_status st = allocate_node(p, n, &p->info[i]);
            if (st != LOOM_OK) return st;
        }
        for (int k = 0; k < LOOM_MAX_SRC; k++) {
            struct loom_tensor * s = n->src[k];
            struct tinfo * si = s ? info_of(p, s) : NULL;
            if (!si) continue;
            LOOM_ASSERT(si->n_children > 0);
            if (--si->n_children == 0 && si->n_views == 0) release(p, s);
        }
    }
    return LOOM_OK;
}

enum loom_status lgal_plan(const struct loom_cgraph * g, const struct lgal_index * ix, const int * node_ids,
                             const int * leaf_ids, loom_backend_buffer_type_t * bufts, struct lgal_arena * arenas,
                             int n_bufs, struct lgal_plan_out * out) {
    size_t n = (size_t)g->n_nodes + (size_t)g->n_leafs;
    struct planner p = {.g = g, .ix = ix, .bufts = bufts, .arenas = arenas, .n_bufs = n_bufs, .out = out};
    p.info = calloc(n ? n : 1, sizeof *p.info);
    if (!p.info) return LOOM_ERR_OOM;
    memset(out->nodes, 0, (size_t)g->n_nodes * sizeof *out->nodes);
    memset(out->leafs, 0, (size_t)g->n_leafs * sizeof *out->leafs);
    memset(out->naive, 0, (size_t)n_bufs * sizeof *out->naive);
    enum loom_status st = check_sources(&p);
    if (st == LOOM_OK) st = set_ids_and_counts(&p, node_ids, leaf_ids);
    if (st == LOOM_OK) st = place_inputs(&p);
    if (st == LOOM_OK) st = place_nodes(&p);
    free(p.info);
    return st;
}
