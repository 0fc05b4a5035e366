/* loom-llama.h -- the model runner: LLaMA-family models from GGUF, the context (KV cache, decode,
 * logits), offload fitting and the memory breakdown. The vocabulary is in loom-vocab.h, the sampler
 * in loom-sampler.h, chat templates in loom-chat.h, converters and generators in loom-convert.h. */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom.h"
#include "loom-backend.h"
#include "loom-vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

struct loom_vocab;

/* Architectures Loom runs (general.architecture). */
enum loom_arch {
    LOOM_ARCH_LLAMA = 0,   /* "llama": Llama 1-3.x, Mistral, TinyLlama, SmolLM; RoPE on adjacent pairs */
    LOOM_ARCH_QWEN2,       /* "qwen2": llama plus q/k/v biases, RoPE in NeoX pairing (the two halves of a head) */
    LOOM_ARCH_COUNT
};
/* "llama", "qwen2"; NULL outside the enum. */
LOOM_API const char * loom_arch_name(enum loom_arch arch);

/* RoPE scaling (<arch>.rope.scaling.type). */
enum loom_rope_scaling {
    LOOM_ROPE_SCALING_NONE = 0,  /* "none": frequencies unscaled, whatever the factor says */
    LOOM_ROPE_SCALING_LINEAR,    /* "linear" (also when the key is absent): positions divided by the factor */
    LOOM_ROPE_SCALING_YARN,      /* "yarn": Peng et al. 2023 (see loom_rope_ext) */
    LOOM_ROPE_SCALING_COUNT
};

/* Hyper-parameters of a model, read from GGUF metadata ("<arch>.*" keys, e.g. "llama.*"). */
struct loom_hparams {
    enum loom_arch arch;    /* general.architecture */
    int32_t n_vocab;        /* tokens */
    int32_t n_ctx_train;    /* <arch>.context_length (2048 when absent) */
    int32_t n_embd;         /* <arch>.embedding_length */
    int32_t n_layer;        /* <arch>.block_count */
    int32_t n_head;         /* <arch>.attention.head_count */
    int32_t n_head_kv;      /* <arch>.attention.head_count_kv (grouped-query attention; = n_head when absent) */
    int32_t n_ff;           /* <arch>.feed_forward_length */
    int32_t n_rot;          /* <arch>.rope.dimension_count (= n_embd / n_head when absent) */
    float rope_freq_base;   /* <arch>.rope.freq_base (10000 when absent) */
    float rope_freq_scale;  /* 1 / <arch>.rope.scaling.factor (or the older .rope.scale_linear); 1 when
                             * absent or 0, and always 1 with scaling type none */
    float rms_eps;          /* <arch>.attention.layer_norm_rms_epsilon (1e-5 when absent) */
    enum loom_rope_mode rope_mode;        /* NORMAL (llama) or NEOX (qwen2) */
    enum loom_rope_scaling rope_scaling;  /* <arch>.rope.scaling.type */
    int32_t n_ctx_orig;     /* YaRN: <arch>.rope.scaling.original_context_length (n_ctx_train when absent) */
    float yarn_ext_factor;  /* 1 with YaRN, else 0 */
    float yarn_attn_factor; /* <arch>.rope.scaling.attn_factor (1 when absent) */
    float yarn_beta_fast;   /* 32 (files do not carry it; the field's value) */
    float yarn_beta_slow;   /* 1 */
};

/* Called during loading with the fraction done in [0, 1]; return false to cancel (the load then
 * fails with LOOM_ERR_CANCELLED and frees everything). */
typedef bool (*loom_progress_callback)(float progress, void * user_data);

/* How the offloaded layers use several devices (the field's --split-mode). */
enum loom_split_mode {
    LOOM_SPLIT_MODE_NONE = 0,   /* "none": one device, devices[main_gpu] */
    LOOM_SPLIT_MODE_LAYER,      /* "layer": each layer (weights and KV cache) on one device, the layers spread
                                   over the devices in proportion to tensor_split; a prompt is pipelined
                                   (micro-batches, see loom_llama_context_params.n_ubatch) */
    LOOM_SPLIT_MODE_ROW,        /* "row": tensor parallelism (Shoeybi et al. 2019, Megatron-LM): every offloaded
                                   layer's q/k/v and gate/up split by output rows, attention per group of KV
                                   heads, the output and down products split by input columns, their partial
                                   sums all-reduced; KV cache per device (its heads) */
    LOOM_SPLIT_MODE_COUNT
};
/* "none", "layer", "row"; NULL outside the enum. */
LOOM_API const char * loom_split_mode_name(enum loom_split_mode mode);

