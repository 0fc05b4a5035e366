/* cuda-mulmat-plan.cu -- the fusion planner of matrix-vector products: from a MUL_MAT node (or a
 * layer input's RMS_NORM and MUL) and the graph nodes after it, decides what one launch computes
 * -- epilogue, SwiGLU, q/k/v in one launch, last-block tail, pre-norm -- where the pattern and
 * the memory allow it (the rules: docs/CUDA.md), and fills the launch description that
 * cuda-matvec.cu's kernels consume. */
#include "cuda-matvec.cuh"
#include "cuda-mulmat.cuh"
#include "cuda-norm.cuh"
#include "cuda-softmax.cuh"

#include <math.h>
#include <string.h>

static bool aligned16(int64_t v) { return v % 16 == 0; }

/* The kernel arguments of one product a x b -> d with its epilogue (and SwiGLU's second matrix). */
static void lc_matvec_args(const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, const struct lc_mv_epi * epi,
                           bool a_const, const char * a2, const struct lc_mv_glu * glu, struct lc_mv_args & p) {
    p.type = a->type;
    p.epi = *epi;
    memset(&p.tail, 0, sizeof p.tail);
    memset(&p.pre, 0, sizeof p.pre);
    p.skip_d = p.skip_e = 0;
    p.a2 = a2;
    if (glu) p.glu = *glu;
    else memset(&p.glu, 0, sizeof p.glu);
    p.a_const = a_const;
    p.a = a->data;
    p.b = b->data;
    p.d = d->data;
    p.K = a->ne[0];
    p.M = a->ne[1];
    p.ne2 = b->ne[2];
    p.nbatch = b->ne[2] * b->ne[3];
    p.a_nb1 = a->nb[1];
    p.a_nb2 = a->nb[2];
    p.a_nb3 = a->nb[3];
    p.b_nb1 = b->nb[1];
    p.b_nb2 = b->nb[2];
    p.b_nb3 = b->nb[3];
    p.d_nb0 = d->nb[0];
    p.d_nb1 = d->nb[1];
    p.d_nb2 = d->nb[2];
    p.d_nb3 = d->nb[3];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.j0 = 0;
    p.q8 = p.q8_in = NULL;
    bool vec = aligned16((int64_t)(uintptr_t)a->data) && aligned16((int64_t)(uintptr_t)b->data);
    for (int i = 1; i < 4; i++) {
        vec = vec && (a->ne[i] == 1 || aligned16(a->nb[i])) && (b->ne[i] == 1 || aligned16(b->nb[i]));
    }
    if (a2) vec = vec && aligned16((int64_t)(uintptr_t)a2);
    p.vec = vec;
}

/* A pre-norm (lc_mv_pre) as planned for a launch: the norm's source h and weight row g (read),
 * the norm's and the MUL's results y and z (written). */
struct lc_pre_plan {
    const struct loom_tensor * mul;  /* the MUL node (the products' activations) */
    struct lc_tensor h, g, y, z;
    const float * u;                 /* the activations the products read: h * g, dense */
    struct lc_mv_pre pre;
};

/* Makes product 'p' (planned with the MUL's result as its activations) read u instead; 'first':
 * its blocks write y and z. */
static void pre_norm_apply(const struct lc_pre_plan * pl, bool first, struct lc_mv_args & p) {
    p.pre = pl->pre;
    p.pre.write = first;
    p.b = (const char *)pl->u;
    p.b_nb1 = p.b_nb2 = p.b_nb3 = pl->h.ne[0] * (int64_t)sizeof(float);
    p.vec = p.vec && aligned16((int64_t)(uintptr_t)pl->u);
}

/* The 8-bit runs the launch before left for one column of activations at 'b' (K elements, one
 * batch), or NULL. */
static const char * q8_handoff_for(const struct lc_backend * be, const char * b, int64_t K) {
    const struct lc_q8_handoff & q8 = be->q8_avail;
    return q8.valid && b == q8.src && K == q8.K ? q8.rec : NULL;
}

static enum loom_status lc_matvec(struct lc_backend * be, const struct lc_tensor * a, const struct lc_tensor * b,
                                  const struct lc_tensor * d, const struct lc_mv_epi * epi, bool a_const, const char * a2,
                                  const struct lc_mv_glu * glu, const struct lc_mv_tail * tail = NULL, const struct lc_pre_plan * pre = NULL) {
    struct lc_mv_args p;
    lc_matvec_args(a, b, d, epi, a_const, a2, glu, p);
    if (tail) p.tail = *tail;
    if (pre) pre_norm_apply(pre, true, p);
    /* activations (with a pre-norm: u) whose 8-bit runs the launch before wrote (one column, one batch) */
    if (b->ne[1] == 1 && p.nbatch == 1) p.q8_in = q8_handoff_for(be, p.b, p.K);
    return lc_matvec_queue(be, p, (int)b->ne[1]);
}

