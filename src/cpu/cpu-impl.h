/* cpu-impl.h -- internals shared by the CPU kernels: per-thread parameters, the op table entry,
 * row splitting, and element/row access helpers for tensors with arbitrary strides. */
#ifndef LOOM_CPU_IMPL_H
#define LOOM_CPU_IMPL_H

#include "loom-cpu.h"
#include "core/loom-internal.h"
#include "cpu/vec.h"

#include <stdatomic.h>
#include <string.h>

/* The team's barrier: spins briefly, then sleeps until the last thread arrives (on a machine
 * shared with other work, a waiter that kept the core would delay the thread it waits for).
 * Arrivals only ever add to 'count' (all zeros at the start of a graph), so barrier number e
 * (0, 1, ...) is done when 'count' reaches (e + 1) * nth, and the last thread's increment is the
 * release: one read-modify-write per thread on the line the waiters spin on (a counter reset and a
 * separate phase word on that line cost the last thread several more transfers of it between the
 * cores, bench/cpu-notes.md). The work between barriers e - 1 and e is segment e; its claims
 * (cpu_claim) count on next[e % 2], which the last thread of barrier e - 2 set back to 0 once
 * every thread had left segment e - 2, its previous user. */
struct cpu_barrier_state {
    _Alignas(64) _Atomic uint64_t count; /* arrivals since the graph started */
    _Alignas(64) _Atomic unsigned wake;  /* futex word of sleeping waiters: moves at each release that finds sleepers */
    _Atomic int sleepers;                /* threads asleep or about to sleep on 'wake' */
    _Alignas(64) _Atomic int64_t next[2]; /* the next item cpu_claim hands out, per segment parity */
};

/* What one thread of the team sees while computing one node. */
struct cpu_params {
    int ith;                    /* this thread, 0 .. nth-1 */
    struct cpu_barrier_state * barrier;
    int nth;                    /* threads in the team */
    uint8_t * shared;           /* the node's shared scratch ('shared' bytes of its work size) */
    uint8_t * local;            /* this thread's scratch ('local' bytes of its work size) */
    const struct cpu_vec * vec; /* kernels in use (SIMD or scalar) */
};

/* One op family's entry in the dispatch table (compute.c). */
struct lcpu_op_impl {
    /* true when 'dst' (with its sources' types and layouts) can be computed */
    bool (*supports)(const struct loom_tensor * dst);
    /* computes this thread's share of 'dst'; every thread of the team calls it */
    void (*compute)(const struct cpu_params * p, struct loom_tensor * dst);
    /* (optional) scratch bytes: 'shared' once per node, 'local' per thread; defaults to 0 */
    void (*work_size)(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local);
};

/* The op families (one file each). */
extern const struct lcpu_op_impl lcpu_op_copy;       /* ops-copy.c: DUP, CPY, CONT */
extern const struct lcpu_op_impl lcpu_op_binary;     /* ops-elementwise.c: ADD, MUL */
extern const struct lcpu_op_impl lcpu_op_unary;      /* ops-elementwise.c: SCALE, SILU, GELU */
extern const struct lcpu_op_impl lcpu_op_rms_norm;   /* ops-norm.c */
extern const struct lcpu_op_impl lcpu_op_mul_mat;    /* ops-matmul.c */
extern const struct lcpu_op_impl lcpu_op_get_rows;   /* ops-rows.c */
extern const struct lcpu_op_impl lcpu_op_argmax;     /* ops-rows.c */
extern const struct lcpu_op_impl lcpu_op_set_rows;   /* ops-rows.c */
extern const struct lcpu_op_impl lcpu_op_rope;       /* ops-rope.c */
extern const struct lcpu_op_impl lcpu_op_soft_max;   /* ops-softmax.c */
extern const struct lcpu_op_impl lcpu_op_flash_attn; /* ops-attn.c: FLASH_ATTN_EXT */

/* Waits for every thread of the team (all threads must call it). */
void lcpu_barrier(const struct cpu_params * p);

/* A task of the worker team: thread ith of nth. */
typedef void (*lcpu_task_fn)(void * arg, int ith, int nth);
/* Runs fn(arg, ith, nth) for ith = 0 .. nth - 1, ith 0 on the calling thread and the others on
 * the team's persistent workers (pool.c; created on first use, asleep between calls), and returns
 * when every thread is done. One caller at a time uses the team: a call made while another's runs
 * (another thread), or when no worker thread can be created, runs fn(arg, 0, 1) on the caller
 * alone -- the kernels' results do not depend on the thread count. nth is capped at 1024. */
void lcpu_pool_run(int nth, lcpu_task_fn fn, void * arg);

