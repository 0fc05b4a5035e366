/* test-sim-device.c -- the sim device itself: its addresses are not host memory, out-of-memory and
 * limits behave like a GPU's (logged, nothing leaked, frees tracked), failure injection at every
 * buffer creation and init_tensor leaves a clean state, capabilities (host access, async, events,
 * unsupported ops) switch the paths they claim, and the registry finds it by name. */
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


static struct loom_sim_stats stats_of(loom_backend_dev_t dev) {
    struct loom_sim_stats s;
    loom_sim_get_stats(dev, &s);
    return s;
}

/* ---------------------------------------------------------------- addresses */

/* True when [addr, addr + 1) lies in some mapping of this process (/proc/self/maps). */
static bool in_host_mapping(uintptr_t addr) {
    FILE * f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi) found = true;
    }
    fclose(f);
    return found;
}

/* Canonical x86-64 addresses sign-extend bit 47 (4-level paging) or bit 56 (5-level). */
static bool canonical(uint64_t a) { return (uint64_t)((int64_t)(a << 16) >> 16) == a || (uint64_t)((int64_t)(a << 7) >> 7) == a; }

static void test_addresses(void) {
    loom_backend_dev_t s0 = loom_sim_device_new("sim-a", NULL), s1 = loom_sim_device_new("sim-b", NULL);
    loom_backend_buffer_t b0 = loom_backend_buft_alloc_buffer(loom_backend_dev_buffer_type(s0), 4096);
    loom_backend_buffer_t b0b = loom_backend_buft_alloc_buffer(loom_backend_dev_buffer_type(s0), 100);
    loom_backend_buffer_t b1 = loom_backend_buft_alloc_buffer(loom_backend_dev_buffer_type(s1), 4096);
    CHECK(b0 && b0b && b1, "alloc");
    CHECK(!loom_backend_buffer_is_host(b0) && !loom_backend_buft_is_host(loom_backend_dev_buffer_type(s0)), "not host memory");
    loom_backend_buffer_t bufs[3] = {b0, b0b, b1};
    for (int i = 0; i < 3; i++) {
        uintptr_t base = (uintptr_t)loom_backend_buffer_get_base(bufs[i]);
        size_t size = loom_backend_buffer_get_size(bufs[i]);
        for (uintptr_t a = base; a < base + size; a += 97) {
            CHECK(!in_host_mapping(a), "sim address %#jx lies in a host mapping", (uintmax_t)a);
            if (a - base > 1000) break;
        }
        CHECK(!canonical(base) && !canonical(base + size - 1), "sim address %#jx is canonical (a dereference would not fault)", (uintmax_t)base);
        CHECK(loom_sim_is_device_addr((void *)base), "recognised as a sim address");
        CHECK(base % 256 == 0, "base aligned to the default 256");
    }
    uintptr_t a0 = (uintptr_t)loom_backend_buffer_get_base(b0), a0b = (uintptr_t)loom_backend_buffer_get_base(b0b),
              a1 = (uintptr_t)loom_backend_buffer_get_base(b1);
    CHECK(a0b >= a0 + 4096 + 1 && a1 != a0 && (a1 >> 44) != (a0 >> 44), "buffers (and devices) get disjoint address ranges");
    CHECK(!loom_sim_is_device_addr(&a0) && !loom_sim_is_device_addr(NULL), "host pointers are not sim addresses");
    loom_backend_buffer_free(b0);
    loom_backend_buffer_free(b0b);
    loom_backend_buffer_free(b1);
    loom_sim_device_free(s0);
    loom_sim_device_free(s1);
}

/* A host-memory sim (host_memory): host addresses any device may read, an ACCEL-type device that
 * reads host memory; the max buffer size can change between allocations. */
