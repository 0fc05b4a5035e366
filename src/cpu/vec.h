/* vec.h -- the CPU kernel table: F16/BF16 conversions and matrix-product micro-kernels, in a
 * portable scalar version (vec-scalar.c) and SIMD versions (vec-avx2.c, vec-avx512.c) that are
 * compiled with function target attributes and chosen at run time (vec.c). */
#ifndef LOOM_CPU_VEC_H
#define LOOM_CPU_VEC_H

#include "loom.h"

/* Weight element types the matrix-product kernels read directly. */
enum cpu_wtype {
    CPU_W_F32 = 0,
    CPU_W_F16,
    CPU_W_BF16,
    CPU_W_COUNT
};

/* Converts 'n' contiguous elements. */
typedef void (*cpu_to_f32_fn)(const uint16_t * x, float * y, int64_t n);
typedef void (*cpu_from_f32_fn)(const float * x, uint16_t * y, int64_t n);

/* Dot products of 'mr' (1..dot_mr) weight rows with 'nr' (1..dot_nr) F32 columns, 'k' elements each:
 *   c[j][r] = sum_i w[r][i] * b[j][i]
 * Row r of 'w' starts at w + r*ldw, column j of 'b' at b + j*ldb, result j at c + j*ldc (all
 * strides in bytes); 'w' holds the kernel's weight type densely, 'b' and 'c' are F32. Each result
 * is summed in one fixed order that depends only on 'k' (not on mr/nr). */
typedef void (*cpu_dot_fn)(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr,
                           uint8_t * c, size_t ldc);

/* One F32 column against 'n' rows (the scores of one query in fused attention), 'k' elements each,
 * k a multiple of 16:
 *   c[r] = sum_i w[r][i] * b[i]      r < n
 * Row r of 'w' starts at w + r*ldw (bytes) and holds the kernel's row type densely; 'b' and 'c'
 * are F32. The rows are taken a vector's length at a time, their sums reduced together (one
 * transpose, not one horizontal sum per row); each result is summed in a fixed order that depends
 * only on 'k' and on r's place in its group of rows (not on 'n'). */
typedef void (*cpu_dot_rows_fn)(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c);

/* Weighted sum of rows added to 'y' (the value accumulation of fused attention):
 *   y[i] += sum_r a[r] * x[r][i]     i < n, r < nrows
 * Row r of 'x' holds 'n' dense elements of the kernel's weight type at x + r*ldx (bytes); 'a' and
 * 'y' are F32. Each y[i] adds the rows in order r = 0, 1, ... (one fixed order). */
typedef void (*cpu_mad_fn)(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y);

/* A register-blocked tile of a matrix product over 'kc' steps of k:
 *   c[j][r] (+)= sum_k ap[k][r] * b[j][k]     r < mr (<= gemm mr), j < nr (<= gemm nr)
 * 'ap' is a packed weight panel: for each k, the panel's MR row values (F32), zero-padded past
 * 'mr'; for the BF16 kernel, for each pair of k, MR 32-bit words holding (w[r][k], w[r][k+1]) as
 * BF16. 'b' points at the columns' k0 element (F32, or BF16 for the BF16 kernel), column j at
 * b + j*ldb; 'c' at c + j*ldc (strides in bytes). With 'accumulate' the sums are added to c,
 * else stored. Each result's summation order depends only on kc. */
typedef void (*cpu_gemm_fn)(int64_t kc, const void * ap, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc,
                            int mr, bool accumulate);

/* Packs one GEMM panel: panel[k * mr + r] = rows[r][k] as F32, for r < n_rows and k < n; rows
 * n_rows .. mr-1 are zeros. Row r holds 'n' dense elements of 'wt' from rows[r] (any alignment);
 * CPU_W_F32 moves 32-bit words unchanged, so it also packs BF16 pairs. 'mr' is the panel height
 * (a multiple of the vector length). */
typedef void (*cpu_pack_fn)(const uint8_t * const * rows, int n_rows, enum cpu_wtype wt, int64_t n, void * panel, int mr);

/* Element-wise over 'n' contiguous floats (y may equal x):
 *   silu: y = x / (1 + exp(-x));  gelu: y = x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), which
 *   equals the tanh form 0.5 x (1 + tanh(...)) without its cancellation for negative x. */