enum loom_status lc_matvec_plain(struct lc_backend * be, const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d,
                                 bool a_const) {
    struct lc_mv_epi none;
    memset(&none, 0, sizeof none);
    return lc_matvec(be, a, b, d, &none, a_const, NULL, NULL);
}

static void copy_strides(int64_t * out, const struct lc_tensor * t) {
    for (int k = 0; k < 4; k++) out[k] = t->nb[k];
}

/* The epilogue that computes 'next' from the product 'mm' (device views a, b, d), or false. The
 * fused node's result must not overlap what other warps read (the operands) and may coincide
 * with the product or its other operand only element for element. */
static bool epilogue_for(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * next,
                         const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, struct lc_mv_epi * epi) {
    memset(epi, 0, sizeof *epi);
    struct lc_tensor e, o;
    switch (next->op) {
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: {
        const int slot = next->src[0] == mm ? 0 : next->src[1] == mm ? 1 : -1;
        if (slot < 0 || next->src[0] == next->src[1]) return false;
        const struct loom_tensor * other = next->src[1 - slot];
        if (other->type != LOOM_TYPE_F32 || next->type != LOOM_TYPE_F32 || !loom_are_same_shape(other, mm) || !loom_are_same_shape(next, mm)) {
            return false;
        }
        if (lc_tensor_of(be, other, false, &o) != LOOM_OK || lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        if (lc_overlap_of(&o, d) != LC_DISJOINT || lc_overlap_of(&e, &o) == LC_PARTIAL) return false;
        epi->kind = next->op == LOOM_OP_ADD ? LC_EPI_ADD : LC_EPI_MUL;
        epi->o = o.data;
        copy_strides(epi->o_nb, &o);
        break;
    }
    case LOOM_OP_SILU:
        if (next->src[0] != mm || next->type != LOOM_TYPE_F32 || !loom_are_same_shape(next, mm)) return false;
        if (lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        epi->kind = LC_EPI_SILU;
        break;
    case LOOM_OP_CPY:
    case LOOM_OP_DUP:
    case LOOM_OP_CONT:
    case LOOM_OP_SET_ROWS:
        if (!lc_scatter_for(be, next, d, &epi->sc) || lc_tensor_of(be, next, true, &e) != LOOM_OK) return false;
        epi->kind = LC_EPI_COPY;
        break;
    default: return false;
    }
    if (lc_overlap_of(&e, a) != LC_DISJOINT || lc_overlap_of(&e, b) != LC_DISJOINT || lc_overlap_of(&e, d) == LC_PARTIAL) return false;
    if (epi->kind == LC_EPI_COPY && lc_overlap_of(&e, d) != LC_DISJOINT) return false;
    epi->e = e.data;
    copy_strides(epi->e_nb, &e);
    return true;
}

/* The rotation of 'rope' fused into the product 'mm' (its source is the product, reshaped to
 * [head_dim, n_head, N]), with the copy 'cpy' of its result when that is given and fits; false
 * when it does not apply. */
static bool rope_epilogue_for(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * rope,
                              const struct loom_tensor * cpy, const struct lc_tensor * a, const struct lc_tensor * b,
                              const struct lc_tensor * d, struct lc_mv_epi * epi, bool * with_copy) {
    memset(epi, 0, sizeof *epi);
    *with_copy = false;
    if (rope->op != LOOM_OP_ROPE || loom_get_op_param_i32(rope, 1) != LOOM_ROPE_NORMAL) return false;
    const struct loom_tensor *x = rope->src[0], *pos = rope->src[1];
    const int n_dims = loom_get_op_param_i32(rope, 0);
    /* the rope reads the product itself: same bytes, [head_dim, n_head, N] over [M, N] */
    if (!x || x->view_src != mm || x->view_offs != 0 || x->ne[0] * x->ne[1] != mm->ne[0] || x->ne[2] != mm->ne[1] || x->ne[3] != 1 ||
        mm->ne[2] != 1 || mm->ne[3] != 1 || x->ne[0] % 2 != 0 || !loom_is_contiguous(x) || rope->type != LOOM_TYPE_F32) {
        return false;
    }
    struct lc_tensor e, tp;
    if (lc_tensor_of(be, rope, true, &e) != LOOM_OK || lc_tensor_of(be, pos, false, &tp) != LOOM_OK || !lc_is_contiguous(&e)) return false;
    if (lc_overlap_of(&e, a) != LC_DISJOINT || lc_overlap_of(&e, b) != LC_DISJOINT || lc_overlap_of(&e, &tp) != LC_DISJOINT ||
        lc_overlap_of(d, &tp) != LC_DISJOINT) {
        return false;
    }
    /* the rotated result may replace the product in place (one lane writes both pairs) */
    struct lc_tensor e2 = lc_tensor_contiguous(e.data, LOOM_TYPE_F32, d->ne);
    if (lc_overlap_of(&e2, d) == LC_PARTIAL) return false;
    epi->kind = LC_EPI_ROPE;
    epi->e = e2.data;
    copy_strides(epi->e_nb, &e2);
    epi->pos = tp.data;
    epi->pos_nb0 = tp.nb[0];
    epi->head_dim = x->ne[0];
    epi->n_dims = n_dims;
    epi->log2_base = log2((double)loom_get_op_param_f32(rope, 2));
    epi->freq_scale = (double)loom_get_op_param_f32(rope, 3);
    struct lc_tensor c;
    if (cpy && lc_reads_result_of(cpy, rope) && lc_scatter_for(be, cpy, &e, &epi->sc) && lc_tensor_of(be, cpy, true, &c) == LOOM_OK &&
        lc_overlap_of(&c, a) == LC_DISJOINT && lc_overlap_of(&c, b) == LC_DISJOINT && lc_overlap_of(&c, d) == LC_DISJOINT &&
        lc_overlap_of(&c, &tp) == LC_DISJOINT) {
        /* the scatter maps the rotated result's offsets, which are the product's */
        epi->has_sc = 1;
        *with_copy = true;
    }
    return true;
}

/* The epilogue of product 'mm' from the nodes after it (next, next2: NULL when absent), as
 * lc_mul_mat_fused chooses it; '*fused' nodes covered (0: none). False when 'mm' cannot take the
 * matrix-vector kernels or its tensors are not on this device. */
static bool matvec_plan(const struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * next,
                        const struct loom_tensor * next2, struct lc_tensor * a, struct lc_tensor * b, struct lc_tensor * d,
                        struct lc_mv_epi * epi, int * fused) {
    *fused = 0;
    memset(epi, 0, sizeof *epi);
    if (!lc_mul_mat_is_matvec(mm)) return false;
    if (lc_tensor_of(be, mm->src[0], false, a) != LOOM_OK || lc_tensor_of(be, mm->src[1], false, b) != LOOM_OK ||
        lc_tensor_of(be, mm, true, d) != LOOM_OK || !lc_is_contiguous(d)) {
        return false;
    }
    bool with_copy = false;
    if (next && rope_epilogue_for(be, mm, next, next2, a, b, d, epi, &with_copy)) {
        *fused = with_copy ? 2 : 1;
    } else if (next && epilogue_for(be, mm, next, a, b, d, epi)) {
        *fused = 1;
    } else {
        memset(epi, 0, sizeof *epi);
    }
    return true;
}

/* True when contiguous 'inner' lies wholly inside contiguous 'outer' (the later write covers it). */
static bool covered_by(const struct lc_tensor * inner, const struct lc_tensor * outer) {
    if (!lc_is_contiguous(inner) || !lc_is_contiguous(outer)) return false;
    char *ilo, *ihi, *olo, *ohi;
    lc_extent(inner, &ilo, &ihi);
    lc_extent(outer, &olo, &ohi);
    return olo <= ilo && ihi <= ohi;
}

/* True when 'norm' is the RMS_NORM of one F32 column and 'mul' the MUL of its result by an F32
 * weight row of its shape (a layer's normalised input). */
static bool norm_mul_pattern(const struct loom_tensor * norm, const struct loom_tensor * mul) {
    if (!mul || norm->op != LOOM_OP_RMS_NORM || !lc_rms_norm_supported(norm) || loom_nelements(norm) != norm->ne[0]) return false;
    if (mul->op != LOOM_OP_MUL || mul->src[0] != norm || mul->src[1] == norm || mul->type != LOOM_TYPE_F32 ||
        !loom_are_same_shape(mul, norm)) {
        return false;
    }
    return mul->src[1]->type == LOOM_TYPE_F32 && loom_are_same_shape(mul->src[1], norm);
}

/* The RMS_NORM 'norm' of one F32 column and the MUL 'mul' of its result by an F32 weight row, when
 * the product 'mm' after them reads the MUL's result: the pattern of a pre-norm, its tensors in
 * 'pl', or false. */
static bool pre_norm_pattern(const struct lc_backend * be, const struct loom_tensor * norm, const struct loom_tensor * mul,
                             const struct loom_tensor * mm, struct lc_pre_plan * pl) {
    if (!norm_mul_pattern(norm, mul) || norm->ne[0] > LC_PRE_MAX_K) return false;
    const struct loom_tensor * wt = mul->src[1];
    if (mm->op != LOOM_OP_MUL_MAT || mm->src[1] != mul || !lc_mul_mat_is_matvec(mm)) return false;
    if (lc_tensor_of(be, norm->src[0], false, &pl->h) != LOOM_OK || lc_tensor_of(be, wt, false, &pl->g) != LOOM_OK ||
        lc_tensor_of(be, norm, true, &pl->y) != LOOM_OK || lc_tensor_of(be, mul, true, &pl->z) != LOOM_OK) {
        return false;
    }
    if (!lc_is_contiguous(&pl->h) || !lc_is_contiguous(&pl->g) || !lc_is_contiguous(&pl->y) || !lc_is_contiguous(&pl->z)) return false;
    /* y and z are written while blocks read h; z may replace y element for element */
    if (lc_overlap_of(&pl->y, &pl->h) != LC_DISJOINT || lc_overlap_of(&pl->z, &pl->h) != LC_DISJOINT ||
        lc_overlap_of(&pl->y, &pl->z) == LC_PARTIAL) {
        return false;
    }
    pl->mul = mul;
    pl->u = NULL;
    memset(&pl->pre, 0, sizeof pl->pre);
    pl->pre.h = pl->h.data;
    pl->pre.y = pl->y.data;
    pl->pre.z = pl->z.data;
    pl->pre.eps = loom_get_op_param_f32(norm, 0);
    return true;
}

/* The pre-norm of the launch from 'norm' on (norm, mul, the first product mm), when the launch
 * queued before it left u and the partial sums for this norm (be->pre_avail), or false. */
static bool pre_norm_plan(const struct lc_backend * be, const struct loom_tensor * norm, const struct loom_tensor * mul,
                          const struct loom_tensor * mm, struct lc_pre_plan * pl) {
    const struct lc_pre_handoff * ho = &be->pre_avail;
    if (!ho->valid || !pre_norm_pattern(be, norm, mul, mm, pl)) return false;
    if (ho->h != pl->h.data || ho->g != pl->g.data || ho->K != pl->h.ne[0]) return false;
    pl->u = be->pre_u;
    pl->pre.parts = be->pre_parts;
    pl->pre.nparts = ho->nparts;
    return true;
}

/* The tail that prepares the pre-norm of the products after this launch: 'src' (the product's
 * result or its epilogue's, M rows of one column; 'type' the product's weight type) is the source
 * of RMS_NORM 'norm', whose MUL 'mul' the product 'mm' reads. Sets the tail and what the launch
 * leaves for the next one (ho; t->q8 set: also u's 8-bit records, for a quantized 'mm'). */
static bool rms_part_tail_for(struct lc_backend * be, int type, const struct loom_tensor * src, const struct loom_tensor * norm,
                              const struct loom_tensor * mul, const struct loom_tensor * mm, struct lc_mv_tail * t,
                              struct lc_pre_handoff * ho) {
    struct lc_pre_plan pl;
    if (norm->src[0] != src || !pre_norm_pattern(be, norm, mul, mm, &pl)) return false;
    /* the next launch could not take it (pre_norm_fits): a norm tail serves better */
    struct lc_tensor next;
    if (lc_tensor_of(be, mm, true, &next) != LOOM_OK || lc_overlap_of(&next, &pl.h) != LC_DISJOINT) return false;
    const int64_t rows = lc_matvec_tail_rows(type);
    const int64_t M = pl.h.ne[0], nparts = (M + rows - 1) / rows;
    if (nparts > LC_PRE_MAX_PARTS) return false;
    memset(t, 0, sizeof *t);
    t->kind = LC_TAIL_RMS_PART;
    t->w = pl.g.data;
    t->w_nb0 = sizeof(float);
    t->u = be->pre_u;
    t->parts = be->pre_parts;
    ho->valid = true;
    ho->h = pl.h.data;
    ho->g = pl.g.data;
    ho->K = M;
    ho->nparts = (int)nparts;
    /* a block of the quantized kernel holds one run of 32 rows: it writes the run's record */
    if (rows == 32 && M % 32 == 0 && M <= LC_PRE_MAX_K && lc_q8dot_type(mm->src[0]->type)) {
        t->q8 = lc_q8_free(be);
    }
    return true;
}

/* Whether a launch of the nodes nodes[0 .. n-1] (products and what is fused into them) may carry
 * the pre-norm 'pl': their results apart from h, which blocks read to the end; y and z
 * apart from the nodes' other operands, and from their results or wholly inside one (then left
 * unwritten: the later result is what the nodes one by one leave there; clears pl->pre.y / z). */
static bool pre_norm_fits(const struct lc_backend * be, struct lc_pre_plan * pl, struct loom_tensor * const * nodes, int n) {
#define PRE_NO(why, t)                                                                                                         \
    do {                                                                                                                       \
        loom_log(LOOM_LOG_DEBUG, "pre-norm refused: %s ('%s' %s, launch from '%s')", why, (t)->name, loom_op_name((t)->op),   \
                 nodes[0]->name);                                                                                              \
        return false;                                                                                                          \
    } while (0)
    for (int k = 0; k < n; k++) {
        struct lc_tensor out;
        if (lc_tensor_of(be, nodes[k], true, &out) != LOOM_OK) PRE_NO("out tensor", nodes[k]);
        if (lc_overlap_of(&out, &pl->h) != LC_DISJOINT) PRE_NO("a result over the norm's source", nodes[k]);
        if (pl->pre.y && lc_overlap_of(&pl->y, &out) != LC_DISJOINT) {
            if (!covered_by(&pl->y, &out)) PRE_NO("the norm's result partly under a result", nodes[k]);
            pl->pre.y = NULL;
        }
        if (pl->pre.z && lc_overlap_of(&pl->z, &out) != LC_DISJOINT) {
            if (!covered_by(&pl->z, &out)) PRE_NO("the MUL's result partly under a result", nodes[k]);
            pl->pre.z = NULL;
        }
    }
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < LOOM_MAX_SRC; j++) {
            const struct loom_tensor * src = nodes[k]->src[j];
            if (!src) continue;
            bool internal = false; /* a result of the launch, or a view of one: checked above */
            for (int i = 0; i < n; i++) internal = internal || src == nodes[i] || src->view_src == nodes[i];
            /* a product's activations (the MUL's result) are read as h and g instead */
            if (internal || (src == pl->mul && nodes[k]->op == LOOM_OP_MUL_MAT && j == 1)) continue;
            struct lc_tensor in;
            if (lc_tensor_of(be, src, false, &in) != LOOM_OK) PRE_NO("an operand not on the device", src);
            if ((pl->pre.y && lc_overlap_of(&pl->y, &in) != LC_DISJOINT) || (pl->pre.z && lc_overlap_of(&pl->z, &in) != LC_DISJOINT)) {
                PRE_NO("the norm's or MUL's result over an operand", src);
            }
        }
    }
    return true;
#undef PRE_NO
}

