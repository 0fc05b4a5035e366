/* test-ops-cases.c -- the table of op test cases: every op x supported type x layout x shape,
 * with odd sizes (1, 3, 31, 33, 127, 4097) and broadcast shapes; large --perf cases flagged.
 *
 * Data variants (ip[3]): GET_ROWS and SET_ROWS 1 = some ids out of range; SOFT_MAX 1 = one mask row all -inf;
 * ARGMAX 1 = many ties, 2 = NaNs sprinkled in; FLASH_ATTN_EXT 1 = query 0's mask row all -inf,
 * 2 = scores near the float limit (the scale makes them ~1e37), 3 = a llama context's mask (0 or -inf,
 * some -0; other values and scattered -inf only in some 64 x 128 tiles). */
#include "test-ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum loom_type float_types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16};
#define N_FLOAT_TYPES 3

/* The quantized weight types (those with a dequantizer). */
static const enum loom_type quant_types[] = {
    LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q8_0,   LOOM_TYPE_Q2_K,   LOOM_TYPE_Q3_K,
    LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q8_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
};
#define N_QUANT_TYPES (sizeof quant_types / sizeof quant_types[0])

/* Row lengths of the quantized cases: one block, one super-block, 3 blocks, and the row lengths
 * of common models (3200: 3B; 11008: 7B FFN; 14336: 8B FFN); those the type's block divides. */
static const int64_t quant_rows[] = {32, 256, 96, 3200, 11008, 14336};
#define N_QUANT_ROWS (sizeof quant_rows / sizeof quant_rows[0])

static void push(struct test_case_list * l, const struct test_case * c) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->cases = realloc(l->cases, (size_t)l->cap * sizeof *l->cases);
        if (!l->cases) {
            fprintf(stderr, "test-ops: out of memory\n");
            exit(1);
        }
    }
    l->cases[l->n++] = *c;
}

static void set_ne(int64_t * dst, int64_t a, int64_t b, int64_t c, int64_t d) {
    dst[0] = a;
    dst[1] = b;
    dst[2] = c;
    dst[3] = d;
}

/* 'c' once for each pair of source layouts in 'pairs[n]'. */
static void push_layouts(struct test_case_list * l, struct test_case c, const enum test_layout (*pairs)[2], size_t n) {
    for (size_t pi = 0; pi < n; pi++) {
        c.layout[0] = pairs[pi][0];
        c.layout[1] = pairs[pi][1];
        push(l, &c);
    }
}

/* The --perf cases of a 4096 x 4096 weight of 'type' times F32 columns: one column (decode) and
 * 512 (a prompt batch). */
static void push_mul_mat_perf(struct test_case_list * l, enum loom_type type) {
    static const int64_t perf_n[] = {1, 512};
    for (int pn = 0; pn < 2; pn++) {
        struct test_case c = {.op = LOOM_OP_MUL_MAT, .n_src = 2, .type = {type, LOOM_TYPE_F32}, .perf_only = true};
        set_ne(c.ne[0], 4096, 4096, 1, 1);
        set_ne(c.ne[1], 4096, perf_n[pn], 1, 1);
        push(l, &c);
    }
}

/* ---------------------------------------------------------------- per op */

static void cases_get_rows(struct test_case_list * l) {
    static const int64_t shapes[][5] = { /* ne0, rows, n ids, ne2, ne3 */
        {1, 3, 2, 1, 1}, {3, 1, 1, 1, 1}, {31, 7, 5, 1, 1}, {33, 17, 4, 2, 1}, {127, 5, 3, 2, 2}, {4097, 3, 2, 1, 1},
    };
    static const enum test_layout layouts[] = {TL_CONTIG, TL_STRIDED, TL_TRANSPOSED};
    for (int t = 0; t < N_FLOAT_TYPES; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (size_t li = 0; li < 3; li++) {
                struct test_case c = {.op = LOOM_OP_GET_ROWS, .n_src = 2};
                c.type[0] = float_types[t];
                c.type[1] = LOOM_TYPE_I32;
                set_ne(c.ne[0], shapes[s][0], shapes[s][1], shapes[s][3], shapes[s][4]);
                set_ne(c.ne[1], shapes[s][2], shapes[s][3], shapes[s][4], 1);
                c.layout[0] = layouts[li];
                c.layout[1] = li == 1 ? TL_STRIDED : TL_CONTIG;
                push(l, &c);
            }
        }
    }
    /* quantized rows: contiguous and strided, broadcast over dims 2 and 3 for the short rows */
    for (size_t t = 0; t < N_QUANT_TYPES; t++) {
        for (size_t r = 0; r < N_QUANT_ROWS; r++) {
            if (quant_rows[r] % loom_blck_size(quant_types[t])) continue;
            for (int li = 0; li < 2; li++) {
                const bool small = quant_rows[r] <= 256;
                struct test_case c = {.op = LOOM_OP_GET_ROWS, .n_src = 2, .type = {quant_types[t], LOOM_TYPE_I32}};
                set_ne(c.ne[0], quant_rows[r], 5, small ? 2 : 1, small ? 2 : 1);
                set_ne(c.ne[1], 3, c.ne[0][2], c.ne[0][3], 1);
                c.layout[0] = li ? TL_STRIDED : TL_CONTIG;
                c.layout[1] = li ? TL_STRIDED : TL_CONTIG;
                push(l, &c);
            }
        }
        struct test_case c = {.op = LOOM_OP_GET_ROWS, .n_src = 2, .type = {quant_types[t], LOOM_TYPE_I32}};
        set_ne(c.ne[0], 256, 5, 1, 1);
        set_ne(c.ne[1], 6, 1, 1, 1);
        c.ip[3] = 1;
        push(l, &c);
    }
    struct test_case bad = {.op = LOOM_OP_GET_ROWS, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_I32}};
    set_ne(bad.ne[0], 8, 5, 1, 1);
    set_ne(bad.ne[1], 6, 1, 1, 1);
    bad.ip[3] = 1;
    push(l, &bad);
    struct test_case big = {.op = LOOM_OP_GET_ROWS, .n_src = 2, .type = {LOOM_TYPE_F16, LOOM_TYPE_I32}, .perf_only = true};
    set_ne(big.ne[0], 4096, 32000, 1, 1);
    set_ne(big.ne[1], 512, 1, 1, 1);
    push(l, &big);
}

