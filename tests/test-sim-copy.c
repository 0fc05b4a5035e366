/* test-sim-copy.c -- loom_backend_tensor_copy between the CPU, sim0 and sim1, whole tensors and views:
 * every pair gives the source's exact bytes; sim0 -> sim0 copies on the device, sim0 -> sim1 is
 * staged through the host (the byte counters show which path ran); a round trip through all three
 * is the identity; mismatched sizes are refused. */
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <stdlib.h>
#include <string.h>

static void quiet_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    (void)level;
    if (getenv("LOOM_DEBUG")) fprintf(stderr, "[log] %s\n", text);
}

enum { N_DEV = 3, N_ELEM = 3000 };

struct place {
    const char * name;
    loom_backend_dev_t dev;  /* NULL for the CPU */
    struct loom_context * ctx;
    struct loom_tensor * t;  /* F16 [N_ELEM] */
    struct loom_tensor * v;  /* a strided view: 10 rows of 50 out of rows of 100, from element 7 */
    loom_backend_buffer_t buf;
};

static struct loom_sim_stats stats_of(loom_backend_dev_t dev) {
    struct loom_sim_stats s;
    loom_sim_get_stats(dev, &s);
    return s;
}

static void fill_random(struct loom_tensor * t, uint64_t * rng, uint8_t * out) {
    size_t n = loom_nbytes(t);
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)test_rand_u64(rng);
    CHECK(loom_backend_tensor_set(t, out, 0, n) == LOOM_OK, "fill '%s'", t->name);
}

static bool same_bytes(const struct loom_tensor * t, const uint8_t * want) {
    size_t n = loom_nbytes(t);
    uint8_t * got = malloc(n);
    bool ok = loom_backend_tensor_get(t, got, 0, n) == LOOM_OK && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

int main(void) {
    loom_log_set(quiet_log, NULL);
    loom_backend_dev_t sim0 = loom_sim_device_new("sim0-copy", NULL), sim1 = loom_sim_device_new("sim1-copy", NULL);
    struct place pl[N_DEV] = {{.name = "cpu"}, {.name = "sim0", .dev = sim0}, {.name = "sim1", .dev = sim1}};
    for (int i = 0; i < N_DEV; i++) {
        struct loom_init_params p = {.mem_size = 8 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
        pl[i].ctx = loom_init(p);
        pl[i].t = loom_new_tensor_1d(pl[i].ctx, LOOM_TYPE_F16, N_ELEM);
        loom_format_name(pl[i].t, "t-%s", pl[i].name);
        pl[i].v = loom_view_2d(pl[i].ctx, pl[i].t, 50, 10, 100 * sizeof(uint16_t), 7 * sizeof(uint16_t));
        loom_backend_buffer_type_t buft = pl[i].dev ? loom_backend_dev_buffer_type(pl[i].dev) : loom_backend_cpu_buffer_type();
        enum loom_status st;
        pl[i].buf = loom_backend_alloc_ctx_tensors_from_buft(pl[i].ctx, buft, &st);
        CHECK(pl[i].buf && st == LOOM_OK, "alloc on %s", pl[i].name);
    }
    uint64_t rng = 0xC0B1;
    size_t n = loom_nbytes(pl[0].t), nv = loom_nbytes(pl[0].v);
    uint8_t * want = malloc(n), * wantv = malloc(nv), * scratch = malloc(n);

    for (int s = 0; s < N_DEV; s++) {
        for (int d = 0; d < N_DEV; d++) {
            if (s == d) continue;
            /* whole tensors */
            fill_random(pl[s].t, &rng, want);
            fill_random(pl[d].t, &rng, scratch);
            CHECK(loom_backend_tensor_copy(pl[s].t, pl[d].t) == LOOM_OK, "copy %s -> %s", pl[s].name, pl[d].name);
            CHECK(same_bytes(pl[d].t, want), "copy %s -> %s: bytes differ", pl[s].name, pl[d].name);
            /* strided views: the raw extent moves, bytes outside it stay */
            fill_random(pl[s].t, &rng, want);
            fill_random(pl[d].t, &rng, scratch);
            memcpy(wantv, want + 7 * sizeof(uint16_t), nv);
            CHECK(loom_backend_tensor_copy(pl[s].v, pl[d].v) == LOOM_OK, "view copy %s -> %s", pl[s].name, pl[d].name);
            CHECK(same_bytes(pl[d].v, wantv), "view copy %s -> %s: bytes differ", pl[s].name, pl[d].name);
            memcpy(scratch + 7 * sizeof(uint16_t), wantv, nv);
            CHECK(same_bytes(pl[d].t, scratch), "view copy %s -> %s touched bytes outside the view", pl[s].name, pl[d].name);
        }
    }

    /* which path ran: on the device for sim0 -> sim0, staged for sim0 -> sim1 */
    struct loom_init_params p = {.mem_size = 4 * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct loom_context * c2 = loom_init(p);
    struct loom_tensor * t2 = loom_new_tensor_1d(c2, LOOM_TYPE_F16, N_ELEM);
    loom_backend_buffer_t b2 = loom_backend_alloc_ctx_tensors_from_buft(c2, loom_backend_dev_buffer_type(sim0), NULL);
    fill_random(pl[1].t, &rng, want);
    loom_sim_reset_stats(sim0);
    loom_sim_reset_stats(sim1);
    CHECK(loom_backend_tensor_copy(pl[1].t, t2) == LOOM_OK && same_bytes(t2, want), "sim0 -> sim0");
    struct loom_sim_stats s0 = stats_of(sim0);
    CHECK(s0.bytes_copied == n && s0.bytes_set == 0 && s0.bytes_get == n, "sim0 -> sim0 copied on the device (the check read %zu)", n);
    loom_sim_reset_stats(sim0);
    CHECK(loom_backend_tensor_copy(pl[1].t, pl[2].t) == LOOM_OK, "sim0 -> sim1");
    s0 = stats_of(sim0);
    struct loom_sim_stats s1 = stats_of(sim1);
    CHECK(s0.bytes_get == n && s1.bytes_set == n && s0.bytes_copied == 0 && s1.bytes_copied == 0, "sim0 -> sim1 staged through the host");

    /* a round trip through every device is the identity */
    fill_random(pl[0].t, &rng, want);
    CHECK(loom_backend_tensor_copy(pl[0].t, pl[1].t) == LOOM_OK && loom_backend_tensor_copy(pl[1].t, pl[2].t) == LOOM_OK &&
              loom_backend_tensor_copy(pl[2].t, t2) == LOOM_OK && loom_backend_tensor_copy(t2, pl[0].t) == LOOM_OK,
          "round trip");
    CHECK(same_bytes(pl[0].t, want), "cpu -> sim0 -> sim1 -> sim0 -> cpu changed the bytes");

    CHECK(loom_backend_tensor_copy(pl[0].v, pl[1].t) == LOOM_ERR_INVALID_ARG, "sizes must match");

    loom_backend_buffer_free(b2);
    loom_free(c2);
    for (int i = 0; i < N_DEV; i++) {
        loom_backend_buffer_free(pl[i].buf);
        loom_free(pl[i].ctx);
    }
    free(want);
    free(wantv);
    free(scratch);
    loom_sim_device_free(sim0);
    loom_sim_device_free(sim1);
    loom_log_set(NULL, NULL);
    return test_finish("test-sim-copy");
}