static enum loom_status lc_mul_mat_multi(struct lc_backend * be, struct loom_tensor * const * nodes, int n, const struct lc_pre_plan * pp,
                                         int * used) {
    *used = 0;
    struct lc_mv_multi m;
    /* per segment: results (0 the product, 1 the first fused node's, 2 the rotated copy), inputs */
    struct lc_tensor outs[LC_MV_MAX_SEG][3], ins[LC_MV_MAX_SEG][4];
    int n_out[LC_MV_MAX_SEG], nseg = 0, at = 0;
    const struct loom_tensor * x = nodes[0]->src[1];
    while (nseg < LC_MV_MAX_SEG && at < n) {
        const struct loom_tensor * mm = nodes[at];
        if (mm->op != LOOM_OP_MUL_MAT || mm->src[1] != x || mm->src[0]->type != nodes[0]->src[0]->type || !lc_is_weight(mm->src[0]) ||
            mm->ne[1] != 1 || mm->ne[2] != 1 || mm->ne[3] != 1 || mm->ne[0] % 2 != 0 || mm->ne[0] >= 8192) {
            break;
        }
        struct lc_tensor a, b, d;
        struct lc_mv_epi epi;
        int f = 0;
        if (!matvec_plan(be, mm, at + 1 < n ? nodes[at + 1] : NULL, at + 2 < n ? nodes[at + 2] : NULL, &a, &b, &d, &epi, &f)) break;
        n_out[nseg] = 0;
        for (int k = 0; k <= f; k++) {
            if (lc_tensor_of(be, nodes[at + k], true, &outs[nseg][n_out[nseg]++]) != LOOM_OK) return LOOM_OK;
        }
        ins[nseg][0] = a;
        ins[nseg][1] = b;
        ins[nseg][2] = b; /* the positions, for a rotation */
        ins[nseg][3] = b; /* the other operand of an ADD or MUL */
        if (epi.kind == LC_EPI_ROPE && lc_tensor_of(be, nodes[at + 1]->src[1], false, &ins[nseg][2]) != LOOM_OK) return LOOM_OK;
        if ((epi.kind == LC_EPI_ADD || epi.kind == LC_EPI_MUL) &&
            lc_tensor_of(be, nodes[at + 1]->src[nodes[at + 1]->src[0] == mm ? 1 : 0], false, &ins[nseg][3]) != LOOM_OK) {
            return LOOM_OK;
        }
        lc_matvec_args(&a, &b, &d, &epi, true, NULL, NULL, m.s[nseg]);
        if (m.s[nseg].vec != m.s[0].vec || m.s[nseg].K != m.s[0].K) break;
        nseg++;
        at += 1 + f;
    }
    if (nseg < 2) return LOOM_OK;
    for (int s1 = 0; s1 < nseg; s1++) {
        for (int s2 = 0; s2 < nseg; s2++) {
            if (s1 == s2) continue;
            for (int o = 0; o < n_out[s1]; o++) {
                /* nothing one segment writes may be read by another */
                for (int k = 0; k < 4; k++) {
                    if (lc_overlap_of(&outs[s1][o], &ins[s2][k]) != LC_DISJOINT) return LOOM_OK;
                }
                if (s2 < s1) continue;
                /* results of an earlier segment that a later one overwrites (the allocator reuses the
                 * memory of a product once its rotation or store has read it) are left unwritten, so the
                 * memory ends as the nodes one by one would leave it; any other overlap: no launch */
                for (int o2 = 0; o2 < n_out[s2]; o2++) {
                    if (lc_overlap_of(&outs[s1][o], &outs[s2][o2]) == LC_DISJOINT) continue;
                    const bool skippable = o == 0 || (o == 1 && m.s[s1].epi.kind != LC_EPI_COPY);
                    if (!skippable || !covered_by(&outs[s1][o], &outs[s2][o2])) return LOOM_OK;
                    if (o == 0) m.s[s1].skip_d = 1;
                    else m.s[s1].skip_e = 1;
                }
            }
        }
    }
    if (pp) { /* the segments read h and g; the first one's blocks write the norm's results */
        struct lc_pre_plan pl = *pp;
        if (!pre_norm_fits(be, &pl, nodes, at)) return LOOM_OK;
        for (int sg = 0; sg < nseg; sg++) pre_norm_apply(&pl, sg == 0, m.s[sg]);
    }
    m.s[0].q8_in = q8_handoff_for(be, m.s[0].b, m.s[0].K); /* u's 8-bit runs, by the launch before */
    *used = at;
    lc_note_fusion(be, LOOM_CUDA_FUSION_MULTI);
    if (pp) lc_note_fusion(be, LOOM_CUDA_FUSION_PRE_NORM);
    for (int sg = 0; sg < nseg; sg++) {
        if (m.s[sg].epi.kind != LC_EPI_NONE) lc_note_fusion(be, LOOM_CUDA_FUSION_EPILOGUE);
    }
    return lc_matvec_queue_multi(be, m, nseg);
}

