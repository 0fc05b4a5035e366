/* sim-backend.c -- the sim's stream: graph compute on the CPU kernels through translated addresses,
 * async copies that complete at once, and trivial events. */
#include "sim-impl.h"
#include "loom-cpu.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sim_backend {
    struct sim_device * sd;
    int n_threads;
};

static const char * sim_backend_name(loom_backend_t backend) { return ((struct sim_backend *)backend->context)->sd->name; }

static void sim_backend_free(loom_backend_t backend) {
    struct sim_device * sd = ((struct sim_backend *)backend->context)->sd;
    pthread_mutex_lock(&sd->lock);
    sd->n_backends--;
    pthread_mutex_unlock(&sd->lock);
    free(backend->context);
    free(backend);
}

/* ---------------------------------------------------------------- graph compute */

/* A tensor's own fields while the graph runs on host addresses. */
struct saved {
    struct loom_tensor * t;
    void * data;
    loom_backend_buffer_t buffer;
    void * host;  /* the host address it gets */
};

struct translation {
    struct sim_device * sd;
    struct loom_hash_set seen;
    struct saved * saved;
    size_t n;
};

static void note(struct translation * tr, struct loom_tensor * t) {
    if (!t || !loom_hash_set_insert(&tr->seen, t)) return;
    tr->saved[tr->n++] = (struct saved){.t = t, .data = t->data, .buffer = t->buffer};
}

/* The host address of 't' (a view through its base), or false (logged) when the sim cannot read it:
 * memory of another device, or host memory without host access. */
static bool host_address(const struct sim_device * sd, const struct loom_tensor * t, void ** host) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    size_t n = loom_nbytes(t);
    if (base->buffer && loom_sim_buffer_is_on(base->buffer, sd)) {
        *host = base->data ? loom_sim_translate(base->buffer, (const uint8_t *)base->data + offs, n, t->name) : NULL;
        if (*host || n == 0) return true;
        return false;
    }
    bool host_mem = base->buffer ? loom_backend_buffer_is_host(base->buffer) : base->data != NULL;
    if (host_mem && sd->params.host_access) {
        *host = (uint8_t *)base->data + offs;
        return true;
    }
    if (!base->buffer && !base->data && n == 0) {
        *host = NULL;
        return true;
    }
    loom_log(LOOM_LOG_ERROR, "%s: graph_compute: tensor '%s' is not in memory this device can read (%s)", sd->name, t->name,
             base->buffer ? loom_backend_buft_name(base->buffer->buft) : base->data ? "host memory" : "no data");
    return false;
}

static void restore(struct translation * tr) {
    for (size_t i = 0; i < tr->n; i++) {
        tr->saved[i].t->data = tr->saved[i].data;
        tr->saved[i].t->buffer = tr->saved[i].buffer;
    }
}

/* Gathers every tensor the kernels can reach (nodes, their sources, the bases of views, leafs) and
 * gives each its host address, with no buffer, as if it were context memory. All addresses are
 * worked out before any is changed, since a view's comes from its base's original one. */
