/* spm.c -- SentencePiece BPE on one run of escaped text: merge best-scoring pairs, then byte fallback.
 *
 * Kudo & Richardson 2018 ("SentencePiece"); the merge order is by the score of the merged piece,
 * as in SentencePiece's bpe_model. Symbols form a doubly linked list over the text; candidate pairs
 * sit in a binary max-heap; a pair whose symbols changed since it was pushed is recognised as stale
 * when popped (its recorded length no longer matches), so the whole run costs O(n log n). */
#include "vocab-impl.h"

#include <stdlib.h>

struct sym {
    int32_t prev, next;   /* neighbours in the list, -1 at the ends */
    int32_t start, len;   /* bytes of the text; len 0 = merged into its left neighbour */
};

/* The right symbol is not stored: while 'left' keeps its length, its 'next' cannot change (a
 * symbol's next changes only when it absorbs that neighbour), and both lengths only grow. So the
 * pair is current exactly when left is alive and len(left) + len(left.next) still equals 'len'. */
struct pair {
    float score;   /* of the merged piece */
    int32_t left;  /* symbol */
    int32_t len;   /* bytes of left + right when pushed */
};

struct bpe {
    const struct loom_vocab * v;
    const char * text;
    struct sym * syms;
    struct pair * heap;
    size_t n_heap;
};

/* Higher score first; on ties the leftmost pair (symbol indices grow with text position). */
static bool pair_before(const struct pair * a, const struct pair * b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

#include "pair-heap.h"

/* Pushes the pair (l, r) when their concatenation is a text piece. */
static void try_pair(struct bpe * b, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t len = b->syms[l].len + b->syms[r].len;
    int32_t id = loom_vocab_find_text(b->v, b->text + b->syms[l].start, (size_t)len);
    if (id < 0) return;
    pair_heap_push(b->heap, &b->n_heap, (struct pair){b->v->scores[id], l, len});
}

static enum loom_status emit(const struct bpe * b, const struct sym * s, struct loom_tokbuf * out, bool * prev_unk) {
    const struct loom_vocab * v = b->v;
    int32_t id = loom_vocab_find_text(v, b->text + s->start, (size_t)s->len);
    if (id >= 0) {
        *prev_unk = false;
        return loom_tokbuf_push(out, id);
    }
    if (!v->byte_fallback) {
        /* SentencePiece emits one unknown token for a run of unknown symbols. */
        if (*prev_unk) return LOOM_OK;
        *prev_unk = true;
        return loom_tokbuf_push(out, v->unk);
    }
    *prev_unk = false;
    for (int32_t i = 0; i < s->len; i++) {
        enum loom_status st = loom_tokbuf_push(out, v->byte_ids[(uint8_t)b->text[s->start + i]]);
        if (st != LOOM_OK) return st;
    }
    return LOOM_OK;
}

enum loom_status loom_spm_encode(const struct loom_vocab * v, const char * text, size_t n, struct loom_tokbuf * out) {
    if (n == 0) return LOOM_OK;
    /* Each merge pushes at most two pairs after the n - 1 initial ones: at most 3n in the heap. */
    struct bpe b = {v, text, malloc(n * sizeof(struct sym)), malloc(3 * n * sizeof(struct pair)), 0};
    enum loom_status st = LOOM_ERR_OOM;
    if (!b.syms || !b.heap) goto done;

    int32_t n_syms = 0;
    for (size_t pos = 0; pos < n;) {
        int k = loom_utf8_check((const uint8_t *)text + pos, n - pos);
        size_t len = k > 0 ? (size_t)k : 1; /* a byte that is not part of a valid character stands alone */
        b.syms[n_syms] = (struct sym){n_syms - 1, n_syms + 1, (int32_t)pos, (int32_t)len};
        n_syms++;
        pos += len;
    }
    b.syms[n_syms - 1].next = -1;
    for (int32_t i = 0; i + 1 < n_syms; i++) try_pair(&b, i, i + 1);

    while (b.n_heap > 0) {
        struct pair p = pair_heap_pop(b.heap, &b.n_heap);
        struct sym * l = &b.syms[p.left];
        if (l->len == 0 || l->next < 0) continue; /* stale */
        struct sym * r = &b.syms[l->next];
        if (l->len + r->len != p.len) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0) b.syms[l->next].prev = p.left;
        try_pair(&b, l->prev, p.left);
        try_pair(&b, p.left, l->next);
    }

    st = LOOM_OK;
    bool prev_unk = false;
    for (int32_t i = 0; i >= 0 && st == LOOM_OK; i = b.syms[i].next) st = emit(&b, &b.syms[i], out, &prev_unk);
done:
    free(b.syms);
    free(b.heap);
    return st;
}
