/* context.c -- an inference context: KV cache, scheduler, and the decode loop. */
#include "loom-cpu.h"
#include "model-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct loom_llama_context_params loom_llama_context_default_params(void) {
    return (struct loom_llama_context_params){
        .n_ctx = 0,
        .n_batch = 512,
        .n_ubatch = 0,
        .n_threads = 0,
        .logits_all = false,
        .type_k = LOOM_TYPE_F16,
        .type_v = LOOM_TYPE_F16,
        .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO,
    };
}

/* Refuses a KV cache larger than the free memory of the device that would hold it (before the
 * allocation, which would zero-fill it, or on the host take all memory and swap). */
static enum loom_status check_fits(struct loom_context * ctx, loom_backend_t backend, enum loom_type type, int64_t n_ctx) {
    uint64_t bytes = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) bytes += loom_nbytes(t);
    size_t free_mem = 0, total = 0;
    loom_backend_dev_t dev = loom_backend_get_device(backend);
    loom_backend_dev_memory(dev, &free_mem, &total);
    /* room left for the compute buffers and everything else: 1 GiB, or 1/16 of a smaller device */
    const uint64_t margin = total / 16 < ((uint64_t)1 << 30) ? total / 16 : (uint64_t)1 << 30;
    if (bytes == 0 || total == 0 || bytes + margin <= free_mem) return LOOM_OK; /* a device that reports no memory is not checked */
    loom_log(LOOM_LOG_ERROR, "cannot allocate the KV cache (%lld cells, %s) on %s: %.2f MiB asked, %.2f MiB free of %.2f MiB, "
             "%.2f MiB of which are kept for the compute buffers", (long long)n_ctx, loom_type_name(type),
             loom_backend_dev_name(dev), bytes / 1048576.0, free_mem / 1048576.0, total / 1048576.0, margin / 1048576.0);
    return LOOM_ERR_OOM;
}

/* The quantized cache types, where this build can quantize and dequantize them. */
static bool cache_quant_ok(void) {
    const enum loom_type q[2] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0};
    for (int i = 0; i < 2; i++) {
        const struct loom_type_traits * tt = loom_type_get_traits(q[i]);
        if (!tt->to_float || !tt->from_float) return false;
    }
    return true;
}

/* KV cache types: F32, F16, BF16, and Q8_0 / Q4_0 (the field's quantized caches) where the build
 * has them. */
static bool cache_type_ok(enum loom_type t) {
    if (t == LOOM_TYPE_F32 || t == LOOM_TYPE_F16 || t == LOOM_TYPE_BF16) return true;
    return (t == LOOM_TYPE_Q8_0 || t == LOOM_TYPE_Q4_0) && cache_quant_ok();
}

/* True when 'dev' runs the fused attention of one step on the cache types of 'cp' (asked with a
 * probe node of the layer's shapes in a metadata-only context). */
