/* test-model-rewrite.c -- stories260K rewritten with the GGUF writer: tensors at addresses not
 * aligned for their type ('general.alignment' 1, 2 or 4) give the original's logits, mapped or
 * read; a 3-D tensor where a matrix belongs is named with all its dimensions; Llama 3's
 * 'rope_freqs.weight' belongs to the model. */
#include "loom-gguf.h"
#include "loom-llama.h"
#include "test-util.h"

#include <string.h>
#include <unistd.h>

/* Bytes a kernel needs a tensor of 'type' aligned to: its elements' (or blocks' scales') width. */
static uint64_t needed_alignment(enum loom_type type) { return type == LOOM_TYPE_F32 ? 4 : 2; }

/* How write_copy changes the model. */
struct rewrite {
    uint32_t alignment;
    size_t pad;               /* bytes of a padding string in the metadata (moves the data section) */
    bool attn_q_3d;           /* blk.0.attn_q.weight [64, 64] stored as [64, 32, 2] */
    int64_t rope_freqs;       /* > 0: add rope_freqs.weight [rope_freqs] of ones */
};

/* Copies the GGUF at 'src' to 'dst' changed as 'r' says; the data section's offset goes to
 * '*data_offset'. Returns the number of tensors whose file offset is not aligned for their type,
 * or -1 on failure. */
static int write_copy(const char * src, const char * dst, const struct rewrite * r, uint64_t * data_offset) {
    const uint32_t alignment = r->alignment;
    const size_t pad = r->pad;
    struct loom_gguf * g = NULL;
    void * file = NULL;
    size_t size = 0;
    if (loom_gguf_open(src, &g, NULL, 0) != LOOM_OK || loom_read_file(src, (size_t)1 << 30, &file, &size) != LOOM_OK) {
        loom_gguf_free(g);
        return -1;
    }
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    enum loom_status st = w ? LOOM_OK : LOOM_ERR_OOM;
    for (int64_t i = 0; st == LOOM_OK && i < loom_gguf_n_kv(g); i++) st = loom_gguf_writer_copy_kv(w, g, i);
    char padding[64] = {0};
    memset(padding, 'x', pad < sizeof padding - 1 ? pad : sizeof padding - 1);
    if (st == LOOM_OK) st = loom_gguf_writer_set_str(w, "test.padding", padding);
    if (st == LOOM_OK) st = loom_gguf_writer_set_alignment(w, alignment);
    const uint64_t data = loom_gguf_data_offset(g);
    for (int64_t i = 0; st == LOOM_OK && i < loom_gguf_n_tensors(g); i++) {
        const char * name = loom_gguf_tensor_name(g, i);
        int n_dims = loom_gguf_tensor_n_dims(g, i);
        int64_t ne[4];
        memcpy(ne, loom_gguf_tensor_ne(g, i), sizeof ne);
        if (r->attn_q_3d && !strcmp(name, "blk.0.attn_q.weight")) n_dims = 3, ne[1] /= 2, ne[2] = 2;
        st = loom_gguf_writer_add_tensor(w, name, loom_gguf_tensor_type(g, i), n_dims, ne, (const uint8_t *)file + data + loom_gguf_tensor_offset(g, i));
    }
    float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    if (st == LOOM_OK && r->rope_freqs > 0 && r->rope_freqs <= 64) {
        st = loom_gguf_writer_add_tensor(w, "rope_freqs.weight", LOOM_TYPE_F32, 1, &r->rope_freqs, ones);
    }
    if (st == LOOM_OK) st = loom_gguf_writer_write_file(w, dst, NULL, 0);
    loom_gguf_writer_free(w);
    loom_gguf_free(g);
    free(file);
    if (st != LOOM_OK) return -1;
    int odd = 0;
    if (loom_gguf_open(dst, &g, NULL, 0) != LOOM_OK) return -1;
    CHECK(loom_gguf_alignment(g) == alignment, "alignment %u written as %u", alignment, loom_gguf_alignment(g));
    *data_offset = loom_gguf_data_offset(g);
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        odd += (loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i)) % needed_alignment(loom_gguf_tensor_type(g, i)) != 0;
    }
    loom_gguf_free(g);
    return odd;
}

