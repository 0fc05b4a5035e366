/* test-llama-context.c -- the runner's context API on a converted stories260K: no logits before
 * the first decode, finite logits of the vocabulary's size after it, none past the last batch. */
#include "test-util.h"
#include "loom-llama.h"
#include "loom-convert.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    char model_path[256];
    snprintf(model_path, sizeof model_path, "/tmp/loom-test-context-%d.gguf", (int)getpid());
    char bin[1024], tok[1024]; /* test_model_path returns a static buffer */
    snprintf(bin, sizeof bin, "%s", test_model_path("stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", test_model_path("tok512.bin"));
    if (access(bin, R_OK) != 0 || access(tok, R_OK) != 0) return test_skip("stories260K.bin / tok512.bin not in LOOM_MODELS");
    loom_log_set(test_capture_log, NULL);
    CHECK(loom_convert_llama2c(bin, tok, model_path) == LOOM_OK, "convert: %s", test_last_error);
    struct loom_model * model = NULL;
    CHECK(loom_model_load(model_path, loom_model_default_params(), &model) == LOOM_OK, "load: %s", test_last_error);
    unlink(model_path);
    if (!model) return test_finish("test-llama-context");
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    struct loom_llama_context * lctx = NULL;
    CHECK(loom_llama_context_new(model, cp, &lctx) == LOOM_OK, "context: %s", test_last_error);
    if (lctx) {
        CHECK(loom_llama_get_logits(lctx) == NULL, "logits before the first decode");
        CHECK(loom_llama_get_logits_ith(lctx, 0) == NULL, "logits of row 0 before the first decode");
        const int32_t tokens[3] = {1, 400, 35};
        CHECK(loom_llama_decode(lctx, tokens, 3) == LOOM_OK, "decode: %s", test_last_error);
        const float * l = loom_llama_get_logits(lctx);
        CHECK(l != NULL, "logits after a decode");
        const int32_t n_vocab = 512;
        int bad = 0;
        for (int32_t i = 0; l && i < n_vocab; i++) bad += !isfinite(l[i]);
        CHECK(bad == 0, "%d logits not finite", bad);
        CHECK(loom_llama_get_logits_ith(lctx, 1) == NULL, "only the last position's logits are kept");
        loom_llama_context_free(lctx);
    }
    loom_model_free(model);
    return test_finish("test-llama-context");
}