static bool dev_supports_flash_attn(const struct loom_model * model, const struct loom_llama_context_params * cp,
                                    loom_backend_dev_t dev) {
    const struct loom_hparams * hp = &model->hp;
    const int64_t head_dim = hp->n_embd / hp->n_head;
    struct loom_init_params ip = {.mem_size = 8 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * c = loom_init(ip);
    if (!c) return false;
    struct loom_tensor * q = loom_new_tensor_3d(c, LOOM_TYPE_F32, head_dim, 1, hp->n_head);
    struct loom_tensor * k = loom_new_tensor_3d(c, cp->type_k, head_dim, LOOM_LLAMA_KV_PAD, hp->n_head_kv);
    struct loom_tensor * v = loom_new_tensor_3d(c, cp->type_v, head_dim, LOOM_LLAMA_KV_PAD, hp->n_head_kv);
    struct loom_tensor * m = loom_new_tensor_2d(c, LOOM_TYPE_F32, LOOM_LLAMA_KV_PAD, 1);
    const bool ok = loom_backend_dev_supports_op(dev, loom_flash_attn_ext(c, q, k, v, m, 1.0f));
    loom_free(c);
    return ok;
}

/* Decides per layer whether its attention is fused ('fused' [n_layer]: cp->flash_attn, and for
 * AUTO whether the layer's device has the op), and refuses what the cache types cannot hold: a
 * block type needs heads of whole blocks, and for V the fused path in every layer. Logs the
 * outcome; errors are logged and returned (LOOM_ERR_UNSUPPORTED). */
static enum loom_status flash_attn_plan(const struct loom_model * m, const struct loom_llama_context_params * cp, bool * fused) {
    const int n_layer = m->hp.n_layer;
    const int64_t head_dim = m->hp.n_embd / m->hp.n_head;
    const enum loom_type types[2] = {cp->type_k, cp->type_v};
    for (int i = 0; i < 2; i++) {
        if (head_dim % loom_blck_size(types[i]) != 0) {
            loom_log(LOOM_LOG_ERROR, "KV cache type %s for %s needs heads of a multiple of %lld elements; this model's have %lld",
                     loom_type_name(types[i]), i ? "V" : "K", (long long)loom_blck_size(types[i]), (long long)head_dim);
            return LOOM_ERR_UNSUPPORTED;
        }
    }
    const enum loom_llama_flash_attn mode = cp->flash_attn;
    /* [0] the CPU, [1 + d] device d; with ROW a layer is fused where every device has the op */
    bool sup[1 + LOOM_MAX_DEVICES] = {false};
    for (int d = 0; d <= m->n_devs; d++) {
        loom_backend_dev_t dev = d ? m->devs[d - 1] : loom_backend_dev_by_name("CPU");
        sup[d] = dev && mode != LOOM_LLAMA_FLASH_ATTN_OFF && dev_supports_flash_attn(m, cp, dev);
    }
    bool all_devs = m->n_devs > 0;
    for (int d = 1; d <= m->n_devs; d++) all_devs = all_devs && sup[d];
    int n_fused = 0, n_moved = 0;
    const char * moved_from = NULL;
    for (int il = 0; il < n_layer; il++) {
        const int d = m->layers[il].dev + 1;
        const bool has = m->parts && d > 0 ? all_devs : sup[d];
        fused[il] = mode == LOOM_LLAMA_FLASH_ATTN_ON || (mode == LOOM_LLAMA_FLASH_ATTN_AUTO && has);
        n_fused += fused[il];
        n_moved += fused[il] && !has;
        if (fused[il] && !has && !moved_from) moved_from = loom_backend_dev_name(m->devs[d - 1]);
    }
    /* the unfused path stores V transposed, one position per element: a block of a quantized type
     * would straddle positions (the field refuses it too) */
    if (loom_blck_size(cp->type_v) > 1 && n_fused < n_layer) {
        loom_log(LOOM_LOG_ERROR, "KV cache type %s for V needs flash attention in every layer (-fa on%s); %d of %d layers have it",
                 loom_type_name(cp->type_v), mode == LOOM_LLAMA_FLASH_ATTN_OFF ? " or auto" : "", n_fused, n_layer);
        return LOOM_ERR_UNSUPPORTED;
    }
    if (n_moved > 0) {
        loom_log(LOOM_LOG_WARN, "flash attention: %s cannot run FLASH_ATTN_EXT; the attention of %d layers runs on the CPU",
                 moved_from, n_moved);
    }
    loom_log(LOOM_LOG_INFO, "flash attention: %s (%d of %d layers)", n_fused == 0 ? "off" : n_fused == n_layer ? "on" : "partly on",
             n_fused, n_layer);
    return LOOM_OK;
}

/* K and V of every layer, each layer's pair in the buffer type of the device that runs it (with ROW,
 * one pair per device over its KV heads); V one row per position where the layer's attention is
 * fused, else transposed. */
static enum loom_status kv_cache_init(struct loom_llama_context * lctx, bool measure) {
    const struct loom_model * m = lctx->model;
    const struct loom_hparams * hp = &m->hp;
    const int64_t head_dim = (int64_t)hp->n_embd / hp->n_head;
    const int64_t n_embd_kv = head_dim * hp->n_head_kv;
    const int64_t n_ctx = lctx->params.n_ctx;
    const enum loom_type tk = lctx->params.type_k, tv = lctx->params.type_v;
    const int parts = lctx->kv_parts = m->parts ? m->n_devs : 1;
    lctx->k_cache = calloc((size_t)hp->n_layer * parts, sizeof *lctx->k_cache);
    lctx->v_cache = calloc((size_t)hp->n_layer * parts, sizeof *lctx->v_cache);
    if (!lctx->k_cache || !lctx->v_cache) return LOOM_ERR_OOM;

    /* one metadata context per device so that each is placed with one call */
    struct loom_init_params ip = {.mem_size = (size_t)(2 * hp->n_layer + 2) * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    for (int d = 0; d <= m->n_devs; d++) {
        lctx->ctx_kv[d] = loom_init(ip);
        if (!lctx->ctx_kv[d]) return LOOM_ERR_OOM;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const struct loom_layer * L = &m->layers[il];
        const bool split = m->parts && L->offloaded;
        for (int p = 0; p < (split ? parts : 1); p++) {
            struct loom_context * c = lctx->ctx_kv[split ? 1 + p : L->dev + 1];
            const int64_t n = split ? m->parts[(size_t)il * parts + p].n_head_kv * head_dim : n_embd_kv;
            struct loom_tensor ** k = &lctx->k_cache[(size_t)il * parts + p], ** v = &lctx->v_cache[(size_t)il * parts + p];
            *k = loom_new_tensor_2d(c, tk, n, n_ctx);
            *v = lctx->flash_attn[il] ? loom_new_tensor_2d(c, tv, n, n_ctx) : loom_new_tensor_2d(c, tv, n_ctx, n);
            loom_format_name(*k, split ? "cache_k_l%d@%d" : "cache_k_l%d", il, p);
            loom_format_name(*v, split ? "cache_v_l%d@%d" : "cache_v_l%d", il, p);
        }
    }
    const double per_token = (double)hp->n_layer * (double)(loom_row_size(tk, n_embd_kv) + loom_row_size(tv, n_embd_kv));
    for (int d = 0; d <= m->n_devs; d++) {
        loom_backend_t backend = d ? lctx->backend_devs[d - 1] : lctx->backend_cpu;
        enum loom_status st = measure ? LOOM_OK : check_fits(lctx->ctx_kv[d], backend, tk, n_ctx);
        if (st != LOOM_OK) return st;
        lctx->kv_buffers[d] = loom_backend_alloc_ctx_tensors(lctx->ctx_kv[d], backend, &st);
        if (st != LOOM_OK) return st;
        if (lctx->kv_buffers[d] && !measure) {
            if (loom_backend_buffer_is_host(lctx->kv_buffers[d])) /* read whole every token: huge pages, before the clear touches it */
                loom_cpu_advise_huge_pages(loom_backend_buffer_get_base(lctx->kv_buffers[d]), loom_backend_buffer_get_size(lctx->kv_buffers[d]));
            loom_backend_buffer_clear(lctx->kv_buffers[d], 0);
            loom_log(LOOM_LOG_INFO, "KV cache: %8.2f MiB on %s (K %s, V %s, %d cells)",
                     loom_backend_buffer_get_size(lctx->kv_buffers[d]) / 1048576.0, loom_backend_name(backend),
                     loom_type_name(tk), loom_type_name(tv), (int)n_ctx);
        }
    }
    loom_log(LOOM_LOG_INFO, "KV cache: %.2f KiB per token (K %s, V %s, %d layers)", per_token / 1024.0, loom_type_name(tk),
             loom_type_name(tv), hp->n_layer);
    return LOOM_OK;
}

/* Room for 'rows' rows of logits in place of the old ones: pinned host memory of the output
 * layer's device where it has a host buffer type and the rows take at most
 * LOOM_LLAMA_PINNED_LOGITS bytes (a step's copy from the device then needs no staging through the
 * driver's bounce buffer; token generation takes one row), else the heap. */
static enum loom_status alloc_logits(struct loom_llama_context * lctx, int32_t rows) {
    const struct loom_model * m = lctx->model;
    const size_t size = (size_t)rows * (size_t)m->hp.n_vocab * sizeof(float);
    loom_backend_dev_t dev = m->output_offloaded && size <= LOOM_LLAMA_PINNED_LOGITS ? m->devs[m->output_dev] : NULL;
    loom_backend_buffer_type_t host = dev ? loom_backend_dev_host_buffer_type(dev) : NULL;
    loom_backend_buffer_t buf = host ? loom_backend_buft_alloc_buffer(host, size) : NULL;
    float * l = buf ? loom_backend_buffer_get_base(buf) : malloc(size);
    if (!l) return LOOM_ERR_OOM;
    if (lctx->logits_buf) loom_backend_buffer_free(lctx->logits_buf);
    else free(lctx->logits);
    lctx->logits = l;
    lctx->logits_buf = buf;
    lctx->logits_cap = rows;
    return LOOM_OK;
}

void loom_llama_context_free(struct loom_llama_context * lctx) {
    if (!lctx) return;
    if (lctx->host_steps) {
        const double k = 1.0 / (double)lctx->host_steps;
        loom_log(LOOM_LOG_DEBUG, "one-token steps: %lld; per step (ms): graph %.3f, inputs %.3f, compute queued %.3f, logits (waits for the compute) %.3f",
                 (long long)lctx->host_steps, lctx->host_us[0] * k / 1000, lctx->host_us[1] * k / 1000, lctx->host_us[2] * k / 1000,
                 lctx->host_us[3] * k / 1000);
    }
    loom_free(lctx->graph_ctx);
    loom_backend_sched_free(lctx->sched);
    loom_backend_comm_free(lctx->comm);
    for (int d = 0; d <= LOOM_MAX_DEVICES; d++) {
        loom_backend_buffer_free(lctx->kv_buffers[d]);
        loom_free(lctx->ctx_kv[d]);
    }
    for (int d = 0; d < LOOM_MAX_DEVICES; d++) loom_backend_free(lctx->backend_devs[d]);
    loom_backend_free(lctx->backend_cpu);
    free(lctx->k_cache);
    free(lctx->v_cache);
    free(lctx->flash_attn);
    free(lctx->graph_mem);
    free(lctx->mask);
    if (lctx->logits_buf) loom_backend_buffer_free(lctx->logits_buf);
    else free(lctx->logits);
    free(lctx->out_row);
    loom_kv_cells_free(&lctx->cells);
    free(lctx);
}

static enum loom_status init_backends(struct loom_llama_context * lctx) {
    lctx->backend_cpu = loom_backend_cpu_init();
    if (!lctx->backend_cpu) return LOOM_ERR_OOM;
    loom_backend_cpu_set_n_threads(lctx->backend_cpu, lctx->params.n_threads > 0 ? lctx->params.n_threads
                                                                                 : loom_backend_cpu_get_n_threads(lctx->backend_cpu));
    const struct loom_model * m = lctx->model;
    loom_backend_t list[1 + LOOM_MAX_DEVICES];
    loom_backend_buffer_type_t bufts[1 + LOOM_MAX_DEVICES] = {NULL};
    int n = 0;
    for (int d = 0; d < m->n_devs; d++) {
        lctx->backend_devs[d] = loom_backend_dev_init(m->devs[d], NULL);
        if (!lctx->backend_devs[d]) return LOOM_ERR_BACKEND;
        list[n++] = lctx->backend_devs[d];
    }
    if (m->parts) {
        lctx->comm = loom_backend_comm_new(lctx->backend_devs, m->n_devs);
        if (!lctx->comm) return LOOM_ERR_UNSUPPORTED;
    }
    /* with a device, the CPU's compute memory (the step's inputs, what crosses to the device) is
     * the device's pinned host memory where it has one: copies from it run asynchronously */
    if (lctx->model->dev_offload) bufts[n] = loom_backend_dev_host_buffer_type(lctx->model->dev_offload);
    list[n++] = lctx->backend_cpu;
    lctx->sched = loom_backend_sched_new(list, bufts, n, loom_llama_graph_max_nodes(lctx->model));
    if (lctx->sched && lctx->comm) loom_backend_sched_set_comm(lctx->sched, lctx->comm);
    return lctx->sched ? LOOM_OK : LOOM_ERR_OOM;
}

enum loom_status loom_llama_context_new(struct loom_model * model, struct loom_llama_context_params params,
                                        struct loom_llama_context ** out) {
    return loom_llama_context_create(model, params, false, out);
}

/* With layers on a GPU: one prompt batch and one generation step now, then the cache as new, so
 * that the device's one-time work (library handles and their first products, kernel modules
 * loaded on first launch, the generation graph's capture) is done here and not in the caller's
 * first step. */
static enum loom_status warm_up(struct loom_llama_context * lctx) {
    const int64_t t0 = loom_time_us();
    int32_t tokens[8] = {0};
    int32_t n = lctx->params.n_batch < 8 ? lctx->params.n_batch : 8;
    if (n > lctx->params.n_ctx - 1) n = lctx->params.n_ctx - 1;
    enum loom_status st = n > 0 ? loom_llama_decode(lctx, tokens, n) : LOOM_OK;
    if (st == LOOM_OK) st = loom_llama_decode(lctx, tokens, 1);
    loom_llama_kv_clear(lctx);
    lctx->n_logits = 0;
    loom_log(LOOM_LOG_DEBUG, "context: device warm-up (%d + 1 tokens) in %.1f ms", n, (double)(loom_time_us() - t0) / 1000.0);
    return st;
}

enum loom_status loom_llama_context_create(struct loom_model * model, struct loom_llama_context_params params, bool measure,
                                           struct loom_llama_context ** out) {
    *out = NULL;
    const struct loom_hparams * hp = &model->hp;
    if (params.n_ctx <= 0) params.n_ctx = hp->n_ctx_train;
    if (params.n_batch <= 0 || params.n_batch > params.n_ctx) params.n_batch = params.n_ctx;
    if (params.n_ctx <= 0 || params.n_ctx > (1 << 24)) {
        loom_log(LOOM_LOG_ERROR, "context size %d out of range", params.n_ctx);
        return LOOM_ERR_INVALID_ARG;
    }
    const enum loom_type types[2] = {params.type_k, params.type_v};
    for (int i = 0; i < 2; i++) {
        if (!cache_type_ok(types[i])) {
            loom_log(LOOM_LOG_ERROR, "KV cache type %s for %s not supported (%s)", loom_type_name(types[i]), i ? "V" : "K",
                     cache_quant_ok() ? "f32, f16, bf16, q8_0 or q4_0" : "f32, f16 or bf16");
            return LOOM_ERR_UNSUPPORTED;
        }
    }
    if (params.flash_attn != LOOM_LLAMA_FLASH_ATTN_AUTO && params.flash_attn != LOOM_LLAMA_FLASH_ATTN_OFF &&
        params.flash_attn != LOOM_LLAMA_FLASH_ATTN_ON) {
        loom_log(LOOM_LOG_ERROR, "flash attention mode %d out of range (-1 auto, 0 off, 1 on)", (int)params.flash_attn);
        return LOOM_ERR_INVALID_ARG;
    }
    /* decided before anything is made, so that a refusal is the one error logged */
    bool * fused = calloc((size_t)hp->n_layer, sizeof *fused);
    if (!fused) return LOOM_ERR_OOM;
    enum loom_status fst = flash_attn_plan(model, &params, fused);
    if (fst != LOOM_OK) {
        free(fused);
        return fst;
    }
    struct loom_llama_context * lctx = calloc(1, sizeof *lctx);
    if (!lctx) {
        free(fused);
        return LOOM_ERR_OOM;
    }
    lctx->flash_attn = fused;
    lctx->model = model;
    lctx->params = params;
    size_t max_nodes = loom_llama_graph_nodes(lctx);
    lctx->graph_mem_size = max_nodes * 2 * loom_tensor_overhead() + loom_graph_overhead(max_nodes) + 4096;
    lctx->graph_mem = malloc(lctx->graph_mem_size);
    size_t n_out = params.logits_all ? (size_t)params.n_batch : 1;
    enum loom_status st = lctx->graph_mem ? alloc_logits(lctx, (int32_t)n_out) : LOOM_ERR_OOM;
    if (st == LOOM_OK) st = loom_kv_cells_init(&lctx->cells, params.n_ctx);
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "cannot create the inference context: out of host memory for the logits (%.2f MiB) and graph",
                 (double)n_out * hp->n_vocab * sizeof(float) / 1048576.0);
    }
    if (st == LOOM_OK) st = init_backends(lctx);
    if (st == LOOM_OK) st = kv_cache_init(lctx, measure);
    if (st == LOOM_OK && !measure && lctx->backend_devs[0] && loom_backend_dev_type(model->dev_offload) == LOOM_BACKEND_DEV_TYPE_GPU) {
        st = warm_up(lctx);
    }
    if (st != LOOM_OK && st != LOOM_ERR_OOM && st != LOOM_ERR_UNSUPPORTED) { /* unsupported: the reason was the one line logged */
        loom_log(LOOM_LOG_ERROR, "cannot create the inference context: %s", loom_status_str(st));
    }
    if (st != LOOM_OK) { /* out of memory: the allocation that failed said where and how much */
        loom_llama_context_free(lctx);
        return st;
    }
    *out = lctx;
    return LOOM_OK;
}