/* Devices one model can be split over at most. */
#define LOOM_MAX_DEVICES 16

struct loom_model_params {
    int n_gpu_layers;           /* the last N layers run on the devices (with all layers, the output layer too) */
    const char * device;        /* registry names of the offload devices, comma-separated ("CUDA0,CUDA1");
                                   NULL = every non-CPU device of the registry, in its order */
    enum loom_split_mode split_mode; /* default LAYER; with one device every mode is NONE */
    float tensor_split[LOOM_MAX_DEVICES]; /* per device of the list, the share of the layers (layer) or of the
                                   heads and feed-forward rows (row); all 0 (the default): in proportion to
                                   each device's free memory */
    int main_gpu;               /* index into the device list: the device of split mode NONE, and with ROW
                                   the one that runs the output layer (default 0) */
    bool use_mmap;              /* map the file (default); false: read() into buffers */
    bool use_mlock;             /* lock host weight memory (a warning, not a failure, when the limit is too low) */
    bool no_host_copy;          /* weights not offloaded stay in host memory the offload device reads in place
                                   (zero-copy) -- where that device can wrap host memory */
    bool check_tensors;         /* scan every F32, F16 and BF16 weight for NaN and infinite values while it
                                   loads (the field's --check-tensors; default off: a full pass over the
                                   weights); quantized blocks' scales are checked always */
    loom_progress_callback progress;
    void * progress_user_data;
};

struct loom_model;

/* Defaults: no offload, split mode LAYER over every non-CPU device by free memory, mmap on, mlock off,
 * no check of float weights' values. */
LOOM_API struct loom_model_params loom_model_default_params(void);

/* Loading is two phases. Phase 1, loom_model_file_open: the file is opened and its header,
 * metadata and tensor index parsed once; the hyper-parameters, the vocabulary and the chat template
 * are read from it, so a caller can inspect the model (check a request, tokenize a prompt, size an
 * offload) before any weight is read. Phase 2, loom_model_load_file: the weights are placed and
 * read; the model shares the file's vocabulary and chat template (no second copy, and they live
 * as long as the model, even after loom_model_file_free). A file may be loaded more than once. */
struct loom_model_file;
/* Phase 1 for the model at 'path'. Errors as for loom_model_load, but for the weights' own: a
 * tensor's shape or type is checked in phase 2. */
LOOM_API enum loom_status loom_model_file_open(const char * path, struct loom_model_file ** out);
LOOM_API void loom_model_file_free(struct loom_model_file * file);    /* NULL is a no-op */
LOOM_API const struct loom_hparams * loom_model_file_hparams(const struct loom_model_file * file);  /* n_vocab included */
LOOM_API const struct loom_vocab * loom_model_file_vocab(const struct loom_model_file * file);
/* Phase 2: loads the weights of 'file' with 'params'. Errors as for loom_model_load. */
LOOM_API enum loom_status loom_model_load_file(struct loom_model_file * file, struct loom_model_params params, struct loom_model ** out);

/* Both phases at once (loom_model_file_open, loom_model_load_file, loom_model_file_free): loads a
 * GGUF llama model. Errors (logged with the reason, *out set to NULL, nothing leaked):
 * LOOM_ERR_IO (cannot open/map/read), LOOM_ERR_FORMAT (malformed GGUF; a 'llama.*' hyper-parameter
 * key missing where required, out of range, or present with a value type other than an integer
 * (any width, the value fitting) or f32/f64 as the key calls for; missing or misshapen tensor; a
 * quantized block with a NaN or infinite scale, and with 'check_tensors' a NaN or infinite F32, F16
 * or BF16 weight element: the message names the tensor and the block or element),
 * LOOM_ERR_UNSUPPORTED (an architecture other than those of enum loom_arch -- the message lists them --,
 * a RoPE scaling type other than none, linear and yarn, a tensor type Loom cannot compute; -sm row
 * over devices that cannot all-reduce, or heads / feed-forward rows that do not split into whole
 * quantized blocks), LOOM_ERR_INVALID_ARG (an unknown device name, the CPU or a device twice in
 * 'device', main_gpu outside the list, a negative, NaN or all-zero-but-set tensor_split, a split
 * mode outside the enum), LOOM_ERR_OOM, LOOM_ERR_CANCELLED. */
