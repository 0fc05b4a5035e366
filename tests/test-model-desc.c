/* test-model-desc.c -- the model's label (loom_model_desc: "llama 293K Q4_K - Medium", the model column
 * of `loom bench` and the "model:" line of `loom run`) names the file's general.file_type as the field
 * does: the fixtures llama-quantize wrote ($LOOM_MODELS/quant) get the type llama-bench shows for
 * them (its column reads "llama ?B Q4_K - Medium", the size aside); a file without the key, or with a
 * value that is no llama_ftype Loom knows, is labelled by the type of blk.0.attn_q.weight; a file
 * `loom quantize` wrote gets its preset's label. */
#define _GNU_SOURCE /* memmem */
#include "loom-convert.h"
#include "loom-llama.h"
#include "test-util.h"

#include <string.h>
#include <unistd.h>

static char g_dir[64];

/* Loads 'path' on the CPU and checks its label against 'want'. */
static void expect_desc(const char * what, const char * path, const char * want) {
    struct loom_model * m = NULL;
    const enum loom_status st = loom_model_load(path, loom_model_default_params(), &m);
    CHECK(st == LOOM_OK && m, "%s: load %s: %s", what, path, test_last_error);
    if (!m) return;
    CHECK(!strcmp(loom_model_desc(m), want), "%s: label '%s', want '%s'", what, loom_model_desc(m), want);
    printf("%-40s %s\n", what, loom_model_desc(m));
    loom_model_free(m);
}

/* Writes 'data' to g_dir/'name'; returns the path (a static buffer). */
static const char * write_copy(const char * name, const uint8_t * data, size_t size) { return test_write_file(g_dir, name, data, size); }

int main(void) {
    loom_log_set(test_capture_log, NULL);
    char q4km[4096];
    snprintf(q4km, sizeof q4km, "%s", test_model_path("quant/kq/kq-Q4_K_M.gguf"));
    if (access(q4km, R_OK) != 0) return test_skip("quant/kq/kq-Q4_K_M.gguf not in LOOM_MODELS");
    snprintf(g_dir, sizeof g_dir, "/tmp/loom-model-desc-XXXXXX");
    if (!mkdtemp(g_dir)) return test_skip("cannot create a temporary folder");

    /* llama-bench's labels of the fixtures (general.file_type in parentheses) */
    static const struct {
        const char * file, * want;
    } fixtures[] = {
        {"quant/stories260K-Q4_K_M.gguf", "llama 293K Q4_K - Medium"}, /* 15 */
        {"quant/stories260K-Q3_K_M.gguf", "llama 293K Q3_K - Medium"}, /* 12 */
        {"quant/stories260K-Q2_K.gguf", "llama 293K Q2_K - Medium"},   /* 10 */
        {"quant/stories260K-Q5_K_M.gguf", "llama 293K Q5_K - Medium"}, /* 17 */
        {"quant/stories260K-Q6_K.gguf", "llama 293K Q6_K"},            /* 18 */
        {"quant/stories260K-Q4_0.gguf", "llama 293K Q4_0"},            /* 2 */
        {"quant/stories260K-F16.gguf", "llama 293K F16"},              /* 1 */
        {"quant/stories260K-BF16.gguf", "llama 293K BF16"},            /* 32 */
        {"quant/stories260K-F32.gguf", "llama 293K F32"},              /* no key: the weights' type */
        {"quant/kq/kq-F32.gguf", "llama 2M all F32"},                  /* 0 */
        {"quant/kq/kq-Q3_K_S.gguf", "llama 2M Q3_K - Small"},          /* 11 */
        {"quant/kq/kq-Q3_K_L.gguf", "llama 2M Q3_K - Large"},          /* 13 */
        {"quant/kq/kq-Q4_K_S.gguf", "llama 2M Q4_K - Small"},          /* 14 */
        {"quant/kq/kq-Q5_K_S.gguf", "llama 2M Q5_K - Small"},          /* 16 */
        {"quant/kq/kq-Q5_1.gguf", "llama 2M Q5_1"},                    /* 9 */
        {"quant/kq/kq-Q8_0.gguf", "llama 2M Q8_0"},                    /* 7 */
        {"quant/kq/kq-IQ4_NL.gguf", "llama 2M IQ4_NL - 4.5 bpw"},      /* 25 */
        {"quant/kq/kq-IQ4_XS.gguf", "llama 2M IQ4_XS - 4.25 bpw"},     /* 30 */
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        const char * path = test_model_path(fixtures[i].file);
        if (access(path, R_OK) != 0) {
            printf("skipped %s: not in LOOM_MODELS\n", fixtures[i].file);
            continue;
        }
        expect_desc(fixtures[i].file, path, fixtures[i].want);
    }

    /* the kq Q4_K_M fixture (rows of 256: blk.0.attn_q is Q4_K) with its general.file_type (a u32
     * after the key's name) changed: 21 is Q2_K_S, labelled by the key whatever the weights are; 99
     * is no llama_ftype and an absent key (its name changed) none: both labelled by the weights,
     * blk.0.attn_q's type */
    size_t size = 0;
    uint8_t * orig = test_read_file(q4km, &size);
    LOOM_ASSERT(orig);
    static const char key[] = "general.file_type";
    uint8_t * at = memmem(orig, size, key, sizeof key - 1);
    CHECK(at != NULL, "no general.file_type in %s", q4km);
    if (at) {
        const size_t value_at = (size_t)(at - orig) + sizeof key - 1 + 4; /* past the name and the type (u32) */
        uint32_t type = 0, v = 0;
        memcpy(&type, at + sizeof key - 1, 4);
        memcpy(&v, orig + value_at, 4);
        CHECK(type == 4 && v == 15, "the fixture's general.file_type: type %u, value %u", type, v);
        static const struct {
            uint32_t value;
            const char * want;
        } values[] = {{21, "llama 2M Q2_K - Small"}, {99, "llama 2M Q4_K"}, {0x80000000u, "llama 2M Q4_K"}};
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            memcpy(orig + value_at, &values[i].value, 4);
            char what[64];
            snprintf(what, sizeof what, "general.file_type = %u", values[i].value);
            expect_desc(what, write_copy("ft.gguf", orig, size), values[i].want);
        }
        memcpy(orig + value_at, &v, 4);
        at[sizeof key - 2] = 'X'; /* general.file_typX */
        expect_desc("no general.file_type", write_copy("ft.gguf", orig, size), "llama 2M Q4_K");
    }
    free(orig);

    /* `loom quantize` writes its preset's llama_ftype (Q5_K_S: 16) */
    char f32[4096], out[128];
    snprintf(f32, sizeof f32, "%s", test_model_path("quant/stories260K-F32.gguf"));
    snprintf(out, sizeof out, "%s/q5ks.gguf", g_dir);
    if (access(f32, R_OK) == 0) {
        CHECK(loom_model_quantize(f32, out, "Q5_K_S", NULL) == LOOM_OK, "quantize to Q5_K_S: %s", test_last_error);
        expect_desc("loom quantize Q5_K_S", out, "llama 293K Q5_K - Small");
    }
    unlink(out);
    char ft[128];
    snprintf(ft, sizeof ft, "%s/ft.gguf", g_dir);
    unlink(ft);
    rmdir(g_dir);
    return test_finish("test-model-desc");
}
