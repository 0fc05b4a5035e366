/* model-meta.c -- phase 1 of the load: the model file opened once, its hyper-parameters (from the
 * GGUF metadata), vocabulary (vocab-gguf.c) and chat template; the metadata-only reads. */
#include "loom-gguf.h"
#include "model-loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads key 'key' strictly into '*u' (any integer type whose value fits u32) or '*f' (f32 or
 * f64), whichever is not NULL. An absent key is an error only when 'required' (otherwise the
 * caller's default stays in place); a present key of another type, or a value that does not fit,
 * is always one (logged with the key, its offset and the type found), never a silent default. */
static enum loom_status read_key(const struct loom_gguf * g, const char * key, bool required, uint32_t * u, float * f) {
    if (!required && loom_gguf_find_key(g, key) < 0) return LOOM_OK;
    char err[256];
    enum loom_status st = u ? loom_gguf_read_u32(g, key, u, err, sizeof err) : loom_gguf_read_f32(g, key, f, err, sizeof err);
    if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    return st;
}

/* Reads the required string key 'key' into '*s' ('*len' bytes): missing or of another type is
 * LOOM_ERR_FORMAT, logged once with the key and the type found. */
static enum loom_status req_str(const struct loom_gguf * g, const char * key, const char ** s, size_t * len) {
    char err[256];
    enum loom_status st = loom_gguf_read_str(g, key, s, len, err, sizeof err);
    if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    return st;
}

/* Reads a required integer key into a positive int32. */
static enum loom_status req_u32(const struct loom_gguf * g, const char * key, int32_t * out) {
    uint32_t v = 0;
    enum loom_status st = read_key(g, key, true, &v, NULL);
    if (st != LOOM_OK) return st;
    if (v == 0 || v > (1u << 30)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s' = %u is out of range (1..%u)", key, v, 1u << 30);
        return LOOM_ERR_FORMAT;
    }
    *out = (int32_t)v;
    return LOOM_OK;
}

static const char * const arch_names[LOOM_ARCH_COUNT] = {[LOOM_ARCH_LLAMA] = "llama", [LOOM_ARCH_QWEN2] = "qwen2"};

const char * loom_arch_name(enum loom_arch arch) { return (unsigned)arch < LOOM_ARCH_COUNT ? arch_names[arch] : NULL; }

/* "<arch>.<suffix>" in 'buf' (the keys of one architecture share its name as prefix). */
static const char * arch_key(char * buf, size_t size, enum loom_arch arch, const char * suffix) {
    snprintf(buf, size, "%s.%s", arch_names[arch], suffix);
    return buf;
}

/* general.architecture, refused (with the list of supported ones) when Loom does not run it. */
static enum loom_status read_arch(const struct loom_gguf * g, enum loom_arch * arch) {
    size_t len = 0;
    const char * name = NULL;
    if (req_str(g, "general.architecture", &name, &len) != LOOM_OK) return LOOM_ERR_FORMAT;
    for (int a = 0; a < LOOM_ARCH_COUNT; a++) {
        if (len == strlen(arch_names[a]) && !memcmp(name, arch_names[a], len)) {
            *arch = (enum loom_arch)a;
            return LOOM_OK;
        }
    }
    char list[128] = "";
    for (int a = 0; a < LOOM_ARCH_COUNT; a++) {
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", a ? ", " : "", arch_names[a]);
    }
    loom_log(LOOM_LOG_ERROR, "architecture '%.*s' is not supported (Loom runs %s)", (int)(len > 64 ? 64 : len), name, list);
    return LOOM_ERR_UNSUPPORTED;
}

/* <arch>.rope.scaling.*: the type (absent: linear, as the field reads it), factor, YaRN's keys. */
static enum loom_status read_rope_scaling(const struct loom_gguf * g, struct loom_hparams * hp) {
    char key[96];
    static const char * const types[LOOM_ROPE_SCALING_COUNT] = {"none", "linear", "yarn"};
    hp->rope_scaling = LOOM_ROPE_SCALING_LINEAR;
    arch_key(key, sizeof key, hp->arch, "rope.scaling.type");
    if (loom_gguf_find_key(g, key) >= 0) {
        const char * t = NULL;
        size_t len = 0;
        if (req_str(g, key, &t, &len) != LOOM_OK) return LOOM_ERR_FORMAT;
        int found = -1;
        for (int i = 0; i < LOOM_ROPE_SCALING_COUNT; i++) {
            if (len == strlen(types[i]) && !memcmp(t, types[i], len)) found = i;
        }
        if (found < 0) {
            loom_log(LOOM_LOG_ERROR, "metadata key '%s' = '%.*s': Loom implements RoPE scaling 'none', 'linear' and 'yarn' only", key,
                     (int)(len > 64 ? 64 : len), t);
            return LOOM_ERR_UNSUPPORTED;
        }
        hp->rope_scaling = (enum loom_rope_scaling)found;
    }
    /* the factor: the current key, else the older one; 0 means none */
    float factor = 0.0f;
    const char * factor_key = arch_key(key, sizeof key, hp->arch, "rope.scaling.factor");
    char old_key[96];
    if (loom_gguf_find_key(g, factor_key) < 0) factor_key = arch_key(old_key, sizeof old_key, hp->arch, "rope.scale_linear");
    enum loom_status st = read_key(g, factor_key, false, NULL, &factor);
    if (st != LOOM_OK) return st;
    if (!(factor == 0.0f || (factor > 0 && factor < 1e6f))) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s' = %g is out of range (0, 1e6)", factor_key, (double)factor);
        return LOOM_ERR_FORMAT;
    }
    hp->rope_freq_scale = factor > 0 && hp->rope_scaling != LOOM_ROPE_SCALING_NONE ? 1.0f / factor : 1.0f;

    uint32_t n_ctx_orig = (uint32_t)hp->n_ctx_train;
    hp->yarn_attn_factor = 1.0f;
    st = read_key(g, arch_key(key, sizeof key, hp->arch, "rope.scaling.original_context_length"), false, &n_ctx_orig, NULL);
    if (st == LOOM_OK) st = read_key(g, arch_key(key, sizeof key, hp->arch, "rope.scaling.attn_factor"), false, NULL, &hp->yarn_attn_factor);
    if (st != LOOM_OK) return st;
    if (n_ctx_orig == 0 || n_ctx_orig > (1u << 24)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s.rope.scaling.original_context_length' = %u is out of range [1, %u]", arch_names[hp->arch],
                 n_ctx_orig, 1u << 24);
        return LOOM_ERR_FORMAT;
    }
    if (!(hp->yarn_attn_factor > 0 && hp->yarn_attn_factor < 100.0f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s.rope.scaling.attn_factor' = %g is out of range (0, 100)", arch_names[hp->arch],
                 (double)hp->yarn_attn_factor);
        return LOOM_ERR_FORMAT;
    }
    hp->n_ctx_orig = (int32_t)n_ctx_orig;
    hp->yarn_ext_factor = hp->rope_scaling == LOOM_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    return LOOM_OK;
}

