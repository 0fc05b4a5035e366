/* cmd-run.c -- `loom run`: generate text with a GGUF model, streaming to stdout, timings to stderr. */
#include "cli-kv.h"
#include "cli-util.h"
#include "cli-devices.h"
#include "cli-split.h"
#include "commands.h"
#include "gen-controls.h"
#include "loom-llama.h"
#include "loom-sampler.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct run_opts {
    const char * model;
    const char * prompt;
    const char * prompt_file;
    const char * device;
    long long n_predict, n_ctx, n_batch, n_ubatch, n_threads, n_gpu_layers, top_k, repeat_last_n, fit_margin;
    struct cli_split split;
    double temp, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    uint64_t seed;
    bool no_mmap, mlock, verbose_prompt, verbose, no_host_copy, ignore_eos, escape, no_display_prompt, list_devices, json;
    struct logit_bias biases[LOGIT_BIAS_MAX];
    int n_biases;
    struct stop_strings stops;
    enum loom_type type_k, type_v;
    enum loom_llama_flash_attn flash_attn;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom run -m MODEL.gguf [options]\n"
            "\n"
            "  -m, --model FILE          GGUF model to run (required)\n"
            "  -p, --prompt TEXT         prompt (default: none, generation starts from BOS)\n"
            "  -f, --file FILE           read the prompt from FILE (- : standard input; one trailing newline dropped)\n"
            "  -n, --n-predict N         tokens to generate (default -1: until an end-of-generation token\n"
            "                            (EOS, end of turn) or the context is full)\n"
            "  -c, --ctx-size N          context size in tokens (default 4096, with a warning when it exceeds the\n"
            "                            model's training context; 0: the model's training context)\n"
            "  -b, --batch-size N        prompt tokens per batch (default 512)\n"
            "  -t, --threads N           CPU threads (default: all cores)\n"
            "  -ngl, --n-gpu-layers N    layers to offload to the first non-CPU device, or auto: as many as its free\n"
            "                            memory holds (default: auto when a GPU is present, else 0)\n"
            "      --fit-margin MiB      device memory -ngl auto leaves free (default 1024)\n"
            "  -dev, --device NAME       offload device (CUDA0, sim0, ...); none: no offload, whatever -ngl says\n"
            "      --no-host-copy        offloaded weights stay in host memory the device reads in place\n"
            "      --temp T              temperature (default 0.8; 0 or less = greedy)\n"
            "      --top-k N             top-k sampling (default 40; 0 or -1 = off)\n"
            "      --top-p P             top-p sampling (default 0.95; 1 or more = off)\n"
            "      --min-p P             min-p sampling (default 0.05; 0 = off)\n"
            "      --repeat-penalty X    penalty for repeated tokens (default 1.0 = off)\n"
            "      --repeat-last-n N     tokens the penalty looks back (default 64)\n"
            "      --presence-penalty X  subtracted from the logits of the recent tokens (default 0 = off)\n"
            "      --frequency-penalty X subtracted times their count in the recent tokens (default 0 = off)\n"
            "      --logit-bias T+B      add B to the logit of token T (T-B subtracts; T-inf: never); repeatable\n"
            "      --ignore-eos          keep generating past the end-of-sequence token (never sample it)\n"
            "  -r, --reverse-prompt S    stop when the generated text ends with S; repeatable\n"
            "  -e, --escape              process escapes (\\n, \\t, \\xHH, ...) in the prompt and -r (default)\n"
            "      --no-escape           take them as they are written\n"
            "      --no-display-prompt   print only the generated text, not the prompt\n"
            "  -s, --seed N              random seed, 0..18446744073709551614; -1 (the default, and only -1)\n"
            "                            picks one from the clock, and the seed used is printed\n"
            "  -ctk, --cache-type-k TYPE KV cache type of K: f32, f16 (default), bf16, q8_0 or q4_0\n"
            "  -ctv, --cache-type-v TYPE KV cache type of V: the same (q8_0, q4_0: with flash attention)\n"
            "      --cache-type TYPE     both of them\n"
            "  -fa, --flash-attn on|off|auto  fused attention (default auto: where the layer's device has it)\n"
            "      --no-mmap             read the model instead of mapping it\n"
            "      --mlock               keep the model in RAM\n"
            "      --verbose-prompt      print the prompt's tokens\n"
            "  -cnv, --conversation      chat instead (see loom chat -h; -p is then the system message)\n"
            "  -v, --verbose             print loading details (and the memory breakdown after loading)\n"
            "      --list-devices        print the devices (name, type, memory) and exit; --json: as JSON\n"
            "  -h, --help                this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { OPT_NGL = 256, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_MINP, OPT_RPEN, OPT_RLAST, OPT_NOMMAP, OPT_MLOCK, OPT_VPROMPT,
       OPT_DEVICE, OPT_NOHOSTCOPY, OPT_CACHE, OPT_IGNORE_EOS, OPT_PRESENCE, OPT_FREQUENCY, OPT_BIAS, OPT_NO_DISPLAY, OPT_LIST_DEVICES, OPT_JSON, OPT_FIT_MARGIN, OPT_NO_ESCAPE,
       OPT_CACHE_K, OPT_CACHE_V, OPT_FA, OPT_UBATCH };

