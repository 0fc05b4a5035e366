/* graph.c -- the forward graph of one decode step (llama, and qwen2: llama with q/k/v biases and
 * NeoX RoPE), with the KV cache viewed in place. */
#include "model-impl.h"

#include <math.h>

size_t loom_llama_graph_max_nodes(const struct loom_model * model) {
    return 64 + (size_t)model->hp.n_layer * 52 * (model->parts ? (size_t)model->n_devs + 1 : 1);
}

/* micro_batches' count for the largest step, n_batch tokens (below). */
static int micro_batches(const struct loom_llama_context * lctx, int32_t n_tokens, int n_stages, int32_t * ub);

static int layer_stages(const struct loom_model * m) {
    int n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) n += il == 0 || m->layers[il].dev != m->layers[il - 1].dev;
    return n;
}

size_t loom_llama_graph_nodes(const struct loom_llama_context * lctx) {
    int32_t ub;
    const int n_mb = micro_batches(lctx, lctx->params.n_batch, layer_stages(lctx->model), &ub);
    return loom_llama_graph_max_nodes(lctx->model) * (size_t)(n_mb < 64 ? n_mb : 64) + 64 * 4;
}

/* The fused attention of one layer (FLASH_ATTN_EXT): Q [head_dim, n_tokens, n_head] over the first
 * n_kv cells of the caches kc and vc (both one row of n_embd_kv per position) -> [n_embd, n_tokens]. */
static struct loom_tensor * attention_fused(struct loom_context * ctx, struct loom_tensor * Q, struct loom_tensor * kc,
                                            struct loom_tensor * vc, struct loom_tensor * kq_mask, int64_t n_head_kv,
                                            int64_t head_dim) {
    const int64_t n_kv = kq_mask->ne[0];
    struct loom_tensor * K = loom_view_3d(ctx, kc, head_dim, n_kv, n_head_kv, kc->nb[1], loom_row_size(kc->type, head_dim), 0);
    struct loom_tensor * V = loom_view_3d(ctx, vc, head_dim, n_kv, n_head_kv, vc->nb[1], loom_row_size(vc->type, head_dim), 0);
    struct loom_tensor * o = loom_flash_attn_ext(ctx, Q, K, V, kq_mask, 1.0f / sqrtf((float)head_dim)); /* [head_dim, n_head, n_tokens] */
    return loom_reshape_2d(ctx, o, o->ne[0] * o->ne[1], o->ne[2]);
}

/* The weights, cache and heads one attention works on: a whole layer's, or with -sm row one
 * device's group of heads (its rows of q/k/v, its columns of the output, its part of the cache). */
struct attn_part {
    struct loom_tensor * wq, * wk, * wv, * wo, * bq, * bk, * bv;
    struct loom_tensor * kc, * vc;
    int64_t n_head, n_head_kv;
    loom_backend_t owner;            /* where the cache lives: the stores run there */
};

/* Writes the step's K and V into the cache (at the positions in->pos) and returns the attention
 * output [n_embd, n_tokens] (with a part of the heads: the output product's partial sum), attending
 * over the first n_kv cells (in->kq_mask masks the cells beyond each token's position). */
