/* cpu-device.c -- the CPU device: aligned host buffers, wrapped host memory, and the backend. */
#include "backend/backend-impl.h"
#include "loom-cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define CPU_ALIGNMENT 64

/* ---------------------------------------------------------------- buffers (host memory) */

struct cpu_buffer {
    void * mem;        /* start of the usable memory */
    bool owned;        /* false for wrapped caller memory */
    size_t map_size;   /* bytes mapped (huge-page memory), 0 when 'mem' came from aligned_alloc */
};

/* Buffers from CPU_HUGE_PAGE on are mapped at a 2 MiB-aligned address, so that all of such a
 * buffer can be backed by transparent huge pages when it is asked to be
 * (loom_cpu_advise_huge_pages): the loader asks for the model's weights and the KV cache, which
 * are streamed once per token, where 4 KiB pages cost a TLB miss every 4 KiB. Buffers from
 * CPU_HUGE_MIN on are advised at once (nothing else that large lives on the CPU). Graph
 * intermediates stay in ordinary pages: in huge pages they made prompts slower (figures:
 * bench/cpu-notes.md). */
#define CPU_HUGE_MIN ((size_t)256 << 20)
#define CPU_HUGE_PAGE ((size_t)2 << 20)

static void cpu_buffer_free(loom_backend_buffer_t buffer) {
    struct cpu_buffer * c = buffer->context;
    if (c->owned && c->map_size) munmap(c->mem, c->map_size);
    else if (c->owned) free(c->mem);
    free(c);
}

size_t loom_cpu_advise_huge_pages(void * addr, size_t size) {
    const uintptr_t lo = ((uintptr_t)addr + CPU_HUGE_PAGE - 1) & ~(uintptr_t)(CPU_HUGE_PAGE - 1);
    const uintptr_t hi = ((uintptr_t)addr + size) & ~(uintptr_t)(CPU_HUGE_PAGE - 1);
    if (!addr || hi <= lo) return 0;
#ifdef MADV_HUGEPAGE
    return madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0 ? hi - lo : 0; /* EINVAL: a kernel without THP */
#else
    return 0;
#endif
}