enum loom_status loom_model_read_hparams(const struct loom_gguf * g, struct loom_hparams * hp) {
    memset(hp, 0, sizeof *hp);
    enum loom_status st = read_arch(g, &hp->arch);
    if (st != LOOM_OK) return st;
    char key[96];
#define KEY(suffix) arch_key(key, sizeof key, hp->arch, suffix)
    if (st == LOOM_OK) st = req_u32(g, KEY("embedding_length"), &hp->n_embd);
    if (st == LOOM_OK) st = req_u32(g, KEY("block_count"), &hp->n_layer);
    if (st == LOOM_OK) st = req_u32(g, KEY("attention.head_count"), &hp->n_head);
    if (st == LOOM_OK) st = req_u32(g, KEY("feed_forward_length"), &hp->n_ff);
    if (st != LOOM_OK) return st;
    /* each layer has nine weight tensors: a block count the file cannot hold is refused before
     * anything is sized by it */
    if ((int64_t)hp->n_layer * 9 > loom_gguf_n_tensors(g)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s' = %d: the file has only %lld tensors (nine per layer)", KEY("block_count"), hp->n_layer,
                 (long long)loom_gguf_n_tensors(g));
        return LOOM_ERR_FORMAT;
    }
    /* optional keys: the defaults when absent, an error when present with another type */
    uint32_t n_ctx = 2048, n_head_kv = (uint32_t)hp->n_head, n_rot = (uint32_t)(hp->n_embd / hp->n_head);
    hp->rope_freq_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    if (st == LOOM_OK) st = read_key(g, KEY("context_length"), false, &n_ctx, NULL);
    if (st == LOOM_OK) st = read_key(g, KEY("attention.head_count_kv"), false, &n_head_kv, NULL);
    if (st == LOOM_OK) st = read_key(g, KEY("rope.dimension_count"), false, &n_rot, NULL);
    if (st == LOOM_OK) st = read_key(g, KEY("rope.freq_base"), false, NULL, &hp->rope_freq_base);
    if (st == LOOM_OK) st = read_key(g, KEY("attention.layer_norm_rms_epsilon"), false, NULL, &hp->rms_eps);
    if (st != LOOM_OK) return st;
    const struct {
        const char * key;
        uint32_t value, max;
    } ranges[] = {
        {"context_length", n_ctx, 1u << 24},
        {"attention.head_count_kv", n_head_kv, 1u << 20},
        {"rope.dimension_count", n_rot, 1u << 20},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (ranges[i].value == 0 || ranges[i].value > ranges[i].max) {
            loom_log(LOOM_LOG_ERROR, "metadata key '%s' = %u is out of range [1, %u]", KEY(ranges[i].key), ranges[i].value, ranges[i].max);
            return LOOM_ERR_FORMAT;
        }
    }
