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
    struct loom_init_params ip = {.mem_size = lctx->graph_mem_size, .mem_buffer = lctx->graph_mem, .no_alloc = true};
    struct loom_context * gctx = loom_init(ip);
    st = gctx ? LOOM_OK : LOOM_ERR_OOM;
    if (st == LOOM_OK) {
        struct loom_graph_inputs in;
        /* the last batch of a full context attends over every cell (with the logits of its last token, or all) */
        struct loom_cgraph * g = loom_llama_build_graph(lctx, gctx, n, lctx->params.n_ctx, lctx->params.logits_all ? n : 1, NULL, &in);
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

static int il_last(const struct loom_hparams * hp) { return hp->n_layer - 1; }

enum loom_status loom_model_fit(struct loom_model_file * file, struct loom_model_params mp, struct loom_llama_context_params cp, size_t margin,
                                struct loom_fit * out) {
    memset(out, 0, sizeof *out);
    struct loom_model probe; /* only the device choice of a load that offloads */
    memset(&probe, 0, sizeof probe);
    struct loom_model_params pp = mp;
    pp.n_gpu_layers = 1;
    enum loom_status pst = loom_model_pick_devices(&probe, &pp);
    if (pst != LOOM_OK) return pst;
    if (probe.n_devs == 0) return LOOM_OK; /* nothing to offload to: 0 layers */
    const int D = probe.n_devs;
    loom_backend_dev_t dev = probe.devs[0];
    out->n_devices = D;
    size_t used = 0;
    for (int d = 0; d < D && used < sizeof out->device_names; d++) {
        used += (size_t)snprintf(out->device_names + used, sizeof out->device_names - used, "%s%s", d ? "+" : "", loom_backend_dev_name(probe.devs[d]));
    }
    out->device = out->device_names;
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

    /* per device: its free memory less the context's reserve (or the margin asked) and the compute
     * buffers (the whole step's, measured on the CPU: an upper bound for each device's part) */
    uint64_t budget[LOOM_MAX_DEVICES];
    for (int d = 0; d < D; d++) {
        size_t free_mem = 0, total = 0;
        loom_backend_dev_memory(probe.devs[d], &free_mem, &total);
        const uint64_t reserve = total / 16 < ((uint64_t)1 << 30) ? total / 16 : (uint64_t)1 << 30;
        const uint64_t keep = margin > reserve ? margin : reserve;
        out->free_bytes += free_mem;
        out->margin_bytes += keep;
        budget[d] = free_mem > keep + out->compute_bytes ? free_mem - keep - out->compute_bytes : 0;
    }
    if (D > 1) out->compute_bytes *= (uint64_t)D;
    const bool row = probe.split_mode == LOOM_SPLIT_MODE_ROW;
    int dev_of[LOOM_FIT_MAX_LAYERS];
    for (int n = 1; n <= hp->n_layer; n++) { /* the last n layers, and with all of them the output layer */
        uint64_t need[LOOM_MAX_DEVICES] = {0};
        if (probe.split_mode == LOOM_SPLIT_MODE_LAYER) loom_split_layers(hp->n_layer, n, D, probe.split, dev_of);
        for (int il = hp->n_layer - n; il < hp->n_layer; il++) {
            const uint64_t bytes = out->layer_bytes[il] + out->kv_layer_bytes;
            if (row) {
                for (int d = 0; d < D; d++) need[d] += (uint64_t)((double)bytes * probe.split[d]) + 1;
            } else {
                need[probe.split_mode == LOOM_SPLIT_MODE_LAYER ? dev_of[il] : 0] += bytes;
            }
        }
        if (n == hp->n_layer) need[row ? probe.output_dev : probe.split_mode == LOOM_SPLIT_MODE_LAYER ? dev_of[il_last(hp)] : 0] += out->output_bytes;
        bool fits = true;
        uint64_t total_need = 0;
        for (int d = 0; d < D; d++) {
            fits = fits && need[d] <= budget[d];
            total_need += need[d];
        }
        if (!fits) break;
        out->n_gpu_layers = n;
        out->need_bytes = total_need;
    }
    return LOOM_OK;
}
