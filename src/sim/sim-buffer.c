/* sim-buffer.c -- the sim's buffer type and buffers: device memory in a private address space. */
#include "sim-impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- address translation */

uint8_t * loom_sim_translate(loom_backend_buffer_t buffer, const void * addr, size_t size, const char * what) {
    struct sim_buffer * sb = buffer->context;
    uintptr_t a = (uintptr_t)addr;
    if (a < sb->base || a - sb->base > buffer->size || size > buffer->size - (a - sb->base)) {
        loom_log(LOOM_LOG_ERROR, "%s: %s: sim bytes [%#jx, +%zu) are outside the buffer [%#jx, +%zu)", sb->sd->name, what,
                 (uintmax_t)a, size, (uintmax_t)sb->base, buffer->size);
        return NULL;
    }
    return sb->host + (a - sb->base);
}

/* ---------------------------------------------------------------- buffers */

static void sim_buffer_free(loom_backend_buffer_t buffer) {
    struct sim_buffer * sb = buffer->context;
    struct sim_device * sd = sb->sd;
    pthread_mutex_lock(&sd->lock);
    if (!sb->wrapped) sd->stats.bytes_allocated -= buffer->size;
    sd->stats.n_buffers--;
    pthread_mutex_unlock(&sd->lock);
    if (!sb->wrapped) free(sb->host);
    free(sb);
}

static void * sim_buffer_get_base(loom_backend_buffer_t buffer) { return (void *)((struct sim_buffer *)buffer->context)->base; }

static enum loom_status sim_buffer_init_tensor(loom_backend_buffer_t buffer, struct loom_tensor * tensor) {
    struct sim_device * sd = ((struct sim_buffer *)buffer->context)->sd;
    pthread_mutex_lock(&sd->lock);
    sd->stats.n_init_calls++;
    bool fail = loom_sim_inject(&sd->fail_init_in);
    pthread_mutex_unlock(&sd->lock);
    if (fail) {
        loom_log(LOOM_LOG_ERROR, "%s: init_tensor of '%s' failed (injected failure)", sd->name, tensor->name);
        return LOOM_ERR_BACKEND;
    }
    return LOOM_OK;
}

static enum loom_status sim_buffer_memset(loom_backend_buffer_t buffer, struct loom_tensor * t, uint8_t v, size_t offset, size_t size) {
    uint8_t * p = loom_sim_translate(buffer, (uint8_t *)t->data + offset, size, "memset_tensor");
    if (!p) return LOOM_ERR_INVALID_ARG;
    memset(p, v, size);
    return LOOM_OK;
}

static enum loom_status sim_buffer_set(loom_backend_buffer_t buffer, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    struct sim_device * sd = ((struct sim_buffer *)buffer->context)->sd;
    uint8_t * p = loom_sim_translate(buffer, (uint8_t *)t->data + offset, size, "set_tensor");
    if (!p) return LOOM_ERR_INVALID_ARG;
    memcpy(p, data, size);
    pthread_mutex_lock(&sd->lock);
    sd->stats.bytes_set += size;
    pthread_mutex_unlock(&sd->lock);
    return LOOM_OK;
}

static enum loom_status sim_buffer_get(loom_backend_buffer_t buffer, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    struct sim_device * sd = ((struct sim_buffer *)buffer->context)->sd;
    const uint8_t * p = loom_sim_translate(buffer, (const uint8_t *)t->data + offset, size, "get_tensor");
    if (!p) return LOOM_ERR_INVALID_ARG;
    memcpy(data, p, size);
    pthread_mutex_lock(&sd->lock);
    sd->stats.bytes_get += size;
    pthread_mutex_unlock(&sd->lock);
    return LOOM_OK;
}

bool loom_sim_buffer_is_on(loom_backend_buffer_t buffer, const struct sim_device * sd) {
    return buffer && buffer->buft == &sd->buft;
}

/* Device to device on the same sim: both sides are this device's memory. Another device (another
 * sim included) cannot be reached: the generic code stages through the host. */
