/* test-convert.c -- the llama2.c checkpoint converter: stories260K converts without a warning to
 * tensors byte-identical to the reference converter's (../shared/models/stories260K-llamacpp.gguf);
 * malformed checkpoints and tokenizers fail with LOOM_ERR_FORMAT and write nothing; trailing data
 * is warned about once; an output that is an input is refused and the input left unchanged.
 * Files go to a fresh folder under the working directory (the build folder), removed at the end. */
#include "test-util.h"

#include "loom-gguf.h"
#include "loom-llama.h"
#include "loom-convert.h"

#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char paths[32][128];
static int n_paths;

/* A path in the test folder (remembered for removal). */
static const char * tpath(const char * name) {
    LOOM_ASSERT(n_paths < 32);
    snprintf(paths[n_paths], sizeof paths[0], "%s/%s", dir, name);
    return paths[n_paths++];
}

/* ---------------------------------------------------------------- log capture */

static int n_warn, n_err;
static char last_warn[512], last_err[512];

static void on_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_WARN) n_warn++, snprintf(last_warn, sizeof last_warn, "%s", text);
    if (level == LOOM_LOG_ERROR) n_err++, snprintf(last_err, sizeof last_err, "%s", text);
}

static void log_reset(void) {
    n_warn = n_err = 0;
    last_warn[0] = last_err[0] = '\0';
}

/* ---------------------------------------------------------------- files */

static bool write_all(const char * path, const void * p, size_t n) {
    FILE * f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool exists(const char * path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}


/* ---------------------------------------------------------------- cases */

/* Every tensor of 'ours' is in 'theirs' with the same type, shape and bytes; theirs has one more,
 * output.weight, equal to token_embd.weight (stories260K shares its classifier). */
static void compare_with_reference(const char * ours_path, const char * theirs_path) {
    struct loom_gguf *a = NULL, *b = NULL;
    char err[256];
    CHECK(loom_gguf_open(ours_path, &a, err, sizeof err) == LOOM_OK, "open ours: %s", err);
    CHECK(loom_gguf_open(theirs_path, &b, err, sizeof err) == LOOM_OK, "open reference: %s", err);
    size_t na = 0, nb = 0;
    uint8_t * fa = test_read_file(ours_path, &na);
    uint8_t * fb = test_read_file(theirs_path, &nb);
    if (!a || !b || !fa || !fb) goto done;
    CHECK(loom_gguf_n_tensors(a) == 47 && loom_gguf_n_tensors(b) == 48, "tensor counts %lld, %lld (5 layers x 9 + embd + norm; + output)",
          (long long)loom_gguf_n_tensors(a), (long long)loom_gguf_n_tensors(b));
    int same = 0;
    for (int64_t i = 0; i < loom_gguf_n_tensors(a); i++) {
        const char * name = loom_gguf_tensor_name(a, i);
        int64_t j = loom_gguf_find_tensor(b, name);
        CHECK(j >= 0, "tensor %s missing from the reference", name);
        if (j < 0) continue;
        uint64_t sa = loom_gguf_tensor_size(a, i), sb = loom_gguf_tensor_size(b, j);
        uint64_t oa = loom_gguf_data_offset(a) + loom_gguf_tensor_offset(a, i);
        uint64_t ob = loom_gguf_data_offset(b) + loom_gguf_tensor_offset(b, j);
        bool ok = loom_gguf_tensor_type(a, i) == loom_gguf_tensor_type(b, j) && sa == sb && oa + sa <= na && ob + sb <= nb &&
                  !memcmp(loom_gguf_tensor_ne(a, i), loom_gguf_tensor_ne(b, j), LOOM_MAX_DIMS * sizeof(int64_t)) &&
                  !memcmp(fa + oa, fb + ob, sa);
        CHECK(ok, "tensor %s differs from the reference", name);
        same += ok;
    }
    CHECK(same == 47, "%d of 47 tensors identical", same);
    int64_t out = loom_gguf_find_tensor(b, "output.weight"), emb = loom_gguf_find_tensor(a, "token_embd.weight");
    CHECK(loom_gguf_find_tensor(a, "output.weight") < 0, "no output.weight in ours (shared classifier)");
    if (out >= 0 && emb >= 0) {
        uint64_t s = loom_gguf_tensor_size(a, emb);
        CHECK(s == 512 * 64 * 4 && loom_gguf_tensor_size(b, out) == s &&
                  !memcmp(fa + loom_gguf_data_offset(a) + loom_gguf_tensor_offset(a, emb),
                          fb + loom_gguf_data_offset(b) + loom_gguf_tensor_offset(b, out), s),
              "the reference's output.weight is our token_embd.weight");
    }
done:
    free(fa);
    free(fb);
    loom_gguf_free(a);
    loom_gguf_free(b);
}

static void test_stories(const char * ckpt, const char * tok, const char * ref) {
    const char * out = tpath("stories260K.gguf");
    log_reset();
    CHECK(loom_convert_llama2c(ckpt, tok, out) == LOOM_OK, "convert: %s", last_err);
    CHECK(n_warn == 0, "a valid checkpoint converts without a warning (%d: %s)", n_warn, last_warn);
    compare_with_reference(out, ref);
}

/* Checkpoints cut short anywhere fail with LOOM_ERR_FORMAT and leave no output. */
static void test_truncated(const uint8_t * ckpt, size_t size, const char * tok) {
    const size_t lens[] = {0, 4, 27, 28, 29, 1000, size / 2, size - 16385, size - 4, size - 1};
    const char * in = tpath("truncated.bin");
    const char * out = tpath("truncated.gguf");
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        CHECK(write_all(in, ckpt, lens[k]), "write");
        log_reset();
        enum loom_status st = loom_convert_llama2c(in, tok, out);
        CHECK(st == LOOM_ERR_FORMAT, "a checkpoint of %zu of %zu bytes: status %s", lens[k], size, loom_status_str(st));
        CHECK(n_err >= 1 && !strchr(last_err, '\n'), "one-line reason for %zu bytes", lens[k]);
        CHECK(!exists(out) && !test_dir_has_temp(dir), "nothing written for %zu bytes", lens[k]);
    }
}

