/* tokenizer.c -- text to token ids: special-token parsing, the dummy prefix (SPM), user-defined pieces, BOS/EOS; dispatch to spm.c / bpe.c. */
#define _GNU_SOURCE /* memmem */
#include "vocab-impl.h"

#include <stdlib.h>
#include <string.h>

/* The longest token of 'a' whose piece starts 's' (n bytes available), or -1. */
static int32_t match_atom(const struct loom_vocab * v, const struct loom_vocab_atoms * a, const char * s, size_t n) {
    uint8_t c = (uint8_t)s[0];
    for (int32_t k = a->first[c]; k < a->first[c + 1]; k++) {
        int32_t id = a->ids[k];
        if (v->lens[id] <= n && memcmp(loom_vocab_piece(v, id), s, v->lens[id]) == 0) return id;
    }
    return -1;
}

/* Escaped text (U+2581 for spaces): user-defined pieces whole, BPE between them. */
static enum loom_status encode_escaped(const struct loom_vocab * v, const char * s, size_t n, struct loom_tokbuf * out) {
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        int32_t id = v->user.first[256] > 0 ? match_atom(v, &v->user, s + i, n - i) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        enum loom_status st = loom_spm_encode(v, s + run, i - run, out);
        if (st == LOOM_OK) st = loom_tokbuf_push(out, id);
        if (st != LOOM_OK) return st;
        i += v->lens[id];
        run = i;
    }
    return loom_spm_encode(v, s + run, n - run, out);
}

/* One segment of user text between special tokens: dummy prefix, escape spaces, encode. */
static enum loom_status encode_segment(const struct loom_vocab * v, const char * text, size_t len,
                                       struct loom_tokbuf * out) {
    if (len == 0) return LOOM_OK;
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t n = len + (LOOM_SPM_SPACE_LEN - 1) * spaces + (v->add_space_prefix ? LOOM_SPM_SPACE_LEN : 0);
    char * esc = malloc(n);
    if (!esc) return LOOM_ERR_OOM;
    size_t k = 0;
    if (v->add_space_prefix) {
        memcpy(esc, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
        k = LOOM_SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + k, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
            k += LOOM_SPM_SPACE_LEN;
        } else {
            esc[k++] = text[i];
        }
    }
    enum loom_status st = encode_escaped(v, esc, n, out);
    free(esc);
    return st;
}

static enum loom_status encode_spm(const struct loom_vocab * v, const char * text, size_t len, bool parse_special,
                                   struct loom_tokbuf * out) {
    enum loom_status st = LOOM_OK;
    size_t seg = 0;
    if (parse_special && v->control.first[256] > 0) {
        for (size_t i = 0; i < len && st == LOOM_OK;) {
            int32_t id = match_atom(v, &v->control, text + i, len - i);
            if (id < 0) {
                i++;
                continue;
            }
            /* Every segment starts the input or follows a control token: each gets the prefix. */
            st = encode_segment(v, text + seg, i - seg, out);
            if (st == LOOM_OK) st = loom_tokbuf_push(out, id);
            i += v->lens[id];
            seg = i;
        }
    }
    if (st == LOOM_OK) st = encode_segment(v, text + seg, len - seg, out);
    return st;
}

/* A part of the text: a piece already found (id >= 0) or text still to encode. */
struct frag {
    size_t off, len;
    int32_t id;
};

struct frags {
    struct frag * a;
    size_t n, cap;
};

static bool frag_push(struct frags * f, struct frag x) {
    if (f->n == f->cap) {
        size_t c = f->cap ? 2 * f->cap : 16;
        struct frag * b = realloc(f->a, c * sizeof *b);
        if (!b) return false;
        f->a = b;
        f->cap = c;
    }
    f->a[f->n++] = x;
    return true;
}

/* Cuts every occurrence of the piece 'id' out of the text fragments of 'cur' into 'next'.
 * Returns false when out of memory. */
