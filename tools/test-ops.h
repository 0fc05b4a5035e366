/* test-ops.h -- the op test harness behind `loom test-ops`: a table of cases (every op x type x
 * layout x shape), run on any registered device through the backend interface only, compared
 * against the independent double-precision reference (test-ref.h). */
#ifndef LOOM_TOOLS_TEST_OPS_H
#define LOOM_TOOLS_TEST_OPS_H

#include "loom-backend.h"
#include "test-ref.h"

/* How a source tensor is laid out in memory (every source is a view into a larger base whose
 * spare bytes are guard bytes). */
enum test_layout {
    TL_CONTIG = 0,    /* dense, dimension 0 fastest */
    TL_TRANSPOSED,    /* dimensions 0 and 1 swapped in memory (nb0 > nb1) */
    TL_PERMUTED,      /* dimensions 1 and 2 swapped in memory (dense rows) */
    TL_SCRAMBLED,     /* memory order of dimensions 2, 0, 3, 1 */
    TL_STRIDED,       /* dimension order kept, padding between rows and planes, nonzero offset */
    TL_COUNT
};

enum { TEST_MAX_SRC = 4 };

/* One case: an op, its sources and parameters. For CPY, source 1 is the destination tensor. */
struct test_case {
    enum loom_op op;
    int n_src;
    enum loom_type type[TEST_MAX_SRC];
    int64_t ne[TEST_MAX_SRC][4];
    enum test_layout layout[TEST_MAX_SRC];
    float fp[8];          /* SCALE: s; RMS_NORM: eps; ROPE: freq_base, freq_scale, ext_factor, attn_factor,
                           * beta_fast, beta_slow (all 0 for a plain loom_rope); SOFT_MAX, FLASH_ATTN_EXT: scale */
    int ip[4];            /* ROPE: n_dims, mode, n_ctx_orig (source 2: frequency factors); SOFT_MAX: mask
                           * present; data variants (see test-ops-cases.c) */
    int64_t ne_out[4];    /* CONT: the result's shape */
    bool perf_only;       /* large: run only with --perf */
};

struct test_case_list {
    struct test_case * cases;
    int n, cap;
};

/* Fills 'list' with every case (perf-only ones included, flagged). */
void test_ops_make_cases(struct test_case_list * list);
void test_ops_free_cases(struct test_case_list * list);
/* A one-line description: op, types, shapes, layouts, parameters. */
void test_ops_describe(const struct test_case * c, char * buf, size_t size);

struct test_ops_options {
    const char * device;   /* registry name; "CPU" by default */
    const char * op;       /* only this op (its name, e.g. "MUL_MAT"); NULL for all */
    bool perf;             /* add the large cases and print GFLOP/s or GB/s */
    int threads;           /* CPU: threads for the second (multi-thread) run and for --perf; >= 2 checks determinism */
    bool verbose;          /* print every case, not only failures */
};

/* Runs the cases; prints per-op counts and "N passed, M failed[, K skipped]" to stdout.
 * Returns 0 when nothing failed, 1 otherwise (also for an unknown device or op). */
int test_ops_run(const struct test_ops_options * opt);

#endif
