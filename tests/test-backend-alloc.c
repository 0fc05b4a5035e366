/* test-backend-alloc.c -- property test of loom_backend_alloc_ctx_tensors_from_buft over thousands of
 * random tensor sets (counts, shapes, types, views, alignments, max_size, padding) on the CPU, on a
 * host buffer type with chosen limits, and on sim devices: every tensor lies inside exactly one
 * buffer, aligned, no two overlap, views share their base's bytes, every byte reads back exactly,
 * and a tensor larger than max_size fails with LOOM_ERR_TOO_LARGE naming it, leaving nothing behind. */
#include "backend/backend-impl.h"
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- log capture */


/* ---------------------------------------------------------------- a host buffer type with chosen limits */

struct host_buft_ctx {
    size_t align, max;
};

static void hb_free(loom_backend_buffer_t b) { free(b->context); }
static void * hb_base(loom_backend_buffer_t b) { return b->context; }
static enum loom_status hb_memset(loom_backend_buffer_t b, struct loom_tensor * t, uint8_t v, size_t o, size_t n) {
    (void)b;
    memset((uint8_t *)t->data + o, v, n);
    return LOOM_OK;
}
static enum loom_status hb_set(loom_backend_buffer_t b, struct loom_tensor * t, const void * d, size_t o, size_t n) {
    (void)b;
    memcpy((uint8_t *)t->data + o, d, n);
    return LOOM_OK;
}
static enum loom_status hb_get(loom_backend_buffer_t b, const struct loom_tensor * t, void * d, size_t o, size_t n) {
    (void)b;
    memcpy(d, (const uint8_t *)t->data + o, n);
    return LOOM_OK;
}
static enum loom_status hb_clear(loom_backend_buffer_t b, uint8_t v) {
    memset(b->context, v, b->size);
    return LOOM_OK;
}
static const struct loom_backend_buffer_i hb_iface = {
    .free_buffer = hb_free, .get_base = hb_base, .memset_tensor = hb_memset, .set_tensor = hb_set, .get_tensor = hb_get, .clear = hb_clear,
};

static const char * hbt_name(loom_backend_buffer_type_t t) { (void)t; return "test-host"; }
static loom_backend_buffer_t hbt_alloc(loom_backend_buffer_type_t t, size_t size) {
    struct host_buft_ctx * c = t->context;
    void * mem = aligned_alloc(c->align, loom_pad(size ? size : 1, c->align));
    loom_backend_buffer_t b = mem ? loom_backend_buffer_init(t, hb_iface, mem, size) : NULL;
    if (!b) free(mem);
    return b;
}
static size_t hbt_align(loom_backend_buffer_type_t t) { return ((struct host_buft_ctx *)t->context)->align; }
static size_t hbt_max(loom_backend_buffer_type_t t) { return ((struct host_buft_ctx *)t->context)->max; }
static bool hbt_is_host(loom_backend_buffer_type_t t) { (void)t; return true; }

/* ---------------------------------------------------------------- random tensor sets */

static const enum loom_type k_types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16,  LOOM_TYPE_BF16, LOOM_TYPE_I8,   LOOM_TYPE_I32,
                                         LOOM_TYPE_Q4_0, LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q6_K, LOOM_TYPE_I64};
#define N_TYPES (sizeof k_types / sizeof k_types[0])
#define MAX_TENSORS 48

struct tset {
    struct loom_context * ctx;
    struct loom_tensor * t[MAX_TENSORS];
    int n;
    struct loom_tensor * views[8];
    int n_views;
    size_t largest;  /* bytes of the largest alloc size */
};

static struct loom_tensor * random_tensor(struct loom_context * ctx, uint64_t * rng) {
    enum loom_type type = k_types[test_rand_range(rng, 0, N_TYPES - 1)];
    int64_t blck = loom_blck_size(type);
    int n_dims = (int)test_rand_range(rng, 1, 4);
    int64_t ne[4] = {1, 1, 1, 1};
    ne[0] = blck * test_rand_range(rng, 1, blck > 1 ? 3 : 64);
    for (int i = 1; i < n_dims; i++) ne[i] = test_rand_range(rng, 1, 4);
    if (test_rand_range(rng, 0, 30) == 0) ne[n_dims - 1] = 0; /* an empty tensor */
    return loom_new_tensor(ctx, type, n_dims, ne);
}