static bool cut_piece(const struct loom_vocab * v, const char * text, int32_t id, const struct frags * cur, struct frags * next) {
    const char * piece = loom_vocab_piece(v, id);
    size_t plen = v->lens[id];
    next->n = 0;
    for (size_t i = 0; i < cur->n; i++) {
        struct frag f = cur->a[i];
        if (f.id >= 0 || f.len < plen) {
            if (!frag_push(next, f)) return false;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        for (;;) {
            const char * hit = memmem(text + pos, end - pos, piece, plen);
            if (!hit) break;
            size_t at = (size_t)(hit - text);
            if (at > pos && !frag_push(next, (struct frag){pos, at - pos, -1})) return false;
            if (!frag_push(next, (struct frag){at, plen, id})) return false;
            pos = at + plen;
        }
        if (pos < end && !frag_push(next, (struct frag){pos, end - pos, -1})) return false;
    }
    return true;
}

/* BPE: the reference engine's partition (each piece, longest first, cut out everywhere before the
 * next is looked for), then byte-level BPE on the text between. */
static enum loom_status encode_bpe(const struct loom_vocab * v, const char * text, size_t len, bool parse_special,
                                   struct loom_tokbuf * out) {
    if (len == 0) return LOOM_OK;
    struct frags cur = {0}, next = {0};
    enum loom_status st = frag_push(&cur, (struct frag){0, len, -1}) ? LOOM_OK : LOOM_ERR_OOM;
    for (int32_t k = 0; k < v->n_special && st == LOOM_OK; k++) {
        int32_t id = v->special[k];
        uint8_t t = v->types[id];
        if (!parse_special && t != LOOM_TOKEN_TYPE_USER_DEFINED) continue;
        if (!cut_piece(v, text, id, &cur, &next)) {
            st = LOOM_ERR_OOM;
            break;
        }
        struct frags tmp = cur;
        cur = next;
        next = tmp;
    }
    for (size_t i = 0; i < cur.n && st == LOOM_OK; i++) {
        const struct frag * f = &cur.a[i];
        st = f->id >= 0 ? loom_tokbuf_push(out, f->id) : loom_bpe_encode(v, text + f->off, f->len, out);
    }
    free(cur.a);
    free(next.a);
    return st;
}

static enum loom_status encode_all(const struct loom_vocab * v, const char * text, size_t len, bool add_bos,
                                   bool parse_special, struct loom_tokbuf * out) {
    enum loom_status st = add_bos ? loom_tokbuf_push(out, v->bos) : LOOM_OK;
    if (st == LOOM_OK) {
        st = v->type == LOOM_VOCAB_TYPE_BPE ? encode_bpe(v, text, len, parse_special, out)
                                            : encode_spm(v, text, len, parse_special, out);
    }
    if (st == LOOM_OK && add_bos && v->add_eos) st = loom_tokbuf_push(out, v->eos);
    return st;
}

int32_t loom_tokenize(const struct loom_vocab * v, const char * text, size_t text_len, bool add_bos,
                      bool parse_special, int32_t * tokens, int32_t n_max) {
    if (!v || (!text && text_len > 0) || n_max < 0 || (!tokens && n_max > 0)) {
        loom_log(LOOM_LOG_ERROR, "tokenize: invalid arguments");
        return LOOM_TOKEN_ERROR;
    }
    if (text_len > INT32_MAX / 4) {
        loom_log(LOOM_LOG_ERROR, "tokenize: %zu bytes of text is more than the limit of %d", text_len, INT32_MAX / 4);
        return LOOM_TOKEN_ERROR;
    }
    if (add_bos && v->bos < 0) {
        loom_log(LOOM_LOG_ERROR, "tokenize: BOS requested but the vocabulary has none");
        return LOOM_TOKEN_ERROR;
    }
    struct loom_tokbuf out = {0};
    enum loom_status st = encode_all(v, text, text_len, add_bos, parse_special, &out);
    int32_t ret;
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "tokenize: %s", loom_status_str(st));
        ret = LOOM_TOKEN_ERROR;
    } else if (out.n > INT32_MAX) {
        loom_log(LOOM_LOG_ERROR, "tokenize: %zu tokens is too many", out.n);
        ret = LOOM_TOKEN_ERROR;
    } else if (out.n > (size_t)n_max) {
        ret = -(int32_t)out.n;
    } else {
        if (out.n) memcpy(tokens, out.data, out.n * sizeof *tokens);
        ret = (int32_t)out.n;
    }
    free(out.data);
    return ret;
}