int32_t loom_llama_n_ctx(const struct loom_llama_context * lctx) { return lctx->params.n_ctx; }

int32_t loom_llama_n_flash_attn_layers(const struct loom_llama_context * lctx) {
    int32_t n = 0;
    for (int il = 0; il < lctx->model->hp.n_layer; il++) n += lctx->flash_attn[il];
    return n;
}
loom_backend_sched_t loom_llama_get_sched(struct loom_llama_context * lctx) { return lctx->sched; }

loom_backend_t loom_llama_layer_backend(const struct loom_llama_context * lctx, int il) {
    const int d = lctx->model->layers[il].dev;
    return d >= 0 ? lctx->backend_devs[d] : lctx->backend_cpu;
}

/* One step's tokens (at most n_batch), each with its position, sequence, cache cell and whether its
 * logits are wanted. */
struct ubatch {
    const int32_t * token, * pos, * seq;
    const int8_t * logits;
    int32_t n;
    int32_t * cells;    /* [n] */
    int32_t * out_ids;  /* [n_out] indices of the tokens with logits */
    int32_t n_out;
};

/* One input's data, queued on the backend that holds it: in stream order before the step's
 * compute, without waiting for the device. 'data' must stay valid until the compute is done. */
static enum loom_status put_input(struct loom_llama_context * lctx, struct loom_tensor * t, const void * data, size_t size) {
    loom_backend_t b = loom_backend_sched_get_tensor_backend(lctx->sched, t);
    return b ? loom_backend_tensor_set_async(b, t, data, 0, size) : loom_backend_tensor_set(t, data, 0, size);
}

