/* sim-impl.h -- internals of the simulated device shared by its files (not a public header). */
#ifndef LOOM_SIM_IMPL_H
#define LOOM_SIM_IMPL_H

#include "backend/backend-impl.h"
#include "loom-sim.h"

#include <pthread.h>

/* The sim address space. Owned memory: the top byte 0x51, then a 12-bit device slot, then a
 * 44-bit offset handed out by a bump pointer. Wrapped host memory: SIM_WRAP_BASE + the host
 * address, so that overlapping chunks of one wrap agree on every byte's address. Both are
 * non-canonical on x86-64 (bits 63..47 differ) and, with the top byte ignored (arm64 TBI), still
 * far above any user mapping, so a dereference faults. */
#define SIM_OWNED_BASE ((uint64_t)0x5100000000000000ull)
#define SIM_WRAP_BASE ((uint64_t)0x52A0000000000000ull)
#define SIM_REGION_BITS 44
#define SIM_MAX_HOST_ADDR ((uint64_t)1 << 52) /* wrapped host addresses above this are refused */
#define SIM_GUARD ((uint64_t)1 << 16)         /* unused bytes between two owned buffers' addresses */
#define SIM_HOST_ALIGN 64                     /* alignment of the host memory behind owned buffers */

struct sim_device {
    struct loom_backend_device dev;      /* dev.context points back here */
    struct loom_backend_buffer_type buft;
    struct loom_sim_params params;
    char name[64];
    uint64_t region;                     /* first address of this device's owned region */
    pthread_mutex_t lock;                /* guards everything below */
    uint64_t next_offs;                  /* bump pointer in the region, bytes */
    struct loom_sim_stats stats;
    uint64_t fail_alloc_in;              /* the buffer creation that many from now fails; 0 = never */
    uint64_t fail_init_in;               /* likewise for init_tensor */
    size_t n_backends, n_events;         /* live objects that point at the device */
};

struct sim_buffer {
    struct sim_device * sd;
    uint8_t * host;      /* the memory behind the buffer's addresses */
    uintptr_t base;      /* the buffer's first sim address */
    bool wrapped;        /* caller memory: never freed, not device memory */
};

static inline struct sim_device * sim_dev(loom_backend_dev_t dev) { return dev->context; }

/* The host address of sim bytes [addr, addr + size) of 'buffer' (a buffer of a sim device), or
 * NULL (logged, naming 'what') when they are not all inside it. */
uint8_t * loom_sim_translate(loom_backend_buffer_t buffer, const void * addr, size_t size, const char * what);
/* True when 'buffer' is a buffer of sim device 'sd'. */
bool loom_sim_buffer_is_on(loom_backend_buffer_t buffer, const struct sim_device * sd);

/* The buffer type's vtable and the wrap of host memory (sim-buffer.c). */
extern const struct loom_backend_buffer_type_i loom_sim_buft_iface;
loom_backend_buffer_t loom_sim_wrap_host(loom_backend_dev_t dev, void * ptr, size_t size);

/* The backend and events (sim-backend.c). */
loom_backend_t loom_sim_backend_init(loom_backend_dev_t dev, const char * params);
loom_backend_event_t loom_sim_event_new(loom_backend_dev_t dev);
void loom_sim_event_free(loom_backend_dev_t dev, loom_backend_event_t event);
enum loom_status loom_sim_event_synchronize(loom_backend_dev_t dev, loom_backend_event_t event);

/* Counts one buffer creation or init_tensor and says whether failure injection hits it
 * (call with the lock held). */
bool loom_sim_inject(uint64_t * countdown);

/* True when a source of 'op' has a quantized type (blocks of several elements). */
static inline bool sim_has_quant_src(const struct loom_tensor * op) {
    for (int i = 0; i < LOOM_MAX_SRC; i++) {
        if (op->src[i] && loom_blck_size(op->src[i]->type) > 1) return true;
    }
    return false;
}

#endif
