/* cmd-perplexity.c -- `loom perplexity`: a model's perplexity on a text, measured in chunks of the context as the field's tool does. */
#include "cli-util.h"
#include "cli-devices.h"
#include "cli-kv.h"
#include "cli-split.h"
#include "commands.h"
#include "loom-llama.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct ppl_opts {
    const char * model;
    const char * text_file;
    const char * device;
    long long n_ctx, n_batch, n_threads, n_gpu_layers, fit_margin;
    long long n_chunks; /* --chunks: at most this many chunks; <= 0 all of them */
    struct cli_split split;
    enum loom_type type_k, type_v;
    enum loom_llama_flash_attn flash_attn;
    bool no_mmap, check_tensors;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom perplexity -m MODEL.gguf -f TEXT [options]\n"
            "\n"
            "Splits the tokenized text into chunks of the context size and scores the second half of each\n"
            "chunk (every token predicted from at least half a context), printing the running perplexity\n"
            "after each chunk as [i]ppl and the final estimate with its standard error.\n"
            "\n"
            "  -m, --model FILE          GGUF model (required)\n"
            "  -f, --file FILE           text to score (required; - reads standard input)\n"
            "  -c, --ctx-size N          chunk size in tokens (default 512; at least 4)\n"
            "  -b, --batch-size N        tokens per decode call (default 2048, at most the chunk size)\n"
            "      --chunks N            score at most N chunks (default -1; 0 or less, or more than the text\n"
            "                            holds: all of them)\n"
            "  -t, --threads N           CPU threads (default: LOOM_N_THREADS, else all cores)\n"
            "  -ctk, --cache-type-k T    KV cache type for K: f32, f16 (default), bf16, q8_0, q4_0\n"
            "  -ctv, --cache-type-v T    KV cache type for V (the same types; q8_0 and q4_0 need flash attention)\n"
            "  -fa, --flash-attn [on|off|auto]  the fused attention op (default auto; a bare -fa: on)\n"
            "  -ngl, --n-gpu-layers N    layers to offload (default 0), or auto: as many as the device's free memory holds\n"
            "      --fit-margin MiB      device memory -ngl auto leaves free (default 1024)\n"
            "  -dev, --device NAME[,NAME...]  offload devices (CUDA0, sim0, ...); none: no offload\n"
            CLI_SPLIT_HELP
            "      --no-mmap             read the model instead of mapping it\n"
            "      --check-tensors       refuse a model with a NaN or infinite F32, F16 or BF16 weight\n"
            "  -h, --help                this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { OPT_NGL = 256, OPT_NOMMAP, OPT_DEVICE, OPT_FIT_MARGIN, OPT_CACHE_K, OPT_CACHE_V, OPT_FA, OPT_CHUNKS, OPT_CHECK_TENSORS };

static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'},      {"file", required_argument, 0, 'f'},
    {"ctx-size", required_argument, 0, 'c'},   {"batch-size", required_argument, 0, 'b'},
    {"threads", required_argument, 0, 't'},    {"ngl", required_argument, 0, OPT_NGL},
    {"n-gpu-layers", required_argument, 0, OPT_NGL}, {"no-mmap", no_argument, 0, OPT_NOMMAP},
    {"device", required_argument, 0, OPT_DEVICE}, {"dev", required_argument, 0, OPT_DEVICE}, CLI_SPLIT_LONG_OPTS,
    {"fit-margin", required_argument, 0, OPT_FIT_MARGIN},
    {"ctk", required_argument, 0, OPT_CACHE_K}, {"cache-type-k", required_argument, 0, OPT_CACHE_K},
    {"ctv", required_argument, 0, OPT_CACHE_V}, {"cache-type-v", required_argument, 0, OPT_CACHE_V},
    {"fa", optional_argument, 0, OPT_FA},       {"flash-attn", optional_argument, 0, OPT_FA},
    {"chunks", required_argument, 0, OPT_CHUNKS}, {"check-tensors", no_argument, 0, OPT_CHECK_TENSORS},
    {"help", no_argument, 0, 'h'},             {0, 0, 0, 0},
};