static bool sim_buffer_cpy(loom_backend_buffer_t buffer, const struct loom_tensor * src, struct loom_tensor * dst) {
    struct sim_device * sd = ((struct sim_buffer *)buffer->context)->sd;
    if (!loom_sim_buffer_is_on(src->buffer, sd)) return false;
    size_t n = loom_nbytes(src);
    const uint8_t * s = loom_sim_translate(src->buffer, src->data, n, "cpy_tensor (source)");
    uint8_t * d = loom_sim_translate(buffer, dst->data, n, "cpy_tensor (destination)");
    if (!s || !d) return false;
    memmove(d, s, n);
    pthread_mutex_lock(&sd->lock);
    sd->stats.bytes_copied += n;
    pthread_mutex_unlock(&sd->lock);
    return true;
}

static enum loom_status sim_buffer_clear(loom_backend_buffer_t buffer, uint8_t value) {
    memset(((struct sim_buffer *)buffer->context)->host, value, buffer->size);
    return LOOM_OK;
}

static const struct loom_backend_buffer_i sim_buffer_iface = {
    .free_buffer = sim_buffer_free,
    .get_base = sim_buffer_get_base,
    .init_tensor = sim_buffer_init_tensor,
    .memset_tensor = sim_buffer_memset,
    .set_tensor = sim_buffer_set,
    .get_tensor = sim_buffer_get,
    .cpy_tensor = sim_buffer_cpy,
    .clear = sim_buffer_clear,
};

/* Makes the buffer object around host memory at sim address 'base'; counts it on success. */
static loom_backend_buffer_t sim_buffer_make(struct sim_device * sd, uint8_t * host, uintptr_t base, size_t size, bool wrapped) {
    struct sim_buffer * sb = malloc(sizeof *sb);
    loom_backend_buffer_t b = sb ? loom_backend_buffer_init(&sd->buft, sim_buffer_iface, sb, size) : NULL;
    if (!b) {
        free(sb);
        return NULL;
    }
    *sb = (struct sim_buffer){.sd = sd, .host = host, .base = base, .wrapped = wrapped};
    pthread_mutex_lock(&sd->lock);
    sd->stats.n_buffers++;
    sd->stats.n_allocs++;
    pthread_mutex_unlock(&sd->lock);
    return b;
}

/* ---------------------------------------------------------------- buffer type */

static const char * sim_buft_name(loom_backend_buffer_type_t buft) { return ((struct sim_device *)buft->context)->name; }

/* Reserves 'size' bytes of device memory and an address range for them (lock held). Logs and
 * returns false when the device is out of memory (real or injected) or of addresses. */
static bool reserve(struct sim_device * sd, size_t size, uintptr_t * base) {
    sd->stats.n_alloc_calls++;
    double mib = size / 1048576.0;
    size_t total = sd->params.memory_size, used = sd->stats.bytes_allocated;
    if (loom_sim_inject(&sd->fail_alloc_in)) {
        loom_log(LOOM_LOG_ERROR, "%s: out of device memory: cannot allocate %.2f MiB (injected failure)", sd->name, mib);
        return false;
    }
    if (total && size > total - used) {
        loom_log(LOOM_LOG_ERROR, "%s: out of device memory: cannot allocate %.2f MiB, %.2f MiB free of %.2f MiB", sd->name, mib,
                 (total - used) / 1048576.0, total / 1048576.0);
        return false;
    }
    uint64_t step = sd->params.alignment > SIM_GUARD ? sd->params.alignment : SIM_GUARD;
    uint64_t offs = (sd->next_offs + step - 1) & ~(step - 1);
    uint64_t room = (uint64_t)1 << SIM_REGION_BITS;
    if (offs > room || size > room - offs || room - offs - size < SIM_GUARD) {
        loom_log(LOOM_LOG_ERROR, "%s: out of device addresses: cannot allocate %.2f MiB", sd->name, mib);
        return false;
    }
    *base = (uintptr_t)(sd->region + offs);
    sd->next_offs = offs + size + SIM_GUARD;
    sd->stats.bytes_allocated += size;
    if (sd->stats.bytes_allocated > sd->stats.bytes_peak) sd->stats.bytes_peak = sd->stats.bytes_allocated;
    return true;
}

