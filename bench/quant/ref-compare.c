/* ref-compare.c -- checks Loom's quantizers byte for byte against the reference engine's
 * (ggml_quantize_chunk in its libggml-base.so, loaded with dlopen), on pseudo-random rows.
 * Not part of the build or the tests (they never call the reference engine); see README.md here.
 *   cc -O2 -march=native -Iinclude -Isrc bench/quant/ref-compare.c BUILD/libloom.a -ldl -lm -fopenmp -o /tmp/ref-compare
 *   /tmp/ref-compare /work/shared/peers/llama.cpp-cpu/bin/libggml-base.so [ROWS] */
#include "loom.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef size_t (*quantize_chunk_fn)(int type, const float * src, void * dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float * imatrix);

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double next_u(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 0.5) / 9007199254740992.0;
}
static float next_normal(void) { return (float)(sqrt(-2 * log(next_u())) * cos(6.283185307179586 * next_u())); }

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ref-compare LIBGGML_BASE.so [ROWS]\n");
        return 2;
    }
    void * h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    quantize_chunk_fn qc = (quantize_chunk_fn)dlsym(h, "ggml_quantize_chunk");
    if (!qc) return 1;
    const int rows = argc > 2 ? atoi(argv[2]) : 64;
    const int64_t n = 768;
    const enum loom_type types[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q8_0,
                                    LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
                                    LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
    float * x = malloc(sizeof(float) * (size_t)(n * rows));
    for (int64_t i = 0; i < n * rows; i++) {
        const int r = (int)(i / n);
        float v = next_normal();
        if (r % 4 == 1) v = v * v * v;                  /* heavy tails */
        if (r % 4 == 2) v = (float)next_u() - 0.3f;     /* skewed uniform */
        if (r % 4 == 3) v *= (float)(i % 97) / 97.f;    /* varying scale */
        x[i] = v * 0.02f;
    }
    int bad = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const size_t rs = loom_row_size(types[t], n);
        uint8_t * a = malloc(rs * (size_t)rows), * b = malloc(rs * (size_t)rows);
        qc((int)types[t], x, a, 0, rows, n, NULL);
        for (int r = 0; r < rows; r++) loom_type_get_traits(types[t])->from_float(x + r * n, b + r * rs, n);
        int rows_diff = 0;
        size_t bytes_diff = 0;
        for (int r = 0; r < rows; r++) {
            size_t d = 0;
            for (size_t k = 0; k < rs; k++) d += a[r * rs + k] != b[r * rs + k];
            rows_diff += d != 0;
            bytes_diff += d;
        }
        printf("%-7s rows differing %d / %d, bytes differing %zu / %zu\n", loom_type_name(types[t]), rows_diff, rows,
               bytes_diff, rs * (size_t)rows);
        bad += rows_diff != 0;
        free(a);
        free(b);
    }
    free(x);
    return bad ? 1 : 0;
}
