/* pool.c -- the CPU backend's worker threads: one persistent team that runs one graph at a time and
 * sleeps between graphs (a short spin, then a futex wait), so that an idle CPU backend -- every layer
 * on a GPU, the host computing only the embedding lookup of each step -- leaves the cores to the
 * thread that launches the device's work (OpenMP's team spun for milliseconds after each region). */
#include "cpu/cpu-impl.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum {
    POOL_MAX_WORKERS = 1023, /* threads besides the caller */
    POOL_SPINS = 2000,       /* pauses a worker spins for the next graph before it sleeps (as the barrier's waiters) */
};

/* The team. 'gen' counts the graphs handed out (the word idle workers sleep on); a graph's task,
 * argument and thread count are written before 'gen' moves and read by every worker after it
 * moved; the caller waits until 'pending' (workers yet to finish the graph) is 0 before it hands
 * out the next, so a worker never reads the fields of a later graph for an earlier one. */
static struct {
    pthread_mutex_t lock; /* held by the caller whose graph the team runs */
    int n_workers;
    _Atomic unsigned gen;
    _Atomic int sleepers;
    _Atomic int pending;
    lcpu_task_fn fn;
    void * arg;
    int nth;
} g_pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static inline void pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A forked child has only the thread that forked: it starts with an empty team. */
static void pool_after_fork_child(void) {
    pthread_mutex_init(&g_pool.lock, NULL);
    g_pool.n_workers = 0;
    atomic_store(&g_pool.gen, 0);
    atomic_store(&g_pool.sleepers, 0);
    atomic_store(&g_pool.pending, 0);
}

static void pool_init_once(void) { pthread_atfork(NULL, NULL, pool_after_fork_child); }

struct pool_start {
    int ith;
    unsigned gen; /* the value 'gen' had before the graph the worker joins first */
};

static struct pool_start g_starts[POOL_MAX_WORKERS + 1];

static void * pool_worker(void * p) {
    const struct pool_start * st = p;
    const int ith = st->ith;
    unsigned seen = st->gen;
    for (;;) {
        unsigned g;
        for (int spins = 0; (g = atomic_load(&g_pool.gen)) == seen; spins++) {
            if (spins < POOL_SPINS) {
                pool_pause();
                continue;
            }
#ifdef __linux__
            atomic_fetch_add(&g_pool.sleepers, 1);
            /* sleeps only while 'gen' still holds 'seen': a graph handed out in between is not missed */
            if (atomic_load(&g_pool.gen) == seen) syscall(SYS_futex, (unsigned *)&g_pool.gen, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            atomic_fetch_sub(&g_pool.sleepers, 1);
#else
            sched_yield();
#endif
        }
        seen = g;
        if (ith < g_pool.nth) g_pool.fn(g_pool.arg, ith, g_pool.nth);
        atomic_fetch_sub(&g_pool.pending, 1);
    }
    return NULL;
}

void lcpu_pool_run(int nth, lcpu_task_fn fn, void * arg) {
    if (nth > POOL_MAX_WORKERS + 1) nth = POOL_MAX_WORKERS + 1;
    if (nth <= 1 || (pthread_once(&g_pool_once, pool_init_once), pthread_mutex_trylock(&g_pool.lock) != 0)) {
        fn(arg, 0, 1); /* one thread, or the team is busy with another caller's graph */
        return;
    }
    const unsigned gen = atomic_load(&g_pool.gen);
    while (g_pool.n_workers < nth - 1) {
        const int i = g_pool.n_workers + 1;
        g_starts[i] = (struct pool_start){.ith = i, .gen = gen};
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&th, &attr, pool_worker, &g_starts[i]);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* the team stays as large as it could grow */
        g_pool.n_workers = i;
    }
    if (nth > g_pool.n_workers + 1) nth = g_pool.n_workers + 1;
    if (nth <= 1) {
        pthread_mutex_unlock(&g_pool.lock);
        fn(arg, 0, 1);
        return;
    }
    g_pool.fn = fn;
    g_pool.arg = arg;
    g_pool.nth = nth;
    atomic_store(&g_pool.pending, g_pool.n_workers);
    atomic_fetch_add(&g_pool.gen, 1); /* hands out the graph, and everything written before it */
#ifdef __linux__
    if (atomic_load(&g_pool.sleepers) > 0) syscall(SYS_futex, (unsigned *)&g_pool.gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
    fn(arg, 0, nth);
    /* the workers left the graph's last barrier with this thread; the idle ones only count down */
    for (int spins = 0; atomic_load(&g_pool.pending) > 0; spins++) {
        if (spins < POOL_SPINS) {
            pool_pause();
        } else {
            sched_yield();
        }
    }
    pthread_mutex_unlock(&g_pool.lock);
}
