/* cuda-nccl.cu -- the all-reduce of -sm row over CUDA devices: NCCL (ncclAllReduce, one communicator
 * per GPU made by ncclCommInitAll, the ranks' calls grouped), when the build found nccl.h and
 * libnccl (LOOM_NCCL); without it CUDA devices get no communicator. The library is opened (dlopen)
 * the first time a communicator is made, so that the module loads, and one GPU works, on a machine
 * without it. */
#include "cuda-common.cuh"
#include "backend/comm-impl.h"

#include <stdlib.h>

#ifdef LOOM_NCCL
#include <dlfcn.h>
#include <nccl.h>

#ifndef LOOM_NCCL_LIBRARY
#define LOOM_NCCL_LIBRARY "libnccl.so.2"
#endif

/* The NCCL functions used, from the library opened at run time. */
static struct {
    bool tried, ok;
    ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char * (*error_string)(ncclResult_t);
    ncclResult_t (*get_version)(int *);
} g_nccl;

static bool nccl_open(void) {
    if (g_nccl.tried) return g_nccl.ok;
    g_nccl.tried = true;
    void * h = dlopen(LOOM_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        loom_log(LOOM_LOG_ERROR, "-sm row on CUDA devices needs NCCL, and libnccl.so.2 cannot be loaded: %s", dlerror());
        return false;
    }
#define SYM(field, name) (*(void **)&g_nccl.field = dlsym(h, name)) != NULL
    g_nccl.ok = SYM(comm_init_all, "ncclCommInitAll") && SYM(comm_destroy, "ncclCommDestroy") && SYM(all_reduce, "ncclAllReduce") &&
                SYM(group_start, "ncclGroupStart") && SYM(group_end, "ncclGroupEnd") && SYM(error_string, "ncclGetErrorString") &&
                SYM(get_version, "ncclGetVersion");
#undef SYM
    if (!g_nccl.ok) loom_log(LOOM_LOG_ERROR, "-sm row on CUDA devices: the NCCL library lacks a function Loom calls");
    return g_nccl.ok;
}

struct lc_nccl {
    int n;
    ncclComm_t comms[LOOM_COMM_MAX_RANKS];
};

static enum loom_status nccl_check(ncclResult_t r, const char * what) {
    if (r == ncclSuccess) return LOOM_OK;
    loom_log(LOOM_LOG_ERROR, "NCCL: %s: %s", what, g_nccl.error_string(r));
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
    enum loom_status st = nccl_check(g_nccl.group_start(), "ncclGroupStart");
    for (int r = 0; r < c->n && st == LOOM_OK; r++) {
        struct lc_backend * be = (struct lc_backend *)c->backends[r]->context;
        st = LC_CHECK(cudaSetDevice(be->dev->id));
        if (st == LOOM_OK) {
            st = nccl_check(g_nccl.all_reduce(device_address(src[r]), device_address(dst[r]), count, ncclFloat, ncclSum, nc->comms[r], be->stream),
                            "ncclAllReduce");
        }
    }
    enum loom_status st2 = nccl_check(g_nccl.group_end(), "ncclGroupEnd");
    return st != LOOM_OK ? st : st2;
}

static void nccl_free(loom_backend_comm_t c) {
    struct lc_nccl * nc = (struct lc_nccl *)c->context;
    if (!nc) return;
    for (int r = 0; r < nc->n; r++) {
        if (nc->comms[r]) g_nccl.comm_destroy(nc->comms[r]);
    }
    free(nc);
}

enum loom_status lc_comm_init(struct loom_backend_comm * c) {
    if (!nccl_open()) return LOOM_ERR_UNSUPPORTED;
    struct lc_nccl * nc = (struct lc_nccl *)calloc(1, sizeof *nc);
    if (!nc) return LOOM_ERR_OOM;
    int devs[LOOM_COMM_MAX_RANKS];
    for (int r = 0; r < c->n; r++) devs[r] = ((struct lc_backend *)c->backends[r]->context)->dev->id;
    enum loom_status st = nccl_check(g_nccl.comm_init_all(nc->comms, c->n, devs), "ncclCommInitAll");
    if (st != LOOM_OK) {
        free(nc);
        return st;
    }
    nc->n = c->n;
    int version = 0;
    g_nccl.get_version(&version);
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
