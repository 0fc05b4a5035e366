/* detok.c -- token ids to text: single pieces, whole sequences, and a streaming UTF-8-safe decoder. */
#include "vocab-impl.h"

#include <stdlib.h>
#include <string.h>

#define UNK_SURFACE " \xE2\x81\x87 " /* " ⁇ ": how SentencePiece renders the unknown token */
#define REPLACEMENT "\xEF\xBF\xBD"   /* U+FFFD */

/* Writes what fits into buf[0..size), counts everything, and drops the first 'skip' bytes. */
struct sink {
    char * buf;
    size_t size, n, skip;
};

static void sink_put(struct sink * s, const char * p, size_t k) {
    size_t d = s->skip < k ? s->skip : k;
    p += d, k -= d, s->skip -= d;
    if (s->n < s->size) {
        size_t c = k < s->size - s->n ? k : s->size - s->n;
        memcpy(s->buf + s->n, p, c);
    }
    s->n += k;
}

/* BPE: normal pieces as the bytes they spell, user-defined as they are, the rest only when 'special'. */
static void render_bpe(const struct loom_vocab * v, int32_t id, bool special, struct sink * s) {
    uint8_t t = v->types[id];
    if (t == LOOM_TOKEN_TYPE_NORMAL || t == LOOM_TOKEN_TYPE_USER_DEFINED || special) {
        sink_put(s, v->raw_blob + v->raw_offs[id], v->raw_lens[id]);
    }
}

static void render(const struct loom_vocab * v, int32_t id, bool special, struct sink * s) {
    if (v->type == LOOM_VOCAB_TYPE_BPE) {
        render_bpe(v, id, special, s);
        return;
    }
    const char * p = loom_vocab_piece(v, id);
    size_t n = v->lens[id];
    switch (v->types[id]) {
    case LOOM_TOKEN_TYPE_BYTE: {
        char c = (char)loom_vocab_parse_byte_piece(p, n); /* validated by loom_vocab_new */
        sink_put(s, &c, 1);
        return;
    }
    case LOOM_TOKEN_TYPE_CONTROL:
        if (special) sink_put(s, p, n);
        return;
    case LOOM_TOKEN_TYPE_UNKNOWN:
        if (special) {
            sink_put(s, p, n);
        } else {
            sink_put(s, UNK_SURFACE, sizeof UNK_SURFACE - 1);
        }
        return;
    default: { /* normal, user-defined, unused: text with U+2581 as space */
        size_t run = 0;
        for (size_t i = 0; i + LOOM_SPM_SPACE_LEN <= n;) {
            if (memcmp(p + i, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) != 0) {
                i++;
                continue;
            }
            sink_put(s, p + run, i - run);
            sink_put(s, " ", 1);
            i += LOOM_SPM_SPACE_LEN;
            run = i;
        }
        sink_put(s, p + run, n - run);
        return;
    }
    }
}

/* True when token 'id' renders with a leading space that may be the dummy prefix. */
static bool starts_with_prefix_space(const struct loom_vocab * v, int32_t id) {
    uint8_t t = v->types[id];
    if (t != LOOM_TOKEN_TYPE_NORMAL && t != LOOM_TOKEN_TYPE_USER_DEFINED && t != LOOM_TOKEN_TYPE_UNUSED) return false;
    const char * p = loom_vocab_piece(v, id);
    size_t n = v->lens[id];
    return (n >= LOOM_SPM_SPACE_LEN && memcmp(p, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) == 0) || (n >= 1 && p[0] == ' ');
}

/* The leading-space rule shared by loom_detokenize and struct loom_detok: a control token arms
 * it; the next other token consumes it, losing its leading space. Returns bytes to skip. */
static size_t space_rule(const struct loom_vocab * v, int flags, bool * armed, int32_t id) {
    if (v->types[id] == LOOM_TOKEN_TYPE_CONTROL) {
        *armed = v->add_space_prefix && !(flags & LOOM_DETOK_KEEP_SPACE_PREFIX);
        return 0;
    }
    size_t skip = *armed && starts_with_prefix_space(v, id) ? 1 : 0;
    *armed = false;
    return skip;
}

int32_t loom_token_to_piece(const struct loom_vocab * v, int32_t token, char * buf, int32_t size, bool special) {
    if (!v || size < 0 || (!buf && size > 0) || token < 0 || token >= v->n_tokens) {
        loom_log(LOOM_LOG_ERROR, "token_to_piece: invalid arguments (token %d, size %d)", token, size);
        return LOOM_TOKEN_ERROR;
    }
    struct sink s = {buf, (size_t)size, 0, 0};
    render(v, token, special, &s);
    return s.n > (size_t)size ? -(int32_t)s.n : (int32_t)s.n; /* a piece is at most LOOM_VOCAB_MAX_PIECE bytes */
}

