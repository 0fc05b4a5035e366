/* vocab-impl.h -- the vocabulary's body and the helpers shared by the tokenizers and the detokenizer. */
#ifndef LOOM_VOCAB_IMPL_H
#define LOOM_VOCAB_IMPL_H

#include "loom-vocab.h"

/* Most ids loom_vocab_is_eog recognises. */
#define LOOM_VOCAB_MAX_EOG 16

struct loom_pretok;

/* U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible space. */
#define LOOM_SPM_SPACE "\xE2\x96\x81"
#define LOOM_SPM_SPACE_LEN 3

/* Tokens matched verbatim in text (control pieces when parsing specials, user-defined pieces
 * always), bucketed by first byte and sorted by length descending so the first hit is the longest. */
struct loom_vocab_atoms {
    int32_t * ids;        /* [n] */
    int32_t first[257];   /* ids[first[b] .. first[b+1]) start with byte b */
};

struct loom_vocab {
    int32_t n_tokens;
    char * blob;          /* every piece followed by a NUL */
    size_t * offs;        /* [n_tokens] byte offset of each piece in 'blob' */
    uint32_t * lens;      /* [n_tokens] bytes */
    float * scores;       /* [n_tokens] */
    uint8_t * types;      /* [n_tokens] enum loom_token_type */
    int32_t bos, eos, unk;
    bool add_bos;
    bool add_space_prefix;
    bool byte_fallback;   /* all of byte_ids[] are valid */
    int32_t byte_ids[256];  /* id of "<0xNN>" for byte NN, -1 when absent */

    int32_t * map;        /* open-addressing table piece -> id, -1 = empty */
    size_t map_mask;      /* table size - 1 (a power of two) */

    struct loom_vocab_atoms control;  /* control pieces */
    struct loom_vocab_atoms user;     /* user-defined pieces */

    enum loom_vocab_type type;
    bool add_eos;
    int32_t eot, eom;
    int32_t eog[LOOM_VOCAB_MAX_EOG];  /* ids that end generation, ascending */
    int n_eog;

    /* BPE only */
    char * pre;                       /* pre-tokenizer name as given */
    struct loom_pretok * pretok;      /* its compiled expressions */
    bool ignore_merges;               /* a word that is a piece is taken whole */
    int32_t byte_tok[256];            /* id of the piece spelling byte b, -1 when absent */
    struct loom_bpe_merge * merges;   /* open-addressing table (left, right) -> rank, result */
    size_t merges_mask;
    char * raw_blob;                  /* the bytes each piece stands for (see loom_token_to_piece) */
    size_t * raw_offs;                /* [n_tokens] */
    uint32_t * raw_lens;              /* [n_tokens] */
    int32_t * special;                /* pieces cut out of the text before BPE, longest first */
    int32_t n_special;
};

/* One BPE merge: the pair of pieces (left, right) becomes 'id' with priority 'rank' (lower first). */
struct loom_bpe_merge {
    int32_t left, right;  /* left -1 = empty slot */
    int32_t rank, id;
};

/* The merges table's first slot for the pair (left, right) (Fibonacci hashing; probing is linear). */
static inline size_t loom_bpe_merge_slot(const struct loom_vocab * v, int32_t left, int32_t right) {
    uint64_t h = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & v->merges_mask;
}

/* Rank and result of merging pieces (left, right), or false when the pair does not merge. */
static inline bool loom_vocab_merge_find(const struct loom_vocab * v, int32_t left, int32_t right, int32_t * rank,
                                         int32_t * id) {
    for (size_t i = loom_bpe_merge_slot(v, left, right);; i = (i + 1) & v->merges_mask) {
        const struct loom_bpe_merge * m = &v->merges[i];
        if (m->left < 0) return false;
        if (m->left == left && m->right == right) {
            *rank = m->rank;
            *id = m->id;
            return true;
        }
    }
}

/* True for types whose pieces are text the merges may produce (normal, user-defined). */
static inline bool loom_vocab_type_is_text(uint8_t type) {
    return type == LOOM_TOKEN_TYPE_NORMAL || type == LOOM_TOKEN_TYPE_USER_DEFINED;
}

static inline const char * loom_vocab_piece(const struct loom_vocab * v, int32_t id) { return v->blob + v->offs[id]; }

/* Byte value of a piece "<0xNN>" (either case of hex digit), or -1 when it is not of that form. */
int loom_vocab_parse_byte_piece(const char * s, size_t n);

/* Id of the text piece (normal or user-defined) with exactly these bytes, or -1. */
int32_t loom_vocab_find_text(const struct loom_vocab * v, const char * text, size_t len);

/* Reads one code point at s[0] (n >= 1 bytes) the way the reference engine does: the lead
 * byte's pattern says the length, continuation bytes must be 10xxxxxx, and nothing else is
 * checked (overlong forms and surrogates are read as what they spell; a four-byte form may
 * exceed U+10FFFF); a lead byte that fits no pattern, or a sequence cut short, is U+FFFD
 * consuming one byte. Returns the bytes consumed. */
size_t loom_utf8_read_lax(const uint8_t * s, size_t n, uint32_t * cp);
/* Writes code point 'cp' in shortest-form UTF-8 to out[0..4) (any value up to U+10FFFF,
 * surrogates included; above that U+FFFD) and returns the bytes written. */
size_t loom_utf8_write(uint32_t cp, char * out);

/* A growable list of token ids. */
struct loom_tokbuf {
    int32_t * data;
    size_t n, cap;
};
enum loom_status loom_tokbuf_push(struct loom_tokbuf * b, int32_t id);

/* Appends to 'out' the ids of 'n' bytes of escaped text (spaces already U+2581, no user-defined
 * pieces inside) by SentencePiece BPE with byte fallback (spm.c). */
enum loom_status loom_spm_encode(const struct loom_vocab * v, const char * text, size_t n, struct loom_tokbuf * out);

/* Appends to 'out' the ids of 'n' bytes of text with no verbatim pieces inside: pre-tokenizer,
 * then byte-level BPE per word (bpe.c). */
enum loom_status loom_bpe_encode(const struct loom_vocab * v, const char * text, size_t n, struct loom_tokbuf * out);

/* GPT-2's byte-to-unicode table: the code point that spells byte b in BPE pieces. */
uint32_t loom_bpe_byte_char(uint8_t b);
/* The inverse: the byte code point 'cp' spells, or -1 when it spells none. */
int loom_bpe_char_byte(uint32_t cp);

#endif
