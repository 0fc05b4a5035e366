/* test-ops-harness.c -- runs the op test cases on one device, through the backend interface only.
 *
 * Each case is built in a no_alloc context. Every tensor the op reads or writes is a view into a
 * larger base tensor; the bytes of a base outside the view's elements are guard bytes (0xFF: NaN
 * for float types), so a kernel that reads them produces NaN and one that writes them is caught.
 * The bases are placed with loom_backend_alloc_ctx_tensors_from_buft in the device's buffer type,
 * filled with loom_backend_tensor_set and read back with loom_backend_tensor_get -- tensor 'data'
 * is never dereferenced, so devices whose addresses are not host pointers work unchanged.
 * Results are compared with the double-precision reference (test-ops-ref.c) by NMSE; on the CPU,
 * a 1-thread and an N-thread run must agree bit for bit. Quantized sources hold random blocks with
 * finite random scales, laid out as dense rows of blocks (contiguous, or strided: padding between
 * rows and planes). */
#include "cli-util.h"
#include "core/loom-internal.h"
#include "loom-cpu.h"
#include "quant/quant.h"
#include "test-ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { GUARD_BYTES = 64, MAX_BASES = TEST_MAX_SRC + 1 };

/* A storage tensor and the host image of its bytes. */
struct base {
    struct loom_tensor * t;
    uint8_t * init;   /* what was written before compute */
    uint8_t * out;    /* what was read back after */
    size_t size;
};

struct built {
    struct loom_context * ctx;
    struct loom_cgraph * graph;
    struct loom_tensor * node;
    struct loom_tensor * src[TEST_MAX_SRC];
    struct base bases[MAX_BASES];
    int n_bases;
    int src_base[TEST_MAX_SRC];
    int dst_base;
    loom_backend_buffer_t buffer;
};

/* ---------------------------------------------------------------- random numbers (xorshift64*) */

