/* model-load.c -- loading a llama or qwen2 GGUF: metadata, the expected tensors and where each runs. */
#include "loom-gguf.h"
#include "model-loader.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct loom_model_params loom_model_default_params(void) {
    return (struct loom_model_params){
        .n_gpu_layers = 0,
        .device = NULL,
        .split_mode = LOOM_SPLIT_MODE_LAYER,
        .tensor_split = {0},
        .main_gpu = 0,
        .use_mmap = true,
        .use_mlock = false,
        .no_host_copy = false,
        .check_tensors = false,
        .progress = NULL,
        .progress_user_data = NULL,
    };
}

/* Weight types the CPU computes with: the float types and the quantized types with a dequantizer
 * (the IQ1/IQ2/IQ3 i-quants, the ternary TQ types and MXFP4 are not yet among them). */
static bool type_computable(enum loom_type t) { return loom_type_get_traits(t)->to_float != NULL; }

/* Creates the metadata of weight 'name' with the expected shape, in 'ctx', after checking the
 * file's tensor info. 'status' is set on the first failure (later calls then do nothing). */
static struct loom_tensor * weight(struct loom_model * m, const struct loom_gguf * g, struct loom_context * ctx,
                                   const char * name, int64_t ne0, int64_t ne1, enum loom_status * status) {
    if (*status != LOOM_OK) return NULL;
    int64_t i = loom_gguf_find_tensor(g, name);
    if (i < 0) {
        loom_log(LOOM_LOG_ERROR, "tensor '%s' is missing from the model file", name);
        *status = LOOM_ERR_FORMAT;
        return NULL;
    }
    const int64_t * ne = loom_gguf_tensor_ne(g, i);
    int n_dims = loom_gguf_tensor_n_dims(g, i);
    int64_t want_ne1 = ne1 ? ne1 : 1;
    bool shape_ok = ne[0] == ne0 && (n_dims < 2 || ne[1] == want_ne1) && (n_dims >= 2 || want_ne1 == 1);
    for (int d = 2; d < n_dims; d++) shape_ok = shape_ok && ne[d] == 1;
    if (!shape_ok) {
        char dims[128] = "";
        for (int d = 0; d < n_dims; d++) {
            const size_t n = strlen(dims);
            snprintf(dims + n, sizeof dims - n, "%s%lld", d ? ", " : "", (long long)ne[d]);
        }
        loom_log(LOOM_LOG_ERROR, "tensor '%s' has shape [%s], expected [%lld, %lld]", name, dims, (long long)ne0, (long long)want_ne1);
        *status = LOOM_ERR_FORMAT;
        return NULL;
    }
    enum loom_type type = loom_gguf_tensor_type(g, i);
    if (!type_computable(type)) {
        loom_log(LOOM_LOG_ERROR, "tensor '%s' has type %s, which Loom cannot compute with yet", name,
                 loom_type_name(type));
        *status = LOOM_ERR_UNSUPPORTED;
        return NULL;
    }
    if (!ne1 && type != LOOM_TYPE_F32) { /* the norms' weights multiply F32 activations */
        loom_log(LOOM_LOG_ERROR, "tensor '%s' has type %s; Loom needs norm weights in f32", name, loom_type_name(type));
        *status = LOOM_ERR_UNSUPPORTED;
        return NULL;
    }
    struct loom_tensor * t = ne1 ? loom_new_tensor_2d(ctx, type, ne0, ne1) : loom_new_tensor_1d(ctx, type, ne0);
    loom_set_name(t, name);
    loom_set_weight(t);
    m->n_params += (uint64_t)loom_nelements(t);
    m->n_bytes += loom_nbytes(t);
    return t;
}

/* True when 'name' is one of the tensors a model of architecture 'arch' with 'n_layer' blocks uses. */
static bool is_model_tensor(const char * name, enum loom_arch arch, int n_layer) {
    static const char * const blk[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                       "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    static const char * const blk_bias[] = {"attn_q", "attn_k", "attn_v"}; /* qwen2 */
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output_norm.weight") || !strcmp(name, "output.weight")) return true;
    if (arch == LOOM_ARCH_LLAMA && !strcmp(name, "rope_freqs.weight")) return true;
    int layer = -1, used = 0;
    char part[LOOM_MAX_NAME], kind[8];
    if (sscanf(name, "blk.%d.%63[a-z_].%7[a-z]%n", &layer, part, kind, &used) != 3 || name[used] || layer < 0 || layer >= n_layer) {
        return false;
    }
    if (!strcmp(kind, "weight")) {
        for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
            if (!strcmp(part, blk[i])) return true;
        }
    } else if (!strcmp(kind, "bias") && arch == LOOM_ARCH_QWEN2) {
        for (size_t i = 0; i < sizeof blk_bias / sizeof blk_bias[0]; i++) {
            if (!strcmp(part, blk_bias[i])) return true;
        }
    }
    return false;
}

