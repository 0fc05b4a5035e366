/* sched.c -- the scheduler object: lifecycle (when a graph is re-planned), pins, introspection and
 * the LOOM_SCHED_DEBUG log. The passes live in sched-assign.c, sched-split.c and sched-compute.c. */
#include "hash.h"
#include "sched-impl.h"
#include "comm-impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- lifecycle */

loom_backend_sched_t loom_backend_sched_new(loom_backend_t * backends, loom_backend_buffer_type_t * bufts, int n_backends,
                                            size_t graph_size) {
    (void)graph_size; /* tables grow with the graphs they see */
    if (!backends || n_backends < 1 || n_backends > SCHED_MAX_BACKENDS) {
        loom_log(LOOM_LOG_ERROR, "scheduler: need 1 to %d backends, got %d", SCHED_MAX_BACKENDS, n_backends);
        return NULL;
    }
    loom_backend_sched_t s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_backends = n_backends;
    for (int i = 0; i < n_backends; i++) {
        if (!backends[i]) {
            loom_log(LOOM_LOG_ERROR, "scheduler: backend %d is NULL", i);
            free(s);
            return NULL;
        }
        s->backends[i] = backends[i];
        s->bufts[i] = bufts && bufts[i] ? bufts[i] : loom_backend_get_default_buffer_type(backends[i]);
        if (!loom_backend_supports_buft(backends[i], s->bufts[i])) {
            loom_log(LOOM_LOG_ERROR, "scheduler: backend %s cannot use buffer type %s", loom_backend_name(backends[i]),
                     loom_backend_buft_name(s->bufts[i]));
            free(s);
            return NULL;
        }
    }
    s->galloc = loom_gallocr_new_n(s->bufts, n_backends);
    if (!s->galloc) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < n_backends; i++) {
        s->events[i] = loom_backend_event_new(loom_backend_get_device(backends[i]));
        s->copy_events[i] = s->events[i] ? loom_backend_event_new(loom_backend_get_device(backends[i])) : NULL;
    }
    s->debug = loom_env_flag("LOOM_SCHED_DEBUG", false);
    unsigned long long batch = 32;
    (void)loom_env_uint("LOOM_SCHED_OFFLOAD_BATCH", 0, 1 << 30, &batch);
    s->offload_min_batch = (int64_t)batch;
    return s;
}

void loom_backend_sched_free(loom_backend_sched_t s) {
    if (!s) return;
    for (int i = 0; i < s->n_backends; i++) {
        loom_backend_event_free(s->events[i]);
        loom_backend_event_free(s->copy_events[i]);
    }
    loom_gallocr_free(s->galloc);
    loom_free(s->ctx);
    free(s->pins);
    free(s->hs.keys);
    free(s->tb);
    free(s->sup);
    free(s->split_nodes);
    free(s->splits);
    free(s->inputs);
    free(s->rewires);
    free(s->gcopy.nodes);
    free(s->node_ids);
    free(s->leaf_ids);
    free(s);
}

/* ---------------------------------------------------------------- is this the graph last planned? */

static void fp_tensor(loom_backend_sched_t s, struct loom_fp * f, const struct loom_tensor * t) {
    loom_fp_add(f, (uintptr_t)t);
    loom_fp_add(f, (uint64_t)t->op << 32 | (uint64_t)t->type);
    loom_fp_add(f, (uint64_t)(uint32_t)t->flags);
    loom_fp_add(f, (uintptr_t)t->view_src + t->view_offs);
    for (int d = 0; d < LOOM_MAX_DIMS; d++) {
        loom_fp_add(f, (uint64_t)t->ne[d]);
        loom_fp_add(f, t->nb[d]);
    }
    for (int k = 0; k < LOOM_MAX_SRC; k++) loom_fp_add(f, (uintptr_t)t->src[k]);
    for (size_t k = 0; k < LOOM_MAX_OP_PARAMS / sizeof(int32_t); k += 2) {
        loom_fp_add(f, (uint64_t)(uint32_t)t->op_params[k] << 32 | (uint32_t)t->op_params[k + 1]);
    }
    /* memory placed outside the scheduler decides assignments; the scheduler's own does not */
    loom_fp_add(f, lsch_is_external(s, t) ? (uintptr_t)sched_base(t)->buffer + 1 : 0);
}

/* A cheap fingerprint of the graph: its pointer, every node's and leaf's identity, op, shape,
 * strides, sources, flags and pre-placed memory. */
