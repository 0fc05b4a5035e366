/* ops-attn.c -- FLASH_ATTN_EXT: softmax(q K^T * scale + mask) V in one pass over the KV cells, with
 * an online softmax (Milakov & Gimelshein 2018; Dao et al. 2022), tiled over the KV cells.
 *
 * Work is cut into items: a group of KV heads of one batch entry, a block of their query columns
 * (the queries times the heads that share a KV head, so K and V are read once for all of them), and
 * a chunk of the KV cells. Threads take items on demand. With many queries (a prompt) an item has
 * one KV head and every KV cell. With few (token generation, flash-decoding: Dao et al. 2023) the
 * cells are cut into chunks, so that two threads are busy whatever the head count, and an item
 * takes every KV head of its chunk, tile by tile: the heads of one cell lie side by side in the
 * cache, so a tile's rows of all heads are one dense stretch of memory (a head alone would read
 * 128 of every 1,536 bytes on a 110m model, which ran 5x below the memory's streaming speed), and
 * where the rows are read in place the tile is swept cell block by cell block for every head at
 * once (fa_tile_heads), so that the stretch is read front to back; with one query per head its
 * scores take the table's dot_rows (a vector's length of rows summed together), not 4-row tiles
 * that end in one horizontal sum per row. Each
 * item leaves its partial maximum, sum and weighted values in scratch memory and, after a barrier,
 * the chunks of each column are merged in chunk order. The cut depends only on the shapes, so
 * results do not depend on the thread count.
 *
 * K and V rows are read through one reader per row type: F32/F16/BF16 rows go straight into the
 * kernel table's dot products and weighted row sums; a block type (Q8_0, Q4_0, ...) is expanded
 * row by row with its 'to_float' into a tile buffer that the F32 kernels then read (and so are
 * short F16/BF16 rows, see FA_ROW_VEC). */
#include "cpu/cpu-impl.h"

#include <math.h>

enum {
    FA_TILE = 64,       /* KV cells per tile: the scores of a tile stay in L1 */
    FA_COLS = 16,       /* query columns per item at most */
    FA_CHUNK = 128,     /* KV cells per chunk when the cells are split */
    FA_SPLIT_NQ = 4,    /* split the KV cells when there are at most this many queries */
    /* float rows whose length is a multiple of this are read in place; shorter or odd ones (the
     * 8-element heads of small models) are expanded to F32 a tile at a time, zero-padded to a
     * multiple of it, so that the kernels run on whole vectors (their tails go element by element) */
    FA_ROW_VEC = 16,
    FA_SPAN = FA_TILE * 512, /* floats of the buffer that converts a tile of short F16/BF16 rows in one pass */
};

/* How 'dst' is cut into items (a function of the shapes only). */
struct fa_plan {
    int64_t D, Dv, n_q, n_kv, H, Hk, B, group;
    int64_t Dk, Dvk;    /* D and Dv rounded up to whole vectors (FA_ROW_VEC): the lanes the kernels run over */
    int64_t n_cols;     /* query columns per KV head: n_q * group */
    int64_t n_cblk;     /* column blocks per KV head */
    int64_t n_chunks;   /* KV chunks */
    int64_t hb;         /* KV heads per item: Hk when the cells are split, else 1 */
    int64_t n_items;    /* B * (Hk / hb) * n_cblk * n_chunks */
};

static struct fa_plan fa_plan_of(const struct loom_tensor * dst) {
    const struct loom_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    struct fa_plan pl = {.D = q->ne[0], .Dv = v->ne[0], .n_q = q->ne[1], .n_kv = k->ne[1], .H = q->ne[2],
                         .Hk = k->ne[2], .B = q->ne[3]};
    pl.group = pl.H / pl.Hk;
    pl.Dk = cpu_round_up(pl.D, FA_ROW_VEC);
    pl.Dvk = cpu_round_up(pl.Dv, FA_ROW_VEC);
    pl.n_cols = pl.n_q * pl.group;
    pl.n_cblk = (pl.n_cols + FA_COLS - 1) / FA_COLS;
    pl.n_chunks = pl.n_q <= FA_SPLIT_NQ && pl.n_kv > FA_CHUNK ? (pl.n_kv + FA_CHUNK - 1) / FA_CHUNK : 1;
    pl.hb = pl.n_chunks > 1 ? pl.Hk : 1;
    pl.n_items = pl.B * (pl.Hk / pl.hb) * pl.n_cblk * pl.n_chunks;
    return pl;
}