static uint64_t rng_next(uint64_t * s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static double rng_uniform(uint64_t * s, double lo, double hi) {
    return lo + (hi - lo) * (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

/* ---------------------------------------------------------------- building a case */

static int add_base(struct built * b, struct loom_tensor * t) {
    LOOM_ASSERT(b->n_bases < MAX_BASES);
    b->bases[b->n_bases].t = t;
    return b->n_bases++;
}

/* A quantized source: rows of whole blocks, dense or (TL_STRIDED) with padding between rows and
 * planes, as a view into a new base with guard bytes. */
static struct loom_tensor * make_quant_src(struct built * b, int s, enum loom_type type, const int64_t ne[4], enum test_layout layout) {
    LOOM_ASSERT(layout == TL_CONTIG || layout == TL_STRIDED);
    const size_t es = loom_type_size(type);
    const bool strided = layout == TL_STRIDED;
    size_t nb[4] = {es, loom_row_size(type, ne[0])};
    for (int d = 1; d < 4; d++) {
        if (d > 1) nb[d] = nb[d - 1] * (size_t)ne[d - 1];
        nb[d] += strided ? es * (size_t)(2 * d - 1) : 0;
    }
    const size_t offset = strided ? 3 * es : 0;
    size_t extent = nb[1];
    for (int d = 1; d < 4; d++) extent += (size_t)(ne[d] - 1) * nb[d];
    const size_t blocks = (offset + extent + GUARD_BYTES + es - 1) / es;
    struct loom_tensor * base = loom_new_tensor_1d(b->ctx, type, (int64_t)blocks * loom_blck_size(type));
    loom_format_name(base, "src%d base", s);
    b->src_base[s] = add_base(b, base);
    struct loom_tensor * v = loom_view_4d(b->ctx, base, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset);
    loom_format_name(v, "src%d", s);
    return v;
}

/* A source of shape 'ne' laid out as 'layout', as a view into a new base with guard bytes. */
static struct loom_tensor * make_src(struct built * b, int s, enum loom_type type, const int64_t ne[4], enum test_layout layout) {
    if (loom_blck_size(type) > 1) return make_quant_src(b, s, type, ne, layout);
    static const int orders[TL_COUNT][4] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {0, 2, 1, 3}, {2, 0, 3, 1}, {0, 1, 2, 3}};
    const int * order = orders[layout];
    const size_t es = loom_type_size(type);
    const bool strided = layout == TL_STRIDED;
    int64_t sne[4];
    size_t snb[4];
    for (int d = 0; d < 4; d++) sne[d] = ne[order[d]];
    snb[0] = es;
    for (int d = 1; d < 4; d++) snb[d] = snb[d - 1] * (size_t)sne[d - 1] + (strided ? es * (size_t)(2 * d + 1) : 0);
    const size_t offset = strided ? 7 * es : 0;
    size_t extent = es;
    for (int d = 0; d < 4; d++) extent += (size_t)(sne[d] - 1) * snb[d];
    struct loom_tensor * base = loom_new_tensor_1d(b->ctx, type, (int64_t)((offset + extent + GUARD_BYTES) / es));
    loom_format_name(base, "src%d base", s);
    b->src_base[s] = add_base(b, base);
    struct loom_tensor * v = loom_view_4d(b->ctx, base, sne[0], sne[1], sne[2], sne[3], snb[1], snb[2], snb[3], offset);
    loom_format_name(v, "src%d", s);
    if (order[0] == 0 && order[1] == 1 && order[2] == 2) return v;
    struct loom_tensor * p = loom_permute(b->ctx, v, order[0], order[1], order[2], order[3]);
    loom_format_name(p, "src%d (%s)", s, layout == TL_TRANSPOSED ? "transposed" : "permuted");
    return p;
}

static struct loom_tensor * build_op(struct built * b, const struct test_case * c) {
    struct loom_context * ctx = b->ctx;
    struct loom_tensor ** s = b->src;
    switch (c->op) {
    case LOOM_OP_GET_ROWS: return loom_get_rows(ctx, s[0], s[1]);
    case LOOM_OP_MUL_MAT: return loom_mul_mat(ctx, s[0], s[1]);
    case LOOM_OP_ADD: return loom_add(ctx, s[0], s[1]);
    case LOOM_OP_MUL: return loom_mul(ctx, s[0], s[1]);
    case LOOM_OP_SCALE: return loom_scale(ctx, s[0], c->fp[0]);
    case LOOM_OP_RMS_NORM: return loom_rms_norm(ctx, s[0], c->fp[0]);
    case LOOM_OP_ROPE:
        if (c->fp[3] != 0.0f) { /* the extended form (attn_factor is never 0 there) */
            const struct loom_rope_ext_params e = {
                .n_ctx_orig = c->ip[2], .ext_factor = c->fp[2], .attn_factor = c->fp[3], .beta_fast = c->fp[4], .beta_slow = c->fp[5]};
            return loom_rope_ext(ctx, s[0], s[1], c->n_src > 2 ? s[2] : NULL, c->ip[0], (enum loom_rope_mode)c->ip[1], c->fp[0],
                                 c->fp[1], &e);
        }
        return loom_rope(ctx, s[0], s[1], c->ip[0], (enum loom_rope_mode)c->ip[1], c->fp[0], c->fp[1]);
    case LOOM_OP_SOFT_MAX: return loom_soft_max_ext(ctx, s[0], c->n_src > 1 ? s[1] : NULL, c->fp[0]);
    case LOOM_OP_SILU: return loom_silu(ctx, s[0]);
    case LOOM_OP_GELU: return loom_gelu(ctx, s[0]);
    case LOOM_OP_CPY: return loom_cpy(ctx, s[0], s[1]);
    case LOOM_OP_SET_ROWS: return loom_set_rows(ctx, s[0], s[1], s[2]);
    case LOOM_OP_DUP: return loom_dup(ctx, s[0]);
    case LOOM_OP_CONT: return loom_cont_4d(ctx, s[0], c->ne_out[0], c->ne_out[1], c->ne_out[2], c->ne_out[3]);
    case LOOM_OP_ARGMAX: return loom_argmax(ctx, s[0]);
    case LOOM_OP_FLASH_ATTN_EXT: return loom_flash_attn_ext(ctx, s[0], s[1], s[2], c->n_src > 3 ? s[3] : NULL, c->fp[0]);
    default: LOOM_ABORT("test-ops: no builder for op %s", loom_op_name(c->op));
    }
}

static void built_free(struct built * b) {
    for (int i = 0; i < b->n_bases; i++) {
        free(b->bases[i].init);
        free(b->bases[i].out);
    }
    loom_backend_buffer_free(b->buffer);
    loom_free(b->ctx);
    memset(b, 0, sizeof *b);
}

/* Creates the tensors and graph (no data yet). */
static void build(struct built * b, const struct test_case * c) {
    memset(b, 0, sizeof *b);
    struct loom_init_params ip = {
        .mem_size = 32 * loom_tensor_overhead() + loom_graph_overhead(64), .mem_buffer = NULL, .no_alloc = true};
    b->ctx = loom_init(ip);
    LOOM_ASSERT(b->ctx);
    for (int s = 0; s < c->n_src; s++) b->src[s] = make_src(b, s, c->type[s], c->ne[s], c->layout[s]);
    b->node = build_op(b, c);
    loom_set_name(b->node, "result");
    if (c->op == LOOM_OP_CPY) {
        b->dst_base = b->src_base[1]; /* the copy writes into its second source */
    } else if (c->op == LOOM_OP_SET_ROWS) {
        b->dst_base = b->src_base[0]; /* the rows go into the first */
    } else {
        /* place the result inside a guarded base: a guard before it and after it */
        const size_t es = loom_type_size(b->node->type); /* a block's bytes for a block type */
        const int64_t n_units = (int64_t)((2 * GUARD_BYTES + loom_nbytes(b->node) + es - 1) / es);
        struct loom_tensor * base = loom_new_tensor_1d(b->ctx, b->node->type, n_units * loom_blck_size(b->node->type));
        loom_set_name(base, "result base");
        b->dst_base = add_base(b, base);
        b->node->view_src = base;
        b->node->view_offs = GUARD_BYTES;
    }
    b->graph = loom_new_graph_custom(b->ctx, 64);
    loom_build_forward_expand(b->graph, b->node);
}

/* ---------------------------------------------------------------- data */

static void put_value(uint8_t * p, enum loom_type type, double v) {
    float f = (float)v;
    uint16_t h;
    int32_t i;
    switch (type) {
    case LOOM_TYPE_F32: memcpy(p, &f, 4); break;
    case LOOM_TYPE_F16: h = loom_fp32_to_fp16(f); memcpy(p, &h, 2); break;
    case LOOM_TYPE_BF16: h = loom_fp32_to_bf16(f); memcpy(p, &h, 2); break;
    case LOOM_TYPE_I32: i = (int32_t)v; memcpy(p, &i, 4); break;
    default: LOOM_ABORT("test-ops: cannot write type %s", loom_type_name(type));
    }
}

/* The value of source 's' at (i0, i1, ...) for case 'c' (see test-ops-cases.c for the variants). */
static double gen_value(const struct test_case * c, int s, const int64_t * i, uint64_t * rng) {
    if (c->type[s] == LOOM_TYPE_I32) {
        if (c->op == LOOM_OP_GET_ROWS) {
            const int64_t rows = c->ne[0][1];
            if (c->ip[3] == 1 && i[0] % 3 == 1) return i[0] % 2 ? -1.0 : (double)rows;
            return (double)(rng_next(rng) % (uint64_t)rows);
        }
        if (c->op == LOOM_OP_SET_ROWS) { /* distinct ids, from the last row down; some out of range */
            const int64_t rows = c->ne[0][1];
            if (c->ip[3] == 1 && i[0] % 3 == 1) return i[0] % 2 ? -1.0 : (double)rows;
            return (double)(rows - 1 - i[0] * 2 % rows);
        }
        if (c->op == LOOM_OP_ROPE) return (double)(rng_next(rng) % 4096);
        return (double)(int64_t)(rng_next(rng) % 2000001) - 1000000.0;
    }
    if (c->op == LOOM_OP_FLASH_ATTN_EXT && s == 3) { /* causal for the last n_q cells, 10% masked at random */
        const int64_t n_kv = c->ne[3][0], n_q = c->ne[0][1];
        if (c->ip[3] == 1 && i[1] == 0) return -INFINITY;
        if (i[0] > n_kv - n_q + i[1]) return -INFINITY;
        if (c->ip[3] == 3) { /* a llama context's: 0 (some -0) below the diagonal; other values, and -inf, in some 64 x 128 tiles */
            const int64_t tile = i[0] / 64 + i[1] / 128;
            if (tile % 3 == 1 && i[0] % 5 == 0) return rng_uniform(rng, -1, 1);
            if (tile % 3 == 2 && rng_uniform(rng, 0, 1) < 0.05) return -INFINITY;
            return i[0] % 7 == 3 ? -0.0 : 0.0;
        }
        return rng_uniform(rng, 0, 1) < 0.1 ? -INFINITY : rng_uniform(rng, -1, 1);
    }
    if (c->op == LOOM_OP_SOFT_MAX && s == 1) {
        if (c->ip[3] == 1 && i[1] == 1) return -INFINITY;
        return rng_uniform(rng, 0, 1) < 0.15 ? -INFINITY : rng_uniform(rng, -1, 1);
    }
    if (c->op == LOOM_OP_ARGMAX) {
        if (c->ip[3] == 1) return floor(rng_uniform(rng, 0, 4));
        if (c->ip[3] == 2 && rng_uniform(rng, 0, 1) < 0.2) return NAN;
    }
    if (c->op == LOOM_OP_ROPE && s == 2) return rng_uniform(rng, 1, 8); /* frequency factors: Llama 3.1's are 1..8 */
    if (c->op == LOOM_OP_SOFT_MAX || c->op == LOOM_OP_SILU || c->op == LOOM_OP_GELU) return rng_uniform(rng, -4, 4);
    return rng_uniform(rng, -1, 1);
}

/* Random blocks for every row of quantized source 't' in 'img': random code bytes, and scales
 * drawn from [-1/32, 1/32] (finite, so every product is; negative scales are legal). */
static void fill_quant(const struct loom_tensor * t, uint8_t * img, uint64_t * rng) {
    const size_t es = loom_type_size(t->type);
    const int64_t n_blocks = t->ne[0] / loom_blck_size(t->type);
    size_t off[2];
    const int n_off = loom_quant_half_scales(t->type, off);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t k = 0; k < n_blocks; k++) {
                    uint8_t * blk = img + t->view_offs + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3] + (size_t)k * es;
                    for (size_t i = 0; i < es; i++) blk[i] = (uint8_t)(rng_next(rng) >> 56);
                    for (int j = 0; j < n_off; j++) {
                        uint16_t h = loom_fp32_to_fp16((float)rng_uniform(rng, -1.0 / 32, 1.0 / 32));
                        memcpy(blk + off[j], &h, 2);
                    }
                    if (t->type == LOOM_TYPE_Q8_K) {
                        float d = (float)rng_uniform(rng, -1.0 / 32, 1.0 / 32);
                        memcpy(blk, &d, 4);
                    }
                }
}