/* A file whose tensors do not match its metadata (e.g. more blocks than <arch>.block_count) is
 * inconsistent: refuse it rather than silently ignoring weights. */
static enum loom_status check_no_extra_tensors(const struct loom_gguf * g, enum loom_arch arch, int n_layer) {
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const char * name = loom_gguf_tensor_name(g, i);
        if (!is_model_tensor(name, arch, n_layer)) {
            loom_log(LOOM_LOG_ERROR, "tensor '%s' does not belong to a %s model of %d blocks (%s.block_count)", name, loom_arch_name(arch),
                     n_layer, loom_arch_name(arch));
            return LOOM_ERR_FORMAT;
        }
    }
    return LOOM_OK;
}

/* Logs which layers each device holds (-sm layer). */
static void log_layer_split(const struct loom_model * m) {
    for (int d = 0; d < m->n_devs; d++) {
        int first = -1, last = -1;
        for (int il = 0; il < m->hp.n_layer; il++) {
            if (m->layers[il].dev != d) continue;
            if (first < 0) first = il;
            last = il;
        }
        if (first < 0) loom_log(LOOM_LOG_INFO, "split layer: %s (share %.3f) holds no layer", loom_backend_dev_name(m->devs[d]), m->split[d]);
        else loom_log(LOOM_LOG_INFO, "split layer: %s (share %.3f) holds layers %d..%d", loom_backend_dev_name(m->devs[d]), m->split[d], first, last);
    }
}

static enum loom_status create_weights(struct loom_model * m, const struct loom_gguf * g) {
    const struct loom_hparams * hp = &m->hp;
    const int64_t n_embd_kv = (int64_t)hp->n_embd / hp->n_head * hp->n_head_kv;
    size_t n_max = 8 + (size_t)hp->n_layer * 13;
    struct loom_init_params ip = {.mem_size = n_max * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    m->ctx_host = loom_init(ip);
    if (!m->ctx_host) return LOOM_ERR_OOM;
    for (int d = 0; d < m->n_devs; d++) {
        if (!(m->ctx_devs[d] = loom_init(ip))) return LOOM_ERR_OOM;
    }
    if (m->split_mode == LOOM_SPLIT_MODE_ROW && !(m->ctx_whole = loom_init(ip))) return LOOM_ERR_OOM;