/* The kernel table's row type for a float type; CPU_W_COUNT for a block type (expanded first). */
static enum cpu_wtype row_wtype(enum loom_type t) {
    switch (t) {
    case LOOM_TYPE_F32: return CPU_W_F32;
    case LOOM_TYPE_F16: return CPU_W_F16;
    case LOOM_TYPE_BF16: return CPU_W_BF16;
    default: return CPU_W_COUNT;
    }
}

static bool kv_ok(const struct loom_tensor * t) {
    if (row_wtype(t->type) != CPU_W_COUNT) return t->nb[0] == loom_type_size(t->type);
    const struct loom_type_traits * tt = loom_type_get_traits(t->type);
    return tt->to_float && tt->blck_size > 0 && t->ne[0] % tt->blck_size == 0 && t->nb[0] == tt->type_size;
}

static bool fa_supports(const struct loom_tensor * dst) {
    const struct loom_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * m = dst->src[3];
    if (!q || !k || !v || q->type != LOOM_TYPE_F32 || dst->type != LOOM_TYPE_F32 || !loom_is_contiguous(dst)) return false;
    if (!kv_ok(k) || !kv_ok(v) || k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2]) return false;
    if (k->ne[2] <= 0 || q->ne[2] % k->ne[2] != 0 || k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3]) return false;
    if (dst->ne[0] != v->ne[0] || dst->ne[1] != q->ne[2] || dst->ne[2] != q->ne[1] || dst->ne[3] != q->ne[3]) return false;
    if (m) {
        if (m->type != LOOM_TYPE_F32 && m->type != LOOM_TYPE_F16) return false;
        if (m->ne[0] != k->ne[1] || m->ne[1] < q->ne[1] || m->ne[2] <= 0 || m->ne[3] <= 0) return false;
        if (q->ne[2] % m->ne[2] != 0 || q->ne[3] % m->ne[3] != 0) return false;
    }
    return true;
}

/* Per-thread scratch, in floats: packed queries, scores, mask values, values, running max and sum
 * (queries, scores, values, max and sum for each of the item's hb KV heads, FA_COLS columns apiece), one
 * tile of expanded K or V rows, and one query row for the reader of a strided query. */
struct fa_local {
    float * q, * s, * m, * acc, * mx, * sum, * tile, * row, * span;
};

static size_t fa_local_floats(const struct fa_plan * pl, struct fa_local * l, float * base) {
    const int64_t wide = cpu_round_up(pl->D > pl->Dv ? pl->D : pl->Dv, FA_ROW_VEC);
    const bool short_rows = pl->D % FA_ROW_VEC != 0 || pl->Dv % FA_ROW_VEC != 0;
    const int64_t hc = pl->hb * FA_COLS;
    const int64_t sizes[9] = {hc * pl->Dk, hc * FA_TILE, FA_COLS * FA_TILE, hc * pl->Dvk,
                              hc, hc, FA_TILE * wide, pl->D, short_rows ? FA_SPAN : 0};
    float ** slots[9] = {&l->q, &l->s, &l->m, &l->acc, &l->mx, &l->sum, &l->tile, &l->row, &l->span};
    size_t off = 0;
    for (int i = 0; i < 9; i++) {
        if (base) *slots[i] = base + off;
        off += (size_t)cpu_round_up(sizes[i], 16); /* 64-byte aligned slots */
    }
    return off;
}

/* The floats one item's partial result takes in shared scratch: per column max, sum and values. */
static size_t fa_partial_floats(const struct fa_plan * pl) { return (size_t)(pl->Dv + 2); }