LOOM_API enum loom_status loom_model_load(const char * path, struct loom_model_params params, struct loom_model ** out);
LOOM_API void loom_model_free(struct loom_model * model);
LOOM_API const struct loom_hparams * loom_model_hparams(const struct loom_model * model);
LOOM_API const struct loom_vocab * loom_model_vocab(const struct loom_model * model);
LOOM_API uint64_t loom_model_n_params(const struct loom_model * model);   /* elements of all weights */
LOOM_API uint64_t loom_model_size(const struct loom_model * model);       /* bytes of all weights */
/* "CPU", or the offload devices' registry names ("CUDA0", "sim0+sim1") followed by "+CPU". */
LOOM_API const char * loom_model_backend_name(const struct loom_model * model);
/* The file's tokenizer.chat_template (a Jinja template text), or NULL when it has none (or one that
 * is not a string). Valid while the model lives. */
LOOM_API const char * loom_model_chat_template(const struct loom_model * model);
/* A short description, e.g. "llama 7B Q4_K - Medium": the architecture, the parameter count and the
 * file's general.file_type as the field names it (llama.cpp's llama_model_ftype_name: "all F32",
 * "Q4_0", "Q3_K - Small", "IQ4_XS - 4.25 bpw", ...), or where the key is absent or another value the
 * type of blk.0.attn_q.weight ("llama 260K F32"). */
LOOM_API const char * loom_model_desc(const struct loom_model * model);
/* The split mode the model was loaded with (NONE with fewer than two devices), and how many devices
 * hold its offloaded layers (0: none). */
LOOM_API enum loom_split_mode loom_model_split_mode(const struct loom_model * model);
LOOM_API int loom_model_n_devices(const struct loom_model * model);
/* The device that holds layer 'il' (NULL: the CPU; with ROW, the output device for the split layers). */
LOOM_API loom_backend_dev_t loom_model_layer_device(const struct loom_model * model, int il);

/* Whether a step's attention is the fused FLASH_ATTN_EXT op (the field's -fa). */
enum loom_llama_flash_attn {
    LOOM_LLAMA_FLASH_ATTN_AUTO = -1,  /* on for the layers whose device supports the op, off for the others */
    LOOM_LLAMA_FLASH_ATTN_OFF = 0,    /* Q K^T, softmax and the product with V as separate ops */
    LOOM_LLAMA_FLASH_ATTN_ON = 1,     /* every layer; where the layer's device lacks the op, it runs on the CPU */
};

struct loom_llama_context_params {
    int32_t n_ctx;       /* KV cache size in tokens (0 = the model's training context) */
    int32_t n_batch;     /* largest number of tokens per decode call */
    int32_t n_ubatch;    /* with split mode LAYER over several devices: tokens per micro-batch of a
                            pipelined batch (the field's -ub); 0 (default): the batch cut into two
                            micro-batches per device, at least 32 tokens each; >= n_batch: no pipelining */
    int32_t n_threads;   /* CPU threads (0 = all online processors) */
    bool logits_all;     /* keep logits of every position, not only the last */
    enum loom_type type_k;  /* KV cache K type: F32, F16, BF16, or Q8_0 / Q4_0 (the head size a multiple
                               of 32); another type, or a head size that is not, is LOOM_ERR_UNSUPPORTED */
    enum loom_type type_v;  /* KV cache V type: as type_k; Q8_0 / Q4_0 only with flash attention in
                               every layer (flash_attn ON, or AUTO where every layer's device has it) */
    enum loom_llama_flash_attn flash_attn;
};

struct loom_llama_context;

/* Defaults: the model's training context, batches of 512, all cores, last logits only, F16 K and
 * V, flash attention auto. */
