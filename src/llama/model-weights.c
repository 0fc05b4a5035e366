/* model-weights.c -- placing a model's weights: zero-copy over the mmap'd file where the device
 * can read host memory, otherwise uploaded into device buffers (from the mapping or by read()). */
#include "loom-cpu.h"
#include "loom-gguf.h"
#include "model-loader.h"
#include "quant/quant.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

struct load_state {
    struct loom_model * m;
    const struct loom_gguf * g;
    const struct loom_model_params * params;
    int fd;
    uint8_t * map;           /* whole-file mapping or NULL */
    uint64_t data_offset;    /* absolute offset of the data section */
    uint64_t bytes_total;
    uint64_t bytes_done;
    uintptr_t keep_lo, keep_hi;  /* the part of the mapping zero-copy buffers use */
};

static uint64_t file_offset(const struct load_state * s, const struct loom_tensor * t) {
    return s->data_offset + loom_gguf_tensor_offset(s->g, loom_gguf_find_tensor(s->g, t->name));
}

static enum loom_status progress(struct load_state * s, uint64_t bytes) {
    s->bytes_done += bytes;
    if (s->params->progress && s->bytes_total &&
        !s->params->progress((float)((double)s->bytes_done / (double)s->bytes_total), s->params->progress_user_data)) {
        loom_log(LOOM_LOG_ERROR, "model loading cancelled");
        return LOOM_ERR_CANCELLED;
    }
    return LOOM_OK;
}

static enum loom_status add_buffer(struct loom_model * m, loom_backend_buffer_t buf) {
    if (m->n_buffers >= LOOM_MODEL_MAX_BUFFERS) {
        loom_backend_buffer_free(buf);
        return LOOM_ERR_OOM;
    }
    loom_backend_buffer_set_usage(buf, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
    m->buffers[m->n_buffers++] = buf;
    return LOOM_OK;
}

static int count_tensors(struct loom_context * ctx) {
    int n = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) n++;
    return n;
}

static void log_buffer(const char * what, loom_backend_buffer_t buf, int n_tensors) {
    loom_log(LOOM_LOG_INFO, "%-12s model buffer size = %10.2f MiB (%d tensors)", what,
             loom_backend_buffer_get_size(buf) / 1048576.0, n_tensors);
}

enum loom_status loom_model_check_data(const struct loom_tensor * t, const void * bytes, size_t done, size_t n, bool check_values) {
    const size_t bs = loom_type_size(t->type);
    char where[48] = "";
    if (loom_blck_size(t->type) > 1) {
        const int64_t bad = loom_quant_find_bad_scale(t->type, bytes, (int64_t)(n / bs));
        if (bad < 0) return LOOM_OK;
        if (done != SIZE_MAX) snprintf(where, sizeof where, " %lld", (long long)(done / bs + (size_t)bad));
        loom_log(LOOM_LOG_ERROR, "tensor '%s' (%s): block%s has a NaN or infinite scale", t->name, loom_type_name(t->type),
                 done != SIZE_MAX ? where : "");
        return LOOM_ERR_FORMAT;
    }
    const int64_t bad = check_values ? loom_find_nonfinite(t->type, bytes, (int64_t)(n / bs)) : -1;
    if (bad < 0) return LOOM_OK;
    const uint8_t * p = (const uint8_t *)bytes + (size_t)bad * bs;
    uint16_t h = 0;
    float v = 0;
    if (bs == 2) memcpy(&h, p, 2);
    if (t->type == LOOM_TYPE_F32) memcpy(&v, p, 4);
    else v = t->type == LOOM_TYPE_F16 ? loom_fp16_to_fp32(h) : loom_bf16_to_fp32(h);
    if (done != SIZE_MAX) snprintf(where, sizeof where, " %lld", (long long)(done / bs + (size_t)bad));
    loom_log(LOOM_LOG_ERROR, "tensor '%s' (%s) has invalid data: element%s is %s", t->name, loom_type_name(t->type), where,
             isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
    return LOOM_ERR_FORMAT;
}

/* loom_model_check_data for the load under way: float values only when its parameters ask. */
static enum loom_status check_scales(const struct load_state * s, const struct loom_tensor * t, const void * bytes, size_t done, size_t n) {
    return loom_model_check_data(t, bytes, done, n, s->params->check_tensors);
}

/* The alignment the kernels read a tensor of 'type' with (bytes): its elements' or its blocks'
 * widest field, at most 4 (F32 and the blocks' float scales; F16, BF16 and half-precision scales
 * need 2). A file with a small 'general.alignment' may place a tensor at any byte. */
static uint64_t type_alignment(enum loom_type type) {
    const uint64_t size = loom_type_size(type);
    const uint64_t low_bit = size & (~size + 1);
    return low_bit < 4 ? (low_bit ? low_bit : 1) : 4;
}

/* The first tensor of 'ctx' whose file address is not aligned for its type, or NULL. */
static const struct loom_tensor * misaligned_tensor(const struct load_state * s, struct loom_context * ctx) {
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        if ((uintptr_t)(s->map + file_offset(s, t)) % type_alignment(t->type)) return t;
    }
    return NULL;
}

