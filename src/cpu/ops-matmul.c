/* ops-matmul.c -- MUL_MAT: dst[i, j] = sum_k a[k, i] * b[k, j], batched with broadcasting.
 *
 * Three paths, chosen from the node's shapes and the kernel table only (never from the thread
 * count, so results do not depend on it):
 *  - dot:  few columns (token generation): weight rows are streamed once, in their own type, and
 *          dotted with every column (vec->dot: several rows x several columns per pass).
 *  - gemm: many columns: blocked as in Goto & van de Geijn ("Anatomy of high-performance matrix
 *          multiplication", 2008): for each KC-slice of k and MC-block of weight rows, the block is
 *          packed (converted to F32, transposed into MR-row panels) into per-thread scratch and
 *          a register-blocked MR x NR micro-kernel sweeps every column against it.
 *  - gemm_bf16: as gemm, for BF16 weights on CPUs with AVX512-BF16: panels keep BF16 pairs and
 *          the columns are converted to BF16 once per node (vdpbf16ps).
 *  - qdot: one column (MM_QDOT_MAX_N) with a quantized weight type that has an integer kernel (vec.h, "quantized
 *          weights"): the columns are quantized once per node (Q8_0 / Q8_K) into shared scratch,
 *          then the weight rows are dotted with them block by block in integers.
 *  - qgemm: more columns with a 32-element quantized weight type that has an integer GEMM (vec.h,
 *          "integer GEMM"): the columns are quantized once per node (cpu_q8_0x) into shared
 *          scratch; each thread packs blocks of its weight rows, 8 at a time, into integer panels
 *          (per-thread scratch) and sweeps its columns with the 8-row micro-kernel.
 * Other quantized weights (Q4_0 ... IQ4_XS) take the dot and gemm paths through their dequantizer: the dot path
 * dequantizes a micro-tile's rows (whole rows, into per-thread scratch) and dots them in F32; the
 * gemm path dequantizes rows into F32 while packing its panels (MM_KC is a multiple of every block
 * length, so a slice of k is whole blocks). Activations stay F32, so the results equal an F32
 * product with the dequantized weights (same summation order).
 * Threads split the weight rows (of all batches) in whole micro-tiles, and the columns too when
 * there are fewer row blocks than threads; no sum is ever split, and every result is summed in an
 * order fixed by K alone. Columns that are not dense F32 rows are converted once per node into
 * shared scratch (then a barrier).
 * OpenBLAS was measured against these kernels and was not faster (bench/cpu-notes.md); its results
 * could also depend on its own threading, which would break the thread-count invariance. */
#include "cpu/cpu-impl.h"

enum {
    MM_KC = 512,      /* k per packed slice (even, so BF16 pairs never straddle slices; a multiple of 256, so quantized slices are whole blocks) */
    MM_MC = 144,      /* weight rows per packed block (rounded down to a multiple of MR) */
    MM_DOT_MAX_N = 8, /* the dot path serves N <= this (measured: it beats packing up to ~8 columns) */
    /* the qdot path serves N <= this: token generation only. More columns of the 32-element
     * types take the integer GEMM (qgemm); those of the super-block types stay on the
     * dequantizing paths, whose F32 sums kept the reference engine's greedy text on every
     * stories260K fixture, where 8-bit columns on short prompts changed a near-tied token */
    MM_QDOT_MAX_N = 1,
    MM_DOT_CLAIM_BYTES = 131072, /* weight bytes a thread claims at a time on the dot path */
    MM_DOT_CLAIM_MIN_BYTES = 524288, /* smaller products split statically (a claim costs more than it balances) */

    MM_QGEMM_PANEL_BYTES = 196608, /* integer panel bytes per packed row block (stays in L2 while the columns sweep it) */
};

enum mm_path { MM_DOT, MM_QDOT, MM_QGEMM, MM_GEMM, MM_GEMM_BF16 };

/* What a node needs, derived from its shapes and the kernel table. */
struct mm_plan {
    int64_t K, M, N;
    int64_t nb2, nb3;          /* batches of the result (b's ne2, ne3) */
    int64_t r2, r3;            /* broadcast ratios b/a over dims 2 and 3 */
    enum mm_path path;
    enum cpu_wtype wt;
    bool quant;                /* a is a quantized type: rows go through its to_float */
    int unit;                  /* rows of a per work unit (the micro-tile height) */
    int64_t mc;                /* rows per packed block */
    bool convert_b;            /* columns converted into shared scratch */
    bool own_b;                /* ... or the one column into each thread's own scratch (no barrier) */
    size_t b_row;              /* bytes of one converted column */
    size_t shared, local;      /* scratch bytes */
};