/* Fills the step's inputs: token ids, positions, cells, the mask from the cells' tags, and the
 * indices of the outputs. */
static enum loom_status set_inputs(struct loom_llama_context * lctx, const struct loom_graph_inputs * in, const struct ubatch * ub) {
    const int64_t n_kv = in->kq_mask->ne[0];
    const int32_t n = ub->n;
    const size_t n_mask = (size_t)n * (size_t)n_kv;
    if (n_mask > lctx->mask_cap) {
        float * m = realloc(lctx->mask, n_mask * sizeof *m);
        if (!m) return LOOM_ERR_OOM;
        lctx->mask = m;
        lctx->mask_cap = n_mask;
    }
    loom_kv_cells_mask(&lctx->cells, n_kv, ub->pos, ub->seq, n, lctx->mask);
    enum loom_status st = put_input(lctx, in->tokens, ub->token, (size_t)n * sizeof *ub->token);
    if (st == LOOM_OK) st = put_input(lctx, in->pos, ub->pos, (size_t)n * sizeof *ub->pos);
    if (st == LOOM_OK) st = put_input(lctx, in->kv_idx, ub->cells, (size_t)n * sizeof *ub->cells);
    if (st == LOOM_OK) st = put_input(lctx, in->kq_mask, lctx->mask, n_mask * sizeof *lctx->mask);
    if (st == LOOM_OK && in->out_ids) st = put_input(lctx, in->out_ids, ub->out_ids, (size_t)ub->n_out * sizeof *ub->out_ids);
    return st;
}

