/* test-gguf-corpus.c -- malformed GGUF files, one per validation rule (tests/gguf/gguf-gen.c):
 * the reader must reject each with the right status and a one-line message naming the problem,
 * and `loom info` must exit with status 1 after exactly one line on stderr. Valid variants must
 * be accepted. The files are left in <build>/gguf-corpus/ (they also seed the fuzzer). */
#include "test-util.h"

#include "gguf/gguf-gen.h"
#include "loom-gguf.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>

#define CORPUS_DIR "gguf-corpus"

static bool write_file(const char * path, const struct gen_buf * b) {
    FILE * f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(b->data, 1, b->size, f) == b->size;
    return fclose(f) == 0 && ok;
}

/* Runs `bin info path`, stdout discarded; returns the exit status (-1 when it did not exit) and
 * the captured stderr in 'errbuf'. */
static int run_info(const char * bin, const char * path, char * errbuf, size_t errsize) {
    char errpath[] = "gguf-corpus/stderr.XXXXXX";
    int efd = mkstemp(errpath);
    if (efd < 0) return -2;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(efd, 2);
        execl(bin, bin, "info", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    ssize_t n = pread(efd, errbuf, errsize - 1, 0);
    errbuf[n > 0 ? n : 0] = '\0';
    close(efd);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Removes the .gguf files of an earlier run (case numbers shift when cases are added). */
static void clear_corpus(void) {
    DIR * d = opendir(CORPUS_DIR);
    if (!d) return;
    struct dirent * e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".gguf")) {
            char path[512];
            snprintf(path, sizeof path, CORPUS_DIR "/%s", e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static int count_lines(const char * s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void check_case(const struct gen_case * c, size_t idx, const char * bin) {
    struct loom_gguf * g = NULL;
    char err[1024] = "";
    enum loom_status st = loom_gguf_open_memory(c->file.data, c->file.size, &g, err, sizeof err);
    if (c->valid) {
        CHECK(st == LOOM_OK && g, "%s: rejected: %s", c->name, err);
    } else {
        CHECK(st == (enum loom_status)c->status && !g, "%s: status %s, expected %s (%s)", c->name, loom_status_str(st),
              loom_status_str((enum loom_status)c->status), err);
        CHECK(err[0] && !strchr(err, '\n'), "%s: message must be one non-empty line: '%s'", c->name, err);
        CHECK(!c->expect || strstr(err, c->expect), "%s: message '%s' lacks '%s'", c->name, err, c->expect);
    }
    loom_gguf_free(g);

    char path[256];
    snprintf(path, sizeof path, CORPUS_DIR "/%03zu-%s.gguf", idx, c->name);
    CHECK(write_file(path, &c->file), "cannot write %s", path);
    /* the file path must agree with the memory path; its message is the same after the quoted path */
    char ferr[1024] = "", want[1024 + 300] = "";
    if (!c->valid) snprintf(want, sizeof want, "'%s': %s", path, err);
    enum loom_status fst = loom_gguf_open(path, &g, ferr, sizeof ferr);
    CHECK(fst == st && !strcmp(ferr, want), "%s: file open gave %s '%s', memory gave %s '%s'", c->name,
          loom_status_str(fst), ferr, loom_status_str(st), err);
    loom_gguf_free(g);
    if (!bin) return;

    char out[8192];
    int rc = run_info(bin, path, out, sizeof out);
    if (c->valid) {
        CHECK(rc == 0 && out[0] == '\0', "%s: loom info exit %d, stderr: %s", c->name, rc, out);
        return;
    }
    CHECK(rc == 1, "%s: loom info exit status %d, expected 1; stderr: %s", c->name, rc, out);
    CHECK(count_lines(out) == 1 && !strncmp(out, "loom info: ", 11), "%s: stderr must be one 'loom info:' line: %s",
          c->name, out);
    CHECK(!strstr(out, "Sanitizer") && !strstr(out, "runtime error"), "%s: sanitizer report: %s", c->name, out);
}

/* Every prefix of a valid file that cuts before the end of the last tensor's data must be
 * rejected as malformed (what follows is padding, which may be cut). */
static void check_prefixes(const struct gen_case * c) {
    struct loom_gguf * full = NULL;
    if (loom_gguf_open_memory(c->file.data, c->file.size, &full, NULL, 0) != LOOM_OK) {
        CHECK(false, "%s: not valid", c->name);
        return;
    }
    uint64_t end = 0;
    for (int64_t i = 0; i < loom_gguf_n_tensors(full); i++) {
        uint64_t e = loom_gguf_data_offset(full) + loom_gguf_tensor_offset(full, i) + loom_gguf_tensor_size(full, i);
        if (e > end) end = e;
    }
    loom_gguf_free(full);
    CHECK(end > 0 && end <= c->file.size, "%s: data end %llu", c->name, (unsigned long long)end);
    int bad = 0;
    for (size_t n = 0; n < end; n++) {
        struct loom_gguf * g = NULL;
        char err[512];
        enum loom_status st = loom_gguf_open_memory(c->file.data, n, &g, err, sizeof err);
        if (st != LOOM_ERR_FORMAT || g) bad++;
        loom_gguf_free(g);
    }
    for (size_t n = (size_t)end; n <= c->file.size; n++) {
        struct loom_gguf * g = NULL;
        bad += loom_gguf_open_memory(c->file.data, n, &g, NULL, 0) != LOOM_OK;
        loom_gguf_free(g);
    }
    CHECK(bad == 0, "%s: %d prefixes not rejected as malformed", c->name, bad);
}

/* The values of the hand-encoded 'good-all-types' case. */
static void check_all_types(const struct gen_case * c) {
    struct loom_gguf * g = NULL;
    if (loom_gguf_open_memory(c->file.data, c->file.size, &g, NULL, 0) != LOOM_OK) {
        CHECK(false, "%s: not valid", c->name);
        return;
    }
    CHECK(loom_gguf_get_u32(g, "t.u8", 0) == 0xfe, "u8");
    CHECK(loom_gguf_get_i32(g, "t.i8", 0) == -128, "i8");
    CHECK(loom_gguf_get_u32(g, "t.u16", 0) == 0x1234, "u16");
    CHECK(loom_gguf_get_i32(g, "t.i16", 0) == -1, "i16");
    CHECK(loom_gguf_get_u32(g, "t.u32", 0) == 0xdeadbeef, "u32");
    CHECK(loom_gguf_get_i64(g, "t.i32", 0) == -2, "i32");
    CHECK(loom_gguf_get_f32(g, "t.f32", 0) == 1.5f, "f32");
    CHECK(loom_gguf_get_bool(g, "t.bool", false), "bool");
    size_t len = 0;
    CHECK(!strcmp(loom_gguf_get_str(g, "t.str", "", &len), "h\xc3\xa9") && len == 3, "str");
    const int16_t * a = loom_gguf_get_arr_data(g, "t.arr");
    CHECK(loom_gguf_get_arr_type(g, "t.arr") == LOOM_GGUF_TYPE_INT16 && loom_gguf_get_arr_n(g, "t.arr") == 2 && a &&
              a[0] == -3 && a[1] == 7, "i16 array");
    CHECK(loom_gguf_get_u64(g, "t.u64", 0) == 0x0123456789abcdefull, "u64");
    CHECK(loom_gguf_get_i64(g, "t.i64", 0) == -3, "i64");
    CHECK(loom_gguf_get_f64(g, "t.f64", 0) == -2.5, "f64");
    for (int t = 0; t < LOOM_GGUF_TYPE_COUNT; t++) {
        static const char * const keys[] = {"t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.f32",
                                            "t.bool", "t.str", "t.arr", "t.u64", "t.i64", "t.f64"};
        int64_t k = loom_gguf_find_key(g, keys[t]);
        CHECK(k >= 0 && loom_gguf_kv_type(g, k) == (enum loom_gguf_type)t, "%s has type id %d", keys[t], t);
    }
    loom_gguf_free(g);
}

/* A large valid file (100k keys, 100k tensors): opens in O(n log n) and every name is found. */
static void check_many(void) {
    const uint32_t n = 100000;
    struct gen_buf b = {0};
    gen_bytes(&b, "GGUF", 4);
    gen_u32(&b, 3);
    gen_u64(&b, n);
    gen_u64(&b, n);
    char name[64];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "key.%u", i * 2654435761u); /* scattered order */
        gen_str(&b, name);
        gen_u32(&b, 4);
        gen_u32(&b, i);
    }
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%u.w", n - i);
        gen_str(&b, name);
        gen_u32(&b, 1);
        gen_u64(&b, 8);
        gen_u32(&b, 0);
        gen_u64(&b, (uint64_t)i * 32);
    }
    gen_zeros(&b, (32 - b.size % 32) % 32 + (size_t)n * 32);
    int64_t t0 = loom_time_us();
    struct loom_gguf * g = NULL;
    char err[512] = "";
    CHECK(loom_gguf_open_memory(b.data, b.size, &g, err, sizeof err) == LOOM_OK, "many: %s", err);
    int64_t t1 = loom_time_us();
    if (g) {
        int missing = 0;
        for (uint32_t i = 0; i < n; i++) {
            snprintf(name, sizeof name, "key.%u", i * 2654435761u);
            missing += loom_gguf_get_u32(g, name, UINT32_MAX) != i;
            snprintf(name, sizeof name, "blk.%u.w", n - i);
            missing += loom_gguf_find_tensor(g, name) != (int64_t)i;
        }
        CHECK(missing == 0, "many: %d names not found", missing);
        loom_gguf_free(g);
    }
    printf("100k keys + 100k tensors (%zu bytes): open %.1f ms, 200k lookups %.1f ms\n", b.size, (t1 - t0) / 1e3,
           (loom_time_us() - t1) / 1e3);
    gen_free(&b);
}

int main(void) {
    struct gen_case * cases;
    size_t n = gen_cases(&cases);
    if (mkdir(CORPUS_DIR, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", CORPUS_DIR, strerror(errno));
        return 1;
    }
    clear_corpus();
    const char * bin = getenv("LOOM_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        printf("note: LOOM_BIN not set: checking the library only, not `loom info`\n");
        bin = NULL;
    }
    size_t n_bad = 0;
    for (size_t i = 0; i < n; i++) {
        check_case(&cases[i], i, bin);
        n_bad += !cases[i].valid;
        if (!strcmp(cases[i].name, "good-all-types")) check_all_types(&cases[i]);
    }
    CHECK(n_bad >= 30, "only %zu malformed cases", n_bad);
    check_prefixes(&cases[0]);
    check_many();
    printf("%zu cases (%zu malformed) in %s/\n", n, n_bad, CORPUS_DIR);
    gen_cases_free(cases, n);
    return test_finish("test-gguf-corpus");
}