static void fa_work(const struct loom_tensor * dst, const struct cpu_vec * vec, int n_threads, size_t * shared, size_t * local) {
    (void)vec;
    (void)n_threads;
    const struct fa_plan pl = fa_plan_of(dst);
    struct fa_local l;
    *local = fa_local_floats(&pl, &l, NULL) * sizeof(float);
    *shared = pl.n_chunks > 1 ? (size_t)(pl.n_items * pl.hb) * FA_COLS * fa_partial_floats(&pl) * sizeof(float) : 0;
}

/* Rows [t0, t0 + n) of KV head 'hk' of batch 'b' in a form the kernels read, 'lanes' elements of
 * each (ne0 rounded up to whole vectors); the lanes past ne0 are zeros when 'zero_pad' (K: they
 * meet the queries' zero padding, and 0 * NaN would not be 0) and may hold anything otherwise (V:
 * those lanes of the values are never stored). In place for a float type whose rows are whole
 * vectors; else F32 copies: short F16/BF16/F32 rows convert in one pass over the tile's whole
 * extent (the bytes between the rows lie inside the same tensor: the other heads of a cache), and
 * the rest row by row (dequantized, for a block type) into 'tile', zero-padded. Sets the row type
 * and stride. */
static const uint8_t * kv_rows(const struct cpu_params * p, const struct loom_tensor * t, int64_t t0, int64_t n, int64_t hk,
                               int64_t b, int64_t lanes, bool zero_pad, const struct fa_local * l, enum cpu_wtype * wt,
                               size_t * ld) {
    const uint8_t * rows = cpu_elem(t, 0, t0, hk, b);
    const int64_t ne0 = t->ne[0];
    *wt = row_wtype(t->type);
    if (*wt != CPU_W_COUNT && lanes == ne0) {
        *ld = t->nb[1];
        return rows;
    }
    const size_t es = loom_type_size(t->type);
    if (*wt != CPU_W_COUNT && t->nb[1] % es == 0) {
        const int64_t stride = (int64_t)(t->nb[1] / es), span = (n - 1) * stride + ne0; /* elements */
        if (span + FA_ROW_VEC <= FA_SPAN && (!zero_pad || stride >= lanes)) {
            lcpu_to_f32(p->vec, t->type, rows, es, l->span, span);
            memset(l->span + span, 0, FA_ROW_VEC * sizeof(float)); /* the lanes the last row's kernel reads past it */
            if (zero_pad) { /* this copy's lanes past ne0 belong to rows (heads) this item does not read */
                for (int64_t i = 0; i < n; i++) {
                    float * r = l->span + i * stride;
                    for (int64_t j = ne0; j < lanes; j++) r[j] = 0.0f;
                }
            }
            *wt = CPU_W_F32;
            *ld = (size_t)stride * sizeof(float);
            return (const uint8_t *)l->span;
        }
    }
    const int64_t width = cpu_round_up(ne0, FA_ROW_VEC);
    const loom_to_float_fn to_float = *wt == CPU_W_COUNT ? loom_type_get_traits(t->type)->to_float : NULL;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t * row = rows + i * (int64_t)t->nb[1];
        float * out = l->tile + i * width;
        if (to_float) to_float(row, out, ne0);
        else lcpu_to_f32(p->vec, t->type, row, t->nb[0], out, ne0);
        memset(out + ne0, 0, (size_t)(width - ne0) * sizeof(float));
    }
    *wt = CPU_W_F32;
    *ld = (size_t)width * sizeof(float);
    return (const uint8_t *)l->tile;
}

/* Query column c of KV head hk: query c / group of head hk * group + c % group (the heads that share
 * a KV head are adjacent, and so are the columns of one query, which share a mask row). */
static inline void col_coords(const struct fa_plan * pl, int64_t hk, int64_t c, int64_t * iq, int64_t * h) {
    *iq = c / pl->group;
    *h = hk * pl->group + c % pl->group;
}

