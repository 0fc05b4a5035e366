/* test-backend-views.c -- views across contexts and buffers, on the CPU and on a sim: a view made in
 * another context (before or after its base was allocated) reads and writes exactly its base's
 * bytes; views of bases in any part of a multi-buffer; range errors touch nothing; view_init and
 * alloc_ctx_tensors errors leave every tensor as it was. */
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <stdlib.h>
#include <string.h>

static int g_n_errors;

static void quiet_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) g_n_errors++;
    if (getenv("LOOM_DEBUG")) fprintf(stderr, "[log] %s\n", text);
}

/* Reads all bytes of 't' into a new allocation. */
static uint8_t * read_all(const struct loom_tensor * t) {
    size_t n = loom_nbytes(t);
    uint8_t * b = malloc(n ? n : 1);
    CHECK(loom_backend_tensor_get(t, b, 0, n) == LOOM_OK, "read '%s'", t->name);
    return b;
}

/* A [8, 6] F32 base; views made in a second context after it was allocated, a third before. */
static void test_views_across_contexts(const char * label, loom_backend_buffer_type_t buft) {
    struct loom_context * ca = test_meta_ctx(4, 0), * cb = test_meta_ctx(8, 0), * cc = test_meta_ctx(4, 0);
    struct loom_tensor * a = loom_new_tensor_2d(ca, LOOM_TYPE_F32, 8, 6);
    loom_set_name(a, "a");
    struct loom_tensor * early = loom_view_2d(cc, a, 3, 2, a->nb[1], 4 * a->nb[1] + 5 * sizeof(float)); /* before allocation */
    CHECK(!early->buffer && !early->data, "%s: a view of an unallocated base has no storage", label);

    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ca, buft, &st);
    CHECK(buf && st == LOOM_OK, "%s: alloc", label);
    float v[48];
    for (int i = 0; i < 48; i++) v[i] = (float)i + 0.25f;
    CHECK(loom_backend_tensor_set(a, v, 0, sizeof v) == LOOM_OK, "%s: set base", label);

    /* made after allocation: storage comes with it */
    struct loom_tensor * row = loom_view_1d(cb, a, 8, 3 * a->nb[1]);
    struct loom_tensor * col = loom_view_2d(cb, a, 1, 6, a->nb[1], 2 * sizeof(float)); /* strided: column 2 */
    struct loom_tensor * tr = loom_transpose(cb, a);
    CHECK(row->buffer == a->buffer && col->buffer == a->buffer, "%s: views share the base's buffer", label);
    float r[8];
    CHECK(loom_backend_tensor_get(row, r, 0, sizeof r) == LOOM_OK, "%s: get row", label);
    for (int i = 0; i < 8; i++) CHECK(r[i] == v[24 + i], "%s: row[%d] = %g", label, i, r[i]);

    /* a strided view's raw bytes span its first to last element, gaps included */
    CHECK(loom_nbytes(col) == 5 * a->nb[1] + sizeof(float), "%s: column extent", label);
    float * c = (float *)read_all(col);
    for (int i = 0; i < 6; i++) CHECK(c[i * 8] == v[i * 8 + 2], "%s: column[%d]", label, i);
    free(c);
    CHECK(loom_nbytes(tr) == loom_nbytes(a), "%s: a transpose spans its base", label);

    /* writing through a view hits the base's bytes and nothing else */
    float w[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    CHECK(loom_backend_tensor_set(row, w, 2 * sizeof(float), 3 * sizeof(float)) == LOOM_OK, "%s: set through row", label);
    CHECK(loom_backend_tensor_memset(col, 0xFF, 0, sizeof(float)) == LOOM_OK, "%s: memset through column", label);
    float * got = (float *)read_all(a);
    float want[48];
    memcpy(want, v, sizeof want);
    memcpy(&want[24 + 2], w, 3 * sizeof(float));
    memset(&want[2], 0xFF, sizeof(float));
    CHECK(memcmp(got, want, sizeof want) == 0, "%s: base bytes after writes through views", label);
    free(got);

    /* out of range through a view: refused, nothing touched */
    g_n_errors = 0;
    CHECK(loom_backend_tensor_set(row, w, 4, sizeof w) == LOOM_ERR_INVALID_ARG, "%s: set past the view's end", label);
    CHECK(loom_backend_tensor_get(row, r, sizeof r, 1) == LOOM_ERR_INVALID_ARG, "%s: get past the view's end", label);
    CHECK(g_n_errors == 2, "%s: range errors are logged", label);
    got = (float *)read_all(a);
    CHECK(memcmp(got, want, sizeof want) == 0, "%s: a refused write changed the base", label);
    free(got);

    /* the early view: readable through its base even before view_init, then initialised */
    float e[8];
    CHECK(loom_backend_tensor_get(early, e, 0, 3 * sizeof(float)) == LOOM_OK, "%s: get through an uninitialised view", label);
    CHECK(e[0] == want[37] && e[2] == want[39], "%s: early view values", label);
    struct loom_tensor * dst = loom_new_tensor_1d(cb, LOOM_TYPE_F32, 11); /* the extent of 'early': 8 + 3 floats */
    loom_backend_buffer_t buf2 = loom_backend_alloc_ctx_tensors_from_buft(cb, buft, &st);
    CHECK(buf2 && st == LOOM_OK, "%s: alloc the second context (views + one tensor)", label);
    CHECK(loom_backend_tensor_copy(early, dst) == LOOM_OK, "%s: copy from an uninitialised view", label);
    float d[11];
    CHECK(loom_backend_tensor_get(dst, d, 0, sizeof d) == LOOM_OK, "%s: get copy", label);
    CHECK(memcmp(d, &want[37], sizeof d) == 0, "%s: the copy holds the view's bytes", label);
    CHECK(loom_backend_view_init(early) == LOOM_OK, "%s: view_init", label);
    CHECK(early->buffer == a->buffer && (uint8_t *)early->data == (uint8_t *)a->data + early->view_offs, "%s: early view storage", label);
    CHECK(loom_backend_view_init(a) == LOOM_ERR_INVALID_ARG, "%s: view_init of a non-view", label);

    loom_backend_buffer_free(buf2);
    loom_backend_buffer_free(buf);
    loom_free(cc);
    loom_free(cb);
    loom_free(ca);
}

