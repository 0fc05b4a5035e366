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
    long long depths[MAX_LIST], mmaps[MAX_LIST];
    int n_depths, n_mmaps;
    enum loom_llama_flash_attn fas[MAX_LIST];
    int n_fas;
    enum loom_type types_k[MAX_LIST], types_v[MAX_LIST];
    int n_types_k, n_types_v;
    long long reps, n_ubatch;
    const char * device;
    struct cli_split split;
    enum { OUT_MD, OUT_JSON, OUT_JSONL, OUT_CSV } output;
    bool progress;
};

/* One load of a model: its file, the layers offloaded (with -ngl auto: the count it chose; 0 when
 * nothing could be offloaded) and whether the weights are mapped. */
struct bench_load {
    const char * path;
    long long ngl;
    bool ngl_auto, use_mmap;
};

struct bench_result {
    const char * model_path;
    char desc[64];
    uint64_t size, n_params;
    char backend[LOOM_MAX_DEVICES * 24 + 16];
    long long n_threads, n_gpu_layers, n_batch, n_ubatch, n_prompt, n_gen, n_depth; /* n_ubatch: -ub, 0 when not given (auto) */
    bool ngl_auto, use_mmap;
    enum loom_llama_flash_attn fa_mode;  /* as asked */
    int32_t n_fa_layers, n_layer;        /* the layers whose attention ran fused, of all */
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
            "  -ngl, --n-gpu-layers N[,N...]  layers offloaded (default 0; auto: as many as the device's free memory\n"
            "                            holds, shown as auto (N) with the count it chose)\n"
            "  -pg PP,TG                 a prompt of PP tokens, then TG generated, timed together (may repeat)\n"
            "  -d, --n-depth N[,N...]    tokens already in the KV cache before every test (default 0)\n"
            "  -b, --batch-size N[,N...] prompt batch size (default 512)\n"
            "  -fa, --flash-attn on|off|auto[,...]  fused attention (or 1|0|-1; default off, as llama-bench's, where\n"
            "                            loom run's is auto); auto: in the layers whose device has the op, as loom run;\n"
            "                            shown as auto (1), auto (0) or auto (K/N)\n"
            "  -ctk, --cache-type-k T[,T...]  KV cache type of K: f32, f16 (default), bf16, q8_0, q4_0\n"
            "  -ctv, --cache-type-v T[,T...]  KV cache type of V: the same (q8_0, q4_0: with -fa on or auto)\n"
            "  -mmp, --mmap 0|1[,...]    map the model file (1, default) or read it into buffers (0)\n"
            "  -dev, --device NAME[,NAME...]  offload devices (default: every GPU or sim device)\n"
            CLI_SPLIT_HELP
            "  -ub, --ubatch-size N      tokens per micro-batch of a pipelined prompt (-sm layer; default auto)\n"
            "  -o, --output md|json|jsonl|csv  output format (default md; jsonl: one JSON object per line)\n"
            "      --progress            progress lines on stderr (default: when stderr is a terminal)\n"
            "\n"
            "A list option takes comma-separated values or is given several times (-p 16 -p 32 is -p 16,32;\n"
            "at most 16 values in all); every combination of the lists is measured. -r, -ub, -dev, -sm, -ts\n"
            "and -mg take one value (the last one given). A configuration that cannot run (a cache type the\n"
            "model's heads cannot hold, a KV cache that does not fit) is one line on stderr; the other rows\n"
            "are measured, and the exit status is then 1.\n"
            "\n" CLI_LONG_OPTION_HELP);
}

/* Adds the 'k' values of 'v' to a list of *n (a list option given again adds to it, as the
 * field's bench does); false (reported) past MAX_LIST values in all. */
static bool list_add(const char * opt, void * list, int * n, const void * v, int k, size_t elem) {
    if (*n + k > MAX_LIST) return fprintf(stderr, "loom bench: too many values for %s (at most %d in all)\n", opt, MAX_LIST), false;
    memcpy((char *)list + (size_t)*n * elem, v, (size_t)k * elem);
    *n += k;
    return true;
}

