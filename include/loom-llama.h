/* loom-llama.h -- the model runner: sampling, LLaMA models from GGUF (the vocabulary is in loom-vocab.h). */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom.h"
#include "loom-backend.h"
#include "loom-vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ sampling */
/* (section owned by the sampler work)
 *
 * Picks the next token from a row of logits: repetition penalty (Keskar et al. 2019, "CTRL"),
 * presence and frequency penalties (as OpenAI's API defines them),
 * then temperature, top-k (Fan et al. 2018), top-p / nucleus (Holtzman et al. 2019, "The Curious
 * Case of Neural Text Degeneration"), min-p (Nguyen et al. 2024), then a draw from the softmax of
 * what is left. Deterministic for a given seed. */

/* Seed value that means "pick one from the clock"; loom_sampler_get_seed reports the one picked. */
#define LOOM_DEFAULT_SEED UINT64_MAX

struct loom_sampler_params {
    float temp;            /* temperature; <= 0 means greedy (argmax, ties to the lowest id) */
    int top_k;             /* keep the k most likely tokens; <= 0 = off */
    float top_p;           /* keep the smallest most-likely prefix whose probability reaches p; >= 1 = off */
    float min_p;           /* drop tokens with probability < min_p * (top probability); <= 0 = off */
    float repeat_penalty;  /* > 0; 1 = off: logits of recent tokens are divided (if > 0) or multiplied (if < 0) */
    int repeat_last_n;     /* how many accepted tokens the penalties look back; 0 = off */
    float presence_penalty;   /* subtracted from the logit of each token among them; 0 = off */
    float frequency_penalty;  /* times the token's count among them, subtracted from its logit; 0 = off */
    uint64_t seed;         /* PRNG seed (0 is fine); LOOM_DEFAULT_SEED = from the clock */
};

struct loom_sampler;

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1 (off),
 * repeat_last_n 64, presence and frequency penalties 0 (off), seed LOOM_DEFAULT_SEED. */
struct loom_sampler_params loom_sampler_default_params(void);

/* Creates a sampler. Errors (logged, '*out' = NULL): LOOM_ERR_INVALID_ARG for NULL pointers, a NaN
 * temp/top_p/min_p, repeat_penalty not > 0 (or NaN/inf), a presence or frequency penalty NaN/inf,
 * repeat_last_n < 0 or > 1<<20;
 * LOOM_ERR_OOM. Out-of-range but meaningful values are clamped (top_p <= 0 and min_p >= 1 keep
 * only the most likely token(s)). */
enum loom_status loom_sampler_new(const struct loom_sampler_params * params, struct loom_sampler ** out);
void loom_sampler_free(struct loom_sampler * s);   /* NULL is a no-op */

/* Samples a token id in [0, n_vocab) from 'logits' [n_vocab] (not modified) into '*token'.
 * NaN logits count as -inf (never chosen). +inf logits win outright: when any is present, the
 * draw is uniform among them (greedy: the lowest such id). The candidate list never becomes
 * empty: top-k, top-p and min-p each keep at least the most likely token.
 * Errors (logged, '*token' untouched): LOOM_ERR_INVALID_ARG for NULL pointers, n_vocab <= 0, or
 * logits that are all -inf/NaN (nothing can be sampled); LOOM_ERR_OOM. */
enum loom_status loom_sampler_sample(struct loom_sampler * s, const float * logits, int n_vocab, int32_t * token);

/* Appends 'token' to the history the repetition penalty looks at (keep the last repeat_last_n).
 * Call it for prompt tokens and for each sampled token you keep. Negative ids are ignored. */
void loom_sampler_accept(struct loom_sampler * s, int32_t token);

/* Clears the history and restarts the PRNG from the seed in use. */
void loom_sampler_reset(struct loom_sampler * s);

/* The seed actually in use (the clock-derived one when LOOM_DEFAULT_SEED was asked for); creating
 * a sampler with it reproduces the same draws. */
uint64_t loom_sampler_get_seed(const struct loom_sampler * s);

