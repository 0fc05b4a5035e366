/* test-cuda.c -- the CUDA device against the shared double-precision reference (test-ref.h): every op for
 * F32/F16/BF16 in several layouts (contiguous, transposed, permuted, strided views, broadcast,
 * odd sizes), multi-op graphs, pinned and zero-copy (mmap) host memory, max buffer splitting,
 * out-of-memory reporting, async copies and events. Skips (exit 77) without a GPU. */
#include "loom-alloc.h"
#include "loom-cpu.h"
#include "loom-cuda.h"
#include "test-ref.h"
#include "test-util.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static loom_backend_dev_t g_dev;
static loom_backend_t g_be;
static loom_backend_buffer_type_t g_buft; /* where tc_run places a case's tensors */
static uint64_t g_rng = 0x1234567ull;
static int g_cases;
static bool g_verbose;

/* ================================================================ log capture */

static char g_log[8192];
static bool g_capture;

static void log_cb(enum loom_log_level level, const char * text, void * ud) {
    (void)ud;
    if (g_capture) {
        size_t n = strlen(g_log);
        snprintf(g_log + n, sizeof g_log - n, "%s\n", text);
    }
    if (!g_capture || g_verbose) fprintf(stderr, "[%d] %s\n", (int)level, text);
}

static void capture_begin(void) {
    g_log[0] = 0;
    g_capture = true;
}
static void capture_end(void) { g_capture = false; }

/* ================================================================ host copies of tensor storage */

#define MAX_COPIES 128

struct host_copy {
    const struct loom_tensor * base;
    uint8_t * before; /* uploaded (leafs) */
    uint8_t * after;  /* read back after compute */
    size_t n;
    bool leaf;
};

static struct host_copy g_copies[MAX_COPIES];
static int g_n_copies;

static struct host_copy * copy_of(const struct loom_tensor * base) {
    for (int i = 0; i < g_n_copies; i++) {
        if (g_copies[i].base == base) return &g_copies[i];
    }
    return NULL;
}

static void copies_clear(void) {
    for (int i = 0; i < g_n_copies; i++) {
        free(g_copies[i].before);
        free(g_copies[i].after);
    }
    g_n_copies = 0;
}

static const struct loom_tensor * base_of(const struct loom_tensor * t, size_t * offs) {
    if (t->view_src) {
        *offs = t->view_offs;
        return t->view_src;
    }
    *offs = 0;
    return t;
}

static size_t elem_offset(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
}

/* Leafs whose name starts with "cache" are read as read back (a KV cache that CPY nodes of the
 * graph write before other nodes read it), when set. */
static bool g_caches_after;

/* The host image a source is read from: leafs as uploaded, computed tensors as read back. */
static const uint8_t * source_image(const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * b = base_of(t, &offs);
    struct host_copy * c = copy_of(b);
    if (!c) return NULL;
    const bool after = !c->leaf || (g_caches_after && !strncmp(b->name, "cache", 5));
    return after ? c->after : c->before;
}

/* Value of a source element (as source_image has it). */
static double sv(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return test_view_get(&(struct test_view){t, source_image(t)}, i0, i1, i2, i3);
}

/* Value of an element of a computed node, as read back. */
static double ov(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    size_t offs;
    struct host_copy * c = copy_of(base_of(t, &offs));
    return test_view_get(&(struct test_view){t, c ? c->after : NULL}, i0, i1, i2, i3);
}

/* ================================================================ random data */

static int32_t g_i32_lo = 0, g_i32_hi = 0; /* range of random I32 leaf data */
/* optional: adjusts a leaf's host bytes before upload */
static void (*g_fixup)(const struct loom_tensor * t, uint8_t * mem);

static void fill_random(const struct loom_tensor * t, uint8_t * mem, size_t n) {
    size_t es = loom_type_size(t->type);
    for (size_t off = 0; off + es <= n; off += es) {
        switch (t->type) {
        case LOOM_TYPE_F32: {
            float v = (float)test_rand_normal(&g_rng);
            memcpy(mem + off, &v, 4);
            break;
        }
        case LOOM_TYPE_F16: {
            uint16_t h = loom_fp32_to_fp16((float)test_rand_normal(&g_rng));
            memcpy(mem + off, &h, 2);
            break;
        }
        case LOOM_TYPE_BF16: {
            uint16_t h = loom_fp32_to_bf16((float)test_rand_normal(&g_rng));
            memcpy(mem + off, &h, 2);
            break;
        }
        case LOOM_TYPE_I32: {
            int32_t v = (int32_t)test_rand_range(&g_rng, g_i32_lo, g_i32_hi);
            memcpy(mem + off, &v, 4);
            break;
        }
        default: memset(mem + off, 0, es);
        }
    }
    const struct loom_type_traits * tr = loom_type_get_traits(t->type);
    if (loom_blck_size(t->type) > 1 && tr && tr->from_float) { /* quantized: normal values, coded block by block */
        const int64_t nel = (int64_t)(n / es) * loom_blck_size(t->type);
        float * x = malloc((size_t)nel * sizeof(float));
        for (int64_t i = 0; i < nel; i++) x[i] = (float)test_rand_normal(&g_rng);
        tr->from_float(x, mem, nel);
        free(x);
    }
}

/* ================================================================ layouts */

enum layout { L_CONT, L_TRANS, L_PERM, L_STRIDED, L_COUNT };
static const char * const layout_names[L_COUNT] = {"contiguous", "transposed", "permuted", "strided"};

/* A tensor of logical shape 'ne' and 'type' laid out as 'l': transposed (a transpose of a dense
 * tensor: nb0 > nb1), permuted (dims of a dense base shuffled), or strided (a view into a larger
 * base with padded rows and an offset). */
static struct loom_tensor * mk(struct loom_context * ctx, enum loom_type type, const int64_t * ne, enum layout l) {
    switch (l) {
    case L_TRANS: {
        struct loom_tensor * b = loom_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
        return loom_transpose(ctx, b);
    }
    case L_PERM: {
        /* result.ne[axis_i] = base.ne[i] with axes (1, 3, 0, 2) */
        struct loom_tensor * b = loom_new_tensor_4d(ctx, type, ne[1], ne[3], ne[0], ne[2]);
        return loom_permute(ctx, b, 1, 3, 0, 2);
    }
    case L_STRIDED: {
        struct loom_tensor * b = loom_new_tensor_4d(ctx, type, ne[0] + 3, ne[1] + 1, ne[2], ne[3] + 1);
        size_t es = loom_type_size(type);
        return loom_view_4d(ctx, b, ne[0], ne[1], ne[2], ne[3], b->nb[1], b->nb[2], b->nb[3], 2 * es + b->nb[1]);
    }
    default: return loom_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
}

static int64_t * NE(int64_t a, int64_t b, int64_t c, int64_t d) {
    static int64_t ring[16][4];
    static int k;
    int64_t * r = ring[k++ % 16];
    r[0] = a;
    r[1] = b;
    r[2] = c;
    r[3] = d;
    return r;
}

/* ================================================================ running a case */

static struct loom_context * tc_begin(void) {
    struct loom_init_params p = {.mem_size = 256 * loom_tensor_overhead() + loom_graph_overhead(256), .mem_buffer = NULL, .no_alloc = true};
    return loom_init(p);
}

/* Verifies one computed node against the shared reference (test-ref.h); returns its NMSE. */
static double check_node(const struct loom_tensor * node, const char * name) {
    struct test_view src[LOOM_MAX_SRC] = {{0}};
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        if (!node->src[k]) continue;
        src[k] = (struct test_view){node->src[k], source_image(node->src[k])};
    }
    if (node->op == LOOM_OP_SET_ROWS) { /* the rows no id names keep the destination's values before the op */
        size_t offs;
        struct host_copy * c = copy_of(base_of(node->src[2], &offs));
        src[2].image = c ? c->before : NULL;
    }
    double * r = malloc(sizeof(double) * (size_t)(node->ne[0] ? node->ne[0] : 1));
    double err = 0, ref = 0;
    int64_t bad_nan = 0;
    bool known = true;
    for (int64_t i3 = 0; i3 < node->ne[3] && known; i3++)
        for (int64_t i2 = 0; i2 < node->ne[2] && known; i2++)
            for (int64_t i1 = 0; i1 < node->ne[1] && known; i1++) {
                known = test_ref_row(node, src, i1, i2, i3, r);
                for (int64_t i0 = 0; i0 < node->ne[0] && known; i0++) {
                    double o = ov(node, i0, i1, i2, i3);
                    if (isnan(o)) bad_nan++;
                    err += (o - r[i0]) * (o - r[i0]);
                    ref += r[i0] * r[i0];
                }
            }
    free(r);
    if (!known) return 0; /* an op the reference does not know */
    double nmse = ref > 0 ? err / ref : err;
    double thr = test_ref_threshold(node);
    CHECK(bad_nan == 0 && nmse <= thr, "%s: node %s (%s): NMSE %.3g (limit %.1g), %lld NaN (unwritten?)", name, node->name,
          loom_op_name(node->op), nmse, thr, (long long)bad_nan);
    if (g_verbose) fprintf(stderr, "  %-60s %-9s NMSE %.3g\n", name, loom_op_name(node->op), nmse);
    return nmse;
}

/* Allocates every tensor of 'ctx' in g_buft, fills the leafs with random data, poisons the
 * computed tensors, computes the graph of 'out' on g_be, reads everything back and checks each
 * computed node against its reference, that the leafs are unchanged (except the elements a CPY
 * wrote) and that a guard tensor placed after the output is intact. Frees 'ctx'. */
/* Nodes tc_run expands before its output (KV cache stores), when set. */
static struct loom_tensor * g_pre[4];
static int g_n_pre;

