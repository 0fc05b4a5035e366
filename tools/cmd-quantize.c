/* cmd-quantize.c -- `loom quantize [options] IN.gguf OUT.gguf TYPE [NTHREADS]`: write a model in a quantized preset. */
#include "cli-util.h"
#include "commands.h"
#include "loom-convert.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom quantize [options] IN.gguf OUT.gguf TYPE [NTHREADS]\n"
            "  TYPE: %s,\n"
            "        Q3_K, Q4_K, Q5_K (the _M presets), or the field's number for a preset (15: Q4_K_M, 7: Q8_0, ...)\n"
            "  (the field's presets and per-tensor mixes; IN holds F32, F16 or BF16 weights; OUT must differ from IN;\n"
            "  IN is never written)\n"
            "options (before IN, as llama-quantize takes them):\n"
            "  --pure                      no mix: every weight in TYPE (rows that do not fit its blocks still fall back)\n"
            "  --allow-requantize          quantize tensors that are quantized already (they lose more quality)\n"
            "  --leave-output-tensor       keep output.weight as it is\n"
            "  --output-tensor-type T      the type of output.weight (q8_0, q6_K, f16, ...)\n"
            "  --token-embedding-type T    the type of token_embd.weight\n"
            "  -h, --help                  this help\n",
            loom_quantize_preset_names());
}

/* Whether 'v', the value of the type option 'opt', names a tensor type; else one line saying what it
 * is instead: without its value the option takes the next argument, another option or IN. */
static bool type_option(const char * opt, const char * v) {
    if (loom_quantize_tensor_type_known(v)) return true;
    const size_t n = strlen(v);
    const bool option = v[0] == '-' && v[1] && !(v[1] >= '0' && v[1] <= '9');
    const bool file = !option && ((n > 5 && !strcmp(v + n - 5, ".gguf")) || access(v, F_OK) == 0);
    if (option || file) {
        fprintf(stderr, "loom quantize: %s needs its value, a tensor type (one of %s), not the %s '%s'\n", opt,
                loom_quantize_tensor_type_names(), option ? "option" : "file", v);
    } else {
        fprintf(stderr, "loom quantize: unknown tensor type '%s' for %s (one of %s)\n", v, opt, loom_quantize_tensor_type_names());
    }
    return false;
}

static double mib(uint64_t b) { return (double)b / 1048576.0; }

struct totals {
    uint64_t in, out;
};

static void progress(void * user, int64_t i, int64_t n, const char * name, enum loom_type from, enum loom_type to,
                     uint64_t in_bytes, uint64_t out_bytes) {
    struct totals * t = user;
    t->in += in_bytes;
    t->out += out_bytes;
    if (!isatty(STDERR_FILENO)) return;
    fprintf(stderr, "[%4lld/%4lld] %-32s %-7s -> %-7s %8.2f MiB -> %8.2f MiB\n", (long long)i + 1, (long long)n, name,
            loom_type_name(from), loom_type_name(to), mib(in_bytes), mib(out_bytes));
}

int loom_cmd_quantize(int argc, char ** argv) {
    enum { O_PURE = 256, O_REQUANT, O_LEAVE_OUTPUT, O_OUTPUT_TYPE, O_EMBD_TYPE };
    static const struct option opts[] = {
        {"pure", no_argument, 0, O_PURE}, {"allow-requantize", no_argument, 0, O_REQUANT},
        {"leave-output-tensor", no_argument, 0, O_LEAVE_OUTPUT}, {"output-tensor-type", required_argument, 0, O_OUTPUT_TYPE},
        {"token-embedding-type", required_argument, 0, O_EMBD_TYPE}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    struct totals t = {0, 0};
    struct loom_quantize_params qp = {.progress = progress, .user = &t};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":h", opts)) != -1) { /* options come before the file names */
        switch (c) {
        case O_PURE: qp.pure = true; break;
        case O_REQUANT: qp.allow_requantize = true; break;
        case O_LEAVE_OUTPUT: qp.leave_output_tensor = true; break;
        case O_OUTPUT_TYPE:
            if (!type_option("--output-tensor-type", optarg)) return 1;
            qp.output_tensor_type = optarg;
            break;
        case O_EMBD_TYPE:
            if (!type_option("--token-embedding-type", optarg)) return 1;
            qp.token_embedding_type = optarg;
            break;
        case 'h': usage(stdout); return cli_stdout_ok("quantize") ? 0 : 1;
        default: cli_option_error("quantize", c); return 1;
        }
    }
    argc -= optind - 1, argv += optind - 1; /* argv[1] is IN */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] && !(argv[i][1] >= '0' && argv[i][1] <= '9')) {
            fprintf(stderr, "loom quantize: option '%s' after the file names: options come first (loom quantize [options] IN OUT TYPE)\n", argv[i]);
            return 1;
        }
    }
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "loom quantize: need IN.gguf OUT.gguf TYPE [NTHREADS] (see -h)\n");
        return 1;
    }
    const char * in = argv[1], * out = argv[2], * type = argv[3];
    const char * name = loom_quantize_preset_name(type); /* the preset's name as the field spells it */
    if (!name) {
        fprintf(stderr, "loom quantize: unknown type '%s' (one of %s; Q3_K, Q4_K, Q5_K; or the field's number for one)\n", type,
                loom_quantize_preset_names());
        return 1;
    }
    long long n_threads = 0;
    if (argc == 5) {
        if (!cli_parse_int("quantize", "NTHREADS", argv[4], 1, 4096, &n_threads)) return 1;
    }
    cli_log_setup(LOOM_LOG_WARN);
    qp.n_threads = (int)cli_cap_threads("quantize", n_threads);
    const int64_t t0 = loom_time_us();
    if (loom_model_quantize(in, out, type, &qp) != LOOM_OK) {
        fprintf(stderr, "loom quantize: %s\n", cli_last_error("cannot quantize the model"));
        return 1;
    }
    fprintf(stderr, "wrote %s (%s): %.2f MiB -> %.2f MiB of tensor data in %.1f s\n", out, name, mib(t.in), mib(t.out),
            (loom_time_us() - t0) / 1e6);
    return 0;
}
