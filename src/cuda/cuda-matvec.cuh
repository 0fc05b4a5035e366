/* cuda-matvec.cuh -- the launch description of a matrix-vector product with what is fused into it
 * (cuda-mulmat-plan.cu fills it from graph nodes; cuda-matvec.cu's kernels consume it). The
 * description holds device addresses, strides and shapes only: the planner does not know which
 * kernel runs it, and a kernel family for another weight type (lc_mv_args.type) reads the same
 * description. */
#ifndef LOOM_CUDA_MATVEC_CUH
#define LOOM_CUDA_MATVEC_CUH

#include "cuda-common.cuh"

/* What the node after a matrix-vector product computes from its result, fused into the product's
 * kernel (lane 0 of each row's warp, right after writing the product's own element). */
enum { LC_EPI_NONE = 0, LC_EPI_ADD, LC_EPI_MUL, LC_EPI_SILU, LC_EPI_COPY, LC_EPI_ROPE };

struct lc_mv_epi {
    int kind;
    char * e;                        /* ADD/MUL/SILU: F32 result, the product's shape */
    int64_t e_nb[4];                 /* bytes */
    const char * o;                  /* ADD/MUL: the other F32 operand, the product's shape */
    int64_t o_nb[4];
    struct lc_scatter sc;            /* COPY; ROPE with has_sc: the copy of the rotated result */
    /* ROPE (normal mode) of the product viewed as [head_dim, n_head, N]: rows 2i and 2i + 1 are a
     * pair, both in one warp (ROWS even); e/e_nb is the rotated result, the product's layout */
    const char * pos;                /* I32 [N] */
    int64_t pos_nb0, head_dim;
    int n_dims, has_sc;
    double log2_base, freq_scale;
};

/* SwiGLU fused into one launch of the gate and up products (p.a2 set): each warp computes row i
 * of both, and writes gate, silu(gate), up and silu(gate) * up. */
struct lc_mv_glu {
    char * up;                       /* the up product's result (p.d holds the gate's) */
    int64_t up_nb[4];
    char * act;                      /* silu(gate) */
    int64_t act_nb[4];
    char * out;                      /* silu(gate) * up */
    int64_t out_nb[4];
};

/* RMS_PART (no arrival count, no last block): each row's result (the epilogue's) times the weight
 * row into u, and each block's sum of its rows' squares, for the pre-norm of the products after.
 * Otherwise a node computed from the product's result by the last block to finish (arrivals counted in
 * 'count', which that block resets): the RMS norm of the result (or of the epilogue's) with the
 * MUL by its weight (the residual -> the next layer's input; one column, one batch), computed
 * when the whole grid is done, so it may write anywhere the nodes one by one would; or the
 * softmax of each batch's row (KQ -> SOFT_MAX, one column), computed by the last block of that
 * batch while other batches may still run, so its result must lie apart from their operands. */
enum { LC_TAIL_NONE = 0, LC_TAIL_SOFT_MAX, LC_TAIL_RMS_NORM, LC_TAIL_RMS_PART };

struct lc_mv_tail {
    int kind;
    unsigned * count;                /* arrival counters: one per batch (SOFT_MAX) or one */
    const char * x;                  /* the rows' source: the product's result or the epilogue's */
    int64_t x_nb[4];                 /* bytes */
    const char * m;                  /* SOFT_MAX: the mask (NULL: none) */
    int64_t m_nb[4], m_ne2, m_ne3;
    int m_type;
    const char * w;                  /* RMS_NORM, RMS_PART: the MUL's weight row */
    float * u;                       /* RMS_PART: the result times w, [M] (a pre-norm's activations) */
    float * parts;                   /* RMS_PART: per block, the sum of the squared results of its rows */
    char * q8;                       /* RMS_PART of a quantized product (blocks of one run of 32 rows): block b also writes
                                      * the lc_a8 record of u's run b here, for the quantized product after (NULL: not) */
    int64_t w_nb0;
    char * y;                        /* SOFT_MAX / RMS_NORM result */
    int64_t y_nb[4];
    char * z;                        /* RMS_NORM: the MUL's result */
    int64_t z_nb0;
    float f;                         /* SOFT_MAX scale, RMS_NORM epsilon */
};

/* The RMS norm of a layer's input h and the MUL by the norm's weight row g, finished inside the
 * products that read them ("pre-norm"): the kernel before them (the residual's product, tail
 * LC_TAIL_RMS_PART) wrote u = h * g and each of its blocks the sum of h^2 over its rows; the
 * products stream u as their activations (b = u: the same inner loop as without a norm), each warp
 * sums the partial sums after the wait for that kernel (in one fixed order, so every warp gets the
 * same scale) and scales its results by 1/sqrt(mean(h^2) + eps). No kernel and no last block computes
 * the norm before the products can start. The blocks of the launch's first product also write the
 * norm's result y = h * scale and the MUL's z = u * scale, a slice each. */