/* Logs the compute memory the scheduler planned per backend, against the naive sum of all
 * intermediates, once for each new largest batch. */
static void log_compute_memory(struct loom_llama_context * lctx, int32_t n_tokens) {
    lctx->max_batch_logged = n_tokens;
    for (int i = 0; i < loom_backend_sched_get_n_backends(lctx->sched); i++) {
        loom_backend_t b = loom_backend_sched_get_backend(lctx->sched, i);
        loom_log(LOOM_LOG_DEBUG, "compute buffer (%d tokens, %d cells in use): %8.2f MiB planned on %s, naive %8.2f MiB; %d splits, %d copies",
                 n_tokens, lctx->cells.used, loom_backend_sched_get_buffer_size(lctx->sched, b) / 1048576.0, loom_backend_name(b),
                 loom_backend_sched_get_naive_size(lctx->sched, b) / 1048576.0, loom_backend_sched_get_n_splits(lctx->sched),
                 loom_backend_sched_get_n_copies(lctx->sched));
    }
}

/* Drops the kept graph; the next step builds and plans anew. */
static void drop_graph(struct loom_llama_context * lctx) {
    loom_free(lctx->graph_ctx);
    lctx->graph_ctx = NULL;
    lctx->graph = NULL;
}

/* The graph for a step of 'n' tokens with 'n_out' outputs: the kept one when its shape matches
 * (token generation: the same graph for LOOM_LLAMA_KV_PAD positions, its plan and the device's
 * captured work reused), else a new one, planned and allocated by the scheduler. */
