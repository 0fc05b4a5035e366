/* cuda-matvec.c -- speed of the CUDA device's matrix products: matrix-vector products (token
 * generation, memory-bound: GB/s against the measured device copy bandwidth) and a GEMM
 * (prefill, TFLOP/s). Each figure is the marginal time of one more node in a graph: graphs of
 * n and 2n nodes are timed (median of repeats) and the difference divided by n, so launch and
 * synchronisation latency drop out. Weights rotate over copies that together exceed the L2.
 * Usage: bench-cuda-matvec [repeats [only-matvec]]   (prints a table to stdout; needs CUDA0) */
#include "loom-backend.h"
#include "loom-cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static loom_backend_t g_be;
static loom_backend_buffer_type_t g_buft;
static int g_reps = 20;

static int cmp_i64(const void * a, const void * b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Median wall time (us) of computing 'g' (which synchronizes), after warm-up. */
static double time_graph(struct loom_cgraph * g) {
    for (int i = 0; i < 3; i++) loom_backend_graph_compute(g_be, g);
    int64_t * t = malloc(sizeof(int64_t) * (size_t)g_reps);
    for (int r = 0; r < g_reps; r++) {
        int64_t t0 = loom_time_us();
        if (loom_backend_graph_compute(g_be, g) != LOOM_OK) {
            fprintf(stderr, "compute failed\n");
            exit(1);
        }
        t[r] = loom_time_us() - t0;
    }
    qsort(t, (size_t)g_reps, sizeof *t, cmp_i64);
    double m = (double)t[g_reps / 2];
    free(t);
    return m;
}

/* A buffer of the device's buffer type holding every tensor of 'ctx'; exits when it cannot be had. */
static loom_backend_buffer_t alloc_tensors(struct loom_context * ctx) {
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
    if (!buf) {
        fprintf(stderr, "allocation failed: %s\n", loom_status_str(st));
        exit(1);
    }
    return buf;
}

static void fill(struct loom_tensor * t, uint64_t seed) {
    size_t n = loom_nbytes(t);
    uint16_t * buf = malloc(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t es = loom_type_size(t->type);
    for (size_t i = 0; i < n / es; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 23); /* [-1, 1) */
        if (es == 4) memcpy((float *)buf + i, &v, 4);
        else buf[i] = t->type == LOOM_TYPE_F16 ? loom_fp32_to_fp16(v) : loom_fp32_to_bf16(v);
    }
    loom_backend_tensor_set(t, buf, 0, n);
    free(buf);
}

/* Marginal microseconds per mul_mat node of a [K, M] weight of 'type' times an F32 [K, N]. */
static double bench_mul_mat(enum loom_type type, int64_t K, int64_t M, int64_t N, int copies, int nodes) {
    struct loom_init_params p = {.mem_size = (size_t)(copies + 3 * nodes + 8) * loom_tensor_overhead() + 2 * loom_graph_overhead(4096),
                                 .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor ** w = malloc(sizeof *w * (size_t)copies);
    for (int i = 0; i < copies; i++) w[i] = loom_new_tensor_2d(ctx, type, K, M);
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, K, N);
    struct loom_cgraph * g1 = loom_new_graph_custom(ctx, 4096);
    struct loom_cgraph * g2 = loom_new_graph_custom(ctx, 4096);
    for (int i = 0; i < 2 * nodes; i++) {
        struct loom_tensor * o = loom_mul_mat(ctx, w[i % copies], x);
        if (i < nodes) loom_build_forward_expand(g1, o);
        loom_build_forward_expand(g2, o);
    }
    loom_backend_buffer_t buf = alloc_tensors(ctx);
    fill(w[0], 1);
    for (int i = 1; i < copies; i++) loom_backend_tensor_copy(w[0], w[i]);
    fill(x, 2);
    double t1 = time_graph(g1), t2 = time_graph(g2);
    loom_backend_buffer_free(buf);
    loom_free(ctx);
    free(w);
    return (t2 - t1) / nodes;
}

/* Marginal microseconds per DUP of an F32 vector of n elements (a device-to-device copy). */
static double bench_copy(int64_t n, int nodes) {
    struct loom_init_params p = {.mem_size = (size_t)(3 * nodes + 8) * loom_tensor_overhead() + 2 * loom_graph_overhead(4096),
                                 .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * x = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, n);
    struct loom_cgraph * g1 = loom_new_graph_custom(ctx, 4096);
    struct loom_cgraph * g2 = loom_new_graph_custom(ctx, 4096);
    for (int i = 0; i < 2 * nodes; i++) {
        struct loom_tensor * o = loom_dup(ctx, x);
        if (i < nodes) loom_build_forward_expand(g1, o);
        loom_build_forward_expand(g2, o);
    }
    loom_backend_buffer_t buf = alloc_tensors(ctx);
    fill(x, 3);
    double t1 = time_graph(g1), t2 = time_graph(g2);
    loom_backend_buffer_free(buf);
    loom_free(ctx);
    return (t2 - t1) / nodes;
}

/* Marginal microseconds per tiny node (SCALE of 256 floats): the per-node cost of issuing work. */
static double bench_tiny(int nodes) {
    struct loom_init_params p = {.mem_size = (size_t)(3 * nodes + 8) * loom_tensor_overhead() + 2 * loom_graph_overhead(4096),
                                 .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * x = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 256);
    struct loom_cgraph * g1 = loom_new_graph_custom(ctx, 4096);
    struct loom_cgraph * g2 = loom_new_graph_custom(ctx, 4096);
    struct loom_tensor * y = x;
    for (int i = 0; i < 2 * nodes; i++) {
        y = loom_scale(ctx, y, 0.999f);
        if (i < nodes) loom_build_forward_expand(g1, y);
        loom_build_forward_expand(g2, y);
    }
    loom_backend_buffer_t buf = alloc_tensors(ctx);
    fill(x, 4);
    double t1 = time_graph(g1), t2 = time_graph(g2);
    loom_backend_buffer_free(buf);
    loom_free(ctx);
    return (t2 - t1) / nodes;
}

int main(int argc, char ** argv) {
    const bool only_mv = argc > 2;
    if (argc > 1) g_reps = atoi(argv[1]) > 2 ? atoi(argv[1]) : 3;
    loom_backend_dev_t dev = loom_backend_dev_by_name("CUDA0");
    if (!dev) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    g_be = loom_backend_dev_init(dev, NULL);
    g_buft = loom_backend_dev_buffer_type(dev);
    printf("device: %s\n", loom_backend_dev_description(dev));

    const int64_t n_copy = 64 << 20; /* 256 MiB read + 256 MiB written */
    double tc = bench_copy(n_copy, 8);
    double copy_bw = 2.0 * 4 * n_copy / (tc * 1e-6) / 1e9;
    printf("%-34s %9.1f us  %7.0f GB/s (read + write)\n", "copy F32 256 MiB (DUP)", tc, copy_bw);
    if (!only_mv) printf("%-34s %9.2f us\n", "per-node cost (SCALE of 256)", bench_tiny(500));

    struct {
        enum loom_type type;
        int64_t K, M, N;
    } mv[] = {
        {LOOM_TYPE_F16, 4096, 4096, 1},  {LOOM_TYPE_F16, 4096, 11008, 1}, {LOOM_TYPE_F16, 11008, 4096, 1},
        {LOOM_TYPE_BF16, 4096, 4096, 1}, {LOOM_TYPE_F32, 4096, 4096, 1},  {LOOM_TYPE_F16, 4096, 4096, 2},
        {LOOM_TYPE_F16, 4096, 4096, 4},  {LOOM_TYPE_F16, 4096, 4096, 8},
    };
    for (size_t i = 0; i < sizeof mv / sizeof mv[0]; i++) {
        if (only_mv && mv[i].type != LOOM_TYPE_F16) continue;
        size_t wbytes = (size_t)(mv[i].K * mv[i].M) * loom_type_size(mv[i].type);
        int copies = (int)((600u << 20) / wbytes) + 1; /* ~600 MiB of weights: 10x the L2 */
        double t = bench_mul_mat(mv[i].type, mv[i].K, mv[i].M, mv[i].N, copies, 2 * copies);
        double bytes = (double)wbytes + 4.0 * (double)(mv[i].K * mv[i].N + mv[i].M * mv[i].N);
        char name[64];
        snprintf(name, sizeof name, "matvec %s M%lld K%lld N%lld", loom_type_name(mv[i].type), (long long)mv[i].M,
                 (long long)mv[i].K, (long long)mv[i].N);
        printf("%-34s %9.1f us  %7.0f GB/s  %5.1f%% of copy\n", name, t, bytes / (t * 1e-6) / 1e9, 100.0 * bytes / (t * 1e-6) / 1e9 / copy_bw);
    }
    const enum loom_type gt[3] = {LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_F32};
    for (int i = 0; i < 3 && !only_mv; i++) {
        const int64_t K = 4096, M = 4096, N = 512;
        double t = bench_mul_mat(gt[i], K, M, N, 4, 8);
        char name[64];
        snprintf(name, sizeof name, "gemm %s M%lld K%lld N%lld", loom_type_name(gt[i]), (long long)M, (long long)K, (long long)N);
        printf("%-34s %9.1f us  %7.1f TFLOP/s\n", name, t, 2.0 * M * N * K / (t * 1e-6) / 1e12);
    }
    loom_backend_free(g_be);
    return 0;
}