#undef KEY
    hp->n_ctx_train = (int32_t)n_ctx;
    hp->n_head_kv = (int32_t)n_head_kv;
    if (hp->n_embd % hp->n_head != 0) {
        loom_log(LOOM_LOG_ERROR, "embedding length %d is not a multiple of the head count %d", hp->n_embd, hp->n_head);
        return LOOM_ERR_FORMAT;
    }
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0) {
        loom_log(LOOM_LOG_ERROR, "head count %d is not a multiple of the KV head count %d", hp->n_head, hp->n_head_kv);
        return LOOM_ERR_FORMAT;
    }
    hp->n_rot = (int32_t)n_rot;
    if (hp->n_rot <= 0 || hp->n_rot % 2 || hp->n_rot > hp->n_embd / hp->n_head) {
        loom_log(LOOM_LOG_ERROR, "rope dimension count %d is invalid for head size %d", hp->n_rot, hp->n_embd / hp->n_head);
        return LOOM_ERR_FORMAT;
    }
    if (!(hp->rope_freq_base > 0 && hp->rope_freq_base < 1e12f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s.rope.freq_base' = %g is out of range (0, 1e12)", arch_names[hp->arch],
                 (double)hp->rope_freq_base);
        return LOOM_ERR_FORMAT;
    }
    if (!(hp->rms_eps >= 0 && hp->rms_eps < 1.0f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key '%s.attention.layer_norm_rms_epsilon' = %g is out of range [0, 1)", arch_names[hp->arch],
                 (double)hp->rms_eps);
        return LOOM_ERR_FORMAT;
    }
    hp->rope_mode = hp->arch == LOOM_ARCH_QWEN2 ? LOOM_ROPE_NEOX : LOOM_ROPE_NORMAL;
    return read_rope_scaling(g, hp);
}

/* ---------------------------------------------------------------- phase 1: the model file */