/* The smallest chunk: half of it is context, and at least one token of the rest is scored. */
#define PPL_MIN_CTX 4

/* Returns 0 to go on, 1 for an error (reported), 2 for -h. */
static int parse(int argc, char ** argv, struct ppl_opts * o) {
    *o = (struct ppl_opts){.n_ctx = 512, .n_batch = 2048, .n_chunks = -1, .fit_margin = 1024, .type_k = LOOM_TYPE_F16, .type_v = LOOM_TYPE_F16,
                           .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO};
    cli_split_init(&o->split);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:f:c:b:t:h", long_opts)) != -1) {
        bool ok = true;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'f': o->text_file = optarg; break;
        case 'c': ok = cli_parse_int("perplexity", "-c", optarg, PPL_MIN_CTX, 1 << 20, &o->n_ctx); break;
        case 'b': ok = cli_parse_int("perplexity", "-b", optarg, 1, 1 << 20, &o->n_batch); break;
        case 't': ok = cli_parse_int("perplexity", "-t", optarg, 1, 1024, &o->n_threads); break;
        case OPT_NGL: ok = cli_parse_ngl("perplexity", optarg, &o->n_gpu_layers); break;
        case OPT_NOMMAP: o->no_mmap = true; break;
        case OPT_CHECK_TENSORS: o->check_tensors = true; break;
        case OPT_CHUNKS: ok = cli_parse_int("perplexity", "--chunks", optarg, INT32_MIN, INT32_MAX, &o->n_chunks); break;
        case OPT_FIT_MARGIN: ok = cli_parse_int("perplexity", "--fit-margin", optarg, 0, 1 << 30, &o->fit_margin); break;
        case OPT_DEVICE: o->device = optarg; break;
        case OPT_CACHE_K: ok = cli_parse_cache_type("perplexity", "--cache-type-k", optarg, &o->type_k); break;
        case OPT_CACHE_V: ok = cli_parse_cache_type("perplexity", "--cache-type-v", optarg, &o->type_v); break;
        case OPT_FA: ok = cli_parse_flash_attn("perplexity", "--flash-attn", optarg, &o->flash_attn); break;
        case CLI_OPT_SPLIT_MODE:
        case CLI_OPT_TENSOR_SPLIT:
        case CLI_OPT_MAIN_GPU: ok = cli_split_option("perplexity", c, optarg, &o->split); break;
        case 'h': usage(stdout); return 2;
        default: cli_option_error("perplexity", c); return 1;
        }
        if (!ok) return 1;
    }
    if (!cli_no_more_args("perplexity", argc, argv)) return 1;
    if (!o->model) {
        fprintf(stderr, "loom perplexity: no model given (-m MODEL.gguf)\n");
        return 1;
    }
    if (!o->text_file) {
        fprintf(stderr, "loom perplexity: no text given (-f TEXT)\n");
        return 1;
    }
    if (o->device && !strcasecmp(o->device, "none")) {
        o->device = NULL;
        o->n_gpu_layers = 0;
    } else if (o->device && !cli_check_devices("perplexity", o->device)) {
        return 1;
    }
    if (o->n_batch > o->n_ctx) o->n_batch = o->n_ctx;
    return 0;
}

/* -log p(token) under the softmax of 'logits' [n_vocab], in double precision. */
static double neg_log_prob(const float * logits, int32_t n_vocab, int32_t token) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    return log(sum) - ((double)logits[token] - max);
}

struct ppl_state {
    struct loom_model_file * file;   /* opened and parsed once: the text is tokenized, then the weights load */
    const struct loom_vocab * vocab; /* the file's */
    struct loom_model * model;
    struct loom_llama_context * lctx;
    int32_t * tokens;
    float * logits; /* [n_vocab, n_ctx - first] the logits of a chunk's scored half */
};

