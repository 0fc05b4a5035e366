/* vocab.c -- the vocabulary: validation of plain arrays, storage, piece and merge lookup, end-of-generation ids, accessors. */
#include "pretok.h"
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
        .type = LOOM_VOCAB_TYPE_SPM,
        .eot_id = -1,
        .eom_id = -1,
    };
    return p;
}

struct loom_vocab_params loom_vocab_llama_params(int32_t n_tokens, const char * const * texts, const size_t * text_lens, const float * scores,
                                                 const int32_t * types) {
    struct loom_vocab_params p = loom_vocab_default_params();
    p.n_tokens = n_tokens;
    p.texts = texts;
    p.text_lens = text_lens;
    p.scores = scores;
    p.types = types;
    p.unk_id = 0;
    p.bos_id = 1;
    p.eos_id = 2;
    return p;
}

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
    free(v->pre);
    loom_pretok_free(v->pretok);
    free(v->merges);
    free(v->raw_blob);
    free(v->raw_offs);
    free(v->raw_lens);
    free(v->special);
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
    const int32_t ids[5] = {p->bos_id, p->eos_id, p->unk_id, p->eot_id, p->eom_id};
    const char * const names[5] = {"BOS", "EOS", "UNK", "EOT", "EOM"};
    for (int i = 0; i < 5; i++) {
        if (ids[i] < -1 || ids[i] >= p->n_tokens) {
            loom_log(LOOM_LOG_ERROR, "vocab: %s id %d is not a token id: the vocabulary's are [0, %d) (-1: none)", names[i], ids[i], p->n_tokens);
            return LOOM_ERR_INVALID_ARG;
        }
    }
    if (p->add_bos && p->bos_id < 0) {
        loom_log(LOOM_LOG_ERROR, "vocab: add_bos is set but there is no BOS token");
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->add_eos && p->eos_id < 0) {
        loom_log(LOOM_LOG_ERROR, "vocab: add_eos is set but there is no EOS token");
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->type != LOOM_VOCAB_TYPE_SPM && p->type != LOOM_VOCAB_TYPE_BPE) {
        loom_log(LOOM_LOG_ERROR, "vocab: type %d is neither SPM nor BPE", (int)p->type);
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->n_merges < 0 || p->n_merges > LOOM_VOCAB_MAX_MERGES || (p->n_merges > 0 && !p->merges)) {
        loom_log(LOOM_LOG_ERROR, "vocab: %d merges (at most %d, and an array for them)", p->n_merges, LOOM_VOCAB_MAX_MERGES);
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->type == LOOM_VOCAB_TYPE_BPE && !loom_pretok_lookup(p->pre, NULL, NULL)) {
        loom_log(LOOM_LOG_ERROR, "unknown BPE pre-tokenizer '%s' (tokenizer.ggml.pre; Loom knows: %s)", p->pre, loom_pretok_names());
        return LOOM_ERR_UNSUPPORTED;
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


/* ---------------------------------------------------------------- end of generation */

/* Texts of end-of-turn markers, in the order EOT is chosen among them when the file names none. */
static const char * const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>"};

static void add_eog(struct loom_vocab * v, int32_t id) {
    if (id < 0 || v->n_eog == LOOM_VOCAB_MAX_EOG) return;
    int i = v->n_eog;
    for (int k = 0; k < v->n_eog; k++) {
        if (v->eog[k] == id) return;
    }
    while (i > 0 && v->eog[i - 1] > id) {
        v->eog[i] = v->eog[i - 1];
        i--;
    }
    v->eog[i] = id;
    v->n_eog++;
}

/* EOT/EOM by text when not given, the set that ends generation, and the markers typed CONTROL. */
static void find_eog(struct loom_vocab * v) {
    size_t n_texts = sizeof eot_texts / sizeof eot_texts[0];
    for (size_t i = 0; i <= n_texts; i++) {
        const char * t = i < n_texts ? eot_texts[i] : "<|eom_id|>";
        int32_t id = loom_vocab_find(v, t, strlen(t));
        if (id < 0) continue;
        if (i < n_texts && v->eot < 0) v->eot = id;
        if (i == n_texts && v->eom < 0) v->eom = id;
        if (v->types[id] != LOOM_TOKEN_TYPE_CONTROL) {
            loom_log(LOOM_LOG_WARN, "vocab: token %d '%s' ends a turn but is not a control token: typed control", id, t);
            v->types[id] = LOOM_TOKEN_TYPE_CONTROL;
        }
        add_eog(v, id);
    }
    add_eog(v, v->eos);
    add_eog(v, v->eot);
    add_eog(v, v->eom);
}

/* ---------------------------------------------------------------- byte-level BPE tables */

/* Appends the GGUF spelling of byte b to 'out'; returns the bytes written (1 or 2). */
static size_t spell_byte(uint8_t b, char * out) { return loom_utf8_write(loom_bpe_byte_char(b), out); }

/* The bytes each piece stands for: normal pieces read through GPT-2's table (a character outside
 * it kept as it is), every other piece as its text. */
static enum loom_status build_raw(struct loom_vocab * v) {
    size_t n = (size_t)v->n_tokens, total = 0;
    v->raw_offs = malloc(n * sizeof *v->raw_offs);
    v->raw_lens = malloc(n * sizeof *v->raw_lens);
    if (!v->raw_offs || !v->raw_lens) return LOOM_ERR_OOM;
    for (size_t i = 0; i < n; i++) total += v->lens[i] + 1;
    v->raw_blob = malloc(total); /* decoding never lengthens a piece */
    if (!v->raw_blob) return LOOM_ERR_OOM;
    size_t k = 0;
    for (size_t id = 0; id < n; id++) {
        const uint8_t * p = (const uint8_t *)loom_vocab_piece(v, (int32_t)id);
        size_t len = v->lens[id];
        v->raw_offs[id] = k;
        if (v->types[id] != LOOM_TOKEN_TYPE_NORMAL) {
            memcpy(v->raw_blob + k, p, len);
            k += len;
        } else {
            for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t m = loom_utf8_read_lax(p + i, len - i, &cp);
                int b = loom_bpe_char_byte(cp);
                if (b >= 0) {
                    v->raw_blob[k++] = (char)b;
                } else {
                    memcpy(v->raw_blob + k, p + i, m);
                    k += m;
                }
                i += m;
            }
        }
        v->raw_lens[id] = (uint32_t)(k - v->raw_offs[id]);
        v->raw_blob[k++] = '\0';
    }
    return LOOM_OK;
}

