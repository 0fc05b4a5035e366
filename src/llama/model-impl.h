/* model-impl.h -- the model and inference-context structures shared by the runner's files. */
#ifndef LOOM_LLAMA_MODEL_IMPL_H
#define LOOM_LLAMA_MODEL_IMPL_H

#include "loom-llama.h"

/* Weights of one transformer block (GGUF names "blk.N.*"). */
struct loom_layer {
    struct loom_tensor * attn_norm;  /* [n_embd] */
    struct loom_tensor * wq;         /* [n_embd, n_embd] */
    struct loom_tensor * wk;         /* [n_embd, n_embd_kv] */
    struct loom_tensor * wv;         /* [n_embd, n_embd_kv] */
    struct loom_tensor * wo;         /* [n_embd, n_embd] */
    struct loom_tensor * bq;         /* [n_embd] (qwen2), else NULL */
    struct loom_tensor * bk;         /* [n_embd_kv] (qwen2), else NULL */
    struct loom_tensor * bv;         /* [n_embd_kv] (qwen2), else NULL */
    struct loom_tensor * ffn_norm;   /* [n_embd] */
    struct loom_tensor * ffn_gate;   /* [n_embd, n_ff] */
    struct loom_tensor * ffn_up;     /* [n_embd, n_ff] */
    struct loom_tensor * ffn_down;   /* [n_ff, n_embd] */
    bool offloaded;                  /* runs on the offload device */
};

#define LOOM_MODEL_MAX_BUFFERS 16

/* What a model file's metadata says, shared by the file handle and every model loaded from it (the
 * last of them to be freed frees it). */
struct loom_model_meta {
    int refs;                        /* atomic */
    struct loom_hparams hp;          /* n_vocab included */
    struct loom_vocab * vocab;
    char * chat_template;            /* tokenizer.chat_template (NUL-terminated copy), or NULL */
};

/* An opened model file: its parsed GGUF metadata and tensor index (phase 1 of the load). */
struct loom_model_file {
    char * path;
    struct loom_gguf * g;
    struct loom_model_meta * meta;
};

/* Drops one reference to 'meta' (NULL is a no-op). */
void loom_model_meta_release(struct loom_model_meta * meta);

struct loom_model {
    struct loom_hparams hp;
    struct loom_model_meta * meta;   /* a reference: the file's metadata */
    const struct loom_vocab * vocab; /* meta->vocab */
    enum loom_type wtype;            /* the type of most weight matrices */

    struct loom_tensor * tok_embd;   /* [n_embd, n_vocab] */
    struct loom_tensor * output_norm;/* [n_embd] */
    struct loom_tensor * output;     /* [n_embd, n_vocab]; == tok_embd when tied */
    struct loom_tensor * rope_freqs; /* [n_rot/2] per-pair frequency factors (Llama 3.1), or NULL */
    struct loom_layer * layers;      /* [n_layer] */
    bool output_offloaded;

    loom_backend_dev_t dev_offload;  /* NULL when nothing is offloaded */
    struct loom_context * ctx_host;  /* metadata of host-resident weights */
    struct loom_context * ctx_dev;   /* metadata of offloaded weights */
    loom_backend_buffer_t buffers[LOOM_MODEL_MAX_BUFFERS];
    int n_buffers;

    void * mapping;                  /* the mmap of the file, or NULL */
    size_t mapping_size;             /* bytes */
    bool mlocked;

    uint64_t n_params;
    uint64_t n_bytes;
    char desc[64];
    const char * chat_template;      /* meta->chat_template */
};

/* The input and output tensors of a step's graph. */
struct loom_graph_inputs {
    struct loom_tensor * tokens;     /* I32 [n_tokens] */
    struct loom_tensor * pos;        /* I32 [n_tokens] */
    struct loom_tensor * kq_mask;    /* F32 [n_kv, n_tokens] */
    struct loom_tensor * logits;     /* F32 [n_vocab, n_outputs] */
};
struct loom_llama_context {
    struct loom_model * model;
    struct loom_llama_context_params params;

    loom_backend_t backend_cpu;
    loom_backend_t backend_dev;      /* NULL without offload */
    loom_backend_sched_t sched;

    /* KV cache: per layer K [n_embd_kv, n_ctx]; V [n_embd_kv, n_ctx] where the layer's attention is
     * fused, else stored transposed [n_ctx, n_embd_kv] */
    bool * flash_attn;                  /* [n_layer]: the layer's attention is FLASH_ATTN_EXT */
    struct loom_context * ctx_kv[2];    /* [0] host layers, [1] offloaded layers */
    struct loom_tensor ** k_cache;
    struct loom_tensor ** v_cache;
    loom_backend_buffer_t kv_buffers[2];
    int32_t n_past;

    /* the step's graph, kept for the next step of the same shape (n_tokens, KV cells) */
    void * graph_mem;
    size_t graph_mem_size;
    struct loom_context * graph_ctx; /* NULL when there is no graph to reuse */
    struct loom_cgraph * graph;
    struct loom_graph_inputs graph_in;
    int32_t graph_n_tokens;
    int64_t graph_n_kv;

    float * logits;                  /* [n_vocab * n_outputs] */
    int32_t n_logits;                /* rows of logits held */
    int32_t max_batch_logged;        /* largest batch whose compute memory was logged */
    int64_t host_us[4];              /* one-token steps: graph, inputs, compute, logits (LOOM_DEBUG) */
    int64_t host_steps;
};

/* Builds the forward graph for 'n_tokens' tokens at positions n_past.. in the metadata context
 * 'ctx'; returns the graph and sets the input tensors and the logits tensor. */
struct loom_cgraph * loom_llama_build_graph(struct loom_llama_context * lctx, struct loom_context * ctx, int32_t n_tokens,
                                            struct loom_graph_inputs * inputs);
/* KV cells a graph attends over: n_past + n_tokens rounded up to a multiple of
 * LOOM_LLAMA_KV_PAD (at most n_ctx). The cells beyond the last position are masked, so one graph
 * serves LOOM_LLAMA_KV_PAD successive positions and is reused between them. */
#define LOOM_LLAMA_KV_PAD 32
int64_t loom_llama_kv_cells(const struct loom_llama_context * lctx, int32_t n_tokens);
/* Nodes a graph may have at most (for sizing the scheduler and the metadata arena). */
size_t loom_llama_graph_max_nodes(const struct loom_model * model);
/* loom_llama_context_new; with 'measure' the KV cache is neither checked against free memory nor
 * cleared (its pages are never touched): a context for measuring compute buffers (fit.c). */
enum loom_status loom_llama_context_create(struct loom_model * model, struct loom_llama_context_params params, bool measure,
                                           struct loom_llama_context ** out);

#endif
