/* cuda-buffer.cu -- CUDA memory: device buffers (cudaMalloc), pinned host buffers (cudaHostAlloc)
 * and caller host memory mapped for the device (cudaHostRegister, zero-copy). */
#include "cuda-common.cuh"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ device buffers */

static void dev_buffer_free(loom_backend_buffer_t buffer) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    if (b->base) {
        cudaSetDevice(b->dev->id);
        LC_CHECK(cudaFree(b->base));
    }
    free(b);
}

static void * dev_buffer_get_base(loom_backend_buffer_t buffer) { return ((struct lc_buffer *)buffer->context)->base; }

static enum loom_status dev_buffer_memset(loom_backend_buffer_t buffer, struct loom_tensor * t, uint8_t v, size_t offset, size_t size) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    LC_TRY(cudaSetDevice(b->dev->id));
    LC_TRY(cudaMemset((char *)t->data + offset, v, size));
    return LC_CHECK(cudaStreamSynchronize(0));
}

static enum loom_status dev_buffer_set(loom_backend_buffer_t buffer, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    LC_TRY(cudaSetDevice(b->dev->id));
    LC_TRY(cudaMemcpy((char *)t->data + offset, data, size, cudaMemcpyHostToDevice));
    /* from pageable memory the DMA may still be in flight on the legacy stream, which the
     * backends' non-blocking streams do not wait for */
    return LC_CHECK(cudaStreamSynchronize(0));
}

static enum loom_status dev_buffer_get(loom_backend_buffer_t buffer, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    LC_TRY(cudaSetDevice(b->dev->id));
    return LC_CHECK(cudaMemcpy(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost));
}

/* Copies between any two CUDA buffers (device memory of any CUDA device, pinned or mapped host
 * memory) with UVA addresses; false when 'src' is not in a CUDA buffer or the copy fails. */
static bool any_buffer_cpy(loom_backend_buffer_t buffer, const struct loom_tensor * src, struct loom_tensor * dst) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(src, &offs);
    struct lc_buffer * sb = base->buffer ? lc_buffer_of(base->buffer) : NULL;
    struct lc_buffer * db = lc_buffer_of(buffer);
    if (!sb || !db) return false;
    const char * s = (const char *)src->data;
    char * d = (char *)dst->data;
    if (sb->kind != LC_BUFFER_DEVICE && db->kind != LC_BUFFER_DEVICE) {
        memmove(d, s, loom_nbytes(src));
        return true;
    }
    cudaSetDevice(db->dev->id);
    /* device-to-device cudaMemcpy returns before the copy is done: wait for it */
    return LC_CHECK(cudaMemcpy(d, s, loom_nbytes(src), cudaMemcpyDefault)) == LOOM_OK && LC_CHECK(cudaStreamSynchronize(0)) == LOOM_OK;
}

static enum loom_status dev_buffer_clear(loom_backend_buffer_t buffer, uint8_t value) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    LC_TRY(cudaSetDevice(b->dev->id));
    LC_TRY(cudaMemset(b->base, value, buffer->size));
    return LC_CHECK(cudaStreamSynchronize(0));
}

static const struct loom_backend_buffer_i dev_buffer_iface = {
    .free_buffer = dev_buffer_free,
    .get_base = dev_buffer_get_base,
    .init_tensor = NULL,
    .memset_tensor = dev_buffer_memset,
    .set_tensor = dev_buffer_set,
    .get_tensor = dev_buffer_get,
    .cpy_tensor = any_buffer_cpy,
    .clear = dev_buffer_clear,
};

/* ================================================================ host buffers (pinned and mapped) */

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;

static void pinned_buffer_free(loom_backend_buffer_t buffer) {
    struct lc_buffer * b = (struct lc_buffer *)buffer->context;
    if (b->base) LC_CHECK(cudaFreeHost(b->base));
    free(b);
}

static void unregister_all(struct lc_buffer * b);

static void mapped_buffer_free(loom_backend_buffer_t buffer) { unregister_all((struct lc_buffer *)buffer->context); }

static void * host_buffer_get_base(loom_backend_buffer_t buffer) { return ((struct lc_buffer *)buffer->context)->base; }

static enum loom_status host_buffer_memset(loom_backend_buffer_t buffer, struct loom_tensor * t, uint8_t v, size_t offset, size_t size) {
    (void)buffer;
    memset((char *)t->data + offset, v, size);
    return LOOM_OK;
}