/* ================================================================ chat templates */
/* (section owned by the chat work)
 *
 * A conversation written in the format a model was tuned on. GGUF files carry the format as a Jinja
 * template (tokenizer.chat_template); Loom has no Jinja interpreter: it recognizes the common
 * families from the template's text (the markers each one uses, as the field's built-in formatter
 * does) and writes them itself. The published formats: ChatML (OpenAI, "<|im_start|>role\n...
 * <|im_end|>\n"), Llama 2 ("[INST] ... [/INST]", the system text between <<SYS>> markers), Mistral
 * v1/v3/v3-tekken/v7, Llama 3 ("<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>"), Phi-3
 * ("<|role|>\n...<|end|>\n"), Gemma ("<start_of_turn>user|model\n...<end_of_turn>\n"), Zephyr
 * ("<|role|>\n...<|endoftext|>\n"), DeepSeek Coder ("### Instruction:" / "### Response:"), DeepSeek
 * V2 ("User: " / "Assistant: ") and V3 ("<｜User｜>" / "<｜Assistant｜>"). The BOS token is not part
 * of the text: the tokenizer adds it. */

enum loom_chat_template {
    LOOM_CHAT_TEMPLATE_CHATML = 0,           /* "chatml" (also the fallback) */
    LOOM_CHAT_TEMPLATE_LLAMA2,               /* "llama2": [INST] turns, the system text as a plain line */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS,           /* "llama2-sys": ... in <<SYS>> markers */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS,       /* "llama2-sys-bos": ... and "<s>" before each later [INST] */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP,     /* "llama2-sys-strip": ... contents trimmed */
    LOOM_CHAT_TEMPLATE_MISTRAL_V1,           /* "mistral-v1" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V3,           /* "mistral-v3" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN,    /* "mistral-v3-tekken" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V7,           /* "mistral-v7" */
    LOOM_CHAT_TEMPLATE_LLAMA3,               /* "llama3" */
    LOOM_CHAT_TEMPLATE_PHI3,                 /* "phi3" */
    LOOM_CHAT_TEMPLATE_GEMMA,                /* "gemma" */
    LOOM_CHAT_TEMPLATE_ZEPHYR,               /* "zephyr" */
    LOOM_CHAT_TEMPLATE_DEEPSEEK,             /* "deepseek" (DeepSeek Coder) */
    LOOM_CHAT_TEMPLATE_DEEPSEEK2,            /* "deepseek2" */
    LOOM_CHAT_TEMPLATE_DEEPSEEK3,            /* "deepseek3" (also DeepSeek-R1) */
    LOOM_CHAT_TEMPLATE_COUNT
};

/* One message: 'role' "system", "user" or "assistant" (another role is written as the family writes
 * a role name, or as an assistant turn where the family has fixed markers); 'content' UTF-8. */
struct loom_chat_message {
    const char * role;
    const char * content;
};

/* The family's name as --chat-template spells it ("chatml", "llama3", ...); NULL outside the enum. */
const char * loom_chat_template_name(enum loom_chat_template t);
/* Looks 'name' up among the names above into '*out'. Errors: LOOM_ERR_INVALID_ARG for NULL or an
 * unknown name (logged with the list of known ones). */
enum loom_status loom_chat_template_from_name(const char * name, enum loom_chat_template * out);
/* Recognizes the family of a Jinja template text 'tmpl' (NUL-terminated; NULL = the file has none)
 * from the markers it contains, into '*out'. Returns false, with '*out' = CHATML, when it recognizes
 * none (the caller should say that it falls back to ChatML). */
bool loom_chat_template_detect(const char * tmpl, enum loom_chat_template * out);
/* The text of the token that closes a turn in the family, where it has one of its own
 * ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|EOT|>"), else NULL
 * (the [INST] families and DeepSeek V2/V3 close turns with the EOS token). */
