/* make-ref-rows.c -- writes tests/data/quant-ref-rows.dat: for each quantized type, two rows of F32
 * weights and the bytes the reference engine's quantizer made of them, taken from the fixtures it
 * wrote (../shared/models/quant: llama-quantize, or its Python quantizers for Q4_1). test-quantize
 * checks Loom's quantizers against them without the fixtures. Made once with:
 *   cc -O2 -Iinclude -Isrc -Itests/util bench/quant/make-ref-rows.c tests/util/test-util.c BUILD/libloom.a -lm -fopenmp -o /tmp/make-ref-rows
 *   /tmp/make-ref-rows ../shared/models/quant tests/data/quant-ref-rows.dat
 * Record layout (little-endian): u32 type, u32 ne0, u32 n_rows, n_rows * ne0 F32 values, then the
 * rows' quantized bytes; the file starts with the magic "LQRR" and a u32 record count. */
#include "loom-gguf.h"
#include "loom.h"
#include "test-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pick {
    const char * src, * file, * tensor;
};

int main(int argc, char ** argv) {
    if (argc != 3) return 2;
    static const struct pick picks[] = {
        {"kq/kq-F32.gguf", "kq/kq-Q4_0.gguf", "blk.0.attn_q.weight"},
        {"stories260K-F32.gguf", "stories260K-Q4_1.gguf", "blk.0.attn_q.weight"},
        {"stories260K-F32.gguf", "stories260K-Q4_K_M.gguf", "blk.0.attn_q.weight"}, /* q5_0 */
        {"kq/kq-F32.gguf", "kq/kq-Q5_1.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q8_0.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q2_K.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q3_K_S.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q4_K_S.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q5_K_S.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-Q6_K.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-IQ4_NL.gguf", "blk.0.attn_q.weight"},
        {"kq/kq-F32.gguf", "kq/kq-IQ4_XS.gguf", "blk.0.attn_q.weight"},
    };
    const uint32_t n_rows = 2, n = sizeof picks / sizeof picks[0];
    FILE * out = fopen(argv[2], "wb");
    if (!out) return 1;
    fwrite("LQRR", 1, 4, out);
    fwrite(&n, 4, 1, out);
    for (uint32_t k = 0; k < n; k++) {
        char pa[512], pb[512], err[256];
        snprintf(pa, sizeof pa, "%s/%s", argv[1], picks[k].src);
        snprintf(pb, sizeof pb, "%s/%s", argv[1], picks[k].file);
        struct loom_gguf *a, *b;
        if (loom_gguf_open(pa, &a, err, sizeof err) != LOOM_OK || loom_gguf_open(pb, &b, err, sizeof err) != LOOM_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        size_t na, nb;
        uint8_t * fa = test_read_file(pa, &na), * fb = test_read_file(pb, &nb);
        const int64_t ia = loom_gguf_find_tensor(a, picks[k].tensor), ib = loom_gguf_find_tensor(b, picks[k].tensor);
        const uint32_t type = (uint32_t)loom_gguf_tensor_type(b, ib), ne0 = (uint32_t)loom_gguf_tensor_ne(b, ib)[0];
        fwrite(&type, 4, 1, out);
        fwrite(&ne0, 4, 1, out);
        fwrite(&n_rows, 4, 1, out);
        fwrite(fa + loom_gguf_data_offset(a) + loom_gguf_tensor_offset(a, ia), 4, (size_t)ne0 * n_rows, out);
        fwrite(fb + loom_gguf_data_offset(b) + loom_gguf_tensor_offset(b, ib), 1, loom_row_size((enum loom_type)type, ne0) * n_rows, out);
        printf("%-7s from %s %s\n", loom_type_name((enum loom_type)type), picks[k].file, picks[k].tensor);
        loom_gguf_free(a);
        loom_gguf_free(b);
        free(fa);
        free(fb);
    }
    fclose(out);
    return 0;
}
