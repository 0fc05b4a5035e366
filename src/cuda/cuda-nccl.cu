/* cuda-nccl.cu -- the all-reduce of -sm row over CUDA devices: NCCL (ncclAllReduce, one communicator
 * per GPU made by ncclCommInitAll, the ranks' calls grouped), when the build found nccl.h and
 * libnccl (LOOM_NCCL); without it CUDA devices get no communicator. */
#include "cuda-common.cuh"
#include "backend/comm-impl.h"

#include <stdlib.h>

#ifdef LOOM_NCCL
#include <nccl.h>

struct lc_nccl {
    int n;
    ncclComm_t comms[LOOM_COMM_MAX_RANKS];
};

static enum loom_status nccl_check(ncclResult_t r, const char * what) {
    if (r == ncclSuccess) return LOOM_OK;
    loom_log(LOOM_LOG_ERROR, "NCCL: %s: %s", what, ncclGetErrorString(r));
    return LOOM_ERR_BACKEND;
}

/* The device address of a tensor's first byte (device buffers: tensor data is a device address). */
static void * device_address(const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    return (char *)base->data + offs;
}

static enum loom_status nccl_all_reduce(loom_backend_comm_t c, struct loom_tensor * const * src, struct loom_tensor * const * dst) {
    struct lc_nccl * nc = (struct lc_nccl *)c->context;
    const size_t count = (size_t)loom_nelements(src[0]);
    /* one thread drives every GPU: the ranks' calls must be one group, else the first blocks */
    enum loom_status st = nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < c->n && st == LOOM_OK; r++) {
        struct lc_backend * be = (struct lc_backend *)c->backends[r]->context;
        st = LC_CHECK(cudaSetDevice(be->dev->id));
        if (st == LOOM_OK) {
            st = nccl_check(ncclAllReduce(device_address(src[r]), device_address(dst[r]), count, ncclFloat, ncclSum, nc->comms[r], be->stream),
                            "ncclAllReduce");
        }
    }
    enum loom_status st2 = nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    return st != LOOM_OK ? st : st2;
}

static void nccl_free(loom_backend_comm_t c) {
    struct lc_nccl * nc = (struct lc_nccl *)c->context;
    if (!nc) return;
    for (int r = 0; r < nc->n; r++) {
        if (nc->comms[r]) ncclCommDestroy(nc->comms[r]);
    }
    free(nc);
}

enum loom_status lc_comm_init(struct loom_backend_comm * c) {
    struct lc_nccl * nc = (struct lc_nccl *)calloc(1, sizeof *nc);
    if (!nc) return LOOM_ERR_OOM;
    int devs[LOOM_COMM_MAX_RANKS];
    for (int r = 0; r < c->n; r++) devs[r] = ((struct lc_backend *)c->backends[r]->context)->dev->id;
    enum loom_status st = nccl_check(ncclCommInitAll(nc->comms, c->n, devs), "ncclCommInitAll");
    if (st != LOOM_OK) {
        free(nc);
        return st;
    }
    nc->n = c->n;
    int version = 0;
    ncclGetVersion(&version);
    loom_log(LOOM_LOG_INFO, "all-reduce: NCCL %d over %d GPUs", version, c->n);
    c->context = nc;
    c->iface.name = "NCCL";
    c->iface.all_reduce = nccl_all_reduce;
    c->iface.free = nccl_free;
    return LOOM_OK;
}

#else

enum loom_status lc_comm_init(struct loom_backend_comm * c) {
    (void)c;
    loom_log(LOOM_LOG_ERROR, "-sm row on CUDA devices needs NCCL, and this build of Loom has none (nccl.h and libnccl were not found)");
    return LOOM_ERR_UNSUPPORTED;
}

#endif