static void test_host_memory(void) {
    struct loom_sim_params p = loom_sim_default_params();
    p.host_memory = true;
    p.alignment = 128;
    loom_backend_dev_t d = loom_sim_device_new("sim-host", &p);
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(d);
    CHECK(loom_backend_buft_is_host(buft) && loom_backend_dev_type(d) == LOOM_BACKEND_DEV_TYPE_ACCEL, "host buffer type, ACCEL device");
    CHECK(loom_backend_dev_supports_buft(d, loom_backend_cpu_buffer_type()), "reads CPU buffers");
    loom_backend_buffer_t b = loom_backend_buft_alloc_buffer(buft, 1000);
    CHECK(b && loom_backend_buffer_is_host(b), "alloc");
    uint8_t * base = b ? loom_backend_buffer_get_base(b) : NULL;
    CHECK(base && in_host_mapping((uintptr_t)base) && !loom_sim_is_device_addr(base) && (uintptr_t)base % 128 == 0,
          "a host address, aligned");
    if (base) {
        loom_backend_buffer_clear(b, 0x3c);
        CHECK(base[0] == 0x3c && base[999] == 0x3c, "the bytes are readable at the address");
    }
    loom_backend_buffer_free(b);
    loom_sim_set_max_buffer_size(d, 512);
    CHECK(loom_backend_buft_get_max_size(buft) == 512, "max buffer size set");
    loom_sim_set_max_buffer_size(d, 0);
    CHECK(loom_backend_buft_get_max_size(buft) == SIZE_MAX, "0: unlimited");
    CHECK(test_sim_live_buffers(d) == 0, "freed");
    loom_sim_device_free(d);
}

/* ---------------------------------------------------------------- memory limits */

static void test_out_of_memory(void) {
    struct loom_sim_params p = loom_sim_default_params();
    p.memory_size = 1 << 20;
    p.max_buffer_size = 768 << 10;
    loom_backend_dev_t sim = loom_sim_device_new("sim-oom", &p);
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(sim);
    size_t free_mem, total;
    loom_backend_dev_memory(sim, &free_mem, &total);
    CHECK(free_mem == (1u << 20) && total == (1u << 20), "memory: %zu free of %zu", free_mem, total);

    loom_backend_buffer_t a = loom_backend_buft_alloc_buffer(buft, 600 << 10);
    CHECK(a != NULL, "first 600 KiB fit");
    loom_backend_dev_memory(sim, &free_mem, &total);
    CHECK(free_mem == (424u << 10), "free after one buffer: %zu", free_mem);
    test_n_errors = 0;
    loom_backend_buffer_t b = loom_backend_buft_alloc_buffer(buft, 600 << 10);
    CHECK(!b && test_n_errors == 1, "a second 600 KiB does not fit");
    CHECK(strstr(test_last_error, "sim-oom") && strstr(test_last_error, "out of device memory") && strstr(test_last_error, "0.59 MiB") &&
              strstr(test_last_error, "0.41 MiB free"),
          "the message names the device, MiB asked and free: %s", test_last_error);
    test_n_errors = 0;
    b = loom_backend_buft_alloc_buffer(buft, 800 << 10);
    CHECK(!b && test_n_errors == 1 && strstr(test_last_error, "maximum"), "over max_size is refused: %s", test_last_error);
    loom_backend_buffer_free(a);
    b = loom_backend_buft_alloc_buffer(buft, 600 << 10);
    CHECK(b != NULL, "frees are tracked: 600 KiB fit again");
    struct loom_sim_stats s = stats_of(sim);
    CHECK(s.bytes_allocated == (600u << 10) && s.bytes_peak == (600u << 10) && s.n_buffers == 1 && s.n_allocs == 2,
          "stats: %zu now, %zu peak, %zu live, %llu made", s.bytes_allocated, s.bytes_peak, s.n_buffers, (unsigned long long)s.n_allocs);

    /* a context that does not fit: LOOM_ERR_OOM, nothing placed, the first buffers given back */
    struct loom_context * ctx = test_meta_ctx(8, 0);
    struct loom_tensor * t[4];
    for (int i = 0; i < 4; i++) t[i] = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 40 << 10); /* 160 KiB each */
    enum loom_status st;
    loom_backend_buffer_t c = loom_backend_alloc_ctx_tensors_from_buft(ctx, buft, &st);
    CHECK(!c && st == LOOM_ERR_OOM, "context over the device memory: %s", loom_status_str(st));
    for (int i = 0; i < 4; i++) CHECK(!t[i]->buffer && !t[i]->data, "tensor %d left placed", i);
    s = stats_of(sim);
    CHECK(s.n_buffers == 1 && s.bytes_allocated == (600u << 10), "only the earlier buffer is live");
    loom_backend_buffer_free(b);
    c = loom_backend_alloc_ctx_tensors_from_buft(ctx, buft, &st);
    CHECK(c && st == LOOM_OK, "fits once memory is free");
    loom_backend_buffer_free(c);
    loom_free(ctx);
    loom_sim_device_free(sim);
}

