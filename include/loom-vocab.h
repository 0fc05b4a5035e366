/* loom-vocab.h -- vocabularies (SentencePiece and byte-level BPE), the tokenizer, the detokenizer. */
#ifndef LOOM_VOCAB_H
#define LOOM_VOCAB_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Two vocabulary types, as GGUF's tokenizer.ggml.model names them:
 *  - "llama" (SentencePiece, LOOM_VOCAB_TYPE_SPM): pieces are byte strings in which a space is
 *    written U+2581 ("\xE2\x96\x81"), BOS/EOS are the control pieces "<s>"/"</s>", and
 *    byte-fallback pieces are "<0xNN>" (two upper-case hex digits); merges by piece score;
 *  - "gpt2" (byte-level BPE, LOOM_VOCAB_TYPE_BPE): normal pieces spell bytes through GPT-2's
 *    byte-to-unicode table (Radford et al. 2019; each byte is one printable character, e.g. a
 *    space is U+0120 'Ġ'); text is first split into words by the pre-tokenizer that
 *    tokenizer.ggml.pre names, then each word is merged by the rank of tokenizer.ggml.merges
 *    (Sennrich et al. 2016); control and user-defined pieces are raw text.
 * Token ids are int32_t in [0, n_tokens). */

struct loom_vocab;

/* GGUF token types (tokenizer.ggml.token_type). */
enum loom_token_type {
    LOOM_TOKEN_TYPE_UNDEFINED = 0,     /* returned for ids out of range; never stored */
    LOOM_TOKEN_TYPE_NORMAL = 1,        /* ordinary text piece, produced by merges */
    LOOM_TOKEN_TYPE_UNKNOWN = 2,       /* "<unk>": a character that has no piece and no byte fallback */
    LOOM_TOKEN_TYPE_CONTROL = 3,       /* "<s>", "</s>": never produced from user text unless parsed */
    LOOM_TOKEN_TYPE_USER_DEFINED = 4,  /* text matched atomically before merging */
    LOOM_TOKEN_TYPE_UNUSED = 5,        /* reserved: decoded as text, never produced */
    LOOM_TOKEN_TYPE_BYTE = 6,          /* "<0xNN>": the single byte 0xNN */
    LOOM_TOKEN_TYPE_COUNT
};

/* Returned by loom_tokenize, loom_token_to_piece and loom_detokenize for invalid arguments or
 * out of memory (the reason is logged). Distinct from every -(needed) size request. */
#define LOOM_TOKEN_ERROR INT32_MIN

/* The vocabulary's tokenizer (tokenizer.ggml.model). */
enum loom_vocab_type {
    LOOM_VOCAB_TYPE_SPM = 0,  /* "llama": SentencePiece BPE with byte fallback */
    LOOM_VOCAB_TYPE_BPE = 1,  /* "gpt2": byte-level BPE with a pre-tokenizer */
    LOOM_VOCAB_TYPE_COUNT
};

/* Largest vocabulary loom_vocab_new accepts (tokens). */
#define LOOM_VOCAB_MAX_TOKENS (1 << 24)
/* Longest piece loom_vocab_new accepts (bytes). */
#define LOOM_VOCAB_MAX_PIECE (1 << 16)

/* Plain arrays describing a vocabulary, e.g. as read from GGUF tokenizer.ggml.* keys. Nothing is
 * kept: loom_vocab_new copies what it needs. */