static int finish(struct ppl_state * s, int rc, const char * what) {
    if (what) fprintf(stderr, "loom perplexity: %s\n", cli_last_error(what));
    free(s->logits);
    free(s->tokens);
    loom_llama_context_free(s->lctx);
    loom_model_free(s->model);
    loom_model_file_free(s->file);
    return rc;
}

/* Tokenizes the text as the field's tool does: the vocabulary's BOS first when it adds one, no
 * special-token parsing. Returns the token count, or -1 (reported). */
static int32_t tokenize_text(const struct ppl_opts * o, struct ppl_state * s) {
    size_t len = 0;
    char * text = cli_read_prompt_file("perplexity", o->text_file, &len);
    if (!text) return -1;
    const bool add_bos = loom_vocab_get_add_bos(s->vocab);
    int32_t n = loom_tokenize(s->vocab, text, len, add_bos, false, NULL, 0);
    if (n < 0 && n != LOOM_TOKEN_ERROR) {
        s->tokens = malloc((size_t)-n * sizeof *s->tokens);
        n = s->tokens ? loom_tokenize(s->vocab, text, len, add_bos, false, s->tokens, -n) : LOOM_TOKEN_ERROR;
    }
    free(text);
    if (n < 0) {
        fprintf(stderr, "loom perplexity: %s\n", cli_last_error("cannot tokenize the text"));
        return -1;
    }
    return n;
}

