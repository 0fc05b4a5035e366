/* gen-opts.h -- the options `loom run` and `loom chat` (and `run -cnv`) share: the model, context,
 * threads, offload, KV cache and sampling flags, parsed once here, and how they become the
 * library's model, context and sampler parameters. */
#ifndef LOOM_TOOLS_GEN_OPTS_H
#define LOOM_TOOLS_GEN_OPTS_H

#include "cli-devices.h"
#include "cli-split.h"
#include "gen-controls.h"
#include "loom-llama.h"
#include "loom-sampler.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

struct gen_opts {
    const char * model;
    const char * device;
    long long n_predict, n_ctx, n_batch, n_ubatch, n_threads, n_gpu_layers, top_k, repeat_last_n, fit_margin;
    struct cli_split split;
    double temp, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    uint64_t seed;
    bool no_mmap, mlock, no_host_copy, ignore_eos, verbose_prompt, verbose, parse_special, special;
    bool check_tensors; /* --check-tensors: float weights scanned for NaN and inf at load */
    struct logit_bias biases[LOGIT_BIAS_MAX];
    int n_biases;
    enum loom_type type_k, type_v;
    enum loom_llama_flash_attn flash_attn;
};

/* The option codes of the shared long options (the short ones are their letters). */
enum { GEN_OPT_NGL = 2000, GEN_OPT_TEMP, GEN_OPT_TOPK, GEN_OPT_TOPP, GEN_OPT_MINP, GEN_OPT_RPEN, GEN_OPT_RLAST, GEN_OPT_NOMMAP,
       GEN_OPT_MLOCK, GEN_OPT_VPROMPT, GEN_OPT_DEVICE, GEN_OPT_NOHOSTCOPY, GEN_OPT_CACHE, GEN_OPT_IGNORE_EOS, GEN_OPT_PRESENCE,
       GEN_OPT_FREQUENCY, GEN_OPT_BIAS, GEN_OPT_FIT_MARGIN, GEN_OPT_CACHE_K, GEN_OPT_CACHE_V, GEN_OPT_FA, GEN_OPT_UBATCH,
       GEN_OPT_PARSE_SPECIAL, GEN_OPT_SPECIAL, GEN_OPT_CHECK_TENSORS };

/* The short options gen_opts_option takes, for a command's getopt string (each command adds its own). */
#define GEN_OPTS_SHORT "m:n:c:b:t:s:l:v"

