/* cmd-quantize.c -- `loom quantize IN.gguf OUT.gguf TYPE [NTHREADS]`: write a model in a quantized preset. */
#include "cli-util.h"
#include "commands.h"
#include "loom-convert.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom quantize IN.gguf OUT.gguf TYPE [NTHREADS]\n"
            "  TYPE: %s\n"
            "  (the field's presets and per-tensor mixes; IN holds F32, F16 or BF16 weights; OUT must differ from IN)\n",
            loom_quantize_preset_names());
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
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return cli_stdout_ok("quantize") ? 0 : 1;
    }
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "loom quantize: need IN.gguf OUT.gguf TYPE [NTHREADS] (see -h)\n");
        return 1;
    }
    const char * in = argv[1], * out = argv[2], * type = argv[3];
    if (!loom_quantize_preset_known(type)) {
        fprintf(stderr, "loom quantize: unknown type '%s' (one of %s)\n", type, loom_quantize_preset_names());
        return 1;
    }
    long long n_threads = 0;
    if (argc == 5) {
        if (!cli_parse_int("quantize", "NTHREADS", argv[4], 1, 4096, &n_threads)) return 1;
    }
    cli_log_setup(LOOM_LOG_WARN);
    n_threads = cli_cap_threads("quantize", n_threads);
    struct totals t = {0, 0};
    struct loom_quantize_params qp = {.n_threads = (int)n_threads, .progress = progress, .user = &t};
    const int64_t t0 = loom_time_us();
    if (loom_model_quantize(in, out, type, &qp) != LOOM_OK) {
        fprintf(stderr, "loom quantize: %s\n", cli_last_error("cannot quantize the model"));
        return 1;
    }
    char name[16]; /* the preset's name as the field spells it (a known name is short and taken in any case) */
    snprintf(name, sizeof name, "%s", type);
    for (char * p = name; *p; p++) *p = (char)toupper((unsigned char)*p);
    fprintf(stderr, "wrote %s (%s): %.2f MiB -> %.2f MiB of tensor data in %.1f s\n", out, name, mib(t.in), mib(t.out),
            (loom_time_us() - t0) / 1e6);
    return 0;
}