static enum loom_status step_graph(struct loom_llama_context * lctx, int32_t n, int32_t n_out, const struct loom_llama_step * step) {
    const int64_t n_kv = loom_llama_kv_cells(lctx);
    /* a pipelined prompt's micro-batches attend over cells that depend on the step's cells: rebuilt */
    const bool pipelined = n > 1 && lctx->model->split_mode == LOOM_SPLIT_MODE_LAYER;
    if (lctx->graph && !pipelined && lctx->graph_n_tokens == n && lctx->graph_n_kv == n_kv && lctx->graph_n_outputs == n_out) {
        return LOOM_OK;
    }
    drop_graph(lctx);
    struct loom_init_params ip = {.mem_size = lctx->graph_mem_size, .mem_buffer = lctx->graph_mem, .no_alloc = true};
    lctx->graph_ctx = loom_init(ip);
    if (!lctx->graph_ctx) return LOOM_ERR_OOM;
    loom_backend_sched_reset(lctx->sched);
    lctx->graph = loom_llama_build_graph(lctx, lctx->graph_ctx, n, n_kv, n_out, step, &lctx->graph_in);
    lctx->graph_n_tokens = n;
    lctx->graph_n_kv = n_kv;
    lctx->graph_n_outputs = n_out;
    enum loom_status st = loom_backend_sched_alloc_graph(lctx->sched, lctx->graph);
    if (st != LOOM_OK) drop_graph(lctx);
    return st;
}