static void tc_run(struct loom_context * ctx, struct loom_tensor * out, const char * fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    g_cases++;

    struct loom_tensor * guard = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 64);
    loom_set_name(guard, "guard");
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 256);
    for (int i = 0; i < g_n_pre; i++) loom_build_forward_expand(g, g_pre[i]);
    loom_build_forward_expand(g, out);
    for (int i = 0; i < g->n_nodes; i++) {
        if (!g->nodes[i]->name[0]) loom_format_name(g->nodes[i], "node%d", i);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (!loom_backend_supports_op(g_be, g->nodes[i])) {
            CHECK(false, "%s: node %s (%s) reported unsupported", name, g->nodes[i]->name, loom_op_name(g->nodes[i]->op));
            loom_free(ctx);
            return;
        }
    }
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
    CHECK(buf != NULL, "%s: alloc: %s", name, loom_status_str(st));
    if (!buf) {
        loom_free(ctx);
        return;
    }
    copies_clear();
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if (t->view_src || g_n_copies >= MAX_COPIES) continue;
        struct host_copy * c = &g_copies[g_n_copies++];
        c->base = t;
        c->n = loom_nbytes(t);
        c->leaf = t->op == LOOM_OP_NONE;
        c->before = malloc(c->n ? c->n : 1);
        c->after = malloc(c->n ? c->n : 1);
        if (c->leaf) {
            fill_random(t, c->before, c->n);
            if (g_fixup) g_fixup(t, c->before);
        } else {
            memset(c->before, 0xff, c->n); /* NaN / -1: unwritten outputs show */
        }
        loom_backend_tensor_set(t, c->before, 0, c->n);
    }
    st = loom_backend_graph_compute(g_be, g);
    CHECK(st == LOOM_OK, "%s: compute: %s", name, loom_status_str(st));
    for (int i = 0; i < g_n_copies; i++) loom_backend_tensor_get(g_copies[i].base, g_copies[i].after, 0, g_copies[i].n);
    if (st == LOOM_OK) {
        /* bytes of leaf storage that CPY nodes may write */
        for (int i = 0; i < g_n_copies; i++) {
            struct host_copy * c = &g_copies[i];
            if (!c->leaf) continue;
            uint8_t * written = calloc(c->n ? c->n : 1, 1);
            for (int j = 0; j < g->n_nodes; j++) {
                struct loom_tensor * nd = g->nodes[j];
                size_t offs;
                if ((nd->op != LOOM_OP_CPY && nd->op != LOOM_OP_SET_ROWS) || base_of(nd, &offs) != c->base) continue;
                size_t es = loom_type_size(nd->type);
                if (nd->op == LOOM_OP_SET_ROWS) { /* the rows its ids name */
                    for (int64_t r = 0; r < nd->src[1]->ne[0]; r++) {
                        const int64_t id = (int64_t)sv(nd->src[1], r, 0, 0, 0);
                        if (id < 0 || id >= nd->ne[1]) continue;
                        for (int64_t i0 = 0; i0 < nd->ne[0]; i0++) memset(written + offs + elem_offset(nd, i0, id, 0, 0), 1, es);
                    }
                    continue;
                }
                for (int64_t i3 = 0; i3 < nd->ne[3]; i3++)
                    for (int64_t i2 = 0; i2 < nd->ne[2]; i2++)
                        for (int64_t i1 = 0; i1 < nd->ne[1]; i1++)
                            for (int64_t i0 = 0; i0 < nd->ne[0]; i0++)
                                memset(written + offs + elem_offset(nd, i0, i1, i2, i3), 1, es);
            }
            size_t changed = 0;
            for (size_t q = 0; q < c->n; q++) changed += !written[q] && c->before[q] != c->after[q];
            CHECK(changed == 0, "%s: %zu bytes of '%s' changed that no op should write", name, changed, c->base->name);
            free(written);
        }
        for (int i = 0; i < g->n_nodes; i++) {
            struct loom_tensor * nd = g->nodes[i];
            if (nd->op == LOOM_OP_NONE || loom_op_is_view(nd->op)) continue;
            /* a CPY's or SET_ROWS's output lives in a leaf: read its values from what came back */
            if (nd->op == LOOM_OP_CPY || nd->op == LOOM_OP_SET_ROWS) {
                size_t offs;
                struct host_copy * c = copy_of(base_of(nd, &offs));
                if (c) c->leaf = false;
                check_node(nd, name);
                if (c) c->leaf = true;
            } else {
                check_node(nd, name);
            }
        }
    }
    loom_backend_buffer_free(buf);
    copies_clear();
    loom_free(ctx);
}

/* ================================================================ op cases */

static const enum loom_type float_types[3] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16};

static const int64_t shapes[][4] = {
    {1, 1, 1, 1}, {3, 5, 1, 1}, {33, 7, 3, 2}, {127, 3, 2, 1}, {4097, 3, 1, 1}, {1, 33, 2, 1}, {256, 16, 4, 1},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static void test_unary(void) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int l = 0; l < L_COUNT; l++)
            for (int op = 0; op < 4; op++) {
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = mk(ctx, LOOM_TYPE_F32, shapes[s], (enum layout)l);
                struct loom_tensor * o = op == 0   ? loom_scale(ctx, a, -1.75f)
                                         : op == 1 ? loom_silu(ctx, a)
                                         : op == 2 ? loom_gelu(ctx, a)
                                                   : loom_rms_norm(ctx, a, 1e-5f);
                tc_run(ctx, o, "unary%d %lldx%lldx%lldx%lld %s", op, (long long)shapes[s][0], (long long)shapes[s][1],
                       (long long)shapes[s][2], (long long)shapes[s][3], layout_names[l]);
            }
}

static void test_binary(void) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < 3; t++)
            for (int l = 0; l < L_COUNT; l++)
                for (int bc = 0; bc < 4; bc++)
                    for (int op = 0; op < 2; op++) {
                        const int64_t * ne = shapes[s];
                        /* b: same shape, a row, a column with dims 2/3, a scalar */
                        int64_t bne[4] = {ne[0], ne[1], ne[2], ne[3]};
                        if (bc == 1) bne[1] = bne[2] = bne[3] = 1;
                        if (bc == 2) bne[0] = bne[2] = 1;
                        if (bc == 3) bne[0] = bne[1] = bne[2] = bne[3] = 1;
                        struct loom_context * ctx = tc_begin();
                        struct loom_tensor * a = mk(ctx, float_types[t], ne, (enum layout)l);
                        struct loom_tensor * b = mk(ctx, LOOM_TYPE_F32, bne, (enum layout)((l + bc) % L_COUNT));
                        struct loom_tensor * o = op ? loom_mul(ctx, a, b) : loom_add(ctx, a, b);
                        tc_run(ctx, o, "%s %s a[%lld,%lld,%lld,%lld] %s bcast%d", op ? "mul" : "add", loom_type_name(float_types[t]),
                               (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_names[l], bc);
                    }
}

static void test_cpy(void) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int ts = 0; ts < 3; ts++)
            for (int td = 0; td < 3; td++)
                for (int l = 0; l < L_COUNT; l++) {
                    const int64_t * ne = shapes[s];
                    struct loom_context * ctx = tc_begin();
                    struct loom_tensor * a = mk(ctx, float_types[ts], ne, (enum layout)l);
                    struct loom_tensor * b = mk(ctx, float_types[td], ne, (enum layout)((l + 1) % L_COUNT));
                    tc_run(ctx, loom_cpy(ctx, a, b), "cpy %s->%s %lldx%lldx%lldx%lld %s", loom_type_name(float_types[ts]),
                           loom_type_name(float_types[td]), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                           layout_names[l]);
                }
    /* different shapes of equal count, dup, cont, cont_2d, I32 */
    for (int l = 0; l < L_COUNT; l++)
        for (int t = 0; t < 3; t++) {
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * a = mk(ctx, float_types[t], NE(12, 5, 3, 2), (enum layout)l);
            struct loom_tensor * b = mk(ctx, LOOM_TYPE_F32, NE(20, 9, 2, 1), (enum layout)((l + 2) % L_COUNT));
            tc_run(ctx, loom_cpy(ctx, a, b), "cpy reshape %s %s", loom_type_name(float_types[t]), layout_names[l]);
            ctx = tc_begin();
            a = mk(ctx, float_types[t], NE(33, 7, 3, 2), (enum layout)l);
            tc_run(ctx, loom_dup(ctx, a), "dup %s %s", loom_type_name(float_types[t]), layout_names[l]);
            ctx = tc_begin();
            a = mk(ctx, float_types[t], NE(33, 7, 3, 2), (enum layout)l);
            tc_run(ctx, loom_cont(ctx, a), "cont %s %s", loom_type_name(float_types[t]), layout_names[l]);
            ctx = tc_begin();
            a = mk(ctx, float_types[t], NE(33, 7, 3, 2), (enum layout)l);
            tc_run(ctx, loom_cont_2d(ctx, a, 33 * 7, 6), "cont_2d %s %s", loom_type_name(float_types[t]), layout_names[l]);
        }
    for (int l = 0; l < L_COUNT; l++) {
        g_i32_lo = -1000000;
        g_i32_hi = 1000000;
        struct loom_context * ctx = tc_begin();
        struct loom_tensor * a = mk(ctx, LOOM_TYPE_I32, NE(17, 5, 3, 1), (enum layout)l);
        struct loom_tensor * b = mk(ctx, LOOM_TYPE_I32, NE(17, 5, 3, 1), L_CONT);
        tc_run(ctx, loom_cpy(ctx, a, b), "cpy i32 %s", layout_names[l]);
        ctx = tc_begin();
        a = mk(ctx, LOOM_TYPE_I32, NE(17, 5, 3, 1), (enum layout)l);
        tc_run(ctx, loom_cont(ctx, a), "cont i32 %s", layout_names[l]);
    }
}

static void test_get_rows(void) {
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < L_COUNT; l++) {
            const int64_t sz[][4] = {{1, 1, 1, 1}, {33, 50, 1, 1}, {4097, 7, 1, 1}, {64, 10, 3, 2}};
            for (int s = 0; s < 4; s++) {
                const int64_t * ne = sz[s];
                g_i32_lo = 0;
                g_i32_hi = (int32_t)ne[1] - 1;
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = mk(ctx, float_types[t], ne, (enum layout)l);
                struct loom_tensor * ids = mk(ctx, LOOM_TYPE_I32, NE(9, ne[2], ne[3], 1), (enum layout)((l + 1) % L_COUNT));
                tc_run(ctx, loom_get_rows(ctx, a, ids), "get_rows %s %lldx%lldx%lldx%lld %s", loom_type_name(float_types[t]),
                       (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_names[l]);
            }
        }
}

static void bad_ids_fixup(const struct loom_tensor * t, uint8_t * mem) {
    if (t->type != LOOM_TYPE_I32) return;
    int32_t v[2] = {-1, 1 << 30};
    memcpy(mem, v, sizeof v);
}

static void test_get_rows_bad_ids(void) {
    g_i32_lo = 0;
    g_i32_hi = 9;
    g_fixup = bad_ids_fixup;
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * a = mk(ctx, LOOM_TYPE_F32, NE(16, 10, 1, 1), L_CONT);
    struct loom_tensor * ids = mk(ctx, LOOM_TYPE_I32, NE(5, 1, 1, 1), L_CONT);
    capture_begin();
    tc_run(ctx, loom_get_rows(ctx, a, ids), "get_rows with ids outside the table");
    capture_end();
    g_fixup = NULL;
    CHECK(strstr(g_log, "get_rows") != NULL, "a bad id is logged (log: %s)", g_log);
}