static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'},      {"prompt", required_argument, 0, 'p'},
    {"file", required_argument, 0, 'f'},       {"n-predict", required_argument, 0, 'n'},
    {"ctx-size", required_argument, 0, 'c'},   {"batch-size", required_argument, 0, 'b'},
    {"threads", required_argument, 0, 't'},    {"ngl", required_argument, 0, OPT_NGL},
    {"n-gpu-layers", required_argument, 0, OPT_NGL}, {"temp", required_argument, 0, OPT_TEMP},
    {"top-k", required_argument, 0, OPT_TOPK}, {"top-p", required_argument, 0, OPT_TOPP},
    {"min-p", required_argument, 0, OPT_MINP}, {"repeat-penalty", required_argument, 0, OPT_RPEN},
    {"repeat-last-n", required_argument, 0, OPT_RLAST}, {"seed", required_argument, 0, 's'},
    {"no-mmap", no_argument, 0, OPT_NOMMAP},   {"mlock", no_argument, 0, OPT_MLOCK},
    {"verbose-prompt", no_argument, 0, OPT_VPROMPT}, {"device", required_argument, 0, OPT_DEVICE}, {"dev", required_argument, 0, OPT_DEVICE},
    {"no-host-copy", no_argument, 0, OPT_NOHOSTCOPY}, {"cache-type", required_argument, 0, OPT_CACHE},
    {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS}, {"presence-penalty", required_argument, 0, OPT_PRESENCE},
    {"frequency-penalty", required_argument, 0, OPT_FREQUENCY}, {"logit-bias", required_argument, 0, OPT_BIAS},
    {"reverse-prompt", required_argument, 0, 'r'}, {"escape", no_argument, 0, 'e'}, {"no-escape", no_argument, 0, OPT_NO_ESCAPE},
    {"no-display-prompt", no_argument, 0, OPT_NO_DISPLAY}, {"list-devices", no_argument, 0, OPT_LIST_DEVICES},
    {"json", no_argument, 0, OPT_JSON}, {"fit-margin", required_argument, 0, OPT_FIT_MARGIN},
    {"cache-type-k", required_argument, 0, OPT_CACHE_K}, {"ctk", required_argument, 0, OPT_CACHE_K},
    {"cache-type-v", required_argument, 0, OPT_CACHE_V}, {"ctv", required_argument, 0, OPT_CACHE_V},
    {"flash-attn", required_argument, 0, OPT_FA}, {"fa", required_argument, 0, OPT_FA},
    {"ubatch-size", required_argument, 0, OPT_UBATCH}, {"ub", required_argument, 0, OPT_UBATCH},
    CLI_SPLIT_LONG_OPTS,
    {"verbose", no_argument, 0, 'v'},          {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

#define NGL_UNSET (-2) /* no -ngl: auto when a GPU is present, else 0 */
#define NGL_AUTO (-1)  /* -ngl auto */

/* The context of a run without -c when the model's training context is longer (tokens). */
#define LOOM_RUN_DEFAULT_CTX 4096

/* Returns 0 to go on, 1 for an error (reported), 2 for -h. */
static int parse(int argc, char ** argv, struct run_opts * o) {
    struct loom_sampler_params sp = loom_sampler_default_params();
    *o = (struct run_opts){.n_predict = -1, .n_ctx = -1, .n_gpu_layers = NGL_UNSET, .fit_margin = 1024, .escape = true, .n_batch = 512, .temp = sp.temp, .top_k = sp.top_k, .top_p = sp.top_p,
                           .min_p = sp.min_p, .repeat_penalty = sp.repeat_penalty, .repeat_last_n = sp.repeat_last_n,
                           .seed = LOOM_DEFAULT_SEED, .type_k = LOOM_TYPE_F16, .type_v = LOOM_TYPE_F16,
                           .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO};
    cli_split_init(&o->split);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:f:n:c:b:t:s:r:evh", long_opts)) != -1) {
        bool ok = true;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'f': o->prompt_file = optarg; break;
        case 'n': ok = cli_parse_int("run", "-n", optarg, -1, 1 << 30, &o->n_predict); break;
        case 'c': ok = cli_parse_int("run", "-c", optarg, 0, 1 << 24, &o->n_ctx); break;
        case 'b': ok = cli_parse_int("run", "-b", optarg, 1, 1 << 20, &o->n_batch); break;
        case 't': ok = cli_parse_int("run", "-t", optarg, 1, 1024, &o->n_threads); break;
        case OPT_NGL:
            if (!strcmp(optarg, "auto")) o->n_gpu_layers = NGL_AUTO;
            else ok = cli_parse_int("run", "-ngl", optarg, 0, 100000, &o->n_gpu_layers);
            break;
        case OPT_FIT_MARGIN: ok = cli_parse_int("run", "--fit-margin", optarg, 0, 1 << 30, &o->fit_margin); break;
        case OPT_TEMP: ok = cli_parse_float("run", "--temp", optarg, -1e6, 1e6, &o->temp); break; /* <= 0: greedy */
        case OPT_TOPK: ok = cli_parse_int("run", "--top-k", optarg, -1, 1 << 30, &o->top_k); break;
        case OPT_TOPP: ok = cli_parse_float("run", "--top-p", optarg, 0, 1e6, &o->top_p); break; /* >= 1: off */
        case OPT_MINP: ok = cli_parse_float("run", "--min-p", optarg, 0, 1, &o->min_p); break;
        case OPT_RPEN: ok = cli_parse_float("run", "--repeat-penalty", optarg, 1e-6, 1e6, &o->repeat_penalty); break;
        case OPT_RLAST: ok = cli_parse_int("run", "--repeat-last-n", optarg, 0, 1 << 20, &o->repeat_last_n); break;
        case 's':
            /* the field's "random seed"; LOOM_DEFAULT_SEED itself (UINT64_MAX) is the same request,
             * so the largest seed that can be given is one less */
            if (!strcmp(optarg, "-1")) o->seed = LOOM_DEFAULT_SEED;
            else ok = cli_parse_u64("run", "--seed", optarg, LOOM_DEFAULT_SEED - 1, &o->seed);
            break;
        case OPT_NOMMAP: o->no_mmap = true; break;
        case OPT_MLOCK: o->mlock = true; break;
        case OPT_VPROMPT: o->verbose_prompt = true; break;
        case OPT_DEVICE: o->device = optarg; break;
        case OPT_NOHOSTCOPY: o->no_host_copy = true; break;
        case OPT_CACHE:
            ok = cli_parse_cache_type("run", "--cache-type", optarg, &o->type_k);
            o->type_v = o->type_k;
            break;
        case OPT_IGNORE_EOS: o->ignore_eos = true; break;
        case OPT_PRESENCE: ok = cli_parse_float("run", "--presence-penalty", optarg, -1e6, 1e6, &o->presence_penalty); break;
        case OPT_FREQUENCY: ok = cli_parse_float("run", "--frequency-penalty", optarg, -1e6, 1e6, &o->frequency_penalty); break;
        case OPT_BIAS:
            if (o->n_biases == LOGIT_BIAS_MAX) {
                fprintf(stderr, "loom run: --logit-bias given more than %d times\n", LOGIT_BIAS_MAX);
                return 1;
            }
            ok = logit_bias_parse("run", optarg, &o->biases[o->n_biases++]);
            break;
        case 'r':
            if (o->stops.n == STOP_STRINGS_MAX || !*optarg || strlen(optarg) > STOP_STRING_MAX_LEN) {
                fprintf(stderr, "loom run: -r takes 1 to %d bytes, at most %d times\n", STOP_STRING_MAX_LEN, STOP_STRINGS_MAX);
                return 1;
            }
            o->stops.strs[o->stops.n++] = optarg;
            break;
        case 'e': o->escape = true; break;
        case OPT_NO_ESCAPE: o->escape = false; break;
        case OPT_NO_DISPLAY: o->no_display_prompt = true; break;
        case OPT_LIST_DEVICES: o->list_devices = true; break;
        case OPT_JSON: o->json = true; break;
        case OPT_CACHE_K: ok = cli_parse_cache_type("run", "--cache-type-k", optarg, &o->type_k); break;
        case OPT_CACHE_V: ok = cli_parse_cache_type("run", "--cache-type-v", optarg, &o->type_v); break;
        case OPT_FA: ok = cli_parse_flash_attn("run", "--flash-attn", optarg, &o->flash_attn); break;
        case OPT_UBATCH: ok = cli_parse_int("run", "-ub", optarg, 1, 1 << 20, &o->n_ubatch); break;
        case CLI_OPT_SPLIT_MODE:
        case CLI_OPT_TENSOR_SPLIT:
        case CLI_OPT_MAIN_GPU: ok = cli_split_option("run", c, optarg, &o->split); break;
        case 'v': o->verbose = true; break;
        case 'h': usage(stdout); return 2;
        default: cli_option_error("run", c); return 1; /* ':' or '?' */
        }
        if (!ok) return 1;
    }
    if (!cli_no_more_args("run", argc, argv)) return 1;
    if (o->json && !o->list_devices) {
        fprintf(stderr, "loom run: --json goes with --list-devices\n");
        return 1;
    }
    if (o->list_devices) {
        cli_list_devices(o->json);
        return 2;
    }
    for (int i = 0; i < o->stops.n; i++) {
        /* argv's strings may be changed in place; an escape can only shorten them */
        if (o->escape) process_escapes((char *)o->stops.strs[i], strlen(o->stops.strs[i]));
        const size_t n = strlen(o->stops.strs[i]);
        o->stops.longest = n > o->stops.longest ? n : o->stops.longest;
    }
    if (o->device && !strcasecmp(o->device, "none")) { /* the CPU alone */
        o->device = NULL;
        o->n_gpu_layers = 0;
    }
    if (o->n_gpu_layers == NGL_UNSET) o->n_gpu_layers = loom_backend_dev_by_type(LOOM_BACKEND_DEV_TYPE_GPU) ? NGL_AUTO : 0;
    if (o->device && !cli_check_devices("run", o->device)) return 1;
    if (!o->model) {
        fprintf(stderr, "loom run: no model given (-m MODEL.gguf)\n");
        return 1;
    }
    if (o->no_host_copy && o->no_mmap) {
        fprintf(stderr, "loom run: --no-host-copy reads the weights in the mapped file, which --no-mmap turns off (give one of them)\n");
        return 1;
    }
    if (o->prompt && o->prompt_file) {
        fprintf(stderr, "loom run: give the prompt with -p or -f, not both\n");
        return 1;
    }
    return 0;
}