/* Builds the host images (guard pattern plus every source element) and uploads them. */
static enum loom_status fill(struct built * b, const struct test_case * c, uint64_t seed) {
    for (int k = 0; k < b->n_bases; k++) {
        struct base * bs = &b->bases[k];
        bs->size = loom_nbytes(bs->t);
        bs->init = malloc(bs->size ? bs->size : 1);
        bs->out = malloc(bs->size ? bs->size : 1);
        if (!bs->init || !bs->out) return LOOM_ERR_OOM;
        memset(bs->init, 0xFF, bs->size);
    }
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int s = 0; s < c->n_src; s++) {
        const struct loom_tensor * t = b->src[s];
        uint8_t * img = b->bases[b->src_base[s]].init;
        if (loom_blck_size(t->type) > 1) {
            fill_quant(t, img, &rng);
            continue;
        }
        int64_t i[4];
        for (i[3] = 0; i[3] < t->ne[3]; i[3]++)
            for (i[2] = 0; i[2] < t->ne[2]; i[2]++)
                for (i[1] = 0; i[1] < t->ne[1]; i[1]++)
                    for (i[0] = 0; i[0] < t->ne[0]; i[0]++) {
                        size_t offs = t->view_offs;
                        for (int d = 0; d < 4; d++) offs += (size_t)i[d] * t->nb[d];
                        put_value(img + offs, t->type, gen_value(c, s, i, &rng));
                    }
    }
    for (int k = 0; k < b->n_bases; k++) {
        enum loom_status st = loom_backend_tensor_set(b->bases[k].t, b->bases[k].init, 0, b->bases[k].size);
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

/* ---------------------------------------------------------------- checking */

struct verdict {
    bool ok;
    double nmse;
    char why[256];
};

static void fail(struct verdict * v, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct verdict * v, const char * fmt, ...) {
    if (!v->ok) return; /* keep the first reason */
    v->ok = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->why, sizeof v->why, fmt, ap);
    va_end(ap);
}