static void test_mul_mat(void) {
    /* K, M, N, ne2a, ne3a, ne2b, ne3b */
    const int64_t cases[][7] = {
        {1, 1, 1, 1, 1, 1, 1},        {3, 33, 1, 1, 1, 1, 1},     {127, 33, 3, 1, 1, 1, 1},  {4097, 7, 1, 1, 1, 1, 1},
        {64, 128, 8, 1, 1, 1, 1},     {256, 127, 33, 1, 1, 1, 1}, {128, 64, 200, 1, 1, 1, 1}, {4096, 16, 2, 1, 1, 1, 1},
        {64, 32, 1, 2, 1, 8, 1},      {64, 32, 17, 2, 1, 8, 1},   {32, 16, 5, 2, 2, 4, 6},   {40, 24, 20, 3, 1, 3, 2},
        {48, 20, 12, 1, 1, 5, 2},     {33, 9, 4, 1, 1, 2, 3},     {1000, 300, 64, 1, 1, 1, 1},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n_cases; c++)
        for (int t = 0; t < 3; t++)
            for (int la = 0; la < L_COUNT; la++)
                for (int lb = 0; lb < 2; lb++) {
                    const int64_t * p = cases[c];
                    if ((la != L_CONT || lb) && p[0] * p[1] * p[2] * p[5] * p[6] > 2000000) continue; /* keep the reference quick */
                    struct loom_context * ctx = tc_begin();
                    struct loom_tensor * a = mk(ctx, float_types[t], NE(p[0], p[1], p[3], p[4]), (enum layout)la);
                    struct loom_tensor * b = mk(ctx, LOOM_TYPE_F32, NE(p[0], p[2], p[5], p[6]), lb ? L_STRIDED : L_CONT);
                    tc_run(ctx, loom_mul_mat(ctx, a, b), "mul_mat %s K%lld M%lld N%lld a[%lld,%lld] b[%lld,%lld] %s b:%s",
                           loom_type_name(float_types[t]), (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3],
                           (long long)p[4], (long long)p[5], (long long)p[6], layout_names[la], lb ? "strided" : "contiguous");
                }
    /* b transposed and permuted (activations read column-wise) */
    for (int t = 0; t < 3; t++)
        for (int lb = L_TRANS; lb <= L_PERM; lb++)
            for (int n = 1; n <= 16; n += 15) {
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = mk(ctx, float_types[t], NE(40, 24, 2, 1), L_CONT);
                struct loom_tensor * b = mk(ctx, LOOM_TYPE_F32, NE(40, n, 2, 3), (enum layout)lb);
                tc_run(ctx, loom_mul_mat(ctx, a, b), "mul_mat %s b %s N%d", loom_type_name(float_types[t]), layout_names[lb], n);
            }
}

/* A column holding a NaN makes every product of a quantized matrix with it NaN, one holding an
 * infinity every product non-finite: the 8-bit activation records of such a run carry d = NaN
 * (cuda-quant-dot.cuh), as an F32 product would be NaN or infinite; a max that skipped the NaN
 * would give d = 0 and silently zero results. */
static void test_mul_mat_nonfinite(void) {
    const enum loom_type types[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_IQ4_XS};
    const float bad[2] = {NAN, INFINITY};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int v = 0; v < 2; v++) {
            enum { K = 512, M = 64 };
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * a = loom_new_tensor_2d(ctx, types[t], K, M);
            struct loom_tensor * b = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, K, 1);
            struct loom_tensor * out = loom_mul_mat(ctx, a, b);
            struct loom_cgraph * g = loom_new_graph_custom(ctx, 16);
            loom_build_forward_expand(g, out);
            enum loom_status st;
            loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
            CHECK(buf != NULL, "nonfinite %s: alloc", loom_type_name(types[t]));
            if (!buf) {
                loom_free(ctx);
                continue;
            }
            uint8_t * wa = malloc(loom_nbytes(a));
            fill_random(a, wa, loom_nbytes(a));
            loom_backend_tensor_set(a, wa, 0, loom_nbytes(a));
            float x[K], y[M];
            for (int i = 0; i < K; i++) x[i] = (float)test_rand_normal(&g_rng);
            x[300 + v] = bad[v];
            loom_backend_tensor_set(b, x, 0, sizeof x);
            st = loom_backend_graph_compute(g_be, g);
            CHECK(st == LOOM_OK, "nonfinite %s: compute: %s", loom_type_name(types[t]), loom_status_str(st));
            loom_backend_tensor_get(out, y, 0, sizeof y);
            int n_nan = 0;
            for (int i = 0; i < M; i++) n_nan += v ? !isfinite(y[i]) : isnan(y[i]) != 0;
            CHECK(n_nan == M, "mul_mat %s with a column holding %s: %d of %d results %s", loom_type_name(types[t]), v ? "inf" : "NaN", n_nan,
                  M, v ? "non-finite" : "NaN");
            g_cases++;
            free(wa);
            loom_backend_buffer_free(buf);
            loom_free(ctx);
        }
}

/* F32 rows holding a NaN or an infinity copied into a quantized KV cache (Q8_0, Q4_0): the device
 * writes the blocks the CPU's quantizer writes, byte for byte -- a non-finite block's scale a NaN,
 * so it decodes to NaN rather than to zeros (src/quant/quant-quantize.c). */
static void test_cpy_quant_nonfinite(void) {
    const enum loom_type types[] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        enum { K = 128, R = 3 };
        struct loom_context * ctx = tc_begin();
        struct loom_tensor * src = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, K, R);
        struct loom_tensor * dst = loom_new_tensor_2d(ctx, types[t], K, R);
        struct loom_cgraph * g = loom_new_graph_custom(ctx, 16);
        loom_build_forward_expand(g, loom_cpy(ctx, src, dst));
        enum loom_status st;
        loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
        CHECK(buf != NULL, "cpy nonfinite %s: alloc", loom_type_name(types[t]));
        if (!buf) {
            loom_free(ctx);
            continue;
        }
        float x[K * R], y[K * R];
        for (int i = 0; i < K * R; i++) x[i] = (float)test_rand_normal(&g_rng);
        x[40] = NAN, x[K + 3] = INFINITY, x[K + 100] = -INFINITY; /* row 2 stays finite */
        loom_backend_tensor_set(src, x, 0, sizeof x);
        st = loom_backend_graph_compute(g_be, g);
        CHECK(st == LOOM_OK, "cpy nonfinite %s: compute: %s", loom_type_name(types[t]), loom_status_str(st));
        const size_t nb = loom_nbytes(dst);
        uint8_t * got = malloc(nb), * want = malloc(nb);
        loom_backend_tensor_get(dst, got, 0, nb);
        const struct loom_type_traits * tt = loom_type_get_traits(types[t]);
        tt->from_float(x, want, K * R);
        CHECK(memcmp(got, want, nb) == 0, "cpy F32 -> %s with NaN / inf: the device's blocks differ from the CPU's", loom_type_name(types[t]));
        tt->to_float(got, y, K * R);
        int wrong = 0;
        for (int i = 0; i < K * R; i++) {
            const int blk = i / 32;
            const bool bad = blk == 40 / 32 || blk == (K + 3) / 32 || blk == (K + 100) / 32;
            wrong += bad ? !isnan(y[i]) : !isfinite(y[i]);
        }
        CHECK(wrong == 0, "cpy F32 -> %s with NaN / inf: %d values decode wrongly", loom_type_name(types[t]), wrong);
        g_cases++;
        free(got);
        free(want);
        loom_backend_buffer_free(buf);
        loom_free(ctx);
    }
}

static void test_rope(void) {
    for (int mode = 0; mode <= 2; mode += 2)
        for (int l = 0; l < L_COUNT; l++) {
            const int64_t sz[][4] = {{64, 4, 5, 1}, {128, 3, 2, 1}, {6, 2, 7, 1}, {80, 2, 3, 1}};
            const int nd[] = {64, 96, 6, 32};
            for (int s = 0; s < 4; s++) {
                g_i32_lo = 0;
                g_i32_hi = s == 1 ? 200000 : 4096;
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = mk(ctx, LOOM_TYPE_F32, sz[s], (enum layout)l);
                struct loom_tensor * pos = mk(ctx, LOOM_TYPE_I32, NE(sz[s][2], 1, 1, 1), L_CONT);
                struct loom_tensor * o = loom_rope(ctx, a, pos, nd[s], (enum loom_rope_mode)mode, s == 2 ? 500000.0f : 10000.0f,
                                                   s == 3 ? 0.25f : 1.0f);
                tc_run(ctx, o, "rope mode%d %lldx%lldx%lld n_dims %d %s", mode, (long long)sz[s][0], (long long)sz[s][1],
                       (long long)sz[s][2], nd[s], layout_names[l]);
            }
        }
}

static void mask_fixup(const struct loom_tensor * t, uint8_t * mem) {
    if (strcmp(t->name, "mask") != 0) return;
    /* causal pattern with one fully masked row (row 0 of every plane) */
    size_t es = loom_type_size(t->type);
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
            for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                if (!(i1 == 0 || i0 > i1 + 3)) continue;
                uint8_t * p = mem + elem_offset(t, i0, i1, i2, 0);
                if (es == 4) {
                    float v = -INFINITY;
                    memcpy(p, &v, 4);
                } else {
                    uint16_t h = loom_fp32_to_fp16(-INFINITY);
                    memcpy(p, &h, 2);
                }
            }
}

static void test_soft_max(void) {
    const int64_t sz[][4] = {{1, 1, 1, 1}, {33, 7, 4, 1}, {4097, 3, 2, 1}, {256, 32, 8, 2}, {300, 5, 2, 3}};
    for (int s = 0; s < 5; s++)
        for (int l = 0; l < L_COUNT; l++)
            for (int m = 0; m < 3; m++) {
                const int64_t * ne = sz[s];
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = mk(ctx, LOOM_TYPE_F32, ne, (enum layout)l);
                struct loom_tensor * mask = NULL;
                if (m) {
                    /* more rows than needed; broadcast over dim 2 (and over dim 3 when it is 1) */
                    int64_t m2 = ne[2] % 2 == 0 ? 2 : 1;
                    mask = loom_new_tensor_4d(ctx, m == 1 ? LOOM_TYPE_F32 : LOOM_TYPE_F16, ne[0], ne[1] + 2, m2, 1);
                    loom_set_name(mask, "mask");
                }
                g_fixup = mask_fixup;
                tc_run(ctx, mask ? loom_soft_max_ext(ctx, a, mask, 0.125f) : loom_soft_max(ctx, a), "soft_max %lldx%lldx%lldx%lld %s mask%d",
                       (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_names[l], m);
                g_fixup = NULL;
            }
}

static void argmax_fixup(const struct loom_tensor * t, uint8_t * mem) {
    if (t->type != LOOM_TYPE_F32) return;
    /* row 0: ties at the maximum; row 1: NaN first; row 2: only NaN */
    float nan = NAN, big = 7.0f;
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
        if (i0 % 3 == 1) memcpy(mem + elem_offset(t, i0, 0, 0, 0), &big, 4);
        if (t->ne[1] > 1 && i0 == 0) memcpy(mem + elem_offset(t, i0, 1, 0, 0), &nan, 4);
        if (t->ne[1] > 2) memcpy(mem + elem_offset(t, i0, 2, 0, 0), &nan, 4);
    }
}

