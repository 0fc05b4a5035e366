/* vocab-gguf.c -- a vocabulary from a GGUF file's tokenizer.ggml.* keys (SentencePiece "llama" and BPE "gpt2"). */
#define _GNU_SOURCE /* strndup */
#include "loom-gguf.h"
#include "model-loader.h"
#include "pretok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An optional token id ('*id' keeps the caller's default when the key is absent): any integer type
 * whose value is -1 (none) or an id of the 'n_vocab' tokens, u32 0xFFFFFFFF read as -1; another type
 * or value refused, the message naming the key, the value and the ids there are. */
static enum loom_status opt_token_id(const struct loom_gguf * g, const char * key, int64_t n_vocab, int32_t * id) {
    if (loom_gguf_find_key(g, key) < 0) return LOOM_OK;
    char err[256];
    int64_t v = 0;
    enum loom_status st = loom_gguf_read_i64(g, key, &v, err, sizeof err);
    if (st == LOOM_OK && v == 0xFFFFFFFFll) v = -1;
    if (st == LOOM_OK && (v < -1 || v >= n_vocab || v > INT32_MAX)) {
        snprintf(err, sizeof err, "metadata key '%s' = %lld is not a token id: the vocabulary's are [0, %lld) (-1: none)", key,
                 (long long)v, (long long)n_vocab);
        st = LOOM_ERR_FORMAT;
    }
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "%s", err);
        return st;
    }
    *id = (int32_t)v;
    return LOOM_OK;
}

/* An optional flag ('*b' keeps the caller's default when the key is absent): bool only. */
static enum loom_status opt_flag(const struct loom_gguf * g, const char * key, bool * b) {
    if (loom_gguf_find_key(g, key) < 0) return LOOM_OK;
    char err[256];
    enum loom_status st = loom_gguf_read_bool(g, key, b, err, sizeof err);
    if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    return st;
}

/* A required string key: missing or of another type is LOOM_ERR_FORMAT (logged). */
static enum loom_status str_key(const struct loom_gguf * g, const char * key, const char ** s, size_t * len) {
    char err[256];
    enum loom_status st = loom_gguf_read_str(g, key, s, len, err, sizeof err);
    if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    return st;
}

/* A string array key with 'n' entries (any count when n is LOOM_GGUF_ANY_N), logged when not. */
static enum loom_status str_array(const struct loom_gguf * g, const char * key, uint64_t n) {
    char err[256];
    enum loom_status st = loom_gguf_expect_arr(g, key, LOOM_GGUF_TYPE_STRING, n, err, sizeof err);
    if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    return st;
}

/* The BPE keys: the pre-tokenizer (a copy in '*pre'), the merges, the reference's defaults. */
static enum loom_status read_bpe(const struct loom_gguf * g, struct loom_vocab_params * vp, char ** pre,
                                 const char *** merges, size_t ** merge_lens) {
    vp->type = LOOM_VOCAB_TYPE_BPE;
    vp->add_space_prefix = false;
    /* the reference's defaults for gpt2 vocabularies: BOS = EOS = 11 (when it exists), no UNK */
    vp->bos_id = vp->n_tokens > 11 ? 11 : -1;
    vp->eos_id = vp->bos_id;
    vp->unk_id = -1;
    if (loom_gguf_find_key(g, "tokenizer.ggml.pre") >= 0) {
        const char * s = NULL;
        size_t len = 0;
        if (str_key(g, "tokenizer.ggml.pre", &s, &len) != LOOM_OK) return LOOM_ERR_FORMAT;
        if (!(*pre = strndup(s, len))) return LOOM_ERR_OOM;
        vp->pre = *pre;
    } else {
        loom_log(LOOM_LOG_WARN, "vocab: no tokenizer.ggml.pre: using the 'default' pre-tokenizer (text may be split "
                                "differently from the model's training)");
    }
    bool ignore_merges = false, add_bos = false;
    if (!loom_pretok_lookup(vp->pre, &ignore_merges, &add_bos)) {
        loom_log(LOOM_LOG_ERROR, "unknown BPE pre-tokenizer '%s' (tokenizer.ggml.pre; Loom knows: %s)", vp->pre, loom_pretok_names());
        return LOOM_ERR_UNSUPPORTED;
    }
    vp->add_bos = add_bos;
    if (str_array(g, "tokenizer.ggml.merges", LOOM_GGUF_ANY_N) != LOOM_OK) return LOOM_ERR_FORMAT;
    uint64_t n = loom_gguf_get_arr_n(g, "tokenizer.ggml.merges");
    if (n > LOOM_VOCAB_MAX_MERGES) {
        loom_log(LOOM_LOG_ERROR, "tokenizer.ggml.merges has %llu entries (at most %d)", (unsigned long long)n, LOOM_VOCAB_MAX_MERGES);
        return LOOM_ERR_FORMAT;
    }
    *merges = malloc((n ? n : 1) * sizeof **merges);
    *merge_lens = malloc((n ? n : 1) * sizeof **merge_lens);
    if (!*merges || !*merge_lens) return LOOM_ERR_OOM;
    for (uint64_t i = 0; i < n; i++) (*merges)[i] = loom_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &(*merge_lens)[i]);
    vp->n_merges = (int32_t)n;
    vp->merges = *merges;
    vp->merge_lens = *merge_lens;
    return LOOM_OK;
}