static enum cpu_wtype wtype(enum loom_type t) {
    return t == LOOM_TYPE_F16 ? CPU_W_F16 : t == LOOM_TYPE_BF16 ? CPU_W_BF16 : CPU_W_F32;
}

static void mm_make_plan(const struct loom_tensor * dst, const struct cpu_vec * vec, struct mm_plan * pl) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    memset(pl, 0, sizeof *pl);
    pl->K = a->ne[0];
    pl->M = a->ne[1];
    pl->N = b->ne[1];
    pl->nb2 = b->ne[2];
    pl->nb3 = b->ne[3];
    pl->r2 = b->ne[2] / a->ne[2];
    pl->r3 = b->ne[3] / a->ne[3];
    pl->wt = wtype(a->type);
    pl->quant = cpu_is_quant_type(a->type);
    const bool a_dense = a->nb[0] == loom_type_size(a->type);
    const struct cpu_qdot * qd = pl->quant ? &vec->qdot[a->type] : NULL;
    if (pl->N <= MM_QDOT_MAX_N && a_dense && qd && qd->dot) {
        pl->path = MM_QDOT;
        pl->unit = qd->rows ? qd->rows : vec->dot_mr;
    } else if (a_dense && pl->quant && vec->qgemm[a->type].gemm && vec->quantize_q8_0x) {
        pl->path = MM_QGEMM;
        pl->unit = CPU_QGEMM_MR;
    } else if (pl->N <= MM_DOT_MAX_N && a_dense) {
        pl->path = MM_DOT;
        pl->unit = vec->dot_mr;
    } else if (pl->wt == CPU_W_BF16 && vec->gemm_bf16) {
        pl->path = MM_GEMM_BF16;
        pl->unit = vec->gemm_bf16_mr;
    } else {
        pl->path = MM_GEMM;
        pl->unit = vec->gemm_mr;
    }
    const int64_t n_cols = pl->N * pl->nb2 * pl->nb3;
    if (pl->path == MM_GEMM_BF16) {
        pl->convert_b = true;
        pl->b_row = (size_t)cpu_round_up(pl->K, 2) * 2;
    } else if (pl->path == MM_QDOT) {
        pl->convert_b = true;
        pl->b_row = loom_row_size(qd->act_type, pl->K);
    } else if (pl->path == MM_QGEMM) {
        pl->convert_b = true;
        pl->b_row = (size_t)(pl->K / 32) * sizeof(struct cpu_q8_0x);
    } else {
        pl->convert_b = b->nb[0] != 4 || b->nb[1] % 4 != 0;
        pl->b_row = (size_t)pl->K * 4;
    }
    /* a single quantized column (token generation) is quantized by every thread for itself: the
     * same bytes a few hundred nanoseconds of work, where sharing it costs a barrier per product
     * and leaves the other threads waiting for the one that quantizes (bench/cpu-notes.md) */
    pl->own_b = pl->path == MM_QDOT && n_cols == 1;
    pl->shared = pl->convert_b && !pl->own_b ? (size_t)n_cols * loom_pad(pl->b_row, 64) : 0;
    pl->b_row = pl->convert_b ? loom_pad(pl->b_row, 64) : pl->b_row;
    /* local: a converted column (phase 1), or the packed block and one panel's gathered rows (phase 2);
     * with own_b the column, then phase 1 */
    size_t phase1 = pl->convert_b ? (size_t)pl->K * 4 + 64 : 0;
    if (pl->own_b) phase1 += pl->b_row;
    size_t phase2 = 0;
    if (pl->path == MM_DOT && pl->quant) phase2 = (size_t)pl->unit * (size_t)pl->K * 4 + 64; /* dequantized rows */
    if (pl->path == MM_QGEMM) { /* a block of row panels */
        const size_t group = (size_t)(pl->K / 32) * CPU_QGEMM_BLOCK;
        int64_t groups = (int64_t)(MM_QGEMM_PANEL_BYTES / group);
        if (groups < 1) groups = 1;
        if (groups > MM_MC / CPU_QGEMM_MR) groups = MM_MC / CPU_QGEMM_MR;
        pl->mc = groups * CPU_QGEMM_MR;
        phase2 = (size_t)groups * group + 64;
    } else if (pl->path != MM_DOT) {
        pl->mc = MM_MC / pl->unit * pl->unit;
        if (pl->mc == 0) pl->mc = pl->unit;
        phase2 = (size_t)(pl->mc + pl->unit) * MM_KC * 4 + 64; /* panels, then the gather rows */
    }
    pl->local = phase1 > phase2 ? phase1 : phase2;
}

