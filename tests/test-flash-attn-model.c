/* test-flash-attn-model.c -- the fused attention in a model: stories260K generates the same 64
 * greedy tokens with the attention fused (-fa on) and not (-fa off), on the CPU, on a simulated
 * device that has the op, and on one that lacks it (-fa on: the scheduler runs the op on the CPU,
 * reading the device's cache; -fa auto: those layers stay unfused), with caches of every float type. */
#include "loom-llama.h"
#include "loom-sim.h"
#include "test-util.h"

#include <string.h>

enum { N_GEN = 64 };

static char g_fa_line[256];  /* the last "flash attention: ..." info line */
static int g_fa_warnings;    /* warnings that a device cannot run the op */

static void capture(enum loom_log_level level, const char * text, void * user) {
    test_capture_log(level, text, user);
    if (!strncmp(text, "flash attention: ", 17)) {
        if (level == LOOM_LOG_WARN) g_fa_warnings++;
        else snprintf(g_fa_line, sizeof g_fa_line, "%s", text);
    }
}

struct config {
    const char * device;  /* NULL: the CPU alone */
    int n_gpu_layers;
    enum loom_llama_flash_attn fa;
    enum loom_type type_k, type_v;
    const char * expect;  /* the "flash attention: ..." line the context logs */
    int warnings;         /* warnings expected */
};

/* Greedy tokens from BOS; false (reported) when loading or decoding fails. */
static bool generate(const char * path, const struct config * c, int32_t * out) {
    struct loom_model_params mp = loom_model_default_params();
    mp.device = c->device;
    mp.n_gpu_layers = c->device ? c->n_gpu_layers : 0;
    struct loom_model * model = NULL;
    if (loom_model_load(path, mp, &model) != LOOM_OK) {
        CHECK(false, "cannot load %s: %s", path, test_last_error);
        return false;
    }
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    cp.flash_attn = c->fa;
    cp.type_k = c->type_k;
    cp.type_v = c->type_v;
    g_fa_line[0] = 0;
    g_fa_warnings = 0;
    struct loom_llama_context * lctx = NULL;
    bool ok = loom_llama_context_new(model, cp, &lctx) == LOOM_OK;
    CHECK(ok, "context (%s): %s", c->device ? c->device : "CPU", test_last_error);
    if (ok) {
        CHECK(!strcmp(g_fa_line, c->expect), "%s ngl %d fa %d: logged '%s', expected '%s'", c->device ? c->device : "CPU",
              c->n_gpu_layers, (int)c->fa, g_fa_line, c->expect);
        CHECK(g_fa_warnings == c->warnings, "%d warnings, expected %d", g_fa_warnings, c->warnings);
        const int32_t n_vocab = loom_model_hparams(model)->n_vocab;
        int32_t tok = loom_vocab_bos(loom_model_vocab(model));
        for (int i = 0; i < N_GEN && ok; i++) {
            ok = loom_llama_decode(lctx, &tok, 1) == LOOM_OK;
            CHECK(ok, "decode %d failed: %s", i, test_last_error);
            if (!ok) break;
            const float * logits = loom_llama_get_logits(lctx);
            int32_t best = 0;
            for (int32_t v = 1; v < n_vocab; v++) best = logits[v] > logits[best] ? v : best;
            out[i] = tok = best;
        }
    }
    loom_llama_context_free(lctx);
    loom_model_free(model);
    return ok;
}

int main(void) {
    const char * path = test_model_path("stories260K-llamacpp.gguf");
    FILE * f = fopen(path, "rb");
    if (!f) return test_skip("stories260K-llamacpp.gguf not found in $LOOM_MODELS");
    fclose(f);
    loom_log_set(capture, NULL);

    struct loom_sim_params sp = loom_sim_default_params();
    loom_backend_dev_t with = loom_sim_device_new("simfa", &sp);
    sp.unsupported_ops[LOOM_OP_FLASH_ATTN_EXT] = true;
    loom_backend_dev_t without = loom_sim_device_new("simnofa", &sp);
    if (!with || !without || loom_backend_register_device(with) != LOOM_OK || loom_backend_register_device(without) != LOOM_OK) {
        CHECK(false, "cannot register the sim devices");
        return test_finish("test-flash-attn-model");
    }

    const enum loom_type F16 = LOOM_TYPE_F16, F32 = LOOM_TYPE_F32, BF16 = LOOM_TYPE_BF16;
    const enum loom_llama_flash_attn ON = LOOM_LLAMA_FLASH_ATTN_ON, OFF = LOOM_LLAMA_FLASH_ATTN_OFF,
                                     AUTO = LOOM_LLAMA_FLASH_ATTN_AUTO;
    const struct config base = {NULL, 0, OFF, F16, F16, "flash attention: off (0 of 5 layers)", 0};
    const struct config configs[] = {
        {NULL, 0, ON, F16, F16, "flash attention: on (5 of 5 layers)", 0},
        {NULL, 0, AUTO, F16, F16, "flash attention: on (5 of 5 layers)", 0},
        {NULL, 0, ON, F32, BF16, "flash attention: on (5 of 5 layers)", 0},
        {NULL, 0, ON, BF16, F32, "flash attention: on (5 of 5 layers)", 0},
        {"simfa", 99, AUTO, F16, F16, "flash attention: on (5 of 5 layers)", 0},
        {"simfa", 3, ON, F16, BF16, "flash attention: on (5 of 5 layers)", 0},
        {"simnofa", 99, AUTO, F16, F16, "flash attention: off (0 of 5 layers)", 0},
        {"simnofa", 3, AUTO, F16, F16, "flash attention: partly on (2 of 5 layers)", 0},
        {"simnofa", 99, ON, F16, F16, "flash attention: on (5 of 5 layers)", 1},
        {"simnofa", 2, ON, F32, F16, "flash attention: on (5 of 5 layers)", 1},
    };
    int32_t ref[N_GEN], got[N_GEN];
    if (generate(path, &base, ref)) {
        for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
            const struct config * c = &configs[i];
            memset(got, 0xff, sizeof got);
            if (!generate(path, c, got)) continue;
            int first = -1;
            for (int k = 0; k < N_GEN && first < 0; k++) first = got[k] != ref[k] ? k : -1;
            CHECK(first < 0, "%s ngl %d fa %d K %s V %s: token %d is %d, unfused on the CPU %d", c->device ? c->device : "CPU",
                  c->n_gpu_layers, (int)c->fa, loom_type_name(c->type_k), loom_type_name(c->type_v), first,
                  first >= 0 ? got[first] : 0, first >= 0 ? ref[first] : 0);
        }
    }
    loom_backend_unregister_device(without);
    loom_backend_unregister_device(with);
    loom_sim_device_free(without);
    loom_sim_device_free(with);
    loom_log_set(NULL, NULL);
    return test_finish("test-flash-attn-model");
}
