/* cmd-bench.c -- `loom bench`: prompt-processing and generation speed, in the spirit of the field's bench tool. */
#include "cli-devices.h"
#include "cli-kv.h"
#include "cli-util.h"
#include "cli-split.h"
#include "commands.h"
#include "loom-llama.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LIST 16

struct bench_opts {
    const char * models[MAX_LIST];
    int n_models;
    long long prompts[MAX_LIST], gens[MAX_LIST], threads[MAX_LIST], ngls[MAX_LIST], batches[MAX_LIST];
    int n_prompts, n_gens, n_threads, n_ngls, n_batches;
    long long pgs[MAX_LIST][2];    /* -pg: prompt, then generated tokens */
    int n_pgs;
    long long depths[MAX_LIST], fas[MAX_LIST], mmaps[MAX_LIST];
    int n_depths, n_fas, n_mmaps;
    enum loom_type types_k[MAX_LIST], types_v[MAX_LIST];
    int n_types_k, n_types_v;
    long long reps, n_ubatch;
    const char * device;
    struct cli_split split;
    enum { OUT_MD, OUT_JSON, OUT_CSV } output;
    bool progress;
};

struct bench_result {
    const char * model_path;
    char desc[64];
    uint64_t size, n_params;
    char backend[LOOM_MAX_DEVICES * 24 + 16];
    long long n_threads, n_gpu_layers, n_batch, n_prompt, n_gen, n_depth;
    bool flash_attn, use_mmap;
    enum loom_type type_k, type_v;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    double * samples_ns;        /* each timed run, ns ('reps' of them; the caller frees) */
    long long n_samples;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom bench -m MODEL.gguf [-m MODEL2.gguf ...] [options]\n"
            "  -p, --n-prompt N[,N...]   prompt sizes for the pp test (default 512; 0 skips)\n"
            "  -n, --n-gen N[,N...]      generated tokens for the tg test (default 128; 0 skips)\n"
            "  -r, --repetitions N       timed repetitions after one warm-up run (default 5)\n"
            "  -t, --threads N[,N...]    CPU threads (default: LOOM_N_THREADS, else all cores)\n"
            "  -ngl, --n-gpu-layers N[,N...]  layers offloaded (default 0; auto: as many as the device's free memory holds)\n"
            "  -pg PP,TG                 a prompt of PP tokens, then TG generated, timed together (may repeat)\n"
            "  -d, --n-depth N[,N...]    tokens already in the KV cache before every test (default 0)\n"
            "  -b, --batch-size N[,N...] prompt batch size (default 512)\n"
            "  -fa, --flash-attn 0|1[,...]  fused attention (default 0)\n"
            "  -ctk, --cache-type-k T[,T...]  KV cache type of K: f32, f16 (default), bf16, q8_0, q4_0\n"
            "  -ctv, --cache-type-v T[,T...]  KV cache type of V: the same (q8_0, q4_0: with -fa 1)\n"
            "  -mmp, --mmap 0|1[,...]    map the model file (1, default) or read it into buffers (0)\n"
            "  -dev, --device NAME[,NAME...]  offload devices (default: every GPU or sim device)\n"
            CLI_SPLIT_HELP
            "  -ub, --ubatch-size N      tokens per micro-batch of a pipelined prompt (-sm layer; default auto)\n"
            "  -o, --output md|json|csv  output format (default md)\n"
            "      --progress            progress lines on stderr (default: when stderr is a terminal)\n"
            "\n" CLI_LONG_OPTION_HELP);
}

