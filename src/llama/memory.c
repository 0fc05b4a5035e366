/* memory.c -- what a model and its inference context hold in memory, per device (the CLI's memory breakdown). */
#include "model-impl.h"

/* True when 'buf' lives on 'dev': host memory (mapped weights, pinned staging, CPU buffers) counts
 * for the host (dev NULL), device memory for its device. */
static bool buffer_on(loom_backend_buffer_t buf, loom_backend_dev_t dev) {
    if (!buf) return false;
    loom_backend_buffer_type_t buft = loom_backend_buffer_get_type(buf);
    if (loom_backend_buft_is_host(buft)) return dev == NULL;
    return dev && loom_backend_buft_get_device(buft) == dev;
}

void loom_llama_memory_breakdown(const struct loom_model * model, const struct loom_llama_context * lctx, loom_backend_dev_t dev,
                                 struct loom_llama_memory * out) {
    *out = (struct loom_llama_memory){0};
    if (dev && loom_backend_dev_type(dev) == LOOM_BACKEND_DEV_TYPE_CPU) dev = NULL; /* the CPU's memory is the host's */
    for (int i = 0; model && i < model->n_buffers; i++) {
        if (buffer_on(model->buffers[i], dev)) out->model += loom_backend_buffer_get_size(model->buffers[i]);
    }
    if (!lctx) return;
    for (int d = 0; d <= LOOM_MAX_DEVICES; d++) {
        if (buffer_on(lctx->kv_buffers[d], dev)) out->context += loom_backend_buffer_get_size(lctx->kv_buffers[d]);
    }
    for (int i = 0; lctx->sched && i < loom_backend_sched_get_n_backends(lctx->sched); i++) {
        loom_backend_t b = loom_backend_sched_get_backend(lctx->sched, i);
        loom_backend_dev_t bdev = loom_backend_get_device(b);
        const bool host = loom_backend_dev_type(bdev) == LOOM_BACKEND_DEV_TYPE_CPU;
        if (host ? dev == NULL : bdev == dev) out->compute += loom_backend_sched_get_buffer_size(lctx->sched, b);
    }
}
