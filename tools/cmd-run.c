/* cmd-run.c -- `loom run`: generate text with a GGUF model, streaming to stdout, timings to stderr. */
#include "cli-kv.h"
#include "cli-util.h"
#include "commands.h"
#include "loom-llama.h"

#include <errno.h>
#include <getopt.h>
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
    long long n_predict, n_ctx, n_batch, n_threads, n_gpu_layers, top_k, repeat_last_n;
    double temp, top_p, min_p, repeat_penalty;
    uint64_t seed;
    bool no_mmap, mlock, verbose_prompt, verbose, no_host_copy;
    enum loom_type type_k, type_v;
    enum loom_llama_flash_attn flash_attn;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom run -m MODEL.gguf [options]\n"
            "\n"
            "  -m, --model FILE          GGUF model to run (required)\n"
            "  -p, --prompt TEXT         prompt (default: none, generation starts from BOS)\n"
            "  -f, --file FILE           read the prompt from FILE\n"
            "  -n, --n-predict N         tokens to generate (default -1: until EOS or the context is full)\n"
            "  -c, --ctx-size N          context size in tokens (default: the model's training context, at most\n"
            "                            4096; 0: the model's training context however large)\n"
            "  -b, --batch-size N        prompt tokens per batch (default 512)\n"
            "  -t, --threads N           CPU threads (default: all cores)\n"
            "  -ngl, --n-gpu-layers N    layers to offload to the first non-CPU device (default 0)\n"
            "      --device NAME         offload device (CUDA0, sim0, ...); none: no offload, whatever -ngl says\n"
            "      --no-host-copy        offloaded weights stay in host memory the device reads in place\n"
            "      --temp T              temperature (default 0.8; 0 = greedy)\n"
            "      --top-k N             top-k sampling (default 40; 0 or -1 = off)\n"
            "      --top-p P             top-p sampling (default 0.95; 1 = off)\n"
            "      --min-p P             min-p sampling (default 0.05; 0 = off)\n"
            "      --repeat-penalty X    penalty for repeated tokens (default 1.0 = off)\n"
            "      --repeat-last-n N     tokens the penalty looks back (default 64)\n"
            "  -s, --seed N              random seed, 0..18446744073709551614; -1 (the default, and only -1)\n"
            "                            picks one from the clock, and the seed used is printed\n"
            "  -ctk, --cache-type-k TYPE KV cache type of K: f32, f16 (default), bf16, q8_0 or q4_0\n"
            "  -ctv, --cache-type-v TYPE KV cache type of V: the same (q8_0, q4_0: with flash attention)\n"
            "      --cache-type TYPE     both of them\n"
            "  -fa, --flash-attn on|off|auto  fused attention (default auto: where the layer's device has it)\n"
            "      --no-mmap             read the model instead of mapping it\n"
            "      --mlock               keep the model in RAM\n"
            "      --verbose-prompt      print the prompt's tokens\n"
            "  -v, --verbose             print loading details\n"
            "  -h, --help                this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { OPT_NGL = 256, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_MINP, OPT_RPEN, OPT_RLAST, OPT_NOMMAP, OPT_MLOCK, OPT_VPROMPT,
       OPT_DEVICE, OPT_NOHOSTCOPY, OPT_CACHE, OPT_CACHE_K, OPT_CACHE_V, OPT_FA };

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
    {"verbose-prompt", no_argument, 0, OPT_VPROMPT}, {"device", required_argument, 0, OPT_DEVICE},
    {"no-host-copy", no_argument, 0, OPT_NOHOSTCOPY}, {"cache-type", required_argument, 0, OPT_CACHE},
    {"cache-type-k", required_argument, 0, OPT_CACHE_K}, {"ctk", required_argument, 0, OPT_CACHE_K},
    {"cache-type-v", required_argument, 0, OPT_CACHE_V}, {"ctv", required_argument, 0, OPT_CACHE_V},
    {"flash-attn", required_argument, 0, OPT_FA}, {"fa", required_argument, 0, OPT_FA},
    {"verbose", no_argument, 0, 'v'},          {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* The context of a run without -c when the model's training context is longer (tokens). */
#define LOOM_RUN_DEFAULT_CTX 4096

/* Returns 0 to go on, 1 for an error (reported), 2 for -h. */
static int parse(int argc, char ** argv, struct run_opts * o) {
    struct loom_sampler_params sp = loom_sampler_default_params();
    *o = (struct run_opts){.n_predict = -1, .n_ctx = -1, .n_batch = 512, .temp = sp.temp, .top_k = sp.top_k, .top_p = sp.top_p,
                           .min_p = sp.min_p, .repeat_penalty = sp.repeat_penalty, .repeat_last_n = sp.repeat_last_n,
                           .seed = LOOM_DEFAULT_SEED, .type_k = LOOM_TYPE_F16, .type_v = LOOM_TYPE_F16,
                           .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:f:n:c:b:t:s:vh", long_opts)) != -1) {
        bool ok = true;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'f': o->prompt_file = optarg; break;
        case 'n': ok = cli_parse_int("run", "-n", optarg, -1, 1 << 30, &o->n_predict); break;
        case 'c': ok = cli_parse_int("run", "-c", optarg, 0, 1 << 24, &o->n_ctx); break;
        case 'b': ok = cli_parse_int("run", "-b", optarg, 1, 1 << 20, &o->n_batch); break;
        case 't': ok = cli_parse_int("run", "-t", optarg, 1, 1024, &o->n_threads); break;
        case OPT_NGL: ok = cli_parse_int("run", "-ngl", optarg, 0, 100000, &o->n_gpu_layers); break;
        case OPT_TEMP: ok = cli_parse_float("run", "--temp", optarg, 0, 1e6, &o->temp); break;
        case OPT_TOPK: ok = cli_parse_int("run", "--top-k", optarg, -1, 1 << 30, &o->top_k); break;
        case OPT_TOPP: ok = cli_parse_float("run", "--top-p", optarg, 0, 1, &o->top_p); break;
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
        case OPT_CACHE_K: ok = cli_parse_cache_type("run", "--cache-type-k", optarg, &o->type_k); break;
        case OPT_CACHE_V: ok = cli_parse_cache_type("run", "--cache-type-v", optarg, &o->type_v); break;
        case OPT_FA: ok = cli_parse_flash_attn("run", "--flash-attn", optarg, &o->flash_attn); break;
        case 'v': o->verbose = true; break;
        case 'h': usage(stdout); return 2;
        default: cli_option_error("run", c); return 1; /* ':' or '?' */
        }
        if (!ok) return 1;
    }
    if (!cli_no_more_args("run", argc, argv)) return 1;
    if (o->device && !strcasecmp(o->device, "none")) { /* the CPU alone */
        o->device = NULL;
        o->n_gpu_layers = 0;
    }
    if (o->device && !loom_backend_dev_by_name(o->device)) {
        fprintf(stderr, "loom run: no device named '%s' (available: %s)\n", o->device, cli_device_list());
        return 1;
    }
    if (o->device && loom_backend_dev_type(loom_backend_dev_by_name(o->device)) == LOOM_BACKEND_DEV_TYPE_CPU) {
        fprintf(stderr, "loom run: '%s' is the host CPU, not an offload device (use --device none for no offload)\n", o->device);
        return 1;
    }
    if (!o->model) {
        fprintf(stderr, "loom run: no model given (-m MODEL.gguf)\n");
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

static void print_timing(const char * what, double ms, int n, const char * unit) {
    fprintf(stderr, "%-17s = %10.2f ms / %5d %s", what, ms, n, unit);
    if (n > 0) fprintf(stderr, " (%8.2f ms per token, %8.2f tokens per second)", ms / n, 1000.0 * n / ms);
    fputc('\n', stderr);
}

struct run_state {
    struct loom_vocab * vocab;
    struct loom_model * model;
    struct loom_llama_context * lctx;
    struct loom_sampler * sampler;
    struct loom_detok * detok;
    int32_t * tokens;
};

static void run_state_free(struct run_state * s) {
    loom_detok_free(s->detok);
    loom_sampler_free(s->sampler);
    loom_llama_context_free(s->lctx);
    loom_model_free(s->model);
    loom_vocab_free(s->vocab);
    free(s->tokens);
}

static int fail(struct run_state * s, const char * what) {
    fflush(stdout);
    fprintf(stderr, "loom run: %s\n", cli_last_error(what));
    run_state_free(s);
    return 1;
}

static void emit(struct loom_detok * d, int32_t token) {
    const char * text;
    size_t len;
    if (loom_detok_push(d, token, &text, &len) == LOOM_OK && len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
}

/* Tokenizes the prompt with the model's vocabulary (read from the file's metadata, before the
 * weights) and checks it fits the context, so that bad requests fail before any loading. */
static int prepare_prompt(const struct run_opts * o, struct run_state * s, int32_t * n_prompt_out, int32_t * n_ctx_out) {
    char * prompt_buf = NULL;
    size_t plen = 0;
    if (o->prompt_file) {
        prompt_buf = cli_read_file("run", o->prompt_file, &plen);
        if (!prompt_buf) return 1;
    }
    const char * prompt = prompt_buf ? prompt_buf : o->prompt ? o->prompt : "";
    struct loom_hparams hp;
    if (loom_model_read_meta(o->model, &hp, &s->vocab) != LOOM_OK) {
        free(prompt_buf);
        return fail(s, "cannot read the model");
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
    /* unset: the training context up to LOOM_RUN_DEFAULT_CTX (a file's context length alone should
     * not size a cache of many GiB); -c 0: the training context as it is */
    int32_t n_ctx = o->n_ctx > 0 ? (int32_t)o->n_ctx : hp.n_ctx_train;
    if (o->n_ctx < 0 && n_ctx > LOOM_RUN_DEFAULT_CTX) n_ctx = LOOM_RUN_DEFAULT_CTX;
    if (n_ctx > hp.n_ctx_train) {
        fprintf(stderr, "warning: context %d is larger than the model's training context %d\n", n_ctx, hp.n_ctx_train);
    }
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
    if (isatty(STDERR_FILENO)) mp.progress = progress_bar;
    if (loom_model_load(o.model, mp, &s.model) != LOOM_OK) return fail(&s, "cannot load the model");
    /* warned only now, so that a request refused above still gets its one line */
    if (o.device && o.n_gpu_layers == 0) {
        fprintf(stderr, "warning: --device %s has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n", o.device);
    }
    if (o.no_host_copy && o.n_gpu_layers == 0) {
        fprintf(stderr, "warning: --no-host-copy has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n");
    }
    double t_load = (loom_time_us() - t_start) / 1000.0;

    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (int32_t)o.n_batch;
    cp.n_threads = (int32_t)cli_cap_threads("run", o.n_threads);
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    cp.flash_attn = o.flash_attn;
    if (loom_llama_context_new(s.model, cp, &s.lctx) != LOOM_OK) return fail(&s, "cannot create the context");
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
    sp.seed = o.seed;
    if (loom_sampler_new(&sp, &s.sampler) != LOOM_OK) return fail(&s, "cannot create the sampler");
    if (loom_detok_new(vocab, 0, &s.detok) != LOOM_OK) return fail(&s, "cannot create the detokenizer");
    fprintf(stderr, "seed: %llu\n", (unsigned long long)loom_sampler_get_seed(s.sampler));

    for (int32_t i = 0; i < n_prompt; i++) {
        loom_sampler_accept(s.sampler, s.tokens[i]);
        emit(s.detok, s.tokens[i]);
    }
    int64_t t0 = loom_time_us();
    if (loom_llama_decode(s.lctx, s.tokens, n_prompt) != LOOM_OK) return fail(&s, "prompt evaluation failed");
    double t_prompt = (loom_time_us() - t0) / 1000.0;

    double t_eval = 0;
    int n_eval = 0, n_gen = 0;
    const int32_t n_vocab = loom_model_hparams(s.model)->n_vocab;
    while (o.n_predict < 0 || n_gen < o.n_predict) {
        int32_t tok;
        if (loom_sampler_sample(s.sampler, loom_llama_get_logits(s.lctx), n_vocab, &tok) != LOOM_OK) {
            return fail(&s, "sampling failed");
        }
        if (tok == loom_vocab_eos(vocab)) break;
        loom_sampler_accept(s.sampler, tok);
        emit(s.detok, tok);
        n_gen++;
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

    fprintf(stderr, "\n");
    fprintf(stderr, "%-17s = %10.2f ms\n", "load time", t_load);
    print_timing("prompt eval time", t_prompt, n_prompt, "tokens");
    print_timing("eval time", t_eval, n_eval, "runs  ");
    fprintf(stderr, "%-17s = %10.2f ms / %5d tokens\n", "total time", (loom_time_us() - t_start) / 1000.0, n_prompt + n_gen);
    run_state_free(&s);
    return 0;
}
