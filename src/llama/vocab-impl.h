/* vocab-impl.h -- the vocabulary's body and helpers shared by the tokenizer and detokenizer. */
#ifndef LOOM_VOCAB_IMPL_H
#define LOOM_VOCAB_IMPL_H

#include "loom-llama.h"

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
};

/* True for types whose pieces are text the merges may produce (normal, user-defined). */
static inline bool loom_vocab_type_is_text(uint8_t type) {
    return type == LOOM_TOKEN_TYPE_NORMAL || type == LOOM_TOKEN_TYPE_USER_DEFINED;
}

static inline const char * loom_vocab_piece(const struct loom_vocab * v, int32_t id) { return v->blob + v->offs[id]; }

/* Byte value of a piece "<0xNN>" (either case of hex digit), or -1 when it is not of that form. */
int loom_vocab_parse_byte_piece(const char * s, size_t n);

/* Id of the text piece (normal or user-defined) with exactly these bytes, or -1. */
int32_t loom_vocab_find_text(const struct loom_vocab * v, const char * text, size_t len);

/* Validity of the UTF-8 sequence starting at s[0] (RFC 3629; n >= 1 bytes available):
 * > 0: a complete valid character of that many bytes; 0: a valid but incomplete prefix (all n
 * bytes belong to it); < 0: -k where s[0..k) is a maximal invalid subpart (k >= 1). */
int loom_utf8_check(const uint8_t * s, size_t n);

/* A growable list of token ids. */
struct loom_tokbuf {
    int32_t * data;
    size_t n, cap;
};
enum loom_status loom_tokbuf_push(struct loom_tokbuf * b, int32_t id);

/* Appends to 'out' the ids of 'n' bytes of escaped text (spaces already U+2581, no user-defined
 * pieces inside) by SentencePiece BPE with byte fallback. */
enum loom_status loom_bpe_encode(const struct loom_vocab * v, const char * text, size_t n, struct loom_tokbuf * out);

#endif
