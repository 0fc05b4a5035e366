/* comm.c -- communicators for the all-reduce of tensor parallelism: the host reference (partial sums
 * through host memory, added in F32) and, through the CUDA module, NCCL. */
#include "backend-impl.h"
#include "comm-impl.h"
#include "loom-cuda.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- host reference */

static enum loom_status host_all_reduce(loom_backend_comm_t c, struct loom_tensor * const * src, struct loom_tensor * const * dst) {
    const size_t n = (size_t)loom_nelements(src[0]);
    float * sum = malloc(n * sizeof *sum), * part = malloc(n * sizeof *part);
    enum loom_status st = sum && part ? LOOM_OK : LOOM_ERR_OOM;
    for (int r = 0; r < c->n && st == LOOM_OK; r++) st = loom_backend_synchronize(c->backends[r]);
    /* rank order, so that every rank gets the same bits */
    for (int r = 0; r < c->n && st == LOOM_OK; r++) {
        st = loom_backend_tensor_get(src[r], r ? part : sum, 0, n * sizeof *sum);
        if (r && st == LOOM_OK) {
            for (size_t i = 0; i < n; i++) sum[i] += part[i];
        }
    }
    for (int r = 0; r < c->n && st == LOOM_OK; r++) st = loom_backend_tensor_set(dst[r], sum, 0, n * sizeof *sum);
    free(sum);
    free(part);
    return st;
}

static void host_free(loom_backend_comm_t c) { (void)c; }

static const struct loom_backend_comm_i host_iface = {.name = "host", .all_reduce = host_all_reduce, .free = host_free};

/* ---------------------------------------------------------------- the API */

loom_backend_comm_t loom_backend_comm_new(loom_backend_t * backends, int n) {
    if (!backends || n < 2 || n > LOOM_COMM_MAX_RANKS) {
        loom_log(LOOM_LOG_ERROR, "communicator: need 2 to %d backends, got %d", LOOM_COMM_MAX_RANKS, n);
        return NULL;
    }
    int n_cuda = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            if (backends[j] == backends[i] || loom_backend_get_device(backends[j]) == loom_backend_get_device(backends[i])) {
                loom_log(LOOM_LOG_ERROR, "communicator: device %s given twice", loom_backend_name(backends[i]));
                return NULL;
            }
        }
        n_cuda += loom_backend_is_cuda(backends[i]);
    }
    if (n_cuda > 0 && n_cuda < n) {
        loom_log(LOOM_LOG_ERROR, "communicator: CUDA devices cannot be joined with other kinds of device in one all-reduce");
        return NULL;
    }
    if (n_cuda == n) return loom_cuda_comm_new(backends, n); /* NCCL, or NULL with the reason */
    loom_backend_comm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->iface = host_iface;
    c->n = n;
    memcpy(c->backends, backends, (size_t)n * sizeof *backends);
    return c;
}

void loom_backend_comm_free(loom_backend_comm_t c) {
    if (!c) return;
    c->iface.free(c);
    free(c);
}

const char * loom_backend_comm_name(loom_backend_comm_t c) { return c->iface.name; }
int loom_backend_comm_n_ranks(loom_backend_comm_t c) { return c->n; }

enum loom_status loom_backend_comm_all_reduce(loom_backend_comm_t c, struct loom_tensor * const * src, struct loom_tensor * const * dst) {
    for (int r = 0; r < c->n; r++) {
        const struct loom_tensor * t[2] = {src[r], dst[r]};
        for (int k = 0; k < 2; k++) {
            if (t[k]->type != LOOM_TYPE_F32 || !loom_is_contiguous(t[k]) || !loom_are_same_shape(t[k], src[0])) {
                loom_log(LOOM_LOG_ERROR, "all-reduce: '%s' of rank %d is not a contiguous F32 tensor of the shape of '%s'", t[k]->name, r,
                         src[0]->name);
                return LOOM_ERR_INVALID_ARG;
            }
        }
    }
    return c->iface.all_reduce(c, src, dst);
}