static void cases_mul_mat(struct test_case_list * l) {
    static const int64_t shapes[][7] = { /* K, M, N, a2, a3, b2, b3 */
        {1, 1, 1, 1, 1, 1, 1},      {3, 3, 3, 1, 1, 1, 1},       {31, 33, 1, 1, 1, 1, 1},  {33, 31, 4, 1, 1, 1, 1},
        {64, 17, 5, 1, 1, 1, 1},    {127, 64, 33, 1, 1, 1, 1},   {4097, 17, 3, 1, 1, 1, 1}, {256, 100, 64, 1, 1, 1, 1},
        {600, 50, 20, 1, 1, 1, 1},  {32, 16, 8, 2, 1, 6, 2},     {48, 130, 9, 3, 1, 3, 1},  {64, 16, 200, 1, 1, 1, 1},
        {40, 2, 8, 1, 1, 1, 1},
        /* one column over batches whose rows interleave when permuted (a K cache viewed per head:
         * read a row block of every batch at a time), odd row counts, broadcast (GQA), and one
         * above the dot path's on-demand split (512 KiB of F16 / BF16 weights) */
        {64, 37, 1, 4, 1, 12, 1},   {64, 33, 1, 12, 1, 12, 1},   {64, 1031, 1, 4, 1, 8, 1},
    };
    static const enum test_layout pairs[][2] = {
        {TL_CONTIG, TL_CONTIG},   {TL_TRANSPOSED, TL_CONTIG}, {TL_STRIDED, TL_CONTIG},
        {TL_CONTIG, TL_TRANSPOSED}, {TL_CONTIG, TL_STRIDED},  {TL_PERMUTED, TL_SCRAMBLED},
    };
    for (int t = 0; t < N_FLOAT_TYPES; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            struct test_case c = {.op = LOOM_OP_MUL_MAT, .n_src = 2, .type = {float_types[t], LOOM_TYPE_F32}};
            set_ne(c.ne[0], shapes[s][0], shapes[s][1], shapes[s][3], shapes[s][4]);
            set_ne(c.ne[1], shapes[s][0], shapes[s][2], shapes[s][5], shapes[s][6]);
            push_layouts(l, c, pairs, sizeof pairs / sizeof pairs[0]);
        }
        push_mul_mat_perf(l, float_types[t]);
    }
}

/* Quantized weights x F32 columns, for every type and row length its block divides: the dot path
 * (N <= 8) and the GEMM path (N > 8), a strided weight, non-contiguous columns (transposed,
 * strided), broadcast over dims 2 and 3; rows of 3200 and more get few rows and columns (the
 * test run stays short). */
static void cases_mul_mat_quant(struct test_case_list * l) {
    static const int64_t shapes[][6] = { /* M, N, a2, a3, b2, b3 */
        {33, 1, 1, 1, 1, 1}, {17, 9, 1, 1, 1, 1}, {16, 3, 2, 1, 6, 2}, {9, 12, 1, 2, 2, 2},
        {10, 8, 1, 1, 1, 1}, /* the most columns of the integer path: whole and partial row and column tiles */
    };
    static const enum test_layout pairs[][2] = {
        {TL_CONTIG, TL_CONTIG}, {TL_STRIDED, TL_TRANSPOSED}, {TL_CONTIG, TL_STRIDED}, {TL_STRIDED, TL_SCRAMBLED},
        {TL_CONTIG, TL_CONTIG},
    };
    for (size_t t = 0; t < N_QUANT_TYPES; t++) {
        for (size_t r = 0; r < N_QUANT_ROWS; r++) {
            const int64_t K = quant_rows[r];
            if (K % loom_blck_size(quant_types[t])) continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                struct test_case c = {.op = LOOM_OP_MUL_MAT, .n_src = 2, .type = {quant_types[t], LOOM_TYPE_F32}};
                const bool big = K > 256;
                if (big && s >= 2) continue; /* the big rows: one dot and one GEMM case */
                set_ne(c.ne[0], K, big ? 4 : shapes[s][0], shapes[s][2], shapes[s][3]);
                set_ne(c.ne[1], K, shapes[s][1], shapes[s][4], shapes[s][5]);
                c.layout[0] = pairs[s][0];
                c.layout[1] = pairs[s][1];
                push(l, &c);
            }
        }
        push_mul_mat_perf(l, quant_types[t]);
    }
}