/* Entries for a command's getopt table. */
#define GEN_OPTS_LONG_OPTS                                                                                                      \
    {"model", required_argument, 0, 'm'}, {"n-predict", required_argument, 0, 'n'}, {"predict", required_argument, 0, 'n'},      \
    {"ctx-size", required_argument, 0, 'c'}, {"gpu-layers", required_argument, 0, GEN_OPT_NGL},                                  \
    {"special", no_argument, 0, GEN_OPT_SPECIAL}, {"sp", no_argument, 0, GEN_OPT_SPECIAL},                                       \
    {"batch-size", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'}, {"seed", required_argument, 0, 's'},      \
    {"verbose", no_argument, 0, 'v'}, {"ngl", required_argument, 0, GEN_OPT_NGL},                                                \
    {"n-gpu-layers", required_argument, 0, GEN_OPT_NGL}, {"temp", required_argument, 0, GEN_OPT_TEMP},                           \
    {"top-k", required_argument, 0, GEN_OPT_TOPK}, {"top-p", required_argument, 0, GEN_OPT_TOPP},                                \
    {"min-p", required_argument, 0, GEN_OPT_MINP}, {"repeat-penalty", required_argument, 0, GEN_OPT_RPEN},                       \
    {"repeat-last-n", required_argument, 0, GEN_OPT_RLAST}, {"no-mmap", no_argument, 0, GEN_OPT_NOMMAP},                         \
    {"mlock", no_argument, 0, GEN_OPT_MLOCK}, {"verbose-prompt", no_argument, 0, GEN_OPT_VPROMPT},                               \
    {"device", required_argument, 0, GEN_OPT_DEVICE}, {"dev", required_argument, 0, GEN_OPT_DEVICE},                             \
    {"no-host-copy", no_argument, 0, GEN_OPT_NOHOSTCOPY}, {"cache-type", required_argument, 0, GEN_OPT_CACHE},                   \
    {"ignore-eos", no_argument, 0, GEN_OPT_IGNORE_EOS}, {"presence-penalty", required_argument, 0, GEN_OPT_PRESENCE},            \
    {"frequency-penalty", required_argument, 0, GEN_OPT_FREQUENCY}, {"logit-bias", required_argument, 0, GEN_OPT_BIAS},          \
    {"fit-margin", required_argument, 0, GEN_OPT_FIT_MARGIN}, {"cache-type-k", required_argument, 0, GEN_OPT_CACHE_K},           \
    {"ctk", required_argument, 0, GEN_OPT_CACHE_K}, {"cache-type-v", required_argument, 0, GEN_OPT_CACHE_V},                     \
    {"ctv", required_argument, 0, GEN_OPT_CACHE_V}, {"flash-attn", optional_argument, 0, GEN_OPT_FA},                            \
    {"fa", optional_argument, 0, GEN_OPT_FA}, {"ubatch-size", required_argument, 0, GEN_OPT_UBATCH},                             \
    {"ub", required_argument, 0, GEN_OPT_UBATCH}, {"parse-special", no_argument, 0, GEN_OPT_PARSE_SPECIAL},                     \
    {"check-tensors", no_argument, 0, GEN_OPT_CHECK_TENSORS}, CLI_SPLIT_LONG_OPTS

/* Help lines for the shared options, in three groups (each command puts its own lines between). */
#define GEN_OPTS_HELP_CONTEXT                                                                                  \
    "  -b, --batch-size N        prompt tokens per batch (default 512)\n"                                      \
    "  -ub, --ubatch-size N      tokens per compute step within a batch (default: the batch size)\n"          \
    "  -t, --threads N           CPU threads (default: LOOM_N_THREADS, else all cores)\n"                                  \
    "  -ngl, --n-gpu-layers, --gpu-layers N  layers to offload to the first non-CPU device, or auto: as many as its free\n" \
    "                            memory holds (default: auto when a GPU is present, else 0)\n"                 \
    "      --fit-margin MiB      device memory -ngl auto leaves free (default 1024)\n"                         \
    "  -dev, --device NAME[,NAME...]  offload devices (CUDA0, sim0, ...); none: no offload, whatever -ngl says\n" \
    CLI_SPLIT_HELP                                                                                             \
    "      --no-host-copy        offloaded weights stay in host memory the device reads in place\n"
#define GEN_OPTS_HELP_SAMPLING                                                                                 \
    "      --temp T              temperature (default 0.8; 0 or less = greedy)\n"                              \
    "      --top-k N             top-k sampling (default 40; 0 or -1 = off)\n"                                 \
    "      --top-p P             top-p sampling (default 0.95; 1 or more = off)\n"                             \
    "      --min-p P             min-p sampling (default 0.05; 0 = off)\n"                                     \
    "      --repeat-penalty X    penalty for repeated tokens (default 1.0 = off)\n"                            \
    "      --repeat-last-n N     tokens the penalty looks back (default 64; 0 = off; -1 = the context size)\n"                                 \
    "      --presence-penalty X  subtracted from the logits of the recent tokens (default 0 = off)\n"          \
    "      --frequency-penalty X subtracted times their count in the recent tokens (default 0 = off)\n"        \
    "  -l, --logit-bias T+B      add B to the logit of token T (T-B subtracts; T-inf: never); repeatable\n"    \
    "      --parse-special       control-token text in the prompt (<s>, <|im_end|>) is those tokens\n"        \
    "                            (chat: always, for its template's markers)\n"                                \
    "  -sp, --special            print control tokens (<s>, <|im_end|>) as their text, not as nothing\n"                                \
    "      --ignore-eos          keep generating past the end-of-sequence token (never sample it)\n"           \
    "  -s, --seed N              random seed, 0..18446744073709551614; -1 (the default, and only -1)\n"        \
    "                            picks one from the clock, and the seed used is printed\n"
#define GEN_OPTS_HELP_CACHE                                                                                    \
    "  -ctk, --cache-type-k TYPE KV cache type of K: f32, f16 (default), bf16, q8_0 or q4_0\n"                 \
    "  -ctv, --cache-type-v TYPE KV cache type of V: the same (q8_0, q4_0: with flash attention)\n"            \
    "      --cache-type TYPE     both of them\n"                                                               \
    "  -fa, --flash-attn [on|off|auto]  fused attention (default auto: where the layer's device has it;\n"    \
    "                            a bare -fa, as the field's switch: on)\n"                                     \
    "      --no-mmap             read the model instead of mapping it\n"                                       \
    "      --mlock               keep the model in RAM\n"                                                      \
    "      --check-tensors       refuse a model with a NaN or infinite F32, F16 or BF16 weight (a pass over\n" \
    "                            every weight at load; quantized blocks' scales are checked always)\n"

/* The defaults: the sampler's, 512-token batches, f16 KV cache, flash attention auto, -ngl unset,
 * -n -1, -c unset (-1). */
void gen_opts_init(struct gen_opts * o);
/* Handles getopt's result 'c' with value 'arg' when it is a shared option: 1 done, 0 not a shared
 * option (the command's own, or an error code for cli_option_error), -1 a bad value (one line
 * reported, naming 'cmd'). */
int gen_opts_option(const char * cmd, int c, const char * arg, struct gen_opts * o);
/* After parsing: -dev none, the -ngl default, the -dev list and the model checked, incompatible
 * flags refused. False (one line reported) for an error. */
bool gen_opts_check(const char * cmd, struct gen_opts * o);

/* The library's parameters as the options set them (n_ctx is left to the command; threads are
 * capped to the CPUs, with cli_cap_threads's warning). */
void gen_opts_model_params(const struct gen_opts * o, struct loom_model_params * mp);
void gen_opts_context_params(const char * cmd, const struct gen_opts * o, struct loom_llama_context_params * cp);
/* 'n_ctx': the context in tokens, which --repeat-last-n -1 stands for. */
void gen_opts_sampler_params(const struct gen_opts * o, int32_t n_ctx, struct loom_sampler_params * sp);
/* Refuses, naming 'cmd', KV cache types the model's heads cannot hold (hp: the file's) before anything loads. */
bool gen_opts_check_cache(const char * cmd, const struct gen_opts * o, const struct loom_hparams * hp);

/* The logits to sample from: 'logits' [n_vocab] as they are without --logit-bias and
 * --ignore-eos, else a copy in 'scratch' [n_vocab] with the biases added and EOS at -inf.
 * gen_opts_needs_scratch says whether 'scratch' is needed. */
bool gen_opts_needs_scratch(const struct gen_opts * o);
const float * gen_opts_logits(const struct gen_opts * o, const struct loom_vocab * vocab, const float * logits, float * scratch,
                              int32_t n_vocab);

#endif