/* The comma list 'arg' of numbers in [lo, hi] (with 'ngl' -ngl's values: counts or auto) added to 'list'. */
static bool add_ints(const char * opt, const char * arg, long long lo, long long hi, bool ngl, long long * list, int * n) {
    long long v[MAX_LIST];
    const int k = ngl ? cli_parse_ngl_list("bench", arg, v, MAX_LIST) : cli_parse_int_list("bench", opt, arg, lo, hi, v, MAX_LIST);
    return k >= 0 && list_add(opt, list, n, v, k, sizeof *v);
}

struct name_list {
    const char * opt;
    bool fa;
    enum loom_type types[MAX_LIST];
    enum loom_llama_flash_attn modes[MAX_LIST];
};

static bool name_item(void * ctx, int i, const char * s) {
    struct name_list * l = ctx;
    return l->fa ? cli_parse_flash_attn("bench", l->opt, s, &l->modes[i]) : cli_parse_cache_type("bench", l->opt, s, &l->types[i]);
}

/* The comma list 'arg' of cache types (-ctk, -ctv) or flash-attention modes (-fa) added to 'list'
 * (enum loom_type or enum loom_llama_flash_attn). */
static bool add_names(const char * opt, const char * arg, bool fa, void * list, int * n) {
    struct name_list l = {.opt = opt, .fa = fa};
    const int k = cli_parse_list("bench", opt, arg, MAX_LIST, name_item, &l);
    if (k < 0) return false;
    return fa ? list_add(opt, list, n, l.modes, k, sizeof *l.modes) : list_add(opt, list, n, l.types, k, sizeof *l.types);
}

/* -m's value added to 'models': a comma list of files, as the field's tool splits it, unless the
 * whole value names a file (a path with a comma in it). The commas of 'arg' (argv's storage) are
 * overwritten by the NULs that end the names. */