static bool progress_bar(float p, void * user) {
    (void)user;
    int w = 40, n = (int)(p * w + 0.5f);
    fprintf(stderr, "\rloading [%.*s%*s] %3d%%", n, "########################################", w - n, "", (int)(p * 100 + 0.5f));
    if (p >= 1.0f) fputs("\r\033[K", stderr);
    return true;
}

static volatile sig_atomic_t g_interrupted; /* set by SIGINT (Ctrl-C): generation stops, timings are printed */

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

/* -ngl auto: sets mp->n_gpu_layers to the layers that fit and prints the choice with the sizes it
 * rests on. Returns 0, or 1 when the dry run failed (its error logged). */
static int fit_layers(struct run_opts * o, struct loom_model_file * file, struct loom_model_params * mp, struct loom_llama_context_params cp) {
    struct loom_fit * f = malloc(sizeof *f);
    if (!f || loom_model_fit(file, *mp, cp, (size_t)o->fit_margin << 20, f) != LOOM_OK) {
        free(f);
        return 1;
    }
    mp->n_gpu_layers = f->n_gpu_layers;
    o->n_gpu_layers = f->n_gpu_layers;
    if (f->device) {
        const double M = 1048576.0;
        uint64_t weights = 0;
        for (int i = 0; i < f->n_layer; i++) weights += f->layer_bytes[i];
        fprintf(stderr, "-ngl auto: %d of %d layers on %s (%.2f MiB of layer weights + %.2f MiB of KV cache per layer on average, "
                        "output %.2f MiB, compute %.2f MiB; %.2f MiB free, %.2f MiB kept free; %.2f MiB placed)\n",
                f->n_gpu_layers, f->n_layer, f->device, weights / M / (f->n_layer ? f->n_layer : 1), f->kv_layer_bytes / M,
                f->output_bytes / M, f->compute_bytes / M, f->free_bytes / M, f->margin_bytes / M, f->need_bytes / M);
    }
    free(f);
    return 0;
}