/* Marks every byte of the base that belongs to an element of 't'. */
static void mark_elements(const struct loom_tensor * t, uint8_t * covered) {
    const size_t es = loom_type_size(t->type);
    const int64_t n0 = t->ne[0] / loom_blck_size(t->type); /* blocks of a block type */
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n0; i0++) {
                    size_t offs = t->view_offs + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    memset(covered + offs, 1, es);
                }
}

/* Sources untouched; the result's base changed only at the result's elements. */
static void check_guards(const struct built * b, struct verdict * v) {
    for (int k = 0; k < b->n_bases; k++) {
        const struct base * bs = &b->bases[k];
        if (k != b->dst_base) {
            if (memcmp(bs->init, bs->out, bs->size) != 0) fail(v, "%s was modified", bs->t->name);
            continue;
        }
        uint8_t * covered = calloc(bs->size ? bs->size : 1, 1);
        LOOM_ASSERT(covered);
        mark_elements(b->node, covered);
        for (size_t i = 0; i < bs->size; i++) {
            if (!covered[i] && bs->init[i] != bs->out[i]) {
                fail(v, "%s: wrote outside the result at byte %lld of its base", b->node->name, (long long)i);
                break;
            }
        }
        free(covered);
    }
}

/* Compares the result (rows sampled for --perf sized cases) with the reference. */
static void check_values(const struct built * b, const struct test_case * c, struct verdict * v) {
    const struct loom_tensor * d = b->node;
    /* the reference reads the node's sources by slot: each is one of the case's sources */
    struct test_view src[LOOM_MAX_SRC] = {{0}};
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        for (int s = 0; s < c->n_src && d->src[k]; s++) {
            if (b->src[s] == d->src[k]) src[k] = (struct test_view){b->src[s], b->bases[b->src_base[s]].init};
        }
    }
    const struct test_view res = {d, b->bases[b->dst_base].out};
    const bool exact = d->type == LOOM_TYPE_I32;
    const int64_t n_rows = loom_nrows(d);
    const int64_t step = c->perf_only && n_rows > 4 ? n_rows / 3 : 1;
    double * ref = malloc((size_t)d->ne[0] * sizeof(double));
    LOOM_ASSERT(ref);
    double err = 0.0, norm = 0.0;
    for (int64_t r = 0; r < n_rows && v->ok; r += step) {
        const int64_t i1 = r % d->ne[1], i2 = (r / d->ne[1]) % d->ne[2], i3 = r / (d->ne[1] * d->ne[2]);
        test_ref_row(d, src, i1, i2, i3, ref);
        for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
            const double x = test_view_get(&res, i0, i1, i2, i3), y = ref[i0];
            if (exact) {
                if (x != y) fail(v, "element %lld of row %lld is %g, the reference %g", (long long)i0, (long long)r, x, y);
            } else if (!isfinite(y)) {
                if (!(isnan(y) ? isnan(x) : x == y)) fail(v, "element %lld of row %lld is %g, the reference %g", (long long)i0, (long long)r, x, y);
            } else if (!isfinite(x)) {
                fail(v, "element %lld of row %lld is %g, the reference %g", (long long)i0, (long long)r, x, y);
            } else {
                err += (x - y) * (x - y);
                norm += y * y;
            }
        }
    }
    free(ref);
    v->nmse = norm > 0 ? err / norm : err;
    if (v->ok && !(v->nmse <= test_ref_threshold(d))) {
        v->ok = false;
        snprintf(v->why, sizeof v->why, "NMSE %.3g above the bound %.3g", v->nmse, test_ref_threshold(d));
    }
}

