/* loom-llama.h -- the model runner: vocabulary and tokenizer, sampling, LLaMA models from GGUF. */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom.h"
#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ vocabulary and tokenizer */
/* (section owned by the tokenizer work)
 *
 * A vocabulary in the GGUF convention for tokenizer.ggml.model = "llama" (SentencePiece): pieces
 * are byte strings in which a space is written U+2581 ("\xE2\x96\x81"), BOS/EOS are the control
 * pieces "<s>"/"</s>", and byte-fallback pieces are "<0xNN>" (two upper-case hex digits).
 * Token ids are int32_t in [0, n_tokens). */

struct loom_vocab;

/* GGUF token types (tokenizer.ggml.token_type). */
enum loom_token_type {
    LOOM_TOKEN_TYPE_UNDEFINED = 0,     /* returned for ids out of range; never stored */
    LOOM_TOKEN_TYPE_NORMAL = 1,        /* ordinary text piece, produced by merges */
    LOOM_TOKEN_TYPE_UNKNOWN = 2,       /* "<unk>": a character that has no piece and no byte fallback */
    LOOM_TOKEN_TYPE_CONTROL = 3,       /* "<s>", "</s>": never produced from user text unless parsed */
    LOOM_TOKEN_TYPE_USER_DEFINED = 4,  /* text matched atomically before merging */
    LOOM_TOKEN_TYPE_UNUSED = 5,        /* reserved: decoded as text, never produced */
    LOOM_TOKEN_TYPE_BYTE = 6,          /* "<0xNN>": the single byte 0xNN */
    LOOM_TOKEN_TYPE_COUNT
};

/* Returned by loom_tokenize, loom_token_to_piece and loom_detokenize for invalid arguments or
 * out of memory (the reason is logged). Distinct from every -(needed) size request. */
#define LOOM_TOKEN_ERROR INT32_MIN

/* Largest vocabulary loom_vocab_new accepts (tokens). */
#define LOOM_VOCAB_MAX_TOKENS (1 << 24)
/* Longest piece loom_vocab_new accepts (bytes). */
#define LOOM_VOCAB_MAX_PIECE (1 << 16)

/* Plain arrays describing a vocabulary, e.g. as read from GGUF tokenizer.ggml.* keys. Nothing is
 * kept: loom_vocab_new copies what it needs. */
struct loom_vocab_params {
    int32_t n_tokens;             /* entries in each array; 1..LOOM_VOCAB_MAX_TOKENS */
    const char * const * texts;   /* [n_tokens] piece bytes (any bytes, GGUF convention) */
    const size_t * text_lens;     /* [n_tokens] bytes of each piece, or NULL: texts are NUL-terminated */
    const float * scores;         /* [n_tokens] merge priority (higher merges first), or NULL: all 0 */
    const int32_t * types;        /* [n_tokens] enum loom_token_type (1..6), or NULL: inferred (BOS/EOS
                                   * control, UNK unknown, "<0xNN>" byte, the rest normal) */
    int32_t bos_id;               /* -1 = none */
    int32_t eos_id;               /* -1 = none */
    int32_t unk_id;               /* -1 = none */
    bool add_bos;                 /* what callers should pass as loom_tokenize's 'add_bos' by default */
    bool add_space_prefix;        /* SentencePiece's add_dummy_prefix: prepend a space to the text */
};

/* Defaults: no arrays, n_tokens 0, bos/eos/unk -1, add_bos true, add_space_prefix true (the values
 * for tokenizer.ggml.model = "llama" when the GGUF keys are absent). */
struct loom_vocab_params loom_vocab_default_params(void);