/* Wraps the span of the mapping that holds ctx's tensors as a buffer of 'dev' and places each
 * tensor at its file address. Returns LOOM_ERR_UNSUPPORTED when the device cannot wrap it. */
static enum loom_status place_zero_copy(struct load_state * s, struct loom_context * ctx, loom_backend_dev_t dev) {
    uint64_t lo = UINT64_MAX, hi = 0, max_size = 0;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        uint64_t off = file_offset(s, t), n = loom_nbytes(t);
        enum loom_status st = check_scales(s, t, s->map + off, 0, n);
        if (st != LOOM_OK) return st;
        lo = off < lo ? off : lo;
        hi = off + n > hi ? off + n : hi;
        max_size = n > max_size ? n : max_size;
    }
    loom_backend_buffer_t buf = loom_backend_dev_buffer_from_host_ptr(dev, s->map + lo, hi - lo, max_size);
    if (!buf) return LOOM_ERR_UNSUPPORTED;
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) {
        void * addr = loom_backend_buffer_host_ptr_addr(buf, s->map + file_offset(s, t));
        enum loom_status st = addr ? loom_backend_tensor_alloc(buf, t, addr) : LOOM_ERR_INVALID_ARG;
        if (st != LOOM_OK) {
            loom_backend_buffer_free(buf);
            return st;
        }
    }
    uintptr_t a = (uintptr_t)(s->map + lo), b = (uintptr_t)(s->map + hi);
    s->keep_lo = s->keep_lo && s->keep_lo < a ? s->keep_lo : a;
    s->keep_hi = s->keep_hi > b ? s->keep_hi : b;
    char what[64];
    snprintf(what, sizeof what, "%s_Mapped", loom_backend_dev_name(dev));
    log_buffer(what, buf, count_tensors(ctx));
    return add_buffer(s->m, buf);
}

/* Reads 'size' bytes at file offset 'off' into 'dst' with pread (no mapping). */
static enum loom_status read_at(int fd, void * dst, uint64_t size, uint64_t off) {
    uint8_t * p = dst;
    while (size > 0) {
        ssize_t r = pread(fd, p, size > (1u << 30) ? (1u << 30) : size, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            loom_log(LOOM_LOG_ERROR, "cannot read the model file at byte %llu: %s", (unsigned long long)off,
                     r < 0 ? strerror(errno) : "unexpected end of file");
            return LOOM_ERR_IO;
        }
        p += r;
        off += (uint64_t)r;
        size -= (uint64_t)r;
    }
    return LOOM_OK;
}

#define STAGING_SLOTS 4
#define STAGING_BYTES ((size_t)64 << 20)

/* Uploads read() data through pinned staging buffers: the next chunk is read from the file into
 * one slot while the device pulls earlier slots asynchronously; an event per slot says when it
 * may be refilled. Devices without pinned memory or events get plain tensor_set. */
struct uploader {
    loom_backend_t backend;
    loom_backend_buffer_t staging[STAGING_SLOTS];
    loom_backend_event_t events[STAGING_SLOTS];
    bool pending[STAGING_SLOTS];
    int next;
};

static void uploader_free(struct uploader * u) {
    if (u->backend) loom_backend_synchronize(u->backend);
    for (int i = 0; i < STAGING_SLOTS; i++) {
        loom_backend_event_free(u->events[i]);
        loom_backend_buffer_free(u->staging[i]);
    }
    loom_backend_free(u->backend);
    memset(u, 0, sizeof *u);
}

/* Leaves 'u' empty (the synchronous path) when the device offers no pinned memory or events. */
static void uploader_init(struct uploader * u, loom_backend_dev_t dev) {
    memset(u, 0, sizeof *u);
    struct loom_backend_dev_props props;
    loom_backend_dev_get_props(dev, &props);
    loom_backend_buffer_type_t host = loom_backend_dev_host_buffer_type(dev);
    if (!props.caps.async || !props.caps.events || !host) return;
    u->backend = loom_backend_dev_init(dev, NULL);
    for (int i = 0; u->backend && i < STAGING_SLOTS; i++) {
        u->staging[i] = loom_backend_buft_alloc_buffer(host, STAGING_BYTES);
        u->events[i] = loom_backend_event_new(dev);
        if (!u->staging[i] || !u->events[i]) {
            uploader_free(u);
            return;
        }
    }
}

