/* fit.c -- how many layers fit on the offload device: sizes measured by a dry run (weights, KV cache, compute buffers), then chosen. */
#include "model-impl.h"

#include <stdio.h>
#include <string.h>

/* Bytes 't' takes in a buffer of 'buft': its allocation size padded to the type's alignment. */
static uint64_t placed_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t) {
    const size_t align = loom_backend_buft_get_alignment(buft);
    const size_t n = loom_backend_buft_get_alloc_size(buft, t);
    return (uint64_t)loom_pad(n, align ? align : 1);
}

/* The compute buffer of the largest step at the chosen context (n_batch tokens, the context full),
 * planned by the scheduler on the CPU in a context whose KV cache is never touched. */
static enum loom_status measure_compute(struct loom_model * m, struct loom_llama_context_params cp, uint64_t * bytes) {
    struct loom_llama_context * lctx = NULL;
    enum loom_status st = loom_llama_context_create(m, cp, true, &lctx);
    if (st != LOOM_OK) return st;
    const int32_t n = lctx->params.n_batch;
    lctx->n_past = lctx->params.n_ctx - n; /* the last batch of a full context attends over every cell */
    struct loom_init_params ip = {.mem_size = lctx->graph_mem_size, .mem_buffer = lctx->graph_mem, .no_alloc = true};
    struct loom_context * gctx = loom_init(ip);
    st = gctx ? LOOM_OK : LOOM_ERR_OOM;
    if (st == LOOM_OK) {
        struct loom_graph_inputs in;
        struct loom_cgraph * g = loom_llama_build_graph(lctx, gctx, n, &in);
        st = g ? loom_backend_sched_reserve(lctx->sched, g) : LOOM_ERR_OOM;
    }
    *bytes = 0;
    for (int i = 0; st == LOOM_OK && i < loom_backend_sched_get_n_backends(lctx->sched); i++) {
        *bytes += loom_backend_sched_get_buffer_size(lctx->sched, loom_backend_sched_get_backend(lctx->sched, i));
    }
    loom_free(gctx);
    loom_llama_context_free(lctx);
    return st;
}

enum loom_status loom_model_fit(struct loom_model_file * file, struct loom_model_params mp, struct loom_llama_context_params cp, size_t margin,
                                struct loom_fit * out) {
    memset(out, 0, sizeof *out);
    loom_backend_dev_t dev = NULL;
    if (mp.device) {
        dev = loom_backend_dev_by_name(mp.device);
    } else {
        for (size_t i = 0; i < loom_backend_dev_count() && !dev; i++) {
            if (loom_backend_dev_type(loom_backend_dev_get(i)) != LOOM_BACKEND_DEV_TYPE_CPU) dev = loom_backend_dev_get(i);
        }
    }
    if (!dev || loom_backend_dev_type(dev) == LOOM_BACKEND_DEV_TYPE_CPU) return LOOM_OK; /* nothing to offload to: 0 layers */
    out->device = loom_backend_dev_name(dev);
    /* the dry run: the weights mapped in place on the CPU (no copy), a context that touches no KV memory */
    mp.n_gpu_layers = 0;
    mp.use_mmap = true;
    mp.use_mlock = false;
    mp.progress = NULL;
    struct loom_model * m = NULL;
    enum loom_status st = loom_model_load_file(file, mp, &m);
    if (st != LOOM_OK) return st;
    const struct loom_hparams hparams = m->hp, * hp = &hparams; /* kept past loom_model_free */
    out->n_layer = hp->n_layer;
    if (hp->n_layer > LOOM_FIT_MAX_LAYERS) {
        loom_log(LOOM_LOG_ERROR, "fit: %d layers, more than the %d it sizes", hp->n_layer, LOOM_FIT_MAX_LAYERS);
        loom_model_free(m);
        return LOOM_ERR_UNSUPPORTED;
    }
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(dev);
    for (struct loom_tensor * t = loom_get_first_tensor(m->ctx_host); t; t = loom_get_next_tensor(m->ctx_host, t)) {
        int il = -1;
        if (sscanf(t->name, "blk.%d.", &il) == 1 && il >= 0 && il < hp->n_layer) out->layer_bytes[il] += placed_size(buft, t);
        else if (t == m->output || t == m->output_norm) out->output_bytes += placed_size(buft, t);
    }
    if (m->output == m->tok_embd) out->output_bytes += placed_size(buft, m->tok_embd); /* tied: a copy goes to the device */
    if (cp.n_ctx <= 0) cp.n_ctx = hp->n_ctx_train;
    if (cp.n_batch <= 0 || cp.n_batch > cp.n_ctx) cp.n_batch = cp.n_ctx;
    const int64_t n_embd_kv = (int64_t)hp->n_embd / hp->n_head * hp->n_head_kv;
    /* K and V per layer as the context creates them: [n_embd_kv, n_ctx] (V transposed without flash
     * attention, the same bytes: only a plain type is stored so) */
    struct loom_init_params ip = {.mem_size = 4 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * kctx = loom_init(ip);
    struct loom_tensor * k = kctx ? loom_new_tensor_2d(kctx, cp.type_k, n_embd_kv, cp.n_ctx) : NULL;
    struct loom_tensor * v = kctx ? loom_new_tensor_2d(kctx, cp.type_v, n_embd_kv, cp.n_ctx) : NULL;
    if (k && v) out->kv_layer_bytes = placed_size(buft, k) + placed_size(buft, v);
    loom_free(kctx);
    st = k && v ? measure_compute(m, cp, &out->compute_bytes) : LOOM_ERR_OOM;
    loom_model_free(m);
    if (st != LOOM_OK) return st;

    size_t free_mem = 0, total = 0;
    loom_backend_dev_memory(dev, &free_mem, &total);
    out->free_bytes = free_mem;
    /* the context's own reserve (see kv_cache_init's check) when it is larger than the margin asked */
    const uint64_t reserve = total / 16 < ((uint64_t)1 << 30) ? total / 16 : (uint64_t)1 << 30;
    out->margin_bytes = margin > reserve ? margin : reserve;
    const uint64_t budget = free_mem > out->margin_bytes + out->compute_bytes ? free_mem - out->margin_bytes - out->compute_bytes : 0;
    uint64_t need = 0;
    for (int n = 1; n <= hp->n_layer; n++) { /* the last n layers, and with all of them the output layer */
        const int il = hp->n_layer - n;
        need += out->layer_bytes[il] + out->kv_layer_bytes;
        if (need + (n == hp->n_layer ? out->output_bytes : 0) > budget) break;
        out->n_gpu_layers = n;
        out->need_bytes = need + (n == hp->n_layer ? out->output_bytes : 0);
    }
    return LOOM_OK;
}