/* Runs one step: takes the cells, computes, and copies its logits to rows row0.. of lctx->logits.
 * On failure the step's cells are freed again. */
static enum loom_status decode_ubatch(struct loom_llama_context * lctx, struct ubatch * ub, int32_t row0) {
    const int32_t n = ub->n;
    if (!loom_kv_cells_find(&lctx->cells, n, ub->cells)) return LOOM_ERR_TOO_LARGE; /* checked by the caller */
    struct loom_llama_step step = {.cells = ub->cells, .hi_before = lctx->cells.n_hi};
    for (int32_t i = 0; i < n; i++) loom_kv_cells_set(&lctx->cells, ub->cells[i], ub->seq[i], ub->pos[i]);
    ub->n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ub->logits[i]) ub->out_ids[ub->n_out++] = i;
    }
    step.last_only = ub->n_out == 0 || (ub->n_out == 1 && ub->out_ids[0] == n - 1);
    int64_t t[5];
    t[0] = loom_time_us();
    enum loom_status st = step_graph(lctx, n, ub->n_out, &step);
    const struct loom_graph_inputs * in = &lctx->graph_in;
    t[1] = loom_time_us();
    if (st == LOOM_OK) st = set_inputs(lctx, in, ub);
    t[2] = loom_time_us();
    if (st == LOOM_OK) st = loom_backend_sched_graph_compute(lctx->sched, lctx->graph);
    t[3] = loom_time_us();
    if (st == LOOM_OK && in->logits) {
        st = loom_backend_tensor_get(in->logits, lctx->logits + (size_t)row0 * lctx->model->hp.n_vocab, 0, loom_nbytes(in->logits));
    }
    t[4] = loom_time_us();
    if (n == 1) {
        for (int k = 0; k < 4; k++) lctx->host_us[k] += t[k + 1] - t[k];
        lctx->host_steps++;
    }
    if (st == LOOM_OK) {
        if (n > lctx->max_batch_logged) log_compute_memory(lctx, n);
    } else {
        /* inputs queued before a failure read the caller's arrays and the mask: let them land */
        for (int i = 0; i < loom_backend_sched_get_n_backends(lctx->sched); i++) {
            (void)loom_backend_synchronize(loom_backend_sched_get_backend(lctx->sched, i));
        }
        for (int32_t i = 0; i < n; i++) loom_kv_cells_release(&lctx->cells, ub->cells[i]);
        drop_graph(lctx);
    }
    if (lctx->mask_cap > LOOM_LLAMA_MASK_KEEP) { /* a prompt's mask: not kept for the steps after it */
        free(lctx->mask);
        lctx->mask = NULL;
        lctx->mask_cap = 0;
    }
    return st;
}

/* Makes room for 'n_out' rows of logits and 'n' tokens' row map. */
static enum loom_status reserve_outputs(struct loom_llama_context * lctx, int32_t n, int32_t n_out) {
    const size_t n_vocab = (size_t)lctx->model->hp.n_vocab;
    if (n_out > lctx->logits_cap && alloc_logits(lctx, n_out) != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "out of host memory for the logits of %d tokens (%.2f MiB)", n_out,
                 (double)n_out * n_vocab * sizeof(float) / 1048576.0);
        return LOOM_ERR_OOM;
    }
    if (n > lctx->out_row_cap) {
        int32_t * r = realloc(lctx->out_row, (size_t)n * sizeof *r);
        if (!r) return LOOM_ERR_OOM;
        lctx->out_row = r;
        lctx->out_row_cap = n;
    }
    return LOOM_OK;
}