static bool mm_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    if (!a || !b || !cpu_is_weight_readable(a) || b->type != LOOM_TYPE_F32 || dst->type != LOOM_TYPE_F32) return false;
    if (a->ne[0] != b->ne[0] || a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3]) return false;
    if (dst->ne[0] != a->ne[1] || dst->ne[1] != b->ne[1] || dst->ne[2] != b->ne[2] || dst->ne[3] != b->ne[3]) return false;
    return dst->nb[0] == 4 && dst->nb[1] % 4 == 0;
}

static void mm_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared,
                    size_t * local) {
    struct mm_plan pl;
    mm_make_plan(dst, vec, &pl);
    *shared = pl.shared;
    *local = pl.local;
}

/* ---------------------------------------------------------------- columns */

/* Converts this thread's share of b's columns into the shared scratch (F32, BF16 zero-padded to
 * an even length, or for qdot the activation blocks of a_type's kernel), batch-major as the
 * result is. */
static void mm_convert_b(const struct cpu_params * p, const struct loom_tensor * b, enum loom_type a_type, const struct mm_plan * pl) {
    int64_t c0, c1, j, i2, i3;
    if (pl->own_b) {
        c0 = 0, c1 = 1;
    } else {
        cpu_split(pl->N * pl->nb2 * pl->nb3, p, &c0, &c1);
    }
    uint8_t * const cols = pl->own_b ? p->local : p->shared;
    uint8_t * const tmp = pl->own_b ? p->local + pl->b_row : p->local;
    for (int64_t c = c0; c < c1; c++) {
        cpu_row_coords(b, c, &j, &i2, &i3);
        const uint8_t * src = cpu_elem(b, 0, j, i2, i3);
        uint8_t * out = cols + (size_t)c * pl->b_row;
        if (pl->path != MM_GEMM_BF16 && pl->path != MM_QDOT && pl->path != MM_QGEMM) {
            lcpu_to_f32(p->vec, LOOM_TYPE_F32, src, b->nb[0], (float *)out, pl->K);
            continue;
        }
        const float * x = (const float *)src;
        if (b->nb[0] != 4) {
            lcpu_to_f32(p->vec, LOOM_TYPE_F32, src, b->nb[0], (float *)tmp, pl->K);
            x = (const float *)tmp;
        }
        if (pl->path == MM_QDOT) {
            p->vec->qdot[a_type].quantize(x, out, pl->K);
            continue;
        }
        if (pl->path == MM_QGEMM) {
            p->vec->quantize_q8_0x(x, out, pl->K);
            continue;
        }
        p->vec->f32_to_bf16(x, (uint16_t *)out, pl->K);
        if (pl->K % 2) ((uint16_t *)out)[pl->K] = 0;
    }
}

/* ---------------------------------------------------------------- packing */

/* Packs rows [i0, i0 + mc) x k [k0, k0 + kc) of one weight matrix 'w' into panels of 'mr' rows:
 * F32 panel[k][r], or for BF16 pairs panel[k/2][r] (32-bit words, the odd tail paired with 0).
 * Dense rows go straight to the (SIMD) packer; strided ones are first gathered, and quantized
 * ones dequantized (k0 and kc are whole blocks), into 'tmp' (mr x MM_KC elements). */
