/* test-devices.h -- test-only devices and a reference evaluator for the allocator and scheduler tests.
 *
 * 'tdev' is a configurable device: host memory (a CPU-like device) or "discrete" memory whose
 * tensor addresses are fake (not host pointers: dereferencing one crashes), with its own
 * alignment, max buffer size, failure injection (the Nth buffer allocation fails), optional
 * events, a set of ops it refuses, and a count of live buffers (to prove nothing leaks). It
 * computes node by node on host copies of the pointers, through the CPU kernels when they
 * support the node and a naive evaluator otherwise -- the same function on every device, so
 * results are bitwise comparable across placements.
 *
 * Header-only (static functions) so that each test program can include it. */
#ifndef LOOM_TEST_DEVICES_H
#define LOOM_TEST_DEVICES_H

#include "backend/backend-impl.h"
#include "loom-cpu.h"
#include "test-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TU static __attribute__((unused))

/* ================================================================ reference evaluator */

TU float tv_get(enum loom_type type, const uint8_t * p) {
    switch (type) {
    case LOOM_TYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case LOOM_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return loom_fp16_to_fp32(h); }
    case LOOM_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return loom_bf16_to_fp32(h); }
    case LOOM_TYPE_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
    default: return NAN;
    }
}

TU void tv_set(enum loom_type type, uint8_t * p, float v) {
    switch (type) {
    case LOOM_TYPE_F32: memcpy(p, &v, 4); break;
    case LOOM_TYPE_F16: { uint16_t h = loom_fp32_to_fp16(v); memcpy(p, &h, 2); break; }
    case LOOM_TYPE_BF16: { uint16_t h = loom_fp32_to_bf16(v); memcpy(p, &h, 2); break; }
    case LOOM_TYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    default: break;
    }
}

TU uint8_t * tv_at(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (uint8_t *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3];
}

TU float tv_load(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return tv_get(t->type, tv_at(t, i0, i1, i2, i3));
}

/* Element 'idx' in logical (ne) order. */
TU uint8_t * tv_at_flat(const struct loom_tensor * t, int64_t idx) {
    int64_t i0 = idx % t->ne[0];
    idx /= t->ne[0];
    int64_t i1 = idx % t->ne[1];
    idx /= t->ne[1];
    int64_t i2 = idx % t->ne[2];
    return tv_at(t, i0, i1, i2, idx / t->ne[2]);
}

#define TV_FOR(t) \
    for (int64_t i3 = 0; i3 < (t)->ne[3]; i3++) \
        for (int64_t i2 = 0; i2 < (t)->ne[2]; i2++) \
            for (int64_t i1 = 0; i1 < (t)->ne[1]; i1++) \
                for (int64_t i0 = 0; i0 < (t)->ne[0]; i0++)

TU float tv_unary(enum loom_op op, float x, float s) {
    switch (op) {
    case LOOM_OP_SCALE: return x * s;
    case LOOM_OP_SILU: return x / (1.0f + expf(-x));
    case LOOM_OP_GELU: return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    default: return NAN;
    }
}

TU void tv_rows(struct loom_tensor * n) {
    const struct loom_tensor * a = n->src[0], * mask = n->src[1];
    float p = loom_get_op_param_f32(n, 0);
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++) {
                int64_t m = n->ne[0];
                float * row = malloc((size_t)m * sizeof *row);
                for (int64_t i0 = 0; i0 < m; i0++) row[i0] = tv_load(a, i0, i1, i2, i3);
                if (n->op == LOOM_OP_RMS_NORM) {
                    double ss = 0;
                    for (int64_t i0 = 0; i0 < m; i0++) ss += (double)row[i0] * row[i0];
                    float scale = (float)(1.0 / sqrt(ss / (double)m + p));
                    for (int64_t i0 = 0; i0 < m; i0++) row[i0] *= scale;
                } else { /* SOFT_MAX */
                    float mx = -INFINITY;
                    for (int64_t i0 = 0; i0 < m; i0++) {
                        row[i0] *= p;
                        if (mask) row[i0] += tv_load(mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                        if (row[i0] > mx) mx = row[i0];
                    }
                    double sum = 0;
                    for (int64_t i0 = 0; i0 < m; i0++) {
                        row[i0] = mx == -INFINITY ? 0.0f : expf(row[i0] - mx);
                        sum += row[i0];
                    }
                    for (int64_t i0 = 0; i0 < m; i0++) row[i0] = sum > 0 ? (float)(row[i0] / sum) : 0.0f;
                }
                for (int64_t i0 = 0; i0 < m; i0++) tv_set(n->type, tv_at(n, i0, i1, i2, i3), row[i0]);
                free(row);
            }
}