/* The softmax 'sm' of the product's result d (a, b: its operands) as the launch's tail, or false
 * (also when the softmax's result overlaps what other batches' blocks may still read). */
static bool soft_max_tail_for(struct lc_backend * be, const struct loom_tensor * mm, const struct loom_tensor * sm,
                              const struct lc_tensor * a, const struct lc_tensor * b, const struct lc_tensor * d, struct lc_mv_tail * t) {
    if (sm->op != LOOM_OP_SOFT_MAX || sm->src[0] != mm || !lc_soft_max_supported(sm)) return false;
    if (mm->ne[1] != 1 || mm->ne[2] * mm->ne[3] > LC_TAIL_COUNTERS) return false;
    struct lc_tensor y, m;
    if (lc_tensor_of(be, sm, true, &y) != LOOM_OK) return false;
    if (sm->src[1] && lc_tensor_of(be, sm->src[1], false, &m) != LOOM_OK) return false;
    /* each row is read whole before it is written: the result may replace the product in place */
    if (lc_overlap_of(&y, d) == LC_PARTIAL) return false;
    if (sm->src[1] && (lc_overlap_of(&y, &m) != LC_DISJOINT || lc_overlap_of(&m, d) != LC_DISJOINT)) return false;
    if (lc_overlap_of(&y, a) != LC_DISJOINT || lc_overlap_of(&y, b) != LC_DISJOINT) return false;
    t->kind = LC_TAIL_SOFT_MAX;
    t->count = be->tail_count;
    t->x = d->data;
    copy_strides(t->x_nb, d);
    t->m = sm->src[1] ? m.data : NULL;
    if (sm->src[1]) {
        copy_strides(t->m_nb, &m);
        t->m_ne2 = m.ne[2];
        t->m_ne3 = m.ne[3];
        t->m_type = m.type;
    }
    t->y = y.data;
    copy_strides(t->y_nb, &y);
    t->f = loom_get_op_param_f32(sm, 0);
    return true;
}

