/* graph.c -- forward graphs (topological, deduplicated) and the tensor hash set. */
#include "core-impl.h"

#include <string.h>

size_t loom_hash_size(size_t min_size) {
    /* a power of two at least twice the content: short probes, and a mask instead of a division */
    size_t n = 16;
    while (n < min_size * 2) n *= 2;
    return n;
}

/* Fibonacci hashing: the multiply spreads the pointer's bits upward (tensor addresses share
 * their low bits), the high half is the hash. */
static size_t hash_ptr(const void * p, size_t size) {
    uint64_t x = ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) >> 29;
    return (size & (size - 1)) == 0 ? (size_t)(x & (size - 1)) : (size_t)(x % size);
}

size_t loom_hash_set_find(const struct loom_hash_set * s, const struct loom_tensor * t) {
    if (!s->size) return SIZE_MAX;
    size_t slot = hash_ptr(t, s->size);
    for (size_t i = 0; i < s->size; i++) {
        if (s->keys[slot] == t) return slot;
        if (!s->keys[slot]) return SIZE_MAX;
        if (++slot == s->size) slot = 0;
    }
    return SIZE_MAX;
}

bool loom_hash_set_contains(const struct loom_hash_set * s, const struct loom_tensor * t) {
    return loom_hash_set_find(s, t) != SIZE_MAX;
}

bool loom_hash_set_insert(struct loom_hash_set * s, struct loom_tensor * t) {
    size_t slot = hash_ptr(t, s->size);
    for (size_t i = 0; i < s->size; i++) {
        if (s->keys[slot] == t) return false;
        if (!s->keys[slot]) {
            s->keys[slot] = t;
            return true;
        }
        if (++slot == s->size) slot = 0;
    }
    LOOM_ABORT("hash set full (%zu slots)", s->size);
}

size_t loom_graph_overhead(size_t size) {
    size_t hash = loom_hash_size(size * 2);
    return loom_pad(sizeof(struct loom_cgraph), LOOM_MEM_ALIGN) +
           loom_pad((2 * size + hash) * sizeof(struct loom_tensor *), LOOM_MEM_ALIGN);
}

struct loom_cgraph * loom_new_graph_custom(struct loom_context * ctx, size_t size) {
    struct loom_cgraph * g = loom_ctx_alloc(ctx, sizeof *g);
    size_t hash = loom_hash_size(size * 2);
    struct loom_tensor ** mem = loom_ctx_alloc(ctx, (2 * size + hash) * sizeof(struct loom_tensor *));
    memset(mem, 0, (2 * size + hash) * sizeof(struct loom_tensor *));
    *g = (struct loom_cgraph){
        .size = (int)size,
        .nodes = mem,
        .leafs = mem + size,
        .visited = {.size = hash, .keys = mem + 2 * size},
    };
    return g;
}

struct loom_cgraph * loom_new_graph(struct loom_context * ctx) {
    return loom_new_graph_custom(ctx, LOOM_DEFAULT_GRAPH_SIZE);
}

static void visit(struct loom_cgraph * g, struct loom_tensor * t) {
    if (!loom_hash_set_insert(&g->visited, t)) return;
    for (int i = 0; i < LOOM_MAX_SRC; i++) {
        if (t->src[i]) visit(g, t->src[i]);
    }
    if (t->op == LOOM_OP_NONE) {
        if (g->n_leafs >= g->size) LOOM_ABORT("graph full: more than %d leafs", g->size);
        g->leafs[g->n_leafs++] = t;
    } else {
        if (g->n_nodes >= g->size) LOOM_ABORT("graph full: more than %d nodes", g->size);
        g->nodes[g->n_nodes++] = t;
    }
}

void loom_build_forward_expand(struct loom_cgraph * g, struct loom_tensor * tensor) {
    LOOM_ASSERT(g->visited.size > 0);
    visit(g, tensor);
}

struct loom_cgraph loom_graph_view(struct loom_cgraph * g, int i0, int i1) {
    LOOM_ASSERT(0 <= i0 && i0 <= i1 && i1 <= g->n_nodes);
    return (struct loom_cgraph){
        .size = i1 - i0,
        .n_nodes = i1 - i0,
        .n_leafs = 0,
        .nodes = g->nodes + i0,
        .leafs = NULL,
        .visited = {0, NULL},
    };
}

int loom_graph_n_nodes(const struct loom_cgraph * g) { return g->n_nodes; }

struct loom_tensor * loom_graph_node(const struct loom_cgraph * g, int i) {
    if (i < 0) i += g->n_nodes;
    LOOM_ASSERT(i >= 0 && i < g->n_nodes);
    return g->nodes[i];
}

void loom_graph_clear(struct loom_cgraph * g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    if (g->visited.keys) memset(g->visited.keys, 0, g->visited.size * sizeof(struct loom_tensor *));
}

void loom_graph_print(const struct loom_cgraph * g) {
    loom_log(LOOM_LOG_INFO, "graph: %d nodes, %d leafs", g->n_nodes, g->n_leafs);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct loom_tensor * t = g->nodes[i];
        loom_log(LOOM_LOG_INFO, "  node %4d: %-10s %-5s [%5lld %5lld %5lld %5lld] %s%s", i, loom_op_name(t->op),
                 loom_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                 (long long)t->ne[3], t->name, (t->flags & LOOM_TENSOR_FLAG_OUTPUT) ? " (output)" : "");
    }
    for (int i = 0; i < g->n_leafs; i++) {
        const struct loom_tensor * t = g->leafs[i];
        loom_log(LOOM_LOG_INFO, "  leaf %4d: %-5s [%5lld %5lld %5lld %5lld] %s", i, loom_type_name(t->type),
                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], t->name);
    }
}