static void test_argmax(void) {
    const int64_t sz[][4] = {{1, 1, 1, 1}, {33, 7, 1, 1}, {4097, 5, 1, 1}, {32000, 3, 1, 1}};
    for (int s = 0; s < 4; s++)
        for (int l = 0; l < L_COUNT; l++) {
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * a = mk(ctx, LOOM_TYPE_F32, sz[s], (enum layout)l);
            g_fixup = argmax_fixup;
            tc_run(ctx, loom_argmax(ctx, a), "argmax %lldx%lld %s", (long long)sz[s][0], (long long)sz[s][1], layout_names[l]);
            g_fixup = NULL;
        }
}

/* A small attention block with grouped-query heads: every node is checked against a reference
 * computed from the values its sources had on the device. */
static void test_graph(enum loom_type wt) {
    const int64_t d = 64, n_head = 4, n_kv = 2, hd = d / n_head, T = 5;
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, d, T);
    struct loom_tensor * g = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, d);
    struct loom_tensor * wq = loom_new_tensor_2d(ctx, wt, d, d);
    struct loom_tensor * wk = loom_new_tensor_2d(ctx, wt, d, hd * n_kv);
    struct loom_tensor * wv = loom_new_tensor_2d(ctx, wt, d, hd * n_kv);
    struct loom_tensor * pos = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, T);
    struct loom_tensor * mask = loom_new_tensor_2d(ctx, LOOM_TYPE_F16, T, T);
    loom_set_name(mask, "mask");
    struct loom_tensor * h = loom_mul(ctx, loom_rms_norm(ctx, x, 1e-5f), g);
    struct loom_tensor * q = loom_rope(ctx, loom_reshape_3d(ctx, loom_mul_mat(ctx, wq, h), hd, n_head, T), pos, hd, LOOM_ROPE_NEOX, 10000.0f, 1.0f);
    struct loom_tensor * k = loom_rope(ctx, loom_reshape_3d(ctx, loom_mul_mat(ctx, wk, h), hd, n_kv, T), pos, hd, LOOM_ROPE_NEOX, 10000.0f, 1.0f);
    struct loom_tensor * v = loom_reshape_3d(ctx, loom_mul_mat(ctx, wv, h), hd, n_kv, T);
    struct loom_tensor * qp = loom_permute(ctx, q, 0, 2, 1, 3);                  /* [hd, T, n_head] */
    struct loom_tensor * kp = loom_permute(ctx, k, 0, 2, 1, 3);                  /* [hd, T, n_kv] */
    struct loom_tensor * kq = loom_mul_mat(ctx, kp, qp);                         /* [T, T, n_head] */
    struct loom_tensor * sm = loom_soft_max_ext(ctx, kq, mask, 0.25f);
    struct loom_tensor * vt = loom_cont(ctx, loom_permute(ctx, v, 1, 2, 0, 3));  /* [T, hd, n_kv] */
    struct loom_tensor * kqv = loom_mul_mat(ctx, vt, sm);                        /* [hd, T, n_head] */
    struct loom_tensor * o = loom_cont_2d(ctx, loom_permute(ctx, kqv, 0, 2, 1, 3), d, T);
    struct loom_tensor * res = loom_add(ctx, x, loom_gelu(ctx, loom_scale(ctx, o, 0.5f)));
    struct loom_tensor * am = loom_argmax(ctx, loom_silu(ctx, res));
    g_i32_lo = 0;
    g_i32_hi = 100;
    g_fixup = mask_fixup;
    tc_run(ctx, am, "attention block, %s weights", loom_type_name(wt));
    g_fixup = NULL;
}

/* One LLaMA layer decoding T tokens after n_past cached ones, laid out as src/llama/graph.c
 * builds it (K and V stores into F16 caches by SET_ROWS at the positions, GQA, the merge of heads, SwiGLU): every product
 * takes the matrix-vector kernels, so the CUDA backend fuses norm+mul, rope+store, product+store,
 * product+add, product+silu and product+mul, and replays the layer as a CUDA graph -- updated in
 * place when only n_past (shapes and addresses) changes between runs. */
static int64_t g_pos0; /* the decode layer's first position */

static void positions_fixup(const struct loom_tensor * t, uint8_t * mem) {
    if (strcmp(t->name, "inp_pos") != 0) return;
    for (int64_t i = 0; i < t->ne[0]; i++) {
        const int32_t p = (int32_t)(g_pos0 + i);
        memcpy(mem + i * 4, &p, 4);
    }
}

/* The decode layer's result (normalised as the next layer's input) and its two cache stores, built
 * in 'ctx' (n_head 4, head_dim g_decode_d / 4; caches of g_cache_type, F16 unless a case says otherwise). */
static enum loom_type g_cache_type = LOOM_TYPE_F16;

struct decode_layer {
    struct loom_tensor *out, *k_store, *v_store;
    struct loom_tensor * h; /* the residual stream after the layer (out is its norm) */
};

static int64_t g_decode_d = 64, g_decode_ff = 96; /* the layer's embedding and feed-forward sizes */
static enum loom_type g_decode_vt = LOOM_TYPE_COUNT; /* wv's type where it differs from the other weights' (Q4_K_M's Q6_K v) */
static bool g_decode_fa = false; /* the attention as FLASH_ATTN_EXT (a V cache of rows, as K's) instead of the scores' softmax */

/* 'x_in': the layer's input (the residual stream of the layer before), NULL: an input tensor. */
static struct decode_layer build_decode_layer(struct loom_context * ctx, enum loom_type wt, int64_t T, int64_t n_past, int64_t n_head_kv,
                                              struct loom_tensor * x_in) {
    const int64_t d = g_decode_d, n_head = 4, hd = d / n_head, n_kv_embd = hd * n_head_kv, ff = g_decode_ff, n_ctx = 40;
    const int64_t n_kv = n_past + T;
    struct loom_tensor * x = x_in ? x_in : loom_new_tensor_2d(ctx, LOOM_TYPE_F32, d, T);
    struct loom_tensor * attn_norm = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, d);
    struct loom_tensor * ffn_norm = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, d);
    struct loom_tensor * out_norm = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, d); /* the next layer's input norm */
    struct loom_tensor * wq = loom_new_tensor_2d(ctx, wt, d, d);
    struct loom_tensor * wk = loom_new_tensor_2d(ctx, wt, d, n_kv_embd);
    struct loom_tensor * wv = loom_new_tensor_2d(ctx, g_decode_vt != LOOM_TYPE_COUNT ? g_decode_vt : wt, d, n_kv_embd);
    struct loom_tensor * wo = loom_new_tensor_2d(ctx, wt, d, d);
    struct loom_tensor * wg = loom_new_tensor_2d(ctx, wt, d, ff);
    struct loom_tensor * wu = loom_new_tensor_2d(ctx, wt, d, ff);
    struct loom_tensor * wd = loom_new_tensor_2d(ctx, wt, ff, d);
    struct loom_tensor * pos = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, T);
    loom_set_name(pos, "inp_pos");
    struct loom_tensor * mask = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, n_kv, T);
    struct loom_tensor * kc = loom_new_tensor_2d(ctx, g_cache_type, n_kv_embd, n_ctx);
    struct loom_tensor * vc = g_decode_fa ? loom_new_tensor_2d(ctx, g_cache_type, n_kv_embd, n_ctx) : loom_new_tensor_2d(ctx, g_cache_type, n_ctx, n_kv_embd);
    loom_set_name(kc, "cache_k");
    loom_set_name(vc, "cache_v");
    /* weights: the matrix-vector kernels may read them before the previous kernel is done */
    struct loom_tensor * weights[] = {attn_norm, ffn_norm, out_norm, wq, wk, wv, wo, wg, wu, wd};
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) weights[i]->flags |= LOOM_TENSOR_FLAG_WEIGHT;
    const size_t es = loom_type_size(g_cache_type);

    struct decode_layer L;
    struct loom_tensor * cur = loom_mul(ctx, loom_rms_norm(ctx, x, 1e-5f), attn_norm);
    struct loom_tensor * k = loom_rope(ctx, loom_reshape_3d(ctx, loom_mul_mat(ctx, wk, cur), hd, n_head_kv, T), pos, hd, LOOM_ROPE_NORMAL,
                                       10000.0f, 1.0f);
    struct loom_tensor * v = loom_mul_mat(ctx, wv, cur);
    L.k_store = loom_set_rows(ctx, kc, loom_reshape_2d(ctx, k, n_kv_embd, T), pos);
    L.v_store = loom_set_rows(ctx, g_decode_fa ? vc : loom_transpose(ctx, vc), v, pos);
    struct loom_tensor * q = loom_rope(ctx, loom_reshape_3d(ctx, loom_mul_mat(ctx, wq, cur), hd, n_head, T), pos, hd, LOOM_ROPE_NORMAL,
                                       10000.0f, 1.0f);
    struct loom_tensor * Q = loom_permute(ctx, q, 0, 2, 1, 3);
    struct loom_tensor * K = loom_view_3d(ctx, kc, hd, n_kv, n_head_kv, (size_t)n_kv_embd * es, (size_t)hd * es, 0);
    struct loom_tensor * V = loom_view_3d(ctx, vc, n_kv, hd, n_head_kv, (size_t)n_ctx * es, (size_t)n_ctx * hd * es, 0);
    struct loom_tensor * attn;
    if (g_decode_fa) { /* q [hd, T, n_head]; V rows as K's; the result's heads adjacent: [d, T] */
        struct loom_tensor * Vr = loom_view_3d(ctx, vc, hd, n_kv, n_head_kv, (size_t)n_kv_embd * es, (size_t)hd * es, 0);
        attn = loom_reshape_2d(ctx, loom_flash_attn_ext(ctx, Q, K, Vr, mask, 0.25f), d, T);
    } else {
        struct loom_tensor * kq = loom_soft_max_ext(ctx, loom_mul_mat(ctx, K, Q), mask, 0.25f);
        struct loom_tensor * kqv = loom_mul_mat(ctx, V, kq);
        attn = loom_cont_2d(ctx, loom_permute(ctx, kqv, 0, 2, 1, 3), d, T);
    }
    struct loom_tensor * x1 = loom_add(ctx, x, loom_mul_mat(ctx, wo, attn));
    struct loom_tensor * cur2 = loom_mul(ctx, loom_rms_norm(ctx, x1, 1e-5f), ffn_norm);
    struct loom_tensor * glu = loom_mul(ctx, loom_silu(ctx, loom_mul_mat(ctx, wg, cur2)), loom_mul_mat(ctx, wu, cur2));
    L.h = loom_add(ctx, x1, loom_mul_mat(ctx, wd, glu));
    L.out = loom_mul(ctx, loom_rms_norm(ctx, L.h, 1e-5f), out_norm);
    return L;
}

static void test_decode_layer(enum loom_type wt, int64_t T, int64_t n_past, const char * what) {
    struct loom_context * ctx = tc_begin();
    struct decode_layer L = build_decode_layer(ctx, wt, T, n_past, 2, NULL);
    g_pre[0] = L.k_store;
    g_pre[1] = L.v_store;
    g_n_pre = 2;
    g_pos0 = n_past;
    g_fixup = positions_fixup;
    g_caches_after = true;
    tc_run(ctx, L.out, "decode layer %s T%lld n_past %lld (%s)", loom_type_name(wt), (long long)T, (long long)n_past, what);
    g_caches_after = false;
    g_fixup = NULL;
    g_n_pre = 0;
}

