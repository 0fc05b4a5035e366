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
    bool offloaded;                  /* runs on an offload device */
    int dev;                         /* index into loom_model.devs of the device that runs it; -1: the CPU.
                                        With split mode ROW the layer's weights are in 'parts' instead */
};

/* With split mode ROW: the slice of one layer that one device holds (split.c, model-split.c).
 * Heads [head0, head0 + n_head) of q and the KV heads [head_kv0, head_kv0 + n_head_kv) they read,
 * feed-forward rows [ff0, ff0 + n_ff). */
struct loom_layer_part {
    struct loom_tensor * attn_norm, * ffn_norm;      /* [n_embd] (copies) */
    struct loom_tensor * wq;         /* [n_embd, n_head * head_dim] rows of attn_q */
    struct loom_tensor * wk, * wv;   /* [n_embd, n_head_kv * head_dim] */
    struct loom_tensor * wo;         /* [n_head * head_dim, n_embd] columns of attn_output */
    struct loom_tensor * bq, * bk, * bv;             /* qwen2: slices of the biases, else NULL */
    struct loom_tensor * ffn_gate, * ffn_up;         /* [n_embd, n_ff] rows */
    struct loom_tensor * ffn_down;   /* [n_ff, n_embd] columns */
    int32_t head0, n_head, head_kv0, n_head_kv;
    int64_t ff0, n_ff;
};

#define LOOM_MODEL_MAX_BUFFERS 64

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
    enum loom_type wtype;            /* blk.0.attn_q.weight's type: the label's without a known general.file_type */

    struct loom_tensor * tok_embd;   /* [n_embd, n_vocab] */
    struct loom_tensor * output_norm;/* [n_embd] */
    struct loom_tensor * output;     /* [n_embd, n_vocab]; == tok_embd when tied */
    struct loom_tensor * rope_freqs; /* [n_rot/2] per-pair frequency factors (Llama 3.1), or NULL */
    struct loom_layer * layers;      /* [n_layer] */
    bool output_offloaded;

    loom_backend_dev_t dev_offload;  /* devs[0]; NULL when nothing is offloaded */
    enum loom_split_mode split_mode; /* NONE with fewer than two devices */
    loom_backend_dev_t devs[LOOM_MAX_DEVICES]; /* the devices holding offloaded layers */
    float split[LOOM_MAX_DEVICES];   /* their shares (sum 1) */
    int n_devs;
    int output_dev;                  /* index into devs of the output layer's device (when offloaded) */
    struct loom_layer_part * parts;  /* ROW: [n_layer * n_devs], NULL for the layers on the CPU */
    struct loom_context * ctx_host;  /* metadata of host-resident weights */
    struct loom_context * ctx_devs[LOOM_MAX_DEVICES]; /* metadata of each device's weights */
    struct loom_context * ctx_parts[LOOM_MAX_DEVICES]; /* ROW: metadata of each device's slices */
    struct loom_context * ctx_whole; /* ROW: the offloaded layers' whole weights (metadata only, never placed) */
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
    struct loom_tensor * pos;        /* I32 [n_tokens]: the RoPE positions */
    struct loom_tensor * kv_idx;     /* I32 [n_tokens]: the cache cell each token's K and V are written to */
    struct loom_tensor * kq_mask;    /* F32 [n_kv, n_tokens] */
    struct loom_tensor * out_ids;    /* I32 [n_outputs]: the tokens whose logits are computed; NULL when all are */
    struct loom_tensor * logits;     /* F32 [n_vocab, n_outputs]; NULL when n_outputs is 0 */
};

/* The KV cache's cells (kv-cache.c): cell i holds the K and V of the token at position pos[i] of
 * sequence seq[i], or is free (both -1). A token attends to the cells of its own sequence at
 * positions <= its own. */