static void cases_binary(struct test_case_list * l, enum loom_op op) {
    static const int64_t shapes[][8] = { /* a ne, b ne */
        {31, 3, 1, 1, 31, 3, 1, 1},   {33, 7, 2, 1, 33, 1, 1, 1}, {127, 5, 3, 2, 1, 5, 1, 2}, {4097, 2, 1, 1, 4097, 1, 1, 1},
        {3, 4, 5, 6, 1, 1, 1, 1},     {1, 1, 1, 1, 1, 1, 1, 1},   {64, 6, 4, 1, 32, 3, 2, 1},
    };
    static const enum test_layout pairs[][2] = {
        {TL_CONTIG, TL_CONTIG}, {TL_PERMUTED, TL_CONTIG}, {TL_TRANSPOSED, TL_STRIDED}, {TL_STRIDED, TL_SCRAMBLED},
    };
    for (int t = 0; t < N_FLOAT_TYPES; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            struct test_case c = {.op = op, .n_src = 2, .type = {float_types[t], LOOM_TYPE_F32}};
            set_ne(c.ne[0], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            set_ne(c.ne[1], shapes[s][4], shapes[s][5], shapes[s][6], shapes[s][7]);
            push_layouts(l, c, pairs, sizeof pairs / sizeof pairs[0]);
        }
    }
    struct test_case big = {.op = op, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_F32}, .perf_only = true};
    set_ne(big.ne[0], 4096, 512, 1, 1);
    set_ne(big.ne[1], 4096, 1, 1, 1);
    push(l, &big);
}

/* One F32 source, row-wise or element-wise: SCALE, SILU, GELU, RMS_NORM. */
static void cases_unary(struct test_case_list * l, enum loom_op op, float param) {
    static const int64_t shapes[][4] = {
        {1, 1, 1, 1}, {3, 1, 1, 1}, {31, 3, 1, 1}, {33, 7, 2, 1}, {4097, 2, 1, 1}, {127, 5, 3, 2},
    };
    static const enum test_layout layouts[] = {TL_CONTIG, TL_TRANSPOSED, TL_PERMUTED, TL_STRIDED};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
            struct test_case c = {.op = op, .n_src = 1, .type = {LOOM_TYPE_F32}};
            memcpy(c.ne[0], shapes[s], sizeof shapes[s]);
            c.layout[0] = layouts[li];
            c.fp[0] = param;
            push(l, &c);
        }
    }
    struct test_case big = {.op = op, .n_src = 1, .type = {LOOM_TYPE_F32}, .perf_only = true};
    set_ne(big.ne[0], 4096, 512, 1, 1);
    big.fp[0] = param;
    push(l, &big);
}

static void cases_rope(struct test_case_list * l) {
    static const int64_t shapes[][3] = {{64, 4, 3}, {128, 2, 5}, {2, 1, 1}, {6, 3, 7}, {32, 5, 33}};
    static const enum test_layout layouts[] = {TL_CONTIG, TL_STRIDED, TL_PERMUTED};
    static const int modes[] = {LOOM_ROPE_NORMAL, LOOM_ROPE_NEOX};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int m = 0; m < 2; m++) {
            for (int part = 0; part < 2; part++) {
                int64_t hd = shapes[s][0];
                int n_dims = part ? (int)(hd / 2) : (int)hd;
                if (n_dims % 2) n_dims -= 1;
                if (n_dims <= 0) continue;
                for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
                    struct test_case c = {.op = LOOM_OP_ROPE, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_I32}};
                    set_ne(c.ne[0], hd, shapes[s][1], shapes[s][2], 1);
                    set_ne(c.ne[1], shapes[s][2], 1, 1, 1);
                    c.layout[0] = layouts[li];
                    c.layout[1] = li == 1 ? TL_STRIDED : TL_CONTIG;
                    c.ip[0] = n_dims;
                    c.ip[1] = modes[m];
                    c.fp[0] = s % 2 ? 500000.0f : 10000.0f;
                    c.fp[1] = s == 3 ? 0.25f : 1.0f;
                    push(l, &c);
                }
            }
        }
    }
    /* YaRN and frequency factors (Llama 3.1's rope_freqs): scale factors 4 and 32, trained contexts
     * whose ramp falls inside the rotated pairs, with and without factors, both pairings */
    static const struct { int64_t hd; int n_dims; float base, scale, ext, attn; int n_ctx_orig; bool ff; } yarn[] = {
        {64, 64, 10000.0f, 0.25f, 1.0f, 1.0f, 4096, false}, {128, 128, 500000.0f, 1.0f / 32, 1.0f, 1.0f, 8192, true},
        {64, 32, 10000.0f, 0.5f, 0.5f, 1.2f, 2048, true},   {128, 128, 500000.0f, 1.0f, 0.0f, 1.0f, 0, true},
        {32, 32, 1000000.0f, 0.125f, 1.0f, 0.9f, 32768, false},
    };
    for (size_t y = 0; y < sizeof yarn / sizeof yarn[0]; y++) {
        for (int m = 0; m < 2; m++) {
            struct test_case c = {.op = LOOM_OP_ROPE, .n_src = yarn[y].ff ? 3 : 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_I32, LOOM_TYPE_F32}};
            set_ne(c.ne[0], yarn[y].hd, 3, 5, 1);
            set_ne(c.ne[1], 5, 1, 1, 1);
            set_ne(c.ne[2], yarn[y].n_dims / 2, 1, 1, 1);
            c.layout[0] = y % 2 ? TL_STRIDED : TL_CONTIG;
            c.ip[0] = yarn[y].n_dims;
            c.ip[1] = modes[m];
            c.ip[2] = yarn[y].n_ctx_orig;
            c.fp[0] = yarn[y].base;
            c.fp[1] = yarn[y].scale;
            c.fp[2] = yarn[y].ext;
            c.fp[3] = yarn[y].attn;
            c.fp[4] = 32.0f;
            c.fp[5] = 1.0f;
            push(l, &c);
        }
    }
    struct test_case big = {.op = LOOM_OP_ROPE, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_I32}, .perf_only = true};
    set_ne(big.ne[0], 128, 32, 512, 1);
    set_ne(big.ne[1], 512, 1, 1, 1);
    big.ip[0] = 128;
    big.fp[0] = 10000.0f;
    big.fp[1] = 1.0f;
    push(l, &big);
}

