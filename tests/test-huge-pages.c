/* test-huge-pages.c -- the huge-page advice for weights and the KV cache: CPU buffers of 2 MiB or
 * more start 2 MiB-aligned, the advice covers exactly their aligned 2 MiB spans (or nothing where
 * the kernel has no transparent huge pages), and a model loaded through each advised path (the
 * mapped file, weights read into buffers) holds the same tensors, so its logits are bit-identical.
 * Passes whether THP is on, madvise-only or off: the advice is a hint. */
#include "loom-convert.h"
#include "loom-cpu.h"
#include "loom-llama.h"
#include "test-util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* The logits [n_vocab] of the last of a few prompt tokens, with a KV cache of 2048 cells (4 MiB
 * here, so it is advised too); NULL on failure. */
static float * logits_of(const char * path, bool use_mmap, int32_t * n_vocab) {
    static const int32_t tokens[] = {1, 403, 407, 261, 378, 64, 200, 3000, 17};
    return test_model_logits(path, use_mmap, 2048, 2, tokens, (int32_t)(sizeof tokens / sizeof tokens[0]), n_vocab);
}

int main(void) {
    loom_log_set(test_capture_log, NULL);

    /* ranges without a whole aligned 2 MiB are left alone */
    CHECK(loom_cpu_advise_huge_pages(NULL, 8 * MIB) == 0, "NULL advised");
    uint8_t * small = malloc(MIB);
    CHECK(small && loom_cpu_advise_huge_pages(small, MIB) == 0, "1 MiB range advised");
    free(small);

    /* a 6 MiB + 1 byte buffer: 2 MiB-aligned, and the advice takes its aligned 6 MiB or nothing */
    loom_backend_buffer_t buf = loom_backend_buft_alloc_buffer(loom_backend_cpu_buffer_type(), 6 * MIB + 1);
    CHECK(buf != NULL, "cannot allocate 6 MiB: %s", test_last_error);
    if (buf) {
        uint8_t * base = loom_backend_buffer_get_base(buf);
        CHECK((uintptr_t)base % (2 * MIB) == 0, "a 6 MiB CPU buffer at %p is not 2 MiB-aligned", (void *)base);
        const size_t advised = loom_cpu_advise_huge_pages(base, loom_backend_buffer_get_size(buf));
        CHECK(advised == 0 || advised == 6 * MIB, "advised %zu bytes of a 6 MiB + 1 buffer", advised);
        CHECK(loom_cpu_advise_huge_pages(base + 1, 6 * MIB) == (advised ? 4 * MIB : 0), "an unaligned start is not rounded up");
        for (size_t i = 0; i < 6 * MIB + 1; i += 4093) base[i] = (uint8_t)(i * 7 + 3);
        bool same = true;
        for (size_t i = 0; i < 6 * MIB + 1; i += 4093) same = same && base[i] == (uint8_t)(i * 7 + 3);
        CHECK(same, "advised memory does not keep what was written");
        printf("advice on a 6 MiB buffer: %zu bytes\n", advised);
        loom_backend_buffer_free(buf);
    }

    /* a model of ~15 MiB (token_embd and output.weight 4 MiB each): mapped (the file span advised)
     * and read into an advised buffer give the same logits, bit for bit */
    struct loom_gen_params gp;
    CHECK(loom_gen_preset("260k", &gp) == LOOM_OK, "no 260k preset");
    gp.n_embd = 256, gp.n_ff = 768, gp.n_layer = 2, gp.n_head = 4, gp.n_head_kv = 4, gp.n_vocab = 4096, gp.n_ctx = 2048;
    gp.type = LOOM_TYPE_F32;
    gp.seed = 16;
    char path[256];
    snprintf(path, sizeof path, "/tmp/loom-test-huge-pages-%d.gguf", (int)getpid());
    CHECK(loom_gen_model(&gp, path) == LOOM_OK, "gen-model: %s", test_last_error);
    int32_t n_a = 0, n_b = 0;
    float * mapped = logits_of(path, true, &n_a);
    float * read = logits_of(path, false, &n_b);
    CHECK(mapped && read && n_a == 4096 && n_b == n_a, "the model does not run: %s", test_last_error);
    if (mapped && read && n_a == n_b) {
        CHECK(memcmp(mapped, read, (size_t)n_a * sizeof *mapped) == 0, "mapped and read weights give different logits");
        bool finite = true;
        for (int32_t i = 0; i < n_a; i++) finite = finite && mapped[i] == mapped[i] && mapped[i] - mapped[i] == 0.0f;
        CHECK(finite, "non-finite logits");
    }
    free(mapped);
    free(read);
    unlink(path);
    return test_finish("test-huge-pages");
}
