/* test-backend-hostptr.c -- zero-copy wrapping of caller memory (loom_backend_dev_buffer_from_host_ptr):
 * a page-unaligned heap region and a read-only mmap of a file, on the CPU (one buffer, host
 * addresses) and on a sim with host pointers and a small max_size (overlapping chunks, sim
 * addresses). Tensors placed at their true offsets read back the bytes the file holds (read with
 * pread, not through the mapping); every tensor of up to max_tensor_size lies in one chunk; the
 * caller's memory is never written or freed; failures (no room to overlap, injected) clean up. */
#include "backend/backend-impl.h"
#include "loom-cpu.h"
#include "loom-sim.h"
#include "test-util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


/* The structure of a chunked wrap of [ptr, ptr + size): parts no larger than max_size that start
 * page-aligned, overlap by at least 'max_tensor' bytes and cover the page-aligned span. */
static void check_chunks(const char * label, loom_backend_buffer_t buf, const uint8_t * ptr, size_t size, size_t max_tensor, size_t max) {
    size_t page = loom_page_size();
    uintptr_t start = (uintptr_t)ptr & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)ptr + size + page - 1) & ~(uintptr_t)(page - 1);
    size_t n = loom_backend_multi_buffer_count(buf);
    CHECK(n > 1, "%s: expected several chunks, got %zu", label, n);
    CHECK(loom_backend_buffer_get_size(buf) == end - start, "%s: the multi-buffer spans %zu bytes, not %zu", label,
          loom_backend_buffer_get_size(buf), (size_t)(end - start));
    uintptr_t prev_lo = 0, prev_hi = 0;
    for (size_t i = 0; i < n; i++) {
        loom_backend_buffer_t part = loom_backend_multi_buffer_get(buf, i);
        size_t psz = loom_backend_buffer_get_size(part);
        /* where the part's bytes are in host memory: its first byte's address maps back */
        uintptr_t lo = (uintptr_t)part->host_span, hi = lo + psz;
        CHECK(psz <= max, "%s: chunk %zu has %zu bytes > max_size %zu", label, i, psz, max);
        CHECK(lo % page == 0, "%s: chunk %zu starts off a page", label, i);
        CHECK(loom_backend_buffer_host_ptr_addr(buf, (const void *)lo) == loom_backend_buffer_get_base(part),
              "%s: chunk %zu's base disagrees with the multi-buffer's linear map", label, i);
        if (i == 0) CHECK(lo == start, "%s: first chunk does not start the span", label);
        if (i > 0) CHECK(lo > prev_lo && prev_hi >= lo + max_tensor, "%s: chunks %zu and %zu overlap by less than %zu", label, i - 1, i, max_tensor);
        if (i == n - 1) CHECK(hi == end, "%s: last chunk does not end the span", label);
        prev_lo = lo;
        prev_hi = hi;
    }
}

/* Places 'count' tensors of 'len' bytes (I8) at host offsets 'offs' of 'base_ptr' in 'buf' and checks
 * each reads back 'expect' + offset. Returns how many were placed. */
static int place_and_read(const char * label, loom_backend_buffer_t buf, bool sim_addrs, const uint8_t * base_ptr,
                          const uint8_t * expect, const size_t * offs, const size_t * lens, int count) {
    struct loom_context * ctx = test_meta_ctx((size_t)count + 1, 0);
    int ok = 0;
    for (int i = 0; i < count; i++) {
        struct loom_tensor * t = loom_new_tensor_1d(ctx, LOOM_TYPE_I8, (int64_t)lens[i]);
        loom_format_name(t, "w%d", i);
        void * addr = loom_backend_buffer_host_ptr_addr(buf, base_ptr + offs[i]);
        CHECK(addr != NULL, "%s: no address for host offset %zu", label, offs[i]);
        if (!addr) continue;
        if (sim_addrs) {
            CHECK(loom_sim_is_device_addr(addr), "%s: wrapped address %p is not a sim address", label, addr);
        } else {
            CHECK(addr == base_ptr + offs[i], "%s: a host device must keep true addresses", label);
        }
        enum loom_status st = loom_backend_tensor_alloc(buf, t, addr);
        CHECK(st == LOOM_OK, "%s: tensor of %zu bytes at offset %zu not placed: %s", label, lens[i], offs[i], loom_status_str(st));
        if (st != LOOM_OK) continue;
        uint8_t * got = malloc(lens[i]);
        CHECK(loom_backend_tensor_get(t, got, 0, lens[i]) == LOOM_OK, "%s: get", label);
        CHECK(memcmp(got, expect + offs[i], lens[i]) == 0, "%s: tensor at offset %zu does not read the caller's bytes", label, offs[i]);
        free(got);
        ok++;
    }
    loom_free(ctx);
    return ok;
}

