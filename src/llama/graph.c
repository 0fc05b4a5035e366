/* graph.c -- the forward graph of one decode step (llama, and qwen2: llama with q/k/v biases and
 * NeoX RoPE), with the KV cache viewed in place. */
#include "model-impl.h"

#include <math.h>

size_t loom_llama_graph_max_nodes(const struct loom_model * model) {
    return 64 + (size_t)model->hp.n_layer * 52;
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

/* Writes the step's K and V into the cache (at the cells in->kv_idx) and returns the attention
 * output [n_embd, n_tokens], attending over the first n_kv cells (in->kq_mask masks the cells of
 * other sequences and of later positions). */
static struct loom_tensor * attention(struct loom_llama_context * lctx, struct loom_context * ctx, struct loom_cgraph * g,
                                      int il, struct loom_tensor * cur, const struct loom_graph_inputs * in, int32_t n_tokens) {
    const struct loom_hparams * hp = &lctx->model->hp;
    const struct loom_layer * L = &lctx->model->layers[il];
    const int64_t head_dim = hp->n_embd / hp->n_head;
    const int64_t n_embd_kv = head_dim * hp->n_head_kv;
    const int64_t n_kv = in->kq_mask->ne[0];
    struct loom_tensor * kc = lctx->k_cache[il];
    struct loom_tensor * vc = lctx->v_cache[il];

    struct loom_tensor * q = loom_mul_mat(ctx, L->wq, cur);
    struct loom_tensor * k = loom_mul_mat(ctx, L->wk, cur);
    struct loom_tensor * v = loom_mul_mat(ctx, L->wv, cur);
    if (L->bq) q = loom_add(ctx, q, L->bq);
    if (L->bk) k = loom_add(ctx, k, L->bk);
    if (L->bv) v = loom_add(ctx, v, L->bv);
    const struct loom_rope_ext_params ext = {.n_ctx_orig = hp->n_ctx_orig, .ext_factor = hp->yarn_ext_factor,
                                             .attn_factor = hp->yarn_attn_factor, .beta_fast = hp->yarn_beta_fast,
                                             .beta_slow = hp->yarn_beta_slow};
    q = loom_rope_ext(ctx, loom_reshape_3d(ctx, q, head_dim, hp->n_head, n_tokens), in->pos, lctx->model->rope_freqs, hp->n_rot,
                      hp->rope_mode, hp->rope_freq_base, hp->rope_freq_scale, &ext);
    k = loom_rope_ext(ctx, loom_reshape_3d(ctx, k, head_dim, hp->n_head_kv, n_tokens), in->pos, lctx->model->rope_freqs, hp->n_rot,
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
    loom_backend_t owner = L->offloaded ? lctx->backend_dev : lctx->backend_cpu;
    loom_backend_sched_set_tensor_backend(lctx->sched, k_store, owner);
    loom_backend_sched_set_tensor_backend(lctx->sched, v_store, owner);

    struct loom_tensor * Q = loom_permute(ctx, q, 0, 2, 1, 3);                     /* [head_dim, n_tokens, n_head] */
    if (fused) {
        cur = attention_fused(ctx, Q, kc, vc, in->kq_mask, hp->n_head_kv, head_dim);
        loom_format_name(cur, "attn-%d", il);
        return loom_mul_mat(ctx, L->wo, cur);
    }
    struct loom_tensor * K = loom_view_3d(ctx, kc, head_dim, n_kv, hp->n_head_kv,   /* [head_dim, n_kv, n_head_kv] */
                                          kc->nb[1], loom_row_size(kc->type, head_dim), 0);
    struct loom_tensor * V = loom_view_3d(ctx, vc, n_kv, head_dim, hp->n_head_kv,   /* [n_kv, head_dim, n_head_kv] */
                                          vc->nb[1], (size_t)head_dim * vc->nb[1], 0);
    struct loom_tensor * kq = loom_mul_mat(ctx, K, Q);                              /* [n_kv, n_tokens, n_head] */
    kq = loom_soft_max_ext(ctx, kq, in->kq_mask, 1.0f / sqrtf((float)head_dim));
    struct loom_tensor * kqv = loom_mul_mat(ctx, V, kq);                            /* [head_dim, n_tokens, n_head] */
    struct loom_tensor * merged = loom_permute(ctx, kqv, 0, 2, 1, 3);               /* [head_dim, n_head, n_tokens] */
    cur = loom_cont_2d(ctx, merged, hp->n_embd, n_tokens);
    loom_format_name(cur, "attn-%d", il);
    return loom_mul_mat(ctx, L->wo, cur);
}

static struct loom_tensor * feed_forward(struct loom_context * ctx, const struct loom_layer * L, struct loom_tensor * cur) {
    struct loom_tensor * gate = loom_silu(ctx, loom_mul_mat(ctx, L->ffn_gate, cur));
    struct loom_tensor * up = loom_mul_mat(ctx, L->ffn_up, cur);
    return loom_mul_mat(ctx, L->ffn_down, loom_mul(ctx, gate, up));
}

struct loom_cgraph * loom_llama_build_graph(struct loom_llama_context * lctx, struct loom_context * ctx, int32_t n_tokens,
                                            int64_t n_kv, int32_t n_outputs, struct loom_graph_inputs * in) {
    const struct loom_model * m = lctx->model;
    const struct loom_hparams * hp = &m->hp;
    struct loom_cgraph * g = loom_new_graph_custom(ctx, loom_llama_graph_max_nodes(m));

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

    struct loom_tensor * x = loom_get_rows(ctx, m->tok_embd, in->tokens);
    loom_set_name(x, "inp_embd");
    for (int il = 0; il < hp->n_layer; il++) {
        const struct loom_layer * L = &m->layers[il];
        struct loom_tensor * cur = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), L->attn_norm);
        cur = attention(lctx, ctx, g, il, cur, in, n_tokens);
        if (n_outputs == 0 && il == hp->n_layer - 1) return g; /* no logits: the last layer only stores its K and V */
        if (in->out_ids && il == hp->n_layer - 1) { /* the rest of the last layer only for the rows asked for */
            cur = loom_get_rows(ctx, cur, in->out_ids);
            x = loom_get_rows(ctx, x, in->out_ids);
        }
        x = loom_add(ctx, x, cur);
        cur = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), L->ffn_norm);
        x = loom_add(ctx, x, feed_forward(ctx, L, cur));
        loom_format_name(x, "l_out-%d", il);
    }
    x = loom_mul(ctx, loom_rms_norm(ctx, x, hp->rms_eps), m->output_norm);
    in->logits = loom_mul_mat(ctx, m->output, x);
    loom_set_name(in->logits, "logits");
    loom_set_output(in->logits);
    loom_build_forward_expand(g, in->logits);
    return g;
}
