/* serve-np-step.c -- times the decode step of `loom serve -np N` without the server: N sequences
 * of 4 prompt tokens each, then steps of one token per sequence, all with logits (as the server's
 * generating slots ask). Prints the mean and best step time and the aggregate tokens/s. With
 * CPUT=1 in the environment the times are the process's CPU time (use -t 1: on a shared machine
 * the CPU time of one thread varies far less than the wall time). A benchmark, not a test.
 *
 * build: gcc -O2 -Iinclude bench/serve-np-step.c BUILD/libloom.a -lpcre2-32 -lm -lpthread -ldl -o /tmp/np-step
 *   (a CUDA build: add -fopenmp -Wl,--export-dynamic and put the program beside BUILD/libloom-cuda.so)
 * usage: /tmp/np-step MODEL N_SEQ STEPS [THREADS [N_GPU_LAYERS]]   e.g. CPUT=1 /tmp/np-step /tmp/np-110m.gguf 4 30 1
 *   (on a GPU: /tmp/np-step 7b.gguf 8 64 4 99; the first steps include warm-up: see 'best')
 * (token ids below 32000: a model with a vocabulary of at least that size) */
#include "loom-llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(getenv("CPUT") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL N_SEQ STEPS [THREADS [N_GPU_LAYERS]]\n", argv[0]);
        return 2;
    }
    const int ns = atoi(argv[2]), steps = atoi(argv[3]), nt = argc > 4 ? atoi(argv[4]) : 2;
    if (ns < 1 || ns > 16 || steps < 1) {
        fprintf(stderr, "N_SEQ must be 1..16 and STEPS >= 1\n");
        return 2;
    }
    struct loom_model_params mp = loom_model_default_params();
    if (argc > 5) mp.n_gpu_layers = atoi(argv[5]);
    struct loom_model * m = NULL;
    if (loom_model_load(argv[1], mp, &m) != LOOM_OK) return 1;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_threads = nt;
    struct loom_llama_context * c = NULL;
    if (loom_llama_context_new(m, cp, &c) != LOOM_OK) return 1;
    int32_t tok[16], pos[16], seq[16];
    int8_t lg[16];
    for (int s = 0; s < ns; s++) { /* a short prompt per sequence */
        const int32_t t[4] = {1, 100 + s, 200 + s, 300 + s}, p[4] = {0, 1, 2, 3}, q[4] = {s, s, s, s};
        const int8_t l[4] = {0, 0, 0, 1};
        const struct loom_llama_batch b = {4, t, p, q, l};
        if (loom_llama_decode_batch(c, &b) != LOOM_OK) return 1;
        tok[s] = 500 + s, pos[s] = 4, seq[s] = s, lg[s] = 1;
    }
    double best = 1e9, sum = 0;
    for (int i = 0; i < steps; i++) {
        const struct loom_llama_batch b = {ns, tok, pos, seq, lg};
        const double t0 = now();
        if (loom_llama_decode_batch(c, &b) != LOOM_OK) return 1;
        const double dt = now() - t0;
        sum += dt;
        if (dt < best) best = dt;
        for (int s = 0; s < ns; s++) pos[s]++, tok[s] = (tok[s] * 7 + 13) % 32000;
    }
    printf("%d sequences: mean %.2f ms, best %.2f ms per step; %.1f t/s aggregate\n", ns, sum / steps * 1e3, best * 1e3,
           ns * steps / sum);
    loom_llama_context_free(c);
    loom_model_free(m);
    return 0;
}