struct loom_kv_cells {
    int32_t size;                    /* n_ctx */
    int32_t * pos;                   /* [size] */
    int32_t * seq;                   /* [size] */
    int32_t used;                    /* cells in use */
    int32_t n_hi;                    /* 1 + the highest cell in use (0 when empty) */
    int32_t first_free;              /* no free cell lies below it */
};
enum loom_status loom_kv_cells_init(struct loom_kv_cells * c, int32_t size);
void loom_kv_cells_free(struct loom_kv_cells * c);
void loom_kv_cells_clear(struct loom_kv_cells * c);
/* The lowest 'n' free cells into 'cells' [n] (not yet taken); false when fewer are free. */
bool loom_kv_cells_find(const struct loom_kv_cells * c, int32_t n, int32_t * cells);
/* Tags 'cell' with (seq, pos); frees it. */
void loom_kv_cells_set(struct loom_kv_cells * c, int32_t cell, int32_t seq, int32_t pos);
void loom_kv_cells_release(struct loom_kv_cells * c, int32_t cell);
/* The attention mask [n_kv, n] of 'n' tokens (positions pos[n] of sequences seq[n]) over the first
 * n_kv cells: 0 where the token may attend, -inf elsewhere. */
void loom_kv_cells_mask(const struct loom_kv_cells * c, int64_t n_kv, const int32_t * pos, const int32_t * seq, int32_t n,
                        float * mask);

#define LOOM_LLAMA_MASK_KEEP (256 * 1024)            /* floats: a step's mask larger than this is freed after the step */
#define LOOM_LLAMA_PINNED_LOGITS ((size_t)16 << 20) /* bytes: larger logits live on the heap (context.c) */

struct loom_llama_context {
    struct loom_model * model;
    struct loom_llama_context_params params;

    loom_backend_t backend_cpu;
    loom_backend_t backend_devs[LOOM_MAX_DEVICES]; /* one per model->devs */
    loom_backend_sched_t sched;
    struct loom_backend_comm * comm; /* ROW: the all-reduce over backend_devs */

    /* KV cache: per layer K [n_embd_kv, n_ctx]; V [n_embd_kv, n_ctx] where the layer's attention is
     * fused, else stored transposed [n_ctx, n_embd_kv]. With split mode ROW an offloaded layer has
     * one pair per device, over its KV heads: k_cache[il * kv_parts + d] */
    bool * flash_attn;                  /* [n_layer]: the layer's attention is FLASH_ATTN_EXT */
    int kv_parts;                       /* 1, or model->n_devs with ROW */
    struct loom_context * ctx_kv[1 + LOOM_MAX_DEVICES];   /* [0] host layers, [1 + d] device d's */
    struct loom_tensor ** k_cache;
    struct loom_tensor ** v_cache;
    loom_backend_buffer_t kv_buffers[1 + LOOM_MAX_DEVICES];
    struct loom_kv_cells cells;

    /* the step's graph, kept for the next step of the same shape (n_tokens, KV cells) */
    void * graph_mem;
    size_t graph_mem_size;
    struct loom_context * graph_ctx; /* NULL when there is no graph to reuse */
    struct loom_cgraph * graph;
    struct loom_graph_inputs graph_in;
    int32_t graph_n_tokens;
    int64_t graph_n_kv;
    int32_t graph_n_outputs;
    float * mask;                    /* [mask_cap] the step's attention mask, kept until its compute is done */
    size_t mask_cap;

    float * logits;                  /* [n_vocab * logits_cap] */
    loom_backend_buffer_t logits_buf; /* the pinned host buffer 'logits' lies in; NULL: the heap */
    int32_t logits_cap;              /* rows 'logits' has room for */
    int32_t n_logits;                /* rows of logits held (the outputs of the last decode call) */
    int32_t * out_row;               /* [out_row_cap]: token i of the last decode call -> its row of logits, or -1 */
    int32_t out_row_cap;
    int32_t n_last;                  /* tokens of the last decode call */
    int32_t max_batch_logged;        /* largest batch whose compute memory was logged */
    int64_t host_us[4];              /* one-token steps: graph, inputs, compute, logits (LOOM_DEBUG) */
    int64_t host_steps;
};

/* What the graph of a pipelined prompt (-sm layer) needs of the step it is built for. */
struct loom_llama_step {
    const int32_t * cells;           /* [n_tokens] the cells its tokens take */
    int32_t hi_before;               /* cells.n_hi before the step */
    bool last_only;                  /* its only output, if any, is its last token's */
};
/* Builds the forward graph for 'n_tokens' tokens attending over the first 'n_kv' cells, with the
 * logits of 'n_outputs' of them (0: no output head), in the metadata context 'ctx'; returns the
 * graph and sets the input tensors and the logits tensor. 'step' (NULL: not pipelined) lets a
 * step of several devices' layers be cut into micro-batches. */