static bool parse(int argc, char ** argv, struct bench_opts * o, bool * help) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"n-prompt", required_argument, 0, 'p'},
        {"n-gen", required_argument, 0, 'n'},   {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'}, {"ngl", required_argument, 0, 'g'},
        {"n-gpu-layers", required_argument, 0, 'g'}, {"batch-size", required_argument, 0, 'b'},
        {"output", required_argument, 0, 'o'},  {"progress", no_argument, 0, 'P'},
        {"pg", required_argument, 0, 'G'},      {"n-depth", required_argument, 0, 'd'},
        {"flash-attn", required_argument, 0, 'F'}, {"fa", required_argument, 0, 'F'},
        {"cache-type-k", required_argument, 0, 'K'}, {"ctk", required_argument, 0, 'K'},
        {"cache-type-v", required_argument, 0, 'V'}, {"ctv", required_argument, 0, 'V'},
        {"device", required_argument, 0, 'D'},  {"dev", required_argument, 0, 'D'},
        {"ubatch-size", required_argument, 0, 'U'}, {"ub", required_argument, 0, 'U'},
        {"mmap", required_argument, 0, 'M'},    {"mmp", required_argument, 0, 'M'},
        CLI_SPLIT_LONG_OPTS,
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
    *o = (struct bench_opts){.prompts = {512}, .n_prompts = 1, .gens = {128}, .n_gens = 1, .threads = {0},
                             .n_threads = 1, .ngls = {0}, .n_ngls = 1, .batches = {512}, .n_batches = 1, .reps = 5, .mmaps = {1}, .n_mmaps = 1,
                             .output = OUT_MD, .progress = isatty(STDERR_FILENO), .depths = {0}, .n_depths = 1,
                             .fas = {0}, .n_fas = 1, .types_k = {LOOM_TYPE_F16}, .n_types_k = 1,
                             .types_v = {LOOM_TYPE_F16}, .n_types_v = 1};
    cli_split_init(&o->split);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:n:r:t:b:o:d:h", opts)) != -1) {
        switch (c) {
        case 'm':
            if (o->n_models >= MAX_LIST) return fprintf(stderr, "loom bench: too many models\n"), false;
            o->models[o->n_models++] = optarg;
            break;
        case 'p': if ((o->n_prompts = cli_parse_int_list("bench", "-p", optarg, 0, 1 << 20, o->prompts, MAX_LIST)) < 0) return false; break;
        case 'n': if ((o->n_gens = cli_parse_int_list("bench", "-n", optarg, 0, 1 << 20, o->gens, MAX_LIST)) < 0) return false; break;
        case 't': if ((o->n_threads = cli_parse_int_list("bench", "-t", optarg, 1, 1024, o->threads, MAX_LIST)) < 0) return false; break;
        case 'g': if ((o->n_ngls = cli_parse_ngl_list("bench", optarg, o->ngls, MAX_LIST)) < 0) return false; break;
        case 'b': if ((o->n_batches = cli_parse_int_list("bench", "-b", optarg, 1, 1 << 20, o->batches, MAX_LIST)) < 0) return false; break;
        case 'r': if (!cli_parse_int("bench", "-r", optarg, 1, 1000, &o->reps)) return false; break;
        case 'M': if ((o->n_mmaps = cli_parse_int_list("bench", "-mmp", optarg, 0, 1, o->mmaps, MAX_LIST)) < 0) return false; break;
        case 'd': if ((o->n_depths = cli_parse_int_list("bench", "-d", optarg, 0, 1 << 20, o->depths, MAX_LIST)) < 0) return false; break;
        case 'F': if ((o->n_fas = cli_parse_int_list("bench", "-fa", optarg, 0, 1, o->fas, MAX_LIST)) < 0) return false; break;
        case 'G': {
            long long pair[2];
            if (o->n_pgs >= MAX_LIST) return fprintf(stderr, "loom bench: too many -pg tests\n"), false;
            const int n = cli_parse_int_list("bench", "-pg", optarg, 0, 1 << 20, pair, 2);
            if (n < 0) return false; /* reported */
            if (n != 2) return fprintf(stderr, "loom bench: -pg takes PROMPT,GENERATED (e.g. -pg 512,128), not '%s'\n", optarg), false;
            o->pgs[o->n_pgs][0] = pair[0];
            o->pgs[o->n_pgs++][1] = pair[1];
            break;
        }
        case 'K':
        case 'V': {
            enum loom_type * list = c == 'K' ? o->types_k : o->types_v;
            int * n = c == 'K' ? &o->n_types_k : &o->n_types_v;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            *n = 0;
            for (char * save = NULL, * tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (*n >= MAX_LIST) return fprintf(stderr, "loom bench: too many cache types\n"), false;
                if (!cli_parse_cache_type("bench", c == 'K' ? "-ctk" : "-ctv", tok, &list[(*n)++])) return false;
            }
            if (*n == 0) return fprintf(stderr, "loom bench: invalid value '%s' for %s\n", optarg, c == 'K' ? "-ctk" : "-ctv"), false;
            break;
        }
        case 'o':
            if (!strcmp(optarg, "md")) o->output = OUT_MD;
            else if (!strcmp(optarg, "json")) o->output = OUT_JSON;
            else if (!strcmp(optarg, "csv")) o->output = OUT_CSV;
            else return fprintf(stderr, "loom bench: invalid value '%s' for -o (md, json, csv)\n", optarg), false;
            break;
        case 'P': o->progress = true; break;
        case 'D': o->device = optarg; break;
        case 'U': if (!cli_parse_int("bench", "-ub", optarg, 1, 1 << 20, &o->n_ubatch)) return false; break;
        case CLI_OPT_SPLIT_MODE:
        case CLI_OPT_TENSOR_SPLIT:
        case CLI_OPT_MAIN_GPU: if (!cli_split_option("bench", c, optarg, &o->split)) return false; break;
        case 'h': *help = true; return true;
        default: cli_option_error("bench", c); return false; /* ':' or '?' */
        }
    }
    if (!cli_no_more_args("bench", argc, argv)) return false;
    if (o->device && !cli_check_devices("bench", o->device)) return false;
    /* thread counts above the CPUs are lowered now (a warning each); a count that then repeats an
     * earlier one is measured once */
    int nt = 0;
    for (int i = 0; i < o->n_threads; i++) {
        const long long t = cli_cap_threads("bench", o->threads[i]);
        bool seen = false;
        for (int j = 0; j < nt; j++) seen = seen || o->threads[j] == t;
        if (!seen) o->threads[nt++] = t;
    }
    o->n_threads = nt;
    if (o->n_models == 0) {
        fprintf(stderr, "loom bench: need at least one -m MODEL.gguf (see -h)\n");
        return false;
    }
    return true;
}