/* The merges table: "LEFT RIGHT" (split at the first space after the first byte, as the
 * reference does) -> rank and the id of LEFT+RIGHT; the first entry of a pair wins. */
static enum loom_status build_merges(struct loom_vocab * v, const struct loom_vocab_params * p) {
    size_t cap = 16;
    while (cap < 2 * (size_t)p->n_merges) cap *= 2;
    v->merges = malloc(cap * sizeof *v->merges);
    if (!v->merges) return LOOM_ERR_OOM;
    for (size_t i = 0; i < cap; i++) v->merges[i].left = -1;
    v->merges_mask = cap - 1;
    char * cat = malloc(2 * LOOM_VOCAB_MAX_PIECE + 2);
    if (!cat) return LOOM_ERR_OOM;
    int64_t skipped = 0;
    for (int32_t r = 0; r < p->n_merges; r++) {
        const char * m = p->merges[r];
        size_t len = m ? (p->merge_lens ? p->merge_lens[r] : strlen(m)) : 0;
        const char * sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        int32_t a = -1, b = -1, ab = -1;
        if (sp && len - 1 <= 2 * LOOM_VOCAB_MAX_PIECE) {
            size_t la = (size_t)(sp - m), lb = len - la - 1;
            a = loom_vocab_find(v, m, la);
            b = loom_vocab_find(v, sp + 1, lb);
            memcpy(cat, m, la);
            memcpy(cat + la, sp + 1, lb);
            ab = loom_vocab_find(v, cat, la + lb);
        }
        if (a < 0 || b < 0 || ab < 0) {
            skipped++;
            continue;
        }
        size_t i = loom_bpe_merge_slot(v, a, b);
        while (v->merges[i].left >= 0 && !(v->merges[i].left == a && v->merges[i].right == b)) i = (i + 1) & v->merges_mask;
        if (v->merges[i].left < 0) v->merges[i] = (struct loom_bpe_merge){a, b, r, ab};
    }
    free(cat);
    if (skipped) loom_log(LOOM_LOG_WARN, "vocab: %lld merges name pieces the vocabulary lacks: skipped", (long long)skipped);
    return LOOM_OK;
}

struct special_key {
    uint32_t len;
    int32_t id;
};

