/* bpe.c -- byte-level BPE (GPT-2; Radford et al. 2019, Sennrich et al. 2016): pre-tokenize, then
 * merge each word's bytes by merge rank.
 *
 * Symbols are piece ids in a doubly linked list over the word's bytes; candidate pairs sit in a
 * binary min-heap by (rank, position); a popped pair whose symbols changed since it was pushed is
 * stale and skipped, so a word of n bytes costs O(n log n). */
#include "pretok.h"
#include "vocab-impl.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's table: the printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
 * themselves; the other 68 take U+0100.. in byte order. */
static bool byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t loom_bpe_byte_char(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

int loom_bpe_char_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
    return cp == 256 + 67 ? 0xAD : -1;
}

struct sym {
    int32_t prev, next;  /* neighbours, -1 at the ends */
    int32_t id;          /* piece; -1 a byte without a piece; -2 merged into its left neighbour */
};

struct pair {
    int32_t rank, left, right;  /* symbols */
    int32_t lid, rid;           /* their pieces when pushed */
    int32_t id;                 /* the merged piece */
};

struct work {
    struct sym * syms;
    struct pair * heap;
    size_t n_heap, cap;  /* bytes the arrays are sized for (heap: 3 x) */
    char * spell;        /* a word in GGUF spelling (ignore_merges) */
};

static bool pair_before(const struct pair * a, const struct pair * b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

#include "pair-heap.h"

static void try_pair(const struct loom_vocab * v, struct work * w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t lid = w->syms[l].id, rid = w->syms[r].id, rank, id;
    if (lid < 0 || rid < 0 || !loom_vocab_merge_find(v, lid, rid, &rank, &id)) return;
    pair_heap_push(w->heap, &w->n_heap, (struct pair){rank, l, r, lid, rid, id});
}

static bool work_reserve(struct work * w, size_t n) {
    if (n <= w->cap) return true;
    size_t c = w->cap ? w->cap : 64;
    while (c < n) c *= 2;
    struct sym * s = realloc(w->syms, c * sizeof *s);
    if (s) w->syms = s;
    struct pair * h = realloc(w->heap, 3 * c * sizeof *h);
    if (h) w->heap = h;
    char * sp = realloc(w->spell, 2 * c);
    if (sp) w->spell = sp;
    if (!s || !h || !sp) return false;
    w->cap = c;
    return true;
}

/* The ids of one word of 'n' bytes. */
static enum loom_status encode_word(const struct loom_vocab * v, struct work * w, const uint8_t * b, size_t n,
                                    struct loom_tokbuf * out) {
    if (n == 1) return v->byte_tok[b[0]] >= 0 ? loom_tokbuf_push(out, v->byte_tok[b[0]]) : LOOM_OK;
    if (!work_reserve(w, n)) return LOOM_ERR_OOM;
    if (v->ignore_merges) { /* the reference looks the whole word up among all pieces first */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t c = loom_bpe_byte_char(b[i]);
            k += loom_utf8_write(c, w->spell + k);
        }
        int32_t id = loom_vocab_find(v, w->spell, k);
        if (id >= 0) return loom_tokbuf_push(out, id);
    }
    for (size_t i = 0; i < n; i++) w->syms[i] = (struct sym){(int32_t)i - 1, (int32_t)i + 1, v->byte_tok[b[i]]};
    w->syms[n - 1].next = -1;
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(v, w, (int32_t)i, (int32_t)i + 1);
    while (w->n_heap > 0) {
        struct pair p = pair_heap_pop(w->heap, &w->n_heap);
        struct sym * l = &w->syms[p.left], * r = &w->syms[p.right];
        if (l->id != p.lid || l->next != p.right || r->id != p.rid) continue; /* stale */
        l->id = p.id;
        l->next = r->next;
        if (l->next >= 0) w->syms[l->next].prev = p.left;
        r->id = -2;
        try_pair(v, w, l->prev, p.left);
        try_pair(v, w, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        /* a byte without a piece is dropped, as the reference does */
        if (w->syms[i].id >= 0) {
            enum loom_status st = loom_tokbuf_push(out, w->syms[i].id);
            if (st != LOOM_OK) return st;
        }
    }
    return LOOM_OK;
}

enum loom_status loom_bpe_encode(const struct loom_vocab * v, const char * text, size_t n, struct loom_tokbuf * out) {
    if (n == 0) return LOOM_OK;
    uint32_t * cps = malloc(n * sizeof *cps);
    uint8_t * wbuf = malloc(4 * n);
    struct loom_pretok_words words = {0};
    struct work w = {0};
    enum loom_status st = cps && wbuf ? LOOM_OK : LOOM_ERR_OOM;
    size_t n_cps = 0;
    for (size_t i = 0; st == LOOM_OK && i < n;) i += loom_utf8_read_lax((const uint8_t *)text + i, n - i, &cps[n_cps++]);
    if (st == LOOM_OK) st = loom_pretok_split(v->pretok, cps, n_cps, &words);
    size_t at = 0;
    for (size_t k = 0; st == LOOM_OK && k < words.n; k++) {
        size_t nb = 0;
        for (uint32_t j = 0; j < words.len[k]; j++) nb += loom_utf8_write(cps[at + j], (char *)wbuf + nb);
        at += words.len[k];
        st = encode_word(v, &w, wbuf, nb, out);
    }
    loom_pretok_words_free(&words);
    free(w.syms);
    free(w.heap);
    free(w.spell);
    free(cps);
    free(wbuf);
    return st;
}
