/* cmd-run.c -- `loom run`: generate text with a GGUF model, streaming to stdout, timings to stderr. */
#include "cli-util.h"
#include "cli-devices.h"
#include "commands.h"
#include "gen-controls.h"
#include "gen-opts.h"
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
    struct gen_opts g; /* what run shares with chat */
    const char * prompt;
    const char * prompt_file;
    bool escape, no_display_prompt, list_devices, json;
    struct stop_strings stops;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom run -m MODEL.gguf [options]\n"
            "\n"
            "  -m, --model FILE          GGUF model to run (required)\n"
            "  -p, --prompt TEXT         prompt (default: none, generation starts from BOS)\n"
            "  -f, --file FILE           read the prompt from FILE (- : standard input; one trailing newline dropped)\n"
            "  -n, --n-predict N         tokens to generate (default -1: until an end-of-generation token\n"
            "                            (EOS, end of turn) or the context is full; -2: the same, run never\n"
            "                            shifts the context; also --predict)\n"
            "  -c, --ctx-size N          context size in tokens (default 4096, with a warning when it exceeds the\n"
            "                            model's training context; 0: the model's training context)\n"
            GEN_OPTS_HELP_CONTEXT
            GEN_OPTS_HELP_SAMPLING
            "  -r, --reverse-prompt S    stop when the generated text ends with S; repeatable\n"
            "  -e, --escape              process escapes (\\n, \\t, \\xHH, ...) in the prompt and -r (default)\n"
            "      --no-escape           take them as they are written\n"
            "      --no-display-prompt   print only the generated text, not the prompt\n"
            GEN_OPTS_HELP_CACHE
            "      --verbose-prompt      print the prompt's tokens\n"
            "  -cnv, --conversation      chat instead (see loom chat -h; -p is then the system message)\n"
            "  -v, --verbose             print loading details (and the memory breakdown after loading)\n"
            "      --list-devices        print the devices (name, type, memory) and exit; --json: as JSON\n"
            "  -h, --help                this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { OPT_NO_DISPLAY = 256, OPT_LIST_DEVICES, OPT_JSON, OPT_NO_ESCAPE };