/* This thread's share [*i0, *i1) of 'n' items, in contiguous chunks (thread 0 first). */
static inline void cpu_split(int64_t n, const struct cpu_params * p, int64_t * i0, int64_t * i1) {
    int64_t per = (n + p->nth - 1) / p->nth;
    int64_t a = per * p->ith;
    int64_t b = a + per;
    *i0 = a < n ? a : n;
    *i1 = b < n ? b : n;
}

/* Claims the next 'n' items of the node's work shared out on demand (threads that run faster
 * take more): returns the first, which is at or past the node's item count when all are taken.
 * Only for teams of more than one thread; every node starts again from item 0. */
static inline int64_t cpu_claim(const struct cpu_params * p, int64_t n) {
    /* while this thread is in segment e, 'count' lies in [e * nth, (e + 1) * nth) */
    const uint64_t seg = atomic_load_explicit(&p->barrier->count, memory_order_relaxed) / (uint64_t)p->nth;
    return atomic_fetch_add(&p->barrier->next[seg & 1], n);
}

/* The coordinates (i1, i2, i3) of row 'r' (counted over dimensions 1..3) of 't'. */
static inline void cpu_row_coords(const struct loom_tensor * t, int64_t r, int64_t * i1, int64_t * i2, int64_t * i3) {
    *i1 = r % t->ne[1];
    *i2 = (r / t->ne[1]) % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

/* Rounds 'n' up to a multiple of 'm' (> 0). */
static inline int64_t cpu_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* ---------------------------------------------------------------- element access */

static inline bool cpu_is_float_type(enum loom_type t) {
    return t == LOOM_TYPE_F32 || t == LOOM_TYPE_F16 || t == LOOM_TYPE_BF16;
}

/* A quantized type the CPU computes with (blocks of several elements, with a dequantizer). */
static inline bool cpu_is_quant_type(enum loom_type t) {
    const struct loom_type_traits * tt = loom_type_get_traits(t);
    return tt->blck_size > 1 && tt->to_float != NULL;
}

/* A weight a kernel can read as rows of F32: a float type, or a quantized type whose rows are
 * whole blocks laid out densely (nb[0] the block size). */
static inline bool cpu_is_weight_readable(const struct loom_tensor * t) {
    return cpu_is_float_type(t->type) || (cpu_is_quant_type(t->type) && t->nb[0] == loom_type_size(t->type));
}

/* Address of element (i0, i1, i2, i3) of a host tensor. */
static inline uint8_t * cpu_elem(const struct loom_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (uint8_t *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

/* Reads one element of a float type (F32/F16/BF16) as float. */
static inline float cpu_load_f32(enum loom_type type, const void * p) {
    switch (type) {
    case LOOM_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return loom_fp16_to_fp32(h); }
    case LOOM_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return loom_bf16_to_fp32(h); }
    default: { float f; memcpy(&f, p, 4); return f; }
    }
}

/* Writes one element of a float type (F32/F16/BF16), rounding to nearest even. */
static inline void cpu_store_f32(enum loom_type type, void * p, float v) {
    switch (type) {
    case LOOM_TYPE_F16: { uint16_t h = loom_fp32_to_fp16(v); memcpy(p, &h, 2); break; }
    case LOOM_TYPE_BF16: { uint16_t h = loom_fp32_to_bf16(v); memcpy(p, &h, 2); break; }
    default: memcpy(p, &v, 4); break;
    }
}

/* Converts 'n' elements of 'type' starting at 'src' with byte stride 'stride' to contiguous F32
 * in 'dst' (SIMD when the elements are dense). For a quantized type 'src' is the first block of
 * 'n' (a multiple of the block length) dense elements and 'stride' is ignored. */
void lcpu_to_f32(const struct cpu_vec * vec, enum loom_type type, const void * src, size_t stride, float * dst, int64_t n);

/* Converts 'n' contiguous F32 values to 'type' (F32, F16 or BF16) at 'dst' with byte stride
 * 'stride' (SIMD conversion, also for strided F16/BF16 destinations such as a transposed cache). */
void lcpu_from_f32(const struct cpu_vec * vec, const float * src, enum loom_type type, void * dst, size_t stride, int64_t n);

/* Converts 'n' contiguous elements between float types (either may be F32, F16 or BF16). */
void lcpu_convert(const struct cpu_vec * vec, enum loom_type src_type, const void * src, enum loom_type dst_type,
                 void * dst, int64_t n);

/* Row (i1, i2, i3) of a float-type tensor as 'ne0' contiguous floats: a pointer into the tensor
 * itself when it is F32 with dense rows, else the row converted into 'buf' (ne0 floats). */
const float * lcpu_row_f32(const struct cpu_params * p, const struct loom_tensor * t, int64_t i1, int64_t i2, int64_t i3,
                          float * buf);

#endif
