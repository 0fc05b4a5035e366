/* loom-llama.h -- the model runner: vocabulary and tokenizer, sampling, LLaMA models from GGUF. */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom.h"
#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ vocabulary and tokenizer */
/* (section owned by the tokenizer work) */


/* ================================================================ sampling */
/* (section owned by the sampler work) */


/* ================================================================ models */
/* (section owned by the runner work) */

struct loom_vocab;

/* Hyper-parameters of a LLaMA-architecture model, read from GGUF metadata ("llama.*" keys). */
struct loom_hparams {
    int32_t n_vocab;        /* tokens */
    int32_t n_ctx_train;    /* llama.context_length */
    int32_t n_embd;         /* llama.embedding_length */
    int32_t n_layer;        /* llama.block_count */
    int32_t n_head;         /* llama.attention.head_count */
    int32_t n_head_kv;      /* llama.attention.head_count_kv (grouped-query attention; = n_head when absent) */
    int32_t n_ff;           /* llama.feed_forward_length */
    int32_t n_rot;          /* llama.rope.dimension_count (= n_embd / n_head when absent) */
    float rope_freq_base;   /* llama.rope.freq_base (10000 when absent) */
    float rope_freq_scale;  /* 1 / llama.rope.scale_linear (1 when absent) */
    float rms_eps;          /* llama.attention.layer_norm_rms_epsilon */
};

/* Called during loading with the fraction done in [0, 1]; return false to cancel (the load then
 * fails with LOOM_ERR_CANCELLED and frees everything). */
typedef bool (*loom_progress_callback)(float progress, void * user_data);

struct loom_model_params {
    int n_gpu_layers;           /* the last N layers run on 'device' (with all layers, the output layer too) */
    const char * device;        /* registry name of the offload device; NULL = the first non-CPU device */
    bool use_mmap;              /* map the file (default); false: read() into buffers */
    bool use_mlock;             /* lock host weight memory (a warning, not a failure, when the limit is too low) */
    bool no_host_copy;          /* weights not offloaded stay in host memory the offload device reads in place
                                   (zero-copy) -- where that device can wrap host memory */
    loom_progress_callback progress;
    void * progress_user_data;
};

struct loom_model;

/* Defaults: no offload, mmap on, mlock off. */
struct loom_model_params loom_model_default_params(void);
/* Loads a GGUF llama model. Errors (logged with the reason, *out set to NULL, nothing leaked):
 * LOOM_ERR_IO (cannot open/map/read), LOOM_ERR_FORMAT (malformed GGUF, missing or misshapen
 * tensor), LOOM_ERR_UNSUPPORTED (architecture other than llama, tensor type Loom cannot compute),
 * LOOM_ERR_OOM, LOOM_ERR_CANCELLED. */
enum loom_status loom_model_load(const char * path, struct loom_model_params params, struct loom_model ** out);
void loom_model_free(struct loom_model * model);
const struct loom_hparams * loom_model_hparams(const struct loom_model * model);
const struct loom_vocab * loom_model_vocab(const struct loom_model * model);
uint64_t loom_model_n_params(const struct loom_model * model);   /* elements of all weights */
uint64_t loom_model_size(const struct loom_model * model);       /* bytes of all weights */
/* A short description, e.g. "llama 260K F32". */
const char * loom_model_desc(const struct loom_model * model);

struct loom_llama_context_params {
    int32_t n_ctx;       /* KV cache size in tokens (0 = the model's training context) */
    int32_t n_batch;     /* largest number of tokens per decode call */
    int32_t n_threads;   /* CPU threads (0 = all online processors) */
    bool logits_all;     /* keep logits of every position, not only the last */
    enum loom_type cache_type;  /* KV cache element type: F32 or F16 */
};

struct loom_llama_context;

struct loom_llama_context_params loom_llama_context_default_params(void);
/* Creates the KV cache (per layer, on the device that runs the layer) and the scheduler.
 * Errors: LOOM_ERR_INVALID_ARG (n_ctx/n_batch out of range), LOOM_ERR_OOM. */
enum loom_status loom_llama_context_new(struct loom_model * model, struct loom_llama_context_params params,
                                        struct loom_llama_context ** out);
void loom_llama_context_free(struct loom_llama_context * lctx);
int32_t loom_llama_n_ctx(const struct loom_llama_context * lctx);
/* Positions of the KV cache in use (tokens decoded so far). */
int32_t loom_llama_n_past(const struct loom_llama_context * lctx);
/* Empties the KV cache. */
void loom_llama_kv_clear(struct loom_llama_context * lctx);
/* Runs 'n_tokens' tokens at the next positions, in batches of at most n_batch. Errors:
 * LOOM_ERR_TOO_LARGE when n_past + n_tokens > n_ctx (nothing is run), LOOM_ERR_INVALID_ARG for a
 * token id outside the vocabulary, the backend's status on failure. */
enum loom_status loom_llama_decode(struct loom_llama_context * lctx, const int32_t * tokens, int32_t n_tokens);
/* Logits [n_vocab] of the last decoded position (or of position i of the last batch with logits_all). */
const float * loom_llama_get_logits(const struct loom_llama_context * lctx);
const float * loom_llama_get_logits_ith(const struct loom_llama_context * lctx, int32_t i);
/* The scheduler (for introspection: splits, copies, buffer sizes). */
loom_backend_sched_t loom_llama_get_sched(struct loom_llama_context * lctx);

/* Converts a llama2.c checkpoint ('checkpoint_path': seven int32 -- dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size (negative: untied classifier), seq_len -- then F32 weights in
 * llama2.c's order) and its tokenizer file into a GGUF llama model at 'out_path' with the standard
 * keys and tensor names (F32). Q and K rows keep llama2.c's layout, which is GGUF's: RoPE rotates
 * adjacent pairs (2i, 2i+1) of each head. The output is written to a temporary file and renamed,
 * and never replaces an input. Errors: LOOM_ERR_IO, LOOM_ERR_FORMAT (a malformed or truncated
 * checkpoint or tokenizer, named with the reason), LOOM_ERR_INVALID_ARG, LOOM_ERR_OOM. */
enum loom_status loom_convert_llama2c(const char * checkpoint_path, const char * tokenizer_path, const char * out_path);


#ifdef __cplusplus
}
#endif

#endif /* LOOM_LLAMA_H */