/* ---------------------------------------------------------------- failure injection */

/* A context whose tensors need several buffers (max_size) and has views: every buffer creation and
 * every init_tensor is a point of failure. */
static struct loom_context * injection_ctx(struct loom_tensor ** t, int n) {
    struct loom_context * ctx = test_meta_ctx((size_t)n * 2, 0);
    for (int i = 0; i < n; i++) {
        t[i] = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 100 + 37 * i);
        loom_format_name(t[i], "inj%d", i);
        if (i % 3 == 2) loom_view_1d(ctx, t[i], 10, 8);
    }
    return ctx;
}

static bool ctx_unplaced(struct loom_context * ctx) {
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if (t->buffer || t->data) return false;
    }
    return true;
}

static void test_failure_injection(void) {
    enum { N = 12 };
    struct loom_sim_params p = loom_sim_default_params();
    p.max_buffer_size = 2048;
    loom_backend_dev_t sim = loom_sim_device_new("sim-inject", &p);
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(sim);
    struct loom_tensor * t[N];

    /* the Nth buffer creation fails */
    int alloc_failures = 0;
    for (uint64_t k = 1;; k++) {
        struct loom_context * ctx = injection_ctx(t, N);
        loom_sim_set_fail_alloc(sim, k);
        enum loom_status st;
        test_n_errors = 0;
        loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, buft, &st);
        struct loom_sim_stats s = stats_of(sim);
        if (buf) {
            CHECK(st == LOOM_OK, "success after the injected point");
            loom_backend_buffer_free(buf);
            loom_free(ctx);
            break;
        }
        alloc_failures++;
        CHECK(st == LOOM_ERR_OOM && test_n_errors >= 1, "alloc failure %llu: %s", (unsigned long long)k, loom_status_str(st));
        CHECK(ctx_unplaced(ctx), "alloc failure %llu left tensors placed", (unsigned long long)k);
        CHECK(s.n_buffers == 0 && s.bytes_allocated == 0, "alloc failure %llu left %zu buffers", (unsigned long long)k, s.n_buffers);
        loom_free(ctx);
        if (k > 100) break;
    }
    CHECK(alloc_failures >= 3, "the context needed several buffers (%d failure points)", alloc_failures);

    /* the Nth init_tensor fails (tensors, then views) */
    loom_sim_set_fail_alloc(sim, 0);
    int init_failures = 0;
    for (uint64_t k = 1;; k++) {
        struct loom_context * ctx = injection_ctx(t, N);
        loom_sim_set_fail_init_tensor(sim, k);
        enum loom_status st;
        loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, buft, &st);
        struct loom_sim_stats s = stats_of(sim);
        if (buf) {
            loom_backend_buffer_free(buf);
            loom_free(ctx);
            break;
        }
        init_failures++;
        CHECK(st == LOOM_ERR_BACKEND, "init failure %llu: %s", (unsigned long long)k, loom_status_str(st));
        CHECK(ctx_unplaced(ctx), "init failure %llu left tensors placed", (unsigned long long)k);
        CHECK(s.n_buffers == 0 && s.bytes_allocated == 0, "init failure %llu left buffers", (unsigned long long)k);
        loom_free(ctx);
        if (k > 100) break;
    }
    CHECK(init_failures == N + N / 3, "every tensor and view init is a failure point (%d)", init_failures);
    loom_sim_device_free(sim);

    /* armed at creation */
    p.fail_alloc_at = 2;
    sim = loom_sim_device_new("sim-inject2", &p);
    buft = loom_backend_dev_buffer_type(sim);
    loom_backend_buffer_t b1 = loom_backend_buft_alloc_buffer(buft, 10), b2 = loom_backend_buft_alloc_buffer(buft, 10),
                          b3 = loom_backend_buft_alloc_buffer(buft, 10);
    CHECK(b1 && !b2 && b3, "fail_alloc_at = 2 fails the second creation only");
    struct loom_sim_stats s = stats_of(sim);
    CHECK(s.n_alloc_calls == 3 && s.n_allocs == 2, "call counts");
    loom_backend_buffer_free(b1);
    loom_backend_buffer_free(b3);
    loom_sim_device_free(sim);
}