/* A header whose vocab size is INT32_MIN (negating it overflows) or too large in magnitude. */
static void test_bad_vocab_size(const uint8_t * ckpt, size_t size, const char * tok) {
    const int32_t bad[] = {INT32_MIN, -(1 << 24) - 1, (1 << 24) + 1, INT32_MAX, 0};
    const char * in = tpath("badvocab.bin");
    const char * out = tpath("badvocab.gguf");
    uint8_t * copy = malloc(size);
    if (!copy) return;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(copy, ckpt, size);
        memcpy(copy + 5 * 4, &bad[k], 4);
        CHECK(write_all(in, copy, size), "write");
        log_reset();
        enum loom_status st = loom_convert_llama2c(in, tok, out);
        CHECK(st == LOOM_ERR_FORMAT, "vocab size %d: status %s", bad[k], loom_status_str(st));
        CHECK(!exists(out), "nothing written for vocab size %d", bad[k]);
    }
    free(copy);
}

/* Bytes after the weights mean the header does not describe them (a wrong hidden size shifts every
 * tensor): refused, nothing written; a classifier's worth gets its own note. */
static void test_trailing(const uint8_t * ckpt, size_t size, const char * tok) {
    const size_t cls = 512 * 64 * 4; /* vocab x dim f32: an unshared classifier */
    const size_t extras[] = {100, cls};
    const char * in = tpath("trailing.bin");
    const char * out = tpath("trailing.gguf");
    uint8_t * copy = calloc(1, size + cls);
    if (!copy) return;
    memcpy(copy, ckpt, size);
    for (size_t k = 0; k < 2; k++) {
        CHECK(write_all(in, copy, size + extras[k]), "write");
        log_reset();
        const enum loom_status st = loom_convert_llama2c(in, tok, out);
        CHECK(st == LOOM_ERR_FORMAT, "trailing %zu bytes: status %s", extras[k], loom_status_str(st));
        char want[80];
        snprintf(want, sizeof want, "checkpoint: %zu bytes after the weights the header describes", extras[k]);
        CHECK(strstr(last_err, want), "the error for %zu trailing bytes: %s", extras[k], last_err);
        CHECK((strstr(last_err, "classifier") != NULL) == (extras[k] == cls), "classifier note: %s", last_err);
        CHECK(!exists(out) && !test_dir_has_temp(dir), "nothing written for %zu trailing bytes", extras[k]);
    }
    /* a header whose hidden size is one less than the weights': the feed-forward weights are
     * 3 x layers x dim bytes x 4 short, which is left over */
    int32_t hidden;
    memcpy(&hidden, copy + 4, 4);
    hidden--;
    memcpy(copy + 4, &hidden, 4);
    CHECK(write_all(in, copy, size), "write");
    log_reset();
    const enum loom_status st = loom_convert_llama2c(in, tok, out);
    CHECK(st == LOOM_ERR_FORMAT && strstr(last_err, "the header does not match the weights"), "hidden size %d: status %s, %s", hidden,
          loom_status_str(st), last_err);
    CHECK(!exists(out), "nothing written for a wrong hidden size");
    free(copy);
}