    enum loom_status st = LOOM_OK;
    m->tok_embd = weight(m, g, m->ctx_host, "token_embd.weight", hp->n_embd, hp->n_vocab, &st);
    struct loom_context * out_ctx = m->output_offloaded ? m->ctx_devs[m->output_dev] : m->ctx_host;
    m->output_norm = weight(m, g, out_ctx, "output_norm.weight", hp->n_embd, 0, &st);
    if (loom_gguf_find_tensor(g, "output.weight") >= 0) {
        m->output = weight(m, g, out_ctx, "output.weight", hp->n_embd, hp->n_vocab, &st);
    } else if (m->output_offloaded) {
        /* tied classifier on another device: a second copy of the embedding's bytes */
        m->output = weight(m, g, out_ctx, "token_embd.weight", hp->n_embd, hp->n_vocab, &st);
        if (m->output) m->n_params -= (uint64_t)loom_nelements(m->output), m->n_bytes -= loom_nbytes(m->output);
    } else {
        m->output = m->tok_embd;
    }
    if (hp->arch == LOOM_ARCH_LLAMA && loom_gguf_find_tensor(g, "rope_freqs.weight") >= 0) {
        /* the rotation runs on the CPU when a device cannot apply the factors, so they stay there */
        m->rope_freqs = weight(m, g, m->ctx_host, "rope_freqs.weight", hp->n_rot / 2, 0, &st);
    }
    for (int il = 0; il < hp->n_layer && st == LOOM_OK; il++) {
        struct loom_layer * L = &m->layers[il];
        /* with ROW an offloaded layer's whole weights are only described: each device gets slices */
        struct loom_context * c = !L->offloaded ? m->ctx_host : m->ctx_whole ? m->ctx_whole : m->ctx_devs[L->dev];
        char name[LOOM_MAX_NAME];
#define W(field, suffix, ne0, ne1)                                          \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", il);        \
        L->field = weight(m, g, c, name, ne0, ne1, &st)
        W(attn_norm, "attn_norm", hp->n_embd, 0);
        W(wq, "attn_q", hp->n_embd, hp->n_embd);
        W(wk, "attn_k", hp->n_embd, n_embd_kv);
        W(wv, "attn_v", hp->n_embd, n_embd_kv);
        W(wo, "attn_output", hp->n_embd, hp->n_embd);
        W(ffn_norm, "ffn_norm", hp->n_embd, 0);
        W(ffn_gate, "ffn_gate", hp->n_embd, hp->n_ff);
        W(ffn_up, "ffn_up", hp->n_embd, hp->n_ff);
        W(ffn_down, "ffn_down", hp->n_ff, hp->n_embd);
#undef W
        if (hp->arch == LOOM_ARCH_QWEN2) {
#define B(field, suffix, ne0)                                               \
            snprintf(name, sizeof name, "blk.%d." suffix ".bias", il);      \
            L->field = weight(m, g, c, name, ne0, 0, &st)
            B(bq, "attn_q", hp->n_embd);
            B(bk, "attn_k", n_embd_kv);
            B(bv, "attn_v", n_embd_kv);
#undef B
        }
    }
    if (st == LOOM_OK) st = check_no_extra_tensors(g, hp->arch, hp->n_layer);
    if (st == LOOM_OK) m->wtype = m->layers[0].wq->type;
    if (st == LOOM_OK && m->ctx_whole) st = loom_model_make_parts(m);
    return st;
}

void loom_model_free(struct loom_model * m) {
    if (!m) return;
    for (int i = 0; i < m->n_buffers; i++) loom_backend_buffer_free(m->buffers[i]);
    if (m->mapping) loom_model_unmap(m);
    loom_free(m->ctx_host);
    for (int d = 0; d < m->n_devs; d++) loom_free(m->ctx_devs[d]), loom_free(m->ctx_parts[d]);
    loom_free(m->ctx_whole);
    free(m->parts);
    loom_model_meta_release(m->meta);
    free(m->layers);
    free(m);
}

static const char * size_label(uint64_t n_params, char * buf, size_t size) {
    if (n_params >= 1000000000ull) snprintf(buf, size, "%.1fB", n_params / 1e9);
    else if (n_params >= 1000000ull) snprintf(buf, size, "%.0fM", n_params / 1e6);
    else snprintf(buf, size, "%.0fK", n_params / 1e3);
    return buf;
}

/* The model's type as the field labels it (llama.cpp's llama_model_ftype_name, "Q4_K - Medium"): the
 * file's general.file_type, a llama_ftype value, for the ones whose tensors Loom loads; NULL when
 * the key is absent, not an integer or another value. */
static const char * ftype_label(const struct loom_gguf * g) {
    static const struct {
        uint32_t ftype;
        const char * label;
    } labels[] = {
        {0, "all F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
        {10, "Q2_K - Medium"}, {11, "Q3_K - Small"}, {12, "Q3_K - Medium"}, {13, "Q3_K - Large"}, {14, "Q4_K - Small"},
        {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"}, {18, "Q6_K"}, {21, "Q2_K - Small"},
        {25, "IQ4_NL - 4.5 bpw"}, {30, "IQ4_XS - 4.25 bpw"}, {32, "BF16"},
    };
    uint32_t ftype = 0;
    char err[128];
    if (loom_gguf_find_key(g, "general.file_type") < 0 || loom_gguf_read_u32(g, "general.file_type", &ftype, err, sizeof err) != LOOM_OK) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        if (labels[i].ftype == ftype) return labels[i].label;
    }
    return NULL;
}

/* Phase 2 (phase 1 is model-meta.c): the weights of an opened file. */
enum loom_status loom_model_load_file(struct loom_model_file * file, struct loom_model_params params, struct loom_model ** out) {
    if (!out) return LOOM_ERR_INVALID_ARG;
    *out = NULL;
    if (!file) return LOOM_ERR_INVALID_ARG;
    int64_t t0 = loom_time_us();
    const struct loom_gguf * g = file->g;
    const char * path = file->path;
    struct loom_model * m = calloc(1, sizeof *m);
    if (!m) return LOOM_ERR_OOM;
    __atomic_add_fetch(&file->meta->refs, 1, __ATOMIC_ACQ_REL);
    m->meta = file->meta;
    m->hp = m->meta->hp;
    m->vocab = m->meta->vocab;
    m->chat_template = m->meta->chat_template;
    enum loom_status st = LOOM_OK;
    if (st == LOOM_OK) {
        st = loom_model_pick_devices(m, &params);
        if (st == LOOM_OK && params.n_gpu_layers > 0 && m->n_devs == 0) {
            loom_log(LOOM_LOG_WARN, "-ngl %d asked, but there is no device to offload to: running on the CPU", params.n_gpu_layers);
        }
    }
    if (st == LOOM_OK) {
        int ngl = m->n_devs ? params.n_gpu_layers : 0;
        if (ngl > m->hp.n_layer) ngl = m->hp.n_layer;
        m->output_offloaded = ngl >= m->hp.n_layer;
        m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
        int * dev = calloc((size_t)m->hp.n_layer, sizeof *dev);
        if (!m->layers || !dev) st = LOOM_ERR_OOM;
        if (st == LOOM_OK) {
            if (m->split_mode == LOOM_SPLIT_MODE_LAYER) loom_split_layers(m->hp.n_layer, ngl, m->n_devs, m->split, dev);
            else for (int il = 0; il < m->hp.n_layer; il++) dev[il] = il >= m->hp.n_layer - ngl ? (m->split_mode == LOOM_SPLIT_MODE_ROW ? m->output_dev : 0) : -1;
            for (int il = 0; il < m->hp.n_layer; il++) {
                m->layers[il].dev = dev[il];
                m->layers[il].offloaded = dev[il] >= 0;
            }
            /* the output layer goes with the last layer (LAYER), or to the main device (ROW) */
            if (m->output_offloaded && m->split_mode != LOOM_SPLIT_MODE_ROW) m->output_dev = dev[m->hp.n_layer - 1];
            if (m->split_mode == LOOM_SPLIT_MODE_LAYER) log_layer_split(m);
        }
        free(dev);
        if (st == LOOM_OK) st = create_weights(m, g);
    }
    if (st == LOOM_OK) st = loom_model_place_weights(m, g, path, &params);
    if (st != LOOM_OK) {
        loom_model_free(m);
        return st;
    }
    char label[32];
    char type[24];
    const char * ftype = ftype_label(g);
    snprintf(type, sizeof type, "%s", ftype ? ftype : loom_type_name(m->wtype)); /* else the type of blk.0.attn_q, in capitals */
    for (char * c = type; !ftype && *c; c++) *c = (char)toupper((unsigned char)*c);
    snprintf(m->desc, sizeof m->desc, "%s %s %s", loom_arch_name(m->hp.arch), size_label(m->n_params, label, sizeof label), type);
    loom_log(LOOM_LOG_INFO, "model: %s, %.2f MiB, %.2f bits per weight, loaded in %.1f ms", m->desc, m->n_bytes / 1048576.0,
             m->n_params ? 8.0 * m->n_bytes / m->n_params : 0.0, (loom_time_us() - t0) / 1000.0);
    *out = m;
    return LOOM_OK;
}

enum loom_status loom_model_load(const char * path, struct loom_model_params params, struct loom_model ** out) {
    if (out) *out = NULL;
    struct loom_model_file * f = NULL;
    enum loom_status st = loom_model_file_open(path, &f);
    if (st == LOOM_OK) st = loom_model_load_file(f, params, out);
    loom_model_file_free(f);
    return st;
}

const struct loom_hparams * loom_model_hparams(const struct loom_model * m) { return &m->hp; }
const struct loom_vocab * loom_model_vocab(const struct loom_model * m) { return m->vocab; }
uint64_t loom_model_n_params(const struct loom_model * m) { return m->n_params; }
uint64_t loom_model_size(const struct loom_model * m) { return m->n_bytes; }
const char * loom_model_desc(const struct loom_model * m) { return m->desc; }
const char * loom_model_chat_template(const struct loom_model * m) { return m->chat_template; }

const char * loom_model_backend_name(const struct loom_model * m) {
    if (!m->dev_offload) return "CPU";
    static __thread char buf[LOOM_MAX_DEVICES * 24 + 8];
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < m->n_devs && n < sizeof buf; d++) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s+", loom_backend_dev_name(m->devs[d]));
    if (n < sizeof buf) snprintf(buf + n, sizeof buf - n, "CPU");
    return buf;
}