/* The decode layer (no GQA: q, k and v of one size) placed by the graph allocator, so that the
 * products' results share memory as in a model's graph, computed on 'be' from fixed random
 * inputs; the result and both caches are read back into 'res' (sized by the first call, 0 bytes
 * at first). False when allocation or compute fails. */
struct layer_result {
    uint8_t * mem;
    size_t n;
};

static int g_decode_layers = 1; /* 2: a second layer reads the first one's residual stream (the result and caches are the second's) */

static bool run_allocated_layer_t(loom_backend_t be, int64_t n_past, struct layer_result * res, enum loom_type wt, int64_t T) {
    struct loom_context * ctx = tc_begin();
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 512);
    struct decode_layer L = build_decode_layer(ctx, wt, T, n_past, 4, NULL);
    if (g_decode_layers == 2) {
        loom_build_forward_expand(g, L.k_store);
        loom_build_forward_expand(g, L.v_store);
        L = build_decode_layer(ctx, wt, T, n_past, 4, L.h);
    }
    loom_set_output(L.out);
    loom_build_forward_expand(g, L.k_store);
    loom_build_forward_expand(g, L.v_store);
    loom_build_forward_expand(g, L.out);
    for (int i = 0; i < g->n_leafs; i++) loom_set_input(g->leafs[i]);
    loom_gallocr_t ga = loom_gallocr_new(g_buft);
    bool ok = ga && loom_gallocr_alloc_graph(ga, g) == LOOM_OK;
    const uint64_t rng = g_rng;
    g_rng = 0xC0FFEEull;
    g_pos0 = n_past;
    for (int i = 0; ok && i < g->n_leafs; i++) {
        struct loom_tensor * t = g->leafs[i];
        if (t->view_src) continue;
        const size_t n = loom_nbytes(t);
        uint8_t * mem = malloc(n);
        fill_random(t, mem, n);
        positions_fixup(t, mem);
        loom_backend_tensor_set(t, mem, 0, n);
        free(mem);
    }
    g_rng = rng;
    ok = ok && loom_backend_graph_compute(be, g) == LOOM_OK && loom_backend_synchronize(be) == LOOM_OK;
    const struct loom_tensor * back[3] = {L.out, L.k_store->view_src, L.v_store->view_src};
    size_t total = 0;
    for (int i = 0; i < 3; i++) total += loom_nbytes(back[i]);
    if (ok) {
        res->n = total;
        res->mem = malloc(total);
        size_t at = 0;
        for (int i = 0; i < 3; i++) {
            loom_backend_tensor_get(back[i], res->mem + at, 0, loom_nbytes(back[i]));
            at += loom_nbytes(back[i]);
        }
    }
    if (ga) loom_gallocr_free(ga);
    loom_free(ctx);
    return ok;
}

/* Values of 'got' off those of 'want' (two runs of the allocated layer): its first 'n_out' F32
 * values (the result) by more than 'tol_out', the F16 caches after them by more than 'tol_cache',
 * each relative to 1 + |want|. */
static size_t layer_diff(const struct layer_result * want, const struct layer_result * got, size_t n_out, float tol_out, float tol_cache) {
    size_t bad = 0;
    const float * a = (const float *)want->mem;
    const float * b = (const float *)got->mem;
    for (size_t i = 0; i < n_out; i++) bad += !(fabsf(a[i] - b[i]) <= tol_out * (1.0f + fabsf(a[i])));
    for (size_t off = n_out * 4; off + 2 <= want->n; off += 2) {
        uint16_t hw, hg;
        memcpy(&hw, want->mem + off, 2);
        memcpy(&hg, got->mem + off, 2);
        const float fw = loom_fp16_to_fp32(hw), fg = loom_fp16_to_fp32(hg);
        bad += !(fabsf(fw - fg) <= tol_cache * (1.0f + fabsf(fw)));
    }
    return bad;
}

/* The same for one token (a decode step). */
static bool run_allocated_layer(loom_backend_t be, int64_t n_past, struct layer_result * res, enum loom_type wt) {
    return run_allocated_layer_t(be, n_past, res, wt, 1);
}

/* ================================================================ launch counts */

/* The launch counts of 'be' (loom_cuda_get_stats); zeros when the call fails (a failed check). */
static struct loom_cuda_stats stats_of(loom_backend_t be) {
    struct loom_cuda_stats s;
    memset(&s, 0, sizeof s);
    CHECK(loom_cuda_get_stats(be, &s) == LOOM_OK, "loom_cuda_get_stats");
    return s;
}

/* What 'be' launched since '*since' was taken (stats_of), and '*since' moved on to now. */
static struct loom_cuda_stats stats_step(loom_backend_t be, struct loom_cuda_stats * since) {
    const struct loom_cuda_stats now = stats_of(be);
    struct loom_cuda_stats d = now;
    d.computes -= since->computes;
    d.nodes -= since->nodes;
    d.launches -= since->launches;
    for (int o = 0; o < LOOM_OP_COUNT; o++) d.led[o] -= since->led[o];
    for (int f = 0; f < LOOM_CUDA_FUSION_COUNT; f++) d.fusions[f] -= since->fusions[f];
    *since = now;
    return d;
}

/* 'c' in words (for failure messages): launches by their first node's op, and fusions. */
static const char * stats_text(const struct loom_cuda_stats * c) {
    static const char * const fusion[LOOM_CUDA_FUSION_COUNT] = {"norm+mul", "rope+copy", "epilogue", "SwiGLU", "q/k/v",
                                                                "norm tail", "softmax tail", "pre-norm tail", "pre-norm"};
    static char text[1024];
    int n = snprintf(text, sizeof text, "%lld computes, %lld nodes in %lld launches; led by", (long long)c->computes,
                     (long long)c->nodes, (long long)c->launches);
    for (int o = 0; o < LOOM_OP_COUNT && n < (int)sizeof text; o++) {
        if (c->led[o]) n += snprintf(text + n, sizeof text - (size_t)n, " %s %lld", loom_op_name((enum loom_op)o), (long long)c->led[o]);
    }
    for (int f = 0; f < LOOM_CUDA_FUSION_COUNT && n < (int)sizeof text; f++) {
        if (c->fusions[f]) n += snprintf(text + n, sizeof text - (size_t)n, "; %s %lld", fusion[f], (long long)c->fusions[f]);
    }
    return text;
}

/* A backend made with the init parameters 'params' (loom-cuda.h). */
static loom_backend_t backend_with(const char * params) {
    loom_backend_t be = loom_backend_dev_init(g_dev, params);
    CHECK(be != NULL, "backend with %s", params);
    return be;
}

/* q, k and v in one launch where the allocator made their results share memory: the layer's
 * result and caches equal those of one kernel per node (fuse=0, itself checked against
 * the reference by test_decode), and the launch counts show the products in one launch group and
 * the tails fused; the profile (profile=1) computes the same and reports at the backend's end. */
static void test_decode_allocated(void) {
    for (int64_t n_past = 0; n_past <= 9; n_past += 9) {
        loom_backend_t one = backend_with("fuse=0"), prof = backend_with("profile=1");
        struct layer_result want = {0}, got = {0}, got_prof = {0};
        const bool ok = one && prof && run_allocated_layer(one, n_past, &want, LOOM_TYPE_F16) &&
                        run_allocated_layer(g_be, n_past, &got, LOOM_TYPE_F16) && run_allocated_layer(prof, n_past, &got_prof, LOOM_TYPE_F16);
        CHECK(ok, "allocated decode layer n_past %lld: compute", (long long)n_past);
        if (ok) {
            /* the F32 result (64 values) comes first; the caches after it: one F16 rounding step
             * apart at most (unfused, the products read the MUL's stored result; fused, the norm's
             * source scaled inside the products) */
            size_t bad = layer_diff(&want, &got, 64, 1e-5f, 1e-3f);
            bad += got_prof.n != got.n || memcmp(got.mem, got_prof.mem, got.n) != 0; /* the profiled run: same kernels */
            CHECK(bad == 0, "allocated decode layer n_past %lld: %zu values differ from one launch per product", (long long)n_past, bad);
        }
        if (ok) {
            const struct loom_cuda_stats c = stats_of(prof);
            CHECK(c.computes == 1 && c.fusions[LOOM_CUDA_FUSION_MULTI] >= 1, "allocated decode layer: q, k and v not in one launch: %s",
                  stats_text(&c));
            /* the tails: the scores' softmax (the layer's only one), and the norm after the down
             * product (no product reads it here) as that product's tail */
            CHECK(c.fusions[LOOM_CUDA_FUSION_TAIL_SOFT_MAX] == 1 && c.led[LOOM_OP_SOFT_MAX] == 0,
                  "allocated decode layer: softmax not in the scores' launch: %s", stats_text(&c));
            CHECK(c.fusions[LOOM_CUDA_FUSION_TAIL_NORM] >= 1, "allocated decode layer: the last norm not in the down product's launch: %s",
                  stats_text(&c));
        }
        capture_begin();
        if (prof) loom_backend_free(prof);
        capture_end();
        CHECK(!prof || strstr(g_log, "profile, token generation"), "allocated decode layer: no profile report at the backend's end:\n%s", g_log);
        if (one) loom_backend_free(one);
        free(want.mem);
        free(got.mem);
        free(got_prof.mem);
        g_cases++;
    }
}

/* Quantized weights (cuda-matvec-q.cu) in the allocated decode layer, rows of 256 and 512 (whole
 * K-quant super-blocks), for one token and for steps of 6 and 9 tokens (several sequences' step:
 * products of 6 and 9 columns, in launches of a few columns each), and for one token with the
 * attention as FLASH_ATTN_EXT (heads of 64: the attention writes the 8-bit activations of the
 * wo product after it, which then launches no quantization kernel), in one layer and in two
 * (the residual products' tails write the 8-bit activations of the gate/up and the next layer's
 * q/k/v launches, which quantize nothing either): the fused launches
 * (pre-norm, q/k/v in one launch, rotation, SwiGLU, tails, cache stores, 8-bit handoffs) leave
 * the result and caches that one kernel per node leaves (fuse=0; each product's kernel is checked
 * against the double reference by `loom test-ops -b CUDA0`). */