static bool add_models(char * arg, struct bench_opts * o) {
    if (!strchr(arg, ',') || access(arg, F_OK) == 0) return list_add("-m", o->models, &o->n_models, &arg, 1, sizeof arg);
    const char * names[MAX_LIST];
    int k = 0;
    for (char * p = arg; p; k++) {
        char * comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (!*p || k >= MAX_LIST) {
            fprintf(stderr, "loom bench: invalid list of models for -m (an empty name, or more than %d)\n", MAX_LIST);
            return false;
        }
        names[k] = p;
        p = comma ? comma + 1 : NULL;
    }
    return list_add("-m", o->models, &o->n_models, names, k, sizeof *names);
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
    /* the lists start empty and get their defaults after parsing, so that a value given replaces
     * the default and a value given again adds to the first */
    *o = (struct bench_opts){.reps = 5, .output = OUT_MD, .progress = isatty(STDERR_FILENO)};
    cli_split_init(&o->split);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:n:r:t:b:o:d:h", opts)) != -1) {
        bool ok = true;
        switch (c) {
        case 'm': ok = add_models(optarg, o); break;
        case 'p': ok = add_ints("-p", optarg, 0, 1 << 20, false, o->prompts, &o->n_prompts); break;
        case 'n': ok = add_ints("-n", optarg, 0, 1 << 20, false, o->gens, &o->n_gens); break;
        case 't': ok = add_ints("-t", optarg, 1, 1024, false, o->threads, &o->n_threads); break;
        case 'g': ok = add_ints("-ngl", optarg, 0, 0, true, o->ngls, &o->n_ngls); break;
        case 'b': ok = add_ints("-b", optarg, 1, 1 << 20, false, o->batches, &o->n_batches); break;
        case 'M': ok = add_ints("-mmp", optarg, 0, 1, false, o->mmaps, &o->n_mmaps); break;
        case 'd': ok = add_ints("-d", optarg, 0, 1 << 20, false, o->depths, &o->n_depths); break;
        case 'F':
            if (optarg[0] == '-' && !(optarg[1] >= '0' && optarg[1] <= '9')) { /* "-fa -p 8": -fa's list left out */
                cli_flash_attn_needs_value("bench", cli_option_text(), optarg);
                return false;
            }
            ok = add_names("-fa", optarg, true, o->fas, &o->n_fas);
            break;
        case 'K': ok = add_names("-ctk", optarg, false, o->types_k, &o->n_types_k); break;
        case 'V': ok = add_names("-ctv", optarg, false, o->types_v, &o->n_types_v); break;
        case 'r': ok = cli_parse_int("bench", "-r", optarg, 1, 1000, &o->reps); break;
        case 'G': {
            long long pair[2];
            const int n = cli_parse_int_list("bench", "-pg", optarg, 0, 1 << 20, pair, 2);
            if (n < 0) return false; /* reported */
            if (n != 2) return fprintf(stderr, "loom bench: -pg takes PROMPT,GENERATED (e.g. -pg 512,128), not '%s'\n", optarg), false;
            ok = list_add("-pg", o->pgs, &o->n_pgs, pair, 1, sizeof pair);
            break;
        }
        case 'o':
            if (!strcmp(optarg, "md")) o->output = OUT_MD;
            else if (!strcmp(optarg, "json")) o->output = OUT_JSON;
            else if (!strcmp(optarg, "jsonl")) o->output = OUT_JSONL;
            else if (!strcmp(optarg, "csv")) o->output = OUT_CSV;
            else if (!strcmp(optarg, "sql")) return fprintf(stderr, "loom bench: -o sql is not supported (md, json, jsonl or csv)\n"), false;
            else return fprintf(stderr, "loom bench: invalid value '%s' for -o (md, json, jsonl or csv)\n", optarg), false;
            break;
        case 'P': o->progress = true; break;
        case 'D': o->device = optarg; break;
        case 'U': ok = cli_parse_int("bench", "-ub", optarg, 1, 1 << 20, &o->n_ubatch); break;
        case CLI_OPT_SPLIT_MODE:
        case CLI_OPT_TENSOR_SPLIT:
        case CLI_OPT_MAIN_GPU: ok = cli_split_option("bench", c, optarg, &o->split); break;
        case 'h': *help = true; return true;
        default: /* ':' or '?' */
            if (c == ':' && (!strcmp(cli_option_text(), "-fa") || !strcmp(cli_option_text(), "--flash-attn"))) {
                cli_flash_attn_needs_value("bench", cli_option_text(), NULL); /* llama-bench's -fa takes a value: a last bare -fa */
            } else {
                cli_option_error("bench", c);
            }
            return false;
        }
        if (!ok) return false; /* reported */
    }
    if (!cli_no_more_args("bench", argc, argv)) return false;
    if (o->device && !cli_check_devices("bench", o->device)) return false;
    /* the defaults of the lists not given */
    if (!o->n_prompts) o->prompts[o->n_prompts++] = 512;
    if (!o->n_gens) o->gens[o->n_gens++] = 128;
    if (!o->n_threads) o->threads[o->n_threads++] = 0; /* LOOM_N_THREADS, else every CPU */
    if (!o->n_ngls) o->ngls[o->n_ngls++] = 0;
    if (!o->n_batches) o->batches[o->n_batches++] = 512;
    if (!o->n_mmaps) o->mmaps[o->n_mmaps++] = 1;
    if (!o->n_depths) o->depths[o->n_depths++] = 0;
    if (!o->n_fas) o->fas[o->n_fas++] = LOOM_LLAMA_FLASH_ATTN_OFF; /* llama-bench's default (loom run's is auto) */
    if (!o->n_types_k) o->types_k[o->n_types_k++] = LOOM_TYPE_F16;
    if (!o->n_types_v) o->types_v[o->n_types_v++] = LOOM_TYPE_F16;
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

/* ... and an n_batch column where -b is not the default (512 alone). */
static bool md_batch(const struct bench_opts * o) { return o->n_batches > 1 || o->batches[0] != 512; }

