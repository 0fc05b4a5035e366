/* comm-impl.h -- the communicator object behind loom_backend_comm_t (comm.c), which the CUDA module's
 * NCCL implementation fills too. */
#ifndef LOOM_COMM_IMPL_H
#define LOOM_COMM_IMPL_H

#include "loom-backend.h"

#define LOOM_COMM_MAX_RANKS 16

struct loom_backend_comm_i {
    const char * name;
    /* arguments checked by the wrapper: n ranks of contiguous F32 tensors of one shape */
    enum loom_status (*all_reduce)(loom_backend_comm_t comm, struct loom_tensor * const * src, struct loom_tensor * const * dst);
    void (*free)(loom_backend_comm_t comm); /* the implementation's state, not 'comm' itself */
};

struct loom_backend_comm {
    struct loom_backend_comm_i iface;
    int n;
    loom_backend_t backends[LOOM_COMM_MAX_RANKS];
    void * context;
};

/* The NCCL communicator over n CUDA backends, through the CUDA module; NULL (logged) without the
 * module's NCCL or when it fails. Defined in cuda-module.c, and as a stub without CUDA. */
loom_backend_comm_t loom_cuda_comm_new(loom_backend_t * backends, int n);

#endif
