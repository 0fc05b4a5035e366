/* fixture-compare.c -- quantizes each tensor of an F32 GGUF with Loom's quantizers to the type the
 * reference engine chose in a file it wrote from the same source, and counts the bytes that differ.
 *   cc -O2 -march=native -Iinclude -Isrc -Itests/util bench/quant/fixture-compare.c tests/util/test-util.c BUILD/libloom.a -lm -fopenmp -o /tmp/fixture-compare
 *   /tmp/fixture-compare kq/kq-F32.gguf kq/kq-Q4_K_M.gguf */
#include "loom-gguf.h"
#include "loom.h"
#include "test-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t * tensor_bytes(const struct loom_gguf * g, const uint8_t * file, int64_t i) {
    return file + loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i);
}

int main(int argc, char ** argv) {
    if (argc != 3) return 2;
    char err[256];
    struct loom_gguf *a, *b;
    if (loom_gguf_open(argv[1], &a, err, sizeof err) != LOOM_OK || loom_gguf_open(argv[2], &b, err, sizeof err) != LOOM_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t na, nb;
    uint8_t * fa = test_read_file(argv[1], &na), * fb = test_read_file(argv[2], &nb);
    int bad = 0;
    for (int64_t i = 0; i < loom_gguf_n_tensors(b); i++) {
        const char * name = loom_gguf_tensor_name(b, i);
        const enum loom_type t = loom_gguf_tensor_type(b, i);
        const int64_t ia = loom_gguf_find_tensor(a, name);
        if (ia < 0 || loom_gguf_tensor_type(a, ia) != LOOM_TYPE_F32) continue;
        const int64_t ne0 = loom_gguf_tensor_ne(b, i)[0], nrows = loom_gguf_tensor_nelements(b, i) / ne0;
        const float * x = (const float *)tensor_bytes(a, fa, ia);
        const uint8_t * ref = tensor_bytes(b, fb, i);
        const size_t rs = loom_row_size(t, ne0);
        uint8_t * mine = malloc(rs);
        size_t diff = 0, rows_diff = 0;
        for (int64_t r = 0; r < nrows; r++) {
            loom_type_get_traits(t)->from_float(x + r * ne0, mine, ne0);
            size_t d = 0;
            for (size_t k = 0; k < rs; k++) d += mine[k] != ref[r * rs + k];
            diff += d;
            rows_diff += d != 0;
        }
        printf("%-28s %-7s rows differing %zu / %lld, bytes %zu / %zu\n", name, loom_type_name(t), rows_diff,
               (long long)nrows, diff, rs * (size_t)nrows);
        bad += diff != 0;
        free(mine);
    }
    return bad != 0;
}