LOOM_API struct loom_llama_context_params loom_llama_context_default_params(void);
/* Creates the KV cache (per layer, on the device that runs the layer) and the scheduler.
 * The cache is K [n_embd_kv, n_ctx] per layer, and V the same with flash attention, else stored
 * transposed [n_ctx, n_embd_kv] (one row per channel, for the product with the softmax); the
 * sizes are logged at INFO with the bytes per token. With layers on a GPU, the context then
 * decodes one batch of up to 8 tokens and one token and clears the cache again (a warm-up: the
 * device's one-time work happens here, not in the caller's first step); an error there is returned.
 * With split mode ROW each device caches its KV heads of every split layer, and the context joins
 * the devices' backends in a communicator for the all-reduces (loom_backend_comm_new).
 * Errors: LOOM_ERR_INVALID_ARG (n_ctx/n_batch out of range, a flash_attn value not in the enum),
 * LOOM_ERR_UNSUPPORTED (a cache type other than F32, F16, BF16, Q8_0 or Q4_0; a block type whose
 * block does not divide the head size; a block type for V without flash attention in every layer;
 * -sm row over CUDA devices without NCCL), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_llama_context_new(struct loom_model * model, struct loom_llama_context_params params,
                                        struct loom_llama_context ** out);
LOOM_API void loom_llama_context_free(struct loom_llama_context * lctx);
LOOM_API int32_t loom_llama_n_ctx(const struct loom_llama_context * lctx);
/* The layers whose attention is the fused FLASH_ATTN_EXT op, 0..n_layer: what the context's
 * flash_attn chose (every layer for ON, none for OFF, for AUTO the layers whose device has the op). */
LOOM_API int32_t loom_llama_n_flash_attn_layers(const struct loom_llama_context * lctx);

/* The KV cache holds n_ctx cells shared by every sequence (the field's unified cache): each cell
 * is tagged with the sequence id and the position of the token whose K and V it holds, and a token
 * attends to the cells of its own sequence at positions <= its own. The calls without a sequence
 * id (loom_llama_decode, _n_past, _kv_truncate) work on sequence 0. */

/* Positions of sequence 0 in the KV cache (1 + its highest position; 0 when it has none). */
LOOM_API int32_t loom_llama_n_past(const struct loom_llama_context * lctx);
/* Empties the KV cache (every sequence). */
LOOM_API void loom_llama_kv_clear(struct loom_llama_context * lctx);
/* Keeps the positions [0, n_keep) of sequence 0 and drops the rest (loom_llama_kv_seq_rm(lctx, 0,
 * n_keep, -1)): the next decode runs at position n_keep (a prompt that extends the cached tokens
 * evaluates only what is new). A negative 'n_keep' drops everything. */
LOOM_API void loom_llama_kv_truncate(struct loom_llama_context * lctx, int32_t n_keep);
/* Frees the cells of sequence 'seq_id' (< 0: of every sequence) at positions [p0, p1) (p0 < 0:
 * from 0; p1 < 0: to the end). Returns the number of cells freed. The other sequences' cells are
 * untouched; the freed ones are reused by later tokens. */
LOOM_API int32_t loom_llama_kv_seq_rm(struct loom_llama_context * lctx, int32_t seq_id, int32_t p0, int32_t p1);
/* The highest position sequence 'seq_id' holds in the KV cache, -1 when it holds none. */
LOOM_API int32_t loom_llama_kv_seq_pos_max(const struct loom_llama_context * lctx, int32_t seq_id);
/* Cells in use, of n_ctx. */
LOOM_API int32_t loom_llama_kv_used_cells(const struct loom_llama_context * lctx);

/* Tokens of one decode call, any mix of sequences (the arrays are the caller's, [n_tokens] each). */
struct loom_llama_batch {
    int32_t n_tokens;
    const int32_t * token;   /* token ids */
    const int32_t * pos;     /* each token's position in its sequence (>= 0; its RoPE position) */
    const int32_t * seq_id;  /* each token's sequence (>= 0) */
    const int8_t * logits;   /* non-zero: compute the token's logits; NULL: only those of the last token */
};
/* Runs the batch: each token's K and V go to a free cell tagged (seq_id, pos), and the tokens are
 * computed together in steps of at most n_batch (a sequence's tokens come in position order: a
 * token sees the cells of its sequence written by earlier tokens of the batch and before). Only
 * the rows asked for go through the output layer. Errors (logged; nothing is run): LOOM_ERR_INVALID_ARG
 * for n_tokens <= 0, a NULL array other than 'logits', a token id outside the vocabulary, a negative
 * position or sequence id; LOOM_ERR_TOO_LARGE when fewer than n_tokens cells are free ("the KV cache
 * is full"); LOOM_ERR_OOM. A backend failure returns its status with the failing step's cells
 * freed (the steps before it stay in the cache), and no logits. */
LOOM_API enum loom_status loom_llama_decode_batch(struct loom_llama_context * lctx, const struct loom_llama_batch * batch);
/* Runs 'n_tokens' tokens of sequence 0 at its next positions, in steps of at most n_batch, with the
 * logits of the last one (of every one with logits_all). Errors: LOOM_ERR_TOO_LARGE when n_past +
 * n_tokens > n_ctx or fewer cells are free (nothing is run), LOOM_ERR_INVALID_ARG for a token id
 * outside the vocabulary, the backend's status on failure. */