static void unreserve(struct sim_device * sd, size_t size) {
    pthread_mutex_lock(&sd->lock);
    sd->stats.bytes_allocated -= size;
    pthread_mutex_unlock(&sd->lock);
}

static loom_backend_buffer_t sim_buft_alloc(loom_backend_buffer_type_t buft, size_t size) {
    struct sim_device * sd = buft->context;
    uintptr_t base;
    pthread_mutex_lock(&sd->lock);
    bool ok = reserve(sd, size, &base);
    pthread_mutex_unlock(&sd->lock);
    if (!ok) return NULL;
    /* a host-memory sim hands out the host addresses themselves: aligned as its buffer type says */
    size_t align = SIM_HOST_ALIGN;
    if (sd->params.host_memory && sd->params.alignment > align) align = sd->params.alignment;
    size_t host_size = loom_pad(size ? size : 1, align);
    uint8_t * host = host_size >= size ? aligned_alloc(align, host_size) : NULL;
    if (host && sd->params.host_memory) base = (uintptr_t)host; /* host memory at its own addresses */
    loom_backend_buffer_t b = host ? sim_buffer_make(sd, host, base, size, false) : NULL;
    if (!b) {
        loom_log(LOOM_LOG_ERROR, "%s: out of host memory behind a %.2f MiB buffer", sd->name, size / 1048576.0);
        free(host);
        unreserve(sd, size);
    }
    return b;
}

static size_t sim_buft_alignment(loom_backend_buffer_type_t buft) { return ((struct sim_device *)buft->context)->params.alignment; }
static size_t sim_buft_max_size(loom_backend_buffer_type_t buft) {
    struct sim_device * sd = buft->context;
    pthread_mutex_lock(&sd->lock);
    size_t n = sd->params.max_buffer_size; /* loom_sim_set_max_buffer_size may change it */
    pthread_mutex_unlock(&sd->lock);
    return n;
}

static size_t sim_buft_alloc_size(loom_backend_buffer_type_t buft, const struct loom_tensor * t) {
    size_t n = loom_nbytes(t), extra = t->view_src ? 0 : ((struct sim_device *)buft->context)->params.alloc_extra;
    return extra > SIZE_MAX - n ? SIZE_MAX : n + extra;
}

static bool sim_buft_is_host(loom_backend_buffer_type_t buft) { return ((struct sim_device *)buft->context)->params.host_memory; }

const struct loom_backend_buffer_type_i loom_sim_buft_iface = {
    .get_name = sim_buft_name,
    .alloc_buffer = sim_buft_alloc,
    .get_alignment = sim_buft_alignment,
    .get_max_size = sim_buft_max_size,
    .get_alloc_size = sim_buft_alloc_size,
    .is_host = sim_buft_is_host,
};

/* ---------------------------------------------------------------- wrapping host memory */

loom_backend_buffer_t loom_sim_wrap_host(loom_backend_dev_t dev, void * ptr, size_t size) {
    struct sim_device * sd = sim_dev(dev);
    uintptr_t p = (uintptr_t)ptr;
    if (p >= SIM_MAX_HOST_ADDR || size > SIM_MAX_HOST_ADDR - p) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot wrap host memory at %p: above the addresses the sim maps", sd->name, ptr);
        return NULL;
    }
    pthread_mutex_lock(&sd->lock);
    sd->stats.n_alloc_calls++;
    bool fail = loom_sim_inject(&sd->fail_alloc_in);
    pthread_mutex_unlock(&sd->lock);
    if (fail) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot wrap %.2f MiB of host memory (injected failure)", sd->name, size / 1048576.0);
        return NULL;
    }
    loom_backend_buffer_t b = sim_buffer_make(sd, ptr, (uintptr_t)(SIM_WRAP_BASE + p), size, true);
    if (!b) loom_log(LOOM_LOG_ERROR, "%s: out of host memory wrapping host memory", sd->name);
    return b;
}