/* Random token ids (tokenization is not measured). */
static void fill_tokens(int32_t * t, int n, int32_t n_vocab, uint64_t * s) {
    for (int i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((*s >> 33) % (uint64_t)n_vocab);
    }
}

/* One timed run after 'n_depth' tokens put in the empty cache (not timed): a prompt of n_prompt
 * tokens in one decode call, then n_gen single-token decodes. */
static enum loom_status run_once(struct loom_llama_context * lctx, int32_t * toks, long long n_depth, long long n_prompt,
                                 long long n_gen, int32_t n_vocab, uint64_t * seed, double * ns) {
    loom_llama_kv_clear(lctx);
    enum loom_status st = LOOM_OK;
    if (n_depth > 0) {
        fill_tokens(toks, (int)n_depth, n_vocab, seed);
        st = loom_llama_decode(lctx, toks, (int32_t)n_depth);
    }
    if (n_prompt > 0) fill_tokens(toks, (int)n_prompt, n_vocab, seed);
    const int64_t t0 = loom_time_ns();
    if (st == LOOM_OK && n_prompt > 0) st = loom_llama_decode(lctx, toks, (int32_t)n_prompt);
    for (long long i = 0; i < n_gen && st == LOOM_OK; i++) {
        fill_tokens(toks + n_prompt, 1, n_vocab, seed);
        st = loom_llama_decode(lctx, toks + n_prompt, 1);
    }
    *ns = (double)(loom_time_ns() - t0);
    return st;
}

/* The field's test name: pp512, tg128, pp512+tg128, with " @ d1000" after tokens already in the cache. */
static void test_name(const struct bench_result * r, char * buf, size_t size) {
    int n = r->n_prompt && r->n_gen ? snprintf(buf, size, "pp%lld+tg%lld", r->n_prompt, r->n_gen)
            : r->n_prompt           ? snprintf(buf, size, "pp%lld", r->n_prompt)
                                    : snprintf(buf, size, "tg%lld", r->n_gen);
    if (r->n_depth > 0 && n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " @ d%lld", r->n_depth);
}

/* The table shows an mmap column where -mmp is not the default (1 alone), as the field's bench does. */
static bool md_mmap(const struct bench_opts * o) { return o->n_mmaps > 1 || !o->mmaps[0]; }

