/* kv-cache.c -- the KV cache's cells: which sequence and position each one holds (the field's unified
 * cache), where a batch's tokens go, the attention mask built from the tags, and removing ranges. */
#include "model-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum loom_status loom_kv_cells_init(struct loom_kv_cells * c, int32_t size) {
    memset(c, 0, sizeof *c);
    c->pos = malloc((size_t)size * sizeof *c->pos);
    c->seq = malloc((size_t)size * sizeof *c->seq);
    if (!c->pos || !c->seq) {
        loom_kv_cells_free(c);
        return LOOM_ERR_OOM;
    }
    c->size = size;
    loom_kv_cells_clear(c);
    return LOOM_OK;
}

void loom_kv_cells_free(struct loom_kv_cells * c) {
    free(c->pos);
    free(c->seq);
    memset(c, 0, sizeof *c);
}

void loom_kv_cells_clear(struct loom_kv_cells * c) {
    for (int32_t i = 0; i < c->size; i++) c->pos[i] = -1, c->seq[i] = -1;
    c->used = 0;
    c->n_hi = 0;
    c->first_free = 0;
}

bool loom_kv_cells_find(const struct loom_kv_cells * c, int32_t n, int32_t * cells) {
    if (n > c->size - c->used) return false;
    int32_t k = 0;
    for (int32_t i = c->first_free; i < c->size && k < n; i++) {
        if (c->seq[i] < 0) cells[k++] = i;
    }
    return k == n;
}

void loom_kv_cells_set(struct loom_kv_cells * c, int32_t cell, int32_t seq, int32_t pos) {
    if (c->seq[cell] < 0) c->used++;
    c->seq[cell] = seq;
    c->pos[cell] = pos;
    if (cell + 1 > c->n_hi) c->n_hi = cell + 1;
    while (c->first_free < c->size && c->seq[c->first_free] >= 0) c->first_free++;
}

void loom_kv_cells_release(struct loom_kv_cells * c, int32_t cell) {
    if (c->seq[cell] < 0) return;
    c->seq[cell] = -1;
    c->pos[cell] = -1;
    c->used--;
    if (cell < c->first_free) c->first_free = cell;
    while (c->n_hi > 0 && c->seq[c->n_hi - 1] < 0) c->n_hi--;
}

void loom_kv_cells_mask(const struct loom_kv_cells * c, int64_t n_kv, const int32_t * pos, const int32_t * seq, int32_t n,
                        float * mask) {
    for (int32_t i = 0; i < n; i++) {
        float * row = mask + (size_t)i * (size_t)n_kv;
        const int64_t n_cells = n_kv < c->n_hi ? n_kv : c->n_hi;
        for (int64_t j = 0; j < n_cells; j++) row[j] = c->seq[j] == seq[i] && c->pos[j] <= pos[i] ? 0.0f : -INFINITY;
        for (int64_t j = n_cells; j < n_kv; j++) row[j] = -INFINITY;
    }
}

int64_t loom_llama_kv_cells(const struct loom_llama_context * lctx) {
    const int64_t cells = ((int64_t)lctx->cells.n_hi + LOOM_LLAMA_KV_PAD - 1) / LOOM_LLAMA_KV_PAD * LOOM_LLAMA_KV_PAD;
    const int64_t n_kv = cells < LOOM_LLAMA_KV_PAD ? LOOM_LLAMA_KV_PAD : cells;
    return n_kv < lctx->params.n_ctx ? n_kv : lctx->params.n_ctx;
}

int32_t loom_llama_kv_seq_rm(struct loom_llama_context * lctx, int32_t seq_id, int32_t p0, int32_t p1) {
    struct loom_kv_cells * c = &lctx->cells;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    int32_t n = 0;
    /* the freed cells keep finite values from earlier steps; the mask hides them until a later
     * token's K and V overwrite them */
    for (int32_t i = c->n_hi - 1; i >= 0; i--) {
        if (c->seq[i] >= 0 && (seq_id < 0 || c->seq[i] == seq_id) && c->pos[i] >= p0 && c->pos[i] < p1) {
            loom_kv_cells_release(c, i);
            n++;
        }
    }
    return n;
}

int32_t loom_llama_kv_seq_pos_max(const struct loom_llama_context * lctx, int32_t seq_id) {
    const struct loom_kv_cells * c = &lctx->cells;
    int32_t mx = -1;
    for (int32_t i = 0; i < c->n_hi; i++) {
        if (c->seq[i] == seq_id && c->pos[i] > mx) mx = c->pos[i];
    }
    return mx;
}

int32_t loom_llama_kv_used_cells(const struct loom_llama_context * lctx) { return lctx->cells.used; }

int32_t loom_llama_n_past(const struct loom_llama_context * lctx) { return loom_llama_kv_seq_pos_max(lctx, 0) + 1; }

void loom_llama_kv_clear(struct loom_llama_context * lctx) {
    loom_kv_cells_clear(&lctx->cells);
    for (int d = 0; d <= LOOM_MAX_DEVICES; d++) {
        if (lctx->kv_buffers[d]) loom_backend_buffer_clear(lctx->kv_buffers[d], 0);
    }
}

void loom_llama_kv_truncate(struct loom_llama_context * lctx, int32_t n_keep) {
    loom_llama_kv_seq_rm(lctx, 0, n_keep < 0 ? 0 : n_keep, -1);
}