static enum loom_status host_buffer_set(loom_backend_buffer_t buffer, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    (void)buffer;
    memcpy((char *)t->data + offset, data, size);
    return LOOM_OK;
}

static enum loom_status host_buffer_get(loom_backend_buffer_t buffer, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    (void)buffer;
    memcpy(data, (const char *)t->data + offset, size);
    return LOOM_OK;
}

static bool host_buffer_cpy(loom_backend_buffer_t buffer, const struct loom_tensor * src, struct loom_tensor * dst) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(src, &offs);
    if (base->buffer && loom_backend_buffer_is_host(base->buffer)) {
        memmove(dst->data, src->data, loom_nbytes(src));
        return true;
    }
    return any_buffer_cpy(buffer, src, dst);
}

static enum loom_status host_buffer_clear(loom_backend_buffer_t buffer, uint8_t value) {
    memset(((struct lc_buffer *)buffer->context)->base, value, buffer->size);
    return LOOM_OK;
}

static const struct loom_backend_buffer_i pinned_buffer_iface = {
    .free_buffer = pinned_buffer_free,
    .get_base = host_buffer_get_base,
    .init_tensor = NULL,
    .memset_tensor = host_buffer_memset,
    .set_tensor = host_buffer_set,
    .get_tensor = host_buffer_get,
    .cpy_tensor = host_buffer_cpy,
    .clear = host_buffer_clear,
};

static const struct loom_backend_buffer_i mapped_buffer_iface = {
    .free_buffer = mapped_buffer_free,
    .get_base = host_buffer_get_base,
    .init_tensor = NULL,
    .memset_tensor = host_buffer_memset,
    .set_tensor = host_buffer_set,
    .get_tensor = host_buffer_get,
    .cpy_tensor = host_buffer_cpy,
    .clear = host_buffer_clear,
};

struct lc_buffer * lc_buffer_of(loom_backend_buffer_t buffer) {
    if (!buffer) return NULL;
    void * (*gb)(loom_backend_buffer_t) = buffer->iface.get_base;
    if (gb == dev_buffer_get_base || gb == host_buffer_get_base) return (struct lc_buffer *)buffer->context;
    return NULL;
}

/* ================================================================ buffer types */

static struct lc_device * buft_dev(loom_backend_buffer_type_t buft) { return (struct lc_device *)buft->context; }

static const char * dev_buft_name(loom_backend_buffer_type_t buft) { return buft_dev(buft)->name; }
static const char * host_buft_name(loom_backend_buffer_type_t buft) { return buft_dev(buft)->host_buft_name; }
static size_t buft_alignment(loom_backend_buffer_type_t buft) { (void)buft; return LC_ALIGNMENT; }
static size_t dev_buft_max_size(loom_backend_buffer_type_t buft) { return buft_dev(buft)->max_size; }
static bool dev_buft_is_host(loom_backend_buffer_type_t buft) { (void)buft; return false; }
static bool host_buft_is_host(loom_backend_buffer_type_t buft) { (void)buft; return true; }

/* Makes 'd' the calling thread's device; false (logged) when CUDA refuses. */
static bool use_device(const struct lc_device * d) {
    if (cudaSetDevice(d->id) == cudaSuccess) return true;
    LC_CHECK(cudaGetLastError());
    return false;
}

static loom_backend_buffer_t wrap(loom_backend_buffer_type_t buft, struct loom_backend_buffer_i iface, struct lc_device * d,
                                  enum lc_buffer_kind kind, char * base, ptrdiff_t delta, size_t size) {
    struct lc_buffer * b = (struct lc_buffer *)calloc(1, sizeof *b);
    if (!b) return NULL;
    b->dev = d;
    b->kind = kind;
    b->base = base;
    b->delta = delta;
    loom_backend_buffer_t buf = loom_backend_buffer_init(buft, iface, b, size);
    if (!buf) free(b);
    return buf;
}

static loom_backend_buffer_t dev_buft_alloc(loom_backend_buffer_type_t buft, size_t size) {
    struct lc_device * d = buft_dev(buft);
    if (!use_device(d)) return NULL;
    void * mem = NULL;
    if (size > 0) {
        cudaError_t err = cudaMalloc(&mem, size);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            (void)cudaGetLastError();
            loom_log(LOOM_LOG_ERROR, "%s (%s): cannot allocate a device buffer of %.2f MiB: %s (%.2f MiB free of %.2f MiB)",
                     d->name, d->description, size / 1048576.0, cudaGetErrorString(err), free_b / 1048576.0,
                     total_b / 1048576.0);
            return NULL;
        }
    }
    loom_backend_buffer_t b = wrap(buft, dev_buffer_iface, d, LC_BUFFER_DEVICE, (char *)mem, 0, size);
    if (!b && mem) cudaFree(mem);
    return b;
}