/* The largest of x[0..n) (-inf when n is 0), in 16 lanes that the compiler keeps in vectors. */
static float fa_max(const float * x, int n) {
    float lane[16];
    for (int j = 0; j < 16; j++) lane[j] = -INFINITY;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    }
    for (; i < n; i++) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    float m = lane[0];
    for (int j = 1; j < 16; j++) m = lane[j] > m ? lane[j] : m;
    return m;
}

/* The running state of the columns of one KV head in an item: queries (scaled, zero-padded to Dk),
 * unnormalized values (Dvk apiece), running max and sum; FA_COLS columns each. */
struct fa_state {
    float * q, * acc, * mx, * sum;
};

static struct fa_state fa_state_of(const struct fa_plan * pl, const struct fa_local * l, int64_t j) {
    const int64_t c = j * FA_COLS;
    return (struct fa_state){l->q + c * pl->Dk, l->acc + c * pl->Dvk, l->mx + c, l->sum + c};
}

/* Loads columns [c0, c0 + nc) of KV head hk of batch b into 'st': the scale goes into the
 * queries once, not into every score. */
static void fa_begin(const struct cpu_params * p, const struct loom_tensor * dst, const struct fa_plan * pl, int64_t b,
                     int64_t hk, int64_t c0, int nc, const struct fa_local * l, const struct fa_state * st) {
    const struct loom_tensor * q = dst->src[0];
    const float scale = loom_get_op_param_f32(dst, 0);
    const int64_t D = pl->D, Dk = pl->Dk, Dvk = pl->Dvk;
    for (int c = 0; c < nc; c++) {
        int64_t iq, h;
        col_coords(pl, hk, c0 + c, &iq, &h);
        const float * qr = lcpu_row_f32(p, q, iq, h, b, l->row);
        float * qc = st->q + c * Dk;
        for (int64_t i = 0; i < Dk; i++) qc[i] = i < D ? qr[i] * scale : 0.0f;
        st->mx[c] = -INFINITY;
        st->sum[c] = 0.0f;
        memset(st->acc + c * Dvk, 0, (size_t)Dvk * sizeof(float));
    }
}

/* The mask values of KV cells [t0, t0 + nt) for the columns [c0, c0 + nc) of KV head hk into l->m
 * (zeros without a mask), and per column whether any cell is not masked out. Returns whether any
 * column is live: a tile that every column masks out entirely is not read at all. */
static bool fa_tile_mask(const struct cpu_params * p, const struct loom_tensor * dst, const struct fa_plan * pl, int64_t b,
                         int64_t hk, int64_t c0, int nc, int64_t t0, int nt, const struct fa_local * l, bool * live) {
    const struct loom_tensor * mask = dst->src[3];
    const struct cpu_vec * vec = p->vec;
    bool any = false;
    for (int c = 0; c < nc; c++) {
        float * mc = l->m + c * FA_TILE;
        live[c] = true;
        if (mask) {
            int64_t iq, h;
            col_coords(pl, hk, c0 + c, &iq, &h);
            if (c > 0 && (c0 + c) % pl->group != 0) { /* the same query as column c - 1: the same row unless m2 splits heads */
                int64_t iqp, hp;
                col_coords(pl, hk, c0 + c - 1, &iqp, &hp);
                if (h % mask->ne[2] == hp % mask->ne[2]) {
                    memcpy(mc, mc - FA_TILE, (size_t)nt * sizeof(float));
                    live[c] = live[c - 1];
                    any = any || live[c];
                    continue;
                }
            }
            const uint8_t * mr = cpu_elem(mask, t0, iq, h % mask->ne[2], b % mask->ne[3]);
            lcpu_to_f32(vec, mask->type, mr, mask->nb[0], mc, nt);
            live[c] = false;
            for (int t = 0; t < nt && !live[c]; t++) live[c] = mc[t] != -INFINITY;
        } else {
            memset(mc, 0, (size_t)nt * sizeof(float));
        }
        any = any || live[c];
    }
    return any;
}