static void print_header(const struct bench_opts * o) {
    if (o->output == OUT_MD) {
        printf("| model | size | params | backend | threads | ngl | fa | type_k | type_v |%s test | t/s |\n", md_mmap(o) ? " mmap |" : "");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |%s ---: | ---: |\n", md_mmap(o) ? " ---: |" : "");
    } else if (o->output == OUT_CSV) {
        printf("model_filename,model_type,model_size,model_n_params,backends,n_threads,n_gpu_layers,n_batch,type_k,type_v,"
               "flash_attn,use_mmap,n_prompt,n_gen,n_depth,avg_ns,stddev_ns,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
}

static void print_result(const struct bench_opts * o, const struct bench_result * r, bool first) {
    if (o->output == OUT_MD) {
        char test[64];
        test_name(r, test, sizeof test);
        char mmap[16] = "";
        if (md_mmap(o)) snprintf(mmap, sizeof mmap, " %d |", r->use_mmap);
        printf("| %s | %.2f MiB | %.2f M | %s | %lld | %lld | %d | %s | %s |%s %s | %.2f ± %.2f |\n", r->desc, r->size / 1048576.0,
               r->n_params / 1e6, r->backend, r->n_threads, r->n_gpu_layers, r->flash_attn, loom_type_name(r->type_k),
               loom_type_name(r->type_v), mmap, test, r->avg_ts, r->stddev_ts);
    } else if (o->output == OUT_CSV) {
        printf("\"%s\",\"%s\",%llu,%llu,\"%s\",%lld,%lld,%lld,\"%s\",\"%s\",%d,%d,%lld,%lld,%lld,%.0f,%.0f,%.6f,%.6f\n", r->model_path,
               r->desc, (unsigned long long)r->size, (unsigned long long)r->n_params, r->backend, r->n_threads,
               r->n_gpu_layers, r->n_batch, loom_type_name(r->type_k), loom_type_name(r->type_v), r->flash_attn, r->use_mmap,
               r->n_prompt, r->n_gen, r->n_depth, r->avg_ns, r->stddev_ns, r->avg_ts, r->stddev_ts);
    } else {
        printf("%s  {\"model_filename\": \"", first ? "" : ",\n");
        for (const char * c = r->model_path; *c; c++) {
            if (*c == '"' || *c == '\\') printf("\\%c", *c);
            else if ((unsigned char)*c < 0x20) printf("\\u%04x", *c);
            else putchar(*c);
        }
        printf("\", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"backends\": \"%s\", "
               "\"n_threads\": %lld, \"n_gpu_layers\": %lld, \"n_batch\": %lld, \"type_k\": \"%s\", \"type_v\": \"%s\", "
               "\"flash_attn\": %s, \"use_mmap\": %s, \"n_prompt\": %lld, \"n_gen\": %lld, \"n_depth\": %lld, "
               "\"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ns\": [",
               r->desc, (unsigned long long)r->size, (unsigned long long)r->n_params, r->backend, r->n_threads,
               r->n_gpu_layers, r->n_batch, loom_type_name(r->type_k), loom_type_name(r->type_v),
               r->flash_attn ? "true" : "false", r->use_mmap ? "true" : "false", r->n_prompt, r->n_gen, r->n_depth, r->avg_ns, r->stddev_ns, r->avg_ts,
               r->stddev_ts);
        const double n_tok = (double)(r->n_prompt + r->n_gen);
        for (long long i = 0; i < r->n_samples; i++) printf("%s%.0f", i ? ", " : "", r->samples_ns[i]);
        printf("], \"samples_ts\": [");
        for (long long i = 0; i < r->n_samples; i++) printf("%s%.6f", i ? ", " : "", n_tok * 1e9 / r->samples_ns[i]);
        printf("]}");
    }
    cli_flush();
}

/* Runs one test (pp or tg) for one configuration: warm-up, then 'reps' timed runs; on success
 * r->samples_ns holds their times (the caller frees it). */
static bool bench_test(const struct bench_opts * o, struct loom_llama_context * lctx, struct bench_result * r, int32_t * toks,
                       int32_t n_vocab) {
    uint64_t seed = 1234;
    double * ns = calloc((size_t)o->reps, sizeof *ns);
    if (!ns) return false;
    double warm;
    bool ok = run_once(lctx, toks, r->n_depth, r->n_prompt, r->n_gen, n_vocab, &seed, &warm) == LOOM_OK;
    char test[64];
    test_name(r, test, sizeof test);
    for (long long i = 0; ok && i < o->reps; i++) {
        if (o->progress) {
            fprintf(stderr, "bench: %s %s, t %lld, ngl %lld, fa %d: run %lld/%lld\n", r->desc, test, r->n_threads,
                    r->n_gpu_layers, r->flash_attn, i + 1, o->reps);
        }
        ok = run_once(lctx, toks, r->n_depth, r->n_prompt, r->n_gen, n_vocab, &seed, &ns[i]) == LOOM_OK;
    }
    if (ok) {
        double n_tok = (double)(r->n_prompt + r->n_gen), s_ns = 0, s_ts = 0;
        for (long long i = 0; i < o->reps; i++) s_ns += ns[i], s_ts += n_tok * 1e9 / ns[i];
        r->avg_ns = s_ns / (double)o->reps;
        r->avg_ts = s_ts / (double)o->reps;
        double v_ns = 0, v_ts = 0;
        for (long long i = 0; i < o->reps; i++) {
            v_ns += (ns[i] - r->avg_ns) * (ns[i] - r->avg_ns);
            double ts = n_tok * 1e9 / ns[i];
            v_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
        }
        r->stddev_ns = o->reps > 1 ? sqrt(v_ns / (double)(o->reps - 1)) : 0;
        r->stddev_ts = o->reps > 1 ? sqrt(v_ts / (double)(o->reps - 1)) : 0;
        r->samples_ns = ns;
        r->n_samples = o->reps;
        return true;
    }
    free(ns);
    return false;
}

/* The tests of the command line, in order: every -p, every -n, every -pg (prompt, generated). */
static int n_tests(const struct bench_opts * o) { return o->n_prompts + o->n_gens + o->n_pgs; }

static void test_at(const struct bench_opts * o, int i, long long * n_prompt, long long * n_gen) {
    *n_prompt = *n_gen = 0;
    if (i < o->n_prompts) *n_prompt = o->prompts[i];
    else if (i < o->n_prompts + o->n_gens) *n_gen = o->gens[i - o->n_prompts];
    else {
        *n_prompt = o->pgs[i - o->n_prompts - o->n_gens][0];
        *n_gen = o->pgs[i - o->n_prompts - o->n_gens][1];
    }
}

/* The largest depth, the most tokens one test puts in the cache (at least 1) and the longest
 * token array a run needs (a prompt plus one, or a depth's fill), over the runs 'o' asks for. */
static void bench_extents(const struct bench_opts * o, long long * max_depth, long long * max_test, long long * max_tok) {
    *max_depth = 0, *max_test = 1, *max_tok = 1;
    for (int i = 0; i < o->n_depths; i++) *max_depth = o->depths[i] > *max_depth ? o->depths[i] : *max_depth;
    for (int i = 0; i < n_tests(o); i++) {
        long long np, ng;
        test_at(o, i, &np, &ng);
        *max_test = np + ng > *max_test ? np + ng : *max_test;
        *max_tok = np + 1 > *max_tok ? np + 1 : *max_tok;
    }
    *max_tok = *max_depth > *max_tok ? *max_depth : *max_tok;
}

/* Every test at every depth for one configuration of the context (one context: its cache is
 * sized for the largest depth plus the longest test). Prints the rows; false after a reported failure. */
static bool bench_context(const struct bench_opts * o, struct loom_model * model, const char * path, long long ngl, bool use_mmap,
                          struct loom_llama_context_params cp, bool * first) {
    long long max_depth, max_test, max_tok;
    bench_extents(o, &max_depth, &max_test, &max_tok);
    if (max_depth + max_test > (1 << 24)) {
        fprintf(stderr, "loom bench: a depth of %lld and a test of %lld tokens need more than 2^24 cells\n", max_depth, max_test);
        return false;
    }
    cp.n_ctx = (int32_t)(max_depth + max_test);
    int32_t * toks = malloc((size_t)max_tok * sizeof *toks);
    struct loom_llama_context * lctx = NULL;
    const enum loom_status cst = toks ? loom_llama_context_new(model, cp, &lctx) : LOOM_ERR_OOM;
    if (cst != LOOM_OK) {
        cli_hint_last_error(cst, "use a smaller -p, -n or -d");
        fprintf(stderr, "loom bench: %s\n", cli_last_error(toks ? "cannot create the context" : "out of memory"));
        free(toks);
        return false;
    }
    bool ok = true;
    for (int di = 0; di < o->n_depths && ok; di++) {
        for (int i = 0; i < n_tests(o) && ok; i++) {
            struct bench_result r = {.model_path = path, .size = loom_model_size(model), .n_params = loom_model_n_params(model),
                                     .n_threads = cp.n_threads, .n_gpu_layers = ngl, .n_batch = cp.n_batch,
                                     .n_depth = o->depths[di], .flash_attn = cp.flash_attn == LOOM_LLAMA_FLASH_ATTN_ON,
                                     .type_k = cp.type_k, .type_v = cp.type_v, .use_mmap = use_mmap};
            snprintf(r.desc, sizeof r.desc, "%s", loom_model_desc(model));
            /* several devices: the split mode after the names ("CUDA0+CUDA1+CPU/row") */
            snprintf(r.backend, sizeof r.backend, "%s%s%s", loom_model_backend_name(model), loom_model_n_devices(model) > 1 ? "/" : "",
                     loom_model_n_devices(model) > 1 ? loom_split_mode_name(loom_model_split_mode(model)) : "");
            test_at(o, i, &r.n_prompt, &r.n_gen);
            if (r.n_prompt == 0 && r.n_gen == 0) continue;
            ok = bench_test(o, lctx, &r, toks, loom_model_hparams(model)->n_vocab);
            if (!ok) {
                fprintf(stderr, "loom bench: %s\n", cli_last_error("the run failed"));
                break;
            }
            print_result(o, &r, *first);
            free(r.samples_ns);
            *first = false;
        }
    }
    loom_llama_context_free(lctx);
    free(toks);
    return ok;
}

/* Every combination of threads, batch size, flash attention and cache types for one loaded model;
 * a combination no context can have (a V cache of a block type without flash attention) is
 * skipped with one line on stderr, and counted in *n_skipped. */
static bool bench_model(const struct bench_opts * o, struct loom_model * model, const char * path, long long ngl, bool use_mmap,
                        bool * first, int * n_skipped) {
    for (int ti = 0; ti < o->n_threads; ti++)
        for (int bi = 0; bi < o->n_batches; bi++)
            for (int fi = 0; fi < o->n_fas; fi++)
                for (int ki = 0; ki < o->n_types_k; ki++)
                    for (int vi = 0; vi < o->n_types_v; vi++) {
                        struct loom_llama_context_params cp = loom_llama_context_default_params();
                        cp.n_batch = (int32_t)o->batches[bi];
                        cp.n_ubatch = (int32_t)o->n_ubatch;
                        cp.n_threads = (int32_t)o->threads[ti];
                        cp.flash_attn = o->fas[fi] ? LOOM_LLAMA_FLASH_ATTN_ON : LOOM_LLAMA_FLASH_ATTN_OFF;
                        cp.type_k = o->types_k[ki];
                        cp.type_v = o->types_v[vi];
                        if (!o->fas[fi] && loom_blck_size(cp.type_v) > 1) {
                            fprintf(stderr, "loom bench: skipped -fa 0 -ctv %s: a V cache of a block type needs -fa 1\n",
                                    loom_type_name(cp.type_v));
                            (*n_skipped)++;
                            continue;
                        }
                        if (!bench_context(o, model, path, ngl, use_mmap, cp, first)) return false;
                    }
    return true;
}

/* -ngl auto: the layers that fit with the largest context and batch the runs ask for (the first
 * cache types, which the table's other rows may exceed), 1024 MiB left free. */
static bool fit_auto(const struct bench_opts * o, struct loom_model_file * file, struct loom_model_params * mp) {
    long long max_depth, max_test, max_tok, max_batch = 1;
    bench_extents(o, &max_depth, &max_test, &max_tok);
    for (int i = 0; i < o->n_batches; i++) max_batch = o->batches[i] > max_batch ? o->batches[i] : max_batch;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = (int32_t)(max_depth + max_test < (1 << 24) ? max_depth + max_test : 1 << 24);
    cp.n_batch = (int32_t)max_batch;
    cp.n_ubatch = (int32_t)o->n_ubatch;
    cp.type_k = o->types_k[0];
    cp.type_v = o->types_v[0];
    return cli_fit_layers(file, mp, cp, 1024);
}

/* Frees the opened model files; returns 'rc'. */
static int bench_files_free(struct loom_model_file ** files, int n, int rc) {
    for (int i = 0; i < n; i++) loom_model_file_free(files[i]);
    return rc;
}

int loom_cmd_bench(int argc, char ** argv) {
    struct bench_opts o;
    bool help = false;
    if (!parse(argc, argv, &o, &help)) return 1;
    if (help) {
        usage(stdout);
        return cli_stdout_ok("bench") ? 0 : 1;
    }
    cli_log_setup(LOOM_LOG_WARN);
    bool any = false;
    for (int i = 0; i < o.n_prompts; i++) any = any || o.prompts[i] > 0;
    for (int i = 0; i < o.n_gens; i++) any = any || o.gens[i] > 0;
    for (int i = 0; i < o.n_pgs; i++) any = any || o.pgs[i][0] + o.pgs[i][1] > 0;
    if (!any) {
        fprintf(stderr, "loom bench: nothing to measure (-p, -n and -pg are all 0)\n");
        return 1;
    }
    bool any_valid = false; /* some -fa / -ctv pair a context can have */
    for (int fi = 0; fi < o.n_fas; fi++)
        for (int vi = 0; vi < o.n_types_v; vi++) any_valid = any_valid || o.fas[fi] || loom_blck_size(o.types_v[vi]) == 1;
    if (!any_valid) {
        fprintf(stderr, "loom bench: -ctv %s needs -fa 1 (a V cache of a block type is read by flash attention only)\n",
                loom_type_name(o.types_v[0]));
        return 1;
    }
    /* every file opened and parsed once, before anything is measured; the weights load per -ngl value */
    struct loom_model_file * files[MAX_LIST] = {NULL};
    for (int mi = 0; mi < o.n_models; mi++) {
        if (loom_model_file_open(o.models[mi], &files[mi]) != LOOM_OK) {
            const char * why = cli_last_error("cannot read the model");
            if (strstr(why, o.models[mi])) fprintf(stderr, "loom bench: %s\n", why); /* the message names the file */
            else fprintf(stderr, "loom bench: %s: %s\n", o.models[mi], why);
            return bench_files_free(files, o.n_models, 1);
        }
    }
    /* a cache type a model's heads cannot hold is refused before the table starts (no context could
     * run with it; the library would refuse each such context) */
    for (int mi = 0; mi < o.n_models; mi++) {
        const struct loom_hparams * hp = loom_model_file_hparams(files[mi]);
        const int64_t head_dim = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0;
        for (int kv = 0; kv < 2; kv++) {
            const enum loom_type * types = kv ? o.types_v : o.types_k;
            for (int i = 0; i < (kv ? o.n_types_v : o.n_types_k); i++) {
                const int64_t blck = loom_blck_size(types[i]);
                if (head_dim % blck == 0) continue;
                fprintf(stderr, "loom bench: %s: KV cache type %s for %s needs heads of a multiple of %lld elements; this model's have %lld\n",
                        o.models[mi], loom_type_name(types[i]), kv ? "V" : "K", (long long)blck, (long long)head_dim);
                return bench_files_free(files, o.n_models, 1);
            }
        }
    }
    print_header(&o);
    bool first = true;
    int n_skipped = 0; /* the combinations bench_model skipped (each said so) */
    for (int mi = 0; mi < o.n_models; mi++) {
        for (int gi = 0; gi < o.n_ngls * o.n_mmaps; gi++) { /* every -ngl value with every -mmp value: one load each */
            struct loom_model_params mp = loom_model_default_params();
            mp.n_gpu_layers = (int)o.ngls[gi / o.n_mmaps];
            mp.device = o.device;
            mp.use_mmap = o.mmaps[gi % o.n_mmaps] != 0;
            cli_split_apply(&o.split, &mp);
            struct loom_model * model = NULL;
            if (mp.n_gpu_layers == CLI_NGL_AUTO && !fit_auto(&o, files[mi], &mp)) {
                fprintf(stderr, "loom bench: %s\n", cli_last_error("cannot measure what fits on the device"));
                return bench_files_free(files, o.n_models, 1);
            }
            if (loom_model_load_file(files[mi], mp, &model) != LOOM_OK) {
                fprintf(stderr, "loom bench: %s\n", cli_last_error("cannot load the model"));
                return bench_files_free(files, o.n_models, 1);
            }
            const long long ngl = strcmp(loom_model_backend_name(model), "CPU") ? mp.n_gpu_layers : 0; /* nothing offloaded: label 0 */
            const bool ok = bench_model(&o, model, o.models[mi], ngl, mp.use_mmap, &first, &n_skipped);
            loom_model_free(model);
            if (!ok) return bench_files_free(files, o.n_models, 1);
        }
    }
    bench_files_free(files, o.n_models, 0);
    if (o.output == OUT_JSON) printf("\n]\n");
    return cli_stdout_ok("bench") ? 0 : 1;
}