static void test_decode_quant(void) {
    static const enum loom_type types[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q3_K};
    static const struct {
        int64_t T;  /* tokens of the step */
        bool fa;    /* the attention as FLASH_ATTN_EXT */
        int layers; /* 1, or 2 after each other */
    } cases[] = {{1, false, 1}, {6, false, 1}, {9, false, 1}, {1, true, 1}, {1, true, 2}};
    const int64_t d0 = g_decode_d, ff0 = g_decode_ff;
    g_decode_d = 256;
    g_decode_ff = 512;
    loom_backend_t one = backend_with("fuse=0");
    for (size_t t = 0; one && t < sizeof types / sizeof types[0]; t++) {
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int64_t T = cases[ci].T;
            g_decode_fa = cases[ci].fa;
            g_decode_layers = cases[ci].layers;
            struct layer_result want = {0}, got = {0};
            const bool ok = run_allocated_layer_t(one, 9, &want, types[t], T) && run_allocated_layer_t(g_be, 9, &got, types[t], T);
            CHECK(ok, "allocated decode layer %s T%lld%s x%d: compute", loom_type_name(types[t]), (long long)T, g_decode_fa ? " flash" : "",
                  g_decode_layers);
            if (ok) {
                const size_t bad = layer_diff(&want, &got, (size_t)(g_decode_d * T), 1e-4f, 2e-3f); /* the F32 result, then the F16 caches */
                CHECK(bad == 0, "allocated decode layer %s T%lld%s x%d: %zu values differ from one launch per product", loom_type_name(types[t]),
                      (long long)T, g_decode_fa ? " flash" : "", g_decode_layers, bad);
            }
            free(want.mem);
            free(got.mem);
            g_cases++;
        }
    }
    if (one) loom_backend_free(one);
    g_decode_fa = false;
    g_decode_layers = 1;
    g_decode_d = d0;
    g_decode_ff = ff0;
}

/* Two flash-attention layers whose v weights have another type than q's and k's (Q4_K with a
 * Q6_K v, as Q4_K_M files have in half of their layers), so that q, k and v cannot share one
 * launch: the result and caches equal those of one kernel per node. */
static void test_decode_mixed_v(void) {
    const int64_t d0 = g_decode_d, ff0 = g_decode_ff;
    g_decode_d = 256;
    g_decode_ff = 512;
    g_decode_fa = true;
    g_decode_layers = 2;
    g_decode_vt = LOOM_TYPE_Q6_K;
    loom_backend_t one = backend_with("fuse=0");
    struct layer_result want = {0}, got = {0};
    const bool ok = one && run_allocated_layer_t(g_be, 9, &got, LOOM_TYPE_Q4_K, 1) && run_allocated_layer_t(one, 9, &want, LOOM_TYPE_Q4_K, 1);
    CHECK(ok, "decode layers Q4_K with a Q6_K v: compute");
    if (ok) {
        const size_t bad = layer_diff(&want, &got, (size_t)g_decode_d, 1e-4f, 2e-3f);
        CHECK(bad == 0, "decode layers Q4_K with a Q6_K v: %zu values differ from one launch per product", bad);
    }
    free(want.mem);
    free(got.mem);
    if (one) loom_backend_free(one);
    g_cases++;
    g_decode_vt = LOOM_TYPE_COUNT;
    g_decode_fa = false;
    g_decode_layers = 1;
    g_decode_d = d0;
    g_decode_ff = ff0;
}

/* Nodes a matrix-vector launch's last block computes from the whole result (tails, cuda-mulmat.cu)
 * on 'be': the norm and MUL of a product's residual sum, for rows kept in registers (64) and rows
 * read twice (4096); the masked softmax of attention scores per head, rows of up to 1024 entries in
 * registers (40) and longer ones (1500) in three passes. Checked against the reference like every
 * case; with 'counted' (a backend with fusion on, freed here) each case's graph must be one launch
 * with its tail. */
static void test_tails_on(loom_backend_t be, const char * what, bool counted) {
    loom_backend_t keep = g_be;
    g_be = be;
    struct loom_cuda_stats since = stats_of(be);
    for (int w = 0; w < 2; w++) {
        const enum loom_type wt = w ? LOOM_TYPE_F16 : LOOM_TYPE_F32;
        for (int64_t M = 64; M <= 4096; M *= 64) {
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * W = loom_new_tensor_2d(ctx, wt, 48, M);
            struct loom_tensor * x = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 48, 1);
            struct loom_tensor * r = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, M, 1);
            struct loom_tensor * gw = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, M);
            W->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            gw->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            struct loom_tensor * out = loom_mul(ctx, loom_rms_norm(ctx, loom_add(ctx, loom_mul_mat(ctx, W, x), r), 1e-5f), gw);
            tc_run(ctx, out, "norm tail: %s product M %lld + residual, rms_norm, mul (%s)", loom_type_name(wt), (long long)M, what);
            const struct loom_cuda_stats d = stats_step(be, &since);
            CHECK(!counted || (d.launches == 1 && d.fusions[LOOM_CUDA_FUSION_EPILOGUE] == 1 && d.fusions[LOOM_CUDA_FUSION_TAIL_NORM] == 1),
                  "norm tail: %s M %lld (%s) not one launch: %s", loom_type_name(wt), (long long)M, what, stats_text(&d));
        }
        for (int64_t n_kv = 40; n_kv <= 1500; n_kv += 1460) {
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * K = loom_new_tensor_3d(ctx, wt, 16, n_kv, 2);
            struct loom_tensor * Q = loom_new_tensor_3d(ctx, LOOM_TYPE_F32, 16, 1, 4);
            struct loom_tensor * mask = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, n_kv, 1);
            loom_set_name(mask, "tail_mask");
            struct loom_tensor * sm = loom_soft_max_ext(ctx, loom_mul_mat(ctx, K, Q), mask, 0.25f);
            tc_run(ctx, sm, "softmax tail: %s scores of %lld cells, 4 heads (%s)", loom_type_name(wt), (long long)n_kv, what);
            const struct loom_cuda_stats d = stats_step(be, &since);
            CHECK(!counted || (d.launches == 1 && d.fusions[LOOM_CUDA_FUSION_TAIL_SOFT_MAX] == 1), "softmax tail: %s %lld cells (%s) not one launch: %s",
                  loom_type_name(wt), (long long)n_kv, what, stats_text(&d));
        }
    }
    g_be = keep;
    if (counted) { /* quietly: the profile report */
        capture_begin();
        loom_backend_free(be);
        capture_end();
    }
}

/* The norm of a layer's input and its MUL finished inside the one-column products that read them
 * (pre-norm, cuda-mulmat.cu), after a residual product that prepares it, on 'be': three products
 * in one launch (q, k and v), one product (rows of 4096 and of 52 elements, the latter read
 * element by element; a tall matrix), SwiGLU (rows of 64, 512 -- one stage of the persistent
 * kernel -- and 4096 elements), and products whose result is added to the norm's and the MUL's
 * results (so that both must be written whole before the next kernel; rows of 48 and of 512). Every node is checked against the reference by tc_run;
 * with 'counted' (a backend with fusion on, freed here) the launch counts must show each norm
 * inside the products' launch, and the q/k/v and SwiGLU shapes each in one launch with it. */
static void test_prenorm_on(loom_backend_t be, const char * what, bool counted) {
    loom_backend_t keep = g_be;
    g_be = be;
    struct loom_cuda_stats since = stats_of(be);
    const enum loom_type types[3] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16};
    const int64_t kms[8][2] = {{4096, 40}, {52, 24}, {64, 8200}, {48, 48}, {64, -9000}, {512, -8200}, {4096, -300}, {512, 512}}; /* K, M (-ff: SwiGLU) */
    for (int w = 0; w < 3; w++) {
        for (int s = 0; s < 8; s++) {
            const int64_t K = kms[s][0], M = kms[s][1] > 0 ? kms[s][1] : -kms[s][1];
            struct loom_context * ctx = tc_begin();
            struct loom_tensor * wr = loom_new_tensor_2d(ctx, types[w], 32, K); /* the residual's product */
            struct loom_tensor * xr = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 32, 1);
            struct loom_tensor * r = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, K, 1);
            struct loom_tensor * gw = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, K);
            struct loom_tensor * W = loom_new_tensor_2d(ctx, types[w], K, M);
            struct loom_tensor * W2 = loom_new_tensor_2d(ctx, types[w], K, M);
            wr->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            W->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            W2->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            gw->flags |= LOOM_TENSOR_FLAG_WEIGHT;
            struct loom_tensor * h = loom_add(ctx, loom_mul_mat(ctx, wr, xr), r);
            struct loom_tensor * y = loom_rms_norm(ctx, h, 1e-5f);
            struct loom_tensor * z = loom_mul(ctx, y, gw);
            struct loom_tensor * out;
            if (s == 0) { /* q, k and v of the norm in one launch: q and k expanded first */
                struct loom_tensor * W3 = loom_new_tensor_2d(ctx, types[w], K, M / 2);
                W3->flags |= LOOM_TENSOR_FLAG_WEIGHT;
                g_pre[0] = loom_mul_mat(ctx, W, z);
                g_pre[1] = loom_mul_mat(ctx, W2, z);
                g_n_pre = 2;
                out = loom_mul_mat(ctx, W3, z);
            } else if (kms[s][1] < 0) {
                out = loom_mul(ctx, loom_silu(ctx, loom_mul_mat(ctx, W, z)), loom_mul_mat(ctx, W2, z));
            } else {
                out = loom_mul_mat(ctx, W, z);
                if (K == M) out = loom_add(ctx, loom_add(ctx, loom_scale(ctx, out, 0.5f), z), y); /* reads y and z after the launch */
            }
            tc_run(ctx, out, "pre-norm: residual, rms_norm, mul, %s %s K %lld M %lld (%s)", loom_type_name(types[w]),
                   s == 0 ? "q/k/v" : kms[s][1] < 0 ? "SwiGLU" : "product", (long long)K, (long long)M, what);
            g_n_pre = 0;
            const struct loom_cuda_stats d = stats_step(be, &since);
            const enum loom_cuda_fusion shape = s == 0 ? LOOM_CUDA_FUSION_MULTI : LOOM_CUDA_FUSION_SWIGLU;
            CHECK(!counted || (d.led[LOOM_OP_RMS_NORM] == 1 && d.fusions[LOOM_CUDA_FUSION_PRE_NORM] == 1 &&
                               (d.fusions[shape] == 1 || (s > 0 && kms[s][1] > 0))),
                  "pre-norm: %s K %lld M %lld (%s): the norm not inside the products' launch: %s", loom_type_name(types[w]), (long long)K,
                  (long long)kms[s][1], what, stats_text(&d));
        }
    }
    g_be = keep;
    if (counted) { /* quietly: the profile report */
        capture_begin();
        loom_backend_free(be);
        capture_end();
    }
}

static void test_prenorm(void) {
    test_prenorm_on(g_be, "default", false);
    loom_backend_t be = backend_with("profile=1");
    if (be) test_prenorm_on(be, "profiled", true);
    be = backend_with("mv_blocks=3"); /* persistent products: many row groups per warp */
    if (be) {
        test_prenorm_on(be, "mv_blocks=3", false);
        loom_backend_free(be);
    }
}

static void test_tails(void) {
    test_tails_on(g_be, "default", false);
    loom_backend_t be = backend_with("profile=1");
    if (be) test_tails_on(be, "profiled", true);
}