/* Copies 'n' bytes of the tensor's file data (at file offset 'off') into it. */
static enum loom_status upload(struct load_state * s, struct uploader * u, struct loom_tensor * t, uint64_t off, size_t n) {
    /* From a mapping the device's own copy of pageable memory is faster than a memcpy into
     * staging first (H200, 7B F16: 1.6 s against 3.1 s), so staging serves read() loads only. */
    if (s->map) {
        enum loom_status st = check_scales(s, t, s->map + off, 0, n);
        return st == LOOM_OK ? loom_backend_tensor_set(t, s->map + off, 0, n) : st;
    }
    if (!u->backend) {
        void * tmp = malloc(n ? n : 1);
        if (!tmp) return LOOM_ERR_OOM;
        enum loom_status st = read_at(s->fd, tmp, n, off);
        if (st == LOOM_OK) st = check_scales(s, t, tmp, 0, n);
        if (st == LOOM_OK) st = loom_backend_tensor_set(t, tmp, 0, n);
        free(tmp);
        return st;
    }
    enum loom_status st = LOOM_OK;
    const size_t chunk = STAGING_BYTES - STAGING_BYTES % loom_type_size(t->type); /* whole blocks */
    for (size_t done = 0; done < n && st == LOOM_OK; done += chunk) {
        size_t len = n - done < chunk ? n - done : chunk;
        int k = u->next++ % STAGING_SLOTS;
        if (u->pending[k]) st = loom_backend_event_synchronize(u->events[k]);
        void * slot = loom_backend_buffer_get_base(u->staging[k]);
        if (st == LOOM_OK) st = read_at(s->fd, slot, len, off + done);
        if (st == LOOM_OK) st = check_scales(s, t, slot, done, len);
        if (st == LOOM_OK) st = loom_backend_tensor_set_async(u->backend, t, slot, done, len);
        if (st == LOOM_OK) st = loom_backend_event_record(u->events[k], u->backend);
        u->pending[k] = st == LOOM_OK;
    }
    return st;
}

/* Allocates ctx's tensors in the device's buffer type and copies their bytes in. */
static enum loom_status place_copy(struct load_state * s, struct loom_context * ctx, loom_backend_dev_t dev) {
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(dev);
    enum loom_status st = LOOM_OK;
    loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(ctx, buft, &st);
    if (!buf) return st != LOOM_OK ? st : LOOM_ERR_OOM;
    st = add_buffer(s->m, buf);
    if (st != LOOM_OK) return st;
    bool host = loom_backend_buft_is_host(buft);
    if (host) /* before the weights are read in, so their pages are faulted in as huge pages */
        loom_cpu_advise_huge_pages(loom_backend_buffer_get_base(buf), loom_backend_buffer_get_size(buf));
    struct uploader u;
    if (host || s->map) memset(&u, 0, sizeof u);
    else uploader_init(&u, dev);
    for (struct loom_tensor * t = loom_get_first_tensor(ctx); t && st == LOOM_OK; t = loom_get_next_tensor(ctx, t)) {
        size_t n = loom_nbytes(t);
        uint64_t off = file_offset(s, t);
        if (host && !s->map) {
            st = read_at(s->fd, t->data, n, off);
            if (st == LOOM_OK) st = check_scales(s, t, t->data, 0, n);
        } else {
            st = upload(s, &u, t, off, n);
        }
        if (st == LOOM_OK) st = progress(s, n);
    }
    if (u.backend && st == LOOM_OK) st = loom_backend_synchronize(u.backend);
    uploader_free(&u);
    if (st == LOOM_OK) log_buffer(loom_backend_dev_name(dev), buf, count_tensors(ctx)); /* after the checks of its bytes */
    return st;
}

static enum loom_status place_group(struct load_state * s, struct loom_context * ctx, loom_backend_dev_t dev, bool zero_copy) {
    if (!loom_get_first_tensor(ctx)) return LOOM_OK;
    const struct loom_tensor * odd = zero_copy && s->map ? misaligned_tensor(s, ctx) : NULL;
    if (odd) { /* read in place, its elements would be loaded from misaligned addresses */
        loom_log(LOOM_LOG_WARN, "tensor '%s' (%s) is not %llu-byte aligned in the file (general.alignment %u): copying the weights "
                 "for %s into aligned memory", odd->name, loom_type_name(odd->type), (unsigned long long)type_alignment(odd->type),
                 loom_gguf_alignment(s->g), loom_backend_dev_name(dev));
    } else if (zero_copy && s->map) {
        enum loom_status st = place_zero_copy(s, ctx, dev);
        if (st == LOOM_OK) {
            uint64_t n = 0;
            for (struct loom_tensor * t = loom_get_first_tensor(ctx); t; t = loom_get_next_tensor(ctx, t)) n += loom_nbytes(t);
            return progress(s, n);
        }
        if (st != LOOM_ERR_UNSUPPORTED) return st;
        loom_log(LOOM_LOG_WARN, "%s cannot read the mapped file in place: uploading its weights", loom_backend_dev_name(dev));
    }
    return place_copy(s, ctx, dev);
}

