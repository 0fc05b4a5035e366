/* galloc.c -- the graph allocator object: plans (galloc-plan.c), buffers per id and chunk, placement. */
#include "galloc-impl.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

struct id_buffers {
    loom_backend_buffer_t * chunks; /* one buffer per chunk; NULL where not yet allocated */
    int n_chunks;
};

struct loom_gallocr {
    int n_bufs;
    loom_backend_buffer_type_t * bufts;
    struct id_buffers * buffers;     /* per buffer id */
    struct lgal_arena * arenas;    /* per buffer id: the last plan's free lists and chunk sizes */
    size_t * naive;                  /* per buffer id: bytes without reuse in the last plan */

    /* the last plan, replayed while the graph keeps its shape */
    bool plan_valid;
    uint64_t plan_sig;
    int plan_n_nodes, plan_n_leafs;
    struct lgal_place * node_place;
    struct lgal_place * leaf_place;
    int cap_nodes, cap_leafs;

    /* Chunks replaced or dropped: their memory is released but the handles stay (as dead buffers)
     * until the allocator is freed, so that tensors of older graphs that still point at them are
     * recognised as this allocator's and re-placed -- never mistaken for memory placed by someone
     * else (a new buffer could otherwise reuse the freed handle's address). */
    loom_backend_buffer_t * retired;
    int n_retired, cap_retired;

    struct lgal_index ix;
    int n_plans;
    bool check;                      /* LOOM_ALLOC_CHECK=1: verify every alloc_graph */
};

/* ---------------------------------------------------------------- lifecycle */

loom_gallocr_t loom_gallocr_new_n(loom_backend_buffer_type_t * bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) {
        loom_log(LOOM_LOG_ERROR, "loom_gallocr_new_n: need at least one buffer type");
        return NULL;
    }
    for (int i = 0; i < n_bufs; i++) {
        if (!bufts[i]) {
            loom_log(LOOM_LOG_ERROR, "loom_gallocr_new_n: buffer type %d is NULL", i);
            return NULL;
        }
    }
    loom_gallocr_t g = calloc(1, sizeof *g);
    if (!g) goto oom;
    g->n_bufs = n_bufs;
    g->bufts = calloc((size_t)n_bufs, sizeof *g->bufts);
    g->buffers = calloc((size_t)n_bufs, sizeof *g->buffers);
    g->arenas = calloc((size_t)n_bufs, sizeof *g->arenas);
    g->naive = calloc((size_t)n_bufs, sizeof *g->naive);
    if (!g->bufts || !g->buffers || !g->arenas || !g->naive) goto oom;
    memcpy(g->bufts, bufts, (size_t)n_bufs * sizeof *bufts);
    for (int i = 0; i < n_bufs; i++) {
        lgal_arena_init(&g->arenas[i], loom_backend_buft_get_alignment(bufts[i]), loom_backend_buft_get_max_size(bufts[i]));
    }
    g->check = loom_env_flag("LOOM_ALLOC_CHECK", false);
    return g;
oom:
    loom_log(LOOM_LOG_ERROR, "loom_gallocr_new_n: out of host memory");
    loom_gallocr_free(g);
    return NULL;
}

loom_gallocr_t loom_gallocr_new(loom_backend_buffer_type_t buft) { return loom_gallocr_new_n(&buft, 1); }

/* ---------------------------------------------------------------- retired chunks */

static enum loom_status dead_set(loom_backend_buffer_t b, struct loom_tensor * t, const void * d, size_t o, size_t s) {
    (void)b; (void)d; (void)o; (void)s;
    loom_log(LOOM_LOG_ERROR, "tensor '%s': its graph's memory was re-planned by the graph allocator; allocate the graph again", t->name);
    return LOOM_ERR_INVALID_ARG;
}
static enum loom_status dead_get(loom_backend_buffer_t b, const struct loom_tensor * t, void * d, size_t o, size_t s) {
    return dead_set(b, (struct loom_tensor *)t, d, o, s);
}
static enum loom_status dead_memset(loom_backend_buffer_t b, struct loom_tensor * t, uint8_t v, size_t o, size_t s) {
    (void)v;
    return dead_set(b, t, NULL, o, s);
}
static void * dead_base(loom_backend_buffer_t b) { (void)b; return NULL; }
static enum loom_status dead_clear(loom_backend_buffer_t b, uint8_t v) { (void)b; (void)v; return LOOM_OK; }

static const struct loom_backend_buffer_i dead_iface = {
    .free_buffer = NULL,
    .get_base = dead_base,
    .memset_tensor = dead_memset,
    .set_tensor = dead_set,
    .get_tensor = dead_get,
    .clear = dead_clear,
};