typedef void (*cpu_unary_fn)(const float * x, float * y, int64_t n);
/* x[i] = exp(x[i] - max) in place; returns the sum of the new values. */
typedef double (*cpu_exp_sum_fn)(float * x, int64_t n, float max);

/* ---- quantized weights: integer dot products
 * One-column products (N <= MM_DOT_MAX_N, ops-matmul.c) with a quantized weight type whose entry
 * has a 'dot' quantize the F32 columns once per node, before the node's barrier, into the entry's
 * activation type (Q8_0 blocks of 32 for the legacy types and IQ4_NL, Q8_K super-blocks for the
 * K-quants and IQ4_XS), into the node's shared scratch; every weight row is then dotted with the
 * quantized columns block by block, in integers, each block's sum scaled by the product of the two
 * block scales. A type whose entry has no 'dot' takes the F32 path: its rows are dequantized
 * through the traits' to_float and dotted with the F32 columns by dot[CPU_W_F32]. */

/* Quantizes 'k' F32 values (a multiple of the activation type's block length) into blocks at 'y'.
 * Non-finite columns: a block holding a NaN or an infinity gets the scale d = NaN and all codes
 * (and code sums) 0, so that every product with it is NaN, as an F32 product would be; a max that
 * skipped the NaN would give d = 0 and a silently zero product instead. */
typedef void (*lcpu_quantize_act_fn)(const float * x, void * y, int64_t k);

/* Dot products of 'mr' (1..rows of the entry) quantized weight rows with 'nr' (1..dot_nr) quantized columns,
 * 'k' elements each: c[j][r] = sum_i w[r][i] * a[j][i] (F32). Row r of 'w' at w + r*ldw (blocks of
 * the weight type), column j of 'a' at a + j*lda (blocks of the entry's act_type), result j at
 * c + j*ldc (strides in bytes). Each result is summed in one order that depends only on 'k'. */
typedef void (*lcpu_qdot_fn)(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr,
                            uint8_t * c, size_t ldc);

struct cpu_qdot {
    enum loom_type act_type;       /* the columns' type: LOOM_TYPE_Q8_0 or LOOM_TYPE_Q8_K */
    lcpu_quantize_act_fn quantize;  /* F32 -> act_type */
    lcpu_qdot_fn dot;               /* NULL: the F32 path */
    int rows;                       /* most rows per call of 'dot' (0: the table's dot_mr); kernels that
                                     * prepare the column once per call take more */
};

/* The portable integer kernels (qdot-scalar.c): the scalar table's entries; the AVX2 / AVX-512
 * tables have SIMD kernels of their own for these types (qdot-legacy-*.c, qdot-k-*.c). Figures:
 * bench/cpu-notes.md, "Portable integer kernels". */
void lcpu_quantize_q8_0(const float * x, void * y, int64_t k);
void lcpu_qdot_q8_0_q8_0(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, uint8_t * c,
                        size_t ldc);
#define CPU_QDOT_PORTABLE \
    [LOOM_TYPE_Q8_0] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0, lcpu_qdot_q8_0_q8_0}

/* The SIMD kernels of the 32-element weight types Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL
 * (qdot-legacy-avx2.c, qdot-legacy-avx512.c; *_vnni: vpdpbusd, AVX512-VNNI), with Q8_0 columns
 * quantized as the field's SIMD quantizer does (lcpu_quantize_q8_0_*). Q5_1 takes Q8_0 columns
 * too, not the field's Q8_1: its minimum's term needs each column block's sum, which the kernel
 * computes once per column and block (one more byte product, shared by the tile's rows) instead
 * of reading a stored F16 one. Q4_1 has no integer kernel yet: that same kernel changed the
 * reference engine's greedy text of the stories260K Q4_1 fixture (the field sums Q4_1 through
 * Q8_1's stored sums), so Q4_1 keeps the dequantizing path. */
#define CPU_QDOT_LEGACY_DECL(sfx)                                                                                  \
    void lcpu_qdot_q8_0_##sfx(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, \
                             uint8_t * c, size_t ldc);                                                            \
    void lcpu_qdot_q4_0_##sfx(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, \
                             uint8_t * c, size_t ldc);                                                            \
    void lcpu_qdot_q5_0_##sfx(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, \
                             uint8_t * c, size_t ldc);                                                            \
    void lcpu_qdot_q5_1_##sfx(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda, int nr, \
                             uint8_t * c, size_t ldc);                                                            \
    void lcpu_qdot_iq4_nl_##sfx(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * a, size_t lda,      \
                               int nr, uint8_t * c, size_t ldc);