/* 's' as a CSV field: in double quotes, a double quote in it doubled (RFC 4180). */
static void csv_str(const char * s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* Whether the attention was fused in every layer (the flash_attn field of JSON and CSV). */
static bool fa_all(const struct bench_result * r) { return r->n_fa_layers == r->n_layer; }

/* The md table's fa value: 0 or 1 as asked; for auto what it chose, "auto (1)", "auto (0)" or
 * "auto (3/8)" with some layers fused. */
static void fa_label(const struct bench_result * r, char * buf, size_t size) {
    if (r->fa_mode != LOOM_LLAMA_FLASH_ATTN_AUTO) snprintf(buf, size, "%d", r->fa_mode == LOOM_LLAMA_FLASH_ATTN_ON);
    else if (r->n_fa_layers == 0 || fa_all(r)) snprintf(buf, size, "auto (%d)", fa_all(r));
    else snprintf(buf, size, "auto (%d/%d)", (int)r->n_fa_layers, (int)r->n_layer);
}

static void print_header(const struct bench_opts * o) {
    if (o->output == OUT_MD) {
        printf("| model | size | params | backend | threads |%s ngl | fa | type_k | type_v |%s test | t/s |\n", md_batch(o) ? " n_batch |" : "",
               md_mmap(o) ? " mmap |" : "");
        printf("| --- | ---: | ---: | --- | ---: |%s ---: | ---: | --- | --- |%s ---: | ---: |\n", md_batch(o) ? " ---: |" : "", md_mmap(o) ? " ---: |" : "");
    } else if (o->output == OUT_CSV) {
        printf("model_filename,model_type,model_size,model_n_params,backends,n_threads,n_gpu_layers,n_batch,n_ubatch,type_k,type_v,"
               "flash_attn,use_mmap,n_prompt,n_gen,n_depth,avg_ns,stddev_ns,avg_ts,stddev_ts\n");
    } else if (o->output == OUT_JSON) {
        printf("[\n");
    }
}

/* What follows the last row, also after a failure, so that the output stays whole: the JSON
 * array's end. */
static void print_footer(const struct bench_opts * o) {
    if (o->output == OUT_JSON) printf("\n]\n");
    cli_flush();
}

static void print_result(const struct bench_opts * o, const struct bench_result * r, bool first) {
    if (o->output == OUT_MD) {
        char test[64], mmap[16] = "", batch[32] = "", ngl[32], fa[32];
        test_name(r, test, sizeof test);
        if (md_mmap(o)) snprintf(mmap, sizeof mmap, " %d |", r->use_mmap);
        if (md_batch(o)) snprintf(batch, sizeof batch, " %lld |", r->n_batch);
        if (r->ngl_auto) snprintf(ngl, sizeof ngl, "auto (%lld)", r->n_gpu_layers);
        else snprintf(ngl, sizeof ngl, "%lld", r->n_gpu_layers);
        fa_label(r, fa, sizeof fa);
        printf("| %s | %.2f MiB | %.2f M | %s | %lld |%s %s | %s | %s | %s |%s %s | %.2f ± %.2f |\n", r->desc, r->size / 1048576.0,
               r->n_params / 1e6, r->backend, r->n_threads, batch, ngl, fa, loom_type_name(r->type_k),
               loom_type_name(r->type_v), mmap, test, r->avg_ts, r->stddev_ts);
    } else if (o->output == OUT_CSV) {
        csv_str(r->model_path);
        putchar(',');
        csv_str(r->desc);
        printf(",%llu,%llu,", (unsigned long long)r->size, (unsigned long long)r->n_params);
        csv_str(r->backend);
        printf(",%lld,%lld,%lld,%lld,\"%s\",\"%s\",%d,%d,%lld,%lld,%lld,%.0f,%.0f,%.6f,%.6f\n", r->n_threads, r->n_gpu_layers, r->n_batch,
               r->n_ubatch, loom_type_name(r->type_k), loom_type_name(r->type_v), fa_all(r), r->use_mmap, r->n_prompt, r->n_gen,
               r->n_depth, r->avg_ns, r->stddev_ns, r->avg_ts, r->stddev_ts);
    } else { /* JSON: the array's elements; JSONL: one object a line */
        printf("%s{\"model_filename\": \"", o->output == OUT_JSONL ? "" : first ? "  " : ",\n  ");
        for (const char * c = r->model_path; *c; c++) {
            if (*c == '"' || *c == '\\') printf("\\%c", *c);
            else if ((unsigned char)*c < 0x20) printf("\\u%04x", *c);
            else putchar(*c);
        }
        printf("\", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"backends\": \"%s\", "
               "\"n_threads\": %lld, \"n_gpu_layers\": %lld, \"n_batch\": %lld, \"n_ubatch\": %lld, \"type_k\": \"%s\", \"type_v\": \"%s\", "
               "\"flash_attn\": %s, \"use_mmap\": %s, \"n_prompt\": %lld, \"n_gen\": %lld, \"n_depth\": %lld, "
               "\"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ns\": [",
               r->desc, (unsigned long long)r->size, (unsigned long long)r->n_params, r->backend, r->n_threads,
               r->n_gpu_layers, r->n_batch, r->n_ubatch, loom_type_name(r->type_k), loom_type_name(r->type_v),
               fa_all(r) ? "true" : "false", r->use_mmap ? "true" : "false", r->n_prompt, r->n_gen, r->n_depth, r->avg_ns, r->stddev_ns, r->avg_ts,
               r->stddev_ts);
        const double n_tok = (double)(r->n_prompt + r->n_gen);
        for (long long i = 0; i < r->n_samples; i++) printf("%s%.0f", i ? ", " : "", r->samples_ns[i]);
        printf("], \"samples_ts\": [");
        for (long long i = 0; i < r->n_samples; i++) printf("%s%.6f", i ? ", " : "", n_tok * 1e9 / r->samples_ns[i]);
        printf("]}%s", o->output == OUT_JSONL ? "\n" : "");
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
            fprintf(stderr, "bench: %s %s, t %lld, ngl %s%lld, fa %s: run %lld/%lld\n", r->desc, test, r->n_threads,
                    r->ngl_auto ? "auto " : "", r->n_gpu_layers, cli_flash_attn_name(r->fa_mode), i + 1, o->reps);
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

/* The one line of a load (one -ngl value with one -mmp value) that failed: the model, that
 * configuration and the library's reason; its rows are skipped, the bench goes on with the next. */
static void load_error(const struct bench_load * ld, long long ngl, const char * fallback) {
    char conf[48];
    if (ld->ngl_auto) snprintf(conf, sizeof conf, "-ngl auto -mmp %d", ld->use_mmap);
    else snprintf(conf, sizeof conf, "-ngl %lld -mmp %d", ngl, ld->use_mmap);
    const char * why = cli_last_error(fallback);
    cli_flush(); /* the rows before it first, where stdout and stderr are one terminal */
    fprintf(stderr, "loom bench: %s: %s: %s (skipped)\n", ld->path, conf, why);
}

/* The configuration of a context as bench's options spell it ("-t 2 -b 512 -fa on -ctk q8_0 -ctv f16",
 * -ngl and -mmp first where their lists have more than one value), for the line of a failed row. */
static void config_text(const struct bench_opts * o, const struct bench_load * ld, const struct loom_llama_context_params * cp,
                        char * buf, size_t size) {
    char ngl[48] = "", mmp[16] = "";
    if (o->n_ngls > 1) snprintf(ngl, sizeof ngl, ld->ngl_auto ? "-ngl auto " : "-ngl %lld ", ld->ngl);
    if (o->n_mmaps > 1) snprintf(mmp, sizeof mmp, "-mmp %d ", ld->use_mmap);
    snprintf(buf, size, "%s%s-t %d -b %d -fa %s -ctk %s -ctv %s", ngl, mmp, (int)cp->n_threads, (int)cp->n_batch,
             cli_flash_attn_name(cp->flash_attn), loom_type_name(cp->type_k), loom_type_name(cp->type_v));
}

/* The one line of a row that could not be measured: the model, the test (NULL: every test of the
 * configuration), the configuration and the library's reason; the bench goes on with the next. */
static void row_error(const struct bench_opts * o, const struct bench_load * ld, const struct loom_llama_context_params * cp,
                      const char * test, const char * fallback) {
    char conf[160];
    config_text(o, ld, cp, conf, sizeof conf);
    cli_flush(); /* the rows before it first, where stdout and stderr are one terminal */
    fprintf(stderr, "loom bench: %s: %s%s%s: %s (skipped)\n", ld->path, test ? test : "", test ? " with " : "", conf, cli_last_error(fallback));
}

/* Every test at every depth for one configuration of the context (one context: its cache is
 * sized for the largest depth plus the longest test). Prints the rows, and one line for each row
 * that fails (a context the library refuses: every row of the configuration); false when any did. */
static bool bench_context(const struct bench_opts * o, struct loom_model * model, const struct bench_load * ld,
                          struct loom_llama_context_params cp, bool * first) {
    long long max_depth, max_test, max_tok;
    bench_extents(o, &max_depth, &max_test, &max_tok);
    cp.n_ctx = (int32_t)(max_depth + max_test); /* at most 2^24: bench_check */
    int32_t * toks = malloc((size_t)max_tok * sizeof *toks);
    struct loom_llama_context * lctx = NULL;
    const enum loom_status cst = toks ? loom_llama_context_new(model, cp, &lctx) : LOOM_ERR_OOM;
    if (cst != LOOM_OK) {
        cli_hint_last_error(cst, "use a smaller -p, -n or -d");
        row_error(o, ld, &cp, NULL, toks ? "cannot create the context" : "out of memory");
        free(toks);
        return false;
    }
    bool ok = true;
    for (int di = 0; di < o->n_depths; di++) {
        for (int i = 0; i < n_tests(o); i++) {
            struct bench_result r = {.model_path = ld->path, .size = loom_model_size(model), .n_params = loom_model_n_params(model),
                                     .n_threads = cp.n_threads, .n_gpu_layers = ld->ngl, .ngl_auto = ld->ngl_auto,
                                     .n_batch = cp.n_batch, .n_ubatch = cp.n_ubatch, .n_depth = o->depths[di], .fa_mode = cp.flash_attn,
                                     .n_fa_layers = loom_llama_n_flash_attn_layers(lctx), .n_layer = loom_model_hparams(model)->n_layer,
                                     .type_k = cp.type_k, .type_v = cp.type_v, .use_mmap = ld->use_mmap};
            snprintf(r.desc, sizeof r.desc, "%s", loom_model_desc(model));
            /* several devices: the split mode after the names ("CUDA0+CUDA1+CPU/row") */
            snprintf(r.backend, sizeof r.backend, "%s%s%s", loom_model_backend_name(model), loom_model_n_devices(model) > 1 ? "/" : "",
                     loom_model_n_devices(model) > 1 ? loom_split_mode_name(loom_model_split_mode(model)) : "");
            test_at(o, i, &r.n_prompt, &r.n_gen);
            if (r.n_prompt == 0 && r.n_gen == 0) continue;
            if (!bench_test(o, lctx, &r, toks, loom_model_hparams(model)->n_vocab)) {
                char test[64];
                test_name(&r, test, sizeof test);
                row_error(o, ld, &cp, test, "the run failed");
                ok = false;
                continue; /* each run starts from an empty cache: the next test may still run */
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

/* Whether a context can have -fa 'fa' with a V cache of 'type_v': a block type is read by the
 * fused attention only (with auto the library decides, and refuses where it cannot fuse every layer). */
static bool fa_ctv_ok(enum loom_llama_flash_attn fa, enum loom_type type_v) {
    return fa != LOOM_LLAMA_FLASH_ATTN_OFF || loom_blck_size(type_v) == 1;
}

/* Every combination of threads, batch size, flash attention and cache types for one loaded model;
 * a combination no context can have (fa_ctv_ok; said once, before the table) is skipped. One that
 * fails (its line printed) does not stop the others; false when any failed. */
static bool bench_model(const struct bench_opts * o, struct loom_model * model, const struct bench_load * ld, bool * first) {
    bool ok = true;
    for (int ti = 0; ti < o->n_threads; ti++)
        for (int bi = 0; bi < o->n_batches; bi++)
            for (int fi = 0; fi < o->n_fas; fi++)
                for (int ki = 0; ki < o->n_types_k; ki++)
                    for (int vi = 0; vi < o->n_types_v; vi++) {
                        if (!fa_ctv_ok(o->fas[fi], o->types_v[vi])) continue;
                        struct loom_llama_context_params cp = loom_llama_context_default_params();
                        cp.n_batch = (int32_t)o->batches[bi];
                        cp.n_ubatch = (int32_t)o->n_ubatch;
                        cp.n_threads = (int32_t)o->threads[ti];
                        cp.flash_attn = o->fas[fi];
                        cp.type_k = o->types_k[ki];
                        cp.type_v = o->types_v[vi];
                        ok = bench_context(o, model, ld, cp, first) && ok;
                    }
    return ok;
}

/* Whether the heads of a model of 'hp' are whole blocks of cache type 'type' (a context with it can be made). */
static bool heads_hold(const struct loom_hparams * hp, enum loom_type type) {
    const int64_t head_dim = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0;
    return head_dim % loom_blck_size(type) == 0;
}

/* -ngl auto: the layers that fit with the largest context and batch the runs ask for (the first
 * cache types the model's heads hold, which the table's other rows may exceed), 1024 MiB left free. */
static bool fit_auto(const struct bench_opts * o, struct loom_model_file * file, struct loom_model_params * mp) {
    long long max_depth, max_test, max_tok, max_batch = 1;
    bench_extents(o, &max_depth, &max_test, &max_tok);
    for (int i = 0; i < o->n_batches; i++) max_batch = o->batches[i] > max_batch ? o->batches[i] : max_batch;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = (int32_t)(max_depth + max_test < (1 << 24) ? max_depth + max_test : 1 << 24);
    cp.n_batch = (int32_t)max_batch;
    cp.n_ubatch = (int32_t)o->n_ubatch;
    const struct loom_hparams * hp = loom_model_file_hparams(file);
    cp.type_k = o->types_k[0];
    cp.type_v = o->types_v[0];
    for (int i = o->n_types_k - 1; i >= 0; i--) cp.type_k = heads_hold(hp, o->types_k[i]) ? o->types_k[i] : cp.type_k;
    for (int i = o->n_types_v - 1; i >= 0; i--) cp.type_v = heads_hold(hp, o->types_v[i]) ? o->types_v[i] : cp.type_v;
    return cli_fit_layers(file, mp, cp, 1024);
}

/* Checks what can be refused before anything is measured: something to measure, a -fa / -ctv
 * pair some context can have (the pairs none can have named once each, as skipped), cache types
 * the models' heads can hold. False after the one error line. */
static bool bench_check(const struct bench_opts * o, struct loom_model_file * const * files) {
    bool any = false;
    for (int i = 0; i < o->n_prompts; i++) any = any || o->prompts[i] > 0;
    for (int i = 0; i < o->n_gens; i++) any = any || o->gens[i] > 0;
    for (int i = 0; i < o->n_pgs; i++) any = any || o->pgs[i][0] + o->pgs[i][1] > 0;
    if (!any) return fprintf(stderr, "loom bench: nothing to measure (-p, -n and -pg are all 0)\n"), false;
    bool any_valid = false, any_off = false;
    for (int fi = 0; fi < o->n_fas; fi++) {
        any_off = any_off || o->fas[fi] == LOOM_LLAMA_FLASH_ATTN_OFF;
        for (int vi = 0; vi < o->n_types_v; vi++) any_valid = any_valid || fa_ctv_ok(o->fas[fi], o->types_v[vi]);
    }
    if (!any_valid) {
        fprintf(stderr, "loom bench: -ctv %s needs -fa 1 or auto (a V cache of a block type is read by flash attention only)\n",
                loom_type_name(o->types_v[0]));
        return false;
    }
    for (int vi = 0; vi < o->n_types_v && any_off; vi++) {
        bool repeat = false; /* a type given twice is named once */
        for (int j = 0; j < vi; j++) repeat = repeat || o->types_v[j] == o->types_v[vi];
        if (repeat || fa_ctv_ok(LOOM_LLAMA_FLASH_ATTN_OFF, o->types_v[vi])) continue;
        fprintf(stderr, "loom bench: skipped -fa 0 -ctv %s (every configuration with both): a V cache of a block type needs -fa 1 or auto\n",
                loom_type_name(o->types_v[vi]));
    }
    long long max_depth, max_test, max_tok;
    bench_extents(o, &max_depth, &max_test, &max_tok);
    if (max_depth + max_test > (1 << 24)) {
        fprintf(stderr, "loom bench: a depth of %lld and a test of %lld tokens need more than 2^24 cells\n", max_depth, max_test);
        return false;
    }
    /* a cache type a model's heads cannot hold: the library refuses each context with it, and its
     * rows fail one by one (a line each, as they come); where that leaves no row of any model, the
     * command is refused at once, in one line */
    const char * why_model = NULL;
    enum loom_type why_type = LOOM_TYPE_F16;
    int why_kv = 0;
    for (int mi = 0; mi < o->n_models; mi++) {
        const struct loom_hparams * hp = loom_model_file_hparams(files[mi]);
        for (int fi = 0; fi < o->n_fas; fi++)
            for (int ki = 0; ki < o->n_types_k; ki++)
                for (int vi = 0; vi < o->n_types_v; vi++) {
                    if (!fa_ctv_ok(o->fas[fi], o->types_v[vi])) continue;
                    const bool k_ok = heads_hold(hp, o->types_k[ki]), v_ok = heads_hold(hp, o->types_v[vi]);
                    if (k_ok && v_ok) return true;
                    if (!why_model) why_model = o->models[mi], why_kv = k_ok, why_type = k_ok ? o->types_v[vi] : o->types_k[ki];
                }
    }
    const struct loom_hparams * hp = loom_model_file_hparams(files[0]);
    for (int mi = 0; mi < o->n_models; mi++) hp = o->models[mi] == why_model ? loom_model_file_hparams(files[mi]) : hp;
    fprintf(stderr, "loom bench: %s: KV cache type %s for %s needs heads of a multiple of %lld elements; this model's have %lld\n",
            why_model, loom_type_name(why_type), why_kv ? "V" : "K", (long long)loom_blck_size(why_type),
            (long long)(hp->n_head > 0 ? hp->n_embd / hp->n_head : 0));
    return false;
}

/* Every -ngl value with every -mmp value for model 'mi': one load each. A load that fails (its one
 * line printed) skips its rows, and the next goes on; false when any load or row failed. */
static bool bench_file(const struct bench_opts * o, int mi, struct loom_model_file * file, bool * first) {
    bool ok = true;
    for (int gi = 0; gi < o->n_ngls * o->n_mmaps; gi++) {
        struct loom_model_params mp = loom_model_default_params();
        mp.n_gpu_layers = (int)o->ngls[gi / o->n_mmaps];
        mp.device = o->device;
        mp.use_mmap = o->mmaps[gi % o->n_mmaps] != 0;
        cli_split_apply(&o->split, &mp);
        struct bench_load ld = {.path = o->models[mi], .ngl_auto = mp.n_gpu_layers == CLI_NGL_AUTO, .use_mmap = mp.use_mmap};
        if (ld.ngl_auto && !fit_auto(o, file, &mp)) {
            load_error(&ld, 0, "cannot measure what fits on the device");
            ok = false;
            continue;
        }
        struct loom_model * model = NULL;
        if (loom_model_load_file(file, mp, &model) != LOOM_OK) {
            load_error(&ld, mp.n_gpu_layers, "cannot load the model");
            ok = false;
            continue;
        }
        ld.ngl = strcmp(loom_model_backend_name(model), "CPU") ? mp.n_gpu_layers : 0; /* nothing offloaded: label 0 */
        ok = bench_model(o, model, &ld, first) && ok;
        loom_model_free(model);
    }
    return ok;
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
    /* every file opened and parsed once, before anything is measured; the weights load per -ngl value */
    struct loom_model_file * files[MAX_LIST] = {NULL};
    bool ok = true;
    for (int mi = 0; mi < o.n_models && ok; mi++) {
        ok = loom_model_file_open(o.models[mi], &files[mi]) == LOOM_OK;
        if (!ok) { /* nothing measured yet: the one line, naming the file */
            cli_name_last_error(o.models[mi], "cannot read the model");
            fprintf(stderr, "loom bench: %s\n", cli_last_error("cannot read the model"));
        }
    }
    ok = ok && bench_check(&o, files);
    if (ok) {
        print_header(&o);
        bool first = true;
        for (int mi = 0; mi < o.n_models; mi++) ok = bench_file(&o, mi, files[mi], &first) && ok; /* a failed row: the others still run */
        print_footer(&o); /* after a failure too: the rows printed stay a whole table, array or file */
    }
    for (int i = 0; i < o.n_models; i++) loom_model_file_free(files[i]);
    return ok && cli_stdout_ok("bench") ? 0 : 1;
}
