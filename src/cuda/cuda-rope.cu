/* cuda-rope.cu -- rotary position embedding (Su et al. 2021, RoFormer): one thread per pair of a
 * row, looping over the heads of its token. Angles are formed in double precision and reduced to [-pi, pi] before the
 * float sine and cosine, so long positions keep full float accuracy. A copy of the result that
 * follows (the K cache store) can be fused in. */
#include "cuda-rope.cuh"

#include <string.h>

/* Heads a thread of lc_rope_kernel takes (their loads in flight together, one sine and cosine). */
#define LC_ROPE_HEADS 4

/* Thread (x, y) of a block takes pair slot x of the row (a rotated pair, or two elements past
 * n_dims copied as they are) for LC_ROPE_HEADS rows (heads) i1 = g * blockDim.y * LC_ROPE_HEADS +
 * y + k * blockDim.y of token i2 and batch i3, where blockIdx.y = i2 * ngroups + g (grid-stride)
 * and blockIdx.z = i3: the angle's sine and cosine are formed once per token, pair and thread, and
 * no index needs a division. */
__global__ void lc_rope_kernel(struct lc_tensor a, struct lc_tensor pos, struct lc_tensor d, int n_dims, int neox,
                               double log2_base, double freq_scale, struct lc_scatter sc, int has_sc, int ngroups) {
    lc_pdl_trigger();
    lc_pdl_wait();
    const int half = n_dims / 2;
    const int64_t slot = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nslots = half + (d.ne[0] - n_dims + 1) / 2;
    if (slot >= nslots) return;
    const bool rot = slot < half;
    int64_t j0, j1; /* the two elements this thread writes (j1 == d.ne[0]: only j0) */
    if (rot) {
        j0 = neox ? slot : 2 * slot;
        j1 = neox ? slot + half : 2 * slot + 1;
    } else {
        j0 = n_dims + 2 * (slot - half);
        j1 = j0 + 1;
    }
    const bool two = j1 < d.ne[0];
    const double inv_freq = rot ? exp2(-(double)(2 * slot) / (double)n_dims * log2_base) : 0.0;
    const double twopi = 6.283185307179586476925, inv_twopi = 0.15915494309189533576888;
    const int64_t ny = d.ne[2] * ngroups;
    for (int64_t i3 = blockIdx.z; i3 < d.ne[3]; i3 += gridDim.z) {
        for (int64_t y = blockIdx.y; y < ny; y += gridDim.y) {
            const uint32_t g = (uint32_t)y % (uint32_t)ngroups; /* ny < 2^32 (lc_rope_supported) */
            const int64_t i2 = (uint32_t)y / (uint32_t)ngroups, h0 = (int64_t)g * blockDim.y * LC_ROPE_HEADS + threadIdx.y;
            float s = 0.0f, c = 1.0f;
            if (rot) {
                const int32_t ps = *(const int32_t *)(pos.data + i2 * pos.nb[0]);
                const double theta = (double)ps * freq_scale * inv_freq;
                sincosf((float)(theta - twopi * rint(theta * inv_twopi)), &s, &c);
            }
            float x0[LC_ROPE_HEADS], x1[LC_ROPE_HEADS];
#pragma unroll
            for (int k = 0; k < LC_ROPE_HEADS; k++) {
                const int64_t i1 = h0 + k * blockDim.y;
                const char * x = a.data + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
                x0[k] = i1 < d.ne[1] ? *(const float *)(x + j0 * a.nb[0]) : 0.0f;
                x1[k] = i1 < d.ne[1] && two ? *(const float *)(x + j1 * a.nb[0]) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < LC_ROPE_HEADS; k++) {
                const int64_t i1 = h0 + k * blockDim.y;
                if (i1 >= d.ne[1]) break;
                const int64_t o = i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
                const float y0 = rot ? x0[k] * c - x1[k] * s : x0[k], y1 = rot ? x0[k] * s + x1[k] * c : x1[k];
                *(float *)(d.data + o + j0 * d.nb[0]) = y0;
                if (two) *(float *)(d.data + o + j1 * d.nb[0]) = y1;
                if (has_sc) {
                    lc_scatter_store(sc, o + j0 * d.nb[0], y0);
                    if (two) lc_scatter_store(sc, o + j1 * d.nb[0], y1);
                }
            }
        }
    }
}