static void cases_soft_max(struct test_case_list * l) {
    static const int64_t shapes[][8] = { /* a ne, mask ne */
        {1, 1, 1, 1, 1, 1, 1, 1},       {31, 3, 1, 1, 31, 3, 1, 1}, {33, 7, 2, 1, 33, 9, 1, 1},
        {127, 5, 4, 2, 127, 5, 2, 1},   {4097, 2, 1, 1, 4097, 2, 1, 1},
    };
    static const enum loom_type mask_types[] = {LOOM_TYPE_COUNT, LOOM_TYPE_F32, LOOM_TYPE_F16}; /* COUNT: no mask */
    static const float scales[] = {1.0f, 0.125f};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int mt = 0; mt < 3; mt++) {
            for (int sc = 0; sc < 2; sc++) {
                for (int li = 0; li < 2; li++) {
                    struct test_case c = {.op = LOOM_OP_SOFT_MAX, .n_src = mask_types[mt] == LOOM_TYPE_COUNT ? 1 : 2};
                    c.type[0] = LOOM_TYPE_F32;
                    c.type[1] = mask_types[mt];
                    set_ne(c.ne[0], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
                    set_ne(c.ne[1], shapes[s][4], shapes[s][5], shapes[s][6], shapes[s][7]);
                    c.layout[0] = li ? (s % 2 ? TL_TRANSPOSED : TL_STRIDED) : TL_CONTIG;
                    c.layout[1] = li ? TL_STRIDED : TL_CONTIG;
                    c.fp[0] = scales[sc];
                    push(l, &c);
                }
            }
        }
    }
    for (int mt = 1; mt < 3; mt++) { /* a fully masked row gives zeros */
        struct test_case c = {.op = LOOM_OP_SOFT_MAX, .n_src = 2, .type = {LOOM_TYPE_F32, mask_types[mt]}};
        set_ne(c.ne[0], 16, 4, 1, 1);
        set_ne(c.ne[1], 16, 4, 1, 1);
        c.fp[0] = 1.0f;
        c.ip[3] = 1;
        push(l, &c);
    }
    struct test_case big = {.op = LOOM_OP_SOFT_MAX, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_F16}, .perf_only = true};
    set_ne(big.ne[0], 4096, 512, 1, 1);
    set_ne(big.ne[1], 4096, 512, 1, 1);
    big.fp[0] = 0.125f;
    push(l, &big);
}

/* Sources q [D, n_q, H, 1], k [D, n_kv, H_kv, 1], v [D, n_kv, H_kv, 1], mask [n_kv, n_q, m2, 1]
 * (causal for the last n_q cells, with some cells masked at random). */
static void push_flash_attn(struct test_case_list * l, enum loom_type kv, int64_t D, int64_t n_q, int64_t H, int64_t Hk,
                            int64_t n_kv, enum loom_type mask, int64_t m2, int variant, int layout) {
    struct test_case c = {.op = LOOM_OP_FLASH_ATTN_EXT, .n_src = mask == LOOM_TYPE_COUNT ? 3 : 4};
    c.type[0] = LOOM_TYPE_F32;
    c.type[1] = c.type[2] = kv;
    c.type[3] = mask;
    set_ne(c.ne[0], D, n_q, H, 1);
    set_ne(c.ne[1], D, n_kv, Hk, 1);
    set_ne(c.ne[2], D, n_kv, Hk, 1);
    set_ne(c.ne[3], n_kv, n_q, m2, 1);
    /* the graph's views: q permuted (heads outermost in memory), K and V cache rows (cells of
     * one head strided by the whole row of every head) */
    static const enum test_layout q_layouts[] = {TL_CONTIG, TL_PERMUTED, TL_STRIDED};
    static const enum test_layout kv_layouts[] = {TL_CONTIG, TL_PERMUTED, TL_STRIDED};
    c.layout[0] = q_layouts[layout % 3];
    c.layout[1] = kv_layouts[(layout + 1) % 3];
    c.layout[2] = kv_layouts[(layout + 2) % 3];
    c.layout[3] = layout % 2 ? TL_STRIDED : TL_CONTIG;
    c.fp[0] = variant == 2 ? 3e37f / (float)D : 1.0f / sqrtf((float)D);
    c.ip[3] = variant;
    push(l, &c);
}

/* Quantized K or V: blocks are rows of their own, laid out dense or strided (not permuted). */
static void push_flash_attn_kv(struct test_case_list * l, enum loom_type tk, enum loom_type tv, int64_t D, int64_t n_q,
                               int64_t H, int64_t Hk, int64_t n_kv, enum loom_type mask, int variant, bool strided) {
    struct test_case c = {.op = LOOM_OP_FLASH_ATTN_EXT, .n_src = 4, .type = {LOOM_TYPE_F32, tk, tv, mask}};
    set_ne(c.ne[0], D, n_q, H, 1);
    set_ne(c.ne[1], D, n_kv, Hk, 1);
    set_ne(c.ne[2], D, n_kv, Hk, 1);
    set_ne(c.ne[3], n_kv, n_q, 1, 1);
    c.layout[0] = strided ? TL_PERMUTED : TL_CONTIG;
    c.layout[1] = strided ? TL_STRIDED : TL_CONTIG;
    c.layout[2] = strided ? TL_CONTIG : TL_STRIDED;
    c.fp[0] = 1.0f / sqrtf((float)D);
    c.ip[3] = variant;
    push(l, &c);
}

