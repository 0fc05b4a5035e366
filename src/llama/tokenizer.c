/* tokenizer.c -- text to token ids: special-token parsing, the dummy prefix, user-defined pieces, BOS. */
#include "vocab-impl.h"

#include <stdlib.h>
#include <string.h>

enum loom_status loom_tokbuf_push(struct loom_tokbuf * b, int32_t id) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int32_t * d = realloc(b->data, cap * sizeof *d);
        if (!d) return LOOM_ERR_OOM;
        b->data = d;
        b->cap = cap;
    }
    b->data[b->n++] = id;
    return LOOM_OK;
}

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
        enum loom_status st = loom_bpe_encode(v, s + run, i - run, out);
        if (st == LOOM_OK) st = loom_tokbuf_push(out, id);
        if (st != LOOM_OK) return st;
        i += v->lens[id];
        run = i;
    }
    return loom_bpe_encode(v, s + run, n - run, out);
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

static enum loom_status encode_all(const struct loom_vocab * v, const char * text, size_t len, bool add_bos,
                                   bool parse_special, struct loom_tokbuf * out) {
    enum loom_status st = LOOM_OK;
    if (add_bos) st = loom_tokbuf_push(out, v->bos);
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
