/* cuda-profile.cu -- the backend parameter profile=1|2: where a graph_compute's time goes, per kind
 * of kernel and on the host. Costs nothing unless the parameter is set when the backend is created.
 *
 * profile=1: each launch group (a node and the nodes fused into it) is followed by a
 * timing event. The work of a compute is held behind gate kernels, LC_PROF_SEGMENT groups each,
 * and a gate opens only once the host has queued the segment after it, so the events measure the
 * kernels back to back as the GPU runs them when it is never starved (gaps between dependent
 * kernels and the event records included, host launch cost and the gates' waits excluded). Direct launches
 * only (no CUDA graphs); each compute then waits for its work. profile=2: host times
 * only (the queueing inside graph_compute, the time between computes, the waits in synchronize),
 * CUDA graphs as configured, nothing synchronised. The report is logged when the backend is freed,
 * separately for computes without cuBLAS products (token generation) and with (prompt batches). */
#include "cuda-common.cuh"
#include "cuda-profile.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LC_PROF_MAX_KINDS 64
#define LC_PROF_GATE_TIMEOUT_NS 500000000ull /* a gate never holds the stream longer than this */
#define LC_PROF_SEGMENT 160                  /* launch groups held behind one gate (the launch queue is finite) */
#define LC_PROF_MAX_GATES 64

struct lc_prof_kind {
    char name[64];
    int64_t calls;
    double ms, flop, bytes;
};

struct lc_prof_bucket {
    int64_t computes, timed, outside_n;
    int64_t nodes, groups;
    double enqueue_ms, outside_ms, sync_ms, gpu_ms;
    int timeouts;
    int n_kinds;
    struct lc_prof_kind kinds[LC_PROF_MAX_KINDS];
};

struct lc_profile {
    int mode;
    struct lc_prof_bucket b[2];
    cudaEvent_t * ev;                /* after each gate and each launch group, in queue order */
    int * ev_kind;                   /* kind of the group before event k (index into the bucket's kinds); -1: a gate */
    double *ev_flop, *ev_bytes;
    int n_ev, cap_ev;
    int * gate;                      /* mapped pinned memory: [0] a gate timed out, [1 + g] gate g is open */
    int * gate_dev;
    int n_gates;                     /* gates queued in the compute in progress */
    int seg_groups;                  /* groups queued behind the newest gate */
    int cur;                         /* bucket of the compute in progress */
    bool timing;                     /* the compute in progress is timed */
    int64_t t_enter, t_exit;         /* microseconds */
    bool have_exit;
    double sync_ms;                  /* waited in synchronize since the last compute returned */
};

static __device__ __forceinline__ unsigned long long lc_globaltimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Holds the stream until the host opens gate 'g' (or the timeout passes). */
__global__ void lc_prof_gate_kernel(volatile int * gate, int g, unsigned long long timeout_ns) {
    const unsigned long long t0 = lc_globaltimer();
    while (gate[1 + g] == 0) {
        if (lc_globaltimer() - t0 > timeout_ns) {
            gate[0] = 1;
            break;
        }
        __nanosleep(1000);
    }
}

struct lc_profile * lc_profile_new(int mode) {
    struct lc_profile * p = (struct lc_profile *)calloc(1, sizeof *p);
    if (!p) return NULL;
    p->mode = mode;
    if (mode == 1) {
        if (cudaHostAlloc((void **)&p->gate, (1 + LC_PROF_MAX_GATES) * sizeof(int), cudaHostAllocMapped) != cudaSuccess ||
            cudaHostGetDevicePointer((void **)&p->gate_dev, p->gate, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            loom_log(LOOM_LOG_WARN, "profile=1: no mapped host memory for the gate; host times only");
            if (p->gate) cudaFreeHost(p->gate);
            p->gate = NULL;
            p->mode = 2;
        } else {
            memset(p->gate, 0, (1 + LC_PROF_MAX_GATES) * sizeof(int));
        }
    }
    return p;
}

bool lc_profile_times_kernels(const struct lc_profile * p) { return p && p->mode == 1; }

static bool grow_events(struct lc_profile * p, int need) {
    if (need <= p->cap_ev) return true;
    int cap = p->cap_ev ? 2 * p->cap_ev : 1024;
    while (cap < need) cap *= 2;
    cudaEvent_t * ev = (cudaEvent_t *)realloc(p->ev, (size_t)cap * sizeof *ev);
    if (!ev) return false;
    p->ev = ev;
    int * kind = (int *)realloc(p->ev_kind, (size_t)cap * sizeof *kind);
    double * fl = kind ? (double *)realloc(p->ev_flop, (size_t)cap * sizeof *fl) : NULL;
    if (kind) p->ev_kind = kind;
    if (fl) p->ev_flop = fl;
    double * by = fl ? (double *)realloc(p->ev_bytes, (size_t)cap * sizeof *by) : NULL;
    if (by) p->ev_bytes = by;
    if (!kind || !fl || !by) return false;
    for (int i = p->cap_ev; i < cap; i++) {
        if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
            (void)cudaGetLastError();
            p->cap_ev = i;
            return false;
        }
    }
    p->cap_ev = cap;
    return true;
}