static void mm_pack(const struct cpu_params * p, const struct loom_tensor * a, const uint8_t * w, const struct mm_plan * pl,
                    int64_t i0, int64_t mc, int64_t k0, int64_t kc, int mr, uint8_t * panels) {
    const size_t nb0 = a->nb[0], nb1 = a->nb[1], es = loom_type_size(a->type);
    const int64_t blck = loom_blck_size(a->type);
    const bool dense = nb0 == es && !pl->quant, pairs = pl->path == MM_GEMM_BF16;
    uint8_t * tmp = p->local + (size_t)pl->mc * MM_KC * 4;
    const uint8_t * rows[64];
    LOOM_ASSERT(mr <= 64);
    const int64_t kp = pairs ? kc / 2 : kc;          /* whole words the packer moves */
    const size_t panel_bytes = (size_t)(pairs ? (kc + 1) / 2 : kc) * (size_t)mr * 4;
    for (int64_t pi = 0; pi * mr < mc; pi++) {
        const int n_rows = (int)(mc - pi * mr < mr ? mc - pi * mr : mr);
        enum cpu_wtype wt = pairs ? CPU_W_F32 : pl->wt;
        for (int r = 0; r < n_rows; r++) {
            const uint8_t * src = w + (i0 + pi * mr + r) * nb1 + k0 / blck * nb0;
            if (dense) {
                rows[r] = src;
            } else if (pairs) { /* gather BF16 elements, zero-padded to whole pairs */
                uint16_t * t = (uint16_t *)(tmp + (size_t)r * MM_KC * 4);
                for (int64_t k = 0; k < kc; k++) memcpy(&t[k], src + k * nb0, 2);
                if (kc % 2) t[kc] = 0;
                rows[r] = (const uint8_t *)t;
            } else {
                float * t = (float *)(tmp + (size_t)r * MM_KC * 4);
                lcpu_to_f32(p->vec, a->type, src, nb0, t, kc);
                rows[r] = (const uint8_t *)t;
                wt = CPU_W_F32;
            }
        }
        uint8_t * panel = panels + (size_t)pi * panel_bytes;
        p->vec->pack(rows, n_rows, wt, kp, panel, mr);
        if (pairs && kc % 2) { /* the last pair of dense rows: (w[kc-1], 0) */
            uint32_t * last = (uint32_t *)panel + kp * mr;
            for (int r = 0; r < mr; r++) {
                uint16_t lo = 0;
                if (r < n_rows) memcpy(&lo, rows[r] + (kc - 1) * 2, 2);
                last[r] = lo;
            }
        }
    }
}

/* ---------------------------------------------------------------- blocks */

/* Where the kernels find one batch's operands. */
struct mm_batch {
    const uint8_t * w;   /* weight matrix: row i at w + i*nb1 */
    const uint8_t * b;   /* column j at b + j*ldb */
    size_t ldb;
    uint8_t * c;         /* result column j at c + j*ldc */
    size_t ldc;
};

/* Results [m0, m1) x [n0, n1) of one batch. */
static void mm_block_dot(const struct cpu_params * p, const struct loom_tensor * a, const struct mm_plan * pl,
                         const struct mm_batch * bt, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const cpu_dot_fn dot = p->vec->dot[pl->wt];
    const int dmr = pl->path == MM_QDOT ? pl->unit : p->vec->dot_mr, dnr = p->vec->dot_nr;
    for (int64_t i = m0; i < m1; i += dmr) {
        const int mr = (int)(m1 - i < dmr ? m1 - i : dmr);
        const uint8_t * w = bt->w + i * a->nb[1];
        size_t ldw = a->nb[1];
        if (pl->path == MM_DOT && pl->quant) { /* the tile's rows dequantized into scratch, then an F32 dot */
            float * rows = (float *)p->local;
            for (int r = 0; r < mr; r++) lcpu_to_f32(p->vec, a->type, w + r * a->nb[1], 0, rows + r * pl->K, pl->K);
            w = (const uint8_t *)rows;
            ldw = (size_t)pl->K * 4;
        }
        for (int64_t j = n0; j < n1; j += dnr) {
            const int nr = (int)(n1 - j < dnr ? n1 - j : dnr);
            if (pl->path == MM_QDOT) {
                p->vec->qdot[a->type].dot(pl->K, w, ldw, mr, bt->b + j * bt->ldb, bt->ldb, nr, bt->c + j * bt->ldc + i * 4, bt->ldc);
            } else {
                dot(pl->K, w, ldw, mr, bt->b + j * bt->ldb, bt->ldb, nr, bt->c + j * bt->ldc + i * 4, bt->ldc);
            }
        }
    }
}