static int special_cmp(const void * pa, const void * pb) {
    const struct special_key * a = pa, * b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

static bool is_special_type(uint8_t t) {
    return t == LOOM_TOKEN_TYPE_CONTROL || t == LOOM_TOKEN_TYPE_USER_DEFINED || t == LOOM_TOKEN_TYPE_UNKNOWN;
}

/* Pieces cut out of the text before BPE: control, user-defined and unknown, longest first (ties
 * by id), as the reference's special-token partition orders them. */
static enum loom_status build_special(struct loom_vocab * v) {
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) n += is_special_type(v->types[id]) && v->lens[id] > 0;
    struct special_key * keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    if (!keys || !v->special) {
        free(keys);
        return LOOM_ERR_OOM;
    }
    n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (is_special_type(v->types[id]) && v->lens[id] > 0) keys[n++] = (struct special_key){v->lens[id], id};
    }
    qsort(keys, (size_t)n, sizeof *keys, special_cmp);
    for (int32_t i = 0; i < n; i++) v->special[i] = keys[i].id;
    v->n_special = n;
    free(keys);
    return LOOM_OK;
}

/* Everything a BPE vocabulary needs beyond the pieces. */
static enum loom_status build_bpe(struct loom_vocab * v, const struct loom_vocab_params * p) {
    if (p->pre && !(v->pre = strdup(p->pre))) return LOOM_ERR_OOM;
    enum loom_status st = loom_pretok_new(p->pre, &v->pretok, &v->ignore_merges, NULL);
    if (st != LOOM_OK) return st;
    int missing = 0;
    for (int b = 0; b < 256; b++) {
        char s[4];
        v->byte_tok[b] = loom_vocab_find(v, s, spell_byte((uint8_t)b, s));
        missing += v->byte_tok[b] < 0;
    }
    v->byte_fallback = missing == 0;
    if (missing) loom_log(LOOM_LOG_WARN, "vocab: %d of the 256 byte pieces are missing: text with those bytes loses them", missing);
    if ((st = build_raw(v)) != LOOM_OK) return st;
    if ((st = build_merges(v, p)) != LOOM_OK) return st;
    return build_special(v);
}

/* ---------------------------------------------------------------- the constructor */

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
    v->add_eos = p->add_eos;
    v->type = p->type;
    v->add_space_prefix = p->type == LOOM_VOCAB_TYPE_SPM && p->add_space_prefix;
    v->eot = p->eot_id;
    v->eom = p->eom_id;
    if (copy_arrays(v, p) != LOOM_OK) goto oom;
    st = v->type == LOOM_VOCAB_TYPE_SPM ? find_byte_pieces(v) : LOOM_OK;
    if (st != LOOM_OK) {
        loom_vocab_free(v);
        return st;
    }
    int64_t dups = map_build(v);
    if (dups < 0) goto oom;
    if (dups > 0) loom_log(LOOM_LOG_WARN, "vocab: %lld duplicate pieces", (long long)dups);
    find_eog(v);
    if (v->type == LOOM_VOCAB_TYPE_BPE) {
        st = build_bpe(v, p);
        if (st == LOOM_ERR_OOM) goto oom;
        if (st != LOOM_OK) {
            loom_vocab_free(v);
            return st;
        }
    }
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
int32_t loom_vocab_eot(const struct loom_vocab * v) { return v ? v->eot : -1; }
bool loom_vocab_get_add_eos(const struct loom_vocab * v) { return v && v->add_eos; }
enum loom_vocab_type loom_vocab_get_tokenizer(const struct loom_vocab * v) { return v ? v->type : LOOM_VOCAB_TYPE_SPM; }
const char * loom_vocab_get_pre(const struct loom_vocab * v) {
    return v && v->type == LOOM_VOCAB_TYPE_BPE ? (v->pre ? v->pre : "default") : NULL;
}
const char * loom_vocab_pre_names(void) { return loom_pretok_names(); }

bool loom_vocab_is_eog(const struct loom_vocab * v, int32_t id) {
    if (!valid_id(v, id)) return false;
    for (int i = 0; i < v->n_eog; i++) {
        if (v->eog[i] == id) return true;
    }
    return false;
}
bool loom_vocab_get_add_bos(const struct loom_vocab * v) { return v && v->add_bos; }
bool loom_vocab_get_add_space_prefix(const struct loom_vocab * v) { return v && v->add_space_prefix; }
bool loom_vocab_has_byte_fallback(const struct loom_vocab * v) { return v && v->byte_fallback; }