struct loom_vocab_params {
    int32_t n_tokens;             /* entries in each array; 1..LOOM_VOCAB_MAX_TOKENS */
    const char * const * texts;   /* [n_tokens] piece bytes (any bytes, GGUF convention) */
    const size_t * text_lens;     /* [n_tokens] bytes of each piece, or NULL: texts are NUL-terminated */
    const float * scores;         /* [n_tokens] merge priority (higher merges first), or NULL: all 0 */
    const int32_t * types;        /* [n_tokens] enum loom_token_type (1..6), or NULL: inferred (BOS/EOS
                                   * control, UNK unknown, "<0xNN>" byte, the rest normal) */
    int32_t bos_id;               /* -1 = none */
    int32_t eos_id;               /* -1 = none */
    int32_t unk_id;               /* -1 = none */
    bool add_bos;                 /* what callers should pass as loom_tokenize's 'add_bos' by default */
    bool add_space_prefix;        /* SentencePiece's add_dummy_prefix: prepend a space to the text (SPM only) */
    /* -- after the fields above, so that older initializers keep their meaning -- */
    enum loom_vocab_type type;    /* LOOM_VOCAB_TYPE_SPM (default) or LOOM_VOCAB_TYPE_BPE */
    const char * pre;             /* BPE: the pre-tokenizer (tokenizer.ggml.pre), NULL = "default";
                                   * see loom_vocab_pre_names */
    int32_t n_merges;             /* BPE: entries of 'merges' (0..LOOM_VOCAB_MAX_MERGES) */
    const char * const * merges;  /* BPE: [n_merges] "LEFT RIGHT" in GGUF spelling, best rank first */
    const size_t * merge_lens;    /* [n_merges] bytes of each, or NULL: NUL-terminated */
    int32_t eot_id;               /* end of turn (tokenizer.ggml.eot_token_id), -1 = none/by text */
    int32_t eom_id;               /* end of message (tokenizer.ggml.eom_token_id), -1 = none/by text */
    bool add_eos;                 /* append EOS when loom_tokenize's add_bos is set (add_eos_token) */
};

/* Largest number of merges loom_vocab_new accepts. */
#define LOOM_VOCAB_MAX_MERGES (1 << 24)

/* Defaults: no arrays, n_tokens 0, bos/eos/unk/eot/eom -1, add_bos true, add_space_prefix true,
 * add_eos false, type SPM, no merges (the values for tokenizer.ggml.model = "llama" when the GGUF
 * keys are absent). */
LOOM_API struct loom_vocab_params loom_vocab_default_params(void);

/* The defaults with the given arrays ([n_tokens] each; text_lens, scores and types may be NULL as
 * above) and the special ids of the llama SentencePiece layout: unk 0, bos 1, eos 2 (a llama2.c
 * tokenizer, a GGUF vocabulary before its id keys are read, a generated byte vocabulary). */
LOOM_API struct loom_vocab_params loom_vocab_llama_params(int32_t n_tokens, const char * const * texts, const size_t * text_lens, const float * scores,
                                                 const int32_t * types);

/* Builds a vocabulary from 'params' (copied) into '*out'.
 * Validates everything and returns, with a logged reason and '*out' = NULL:
 *  - LOOM_ERR_INVALID_ARG: NULL pointers; n_tokens out of range; a NULL text with nonzero length;
 *    a piece longer than LOOM_VOCAB_MAX_PIECE; a NaN score; a type outside 1..6; bos/eos/unk
 *    outside [-1, n_tokens); add_bos with no BOS; a byte-type piece not of the form "<0xNN>";
 *    neither a complete set of byte pieces nor an unknown token (text could not be represented);
 *    eot/eom outside [-1, n_tokens); add_eos with no EOS; n_merges outside its range or NULL
 *    merges; a type other than SPM or BPE;
 *  - LOOM_ERR_UNSUPPORTED: a BPE pre-tokenizer name Loom does not know (the message names it);
 *  - LOOM_ERR_OOM.
 * End of generation: EOS, EOT, EOM and the tokens whose text is one of the field's end-of-turn
 * markers ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
 * "<|eom_id|>", "<EOT>") end generation (loom_vocab_is_eog); such marker tokens are typed CONTROL
 * whatever the file says, as the reference engine does (so they are only parsed from text with
 * parse_special). EOT, when not given, is the first of those markers present (in that order).
 * BPE merges whose pieces or result are not in the vocabulary are skipped (a warning counts them).
 * Not errors (logged as warnings): duplicate pieces (lookups and the tokenizer use the lowest id
 * among normal/user-defined pieces with that text, else the lowest id; the others stay decodable);
 * byte pieces missing for some of the 256 bytes (byte fallback is then unavailable and characters
 * without a piece become the unknown token; see loom_vocab_has_byte_fallback). */
LOOM_API enum loom_status loom_vocab_new(const struct loom_vocab_params * params, struct loom_vocab ** out);