/* ---------------------------------------------------------------- capabilities */

static void test_capabilities(void) {
    loom_backend_dev_t plain = loom_sim_device_new("sim-plain", NULL);
    struct loom_sim_params p = loom_sim_default_params();
    p.host_access = p.async = p.events = p.buffer_from_host_ptr = true;
    p.unsupported_ops[LOOM_OP_RESHAPE] = true;
    p.alignment = 4096;
    loom_backend_dev_t rich = loom_sim_device_new("sim-rich", &p);

    struct loom_backend_dev_props pr;
    loom_backend_dev_get_props(plain, &pr);
    CHECK(!strcmp(pr.name, "sim-plain") && pr.type == LOOM_BACKEND_DEV_TYPE_GPU && !pr.caps.async && !pr.caps.events &&
              !pr.caps.buffer_from_host_ptr && !pr.caps.host_buffer,
          "plain caps");
    loom_backend_dev_get_props(rich, &pr);
    CHECK(pr.caps.async && pr.caps.events && pr.caps.buffer_from_host_ptr, "rich caps");
    CHECK(loom_backend_buft_get_alignment(loom_backend_dev_buffer_type(rich)) == 4096, "alignment parameter");

    loom_backend_buffer_type_t cpu = loom_backend_cpu_buffer_type();
    CHECK(loom_backend_dev_supports_buft(plain, loom_backend_dev_buffer_type(plain)), "own buffers");
    CHECK(!loom_backend_dev_supports_buft(plain, cpu), "no host access by default");
    CHECK(!loom_backend_dev_supports_buft(plain, loom_backend_dev_buffer_type(rich)), "not another sim's memory");
    CHECK(loom_backend_dev_supports_buft(rich, cpu), "host access when configured");
    CHECK(!loom_backend_dev_supports_buft(loom_backend_dev_by_name("CPU"), loom_backend_dev_buffer_type(plain)), "the CPU cannot read sim memory");

    /* supports_op mirrors the CPU kernels, minus the configured list */
    struct loom_context * ctx = test_meta_ctx(8, 0);
    struct loom_tensor * a = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 4, 4);
    struct loom_tensor * ops[3] = {loom_reshape_1d(ctx, a, 16), loom_transpose(ctx, a), loom_scale(ctx, a, 2.0f)};
    for (int i = 0; i < 3; i++) {
        CHECK(loom_backend_dev_supports_op(plain, ops[i]) == loom_cpu_supports_op(ops[i]), "plain mirrors the CPU for %s", loom_op_name(ops[i]->op));
        bool want = ops[i]->op == LOOM_OP_RESHAPE ? false : loom_cpu_supports_op(ops[i]);
        CHECK(loom_backend_dev_supports_op(rich, ops[i]) == want, "rich for %s", loom_op_name(ops[i]->op));
    }
    loom_free(ctx);

    /* events: trivially complete, or NULL (and accepted as NULL) without them */
    loom_backend_t be_rich = loom_backend_dev_init(rich, NULL), be_plain = loom_backend_dev_init(plain, NULL);
    CHECK(be_rich && be_plain && !strcmp(loom_backend_name(be_rich), "sim-rich"), "backends");
    loom_backend_event_t ev = loom_backend_event_new(rich);
    CHECK(ev != NULL, "event");
    CHECK(loom_backend_event_record(ev, be_rich) == LOOM_OK && loom_backend_event_wait(be_plain, ev) == LOOM_OK &&
              loom_backend_event_synchronize(ev) == LOOM_OK,
          "event record/wait/synchronize");
    CHECK(stats_of(rich).n_event_records == 1, "the record went through the device");
    loom_backend_event_free(ev);
    ev = loom_backend_event_new(plain);
    CHECK(ev == NULL, "no events on the plain device");
    CHECK(loom_backend_event_record(ev, be_plain) == LOOM_OK && loom_backend_event_wait(be_plain, ev) == LOOM_OK &&
              loom_backend_event_synchronize(ev) == LOOM_OK,
          "NULL events are accepted");
    CHECK(loom_backend_synchronize(be_plain) == LOOM_OK, "synchronize");
    loom_backend_free(be_rich);
    loom_backend_free(be_plain);
    loom_sim_device_free(rich);
    loom_sim_device_free(plain);

    /* bad parameters */
    test_n_errors = 0;
    p = loom_sim_default_params();
    p.alignment = 48;
    CHECK(!loom_sim_device_new("bad", &p) && test_n_errors == 1, "alignment must be a power of two");
    CHECK(!loom_sim_device_new("", NULL) && !loom_sim_device_new(NULL, NULL), "a name is needed");
    CHECK(!loom_sim_device_is_sim(loom_backend_dev_by_name("CPU")), "the CPU is not a sim");
}

