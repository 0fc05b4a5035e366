/* hugepage-probe.c -- how this kernel backs a model file's bytes, and how fast one thread streams
 * them from each kind of memory: the file mapping as is, with MADV_HUGEPAGE, with MADV_COLLAPSE,
 * with the file's page cache dropped first, and copies into anonymous memory (4 KiB pages as
 * malloc gives them, or 2 MiB-aligned with MADV_HUGEPAGE). Prints the load time, the huge-page
 * share from /proc/self/smaps (FilePmdMapped / AnonHugePages) and the best GB/s of 5 passes.
 * build: cc -O2 -mavx2 bench/hugepage-probe.c -o /tmp/hugepage-probe
 * usage: hugepage-probe FILE map|map-huge|map-collapse|map-drop-huge|anon-4k|anon-huge */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the kB of 'key' in the smaps entries that overlap [p, p + n) */
static long smaps_kb(const void * p, size_t n, const char * key) {
    FILE * f = fopen("/proc/self/smaps", "r");
    char line[512];
    long total = 0;
    int in = 0;
    uintptr_t a = (uintptr_t)p, b = a + n;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = lo < b && hi > a;
            continue;
        }
        long kb;
        size_t kl = strlen(key);
        if (in && !strncmp(line, key, kl) && line[kl] == ':' && sscanf(line + kl + 1, "%ld", &kb) == 1) total += kb;
    }
    if (f) fclose(f);
    return total;
}

static double stream(const uint8_t * p, size_t n) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        __m256i acc = _mm256_setzero_si256();
        for (size_t i = 0; i + 128 <= n; i += 128) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(p + i)), b = _mm256_loadu_si256((const __m256i *)(p + i + 32));
            __m256i c = _mm256_loadu_si256((const __m256i *)(p + i + 64)), d = _mm256_loadu_si256((const __m256i *)(p + i + 96));
            acc = _mm256_add_epi8(acc, _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d)));
        }
        volatile int sink = _mm256_extract_epi32(acc, 0);
        (void)sink;
        double gbs = n / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE map|map-huge|map-collapse|map-drop-huge|anon-4k|anon-huge\n", argv[0]);
        return 1;
    }
    const char * mode = argv[2];
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) return perror(argv[1]), 1;
    size_t n = (size_t)st.st_size;
    const size_t huge = (size_t)2 << 20;
    double t0 = now();
    uint8_t * p = NULL;
    const char * key = "AnonHugePages";
    int rc = 0;
    if (!strncmp(mode, "map", 3)) {
        key = "FilePmdMapped";
        if (!strcmp(mode, "map-drop-huge")) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return perror("mmap"), 1;
        if (strcmp(mode, "map")) madvise(p, n, MADV_HUGEPAGE);
        volatile uint8_t s = 0;
        for (size_t i = 0; i < n; i += 4096) s += p[i]; /* fault every page in, as the first token does */
        if (!strcmp(mode, "map-collapse")) rc = madvise(p, n, MADV_COLLAPSE) ? errno : 0;
    } else {
        size_t sz = (n + huge - 1) / huge * huge;
        if (!strcmp(mode, "anon-huge")) {
            uint8_t * q = mmap(NULL, sz + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (q == MAP_FAILED) return perror("mmap"), 1;
            p = q + (huge - (uintptr_t)q % huge) % huge;
            madvise(p, sz, MADV_HUGEPAGE);
        } else {
            p = malloc(n);
        }
        for (size_t done = 0; done < n;) {
            ssize_t r = pread(fd, p + done, n - done > (1 << 30) ? (1 << 30) : n - done, (off_t)done);
            if (r <= 0) return perror("pread"), 1;
            done += (size_t)r;
        }
    }
    double load = now() - t0;
    long hp = smaps_kb(p, n, key), rss = smaps_kb(p, n, "Rss");
    double gbs = stream(p, n);
    printf("%-14s load %7.1f ms  %s %6ld of %6ld kB resident (%3.0f%%)%s  stream %5.1f GB/s (1 thread, best of 5)\n", mode,
           load * 1e3, key, hp, rss, rss ? 100.0 * hp / rss : 0.0, rc ? (rc == EINVAL ? "  COLLAPSE: EINVAL" : "  COLLAPSE: error") : "",
           gbs);
    return 0;
}
