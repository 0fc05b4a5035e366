/* test-gguf-model.c -- reads the shared stories260K-llamacpp.gguf (written by the field's reference
 * converter) and checks facts known independently: the model card in ../shared/models/README.md,
 * and the weights themselves against the llama2.c checkpoint stories260K.bin. */
#include "test-util.h"

#include "loom-gguf.h"

#include <string.h>

/* Reads 'n' bytes at byte 'off' of 'path'; false on any failure. */
static bool read_at(const char * path, uint64_t off, void * dst, size_t n) {
    FILE * f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(dst, 1, n, f) == n;
    fclose(f);
    return ok;
}

static void check_metadata(const struct loom_gguf * g) {
    CHECK(loom_gguf_version(g) == 3, "version %u", loom_gguf_version(g));
    CHECK(loom_gguf_find_key(g, "general.alignment") < 0 && loom_gguf_alignment(g) == 32, "default alignment");
    CHECK(!strcmp(loom_gguf_get_str(g, "general.architecture", "", NULL), "llama"), "architecture");
    CHECK(loom_gguf_get_u32(g, "llama.block_count", 0) == 5, "block_count");
    CHECK(loom_gguf_get_u32(g, "llama.embedding_length", 0) == 64, "embedding_length");
    CHECK(loom_gguf_get_u32(g, "llama.feed_forward_length", 0) == 172, "feed_forward_length");
    CHECK(loom_gguf_get_u32(g, "llama.attention.head_count", 0) == 8, "head_count");
    CHECK(loom_gguf_get_u32(g, "llama.attention.head_count_kv", 0) == 4, "head_count_kv");
    CHECK(loom_gguf_get_u32(g, "llama.context_length", 0) == 128, "context_length (the converter's default)");
    CHECK(loom_gguf_get_i64(g, "llama.block_count", 0) == 5, "u32 read as i64");
    float eps = loom_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", 0);
    CHECK(eps == 1e-5f, "rms epsilon %g", eps);
    CHECK(loom_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", 99) == 1, "bos");
    CHECK(loom_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", 99) == 2, "eos");
    CHECK(!strcmp(loom_gguf_get_str(g, "tokenizer.ggml.model", "", NULL), "llama"), "tokenizer model");

    char err[256];
    CHECK(loom_gguf_expect_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_TYPE_STRING, 512, err, sizeof err) == LOOM_OK, "%s", err);
    CHECK(loom_gguf_expect_arr(g, "tokenizer.ggml.scores", LOOM_GGUF_TYPE_FLOAT32, 512, err, sizeof err) == LOOM_OK, "%s", err);
    CHECK(loom_gguf_expect_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_TYPE_INT32, 512, err, sizeof err) == LOOM_OK, "%s", err);
    const char * want[] = {"<unk>", "<s>", "</s>", "<0x00>", "<0x01>"};
    for (int i = 0; i < 5; i++) {
        const char * tok = loom_gguf_get_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, NULL);
        CHECK(tok && !strcmp(tok, want[i]), "token %d is '%s'", i, tok ? tok : "(null)");
    }
    const char * last_byte = loom_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 258, NULL);
    CHECK(last_byte && !strcmp(last_byte, "<0xFF>"), "token 258 is the byte 0xFF");
    const int32_t * types = loom_gguf_get_arr_data(g, "tokenizer.ggml.token_type");
    const float * scores = loom_gguf_get_arr_data(g, "tokenizer.ggml.scores");
    if (types && scores) {
        CHECK(types[0] == 2 && types[1] == 3 && types[2] == 3, "special token types");
        int bytes = 0, normal = 0, zero_scores = 0;
        for (int i = 3; i < 512; i++) {
            bytes += i <= 258 && types[i] == 6;
            normal += i > 258 && types[i] == 1;
        }
        for (int i = 0; i <= 258; i++) zero_scores += scores[i] == 0.0f;
        CHECK(bytes == 256 && normal == 512 - 259, "byte and normal token types (%d, %d)", bytes, normal);
        CHECK(zero_scores == 259, "special and byte tokens score 0");
    }
}