/* Reads a llama.c tokenizer file ("tokenizer.bin": int32 max_token_length, then for each token
 * float32 score, int32 length, that many bytes; little-endian) into '*out', converted to the
 * GGUF convention: spaces become U+2581; id 0 is "<unk>" (unknown), 1 "<s>" (BOS, control),
 * 2 "</s>" (EOS, control) whatever the file spells them (tok512.bin has "\n<s>\n"); pieces
 * "<0xNN>" are byte tokens; the rest normal; add_bos and add_space_prefix true.
 * 'n_tokens' is the vocabulary size from the checkpoint header, or 0 to read entries up to the
 * end of the file.
 * Errors: LOOM_ERR_INVALID_ARG (NULL, n_tokens < 0 or > LOOM_VOCAB_MAX_TOKENS), LOOM_ERR_IO
 * (cannot open or read), LOOM_ERR_FORMAT (max_token_length <= 0; a negative length or one above
 * max_token_length; an entry running past the end of the file; fewer than 3 or than 'n_tokens'
 * entries, or bytes after the first 'n_tokens' (the tokenizer of a larger vocabulary); a NaN
 * score), LOOM_ERR_OOM; each with a logged reason. */
LOOM_API enum loom_status loom_vocab_load_llama2c(const char * path, int32_t n_tokens, struct loom_vocab ** out);
/* The same from 'size' bytes in memory (not kept). */
LOOM_API enum loom_status loom_vocab_load_llama2c_buffer(const void * data, size_t size, int32_t n_tokens,
                                                struct loom_vocab ** out);

LOOM_API void loom_vocab_free(struct loom_vocab * vocab);   /* NULL is a no-op */

/* Accessors. For an id outside [0, n_tokens): text NULL (len 0), score 0, type UNDEFINED. */
LOOM_API int32_t loom_vocab_n_tokens(const struct loom_vocab * vocab);
/* The piece's bytes in the GGUF convention; '*len' (may be NULL) gets its length in bytes. The
 * bytes are followed by a NUL, so pieces without embedded NULs can be used as C strings. */
LOOM_API const char * loom_vocab_get_text(const struct loom_vocab * vocab, int32_t id, size_t * len);
LOOM_API float loom_vocab_get_score(const struct loom_vocab * vocab, int32_t id);
LOOM_API enum loom_token_type loom_vocab_get_type(const struct loom_vocab * vocab, int32_t id);
LOOM_API int32_t loom_vocab_bos(const struct loom_vocab * vocab);   /* -1 = none */
LOOM_API int32_t loom_vocab_eos(const struct loom_vocab * vocab);   /* -1 = none */
LOOM_API int32_t loom_vocab_unk(const struct loom_vocab * vocab);   /* -1 = none */
LOOM_API int32_t loom_vocab_eot(const struct loom_vocab * vocab);   /* end of turn, -1 = none */
/* True when 'id' ends generation: EOS, EOT, EOM or an end-of-turn marker (see loom_vocab_new).
 * False for ids out of range and a NULL vocab. A generation loop stops on it. */
LOOM_API bool loom_vocab_is_eog(const struct loom_vocab * vocab, int32_t id);
/* SPM or BPE (tokenizer.ggml.model "llama" or "gpt2"). */
LOOM_API enum loom_vocab_type loom_vocab_get_tokenizer(const struct loom_vocab * vocab);
/* The BPE pre-tokenizer's name ("default" when none was given; NULL for SPM vocabularies). */
LOOM_API const char * loom_vocab_get_pre(const struct loom_vocab * vocab);
/* The pre-tokenizer names loom_vocab_new accepts, comma-separated (for messages). */
LOOM_API const char * loom_vocab_pre_names(void);
LOOM_API bool loom_vocab_get_add_eos(const struct loom_vocab * vocab);
LOOM_API bool loom_vocab_get_add_bos(const struct loom_vocab * vocab);
LOOM_API bool loom_vocab_get_add_space_prefix(const struct loom_vocab * vocab);
/* True when every byte has a piece -- all 256 "<0xNN>" pieces (SPM), all 256 byte characters
 * (BPE) -- so any byte string can be tokenized. */
LOOM_API bool loom_vocab_has_byte_fallback(const struct loom_vocab * vocab);
/* Id of the piece with exactly these bytes (GGUF convention), or -1. With duplicates, the id the
 * tokenizer uses (see loom_vocab_new). */
LOOM_API int32_t loom_vocab_find(const struct loom_vocab * vocab, const char * text, size_t len);

