/* gen-opts.c -- the options `loom run` and `loom chat` share: parsing, checks, and the library parameters they set. */
#include "gen-opts.h"

#include "cli-kv.h"
#include "cli-util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void gen_opts_init(struct gen_opts * o) {
    const struct loom_sampler_params sp = loom_sampler_default_params();
    *o = (struct gen_opts){.n_predict = -1, .n_ctx = -1, .n_batch = 512, .n_gpu_layers = CLI_NGL_UNSET, .fit_margin = 1024,
                           .temp = sp.temp, .top_k = sp.top_k, .top_p = sp.top_p, .min_p = sp.min_p,
                           .repeat_penalty = sp.repeat_penalty, .repeat_last_n = sp.repeat_last_n, .seed = LOOM_DEFAULT_SEED,
                           .type_k = LOOM_TYPE_F16, .type_v = LOOM_TYPE_F16, .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO};
    cli_split_init(&o->split);
}

int gen_opts_option(const char * cmd, int c, const char * arg, struct gen_opts * o) {
    bool ok = true;
    switch (c) {
    case 'm': o->model = arg; break;
    case 'n': ok = cli_parse_int(cmd, "-n", arg, -2, 1 << 30, &o->n_predict); break; /* the field's -1 and -2 */
    case 'c': ok = cli_parse_int(cmd, "-c", arg, 0, 1 << 24, &o->n_ctx); break;
    case 'b': ok = cli_parse_int(cmd, "-b", arg, 1, 1 << 20, &o->n_batch); break;
    case 't': ok = cli_parse_int(cmd, "-t", arg, 1, 1024, &o->n_threads); break;
    case 'v': o->verbose = true; break;
    case 's':
        /* the field's "random seed"; LOOM_DEFAULT_SEED itself (UINT64_MAX) is the same request,
         * so the largest seed that can be given is one less */
        if (!strcmp(arg, "-1")) o->seed = LOOM_DEFAULT_SEED;
        else ok = cli_parse_u64(cmd, "--seed", arg, LOOM_DEFAULT_SEED - 1, &o->seed);
        break;
    case GEN_OPT_NGL: ok = cli_parse_ngl(cmd, arg, &o->n_gpu_layers); break;
    case GEN_OPT_FIT_MARGIN: ok = cli_parse_int(cmd, "--fit-margin", arg, 0, 1 << 30, &o->fit_margin); break;
    case GEN_OPT_TEMP: ok = cli_parse_float(cmd, "--temp", arg, -1e6, 1e6, &o->temp); break; /* <= 0: greedy */
    case GEN_OPT_TOPK: ok = cli_parse_int(cmd, "--top-k", arg, -1, 1 << 30, &o->top_k); break;
    case GEN_OPT_TOPP: ok = cli_parse_float(cmd, "--top-p", arg, 0, 1e6, &o->top_p); break; /* >= 1: off */
    case GEN_OPT_MINP: ok = cli_parse_float(cmd, "--min-p", arg, 0, 1, &o->min_p); break;
    case GEN_OPT_RPEN: ok = cli_parse_float(cmd, "--repeat-penalty", arg, 1e-6, 1e6, &o->repeat_penalty); break;
    case GEN_OPT_RLAST: ok = cli_parse_int(cmd, "--repeat-last-n", arg, -1, 1 << 20, &o->repeat_last_n); break;
    case GEN_OPT_PRESENCE: ok = cli_parse_float(cmd, "--presence-penalty", arg, -1e6, 1e6, &o->presence_penalty); break;
    case GEN_OPT_FREQUENCY: ok = cli_parse_float(cmd, "--frequency-penalty", arg, -1e6, 1e6, &o->frequency_penalty); break;
    case 'l':
    case GEN_OPT_BIAS:
        if (o->n_biases == LOGIT_BIAS_MAX) {
            fprintf(stderr, "loom %s: --logit-bias given more than %d times\n", cmd, LOGIT_BIAS_MAX);
            return -1;
        }
        ok = logit_bias_parse(cmd, arg, &o->biases[o->n_biases++]);
        break;
    case GEN_OPT_IGNORE_EOS: o->ignore_eos = true; break;
    case GEN_OPT_PARSE_SPECIAL: o->parse_special = true; break;
    case GEN_OPT_SPECIAL: o->special = true; break;
    case GEN_OPT_NOMMAP: o->no_mmap = true; break;
    case GEN_OPT_MLOCK: o->mlock = true; break;
    case GEN_OPT_CHECK_TENSORS: o->check_tensors = true; break;
    case GEN_OPT_VPROMPT: o->verbose_prompt = true; break;
    case GEN_OPT_DEVICE: o->device = arg; break;
    case GEN_OPT_NOHOSTCOPY: o->no_host_copy = true; break;
    case GEN_OPT_CACHE:
        ok = cli_parse_cache_type(cmd, "--cache-type", arg, &o->type_k);
        o->type_v = o->type_k;
        break;
    case GEN_OPT_CACHE_K: ok = cli_parse_cache_type(cmd, "--cache-type-k", arg, &o->type_k); break;
    case GEN_OPT_CACHE_V: ok = cli_parse_cache_type(cmd, "--cache-type-v", arg, &o->type_v); break;
    case GEN_OPT_FA: ok = cli_parse_flash_attn(cmd, "--flash-attn", arg, &o->flash_attn); break;
    case GEN_OPT_UBATCH: ok = cli_parse_int(cmd, "-ub", arg, 1, 1 << 20, &o->n_ubatch); break;
    case CLI_OPT_SPLIT_MODE:
    case CLI_OPT_TENSOR_SPLIT:
    case CLI_OPT_MAIN_GPU: ok = cli_split_option(cmd, c, arg, &o->split); break;
    default: return 0;
    }
    return ok ? 1 : -1;
}

