/* sim-device.c -- the sim device: creation and parameters, the device vtable, stats, failure injection. */
#include "sim-impl.h"
#include "loom-cpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct loom_sim_params loom_sim_default_params(void) {
    return (struct loom_sim_params){
        .alignment = 256,
        .max_buffer_size = SIZE_MAX,
        .memory_size = 0,
        .alloc_extra = 0,
        .host_access = false,
        .host_memory = false,
        .buffer_from_host_ptr = false,
        .async = false,
        .events = false,
        .n_threads = 0,
        .fail_alloc_at = 0,
        .fail_init_tensor_at = 0,
        .unsupported_ops = {false},
        .refuse_quant = false,
    };
}

bool loom_sim_inject(uint64_t * countdown) {
    if (*countdown == 0) return false;
    return --*countdown == 0;
}

/* ---------------------------------------------------------------- device vtable */

static const char * sim_dev_name(loom_backend_dev_t dev) { return sim_dev(dev)->name; }
static const char * sim_dev_description(loom_backend_dev_t dev) { (void)dev; return "Loom simulated discrete device (CPU kernels)"; }

static void sim_dev_memory(loom_backend_dev_t dev, size_t * free_mem, size_t * total) {
    struct sim_device * sd = sim_dev(dev);
    size_t t = sd->params.memory_size;
    if (t == 0) {
        long pages = sysconf(_SC_PHYS_PAGES);
        t = pages > 0 ? (size_t)pages * loom_page_size() : 0;
    }
    pthread_mutex_lock(&sd->lock);
    size_t used = sd->stats.bytes_allocated;
    pthread_mutex_unlock(&sd->lock);
    *total = t;
    *free_mem = used < t ? t - used : 0;
}

static enum loom_backend_dev_type sim_dev_type(loom_backend_dev_t dev) {
    return sim_dev(dev)->params.host_memory ? LOOM_BACKEND_DEV_TYPE_ACCEL : LOOM_BACKEND_DEV_TYPE_GPU;
}

static void sim_dev_caps(loom_backend_dev_t dev, struct loom_backend_dev_caps * caps) {
    const struct loom_sim_params * p = &sim_dev(dev)->params;
    *caps = (struct loom_backend_dev_caps){
        .async = p->async, .host_buffer = false, .buffer_from_host_ptr = p->buffer_from_host_ptr, .events = p->events};
}

static loom_backend_buffer_type_t sim_dev_buft(loom_backend_dev_t dev) { return &sim_dev(dev)->buft; }

static bool sim_dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) {
    const struct sim_device * sd = sim_dev(dev);
    if (op->op >= 0 && op->op < LOOM_OP_COUNT && sd->params.unsupported_ops[op->op]) return false;
    if (sd->params.refuse_quant && sim_has_quant_src(op)) return false;
    return loom_cpu_supports_op(op); /* the sim runs the CPU kernels: what they compute, it does */
}

static bool sim_dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft) {
    const struct sim_device * sd = sim_dev(dev);
    return buft == &sd->buft || (sd->params.host_access && loom_backend_buft_is_host(buft));
}

/* ---------------------------------------------------------------- creation */

static atomic_uint g_next_slot; /* gives each device its own address region */

static bool valid_params(const char * name, const struct loom_sim_params * p) {
    const char * why = NULL;
    if (!name || !name[0] || strlen(name) >= sizeof ((struct sim_device *)0)->name) why = "the name must have 1 to 63 bytes";
    else if (p->alignment == 0 || (p->alignment & (p->alignment - 1))) why = "the alignment must be a power of two";
    else if (p->alignment > ((size_t)1 << 30)) why = "the alignment must be at most 1 GiB";
    else if (p->max_buffer_size == 0) why = "the max buffer size must not be 0";
    else if (p->n_threads < 0) why = "n_threads must not be negative";
    if (why) loom_log(LOOM_LOG_ERROR, "sim device '%s': %s", name ? name : "(null)", why);
    return why == NULL;
}

