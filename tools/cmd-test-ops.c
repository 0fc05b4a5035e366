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
            "Environment: LOOM_CPU_SCALAR=1 forces the portable CPU kernels; LOOM_CPU_ISA=avx2|avx512|scalar\n"
            "caps the SIMD kernels chosen (another value is ignored with a warning).\n");
}

int loom_cmd_test_ops(int argc, char ** argv) {
    struct test_ops_options opt = {.device = "CPU", .op = NULL, .perf = false, .threads = 2, .verbose = false};
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        if ((!strcmp(a, "-b") || !strcmp(a, "-o") || !strcmp(a, "-t")) && i + 1 >= argc) {
            fprintf(stderr, "loom test-ops: %s needs a value\n", a);
            return 1;
        }
        if (!strcmp(a, "-b")) {
            opt.device = argv[++i];
        } else if (!strcmp(a, "-o")) {
            opt.op = argv[++i];
        } else if (!strcmp(a, "-t")) {
            char * end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 1024) {
                fprintf(stderr, "loom test-ops: bad thread count '%s'\n", argv[i]);
                return 1;
            }
            opt.threads = (int)n;
        } else if (!strcmp(a, "--perf")) {
            opt.perf = true;
        } else if (!strcmp(a, "-v")) {
            opt.verbose = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return cli_stdout_ok("test-ops") ? 0 : 1;
        } else {
            fprintf(stderr, "loom test-ops: unknown option '%s'\n", a);
            usage(stderr);
            return 1;
        }
    }
    const int rc = test_ops_run(&opt);
    return cli_stdout_ok("test-ops") ? rc : 1;
}