bool lc_rope_supported(const struct loom_tensor * op) {
    const struct loom_tensor *a = op->src[0], *pos = op->src[1];
    if (!a || !pos || a->type != LOOM_TYPE_F32 || op->type != LOOM_TYPE_F32 || pos->type != LOOM_TYPE_I32) return false;
    if (!loom_are_same_shape(a, op) || loom_nelements(pos) != a->ne[2] || pos->ne[0] != a->ne[2]) return false;
    const int n_dims = loom_get_op_param_i32(op, 0), mode = loom_get_op_param_i32(op, 1);
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) return false;
    if (mode != LOOM_ROPE_NORMAL && mode != LOOM_ROPE_NEOX) return false;
    /* frequency factors and YaRN are computed on the CPU (the scheduler keeps such a rope there) */
    if (!loom_rope_is_plain(op)) return false;
    if (a->ne[1] * a->ne[2] >= ((int64_t)1 << 32)) return false; /* the kernel's 32-bit token-group index */
    return lc_strides_ok(a) && lc_strides_ok(pos) && lc_strides_ok(op);
}

static enum loom_status launch(struct lc_backend * be, struct loom_tensor * dst, const struct lc_tensor * a, const struct lc_tensor * pos,
                               const struct lc_tensor * d, const struct lc_scatter * sc, int has_sc) {
    const int n_dims = loom_get_op_param_i32(dst, 0), mode = loom_get_op_param_i32(dst, 1);
    const float base = loom_get_op_param_f32(dst, 2), scale = loom_get_op_param_f32(dst, 3);
    /* x: pair slots (up to 64 a block), y: heads (the rest of 256 threads) */
    const int64_t nslots = n_dims / 2 + (d->ne[0] - n_dims + 1) / 2;
    unsigned bx = 32;
    while (bx < 64 && (int64_t)bx < nslots) bx *= 2;
    unsigned by = 256 / bx;
    while (by > 1 && (int64_t)(by / 2) >= d->ne[1]) by /= 2;
    int ng = (int)((d->ne[1] + (int64_t)by * LC_ROPE_HEADS - 1) / ((int64_t)by * LC_ROPE_HEADS));
    const int64_t ny = d->ne[2] * ng;
    const dim3 block(bx, by, 1);
    const dim3 grid((unsigned)((nslots + bx - 1) / bx), (unsigned)(ny < 65535 ? ny : 65535), (unsigned)(d->ne[3] < 65535 ? d->ne[3] : 65535));
    struct lc_tensor ta = *a, tp = *pos, td = *d;
    struct lc_scatter tsc = *sc;
    int nd = n_dims, neox = mode == LOOM_ROPE_NEOX, hs = has_sc;
    double lb = log2((double)base), fs = (double)scale;
    void * args[] = {&ta, &tp, &td, &nd, &neox, &lb, &fs, &tsc, &hs, &ng};
    lc_launch(be, (const void *)lc_rope_kernel, grid, block, args);
    return LC_CHECK_LAUNCH("lc_rope_kernel");
}

enum loom_status lc_rope(struct lc_backend * be, struct loom_tensor * dst) {
    struct lc_tensor a, pos, d;
    enum loom_status st = lc_operands_of(be, dst, &a, &pos, &d);
    if (st != LOOM_OK) return st;
    struct lc_scatter none;
    memset(&none, 0, sizeof none);
    return launch(be, dst, &a, &pos, &d, &none, 0);
}

enum loom_status lc_rope_fused(struct lc_backend * be, struct loom_tensor * rope, struct loom_tensor * next, bool * fused) {
    *fused = false;
    if (!lc_reads_result_of(next, rope)) return LOOM_OK;
    struct lc_tensor a, pos, d, e;
    if (lc_tensor_of(be, rope->src[0], false, &a) != LOOM_OK || lc_tensor_of(be, rope->src[1], false, &pos) != LOOM_OK ||
        lc_tensor_of(be, rope, true, &d) != LOOM_OK) {
        return LOOM_OK;
    }
    struct lc_scatter sc;
    if (!lc_scatter_for(be, next, &d, &sc) || lc_tensor_of(be, next, true, &e) != LOOM_OK) return LOOM_OK;
    /* other threads read the pairs of 'a' and the positions */
    if (lc_overlap_of(&e, &a) != LC_DISJOINT || lc_overlap_of(&e, &pos) != LC_DISJOINT) return LOOM_OK;
    *fused = true;
    return launch(be, rope, &a, &pos, &d, &sc, 1);
}