/* The weights of the block packed after the current one, fetched into L2 a slice at a time while
 * the current block's columns are swept (a hint: never a fault, results unchanged), so that packing
 * it reads the cache instead of waiting for memory (measured: bench/cpu-notes.md). */
struct mm_prefetch {
    const uint8_t * w;   /* first element of the block's first row */
    size_t nb1;          /* bytes between rows */
    int64_t row_lines;   /* 64-byte lines per row (0: nothing to fetch) */
    int64_t rows;        /* rows in the block */
    int64_t row, line;   /* the next line to fetch: row, line in the row */
};

static void mm_prefetch_set(struct mm_prefetch * f, const struct loom_tensor * a, const struct mm_batch * bt, int64_t i0, int64_t rows,
                            int64_t k0, int64_t kc) {
    const size_t es = loom_type_size(a->type);
    const int64_t blck = loom_blck_size(a->type); /* k0 and kc: whole blocks */
    f->w = bt->w + i0 * a->nb[1] + k0 / blck * a->nb[0];
    f->nb1 = a->nb[1];
    f->row_lines = a->nb[0] == es ? ((int64_t)es * (kc / blck) + 63) / 64 : 0; /* strided rows: no hint */
    f->rows = f->row_lines ? rows : 0;
    f->row = f->line = 0;
}

static void mm_prefetch_some(struct mm_prefetch * f, int64_t n) {
    for (int64_t i = 0; i < n && f->row < f->rows; i++) {
        __builtin_prefetch(f->w + f->row * f->nb1 + f->line * 64, 0, 2);
        if (++f->line == f->row_lines) f->line = 0, f->row++;
    }
}

/* Results [m0, m1) x [n0, n1) of one batch by the integer GEMM: per block of pl->mc rows, the
 * rows are packed into 8-row panels, then every column tile sweeps the block's panels. */
static void mm_block_qgemm(const struct cpu_params * p, const struct loom_tensor * a, const struct mm_plan * pl,
                           const struct mm_batch * bt, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const struct cpu_qgemm * qg = &p->vec->qgemm[a->type];
    const int NR = p->vec->qgemm_nr;
    const size_t group = (size_t)(pl->K / 32) * CPU_QGEMM_BLOCK;
    uint8_t * panels = p->local;
    for (int64_t i0 = m0; i0 < m1; i0 += pl->mc) {
        const int64_t mc = m1 - i0 < pl->mc ? m1 - i0 : pl->mc;
        for (int64_t g = 0; g * CPU_QGEMM_MR < mc; g++) {
            const int rows = (int)(mc - g * CPU_QGEMM_MR < CPU_QGEMM_MR ? mc - g * CPU_QGEMM_MR : CPU_QGEMM_MR);
            qg->pack(bt->w + (i0 + g * CPU_QGEMM_MR) * a->nb[1], a->nb[1], rows, pl->K, panels + (size_t)g * group);
        }
        for (int64_t j = n0; j < n1; j += NR) {
            const int nr = (int)(n1 - j < NR ? n1 - j : NR);
            for (int64_t g = 0; g * CPU_QGEMM_MR < mc; g++) {
                const int rows = (int)(mc - g * CPU_QGEMM_MR < CPU_QGEMM_MR ? mc - g * CPU_QGEMM_MR : CPU_QGEMM_MR);
                qg->gemm(pl->K, panels + (size_t)g * group, bt->b + j * bt->ldb, bt->ldb, nr,
                         bt->c + j * bt->ldc + (i0 + g * CPU_QGEMM_MR) * 4, bt->ldc, rows);
            }
        }
    }
}