/* The logits [n_vocab] of the last of a few prompt tokens, from the model at 'path'. */
static float * logits_of(const char * path, bool use_mmap, int32_t * n_vocab) {
    static const int32_t tokens[] = {1, 403, 407, 261, 378, 64, 200};
    return test_model_logits(path, use_mmap, 16, 1, tokens, (int32_t)(sizeof tokens / sizeof tokens[0]), n_vocab);
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    const char * src = test_model_path("quant/stories260K-F16.gguf"); /* F16 matrices, F32 norms */
    if (access(src, R_OK) != 0) return test_skip("no quant/stories260K-F16.gguf in the shared models");
    int32_t n_vocab = 0, n2 = 0;
    float * ref = logits_of(src, false, &n_vocab);
    CHECK(ref != NULL, "the original model does not run: %s", test_last_error);
    if (!ref) return test_finish("test-model-rewrite");
    char dst[256];
    snprintf(dst, sizeof dst, "/tmp/loom-test-model-rewrite-%d.gguf", (int)getpid());
    uint64_t data_offset = 0;

    /* a 3-D tensor: the message shows its three dimensions */
    struct rewrite r3 = {.alignment = 32, .attn_q_3d = true};
    CHECK(write_copy(src, dst, &r3, &data_offset) >= 0, "cannot write the 3-D copy: %s", test_last_error);
    float * got = logits_of(dst, true, &n2);
    CHECK(!got && strstr(test_last_error, "tensor 'blk.0.attn_q.weight' has shape [64, 32, 2], expected [64, 64]"),
          "3-D tensor: %s", got ? "loaded" : test_last_error);
    free(got);

    /* rope_freqs.weight (all ones: the same rotation) is part of a llama model */
    struct rewrite rf = {.alignment = 32, .rope_freqs = 4};
    CHECK(write_copy(src, dst, &rf, &data_offset) >= 0, "cannot write the rope_freqs copy: %s", test_last_error);
    got = logits_of(dst, true, &n2);
    CHECK(got && !memcmp(got, ref, (size_t)n_vocab * sizeof *ref), "rope_freqs.weight of ones: %s",
          got ? "other logits" : test_last_error);
    free(got);

    const uint32_t alignments[] = {1, 2, 4};
    for (size_t a = 0; a < 3; a++) {
        /* the padding that puts the data section at 1 (mod 4) for alignment 1 (every tensor at an
         * odd address), at 2 (mod 4) for alignment 2 (the F32 ones misaligned) */
        int odd = 0;
        for (size_t pad = 0; pad < 8; pad++) {
            const struct rewrite r = {.alignment = alignments[a], .pad = pad};
            odd = write_copy(src, dst, &r, &data_offset);
            if (odd < 0 || data_offset % 4 == alignments[a] % 4) break;
        }
        CHECK(odd >= 0, "cannot write the copy with alignment %u: %s", alignments[a], test_last_error);
        CHECK(alignments[a] == 4 || odd > 0, "no tensor is misaligned in the alignment-%u copy", alignments[a]);
        printf("alignment %u: data section at byte %llu, %d tensors misaligned for their type\n", alignments[a],
               (unsigned long long)data_offset, odd);
        for (int mm = 0; mm < 2 && odd >= 0; mm++) {
            got = logits_of(dst, mm == 1, &n2);
            CHECK(got != NULL, "alignment %u, %s: the model does not run: %s", alignments[a], mm ? "mmap" : "read", test_last_error);
            if (got) {
                CHECK(n2 == n_vocab && !memcmp(got, ref, (size_t)n_vocab * sizeof *ref), "alignment %u, %s: logits differ from the original's",
                      alignments[a], mm ? "mmap" : "read");
            }
            free(got);
        }
        unlink(dst);
    }
    free(ref);
    return test_finish("test-model-rewrite");
}