static void print_timing(const char * what, double ms, int n, const char * unit) {
    fprintf(stderr, "%-17s = %10.2f ms / %5d %s", what, ms, n, unit);
    if (n > 0) fprintf(stderr, " (%8.2f ms per token, %8.2f tokens per second)", ms / n, 1000.0 * n / ms);
    fputc('\n', stderr);
}

struct run_state {
    struct loom_model_file * file;   /* opened and parsed once: the prompt is checked, then the weights load */
    const struct loom_vocab * vocab; /* the file's */
    struct loom_model * model;
    struct loom_llama_context * lctx;
    struct loom_sampler * sampler;
    struct loom_detok * detok;
    int32_t * tokens;
    bool text_out; /* text was written to stdout (an error line then starts on a new line) */
    int32_t n_ctx_train; /* the model's training context when the context is larger (a warning), else 0 */
    float * logits;      /* [n_vocab] the logits with --ignore-eos's bias, or NULL: the context's as they are */
};

static void run_state_free(struct run_state * s) {
    loom_detok_free(s->detok);
    loom_sampler_free(s->sampler);
    loom_llama_context_free(s->lctx);
    loom_model_free(s->model);
    loom_model_file_free(s->file);
    free(s->tokens);
    free(s->logits);
}

/* The logits to sample from: the context's, or a copy with --logit-bias and --ignore-eos applied. */
static const float * sample_logits(struct run_state * s, const struct run_opts * o, int32_t n_vocab) {
    const float * logits = loom_llama_get_logits(s->lctx);
    if (!s->logits) return logits;
    memcpy(s->logits, logits, (size_t)n_vocab * sizeof *logits);
    for (int i = 0; i < o->n_biases; i++) s->logits[o->biases[i].token] += o->biases[i].bias;
    const int32_t eos = loom_vocab_eos(s->vocab);
    if (o->ignore_eos && eos >= 0) s->logits[eos] = -INFINITY;
    return s->logits;
}