/* Tokenizes 'text_len' bytes of 'text'.
 *
 * SPM vocabularies (UTF-8; invalid bytes are kept through byte fallback), SentencePiece's BPE
 * (Kudo & Richardson 2018, "SentencePiece"; Sennrich et al. 2016 for BPE):
 *  1. with 'parse_special', control pieces ("<s>", "</s>", ...) found verbatim in the text become
 *     their ids (longest match first); otherwise such text is ordinary text;
 *  2. each remaining text segment that starts the input or follows a parsed control token gets
 *     one space prepended when the vocabulary's add_space_prefix is set (empty segments get none,
 *     so "" gives no tokens); spaces are then written U+2581;
 *  3. user-defined pieces are matched verbatim in that escaped text (longest first; so a U+2581
 *     in them matches a space) and kept whole;
 *  4. the rest is split into UTF-8 characters, and the adjacent pair whose concatenation is a
 *     normal or user-defined piece with the highest score is merged, repeatedly (ties: leftmost);
 *     a priority queue keeps this O(n log n) in the text length;
 *  5. a final symbol that is not a piece becomes its byte pieces "<0xNN>" (or, without byte
 *     fallback, the unknown token: one per run of such symbols, as SentencePiece does).
 * Only normal and user-defined pieces are ever produced by merging, so text never turns into
 * control, byte or unused tokens by accident.
 *
 * BPE vocabularies, as the reference engine (llama.cpp) tokenizes them:
 *  1. verbatim pieces are cut out of the text, longest piece first, every occurrence of one piece
 *     before the next piece is looked for: user-defined pieces always, control and unknown pieces
 *     with 'parse_special' (so "<|eot_id|>" is one token only then);
 *  2. each remaining segment is read as UTF-8 code points, a byte that starts no well-formed
 *     sequence becoming U+FFFD (the reference's reading: overlong forms and surrogates are taken
 *     as the code points they spell, and written back in shortest form);
 *  3. the pre-tokenizer's regular expressions split it into words (each expression splits the
 *     pieces the previous one left, the text between matches staying pieces of its own);
 *  4. each word's bytes start as one symbol per byte, and the adjacent pair with the lowest merge
 *     rank is merged, repeatedly (ties: leftmost); with the Llama-3 pre-tokenizer a word that is
 *     a piece of the vocabulary is taken whole first (the reference's ignore_merges).
 * So decode(tokenize(s)) == s for valid UTF-8 's' (with LOOM_DETOK_SPECIAL matching
 * 'parse_special'); invalid UTF-8 comes back with U+FFFD where the reference puts it.
 *
 * With 'add_bos' the vocabulary's BOS comes first, and its EOS last when the vocabulary's
 * add_eos is set (the reference's add_special; pass loom_vocab_get_add_bos for the default).
 * Writes up to 'n_max' ids to 'tokens' (may be NULL when n_max is 0).
 * Returns the number of ids; -(needed) when 'n_max' is smaller than the number needed (nothing
 * useful is written; call again with at least that room); LOOM_TOKEN_ERROR (with a logged
 * reason) for a NULL vocab, NULL text with text_len > 0, n_max < 0, add_bos without a BOS token,
 * text_len > INT32_MAX / 4, or out of memory. */
LOOM_API int32_t loom_tokenize(const struct loom_vocab * vocab, const char * text, size_t text_len, bool add_bos,
                      bool parse_special, int32_t * tokens, int32_t n_max);

/* The bytes one token stands for. SPM: normal, user-defined and unused pieces with U+2581 turned
 * into spaces; byte pieces "<0xNN>" as the byte 0xNN; control pieces as nothing, or their raw text
 * when 'special'; the unknown token as " \xE2\x81\x87 " (" ⁇ ", SentencePiece's rendering), or
 * its raw text when 'special'. BPE: normal pieces as the bytes their characters stand for in
 * GPT-2's byte table (a character outside the table as itself); user-defined pieces as they are;
 * control, unknown and unused pieces as nothing, or their raw text when 'special'.
 * No leading space is removed (see loom_detokenize).
 * Writes no terminating NUL. Returns the number of bytes written to 'buf'; -(needed) when 'size'
 * is too small; LOOM_TOKEN_ERROR (logged) for a NULL vocab, an id out of range, size < 0, or a
 * NULL buf with size > 0. */
LOOM_API int32_t loom_token_to_piece(const struct loom_vocab * vocab, int32_t token, char * buf, int32_t size, bool special);