TU void tv_mul_mat(struct loom_tensor * n) {
    const struct loom_tensor * a = n->src[0], * b = n->src[1];
    int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    TV_FOR(n) {
        double sum = 0;
        for (int64_t k = 0; k < a->ne[0]; k++) {
            sum += (double)tv_load(a, k, i0, i2 / r2, i3 / r3) * tv_load(b, k, i1, i2, i3);
        }
        tv_set(n->type, tv_at(n, i0, i1, i2, i3), (float)sum);
    }
}

/* RoPE (Su et al. 2021) as loom.h documents it: pairs (2i, 2i+1) or (i, i + n_dims/2). */
TU void tv_rope(struct loom_tensor * n) {
    const struct loom_tensor * a = n->src[0], * pos = n->src[1];
    int n_dims = loom_get_op_param_i32(n, 0), mode = loom_get_op_param_i32(n, 1);
    float base = loom_get_op_param_f32(n, 2), fscale = loom_get_op_param_f32(n, 3);
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++) {
            float p = tv_load(pos, i2, 0, 0, 0);
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++) {
                for (int64_t i0 = n_dims; i0 < n->ne[0]; i0++) tv_set(n->type, tv_at(n, i0, i1, i2, i3), tv_load(a, i0, i1, i2, i3));
                for (int i = 0; i < n_dims / 2; i++) {
                    float theta = p * fscale * powf(base, -2.0f * (float)i / (float)n_dims);
                    int64_t j0 = mode == LOOM_ROPE_NEOX ? i : 2 * i, j1 = mode == LOOM_ROPE_NEOX ? i + n_dims / 2 : 2 * i + 1;
                    float x0 = tv_load(a, j0, i1, i2, i3), x1 = tv_load(a, j1, i1, i2, i3);
                    tv_set(n->type, tv_at(n, j0, i1, i2, i3), x0 * cosf(theta) - x1 * sinf(theta));
                    tv_set(n->type, tv_at(n, j1, i1, i2, i3), x0 * sinf(theta) + x1 * cosf(theta));
                }
            }
        }
}