static int fail(struct run_state * s, const char * what) {
    if (s->text_out) fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "loom run: %s\n", cli_last_error(what));
    run_state_free(s);
    return 1;
}

/* Streams 'token' to stdout (unless 'show' is false); returns true when the text printed now
 * ends with a stop string (-r). */
static bool emit(struct run_state * s, struct stop_strings * stops, int32_t token, bool show) {
    const char * text;
    size_t len;
    if (loom_detok_push(s->detok, token, &text, &len) != LOOM_OK || !len || !show) return false;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    s->text_out = true;
    return stops && stop_strings_push(stops, text, len);
}

/* A lower bound on the tokens of a text of 'len' bytes (without BOS): with byte fallback every
 * token stands for one of the vocabulary's pieces, which are at least as long as the text they
 * cover (a space is written as a three-byte U+2581), or for one byte. Without byte fallback an
 * unknown token may cover any run of bytes: 0. */
static int64_t prompt_min_tokens(const struct loom_vocab * vocab, size_t len) {
    if (!loom_vocab_has_byte_fallback(vocab)) return 0;
    size_t longest = 1;
    for (int32_t i = 0; i < loom_vocab_n_tokens(vocab); i++) {
        size_t n = 0;
        loom_vocab_get_text(vocab, i, &n);
        longest = n > longest ? n : longest;
    }
    return (int64_t)((len + longest - 1) / longest);
}

