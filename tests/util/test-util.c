/* test-util.c -- small helpers shared by the test programs. */
#include "test-util.h"
#include "loom-llama.h"

#include <dirent.h>
#include <math.h>
#include <string.h>

int test_failures = 0;
long test_checks = 0;

int test_finish(const char * name) {
    if (test_failures) {
        fprintf(stderr, "%s: %d of %ld check(s) failed\n", name, test_failures, test_checks);
        return 1;
    }
    fprintf(stderr, "%s: all %ld checks passed\n", name, test_checks);
    return 0;
}

int test_skip(const char * reason) {
    printf("skipped: %s\n", reason);
    return 77;
}

const char * test_model_path(const char * file) {
    static char buf[4096];
    const char * dir = getenv("LOOM_MODELS");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "../shared/models", file);
    return buf;
}

uint64_t test_rand_u64(uint64_t * s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

double test_rand_uniform(uint64_t * s) { return (double)(test_rand_u64(s) >> 11) / 9007199254740992.0; }

int64_t test_rand_range(uint64_t * s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(test_rand_u64(s) % (uint64_t)(hi - lo + 1));
}

double test_rand_normal(uint64_t * s) {
    double u1 = test_rand_uniform(s), u2 = test_rand_uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

char test_last_error[2048];
int test_n_errors;

void test_capture_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) {
        test_n_errors++;
        snprintf(test_last_error, sizeof test_last_error, "%s", text);
    }
    if (getenv("LOOM_DEBUG")) fprintf(stderr, "[log] %s\n", text);
}

struct loom_context * test_meta_ctx(size_t n_tensors, size_t graph_nodes) {
    struct loom_init_params p = {
        .mem_size = n_tensors * loom_tensor_overhead() + (graph_nodes ? loom_graph_overhead(graph_nodes) : 0),
        .mem_buffer = NULL,
        .no_alloc = true,
    };
    return loom_init(p);
}

bool test_dir_has_temp(const char * dir) {
    DIR * d = opendir(dir);
    bool found = false;
    struct dirent * e;
    while (d && (e = readdir(d)) != NULL) found |= strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return found;
}

void test_store_value(enum loom_type type, void * p, float v) {
    switch (type) {
    case LOOM_TYPE_F32: memcpy(p, &v, 4); break;
    case LOOM_TYPE_F16: { uint16_t h = loom_fp32_to_fp16(v); memcpy(p, &h, 2); break; }
    case LOOM_TYPE_BF16: { uint16_t h = loom_fp32_to_bf16(v); memcpy(p, &h, 2); break; }
    case LOOM_TYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    default: break;
    }
}

loom_backend_dev_t test_sim_new(const char * name, struct loom_sim_params params) {
    params.n_threads = 1;
    loom_backend_dev_t dev = loom_sim_device_new(name, &params);
    if (!dev) {
        fprintf(stderr, "cannot make sim device '%s'\n", name);
        exit(1);
    }
    return dev;
}

size_t test_sim_live_buffers(loom_backend_dev_t dev) {
    struct loom_sim_stats st;
    loom_sim_get_stats(dev, &st);
    return st.n_buffers;
}

uint64_t test_sim_alloc_calls(loom_backend_dev_t dev) {
    struct loom_sim_stats st;
    loom_sim_get_stats(dev, &st);
    return st.n_alloc_calls;
}

uint8_t * test_read_file(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t * buf = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *size = (size_t)n;
    }
    return buf;
}

const char * test_write_file(const char * dir, const char * name, const void * data, size_t size) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

float * test_model_logits(const char * path, bool use_mmap, int32_t n_ctx, int32_t n_threads, const int32_t * tokens,
                          int32_t n_tokens, int32_t * n_vocab) {
    struct loom_model_params mp = loom_model_default_params();
    mp.use_mmap = use_mmap;
    struct loom_model * model = NULL;
    struct loom_llama_context * lctx = NULL;
    float * out = NULL;
    if (loom_model_load(path, mp, &model) != LOOM_OK) return NULL;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    if (loom_llama_context_new(model, cp, &lctx) == LOOM_OK && loom_llama_decode(lctx, tokens, n_tokens) == LOOM_OK) {
        *n_vocab = loom_model_hparams(model)->n_vocab;
        out = malloc((size_t)*n_vocab * sizeof *out);
        if (out) memcpy(out, loom_llama_get_logits(lctx), (size_t)*n_vocab * sizeof *out);
    }
    loom_llama_context_free(lctx);
    loom_model_free(model);
    return out;
}
