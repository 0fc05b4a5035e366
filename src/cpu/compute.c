/* compute.c -- the CPU graph executor: op dispatch, support checks, scratch memory, and one run
 * of the worker team (pool.c) per graph with a barrier after each node. */
#include "cpu/cpu-impl.h"

#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const struct lcpu_op_impl * const op_table[LOOM_OP_COUNT] = {
    [LOOM_OP_DUP] = &lcpu_op_copy,
    [LOOM_OP_CPY] = &lcpu_op_copy,
    [LOOM_OP_CONT] = &lcpu_op_copy,
    [LOOM_OP_ADD] = &lcpu_op_binary,
    [LOOM_OP_MUL] = &lcpu_op_binary,
    [LOOM_OP_SCALE] = &lcpu_op_unary,
    [LOOM_OP_RMS_NORM] = &lcpu_op_rms_norm,
    [LOOM_OP_MUL_MAT] = &lcpu_op_mul_mat,
    [LOOM_OP_GET_ROWS] = &lcpu_op_get_rows,
    [LOOM_OP_ROPE] = &lcpu_op_rope,
    [LOOM_OP_SOFT_MAX] = &lcpu_op_soft_max,
    [LOOM_OP_SILU] = &lcpu_op_unary,
    [LOOM_OP_GELU] = &lcpu_op_unary,
    [LOOM_OP_ARGMAX] = &lcpu_op_argmax,
    [LOOM_OP_SET_ROWS] = &lcpu_op_set_rows,
    [LOOM_OP_FLASH_ATTN_EXT] = &lcpu_op_flash_attn,
};

/* Waiters spin this many pauses (some tens of microseconds, longer than a node's imbalance on an
 * idle machine), then sleep until the last thread arrives: on a machine whose cores are busy with
 * other work, a spinning or yielding waiter would take the core from the thread it waits for. */
#define CPU_BARRIER_SPINS 2000

