/* galloc-impl.h -- internals of the graph allocator shared by src/backend/galloc*.c and the scheduler. */
#ifndef LOOM_GALLOC_IMPL_H
#define LOOM_GALLOC_IMPL_H

#include "backend-impl.h"
#include "loom-alloc.h"

/* ---------------------------------------------------------------- free list (galloc-freelist.c)
 * Planning state of one buffer id: a list of chunks (future buffers of at most 'max_size' bytes),
 * each with its free blocks sorted by offset. The last block of a chunk is its tail: it ends at
 * 'max_size' (unused memory beyond the high-water mark is free too). */

struct lgal_block {
    size_t offset; /* bytes from the chunk's start */
    size_t size;   /* bytes */
};

struct lgal_chunk {
    struct lgal_block * blocks; /* free blocks sorted by offset; never empty (tail) */
    int n_blocks, cap_blocks;
    int n_live;                   /* allocations currently held (bounds n_blocks - 1) */
    size_t high;                  /* bytes: largest end of any allocation so far */
};

struct lgal_arena {
    size_t alignment; /* bytes, a power of two */
    size_t max_size;  /* bytes per chunk; SIZE_MAX when unlimited */
    struct lgal_chunk * chunks;
    int n_chunks, cap_chunks;
};

/* A placement inside an arena. */
struct lgal_slot {
    int chunk;
    size_t offset; /* bytes, aligned */
    size_t size;   /* bytes taken from the free list (what lgal_arena_free gives back) */
};

void lgal_arena_init(struct lgal_arena * a, size_t alignment, size_t max_size);
void lgal_arena_release(struct lgal_arena * a);
/* Best-fit placement of 'size' bytes (> 0, <= max_size); LOOM_ERR_OOM when host memory runs out. */
enum loom_status lgal_arena_alloc(struct lgal_arena * a, size_t size, struct lgal_slot * out);
void lgal_arena_free(struct lgal_arena * a, const struct lgal_slot * slot);

/* ---------------------------------------------------------------- plan (galloc-plan.c) */

enum lgal_kind {
    GALLOC_KIND_NONE = 0, /* left alone: has data already, or a view */
    GALLOC_KIND_ALLOC,    /* placed by the plan at (buffer_id, slot) */
};

struct lgal_place {
    uint8_t kind;  /* enum lgal_kind */
    int buffer_id;
    struct lgal_slot slot;
};

/* Tensor -> index lookup over a graph's nodes and leafs (open addressing over loom_hash_set). */
struct lgal_index {
    struct loom_hash_set set;
    int * idx;  /* per slot: node i as i, leaf j as -(j + 1) */
    size_t cap; /* slots allocated */
};

enum loom_status lgal_index_build(struct lgal_index * ix, const struct loom_cgraph * graph);
/* Node i as i, leaf j as -(j + 1), INT32_MIN when absent. */
int lgal_index_find(const struct lgal_index * ix, const struct loom_tensor * t);
void lgal_index_release(struct lgal_index * ix);

struct lgal_plan_out {
    struct lgal_place * nodes;  /* per node of the graph */
    struct lgal_place * leafs;  /* per leaf */
    size_t * naive;               /* per buffer id: bytes without reuse */
};

/* Plans 'graph' into the arenas (one per buffer id, freshly initialised by the caller). */
enum loom_status lgal_plan(const struct loom_cgraph * graph, const struct lgal_index * ix, const int * node_ids,
                             const int * leaf_ids, loom_backend_buffer_type_t * bufts, struct lgal_arena * arenas,
                             int n_bufs, struct lgal_plan_out * out);

/* True for ops whose result may take its source's memory (element-wise, same layout). */
bool lgal_op_can_inplace(enum loom_op op, int src_slot);

/* Bytes 'buft' needs for 't', padded to 'align' and at least one unit (empty tensors still get a
 * distinct address). */
size_t lgal_tensor_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t, size_t align);

/* A printable description of 't' for messages: its name, or its op, type and shape when unnamed.
 * Use as lgal_describe(t).s within one expression (C11 temporary lifetime). */
struct lgal_name {
    char s[LOOM_MAX_NAME + 96];
};
struct lgal_name lgal_describe(const struct loom_tensor * t);

/* ---------------------------------------------------------------- the allocator (galloc.c) */

/* True when 'buffer' is one of the buffers this allocator holds. */
bool lgal_owns_buffer(loom_gallocr_t galloc, loom_backend_buffer_t buffer);

#endif