struct lc_mv_pre {
    const float * parts;             /* the sums of h^2, [nparts] */
    int nparts;                      /* at most LC_PRE_ASYNC_PARTS: copied into shared memory while the products run */
    const char * h;                  /* F32 [K], dense */
    char * y;                        /* the norm's result, F32 [K] dense; NULL: not written (a later result of the launch covers it) */
    char * z;                        /* the MUL's result; NULL: not written */
    float eps;
    int write;                       /* this product's blocks write y and z */
};

struct lc_mv_args {
    int type;                        /* the weights' element type (enum loom_type): the kernel family */
    const char * a;                  /* [K, M, ne2a, ne3a] rows dense */
    const char * a2;                 /* SwiGLU: the up matrix (a's shape and strides); NULL otherwise */
    const char * b;                  /* F32 [K, N, ne2, ne3] rows dense */
    char * d;                        /* F32 [M, N, ne2, ne3] */
    int64_t K, M, ne2, nbatch;
    int64_t a_nb1, a_nb2, a_nb3;     /* bytes */
    int64_t b_nb1, b_nb2, b_nb3;
    int64_t d_nb0, d_nb1, d_nb2, d_nb3;
    int64_t r2, r3;
    int64_t j0;                      /* the launch's first column: its column j is column j0 + j of b and of every result */
    /* quantized weights with integer dot products (cuda-quant-dot.cuh): b quantized to 8 bits,
     * lc_a8 runs of column j, batch (i2, i3) from q8 + j * q8_nb1 + i2 * q8_nb2 + i3 * q8_nb3 */
    const char * q8;
    int64_t q8_nb1, q8_nb2, q8_nb3;
    const char * q8_in;              /* b's 8-bit runs (one column), written by the launch before (a handoff); NULL: the launch quantizes b */
    int vec;                         /* rows and columns 16-byte aligned: vector loads */
    int a_const;                     /* 'a' is a weight: its first loads may precede the wait for the previous kernel */
    /* in a several-product launch: the product's result (d) or the epilogue's (epi.e) is wholly
     * overwritten by a later product of the same launch, so it is not written at all */
    int skip_d, skip_e;
    struct lc_mv_epi epi;
    struct lc_mv_glu glu;
    struct lc_mv_tail tail;
    struct lc_mv_pre pre;            /* pre.parts set: the pre-norm (one column) */
};

/* Products with a last-block tail run in one kernel shape: LC_TAIL_ROWS rows per warp,
 * LC_TAIL_WARPS warps per block (the planner sizes RMS_PART's partial sums by it); those of
 * quantized weights LC_QTAIL_WARPS warps, so that a block holds one run of 32 rows whose 8-bit
 * record it can write (lc_mv_tail.q8). */
#define LC_TAIL_ROWS 2
#define LC_TAIL_WARPS 4
#define LC_QTAIL_WARPS 16
/* Rows per block of a product with a tail whose weights are of type 'type' (the planner sizes
 * RMS_PART's partial sums and u's 8-bit records by it): LC_TAIL_ROWS times the warps of the
 * kernel family lc_matvec_queue takes for that type. */
int64_t lc_matvec_tail_rows(int type);

/* Several one-column products of the same activations, one per blockIdx.z (each with its own
 * weights, result and epilogue), in one launch: a layer's q, k and v products, which one by one
 * are too short to keep the memory system busy from start to end. Every product has the same
 * weight type, K and 'vec'. */
#define LC_MV_MAX_SEG 3
struct lc_mv_multi {
    struct lc_mv_args s[LC_MV_MAX_SEG];
};

/* Queues product 'p' of 'ncols' columns (1 .. lc_matvec_max_cols(p.type)) on the backend's stream, in the
 * kernel shape measured best for it (bench/cuda-notes.md); p.type is F32, F16, BF16 or quantized. A product
 * with a tail (p.tail.kind) or a pre-norm (p.pre.parts) has one column. Returns the launch's status. */
enum loom_status lc_matvec_queue(const struct lc_backend * be, const struct lc_mv_args & p, int ncols);
/* Queues the 'n' (2 .. LC_MV_MAX_SEG) one-column products of 'm' in one launch; with
 * m.s[0].pre.parts set, every product carries its pre-norm. No product has a tail. */
enum loom_status lc_matvec_queue_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n);
/* The same for quantized weights (p.type one of lc_is_quant_type's; cuda-matvec-q.cu); the
 * float launchers hand such products on to them. */
bool lc_matvec_q_supported(int type);
enum loom_status lc_matvec_q_queue(const struct lc_backend * be, const struct lc_mv_args & p, int ncols);
enum loom_status lc_matvec_q_queue_multi(const struct lc_backend * be, const struct lc_mv_multi & m, int n);
/* True for the quantized types whose products quantize the activations to 8 bits and take integer
 * dot products (cuda-quant-dot.cuh); their launches first write the 8-bit activations into
 * be->act8, which must hold lc_matvec_q_act_bytes(type, K, ncols, nbatch) bytes (0 for the other
 * types). */
bool lc_q8dot_type(int type);
size_t lc_matvec_q_act_bytes(int type, int64_t K, int64_t ncols, int64_t nbatch);

#endif