static uint64_t graph_signature(loom_backend_sched_t s, const struct loom_cgraph * g) {
    struct loom_fp f, d;
    sched_owns_reset(s); /* buffer ownership is re-learnt for each graph */
    loom_fp_init(&f, (uintptr_t)g);
    loom_fp_init(&d, (uintptr_t)g);
    loom_fp_add(&f, (uint64_t)(uint32_t)g->n_nodes << 32 | (uint32_t)g->n_leafs);
    for (int i = 0; i < g->n_nodes; i++) {
        fp_tensor(s, &f, g->nodes[i]);
        loom_fp_add(&d, (uintptr_t)g->nodes[i]->data);
    }
    for (int j = 0; j < g->n_leafs; j++) {
        fp_tensor(s, &f, g->leafs[j]);
        loom_fp_add(&d, (uintptr_t)g->leafs[j]->data);
    }
    s->data_sig = loom_fp_final(&d);
    return loom_fp_final(&f);
}

static bool graph_has_memory(const struct loom_cgraph * g) {
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        const struct loom_tensor * t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (!sched_base(t)->data || !t->data) return false;
    }
    return true;
}

static bool is_current(loom_backend_sched_t s, struct loom_cgraph * g) {
    return s->graph == g && s->plan_pins_version == s->pins_version && s->sig == graph_signature(s, g);
}

/* ---------------------------------------------------------------- planning */

static enum loom_status plan(loom_backend_sched_t s, struct loom_cgraph * g) {
    s->graph = NULL;
    s->allocated = false;
    sched_owns_reset(s);
    enum loom_status st = lsch_assign(s, g);
    if (st == LOOM_OK) st = lsch_split_graph(s, g);
    if (st != LOOM_OK) return st;
    s->copy_bytes = 0;
    for (int i = 0; i < s->n_inputs; i++) s->copy_bytes += loom_nbytes(s->inputs[i].src);
    if (s->debug) lsch_log_plan(s);
    s->n_plans++;
    s->graph = g;
    s->sig = graph_signature(s, g);
    s->plan_pins_version = s->pins_version;
    return LOOM_OK;
}

enum loom_status loom_backend_sched_reserve(loom_backend_sched_t s, struct loom_cgraph * g) {
    enum loom_status st = plan(s, g);
    if (st == LOOM_OK) {
        lsch_apply_rewires(s);
        st = loom_gallocr_reserve_n(s->galloc, &s->gcopy, s->node_ids, s->leaf_ids);
        lsch_undo_rewires(s);
    }
    s->graph = NULL; /* measured, not placed: the next alloc plans again */
    s->allocated = false;
    return st;
}

/* A number no allocation of any scheduler in this process had before (so that a launch key is
 * never that of another scheduler's graph at the same addresses with other copies). */
static uint64_t next_alloc_epoch(void) {
    static uint64_t epoch;
    return __atomic_add_fetch(&epoch, 1, __ATOMIC_RELAXED);
}

enum loom_status loom_backend_sched_alloc_graph(loom_backend_sched_t s, struct loom_cgraph * g) {
    enum loom_status st = is_current(s, g) ? LOOM_OK : plan(s, g);
    if (st == LOOM_OK) {
        lsch_apply_rewires(s);
        st = loom_gallocr_alloc_graph_n(s->galloc, &s->gcopy, s->node_ids, s->leaf_ids);
        lsch_undo_rewires(s);
    }
    s->allocated = st == LOOM_OK;
    s->alloc_epoch = next_alloc_epoch();
    if (st != LOOM_OK) s->graph = NULL;
    return st;
}

/* The launch keys of the splits (struct loom_cgraph): the plan's signature, every address of the
 * graph ('data_sig', from a signature pass after which nothing was allocated) and the allocation
 * epoch (the input copies' addresses) name the work exactly; 0 where the addresses are not known
 * to be those of the last pass. */
static void set_launch_keys(loom_backend_sched_t s, bool known) {
    for (int k = 0; k < s->n_splits; k++) {
        uint64_t key = 0;
        if (known) {
            struct loom_fp f;
            loom_fp_init(&f, (uintptr_t)s);
            loom_fp_add(&f, s->sig);
            loom_fp_add(&f, s->data_sig);
            loom_fp_add(&f, s->alloc_epoch);
            loom_fp_add(&f, (uint64_t)k);
            key = loom_fp_final(&f) | 1;
        }
        s->splits[k].graph.launch_key = key;
    }
}

enum loom_status loom_backend_sched_graph_compute(loom_backend_sched_t s, struct loom_cgraph * g) {
    const bool current = s->allocated && is_current(s, g) && graph_has_memory(g);
    if (!current) {
        enum loom_status st = loom_backend_sched_alloc_graph(s, g);
        if (st != LOOM_OK) return st;
    }
    set_launch_keys(s, current);
    return lsch_compute_splits(s);
}

void loom_backend_sched_reset(loom_backend_sched_t s) {
    s->graph = NULL;
    s->allocated = false;
    s->n_pins = 0;
    s->pins_version++;
}