static struct loom_tensor * attention(struct loom_llama_context * lctx, struct loom_context * ctx, struct loom_cgraph * g,
                                      int il, struct loom_tensor * cur, const struct loom_graph_inputs * in, int32_t n_tokens,
                                      const struct attn_part * P) {
    const struct loom_hparams * hp = &lctx->model->hp;
    const int64_t head_dim = hp->n_embd / hp->n_head;
    const int64_t n_embd_kv = head_dim * P->n_head_kv;
    const int64_t n_kv = in->kq_mask->ne[0];
    struct loom_tensor * kc = P->kc;
    struct loom_tensor * vc = P->vc;

    struct loom_tensor * q = loom_mul_mat(ctx, P->wq, cur);
    struct loom_tensor * k = loom_mul_mat(ctx, P->wk, cur);
    struct loom_tensor * v = loom_mul_mat(ctx, P->wv, cur);
    if (P->bq) q = loom_add(ctx, q, P->bq);
    if (P->bk) k = loom_add(ctx, k, P->bk);
    if (P->bv) v = loom_add(ctx, v, P->bv);
    const struct loom_rope_ext_params ext = {.n_ctx_orig = hp->n_ctx_orig, .ext_factor = hp->yarn_ext_factor,
                                             .attn_factor = hp->yarn_attn_factor, .beta_fast = hp->yarn_beta_fast,
                                             .beta_slow = hp->yarn_beta_slow};
    q = loom_rope_ext(ctx, loom_reshape_3d(ctx, q, head_dim, P->n_head, n_tokens), in->pos, lctx->model->rope_freqs, hp->n_rot,
                      hp->rope_mode, hp->rope_freq_base, hp->rope_freq_scale, &ext);
    k = loom_rope_ext(ctx, loom_reshape_3d(ctx, k, head_dim, P->n_head_kv, n_tokens), in->pos, lctx->model->rope_freqs, hp->n_rot,
                      hp->rope_mode, hp->rope_freq_base, hp->rope_freq_scale, &ext);
    loom_format_name(q, "q-%d", il);
    loom_format_name(k, "k-%d", il);
    /* q first: the K and V products still read 'cur' after it, so the rotated q never takes the
     * memory of 'cur' (a device then rotates q in the product's own kernel) */
    loom_build_forward_expand(g, q);

    /* store at the cells (an input, so that the graph serves the next tokens too): K one row per
     * cell, V transposed (one row per channel, cells contiguous) unless the layer's attention is
     * fused */
    const bool fused = lctx->flash_attn[il];
    struct loom_tensor * k_store = loom_set_rows(ctx, kc, loom_reshape_2d(ctx, k, n_embd_kv, n_tokens), in->kv_idx);
    struct loom_tensor * v_store = loom_set_rows(ctx, fused ? vc : loom_transpose(ctx, vc), v, in->kv_idx);
    loom_build_forward_expand(g, k_store);
    loom_build_forward_expand(g, v_store);
    /* the stores must run where the cache lives */
    loom_backend_sched_set_tensor_backend(lctx->sched, k_store, P->owner);
    loom_backend_sched_set_tensor_backend(lctx->sched, v_store, P->owner);

    struct loom_tensor * Q = loom_permute(ctx, q, 0, 2, 1, 3);                     /* [head_dim, n_tokens, n_head] */
    if (fused) {
        cur = attention_fused(ctx, Q, kc, vc, in->kq_mask, P->n_head_kv, head_dim);
        loom_format_name(cur, "attn-%d", il);
        return loom_mul_mat(ctx, P->wo, cur);
    }
    struct loom_tensor * K = loom_view_3d(ctx, kc, head_dim, n_kv, P->n_head_kv,    /* [head_dim, n_kv, n_head_kv] */
                                          kc->nb[1], loom_row_size(kc->type, head_dim), 0);
    struct loom_tensor * V = loom_view_3d(ctx, vc, n_kv, head_dim, P->n_head_kv,    /* [n_kv, head_dim, n_head_kv] */
                                          vc->nb[1], (size_t)head_dim * vc->nb[1], 0);
    struct loom_tensor * kq = loom_mul_mat(ctx, K, Q);                              /* [n_kv, n_tokens, n_head] */
    kq = loom_soft_max_ext(ctx, kq, in->kq_mask, 1.0f / sqrtf((float)head_dim));
    struct loom_tensor * kqv = loom_mul_mat(ctx, V, kq);                            /* [head_dim, n_tokens, n_head] */
    struct loom_tensor * merged = loom_permute(ctx, kqv, 0, 2, 1, 3);               /* [head_dim, n_head, n_tokens] */
    cur = loom_cont_2d(ctx, merged, head_dim * P->n_head, n_tokens);
    loom_format_name(cur, "attn-%d", il);
    return loom_mul_mat(ctx, P->wo, cur);
}

/* SwiGLU: down(silu(gate cur) * up cur); with -sm row one device's rows of gate/up and columns of
 * down, giving a partial sum. */
static struct loom_tensor * feed_forward(struct loom_context * ctx, struct loom_tensor * w_gate, struct loom_tensor * w_up,
                                         struct loom_tensor * w_down, struct loom_tensor * cur) {
    struct loom_tensor * gate = loom_silu(ctx, loom_mul_mat(ctx, w_gate, cur));
    struct loom_tensor * up = loom_mul_mat(ctx, w_up, cur);
    return loom_mul_mat(ctx, w_down, loom_mul(ctx, gate, up));
}