bool gen_opts_check(const char * cmd, struct gen_opts * o) {
    if (o->device && !strcasecmp(o->device, "none")) { /* the CPU alone */
        o->device = NULL;
        o->n_gpu_layers = 0;
    }
    if (o->n_gpu_layers == CLI_NGL_UNSET) o->n_gpu_layers = cli_ngl_default();
    if (o->device && !cli_check_devices(cmd, o->device)) return false;
    if (!o->model) {
        fprintf(stderr, "loom %s: no model given (-m MODEL.gguf)\n", cmd);
        return false;
    }
    if (o->no_host_copy && o->no_mmap) {
        fprintf(stderr, "loom %s: --no-host-copy reads the weights in the mapped file, which --no-mmap turns off (give one of them)\n", cmd);
        return false;
    }
    return true;
}

void gen_opts_model_params(const struct gen_opts * o, struct loom_model_params * mp) {
    mp->n_gpu_layers = (int)o->n_gpu_layers;
    mp->device = o->device;
    mp->use_mmap = !o->no_mmap;
    mp->use_mlock = o->mlock;
    mp->no_host_copy = o->no_host_copy;
    mp->check_tensors = o->check_tensors;
    cli_split_apply(&o->split, mp);
}

void gen_opts_context_params(const char * cmd, const struct gen_opts * o, struct loom_llama_context_params * cp) {
    cp->n_batch = (int32_t)o->n_batch;
    cp->n_ubatch = (int32_t)o->n_ubatch;
    cp->n_threads = (int32_t)cli_cap_threads(cmd, o->n_threads);
    cp->type_k = o->type_k;
    cp->type_v = o->type_v;
    cp->flash_attn = o->flash_attn;
}

void gen_opts_sampler_params(const struct gen_opts * o, int32_t n_ctx, struct loom_sampler_params * sp) {
    sp->temp = (float)o->temp;
    sp->top_k = (int)o->top_k;
    sp->top_p = (float)o->top_p;
    sp->min_p = (float)o->min_p;
    sp->repeat_penalty = (float)o->repeat_penalty;
    /* -1: the whole context, as the field reads it (the sampler keeps at most 2^20 tokens of history) */
    sp->repeat_last_n = o->repeat_last_n >= 0 ? (int)o->repeat_last_n : n_ctx < (1 << 20) ? (int)n_ctx : 1 << 20;
    sp->presence_penalty = (float)o->presence_penalty;
    sp->frequency_penalty = (float)o->frequency_penalty;
    sp->seed = o->seed;
}

bool gen_opts_check_cache(const char * cmd, const struct gen_opts * o, const struct loom_hparams * hp) {
    const enum loom_type kv_types[2] = {o->type_k, o->type_v};
    for (int i = 0; i < 2; i++) {
        const int64_t head_dim = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0, blck = loom_blck_size(kv_types[i]);
        const bool no_fa = i == 1 && blck > 1 && o->flash_attn == LOOM_LLAMA_FLASH_ATTN_OFF;
        if (no_fa) {
            fprintf(stderr, "loom %s: KV cache type %s for V needs flash attention (-fa on or auto)\n", cmd, loom_type_name(kv_types[i]));
            return false;
        }
        if (head_dim % blck != 0) {
            fprintf(stderr, "loom %s: KV cache type %s for %s needs heads of a multiple of %lld elements; this model's have %lld\n", cmd,
                    loom_type_name(kv_types[i]), i ? "V" : "K", (long long)blck, (long long)head_dim);
            return false;
        }
    }
    return true;
}

bool gen_opts_needs_scratch(const struct gen_opts * o) { return o->ignore_eos || o->n_biases > 0; }

const float * gen_opts_logits(const struct gen_opts * o, const struct loom_vocab * vocab, const float * logits, float * scratch,
                              int32_t n_vocab) {
    if (!gen_opts_needs_scratch(o) || !logits) return logits;
    memcpy(scratch, logits, (size_t)n_vocab * sizeof *logits);
    for (int i = 0; i < o->n_biases; i++) scratch[o->biases[i].token] += o->biases[i].bias;
    const int32_t eos = loom_vocab_eos(vocab);
    if (o->ignore_eos && eos >= 0) scratch[eos] = -INFINITY;
    return scratch;
}
