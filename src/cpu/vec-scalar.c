/* vec-scalar.c -- the portable kernel table: plain C, one float accumulator per result, summed in k order. */
#include "cpu/vec.h"
#include "cpu/qdot-k.h"

#include <math.h>
#include <string.h>

static void f16_to_f32(const uint16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = loom_fp16_to_fp32(x[i]);
}
static void f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = loom_fp32_to_fp16(x[i]);
}
static void bf16_to_f32(const uint16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = loom_bf16_to_fp32(x[i]);
}
static void f32_to_bf16(const float * x, uint16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = loom_fp32_to_bf16(x[i]);
}

static void silu(const float * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void gelu(const float * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

static double exp_sum(float * x, int64_t n, float max) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        s += x[i];
    }
    return s;
}

static inline float wload(enum cpu_wtype wt, const uint8_t * row, int64_t i) {
    uint16_t h;
    float f;
    switch (wt) {
    case CPU_W_F16: memcpy(&h, row + 2 * i, 2); return loom_fp16_to_fp32(h);
    case CPU_W_BF16: memcpy(&h, row + 2 * i, 2); return loom_bf16_to_fp32(h);
    default: memcpy(&f, row + 4 * i, 4); return f;
    }
}

static inline void dot_impl(enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b,
                            size_t ldb, int nr, uint8_t * c, size_t ldc) {
    for (int j = 0; j < nr; j++) {
        const float * bj = (const float *)(b + j * ldb);
        float * cj = (float *)(c + j * ldc);
        for (int r = 0; r < mr; r++) {
            const uint8_t * wr = w + r * ldw;
            float s = 0.0f;
            for (int64_t i = 0; i < k; i++) s += wload(wt, wr, i) * bj[i];
            cj[r] = s;
        }
    }
}

static void dot_f32(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc) {
    dot_impl(CPU_W_F32, k, w, ldw, mr, b, ldb, nr, c, ldc);
}
static void dot_f16(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc) {
    dot_impl(CPU_W_F16, k, w, ldw, mr, b, ldb, nr, c, ldc);
}
static void dot_bf16(int64_t k, const uint8_t * w, size_t ldw, int mr, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc) {
    dot_impl(CPU_W_BF16, k, w, ldw, mr, b, ldb, nr, c, ldc);
}

static inline void dot_rows_impl(enum cpu_wtype wt, int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) {
    for (int r = 0; r < n; r++) {
        float s = 0.0f;
        for (int64_t i = 0; i < k; i++) s += wload(wt, w + (size_t)r * ldw, i) * b[i];
        c[r] = s;
    }
}

static void dot_rows_f32(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) { dot_rows_impl(CPU_W_F32, k, w, ldw, n, b, c); }
static void dot_rows_f16(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) { dot_rows_impl(CPU_W_F16, k, w, ldw, n, b, c); }
static void dot_rows_bf16(int64_t k, const uint8_t * w, size_t ldw, int n, const float * b, float * c) { dot_rows_impl(CPU_W_BF16, k, w, ldw, n, b, c); }

static inline void mad_impl(enum cpu_wtype wt, int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) {
    for (int64_t i = 0; i < n; i++) {
        float s = y[i];
        for (int r = 0; r < nrows; r++) s += wload(wt, x + r * ldx, i) * a[r];
        y[i] = s;
    }
}

static void mad_f32(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) { mad_impl(CPU_W_F32, n, x, ldx, nrows, a, y); }
static void mad_f16(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) { mad_impl(CPU_W_F16, n, x, ldx, nrows, a, y); }
static void mad_bf16(int64_t n, const uint8_t * x, size_t ldx, int nrows, const float * a, float * y) { mad_impl(CPU_W_BF16, n, x, ldx, nrows, a, y); }

static void pack(const uint8_t * const * rows, int n_rows, enum cpu_wtype wt, int64_t n, void * panel_, int mr) {
    float * panel = panel_;
    for (int r = 0; r < mr; r++) {
        for (int64_t k = 0; k < n; k++) panel[k * mr + r] = r < n_rows ? wload(wt, rows[r], k) : 0.0f;
    }
}

enum { S_MR = 8, S_NR = 4 };

static void gemm_f32(int64_t kc, const void * ap_, const uint8_t * b, size_t ldb, int nr, uint8_t * c, size_t ldc, int mr,
                     bool accumulate) {
    const float * ap = ap_;
    float acc[S_NR][S_MR];
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < nr; j++) {
        const float * bj = (const float *)(b + j * ldb);
        for (int64_t k = 0; k < kc; k++) {
            const float * a = ap + k * S_MR;
            float bv = bj[k];
            for (int r = 0; r < S_MR; r++) acc[j][r] += a[r] * bv;
        }
    }
    for (int j = 0; j < nr; j++) {
        float * cj = (float *)(c + j * ldc);
        for (int r = 0; r < mr; r++) cj[r] = accumulate ? cj[r] + acc[j][r] : acc[j][r];
    }
}

static const struct cpu_vec scalar_table = {
    .name = "scalar",
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
    .bf16_to_f32 = bf16_to_f32,
    .f32_to_bf16 = f32_to_bf16,
    .silu = silu,
    .gelu = gelu,
    .exp_sum = exp_sum,
    .dot = {[CPU_W_F32] = dot_f32, [CPU_W_F16] = dot_f16, [CPU_W_BF16] = dot_bf16},
    .qdot = {CPU_QDOT_PORTABLE,
             CPU_QDOT_K_TABLE(scalar)}, /* faster than dequantizing here: bench/cpu-notes.md */

    .dot_mr = 4,
    .dot_nr = 4,
    .dot_rows = {[CPU_W_F32] = dot_rows_f32, [CPU_W_F16] = dot_rows_f16, [CPU_W_BF16] = dot_rows_bf16},
    .mad = {[CPU_W_F32] = mad_f32, [CPU_W_F16] = mad_f16, [CPU_W_BF16] = mad_bf16},
    .pack = pack,
    .gemm_f32 = gemm_f32,
    .gemm_mr = S_MR,
    .gemm_nr = S_NR,
    .gemm_bf16 = NULL,
};

const struct cpu_vec * lcpu_vec_scalar(void) { return &scalar_table; }
