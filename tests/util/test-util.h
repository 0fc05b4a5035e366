/* test-util.h -- small helpers shared by the test programs. */
#ifndef LOOM_TEST_UTIL_H
#define LOOM_TEST_UTIL_H

#include "loom.h"
#include "loom-sim.h"
#include "core/loom-internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern int test_failures;
extern long test_checks; /* checks evaluated (test_finish reports the count) */

/* Records a failure (with file:line and message) without stopping the test. */
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        test_checks++;                                                          \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            test_failures++;                                                    \
        }                                                                       \
    } while (0)

/* Exit status for CTest: 0 when no check failed, 1 otherwise; prints how many checks ran. */
int test_finish(const char * name);
/* Exit status 77 (CTest "skipped") with a visible reason. */
int test_skip(const char * reason);

/* Path of a file in the shared models folder ($LOOM_MODELS), in a static buffer. */
const char * test_model_path(const char * file);

/* A log callback (loom_log_set) that counts errors and keeps the last one; other levels are
 * shown only with LOOM_DEBUG set. */
extern char test_last_error[2048];
extern int test_n_errors;
void test_capture_log(enum loom_log_level level, const char * text, void * user);

/* A metadata-only context for 'n_tensors' tensors and a graph of 'graph_nodes' nodes (0: none). */
struct loom_context * test_meta_ctx(size_t n_tensors, size_t graph_nodes);

/* The bytes of file 'path' (a NUL after them; '*size' their count), or NULL when it cannot be read.
 * Free with free(). */
uint8_t * test_read_file(const char * path, size_t * size);

/* Writes 'size' bytes of 'data' to dir/name and returns that path (a static buffer, overwritten by
 * the next call); aborts when the file cannot be written. */
const char * test_write_file(const char * dir, const char * name, const void * data, size_t size);

/* True when folder 'dir' holds a temporary file left by the GGUF writer ("*.tmp.*"). */
bool test_dir_has_temp(const char * dir);

/* Stores 'v' at 'p' as an element of 'type' (F32, F16, BF16 rounded to nearest even; I32 truncated);
 * other types are left alone. */
void test_store_value(enum loom_type type, void * p, float v);

/* A sim device (loom-sim.h) for the allocator and scheduler tests, from 'params' with one compute
 * thread (so that its results equal a one-thread CPU run's bit for bit). Aborts the test when the
 * device cannot be made. */
loom_backend_dev_t test_sim_new(const char * name, struct loom_sim_params params);
/* Buffers of sim device 'dev' alive now; buffer creations it was asked for since its stats were reset. */
size_t test_sim_live_buffers(loom_backend_dev_t dev);
uint64_t test_sim_alloc_calls(loom_backend_dev_t dev);

/* Deterministic pseudo-random numbers (xorshift64*). */
uint64_t test_rand_u64(uint64_t * state);
double test_rand_uniform(uint64_t * state);            /* [0, 1) */
int64_t test_rand_range(uint64_t * state, int64_t lo, int64_t hi); /* [lo, hi] */
double test_rand_normal(uint64_t * state);

/* Loads the model at 'path' (mapped when use_mmap), decodes 'tokens' (n_tokens of them) in a context of
 * n_ctx cells on n_threads threads and returns a malloc'd copy of the last token's logits (ne0 =
 * *n_vocab floats); NULL when loading, the context or the decode fails (the library's error is logged). */
float * test_model_logits(const char * path, bool use_mmap, int32_t n_ctx, int32_t n_threads, const int32_t * tokens,
                          int32_t n_tokens, int32_t * n_vocab);

#endif