loom_backend_dev_t loom_sim_device_new(const char * name, const struct loom_sim_params * params) {
    struct loom_sim_params p = params ? *params : loom_sim_default_params();
    if (!valid_params(name, &p)) return NULL;
    if (p.host_memory) p.host_access = true;
    struct sim_device * sd = calloc(1, sizeof *sd);
    if (!sd) {
        loom_log(LOOM_LOG_ERROR, "sim device '%s': out of host memory", name);
        return NULL;
    }
    if (pthread_mutex_init(&sd->lock, NULL) != 0) {
        free(sd);
        loom_log(LOOM_LOG_ERROR, "sim device '%s': cannot create a mutex", name);
        return NULL;
    }
    snprintf(sd->name, sizeof sd->name, "%s", name);
    sd->params = p;
    unsigned slot = atomic_fetch_add(&g_next_slot, 1u) & 0xFFFu;
    sd->region = SIM_OWNED_BASE + ((uint64_t)slot << SIM_REGION_BITS);
    sd->fail_alloc_in = p.fail_alloc_at;
    sd->fail_init_in = p.fail_init_tensor_at;
    sd->buft = (struct loom_backend_buffer_type){.iface = loom_sim_buft_iface, .device = &sd->dev, .context = sd};
    sd->dev = (struct loom_backend_device){
        .iface = {
            .get_name = sim_dev_name,
            .get_description = sim_dev_description,
            .get_memory = sim_dev_memory,
            .get_type = sim_dev_type,
            .get_caps = sim_dev_caps,
            .init_backend = loom_sim_backend_init,
            .get_buffer_type = sim_dev_buft,
            .get_host_buffer_type = NULL,
            .buffer_from_host_ptr = p.buffer_from_host_ptr ? loom_sim_wrap_host : NULL,
            .supports_op = sim_dev_supports_op,
            .supports_buft = sim_dev_supports_buft,
            .event_new = p.events ? loom_sim_event_new : NULL,
            .event_free = p.events ? loom_sim_event_free : NULL,
            .event_synchronize = p.events ? loom_sim_event_synchronize : NULL,
        },
        .context = sd,
    };
    return &sd->dev;
}

bool loom_sim_device_is_sim(loom_backend_dev_t dev) { return dev && dev->iface.get_name == sim_dev_name; }

void loom_sim_device_free(loom_backend_dev_t dev) {
    if (!dev) return;
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    if (sd->stats.n_buffers || sd->n_backends || sd->n_events) {
        LOOM_ABORT("sim device '%s' freed while in use: %zu buffers, %zu backends, %zu events", sd->name, sd->stats.n_buffers,
                   sd->n_backends, sd->n_events);
    }
    loom_backend_unregister_device(dev);
    pthread_mutex_destroy(&sd->lock);
    free(sd);
}

/* ---------------------------------------------------------------- stats and failure injection */

void loom_sim_get_stats(loom_backend_dev_t dev, struct loom_sim_stats * stats) {
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    *stats = sd->stats;
    pthread_mutex_unlock(&sd->lock);
}

void loom_sim_reset_stats(loom_backend_dev_t dev) {
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    sd->stats = (struct loom_sim_stats){
        .bytes_allocated = sd->stats.bytes_allocated, .bytes_peak = sd->stats.bytes_allocated, .n_buffers = sd->stats.n_buffers};
    pthread_mutex_unlock(&sd->lock);
}

void loom_sim_set_fail_alloc(loom_backend_dev_t dev, uint64_t n) {
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    sd->fail_alloc_in = n;
    pthread_mutex_unlock(&sd->lock);
}

void loom_sim_set_fail_init_tensor(loom_backend_dev_t dev, uint64_t n) {
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    sd->fail_init_in = n;
    pthread_mutex_unlock(&sd->lock);
}

void loom_sim_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes) {
    LOOM_ASSERT(loom_sim_device_is_sim(dev));
    struct sim_device * sd = sim_dev(dev);
    pthread_mutex_lock(&sd->lock);
    sd->params.max_buffer_size = bytes ? bytes : SIZE_MAX;
    pthread_mutex_unlock(&sd->lock);
}

bool loom_sim_is_device_addr(const void * addr) {
    uint64_t top = (uint64_t)(uintptr_t)addr >> 56;
    return top == (SIM_OWNED_BASE >> 56) || top == (SIM_WRAP_BASE >> 56);
}