/* Adds KV cells [t0, t0 + nt) (nt <= FA_TILE) of KV head hk to the columns [c0, c0 + nc) in 'st'. */
static void fa_tile(const struct cpu_params * p, const struct loom_tensor * dst, const struct fa_plan * pl, int64_t b,
                    int64_t hk, int64_t c0, int nc, int64_t t0, int nt, const struct fa_local * l, const struct fa_state * st) {
    const struct loom_tensor * k = dst->src[1], * v = dst->src[2];
    const struct cpu_vec * vec = p->vec;
    const int64_t Dk = pl->Dk, Dvk = pl->Dvk;
    const int dmr = vec->dot_mr, dnr = vec->dot_nr;
    bool live[FA_COLS];
    if (!fa_tile_mask(p, dst, pl, b, hk, c0, nc, t0, nt, l, live)) return;
    /* scores: the tile's K rows against every column's query */
    enum cpu_wtype wk;
    size_t ldk;
    const uint8_t * kr = kv_rows(p, k, t0, nt, hk, b, Dk, true, l, &wk, &ldk);
    for (int r0 = 0; r0 < nt; r0 += dmr) {
        const int mr = nt - r0 < dmr ? nt - r0 : dmr;
        for (int j0 = 0; j0 < nc; j0 += dnr) {
            const int nr = nc - j0 < dnr ? nc - j0 : dnr;
            vec->dot[wk](Dk, kr + r0 * ldk, ldk, mr, (const uint8_t *)(st->q + j0 * Dk), (size_t)Dk * sizeof(float), nr,
                         (uint8_t *)(l->s + j0 * FA_TILE + r0), FA_TILE * sizeof(float));
        }
    }
    /* online softmax: rescale what came before by exp(old max - new max), add this tile */
    enum cpu_wtype wv;
    size_t ldv;
    const uint8_t * vr = kv_rows(p, v, t0, nt, hk, b, Dvk, false, l, &wv, &ldv);
    for (int c = 0; c < nc; c++) {
        if (!live[c]) continue;
        float * s = l->s + c * FA_TILE;
        const float * mc = l->m + c * FA_TILE;
        for (int t = 0; t < nt; t++) s[t] += mc[t];
        const float tmax = fa_max(s, nt);
        const float old = st->mx[c];
        const float mnew = tmax > old ? tmax : old;
        if (mnew == -INFINITY) continue;
        const float alpha = old == -INFINITY ? 0.0f : expf(old - mnew);
        const float tsum = (float)vec->exp_sum(s, nt, mnew);
        float * acc = st->acc + c * Dvk;
        if (alpha != 1.0f) {
            for (int64_t i = 0; i < Dvk; i++) acc[i] *= alpha;
        }
        st->sum[c] = st->sum[c] * alpha + tsum;
        st->mx[c] = mnew;
        vec->mad[wv](Dvk, vr, ldv, nt, s, acc);
    }
}

enum {
    FA_VROWS = 8,      /* cells per step of fa_tile_heads' value pass */
    FA_KROWS = 16,     /* cells per step of its score pass with one query per head */
    FA_HEADS_MAX = 64, /* KV heads fa_tile_heads takes at most (more take fa_tile, head by head) */
};

/* Whether the tiles of an item can take fa_tile_heads: K and V rows read in place, and one mask
 * row for every head of a query. */
static bool fa_heads_at_once(const struct loom_tensor * dst, const struct fa_plan * pl) {
    const struct loom_tensor * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    return pl->hb > 1 && pl->hb <= FA_HEADS_MAX && row_wtype(k->type) != CPU_W_COUNT && row_wtype(v->type) != CPU_W_COUNT &&
           pl->Dk == pl->D && pl->Dvk == pl->Dv && (!mask || mask->ne[2] == 1);
}