int loom_cmd_perplexity(int argc, char ** argv) {
    struct ppl_opts o;
    int pr = parse(argc, argv, &o);
    if (pr) return pr == 2 && cli_stdout_ok("perplexity") ? 0 : 1;
    cli_log_setup(LOOM_LOG_WARN);
    struct ppl_state s = {0};
    if (access(o.model, R_OK) != 0) {
        fprintf(stderr, "loom perplexity: cannot open model '%s': %s\n", o.model, strerror(errno));
        return 1;
    }
    if (loom_model_file_open(o.model, &s.file) != LOOM_OK) {
        cli_name_last_error(o.model, "cannot read the model");
        return finish(&s, 1, "cannot read the model");
    }
    s.vocab = loom_model_file_vocab(s.file);
    const int64_t t0 = loom_time_us();
    const int32_t n_tokens = tokenize_text(&o, &s);
    if (n_tokens < 0) return finish(&s, 1, NULL);
    const int32_t n_ctx = (int32_t)o.n_ctx;
    if (n_tokens < 2 * n_ctx) {
        fprintf(stderr, "loom perplexity: the text is %d token%s; a context of %d needs at least %d (use a longer text or a smaller -c)\n",
                n_tokens, n_tokens == 1 ? "" : "s", n_ctx, 2 * n_ctx);
        return finish(&s, 1, NULL);
    }
    const double tok_ms = (loom_time_us() - t0) / 1000.0; /* reported once the context is made: an error there is the one line */

    struct loom_model_params mp = loom_model_default_params();
    mp.n_gpu_layers = (int)o.n_gpu_layers;
    mp.device = o.device;
    cli_split_apply(&o.split, &mp);
    mp.use_mmap = !o.no_mmap;
    mp.check_tensors = o.check_tensors;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (int32_t)o.n_batch;
    cp.n_threads = (int32_t)cli_cap_threads("perplexity", o.n_threads);
    cp.logits_all = true;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    cp.flash_attn = o.flash_attn;
    if (o.n_gpu_layers == CLI_NGL_AUTO && !cli_fit_layers(s.file, &mp, cp, o.fit_margin)) return finish(&s, 1, "cannot measure what fits on the device");
    if (loom_model_load_file(s.file, mp, &s.model) != LOOM_OK) {
        cli_name_last_error(o.model, "cannot load the model");
        return finish(&s, 1, "cannot load the model");
    }
    cli_warn_ctx_train(n_ctx, loom_model_hparams(s.model)->n_ctx_train);
    const enum loom_status cst = loom_llama_context_new(s.model, cp, &s.lctx);
    if (cst != LOOM_OK) {
        cli_hint_last_error(cst, "use a smaller -c");
        return finish(&s, 1, "cannot create the context");
    }
    fprintf(stderr, "perplexity: tokenized the input in %.2f ms: %d tokens\n", tok_ms, n_tokens);

    const int32_t n_vocab = loom_model_hparams(s.model)->n_vocab;
    const int32_t n_chunk_max = n_tokens / n_ctx, n_batch = (int32_t)o.n_batch;
    /* --chunks caps the count, as llama-perplexity's does (<= 0: every chunk the text holds) */
    const int32_t n_chunk = o.n_chunks > 0 && o.n_chunks < n_chunk_max ? (int32_t)o.n_chunks : n_chunk_max;
    const int32_t first = n_ctx / 2; /* logits from this position on are scored, each against the next token */
    s.logits = malloc((size_t)(n_ctx - first) * (size_t)n_vocab * sizeof *s.logits);
    if (!s.logits) return finish(&s, 1, "out of memory");
    fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=1\n", n_chunk, n_ctx, n_batch);

    const int32_t bos = loom_vocab_bos(s.vocab);
    const bool add_bos = loom_vocab_get_add_bos(s.vocab);
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    const int64_t t_start = loom_time_us();
    for (int32_t i = 0; i < n_chunk; i++) {
        int32_t * chunk = s.tokens + (size_t)i * n_ctx;
        loom_llama_kv_clear(s.lctx);
        /* every chunk starts from BOS, as at the start of a text (it replaces the chunk's first token) */
        const int32_t saved = chunk[0];
        if (add_bos) chunk[0] = bos;
        for (int32_t j = 0; j < n_ctx; j += n_batch) {
            const int32_t n = n_ctx - j < n_batch ? n_ctx - j : n_batch;
            if (loom_llama_decode(s.lctx, chunk + j, n) != LOOM_OK) {
                chunk[0] = saved;
                return finish(&s, 1, "evaluation failed");
            }
            for (int32_t k = j < first ? first - j : 0; k < n; k++) {
                memcpy(s.logits + (size_t)(j + k - first) * n_vocab, loom_llama_get_logits_ith(s.lctx, k), (size_t)n_vocab * sizeof *s.logits);
            }
        }
        chunk[0] = saved;
        for (int32_t k = first; k < n_ctx - 1; k++) {
            const double v = neg_log_prob(s.logits + (size_t)(k - first) * n_vocab, n_vocab, chunk[k + 1]);
            nll += v;
            nll2 += v * v;
        }
        count += n_ctx - 1 - first;
        if (!isfinite(nll)) { /* NaN or infinite logits (a model with bad weights): no figure to report */
            printf("\n");
            return finish(&s, 1, "the model's logits are NaN or infinite: no perplexity (NaN or infinite weights? "
                                 "--check-tensors finds them)");
        }
        if (i == 0) {
            const double sec = (loom_time_us() - t_start) / 1e6;
            fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", sec, sec * n_chunk / 60.0);
        }
        printf("[%d]%.4f,", i + 1, exp(nll / (double)count));
        cli_flush();
    }
    printf("\n");
    /* the standard error of the mean negative log-likelihood, carried to the perplexity by its
     * derivative (d exp(x) = exp(x) dx), as the field's tool reports it */
    const double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    const double ppl = exp(mean);
    if (var > 0) printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, sqrt(var / (double)(count - 1)) * ppl);
    else printf("Final estimate: PPL = %.4f\n", ppl);
    fprintf(stderr, "perplexity: %d chunks, %lld tokens scored in %.2f s\n", n_chunk, (long long)count, (loom_time_us() - t_start) / 1e6);
    return finish(&s, cli_stdout_ok("perplexity") ? 0 : 1, NULL);
}