/* 'size' bytes (a multiple of CPU_HUGE_PAGE) at a CPU_HUGE_PAGE-aligned address, or NULL. */
static void * map_aligned(size_t size) {
    if (size > SIZE_MAX - CPU_HUGE_PAGE) return NULL;
    uint8_t * p = mmap(NULL, size + CPU_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    const size_t head = (CPU_HUGE_PAGE - (uintptr_t)p % CPU_HUGE_PAGE) % CPU_HUGE_PAGE;
    if (head) munmap(p, head);
    if (CPU_HUGE_PAGE - head) munmap(p + head + size, CPU_HUGE_PAGE - head);
    return p + head;
}

static void * cpu_buffer_get_base(loom_backend_buffer_t buffer) { return ((struct cpu_buffer *)buffer->context)->mem; }

static enum loom_status cpu_buffer_memset(loom_backend_buffer_t b, struct loom_tensor * t, uint8_t v, size_t offset, size_t size) {
    (void)b;
    memset((uint8_t *)t->data + offset, v, size);
    return LOOM_OK;
}

static enum loom_status cpu_buffer_set(loom_backend_buffer_t b, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    (void)b;
    memcpy((uint8_t *)t->data + offset, data, size);
    return LOOM_OK;
}

static enum loom_status cpu_buffer_get(loom_backend_buffer_t b, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    (void)b;
    memcpy(data, (const uint8_t *)t->data + offset, size);
    return LOOM_OK;
}

static bool cpu_buffer_cpy(loom_backend_buffer_t b, const struct loom_tensor * src, struct loom_tensor * dst) {
    (void)b;
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(src, &offs);
    if (!base->buffer || !loom_backend_buffer_is_host(base->buffer)) return false;
    memmove(dst->data, src->data, loom_nbytes(src));
    return true;
}

static enum loom_status cpu_buffer_clear(loom_backend_buffer_t buffer, uint8_t value) {
    memset(((struct cpu_buffer *)buffer->context)->mem, value, buffer->size);
    return LOOM_OK;
}

static const struct loom_backend_buffer_i cpu_buffer_iface = {
    .free_buffer = cpu_buffer_free,
    .get_base = cpu_buffer_get_base,
    .init_tensor = NULL,
    .memset_tensor = cpu_buffer_memset,
    .set_tensor = cpu_buffer_set,
    .get_tensor = cpu_buffer_get,
    .cpy_tensor = cpu_buffer_cpy,
    .clear = cpu_buffer_clear,
};

/* ---------------------------------------------------------------- buffer type */

static const char * cpu_buft_name(loom_backend_buffer_type_t buft) { (void)buft; return "CPU"; }

static loom_backend_buffer_t wrap(loom_backend_buffer_type_t buft, void * mem, size_t size, bool owned, size_t map_size) {
    struct cpu_buffer * c = malloc(sizeof *c);
    if (!c) return NULL;
    c->mem = mem;
    c->owned = owned;
    c->map_size = map_size;
    loom_backend_buffer_t b = loom_backend_buffer_init(buft, cpu_buffer_iface, c, size);
    if (!b) free(c);
    return b;
}

static loom_backend_buffer_t cpu_buft_alloc(loom_backend_buffer_type_t buft, size_t size) {
    size_t sz = loom_pad(size ? size : 1, CPU_ALIGNMENT);
    if (sz < size) return NULL;
    size_t map_size = sz >= CPU_HUGE_PAGE ? loom_pad(sz, CPU_HUGE_PAGE) : 0;
    void * mem = map_size >= sz ? map_aligned(map_size) : NULL;
    if (mem && map_size >= CPU_HUGE_MIN) loom_cpu_advise_huge_pages(mem, map_size); /* a hint: the memory works without it */
    if (!mem) {
        map_size = 0;
        mem = aligned_alloc(CPU_ALIGNMENT, sz);
    }
    if (!mem) {
        /* under an address-space limit (ulimit -v) the limit, not the free RAM, is what refused it */
        struct rlimit rl;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            loom_log(LOOM_LOG_ERROR, "CPU: out of memory: cannot allocate a buffer of %.2f MiB (the process's address space is "
                     "limited to %.2f MiB: ulimit -v)", size / 1048576.0, (double)rl.rlim_cur / 1048576.0);
            return NULL;
        }
        long avail = sysconf(_SC_AVPHYS_PAGES);
        loom_log(LOOM_LOG_ERROR, "CPU: out of memory: cannot allocate a buffer of %.2f MiB (%.2f MiB free)", size / 1048576.0,
                 avail > 0 ? (double)avail * (double)loom_page_size() / 1048576.0 : 0.0);
        return NULL;
    }
    loom_backend_buffer_t b = wrap(buft, mem, size, true, map_size);
    if (!b && map_size) munmap(mem, map_size);
    else if (!b) free(mem);
    return b;
}

static size_t cpu_buft_alignment(loom_backend_buffer_type_t buft) { (void)buft; return CPU_ALIGNMENT; }
static bool cpu_buft_is_host(loom_backend_buffer_type_t buft) { (void)buft; return true; }

static struct loom_backend_buffer_type g_cpu_buft;

loom_backend_buffer_type_t loom_backend_cpu_buffer_type(void) {
    g_cpu_buft.device = loom_cpu_device();
    return &g_cpu_buft;
}

loom_backend_buffer_t loom_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    loom_backend_buffer_t b = wrap(loom_backend_cpu_buffer_type(), ptr, size, false, 0);
    if (b) b->host_span = ptr; /* host bytes keep their own addresses (loom_backend_buffer_host_ptr_addr) */
    return b;
}

/* ---------------------------------------------------------------- backend */

struct cpu_backend {
    int n_threads;
};

static const char * cpu_backend_name(loom_backend_t backend) { (void)backend; return "CPU"; }

static void cpu_backend_free(loom_backend_t backend) {
    free(backend->context);
    free(backend);
}

static enum loom_status cpu_backend_graph_compute(loom_backend_t backend, struct loom_cgraph * graph) {
    struct cpu_backend * c = backend->context;
    return loom_cpu_graph_compute(graph, c->n_threads);
}

static const struct loom_backend_i cpu_backend_iface = {
    .get_name = cpu_backend_name,
    .free = cpu_backend_free,
    .graph_compute = cpu_backend_graph_compute,
};

static loom_backend_t cpu_init_backend(loom_backend_dev_t dev, const char * params) {
    (void)params;
    loom_backend_t b = calloc(1, sizeof *b);
    struct cpu_backend * c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return NULL;
    }
    c->n_threads = loom_default_n_threads();
    /* the kernels are chosen (and named in the debug log) now, not at the first compute: a warning
     * about LOOM_CPU_ISA then comes before a command's output instead of inside it */
    loom_log(LOOM_LOG_DEBUG, "CPU kernels: %s", loom_cpu_features());
    b->iface = cpu_backend_iface;
    b->device = dev;
    b->context = c;
    return b;
}