/* As fa_tile for every KV head [hk0, hk0 + hb) of the item at once, in the order the cache lays
 * them out: the scores of a few cells for every head, then the next cells, and so for the values,
 * so that the tile's K rows (and then its V rows) are read as one forward stream (the heads of a
 * cell are adjacent: 110m reads 1,536 bytes per cell, where head by head each pass read 128 of
 * them and skipped the rest, a pattern that ran at a third of the memory's speed). With several
 * columns every score and every value sum is computed as fa_tile computes it, in the same order;
 * with one column the scores come from dot_rows (summed in another fixed order: the results
 * still depend only on the shapes). */
static void fa_tile_heads(const struct cpu_params * p, const struct loom_tensor * dst, const struct fa_plan * pl, int64_t b,
                          int64_t hk0, int64_t c0, int nc, int64_t t0, int nt, const struct fa_local * l) {
    const struct loom_tensor * k = dst->src[1], * v = dst->src[2];
    const struct cpu_vec * vec = p->vec;
    const int64_t Dk = pl->Dk, Dvk = pl->Dvk, hb = pl->hb;
    const int dmr = vec->dot_mr, dnr = vec->dot_nr;
    /* the mask is the same for every head (mask ne[2] == 1): head hk0's rows serve them all */
    bool live[FA_COLS];
    if (!fa_tile_mask(p, dst, pl, b, hk0, c0, nc, t0, nt, l, live)) return;
    const enum cpu_wtype wk = row_wtype(k->type), wv = row_wtype(v->type);
    const size_t ldk = k->nb[1], ldv = v->nb[1];
    /* rows read in place are whole vectors (Dk == D, a multiple of FA_ROW_VEC): dot_rows takes them */
    const bool one = nc == 1;
    if (one) {
        /* one query per head (token generation without grouped heads): FA_KROWS cells of every
         * head at a time, each head's scores in one call that sums its rows a vector at a time */
        for (int r0 = 0; r0 < nt; r0 += FA_KROWS) {
            const int rows = nt - r0 < FA_KROWS ? nt - r0 : FA_KROWS;
            for (int64_t j = 0; j < hb; j++) {
                const uint8_t * kr = cpu_elem(k, 0, t0 + r0, hk0 + j, b);
                vec->dot_rows[wk](Dk, kr, ldk, rows, fa_state_of(pl, l, j).q, l->s + j * FA_COLS * FA_TILE + r0);
            }
        }
    }
    /* scores, a block of dmr cells of every head at a time */
    for (int r0 = 0; !one && r0 < nt; r0 += dmr) {
        const int mr = nt - r0 < dmr ? nt - r0 : dmr;
        for (int64_t j = 0; j < hb; j++) {
            const struct fa_state st = fa_state_of(pl, l, j);
            const uint8_t * kr = cpu_elem(k, 0, t0 + r0, hk0 + j, b);
            float * s = l->s + j * FA_COLS * FA_TILE;
            for (int j0 = 0; j0 < nc; j0 += dnr) {
                const int nr = nc - j0 < dnr ? nc - j0 : dnr;
                vec->dot[wk](Dk, kr, ldk, mr, (const uint8_t *)(st.q + j0 * Dk), (size_t)Dk * sizeof(float), nr,
                             (uint8_t *)(s + j0 * FA_TILE + r0), FA_TILE * sizeof(float));
            }
        }
    }
    /* online softmax per head and column; 'go' marks the (head, column) pairs whose values are added */
    bool go[FA_HEADS_MAX * FA_COLS];
    for (int64_t j = 0; j < hb; j++) {
        const struct fa_state st = fa_state_of(pl, l, j);
        for (int c = 0; c < nc; c++) {
            bool * g = &go[j * FA_COLS + c];
            *g = false;
            if (!live[c]) continue;
            float * s = l->s + (j * FA_COLS + c) * FA_TILE;
            const float * mc = l->m + c * FA_TILE;
            for (int t = 0; t < nt; t++) s[t] += mc[t];
            const float tmax = fa_max(s, nt);
            const float old = st.mx[c];
            const float mnew = tmax > old ? tmax : old;
            if (mnew == -INFINITY) continue;
            const float alpha = old == -INFINITY ? 0.0f : expf(old - mnew);
            const float tsum = (float)vec->exp_sum(s, nt, mnew);
            float * acc = st.acc + c * Dvk;
            if (alpha != 1.0f) {
                for (int64_t i = 0; i < Dvk; i++) acc[i] *= alpha;
            }
            st.sum[c] = st.sum[c] * alpha + tsum;
            st.mx[c] = mnew;
            *g = true;
        }
    }
    /* values, FA_VROWS cells of every head at a time (each sum still adds the cells in order) */
    for (int r0 = 0; r0 < nt; r0 += FA_VROWS) {
        const int rows = nt - r0 < FA_VROWS ? nt - r0 : FA_VROWS;
        for (int64_t j = 0; j < hb; j++) {
            const struct fa_state st = fa_state_of(pl, l, j);
            const uint8_t * vr = cpu_elem(v, 0, t0 + r0, hk0 + j, b);
            for (int c = 0; c < nc; c++) {
                if (!go[j * FA_COLS + c]) continue;
                vec->mad[wv](Dvk, vr, ldv, rows, l->s + (j * FA_COLS + c) * FA_TILE + r0, st.acc + c * Dvk);
            }
        }
    }
}