static loom_backend_buffer_t host_buft_alloc(loom_backend_buffer_type_t buft, size_t size) {
    struct lc_device * d = buft_dev(buft);
    if (!use_device(d)) return NULL;
    void * mem = NULL;
    ptrdiff_t delta = 0;
    if (size > 0) {
        cudaError_t err = cudaHostAlloc(&mem, size, cudaHostAllocPortable | cudaHostAllocMapped);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            loom_log(LOOM_LOG_ERROR, "%s: cannot allocate %.2f MiB of pinned host memory: %s", d->host_buft_name,
                     size / 1048576.0, cudaGetErrorString(err));
            return NULL;
        }
        void * dptr = NULL;
        if (LC_CHECK(cudaHostGetDevicePointer(&dptr, mem, 0)) != LOOM_OK) {
            cudaFreeHost(mem);
            return NULL;
        }
        delta = (char *)dptr - (char *)mem;
    }
    loom_backend_buffer_t b = wrap(buft, pinned_buffer_iface, d, LC_BUFFER_PINNED, (char *)mem, delta, size);
    if (!b && mem) cudaFreeHost(mem);
    return b;
}

bool lc_buft_is_host(loom_backend_buffer_type_t buft) { return buft && buft->iface.alloc_buffer == host_buft_alloc; }

void lc_buffer_types_init(struct lc_device * d) {
    d->buft.iface.get_name = dev_buft_name;
    d->buft.iface.alloc_buffer = dev_buft_alloc;
    d->buft.iface.get_alignment = buft_alignment;
    d->buft.iface.get_max_size = dev_buft_max_size;
    d->buft.iface.get_alloc_size = NULL;
    d->buft.iface.is_host = dev_buft_is_host;
    d->buft.device = &d->dev;
    d->buft.context = d;

    d->host_buft.iface.get_name = host_buft_name;
    d->host_buft.iface.alloc_buffer = host_buft_alloc;
    d->host_buft.iface.get_alignment = buft_alignment;
    d->host_buft.iface.get_max_size = NULL;
    d->host_buft.iface.get_alloc_size = NULL;
    d->host_buft.iface.is_host = host_buft_is_host;
    d->host_buft.device = &d->dev;
    d->host_buft.context = d;
}

/* ================================================================ mapping caller memory
 *
 * The generic wrapper (src/backend/device.c) cuts a span larger than max_size into chunks that
 * overlap; CUDA refuses to register a page twice, so each chunk registers only the pages no live
 * chunk has registered yet. All mapped buffers' registrations are kept in one list. */

struct reg_node {
    char * start;
    size_t size;
    struct reg_node * next;
};
static struct reg_node * g_regs; /* every live registration of ours, under g_reg_lock */

static void regs_add(char * start, size_t size) {
    struct reg_node * n = (struct reg_node *)malloc(sizeof *n);
    if (!n) return; /* only loses overlap bookkeeping: a later overlapping chunk then fails cleanly */
    n->start = start;
    n->size = size;
    n->next = g_regs;
    g_regs = n;
}

static void regs_remove(char * start) {
    for (struct reg_node ** p = &g_regs; *p; p = &(*p)->next) {
        if ((*p)->start == start) {
            struct reg_node * n = *p;
            *p = n->next;
            free(n);
            return;
        }
    }
}

/* The first gap of [s, e) not covered by a live registration, as [*gs, *ge); false when none. */
static bool regs_first_gap(char * s, char * e, char ** gs, char ** ge) {
    char * cur = s;
    bool moved = true;
    while (moved && cur < e) { /* skip registrations that cover 'cur' */
        moved = false;
        for (struct reg_node * n = g_regs; n; n = n->next) {
            if (n->start <= cur && cur < n->start + n->size) {
                cur = n->start + n->size;
                moved = true;
            }
        }
    }
    if (cur >= e) return false;
    char * end = e;
    for (struct reg_node * n = g_regs; n; n = n->next) {
        if (n->start > cur && n->start < end) end = n->start;
    }
    *gs = cur;
    *ge = end;
    return true;
}