/* RMS_NORM 'norm' of 'src' (the product's result or its epilogue's, one column) and MUL 'mul' of
 * the norm by an F32 weight row, as the launch's tail, or false. */
static bool rms_norm_tail_for(struct lc_backend * be, const struct loom_tensor * src, const struct loom_tensor * norm,
                              const struct loom_tensor * mul, struct lc_mv_tail * t) {
    if (!norm_mul_pattern(norm, mul) || norm->src[0] != src) return false;
    const struct loom_tensor * wt = mul->src[1];
    struct lc_tensor x, y, w, z;
    if (lc_tensor_of(be, src, false, &x) != LOOM_OK || lc_tensor_of(be, norm, true, &y) != LOOM_OK ||
        lc_tensor_of(be, wt, false, &w) != LOOM_OK || lc_tensor_of(be, mul, true, &z) != LOOM_OK) {
        return false;
    }
    /* as lc_rms_norm_fused: each element read and written by one thread; the weight read by all */
    if (lc_overlap_of(&y, &x) == LC_PARTIAL || lc_overlap_of(&z, &x) == LC_PARTIAL || lc_overlap_of(&z, &y) == LC_PARTIAL ||
        lc_overlap_of(&z, &w) != LC_DISJOINT || lc_overlap_of(&y, &w) != LC_DISJOINT) {
        return false;
    }
    t->kind = LC_TAIL_RMS_NORM;
    t->count = be->tail_count;
    t->x = x.data;
    copy_strides(t->x_nb, &x);
    t->w = w.data;
    t->w_nb0 = w.nb[0];
    t->y = y.data;
    copy_strides(t->y_nb, &y);
    t->z = z.data;
    t->z_nb0 = z.nb[0];
    t->f = loom_get_op_param_f32(norm, 0);
    return true;
}