/* One whole layer on 'x' [n_embd, n_tokens]: the residual stream after it. In the last layer only
 * the rows asked for go on after the attention: in->out_ids, or with 'last_only' the last token's. */
static struct loom_tensor * layer_whole(struct loom_llama_context * lctx, struct loom_context * ctx, struct loom_cgraph * g, int il,
                                        struct loom_tensor * x, const struct loom_graph_inputs * in, int32_t n_tokens, bool last_only) {
    const struct loom_hparams * hp = &lctx->model->hp;
    const struct loom_layer * L = &lctx->model->layers[il];
    const struct attn_part P = {L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, lctx->k_cache[(size_t)il * lctx->kv_parts],
                                lctx->v_cache[(size_t)il * lctx->kv_parts], hp->n_head, hp->n_head_kv, loom_llama_layer_backend(lctx, il)};
    struct loom_tensor * cur = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), L->attn_norm);
    cur = attention(lctx, ctx, g, il, cur, in, n_tokens, &P);
    if (in->out_ids && il == hp->n_layer - 1) { /* the rest of the last layer only for the rows asked for */
        cur = loom_get_rows(ctx, cur, in->out_ids);
        x = loom_get_rows(ctx, x, in->out_ids);
    } else if (last_only && il == hp->n_layer - 1 && n_tokens > 1) {
        cur = loom_view_2d(ctx, cur, cur->ne[0], 1, cur->nb[1], (size_t)(n_tokens - 1) * cur->nb[1]);
        x = loom_view_2d(ctx, x, x->ne[0], 1, x->nb[1], (size_t)(n_tokens - 1) * x->nb[1]);
    }
    x = loom_add(ctx, x, cur);
    cur = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), L->ffn_norm);
    x = loom_add(ctx, x, feed_forward(ctx, L->ffn_gate, L->ffn_up, L->ffn_down, cur));
    loom_format_name(x, "l_out-%d", il);
    return x;
}

/* Sums the partials part[d] of every device into each device's residual stream xs[d] (-sm row):
 * one all-reduce (group 'group'), its nodes consecutive in the graph (the partials first), each
 * pinned to its device. */
static void all_reduce_add(struct loom_llama_context * lctx, struct loom_context * ctx, struct loom_cgraph * g, int group,
                           struct loom_tensor ** part, struct loom_tensor ** xs) {
    const int D = lctx->model->n_devs;
    struct loom_tensor * sum[LOOM_MAX_DEVICES];
    for (int d = 0; d < D; d++) loom_build_forward_expand(g, part[d]);
    for (int d = 0; d < D; d++) {
        sum[d] = loom_all_reduce(ctx, part[d], group, d, D);
        loom_format_name(sum[d], "allreduce-%d@%d", group, d);
        loom_backend_sched_set_tensor_backend(lctx->sched, sum[d], lctx->backend_devs[d]);
        loom_build_forward_expand(g, sum[d]);
    }
    for (int d = 0; d < D; d++) xs[d] = loom_add(ctx, xs[d], sum[d]);
}

/* One layer split by rows over the devices (Megatron-LM's tensor parallelism, Shoeybi et al.
 * 2019): each device's heads and feed-forward rows on its copy of the residual stream xs[d], the
 * partial sums of the output and down products all-reduced, so that every copy stays the same. */
static void layer_rows(struct loom_llama_context * lctx, struct loom_context * ctx, struct loom_cgraph * g, int il, struct loom_tensor ** xs,
                       const struct loom_graph_inputs * in, int32_t n_tokens) {
    const struct loom_model * m = lctx->model;
    const float eps = m->hp.rms_eps;
    const int D = m->n_devs;
    struct loom_tensor * part[LOOM_MAX_DEVICES];
    for (int d = 0; d < D; d++) {
        const struct loom_layer_part * Pp = &m->parts[(size_t)il * D + d];
        const struct attn_part P = {Pp->wq, Pp->wk, Pp->wv, Pp->wo, Pp->bq, Pp->bk, Pp->bv, lctx->k_cache[(size_t)il * D + d],
                                    lctx->v_cache[(size_t)il * D + d], Pp->n_head, Pp->n_head_kv, lctx->backend_devs[d]};
        struct loom_tensor * cur = loom_mul(ctx, loom_rms_norm(ctx, xs[d], eps), Pp->attn_norm);
        part[d] = attention(lctx, ctx, g, il, cur, in, n_tokens, &P);
    }
    all_reduce_add(lctx, ctx, g, 2 * il, part, xs);
    if (in->out_ids && il == m->hp.n_layer - 1) { /* the rest of the last layer only for the rows asked for */
        for (int d = 0; d < D; d++) xs[d] = loom_get_rows(ctx, xs[d], in->out_ids);
    }
    for (int d = 0; d < D; d++) {
        const struct loom_layer_part * Pp = &m->parts[(size_t)il * D + d];
        struct loom_tensor * cur = loom_mul(ctx, loom_rms_norm(ctx, xs[d], eps), Pp->ffn_norm);
        part[d] = feed_forward(ctx, Pp->ffn_gate, Pp->ffn_up, Pp->ffn_down, cur);
    }
    all_reduce_add(lctx, ctx, g, 2 * il + 1, part, xs);
    for (int d = 0; d < D; d++) loom_format_name(xs[d], "l_out-%d@%d", il, d);
}