/* Flags for loom_detokenize and loom_detok_new. */
enum loom_detok_flag {
    LOOM_DETOK_SPECIAL = 1,            /* render control and unknown tokens as their raw text */
    LOOM_DETOK_KEEP_SPACE_PREFIX = 2,  /* never remove the dummy-prefix space (see below) */
};

/* Decodes a whole sequence: the concatenation of loom_token_to_piece for each id, except that when
 * the vocabulary's add_space_prefix is set (and LOOM_DETOK_KEEP_SPACE_PREFIX is not), the first
 * non-control token at the start of the sequence, and the first non-control token after each
 * control token (BOS, EOS, ...), loses one leading space if it is a text piece (normal,
 * user-defined, unused) that starts with one: the inverse of loom_tokenize's step 2, so that
 * decode(tokenize(s)) == s (with LOOM_DETOK_SPECIAL matching 'parse_special', and not counting a
 * literal U+2581 in 's', which SentencePiece cannot tell from a space). Bytes are returned as they are (invalid UTF-8 is not
 * replaced; see struct loom_detok for streaming). 'flags' is a set of enum loom_detok_flag.
 * Returns bytes written (no NUL), -(needed) when 'size' is too small, or LOOM_TOKEN_ERROR (logged)
 * for a NULL vocab, NULL tokens with n_tokens > 0, negative n_tokens/size, an id out of range,
 * or a result over INT32_MAX bytes. */
LOOM_API int32_t loom_detokenize(const struct loom_vocab * vocab, const int32_t * tokens, int32_t n_tokens, char * buf,
                        int32_t size, int flags);

/* Streaming detokenizer: feed ids one at a time as they are generated; each call returns only
 * complete UTF-8 characters, holding back the bytes of a character still being spelled out by
 * byte tokens. Leading-space removal follows loom_detokenize (so feed BOS and the prompt too, or
 * pass LOOM_DETOK_KEEP_SPACE_PREFIX when starting mid-sequence). Bytes that can never form a valid
 * UTF-8 character (RFC 3629) are replaced by U+FFFD, one per maximal invalid subpart (Unicode
 * 15.0 section 3.9, "U+FFFD substitution of maximal subparts"); so is an incomplete character
 * left at loom_detok_flush. Holds a pointer to 'vocab', which must outlive it. */
struct loom_detok;

/* Errors: LOOM_ERR_INVALID_ARG (NULL), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_detok_new(const struct loom_vocab * vocab, int flags, struct loom_detok ** out);
LOOM_API void loom_detok_free(struct loom_detok * d);   /* NULL is a no-op */
/* Adds 'token' and sets '*text'/'*len' to the bytes now complete (possibly 0 bytes); the pointer
 * stays valid until the next call on 'd'. Errors (nothing consumed, '*len' = 0):
 * LOOM_ERR_INVALID_ARG (NULL arguments, an id out of range), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_detok_push(struct loom_detok * d, int32_t token, const char ** text, size_t * len);
/* Ends the stream: returns any held-back bytes (as U+FFFD, since they are an incomplete
 * character) the same way as loom_detok_push. */
LOOM_API enum loom_status loom_detok_flush(struct loom_detok * d, const char ** text, size_t * len);
/* Forgets held-back bytes and starts a new sequence (the next token is again "at the start"). */
LOOM_API void loom_detok_reset(struct loom_detok * d);

/* Validity of the UTF-8 sequence starting at s[0] (RFC 3629; n >= 1 bytes available):
 * > 0: a complete valid character of that many bytes; 0: a valid but incomplete prefix (all n
 * bytes belong to it); < 0: -k where s[0..k) is a maximal invalid subpart (k >= 1). Overlong
 * forms, surrogates and code points above U+10FFFF are invalid. */
LOOM_API int loom_utf8_check(const uint8_t * s, size_t n);

/* Reads only the vocabulary (tokenizer.ggml.* keys) of a GGUF model file. Errors as for
 * loom_model_load (LOOM_ERR_UNSUPPORTED for a tokenizer other than 'llama' or 'gpt2', or a BPE
 * pre-tokenizer Loom does not know). */
LOOM_API enum loom_status loom_vocab_load_gguf(const char * path, struct loom_vocab ** out);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_VOCAB_H */