void loom_backend_sched_set_comm(loom_backend_sched_t s, loom_backend_comm_t comm) {
    s->comm = NULL;
    for (int r = 0; comm && r < loom_backend_comm_n_ranks(comm); r++) {
        s->rank_backend[r] = -1;
        for (int i = 0; i < s->n_backends; i++) {
            if (s->backends[i] == comm->backends[r]) s->rank_backend[r] = i;
        }
        if (s->rank_backend[r] < 0) {
            loom_log(LOOM_LOG_ERROR, "scheduler: the communicator's rank %d (%s) is not one of its backends", r,
                     loom_backend_name(comm->backends[r]));
            return;
        }
    }
    s->comm = comm;
    s->pins_version++; /* ALL_REDUCE support changed: plan again */
}

/* ---------------------------------------------------------------- pins */

static int backend_index(loom_backend_sched_t s, loom_backend_t backend) {
    for (int i = 0; i < s->n_backends; i++) {
        if (s->backends[i] == backend) return i;
    }
    return -1;
}

void loom_backend_sched_set_tensor_backend(loom_backend_sched_t s, struct loom_tensor * node, loom_backend_t backend) {
    int b = backend_index(s, backend);
    if (b < 0) {
        loom_log(LOOM_LOG_ERROR, "scheduler: cannot pin '%s' to a backend the scheduler does not have", lgal_describe(node).s);
        return;
    }
    s->pins_version++;
    for (int i = 0; i < s->n_pins; i++) {
        if (s->pins[i].node == node) {
            s->pins[i].backend = b;
            return;
        }
    }
    if (s->n_pins == s->cap_pins) {
        int cap = s->cap_pins ? 2 * s->cap_pins : 16;
        struct sched_pin * p = realloc(s->pins, (size_t)cap * sizeof *p);
        if (!p) {
            loom_log(LOOM_LOG_ERROR, "scheduler: out of host memory pinning '%s'", lgal_describe(node).s);
            return;
        }
        s->pins = p;
        s->cap_pins = cap;
    }
    s->pins[s->n_pins++] = (struct sched_pin){node, b};
}

loom_backend_t loom_backend_sched_get_tensor_backend(loom_backend_sched_t s, struct loom_tensor * node) {
    int * b = s->graph ? sched_tb(s, node) : NULL;
    if (b && *b >= 0) return s->backends[*b];
    for (int i = 0; i < s->n_pins; i++) {
        if (s->pins[i].node == node) return s->backends[s->pins[i].backend];
    }
    return NULL;
}

/* ---------------------------------------------------------------- introspection */

int loom_backend_sched_get_n_backends(loom_backend_sched_t s) { return s->n_backends; }

loom_backend_t loom_backend_sched_get_backend(loom_backend_sched_t s, int i) {
    return i >= 0 && i < s->n_backends ? s->backends[i] : NULL;
}

int loom_backend_sched_get_n_splits(loom_backend_sched_t s) { return s->graph ? s->n_splits : 0; }
int64_t loom_backend_sched_get_n_plans(loom_backend_sched_t s) { return s->n_plans; }
int loom_backend_sched_get_n_copies(loom_backend_sched_t s) { return s->graph ? s->n_inputs : 0; }
size_t loom_backend_sched_get_copy_bytes(loom_backend_sched_t s) { return s->graph ? s->copy_bytes : 0; }

size_t loom_backend_sched_get_buffer_size(loom_backend_sched_t s, loom_backend_t backend) {
    return loom_gallocr_get_buffer_size(s->galloc, backend_index(s, backend));
}

size_t loom_backend_sched_get_naive_size(loom_backend_sched_t s, loom_backend_t backend) {
    return loom_gallocr_get_naive_size(s->galloc, backend_index(s, backend));
}

/* ---------------------------------------------------------------- LOOM_SCHED_DEBUG=1 */

void lsch_log_plan(loom_backend_sched_t s) {
    loom_log(LOOM_LOG_INFO, "scheduler: %d splits, %d copies (%zu bytes per compute)", s->n_splits, s->n_inputs, s->copy_bytes);
    for (int k = 0; k < s->n_splits; k++) {
        const struct sched_split * sp = &s->splits[k];
        const char * bname = loom_backend_name(s->backends[sp->backend]);
        loom_log(LOOM_LOG_INFO, "split %d on %s: %d nodes, %d inputs", k, bname, sp->n_nodes, sp->n_inputs);
        for (int i = 0; i < sp->n_inputs; i++) {
            const struct sched_input * in = &s->inputs[sp->first_input + i];
            const char * from = in->src_backend >= 0 ? loom_backend_name(s->backends[in->src_backend]) : "its buffer";
            loom_log(LOOM_LOG_INFO, "  copy '%s' (%zu bytes%s) from %s", lgal_describe(in->src).s, loom_nbytes(in->src),
                     loom_is_contiguous(in->src) ? "" : ", strided", from);
        }
        for (int i = 0; i < sp->n_nodes; i++) {
            const struct loom_tensor * n = s->split_nodes[sp->first_node + i];
            loom_log(LOOM_LOG_INFO, "  %-10s %-24s -> %s", loom_op_name(n->op), lgal_describe(n).s, bname);
        }
    }
}
