/* buffer.c -- buffer types and buffers: the generic wrappers, tensor placement and view init. */
#include "backend-impl.h"

#include <stdlib.h>
#include <unistd.h>

/* ---------------------------------------------------------------- buffer types */

const char * loom_backend_buft_name(loom_backend_buffer_type_t buft) { return buft->iface.get_name(buft); }

loom_backend_buffer_t loom_backend_buft_alloc_buffer(loom_backend_buffer_type_t buft, size_t size) {
    size_t max = loom_backend_buft_get_max_size(buft);
    if (size > max) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot allocate %.2f MiB: larger than the buffer type's maximum of %.2f MiB",
                 loom_backend_buft_name(buft), size / 1048576.0, max / 1048576.0);
        return NULL;
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t loom_backend_buft_get_alignment(loom_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }

size_t loom_backend_buft_get_max_size(loom_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

size_t loom_backend_buft_get_alloc_size(loom_backend_buffer_type_t buft, const struct loom_tensor * tensor) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, tensor) : loom_nbytes(tensor);
}

bool loom_backend_buft_is_host(loom_backend_buffer_type_t buft) {
    return buft->iface.is_host ? buft->iface.is_host(buft) : false;
}

loom_backend_dev_t loom_backend_buft_get_device(loom_backend_buffer_type_t buft) { return buft->device; }

/* ---------------------------------------------------------------- buffers */

loom_backend_buffer_t loom_backend_buffer_init(loom_backend_buffer_type_t buft, struct loom_backend_buffer_i iface,
                                               void * context, size_t size) {
    loom_backend_buffer_t b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->iface = iface;
    b->buft = buft;
    b->context = context;
    b->size = size;
    b->usage = LOOM_BACKEND_BUFFER_USAGE_ANY;
    return b;
}

void loom_backend_buffer_free(loom_backend_buffer_t buffer) {
    if (!buffer) return;
    if (buffer->iface.free_buffer) buffer->iface.free_buffer(buffer);
    free(buffer);
}

void * loom_backend_buffer_get_base(loom_backend_buffer_t buffer) {
    if (buffer->size == 0 && !loom_backend_buffer_is_multi(buffer)) return NULL;
    return buffer->iface.get_base(buffer);
}

size_t loom_backend_buffer_get_size(loom_backend_buffer_t buffer) { return buffer->size; }
loom_backend_buffer_type_t loom_backend_buffer_get_type(loom_backend_buffer_t buffer) { return buffer->buft; }
bool loom_backend_buffer_is_host(loom_backend_buffer_t buffer) { return loom_backend_buft_is_host(buffer->buft); }
enum loom_backend_buffer_usage loom_backend_buffer_get_usage(loom_backend_buffer_t buffer) { return buffer->usage; }

enum loom_status loom_backend_buffer_clear(loom_backend_buffer_t buffer, uint8_t value) {
    if (buffer->size == 0) return LOOM_OK;
    return buffer->iface.clear(buffer, value);
}

/* The part of 'buffer' (itself, or one part of a multi-buffer) that wholly holds [addr, addr + size). */
static loom_backend_buffer_t buffer_part_holding(loom_backend_buffer_t buffer, const void * addr, size_t size) {
    size_t n = loom_backend_multi_buffer_count(buffer);
    for (size_t i = 0; i < n; i++) {
        loom_backend_buffer_t part = loom_backend_multi_buffer_get(buffer, i);
        uintptr_t base = (uintptr_t)loom_backend_buffer_get_base(part);
        uintptr_t a = (uintptr_t)addr;
        if (part->size && a >= base && a - base <= part->size && size <= part->size - (a - base)) return part;
    }
    return NULL;
}

enum loom_status loom_backend_tensor_alloc(loom_backend_buffer_t buffer, struct loom_tensor * tensor, void * addr) {
    if (tensor->view_src || tensor->data || tensor->buffer || !addr) {
        loom_log(LOOM_LOG_ERROR, "tensor_alloc: tensor '%s' is a view, already has data, or no address was given", tensor->name);
        return LOOM_ERR_INVALID_ARG;
    }
    size_t size = loom_backend_buft_get_alloc_size(buffer->buft, tensor);
    loom_backend_buffer_t part = buffer_part_holding(buffer, addr, size);
    if (!part) {
        loom_log(LOOM_LOG_ERROR, "tensor '%s' (%zu bytes) does not fit inside buffer %s at the given address",
                 tensor->name, size, loom_backend_buft_name(buffer->buft));
        return LOOM_ERR_INVALID_ARG;
    }
    tensor->buffer = part;
    tensor->data = addr;
    if (part->iface.init_tensor) {
        enum loom_status st = part->iface.init_tensor(part, tensor);
        if (st != LOOM_OK) {
            tensor->buffer = NULL;
            tensor->data = NULL;
            return st;
        }
    }
    return LOOM_OK;
}

enum loom_status loom_backend_view_init(struct loom_tensor * tensor) {
    struct loom_tensor * base = tensor->view_src;
    if (!base) {
        loom_log(LOOM_LOG_ERROR, "view_init: tensor '%s' is not a view", tensor->name);
        return LOOM_ERR_INVALID_ARG;
    }
    if (!base->buffer || !base->data) {
        loom_log(LOOM_LOG_ERROR, "view '%s': its base '%s' has no buffer", tensor->name, base->name);
        return LOOM_ERR_INVALID_ARG;
    }
    size_t need = loom_nbytes(tensor), have = loom_nbytes(base);
    if (need && (tensor->view_offs > have || need > have - tensor->view_offs)) {
        loom_log(LOOM_LOG_ERROR, "view '%s': bytes [%zu, %zu) outside its base '%s' (%zu bytes)", tensor->name,
                 tensor->view_offs, tensor->view_offs + need, base->name, have);
        return LOOM_ERR_INVALID_ARG;
    }
    loom_backend_buffer_t old_buffer = tensor->buffer;
    void * old_data = tensor->data;
    tensor->buffer = base->buffer;
    tensor->data = (uint8_t *)base->data + tensor->view_offs;
    if (tensor->buffer->iface.init_tensor) {
        enum loom_status st = tensor->buffer->iface.init_tensor(tensor->buffer, tensor);
        if (st != LOOM_OK) {
            tensor->buffer = old_buffer;
            tensor->data = old_data;
            return st;
        }
    }
    return LOOM_OK;
}

void * loom_backend_buffer_host_ptr_addr(loom_backend_buffer_t buffer, const void * p) {
    if (!buffer || !buffer->host_span) return NULL;
    uintptr_t start = (uintptr_t)buffer->host_span, a = (uintptr_t)p;
    if (a < start || a - start >= buffer->size) return NULL;
    return (uint8_t *)loom_backend_buffer_get_base(buffer) + (a - start);
}

size_t loom_page_size(void) {
    static size_t page;
    if (!page) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}