/* Bases spread over the parts of a multi-buffer; views of each read their own base. */
static void test_views_across_buffers(const char * label, loom_backend_buffer_type_t buft, size_t max) {
    enum { NB = 7 };
    struct loom_context * ca = test_meta_ctx(NB, 0), * cb = test_meta_ctx(3 * NB + 1, 0);
    struct loom_tensor * base[NB];
    for (int i = 0; i < NB; i++) {
        base[i] = loom_new_tensor_1d(ca, LOOM_TYPE_I32, 200); /* 800 bytes each */
        loom_format_name(base[i], "base%d", i);
    }
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ca, buft, &st);
    CHECK(buf && st == LOOM_OK, "%s: alloc", label);
    if (!buf) return;
    if (max < SIZE_MAX) CHECK(loom_backend_multi_buffer_count(buf) >= 3, "%s: split over %zu buffers", label, loom_backend_multi_buffer_count(buf));
    for (int i = 0; i < NB; i++) {
        int32_t v[200];
        for (int k = 0; k < 200; k++) v[k] = i * 1000 + k;
        loom_backend_tensor_set(base[i], v, 0, sizeof v);
    }
    for (int i = 0; i < NB; i++) {
        struct loom_tensor * view = loom_view_1d(cb, base[i], 50, 100 * sizeof(int32_t));
        struct loom_tensor * perm = loom_view_2d(cb, base[i], 10, 20, 10 * sizeof(int32_t), 0);
        perm = loom_permute(cb, perm, 1, 0, 2, 3);
        int32_t r[50];
        CHECK(loom_backend_tensor_get(view, r, 0, sizeof r) == LOOM_OK, "%s: get", label);
        for (int k = 0; k < 50; k++) CHECK(r[k] == i * 1000 + 100 + k, "%s: view of base%d [%d] = %d", label, i, k, r[k]);
        CHECK(loom_nbytes(perm) == 800, "%s: permuted view extent", label);
        int32_t * all = (int32_t *)read_all(perm);
        CHECK(all[199] == i * 1000 + 199, "%s: permuted view of base%d", label, i);
        free(all);
    }
    loom_backend_buffer_free(buf);
    loom_free(cb);
    loom_free(ca);
}

/* A context holding a view of a base that was never allocated: alloc_ctx fails, undoes everything. */
static void test_view_of_unallocated(const char * label, loom_backend_buffer_type_t buft, loom_backend_dev_t sim) {
    struct loom_context * ca = test_meta_ctx(2, 0), * cb = test_meta_ctx(4, 0);
    struct loom_tensor * a = loom_new_tensor_1d(ca, LOOM_TYPE_F32, 64);
    struct loom_tensor * t1 = loom_new_tensor_1d(cb, LOOM_TYPE_F32, 16);
    struct loom_tensor * v = loom_view_1d(cb, a, 8, 0);
    struct loom_tensor * t2 = loom_new_tensor_1d(cb, LOOM_TYPE_F16, 16);
    enum loom_status st = LOOM_OK;
    g_n_errors = 0;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(cb, buft, &st);
    CHECK(!buf && st == LOOM_ERR_INVALID_ARG && g_n_errors >= 1, "%s: a view of an unallocated base is an error (%s)", label, loom_status_str(st));
    CHECK(!t1->buffer && !t1->data && !t2->buffer && !t2->data && !v->buffer && !v->data, "%s: tensors left placed", label);
    if (sim) {
        struct loom_sim_stats ss;
        loom_sim_get_stats(sim, &ss);
        CHECK(ss.n_buffers == 0, "%s: buffers left behind", label);
    }
    CHECK(loom_backend_view_init(v) == LOOM_ERR_INVALID_ARG, "%s: view_init of an unallocated base", label);
    loom_free(cb);
    loom_free(ca);
}

int main(void) {
    loom_log_set(quiet_log, NULL);
    test_views_across_contexts("cpu", loom_backend_cpu_buffer_type());
    test_views_across_buffers("cpu", loom_backend_cpu_buffer_type(), SIZE_MAX);
    test_view_of_unallocated("cpu", loom_backend_cpu_buffer_type(), NULL);

    struct loom_sim_params p = loom_sim_default_params();
    p.max_buffer_size = 2048; /* two 800-byte tensors per buffer at alignment 256 */
    loom_backend_dev_t sim = loom_sim_device_new("sim-views", &p);
    loom_backend_buffer_type_t sbuft = loom_backend_dev_buffer_type(sim);
    test_views_across_contexts("sim", sbuft);
    test_views_across_buffers("sim", sbuft, p.max_buffer_size);
    test_view_of_unallocated("sim", sbuft, sim);
    loom_sim_device_free(sim);
    loom_log_set(NULL, NULL);
    return test_finish("test-backend-views");
}
