/* test-model-file.c -- the two-phase load on a converted stories260K: a model file opened once gives
 * the hyper-parameters and the vocabulary before any weight is read; every model loaded from it
 * shares that one vocabulary and outlives the file handle; two loads from one file and a one-step
 * loom_model_load compute the same logits; bad arguments and missing files are errors. */
#include "test-util.h"
#include "loom-convert.h"
#include "loom-llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Logits of tokens {1, 400, 35} (the last position) into 'out' [512]; false when something fails. */
static bool logits_of(struct loom_model * m, float * out) {
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    struct loom_llama_context * lctx = NULL;
    if (loom_llama_context_new(m, cp, &lctx) != LOOM_OK) return false;
    const int32_t tokens[3] = {1, 400, 35};
    bool ok = loom_llama_decode(lctx, tokens, 3) == LOOM_OK && loom_llama_get_logits(lctx);
    if (ok) memcpy(out, loom_llama_get_logits(lctx), 512 * sizeof *out);
    loom_llama_context_free(lctx);
    return ok;
}

int main(void) {
    char path[256], bin[1024], tok[1024]; /* test_model_path returns a static buffer */
    snprintf(path, sizeof path, "/tmp/loom-test-model-file-%d.gguf", (int)getpid());
    snprintf(bin, sizeof bin, "%s", test_model_path("stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", test_model_path("tok512.bin"));
    if (access(bin, R_OK) != 0 || access(tok, R_OK) != 0) return test_skip("stories260K.bin / tok512.bin not in LOOM_MODELS");
    loom_log_set(test_capture_log, NULL);
    CHECK(loom_convert_llama2c(bin, tok, path) == LOOM_OK, "convert: %s", test_last_error);

    struct loom_model_file * f = NULL;
    CHECK(loom_model_file_open(path, &f) == LOOM_OK && f, "open: %s", test_last_error);
    if (!f) {
        unlink(path);
        return test_finish("test-model-file");
    }
    const struct loom_hparams * hp = loom_model_file_hparams(f);
    const struct loom_vocab * v = loom_model_file_vocab(f);
    CHECK(hp->n_vocab == 512 && hp->n_layer == 5 && hp->n_embd == 64, "hyper-parameters before the weights: %d %d %d", hp->n_vocab,
          hp->n_layer, hp->n_embd);
    CHECK(v && loom_vocab_n_tokens(v) == 512, "vocabulary before the weights");
    struct loom_model * a = NULL, * b = NULL, * c = NULL;
    CHECK(loom_model_load_file(f, loom_model_default_params(), &a) == LOOM_OK && a, "load 1: %s", test_last_error);
    CHECK(loom_model_load_file(f, loom_model_default_params(), &b) == LOOM_OK && b, "load 2: %s", test_last_error);
    CHECK(a && b && loom_model_vocab(a) == v && loom_model_vocab(b) == v, "the models share the file's vocabulary");
    CHECK(a && loom_model_hparams(a)->n_vocab == 512, "the model's hyper-parameters");
    loom_model_file_free(f); /* the models keep the vocabulary */
    CHECK(loom_model_load(path, loom_model_default_params(), &c) == LOOM_OK && c, "load in one step: %s", test_last_error);
    float la[512], lb[512], lc[512];
    const bool ok = a && b && c && logits_of(a, la) && logits_of(b, lb) && logits_of(c, lc);
    CHECK(ok, "decode: %s", test_last_error);
    if (ok) {
        int finite = 0;
        for (int i = 0; i < 512; i++) finite += isfinite(la[i]);
        CHECK(finite == 512, "finite logits");
        CHECK(!memcmp(la, lb, sizeof la) && !memcmp(la, lc, sizeof la), "every load computes the same logits");
        int32_t ids[8];
        CHECK(loom_tokenize(loom_model_vocab(a), "Once", 4, true, false, ids, 8) > 1, "the vocabulary works after the file is freed");
    }
    loom_model_free(a);
    loom_model_free(b);
    loom_model_free(c);
    unlink(path);

    struct loom_model_file * none = (struct loom_model_file *)1;
    CHECK(loom_model_file_open(path, &none) == LOOM_ERR_IO && none == NULL, "a missing file: LOOM_ERR_IO, no handle");
    struct loom_model * m = (struct loom_model *)1;
    CHECK(loom_model_load_file(NULL, loom_model_default_params(), &m) == LOOM_ERR_INVALID_ARG && m == NULL, "no file: invalid argument");
    loom_model_file_free(NULL);
    loom_log_set(NULL, NULL);
    return test_finish("test-model-file");
}