/* A tokenizer with more entries than the model's vocabulary (another model's) is refused, whichever path loads it. */
static void test_tokenizer_trailing(const char * ckpt, const char * big_tok) {
    struct loom_vocab * v = NULL;
    log_reset();
    CHECK(loom_vocab_load_llama2c(big_tok, 512, &v) == LOOM_ERR_FORMAT && !v, "512 entries of tokenizer.bin refused");
    CHECK(strstr(last_err, "after entry 512") && strstr(last_err, "512 tokens"), "the error: %s", last_err);
    loom_vocab_free(v);
    v = NULL;
    CHECK(loom_vocab_load_llama2c(big_tok, 32000, &v) == LOOM_OK && v && loom_vocab_n_tokens(v) == 32000, "all of tokenizer.bin: %s",
          last_err);
    loom_vocab_free(v);
    const char * out = tpath("bigtok.gguf");
    log_reset();
    const enum loom_status st = loom_convert_llama2c(ckpt, big_tok, out);
    CHECK(st == LOOM_ERR_FORMAT && strstr(last_err, "after entry 512"), "convert with tokenizer.bin: status %s, %s", loom_status_str(st),
          last_err);
    CHECK(!exists(out) && !test_dir_has_temp(dir), "nothing written with tokenizer.bin");
}

static void test_garbage_tokenizer(const char * ckpt) {
    const char * tok = tpath("garbage-tok.bin");
    const char * out = tpath("garbage.gguf");
    uint8_t junk[4096];
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)test_rand_u64(&s);
    junk[0] = 16, junk[1] = junk[2] = junk[3] = 0; /* a plausible max_token_length, then noise */
    const struct { size_t n; const char * what; } cases[] = {{sizeof junk, "noise"}, {2, "too short"}, {0, "empty"}};
    for (size_t k = 0; k < 3; k++) {
        CHECK(write_all(tok, junk, cases[k].n), "write");
        log_reset();
        enum loom_status st = loom_convert_llama2c(ckpt, tok, out);
        CHECK(st == LOOM_ERR_FORMAT, "%s tokenizer: status %s", cases[k].what, loom_status_str(st));
        CHECK(!exists(out) && !test_dir_has_temp(dir), "nothing written for a %s tokenizer", cases[k].what);
    }
}

/* -o naming an input is refused and the input keeps its bytes. */
static void test_output_is_input(const uint8_t * ckpt, size_t size, const uint8_t * tok, size_t tok_size) {
    const char * c = tpath("in-ckpt.bin");
    const char * t = tpath("in-tok.bin");
    const char * h = tpath("in-hardlink.bin");
    CHECK(write_all(c, ckpt, size) && write_all(t, tok, tok_size), "write inputs");
    CHECK(link(c, h) == 0, "hard link");
    const char * outs[] = {c, t, h};
    for (int k = 0; k < 3; k++) {
        log_reset();
        CHECK(loom_convert_llama2c(c, t, outs[k]) == LOOM_ERR_INVALID_ARG, "output %s is an input", outs[k]);
        CHECK(strstr(last_err, "input") != NULL, "says why: %s", last_err);
    }
    size_t n1 = 0, n2 = 0;
    uint8_t * a = test_read_file(c, &n1);
    uint8_t * b = test_read_file(t, &n2);
    CHECK(a && n1 == size && !memcmp(a, ckpt, size), "checkpoint unchanged");
    CHECK(b && n2 == tok_size && !memcmp(b, tok, tok_size), "tokenizer unchanged");
    CHECK(!test_dir_has_temp(dir), "no temporary file");
    free(a);
    free(b);
}

int main(void) {
    char ckpt[PATH_MAX], tok[PATH_MAX], big_tok[PATH_MAX], ref[PATH_MAX];
    snprintf(ckpt, sizeof ckpt, "%s", test_model_path("stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", test_model_path("tok512.bin"));
    snprintf(big_tok, sizeof big_tok, "%s", test_model_path("tokenizer.bin"));
    snprintf(ref, sizeof ref, "%s", test_model_path("stories260K-llamacpp.gguf"));
    size_t size = 0, tok_size = 0;
    uint8_t * ck = test_read_file(ckpt, &size);
    uint8_t * tk = test_read_file(tok, &tok_size);
    if (!ck || !tk || !exists(ref)) {
        free(ck);
        free(tk);
        return test_skip("the shared stories260K files are not there");
    }
    snprintf(dir, sizeof dir, "test-convert-XXXXXX");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a folder\n");
        return 1;
    }
    loom_log_set(on_log, NULL);
    test_stories(ckpt, tok, ref);
    test_truncated(ck, size, tok);
    test_bad_vocab_size(ck, size, tok);
    test_trailing(ck, size, tok);
    if (exists(big_tok)) test_tokenizer_trailing(ckpt, big_tok);
    else printf("skipped the tokenizer.bin case: not there\n");
    test_garbage_tokenizer(ckpt);
    test_output_is_input(ck, size, tk, tok_size);
    loom_log_set(NULL, NULL);
    for (int i = 0; i < n_paths; i++) unlink(paths[i]);
    if (rmdir(dir) != 0) fprintf(stderr, "note: %s not empty\n", dir);
    free(ck);
    free(tk);
    return test_finish("test-convert");
}