/* ---------------------------------------------------------------- async slots */

static void test_async(void) {
    struct loom_sim_params p = loom_sim_default_params();
    p.async = true;
    loom_backend_dev_t sim = loom_sim_device_new("sim-async", &p), plain = loom_sim_device_new("sim-sync", NULL);
    loom_backend_t be = loom_backend_dev_init(sim, NULL), bp = loom_backend_dev_init(plain, NULL), cpu = loom_backend_cpu_init();
    struct loom_context * ctx = test_meta_ctx(4, 0), * cctx = test_meta_ctx(4, 0), * pctx = test_meta_ctx(4, 0);
    struct loom_tensor * a = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, 64), * b = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, 64);
    struct loom_tensor * h = loom_new_tensor_1d(cctx, LOOM_TYPE_I32, 64), * q = loom_new_tensor_1d(pctx, LOOM_TYPE_I32, 64);
    loom_backend_buffer_t ba = loom_backend_alloc_ctx_tensors(ctx, be, NULL), bc = loom_backend_alloc_ctx_tensors(cctx, cpu, NULL),
                          bq = loom_backend_alloc_ctx_tensors(pctx, bp, NULL);
    int32_t v[64], r[64];
    for (int i = 0; i < 64; i++) v[i] = i * i - 7;

    CHECK(loom_backend_tensor_set_async(be, a, v, 0, sizeof v) == LOOM_OK, "set_async");
    CHECK(loom_backend_tensor_get_async(be, a, r, 0, sizeof r) == LOOM_OK && loom_backend_synchronize(be) == LOOM_OK, "get_async");
    CHECK(memcmp(r, v, sizeof v) == 0, "async round trip");
    CHECK(stats_of(sim).n_async == 2, "through the async slots (%llu)", (unsigned long long)stats_of(sim).n_async);
    CHECK(loom_backend_tensor_copy_async(be, be, a, b) == LOOM_OK, "copy_async on the device");
    CHECK(loom_backend_tensor_set(h, v, 0, sizeof v) == LOOM_OK, "set host");
    memset(r, 0, sizeof r);
    loom_backend_tensor_set(b, r, 0, sizeof r);
    CHECK(loom_backend_tensor_copy_async(cpu, be, h, b) == LOOM_OK, "copy_async host -> device");
    CHECK(loom_backend_tensor_get(b, r, 0, sizeof r) == LOOM_OK && memcmp(r, v, sizeof v) == 0, "host -> device values");
    CHECK(stats_of(sim).n_async == 4, "copies through the async slot");
    CHECK(loom_backend_tensor_copy_async(be, bp, a, q) == LOOM_OK, "copy_async to another sim: staged");
    CHECK(loom_backend_tensor_get(q, r, 0, sizeof r) == LOOM_OK && memcmp(r, v, sizeof v) == 0, "sim -> other sim values");
    /* a tensor of another device given to the async slots goes the synchronous way */
    CHECK(loom_backend_tensor_set_async(be, h, v, 0, 16) == LOOM_OK && loom_backend_tensor_set_async(be, q, v, 0, 16) == LOOM_OK,
          "set_async of foreign tensors");
    CHECK(stats_of(sim).n_async == 4, "foreign tensors bypass the async slots");
    CHECK(loom_backend_tensor_set_async(bp, q, v, 0, 16) == LOOM_OK && stats_of(plain).n_async == 0, "no async slots: synchronous");
    test_n_errors = 0;
    CHECK(loom_backend_tensor_set_async(be, a, v, 8, sizeof v) == LOOM_ERR_INVALID_ARG && test_n_errors == 1, "async range check");

    loom_backend_buffer_free(ba);
    loom_backend_buffer_free(bc);
    loom_backend_buffer_free(bq);
    loom_free(ctx);
    loom_free(cctx);
    loom_free(pctx);
    loom_backend_free(be);
    loom_backend_free(bp);
    loom_backend_free(cpu);
    loom_sim_device_free(sim);
    loom_sim_device_free(plain);
}