/* Releases the memory of 'b' and keeps its handle as a dead buffer; frees it outright when even
 * the list cannot grow (then stale tensors may dangle, as they would without this). */
static void retire(loom_gallocr_t g, loom_backend_buffer_t b) {
    if (!b) return;
    if (g->n_retired == g->cap_retired) {
        int cap = g->cap_retired ? 2 * g->cap_retired : 8;
        loom_backend_buffer_t * r = realloc(g->retired, (size_t)cap * sizeof *r);
        if (!r) {
            loom_backend_buffer_free(b);
            return;
        }
        g->retired = r;
        g->cap_retired = cap;
    }
    if (b->iface.free_buffer) b->iface.free_buffer(b);
    b->iface = dead_iface;
    b->context = NULL;
    b->size = 0;
    g->retired[g->n_retired++] = b;
}

static void free_buffers(loom_gallocr_t g, bool keep_handles) {
    for (int i = 0; i < g->n_bufs; i++) {
        struct id_buffers * b = &g->buffers[i];
        for (int c = 0; c < b->n_chunks; c++) {
            if (keep_handles) {
                retire(g, b->chunks[c]);
            } else {
                loom_backend_buffer_free(b->chunks[c]);
            }
        }
        free(b->chunks);
        b->chunks = NULL;
        b->n_chunks = 0;
    }
}

void loom_gallocr_free(loom_gallocr_t g) {
    if (!g) return;
    if (g->buffers) free_buffers(g, false);
    for (int i = 0; i < g->n_retired; i++) loom_backend_buffer_free(g->retired[i]);
    free(g->retired);
    if (g->arenas) {
        for (int i = 0; i < g->n_bufs; i++) lgal_arena_release(&g->arenas[i]);
    }
    free(g->bufts);
    free(g->buffers);
    free(g->arenas);
    free(g->naive);
    free(g->node_place);
    free(g->leaf_place);
    lgal_index_release(&g->ix);
    free(g);
}

bool lgal_owns_buffer(loom_gallocr_t g, loom_backend_buffer_t buffer) {
    if (!buffer) return false;
    for (int i = 0; i < g->n_bufs; i++) {
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            if (g->buffers[i].chunks[c] == buffer) return true;
        }
    }
    for (int i = 0; i < g->n_retired; i++) {
        if (g->retired[i] == buffer) return true;
    }
    return false;
}

/* ---------------------------------------------------------------- graph shape */

static bool is_mine(loom_gallocr_t g, const struct loom_tensor * t) {
    const struct loom_tensor * base = t->view_src ? t->view_src : t;
    return base->buffer && lgal_owns_buffer(g, base->buffer);
}

/* Forgets the placement of every tensor of 'graph' that lives in this allocator's buffers. */
static void detach_graph(loom_gallocr_t g, struct loom_cgraph * graph) {
    for (int pass = 0; pass < 2; pass++) { /* views first: their base decides whether they are mine */
        for (int i = 0; i < graph->n_nodes + graph->n_leafs; i++) {
            struct loom_tensor * t = i < graph->n_nodes ? graph->nodes[i] : graph->leafs[i - graph->n_nodes];
            if ((pass == 0) != (t->view_src != NULL) || !is_mine(g, t)) continue;
            t->buffer = NULL;
            t->data = NULL;
        }
    }
}

static void fp_tensor(struct loom_fp * f, const struct loom_tensor * t) {
    loom_fp_add(f, (uint64_t)t->op << 40 | (uint64_t)t->type << 32 | (uint32_t)t->flags);
    for (int d = 0; d < LOOM_MAX_DIMS; d++) {
        loom_fp_add(f, (uint64_t)t->ne[d]);
        loom_fp_add(f, t->nb[d]);
    }
    loom_fp_add(f, t->view_src ? 1 + t->view_offs : 0);
    loom_fp_add(f, t->data || (t->view_src && t->view_src->data) ? 1 : 0);
}

/* Where 't' sits in the graph, for the signature: an index, or a marker when absent. */
static uint64_t code_of(loom_gallocr_t g, const struct loom_tensor * t) {
    if (!t) return 0;
    int k = lgal_index_find(&g->ix, t);
    return k == INT32_MIN ? 1 : (uint64_t)(int64_t)k + 2;
}