/* Builds a vocabulary from 'params' (copied) into '*out'.
 * Validates everything and returns, with a logged reason and '*out' = NULL:
 *  - LOOM_ERR_INVALID_ARG: NULL pointers; n_tokens out of range; a NULL text with nonzero length;
 *    a piece longer than LOOM_VOCAB_MAX_PIECE; a NaN score; a type outside 1..6; bos/eos/unk
 *    outside [-1, n_tokens); add_bos with no BOS; a byte-type piece not of the form "<0xNN>";
 *    neither a complete set of byte pieces nor an unknown token (text could not be represented);
 *  - LOOM_ERR_OOM.
 * Not errors (logged as warnings): duplicate pieces (lookups and the tokenizer use the lowest id
 * among normal/user-defined pieces with that text, else the lowest id; the others stay decodable);
 * byte pieces missing for some of the 256 bytes (byte fallback is then unavailable and characters
 * without a piece become the unknown token; see loom_vocab_has_byte_fallback). */
enum loom_status loom_vocab_new(const struct loom_vocab_params * params, struct loom_vocab ** out);

/* Reads a llama.c tokenizer file ("tokenizer.bin": int32 max_token_length, then for each token
 * float32 score, int32 length, that many bytes; little-endian) into '*out', converted to the
 * GGUF convention: spaces become U+2581; id 0 is "<unk>" (unknown), 1 "<s>" (BOS, control),
 * 2 "</s>" (EOS, control) whatever the file spells them (tok512.bin has "\n<s>\n"); pieces
 * "<0xNN>" are byte tokens; the rest normal; add_bos and add_space_prefix true.
 * 'n_tokens' is the vocabulary size from the checkpoint header, or 0 to read entries up to the
 * end of the file (entries after the first 'n_tokens' are ignored with a warning).
 * Errors: LOOM_ERR_INVALID_ARG (NULL, n_tokens < 0 or > LOOM_VOCAB_MAX_TOKENS), LOOM_ERR_IO
 * (cannot open or read), LOOM_ERR_FORMAT (max_token_length <= 0; a negative length or one above
 * max_token_length; an entry running past the end of the file; fewer than 3 or than 'n_tokens'
 * entries; a NaN score), LOOM_ERR_OOM; each with a logged reason. */
enum loom_status loom_vocab_load_llama2c(const char * path, int32_t n_tokens, struct loom_vocab ** out);
/* The same from 'size' bytes in memory (not kept). */
enum loom_status loom_vocab_load_llama2c_buffer(const void * data, size_t size, int32_t n_tokens,
                                                struct loom_vocab ** out);

void loom_vocab_free(struct loom_vocab * vocab);   /* NULL is a no-op */

/* Accessors. For an id outside [0, n_tokens): text NULL (len 0), score 0, type UNDEFINED. */
int32_t loom_vocab_n_tokens(const struct loom_vocab * vocab);
/* The piece's bytes in the GGUF convention; '*len' (may be NULL) gets its length in bytes. The
 * bytes are followed by a NUL, so pieces without embedded NULs can be used as C strings. */
const char * loom_vocab_get_text(const struct loom_vocab * vocab, int32_t id, size_t * len);
float loom_vocab_get_score(const struct loom_vocab * vocab, int32_t id);
enum loom_token_type loom_vocab_get_type(const struct loom_vocab * vocab, int32_t id);
int32_t loom_vocab_bos(const struct loom_vocab * vocab);   /* -1 = none */
int32_t loom_vocab_eos(const struct loom_vocab * vocab);   /* -1 = none */
int32_t loom_vocab_unk(const struct loom_vocab * vocab);   /* -1 = none */
bool loom_vocab_get_add_bos(const struct loom_vocab * vocab);
bool loom_vocab_get_add_space_prefix(const struct loom_vocab * vocab);
/* True when all 256 "<0xNN>" byte pieces exist, so any byte string can be tokenized exactly. */
bool loom_vocab_has_byte_fallback(const struct loom_vocab * vocab);
/* Id of the piece with exactly these bytes (GGUF convention), or -1. With duplicates, the id the
 * tokenizer uses (see loom_vocab_new). */