enum loom_status loom_llama_decode_batch(struct loom_llama_context * lctx, const struct loom_llama_batch * batch) {
    if (!lctx || !batch || batch->n_tokens <= 0 || !batch->token || !batch->pos || !batch->seq_id) {
        loom_log(LOOM_LOG_ERROR, "decode: an empty batch or a NULL array");
        return LOOM_ERR_INVALID_ARG;
    }
    const int32_t n_tokens = batch->n_tokens, n_vocab = lctx->model->hp.n_vocab;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (batch->token[i] < 0 || batch->token[i] >= n_vocab) {
            loom_log(LOOM_LOG_ERROR, "token id %d (batch index %d) outside the vocabulary (0..%d)", batch->token[i], i, n_vocab - 1);
            return LOOM_ERR_INVALID_ARG;
        }
        if (batch->pos[i] < 0 || batch->seq_id[i] < 0) {
            loom_log(LOOM_LOG_ERROR, "batch index %d: position %d and sequence id %d must not be negative", i, batch->pos[i],
                     batch->seq_id[i]);
            return LOOM_ERR_INVALID_ARG;
        }
        n_out += batch->logits ? batch->logits[i] != 0 : i == n_tokens - 1;
    }
    const int32_t n_free = lctx->cells.size - lctx->cells.used;
    if (n_tokens > n_free) {
        loom_log(LOOM_LOG_ERROR, "the KV cache is full: %d token%s cells, %d of its %d cells are free", n_tokens,
                 n_tokens == 1 ? " needs" : "s need", n_free, lctx->cells.size);
        return LOOM_ERR_TOO_LARGE;
    }
    enum loom_status st = reserve_outputs(lctx, n_tokens, n_out);
    if (st != LOOM_OK) return st;
    const int32_t n_batch = lctx->params.n_batch;
    int32_t * scratch = malloc((size_t)(n_tokens < n_batch ? n_tokens : n_batch) * 2 * sizeof *scratch);
    int8_t * flags = batch->logits ? NULL : calloc((size_t)n_tokens, 1);
    if (!scratch || (!batch->logits && !flags)) {
        free(scratch), free(flags);
        return LOOM_ERR_OOM;
    }
    if (flags) flags[n_tokens - 1] = 1;
    const int8_t * want = batch->logits ? batch->logits : flags;
    lctx->n_last = n_tokens;
    lctx->n_logits = 0;
    for (int32_t i = 0; i < n_tokens; i++) lctx->out_row[i] = -1;
    for (int32_t i0 = 0; i0 < n_tokens && st == LOOM_OK; i0 += n_batch) {
        struct ubatch ub = {.token = batch->token + i0, .pos = batch->pos + i0, .seq = batch->seq_id + i0, .logits = want + i0,
                            .n = n_tokens - i0 < n_batch ? n_tokens - i0 : n_batch};
        ub.cells = scratch;
        ub.out_ids = scratch + ub.n;
        st = decode_ubatch(lctx, &ub, lctx->n_logits);
        if (st != LOOM_OK) break;
        for (int32_t k = 0; k < ub.n_out; k++) lctx->out_row[i0 + ub.out_ids[k]] = lctx->n_logits + k;
        lctx->n_logits += ub.n_out;
    }
    if (st != LOOM_OK) { /* the logits of the steps that ran are not those of the whole batch */
        lctx->n_last = 0;
        lctx->n_logits = 0;
    }
    free(scratch);
    free(flags);
    return st;
}

enum loom_status loom_llama_decode(struct loom_llama_context * lctx, const int32_t * tokens, int32_t n_tokens) {
    if (n_tokens <= 0) return LOOM_ERR_INVALID_ARG;
    const int32_t n_past = loom_llama_n_past(lctx);
    if (n_tokens > lctx->params.n_ctx - n_past) {
        loom_log(LOOM_LOG_ERROR, "%d token%s not fit in the context: %d of %d positions used", n_tokens, n_tokens == 1 ? " does" : "s do",
                 n_past, lctx->params.n_ctx);
        return LOOM_ERR_TOO_LARGE;
    }
    int32_t * pos = malloc((size_t)n_tokens * 2 * sizeof *pos);
    int8_t * logits = malloc((size_t)n_tokens);
    enum loom_status st = pos && logits ? LOOM_OK : LOOM_ERR_OOM;
    if (st == LOOM_OK) {
        int32_t * seq = pos + n_tokens;
        for (int32_t i = 0; i < n_tokens; i++) {
            pos[i] = n_past + i;
            seq[i] = 0;
            logits[i] = lctx->params.logits_all || i == n_tokens - 1;
        }
        const struct loom_llama_batch b = {.n_tokens = n_tokens, .token = tokens, .pos = pos, .seq_id = seq, .logits = logits};
        st = loom_llama_decode_batch(lctx, &b);
    }
    free(pos);
    free(logits);
    return st;
}

const float * loom_llama_get_logits(const struct loom_llama_context * lctx) {
    if (lctx->n_logits < 1) return NULL; /* nothing decoded yet */
    return lctx->logits + (size_t)(lctx->n_logits - 1) * lctx->model->hp.n_vocab;
}

const float * loom_llama_get_logits_ith(const struct loom_llama_context * lctx, int32_t i) {
    if (i < 0) i += lctx->n_last;
    if (i < 0 || i >= lctx->n_last || lctx->out_row[i] < 0) return NULL;
    return lctx->logits + (size_t)lctx->out_row[i] * lctx->model->hp.n_vocab;
}