/* ---------------------------------------------------------------- a page-unaligned heap region */

static void test_heap_region(void) {
    const size_t n = 200000, skew = 13, max_tensor = 5000;
    uint8_t * mem = malloc(n + 64);
    for (size_t i = 0; i < n + 64; i++) mem[i] = (uint8_t)(i * 7 + (i >> 9));
    uint8_t * copy = malloc(n + 64);
    memcpy(copy, mem, n + 64);

    size_t offs[64], lens[64];
    uint64_t rng = 99;
    for (int i = 0; i < 64; i++) {
        lens[i] = (size_t)test_rand_range(&rng, 1, (int64_t)max_tensor);
        offs[i] = (size_t)test_rand_range(&rng, 0, (int64_t)(n - lens[i]));
    }
    offs[0] = 0;          /* the very first byte (not page-aligned) */
    offs[1] = n - lens[1]; /* the very last */

    /* CPU: one buffer over the whole span, true addresses */
    loom_backend_buffer_t buf = loom_backend_dev_buffer_from_host_ptr(loom_cpu_device(), mem + skew, n, max_tensor);
    CHECK(buf && !loom_backend_buffer_is_multi(buf), "cpu wrap");
    CHECK(loom_backend_buffer_is_host(buf), "a CPU wrap is host memory");
    if (buf) CHECK(place_and_read("cpu heap", buf, false, mem + skew, mem + skew, offs, lens, 64) == 64, "cpu heap placements");
    loom_backend_buffer_free(buf);

    /* sim with host pointers and a max_size far below the region: overlapping chunks */
    struct loom_sim_params p = loom_sim_default_params();
    p.buffer_from_host_ptr = true;
    p.max_buffer_size = 5 * loom_page_size() + 100; /* deliberately not page-aligned */
    loom_backend_dev_t sim = loom_sim_device_new("sim-wrap", &p);
    buf = loom_backend_dev_buffer_from_host_ptr(sim, mem + skew, n, max_tensor);
    CHECK(buf && loom_backend_buffer_is_multi(buf), "sim wrap in chunks");
    CHECK(buf && !loom_backend_buffer_is_host(buf), "a sim wrap is device memory");
    if (buf) {
        check_chunks("sim heap", buf, mem + skew, n, max_tensor, p.max_buffer_size);
        CHECK(place_and_read("sim heap", buf, true, mem + skew, mem + skew, offs, lens, 64) == 64, "sim heap placements");
        /* every position of a largest tensor fits wholly in one chunk */
        size_t pos[256], len[256];
        int k = 0;
        for (size_t o = 0; o + max_tensor <= n && k < 256; o += 787) pos[k] = o, len[k++] = max_tensor;
        CHECK(place_and_read("sim heap sweep", buf, true, mem + skew, mem + skew, pos, len, k) == k, "every offset placed");
    }
    loom_backend_buffer_free(buf);
    struct loom_sim_stats ss;
    loom_sim_get_stats(sim, &ss);
    CHECK(ss.n_buffers == 0 && ss.bytes_allocated == 0, "sim wrap: wrapped memory is not device memory and all chunks are freed");
    CHECK(memcmp(mem, copy, n + 64) == 0, "the caller's memory was written");

    /* no room to overlap: max_tensor + a page does not fit under max_size -> an error, not a hang */
    test_n_errors = 0;
    buf = loom_backend_dev_buffer_from_host_ptr(sim, mem + skew, n, 4 * loom_page_size() + 50);
    CHECK(!buf && test_n_errors == 1 && strstr(test_last_error, "sim-wrap"), "wrap without room to overlap fails: %s", test_last_error);
    loom_backend_buffer_free(buf);

    /* injected failure at each chunk: NULL, and the chunks made so far are freed */
    int fails = 0;
    for (uint64_t k2 = 1; k2 < 200; k2++) {
        loom_sim_set_fail_alloc(sim, k2);
        buf = loom_backend_dev_buffer_from_host_ptr(sim, mem + skew, n, max_tensor);
        loom_sim_get_stats(sim, &ss);
        if (buf) {
            loom_backend_buffer_free(buf);
            break;
        }
        fails++;
        CHECK(ss.n_buffers == 0, "injected wrap failure %llu left %zu chunks", (unsigned long long)k2, ss.n_buffers);
    }
    loom_sim_set_fail_alloc(sim, 0);
    CHECK(fails > 1, "the chunked wrap failed at each of its %d chunks", fails);
    loom_sim_device_free(sim);

    /* a device that cannot wrap says so */
    loom_backend_dev_t plain = loom_sim_device_new("sim-nowrap", NULL);
    test_n_errors = 0;
    buf = loom_backend_dev_buffer_from_host_ptr(plain, mem, n, 100);
    CHECK(!buf && test_n_errors == 1, "a device without buffer_from_host_ptr refuses");
    loom_sim_device_free(plain);

    CHECK(memcmp(mem, copy, n + 64) == 0, "the caller's memory was written");
    free(copy);
    free(mem); /* still ours: a buffer that had freed it would make this a double free */
}