int32_t loom_detokenize(const struct loom_vocab * v, const int32_t * tokens, int32_t n_tokens, char * buf,
                        int32_t size, int flags) {
    if (!v || n_tokens < 0 || (!tokens && n_tokens > 0) || size < 0 || (!buf && size > 0)) {
        loom_log(LOOM_LOG_ERROR, "detokenize: invalid arguments (n_tokens %d, size %d)", n_tokens, size);
        return LOOM_TOKEN_ERROR;
    }
    struct sink s = {buf, (size_t)size, 0, 0};
    bool armed = v->add_space_prefix && !(flags & LOOM_DETOK_KEEP_SPACE_PREFIX);
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens) {
            loom_log(LOOM_LOG_ERROR, "detokenize: token %d at position %d is outside [0, %d)", tokens[i], i,
                     v->n_tokens);
            return LOOM_TOKEN_ERROR;
        }
        s.skip = space_rule(v, flags, &armed, tokens[i]);
        render(v, tokens[i], flags & LOOM_DETOK_SPECIAL, &s);
        if (s.n > INT32_MAX) {
            loom_log(LOOM_LOG_ERROR, "detokenize: the text is longer than %d bytes", INT32_MAX);
            return LOOM_TOKEN_ERROR;
        }
    }
    return s.n > (size_t)size ? -(int32_t)s.n : (int32_t)s.n;
}

/* ---------------------------------------------------------------- streaming */

struct loom_detok {
    const struct loom_vocab * v;
    int flags;
    bool armed;           /* the next non-control token loses its leading space */
    uint8_t held[4];      /* bytes of an incomplete character (at most 3) */
    size_t n_held;
    char * work;          /* held bytes + the new piece */
    size_t work_cap;
    char * out;           /* complete characters returned to the caller */
    size_t out_cap;
};

static bool grow(char ** p, size_t * cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char * q = realloc(*p, c);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

enum loom_status loom_detok_new(const struct loom_vocab * v, int flags, struct loom_detok ** out) {
    if (out) *out = NULL;
    if (!v || !out) {
        loom_log(LOOM_LOG_ERROR, "detok: NULL argument");
        return LOOM_ERR_INVALID_ARG;
    }
    struct loom_detok * d = calloc(1, sizeof *d);
    if (!d) {
        loom_log(LOOM_LOG_ERROR, "detok: out of memory");
        return LOOM_ERR_OOM;
    }
    d->v = v;
    d->flags = flags;
    loom_detok_reset(d);
    *out = d;
    return LOOM_OK;
}

void loom_detok_free(struct loom_detok * d) {
    if (!d) return;
    free(d->work);
    free(d->out);
    free(d);
}

void loom_detok_reset(struct loom_detok * d) {
    if (!d) return;
    d->n_held = 0;
    d->armed = d->v->add_space_prefix && !(d->flags & LOOM_DETOK_KEEP_SPACE_PREFIX);
}

enum loom_status loom_detok_push(struct loom_detok * d, int32_t token, const char ** text, size_t * len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!d || !text || !len || token < 0 || token >= d->v->n_tokens) {
        loom_log(LOOM_LOG_ERROR, "detok: invalid arguments (token %d)", token);
        return LOOM_ERR_INVALID_ARG;
    }
    const struct loom_vocab * v = d->v;
    bool special = d->flags & LOOM_DETOK_SPECIAL;
    /* Measure, make room, then render after the held bytes. */
    struct sink s = {NULL, 0, 0, 0};
    render(v, token, special, &s);
    size_t total = d->n_held + s.n;
    if (!grow(&d->work, &d->work_cap, total) || !grow(&d->out, &d->out_cap, 3 * total)) {
        loom_log(LOOM_LOG_ERROR, "detok: out of memory");
        return LOOM_ERR_OOM;
    }
    bool armed = d->armed;
    size_t skip = space_rule(v, d->flags, &armed, token);
    s = (struct sink){d->work + d->n_held, total - d->n_held, 0, skip};
    render(v, token, special, &s);
    d->armed = armed;
    if (d->n_held) memcpy(d->work, d->held, d->n_held);
    total = d->n_held + s.n;

    /* Emit complete characters, replace invalid subparts, hold an incomplete tail. */
    size_t k = 0, i = 0;
    d->n_held = 0;
    while (i < total) {
        const uint8_t * p = (const uint8_t *)d->work + i;
        int r = loom_utf8_check(p, total - i);
        if (r > 0) {
            memcpy(d->out + k, p, (size_t)r);
            k += (size_t)r;
            i += (size_t)r;
        } else if (r == 0) {
            d->n_held = total - i; /* at most 3 bytes: a 4-byte prefix would be complete */
            memcpy(d->held, p, d->n_held);
            break;
        } else {
            memcpy(d->out + k, REPLACEMENT, 3);
            k += 3;
            i += (size_t)-r;
        }
    }
    *text = k ? d->out : ""; /* never NULL, even before the first allocation */
    *len = k;
    return LOOM_OK;
}

enum loom_status loom_detok_flush(struct loom_detok * d, const char ** text, size_t * len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!d || !text || !len) {
        loom_log(LOOM_LOG_ERROR, "detok: NULL argument");
        return LOOM_ERR_INVALID_ARG;
    }
    if (d->n_held == 0) return LOOM_OK;
    if (!grow(&d->out, &d->out_cap, 3)) {
        loom_log(LOOM_LOG_ERROR, "detok: out of memory");
        return LOOM_ERR_OOM;
    }
    d->n_held = 0; /* the held bytes are one valid but incomplete prefix: one maximal subpart */
    memcpy(d->out, REPLACEMENT, 3);
    *text = d->out;
    *len = 3;
    return LOOM_OK;
}