static void check_tensors(const struct loom_gguf * g, const char * gguf_path) {
    CHECK(loom_gguf_n_tensors(g) == 3 + 5 * 9, "48 tensors, got %lld", (long long)loom_gguf_n_tensors(g));
    int64_t e = loom_gguf_find_tensor(g, "token_embd.weight");
    CHECK(e >= 0, "token_embd.weight");
    if (e < 0) return;
    const int64_t * ne = loom_gguf_tensor_ne(g, e);
    CHECK(loom_gguf_tensor_type(g, e) == LOOM_TYPE_F32 && loom_gguf_tensor_n_dims(g, e) == 2 && ne[0] == 64 && ne[1] == 512,
          "token_embd.weight is f32 [64, 512]");
    CHECK(loom_gguf_tensor_size(g, e) == 64 * 512 * 4, "token_embd.weight bytes");
    int64_t o = loom_gguf_find_tensor(g, "output.weight");
    CHECK(o >= 0 && loom_gguf_tensor_size(g, o) == 64 * 512 * 4, "output.weight present (tied matrix stored twice)");
    int64_t ffn = loom_gguf_find_tensor(g, "blk.4.ffn_down.weight");
    CHECK(ffn >= 0 && loom_gguf_tensor_ne(g, ffn)[0] == 172 && loom_gguf_tensor_ne(g, ffn)[1] == 64, "ffn_down [172, 64]");
    CHECK(loom_gguf_find_tensor(g, "blk.5.attn_q.weight") < 0, "no sixth layer");

    /* every tensor f32, sizes sum (with padding) to the data section */
    uint64_t total = 0;
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        CHECK(loom_gguf_tensor_type(g, i) == LOOM_TYPE_F32, "%s f32", loom_gguf_tensor_name(g, i));
        CHECK(loom_gguf_tensor_size(g, i) == (uint64_t)loom_gguf_tensor_nelements(g, i) * 4, "%s size", loom_gguf_tensor_name(g, i));
        total += (loom_gguf_tensor_size(g, i) + 31) / 32 * 32;
    }
    CHECK(loom_gguf_data_offset(g) + total == loom_gguf_file_size(g), "data section covers the file");

    /* the embedding matrix holds the checkpoint's: llama2.c stores it right after its 7-int32 header */
    const char * bin = test_model_path("stories260K.bin");
    static float a[64 * 512], b[64 * 512], c[64 * 512];
    bool ok = read_at(bin, 28, a, sizeof a);
    CHECK(ok, "read %s", bin);
    if (!ok) return;
    CHECK(read_at(gguf_path, loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, e), b, sizeof b), "read embedding");
    CHECK(!memcmp(a, b, sizeof a), "token_embd.weight equals the checkpoint's embedding");
    if (o >= 0) {
        CHECK(read_at(gguf_path, loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, o), c, sizeof c), "read output");
        CHECK(!memcmp(a, c, sizeof a), "output.weight equals the tied embedding");
    }
    /* the first layer's attention RMS weights follow the embedding in the checkpoint */
    int64_t n0 = loom_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    if (n0 >= 0) {
        float x[64], y[64];
        CHECK(read_at(bin, 28 + sizeof a, x, sizeof x) &&
                  read_at(gguf_path, loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, n0), y, sizeof y) &&
                  !memcmp(x, y, sizeof x),
              "blk.0.attn_norm.weight equals the checkpoint's");
    }
}

int main(void) {
    const char * path = test_model_path("stories260K-llamacpp.gguf");
    FILE * f = fopen(path, "rb");
    if (!f) return test_skip("stories260K-llamacpp.gguf not found in $LOOM_MODELS");
    fclose(f);
    static char gguf_path[4096];
    snprintf(gguf_path, sizeof gguf_path, "%s", path);
    struct loom_gguf * g = NULL;
    char err[512];
    enum loom_status st = loom_gguf_open(gguf_path, &g, err, sizeof err);
    CHECK(st == LOOM_OK, "open %s: %s", gguf_path, err);
    if (!g) return test_finish("test-gguf-model");
    CHECK(loom_gguf_file_size(g) == 1185376, "file size");
    check_metadata(g);
    check_tensors(g, gguf_path);
    loom_gguf_free(g);
    return test_finish("test-gguf-model");
}