/* Writes column c's result: values / sum, zeros when every cell was masked. */
static void fa_store(const struct loom_tensor * dst, const struct fa_plan * pl, int64_t b, int64_t hk, int64_t c,
                     const float * acc, float sum) {
    int64_t iq, h;
    col_coords(pl, hk, c, &iq, &h);
    float * out = (float *)cpu_elem(dst, 0, h, iq, b);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = 0; i < pl->Dv; i++) out[i] = acc[i] * inv;
}

/* Item index -> (b, first KV head, column block, chunk), chunks innermost so that one column's
 * partials are adjacent. */
static void item_coords(const struct fa_plan * pl, int64_t it, int64_t * b, int64_t * hk0, int64_t * cb, int64_t * ch) {
    const int64_t n_hgrp = pl->Hk / pl->hb;
    *ch = it % pl->n_chunks;
    it /= pl->n_chunks;
    *cb = it % pl->n_cblk;
    it /= pl->n_cblk;
    *hk0 = it % n_hgrp * pl->hb;
    *b = it / n_hgrp;
}

static inline int cblk_cols(const struct fa_plan * pl, int64_t cb) {
    const int64_t c0 = cb * FA_COLS;
    return (int)(pl->n_cols - c0 < FA_COLS ? pl->n_cols - c0 : FA_COLS);
}

/* One item: the columns of block cb of KV heads [hk0, hk0 + hb) over the cells of chunk ch, tile
 * by tile, every head of a tile before the next tile. Stores the results (one chunk) or leaves
 * the partials of (item, head, column) in shared scratch. */
static void fa_run_item(const struct cpu_params * p, struct loom_tensor * dst, const struct fa_plan * pl, int64_t it,
                        const struct fa_local * l) {
    int64_t b, hk0, cb, ch;
    item_coords(pl, it, &b, &hk0, &cb, &ch);
    const int64_t c0 = cb * FA_COLS;
    const int nc = cblk_cols(pl, cb);
    const int64_t per = (pl->n_kv + pl->n_chunks - 1) / pl->n_chunks;
    const int64_t k0 = ch * per, k1 = k0 + per < pl->n_kv ? k0 + per : pl->n_kv;
    for (int64_t j = 0; j < pl->hb; j++) {
        const struct fa_state st = fa_state_of(pl, l, j);
        fa_begin(p, dst, pl, b, hk0 + j, c0, nc, l, &st);
    }
    const bool at_once = fa_heads_at_once(dst, pl);
    for (int64_t t0 = k0; t0 < k1; t0 += FA_TILE) {
        const int nt = (int)(k1 - t0 < FA_TILE ? k1 - t0 : FA_TILE);
        if (at_once) {
            fa_tile_heads(p, dst, pl, b, hk0, c0, nc, t0, nt, l);
            continue;
        }
        for (int64_t j = 0; j < pl->hb; j++) {
            const struct fa_state st = fa_state_of(pl, l, j);
            fa_tile(p, dst, pl, b, hk0 + j, c0, nc, t0, nt, l, &st);
        }
    }
    const size_t pf = fa_partial_floats(pl);
    for (int64_t j = 0; j < pl->hb; j++) {
        const struct fa_state st = fa_state_of(pl, l, j);
        if (pl->n_chunks == 1) {
            for (int c = 0; c < nc; c++) fa_store(dst, pl, b, hk0 + j, c0 + c, st.acc + c * pl->Dvk, st.sum[c]);
            continue;
        }
        float * part = (float *)p->shared + (size_t)(it * pl->hb + j) * FA_COLS * pf;
        for (int c = 0; c < nc; c++) {
            float * pc = part + (size_t)c * pf;
            pc[0] = st.mx[c];
            pc[1] = st.sum[c];
            memcpy(pc + 2, st.acc + c * pl->Dvk, (size_t)pl->Dv * sizeof(float));
        }
    }
}

