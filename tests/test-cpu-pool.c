/* test-cpu-pool.c -- the CPU backend's worker team (src/cpu/pool.c): graphs large enough to use
 * the team, computed with 1..6 threads in any order, give the 1-thread result bit for bit; two
 * threads computing graphs at the same time (one holds the team, the other computes alone) both
 * get it, every time; a child forked after the team exists computes with a new team and gets it. */
#include "loom-cpu.h"
#include "test-util.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 256, COLS = 64, ROUNDS = 20 };

struct net {
    struct loom_context * ctx;
    struct loom_cgraph * graph;
    struct loom_tensor * out; /* F32 [N, COLS] */
};

/* softmax(w silu(w x + b)): 2 * 65536 weights read, more than the executor's one-thread limit */
static struct net build(void) {
    struct net n;
    struct loom_init_params p = {.mem_size = 8u << 20, .mem_buffer = NULL, .no_alloc = false};
    n.ctx = loom_init(p);
    uint64_t rng = 7;
    struct loom_tensor * w = loom_new_tensor_2d(n.ctx, LOOM_TYPE_F32, N, N);
    struct loom_tensor * x = loom_new_tensor_2d(n.ctx, LOOM_TYPE_F32, N, COLS);
    struct loom_tensor * b = loom_new_tensor_1d(n.ctx, LOOM_TYPE_F32, N);
    struct loom_tensor * ts[3] = {w, x, b};
    for (int k = 0; k < 3; k++) {
        float * d = ts[k]->data;
        for (int64_t i = 0; i < loom_nelements(ts[k]); i++) d[i] = (float)(2.0 * test_rand_uniform(&rng) - 1.0) * 0.1f;
    }
    struct loom_tensor * y = loom_silu(n.ctx, loom_add(n.ctx, loom_mul_mat(n.ctx, w, x), b));
    n.out = loom_soft_max_ext(n.ctx, loom_mul_mat(n.ctx, w, y), NULL, 1.0f);
    n.graph = loom_new_graph(n.ctx);
    loom_build_forward_expand(n.graph, n.out);
    return n;
}

static float g_ref[N * COLS];

/* Computes 'n' with 'threads' threads; true when the result is the reference, bit for bit. */
static bool compute_matches(struct net * n, int threads) {
    memset(n->out->data, 0, loom_nbytes(n->out));
    if (loom_cpu_graph_compute(n->graph, threads) != LOOM_OK) return false;
    return memcmp(n->out->data, g_ref, sizeof g_ref) == 0;
}

struct racer {
    int threads, mismatches;
};

static void * race(void * arg) {
    struct racer * r = arg;
    struct net n = build();
    for (int i = 0; i < ROUNDS; i++) r->mismatches += !compute_matches(&n, r->threads);
    loom_free(n.ctx);
    return NULL;
}

int main(void) {
    struct net n = build();
    CHECK(loom_cpu_graph_compute(n.graph, 1) == LOOM_OK, "compute, 1 thread");
    memcpy(g_ref, n.out->data, sizeof g_ref);
    for (int j = 0; j < COLS; j++) {
        double s = 0.0;
        for (int i = 0; i < N; i++) s += g_ref[j * N + i];
        CHECK(fabs(s - 1.0) < 1e-5, "column %d of the softmax sums to %g", j, s);
    }

    /* the team grows, and serves fewer threads than it has */
    static const int order[] = {4, 2, 6, 3, 1, 5, 6};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        CHECK(compute_matches(&n, order[i]), "%d threads give the 1-thread result", order[i]);

    /* two callers at once */
    struct racer r[2] = {{4, 0}, {3, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, race, &r[i]) == 0, "start racer %d", i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(r[0].mismatches == 0 && r[1].mismatches == 0, "concurrent computes all exact (%d and %d of %d differ)", r[0].mismatches,
          r[1].mismatches, ROUNDS);
    CHECK(compute_matches(&n, 4), "the team serves the next caller after the race");

    /* a forked child: the parent's workers are not in it */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a child waiting on workers it does not have fails instead of hanging */
        _exit(compute_matches(&n, 4) && compute_matches(&n, 2) ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child computes the same with its own team (status %#x)", status);

    loom_free(n.ctx);
    return test_finish("test-cpu-pool");
}
