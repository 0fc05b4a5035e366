/* test-quant-model.c -- hostile quantized files for `loom run` (LOOM_BIN, set by CTest): copies of
 * a fixture ($LOOM_MODELS/quant/kq) with a NaN or infinite block scale, a row length that is not
 * a multiple of the block, the file cut inside a block, or a tensor of a type Loom does not compute
 * with yet. Each must end with exit status 1 and one line on stderr that names the problem, with
 * the model mapped and read; the untouched copy must run. */
#include "loom-gguf.h"
#include "test-util.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[256];

/* Writes 'data' to g_dir/'name'; returns the path (a static buffer). */
static const char * write_copy(const char * name, const uint8_t * data, size_t size) { return test_write_file(g_dir, name, data, size); }

/* Runs `loom run` on 'path' with 'flags'; returns the exit status and the stderr text in 'err'. */
static int run(const char * bin, const char * path, const char * flags, char * err, size_t err_size) {
    char cmd[2048], err_path[300];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", g_dir);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 4 --temp 0 -t 2 %s >/dev/null 2>'%s'", bin, path, flags,
             err_path);
    int rc = system(cmd);
    size_t n = 0;
    uint8_t * e = test_read_file(err_path, &n);
    snprintf(err, err_size, "%.*s", e ? (int)n : 0, e ? (const char *)e : "");
    free(e);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* The file must be refused with one stderr line holding 'want', mapped and read. */
static void expect_refused(const char * bin, const char * what, const char * path, const char * want) {
    static const char * const modes[] = {"", "--no-mmap"};
    for (int m = 0; m < 2; m++) {
        char err[4096];
        int rc = run(bin, path, modes[m], err, sizeof err);
        int lines = 0;
        for (const char * c = err; *c; c++) lines += *c == '\n';
        CHECK(rc == 1 && lines == 1 && strstr(err, want), "%s %s: exit %d, %d lines, want one line with '%s': %s", what, modes[m],
              rc, lines, want, err);
        printf("%-28s %-10s exit %d: %s", what, modes[m], rc, err);
    }
}

/* File offset of tensor 'name's info record fields: ne[0] and the type. */
static void info_fields(const struct loom_gguf * g, const char * name, size_t * ne0_at, size_t * type_at) {
    int64_t i = loom_gguf_find_tensor(g, name);
    LOOM_ASSERT(i >= 0);
    const size_t at = (size_t)loom_gguf_tensor_info_offset(g, i) + 8 + strlen(name); /* past the name */
    const int n_dims = loom_gguf_tensor_n_dims(g, i);
    *ne0_at = at + 4;
    *type_at = at + 4 + 8 * (size_t)n_dims;
}

static size_t data_at(const struct loom_gguf * g, const char * name) {
    return (size_t)(loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, loom_gguf_find_tensor(g, name)));
}

int main(void) {
    const char * bin = getenv("LOOM_BIN");
    if (!bin || !*bin) return test_skip("LOOM_BIN is not set (run through CTest)");
    char src_path[4096];
    snprintf(src_path, sizeof src_path, "%s", test_model_path("quant/kq/kq-Q4_K_M.gguf"));
    size_t size = 0;
    uint8_t * orig = test_read_file(src_path, &size);
    if (!orig) return test_skip("quant/kq/kq-Q4_K_M.gguf not found in $LOOM_MODELS");
    snprintf(g_dir, sizeof g_dir, "/tmp/loom-quant-model-XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    struct loom_gguf * g = NULL;
    CHECK(loom_gguf_open(src_path, &g, NULL, 0) == LOOM_OK, "open %s", src_path);
    if (!g) return test_finish("test-quant-model");
    uint8_t * buf = malloc(size);
    LOOM_ASSERT(buf);

    char err[4096];
    CHECK(run(bin, write_copy("ok.gguf", orig, size), "", err, sizeof err) == 0, "the untouched copy: %s", err);

    /* blk.0.attn_q.weight is q4_K (d, dmin at bytes 0 and 2 of each 144-byte block) */
    const size_t q = data_at(g, "blk.0.attn_q.weight");
    memcpy(buf, orig, size);
    buf[q + 5 * 144 + 0] = 0x00, buf[q + 5 * 144 + 1] = 0x7e; /* d = NaN in block 5 */
    expect_refused(bin, "NaN scale", write_copy("nan.gguf", buf, size), "'blk.0.attn_q.weight' (q4_K): block 5 has a NaN or infinite scale");
    memcpy(buf, orig, size);
    buf[q + 2] = 0x00, buf[q + 3] = 0xfc; /* dmin = -inf in block 0 */
    expect_refused(bin, "infinite minimum", write_copy("inf.gguf", buf, size), "block 0 has a NaN or infinite scale");
    /* output.weight is q6_K: d is the last two bytes of each 210-byte block */
    const size_t o = data_at(g, "output.weight");
    memcpy(buf, orig, size);
    buf[o + 3 * 210 + 208] = 0x00, buf[o + 3 * 210 + 209] = 0x7c;
    expect_refused(bin, "infinite q6_K scale", write_copy("inf6.gguf", buf, size), "'output.weight' (q6_K): block 3");

    /* the file cut inside the last tensor's blocks */
    const size_t last = data_at(g, "blk.1.ffn_up.weight");
    expect_refused(bin, "truncated in a block", write_copy("cut.gguf", orig, last + 1000), "blk.1.ffn_up.weight");

    /* a row length that is not a multiple of the block (256 -> 200) */
    size_t ne0_at, type_at;
    info_fields(g, "blk.0.attn_k.weight", &ne0_at, &type_at);
    memcpy(buf, orig, size);
    const int64_t ne0 = 200;
    memcpy(buf + ne0_at, &ne0, 8);
    expect_refused(bin, "row not whole blocks", write_copy("ne0.gguf", buf, size), "not a multiple of the block length 256");

    /* types Loom does not compute with yet (all smaller per element than q4_K: the data still fits) */
    static const struct { enum loom_type type; const char * name; } later[] = {
        {LOOM_TYPE_IQ2_XXS, "iq2_xxs"}, {LOOM_TYPE_IQ1_S, "iq1_s"}, {LOOM_TYPE_IQ3_XXS, "iq3_xxs"},
        {LOOM_TYPE_TQ1_0, "tq1_0"}, {LOOM_TYPE_TQ2_0, "tq2_0"}, {LOOM_TYPE_IQ2_XS, "iq2_xs"},
    };
    for (size_t k = 0; k < sizeof later / sizeof later[0]; k++) {
        memcpy(buf, orig, size);
        const uint32_t t = (uint32_t)later[k].type;
        memcpy(buf + type_at, &t, 4);
        char want[128];
        snprintf(want, sizeof want, "tensor 'blk.0.attn_k.weight' has type %s", later[k].name);
        expect_refused(bin, later[k].name, write_copy("type.gguf", buf, size), want);
    }
    /* MXFP4 (blocks of 32): on attn_k, whose 256-long rows it divides */
    memcpy(buf, orig, size);
    const uint32_t mx = LOOM_TYPE_MXFP4;
    memcpy(buf + type_at, &mx, 4);
    expect_refused(bin, "mxfp4", write_copy("type.gguf", buf, size), "tensor 'blk.0.attn_k.weight' has type mxfp4");

    loom_gguf_free(g);
    free(buf);
    free(orig);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    return test_finish("test-quant-model");
}