static void cases_flash_attn(struct test_case_list * l) {
    static const int64_t dims[] = {64, 80, 96, 128};
    static const int64_t ratios[] = {1, 4, 8};
    static const int64_t lens[] = {1, 31, 257};
    int k = 0;
    for (int t = 0; t < N_FLOAT_TYPES; t++) {
        for (int d = 0; d < 4; d++) {
            for (int r = 0; r < 3; r++) {
                for (int n = 0; n < 3; n++, k++) {
                    /* one query (token generation: the KV cells split into chunks past 256) and
                     * several (a prompt: one pass, column blocks of queries x heads) */
                    const int64_t Hk = r == 0 ? 2 : 1, n_q = k % 2 ? 1 : 7;
                    const enum loom_type mt = k % 3 == 0 ? LOOM_TYPE_F16 : k % 3 == 1 ? LOOM_TYPE_F32 : LOOM_TYPE_COUNT;
                    push_flash_attn(l, float_types[t], dims[d], n_q, Hk * ratios[r], Hk, lens[n], mt, 1, 0, k);
                }
            }
        }
        /* short heads (not whole vectors): converted a tile at a time, or row by row when the
         * rows are far apart (16 heads of 40, permuted: the cells of one head 640 elements apart) */
        push_flash_attn(l, float_types[t], 8, 1, 4, 2, 257, LOOM_TYPE_F16, 1, 0, t);
        push_flash_attn(l, float_types[t], 8, 7, 8, 1, 31, LOOM_TYPE_F32, 1, 1, t + 1);
        push_flash_attn(l, float_types[t], 40, 3, 4, 4, 100, LOOM_TYPE_F16, 1, 0, t + 2);
        push_flash_attn(l, float_types[t], 40, 2, 16, 16, 100, LOOM_TYPE_F32, 1, 0, 0);
        push_flash_attn(l, float_types[t], 40, 1, 16, 16, 300, LOOM_TYPE_F16, 1, 0, 2);
        /* long caches: few heads, one query */
        push_flash_attn(l, float_types[t], 64, 1, 4, 1, 4097, LOOM_TYPE_F16, 1, 0, t);
        push_flash_attn(l, float_types[t], 128, 1, 8, 1, 4097, LOOM_TYPE_F32, 1, 0, t + 1);
        /* a fully masked query gives zeros, never NaN (one pass and chunked); a mask per head */
        push_flash_attn(l, float_types[t], 64, 3, 4, 1, 40, LOOM_TYPE_F32, 1, 1, t);
        push_flash_attn(l, float_types[t], 64, 2, 4, 2, 300, LOOM_TYPE_F16, 1, 1, t + 1);
        push_flash_attn(l, float_types[t], 80, 5, 8, 2, 70, LOOM_TYPE_F16, 8, 0, t + 2);
        /* token generation split into chunks with every KV head in one item: chunks of odd
         * lengths (129 cells: 65 + 64; 520: five of 104), two column blocks per head (4
         * queries x 8 heads per KV head), a mask per head, query 0 fully masked */
        push_flash_attn(l, float_types[t], 64, 4, 16, 2, 129, LOOM_TYPE_F16, 1, 1, t);
        push_flash_attn(l, float_types[t], 64, 2, 8, 8, 520, LOOM_TYPE_F32, 8, 0, t + 1);
        /* scores near the float limit: the maximum must be taken out before exp */
        push_flash_attn(l, float_types[t], 64, 3, 4, 4, 65, LOOM_TYPE_F32, 1, 2, t);
        push_flash_attn(l, float_types[t], 96, 1, 8, 1, 600, LOOM_TYPE_COUNT, 1, 2, t + 1);
    }
    /* F16 and F32 masks of whole 16-byte runs (cells a multiple of 8 or 4: the tensor-core kernel
     * stages them with K and V): causal prompts whose upper triangle skips whole tiles (query 0
     * fully masked in the first), GQA, and more than one 8-tile liveness window (648 cells) */
    for (int t = 0; t < 2; t++) {
        const enum loom_type mt = t ? LOOM_TYPE_F32 : LOOM_TYPE_F16;
        push_flash_attn(l, LOOM_TYPE_F16, 64, 200, 2, 1, 264, mt, 1, 1, 0);
        push_flash_attn(l, LOOM_TYPE_F16, 128, 136, 1, 1, 648, mt, 1, 0, 2);
        /* a llama context's mask (0 or -inf, some -0): whole tiles of +-0, as a real prompt
         * passes, beside tiles with other values or scattered -inf; several column blocks */
        push_flash_attn(l, LOOM_TYPE_F16, 128, 300, 2, 1, 648, mt, 1, 3, 0);
        push_flash_attn(l, LOOM_TYPE_F16, 64, 260, 1, 1, 520, mt, 1, 3, 0);
    }
    /* a quantized KV cache (Q8_0, Q4_0: dense rows of blocks, in place or strided), dequantized a
     * tile at a time; K and V of different types */
    static const enum loom_type qkv[] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0};
    for (int t = 0; t < 2; t++) {
        push_flash_attn_kv(l, qkv[t], qkv[t], 64, 1, 4, 1, 257, LOOM_TYPE_F16, 0, false);
        push_flash_attn_kv(l, qkv[t], qkv[t], 128, 7, 8, 2, 31, LOOM_TYPE_F32, 0, true);
        push_flash_attn_kv(l, qkv[t], qkv[t], 96, 1, 4, 4, 4097, LOOM_TYPE_F16, 0, false);
        push_flash_attn_kv(l, qkv[t], LOOM_TYPE_F16, 64, 3, 4, 1, 100, LOOM_TYPE_F32, 1, true);
        push_flash_attn_kv(l, LOOM_TYPE_F16, qkv[t], 96, 2, 4, 2, 300, LOOM_TYPE_F16, 0, false);
        push_flash_attn_kv(l, qkv[t], qkv[t], 64, 1, 8, 4, 300, LOOM_TYPE_F16, 0, true);
        /* rows of whole 8-byte words (heads of 128 and 256, dense): the decode kernel's 8-byte loads;
         * one column per KV head, eight (query 0 fully masked), two over rows of 256 */
        push_flash_attn_kv(l, qkv[t], qkv[t], 128, 1, 8, 8, 1000, LOOM_TYPE_F16, 0, false);
        push_flash_attn_kv(l, qkv[t], qkv[t], 128, 2, 16, 4, 333, LOOM_TYPE_F32, 1, false);
        push_flash_attn_kv(l, qkv[t], qkv[t], 256, 1, 4, 2, 129, LOOM_TYPE_F16, 0, false);
    }
    /* the prompt of a 7B model's layer and its token generation at depth 4096 */
    struct test_case big = {.op = LOOM_OP_FLASH_ATTN_EXT, .n_src = 4, .perf_only = true,
                            .type = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_F16, LOOM_TYPE_F16}};
    set_ne(big.ne[0], 128, 512, 32, 1);
    set_ne(big.ne[1], 128, 512, 32, 1);
    set_ne(big.ne[2], 128, 512, 32, 1);
    set_ne(big.ne[3], 512, 512, 1, 1);
    big.fp[0] = 1.0f / sqrtf(128.0f);
    push(l, &big);
    set_ne(big.ne[0], 128, 1, 32, 1);
    set_ne(big.ne[1], 128, 4096, 32, 1);
    set_ne(big.ne[2], 128, 4096, 32, 1);
    set_ne(big.ne[3], 4096, 1, 1, 1);
    push(l, &big);
    /* a 110m model's layer (12 heads of 64) generating at depth 1024, K and V as the cache lays
     * them out (the heads of one cell adjacent), and its 512-token prompt */
    big.layout[1] = big.layout[2] = TL_PERMUTED;
    set_ne(big.ne[0], 64, 1, 12, 1);
    set_ne(big.ne[1], 64, 1024, 12, 1);
    set_ne(big.ne[2], 64, 1024, 12, 1);
    set_ne(big.ne[3], 1024, 1, 1, 1);
    push(l, &big);
    set_ne(big.ne[1], 64, 16384, 12, 1); /* 48 MiB of K and V: read from memory, not from a cache */
    set_ne(big.ne[2], 64, 16384, 12, 1);
    set_ne(big.ne[3], 16384, 1, 1, 1);
    push(l, &big);
    set_ne(big.ne[0], 64, 512, 12, 1);
    set_ne(big.ne[1], 64, 512, 12, 1);
    set_ne(big.ne[2], 64, 512, 12, 1);
    set_ne(big.ne[3], 512, 512, 1, 1);
    push(l, &big);
}

