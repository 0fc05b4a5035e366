/* sched-impl.h -- internals of the scheduler shared by src/backend/sched*.c.
 *
 * The passes, each in its own file:
 *   sched-assign.c   which backend runs each node (pins, weights, expansion, fallbacks, sources)
 *   sched-split.c    splits where the backend changes, copies of inputs a split cannot read, and
 *                    the graph the allocator plans (copies first in each split)
 *   sched-compute.c  copies + compute per split, with events or synchronisation between backends
 *   sched.c          the object, lifecycle (when to re-plan), introspection, debug log */
#ifndef LOOM_SCHED_IMPL_H
#define LOOM_SCHED_IMPL_H

#include "galloc-impl.h"

#define SCHED_MAX_BACKENDS 16

/* One tensor a split reads from memory its backend cannot access, and the copy it reads instead. */
struct sched_input {
    struct loom_tensor * src;  /* what the split's nodes read (may be a strided view) */
    struct loom_tensor * copy; /* same type, shape and strides, in the split backend's compute buffer */
    struct loom_tensor * base; /* what the allocator places: 'copy' itself, or the byte range under it */
    int src_backend;           /* backend whose memory holds 'src'; -1 when no backend owns it */
};

struct sched_split {
    int backend;
    bool collective;           /* one LOOM_OP_ALL_REDUCE node, run through the communicator */
    uint32_t deps;             /* bit b: reads memory of backend b in place (weights aside) */
    uint32_t copy_from;        /* bit b: copies an input from backend b's memory */
    int first_node, n_nodes;   /* into sched->split_nodes: the compute nodes (view ops skipped) */
    int first_input, n_inputs; /* into sched->inputs */
    struct loom_cgraph graph;  /* over its nodes */
};

/* node->src[slot] reads 'copy' instead of 'orig' while the scheduler allocates and computes. */
struct sched_rewire {
    struct loom_tensor * node;
    int slot;
    struct loom_tensor * orig;
    struct loom_tensor * copy;
    int input; /* index into sched->inputs */
};

struct sched_pin {
    struct loom_tensor * node;
    int backend;
};

struct loom_backend_sched {
    int n_backends;
    loom_backend_t backends[SCHED_MAX_BACKENDS];
    loom_backend_buffer_type_t bufts[SCHED_MAX_BACKENDS];
    loom_backend_event_t events[SCHED_MAX_BACKENDS]; /* NULL where the device has none */
    loom_backend_event_t copy_events[SCHED_MAX_BACKENDS]; /* recorded after a split's input copies */
    loom_backend_comm_t comm;                        /* runs the ALL_REDUCE nodes; NULL: none */
    int rank_backend[SCHED_MAX_BACKENDS];            /* the backend index of each rank of 'comm' */
    loom_gallocr_t galloc;                           /* buffer id i = backend i */
    bool debug;                                      /* LOOM_SCHED_DEBUG=1 */
    int64_t offload_min_batch;                       /* see pass_anchors; 0 = off (LOOM_SCHED_OFFLOAD_BATCH) */

    struct sched_pin * pins;
    int n_pins, cap_pins;
    uint64_t pins_version;

    /* the plan of the graph last allocated */
    struct loom_cgraph * graph;   /* NULL: none */
    uint64_t sig;
    uint64_t data_sig;            /* every node's and leaf's address, from the last signature pass */
    uint64_t alloc_epoch;         /* the last allocation's number (an allocation may move the copies) */
    uint64_t plan_pins_version;
    bool allocated;

    struct loom_hash_set hs;      /* the graph's nodes and leafs; size a power of two (sched_tb) */
    int * tb;                     /* per hash slot: backend id, -1 unassigned */
    uint32_t * sup;               /* per hash slot: bit b = supports_op asked of backend b, bit 16 + b = its answer */
    size_t hs_cap;