static const struct option long_opts[] = {
    GEN_OPTS_LONG_OPTS,
    {"prompt", required_argument, 0, 'p'},     {"file", required_argument, 0, 'f'},
    {"reverse-prompt", required_argument, 0, 'r'}, {"escape", no_argument, 0, 'e'}, {"no-escape", no_argument, 0, OPT_NO_ESCAPE},
    {"no-display-prompt", no_argument, 0, OPT_NO_DISPLAY}, {"list-devices", no_argument, 0, OPT_LIST_DEVICES},
    {"json", no_argument, 0, OPT_JSON},        {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* The context of a run without -c when the model's training context is longer (tokens). */
#define LOOM_RUN_DEFAULT_CTX 4096

/* Returns 0 to go on, 1 for an error (reported), 2 for -h. */
static int parse(int argc, char ** argv, struct run_opts * o) {
    *o = (struct run_opts){.escape = true};
    gen_opts_init(&o->g);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":" GEN_OPTS_SHORT "p:f:r:eh", long_opts)) != -1) {
        const int shared = gen_opts_option("run", c, optarg, &o->g);
        if (shared < 0) return 1;
        if (shared) continue;
        switch (c) {
        case 'p': o->prompt = optarg; break;
        case 'f': o->prompt_file = optarg; break;
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
        case 'h': usage(stdout); return 2;
        default: cli_option_error("run", c); return 1; /* ':' or '?' */
        }
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
    if (!gen_opts_check("run", &o->g)) return 1;
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

static int fail(struct run_state * s, const char * what) {
    cli_log_release(false); /* the loading details of a run that did not start: the error is the one line */
    if (s->text_out) fputc('\n', stdout);
    cli_flush();
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
    cli_flush();
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
    if (loom_model_file_open(o->g.model, &s->file) != LOOM_OK) {
        free(prompt_buf);
        cli_name_last_error(o->g.model, "cannot read the model");
        return fail(s, "cannot read the model");
    }
    s->vocab = loom_model_file_vocab(s->file);
    const struct loom_hparams hp = *loom_model_file_hparams(s->file);
    if (!logit_bias_check("run", o->g.biases, o->g.n_biases, hp.n_vocab) || !gen_opts_check_cache("run", &o->g, &hp)) {
        free(prompt_buf);
        run_state_free(s);
        return 1;
    }
    if (!prompt_buf) plen = strlen(prompt);
    bool add_bos = loom_vocab_get_add_bos(s->vocab);
    /* unset: LOOM_RUN_DEFAULT_CTX, as the field's tools (a file's context length alone should not
     * size a cache of many GiB, nor a short one cut generation short); -c 0: the training context */
    const int32_t n_ctx = o->g.n_ctx > 0 ? (int32_t)o->g.n_ctx : o->g.n_ctx == 0 ? hp.n_ctx_train : LOOM_RUN_DEFAULT_CTX;
    const int64_t n_least = prompt_min_tokens(s->vocab, plen) + add_bos;
    if (n_least > n_ctx) { /* refused before tokenizing a text that cannot fit (a large file takes minutes) */
        fprintf(stderr, "loom run: the prompt is at least %lld tokens (%zu bytes), longer than the context of %d (use -c)\n",
                (long long)n_least, plen, n_ctx);
        free(prompt_buf);
        run_state_free(s);
        return 1;
    }
    int32_t n_prompt = loom_tokenize(s->vocab, prompt, plen, add_bos, o->g.parse_special, NULL, 0);
    if (n_prompt < 0 && n_prompt != LOOM_TOKEN_ERROR) n_prompt = -n_prompt;
    if (n_prompt > 0) s->tokens = malloc(((size_t)n_prompt + 1) * sizeof *s->tokens);
    if (n_prompt > 0 && s->tokens) n_prompt = loom_tokenize(s->vocab, prompt, plen, add_bos, o->g.parse_special, s->tokens, n_prompt + 1);
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
    cli_log_setup(o.g.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_INFO);
    struct run_state s = {0};
    int64_t t_start = loom_time_us();
    if (access(o.g.model, R_OK) != 0) {
        fprintf(stderr, "loom run: cannot open model '%s': %s\n", o.g.model, strerror(errno));
        return 1;
    }
    int32_t n_prompt = 0, n_ctx = 0;
    if (prepare_prompt(&o, &s, &n_prompt, &n_ctx)) return 1;
    const struct loom_vocab * vocab = s.vocab;

    struct loom_model_params mp = loom_model_default_params();
    gen_opts_model_params(&o.g, &mp);
    if (isatty(STDERR_FILENO)) mp.progress = progress_bar;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    gen_opts_context_params("run", &o.g, &cp);
    const bool ngl_auto = o.g.n_gpu_layers == CLI_NGL_AUTO;
    if (ngl_auto) {
        cli_log_setup(o.g.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_WARN); /* the dry run's loading is not the run's */
        const bool fitted = cli_fit_layers(s.file, &mp, cp, o.g.fit_margin);
        cli_log_setup(o.g.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_INFO);
        if (!fitted) return fail(&s, "cannot measure what fits on the device");
        o.g.n_gpu_layers = mp.n_gpu_layers;
    }
    cli_log_hold(); /* printed once the context exists: a model or a KV cache refused gets its one line */
    if (loom_model_load_file(s.file, mp, &s.model) != LOOM_OK) {
        cli_name_last_error(o.g.model, "cannot load the model");
        return fail(&s, "cannot load the model");
    }
    double t_load = (loom_time_us() - t_start) / 1000.0;
    const enum loom_status cst = loom_llama_context_new(s.model, cp, &s.lctx);
    if (cst != LOOM_OK) {
        cli_hint_last_error(cst, "use a smaller -c");
        return fail(&s, "cannot create the context");
    }
    cli_log_release(true);
    /* warned only now, so that a request refused above still gets its one line */
    if (o.g.device && o.g.n_gpu_layers == 0 && !ngl_auto) {
        fprintf(stderr, "warning: --device %s has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n", o.g.device);
    }
    if (o.g.no_host_copy && o.g.n_gpu_layers == 0) {
        fprintf(stderr, "warning: --no-host-copy has no effect without -ngl/--n-gpu-layers > 0 (nothing is offloaded)\n");
    }
    cli_warn_ctx_train(n_ctx, s.n_ctx_train);
    /* the token sampled from the last position is printed though it is never decoded */
    if (o.g.n_predict >= 0 && (int64_t)n_prompt + o.g.n_predict > (int64_t)n_ctx + 1) {
        fprintf(stderr, "warning: the prompt (%d token%s) and -n %lld exceed the context of %d: generation stops after %d token%s "
                        "(use -c)\n", n_prompt, cli_plural(n_prompt), o.g.n_predict, n_ctx, n_ctx - n_prompt + 1,
                cli_plural(n_ctx - n_prompt + 1));
    }
    if (o.g.verbose) cli_print_memory_breakdown(s.model, s.lctx);
    if (o.g.verbose_prompt) {
        fprintf(stderr, "prompt: %d token%s\n", n_prompt, cli_plural(n_prompt));
        for (int32_t i = 0; i < n_prompt; i++) {
            char piece[256];
            const int32_t n = loom_token_to_piece(vocab, s.tokens[i], piece, sizeof piece, true);
            fprintf(stderr, "%6d -> '", s.tokens[i]);
            cli_print_piece(stderr, piece, n > 0 ? n : 0);
            fputs("'\n", stderr);
        }
    }

    struct loom_sampler_params sp = loom_sampler_default_params();
    gen_opts_sampler_params(&o.g, n_ctx, &sp);
    if (loom_sampler_new(&sp, &s.sampler) != LOOM_OK) return fail(&s, "cannot create the sampler");
    if (loom_detok_new(vocab, o.g.special ? LOOM_DETOK_SPECIAL : 0, &s.detok) != LOOM_OK) return fail(&s, "cannot create the detokenizer");
    if (o.g.temp > 0) fprintf(stderr, "seed: %llu\n", (unsigned long long)loom_sampler_get_seed(s.sampler)); /* greedy draws nothing */

    const int32_t n_vocab = loom_model_hparams(s.model)->n_vocab;
    if (gen_opts_needs_scratch(&o.g) && !(s.logits = malloc((size_t)n_vocab * sizeof *s.logits))) return fail(&s, "out of memory");
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
    while ((o.g.n_predict < 0 || n_gen < o.g.n_predict) && !g_interrupted) {
        int32_t tok;
        if (loom_sampler_sample(s.sampler, gen_opts_logits(&o.g, vocab, loom_llama_get_logits(s.lctx), s.logits, n_vocab), n_vocab, &tok) != LOOM_OK) {
            return fail(&s, "sampling failed");
        }
        if (loom_vocab_is_eog(vocab, tok)) break; /* EOS, end of turn, ... */
        loom_sampler_accept(s.sampler, tok);
        const bool stop = emit(&s, &o.stops, tok, true);
        n_gen++;
        if (stop) break;
        if (o.g.n_predict >= 0 && n_gen >= o.g.n_predict) break;
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