struct loom_cgraph * loom_llama_build_graph(struct loom_llama_context * lctx, struct loom_context * ctx, int32_t n_tokens,
                                            int64_t n_kv, int32_t n_outputs, const struct loom_llama_step * step,
                                            struct loom_graph_inputs * inputs);
/* KV cells a graph attends over: 1 + the highest cell in use (the step's own included) rounded up
 * to a multiple of LOOM_LLAMA_KV_PAD (at most n_ctx). The cells beyond are masked, so one graph
 * serves LOOM_LLAMA_KV_PAD successive positions and is reused between them. */
#define LOOM_LLAMA_KV_PAD 32
int64_t loom_llama_kv_cells(const struct loom_llama_context * lctx);
/* Nodes a graph may have at most (for sizing the scheduler and the metadata arena). */
size_t loom_llama_graph_max_nodes(const struct loom_model * model);
/* Nodes a graph of this context may have at most: with a pipelined prompt, per micro-batch. */
size_t loom_llama_graph_nodes(const struct loom_llama_context * lctx);
/* loom_llama_context_new; with 'measure' the KV cache is neither checked against free memory nor
 * cleared (its pages are never touched): a context for measuring compute buffers (fit.c). */
enum loom_status loom_llama_context_create(struct loom_model * model, struct loom_llama_context_params params, bool measure,
                                           struct loom_llama_context ** out);

/* The backend that runs layer 'il' (its KV stores): its device's, or the CPU's. */
loom_backend_t loom_llama_layer_backend(const struct loom_llama_context * lctx, int il);

/* split.c: the devices a load uses. Resolves p->device (or every non-CPU device), applies the split
 * mode and main_gpu, and the shares (tensor_split, else free memory) into m->devs, m->split,
 * m->n_devs, m->split_mode. With n_gpu_layers <= 0 no device. Errors logged: LOOM_ERR_INVALID_ARG. */
enum loom_status loom_model_pick_devices(struct loom_model * m, const struct loom_model_params * p);
/* Layer assignment: the last 'n_off' of 'n_layer' layers go to the 'n_dev' devices in order, each a
 * contiguous run of about split[d] * n_off layers (cumulative shares rounded); dev[il] = -1 for
 * the layers left on the CPU. */
void loom_split_layers(int n_layer, int n_off, int n_dev, const float * split, int * dev);
/* Cuts 'n' units into 'n_dev' contiguous ranges in proportion to 'split', each a multiple of
 * 'align' (n must be one): first[d], count[d]. */
void loom_split_range(int64_t n, int64_t align, int n_dev, const float * split, int64_t * first, int64_t * count);

/* model-split.c (ROW): makes the per-device slices of the offloaded layers in m->ctx_devs from the
 * whole weights in m->ctx_whole (shapes, types and names), and fills m->parts. Errors logged:
 * LOOM_ERR_UNSUPPORTED (a slice not of whole quantized blocks), LOOM_ERR_OOM. */
enum loom_status loom_model_make_parts(struct loom_model * m);
/* Allocates each device's slices and copies their bytes from the file ('map' the whole-file mapping,
 * or NULL: read from 'fd'), checking them as loom_model_check_data does; the buffers join m->buffers.
 * Errors logged: LOOM_ERR_IO, LOOM_ERR_OOM, LOOM_ERR_FORMAT. */
struct loom_gguf;
enum loom_status loom_model_load_parts(struct loom_model * m, const struct loom_gguf * g, const uint8_t * map, int fd, bool check_values);

/* model-weights.c: checks bytes [done, done + n) of weight 't' (whole blocks or elements, at
 * 'bytes'), where they pass through host memory while loading (the mapping, a read() buffer, a
 * staging slot): LOOM_ERR_FORMAT (logged, naming the tensor and the block or element) for a
 * quantized block whose scale is NaN or infinite -- it would turn every product with the block
 * into NaN -- and, with 'check_values', for a NaN or infinite F32, F16 or BF16 element. 'done'
 * SIZE_MAX: the bytes' place in the tensor is not one range (a slice of columns), and the message
 * names no block or element. */
enum loom_status loom_model_check_data(const struct loom_tensor * t, const void * bytes, size_t done, size_t n, bool check_values);

#endif