/* Notes the fusions of one product's launch: its epilogue, tail and pre-norm (loom_cuda_get_stats). */
static void note_fusions(struct lc_backend * be, const struct lc_mv_epi * epi, const struct lc_mv_tail * tail, const struct lc_pre_plan * pp) {
    if (epi->kind != LC_EPI_NONE) lc_note_fusion(be, LOOM_CUDA_FUSION_EPILOGUE);
    if (tail->kind == LC_TAIL_SOFT_MAX) lc_note_fusion(be, LOOM_CUDA_FUSION_TAIL_SOFT_MAX);
    if (tail->kind == LC_TAIL_RMS_NORM) lc_note_fusion(be, LOOM_CUDA_FUSION_TAIL_NORM);
    if (tail->kind == LC_TAIL_RMS_PART) lc_note_fusion(be, LOOM_CUDA_FUSION_TAIL_PRE_NORM);
    if (pp) lc_note_fusion(be, LOOM_CUDA_FUSION_PRE_NORM);
}

/* A product with its epilogue and tail (comment of lc_mul_mat_group) or, with a pre-norm 'pp', with
 * its epilogue; '*used' = nodes queued (0: none, the product is the caller's). */
static enum loom_status lc_mul_mat_fused(struct lc_backend * be, struct loom_tensor * const * nodes, int n, const struct lc_pre_plan * pp,
                                         int * used) {
    struct lc_tensor a, b, d;
    struct lc_mv_epi epi;
    struct loom_tensor * mm = nodes[0];
    int fused = 0;
    *used = 0;
    /* nothing fuses (or a tensor is not on this device: the unfused path reports it) */
    if (!matvec_plan(be, mm, n > 1 ? nodes[1] : NULL, n > 2 ? nodes[2] : NULL, &a, &b, &d, &epi, &fused)) return LOOM_OK;
    struct lc_mv_tail tail;
    memset(&tail, 0, sizeof tail);
    const int at = 1 + fused; /* the first node after the epilogue's */
    struct lc_pre_handoff ho;  /* what this launch leaves for the next one's pre-norm */
    ho.valid = false;
    if (!pp && at < n && epi.kind != LC_EPI_ROPE && epi.kind != LC_EPI_COPY) {
        if (fused == 0 && soft_max_tail_for(be, mm, nodes[at], &a, &b, &d, &tail)) {
            fused += 1;
        } else if (at + 2 < n && rms_part_tail_for(be, mm->src[0]->type, nodes[at - 1], nodes[at], nodes[at + 1], nodes[at + 2], &tail, &ho)) {
            /* the norm's nodes are the next launch's */
        } else if (rms_norm_tail_for(be, nodes[at - 1], nodes[at], at + 1 < n ? nodes[at + 1] : NULL, &tail)) {
            fused += 2;
        }
    }
    struct lc_pre_plan pl;
    if (pp) {
        pl = *pp;
        if (!pre_norm_fits(be, &pl, nodes, 1 + fused)) return LOOM_OK;
    } else if (fused == 0 && tail.kind == LC_TAIL_NONE) {
        return LOOM_OK;
    }
    *used = 1 + fused;
    if (ho.valid) be->pre_next = ho;
    if (tail.q8) lc_q8_leave(be, (const char *)be->pre_u, ho.K, tail.q8);
    note_fusions(be, &epi, &tail, pp);
    return lc_matvec(be, &a, &b, &d, &epi, lc_is_weight(mm->src[0]), NULL, NULL, tail.kind != LC_TAIL_NONE ? &tail : NULL, pp ? &pl : NULL);
}

