/* loom-internal.h -- what the library's layers, its tools and its tests share beyond the public
 * API (not installed): the body of a graph, the tensor hash set, graph views and the environment
 * helpers (docs/DESIGN.md lists the variables). */
#ifndef LOOM_INTERNAL_H
#define LOOM_INTERNAL_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

struct loom_hash_set {
    size_t size;                   /* slots */
    struct loom_tensor ** keys;    /* NULL = empty slot */
};

struct loom_cgraph {
    int size;                      /* capacity of nodes and of leafs */
    int n_nodes;                   /* ops to compute, in a valid execution order */
    int n_leafs;                   /* tensors with op NONE (weights, inputs) */
    struct loom_tensor ** nodes;
    struct loom_tensor ** leafs;
    struct loom_hash_set visited;  /* every tensor in the graph */
    uint64_t launch_key;           /* set by the graph's producer (the scheduler, for its splits): equal nonzero
                                    * keys mean the same nodes, parameters, shapes, strides and addresses as the
                                    * last graph with that key, so a backend may replay what it queued for it;
                                    * 0: unknown, the backend checks for itself */
};

/* A non-owning graph over nodes [i0, i1) of 'g' (for splits); it has no leafs and no hash set. */
struct loom_cgraph loom_graph_view(struct loom_cgraph * g, int i0, int i1);

/* Open-addressing set of tensor pointers used by the graph builder, allocator and scheduler. */
bool loom_hash_set_insert(struct loom_hash_set * s, struct loom_tensor * t); /* true if new */
bool loom_hash_set_contains(const struct loom_hash_set * s, const struct loom_tensor * t);
size_t loom_hash_set_find(const struct loom_hash_set * s, const struct loom_tensor * t); /* slot, or SIZE_MAX */
size_t loom_hash_size(size_t min_size); /* a good table size >= min_size */

/* Reads environment variable 'var' as a whole number in [lo, hi] into '*out'. False when it is
 * unset or empty, and false with a logged warning (naming the variable and the range) when it is
 * set to anything else. */
/* (LOOM_API here and for loom_env_str: the CUDA module reads its debug variables through them) */
LOOM_API bool loom_env_uint(const char * var, unsigned long long lo, unsigned long long hi, unsigned long long * out);
/* A switch from environment variable 'var': 'dflt' when it is unset or empty, else false for "0"
 * and true for anything else (LOOM_DEBUG, LOOM_SCHED_DEBUG, LOOM_ALLOC_CHECK). */
bool loom_env_flag(const char * var, bool dflt);
/* The value of environment variable 'var', or NULL when it is unset or empty. */
LOOM_API const char * loom_env_str(const char * var);

#ifdef __cplusplus
}
#endif

#endif