/* ---------------------------------------------------------------- registry and lifetime */

static void test_registry(void) {
    loom_backend_dev_t sim = loom_sim_device_new("simX", NULL);
    CHECK(loom_backend_register_device(sim) == LOOM_OK, "register");
    CHECK(loom_backend_dev_by_name("SIMX") == sim, "found by name");
    CHECK(loom_backend_dev_get(loom_backend_dev_count() - 1) == loom_backend_dev_by_name("CPU"), "the CPU stays last");
    loom_backend_dev_t twin = loom_sim_device_new("simX", NULL);
    CHECK(loom_backend_register_device(twin) == LOOM_ERR_INVALID_ARG, "a second device of that name is refused");
    loom_sim_device_free(twin);
    loom_backend_t be = loom_backend_init_by_name("simX", NULL);
    CHECK(be && loom_backend_get_device(be) == sim, "init by name");
    loom_backend_free(be);
    loom_sim_device_free(sim);
    CHECK(loom_backend_dev_by_name("simX") == NULL, "freeing unregisters");

    /* freeing a device in use is a programming error: it aborts (in a child process) */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        loom_backend_dev_t d = loom_sim_device_new("sim-busy", NULL);
        loom_backend_buffer_t b = loom_backend_buft_alloc_buffer(loom_backend_dev_buffer_type(d), 64);
        (void)b;
        loom_sim_device_free(d);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "freeing a device with a live buffer aborts");
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    test_addresses();
    test_host_memory();
    test_out_of_memory();
    test_failure_injection();
    test_capabilities();
    test_async();
    test_registry();
    loom_log_set(NULL, NULL);
    return test_finish("test-sim-device");
}