/* Tokenizes the prompt with the model's vocabulary (read from the file's metadata, before the
 * weights) and checks it fits the context, so that bad requests fail before any loading. */
static int prepare_prompt(const struct run_opts * o, struct run_state * s, int32_t * n_prompt_out, int32_t * n_ctx_out) {
    char * prompt_buf = NULL;
    size_t plen = 0;
    if (o->prompt_file) {
        prompt_buf = cli_read_prompt_file("run", o->prompt_file, &plen);
        if (!prompt_buf) return 1;
    }
    if (o->escape && !prompt_buf && o->prompt && !(prompt_buf = strdup(o->prompt))) return fail(s, "out of memory");
    if (o->escape && prompt_buf) plen = process_escapes(prompt_buf, o->prompt_file ? plen : strlen(prompt_buf));
    const char * prompt = prompt_buf ? prompt_buf : o->prompt ? o->prompt : "";
    if (loom_model_file_open(o->model, &s->file) != LOOM_OK) {
        free(prompt_buf);
        return fail(s, "cannot read the model");
    }
    s->vocab = loom_model_file_vocab(s->file);
    const struct loom_hparams hp = *loom_model_file_hparams(s->file);
    if (!logit_bias_check("run", o->biases, o->n_biases, hp.n_vocab)) {
        free(prompt_buf);
        run_state_free(s);
        return 1;
    }
    /* cache types the model's heads cannot hold, refused before anything loads (the library checks too) */
    const enum loom_type kv_types[2] = {o->type_k, o->type_v};
    for (int i = 0; i < 2; i++) {
        const int64_t head_dim = hp.n_head > 0 ? hp.n_embd / hp.n_head : 0, blck = loom_blck_size(kv_types[i]);
        const bool no_fa = i == 1 && blck > 1 && o->flash_attn == LOOM_LLAMA_FLASH_ATTN_OFF;
        if (head_dim % blck != 0 || no_fa) {
            if (no_fa) fprintf(stderr, "loom run: KV cache type %s for V needs flash attention (-fa on or auto)\n", loom_type_name(kv_types[i]));
            else fprintf(stderr, "loom run: KV cache type %s for %s needs heads of a multiple of %lld elements; this model's have %lld\n",
                         loom_type_name(kv_types[i]), i ? "V" : "K", (long long)blck, (long long)head_dim);
            free(prompt_buf);
            run_state_free(s);
            return 1;
        }
    }
    if (!prompt_buf) plen = strlen(prompt);
    bool add_bos = loom_vocab_get_add_bos(s->vocab);
    /* unset: LOOM_RUN_DEFAULT_CTX, as the field's tools (a file's context length alone should not
     * size a cache of many GiB, nor a short one cut generation short); -c 0: the training context */
    const int32_t n_ctx = o->n_ctx > 0 ? (int32_t)o->n_ctx : o->n_ctx == 0 ? hp.n_ctx_train : LOOM_RUN_DEFAULT_CTX;
    const int64_t n_least = prompt_min_tokens(s->vocab, plen) + add_bos;
    if (n_least > n_ctx) { /* refused before tokenizing a text that cannot fit (a large file takes minutes) */
        fprintf(stderr, "loom run: the prompt is at least %lld tokens (%zu bytes), longer than the context of %d (use -c)\n",
                (long long)n_least, plen, n_ctx);
        free(prompt_buf);
        run_state_free(s);
        return 1;
    }
    int32_t n_prompt = loom_tokenize(s->vocab, prompt, plen, add_bos, false, NULL, 0);
    if (n_prompt < 0 && n_prompt != LOOM_TOKEN_ERROR) n_prompt = -n_prompt;
    if (n_prompt > 0) s->tokens = malloc(((size_t)n_prompt + 1) * sizeof *s->tokens);
    if (n_prompt > 0 && s->tokens) n_prompt = loom_tokenize(s->vocab, prompt, plen, add_bos, false, s->tokens, n_prompt + 1);
    free(prompt_buf);
    if (n_prompt == 0) {
        fprintf(stderr, "loom run: the prompt is empty and the model adds no BOS token\n");
        run_state_free(s);
        return 1;
    }
    if (n_prompt < 0 || !s->tokens) return fail(s, "cannot tokenize the prompt");
    /* warnings wait until the model has loaded, so that a request refused there gets its one line */
    if (n_ctx > hp.n_ctx_train) s->n_ctx_train = hp.n_ctx_train;
    if (n_prompt > n_ctx) {
        fprintf(stderr, "loom run: the prompt is %d tokens, longer than the context of %d (use -c)\n", n_prompt, n_ctx);
        run_state_free(s);
        return 1;
    }
    *n_prompt_out = n_prompt;
    *n_ctx_out = n_ctx;
    return 0;
}