static void cases_copy(struct test_case_list * l) {
    static const enum loom_type types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_I32};
    /* CPY: source shape/layout -> destination shape/layout */
    static const int64_t shapes[][8] = {
        {33, 7, 2, 1, 33, 7, 2, 1}, {33, 7, 2, 1, 33, 7, 2, 1}, {33, 7, 2, 1, 33, 7, 2, 1},
        {33, 7, 2, 1, 33, 7, 2, 1}, {31, 3, 1, 1, 93, 1, 1, 1}, {4097, 2, 1, 1, 2, 4097, 1, 1},
    };
    static const enum test_layout lay[][2] = {
        {TL_CONTIG, TL_CONTIG}, {TL_PERMUTED, TL_CONTIG}, {TL_CONTIG, TL_STRIDED},
        {TL_TRANSPOSED, TL_SCRAMBLED}, {TL_CONTIG, TL_CONTIG}, {TL_TRANSPOSED, TL_CONTIG},
    };
    for (int st = 0; st < 4; st++) {
        for (int dt = 0; dt < 4; dt++) {
            if ((types[st] == LOOM_TYPE_I32) != (types[dt] == LOOM_TYPE_I32)) continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                struct test_case c = {.op = LOOM_OP_CPY, .n_src = 2, .type = {types[st], types[dt]}};
                set_ne(c.ne[0], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
                set_ne(c.ne[1], shapes[s][4], shapes[s][5], shapes[s][6], shapes[s][7]);
                c.layout[0] = lay[s][0];
                c.layout[1] = lay[s][1];
                push(l, &c);
            }
        }
    }
    static const enum test_layout dup_layouts[] = {TL_CONTIG, TL_TRANSPOSED, TL_PERMUTED, TL_STRIDED};
    for (int t = 0; t < 4; t++) {
        for (int li = 0; li < 4; li++) {
            struct test_case c = {.op = LOOM_OP_DUP, .n_src = 1, .type = {types[t]}};
            set_ne(c.ne[0], 33, 7, 2, 1);
            c.layout[0] = dup_layouts[li];
            push(l, &c);

            struct test_case k = {.op = LOOM_OP_CONT, .n_src = 1, .type = {types[t]}};
            set_ne(k.ne[0], 31, 5, 3, 1);
            k.layout[0] = li ? dup_layouts[li] : TL_SCRAMBLED;
            if (li % 2) {
                set_ne(k.ne_out, 31, 15, 1, 1);
            } else {
                set_ne(k.ne_out, 5, 31, 3, 1);
            }
            push(l, &k);
        }
    }
    /* F32 -> every quantized type and back (the quantized side in rows of whole blocks): dense,
     * a permuted or transposed F32 side, strided rows, and a reshape between contiguous tensors */
    static const enum loom_type qtypes[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q8_0,
                                            LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
                                            LOOM_TYPE_Q8_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
    static const enum test_layout qlay[][2] = {
        {TL_CONTIG, TL_CONTIG}, {TL_PERMUTED, TL_CONTIG}, {TL_TRANSPOSED, TL_STRIDED}, {TL_CONTIG, TL_CONTIG},
    };
    for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++) {
        const int64_t blck = loom_blck_size(qtypes[t]);
        const int64_t widths[2] = {blck == 32 ? 96 : 256, blck == 32 ? 32 : 768}; /* 3 blocks / 1 block; 1 / 3 */
        for (int w = 0; w < 2; w++) {
            for (size_t li = 0; li < sizeof qlay / sizeof qlay[0]; li++) {
                const int64_t n0 = widths[w];
                const bool reshape = li == 3;
                struct test_case c = {.op = LOOM_OP_CPY, .n_src = 2, .type = {LOOM_TYPE_F32, qtypes[t]}};
                set_ne(c.ne[0], reshape ? 2 * n0 : n0, 3, 2, 1);
                set_ne(c.ne[1], n0, 6, 2, 1);
                if (!reshape) set_ne(c.ne[1], n0, 3, 2, 1);
                c.layout[0] = qlay[li][0];
                c.layout[1] = qlay[li][1];
                push(l, &c);
                /* back: the quantized side as the source (dense or strided rows) */
                struct test_case k = {.op = LOOM_OP_CPY, .n_src = 2, .type = {qtypes[t], LOOM_TYPE_F32}};
                memcpy(k.ne[0], c.ne[1], sizeof k.ne[0]);
                memcpy(k.ne[1], c.ne[0], sizeof k.ne[1]);
                k.layout[0] = qlay[li][1];
                k.layout[1] = qlay[li][0];
                push(l, &k);
            }
            struct test_case d = {.op = LOOM_OP_DUP, .n_src = 1, .type = {qtypes[t]}, .layout = {w ? TL_STRIDED : TL_CONTIG}};
            set_ne(d.ne[0], widths[w], 5, 1, 1);
            push(l, &d);
        }
    }
    struct test_case big = {.op = LOOM_OP_CPY, .n_src = 2, .type = {LOOM_TYPE_F32, LOOM_TYPE_F16}, .perf_only = true};
    set_ne(big.ne[0], 4096, 512, 1, 1);
    set_ne(big.ne[1], 4096, 512, 1, 1);
    push(l, &big);
}