/* Evaluates one node whose tensors all hold host pointers. */
TU enum loom_status tv_eval(struct loom_tensor * n) {
    if (n->op == LOOM_OP_NONE || loom_op_is_view(n->op)) return LOOM_OK;
    if (loom_cpu_supports_op(n)) {
        struct loom_tensor * one = n;
        struct loom_cgraph g = {.size = 1, .n_nodes = 1, .nodes = &one};
        return loom_cpu_graph_compute(&g, 1);
    }
    const struct loom_tensor * a = n->src[0], * b = n->src[1];
    switch (n->op) {
    case LOOM_OP_ADD:
    case LOOM_OP_MUL:
        TV_FOR(n) {
            float x = tv_load(a, i0, i1, i2, i3);
            float y = tv_load(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
            tv_set(n->type, tv_at(n, i0, i1, i2, i3), n->op == LOOM_OP_ADD ? x + y : x * y);
        }
        return LOOM_OK;
    case LOOM_OP_SCALE:
    case LOOM_OP_SILU:
    case LOOM_OP_GELU: {
        float s = loom_get_op_param_f32(n, 0);
        TV_FOR(n) tv_set(n->type, tv_at(n, i0, i1, i2, i3), tv_unary(n->op, tv_load(a, i0, i1, i2, i3), s));
        return LOOM_OK;
    }
    case LOOM_OP_RMS_NORM:
    case LOOM_OP_SOFT_MAX:
        tv_rows(n);
        return LOOM_OK;
    case LOOM_OP_MUL_MAT:
        tv_mul_mat(n);
        return LOOM_OK;
    case LOOM_OP_ROPE:
        tv_rope(n);
        return LOOM_OK;
    case LOOM_OP_GET_ROWS:
        TV_FOR(n) {
            int64_t r = (int64_t)tv_load(b, i1, i2, i3, 0);
            float v = r >= 0 && r < a->ne[1] ? tv_load(a, i0, r, i2, i3) : 0.0f;
            tv_set(n->type, tv_at(n, i0, i1, i2, i3), v);
        }
        return LOOM_OK;
    case LOOM_OP_CPY:
    case LOOM_OP_DUP:
    case LOOM_OP_CONT: {
        int64_t ne = loom_nelements(n);
        for (int64_t i = 0; i < ne; i++) tv_set(n->type, tv_at_flat(n, i), tv_get(a->type, tv_at_flat(a, i)));
        return LOOM_OK;
    }
    default:
        return LOOM_ERR_UNSUPPORTED;
    }
}

TU bool tv_supports(const struct loom_tensor * n) {
    switch (n->op) {
    case LOOM_OP_NONE: case LOOM_OP_VIEW: case LOOM_OP_RESHAPE: case LOOM_OP_PERMUTE: case LOOM_OP_TRANSPOSE:
    case LOOM_OP_ADD: case LOOM_OP_MUL: case LOOM_OP_SCALE: case LOOM_OP_SILU: case LOOM_OP_GELU:
    case LOOM_OP_RMS_NORM: case LOOM_OP_SOFT_MAX: case LOOM_OP_MUL_MAT: case LOOM_OP_GET_ROWS: case LOOM_OP_ROPE:
    case LOOM_OP_CPY: case LOOM_OP_DUP: case LOOM_OP_CONT:
        return true;
    default:
        return false;
    }
}

/* ================================================================ the test device */

struct tdev_params {
    const char * name;
    bool host;              /* host memory (is_host); else fake device addresses */
    size_t alignment;       /* bytes, power of two */
    size_t max_size;        /* bytes per buffer; 0 = unlimited */
    int fail_alloc_at;      /* the Nth buffer allocation from now fails (1-based); 0 = never */
    bool events;
    uint64_t refuse_ops;    /* bit (1 << op) set: supports_op says no */
    size_t alloc_extra;     /* bytes get_alloc_size adds to loom_nbytes (device-side padding) */
};

struct tdev {
    struct loom_backend_device dev;
    struct loom_backend_buffer_type buft;
    struct tdev_params p;
    char name[32];
    int n_allocs;           /* buffer allocations attempted */
    int live_buffers;
    size_t live_bytes;
    int n_computes;         /* graph_compute calls */
    int n_nodes_computed;
};

struct tdev_buf {
    struct tdev * dev;
    uint8_t * mem;
    uintptr_t base; /* address handed out for the buffer's start */
};

TU struct tdev * tdev_of_buffer(loom_backend_buffer_t b) { return ((struct tdev_buf *)b->context)->dev; }

/* Host pointer of a tensor's first byte; NULL when 'dev' cannot read its buffer. */
TU void * tdev_host_ptr(struct tdev * dev, const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    loom_backend_buffer_t b = base->buffer;
    if (!t->data) return NULL;
    if (!b) return dev->p.host ? t->data : NULL; /* context-allocated host data */
    if (loom_backend_buffer_is_host(b)) return t->data;
    if (b->buft->device != &dev->dev) return NULL;
    struct tdev_buf * c = b->context;
    return c->mem + ((uintptr_t)t->data - c->base);
}

TU void tdev_buf_free(loom_backend_buffer_t b) {
    struct tdev_buf * c = b->context;
    c->dev->live_buffers--;
    c->dev->live_bytes -= b->size;
    free(c->mem);
    free(c);
}
TU void * tdev_buf_base(loom_backend_buffer_t b) { return (void *)((struct tdev_buf *)b->context)->base; }
TU uint8_t * tdev_buf_mem(loom_backend_buffer_t b, const struct loom_tensor * t, size_t offset) {
    struct tdev_buf * c = b->context;
    return c->mem + ((uintptr_t)t->data - c->base) + offset;
}
TU enum loom_status tdev_buf_memset(loom_backend_buffer_t b, struct loom_tensor * t, uint8_t v, size_t o, size_t s) {
    memset(tdev_buf_mem(b, t, o), v, s);
    return LOOM_OK;
}
TU enum loom_status tdev_buf_set(loom_backend_buffer_t b, struct loom_tensor * t, const void * d, size_t o, size_t s) {
    memcpy(tdev_buf_mem(b, t, o), d, s);
    return LOOM_OK;
}
TU enum loom_status tdev_buf_get(loom_backend_buffer_t b, const struct loom_tensor * t, void * d, size_t o, size_t s) {
    memcpy(d, tdev_buf_mem(b, t, o), s);
    return LOOM_OK;
}
TU enum loom_status tdev_buf_clear(loom_backend_buffer_t b, uint8_t v) {
    memset(((struct tdev_buf *)b->context)->mem, v, b->size);
    return LOOM_OK;
}

static const struct loom_backend_buffer_i tdev_buf_iface = {
    .free_buffer = tdev_buf_free,
    .get_base = tdev_buf_base,
    .memset_tensor = tdev_buf_memset,
    .set_tensor = tdev_buf_set,
    .get_tensor = tdev_buf_get,
    .clear = tdev_buf_clear,
};

TU const char * tdev_buft_name(loom_backend_buffer_type_t buft) { return ((struct tdev *)buft->context)->name; }

TU loom_backend_buffer_t tdev_buft_alloc(loom_backend_buffer_type_t buft, size_t size) {
    static uintptr_t next_fake = 1;
    struct tdev * d = buft->context;
    d->n_allocs++;
    if (d->p.fail_alloc_at && d->n_allocs == d->p.fail_alloc_at) {
        loom_log(LOOM_LOG_WARN, "%s: injected allocation failure (allocation %d)", d->name, d->n_allocs);
        return NULL;
    }
    struct tdev_buf * c = calloc(1, sizeof *c);
    size_t padded = loom_pad(size ? size : 1, d->p.alignment);
    uint8_t * mem = aligned_alloc(d->p.alignment, padded);
    if (!c || !mem) {
        free(c);
        free(mem);
        return NULL;
    }
    memset(mem, 0xA5, padded); /* garbage, so that reading unwritten memory shows */
    c->dev = d;
    c->mem = mem;
    c->base = d->p.host ? (uintptr_t)mem : (uintptr_t)(next_fake++) << 36;
    loom_backend_buffer_t b = loom_backend_buffer_init(buft, tdev_buf_iface, c, size);
    if (!b) {
        free(mem);
        free(c);
        return NULL;
    }
    d->live_buffers++;
    d->live_bytes += size;
    return b;
}

TU size_t tdev_buft_alignment(loom_backend_buffer_type_t buft) { return ((struct tdev *)buft->context)->p.alignment; }
TU size_t tdev_buft_max_size(loom_backend_buffer_type_t buft) {
    size_t m = ((struct tdev *)buft->context)->p.max_size;
    return m ? m : SIZE_MAX;
}
TU bool tdev_buft_is_host(loom_backend_buffer_type_t buft) { return ((struct tdev *)buft->context)->p.host; }
TU size_t tdev_buft_alloc_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t) {
    return loom_nbytes(t) + ((struct tdev *)buft->context)->p.alloc_extra;
}

