/* model-meta.c -- hyper-parameters from a GGUF file's metadata, and the metadata-only reads (the vocabulary is vocab-gguf.c). */
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

enum loom_status loom_model_read_hparams(const struct loom_gguf * g, struct loom_hparams * hp) {
    size_t len = 0;
    const char * arch = NULL;
    if (req_str(g, "general.architecture", &arch, &len) != LOOM_OK) return LOOM_ERR_FORMAT;
    if (len != 5 || memcmp(arch, "llama", 5) != 0) {
        loom_log(LOOM_LOG_ERROR, "architecture '%.*s' is not supported (Loom runs 'llama')", (int)(len > 64 ? 64 : len), arch);
        return LOOM_ERR_UNSUPPORTED;
    }
    memset(hp, 0, sizeof *hp);
    enum loom_status st = LOOM_OK;
    if (st == LOOM_OK) st = req_u32(g, "llama.embedding_length", &hp->n_embd);
    if (st == LOOM_OK) st = req_u32(g, "llama.block_count", &hp->n_layer);
    if (st == LOOM_OK) st = req_u32(g, "llama.attention.head_count", &hp->n_head);
    if (st == LOOM_OK) st = req_u32(g, "llama.feed_forward_length", &hp->n_ff);
    if (st != LOOM_OK) return st;
    /* each layer has nine weight tensors: a block count the file cannot hold is refused before
     * anything is sized by it */
    if ((int64_t)hp->n_layer * 9 > loom_gguf_n_tensors(g)) {
        loom_log(LOOM_LOG_ERROR, "metadata key 'llama.block_count' = %d: the file has only %lld tensors (nine per layer)", hp->n_layer,
                 (long long)loom_gguf_n_tensors(g));
        return LOOM_ERR_FORMAT;
    }
    /* optional keys: the defaults when absent, an error when present with another type */
    uint32_t n_ctx = 2048, n_head_kv = (uint32_t)hp->n_head, n_rot = (uint32_t)(hp->n_embd / hp->n_head);
    float scale = 1.0f;
    hp->rope_freq_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    if (st == LOOM_OK) st = read_key(g, "llama.context_length", false, &n_ctx, NULL);
    if (st == LOOM_OK) st = read_key(g, "llama.attention.head_count_kv", false, &n_head_kv, NULL);
    if (st == LOOM_OK) st = read_key(g, "llama.rope.dimension_count", false, &n_rot, NULL);
    if (st == LOOM_OK) st = read_key(g, "llama.rope.freq_base", false, NULL, &hp->rope_freq_base);
    if (st == LOOM_OK) st = read_key(g, "llama.rope.scale_linear", false, NULL, &scale);
    if (st == LOOM_OK) st = read_key(g, "llama.attention.layer_norm_rms_epsilon", false, NULL, &hp->rms_eps);
    if (st != LOOM_OK) return st;
    const struct {
        const char * key;
        uint32_t value, max;
    } ranges[] = {
        {"llama.context_length", n_ctx, 1u << 24},
        {"llama.attention.head_count_kv", n_head_kv, 1u << 20},
        {"llama.rope.dimension_count", n_rot, 1u << 20},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (ranges[i].value == 0 || ranges[i].value > ranges[i].max) {
            loom_log(LOOM_LOG_ERROR, "metadata key '%s' = %u is out of range [1, %u]", ranges[i].key, ranges[i].value, ranges[i].max);
            return LOOM_ERR_FORMAT;
        }
    }
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
    hp->rope_freq_scale = scale > 0 ? 1.0f / scale : 1.0f;
    if (!(hp->rope_freq_base > 0 && hp->rope_freq_base < 1e12f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key 'llama.rope.freq_base' = %g is out of range (0, 1e12)", (double)hp->rope_freq_base);
        return LOOM_ERR_FORMAT;
    }
    if (!(hp->rms_eps >= 0 && hp->rms_eps < 1.0f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key 'llama.attention.layer_norm_rms_epsilon' = %g is out of range [0, 1)", (double)hp->rms_eps);
        return LOOM_ERR_FORMAT;
    }
    if (!(scale > 0 && scale < 1e6f)) {
        loom_log(LOOM_LOG_ERROR, "metadata key 'llama.rope.scale_linear' = %g is out of range (0, 1e6)", (double)scale);
        return LOOM_ERR_FORMAT;
    }
    return LOOM_OK;
}

/* Opens 'path' and reads what the caller asks for: hyper-parameters, vocabulary or both. */
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
