/* vocab.c -- the vocabulary: validation of plain arrays, storage, piece lookup, accessors. */
#include "vocab-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct loom_vocab_params loom_vocab_default_params(void) {
    struct loom_vocab_params p = {
        .n_tokens = 0,
        .texts = NULL,
        .text_lens = NULL,
        .scores = NULL,
        .types = NULL,
        .bos_id = -1,
        .eos_id = -1,
        .unk_id = -1,
        .add_bos = true,
        .add_space_prefix = true,
    };
    return p;
}

void loom_vocab_free(struct loom_vocab * v) {
    if (!v) return;
    free(v->blob);
    free(v->offs);
    free(v->lens);
    free(v->scores);
    free(v->types);
    free(v->map);
    free(v->control.ids);
    free(v->user.ids);
    free(v);
}

/* ---------------------------------------------------------------- piece -> id table */

static uint64_t hash_bytes(const char * s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static bool piece_equals(const struct loom_vocab * v, int32_t id, const char * s, size_t n) {
    return v->lens[id] == n && memcmp(loom_vocab_piece(v, id), s, n) == 0;
}

/* Slot holding 's' or the empty slot where it would go. */
static size_t map_slot(const struct loom_vocab * v, const char * s, size_t n) {
    size_t i = (size_t)hash_bytes(s, n) & v->map_mask;
    while (v->map[i] >= 0 && !piece_equals(v, v->map[i], s, n)) i = (i + 1) & v->map_mask;
    return i;
}

/* Returns the number of duplicate pieces, or -1 when out of memory. */
static int64_t map_build(struct loom_vocab * v) {
    size_t cap = 16;
    while (cap < 2 * (size_t)v->n_tokens) cap *= 2;
    v->map = malloc(cap * sizeof *v->map);
    if (!v->map) return -1;
    for (size_t i = 0; i < cap; i++) v->map[i] = -1;
    v->map_mask = cap - 1;
    int64_t dups = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (v->lens[id] == 0) continue; /* never matched: text always splits into non-empty symbols */
        size_t slot = map_slot(v, loom_vocab_piece(v, id), v->lens[id]);
        int32_t old = v->map[slot];
        if (old < 0) {
            v->map[slot] = id;
            continue;
        }
        dups++;
        if (!loom_vocab_type_is_text(v->types[old]) && loom_vocab_type_is_text(v->types[id])) v->map[slot] = id;
        if (dups <= 5) {
            loom_log(LOOM_LOG_WARN, "vocab: piece of token %d duplicates token %d; lookups use %d", id, old,
                     v->map[slot]);
        }
    }
    return dups;
}

int32_t loom_vocab_find(const struct loom_vocab * v, const char * text, size_t len) {
    if (!v || (!text && len > 0) || len == 0) return -1;
    return v->map[map_slot(v, text, len)];
}

int32_t loom_vocab_find_text(const struct loom_vocab * v, const char * text, size_t len) {
    int32_t id = v->map[map_slot(v, text, len)];
    return id >= 0 && loom_vocab_type_is_text(v->types[id]) ? id : -1;
}

/* ---------------------------------------------------------------- verbatim-matched tokens */

struct atom_key {
    uint8_t first;
    uint32_t len;
    int32_t id;
};

static int atom_cmp(const void * pa, const void * pb) {
    const struct atom_key * a = pa, * b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1; /* longest first */
    return a->id < b->id ? -1 : (a->id > b->id);
}

/* The pieces of the token types in 'types' (a bit mask of 1 << enum loom_token_type), indexed by
 * first byte for whole-piece matching. */
static enum loom_status atoms_build(struct loom_vocab * v, struct loom_vocab_atoms * a, uint32_t types) {
#define IN_TYPES(id) (((types >> (unsigned)v->types[id]) & 1u) != 0)
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) n += IN_TYPES(id) && v->lens[id] > 0;
    struct atom_key * keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    a->ids = malloc((size_t)(n ? n : 1) * sizeof *a->ids);
    if (!keys || !a->ids) {
        free(keys);
        return LOOM_ERR_OOM;
    }
    n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (!IN_TYPES(id) || v->lens[id] == 0) continue;
        keys[n++] = (struct atom_key){(uint8_t)loom_vocab_piece(v, id)[0], v->lens[id], id};
    }
    qsort(keys, (size_t)n, sizeof *keys, atom_cmp);
    int32_t k = 0;
    for (int b = 0; b < 256; b++) {
        a->first[b] = k;
        while (k < n && keys[k].first == b) {
            a->ids[k] = keys[k].id;
            k++;
        }
    }
    a->first[256] = k;
    free(keys);
    return LOOM_OK;
#undef IN_TYPES
}

/* ---------------------------------------------------------------- construction */