const char * loom_chat_template_eot_text(enum loom_chat_template t);
/* Writes 'n_msgs' messages in format 't', then with 'add_assistant' the opening of the assistant's
 * reply, into 'buf' ('size' bytes; a NUL follows when there is room). Returns the length in bytes,
 * -(length) when 'size' is smaller (call again with that room), LOOM_TOKEN_ERROR (logged) for a
 * template outside the enum, NULL msgs with n_msgs > 0, a message with a NULL role or content,
 * size < 0, NULL buf with size > 0, or out of memory. */
int32_t loom_chat_apply(enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n_msgs, bool add_assistant, char * buf,
                        int32_t size);

/* ================================================================ models */
/* (section owned by the runner work) */

struct loom_vocab;

/* Architectures Loom runs (general.architecture). */
enum loom_arch {
    LOOM_ARCH_LLAMA = 0,   /* "llama": Llama 1-3.x, Mistral, TinyLlama, SmolLM; RoPE on adjacent pairs */
    LOOM_ARCH_QWEN2,       /* "qwen2": llama plus q/k/v biases, RoPE in NeoX pairing (the two halves of a head) */
    LOOM_ARCH_COUNT
};
/* "llama", "qwen2"; NULL outside the enum. */
const char * loom_arch_name(enum loom_arch arch);

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
const char * loom_split_mode_name(enum loom_split_mode mode);

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
    loom_progress_callback progress;
    void * progress_user_data;
};

struct loom_model;

/* Defaults: no offload, split mode LAYER over every non-CPU device by free memory, mmap on, mlock off. */
struct loom_model_params loom_model_default_params(void);
/* Loads a GGUF llama model. Errors (logged with the reason, *out set to NULL, nothing leaked):
 * LOOM_ERR_IO (cannot open/map/read), LOOM_ERR_FORMAT (malformed GGUF; a 'llama.*' hyper-parameter
 * key missing where required, out of range, or present with a value type other than an integer
 * (any width, the value fitting) or f32/f64 as the key calls for; missing or misshapen tensor),
 * LOOM_ERR_UNSUPPORTED (an architecture other than those of enum loom_arch -- the message lists them --,
 * a RoPE scaling type other than none, linear and yarn, a tensor type Loom cannot compute; -sm row
 * over devices that cannot all-reduce, or heads / feed-forward rows that do not split into whole
 * quantized blocks), LOOM_ERR_INVALID_ARG (an unknown device name, the CPU or a device twice in
 * 'device', main_gpu outside the list, a negative, NaN or all-zero-but-set tensor_split, a split
 * mode outside the enum), LOOM_ERR_OOM, LOOM_ERR_CANCELLED. */
enum loom_status loom_model_load(const char * path, struct loom_model_params params, struct loom_model ** out);
void loom_model_free(struct loom_model * model);
const struct loom_hparams * loom_model_hparams(const struct loom_model * model);
const struct loom_vocab * loom_model_vocab(const struct loom_model * model);
uint64_t loom_model_n_params(const struct loom_model * model);   /* elements of all weights */
uint64_t loom_model_size(const struct loom_model * model);       /* bytes of all weights */
/* "CPU", or the offload devices' registry names ("CUDA0", "sim0+sim1") followed by "+CPU". */
const char * loom_model_backend_name(const struct loom_model * model);
/* The file's tokenizer.chat_template (a Jinja template text), or NULL when it has none (or one that
 * is not a string). Valid while the model lives. */
const char * loom_model_chat_template(const struct loom_model * model);
/* A short description, e.g. "llama 260K F32". */
const char * loom_model_desc(const struct loom_model * model);
/* The split mode the model was loaded with (NONE with fewer than two devices), and how many devices
 * hold its offloaded layers (0: none). */
enum loom_split_mode loom_model_split_mode(const struct loom_model * model);
int loom_model_n_devices(const struct loom_model * model);
/* The device that holds layer 'il' (NULL: the CPU; with ROW, the output device for the split layers). */
loom_backend_dev_t loom_model_layer_device(const struct loom_model * model, int il);

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
    enum loom_type type_k;  /* KV cache K type: F32, F16 or BF16 (else LOOM_ERR_UNSUPPORTED) */
    enum loom_type type_v;  /* KV cache V type: as type_k */
    enum loom_llama_flash_attn flash_attn;
};