/* ---------------------------------------------------------------- a read-only mmap of a file */

static void test_mmap_file(void) {
    const size_t file_size = 300000 + 777, max_tensor = 12000;
    char path[] = "/tmp/loom-test-hostptr-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    unlink(path); /* gone when closed */
    uint8_t * bytes = malloc(file_size);
    uint64_t rng = 12345;
    for (size_t i = 0; i < file_size; i++) bytes[i] = (uint8_t)test_rand_u64(&rng);
    CHECK(write(fd, bytes, file_size) == (ssize_t)file_size, "write the file");
    free(bytes);
    uint8_t * map = mmap(NULL, file_size, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED, "mmap");
    if (map == MAP_FAILED) {
        close(fd);
        return;
    }
    /* the file's bytes as read(2) sees them, not through the mapping */
    uint8_t * file = malloc(file_size);
    CHECK(pread(fd, file, file_size, 0) == (ssize_t)file_size, "pread");

    /* wrap a "tensor data" region that starts mid-page, as a GGUF data section does */
    const size_t region_off = 4096 + 1234, region_size = file_size - region_off - 500;
    enum { N = 48 };
    size_t offs[N], lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)test_rand_range(&rng, 1, (int64_t)max_tensor);
        offs[i] = region_off + (size_t)test_rand_range(&rng, 0, (int64_t)(region_size - lens[i]));
    }
    offs[0] = region_off;
    lens[1] = max_tensor;
    offs[1] = region_off + region_size - max_tensor;

    /* CPU: one buffer, tensors at their true file addresses */
    loom_backend_buffer_t buf = loom_backend_dev_buffer_from_host_ptr(loom_cpu_device(), map + region_off, region_size, max_tensor);
    CHECK(buf != NULL, "cpu wraps the mapping");
    if (buf) CHECK(place_and_read("cpu mmap", buf, false, map, file, offs, lens, N) == N, "cpu mmap placements");
    loom_backend_buffer_free(buf);

    /* sim with host pointers, max_size small enough that the chunks overlap */
    struct loom_sim_params p = loom_sim_default_params();
    p.buffer_from_host_ptr = true;
    p.max_buffer_size = 64 * 1024;
    loom_backend_dev_t sim = loom_sim_device_new("sim-mmap", &p);
    buf = loom_backend_dev_buffer_from_host_ptr(sim, map + region_off, region_size, max_tensor);
    CHECK(buf != NULL, "sim wraps the mapping");
    if (buf) {
        check_chunks("sim mmap", buf, map + region_off, region_size, max_tensor, p.max_buffer_size);
        CHECK(place_and_read("sim mmap", buf, true, map, file, offs, lens, N) == N, "sim mmap placements");
        CHECK(loom_backend_buffer_host_ptr_addr(buf, map) == NULL, "a byte before the page-aligned span has no address");
        CHECK(loom_backend_buffer_host_ptr_addr(buf, map + file_size + 8192) == NULL, "a byte after the span has no address");
    }
    loom_backend_buffer_free(buf);
    loom_sim_device_free(sim);

    /* the mapping is intact and still ours (PROT_READ: any write through a buffer would have faulted) */
    CHECK(memcmp(map, file, file_size) == 0, "the mapping changed");
    CHECK(munmap(map, file_size) == 0, "munmap: the buffer did not unmap it");
    free(file);
    close(fd);
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    test_heap_region();
    test_mmap_file();
    loom_log_set(NULL, NULL);
    return test_finish("test-backend-hostptr");
}