/* SET_ROWS: destination [ne0, rows] (source 0, any layout: transposed stores columns), rows F32
 * [ne0, n], ids [n] (distinct: each destination row is written at most once). */
static void cases_set_rows(struct test_case_list * l) {
    static const int64_t shapes[][3] = {{1, 3, 2}, {3, 1, 1}, {31, 7, 5}, {33, 17, 4}, {4097, 3, 2}, {64, 40, 1}};
    static const enum test_layout layouts[][2] = {{TL_CONTIG, TL_CONTIG}, {TL_TRANSPOSED, TL_CONTIG}, {TL_STRIDED, TL_TRANSPOSED}};
    for (int t = 0; t < N_FLOAT_TYPES; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (size_t li = 0; li < 3; li++) {
                struct test_case c = {.op = LOOM_OP_SET_ROWS, .n_src = 3, .type = {float_types[t], LOOM_TYPE_F32, LOOM_TYPE_I32}};
                set_ne(c.ne[0], shapes[s][0], shapes[s][1], 1, 1);
                set_ne(c.ne[1], shapes[s][0], shapes[s][2], 1, 1);
                set_ne(c.ne[2], shapes[s][2], 1, 1, 1);
                c.layout[0] = layouts[li][0];
                c.layout[1] = layouts[li][1];
                push(l, &c);
            }
        }
    }
    /* a quantized KV cache: whole rows of blocks, quantized */
    static const enum loom_type kv_quant[] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0};
    static const int64_t qshapes[][3] = {{32, 3, 2}, {64, 40, 1}, {256, 9, 5}};
    for (int t = 0; t < 2; t++) {
        for (size_t s = 0; s < 3; s++) {
            struct test_case c = {.op = LOOM_OP_SET_ROWS, .n_src = 3, .type = {kv_quant[t], LOOM_TYPE_F32, LOOM_TYPE_I32}};
            set_ne(c.ne[0], qshapes[s][0], qshapes[s][1], 1, 1);
            set_ne(c.ne[1], qshapes[s][0], qshapes[s][2], 1, 1);
            set_ne(c.ne[2], qshapes[s][2], 1, 1, 1);
            c.layout[0] = s == 1 ? TL_STRIDED : TL_CONTIG;
            c.layout[1] = s == 2 ? TL_STRIDED : TL_CONTIG;
            c.ip[3] = s == 0; /* and ids out of range */
            push(l, &c);
        }
    }
    struct test_case bad = {.op = LOOM_OP_SET_ROWS, .n_src = 3, .type = {LOOM_TYPE_F16, LOOM_TYPE_F32, LOOM_TYPE_I32}};
    set_ne(bad.ne[0], 8, 9, 1, 1);
    set_ne(bad.ne[1], 8, 6, 1, 1);
    set_ne(bad.ne[2], 6, 1, 1, 1);
    bad.ip[3] = 1;
    push(l, &bad);
    struct test_case big = {.op = LOOM_OP_SET_ROWS, .n_src = 3, .type = {LOOM_TYPE_F16, LOOM_TYPE_F32, LOOM_TYPE_I32}, .perf_only = true};
    set_ne(big.ne[0], 4096, 1024, 1, 1);
    set_ne(big.ne[1], 4096, 512, 1, 1);
    set_ne(big.ne[2], 512, 1, 1, 1);
    push(l, &big);
}