LOOM_API enum loom_status loom_llama_decode(struct loom_llama_context * lctx, const int32_t * tokens, int32_t n_tokens);
/* Logits [n_vocab] of the last token of the last decode call whose logits were computed; NULL
 * before the first decode. */
LOOM_API const float * loom_llama_get_logits(const struct loom_llama_context * lctx);
/* Logits [n_vocab] of token 'i' of the last decode call (batch index; negative counts from the
 * end: -1 is the last token); NULL for an index outside the call or a token whose logits were not
 * asked for. Valid until the next decode. */
LOOM_API const float * loom_llama_get_logits_ith(const struct loom_llama_context * lctx, int32_t i);
/* What loom_model_fit measured and chose. Sizes in bytes, as the buffers would be allocated. */
#define LOOM_FIT_MAX_LAYERS 4096
struct loom_fit {
    const char * device;          /* the offload devices' registry names ("sim0+sim1", in device_names),
                                     NULL when there is none */
    char device_names[LOOM_MAX_DEVICES * 24];
    int n_devices;                /* the devices the layers are shared between (split mode and shares as in
                                     loom_model_load); free, margin and compute bytes below are their sums */
    int n_layer;                  /* the model's layers */
    int n_gpu_layers;             /* the layers that fit (the last ones; with all, the output layer too) */
    uint64_t layer_bytes[LOOM_FIT_MAX_LAYERS]; /* [n_layer] each layer's weights on the device */
    uint64_t output_bytes;        /* output.weight and output_norm.weight (the embedding when tied) */
    uint64_t kv_layer_bytes;      /* one layer's K and V at the context size */
    uint64_t compute_bytes;       /* compute buffers of the largest step (n_batch tokens, the context full) */
    uint64_t free_bytes;          /* the device's free memory */
    uint64_t margin_bytes;        /* kept free: the margin asked, or the context's reserve when larger */
    uint64_t need_bytes;          /* weights and KV cache of the layers chosen */
};
/* Chooses how many layers of the model in 'file' to offload (to the devices loom_model_load would use
 * with 'mp') so that on each device free memory >= compute + margin + its share of the chosen layers'
 * weights and KV cache (the same assignment as the load's), from
 * sizes measured by a dry run: the model mapped on the CPU (no copy), each weight's size in the
 * device's buffer type, the KV cache at 'cp' (n_ctx, cache_type), and the scheduler's plan of the
 * largest step (n_batch tokens attending over the full context) in a context whose KV memory is
 * never touched. Without an offload device: LOOM_OK and 0 layers. Errors: those of
 * loom_model_load and loom_llama_context_new; LOOM_ERR_UNSUPPORTED past LOOM_FIT_MAX_LAYERS. */
LOOM_API enum loom_status loom_model_fit(struct loom_model_file * file, struct loom_model_params mp, struct loom_llama_context_params cp, size_t margin,
                                struct loom_fit * out);

/* Bytes held in one device's memory (for a memory breakdown). */
struct loom_llama_memory {
    size_t model;    /* weights (wrapped mapped file included, for the host) */
    size_t context;  /* KV cache */
    size_t compute;  /* the scheduler's compute buffers (0 before the first decode) */
};
/* What 'model' and 'lctx' (either may be NULL) hold on 'dev': its device memory, or with 'dev' NULL
 * or the CPU device, host memory (mapped weights, CPU buffers, pinned host memory of a device). */
LOOM_API void loom_llama_memory_breakdown(const struct loom_model * model, const struct loom_llama_context * lctx, loom_backend_dev_t dev,
                                 struct loom_llama_memory * out);

/* The scheduler (for introspection: splits, copies, buffer sizes). */
LOOM_API loom_backend_sched_t loom_llama_get_sched(struct loom_llama_context * lctx);

/* Reads a model file's hyper-parameters and, when 'vocab' is not NULL, its vocabulary (the caller
 * owns it: loom_vocab_free), and nothing else: for a caller that needs only these (the commands
 * that go on to load the weights use loom_model_file_open). Errors as for loom_model_load. */
LOOM_API enum loom_status loom_model_read_meta(const char * path, struct loom_hparams * hp, struct loom_vocab ** vocab);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_LLAMA_H */