CPU_QDOT_LEGACY_DECL(avx2)
void lcpu_quantize_q8_0_avx2(const float * x, void * y, int64_t k);
void lcpu_quantize_q8_0_vnni(const float * x, void * y, int64_t k);
CPU_QDOT_LEGACY_DECL(vnni)
#undef CPU_QDOT_LEGACY_DECL
/* Rows per call of those kernels: each call rearranges the column's blocks once for all its rows
 * (qdot-legacy-tmpl.h); K = 768 rows from L2, Q4_0 VNNI, GB/s of weights: 4 rows 17.4, 16 rows
 * 22.6, 64 rows 23.5. */
#define CPU_QDOT_LEGACY_ROWS 32
/* The table entries (designated initializers) of those kernels; sfx: avx2 or vnni. */
#define CPU_QDOT_LEGACY(sfx)                                                          \
    [LOOM_TYPE_Q8_0] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0_##sfx, lcpu_qdot_q8_0_##sfx, CPU_QDOT_LEGACY_ROWS},     \
    [LOOM_TYPE_Q4_0] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0_##sfx, lcpu_qdot_q4_0_##sfx, CPU_QDOT_LEGACY_ROWS},     \
    [LOOM_TYPE_Q5_0] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0_##sfx, lcpu_qdot_q5_0_##sfx, CPU_QDOT_LEGACY_ROWS},     \
    [LOOM_TYPE_Q5_1] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0_##sfx, lcpu_qdot_q5_1_##sfx, CPU_QDOT_LEGACY_ROWS},     \
    [LOOM_TYPE_IQ4_NL] = {LOOM_TYPE_Q8_0, lcpu_quantize_q8_0_##sfx, lcpu_qdot_iq4_nl_##sfx, CPU_QDOT_LEGACY_ROWS}

/* ---- quantized weights: integer GEMM (many columns)
 * Products with more columns than the qdot path serves (ops-matmul.c) and a weight type whose
 * qgemm entry is set quantize the F32 columns once per node into cpu_q8_0x blocks (the codes and
 * F16-rounded scale of the table's Q8_0 quantizer, the scale widened to F32, the block's code
 * sum, and the scaled sum as the field's Q8_1 columns hold it), pack CPU_QGEMM_MR weight rows at a time into a row-interleaved integer panel, and sweep
 * the columns with an 8-row x qgemm_nr-column micro-kernel (qgemm-legacy-tmpl.h). Q4_1 has none:
 * its products with 8-bit prompt columns changed a near-tied greedy token of the stories260K Q4_1
 * fixture ("her toys and her friends" for the reference engine's "her toys and her toys"), with
 * exact block sums and with the field's F16 Q8_1 sums alike, so it keeps the F32 GEMM. */
struct cpu_q8_0x {
    float d;         /* the scale (an F16 value) */
    int32_t s;       /* sum of qs */
    float ds;        /* max|x| / 127 * s rounded to F16, the field's Q8_1 block sum (the minimum's term of Q5_1) */
    int8_t qs[32];
};
#define CPU_QGEMM_MR 8
#define CPU_QGEMM_BLOCK (64 + 8 * 32) /* panel bytes per block of 32 elements (d[8], m[8], codes) */

/* Packs 'n_rows' (1..CPU_QGEMM_MR) weight rows of 'k' elements (a multiple of 32; row r at
 * w + r*ldw, blocks of the entry's type) into one panel of k / 32 * CPU_QGEMM_BLOCK bytes; rows
 * past n_rows are zeros. */
typedef void (*lcpu_qpack_fn)(const uint8_t * w, size_t ldw, int n_rows, int64_t k, void * panel);
/* c[j][r] = sum_i w[r][i] * a[j][i] (F32) for r < mr (<= CPU_QGEMM_MR) and j < nr (1..qgemm_nr):
 * 'panel' as qpack made it, column j at a + j*lda (k / 32 cpu_q8_0x blocks), result j at
 * c + j*ldc (bytes). Each result is summed in one order that depends only on 'k'. */
typedef void (*lcpu_qgemm_fn)(int64_t k, const void * panel, const uint8_t * a, size_t lda, int nr, uint8_t * c, size_t ldc,
                             int mr);
struct cpu_qgemm {
    lcpu_qpack_fn pack;
    lcpu_qgemm_fn gemm; /* NULL: the F32 GEMM path */
};
#define CPU_QGEMM_DECL(wt, sfx)                                                                   \
    void lcpu_qpack_##wt##_##sfx(const uint8_t * w, size_t ldw, int n_rows, int64_t k, void * panel); \
    void lcpu_qgemm_##wt##_##sfx(int64_t k, const void * panel, const uint8_t * a, size_t lda, int nr, uint8_t * c, size_t ldc, int mr);
#define CPU_QGEMM_LEGACY_DECL(sfx)                                                                                   \
    CPU_QGEMM_DECL(q8_0, sfx) CPU_QGEMM_DECL(q4_0, sfx) CPU_QGEMM_DECL(q5_0, sfx)       \
    CPU_QGEMM_DECL(q5_1, sfx) CPU_QGEMM_DECL(iq4_nl, sfx) void lcpu_quantize_q8_0x_##sfx(const float * x, void * y, int64_t k);
CPU_QGEMM_LEGACY_DECL(avx2)
CPU_QGEMM_LEGACY_DECL(vnni)
#undef CPU_QGEMM_LEGACY_DECL
#undef CPU_QGEMM_DECL
#define CPU_QGEMM_ENTRY(T, wt, sfx) [LOOM_TYPE_##T] = {lcpu_qpack_##wt##_##sfx, lcpu_qgemm_##wt##_##sfx}
#define CPU_QGEMM_LEGACY(sfx)                                                                                       \
    CPU_QGEMM_ENTRY(Q8_0, q8_0, sfx), CPU_QGEMM_ENTRY(Q4_0, q4_0, sfx),             \
        CPU_QGEMM_ENTRY(Q5_0, q5_0, sfx), CPU_QGEMM_ENTRY(Q5_1, q5_1, sfx), CPU_QGEMM_ENTRY(IQ4_NL, iq4_nl, sfx)

struct cpu_vec {
    const char * name;          /* "AVX512 FMA F16C BF16", "AVX2 FMA F16C", "scalar" */
    cpu_to_f32_fn f16_to_f32;
    cpu_from_f32_fn f32_to_f16;
    cpu_to_f32_fn bf16_to_f32;
    cpu_from_f32_fn f32_to_bf16;

    cpu_unary_fn silu, gelu;
    cpu_exp_sum_fn exp_sum;

    cpu_dot_fn dot[CPU_W_COUNT];  /* by weight type */
    struct cpu_qdot qdot[LOOM_TYPE_COUNT]; /* by quantized weight type (LOOM_TYPE_*) */
    int dot_mr, dot_nr;           /* largest tile of the dot kernels */
    cpu_dot_rows_fn dot_rows[CPU_W_COUNT]; /* one column against many rows, by row type */
    struct cpu_qgemm qgemm[LOOM_TYPE_COUNT]; /* by quantized weight type */
    lcpu_quantize_act_fn quantize_q8_0x; /* F32 -> cpu_q8_0x columns (set with any qgemm entry) */
    int qgemm_nr;                 /* most columns per qgemm call */
    cpu_mad_fn mad[CPU_W_COUNT];  /* weighted row sums, by row type */

    cpu_pack_fn pack;             /* weight rows -> GEMM panels */
    cpu_gemm_fn gemm_f32;         /* packed F32 panels x F32 columns */
    int gemm_mr, gemm_nr;
    cpu_gemm_fn gemm_bf16;        /* packed BF16 pair panels x BF16 columns; NULL when absent */
    int gemm_bf16_mr, gemm_bf16_nr;
};

/* The kernels in use: the portable scalar table when forced (loom_cpu_set_scalar), else the best the
 * CPU supports (LOOM_CPU_ISA=avx2|avx512|scalar names the table, for tests; another value is ignored
 * with a warning). */
const struct cpu_vec * lcpu_vec_get(void);

/* The tables; the SIMD ones return NULL when not compiled (non-x86 build) -- the CPU check is the caller's. */
const struct cpu_vec * lcpu_vec_scalar(void);
const struct cpu_vec * lcpu_vec_avx2(void);
/* 'wide_rows': one-column products too on the 512-bit kernels (else AMD processors take the AVX2
 * row kernels for them, measured faster there). */
const struct cpu_vec * lcpu_vec_avx512(bool with_bf16, bool wide_rows);

#endif