static void make_set(struct tset * s, uint64_t * rng, loom_backend_buffer_type_t buft) {
    struct loom_init_params p = {.mem_size = (MAX_TENSORS + 8) * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    memset(s, 0, sizeof *s);
    s->ctx = loom_init(p);
    s->n = (int)test_rand_range(rng, 0, 40);
    for (int i = 0; i < s->n; i++) {
        s->t[i] = random_tensor(s->ctx, rng);
        loom_format_name(s->t[i], "t%d", i);
        size_t a = loom_backend_buft_get_alloc_size(buft, s->t[i]);
        if (a > s->largest) s->largest = a;
        /* now and then a view of an earlier tensor, made before anything is allocated */
        if (i > 0 && s->n_views < 8 && test_rand_range(rng, 0, 3) == 0) {
            struct loom_tensor * base = s->t[test_rand_range(rng, 0, i - 1)];
            int64_t n = loom_nelements(base);
            if (loom_blck_size(base->type) == 1 && n >= 2) {
                struct loom_tensor * v;
                if (test_rand_range(rng, 0, 2) == 0) {
                    v = loom_transpose(s->ctx, base); /* strided: the same bytes in another order */
                } else {
                    int64_t len = test_rand_range(rng, 1, n / 2), first = test_rand_range(rng, 0, n - len);
                    v = loom_view_1d(s->ctx, base, len, (size_t)first * loom_type_size(base->type));
                }
                s->views[s->n_views++] = v;
            }
        }
    }
}

/* ---------------------------------------------------------------- checks */

static int g_multi, g_too_large, g_views; /* how much of the space the random sets covered */

struct placed {
    uintptr_t addr;
    size_t size;
    int idx;
};

static int cmp_placed(const void * a, const void * b) {
    uintptr_t x = ((const struct placed *)a)->addr, y = ((const struct placed *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Placement properties of a successful allocation. */
static void check_placement(const char * label, const struct tset * s, loom_backend_buffer_t buf, loom_backend_buffer_type_t buft) {
    size_t align = loom_backend_buft_get_alignment(buft), max = loom_backend_buft_get_max_size(buft);
    size_t n_parts = loom_backend_multi_buffer_count(buf);
    for (size_t i = 0; i < n_parts; i++) {
        loom_backend_buffer_t part = loom_backend_multi_buffer_get(buf, i);
        CHECK(loom_backend_buffer_get_size(part) <= max, "%s: part %zu of %zu bytes exceeds max_size %zu", label, i,
              loom_backend_buffer_get_size(part), max);
        CHECK(!loom_backend_buffer_is_multi(part), "%s: nested multi-buffer", label);
    }
    struct placed pl[MAX_TENSORS];
    int np = 0;
    for (int i = 0; i < s->n; i++) {
        const struct loom_tensor * t = s->t[i];
        size_t sz = loom_backend_buft_get_alloc_size(buft, t);
        CHECK(t->buffer && t->data, "%s: '%s' not placed", label, t->name);
        if (!t->buffer || !t->data) continue;
        CHECK((uintptr_t)t->data % align == 0, "%s: '%s' at %p not aligned to %zu", label, t->name, t->data, align);
        int holders = 0;
        for (size_t k = 0; k < n_parts; k++) {
            loom_backend_buffer_t part = loom_backend_multi_buffer_get(buf, k);
            uintptr_t base = (uintptr_t)loom_backend_buffer_get_base(part), a = (uintptr_t)t->data;
            size_t psz = loom_backend_buffer_get_size(part);
            if (a >= base && a - base <= psz && sz <= psz - (a - base)) {
                holders++;
                CHECK(t->buffer == part, "%s: '%s' names another buffer than the one holding it", label, t->name);
            }
        }
        CHECK(holders == 1, "%s: '%s' lies inside %d buffers", label, t->name, holders);
        pl[np++] = (struct placed){.addr = (uintptr_t)t->data, .size = sz ? sz : 1, .idx = i};
    }
    qsort(pl, (size_t)np, sizeof pl[0], cmp_placed);
    for (int i = 0; i + 1 < np; i++) {
        CHECK(pl[i].addr + pl[i].size <= pl[i + 1].addr, "%s: '%s' [%#jx, +%zu) overlaps '%s' at %#jx", label,
              s->t[pl[i].idx]->name, (uintmax_t)pl[i].addr, pl[i].size, s->t[pl[i + 1].idx]->name, (uintmax_t)pl[i + 1].addr);
    }
    for (int i = 0; i < s->n_views; i++) {
        const struct loom_tensor * v = s->views[i];
        CHECK(v->buffer == v->view_src->buffer, "%s: view %d has another buffer than its base", label, i);
        CHECK((uint8_t *)v->data == (uint8_t *)v->view_src->data + v->view_offs, "%s: view %d address", label, i);
    }
}

/* Writes random bytes to every tensor, then reads all back: exact, and views see their base's bytes. */
static void check_roundtrip(const char * label, const struct tset * s, uint64_t * rng) {
    uint8_t * want[MAX_TENSORS] = {0};
    for (int i = 0; i < s->n; i++) {
        size_t n = loom_nbytes(s->t[i]);
        want[i] = malloc(n + 1);
        for (size_t k = 0; k < n; k++) want[i][k] = (uint8_t)test_rand_u64(rng);
        CHECK(loom_backend_tensor_set(s->t[i], want[i], 0, n) == LOOM_OK, "%s: set '%s'", label, s->t[i]->name);
    }
    for (int i = 0; i < s->n; i++) {
        size_t n = loom_nbytes(s->t[i]);
        uint8_t * got = malloc(n + 1);
        CHECK(loom_backend_tensor_get(s->t[i], got, 0, n) == LOOM_OK, "%s: get '%s'", label, s->t[i]->name);
        CHECK(memcmp(got, want[i], n) == 0, "%s: '%s' does not read back its %zu bytes", label, s->t[i]->name, n);
        free(got);
    }
    for (int i = 0; i < s->n_views; i++) {
        const struct loom_tensor * v = s->views[i];
        int b = 0;
        while (s->t[b] != v->view_src) b++;
        size_t n = loom_nbytes(v);
        uint8_t * got = malloc(n);
        CHECK(loom_backend_tensor_get(v, got, 0, n) == LOOM_OK, "%s: get view %d", label, i);
        CHECK(memcmp(got, want[b] + v->view_offs, n) == 0, "%s: view %d does not read its base's bytes", label, i);
        free(got);
    }
    for (int i = 0; i < s->n; i++) free(want[i]);
}

static bool nothing_placed(const struct tset * s) {
    for (int i = 0; i < s->n; i++) {
        if (s->t[i]->buffer || s->t[i]->data) return false;
    }
    for (int i = 0; i < s->n_views; i++) {
        if (s->views[i]->buffer || s->views[i]->data) return false;
    }
    return true;
}

/* One random set on 'buft'; 'too_large' shrinks max_size below the largest tensor (the caller
 * made the type report the given max). */
static void run_set(const char * label, loom_backend_buffer_type_t buft, loom_backend_dev_t sim, uint64_t * rng, bool expect_too_large,
                    const struct tset * s) {
    test_n_errors = 0;
    test_last_error[0] = 0;
    enum loom_status st = LOOM_OK;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(s->ctx, buft, &st);
    if (expect_too_large) {
        g_too_large++;
        CHECK(st == LOOM_ERR_TOO_LARGE && !buf, "%s: expected TOO_LARGE, got %s", label, loom_status_str(st));
        CHECK(test_n_errors == 1, "%s: %d errors logged", label, test_n_errors);
        bool named = false;
        for (int i = 0; i < s->n; i++) {
            char needle[80];
            snprintf(needle, sizeof needle, "'%s'", s->t[i]->name);
            if (strstr(test_last_error, needle) && loom_backend_buft_get_alloc_size(buft, s->t[i]) > loom_backend_buft_get_max_size(buft)) named = true;
        }
        CHECK(named, "%s: the error does not name a tensor larger than max_size: %s", label, test_last_error);
        CHECK(nothing_placed(s), "%s: tensors placed after a failed allocation", label);
        if (sim) {
            struct loom_sim_stats ss;
            loom_sim_get_stats(sim, &ss);
            CHECK(ss.n_buffers == 0 && ss.bytes_allocated == 0, "%s: sim buffers left behind", label);
        }
        loom_backend_buffer_free(buf);
        return;
    }
    CHECK(st == LOOM_OK, "%s: status %s (%s)", label, loom_status_str(st), test_last_error);
    CHECK((buf != NULL) == (s->n > 0), "%s: buffer %p for %d tensors", label, (void *)buf, s->n);
    if (buf && st == LOOM_OK) {
        g_multi += loom_backend_buffer_is_multi(buf);
        g_views += s->n_views;
        check_placement(label, s, buf, buft);
        check_roundtrip(label, s, rng);
        CHECK(loom_backend_buffer_clear(buf, 0) == LOOM_OK, "%s: clear", label);
    }
    loom_backend_buffer_free(buf);
}

static size_t random_align(uint64_t * rng) { return (size_t)1 << test_rand_range(rng, 0, 12); }

/* max_size for a set whose largest tensor needs 'largest' bytes: unlimited, roomy, or tight. */
static size_t random_max(uint64_t * rng, size_t largest, bool too_large) {
    if (too_large) return largest > 1 ? (size_t)test_rand_range(rng, 1, (int64_t)largest - 1) : 0;
    switch (test_rand_range(rng, 0, 3)) {
    case 0: return SIZE_MAX;
    case 1: return largest + (size_t)test_rand_range(rng, 0, 64);
    default: return largest + (size_t)test_rand_range(rng, 0, 8 * (int64_t)largest + 4096);
    }
}

static int g_sets;

static void run_cpu(uint64_t * rng, int iters) {
    for (int it = 0; it < iters; it++) {
        struct tset s;
        make_set(&s, rng, loom_backend_cpu_buffer_type());
        char label[64];
        snprintf(label, sizeof label, "cpu set %d", it);
        run_set(label, loom_backend_cpu_buffer_type(), NULL, rng, false, &s);
        loom_free(s.ctx);
        g_sets++;
    }
}

static void run_host_limits(uint64_t * rng, int iters) {
    struct host_buft_ctx c;
    struct loom_backend_buffer_type buft = {
        .iface = {.get_name = hbt_name, .alloc_buffer = hbt_alloc, .get_alignment = hbt_align, .get_max_size = hbt_max, .is_host = hbt_is_host},
        .device = loom_cpu_device(),
        .context = &c,
    };
    for (int it = 0; it < iters; it++) {
        c.align = random_align(rng);
        if (c.align < sizeof(void *)) c.align = sizeof(void *); /* aligned_alloc's floor */
        c.max = SIZE_MAX;
        struct tset s;
        make_set(&s, rng, &buft);
        bool too_large = s.largest > 1 && test_rand_range(rng, 0, 9) == 0;
        c.max = random_max(rng, s.largest, too_large);
        if (c.max == 0) too_large = false, c.max = SIZE_MAX;
        char label[96];
        snprintf(label, sizeof label, "host set %d (align %zu, max %zu)", it, c.align, c.max);
        run_set(label, &buft, NULL, rng, too_large, &s);
        loom_free(s.ctx);
        g_sets++;
    }
}

static void run_sim(uint64_t * rng, int iters) {
    for (int it = 0; it < iters; it++) {
        struct loom_sim_params p = loom_sim_default_params();
        p.alignment = random_align(rng);
        p.alloc_extra = test_rand_range(rng, 0, 2) == 0 ? (size_t)test_rand_range(rng, 1, 300) : 0;
        loom_backend_dev_t probe = loom_sim_device_new("sim-probe", &p); /* for alloc sizes with the padding */
        struct tset s;
        make_set(&s, rng, loom_backend_dev_buffer_type(probe));
        loom_sim_device_free(probe);
        bool too_large = s.largest > 1 && test_rand_range(rng, 0, 9) == 0;
        p.max_buffer_size = random_max(rng, s.largest, too_large);
        if (p.max_buffer_size == 0) too_large = false, p.max_buffer_size = SIZE_MAX;
        loom_backend_dev_t sim = loom_sim_device_new("sim-prop", &p);
        char label[128];
        snprintf(label, sizeof label, "sim set %d (align %zu, max %zu, extra %zu)", it, p.alignment, p.max_buffer_size, p.alloc_extra);
        run_set(label, loom_backend_dev_buffer_type(sim), sim, rng, too_large, &s);
        struct loom_sim_stats ss;
        loom_sim_get_stats(sim, &ss);
        CHECK(ss.n_buffers == 0 && ss.bytes_allocated == 0, "%s: %zu buffers, %zu bytes left", label, ss.n_buffers, ss.bytes_allocated);
        for (int i = 0; i < s.n && !too_large; i++) {
            if (s.t[i]->data) CHECK(loom_sim_is_device_addr(s.t[i]->data), "%s: '%s' has a host address", label, s.t[i]->name);
        }
        loom_sim_device_free(sim);
        loom_free(s.ctx);
        g_sets++;
    }
}

/* Multi-buffers hold plain buffers of one type; anything else is refused and nothing is freed. */
static void test_multi_buffer_rules(void) {
    loom_backend_dev_t sim = loom_sim_device_new("sim-multi", NULL);
    loom_backend_buffer_t c1 = loom_backend_buft_alloc_buffer(loom_backend_cpu_buffer_type(), 100);
    loom_backend_buffer_t c2 = loom_backend_buft_alloc_buffer(loom_backend_cpu_buffer_type(), 50);
    loom_backend_buffer_t s1 = loom_backend_buft_alloc_buffer(loom_backend_dev_buffer_type(sim), 100);
    loom_backend_buffer_t mixed[2] = {c1, s1}, same[2] = {c1, c2};
    test_n_errors = 0;
    CHECK(loom_backend_multi_buffer_new(mixed, 2) == NULL && test_n_errors == 1, "parts of two buffer types are refused");
    loom_backend_buffer_t m = loom_backend_multi_buffer_new(same, 2);
    CHECK(m && loom_backend_buffer_get_size(m) == 150 && loom_backend_multi_buffer_count(m) == 2, "a multi-buffer of two parts");
    loom_backend_buffer_t nested[1] = {m};
    CHECK(loom_backend_multi_buffer_new(nested, 1) == NULL, "nesting is refused");
    CHECK(loom_backend_multi_buffer_new(same, 0) == NULL, "no parts");
    loom_backend_buffer_set_usage(m, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    CHECK(loom_backend_buffer_get_usage(c2) == LOOM_BACKEND_BUFFER_USAGE_WEIGHTS, "usage reaches the parts");
    loom_backend_buffer_free(m); /* frees c1 and c2 */
    loom_backend_buffer_free(s1);
    loom_sim_device_free(sim);
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    uint64_t rng = 0x10057A11C0FFEEull;
    int64_t t0 = loom_time_us();
    run_cpu(&rng, 800);
    run_host_limits(&rng, 1200);
    run_sim(&rng, 1500);
    test_multi_buffer_rules();
    fprintf(stderr, "test-backend-alloc: %d random tensor sets (%d split over several buffers, %d too large, %d views) in %.2f s\n",
            g_sets, g_multi, g_too_large, g_views, (loom_time_us() - t0) / 1e6);
    CHECK(g_multi > 100 && g_too_large > 50 && g_views > 500, "the random sets cover splitting, too-large tensors and views");
    loom_log_set(NULL, NULL);
    return test_finish("test-backend-alloc");
}
