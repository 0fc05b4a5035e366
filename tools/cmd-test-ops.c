/* cmd-test-ops.c -- `loom test-ops`: checks every op of a device against the reference (test-ops-harness.c). */
#include "cli-util.h"
#include "commands.h"
#include "test-ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom test-ops [-b DEVICE] [-o OP] [--perf] [-t THREADS] [-v]\n"
            "  -b DEVICE   device to test, by registry name (default CPU)\n"
            "  -o OP       only this op, e.g. MUL_MAT\n"
            "  --perf      add the large cases and print GFLOP/s (MUL_MAT) or GB/s per case\n"
            "  -t THREADS  CPU threads for the second run (compared bit for bit with one thread) and for\n"
            "              --perf timings (default 2)\n"
            "  -v          print every case\n"
            CLI_LONG_OPTION_HELP
            "Environment: LOOM_CPU_ISA=avx2|avx512|scalar names the CPU kernels (avx512: one-column products\n"
            "too, which AMD processors otherwise leave to AVX2; another value is ignored with a warning).\n");
}

int loom_cmd_test_ops(int argc, char ** argv) {
    struct test_ops_options opt = {.device = "CPU", .op = NULL, .perf = false, .threads = 2, .verbose = false};
    static const struct option opts[] = {{"perf", no_argument, 0, 'P'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    long long n;
    while ((c = cli_getopt(argc, argv, ":b:o:t:vh", opts)) != -1) {
        switch (c) {
        case 'b': opt.device = optarg; break;
        case 'o': opt.op = optarg; break;
        case 't':
            if (!cli_parse_int("test-ops", "-t", optarg, 1, 1024, &n)) return 1;
            opt.threads = (int)cli_cap_threads("test-ops", n);
            break;
        case 'P': opt.perf = true; break;
        case 'v': opt.verbose = true; break;
        case 'h': usage(stdout); return cli_stdout_ok("test-ops") ? 0 : 1;
        default: cli_option_error("test-ops", c); return 1; /* ':' or '?' */
        }
    }
    if (!cli_no_more_args("test-ops", argc, argv)) return 1;
    const int rc = test_ops_run(&opt);
    return cli_stdout_ok("test-ops") ? rc : 1;
}
