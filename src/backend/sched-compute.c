/* sched-compute.c -- the scheduler's last pass: per split, wait for what it depends on, copy the
 * split's inputs onto its backend, and queue its nodes (or, for an ALL_REDUCE group, run the
 * communicator).
 *
 * Ordering across backends, by dependency rather than by split order, so that backends work at
 * the same time where the graph lets them (the micro-batches of a pipelined prompt):
 *   - a split waits for the backends whose memory it reads, in place or by copying an input (the
 *     producer's work queued so far: an event recorded there, or synchronising a backend that has
 *     no events);
 *   - a backend whose memory another backend read waits, before its next split (which may reuse
 *     that memory), for that reader: for a copy only until the reader's copies are done (an event
 *     recorded after them), for an in-place read until the reader's split is done.
 * Splits on one backend run in stream order. Every backend is synchronised at the end. */
#include "sched-impl.h"
#include "comm-impl.h"

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
            loom_log(LOOM_LOG_ERROR, "scheduler: copying '%s' to %s failed: %s", lgal_describe(in->src).s, loom_backend_name(dst),
                     loom_status_str(st));
            return st;
        }
        s->copy_bytes += loom_nbytes(in->src);
    }
    return LOOM_OK;
}

/* Runs the ALL_REDUCE group that starts at split 'k' (one split per rank, in consecutive splits);
 * '*n_used' receives the number of splits it took. */
static enum loom_status run_collective(loom_backend_sched_t s, int k, int * n_used) {
    const struct loom_tensor * first = s->split_nodes[s->splits[k].first_node];
    const int group = loom_get_op_param_i32(first, 0), n = loom_get_op_param_i32(first, 2);
    struct loom_tensor * src[SCHED_MAX_BACKENDS], * dst[SCHED_MAX_BACKENDS];
    if (!s->comm || n != loom_backend_comm_n_ranks(s->comm) || k + n > s->n_splits) {
        loom_log(LOOM_LOG_ERROR, "scheduler: all-reduce group %d of %d ranks without a communicator of as many", group, n);
        return LOOM_ERR_INVALID_ARG;
    }
    for (int r = 0; r < n; r++) src[r] = dst[r] = NULL;
    for (int i = 0; i < n; i++) {
        const struct sched_split * sp = &s->splits[k + i];
        struct loom_tensor * node = s->split_nodes[sp->first_node];
        const int rank = loom_get_op_param_i32(node, 1);
        if (!sp->collective || loom_get_op_param_i32(node, 0) != group || rank >= n || dst[rank] || s->rank_backend[rank] != sp->backend) {
            loom_log(LOOM_LOG_ERROR, "scheduler: all-reduce group %d is not one node per rank in consecutive splits on its ranks' backends", group);
            return LOOM_ERR_INVALID_ARG;
        }
        src[rank] = node->src[0];
        dst[rank] = node;
    }
    *n_used = n;
    return loom_backend_comm_all_reduce(s->comm, src, dst);
}

static enum loom_status run_splits(loom_backend_sched_t s) {
    uint32_t pend_copy[SCHED_MAX_BACKENDS] = {0}; /* [a] bit b: b copied from a's memory since a waited for it */
    uint32_t pend_read[SCHED_MAX_BACKENDS] = {0}; /* [a] bit b: b read a's memory in place (or copied without an event) */
    for (int k = 0; k < s->n_splits; k++) {
        struct sched_split * sp = &s->splits[k];
        const int a = sp->backend;
        enum loom_status st = LOOM_OK;
        const uint32_t full = (sp->deps | sp->copy_from | pend_read[a]) & ~(1u << a);
        for (int b = 0; b < s->n_backends && st == LOOM_OK; b++) {
            if (full & (1u << b)) {
                st = wait_for(s, b, a);
                pend_read[a] &= ~(1u << b);
                pend_copy[a] &= ~(1u << b);
            } else if (pend_copy[a] & (1u << b)) {
                st = loom_backend_event_wait(s->backends[a], s->copy_events[b]);
                pend_copy[a] &= ~(1u << b);
            }
        }
        if (st == LOOM_OK) st = copy_inputs(s, sp);
        if (st == LOOM_OK && sp->copy_from) {
            const bool ev = s->copy_events[a] && loom_backend_event_record(s->copy_events[a], s->backends[a]) == LOOM_OK;
            for (int b = 0; b < s->n_backends; b++) {
                if (!(sp->copy_from & (1u << b))) continue;
                if (ev) pend_copy[b] |= 1u << a;
                else pend_read[b] |= 1u << a;
            }
        }
        if (st == LOOM_OK && sp->collective) {
            /* the other ranks' splits of the group: their waits and copies, then the group at once */
            int n_used = 1;
            const int n_ranks = loom_get_op_param_i32(s->split_nodes[sp->first_node], 2);
            for (int j = k + 1; j < k + n_ranks && j < s->n_splits && s->splits[j].collective && st == LOOM_OK; j++) {
                const int aj = s->splits[j].backend;
                for (int b = 0; b < s->n_backends && st == LOOM_OK; b++) {
                    if (((s->splits[j].deps | s->splits[j].copy_from | pend_read[aj]) & ~(1u << aj)) & (1u << b)) st = wait_for(s, b, aj);
                }
                if (st == LOOM_OK) st = copy_inputs(s, &s->splits[j]);
            }
            if (st == LOOM_OK) st = run_collective(s, k, &n_used);
            if (st == LOOM_OK) {
                k += n_used - 1;
                continue;
            }
        } else if (st == LOOM_OK) {
            st = loom_backend_graph_compute_async(s->backends[a], &sp->graph);
        }
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "scheduler: split %d on %s failed: %s", k, loom_backend_name(s->backends[a]), loom_status_str(st));
            return st;
        }
        for (int b = 0; b < s->n_backends; b++) {
            if (sp->deps & (1u << b)) pend_read[b] |= 1u << a;
        }
    }
    return LOOM_OK;
}

enum loom_status lsch_compute_splits(loom_backend_sched_t s) {
    s->copy_bytes = 0;
    lsch_apply_rewires(s);
    enum loom_status st = run_splits(s);
    for (int b = 0; b < s->n_backends; b++) { /* before un-rewiring: queued work may still read the sources */
        enum loom_status st2 = loom_backend_synchronize(s->backends[b]);
        if (st == LOOM_OK) st = st2;
    }
    lsch_undo_rewires(s);
    return st;
}
