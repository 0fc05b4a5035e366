/* sched-compute.c -- the scheduler's last pass: per split, wait for the previous backend, copy the
 * split's inputs onto its backend, and queue its nodes.
 *
 * Ordering across backends: when the backend changes between two splits, the new backend waits
 * for everything queued on the previous one -- through an event when the device has them, else by
 * synchronising the previous backend. Because each backend waited for its predecessor before
 * queueing its own work, this orders every split after all earlier ones, which covers both reads
 * of another backend's memory (inputs read in place or copied) and the allocator reusing memory
 * that an earlier split on another backend still reads. */
#include "sched-impl.h"

static enum loom_status wait_for(loom_backend_sched_t s, int prev, int next) {
    loom_backend_event_t ev = s->events[prev];
    if (!ev) return loom_backend_synchronize(s->backends[prev]);
    enum loom_status st = loom_backend_event_record(ev, s->backends[prev]);
    return st == LOOM_OK ? loom_backend_event_wait(s->backends[next], ev) : st;
}

static enum loom_status copy_inputs(loom_backend_sched_t s, const struct sched_split * sp) {
    loom_backend_t dst = s->backends[sp->backend];
    for (int i = 0; i < sp->n_inputs; i++) {
        const struct sched_input * in = &s->inputs[sp->first_input + i];
        loom_backend_t src = in->src_backend >= 0 ? s->backends[in->src_backend] : dst;
        enum loom_status st;
        if (sched_base(in->src)->buffer) {
            st = loom_backend_tensor_copy_async(src, dst, in->src, in->copy);
        } else { /* context-allocated host data: no buffer to copy from, but a host pointer */
            st = loom_backend_tensor_set_async(dst, in->copy, in->src->data, 0, loom_nbytes(in->src));
        }
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "scheduler: copying '%s' to %s failed: %s", galloc_describe(in->src).s, loom_backend_name(dst),
                     loom_status_str(st));
            return st;
        }
        s->copy_bytes += loom_nbytes(in->src);
    }
    return LOOM_OK;
}

static enum loom_status run_splits(loom_backend_sched_t s) {
    for (int k = 0; k < s->n_splits; k++) {
        struct sched_split * sp = &s->splits[k];
        enum loom_status st = LOOM_OK;
        if (k > 0 && s->splits[k - 1].backend != sp->backend) st = wait_for(s, s->splits[k - 1].backend, sp->backend);
        if (st == LOOM_OK) st = copy_inputs(s, sp);
        if (st == LOOM_OK) st = loom_backend_graph_compute_async(s->backends[sp->backend], &sp->graph);
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "scheduler: split %d on %s failed: %s", k, loom_backend_name(s->backends[sp->backend]),
                     loom_status_str(st));
            return st;
        }
    }
    return LOOM_OK;
}

enum loom_status sched_compute_splits(loom_backend_sched_t s) {
    s->copy_bytes = 0;
    sched_apply_rewires(s);
    enum loom_status st = run_splits(s);
    for (int b = 0; b < s->n_backends; b++) { /* before un-rewiring: queued work may still read the sources */
        enum loom_status st2 = loom_backend_synchronize(s->backends[b]);
        if (st == LOOM_OK) st = st2;
    }
    sched_undo_rewires(s);
    return st;
}