    struct loom_tensor ** split_nodes;
    int cap_split_nodes;
    struct sched_split * splits;
    int n_splits, cap_splits;
    int64_t n_plans;                                 /* graphs planned (assigned and split) so far */
    struct sched_input * inputs;
    int n_inputs, cap_inputs;
    struct sched_rewire * rewires;
    int n_rewires, cap_rewires;

    struct loom_context * ctx;    /* copy tensors (no_alloc) */
    struct loom_cgraph gcopy;     /* what the allocator plans: the graph's nodes, copies at split starts */
    int * node_ids, * leaf_ids;   /* gcopy buffer ids */
    int cap_gcopy_nodes, cap_node_ids, cap_gcopy_leafs;

    size_t copy_bytes;            /* per compute */

    /* lgal_owns_buffer answers, kept while the allocator's buffers cannot change (one plan,
     * one signature): lsch_is_external asks for every tensor, many times a plan */
    struct { loom_backend_buffer_t buffer; bool owned; } owns[8];
    int n_owns;
};

/* sched-assign.c */
enum loom_status lsch_assign(loom_backend_sched_t s, struct loom_cgraph * graph);
/* Backend whose memory holds 't' (its base): the owner of its buffer, or where the plan puts it;
 * -1 when neither. */
int lsch_storage_backend(loom_backend_sched_t s, const struct loom_tensor * t);
/* The backend id of a buffer placed outside the scheduler, or -1. */
int lsch_backend_of_buffer(loom_backend_sched_t s, loom_backend_buffer_t buffer);
/* True when the base of 't' lives in memory placed outside the scheduler (weights, KV cache). */
bool lsch_is_external(loom_backend_sched_t s, const struct loom_tensor * t);
/* Forgets the answers lsch_is_external keeps; call where the allocator's buffers may have changed. */
static inline void sched_owns_reset(loom_backend_sched_t s) { s->n_owns = 0; }
/* The slot of s->hs (open addressing, linear probing, at most half full, s->hs.size > 0) that
 * holds 't', or the empty one where it would go. */
static inline size_t sched_probe(loom_backend_sched_t s, const struct loom_tensor * t) {
    const size_t mask = s->hs.size - 1;
    uint64_t x = (uint64_t)(uintptr_t)t;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    size_t i = (size_t)x & mask;
    while (s->hs.keys[i] && s->hs.keys[i] != t) i = (i + 1) & mask;
    return i;
}

/* The hash slot of 't' in s->hs, or SIZE_MAX when 't' is not in the graph. Inline: the passes
 * look tensors up many times a plan. */
static inline size_t sched_slot(loom_backend_sched_t s, const struct loom_tensor * t) {
    if (!s->hs.size) return SIZE_MAX;
    const size_t i = sched_probe(s, t);
    return s->hs.keys[i] ? i : SIZE_MAX;
}

/* Pointer to the backend id of 't' in the plan, or NULL when 't' is not in the graph. */
static inline int * sched_tb(loom_backend_sched_t s, const struct loom_tensor * t) {
    size_t slot = sched_slot(s, t);
    return slot == SIZE_MAX ? NULL : &s->tb[slot];
}

/* True for a model weight (its flag, or a weights buffer): read-only during a compute. */
bool lsch_is_weight(const struct loom_tensor * t);

/* sched-split.c */
enum loom_status lsch_split_graph(loom_backend_sched_t s, struct loom_cgraph * graph);
void lsch_apply_rewires(loom_backend_sched_t s);
void lsch_undo_rewires(loom_backend_sched_t s);

/* sched-compute.c */
enum loom_status lsch_compute_splits(loom_backend_sched_t s);

/* sched.c */
void lsch_log_plan(loom_backend_sched_t s);

static inline bool sched_is_compute_node(const struct loom_tensor * t) {
    return t->op != LOOM_OP_NONE && !loom_op_is_view(t->op);
}

static inline struct loom_tensor * sched_base(const struct loom_tensor * t) {
    return (struct loom_tensor *)(t->view_src ? t->view_src : t);
}

#endif