/* The micro-batches a step of 'n_tokens' is cut into for pipelining (-sm layer over several
 * devices): 1 when it is not pipelined. '*ub' receives the tokens per micro-batch. */
static int micro_batches(const struct loom_llama_context * lctx, int32_t n_tokens, int n_stages, int32_t * ub) {
    *ub = n_tokens;
    if (lctx->model->split_mode != LOOM_SPLIT_MODE_LAYER || n_stages < 2 || lctx->params.logits_all) return 1;
    int32_t u = lctx->params.n_ubatch;
    if (u <= 0) { /* two micro-batches per stage, at least 32 tokens each */
        u = (n_tokens + 2 * n_stages - 1) / (2 * n_stages);
        if (u < 32) u = 32;
    }
    if (u >= n_tokens) return 1;
    *ub = u;
    return (n_tokens + u - 1) / u;
}

struct loom_cgraph * loom_llama_build_graph(struct loom_llama_context * lctx, struct loom_context * ctx, int32_t n_tokens,
                                            int64_t n_kv, int32_t n_outputs, const struct loom_llama_step * step,
                                            struct loom_graph_inputs * in) {
    const struct loom_model * m = lctx->model;
    const struct loom_hparams * hp = &m->hp;
    struct loom_cgraph * g = loom_new_graph_custom(ctx, loom_llama_graph_nodes(lctx));

    in->logits = NULL;
    in->tokens = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, n_tokens);
    in->pos = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, n_tokens);
    in->kv_idx = loom_new_tensor_1d(ctx, LOOM_TYPE_I32, n_tokens);
    in->kq_mask = loom_new_tensor_2d(ctx, LOOM_TYPE_F32, n_kv, n_tokens);
    in->out_ids = n_outputs > 0 && n_outputs < n_tokens ? loom_new_tensor_1d(ctx, LOOM_TYPE_I32, n_outputs) : NULL;
    loom_set_name(in->tokens, "inp_tokens");
    loom_set_name(in->pos, "inp_pos");
    loom_set_name(in->kv_idx, "inp_kv_idx");
    loom_set_name(in->kq_mask, "kq_mask");
    loom_set_input(in->tokens);
    loom_set_input(in->pos);
    loom_set_input(in->kv_idx);
    loom_set_input(in->kq_mask);
    if (in->out_ids) {
        loom_set_name(in->out_ids, "inp_out_ids");
        loom_set_input(in->out_ids);
    }

    /* stages: runs of consecutive layers on one device (the CPU's first); a pipelined step cuts
     * the tokens into micro-batches and builds wave t of stage s with micro-batch t - s, the later
     * stages first, so that a stage's work on micro-batch i is queued before the previous stage
     * starts on i + 1 (the scheduler then lets the two devices run at the same time) */
    int stage_first[LOOM_MAX_DEVICES + 2], n_stages = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        if (il == 0 || m->layers[il].dev != m->layers[il - 1].dev) stage_first[n_stages++] = il;
        if (n_stages == LOOM_MAX_DEVICES + 1) break; /* cannot happen: the layer split makes one run per device */
    }
    stage_first[n_stages] = hp->n_layer;
    int32_t ub = n_tokens;
    /* pipelined only when no output or just the last token's is wanted (the last micro-batch's) */
    const int n_mb = step && step->last_only && n_outputs <= 1 ? micro_batches(lctx, n_tokens, n_stages, &ub) : 1;
    struct loom_tensor * x = NULL;
    if (m->parts) { /* -sm row: whole layers on the CPU, then the split ones on every device */
        x = loom_get_rows(ctx, m->tok_embd, in->tokens);
        loom_set_name(x, "inp_embd");
        struct loom_tensor * xs[LOOM_MAX_DEVICES];
        bool split = false;
        for (int il = 0; il < hp->n_layer; il++) {
            if (!m->layers[il].offloaded) {
                x = layer_whole(lctx, ctx, g, il, x, in, n_tokens, false);
                continue;
            }
            if (!split) {
                for (int d = 0; d < m->n_devs; d++) xs[d] = x;
                split = true;
            }
            layer_rows(lctx, ctx, g, il, xs, in, n_tokens);
        }
        if (split) x = xs[m->output_dev];
    } else if (n_mb == 1) {
        x = loom_get_rows(ctx, m->tok_embd, in->tokens);
        loom_set_name(x, "inp_embd");
        for (int il = 0; il < hp->n_layer; il++) x = layer_whole(lctx, ctx, g, il, x, in, n_tokens, false);
    } else {
        struct loom_tensor * xm[64];
        struct loom_graph_inputs inm[64];
        const int n_mb_max = (int)(sizeof xm / sizeof xm[0]);
        const int n_used = n_mb < n_mb_max ? n_mb : n_mb_max;
        if (n_used < n_mb) ub = (n_tokens + n_used - 1) / n_used; /* at most 64 micro-batches */
        const int nm = (n_tokens + ub - 1) / ub;
        for (int i = 0; i < nm; i++) {
            const int32_t first = i * ub, n = n_tokens - first < ub ? n_tokens - first : ub;
            inm[i] = *in;
            inm[i].tokens = loom_view_1d(ctx, in->tokens, n, (size_t)first * in->tokens->nb[0]);
            inm[i].pos = loom_view_1d(ctx, in->pos, n, (size_t)first * in->pos->nb[0]);
            inm[i].kv_idx = loom_view_1d(ctx, in->kv_idx, n, (size_t)first * in->kv_idx->nb[0]);
            inm[i].out_ids = NULL;
            /* the cells in use up to its own last token: micro-batch i computes what a step of its
             * tokens alone would (the same products and softmax lengths) */
            int64_t hi = step->hi_before;
            for (int32_t j = 0; j < first + n; j++) hi = step->cells[j] + 1 > hi ? step->cells[j] + 1 : hi;
            int64_t kv_i = (hi + LOOM_LLAMA_KV_PAD - 1) / LOOM_LLAMA_KV_PAD * LOOM_LLAMA_KV_PAD;
            if (kv_i > n_kv) kv_i = n_kv;
            inm[i].kq_mask = loom_view_2d(ctx, in->kq_mask, kv_i, n, in->kq_mask->nb[1], (size_t)first * in->kq_mask->nb[1]);
            xm[i] = NULL;
        }
        /* the embeddings of every token first: the host's work is then done before the waves
         * start, and never waits for a device in the middle of them */
        struct loom_tensor * embd = loom_get_rows(ctx, m->tok_embd, in->tokens);
        loom_set_name(embd, "inp_embd");
        loom_build_forward_expand(g, embd);
        for (int t = 0; t < nm + n_stages - 1; t++) {
            for (int st = n_stages - 1; st >= 0; st--) {
                const int i = t - st;
                if (i < 0 || i >= nm) continue;
                const int32_t n = (int32_t)inm[i].tokens->ne[0];
                if (st == 0) xm[i] = loom_view_2d(ctx, embd, hp->n_embd, n, embd->nb[1], (size_t)(i * ub) * embd->nb[1]);
                for (int il = stage_first[st]; il < stage_first[st + 1]; il++) xm[i] = layer_whole(lctx, ctx, g, il, xm[i], &inm[i], n, i == nm - 1 && n_outputs == 1);
                loom_build_forward_expand(g, xm[i]);
            }
        }
        x = xm[nm - 1]; /* with one output, the last token's row only (layer_whole's last_only) */
        in->out_ids = NULL;
    }
    if (n_outputs == 0) return g; /* no logits: the layers only store their K and V */
    x = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), m->output_norm);
    in->logits = loom_mul_mat(ctx, m->output, x);
    loom_set_name(in->logits, "logits");
    loom_set_output(in->logits);
    loom_build_forward_expand(g, in->logits);
    return g;
}