/* The decode layer on the default backend (fusion and CUDA graphs on unless LOOM_CUDA_PARAMS says
 * otherwise) for a growing n_past, then on backends made with graphs=0 and fuse=0; a wider layer
 * whose products take the persistent kernels (also with mv_blocks=3); then the layer as the graph
 * allocator places it. */
static void test_decode(void) {
    const int64_t steps[] = {0, 1, 2, 9, 30};
    for (int w = 0; w < 2; w++)
        for (int64_t T = 1; T <= 4; T += 3)
            for (int s = 0; s < 5; s++) test_decode_layer(w ? LOOM_TYPE_F16 : LOOM_TYPE_F32, T, steps[s], "default");
    /* BF16 and F32 caches (`loom run --cache-type`) */
    for (int c = 0; c < 2; c++) {
        g_cache_type = c ? LOOM_TYPE_F32 : LOOM_TYPE_BF16;
        for (int s = 2; s < 4; s++) test_decode_layer(LOOM_TYPE_F16, 1, steps[s], c ? "F32 cache" : "BF16 cache");
    }
    g_cache_type = LOOM_TYPE_F16;
    const char * params[2] = {"graphs=0", "fuse=0"};
    for (int k = 0; k < 2; k++) {
        loom_backend_t be = backend_with(params[k]);
        if (!be) continue;
        loom_backend_t keep = g_be;
        g_be = be;
        for (int s = 0; s < 3; s++) test_decode_layer(LOOM_TYPE_F16, s == 2 ? 4 : 1, steps[s + 2], params[k]);
        g_be = keep;
        loom_backend_free(be);
    }
    /* a wider layer (head_dim 128, K of every product a multiple of a stage): the products take
     * the persistent kernels, with each warp's few row groups or many (mv_blocks=3: three blocks
     * per product) */
    g_decode_d = 512;
    g_decode_ff = 1024;
    test_decode_layer(LOOM_TYPE_F16, 1, 9, "wide");
    test_decode_layer(LOOM_TYPE_BF16, 1, 2, "wide");
    loom_backend_t be = backend_with("mv_blocks=3");
    if (be) {
        loom_backend_t keep = g_be;
        g_be = be;
        test_decode_layer(LOOM_TYPE_F16, 1, 9, "wide, mv_blocks=3");
        test_decode_layer(LOOM_TYPE_F32, 1, 30, "wide, mv_blocks=3");
        g_be = keep;
        loom_backend_free(be);
    }
    g_decode_d = 64;
    g_decode_ff = 96;
    test_decode_allocated();
    test_decode_quant();
    test_decode_mixed_v();
}

/* ================================================================ memory and device tests */

static void test_device_props(void) {
    /* init parameters: an unknown key or a value out of range refuses the backend */
    const char * bad[4] = {"bogus=1", "graphs=2", "profile=", "mv_blocks=-1"};
    for (int i = 0; i < 4; i++) {
        capture_begin();
        loom_backend_t be = loom_backend_dev_init(g_dev, bad[i]);
        capture_end();
        CHECK(be == NULL && strstr(g_log, "backend parameter") != NULL, "params '%s' refused with a message", bad[i]);
        if (be) loom_backend_free(be);
    }
    loom_backend_t ok = loom_backend_dev_init(g_dev, "graphs=0,fuse=1,,profile=0,mv_blocks=7");
    CHECK(ok != NULL, "params 'graphs=0,fuse=1,,profile=0,mv_blocks=7' accepted");
    if (ok) loom_backend_free(ok);
    struct loom_backend_dev_props p;
    loom_backend_dev_get_props(g_dev, &p);
    CHECK(!strcmp(p.name, "CUDA0"), "name %s", p.name);
    CHECK(p.description && p.description[0], "description");
    CHECK(p.memory_total > 0 && p.memory_free > 0 && p.memory_free <= p.memory_total, "memory %zu / %zu", p.memory_free, p.memory_total);
    CHECK(p.type == LOOM_BACKEND_DEV_TYPE_GPU, "type");
    CHECK(p.caps.async && p.caps.host_buffer && p.caps.buffer_from_host_ptr && p.caps.events, "caps");
    CHECK(loom_backend_dev_is_cuda(g_dev) && loom_backend_is_cuda(g_be) && !loom_backend_dev_is_cuda(loom_backend_dev_by_name("CPU")), "is_cuda");
    CHECK(loom_backend_dev_get(0) == g_dev, "CUDA0 comes first in the registry");
    CHECK(loom_backend_buft_get_alignment(g_buft) == 256, "alignment");
    CHECK(!loom_backend_buft_is_host(g_buft), "device memory is not host memory");
    fprintf(stderr, "device: %s (%s), %.0f MiB free of %.0f MiB, %zu CUDA device(s)\n", p.name, p.description,
            p.memory_free / 1048576.0, p.memory_total / 1048576.0, loom_cuda_device_count());
}

static void test_oom(void) {
    capture_begin();
    loom_backend_buffer_t b = loom_backend_buft_alloc_buffer(g_buft, (size_t)10 << 40);
    capture_end();
    CHECK(b == NULL, "10 TiB allocation fails");
    if (b) loom_backend_buffer_free(b);
    CHECK(strstr(g_log, "CUDA0") && strstr(g_log, "MiB") && strstr(g_log, "free"), "OOM message names device, MiB asked and free: %s", g_log);
    fprintf(stderr, "OOM message: %s", g_log);
    /* the device still works afterwards */
    struct loom_context * ctx = tc_begin();
    tc_run(ctx, loom_silu(ctx, mk(ctx, LOOM_TYPE_F32, NE(100, 3, 1, 1), L_CONT)), "silu after OOM");
}

static void test_max_buffer(void) {
    CHECK(loom_cuda_set_max_buffer_size(g_dev, 1 << 20) == LOOM_OK, "set max");
    CHECK(loom_backend_buft_get_max_size(g_buft) == 1 << 20, "max size set");
    capture_begin();
    loom_backend_buffer_t big = loom_backend_buft_alloc_buffer(g_buft, 2 << 20);
    capture_end();
    CHECK(big == NULL, "a buffer over max_size is refused");
    /* six 400 KB tensors: three buffers of at most 1 MiB */
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * t[6];
    for (int i = 0; i < 6; i++) {
        t[i] = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 100000);
        loom_format_name(t[i], "t%d", i);
    }
    struct loom_tensor * o = loom_mul(ctx, loom_add(ctx, t[0], t[5]), t[3]);
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
    CHECK(buf && loom_backend_multi_buffer_count(buf) >= 3, "split into %zu buffers", buf ? loom_backend_multi_buffer_count(buf) : 0);
    for (size_t i = 0; buf && i < loom_backend_multi_buffer_count(buf); i++)
        CHECK(loom_backend_buffer_get_size(loom_backend_multi_buffer_get(buf, i)) <= (1 << 20), "part %zu under max", i);
    loom_backend_buffer_free(buf);
    loom_free(ctx);
    /* the same through tc_run (which places and checks everything) */
    ctx = tc_begin();
    for (int i = 0; i < 6; i++) t[i] = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, 100000);
    o = loom_mul(ctx, loom_add(ctx, t[0], t[5]), t[3]);
    tc_run(ctx, o, "ops across split buffers");
    CHECK(loom_cuda_set_max_buffer_size(g_dev, 0) == LOOM_OK && loom_backend_buft_get_max_size(g_buft) == SIZE_MAX, "unlimited again");
    CHECK(loom_cuda_set_max_buffer_size(loom_backend_dev_by_name("CPU"), 1) == LOOM_ERR_INVALID_ARG, "not a CUDA device");
}

static void test_pinned(void) {
    loom_backend_buffer_type_t hb = loom_backend_dev_host_buffer_type(g_dev);
    CHECK(hb && loom_backend_buft_is_host(hb), "pinned buffer type is host memory");
    if (!hb) return;
    CHECK(loom_backend_dev_supports_buft(loom_backend_dev_by_name("CPU"), hb), "the CPU device accepts pinned buffers");
    CHECK(loom_backend_dev_supports_buft(g_dev, hb) && loom_backend_dev_supports_buft(g_dev, g_buft), "CUDA reads its buffer types");
    CHECK(!loom_backend_dev_supports_buft(g_dev, loom_backend_cpu_buffer_type()), "CUDA does not claim plain CPU buffers");
    /* everything (sources and results) in pinned memory */
    loom_backend_buffer_type_t saved = g_buft;
    g_buft = hb;
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * a = mk(ctx, LOOM_TYPE_F16, NE(300, 40, 1, 1), L_CONT);
    struct loom_tensor * b = mk(ctx, LOOM_TYPE_F32, NE(300, 3, 1, 1), L_CONT);
    tc_run(ctx, loom_silu(ctx, loom_mul_mat(ctx, a, b)), "mul_mat + silu in pinned memory");
    g_buft = saved;
    /* the CPU reads pinned memory directly */
    loom_backend_buffer_t buf = loom_backend_buft_alloc_buffer(hb, 4096);
    CHECK(buf && loom_backend_buffer_get_base(buf) && loom_backend_buffer_is_host(buf), "pinned buffer");
    if (buf) {
        memset(loom_backend_buffer_get_base(buf), 0x5a, 4096);
        CHECK(loom_backend_buffer_clear(buf, 7) == LOOM_OK && ((uint8_t *)loom_backend_buffer_get_base(buf))[4095] == 7, "clear");
        loom_backend_buffer_free(buf);
    }
}