int loom_cmd_run(int argc, char ** argv) {
    /* -cnv / --conversation: the chat (its options are run's, -p being the system message) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "-cnv") || !strcmp(argv[i], "--conversation")) {
            memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof *argv); /* argv[argc] is NULL */
            return loom_cmd_chat(argc - 1, argv);
        }
    }
    struct run_opts o;
    int pr = parse(argc, argv, &o);
    if (pr) return pr == 2 && cli_stdout_ok("run") ? 0 : 1;
    cli_log_setup(o.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_INFO);
    struct run_state s = {0};
    int64_t t_start = loom_time_us();
    if (access(o.model, R_OK) != 0) {
        fprintf(stderr, "loom run: cannot open model '%s': %s\n", o.model, strerror(errno));
        return 1;
    }
    int32_t n_prompt = 0, n_ctx = 0;
    if (prepare_prompt(&o, &s, &n_prompt, &n_ctx)) return 1;
    const struct loom_vocab * vocab = s.vocab;

    struct loom_model_params mp = loom_model_default_params();
    mp.n_gpu_layers = (int)o.n_gpu_layers;
    mp.device = o.device;
    mp.use_mmap = !o.no_mmap;
    mp.use_mlock = o.mlock;
    mp.no_host_copy = o.no_host_copy;
    cli_split_apply(&o.split, &mp);
    if (isatty(STDERR_FILENO)) mp.progress = progress_bar;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (int32_t)o.n_batch;
    cp.n_ubatch = (int32_t)o.n_ubatch;
    cp.n_threads = (int32_t)cli_cap_threads("run", o.n_threads);
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    cp.flash_attn = o.flash_attn;
    const bool ngl_auto = o.n_gpu_layers == NGL_AUTO;
    if (ngl_auto) {
        cli_log_setup(o.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_WARN); /* the dry run's loading is not the run's */
        const int fr = fit_layers(&o, s.file, &mp, cp);
        cli_log_setup(o.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_INFO);
        if (fr) return fail(&s, "cannot measure what fits on the device");
    }
    if (loom_model_load_file(s.file, mp, &s.model) != LOOM_OK) return fail(&s, "cannot load the model");
    /* warned only now, so that a request refused above still gets its one line */
    if (o.device && o.n_gpu_layers == 0 && !ngl_auto) {
        fprintf(stderr, "warning: --device %s has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n", o.device);
    }
    if (o.no_host_copy && o.n_gpu_layers == 0) {
        fprintf(stderr, "warning: --no-host-copy has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n");
    }
    if (s.n_ctx_train) {
        fprintf(stderr, "warning: the context of %d tokens is larger than the model's training context of %d: text past %d "
                        "positions may lose coherence\n", n_ctx, s.n_ctx_train, s.n_ctx_train);
    }
    /* the token sampled from the last position is printed though it is never decoded */
    if (o.n_predict >= 0 && (int64_t)n_prompt + o.n_predict > (int64_t)n_ctx + 1) {
        fprintf(stderr, "warning: the prompt (%d tokens) and -n %lld exceed the context of %d: generation stops after %d tokens "
                        "(use -c)\n", n_prompt, o.n_predict, n_ctx, n_ctx - n_prompt + 1);
    }
    double t_load = (loom_time_us() - t_start) / 1000.0;

    if (loom_llama_context_new(s.model, cp, &s.lctx) != LOOM_OK) return fail(&s, "cannot create the context");
    if (o.verbose) cli_print_memory_breakdown(s.model, s.lctx);
    if (o.verbose_prompt) {
        fprintf(stderr, "prompt: %d tokens\n", n_prompt);
        for (int32_t i = 0; i < n_prompt; i++) {
            char piece[256];
            const int32_t n = loom_token_to_piece(vocab, s.tokens[i], piece, sizeof piece, true);
            fprintf(stderr, "%6d -> '", s.tokens[i]);
            cli_print_piece(stderr, piece, n > 0 ? n : 0);
            fputs("'\n", stderr);
        }
    }

    struct loom_sampler_params sp = loom_sampler_default_params();
    sp.temp = (float)o.temp;
    sp.top_k = (int)o.top_k;
    sp.top_p = (float)o.top_p;
    sp.min_p = (float)o.min_p;
    sp.repeat_penalty = (float)o.repeat_penalty;
    sp.repeat_last_n = (int)o.repeat_last_n;
    sp.presence_penalty = (float)o.presence_penalty;
    sp.frequency_penalty = (float)o.frequency_penalty;
    sp.seed = o.seed;
    if (loom_sampler_new(&sp, &s.sampler) != LOOM_OK) return fail(&s, "cannot create the sampler");
    if (loom_detok_new(vocab, 0, &s.detok) != LOOM_OK) return fail(&s, "cannot create the detokenizer");
    if (o.temp > 0) fprintf(stderr, "seed: %llu\n", (unsigned long long)loom_sampler_get_seed(s.sampler)); /* greedy draws nothing */

    const int32_t n_vocab = loom_model_hparams(s.model)->n_vocab;
    if ((o.ignore_eos || o.n_biases) && !(s.logits = malloc((size_t)n_vocab * sizeof *s.logits))) return fail(&s, "out of memory");
    /* Ctrl-C from here on ends generation cleanly (a second one kills the process) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    for (int32_t i = 0; i < n_prompt; i++) {
        loom_sampler_accept(s.sampler, s.tokens[i]);
        emit(&s, NULL, s.tokens[i], !o.no_display_prompt); /* fed in any case: the detokenizer needs the start */
    }
    int64_t t0 = loom_time_us();
    if (loom_llama_decode(s.lctx, s.tokens, n_prompt) != LOOM_OK) return fail(&s, "prompt evaluation failed");
    double t_prompt = (loom_time_us() - t0) / 1000.0;

    double t_eval = 0;
    int n_eval = 0, n_gen = 0;
    while ((o.n_predict < 0 || n_gen < o.n_predict) && !g_interrupted) {
        int32_t tok;
        if (loom_sampler_sample(s.sampler, sample_logits(&s, &o, n_vocab), n_vocab, &tok) != LOOM_OK) {
            return fail(&s, "sampling failed");
        }
        if (loom_vocab_is_eog(vocab, tok)) break; /* EOS, end of turn, ... */
        loom_sampler_accept(s.sampler, tok);
        const bool stop = emit(&s, &o.stops, tok, true);
        n_gen++;
        if (stop) break;
        if (o.n_predict >= 0 && n_gen >= o.n_predict) break;
        if (loom_llama_n_past(s.lctx) >= n_ctx) {
            fprintf(stderr, "\n(context full: %d token%s)\n", n_ctx, n_ctx == 1 ? "" : "s");
            break;
        }
        t0 = loom_time_us();
        if (loom_llama_decode(s.lctx, &tok, 1) != LOOM_OK) return fail(&s, "evaluation failed");
        t_eval += (loom_time_us() - t0) / 1000.0;
        n_eval++;
    }
    const char * text;
    size_t len;
    if (loom_detok_flush(s.detok, &text, &len) == LOOM_OK && len) fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    if (!cli_stdout_ok("run")) {
        run_state_free(&s);
        return 1;
    }

    fprintf(stderr, g_interrupted ? "\n(interrupted)\n" : "\n");
    fprintf(stderr, "%-17s = %10.2f ms\n", "load time", t_load);
    print_timing("prompt eval time", t_prompt, n_prompt, "tokens");
    print_timing("eval time", t_eval, n_eval, "runs  ");
    fprintf(stderr, "%-17s = %10.2f ms / %5d tokens\n", "total time", (loom_time_us() - t_start) / 1000.0, n_prompt + n_gen);
    cli_print_memory_breakdown(s.model, s.lctx);
    run_state_free(&s);
    return g_interrupted ? 130 : 0; /* the shell's status for a command ended by SIGINT */
}