/* SwiGLU of four consecutive nodes -- gate = MUL_MAT(wg, x), act = SILU(gate), up = MUL_MAT(wu, x),
 * out = MUL(act, up) -- in one matrix-vector launch that reads x once for both matrices (all
 * four results written); sets '*fused' when it applies, otherwise queues nothing. */
static enum loom_status lc_mul_mat_glu(struct lc_backend * be, struct loom_tensor * gate, struct loom_tensor * act, struct loom_tensor * up,
                                       struct loom_tensor * out, const struct lc_pre_plan * pp, bool * fused) {
    *fused = false;
    if (act->op != LOOM_OP_SILU || act->src[0] != gate || up->op != LOOM_OP_MUL_MAT || out->op != LOOM_OP_MUL) return LOOM_OK;
    if (!((out->src[0] == act && out->src[1] == up) || (out->src[0] == up && out->src[1] == act))) return LOOM_OK;
    const struct loom_tensor *wg = gate->src[0], *wu = up->src[0];
    if (up->src[1] != gate->src[1] || wg->type != wu->type || !loom_are_same_shape(wg, wu)) return LOOM_OK;
    for (int k = 1; k < 4; k++) {
        if (wg->nb[k] != wu->nb[k]) return LOOM_OK;
    }
    if (act->type != LOOM_TYPE_F32 || out->type != LOOM_TYPE_F32 || !loom_are_same_shape(act, gate) || !loom_are_same_shape(out, gate)) {
        return LOOM_OK;
    }
    if (!lc_mul_mat_is_matvec(gate) || !lc_mul_mat_is_matvec(up)) return LOOM_OK;
    struct lc_tensor a, a2, b, d, du, s, e;
    if (lc_tensor_of(be, wg, false, &a) != LOOM_OK || lc_tensor_of(be, wu, false, &a2) != LOOM_OK ||
        lc_tensor_of(be, gate->src[1], false, &b) != LOOM_OK || lc_tensor_of(be, gate, true, &d) != LOOM_OK ||
        lc_tensor_of(be, up, true, &du) != LOOM_OK || lc_tensor_of(be, act, true, &s) != LOOM_OK ||
        lc_tensor_of(be, out, true, &e) != LOOM_OK) {
        return LOOM_OK;
    }
    if (!lc_is_contiguous(&d) || !lc_is_contiguous(&du)) return LOOM_OK;
    /* results: apart from what every warp reads; among themselves apart or element for element
     * (written in the unfused order, so the memory ends as it would), except that silu(gate) must
     * survive the up product's result for the product that reads both */
    const struct lc_tensor * outs[4] = {&d, &s, &du, &e};
    for (int x = 0; x < 4; x++) {
        if (lc_overlap_of(outs[x], &a) != LC_DISJOINT || lc_overlap_of(outs[x], &a2) != LC_DISJOINT ||
            lc_overlap_of(outs[x], &b) != LC_DISJOINT) {
            return LOOM_OK;
        }
        for (int y = x + 1; y < 4; y++) {
            if (lc_overlap_of(outs[x], outs[y]) == LC_PARTIAL) return LOOM_OK;
        }
    }
    if (lc_overlap_of(&s, &du) != LC_DISJOINT) return LOOM_OK;
    struct lc_mv_glu glu;
    glu.up = du.data;
    glu.act = s.data;
    glu.out = e.data;
    copy_strides(glu.up_nb, &du);
    copy_strides(glu.act_nb, &s);
    copy_strides(glu.out_nb, &e);
    struct lc_pre_plan pl;
    if (pp) {
        pl = *pp;
        struct loom_tensor * nodes[4] = {gate, act, up, out};
        if (!pre_norm_fits(be, &pl, nodes, 4)) return LOOM_OK;
    }
    struct lc_mv_epi none;
    memset(&none, 0, sizeof none);
    *fused = true;
    lc_note_fusion(be, LOOM_CUDA_FUSION_SWIGLU);
    if (pp) lc_note_fusion(be, LOOM_CUDA_FUSION_PRE_NORM);
    return lc_matvec(be, &a, &b, &d, &none, lc_is_weight(wg) && lc_is_weight(wu), a2.data, &glu, NULL, pp ? &pl : NULL);
}

enum loom_status lc_mul_mat_group(struct lc_backend * be, struct loom_tensor * const * nodes, int n, int * used) {
    *used = 0;
    struct lc_pre_plan pl;
    const struct lc_pre_plan * pp = NULL;
    int at = 0; /* the first product */
    if (nodes[0]->op == LOOM_OP_RMS_NORM) {
        if (n < 3 || !pre_norm_plan(be, nodes[0], nodes[1], nodes[2], &pl)) return LOOM_OK;
        pp = &pl;
        at = 2;
    }
    struct loom_tensor * const * mm = nodes + at;
    const int m = n - at;
    int k = 0;
    enum loom_status st = LOOM_OK;
    if (m > 3) {
        bool f = false;
        st = lc_mul_mat_glu(be, mm[0], mm[1], mm[2], mm[3], pp, &f);
        if (f) k = 4;
    }
    if (st == LOOM_OK && k == 0 && m > 2) st = lc_mul_mat_multi(be, mm, m, pp, &k);
    if (st == LOOM_OK && k == 0) st = lc_mul_mat_fused(be, mm, m, pp, &k);
    if (k > 0) *used = at + k;
    return st;
}