/* Merges the chunks of one column block of one KV head (unit u: item group u / hb, head u % hb) in
 * chunk order: each chunk's sum and values are scaled by exp(its max - the overall max). */
static void fa_merge(const struct cpu_params * p, struct loom_tensor * dst, const struct fa_plan * pl, int64_t u,
                     float * acc) {
    const int64_t it0 = u / pl->hb * pl->n_chunks, j = u % pl->hb;
    int64_t b, hk0, cb, ch;
    item_coords(pl, it0, &b, &hk0, &cb, &ch);
    const int64_t c0 = cb * FA_COLS;
    const int nc = cblk_cols(pl, cb);
    const size_t pf = fa_partial_floats(pl);
    /* the partials of chunk k for this head: item it0 + k, head j */
    const float * part = (const float *)p->shared + (size_t)(it0 * pl->hb + j) * FA_COLS * pf;
    const size_t chunk_stride = (size_t)pl->hb * FA_COLS * pf;
    for (int c = 0; c < nc; c++) {
        float mx = -INFINITY;
        for (int64_t k = 0; k < pl->n_chunks; k++) {
            const float m = part[(size_t)k * chunk_stride + (size_t)c * pf];
            mx = m > mx ? m : mx;
        }
        float sum = 0.0f;
        memset(acc, 0, (size_t)pl->Dv * sizeof(float));
        if (mx != -INFINITY) {
            for (int64_t k = 0; k < pl->n_chunks; k++) {
                const float * pc = part + (size_t)k * chunk_stride + (size_t)c * pf;
                if (pc[0] == -INFINITY) continue;
                const float w = expf(pc[0] - mx);
                sum += pc[1] * w;
                for (int64_t i = 0; i < pl->Dv; i++) acc[i] += pc[2 + i] * w;
            }
        }
        fa_store(dst, pl, b, hk0 + j, c0 + c, acc, sum);
    }
}

static void fa_compute(const struct cpu_params * p, struct loom_tensor * dst) {
    const struct fa_plan pl = fa_plan_of(dst);
    struct fa_local l;
    fa_local_floats(&pl, &l, (float *)p->local);
    if (p->nth == 1) {
        for (int64_t it = 0; it < pl.n_items; it++) fa_run_item(p, dst, &pl, it, &l);
    } else {
        for (int64_t it = cpu_claim(p, 1); it < pl.n_items; it = cpu_claim(p, 1)) fa_run_item(p, dst, &pl, it, &l);
    }
    if (pl.n_chunks == 1) return;
    lcpu_barrier(p);
    int64_t u0, u1;
    cpu_split(pl.n_items / pl.n_chunks * pl.hb, p, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) fa_merge(p, dst, &pl, u, l.acc);
}

const struct lcpu_op_impl lcpu_op_flash_attn = {
    .supports = fa_supports,
    .compute = fa_compute,
    .work_size = fa_work,
};