/* mul_mat whose weights are read in place from a read-only mmap of a file. */
static void test_zero_copy(bool split) {
    const int64_t K = 1000, M = 300;
    const size_t wbytes = (size_t)(K * M * 2);
    const size_t file_size = 4 * wbytes + 3 * 65536;
    char path[] = "/tmp/loom-test-cuda-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temp file");
    if (fd < 0) return;
    uint8_t * data = malloc(file_size);
    for (size_t i = 0; i < file_size / 2; i++) {
        uint16_t h = loom_fp32_to_fp16((float)test_rand_normal(&g_rng));
        memcpy(data + 2 * i, &h, 2);
    }
    CHECK(write(fd, data, file_size) == (ssize_t)file_size, "write");
    uint8_t * map = mmap(NULL, file_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    CHECK(map != MAP_FAILED, "mmap");
    if (map == MAP_FAILED) {
        free(data);
        return;
    }
    /* weights at a page-unaligned but 16-byte aligned offset, a 2-byte aligned one, and a late one */
    const size_t offs[4] = {64 + 4096, 65536 + 2, 2 * 65536 + wbytes + 16, file_size - wbytes};
    const size_t span_off = 1000; /* the wrapped span starts mid-page */
    if (split) loom_cuda_set_max_buffer_size(g_dev, 256 << 10); /* < the span: overlapping chunks */
    capture_begin();
    loom_backend_buffer_t wbuf = loom_backend_dev_buffer_from_host_ptr(g_dev, map + span_off, file_size - span_off, wbytes + 4096);
    capture_end();
    if (split) loom_cuda_set_max_buffer_size(g_dev, 0);
    /* with max 256 KiB < a weight, the wrap must refuse cleanly */
    if (split) {
        CHECK(wbuf == NULL, "tensor larger than max refused");
        if (wbuf) loom_backend_buffer_free(wbuf);
        loom_cuda_set_max_buffer_size(g_dev, 2 << 20); /* 2 MiB chunks overlapping by > 600 KB */
        capture_begin();
        wbuf = loom_backend_dev_buffer_from_host_ptr(g_dev, map + span_off, file_size - span_off, wbytes + 4096);
        capture_end();
        loom_cuda_set_max_buffer_size(g_dev, 0);
        CHECK(!wbuf || loom_backend_multi_buffer_count(wbuf) >= 2, "chunked into %zu", wbuf ? loom_backend_multi_buffer_count(wbuf) : 0);
    }
    CHECK(wbuf != NULL, "wrap mmap'd file (split %d): %s", split, g_log);
    if (wbuf) {
        CHECK(loom_backend_buffer_is_host(wbuf), "mapped buffer is host memory");
        for (int w = 0; w < 4; w++)
            for (int n = 1; n <= 40; n += 39) {
                struct loom_context * ctx = tc_begin();
                struct loom_tensor * a = loom_new_tensor_2d(ctx, LOOM_TYPE_F16, K, M);
                loom_set_name(a, "mapped weight");
                enum loom_status st = loom_backend_tensor_alloc(wbuf, a, map + offs[w]);
                CHECK(st == LOOM_OK, "place weight %d", w);
                struct loom_context * ctx2 = tc_begin();
                struct loom_tensor * b = loom_new_tensor_2d(ctx2, LOOM_TYPE_F32, K, n);
                struct loom_tensor * o = loom_mul_mat(ctx2, a, b);
                loom_backend_buffer_t dbuf = loom_backend_alloc_ctx_tensors_from_buft(ctx2, g_buft, &st);
                float * bv = malloc(sizeof(float) * (size_t)(K * n));
                for (int64_t i = 0; i < K * n; i++) bv[i] = (float)test_rand_normal(&g_rng);
                loom_backend_tensor_set(b, bv, 0, sizeof(float) * (size_t)(K * n));
                struct loom_cgraph * g = loom_new_graph_custom(ctx2, 64);
                loom_build_forward_expand(g, o);
                CHECK(loom_backend_supports_op(g_be, o), "mul_mat from mapped memory supported");
                st = loom_backend_graph_compute(g_be, g);
                CHECK(st == LOOM_OK, "compute from mapped weights: %s", loom_status_str(st));
                float * out = malloc(sizeof(float) * (size_t)(M * n));
                loom_backend_tensor_get(o, out, 0, sizeof(float) * (size_t)(M * n));
                double err = 0, ref = 0;
                for (int64_t j = 0; j < n; j++)
                    for (int64_t i = 0; i < M; i++) {
                        double s = 0;
                        for (int64_t q = 0; q < K; q++) {
                            uint16_t h;
                            memcpy(&h, data + offs[w] + 2 * (size_t)(i * K + q), 2);
                            s += loom_fp16_to_fp32(h) * (double)bv[j * K + q];
                        }
                        err += (out[j * M + i] - s) * (out[j * M + i] - s);
                        ref += s * s;
                    }
                CHECK(err / ref < 5e-4, "zero-copy mul_mat (split %d, weight %d, N %d): NMSE %.3g", split, w, n, err / ref);
                g_cases++;
                free(out);
                free(bv);
                loom_backend_buffer_free(dbuf);
                loom_free(ctx2);
                loom_free(ctx);
            }
        /* a result cannot be written into read-only mapped memory: that must be an error, not a fault */
        loom_backend_buffer_free(wbuf);
    }
    munmap(map, file_size);
    free(data);
}

static void test_async_events(void) {
    loom_backend_t be2 = loom_backend_dev_init(g_dev, NULL);
    CHECK(be2 != NULL, "second backend");
    if (!be2) return;
    const int64_t n = 1 << 20;
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * x = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, n);
    struct loom_tensor * y = loom_scale(ctx, x, 3.0f);
    struct loom_tensor * z = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, n);
    struct loom_tensor * p = loom_new_tensor_1d(ctx, LOOM_TYPE_F32, n);
    enum loom_status st;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, g_buft, &st);
    struct loom_context * hctx = tc_begin();
    struct loom_tensor * hz = loom_new_tensor_1d(hctx, LOOM_TYPE_F32, n);
    struct loom_tensor * hx = loom_new_tensor_1d(hctx, LOOM_TYPE_F32, n);
    loom_backend_buffer_t hbuf = loom_backend_alloc_ctx_tensors_from_buft(hctx, loom_backend_dev_host_buffer_type(g_dev), &st);
    float * xs = (float *)hx->data; /* pinned staging memory */
    for (int64_t i = 0; i < n; i++) xs[i] = (float)i * 0.5f;
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 64);
    loom_build_forward_expand(g, y);
    loom_backend_event_t ev = loom_backend_event_new(g_dev);
    CHECK(ev != NULL, "event");
    CHECK(loom_backend_tensor_set_async(g_be, x, xs, 0, sizeof(float) * (size_t)n) == LOOM_OK, "set_async");
    CHECK(loom_backend_graph_compute_async(g_be, g) == LOOM_OK, "compute async");
    CHECK(loom_backend_event_record(ev, g_be) == LOOM_OK, "record");
    CHECK(loom_backend_event_wait(be2, ev) == LOOM_OK, "wait");
    CHECK(loom_backend_tensor_copy_async(g_be, be2, y, z) == LOOM_OK, "copy_async device to device");
    CHECK(loom_backend_tensor_copy_async(g_be, be2, z, hz) == LOOM_OK, "copy_async device to pinned");
    float * zs = malloc(sizeof(float) * (size_t)n);
    CHECK(loom_backend_tensor_get_async(be2, z, zs, 0, sizeof(float) * (size_t)n) == LOOM_OK, "get_async");
    CHECK(loom_backend_synchronize(be2) == LOOM_OK, "synchronize");
    CHECK(loom_backend_event_synchronize(ev) == LOOM_OK, "event sync");
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += zs[i] != (float)i * 1.5f || ((float *)hz->data)[i] != (float)i * 1.5f;
    CHECK(bad == 0, "async chain: %lld wrong values", (long long)bad);
    /* synchronous copies: device to device (buffer cpy_tensor), device to pinned, pinned to device */
    CHECK(loom_backend_tensor_copy(z, p) == LOOM_OK, "tensor_copy device to device");
    memset(zs, 0, sizeof(float) * (size_t)n);
    loom_backend_tensor_get(p, zs, 0, sizeof(float) * (size_t)n);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += zs[i] != (float)i * 1.5f;
    CHECK(bad == 0, "tensor_copy: %lld wrong values", (long long)bad);
    CHECK(loom_backend_tensor_memset(p, 0, 4, 8) == LOOM_OK, "memset");
    loom_backend_tensor_get(p, zs, 0, 16);
    CHECK(zs[0] == 0.0f && zs[1] == 0.0f && zs[2] == 0.0f && zs[3] == 4.5f, "memset range");
    free(zs);
    loom_backend_event_free(ev);
    loom_backend_buffer_free(hbuf);
    loom_backend_buffer_free(buf);
    loom_free(hctx);
    loom_free(ctx);
    loom_backend_free(be2);
}

static void test_supports_op(void) {
    struct loom_context * ctx = tc_begin();
    struct loom_tensor * a = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, 8, 4);
    struct loom_tensor * s = loom_silu(ctx, a);
    CHECK(loom_backend_supports_op(g_be, s), "silu supported");
    s->type = LOOM_TYPE_F16;
    CHECK(!loom_backend_supports_op(g_be, s), "silu to F16 not claimed");
    s->type = LOOM_TYPE_F32;
    a->type = LOOM_TYPE_Q4_0;
    CHECK(!loom_backend_supports_op(g_be, s), "silu of Q4_0 not claimed");
    a->type = LOOM_TYPE_F32;
    /* a source in plain CPU memory cannot be read by the device */
    loom_backend_buffer_t cb = loom_backend_alloc_ctx_tensors_from_buft(ctx, loom_backend_cpu_buffer_type(), NULL);
    CHECK(!loom_backend_supports_op(g_be, s), "a source in CPU memory is not claimed");
    struct loom_cgraph * g = loom_new_graph_custom(ctx, 64);
    loom_build_forward_expand(g, s);
    capture_begin();
    enum loom_status st = loom_backend_graph_compute(g_be, g);
    capture_end();
    /* refused cleanly: by the generic layer (INVALID_ARG) or by the device (UNSUPPORTED) */
    CHECK(st == LOOM_ERR_UNSUPPORTED || st == LOOM_ERR_INVALID_ARG, "computing it is refused: %s", loom_status_str(st));
    loom_backend_buffer_free(cb);
    loom_free(ctx);
}

int main(int argc, char ** argv) {
    g_verbose = argc > 1 && !strcmp(argv[1], "-v");
    /* read when the devices are registered: checked, then lifted */
    setenv("LOOM_CUDA_MAX_BUFFER_MB", "7", 1);
    loom_log_set(log_cb, NULL);
    g_dev = loom_backend_dev_by_name("CUDA0");
    if (!g_dev) return test_skip("no CUDA device");
    g_be = loom_backend_dev_init(g_dev, NULL);
    CHECK(g_be != NULL, "backend");
    if (!g_be) return test_finish("test-cuda");
    g_buft = loom_backend_dev_buffer_type(g_dev);
    CHECK(loom_backend_buft_get_max_size(g_buft) == (size_t)7 << 20, "LOOM_CUDA_MAX_BUFFER_MB=7 read");
    loom_cuda_set_max_buffer_size(g_dev, 0);

    int64_t t0 = loom_time_us();
    test_device_props();
    test_supports_op();
    test_oom();
    test_max_buffer();
    test_pinned();
    test_zero_copy(false);
    test_zero_copy(true);
    test_async_events();
    fprintf(stderr, "memory tests: %d failure(s) so far, %.1f s\n", test_failures, (loom_time_us() - t0) / 1e6);
    test_unary();
    test_binary();
    test_cpy();
    test_get_rows();
    test_get_rows_bad_ids();
    test_mul_mat();
    test_mul_mat_nonfinite();
    test_cpy_quant_nonfinite();
    test_rope();
    test_soft_max();
    test_argmax();
    test_graph(LOOM_TYPE_F32);
    test_graph(LOOM_TYPE_F16);
    test_graph(LOOM_TYPE_BF16);
    test_tails();
    test_prenorm();
    test_decode();
    fprintf(stderr, "%d op cases, %.1f s\n", g_cases, (loom_time_us() - t0) / 1e6);
    loom_backend_free(g_be);
    return test_finish("test-cuda");
}