/* Undoes the registrations 'b' made and frees it. */
static void unregister_all(struct lc_buffer * b) {
    pthread_mutex_lock(&g_reg_lock);
    for (int i = 0; i < b->n_regs; i++) {
        LC_CHECK(cudaHostUnregister(b->regs[i].start));
        regs_remove(b->regs[i].start);
    }
    pthread_mutex_unlock(&g_reg_lock);
    free(b->regs);
    free(b);
}

static cudaError_t register_span(struct lc_device * d, char * start, size_t size, bool * read_only) {
    unsigned base_flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
    cudaError_t err = cudaErrorNotSupported;
    if (d->register_read_only) {
        err = cudaHostRegister(start, size, base_flags | cudaHostRegisterReadOnly);
        if (err == cudaSuccess) {
            *read_only = true;
            return err;
        }
        (void)cudaGetLastError();
    }
    cudaError_t err2 = cudaHostRegister(start, size, base_flags);
    if (err2 == cudaSuccess) {
        if (d->register_read_only)
            loom_log(LOOM_LOG_WARN, "%s: read-only host registration failed (%s); registered read-write instead", d->name,
                     cudaGetErrorString(err));
        return err2;
    }
    (void)cudaGetLastError();
    loom_log(LOOM_LOG_ERROR, "%s: cannot map %.2f MiB of host memory at %p for the device: cudaHostRegister: %s%s%s", d->name,
             size / 1048576.0, (void *)start, cudaGetErrorString(err2), d->register_read_only ? "; read-only: " : "",
             d->register_read_only ? cudaGetErrorString(err) : "");
    return err2;
}

loom_backend_buffer_t lc_buffer_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size) {
    struct lc_device * d = (struct lc_device *)dev->context;
    if (!use_device(d)) return NULL;
    char * s = (char *)ptr;
    char * e = s + size;
    struct lc_buffer * b = (struct lc_buffer *)calloc(1, sizeof *b);
    if (!b) return NULL;
    b->dev = d;
    b->kind = LC_BUFFER_MAPPED;
    b->base = s;
    bool ok = true, any_rw = false, any_ro = false;
    pthread_mutex_lock(&g_reg_lock);
    char *gs, *ge;
    while (ok && size > 0 && regs_first_gap(s, e, &gs, &ge)) {
        struct lc_registration * r = (struct lc_registration *)realloc(b->regs, (b->n_regs + 1) * sizeof *r);
        if (!r) {
            ok = false;
            break;
        }
        b->regs = r;
        bool ro = false;
        if (register_span(d, gs, (size_t)(ge - gs), &ro) != cudaSuccess) {
            ok = false;
            break;
        }
        b->regs[b->n_regs].start = gs;
        b->regs[b->n_regs].size = (size_t)(ge - gs);
        b->n_regs++;
        regs_add(gs, (size_t)(ge - gs));
        if (ro) any_ro = true;
        else any_rw = true;
    }
    /* translation: one delta for the whole buffer */
    if (ok && size > 0) {
        void * dptr = NULL;
        if (LC_CHECK(cudaHostGetDevicePointer(&dptr, s, 0)) != LOOM_OK) {
            ok = false;
        } else {
            b->delta = (char *)dptr - s;
            bool pieces = b->n_regs != 1 || b->regs[0].start != s || b->regs[0].size != size;
            if (b->delta != 0 && pieces) {
                loom_log(LOOM_LOG_ERROR, "%s: cannot map overlapping host chunks: the device does not use host addresses for registered memory",
                         d->name);
                ok = false;
            }
        }
    }
    pthread_mutex_unlock(&g_reg_lock);
    if (!ok) {
        unregister_all(b);
        return NULL;
    }
    /* read-only when any page this buffer covers may be registered read-only (ours or an earlier chunk's) */
    b->read_only = any_ro || (!any_rw && d->register_read_only);
    loom_log(LOOM_LOG_DEBUG, "%s: mapped %.2f MiB of host memory at %p (%s, device address %s)", d->name, size / 1048576.0, ptr,
             b->read_only ? "read-only" : "read-write", b->delta == 0 ? "same as host" : "translated");
    loom_backend_buffer_t buf = loom_backend_buffer_init(&d->host_buft, mapped_buffer_iface, b, size);
    if (!buf) unregister_all(b);
    return buf;
}
