/* loom-alloc.h -- the graph allocator: plans where every intermediate tensor of a graph lives in
 * one or more compute buffers, reusing memory once a tensor's last consumer has run.
 *
 * The idea (lifetime-based placement with a best-fit free list, measured once and then replayed)
 * is the one ggml's ggml-alloc.c popularised; this is Loom's own implementation of it.
 *
 * Rules the plan follows:
 *  - Only tensors without data are placed. Tensors that already have data (weights, the KV cache,
 *    anything placed by the caller) are left alone. Views are never placed themselves: they get
 *    their base's buffer and address (loom_backend_view_init) once the base is placed.
 *  - Leafs that need memory and tensors flagged LOOM_TENSOR_FLAG_INPUT are placed first, before
 *    any node runs, so they never overlap each other nor anything computed before their last use.
 *  - A tensor's memory returns to the free list after its last consumer has run. A view keeps its
 *    base alive: the consumers of a view count as consumers of the base.
 *  - Tensors flagged LOOM_TENSOR_FLAG_OUTPUT, and tensors nothing in the graph consumes, are never
 *    freed (the caller reads them after compute).
 *  - Element-wise ops (ADD, MUL, SCALE, SILU, GELU) run in place -- the result takes its first
 *    source's memory -- when that source is a non-view intermediate placed by this plan, in the same buffer,
 *    with the same layout (loom_are_same_layout), not an input or output, and the node is its only
 *    remaining consumer.
 *  - Free blocks are chosen best-fit (the smallest that grows the buffer least) and adjacent free
 *    blocks coalesce. Every offset honours the buffer type's alignment; every size is the buffer
 *    type's alloc_size, padded to the alignment.
 *  - A buffer type's max_size is respected by spreading the plan over several buffers ("chunks");
 *    no tensor straddles two.
 *
 * Ownership: tensors placed by an allocator belong to it until its next alloc_graph/reserve, which
 * may reuse their memory; copy results out (loom_backend_tensor_get) before building the next graph.
 */
#ifndef LOOM_ALLOC_H
#define LOOM_ALLOC_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_gallocr * loom_gallocr_t;

/* An allocator with one buffer id (0) of type 'buft'. Returns NULL (logged) when out of host memory. */
LOOM_API loom_gallocr_t loom_gallocr_new(loom_backend_buffer_type_t buft);
/* An allocator with 'n_bufs' buffer ids: id i places tensors in buffers of type bufts[i]. Two ids
 * with the same type still get separate buffers. Returns NULL (logged) on a bad argument or OOM. */
LOOM_API loom_gallocr_t loom_gallocr_new_n(loom_backend_buffer_type_t * bufts, int n_bufs);
/* Frees the allocator and its buffers (tensors it placed are left dangling). NULL is a no-op. */
LOOM_API void loom_gallocr_free(loom_gallocr_t galloc);

/* Measures 'graph' (every tensor in buffer id 0) and allocates buffers large enough for it; the
 * buffers only grow. Nothing in 'graph' is placed. Errors (logged; afterwards the allocator holds
 * no buffers and no plan, nothing leaked): LOOM_ERR_TOO_LARGE when one tensor alone exceeds the
 * buffer type's max_size (names it); LOOM_ERR_INVALID_ARG when a source that needs memory is not in
 * the graph; LOOM_ERR_OOM when a buffer cannot be allocated. */
LOOM_API enum loom_status loom_gallocr_reserve(loom_gallocr_t galloc, struct loom_cgraph * graph);
/* As loom_gallocr_reserve, with node i placed in buffer id node_buffer_ids[i] and leaf j in
 * leaf_buffer_ids[j] (either array may be NULL: id 0). Ids must be in [0, n_bufs). */
LOOM_API enum loom_status loom_gallocr_reserve_n(loom_gallocr_t galloc, struct loom_cgraph * graph, const int * node_buffer_ids,
                                        const int * leaf_buffer_ids);

/* Places every tensor of 'graph' that needs memory and initialises its views. A graph of the same
 * shape as the one last planned (same ops, types, shapes, strides, flags, topology and buffer ids)
 * reuses that plan without measuring again; any other graph is planned anew and the buffers grow
 * when it needs more. Tensors this allocator placed earlier (e.g. the same graph allocated again)
 * are re-placed. With LOOM_ALLOC_CHECK=1 in the environment the result is verified with
 * loom_gallocr_check. Errors as loom_gallocr_reserve, plus the buffers' own init failures; on any
 * error no tensor of 'graph' is left pointing into the allocator's buffers. */
LOOM_API enum loom_status loom_gallocr_alloc_graph(loom_gallocr_t galloc, struct loom_cgraph * graph);
/* As loom_gallocr_alloc_graph with explicit buffer ids (see loom_gallocr_reserve_n). */
LOOM_API enum loom_status loom_gallocr_alloc_graph_n(loom_gallocr_t galloc, struct loom_cgraph * graph, const int * node_buffer_ids,
                                            const int * leaf_buffer_ids);

/* Bytes of the buffers currently held for 'buffer_id' (all chunks together); 0 for a bad id. */
LOOM_API size_t loom_gallocr_get_buffer_size(loom_gallocr_t galloc, int buffer_id);
/* Number of buffers (chunks) held for 'buffer_id'; more than one when max_size forced a split. */
LOOM_API int loom_gallocr_get_n_chunks(loom_gallocr_t galloc, int buffer_id);
/* Buffer 'chunk' of 'buffer_id', or NULL. */
LOOM_API loom_backend_buffer_t loom_gallocr_get_buffer(loom_gallocr_t galloc, int buffer_id, int chunk);
/* Bytes the last plan would have needed for 'buffer_id' without any reuse: the sum of the padded
 * sizes of every tensor it placed there (in-place results counted separately). 0 for a bad id. */
LOOM_API size_t loom_gallocr_get_naive_size(loom_gallocr_t galloc, int buffer_id);
/* Number of planning (measuring) passes run so far; a reused plan does not count. */
LOOM_API int loom_gallocr_get_n_plans(loom_gallocr_t galloc);

/* Verifies the placement of 'graph' (after loom_gallocr_alloc_graph) from the tensors themselves,
 * independently of the plan: every tensor that needs memory has it; each tensor this allocator
 * placed lies wholly inside one of its buffers at an aligned offset; and no two of them whose
 * lifetimes overlap share a byte. A lifetime runs from the step that writes a tensor (before the
 * first node for leafs and inputs) to the last step that reads it or any view of it (forever for
 * outputs and for tensors nothing reads); two lifetimes that only touch at one step may share
 * bytes only as an in-place element-wise op over its own source at the same address and layout.
 * Cost: O(T log T + overlapping pairs) for T placed tensors. Returns LOOM_OK, or
 * LOOM_ERR_INVALID_ARG after logging each violation found (up to a few). */
LOOM_API enum loom_status loom_gallocr_check(loom_gallocr_t galloc, struct loom_cgraph * graph);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_ALLOC_H */