/* Sleeps until barrier 'target' / nth is done (count >= target), or spuriously (the caller loops). */
static void barrier_sleep(struct cpu_barrier_state * b, uint64_t target) {
#ifdef __linux__
    atomic_fetch_add(&b->sleepers, 1);
    /* the releaser adds to 'count' and then reads 'sleepers'; this thread adds to 'sleepers' and
     * then reads 'count' (both sequentially consistent): either it sees the release here, or the
     * releaser sees it and moves 'wake' and wakes it -- and the kernel sleeps only while 'wake'
     * still holds the value read before the check, so a release in between is not missed */
    const unsigned w = atomic_load(&b->wake);
    if (atomic_load(&b->count) < target) syscall(SYS_futex, (unsigned *)&b->wake, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
    atomic_fetch_sub(&b->sleepers, 1);
#else
    (void)b;
    (void)target;
    sched_yield();
#endif
}

void lcpu_barrier(const struct cpu_params * p) {
    if (p->nth <= 1) return;
    struct cpu_barrier_state * b = p->barrier;
    const uint64_t nth = (uint64_t)p->nth;
    const uint64_t my = atomic_fetch_add(&b->count, 1);
    const uint64_t target = (my / nth + 1) * nth;
    if (my + 1 == target) { /* the last to arrive: this increment released the others */
        /* the segment this barrier ends (my / nth) counted on next[my / nth % 2]: every thread has
         * left it, and the next segment to count on it starts after the next barrier */
        atomic_store_explicit(&b->next[(my / nth) & 1], 0, memory_order_relaxed);
#ifdef __linux__
        if (atomic_load(&b->sleepers) > 0) {
            atomic_fetch_add(&b->wake, 1);
            syscall(SYS_futex, (unsigned *)&b->wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        }
#endif
        return;
    }
    for (int spins = 0; atomic_load_explicit(&b->count, memory_order_acquire) < target; spins++) {
        if (spins < CPU_BARRIER_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            barrier_sleep(b, target);
        }
    }
}

/* Nodes that need no work: views reinterpret storage, empty tensors have no elements. */
static bool is_noop(const struct loom_tensor * t) {
    return t->op == LOOM_OP_NONE || loom_op_is_view(t->op) || loom_is_empty(t);
}

/* Every tensor the kernels touch must be host memory with data. */
static bool has_host_data(const struct loom_tensor * t) {
    const struct loom_tensor * base = t->view_src ? t->view_src : t;
    if (!t->data) return false;
    return !base->buffer || loom_backend_buffer_is_host(base->buffer);
}

bool loom_cpu_supports_op(const struct loom_tensor * op) {
    if (op->op == LOOM_OP_NONE || loom_op_is_view(op->op)) return true;
    if ((int)op->op < 0 || op->op >= LOOM_OP_COUNT || !op_table[op->op]) return false;
    return op_table[op->op]->supports(op);
}

/* ---------------------------------------------------------------- scratch memory
 * One buffer sized for the largest node, reused across computes; a concurrent compute (another
 * thread) that finds it taken uses a buffer of its own for that call. */

static atomic_flag g_work_busy = ATOMIC_FLAG_INIT;
static uint8_t * g_work;
static size_t g_work_size;

enum { WORK_ALIGN = 64 };

/* A buffer of at least 'size' bytes: the cached one when it is free ('*cached' true), else a new
 * one for this call. NULL when out of memory. */
static uint8_t * work_acquire(size_t size, bool * cached) {
    size = loom_pad(size ? size : WORK_ALIGN, WORK_ALIGN);
    *cached = !atomic_flag_test_and_set(&g_work_busy);
    if (!*cached) return aligned_alloc(WORK_ALIGN, size);
    if (g_work_size < size) {
        free(g_work);
        g_work = aligned_alloc(WORK_ALIGN, size);
        g_work_size = g_work ? size : 0;
    }
    if (!g_work) {
        atomic_flag_clear(&g_work_busy);
        *cached = false;
    }
    return g_work;
}

static void work_release(uint8_t * work, bool cached) {
    if (cached) {
        atomic_flag_clear(&g_work_busy);
    } else {
        free(work);
    }
}

static void node_work(const struct loom_tensor * t, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    *shared = *local = 0;
    const struct lcpu_op_impl * impl = op_table[t->op];
    if (impl->work_size) impl->work_size(t, vec, n_threads, shared, local);
    *shared = loom_pad(*shared, WORK_ALIGN);
    *local = loom_pad(*local, WORK_ALIGN);
}

/* ---------------------------------------------------------------- graph compute */

#define CPU_SMALL_GRAPH 32768 /* elements */

/* One graph as a task of the worker team: every thread walks all nodes, a barrier after each. */
struct graph_task {
    struct loom_cgraph * graph;
    const struct cpu_vec * vec;
    uint8_t * work;
    struct cpu_barrier_state * barrier;
    int n_threads; /* the scratch was sized for this many */
};

static void graph_task_run(void * arg, int ith, int nth) {
    const struct graph_task * g = arg;
    struct cpu_params p = {.ith = ith, .nth = nth, .vec = g->vec, .barrier = g->barrier};
    for (int i = 0; i < g->graph->n_nodes; i++) {
        struct loom_tensor * t = g->graph->nodes[i];
        if (is_noop(t)) continue;
        size_t shared, local;
        node_work(t, g->vec, g->n_threads, &shared, &local);
        p.shared = g->work;
        p.local = g->work + shared + (size_t)p.ith * local;
        op_table[t->op]->compute(&p, t);
        lcpu_barrier(&p);
    }
}

enum loom_status loom_cpu_graph_compute(struct loom_cgraph * graph, int n_threads) {
    if (n_threads < 1) n_threads = 1;
    const struct cpu_vec * vec = lcpu_vec_get();
    size_t work_size = 0;
    int n_work = 0;
    int64_t elements = 0; /* results, plus the weights products read */
    for (int i = 0; i < graph->n_nodes; i++) {
        struct loom_tensor * t = graph->nodes[i];
        if (is_noop(t)) continue;
        n_work++;
        elements += loom_nelements(t) + (t->op == LOOM_OP_MUL_MAT ? loom_nelements(t->src[0]) : 0);
        if (!loom_cpu_supports_op(t)) {
            loom_log(LOOM_LOG_ERROR, "CPU: op %s (%s) of node %d '%s' is not supported", loom_op_name(t->op),
                     loom_type_name(t->type), i, t->name);
            return LOOM_ERR_UNSUPPORTED;
        }
        bool ok = has_host_data(t);
        for (int s = 0; s < LOOM_MAX_SRC && ok; s++) ok = !t->src[s] || has_host_data(t->src[s]);
        if (!ok) {
            loom_log(LOOM_LOG_ERROR, "CPU: node %d '%s' (%s) has a tensor without host data", i, t->name, loom_op_name(t->op));
            return LOOM_ERR_INVALID_ARG;
        }
        size_t shared, local;
        node_work(t, vec, n_threads, &shared, &local);
        size_t need = shared + (size_t)n_threads * local;
        if (need > work_size) work_size = need;
    }
    if (n_work == 0) return LOOM_OK;
    /* a graph this small (the embedding lookup of one token before the device's layers) is done
     * sooner by one thread than by waking the team; results do not depend on the thread count */
    if (elements < CPU_SMALL_GRAPH) n_threads = 1;

    bool cached;
    uint8_t * work = work_acquire(work_size, &cached);
    if (!work) {
        loom_log(LOOM_LOG_ERROR, "CPU: cannot allocate %.2f MiB of scratch memory", work_size / 1048576.0);
        return LOOM_ERR_OOM;
    }

    struct cpu_barrier_state barrier;
    memset(&barrier, 0, sizeof barrier);
    struct graph_task task = {.graph = graph, .vec = vec, .work = work, .barrier = &barrier, .n_threads = n_threads};
    lcpu_pool_run(n_threads, graph_task_run, &task);
    work_release(work, cached);
    return LOOM_OK;
}