/* A hash of everything the plan depends on (not the tensor addresses). */
static uint64_t graph_signature(loom_gallocr_t g, const struct loom_cgraph * graph, const int * node_ids, const int * leaf_ids) {
    struct loom_fp f;
    loom_fp_init(&f, (uint64_t)(uint32_t)graph->n_nodes << 32 | (uint32_t)graph->n_leafs);
    for (int j = 0; j < graph->n_leafs; j++) {
        fp_tensor(&f, graph->leafs[j]);
        loom_fp_add(&f, leaf_ids ? (uint64_t)leaf_ids[j] : 0);
        loom_fp_add(&f, code_of(g, graph->leafs[j]->view_src));
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        const struct loom_tensor * n = graph->nodes[i];
        fp_tensor(&f, n);
        loom_fp_add(&f, node_ids ? (uint64_t)node_ids[i] : 0);
        loom_fp_add(&f, code_of(g, n->view_src));
        for (int k = 0; k < LOOM_MAX_SRC; k++) {
            if (n->src[k]) loom_fp_add(&f, code_of(g, n->src[k]) << 3 | (uint64_t)k);
        }
    }
    return loom_fp_final(&f);
}

/* ---------------------------------------------------------------- planning and buffers */

static enum loom_status grow_place_arrays(loom_gallocr_t g, int n_nodes, int n_leafs) {
    if (n_nodes > g->cap_nodes) {
        struct lgal_place * p = realloc(g->node_place, (size_t)n_nodes * sizeof *p);
        if (!p) return LOOM_ERR_OOM;
        g->node_place = p;
        g->cap_nodes = n_nodes;
    }
    if (n_leafs > g->cap_leafs) {
        struct lgal_place * p = realloc(g->leaf_place, (size_t)n_leafs * sizeof *p);
        if (!p) return LOOM_ERR_OOM;
        g->leaf_place = p;
        g->cap_leafs = n_leafs;
    }
    return LOOM_OK;
}

static enum loom_status plan(loom_gallocr_t g, const struct loom_cgraph * graph, const int * node_ids, const int * leaf_ids) {
    g->plan_valid = false;
    enum loom_status st = grow_place_arrays(g, graph->n_nodes, graph->n_leafs);
    if (st != LOOM_OK) return st;
    for (int i = 0; i < g->n_bufs; i++) {
        lgal_arena_release(&g->arenas[i]);
        lgal_arena_init(&g->arenas[i], loom_backend_buft_get_alignment(g->bufts[i]), loom_backend_buft_get_max_size(g->bufts[i]));
    }
    struct lgal_plan_out out = {.nodes = g->node_place, .leafs = g->leaf_place, .naive = g->naive};
    st = lgal_plan(graph, &g->ix, node_ids, leaf_ids, g->bufts, g->arenas, g->n_bufs, &out);
    g->n_plans++;
    if (st != LOOM_OK) return st;
    g->plan_n_nodes = graph->n_nodes;
    g->plan_n_leafs = graph->n_leafs;
    g->plan_valid = true;
    return LOOM_OK;
}

/* Makes every chunk's buffer at least as large as the plan needs (buffers only grow). */
static enum loom_status ensure_buffers(loom_gallocr_t g) {
    for (int i = 0; i < g->n_bufs; i++) {
        const struct lgal_arena * a = &g->arenas[i];
        struct id_buffers * b = &g->buffers[i];
        if (a->n_chunks > b->n_chunks) {
            loom_backend_buffer_t * c = realloc(b->chunks, (size_t)a->n_chunks * sizeof *c);
            if (!c) return LOOM_ERR_OOM;
            for (int k = b->n_chunks; k < a->n_chunks; k++) c[k] = NULL;
            b->chunks = c;
            b->n_chunks = a->n_chunks;
        }
        for (int k = 0; k < a->n_chunks; k++) {
            size_t need = a->chunks[k].high;
            if (b->chunks[k] && loom_backend_buffer_get_size(b->chunks[k]) >= need) continue;
            retire(g, b->chunks[k]);
            b->chunks[k] = loom_backend_buft_alloc_buffer(g->bufts[i], need);
            if (!b->chunks[k]) {
                loom_backend_dev_t dev = loom_backend_buft_get_device(g->bufts[i]);
                size_t free_mem = 0, total = 0;
                if (dev) loom_backend_dev_memory(dev, &free_mem, &total);
                loom_log(LOOM_LOG_ERROR, "cannot allocate the compute buffer (%s, chunk %d): %.2f MiB asked, %.2f MiB free of %.2f MiB on %s",
                         loom_backend_buft_name(g->bufts[i]), k, need / 1048576.0, free_mem / 1048576.0, total / 1048576.0,
                         dev ? loom_backend_dev_name(dev) : "its device");
                return LOOM_ERR_OOM;
            }
            loom_backend_buffer_set_usage(b->chunks[k], LOOM_BACKEND_BUFFER_USAGE_COMPUTE);
        }
    }
    return LOOM_OK;
}

/* After a failure: no buffers (their memory released), no plan. */
static enum loom_status fail(loom_gallocr_t g, enum loom_status st) {
    free_buffers(g, true);
    g->plan_valid = false;
    return st;
}