void loom_model_meta_release(struct loom_model_meta * meta) {
    if (!meta || __atomic_sub_fetch(&meta->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    loom_vocab_free(meta->vocab);
    free(meta->chat_template);
    free(meta);
}

/* tokenizer.chat_template into meta->chat_template when the file has it as a string. */
static enum loom_status read_chat_template(const struct loom_gguf * g, struct loom_model_meta * meta) {
    const int64_t k = loom_gguf_find_key(g, "tokenizer.chat_template");
    if (k < 0 || loom_gguf_kv_type(g, k) != LOOM_GGUF_TYPE_STRING) return LOOM_OK;
    size_t len = 0;
    const char * t = loom_gguf_get_str(g, "tokenizer.chat_template", NULL, &len);
    if (!t) return LOOM_OK;
    if (!(meta->chat_template = malloc(len + 1))) return LOOM_ERR_OOM;
    memcpy(meta->chat_template, t, len);
    meta->chat_template[len] = 0; /* a NUL inside only shortens the text the families are recognized in */
    return LOOM_OK;
}

enum loom_status loom_model_file_open(const char * path, struct loom_model_file ** out) {
    if (!out) return LOOM_ERR_INVALID_ARG;
    *out = NULL;
    struct loom_gguf * g = NULL;
    enum loom_status st = loom_gguf_open(path, &g, NULL, 0); /* logs the reason on failure */
    if (st != LOOM_OK) return st;
    struct loom_model_file * f = calloc(1, sizeof *f);
    struct loom_model_meta * meta = calloc(1, sizeof *meta);
    char * p = strdup(path);
    if (!f || !meta || !p) {
        loom_log(LOOM_LOG_ERROR, "%s: out of memory", path);
        st = LOOM_ERR_OOM;
    }
    if (st == LOOM_OK) {
        meta->refs = 1;
        st = loom_model_read_hparams(g, &meta->hp);
    }
    if (st == LOOM_OK) st = loom_model_read_vocab(g, &meta->vocab);
    if (st == LOOM_OK) st = read_chat_template(g, meta);
    if (st != LOOM_OK) {
        if (meta && meta->refs) loom_model_meta_release(meta);
        else free(meta);
        free(f);
        free(p);
        loom_gguf_free(g);
        return st;
    }
    meta->hp.n_vocab = loom_vocab_n_tokens(meta->vocab);
    *f = (struct loom_model_file){.path = p, .g = g, .meta = meta};
    *out = f;
    return LOOM_OK;
}

void loom_model_file_free(struct loom_model_file * f) {
    if (!f) return;
    loom_gguf_free(f->g);
    loom_model_meta_release(f->meta);
    free(f->path);
    free(f);
}

const struct loom_hparams * loom_model_file_hparams(const struct loom_model_file * f) { return &f->meta->hp; }
const struct loom_vocab * loom_model_file_vocab(const struct loom_model_file * f) { return f->meta->vocab; }

/* Opens 'path' and reads what the caller asks for: hyper-parameters, vocabulary or both (for a
 * caller that needs nothing else; a vocabulary-only GGUF has no hyper-parameters). */
static enum loom_status read_meta(const char * path, struct loom_hparams * hp, struct loom_vocab ** vocab) {
    if (vocab) *vocab = NULL;
    struct loom_gguf * g = NULL;
    enum loom_status st = loom_gguf_open(path, &g, NULL, 0); /* logs the reason on failure */
    if (st != LOOM_OK) return st;
    if (hp) st = loom_model_read_hparams(g, hp);
    if (st == LOOM_OK && vocab) st = loom_model_read_vocab(g, vocab);
    if (st == LOOM_OK && hp && vocab) hp->n_vocab = loom_vocab_n_tokens(*vocab);
    loom_gguf_free(g);
    return st;
}

enum loom_status loom_vocab_load_gguf(const char * path, struct loom_vocab ** out) { return read_meta(path, NULL, out); }

enum loom_status loom_model_read_meta(const char * path, struct loom_hparams * hp, struct loom_vocab ** vocab) {
    return read_meta(path, hp, vocab);
}