int32_t loom_vocab_find(const struct loom_vocab * vocab, const char * text, size_t len);

/* Tokenizes 'text_len' bytes of 'text' (UTF-8; invalid bytes are kept through byte fallback) with
 * SentencePiece's BPE (Kudo & Richardson 2018, "SentencePiece"; Sennrich et al. 2016 for BPE):
 *  1. with 'parse_special', control pieces ("<s>", "</s>", ...) found verbatim in the text become
 *     their ids (longest match first); otherwise such text is ordinary text;
 *  2. each remaining text segment that starts the input or follows a parsed control token gets
 *     one space prepended when the vocabulary's add_space_prefix is set (empty segments get none,
 *     so "" gives no tokens); spaces are then written U+2581;
 *  3. user-defined pieces are matched verbatim in that escaped text (longest first; so a U+2581
 *     in them matches a space) and kept whole;
 *  4. the rest is split into UTF-8 characters, and the adjacent pair whose concatenation is a
 *     normal or user-defined piece with the highest score is merged, repeatedly (ties: leftmost);
 *     a priority queue keeps this O(n log n) in the text length;
 *  5. a final symbol that is not a piece becomes its byte pieces "<0xNN>" (or, without byte
 *     fallback, the unknown token: one per run of such symbols, as SentencePiece does).
 * Only normal and user-defined pieces are ever produced by merging, so text never turns into
 * control, byte or unused tokens by accident.
 * With 'add_bos' the vocabulary's BOS comes first (pass loom_vocab_get_add_bos for the default).
 * Writes up to 'n_max' ids to 'tokens' (may be NULL when n_max is 0).
 * Returns the number of ids; -(needed) when 'n_max' is smaller than the number needed (nothing
 * useful is written; call again with at least that room); LOOM_TOKEN_ERROR (with a logged
 * reason) for a NULL vocab, NULL text with text_len > 0, n_max < 0, add_bos without a BOS token,
 * text_len > INT32_MAX / 4, or out of memory. */
int32_t loom_tokenize(const struct loom_vocab * vocab, const char * text, size_t text_len, bool add_bos,
                      bool parse_special, int32_t * tokens, int32_t n_max);

/* The bytes one token stands for: normal, user-defined and unused pieces with U+2581 turned into
 * spaces; byte pieces "<0xNN>" as the byte 0xNN; control pieces as nothing, or their raw text
 * when 'special'; the unknown token as " \xE2\x81\x87 " (" ⁇ ", SentencePiece's rendering), or
 * its raw text when 'special'. No leading space is removed (see loom_detokenize).
 * Writes no terminating NUL. Returns the number of bytes written to 'buf'; -(needed) when 'size'
 * is too small; LOOM_TOKEN_ERROR (logged) for a NULL vocab, an id out of range, size < 0, or a
 * NULL buf with size > 0. */
int32_t loom_token_to_piece(const struct loom_vocab * vocab, int32_t token, char * buf, int32_t size, bool special);

/* Flags for loom_detokenize and loom_detok_new. */
enum loom_detok_flag {
    LOOM_DETOK_SPECIAL = 1,            /* render control and unknown tokens as their raw text */
    LOOM_DETOK_KEEP_SPACE_PREFIX = 2,  /* never remove the dummy-prefix space (see below) */
};

/* Decodes a whole sequence: the concatenation of loom_token_to_piece for each id, except that when
 * the vocabulary's add_space_prefix is set (and LOOM_DETOK_KEEP_SPACE_PREFIX is not), the first
 * non-control token at the start of the sequence, and the first non-control token after each
 * control token (BOS, EOS, ...), loses one leading space if it is a text piece (normal,
 * user-defined, unused) that starts with one: the inverse of loom_tokenize's step 2, so that
 * decode(tokenize(s)) == s (with LOOM_DETOK_SPECIAL matching 'parse_special', and not counting a
 * literal U+2581 in 's', which SentencePiece cannot tell from a space). Bytes are returned as they are (invalid UTF-8 is not
 * replaced; see struct loom_detok for streaming). 'flags' is a set of enum loom_detok_flag.
 * Returns bytes written (no NUL), -(needed) when 'size' is too small, or LOOM_TOKEN_ERROR (logged)
 * for a NULL vocab, NULL tokens with n_tokens > 0, negative n_tokens/size, an id out of range,
 * or a result over INT32_MAX bytes. */