static void cases_argmax(struct test_case_list * l) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 4}, {31, 7}, {4097, 3}, {33, 2}};
    static const enum test_layout layouts[] = {TL_CONTIG, TL_TRANSPOSED, TL_STRIDED};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int li = 0; li < 3; li++) {
            for (int variant = 0; variant < 3; variant++) {
                if (variant && li) continue;
                struct test_case c = {.op = LOOM_OP_ARGMAX, .n_src = 1, .type = {LOOM_TYPE_F32}};
                set_ne(c.ne[0], shapes[s][0], shapes[s][1], 1, 1);
                c.layout[0] = layouts[li];
                c.ip[3] = variant;
                push(l, &c);
            }
        }
    }
}

void test_ops_make_cases(struct test_case_list * l) {
    memset(l, 0, sizeof *l);
    cases_get_rows(l);
    cases_mul_mat(l);
    cases_mul_mat_quant(l);
    cases_binary(l, LOOM_OP_ADD);
    cases_binary(l, LOOM_OP_MUL);
    cases_unary(l, LOOM_OP_SCALE, 0.37f);
    cases_unary(l, LOOM_OP_RMS_NORM, 1e-6f);
    cases_rope(l);
    cases_soft_max(l);
    cases_unary(l, LOOM_OP_SILU, 0.0f);
    cases_unary(l, LOOM_OP_GELU, 0.0f);
    cases_copy(l);
    cases_set_rows(l);
    cases_argmax(l);
    cases_flash_attn(l);
}

void test_ops_free_cases(struct test_case_list * l) {
    free(l->cases);
    memset(l, 0, sizeof *l);
}

static const char * layout_name(enum test_layout l) {
    static const char * const names[TL_COUNT] = {"contig", "transposed", "permuted", "scrambled", "strided"};
    return (int)l >= 0 && l < TL_COUNT ? names[l] : "?";
}

void test_ops_describe(const struct test_case * c, char * buf, size_t size) {
    int n = snprintf(buf, size, "%s", loom_op_name(c->op));
    for (int s = 0; s < c->n_src && n >= 0 && (size_t)n < size; s++) {
        n += snprintf(buf + n, size - (size_t)n, " %s[%lld,%lld,%lld,%lld]%s", loom_type_name(c->type[s]),
                      (long long)c->ne[s][0], (long long)c->ne[s][1], (long long)c->ne[s][2], (long long)c->ne[s][3],
                      c->layout[s] == TL_CONTIG ? "" : layout_name(c->layout[s]));
    }
    if (n >= 0 && (size_t)n < size) {
        switch (c->op) {
        case LOOM_OP_ROPE:
            n += snprintf(buf + n, size - (size_t)n, " n_dims=%d %s", c->ip[0], c->ip[1] == LOOM_ROPE_NEOX ? "neox" : "normal");
            if (c->fp[3] != 0.0f && n > 0 && (size_t)n < size) {
                snprintf(buf + n, size - (size_t)n, " scale=%g ext=%g attn=%g n_ctx_orig=%d%s", (double)c->fp[1], (double)c->fp[2],
                         (double)c->fp[3], c->ip[2], c->n_src > 2 ? " freq_factors" : "");
            }
            break;
        case LOOM_OP_SOFT_MAX: snprintf(buf + n, size - (size_t)n, " scale=%g%s", c->fp[0], c->ip[3] ? " masked-row" : ""); break;
        case LOOM_OP_FLASH_ATTN_EXT:
            snprintf(buf + n, size - (size_t)n, " scale=%g%s", c->fp[0], c->ip[3] == 1 ? " masked-row" : c->ip[3] == 2 ? " huge-scores" : "");
            break;
        case LOOM_OP_CONT:
            snprintf(buf + n, size - (size_t)n, " -> [%lld,%lld,%lld,%lld]", (long long)c->ne_out[0], (long long)c->ne_out[1],
                     (long long)c->ne_out[2], (long long)c->ne_out[3]);
            break;
        case LOOM_OP_GET_ROWS:
        case LOOM_OP_SET_ROWS: if (c->ip[3]) snprintf(buf + n, size - (size_t)n, " bad-ids"); break;
        case LOOM_OP_ARGMAX: if (c->ip[3]) snprintf(buf + n, size - (size_t)n, c->ip[3] == 1 ? " ties" : " nans"); break;
        default: break;
        }
    }
}