struct loom_llama_context;

/* Defaults: the model's training context, batches of 512, all cores, last logits only, F16 K and
 * V, flash attention auto. */
struct loom_llama_context_params loom_llama_context_default_params(void);
/* Creates the KV cache (per layer, on the device that runs the layer) and the scheduler.
 * The cache is K [n_embd_kv, n_ctx] per layer, and V the same with flash attention, else stored
 * transposed [n_ctx, n_embd_kv] (one row per channel, for the product with the softmax); the
 * sizes are logged at INFO with the bytes per token. With layers on a GPU, the context then
 * decodes one batch of up to 8 tokens and one token and clears the cache again (a warm-up: the
 * device's one-time work happens here, not in the caller's first step); an error there is returned.
 * With split mode ROW each device caches its KV heads of every split layer, and the context joins
 * the devices' backends in a communicator for the all-reduces (loom_backend_comm_new).
 * Errors: LOOM_ERR_INVALID_ARG (n_ctx/n_batch out of range, a flash_attn value not in the enum),
 * LOOM_ERR_UNSUPPORTED (a cache type other than F32, F16 or BF16; -sm row over CUDA devices
 * without NCCL), LOOM_ERR_OOM. */
enum loom_status loom_llama_context_new(struct loom_model * model, struct loom_llama_context_params params,
                                        struct loom_llama_context ** out);
void loom_llama_context_free(struct loom_llama_context * lctx);
int32_t loom_llama_n_ctx(const struct loom_llama_context * lctx);

/* The KV cache holds n_ctx cells shared by every sequence (the field's unified cache): each cell
 * is tagged with the sequence id and the position of the token whose K and V it holds, and a token
 * attends to the cells of its own sequence at positions <= its own. The calls without a sequence
 * id (loom_llama_decode, _n_past, _kv_truncate) work on sequence 0. */

/* Positions of sequence 0 in the KV cache (1 + its highest position; 0 when it has none). */
int32_t loom_llama_n_past(const struct loom_llama_context * lctx);
/* Empties the KV cache (every sequence). */
void loom_llama_kv_clear(struct loom_llama_context * lctx);
/* Keeps the positions [0, n_keep) of sequence 0 and drops the rest (loom_llama_kv_seq_rm(lctx, 0,
 * n_keep, -1)): the next decode runs at position n_keep (a prompt that extends the cached tokens
 * evaluates only what is new). A negative 'n_keep' drops everything. */
void loom_llama_kv_truncate(struct loom_llama_context * lctx, int32_t n_keep);
/* Frees the cells of sequence 'seq_id' (< 0: of every sequence) at positions [p0, p1) (p0 < 0:
 * from 0; p1 < 0: to the end). Returns the number of cells freed. The other sequences' cells are
 * untouched; the freed ones are reused by later tokens. */
int32_t loom_llama_kv_seq_rm(struct loom_llama_context * lctx, int32_t seq_id, int32_t p0, int32_t p1);
/* The highest position sequence 'seq_id' holds in the KV cache, -1 when it holds none. */
int32_t loom_llama_kv_seq_pos_max(const struct loom_llama_context * lctx, int32_t seq_id);
/* Cells in use, of n_ctx. */
int32_t loom_llama_kv_used_cells(const struct loom_llama_context * lctx);

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
enum loom_status loom_llama_decode_batch(struct loom_llama_context * lctx, const struct loom_llama_batch * batch);
/* Runs 'n_tokens' tokens of sequence 0 at its next positions, in steps of at most n_batch, with the
 * logits of the last one (of every one with logits_all). Errors: LOOM_ERR_TOO_LARGE when n_past +
 * n_tokens > n_ctx or fewer cells are free (nothing is run), LOOM_ERR_INVALID_ARG for a token id
 * outside the vocabulary, the backend's status on failure. */
enum loom_status loom_llama_decode(struct loom_llama_context * lctx, const int32_t * tokens, int32_t n_tokens);
/* Logits [n_vocab] of the last token of the last decode call whose logits were computed; NULL
 * before the first decode. */
