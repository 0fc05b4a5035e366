/* consumer.c -- a program built against an installed Loom (tests/install/check-install.sh): it adds
 * two vectors on the CPU backend and checks the sums, so that headers, library and its
 * dependencies (OpenMP, threads) all reach the consumer; it includes every public header (each
 * also compiles on its own: check-install.sh). */
#include "loom.h"
#include "loom-alloc.h"
#include "loom-backend.h"
#include "loom-chat.h"
#include "loom-convert.h"
#include "loom-cpu.h"
#include "loom-cuda.h"
#include "loom-gguf.h"
#include "loom-llama.h"
#include "loom-sampler.h"
#include "loom-sim.h"
#include "loom-vocab.h"

#include <stdio.h>

int main(void) {
    struct loom_init_params ip = {.mem_size = 8 * loom_tensor_overhead() + loom_graph_overhead(16), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(ip);
    loom_backend_t be = loom_backend_cpu_init();
    if (!ctx || !be) return 1;
    struct loom_tensor * a = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 4);
    struct loom_tensor * b = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 4);
    struct loom_tensor * c = loom_add(ctx, a, b);
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 16);
    loom_build_forward_expand(g, c);
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors(ctx, be, NULL);
    const float x[4] = {1, 2, 3, 4}, y[4] = {0.5f, -2, 10, 100};
    float z[4] = {0};
    int ok = buf && loom_backend_tensor_set(a, x, 0, sizeof x) == LOOM_OK && loom_backend_tensor_set(b, y, 0, sizeof y) == LOOM_OK &&
             loom_backend_graph_compute(be, g) == LOOM_OK && loom_backend_tensor_get(c, z, 0, sizeof z) == LOOM_OK;
    for (int i = 0; ok && i < 4; i++) ok = z[i] == x[i] + y[i];
    printf("loom consumer: %s (%s)\n", ok ? "ok" : "FAILED", loom_type_name(LOOM_TYPE_F16));
    loom_backend_buffer_free(buf);
    loom_backend_free(be);
    loom_free(ctx);
    return ok ? 0 : 1;
}