static void open_gates(struct lc_profile * p);

/* Queues a new gate and the event after it (an interval no kind is charged with), then opens the
 * previous gate: the GPU runs the groups queued so far while the host queues the next segment. */
static void queue_gate(struct lc_backend * be) {
    struct lc_profile * p = be->prof;
    const int g = p->n_gates;
    if (g == LC_PROF_MAX_GATES || !grow_events(p, p->n_ev + 1)) return; /* the rest queues behind the last gate */
    lc_prof_gate_kernel<<<1, 1, 0, be->stream>>>(p->gate_dev, g, LC_PROF_GATE_TIMEOUT_NS);
    if (cudaGetLastError() != cudaSuccess || cudaEventRecord(p->ev[p->n_ev], be->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        p->timing = false;
        open_gates(p);
        return;
    }
    p->ev_kind[p->n_ev] = -1;
    p->n_ev++;
    p->n_gates++;
    p->seg_groups = 0;
    __sync_synchronize();
    if (g > 0) p->gate[g] = 1; /* gate g - 1 */
}

void lc_profile_begin(struct lc_backend * be, bool batch) {
    struct lc_profile * p = be->prof;
    p->cur = batch ? 1 : 0;
    struct lc_prof_bucket * b = &p->b[p->cur];
    p->t_enter = loom_time_us();
    if (p->have_exit) {
        b->outside_ms += (double)(p->t_enter - p->t_exit) / 1000.0 - p->sync_ms;
        b->sync_ms += p->sync_ms;
        b->outside_n++;
    }
    p->sync_ms = 0;
    p->n_ev = 0;
    p->timing = false;
    if (p->mode != 1 || !grow_events(p, 1)) return;
    memset(p->gate, 0, (1 + LC_PROF_MAX_GATES) * sizeof(int));
    p->n_gates = 0;
    p->timing = true;
    queue_gate(be);
}

/* Opens every gate queued: the work behind them runs. */
static void open_gates(struct lc_profile * p) {
    __sync_synchronize();
    for (int g = 0; g < p->n_gates; g++) p->gate[1 + g] = 1;
}

static int kind_index(struct lc_prof_bucket * b, const char * label) {
    for (int i = 0; i < b->n_kinds; i++) {
        if (!strcmp(b->kinds[i].name, label)) return i;
    }
    if (b->n_kinds == LC_PROF_MAX_KINDS) return LC_PROF_MAX_KINDS - 1; /* the last one collects the rest */
    struct lc_prof_kind * k = &b->kinds[b->n_kinds];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", label);
    return b->n_kinds++;
}

void lc_profile_group(struct lc_backend * be, const char * label, double flop, double bytes) {
    struct lc_profile * p = be->prof;
    if (!p->timing) return;
    if (!grow_events(p, p->n_ev + 1) || cudaEventRecord(p->ev[p->n_ev], be->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        p->timing = false;
        open_gates(p);
        return;
    }
    p->ev_kind[p->n_ev] = kind_index(&p->b[p->cur], label);
    p->ev_flop[p->n_ev] = flop;
    p->ev_bytes[p->n_ev] = bytes;
    p->n_ev++;
    if (++p->seg_groups == LC_PROF_SEGMENT) queue_gate(be);
}

void lc_profile_end(struct lc_backend * be, int n_nodes, int n_groups) {
    struct lc_profile * p = be->prof;
    struct lc_prof_bucket * b = &p->b[p->cur];
    p->t_exit = loom_time_us();
    p->have_exit = true;
    b->computes++;
    b->nodes += n_nodes;
    b->groups += n_groups;
    b->enqueue_ms += (double)(p->t_exit - p->t_enter) / 1000.0;
    if (!p->timing) return;
    open_gates(p); /* the queued work runs now */
    p->timing = false;
    if (cudaEventSynchronize(p->ev[p->n_ev - 1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (p->gate[0]) { /* the host blocked while queueing (e.g. a module loaded on first use): not a clean measurement */
        b->timeouts++;
        p->t_exit = loom_time_us();
        return;
    }
    float total = 0;
    for (int k = 1; k < p->n_ev; k++) {
        if (p->ev_kind[k] < 0) continue; /* a gate's wait */
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[k - 1], p->ev[k]) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        struct lc_prof_kind * kd = &b->kinds[p->ev_kind[k]];
        kd->calls++;
        kd->ms += ms;
        kd->flop += p->ev_flop[k];
        kd->bytes += p->ev_bytes[k];
        total += ms;
    }
    b->gpu_ms += total;
    b->timed++;
    p->t_exit = loom_time_us(); /* the wait above is not host work between computes */
}

void lc_profile_sync(struct lc_backend * be, double ms) { be->prof->sync_ms += ms; }

static int by_time(const void * x, const void * y) {
    const struct lc_prof_kind *a = (const struct lc_prof_kind *)x, *b = (const struct lc_prof_kind *)y;
    return a->ms < b->ms ? 1 : a->ms > b->ms ? -1 : 0;
}

static void report(const struct lc_backend * be, struct lc_prof_bucket * b, const char * what) {
    if (b->computes == 0) return;
    const double n = (double)b->computes;
    loom_log(LOOM_LOG_WARN,
             "%s profile, %s: %lld computes; per compute: %.1f nodes in %.1f launches; host: %.3f ms queueing in graph_compute, "
             "%.3f ms between computes (outside, excluding synchronize), %.3f ms waiting in synchronize",
             be->dev->name, what, (long long)b->computes, (double)b->nodes / n, (double)b->groups / n, b->enqueue_ms / n,
             b->outside_n ? b->outside_ms / (double)b->outside_n : 0.0, b->outside_n ? b->sync_ms / (double)b->outside_n : 0.0);
    if (b->timed == 0) return;
    const double t = (double)b->timed;
    loom_log(LOOM_LOG_WARN, "%s profile, %s: GPU %.3f ms per compute, kernels back to back (%lld timed computes; %d left out: the host "
             "blocked while queueing them)", be->dev->name, what, b->gpu_ms / t, (long long)b->timed, b->timeouts);
    qsort(b->kinds, (size_t)b->n_kinds, sizeof b->kinds[0], by_time);
    loom_log(LOOM_LOG_WARN, "  %-34s %9s %9s %11s %6s %8s %8s", "kind", "calls/cp", "us/call", "ms/compute", "%GPU", "GB/s", "TFLOP/s");
    for (int i = 0; i < b->n_kinds; i++) {
        const struct lc_prof_kind * k = &b->kinds[i];
        if (k->calls == 0) continue;
        const double s = k->ms / 1000.0;
        loom_log(LOOM_LOG_WARN, "  %-34s %9.1f %9.2f %11.4f %5.1f%% %8.0f %8.1f", k->name, (double)k->calls / t, k->ms * 1000.0 / (double)k->calls,
                 k->ms / t, b->gpu_ms > 0 ? 100.0 * k->ms / b->gpu_ms : 0.0, s > 0 ? k->bytes / s / 1e9 : 0.0,
                 s > 0 ? k->flop / s / 1e12 : 0.0);
    }
}

void lc_profile_free(struct lc_backend * be) {
    struct lc_profile * p = be->prof;
    if (!p) return;
    report(be, &p->b[0], "token generation (no cuBLAS)");
    report(be, &p->b[1], "batches (cuBLAS)");
    loom_log(LOOM_LOG_WARN, "%s profile: CUDA graph chunks: %lld instantiated, %lld updated in place; %lld computes replayed without capture",
             be->dev->name, (long long)be->graph_instantiated, (long long)be->graph_updated, (long long)be->graph_replayed);
    for (int i = 0; i < p->cap_ev; i++) cudaEventDestroy(p->ev[i]);
    free(p->ev);
    free(p->ev_kind);
    free(p->ev_flop);
    free(p->ev_bytes);
    if (p->gate) cudaFreeHost(p->gate);
    free(p);
    be->prof = NULL;
}