static enum loom_status translate(struct translation * tr, struct loom_cgraph * g) {
    size_t cap = ((size_t)g->n_nodes * (LOOM_MAX_SRC + 1) + (size_t)g->n_leafs) * 2 + 1;
    tr->seen.size = loom_hash_size(cap);
    tr->seen.keys = calloc(tr->seen.size, sizeof *tr->seen.keys);
    tr->saved = malloc(cap * sizeof *tr->saved);
    if (!tr->seen.keys || !tr->saved) {
        loom_log(LOOM_LOG_ERROR, "%s: graph_compute: out of host memory", tr->sd->name);
        return LOOM_ERR_OOM;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * node = g->nodes[i];
        note(tr, node);
        note(tr, node->view_src);
        for (int j = 0; j < LOOM_MAX_SRC; j++) {
            if (!node->src[j]) continue;
            note(tr, node->src[j]);
            note(tr, node->src[j]->view_src);
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        note(tr, g->leafs[i]);
        note(tr, g->leafs[i]->view_src);
    }
    for (size_t i = 0; i < tr->n; i++) {
        if (!host_address(tr->sd, tr->saved[i].t, &tr->saved[i].host)) return LOOM_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < tr->n; i++) {
        tr->saved[i].t->data = tr->saved[i].host;
        tr->saved[i].t->buffer = NULL;
    }
    return LOOM_OK;
}

static enum loom_status sim_graph_compute(loom_backend_t backend, struct loom_cgraph * graph) {
    struct sim_backend * sb = backend->context;
    struct sim_device * sd = sb->sd;
    for (int i = 0; i < graph->n_nodes; i++) {
        const struct loom_tensor * node = graph->nodes[i];
        if ((node->op >= 0 && node->op < LOOM_OP_COUNT && sd->params.unsupported_ops[node->op]) ||
            (sd->params.refuse_quant && sim_has_quant_src(node))) {
            loom_log(LOOM_LOG_ERROR, "%s: op %s (node '%s') is not supported", sd->name, loom_op_name(node->op), node->name);
            return LOOM_ERR_UNSUPPORTED;
        }
    }
    struct translation tr = {.sd = sd};
    enum loom_status st = translate(&tr, graph);
    if (st == LOOM_OK) {
        pthread_mutex_lock(&sd->lock);
        sd->stats.n_graph_computes++;
        sd->stats.n_keyed_repeats += graph->launch_key && graph->launch_key == sd->stats.last_launch_key;
        sd->stats.last_launch_key = graph->launch_key;
        pthread_mutex_unlock(&sd->lock);
        st = loom_cpu_graph_compute(graph, sb->n_threads);
    }
    restore(&tr); /* also after a failure: the kernels must never leave host addresses behind */
    free(tr.seen.keys);
    free(tr.saved);
    return st;
}

/* ---------------------------------------------------------------- async copies (complete at once) */

static void count_async(loom_backend_t backend) {
    struct sim_device * sd = ((struct sim_backend *)backend->context)->sd;
    pthread_mutex_lock(&sd->lock);
    sd->stats.n_async++;
    pthread_mutex_unlock(&sd->lock);
}

/* The generic wrappers hand these only storage (no views) that lives on this device. */
static enum loom_status sim_set_async(loom_backend_t backend, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    count_async(backend);
    return t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
}

static enum loom_status sim_get_async(loom_backend_t backend, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    count_async(backend);
    return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
}

/* 'dst' lives on this device; 'src' on this device or in host memory. Anything else: false. */
static bool sim_cpy_async(loom_backend_t backend_src, loom_backend_t backend_dst, const struct loom_tensor * src, struct loom_tensor * dst) {
    (void)backend_src;
    bool done = false;
    if (!src->buffer || !src->data) {
        done = false;
    } else if (loom_backend_buffer_is_host(src->buffer)) {
        done = dst->buffer->iface.set_tensor(dst->buffer, dst, src->data, 0, loom_nbytes(src)) == LOOM_OK;
    } else if (dst->buffer->iface.cpy_tensor) {
        done = dst->buffer->iface.cpy_tensor(dst->buffer, src, dst);
    }
    if (done) count_async(backend_dst);
    return done;
}

static enum loom_status sim_synchronize(loom_backend_t backend) { (void)backend; return LOOM_OK; }

/* ---------------------------------------------------------------- events */

static enum loom_status sim_event_record(loom_backend_t backend, loom_backend_event_t event) {
    (void)event;
    struct sim_device * sd = ((struct sim_backend *)backend->context)->sd;
    pthread_mutex_lock(&sd->lock);
    sd->stats.n_event_records++;
    pthread_mutex_unlock(&sd->lock);
    return LOOM_OK;
}

static enum loom_status sim_event_wait(loom_backend_t backend, loom_backend_event_t event) {
    (void)backend;
    (void)event;
    return LOOM_OK;
}

loom_backend_event_t loom_sim_event_new(loom_backend_dev_t dev) {
    struct sim_device * sd = sim_dev(dev);
    loom_backend_event_t e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->device = dev;
    pthread_mutex_lock(&sd->lock);
    sd->n_events++;
    pthread_mutex_unlock(&sd->lock);
    return e;
}

void loom_sim_event_free(loom_backend_dev_t dev, loom_backend_event_t event) {
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    sd->n_events--;
    pthread_mutex_unlock(&sd->lock);
    free(event);
}

enum loom_status loom_sim_event_synchronize(loom_backend_dev_t dev, loom_backend_event_t event) {
    (void)dev;
    (void)event;
    return LOOM_OK;
}

/* ---------------------------------------------------------------- backend */

loom_backend_t loom_sim_backend_init(loom_backend_dev_t dev, const char * params) {
    (void)params;
    struct sim_device * sd = sim_dev(dev);
    loom_backend_t b = calloc(1, sizeof *b);
    struct sim_backend * ctx = calloc(1, sizeof *ctx);
    if (!b || !ctx) {
        free(b);
        free(ctx);
        loom_log(LOOM_LOG_ERROR, "%s: cannot create a backend: out of host memory", sd->name);
        return NULL;
    }
    ctx->sd = sd;
    ctx->n_threads = sd->params.n_threads > 0 ? sd->params.n_threads : loom_default_n_threads();
    b->iface = (struct loom_backend_i){
        .get_name = sim_backend_name,
        .free = sim_backend_free,
        .set_tensor_async = sd->params.async ? sim_set_async : NULL,
        .get_tensor_async = sd->params.async ? sim_get_async : NULL,
        .cpy_tensor_async = sd->params.async ? sim_cpy_async : NULL,
        .synchronize = sim_synchronize,
        .graph_compute = sim_graph_compute,
        .event_record = sd->params.events ? sim_event_record : NULL,
        .event_wait = sd->params.events ? sim_event_wait : NULL,
    };
    b->device = dev;
    b->context = ctx;
    pthread_mutex_lock(&sd->lock);
    sd->n_backends++;
    pthread_mutex_unlock(&sd->lock);
    return b;
}