const float * loom_llama_get_logits(const struct loom_llama_context * lctx);
/* Logits [n_vocab] of token 'i' of the last decode call (batch index; negative counts from the
 * end: -1 is the last token); NULL for an index outside the call or a token whose logits were not
 * asked for. Valid until the next decode. */
const float * loom_llama_get_logits_ith(const struct loom_llama_context * lctx, int32_t i);
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
/* Chooses how many layers of the model at 'path' to offload (to the devices loom_model_load would use
 * with 'mp') so that on each device free memory >= compute + margin + its share of the chosen layers'
 * weights and KV cache (the same assignment as the load's), from
 * sizes measured by a dry run: the model mapped on the CPU (no copy), each weight's size in the
 * device's buffer type, the KV cache at 'cp' (n_ctx, cache_type), and the scheduler's plan of the
 * largest step (n_batch tokens attending over the full context) in a context whose KV memory is
 * never touched. Without an offload device: LOOM_OK and 0 layers. Errors: those of
 * loom_model_load and loom_llama_context_new; LOOM_ERR_UNSUPPORTED past LOOM_FIT_MAX_LAYERS. */
enum loom_status loom_model_fit(const char * path, struct loom_model_params mp, struct loom_llama_context_params cp, size_t margin,
                                struct loom_fit * out);

/* Bytes held in one device's memory (for a memory breakdown). */
struct loom_llama_memory {
    size_t model;    /* weights (wrapped mapped file included, for the host) */
    size_t context;  /* KV cache */
    size_t compute;  /* the scheduler's compute buffers (0 before the first decode) */
};
/* What 'model' and 'lctx' (either may be NULL) hold on 'dev': its device memory, or with 'dev' NULL
 * or the CPU device, host memory (mapped weights, CPU buffers, pinned host memory of a device). */
void loom_llama_memory_breakdown(const struct loom_model * model, const struct loom_llama_context * lctx, loom_backend_dev_t dev,
                                 struct loom_llama_memory * out);

/* The scheduler (for introspection: splits, copies, buffer sizes). */
loom_backend_sched_t loom_llama_get_sched(struct loom_llama_context * lctx);

/* Reads only the vocabulary (tokenizer.ggml.* keys) of a GGUF model file. Errors as for
 * loom_model_load (LOOM_ERR_UNSUPPORTED for a tokenizer other than 'llama' or 'gpt2', or a BPE
 * pre-tokenizer Loom does not know). */
enum loom_status loom_vocab_load_gguf(const char * path, struct loom_vocab ** out);
/* Reads a model file's hyper-parameters and vocabulary without touching its weights (cheap: for
 * validating a request before loading). 'vocab' may be NULL. Errors as for loom_model_load. */
enum loom_status loom_model_read_meta(const char * path, struct loom_hparams * hp, struct loom_vocab ** vocab);

/* Shape and contents of a synthetic model written by loom_gen_model. */
struct loom_gen_params {
    int32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, n_ctx;
    enum loom_type type;          /* F32, F16 or BF16 for the matrices (norm weights are always F32) */
    bool tied;                    /* no separate output.weight (the embedding is shared) */
    uint64_t seed;                /* the weights depend only on the seed and the shape */
    const char * tokenizer_path;  /* llama2.c tokenizer file for the vocabulary, or NULL: byte-level */
    const char * name;            /* general.name */
    enum loom_arch arch;          /* LLAMA (0) or QWEN2 (also writes the q/k/v biases) */
    float rope_freq_base;         /* <arch>.rope.freq_base; 0: 10000 */
    enum loom_rope_scaling rope_scaling;  /* NONE (0): no scaling keys; LINEAR or YARN: the type and factor */
    float rope_scale;             /* <arch>.rope.scaling.factor with LINEAR or YARN (> 0) */
    int32_t n_ctx_orig;           /* YARN: <arch>.rope.scaling.original_context_length; 0: n_ctx */
    bool rope_freqs;              /* llama: a rope_freqs.weight of Llama 3.1's shape of factors (1 for the
                                   * fast pairs, 8 for the slow ones, a smooth ramp between) */
    const char * chat_template;   /* tokenizer.chat_template, or NULL */
    const char * vocab_path;      /* a GGUF file whose tokenizer.* keys are copied (any vocabulary Loom
                                   * reads, e.g. Llama 3's or Qwen2's), or NULL; n_vocab 0 takes its
                                   * token count. Not together with tokenizer_path. */
};
/* Fills 'p' with a named shape: "260k", "15m", "110m" (the llama2.c family), "1b" (TinyLlama 1.1B)
 * or "7b" (Llama-2 7B). Returns LOOM_ERR_INVALID_ARG for an unknown name. */