/* ---------------------------------------------------------------- backend */

TU const char * tdev_backend_name(loom_backend_t b) { return ((struct tdev *)b->device->context)->name; }
TU void tdev_backend_free(loom_backend_t b) { free(b); }

/* Computes each node on host copies of its tensors (pointers translated); fails when a tensor
 * lives where this device cannot read it -- the scheduler must have copied it. */
TU enum loom_status tdev_backend_compute(loom_backend_t backend, struct loom_cgraph * g) {
    struct tdev * d = backend->device->context;
    d->n_computes++;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * n = g->nodes[i];
        if (n->op == LOOM_OP_NONE || loom_op_is_view(n->op)) continue;
        if (!d->dev.iface.supports_op(&d->dev, n)) {
            loom_log(LOOM_LOG_ERROR, "%s: op %s of '%s' not supported", d->name, loom_op_name(n->op), n->name);
            return LOOM_ERR_UNSUPPORTED;
        }
        struct loom_tensor node = *n, srcs[LOOM_MAX_SRC];
        node.data = tdev_host_ptr(d, n);
        /* the copies hold host pointers: present them as context memory to the CPU kernels */
        node.buffer = NULL;
        node.view_src = NULL;
        bool ok = node.data != NULL;
        for (int k = 0; k < LOOM_MAX_SRC && ok; k++) {
            if (!n->src[k]) continue;
            srcs[k] = *n->src[k];
            srcs[k].data = tdev_host_ptr(d, n->src[k]);
            srcs[k].buffer = NULL;
            srcs[k].view_src = NULL;
            ok = srcs[k].data != NULL;
            node.src[k] = &srcs[k];
        }
        if (!ok) {
            loom_log(LOOM_LOG_ERROR, "%s: node '%s' touches memory this device cannot read", d->name, n->name);
            return LOOM_ERR_BACKEND;
        }
        enum loom_status st = tv_eval(&node);
        if (st != LOOM_OK) return st;
        d->n_nodes_computed++;
    }
    return LOOM_OK;
}

TU enum loom_status tdev_event_record(loom_backend_t b, loom_backend_event_t e) { (void)b; (void)e; return LOOM_OK; }
TU enum loom_status tdev_event_wait(loom_backend_t b, loom_backend_event_t e) { (void)b; (void)e; return LOOM_OK; }