static enum loom_status prepare(loom_gallocr_t g, struct loom_cgraph * graph, const int * node_ids, const int * leaf_ids,
                                bool force_plan) {
    enum loom_status st = lgal_index_build(&g->ix, graph);
    if (st != LOOM_OK) return st;
    uint64_t sig = graph_signature(g, graph, node_ids, leaf_ids);
    bool same = g->plan_valid && g->plan_sig == sig && g->plan_n_nodes == graph->n_nodes && g->plan_n_leafs == graph->n_leafs;
    if (!same || force_plan) {
        st = plan(g, graph, node_ids, leaf_ids);
        if (st != LOOM_OK) return st;
        g->plan_sig = sig;
    }
    return ensure_buffers(g);
}

enum loom_status loom_gallocr_reserve_n(loom_gallocr_t g, struct loom_cgraph * graph, const int * node_ids, const int * leaf_ids) {
    detach_graph(g, graph);
    enum loom_status st = prepare(g, graph, node_ids, leaf_ids, true);
    return st == LOOM_OK ? st : fail(g, st);
}

enum loom_status loom_gallocr_reserve(loom_gallocr_t g, struct loom_cgraph * graph) {
    return loom_gallocr_reserve_n(g, graph, NULL, NULL);
}

/* ---------------------------------------------------------------- placement */

static enum loom_status place_one(loom_gallocr_t g, struct loom_tensor * t, const struct lgal_place * p) {
    if (p->kind != GALLOC_KIND_ALLOC || t->data) return LOOM_OK;
    loom_backend_buffer_t buf = g->buffers[p->buffer_id].chunks[p->slot.chunk];
    uint8_t * base = loom_backend_buffer_get_base(buf);
    return loom_backend_tensor_alloc(buf, t, base + p->slot.offset);
}

static enum loom_status place_graph(loom_gallocr_t g, struct loom_cgraph * graph) {
    enum loom_status st = LOOM_OK;
    for (int j = 0; j < graph->n_leafs && st == LOOM_OK; j++) st = place_one(g, graph->leafs[j], &g->leaf_place[j]);
    for (int i = 0; i < graph->n_nodes && st == LOOM_OK; i++) st = place_one(g, graph->nodes[i], &g->node_place[i]);
    for (int i = 0; i < graph->n_nodes + graph->n_leafs && st == LOOM_OK; i++) {
        struct loom_tensor * t = i < graph->n_nodes ? graph->nodes[i] : graph->leafs[i - graph->n_nodes];
        if (t->view_src && !t->data && t->view_src->data) st = loom_backend_view_init(t);
    }
    return st;
}

enum loom_status loom_gallocr_alloc_graph_n(loom_gallocr_t g, struct loom_cgraph * graph, const int * node_ids,
                                            const int * leaf_ids) {
    detach_graph(g, graph);
    enum loom_status st = prepare(g, graph, node_ids, leaf_ids, false);
    if (st == LOOM_OK) st = place_graph(g, graph);
    if (st == LOOM_OK && g->check) st = loom_gallocr_check(g, graph);
    if (st != LOOM_OK) {
        detach_graph(g, graph);
        return fail(g, st);
    }
    return LOOM_OK;
}

enum loom_status loom_gallocr_alloc_graph(loom_gallocr_t g, struct loom_cgraph * graph) {
    return loom_gallocr_alloc_graph_n(g, graph, NULL, NULL);
}

/* ---------------------------------------------------------------- introspection */

size_t loom_gallocr_get_buffer_size(loom_gallocr_t g, int id) {
    if (!g || id < 0 || id >= g->n_bufs) return 0;
    size_t total = 0;
    for (int c = 0; c < g->buffers[id].n_chunks; c++) {
        if (g->buffers[id].chunks[c]) total += loom_backend_buffer_get_size(g->buffers[id].chunks[c]);
    }
    return total;
}

int loom_gallocr_get_n_chunks(loom_gallocr_t g, int id) {
    return g && id >= 0 && id < g->n_bufs ? g->buffers[id].n_chunks : 0;
}

loom_backend_buffer_t loom_gallocr_get_buffer(loom_gallocr_t g, int id, int chunk) {
    if (!g || id < 0 || id >= g->n_bufs || chunk < 0 || chunk >= g->buffers[id].n_chunks) return NULL;
    return g->buffers[id].chunks[chunk];
}

size_t loom_gallocr_get_naive_size(loom_gallocr_t g, int id) { return g && id >= 0 && id < g->n_bufs ? g->naive[id] : 0; }

int loom_gallocr_get_n_plans(loom_gallocr_t g) { return g ? g->n_plans : 0; }