enum loom_status loom_gen_preset(const char * name, struct loom_gen_params * p);
/* Writes a llama- or qwen2-architecture GGUF with random weights: matrices ~ N(0, 0.02^2) (Irwin-Hall
 * approximation), norm weights 1 + N(0, 0.01^2), biases N(0, 0.1^2), streamed so the model never
 * sits in memory. Errors: LOOM_ERR_INVALID_ARG (a shape rule broken: heads dividing n_embd, ...;
 * rope parameters out of range; rope_freqs with qwen2; n_vocab other than the token count of
 * 'vocab_path'; both vocabulary sources), LOOM_ERR_IO, LOOM_ERR_FORMAT (bad tokenizer file or
 * vocabulary GGUF), LOOM_ERR_UNSUPPORTED (a vocabulary Loom cannot read), LOOM_ERR_OOM. */
enum loom_status loom_gen_model(const struct loom_gen_params * p, const char * out_path);

/* Called after each tensor of loom_model_quantize is written: tensor 'i' of 'n', its name, its
 * type in the input and in the output, and its data size in bytes in each. */
typedef void (*loom_quantize_progress_fn)(void * user, int64_t i, int64_t n, const char * name, enum loom_type from,
                                          enum loom_type to, uint64_t in_bytes, uint64_t out_bytes);
struct loom_quantize_params {
    int n_threads;                       /* threads quantizing rows; <= 0: loom_n_cpus() */
    loom_quantize_progress_fn progress;  /* optional */
    void * user;                         /* passed to 'progress' */
};
/* The preset names loom_model_quantize takes, comma-separated (for messages), and whether 'name'
 * is one of them (case-insensitive). */
const char * loom_quantize_preset_names(void);
bool loom_quantize_preset_known(const char * name);
/* Writes 'out_path': the GGUF model at 'in_path' (F32 / F16 / BF16 weights) with its weights
 * converted to the preset 'preset' (the field's names: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
 * Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, IQ4_NL, IQ4_XS, F16, BF16, F32) and the field's
 * per-tensor mix (llama.cpp's llama_tensor_get_type without an importance matrix): output.weight
 * (or token_embd when there is none) Q6_K, or Q8_0 when its rows are not a multiple of 256;
 * attn_v, attn_output and ffn_down of the first / last eighth and every third layer with more
 * bits in the _M / _L / Q2_K presets; rows that do not fit 256-blocks fall back to IQ4_NL, Q5_0,
 * Q5_1 or Q8_0, and to F16 where 32-blocks do not fit either. Norms and other 1-d tensors keep
 * their type. Keys are copied; general.file_type (the llama_ftype value) and
 * general.quantization_version (2) are set. The quantizers (src/quant) give the reference
 * engine's bytes. Written through the GGUF writer (temporary file + rename; never over the input).
 * Errors (logged, nothing left at 'out_path'): LOOM_ERR_INVALID_ARG (unknown preset; 'out_path' is
 * the input or not a writable file), LOOM_ERR_FORMAT (malformed input; a tensor holding NaN or
 * inf, named), LOOM_ERR_UNSUPPORTED (an already quantized or unconvertible tensor), LOOM_ERR_IO,
 * LOOM_ERR_OOM. */
enum loom_status loom_model_quantize(const char * in_path, const char * out_path, const char * preset,
                                     const struct loom_quantize_params * params);

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