static const struct loom_backend_i tdev_backend_iface = {
    .get_name = tdev_backend_name,
    .free = tdev_backend_free,
    .graph_compute = tdev_backend_compute,
    .event_record = tdev_event_record,
    .event_wait = tdev_event_wait,
};

/* ---------------------------------------------------------------- device */

TU const char * tdev_dev_name(loom_backend_dev_t dev) { return ((struct tdev *)dev->context)->name; }
TU const char * tdev_dev_desc(loom_backend_dev_t dev) { (void)dev; return "test device"; }
TU void tdev_dev_memory(loom_backend_dev_t dev, size_t * f, size_t * t) { (void)dev; *f = *t = (size_t)1 << 30; }
TU enum loom_backend_dev_type tdev_dev_type(loom_backend_dev_t dev) {
    return ((struct tdev *)dev->context)->p.host ? LOOM_BACKEND_DEV_TYPE_ACCEL : LOOM_BACKEND_DEV_TYPE_GPU;
}
TU void tdev_dev_caps(loom_backend_dev_t dev, struct loom_backend_dev_caps * caps) {
    *caps = (struct loom_backend_dev_caps){.events = ((struct tdev *)dev->context)->p.events};
}
TU loom_backend_t tdev_dev_init(loom_backend_dev_t dev, const char * params) {
    (void)params;
    loom_backend_t b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->iface = tdev_backend_iface;
    b->device = dev;
    return b;
}
TU loom_backend_buffer_type_t tdev_dev_buft(loom_backend_dev_t dev) { return &((struct tdev *)dev->context)->buft; }
TU bool tdev_dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) {
    struct tdev * d = dev->context;
    return tv_supports(op) && !((d->p.refuse_ops >> op->op) & 1);
}
TU bool tdev_dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft) {
    struct tdev * d = dev->context;
    return d->p.host ? loom_backend_buft_is_host(buft) : buft == &d->buft;
}
TU loom_backend_event_t tdev_event_new(loom_backend_dev_t dev) {
    struct tdev * d = dev->context;
    if (!d->p.events) return NULL;
    loom_backend_event_t e = calloc(1, sizeof *e);
    if (e) e->device = dev;
    return e;
}
TU void tdev_event_free(loom_backend_dev_t dev, loom_backend_event_t e) { (void)dev; free(e); }
TU enum loom_status tdev_event_sync(loom_backend_dev_t dev, loom_backend_event_t e) { (void)dev; (void)e; return LOOM_OK; }

TU struct tdev * tdev_new(const struct tdev_params * p) {
    struct tdev * d = calloc(1, sizeof *d);
    d->p = *p;
    if (!d->p.alignment) d->p.alignment = 64;
    snprintf(d->name, sizeof d->name, "%s", p->name);
    d->dev.iface = (struct loom_backend_device_i){
        .get_name = tdev_dev_name,
        .get_description = tdev_dev_desc,
        .get_memory = tdev_dev_memory,
        .get_type = tdev_dev_type,
        .get_caps = tdev_dev_caps,
        .init_backend = tdev_dev_init,
        .get_buffer_type = tdev_dev_buft,
        .supports_op = tdev_dev_supports_op,
        .supports_buft = tdev_dev_supports_buft,
        .event_new = tdev_event_new,
        .event_free = tdev_event_free,
        .event_synchronize = tdev_event_sync,
    };
    d->dev.context = d;
    d->buft.iface = (struct loom_backend_buffer_type_i){
        .get_name = tdev_buft_name,
        .alloc_buffer = tdev_buft_alloc,
        .get_alignment = tdev_buft_alignment,
        .get_max_size = tdev_buft_max_size,
        .is_host = tdev_buft_is_host,
        .get_alloc_size = tdev_buft_alloc_size,
    };
    d->buft.device = &d->dev;
    d->buft.context = d;
    return d;
}

TU void tdev_free(struct tdev * d) { free(d); }

/* True when the CPU device's own kernels can run 'op' (they land separately; until then the
 * tests compute through tdev devices). */
TU bool test_cpu_kernels_available(void) {
    struct loom_tensor a = {.type = LOOM_TYPE_F32, .ne = {4, 4, 1, 1}, .nb = {4, 16, 64, 64}};
    struct loom_tensor b = a, n = a;
    n.op = LOOM_OP_MUL_MAT;
    n.src[0] = &a;
    n.src[1] = &b;
    return loom_cpu_supports_op(&n);
}

#endif