int32_t loom_detokenize(const struct loom_vocab * vocab, const int32_t * tokens, int32_t n_tokens, char * buf,
                        int32_t size, int flags);

/* Streaming detokenizer: feed ids one at a time as they are generated; each call returns only
 * complete UTF-8 characters, holding back the bytes of a character still being spelled out by
 * byte tokens. Leading-space removal follows loom_detokenize (so feed BOS and the prompt too, or
 * pass LOOM_DETOK_KEEP_SPACE_PREFIX when starting mid-sequence). Bytes that can never form a valid
 * UTF-8 character (RFC 3629) are replaced by U+FFFD, one per maximal invalid subpart (Unicode
 * 15.0 section 3.9, "U+FFFD substitution of maximal subparts"); so is an incomplete character
 * left at loom_detok_flush. Holds a pointer to 'vocab', which must outlive it. */
struct loom_detok;

/* Errors: LOOM_ERR_INVALID_ARG (NULL), LOOM_ERR_OOM. */
enum loom_status loom_detok_new(const struct loom_vocab * vocab, int flags, struct loom_detok ** out);
void loom_detok_free(struct loom_detok * d);   /* NULL is a no-op */
/* Adds 'token' and sets '*text'/'*len' to the bytes now complete (possibly 0 bytes); the pointer
 * stays valid until the next call on 'd'. Errors (nothing consumed, '*len' = 0):
 * LOOM_ERR_INVALID_ARG (NULL arguments, an id out of range), LOOM_ERR_OOM. */
enum loom_status loom_detok_push(struct loom_detok * d, int32_t token, const char ** text, size_t * len);
/* Ends the stream: returns any held-back bytes (as U+FFFD, since they are an incomplete
 * character) the same way as loom_detok_push. */
enum loom_status loom_detok_flush(struct loom_detok * d, const char ** text, size_t * len);
/* Forgets held-back bytes and starts a new sequence (the next token is again "at the start"). */
void loom_detok_reset(struct loom_detok * d);

/* ================================================================ sampling */
/* (section owned by the sampler work)
 *
 * Picks the next token from a row of logits: repetition penalty (Keskar et al. 2019, "CTRL"),
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
    int repeat_last_n;     /* how many accepted tokens the penalty looks back; 0 = off */
    uint64_t seed;         /* PRNG seed (0 is fine); LOOM_DEFAULT_SEED = from the clock */
};

struct loom_sampler;

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1 (off),
 * repeat_last_n 64, seed LOOM_DEFAULT_SEED. */
struct loom_sampler_params loom_sampler_default_params(void);

/* Creates a sampler. Errors (logged, '*out' = NULL): LOOM_ERR_INVALID_ARG for NULL pointers, a NaN
 * temp/top_p/min_p, repeat_penalty not > 0 (or NaN/inf), repeat_last_n < 0 or > 1<<20;
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

/* ================================================================ models */
/* (section owned by the runner work) */

struct loom_vocab;

