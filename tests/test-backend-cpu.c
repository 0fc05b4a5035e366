/* test-backend-cpu.c -- CPU device: placing a context's tensors, max_size splitting, set/get, views, host-ptr wrapping;
 * the CUDA calls refuse a CPU backend. */
#include "loom-cpu.h"
#include "loom-cuda.h"
#include "test-util.h"

#include <string.h>

static void test_alloc_and_views(void) {
    struct loom_init_params p = {.mem_size = 64 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * a = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 7, 5);
    struct loom_tensor * b = loom_new_tensor_1d(ctx, LOOM_TYPE_F16, 33);
    loom_set_name(a, "a");
    loom_set_name(b, "b");
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, loom_backend_cpu_buffer_type(), &st);
    CHECK(buf && st == LOOM_OK, "alloc");
    CHECK(a->buffer && b->buffer && ((uintptr_t)a->data % 64) == 0 && ((uintptr_t)b->data % 64) == 0, "placed and aligned");
    float v[35];
    for (int i = 0; i < 35; i++) v[i] = (float)i * 0.5f;
    CHECK(loom_backend_tensor_set(a, v, 0, sizeof v) == LOOM_OK, "set");
    CHECK(loom_backend_tensor_set(a, v, 4, sizeof v) == LOOM_ERR_INVALID_ARG, "set out of range rejected");

    /* a view created in another context after allocation */
    struct loom_context * ctx2 = loom_init(p);
    struct loom_tensor * row2 = loom_view_1d(ctx2, a, 7, 2 * a->nb[1]);
    CHECK(loom_backend_view_init(row2) == LOOM_OK, "view init");
    float r[7];
    CHECK(loom_backend_tensor_get(row2, r, 0, sizeof r) == LOOM_OK, "get view");
    for (int i = 0; i < 7; i++) CHECK(r[i] == v[14 + i], "view value %d", i);
    loom_backend_buffer_free(buf);
    loom_free(ctx2);
    loom_free(ctx);
}

static void test_host_ptr_chunks(void) {
    /* a page-unaligned region, wrapped in overlapping chunks by a device whose max size is small
     * is exercised with the sim device; here: the CPU wraps it whole and reads the caller's bytes */
    size_t n = 10000;
    uint8_t * mem = malloc(n + 100);
    for (size_t i = 0; i < n + 100; i++) mem[i] = (uint8_t)(i * 7);
    loom_backend_buffer_t buf = loom_backend_dev_buffer_from_host_ptr(loom_backend_dev_by_name("CPU"), mem + 13, n, 4000);
    CHECK(buf != NULL, "wrap");
    struct loom_init_params p = {.mem_size = 8 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * ctx = loom_init(p);
    struct loom_tensor * t = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, 100);
    CHECK(loom_backend_tensor_alloc(buf, t, mem + 13 + 400) == LOOM_OK, "place at true offset");
    uint8_t out[400];
    loom_backend_tensor_get(t, out, 0, 400);
    CHECK(memcmp(out, mem + 413, 400) == 0, "reads the caller's bytes");
    loom_backend_buffer_free(buf);
    CHECK(mem[0] == 0 && mem[1] == 7, "caller memory intact after free");
    free(mem);
    loom_free(ctx);
}

int main(void) {
    test_alloc_and_views();
    test_host_ptr_chunks();
    CHECK(loom_backend_dev_count() >= 1, "registry has the CPU");
    CHECK(loom_backend_dev_by_name("cpu") == loom_backend_dev_by_name("CPU"), "lookup by name");
    /* not a CUDA backend (LOOM_ERR_INVALID_ARG; LOOM_ERR_UNSUPPORTED when built without CUDA), one error logged */
    loom_backend_t cpu = loom_backend_cpu_init();
    struct loom_cuda_stats stats;
    loom_log_set(test_capture_log, NULL);
    test_n_errors = 0;
    const enum loom_status st = loom_cuda_get_stats(cpu, &stats);
    CHECK((st == LOOM_ERR_INVALID_ARG || st == LOOM_ERR_UNSUPPORTED) && test_n_errors == 1, "CUDA counts of a CPU backend refused: %s",
          loom_status_str(st));
    CHECK(!loom_backend_is_cuda(cpu), "the CPU backend is not a CUDA backend");
    loom_log_set(NULL, NULL);
    loom_backend_free(cpu);
    return test_finish("test-backend-cpu");
}