static void mm_block_gemm(const struct cpu_params * p, const struct loom_tensor * a, const struct mm_plan * pl,
                          const struct mm_batch * bt, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const bool bf16 = pl->path == MM_GEMM_BF16;
    const cpu_gemm_fn gemm = bf16 ? p->vec->gemm_bf16 : p->vec->gemm_f32;
    const int MR = bf16 ? p->vec->gemm_bf16_mr : p->vec->gemm_mr;
    const int NR = bf16 ? p->vec->gemm_bf16_nr : p->vec->gemm_nr;
    const size_t b_elem = bf16 ? 2 : 4;
    uint8_t * panels = p->local;
    for (int64_t k0 = 0; k0 < pl->K; k0 += MM_KC) {
        const int64_t kc = pl->K - k0 < MM_KC ? pl->K - k0 : MM_KC;
        const size_t panel_bytes = (size_t)(bf16 ? (kc + 1) / 2 : kc) * MR * 4;
        for (int64_t i0 = m0; i0 < m1; i0 += pl->mc) {
            const int64_t mc = m1 - i0 < pl->mc ? m1 - i0 : pl->mc;
            mm_pack(p, a, bt->w, pl, i0, mc, k0, kc, MR, panels);
            /* the next block: the next rows of this k-slice, else the first rows of the next slice */
            struct mm_prefetch pf = {0};
            int64_t pf_step = 0;
            const int64_t ni = i0 + mc < m1 ? i0 + mc : m0, nk = i0 + mc < m1 ? k0 : k0 + MM_KC;
            if (nk < pl->K) {
                const int64_t nmc = m1 - ni < pl->mc ? m1 - ni : pl->mc, nkc = pl->K - nk < MM_KC ? pl->K - nk : MM_KC;
                mm_prefetch_set(&pf, a, bt, ni, nmc, nk, nkc);
                const int64_t calls = ((n1 - n0 + NR - 1) / NR) * ((mc + MR - 1) / MR);
                pf_step = (pf.rows * pf.row_lines + calls - 1) / calls;
            }
            for (int64_t j = n0; j < n1; j += NR) {
                const int nr = (int)(n1 - j < NR ? n1 - j : NR);
                const uint8_t * bj = bt->b + j * bt->ldb + k0 * b_elem;
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    const int mr = (int)(mc - ir < MR ? mc - ir : MR);
                    mm_prefetch_some(&pf, pf_step);
                    gemm(kc, panels + (ir / MR) * panel_bytes, bj, bt->ldb, nr,
                         bt->c + j * bt->ldc + (i0 + ir) * 4, bt->ldc, mr, k0 > 0);
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- the node */

/* How a node's work is cut: units of 'unit' weight rows, of one batch and one part of the columns.
 * Units are numbered batch by batch, or with 'batch_inner' the batches of one row unit next to each
 * other (below). */
struct mm_units {
    int64_t m_units;   /* row units per batch */
    int64_t per_batch; /* units per batch (column parts x row units) */
    int64_t n_chunk;   /* columns per part */
    int64_t batches;
    bool batch_inner;
};

/* Computes work units [u0, u1). */
static void mm_units_run(const struct cpu_params * p, struct loom_tensor * dst, const struct mm_plan * pl, const struct mm_units * w,
                         int64_t u0, int64_t u1) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    while (u0 < u1) {
        /* a run of row units of one batch and column part (one unit when the batches are inner) */
        int64_t batch, part, mu, run;
        if (w->batch_inner) {
            batch = u0 % w->batches;
            part = u0 / w->batches / w->m_units;
            mu = u0 / w->batches % w->m_units;
            run = 1;
        } else {
            batch = u0 / w->per_batch;
            part = (u0 % w->per_batch) / w->m_units;
            mu = u0 % w->m_units;
            run = u1 - u0 < w->m_units - mu ? u1 - u0 : w->m_units - mu;
        }
        const int64_t m0 = mu * pl->unit, m1 = (mu + run) * pl->unit < pl->M ? (mu + run) * pl->unit : pl->M;
        const int64_t n0 = part * w->n_chunk, n1 = n0 + w->n_chunk < pl->N ? n0 + w->n_chunk : pl->N;
        const int64_t i2 = batch % pl->nb2, i3 = batch / pl->nb2;
        struct mm_batch bt = {
            .w = cpu_elem(a, 0, 0, i2 / pl->r2, i3 / pl->r3),
            .c = cpu_elem(dst, 0, 0, i2, i3),
            .ldc = dst->nb[1],
        };
        if (pl->convert_b) {
            bt.b = (pl->own_b ? p->local : p->shared) + (size_t)batch * pl->N * pl->b_row;
            bt.ldb = pl->b_row;
        } else {
            bt.b = cpu_elem(b, 0, 0, i2, i3);
            bt.ldb = b->nb[1];
        }
        if (pl->path == MM_DOT || pl->path == MM_QDOT) {
            mm_block_dot(p, a, pl, &bt, m0, m1, n0, n1);
        } else if (pl->path == MM_QGEMM) {
            mm_block_qgemm(p, a, pl, &bt, m0, m1, n0, n1);
        } else {
            mm_block_gemm(p, a, pl, &bt, m0, m1, n0, n1);
        }
        u0 += run;
    }
}

static void mm_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct loom_tensor * a = dst->src[0], * b = dst->src[1];
    struct mm_plan pl;
    mm_make_plan(dst, p->vec, &pl);

    if (pl.K == 0) { /* empty sums */
        int64_t r0, r1, i1, i2, i3;
        cpu_split(loom_nrows(dst), p, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            cpu_row_coords(dst, r, &i1, &i2, &i3);
            memset(cpu_elem(dst, 0, i1, i2, i3), 0, (size_t)pl.M * 4);
        }
        return;
    }
    if (pl.convert_b) {
        mm_convert_b(p, b, a->type, &pl);
        if (!pl.own_b) lcpu_barrier(p);
    }

    /* Work units: 'unit' weight rows x a part of the columns, of one batch. The columns are cut
     * into parts (whole micro-tiles) only when the row units alone cannot keep every thread busy;
     * no result depends on how the work is cut. */
    const int64_t m_units = (pl.M + pl.unit - 1) / pl.unit, batches = pl.nb2 * pl.nb3;
    const int64_t nr = pl.path == MM_DOT || pl.path == MM_QDOT ? p->vec->dot_nr : pl.path == MM_QGEMM ? p->vec->qgemm_nr : pl.path == MM_GEMM ? p->vec->gemm_nr : p->vec->gemm_bf16_nr;
    int64_t n_parts = 1;
    if (m_units * batches < 2 * p->nth) n_parts = (2 * p->nth + m_units * batches - 1) / (m_units * batches);
    const int64_t n_chunk = cpu_round_up((pl.N + n_parts - 1) / n_parts, nr);
    n_parts = (pl.N + n_chunk - 1) / n_chunk;
    const int64_t per_batch = n_parts * m_units;
    /* Rows of several batches that interleave in memory (the K cache viewed per head: one cell's
     * rows of every head side by side, the next cell's a row stride further) are read a row unit
     * of every batch at a time: batch by batch, each would read a head's 128 bytes of every cell's
     * 1,536 (110m), a stride the prefetchers follow badly (bench/cpu-notes.md). */
    const struct mm_units w = {.m_units = m_units, .per_batch = per_batch, .n_chunk = n_chunk, .batches = batches,
                               .batch_inner = (pl.path == MM_DOT || pl.path == MM_QDOT) && batches > 1 && a->ne[2] > 1 &&
                                              a->nb[2] < a->nb[1]};
    const int64_t total = batches * per_batch;
    const int64_t row_bytes = (int64_t)loom_row_size(a->type, pl.K);
    if ((pl.path == MM_DOT || pl.path == MM_QDOT) && p->nth > 1 && row_bytes * pl.M * batches >= MM_DOT_CLAIM_MIN_BYTES) {
        /* streaming weights: each thread first streams a contiguous share of four fifths of the
         * units, then the rest is handed out on demand, so a thread that gets less bandwidth takes
         * fewer rows instead of keeping the others waiting at the barrier (long shares first:
         * every break in a stream costs a prefetcher ramp and the prefetches past its end) */
        const int64_t head = total * 4 / 5, tail = total - head;
        int64_t u0, u1;
        cpu_split(head, p, &u0, &u1);
        mm_units_run(p, dst, &pl, &w, u0, u1);
        int64_t claim = MM_DOT_CLAIM_BYTES / (row_bytes * pl.unit);
        const int64_t fair = tail / (4 * p->nth); /* at least four claims per thread */
        if (claim > fair) claim = fair;
        if (claim < 1) claim = 1;
        for (;;) {
            const int64_t c0 = head + cpu_claim(p, claim);
            if (c0 >= total) break;
            mm_units_run(p, dst, &pl, &w, c0, c0 + claim < total ? c0 + claim : total);
        }
        return;
    }
    int64_t u0, u1;
    cpu_split(total, p, &u0, &u1);
    mm_units_run(p, dst, &pl, &w, u0, u1);
}

const struct lcpu_op_impl lcpu_op_mul_mat = {
    .supports = mm_supports,
    .compute = mm_compute,
    .work_size = mm_work,
};