/* Hyper-parameters of a LLaMA-architecture model, read from GGUF metadata ("llama.*" keys). */
struct loom_hparams {
    int32_t n_vocab;        /* tokens */
    int32_t n_ctx_train;    /* llama.context_length (2048 when absent) */
    int32_t n_embd;         /* llama.embedding_length */
    int32_t n_layer;        /* llama.block_count */
    int32_t n_head;         /* llama.attention.head_count */
    int32_t n_head_kv;      /* llama.attention.head_count_kv (grouped-query attention; = n_head when absent) */
    int32_t n_ff;           /* llama.feed_forward_length */
    int32_t n_rot;          /* llama.rope.dimension_count (= n_embd / n_head when absent) */
    float rope_freq_base;   /* llama.rope.freq_base (10000 when absent) */
    float rope_freq_scale;  /* 1 / llama.rope.scale_linear (1 when absent) */
    float rms_eps;          /* llama.attention.layer_norm_rms_epsilon (1e-5 when absent) */
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
 * LOOM_ERR_IO (cannot open/map/read), LOOM_ERR_FORMAT (malformed GGUF; a 'llama.*' hyper-parameter
 * key missing where required, out of range, or present with a value type other than an integer
 * (any width, the value fitting) or f32/f64 as the key calls for; missing or misshapen tensor),
 * LOOM_ERR_UNSUPPORTED (architecture other than llama, tensor type Loom cannot compute),
 * LOOM_ERR_OOM, LOOM_ERR_CANCELLED. */
enum loom_status loom_model_load(const char * path, struct loom_model_params params, struct loom_model ** out);
void loom_model_free(struct loom_model * model);
const struct loom_hparams * loom_model_hparams(const struct loom_model * model);
const struct loom_vocab * loom_model_vocab(const struct loom_model * model);
uint64_t loom_model_n_params(const struct loom_model * model);   /* elements of all weights */
uint64_t loom_model_size(const struct loom_model * model);       /* bytes of all weights */
/* "CPU", or the offload device's registry name ("CUDA0", "sim0") followed by "+CPU". */
const char * loom_model_backend_name(const struct loom_model * model);
/* A short description, e.g. "llama 260K F32". */
const char * loom_model_desc(const struct loom_model * model);

/* Whether a step's attention is the fused FLASH_ATTN_EXT op (the field's -fa). */
enum loom_llama_flash_attn {
    LOOM_LLAMA_FLASH_ATTN_AUTO = -1,  /* on for the layers whose device supports the op, off for the others */
    LOOM_LLAMA_FLASH_ATTN_OFF = 0,    /* Q K^T, softmax and the product with V as separate ops */
    LOOM_LLAMA_FLASH_ATTN_ON = 1,     /* every layer; where the layer's device lacks the op, it runs on the CPU */
};

struct loom_llama_context_params {
    int32_t n_ctx;       /* KV cache size in tokens (0 = the model's training context) */
    int32_t n_batch;     /* largest number of tokens per decode call */
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
 * sizes are logged at INFO with the bytes per token.
 * Errors: LOOM_ERR_INVALID_ARG (n_ctx/n_batch out of range, a flash_attn value not in the enum),
 * LOOM_ERR_UNSUPPORTED (a cache type other than F32, F16 or BF16), LOOM_ERR_OOM. */
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

/* Reads only the vocabulary (tokenizer.ggml.* keys) of a GGUF model file. Errors as for
 * loom_model_load (LOOM_ERR_UNSUPPORTED for a tokenizer other than 'llama'). */
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
};
/* Fills 'p' with a named shape: "260k", "15m", "110m" (the llama2.c family), "1b" (TinyLlama 1.1B)
 * or "7b" (Llama-2 7B). Returns LOOM_ERR_INVALID_ARG for an unknown name. */
enum loom_status loom_gen_preset(const char * name, struct loom_gen_params * p);
/* Writes a LLaMA-architecture GGUF with random weights: matrices ~ N(0, 0.02^2) (Irwin-Hall
 * approximation), norm weights 1 + N(0, 0.01^2), streamed so the model never sits in memory.
 * Errors: LOOM_ERR_INVALID_ARG (a shape rule broken: heads dividing n_embd, ...), LOOM_ERR_IO,
 * LOOM_ERR_FORMAT (bad tokenizer file), LOOM_ERR_OOM. */
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
