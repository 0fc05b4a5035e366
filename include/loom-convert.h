/* loom-convert.h -- model files written from others: llama2.c conversion, quantization, and
 * synthetic models with random weights (gen-model). */
#ifndef LOOM_CONVERT_H
#define LOOM_CONVERT_H

#include "loom.h"
#include "loom-llama.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
LOOM_API enum loom_status loom_gen_preset(const char * name, struct loom_gen_params * p);
/* Writes a llama- or qwen2-architecture GGUF with random weights: matrices ~ N(0, 0.02^2) (Irwin-Hall
 * approximation), norm weights 1 + N(0, 0.01^2), biases N(0, 0.1^2), streamed so the model never
 * sits in memory. Errors: LOOM_ERR_INVALID_ARG (a shape rule broken: heads dividing n_embd, ...;
 * rope parameters out of range; rope_freqs with qwen2; n_vocab other than the token count of
 * 'vocab_path'; both vocabulary sources), LOOM_ERR_IO, LOOM_ERR_FORMAT (bad tokenizer file or
 * vocabulary GGUF), LOOM_ERR_UNSUPPORTED (a vocabulary Loom cannot read), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_gen_model(const struct loom_gen_params * p, const char * out_path);

/* Called after each tensor of loom_model_quantize is written: tensor 'i' of 'n', its name, its
 * type in the input and in the output, and its data size in bytes in each. */
typedef void (*loom_quantize_progress_fn)(void * user, int64_t i, int64_t n, const char * name, enum loom_type from,
                                          enum loom_type to, uint64_t in_bytes, uint64_t out_bytes);
struct loom_quantize_params {
    int n_threads;                       /* threads quantizing rows; <= 0: loom_n_cpus() */
    loom_quantize_progress_fn progress;  /* optional */
    void * user;                         /* passed to 'progress' */
    /* the field's llama-quantize options (zero: off) */
    bool pure;                           /* no mix: every weight in the preset's type (rows that do not fit still fall back) */
    bool allow_requantize;               /* quantized input tensors are dequantized and quantized again */
    bool leave_output_tensor;            /* output.weight keeps its type */
    const char * output_tensor_type;     /* a type name (q8_0, q6_K, f16, ...; any case) for output.weight, or NULL */
    const char * token_embedding_type;   /* the same for token_embd.weight, or NULL */
};
/* The preset names loom_model_quantize takes, comma-separated (for messages), and whether 'name'
 * is one of them: a name in any case, the field's aliases Q3_K, Q4_K and Q5_K (the _M presets), or
 * a llama_ftype number as llama-quantize takes it ("15" is Q4_K_M). loom_quantize_preset_name
 * gives the preset's name as the field spells it ("Q4_K_M") for any of those, NULL when unknown. */
LOOM_API const char * loom_quantize_preset_names(void);
LOOM_API bool loom_quantize_preset_known(const char * name);
LOOM_API const char * loom_quantize_preset_name(const char * name);
/* The tensor types 'output_tensor_type' and 'token_embedding_type' may name (the presets' base
 * types: "q4_0, q4_1, ..., f16, bf16, f32"), comma-separated (for messages), and whether 'name' (any
 * case) is one of them (false for NULL). */
LOOM_API const char * loom_quantize_tensor_type_names(void);
LOOM_API bool loom_quantize_tensor_type_known(const char * name);
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
 * engine's bytes. 'preset' may also be an alias or a llama_ftype number (loom_quantize_preset_known);
 * 'params' (NULL: the defaults) may turn the mix off, leave output.weight as it is, name the types
 * of output.weight and token_embd.weight, and allow quantized input tensors, as the field's
 * llama-quantize options do. Written through the GGUF writer (temporary file + rename; never over the input).
 * Errors (logged, nothing left at 'out_path'): LOOM_ERR_INVALID_ARG (unknown preset or tensor type
 * name; 'out_path' is the input or not a writable file), LOOM_ERR_FORMAT (malformed input; a tensor
 * holding NaN or inf, named), LOOM_ERR_UNSUPPORTED (an already quantized tensor without
 * allow_requantize, or an unconvertible one), LOOM_ERR_IO, LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_model_quantize(const char * in_path, const char * out_path, const char * preset,
                                     const struct loom_quantize_params * params);

/* Converts a llama2.c checkpoint ('checkpoint_path': seven int32 -- dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size (negative: untied classifier), seq_len -- then F32 weights in
 * llama2.c's order) and its tokenizer file into a GGUF llama model at 'out_path' with the standard
 * keys and tensor names (F32). Q and K rows keep llama2.c's layout, which is GGUF's: RoPE rotates
 * adjacent pairs (2i, 2i+1) of each head. The output is written to a temporary file and renamed,
 * and never replaces an input. Errors: LOOM_ERR_IO, LOOM_ERR_FORMAT (a malformed or truncated
 * checkpoint or tokenizer, named with the reason), LOOM_ERR_INVALID_ARG, LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_convert_llama2c(const char * checkpoint_path, const char * tokenizer_path, const char * out_path);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CONVERT_H */