static void lock_memory(struct load_state * s) {
    struct loom_model * m = s->m;
    bool ok = true;
    if (s->keep_hi > s->keep_lo) ok = mlock((void *)s->keep_lo, s->keep_hi - s->keep_lo) == 0;
    for (int i = 0; i < m->n_buffers && ok; i++) {
        loom_backend_buffer_t b = m->buffers[i];
        if (loom_backend_buffer_is_host(b) && loom_backend_buffer_get_size(b) &&
            !((uintptr_t)loom_backend_buffer_get_base(b) >= s->keep_lo && (uintptr_t)loom_backend_buffer_get_base(b) < s->keep_hi)) {
            ok = mlock(loom_backend_buffer_get_base(b), loom_backend_buffer_get_size(b)) == 0;
        }
    }
    if (!ok) {
        struct rlimit rl;
        getrlimit(RLIMIT_MEMLOCK, &rl);
        loom_log(LOOM_LOG_WARN, "--mlock: cannot lock the model in memory (%s; RLIMIT_MEMLOCK is %llu bytes): continuing unlocked",
                 strerror(errno), (unsigned long long)rl.rlim_cur);
    } else {
        m->mlocked = true;
    }
}

/* Unmaps the parts of the file mapping no buffer uses (the header, offloaded weights, the tail). */
static void release_unused(struct load_state * s) {
    struct loom_model * m = s->m;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)s->map, end = base + m->mapping_size;
    if (s->keep_hi <= s->keep_lo) {
        munmap(s->map, m->mapping_size);
        m->mapping = NULL;
        m->mapping_size = 0;
        return;
    }
    uintptr_t lo = s->keep_lo & ~(uintptr_t)(page - 1);
    uintptr_t hi = (s->keep_hi + page - 1) & ~(uintptr_t)(page - 1);
    if (hi > end) hi = end;
    if (lo > base) munmap((void *)base, lo - base);
    if (end > hi) munmap((void *)hi, end - hi);
    m->mapping = (void *)lo;
    m->mapping_size = hi - lo;
}

void loom_model_unmap(struct loom_model * m) {
    if (m->mapping) munmap(m->mapping, m->mapping_size);
    m->mapping = NULL;
    m->mapping_size = 0;
}

enum loom_status loom_model_place_weights(struct loom_model * m, const struct loom_gguf * g, const char * path,
                                          const struct loom_model_params * params) {
    struct load_state s = {.m = m, .g = g, .params = params, .fd = -1, .data_offset = loom_gguf_data_offset(g)};
    s.bytes_total = m->n_bytes;
    s.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a regular file (checked by the reader); never blocks */
    if (s.fd < 0) {
        loom_log(LOOM_LOG_ERROR, "cannot open '%s': %s", path, strerror(errno));
        return LOOM_ERR_IO;
    }
    if (params->use_mmap) {
        size_t size = (size_t)loom_gguf_file_size(g);
        void * map = mmap(NULL, size, PROT_READ, MAP_SHARED, s.fd, 0);
        if (map == MAP_FAILED) {
            loom_log(LOOM_LOG_WARN, "cannot map '%s' (%s): reading it instead", path, strerror(errno));
        } else {
            /* before anything reads it: a file mapping takes huge pages where the page cache holds
             * the file in 2 MiB folios, which the advice has readahead allocate for a file not
             * cached yet (measured: bench/cpu-notes.md, "Huge pages for weights") */
            loom_cpu_advise_huge_pages(map, size);
            s.map = map;
            m->mapping = map;
            m->mapping_size = size;
        }
    }
    loom_backend_dev_t cpu = loom_backend_dev_by_name("CPU");
    enum loom_status st = place_group(&s, m->ctx_host, cpu, true);
    for (int d = 0; d < m->n_devs && st == LOOM_OK; d++) st = place_group(&s, m->ctx_devs[d], m->devs[d], params->no_host_copy);
    if (st == LOOM_OK && m->parts) {
        st = loom_model_load_parts(m, g, s.map, s.fd, params->check_tensors);
        /* the whole weights the slices come from were counted in bytes_total: the load is done */
        if (st == LOOM_OK) st = progress(&s, s.bytes_total > s.bytes_done ? s.bytes_total - s.bytes_done : 0);
    }
    if (st == LOOM_OK && s.map) release_unused(&s);
    if (st == LOOM_OK && params->use_mlock) lock_memory(&s);
    close(s.fd);
    return st;
}