int loom_vocab_parse_byte_piece(const char * s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static enum loom_status check_params(const struct loom_vocab_params * p) {
    if (p->n_tokens <= 0 || p->n_tokens > LOOM_VOCAB_MAX_TOKENS) {
        loom_log(LOOM_LOG_ERROR, "vocab: n_tokens %d is outside [1, %d]", p->n_tokens, LOOM_VOCAB_MAX_TOKENS);
        return LOOM_ERR_INVALID_ARG;
    }
    if (!p->texts) {
        loom_log(LOOM_LOG_ERROR, "vocab: no token texts");
        return LOOM_ERR_INVALID_ARG;
    }
    const int32_t ids[3] = {p->bos_id, p->eos_id, p->unk_id};
    const char * const names[3] = {"BOS", "EOS", "UNK"};
    for (int i = 0; i < 3; i++) {
        if (ids[i] < -1 || ids[i] >= p->n_tokens) {
            loom_log(LOOM_LOG_ERROR, "vocab: %s id %d is outside [-1, %d)", names[i], ids[i], p->n_tokens);
            return LOOM_ERR_INVALID_ARG;
        }
    }
    if (p->add_bos && p->bos_id < 0) {
        loom_log(LOOM_LOG_ERROR, "vocab: add_bos is set but there is no BOS token");
        return LOOM_ERR_INVALID_ARG;
    }
    for (int32_t id = 0; id < p->n_tokens; id++) {
        size_t len = p->text_lens ? p->text_lens[id] : (p->texts[id] ? strlen(p->texts[id]) : 0);
        if (!p->texts[id] && (len > 0 || !p->text_lens)) {
            loom_log(LOOM_LOG_ERROR, "vocab: token %d has no text", id);
            return LOOM_ERR_INVALID_ARG;
        }
        if (len > LOOM_VOCAB_MAX_PIECE) {
            loom_log(LOOM_LOG_ERROR, "vocab: token %d is %zu bytes long (limit %d)", id, len, LOOM_VOCAB_MAX_PIECE);
            return LOOM_ERR_INVALID_ARG;
        }
        if (p->scores && isnan(p->scores[id])) {
            loom_log(LOOM_LOG_ERROR, "vocab: token %d has a NaN score", id);
            return LOOM_ERR_INVALID_ARG;
        }
        if (p->types && (p->types[id] < LOOM_TOKEN_TYPE_NORMAL || p->types[id] > LOOM_TOKEN_TYPE_BYTE)) {
            loom_log(LOOM_LOG_ERROR, "vocab: token %d has type %d (valid: 1..6)", id, p->types[id]);
            return LOOM_ERR_INVALID_ARG;
        }
    }
    return LOOM_OK;
}

static enum loom_status copy_arrays(struct loom_vocab * v, const struct loom_vocab_params * p) {
    size_t n = (size_t)p->n_tokens, total = 0;
    v->offs = malloc(n * sizeof *v->offs);
    v->lens = malloc(n * sizeof *v->lens);
    v->scores = malloc(n * sizeof *v->scores);
    v->types = malloc(n * sizeof *v->types);
    if (!v->offs || !v->lens || !v->scores || !v->types) return LOOM_ERR_OOM;
    for (size_t i = 0; i < n; i++) {
        size_t len = p->text_lens ? p->text_lens[i] : strlen(p->texts[i]);
        v->offs[i] = total;
        v->lens[i] = (uint32_t)len;
        if (total > SIZE_MAX - len - 1) return LOOM_ERR_OOM; /* only reachable with a 32-bit size_t */
        total += len + 1;
    }
    v->blob = malloc(total);
    if (!v->blob) return LOOM_ERR_OOM;
    for (size_t i = 0; i < n; i++) {
        if (v->lens[i]) memcpy(v->blob + v->offs[i], p->texts[i], v->lens[i]);
        v->blob[v->offs[i] + v->lens[i]] = '\0';
        v->scores[i] = p->scores ? p->scores[i] : 0.0f;
        if (p->types) {
            v->types[i] = (uint8_t)p->types[i];
        } else if ((int32_t)i == p->bos_id || (int32_t)i == p->eos_id) {
            v->types[i] = LOOM_TOKEN_TYPE_CONTROL;
        } else if ((int32_t)i == p->unk_id) {
            v->types[i] = LOOM_TOKEN_TYPE_UNKNOWN;
        } else if (loom_vocab_parse_byte_piece(v->blob + v->offs[i], v->lens[i]) >= 0) {
            v->types[i] = LOOM_TOKEN_TYPE_BYTE;
        } else {
            v->types[i] = LOOM_TOKEN_TYPE_NORMAL;
        }
    }
    return LOOM_OK;
}

/* Fills byte_ids from the byte-type pieces; an error for a byte-type piece that names no byte. */
static enum loom_status find_byte_pieces(struct loom_vocab * v) {
    for (int b = 0; b < 256; b++) v->byte_ids[b] = -1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (v->types[id] != LOOM_TOKEN_TYPE_BYTE) continue;
        int b = loom_vocab_parse_byte_piece(loom_vocab_piece(v, id), v->lens[id]);
        if (b < 0) {
            loom_log(LOOM_LOG_ERROR, "vocab: token %d has type byte but its piece is not of the form <0xNN>", id);
            return LOOM_ERR_INVALID_ARG;
        }
        if (v->byte_ids[b] < 0) v->byte_ids[b] = id;
    }
    int missing = 0, first_missing = -1;
    for (int b = 0; b < 256; b++) {
        if (v->byte_ids[b] >= 0) continue;
        if (!missing++) first_missing = b;
    }
    v->byte_fallback = missing == 0;
    if (missing) {
        if (v->unk < 0) {
            loom_log(LOOM_LOG_ERROR, "vocab: %d byte pieces are missing (first <0x%02X>) and there is no unknown "
                     "token: some text could not be tokenized", missing, first_missing);
            return LOOM_ERR_INVALID_ARG;
        }
        loom_log(LOOM_LOG_WARN, "vocab: %d byte pieces are missing (first <0x%02X>): byte fallback unavailable, "
                 "characters without a piece become the unknown token", missing, first_missing);
    }
    return LOOM_OK;
}