loom_backend_t loom_backend_cpu_init(void) { return cpu_init_backend(loom_cpu_device(), NULL); }
bool loom_backend_is_cpu(loom_backend_t backend) { return backend && backend->iface.get_name == cpu_backend_name; }

void loom_backend_cpu_set_n_threads(loom_backend_t backend, int n_threads) {
    LOOM_ASSERT(loom_backend_is_cpu(backend));
    ((struct cpu_backend *)backend->context)->n_threads = n_threads > 0 ? n_threads : 1;
}

int loom_backend_cpu_get_n_threads(loom_backend_t backend) {
    LOOM_ASSERT(loom_backend_is_cpu(backend));
    return ((struct cpu_backend *)backend->context)->n_threads;
}

/* ---------------------------------------------------------------- device */

static const char * cpu_dev_name(loom_backend_dev_t dev) { (void)dev; return "CPU"; }

static const char * cpu_dev_description(loom_backend_dev_t dev) {
    (void)dev;
    static char desc[256];
    if (!desc[0]) {
        snprintf(desc, sizeof desc, "CPU");
        FILE * f = fopen("/proc/cpuinfo", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char * colon = strchr(line, ':');
            if (!strncmp(line, "model name", 10) && colon) {
                colon += 2;
                colon[strcspn(colon, "\n")] = 0;
                snprintf(desc, sizeof desc, "%s", colon);
                break;
            }
        }
        if (f) fclose(f);
    }
    return desc;
}

/* Free memory is Linux's MemAvailable (what can be allocated without swapping: free pages plus
 * the page cache that can be dropped), not MemFree, which leaves the cache out and so reads low
 * after any large file has been read; sysconf's count of free pages where there is no /proc. */
static void cpu_dev_memory(loom_backend_dev_t dev, size_t * free_mem, size_t * total) {
    (void)dev;
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
    *total = pages > 0 ? (size_t)pages * loom_page_size() : 0;
    *free_mem = avail > 0 ? (size_t)avail * loom_page_size() : 0;
    FILE * f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kib;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            *free_mem = (size_t)kib * 1024;
            break;
        }
    }
    if (f) fclose(f);
}

static enum loom_backend_dev_type cpu_dev_type(loom_backend_dev_t dev) { (void)dev; return LOOM_BACKEND_DEV_TYPE_CPU; }

static void cpu_dev_caps(loom_backend_dev_t dev, struct loom_backend_dev_caps * caps) {
    (void)dev;
    *caps = (struct loom_backend_dev_caps){.async = false, .host_buffer = false, .buffer_from_host_ptr = true, .events = false};
}

static loom_backend_buffer_type_t cpu_dev_buft(loom_backend_dev_t dev) { (void)dev; return loom_backend_cpu_buffer_type(); }

static loom_backend_buffer_t cpu_dev_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size) {
    (void)dev;
    return loom_backend_cpu_buffer_from_ptr(ptr, size);
}

static bool cpu_dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) {
    (void)dev;
    return loom_cpu_supports_op(op);
}

static bool cpu_dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft) {
    (void)dev;
    return loom_backend_buft_is_host(buft);
}

static struct loom_backend_device g_cpu_dev = {
    .iface = {
        .get_name = cpu_dev_name,
        .get_description = cpu_dev_description,
        .get_memory = cpu_dev_memory,
        .get_type = cpu_dev_type,
        .get_caps = cpu_dev_caps,
        .init_backend = cpu_init_backend,
        .get_buffer_type = cpu_dev_buft,
        .get_host_buffer_type = NULL,
        .buffer_from_host_ptr = cpu_dev_from_host_ptr,
        .supports_op = cpu_dev_supports_op,
        .supports_buft = cpu_dev_supports_buft,
    },
    .context = NULL,
};

static struct loom_backend_buffer_type g_cpu_buft = {
    .iface = {
        .get_name = cpu_buft_name,
        .alloc_buffer = cpu_buft_alloc,
        .get_alignment = cpu_buft_alignment,
        .is_host = cpu_buft_is_host,
    },
    .device = &g_cpu_dev,
    .context = NULL,
};

loom_backend_dev_t loom_cpu_device(void) { return &g_cpu_dev; }