enum loom_status loom_model_read_vocab(const struct loom_gguf * g, struct loom_vocab ** out) {
    *out = NULL;
    char err[256];
    size_t len = 0;
    const char * model = NULL;
    if (str_key(g, "tokenizer.ggml.model", &model, &len) != LOOM_OK) return LOOM_ERR_FORMAT;
    bool bpe = len == 4 && memcmp(model, "gpt2", 4) == 0;
    if (!bpe && (len != 5 || memcmp(model, "llama", 5) != 0)) {
        loom_log(LOOM_LOG_ERROR, "tokenizer '%.*s' is not supported (Loom reads 'llama' SentencePiece and 'gpt2' BPE vocabularies)",
                 (int)(len > 64 ? 64 : len), model);
        return LOOM_ERR_UNSUPPORTED;
    }
    if (str_array(g, "tokenizer.ggml.tokens", LOOM_GGUF_ANY_N) != LOOM_OK) return LOOM_ERR_FORMAT;
    uint64_t n = loom_gguf_get_arr_n(g, "tokenizer.ggml.tokens");
    if (n == 0 || n > LOOM_VOCAB_MAX_TOKENS) {
        loom_log(LOOM_LOG_ERROR, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
        return LOOM_ERR_FORMAT;
    }
    enum loom_status st = LOOM_OK;
    const float * scores = NULL;
    const int32_t * types = NULL;
    if (loom_gguf_find_key(g, "tokenizer.ggml.scores") >= 0) {
        st = loom_gguf_expect_arr(g, "tokenizer.ggml.scores", LOOM_GGUF_TYPE_FLOAT32, n, err, sizeof err);
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "%s", err);
            return st;
        }
        scores = loom_gguf_get_arr_data(g, "tokenizer.ggml.scores");
    }
    if (loom_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        st = loom_gguf_expect_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_TYPE_INT32, n, err, sizeof err);
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "%s", err);
            return st;
        }
        types = loom_gguf_get_arr_data(g, "tokenizer.ggml.token_type");
    }
    const char ** texts = malloc(n * sizeof *texts);
    size_t * lens = malloc(n * sizeof *lens);
    float * scores_copy = scores ? malloc(n * sizeof *scores_copy) : NULL;
    int32_t * types_copy = types ? malloc(n * sizeof *types_copy) : NULL;
    char * pre = NULL;
    const char ** merges = NULL;
    size_t * merge_lens = NULL;
    if (!texts || !lens || (scores && !scores_copy) || (types && !types_copy)) {
        st = LOOM_ERR_OOM;
    } else {
        for (uint64_t i = 0; i < n; i++) texts[i] = loom_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &lens[i]);
        /* the array data in a file need not be aligned for direct float access */
        if (scores) memcpy(scores_copy, scores, n * sizeof *scores_copy);
        if (types) memcpy(types_copy, types, n * sizeof *types_copy);
        struct loom_vocab_params vp = loom_vocab_llama_params((int32_t)n, texts, lens, scores_copy, types_copy);
        if (bpe) st = read_bpe(g, &vp, &pre, &merges, &merge_lens);
        /* optional keys: the defaults when absent, an error when present with another type */
        if (st == LOOM_OK) st = opt_token_id(g, "tokenizer.ggml.bos_token_id", (int64_t)n, &vp.bos_id);
        if (st == LOOM_OK) st = opt_token_id(g, "tokenizer.ggml.eos_token_id", (int64_t)n, &vp.eos_id);
        if (st == LOOM_OK) st = opt_token_id(g, "tokenizer.ggml.unknown_token_id", (int64_t)n, &vp.unk_id);
        if (st == LOOM_OK) st = opt_token_id(g, "tokenizer.ggml.eot_token_id", (int64_t)n, &vp.eot_id);
        if (st == LOOM_OK) st = opt_token_id(g, "tokenizer.ggml.eom_token_id", (int64_t)n, &vp.eom_id);
        if (st == LOOM_OK) st = opt_flag(g, "tokenizer.ggml.add_bos_token", &vp.add_bos);
        if (st == LOOM_OK) st = opt_flag(g, "tokenizer.ggml.add_eos_token", &vp.add_eos);
        if (st == LOOM_OK && !bpe) st = opt_flag(g, "tokenizer.ggml.add_space_prefix", &vp.add_space_prefix);
        if (st == LOOM_OK) st = loom_vocab_new(&vp, out);
    }
    free(texts);
    free(lens);
    free(scores_copy);
    free(types_copy);
    free(pre);
    free(merges);
    free(merge_lens);
    return st;
}