enum loom_status loom_vocab_new(const struct loom_vocab_params * p, struct loom_vocab ** out) {
    if (!out) {
        loom_log(LOOM_LOG_ERROR, "vocab: NULL output pointer");
        return LOOM_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (!p) {
        loom_log(LOOM_LOG_ERROR, "vocab: NULL parameters");
        return LOOM_ERR_INVALID_ARG;
    }
    enum loom_status st = check_params(p);
    if (st != LOOM_OK) return st;

    struct loom_vocab * v = calloc(1, sizeof *v);
    if (!v) goto oom;
    v->n_tokens = p->n_tokens;
    v->bos = p->bos_id;
    v->eos = p->eos_id;
    v->unk = p->unk_id;
    v->add_bos = p->add_bos;
    v->add_space_prefix = p->add_space_prefix;
    if (copy_arrays(v, p) != LOOM_OK) goto oom;
    st = find_byte_pieces(v);
    if (st != LOOM_OK) {
        loom_vocab_free(v);
        return st;
    }
    int64_t dups = map_build(v);
    if (dups < 0) goto oom;
    if (dups > 0) loom_log(LOOM_LOG_WARN, "vocab: %lld duplicate pieces", (long long)dups);
    /* special tokens parsed on request: control pieces and the unknown token (as the field does) */
    if (atoms_build(v, &v->control, 1u << LOOM_TOKEN_TYPE_CONTROL | 1u << LOOM_TOKEN_TYPE_UNKNOWN) != LOOM_OK) goto oom;
    if (atoms_build(v, &v->user, 1u << LOOM_TOKEN_TYPE_USER_DEFINED) != LOOM_OK) goto oom;
    *out = v;
    return LOOM_OK;
oom:
    loom_log(LOOM_LOG_ERROR, "vocab: out of memory for %d tokens", p->n_tokens);
    loom_vocab_free(v);
    return LOOM_ERR_OOM;
}

/* ---------------------------------------------------------------- accessors */

static bool valid_id(const struct loom_vocab * v, int32_t id) { return v && id >= 0 && id < v->n_tokens; }

int32_t loom_vocab_n_tokens(const struct loom_vocab * v) { return v ? v->n_tokens : 0; }

const char * loom_vocab_get_text(const struct loom_vocab * v, int32_t id, size_t * len) {
    if (!valid_id(v, id)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->lens[id];
    return loom_vocab_piece(v, id);
}

float loom_vocab_get_score(const struct loom_vocab * v, int32_t id) { return valid_id(v, id) ? v->scores[id] : 0.0f; }

enum loom_token_type loom_vocab_get_type(const struct loom_vocab * v, int32_t id) {
    return valid_id(v, id) ? (enum loom_token_type)v->types[id] : LOOM_TOKEN_TYPE_UNDEFINED;
}

int32_t loom_vocab_bos(const struct loom_vocab * v) { return v ? v->bos : -1; }
int32_t loom_vocab_eos(const struct loom_vocab * v) { return v ? v->eos : -1; }
int32_t loom_vocab_unk(const struct loom_vocab * v) { return v ? v->unk : -1; }
bool loom_vocab_get_add_bos(const struct loom_vocab * v) { return v && v->add_bos; }
bool loom_vocab_get_add_space_prefix(const struct loom_vocab * v) { return v && v->add_space_prefix; }
bool loom_vocab_has_byte_fallback(const struct loom_vocab * v) { return v && v->byte_fallback; }
