/* galloc-check.c -- the overlap checker: proves from the placed tensors that no two live ones share bytes. */
#include "galloc-impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LIFE_FOREVER INT_MAX
#define MAX_REPORTS 8

struct life {
    int start; /* step that writes it: -1 for leafs and inputs, else its node index */
    int end;   /* last step that reads it or one of its views; LIFE_FOREVER for outputs and unread tensors */
    bool read;
};

struct rec {
    const struct loom_tensor * t;
    loom_backend_buffer_t buffer;
    uintptr_t addr;
    size_t size;
    int start, end;
};

struct checker {
    loom_gallocr_t galloc;
    const struct loom_cgraph * g;
    struct lgal_index ix;
    struct life * life; /* per node i at [i], per leaf j at [n_nodes + j] */
    int n_bad;
};

static struct loom_tensor * tensor_at(const struct loom_cgraph * g, int i) {
    return i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
}

static struct life * life_of(struct checker * c, const struct loom_tensor * t) {
    int k = lgal_index_find(&c->ix, t);
    if (k == INT32_MIN) return NULL;
    return &c->life[k >= 0 ? k : c->g->n_nodes + (-k - 1)];
}

static const struct loom_tensor * storage(const struct loom_tensor * t) { return t->view_src ? t->view_src : t; }

static void violation(struct checker * c, const char * what, const struct loom_tensor * a, const struct loom_tensor * b) {
    if (c->n_bad++ < MAX_REPORTS) {
        loom_log(LOOM_LOG_ERROR, "graph allocator check: %s: '%s'%s%s%s", what, lgal_describe(a).s, b ? " and '" : "",
                 b ? lgal_describe(b).s : "", b ? "'" : "");
    }
}

static void compute_lifetimes(struct checker * c) {
    const struct loom_cgraph * g = c->g;
    int n = g->n_nodes + g->n_leafs;
    for (int i = 0; i < n; i++) {
        const struct loom_tensor * t = tensor_at(g, i);
        bool early = i >= g->n_nodes || (t->flags & LOOM_TENSOR_FLAG_INPUT);
        c->life[i] = (struct life){.start = early ? -1 : i, .end = early ? -1 : i, .read = false};
    }
    for (int i = 0; i < g->n_nodes; i++) {
        for (int k = 0; k < LOOM_MAX_SRC; k++) {
            const struct loom_tensor * s = g->nodes[i]->src[k];
            if (!s) continue;
            struct life * ls = life_of(c, s), * lb = life_of(c, storage(s));
            if (ls) ls->read = true;
            if (lb && lb->end < i) lb->end = i;
        }
    }
    for (int i = 0; i < n; i++) {
        const struct loom_tensor * t = tensor_at(g, i);
        if (c->life[i].read && !(t->flags & LOOM_TENSOR_FLAG_OUTPUT)) continue;
        struct life * lb = life_of(c, storage(t));
        if (lb) lb->end = LIFE_FOREVER;
    }
}

/* Collects the placed non-view tensors that live in the allocator's buffers; checks containment. */
static int collect(struct checker * c, struct rec * recs) {
    const struct loom_cgraph * g = c->g;
    int n = 0;
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        const struct loom_tensor * t = tensor_at(g, i);
        if (!storage(t)->data) {
            violation(c, "no memory", t, NULL);
            continue;
        }
        if (t->view_src || !lgal_owns_buffer(c->galloc, t->buffer)) continue;
        loom_backend_buffer_t buf = t->buffer;
        uintptr_t base = (uintptr_t)loom_backend_buffer_get_base(buf), addr = (uintptr_t)t->data;
        size_t size = loom_backend_buft_get_alloc_size(loom_backend_buffer_get_type(buf), t);
        size_t align = loom_backend_buft_get_alignment(loom_backend_buffer_get_type(buf));
        size_t bsize = loom_backend_buffer_get_size(buf);
        if (addr < base || addr - base > bsize || size > bsize - (addr - base)) violation(c, "outside its buffer", t, NULL);
        if ((addr - base) % align) violation(c, "misaligned", t, NULL);
        recs[n++] = (struct rec){t, buf, addr, size, c->life[i].start, c->life[i].end};
    }
    return n;
}

static int rec_cmp(const void * pa, const void * pb) {
    const struct rec * a = pa, * b = pb;
    if (a->buffer != b->buffer) return (uintptr_t)a->buffer < (uintptr_t)b->buffer ? -1 : 1;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    return 0;
}

/* 'w' is written at the step where 'r' is read for the last time: fine only in place. */
static bool inplace_ok(const struct rec * w, const struct rec * r) {
    const struct loom_tensor * n = w->t;
    if (n->view_src || r->t->view_src || w->addr != r->addr || !loom_are_same_layout(n, r->t)) return false;
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        if (n->src[k] == r->t && lgal_op_can_inplace(n->op, k)) return true;
    }
    return false;
}

static void check_pair(struct checker * c, const struct rec * a, const struct rec * b) {
    int lo = a->start > b->start ? a->start : b->start;
    int hi = a->end < b->end ? a->end : b->end;
    if (lo < hi) {
        violation(c, "live at the same time and sharing bytes", a->t, b->t);
    } else if (lo == hi) {
        bool ok = (a->start == b->end && inplace_ok(a, b)) || (b->start == a->end && inplace_ok(b, a));
        if (!ok) violation(c, "one is written while the other is still read", a->t, b->t);
    }
}

enum loom_status loom_gallocr_check(loom_gallocr_t galloc, struct loom_cgraph * graph) {
    struct checker c = {.galloc = galloc, .g = graph};
    int n = graph->n_nodes + graph->n_leafs;
    c.life = calloc((size_t)(n ? n : 1), sizeof *c.life);
    struct rec * recs = calloc((size_t)(n ? n : 1), sizeof *recs);
    enum loom_status st = c.life && recs ? lgal_index_build(&c.ix, graph) : LOOM_ERR_OOM;
    if (st == LOOM_OK) {
        compute_lifetimes(&c);
        int m = collect(&c, recs);
        qsort(recs, (size_t)m, sizeof *recs, rec_cmp);
        for (int i = 0; i < m; i++) {
            for (int j = i + 1; j < m && recs[j].buffer == recs[i].buffer && recs[j].addr < recs[i].addr + recs[i].size; j++) {
                check_pair(&c, &recs[i], &recs[j]);
            }
        }
        if (c.n_bad) {
            loom_log(LOOM_LOG_ERROR, "graph allocator check: %d violation(s)", c.n_bad);
            st = LOOM_ERR_INVALID_ARG;
        }
    }
    lgal_index_release(&c.ix);
    free(c.life);
    free(recs);
    return st;
}