static enum loom_status read_back(struct built * b) {
    for (int k = 0; k < b->n_bases; k++) {
        enum loom_status st = loom_backend_tensor_get(b->bases[k].t, b->bases[k].out, 0, b->bases[k].size);
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

/* Same result with 'threads' threads as with one: recompute from a fresh result base, compare bytes. */
static void check_threads(struct built * b, loom_backend_t backend, int threads, struct verdict * v) {
    struct base * d = &b->bases[b->dst_base];
    uint8_t * again = malloc(d->size ? d->size : 1);
    LOOM_ASSERT(again);
    loom_backend_cpu_set_n_threads(backend, threads);
    enum loom_status st = loom_backend_tensor_set(d->t, d->init, 0, d->size);
    if (st == LOOM_OK) st = loom_backend_graph_compute(backend, b->graph);
    if (st == LOOM_OK) st = loom_backend_tensor_get(d->t, again, 0, d->size);
    if (st != LOOM_OK) {
        fail(v, "compute with %d threads failed: %s", threads, loom_status_str(st));
    } else if (memcmp(again, d->out, d->size) != 0) {
        fail(v, "results with 1 and %d threads differ", threads);
    }
    free(again);
}

/* ---------------------------------------------------------------- timing */

static void measure(struct built * b, const struct test_case * c, loom_backend_t backend, int threads, char * out, size_t size) {
    if (loom_backend_is_cpu(backend)) loom_backend_cpu_set_n_threads(backend, threads);
    loom_backend_graph_compute(backend, b->graph); /* warm up */
    double best = INFINITY, total = 0.0;
    for (int rep = 0; rep < 200 && (rep < 5 || total < 1.0); rep++) {
        int64_t t0 = loom_time_us();
        loom_backend_graph_compute(backend, b->graph);
        double dt = (double)(loom_time_us() - t0) * 1e-6;
        total += dt;
        if (dt < best) best = dt;
    }
    if (c->op == LOOM_OP_MUL_MAT) {
        const struct loom_tensor * d = b->node;
        double flops = 2.0 * (double)b->src[0]->ne[0] * (double)loom_nelements(d);
        double wbytes = (double)loom_nbytes(b->src[0]);
        snprintf(out, size, "%9.3f ms %8.1f GFLOP/s %7.1f GB/s (weights)", best * 1e3, flops / best * 1e-9, wbytes / best * 1e-9);
    } else {
        /* bytes the op must move: its result and its sources (GET_ROWS: only the rows it gathers) */
        double bytes = (double)loom_nbytes(b->node);
        for (int s = 0; s < c->n_src; s++) bytes += (double)loom_nbytes(b->src[s]);
        if (c->op == LOOM_OP_GET_ROWS) {
            bytes = (double)loom_nbytes(b->node) * (1.0 + (double)loom_type_size(b->src[0]->type) / 4.0) +
                    (double)loom_nbytes(b->src[1]);
        }
        snprintf(out, size, "%9.3f ms %8.1f GB/s", best * 1e3, bytes / best * 1e-9);
    }
}

/* ---------------------------------------------------------------- running */

enum outcome { OUT_PASS, OUT_FAIL, OUT_SKIP };

static bool graph_supported(loom_backend_dev_t dev, const struct loom_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (!loom_backend_dev_supports_op(dev, g->nodes[i])) return false;
    }
    return true;
}

/* A log callback that counts error messages into *(int *)user_data and shows nothing. */
static void count_errors(enum loom_log_level level, const char * text, void * user_data) {
    (void)text;
    if (level == LOOM_LOG_ERROR) (*(int *)user_data)++;
}

static enum outcome run_case(const struct test_case * c, int index, loom_backend_dev_t dev, loom_backend_t backend,
                             const struct test_ops_options * opt) {
    char desc[256], perf[128] = "";
    test_ops_describe(c, desc, sizeof desc);
    struct built b;
    build(&b, c);
    if (!graph_supported(dev, b.graph)) {
        if (opt->verbose) printf("  skip  %s (not supported by %s)\n", desc, loom_backend_dev_name(dev));
        built_free(&b);
        return OUT_SKIP;
    }
    struct verdict v = {.ok = true};
    enum loom_status st;
    b.buffer = loom_backend_alloc_ctx_tensors_from_buft(b.ctx, loom_backend_dev_buffer_type(dev), &st);
    if (!b.buffer) {
        fail(&v, "allocation failed: %s", loom_status_str(st));
    } else {
        const bool cpu = loom_backend_is_cpu(backend);
        if (cpu) loom_backend_cpu_set_n_threads(backend, 1);
        /* cases with ids out of range must report them: their errors are expected, not shown */
        const bool bad_ids = (c->op == LOOM_OP_GET_ROWS || c->op == LOOM_OP_SET_ROWS) && c->ip[3] == 1;
        loom_log_callback saved_cb;
        void * saved_ud;
        loom_log_get(&saved_cb, &saved_ud);
        int errors = 0;
        if (bad_ids) loom_log_set(count_errors, &errors);
        st = fill(&b, c, (uint64_t)index + 1);
        if (st == LOOM_OK) st = loom_backend_graph_compute(backend, b.graph);
        if (st == LOOM_OK) st = read_back(&b);
        if (st == LOOM_OK && bad_ids) st = loom_backend_synchronize(backend);
        if (st == LOOM_OK && bad_ids && errors == 0) fail(&v, "ids out of range were not reported");
        if (st != LOOM_OK) {
            fail(&v, "compute failed: %s", loom_status_str(st));
        } else {
            check_guards(&b, &v);
            check_values(&b, c, &v);
            /* the runs with more threads and the timed runs report the same ids again */
            if (cpu && opt->threads > 1) check_threads(&b, backend, opt->threads, &v);
            if (opt->perf && v.ok) measure(&b, c, backend, opt->threads, perf, sizeof perf);
        }
        if (bad_ids) loom_log_set(saved_cb, saved_ud);
    }
    if (!v.ok) {
        printf("  FAIL  %s: %s\n", desc, v.why);
    } else if (opt->verbose || opt->perf) {
        printf("  ok    %-72s nmse %.2e %s\n", desc, v.nmse, perf);
    }
    built_free(&b);
    return v.ok ? OUT_PASS : OUT_FAIL;
}

int test_ops_run(const struct test_ops_options * opt) {
    const char * dev_name = opt->device ? opt->device : "CPU";
    loom_backend_dev_t dev = loom_backend_dev_by_name(dev_name);
    if (!dev) {
        fprintf(stderr, "loom test-ops: no device named '%s' (available: %s; LOOM_SIM_DEVICES=N adds sim0..)\n", dev_name,
                cli_device_list());
        return 1;
    }
    if (opt->op) {
        bool known = false;
        for (int o = 0; o < LOOM_OP_COUNT; o++) known |= !strcasecmp(opt->op, loom_op_name((enum loom_op)o));
        if (!known) {
            char names[1024] = "";
            for (int o = 0; o < LOOM_OP_COUNT; o++) {
                const size_t n = strlen(names);
                if (o != LOOM_OP_NONE) snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", loom_op_name((enum loom_op)o));
            }
            fprintf(stderr, "loom test-ops: unknown op '%s' (ops: %s)\n", opt->op, names);
            return 1;
        }
    }
    loom_backend_t backend = loom_backend_dev_init(dev, NULL);
    if (!backend) {
        fprintf(stderr, "loom test-ops: cannot start a backend on %s\n", dev_name);
        return 1;
    }
    printf("test-ops on %s (%s)%s%s\n", dev_name, loom_backend_dev_description(dev),
           loom_backend_is_cpu(backend) ? ", kernels: " : "", loom_backend_is_cpu(backend) ? loom_cpu_features() : "");

    struct test_case_list list;
    test_ops_make_cases(&list);
    int count[LOOM_OP_COUNT][3] = {{0}};
    for (int i = 0; i < list.n; i++) {
        const struct test_case * c = &list.cases[i];
        if (c->perf_only && !opt->perf) continue;
        if (opt->op && strcasecmp(opt->op, loom_op_name(c->op)) != 0) continue;
        count[c->op][run_case(c, i, dev, backend, opt)]++;
    }
    test_ops_free_cases(&list);
    loom_backend_free(backend);

    int total[3] = {0};
    printf("%-10s %6s %6s %6s %6s\n", "op", "cases", "passed", "failed", "skipped");
    for (int o = 0; o < LOOM_OP_COUNT; o++) {
        int n = count[o][0] + count[o][1] + count[o][2];
        if (!n) continue;
        printf("%-10s %6d %6d %6d %6d\n", loom_op_name((enum loom_op)o), n, count[o][OUT_PASS], count[o][OUT_FAIL],
               count[o][OUT_SKIP]);
        for (int k = 0; k < 3; k++) total[k] += count[o][k];
    }
    if (total[OUT_SKIP]) {
        printf("%d passed, %d failed, %d skipped\n", total[OUT_PASS], total[OUT_FAIL], total[OUT_SKIP]);
    } else {
        printf("%d passed, %d failed\n", total[OUT_PASS], total[OUT_FAIL]);
    }
    return total[OUT_FAIL] ? 1 : 0;
}
