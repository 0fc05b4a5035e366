/* core-impl.h -- internals of the tensor core shared by its files (not a public header). */
#ifndef LOOM_CORE_IMPL_H
#define LOOM_CORE_IMPL_H

#include "loom.h"
#include "core/loom-internal.h"

/* Allocates 'size' bytes (aligned to LOOM_MEM_ALIGN) from the context's arena; aborts when full. */
void * loom_ctx_alloc(struct loom_context * ctx, size_t size);

/* Creates a tensor; when 'view_src' is given the tensor is a view at byte 'view_offs' of it
 * (resolved to the base) and gets no data of its own. */
struct loom_tensor * loom_new_tensor_impl(struct loom_context * ctx, enum loom_type type, int n_dims,
                                          const int64_t * ne, struct loom_tensor * view_src, size_t view_offs);

void loom_set_op_params(struct loom_tensor * t, const void * params, size_t size);
void loom_set_op_param_i32(struct loom_tensor * t, int i, int32_t v);
void loom_set_op_param_f32(struct loom_tensor * t, int i, float v);

#endif
